// Workers started on demand by the process provider (resourcemanager.provider: process), against
// real masters and the real regent-worker, with no worker started by hand: a job of 6 subtasks
// on 4-slot workers starts exactly 2 workers, finishes, and both are released once idle (no
// worker process left); resourcemanager.workers.max caps the workers and the job runs with what
// the cap gives; a worker binary that fails gives the job a waiting reason naming the failure,
// is retried with backoff and stops at the failure rate; a requirement no started worker could
// fit is named in the job's waiting reason; and after SIGKILL of the leader the next leader
// adopts the started workers' attempts (same pids), starts no new worker, and releases them once
// idle.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tests/fixtures/started_workers.h"
#include "tests/fixtures/wait_test_util.h"
#include "tests/integration/job_cluster_test_util.h"

namespace regent::testing {
namespace {

namespace fs = std::filesystem;

// The data root of the started workers, and every started worker killed when the test ends
// (they run in sessions of their own: nothing else stops them if the test fails half way).
class StartedWorkers final {
 public:
  StartedWorkers() { ::chmod(root_.path().c_str(), 0711); }
  ~StartedWorkers() { killStartedWorkers(root_.path()); }

  const std::string& root() const { return root_.path(); }

  // The pid of every worker the provider recorded (alive or not), from its state files.
  std::vector<pid_t> pids() const { return startedWorkerPids(root_.path()); }

  // The pids of the started workers still running.
  std::vector<pid_t> running() const {
    std::vector<pid_t> alive;
    for (pid_t pid : pids()) {
      if (!processGone(pid)) alive.push_back(pid);
    }
    return alive;
  }

 private:
  TempDir root_{"regent-started"};
};

// The masters' configuration for the process provider with `extra` YAML lines.
std::string providerConfig(const StartedWorkers& started, const std::string& extra = "") {
  return "resourcemanager.provider: process\n"
         "resourcemanager.process.data-root: " +
         started.root() +
         "\n"
         "resourcemanager.workers.idle-timeout: 2s\n"
         "worker.slots: 4\n"
         "worker.slot-cpu: 1\n"
         "worker.slot-memory: 256MiB\n"
         "worker.task-cancel-timeout: 500ms\n"
         "cluster.registration.initial-timeout: 50ms\n"
         "cluster.registration.max-timeout: 1s\n" +
         extra;
}

// A job of one vertex of `parallelism` subtasks that each sleep `seconds`.
std::string sleepingJob(const std::string& name, int parallelism, const std::string& seconds,
                        const std::string& memory = "64MiB") {
  return "name: " + name + "\nvertices:\n  - name: v\n    parallelism: " +
         std::to_string(parallelism) + "\n    command:\n      argv: [/bin/sh, -c, 'sleep " +
         seconds + "']\n    resources: {cpu: 0.5, memory: " + memory + "}\n";
}

// The leader's events (its current run) named `name`.
std::vector<Event> leaderEvents(JobCluster& cluster, const std::string& name) {
  std::vector<Event> named;
  for (Event& event : readEventsFile(cluster.masters().eventsPath(cluster.leader()))) {
    if (event.name() == name) named.push_back(std::move(event));
  }
  return named;
}

std::string fieldOf(const Event& event, const std::string& key) {
  for (const auto& field : event.fields()) {
    if (field.key != key) continue;
    if (const auto* text = std::get_if<std::string>(&field.value)) return *text;
    if (const auto* number = std::get_if<uint64_t>(&field.value)) return std::to_string(*number);
    if (const auto* number = std::get_if<int64_t>(&field.value)) return std::to_string(*number);
  }
  return "";
}

// Waits until the leader logged at least `count` events named `name`.
Status waitForLeaderEvents(JobCluster& cluster, const std::string& name, size_t count,
                           Duration timeout) {
  const bool done =
      waitUntil([&] { return leaderEvents(cluster, name).size() >= count; }, timeout);
  if (done) return Status();
  return Error::fatal("the leader logged " + std::to_string(leaderEvents(cluster, name).size()) +
                      " \"" + name + "\" events, not " + std::to_string(count) + ", within " +
                      std::to_string(timeout.count()) + " ms\n" + cluster.describe());
}

TEST(ProcessProvider, SixSubtasksOnFourSlotWorkersStartTwoWorkersReleasedOnceIdle) {
  StartedWorkers started;
  auto made = JobCluster::start(
      "provider-six", {.masters = 3, .workers = 0, .masterConfig = providerConfig(started)});
  ASSERT_OK(made);
  JobCluster& cluster = *made.value();

  // Long enough that the second worker registers before the first one's tasks end.
  auto job = cluster.submit(sleepingJob("six", 6, "3"));
  ASSERT_OK(job);
  ASSERT_OK(cluster.waitForJobEnd(job.value(), "FINISHED", 0, kJobsTimeout));
  // Exactly two workers: 6 slots of 4-slot workers.
  EXPECT_EQ(leaderEvents(cluster, "worker requested").size(), 2u) << cluster.describe();
  const std::vector<Event> registered = leaderEvents(cluster, "worker registered");
  ASSERT_EQ(registered.size(), 2u) << cluster.describe();
  for (const Event& event : registered) {
    EXPECT_EQ(fieldOf(event, "provider_id").rfind("process:e", 0), 0u) << fieldOf(event, "provider_id");
  }
  // The subtasks ran on both (4 + 2).
  std::set<std::string> workers;
  for (const JobEvent& deployed : cluster.jobEventsOf(job.value(), JobEvent::Kind::kAttemptDeployed)) {
    workers.insert(deployed.resourceId);
  }
  EXPECT_EQ(workers.size(), 2u);

  // Idle for resourcemanager.workers.idle-timeout: both released, no process left.
  ASSERT_OK(waitForLeaderEvents(cluster, "worker released", 2, kJobsTimeout));
  EXPECT_TRUE(waitUntil([&] { return started.running().empty(); }, kJobsTimeout))
      << started.running().size() << " started worker(s) still run";
  EXPECT_EQ(started.pids().size(), 0u) << "the released workers' directories are removed";
  auto metrics = cluster.masterMetrics();
  ASSERT_OK(metrics);
  EXPECT_NE(metrics.value().find("regent_workers_released_total 2"), std::string::npos)
      << metrics.value();
}

TEST(ProcessProvider, TheCapLimitsTheWorkersAndTheJobRunsWithWhatItGives) {
  StartedWorkers started;
  auto made = JobCluster::start(
      "provider-cap", {.masters = 1,
                       .workers = 0,
                       .masterConfig = providerConfig(started, "resourcemanager.workers.max: 1\n")});
  ASSERT_OK(made);
  JobCluster& cluster = *made.value();

  auto job = cluster.submit(sleepingJob("capped", 6, "3"));
  ASSERT_OK(job);
  // While four run, two wait, and the reason says the cluster's slots are all there is.
  auto waiting = cluster.waitForStatus(
      job.value(),
      [](const nlohmann::json& status) {
        return textField(status, "waiting_reason").find("2 subtasks wait") != std::string::npos;
      },
      kJobsTimeout);
  ASSERT_OK(waiting);
  ASSERT_OK(cluster.waitForJobEnd(job.value(), "FINISHED", 0, kJobsTimeout));
  EXPECT_EQ(leaderEvents(cluster, "worker requested").size(), 1u) << cluster.describe();
}

TEST(ProcessProvider, AFailingWorkerBinaryIsTheJobsWaitingReasonAndStopsAtTheFailureRate) {
  StartedWorkers started;
  auto made = JobCluster::start(
      "provider-fail",
      {.masters = 1,
       .workers = 0,
       .masterConfig = providerConfig(started,
                                      "resourcemanager.process.worker-binary: /bin/false\n"
                                      "resourcemanager.workers.max-failure-rate: 3\n")});
  ASSERT_OK(made);
  JobCluster& cluster = *made.value();

  auto job = cluster.submit(sleepingJob("no-worker", 2, "1"));
  ASSERT_OK(job);
  // Three failed starts (the backoff between them: 1 s, then 2 s), then the rate stops them.
  ASSERT_OK(waitForLeaderEvents(cluster, "worker ended", 3, kJobsTimeout));
  auto reason = cluster.waitForStatus(
      job.value(),
      [](const nlohmann::json& status) {
        const std::string reason = textField(status, "waiting_reason");
        return reason.find("resourcemanager.workers.max-failure-rate") != std::string::npos;
      },
      kJobsTimeout);
  ASSERT_OK(reason);
  EXPECT_NE(textField(reason.value(), "waiting_reason").find("exited with status 1"),
            std::string::npos)
      << reason.value().dump();
  // No fourth start while the rate holds: a wait longer than the backoff would be (4 s).
  const size_t requested = leaderEvents(cluster, "worker requested").size();
  EXPECT_EQ(requested, 3u);
  EXPECT_FALSE(waitUntil([&] { return leaderEvents(cluster, "worker requested").size() > 3; },
                         Duration(6000)))
      << "a worker was started again within the minute of the three failures";
  auto metrics = cluster.masterMetrics();
  ASSERT_OK(metrics);
  EXPECT_NE(metrics.value().find("regent_workers_start_failures_total 3"), std::string::npos)
      << metrics.value();
}

TEST(ProcessProvider, ARequirementNoStartedWorkerCouldFitIsTheJobsWaitingReason) {
  StartedWorkers started;
  auto made = JobCluster::start(
      "provider-fit", {.masters = 1, .workers = 0, .masterConfig = providerConfig(started)});
  ASSERT_OK(made);
  JobCluster& cluster = *made.value();

  auto job = cluster.submit(sleepingJob("too-big", 1, "1", "64GiB"));
  ASSERT_OK(job);
  auto reason = cluster.waitForStatus(
      job.value(),
      [](const nlohmann::json& status) {
        return textField(status, "waiting_reason").find("worker.slot-memory") != std::string::npos;
      },
      kJobsTimeout);
  ASSERT_OK(reason);
  EXPECT_NE(textField(reason.value(), "waiting_reason").find("memory=64GiB"), std::string::npos)
      << reason.value().dump();
  EXPECT_TRUE(leaderEvents(cluster, "worker requested").empty());
}

TEST(ProcessProvider, TheNextLeaderAdoptsTheStartedWorkersAttemptsStartsNoneAndReleasesThem) {
  StartedWorkers started;
  auto made = JobCluster::start(
      "provider-failover",
      {.masters = 3, .workers = 0, .masterConfig = providerConfig(started)});
  ASSERT_OK(made);
  JobCluster& cluster = *made.value();

  auto running = submitAndWaitRunning(
      cluster,
      markedJob("marked", cluster.taskDir(), {{"v", 6}}), "v", 6,
      kJobsTimeout);
  ASSERT_OK(running);
  ASSERT_EQ(leaderEvents(cluster, "worker requested").size(), 2u) << cluster.describe();
  const std::vector<pid_t> workerPids = started.running();
  ASSERT_EQ(workerPids.size(), 2u);

  const size_t killed = cluster.leader();
  ASSERT_OK(cluster.masters().kill(killed));
  ASSERT_OK(cluster.followLeader(cluster.epoch() + 1));
  // The new leader found both workers, adopted all six attempts with their pids, and started no
  // worker.
  ASSERT_OK(waitForReconciliation(cluster, running.value().id,
                                  ExpectedReconciliation{.adopted = 6}, kJobsTimeout));
  const std::vector<Event> listed = leaderEvents(cluster, "provider workers listed");
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(fieldOf(listed[0], "count"), "2");
  // Each adopted with the pid its worker reported before the failover, its task still running.
  const std::vector<JobEvent> adopted =
      cluster.jobEventsOf(running.value().id, JobEvent::Kind::kAttemptAdopted);
  EXPECT_EQ(adopted.size(), 6u);
  for (const JobEvent& event : adopted) {
    ASSERT_LT(event.subtask, 6u);
    EXPECT_EQ(event.pid, running.value().attempts[event.subtask].value("pid", int64_t{-1}))
        << event.describe();
    EXPECT_FALSE(processGone(running.value().markers[event.subtask].pid)) << event.describe();
  }
  EXPECT_EQ(started.running().size(), 2u) << "the workers outlived the leader that started them";
  for (pid_t pid : workerPids) EXPECT_FALSE(processGone(pid)) << "worker pid " << pid;

  for (uint32_t i = 0; i < 6; ++i) letSubtaskEnd(cluster.taskDir(), "v", i);
  ASSERT_OK(cluster.waitForJobEnd(running.value().id, "FINISHED", 0, kJobsTimeout));
  // Each subtask ran once: no restart after the failover.
  for (uint32_t i = 0; i < 6; ++i) {
    EXPECT_EQ(readMarkers(cluster.taskDir(), "v", i).size(), 1u) << "subtask " << i;
  }
  EXPECT_TRUE(leaderEvents(cluster, "worker requested").empty()) << cluster.describe();
  ASSERT_OK(waitForLeaderEvents(cluster, "worker released", 2, kJobsTimeout));
  EXPECT_TRUE(waitUntil([&] { return started.running().empty(); }, kJobsTimeout))
      << started.running().size() << " started worker(s) still run";
}

}  // namespace
}  // namespace regent::testing

// What happens to a job while no leader exists, on real processes (docs/jobgraph.md, docs/
// workers.md): the only master is SIGKILLed, a subtask ends meanwhile, and the master is started
// again. The worker keeps the attempt's end and delivers it to the new leader's JobMaster after
// its offer: a subtask that finished counts as finished exactly once and its downstream vertex
// starts once; one that failed is restarted exactly once by its strategy. A job cancelled just
// before the failover stays CANCELED: the attempts the workers still hold are cancelled when
// they offer them, and the job never runs again.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "tests/fixtures/wait_test_util.h"
#include "tests/integration/job_cluster_test_util.h"

namespace regent::testing {
namespace {

using JobKind = JobEvent::Kind;
using TaskKind = TaskEvent::Kind;

// The leader's events of `job` of `kind` for `vertex`.
std::vector<JobEvent> vertexEvents(JobCluster& cluster, const std::string& job, JobKind kind,
                                   const std::string& vertex) {
  std::vector<JobEvent> matching;
  for (JobEvent& event : cluster.jobEventsOf(job, kind)) {
    if (event.vertex == vertex) matching.push_back(std::move(event));
  }
  return matching;
}

// Kills the only master, lets `end` run (a task ending), waits until a worker logged the end of
// `attempt` in `state`, then starts the master again and follows it as the next leader.
void failOverThrough(JobCluster& cluster, const std::string& attempt, const std::string& state,
                     const std::function<void()>& end) {
  const uint64_t firstEpoch = cluster.epoch();
  const size_t master = cluster.leader();
  ASSERT_OK(cluster.masters().kill(master));
  end();
  auto ended = cluster.waitForTaskEvent(
      [&](const TaskEvent& e) { return e.kind == TaskKind::kEnded && e.attempt == attempt; },
      kJobsTimeout);
  ASSERT_OK(ended);
  ASSERT_EQ(ended.value().state, state) << ended.value().describe();
  ASSERT_OK(cluster.masters().restart(master));
  ASSERT_OK(cluster.followLeader(firstEpoch + 1));
}

// Waits for the next leader's "job reconciled" line of `id`, whose JobMaster expected one attempt
// and heard of it (adopted, or its end reported): nothing left unreported, no timeout.
void expectOneAttemptReconciled(JobCluster& cluster, const std::string& id) {
  ASSERT_OK(waitForReconciliation(cluster, id, {.adoptedOrEnded = 1u}, kJobsTimeout));
}

TEST(JobsReconcileGap, ASubtaskFinishedWithoutALeaderCountsOnceAndItsDownstreamStartsOnce) {
  auto started = JobCluster::start("reconcile-gap-finish", {.masters = 1, .workers = 2});
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  const std::string dir = cluster.taskDir();
  auto job = submitAndWaitRunning(cluster, markedJob("gap", dir, {{"a", 1, {}}, {"b", 1, {"a"}}}),
                                  "a", 1, kJobsTimeout);
  ASSERT_OK(job);
  const std::string id = job.value().id;
  const TaskMarker first = job.value().markers[0];

  failOverThrough(cluster, first.attempt, "FINISHED", [&] { letSubtaskEnd(dir, "a", 0); });
  if (HasFatalFailure()) return;

  // The new JobMaster expected a's attempt and heard of its end: nothing left unreported.
  expectOneAttemptReconciled(cluster, id);
  if (HasFatalFailure()) return;

  // b starts once, after a, and the job finishes.
  auto b = waitForMarkers(dir, "b", 0, 1, kJobsTimeout);
  ASSERT_OK(b);
  letSubtaskEnd(dir, "b", 0);
  auto clean = cluster.waitForJobClean(id, kJobsTimeout);
  ASSERT_OK(clean);
  EXPECT_EQ(clean.value().state, "FINISHED");
  EXPECT_EQ(readMarkers(dir, "a", 0).size(), 1u) << "a started again";
  EXPECT_EQ(readMarkers(dir, "b", 0).size(), 1u) << "b started twice";
  EXPECT_TRUE(vertexEvents(cluster, id, JobKind::kAttemptDeployed, "a").empty())
      << cluster.describe();
  EXPECT_EQ(vertexEvents(cluster, id, JobKind::kAttemptDeployed, "b").size(), 1u)
      << cluster.describe();
  size_t aFinished = 0;
  for (const JobEvent& event : vertexEvents(cluster, id, JobKind::kAttemptState, "a")) {
    EXPECT_EQ(event.attempt, first.attempt) << event.describe();
    if (event.state == "FINISHED") ++aFinished;
  }
  EXPECT_LE(aFinished, 1u) << cluster.describe();
  const auto ended = cluster.jobEventsOf(id, JobKind::kJobEnded);
  ASSERT_EQ(ended.size(), 1u) << cluster.describe();
  EXPECT_EQ(ended[0].restarts, 0u);

  auto status = cluster.status(id);
  ASSERT_OK(status);
  EXPECT_EQ(textField(status.value(), "state"), "FINISHED") << status.value().dump();
  const nlohmann::json* subtask = subtaskStatus(status.value(), "a", 0);
  ASSERT_NE(subtask, nullptr) << status.value().dump();
  EXPECT_EQ(subtask->value("attempts", -1), 1) << status.value().dump();
  EXPECT_EQ(textField((*subtask)["attempt"], "attempt_id"), first.attempt);
  EXPECT_EQ(textField((*subtask)["attempt"], "state"), "FINISHED");
  ASSERT_OK(cluster.waitForAllSlotsFree(kJobsTimeout));
}

TEST(JobsReconcileGap, ASubtaskFailedWithoutALeaderIsRestartedOnceByItsStrategy) {
  auto started = JobCluster::start("reconcile-gap-fail", {.masters = 1, .workers = 2});
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  const std::string dir = cluster.taskDir();
  auto job = submitAndWaitRunning(cluster,
                                  markedJob("gap", dir, {{"work", 1, {}}},
                                            "  type: fixed-delay\n  attempts: 3\n  delay: 200ms\n"),
                                  "work", 1, kJobsTimeout);
  ASSERT_OK(job);
  const std::string id = job.value().id;
  const TaskMarker first = job.value().markers[0];

  // Attempt 0 exits 1 while no leader exists; attempt 1 (the restart) finishes at once.
  failOverThrough(cluster, first.attempt, "FAILED", [&] {
    failAttemptNumber(dir, "work", 0, 0);
    letSubtaskEnd(dir, "work", 0);
  });
  if (HasFatalFailure()) return;

  expectOneAttemptReconciled(cluster, id);
  if (HasFatalFailure()) return;

  auto clean = cluster.waitForJobClean(id, kJobsTimeout);
  ASSERT_OK(clean);
  EXPECT_EQ(clean.value().state, "FINISHED");
  const auto markers = readMarkers(dir, "work", 0);
  ASSERT_EQ(markers.size(), 2u) << cluster.describe();
  EXPECT_EQ(markers[0].attempt, first.attempt);
  EXPECT_EQ(markers[1].attemptNumber, 1u) << markers[1].describe();
  EXPECT_NE(markers[1].attempt, first.attempt);
  const auto deployed = cluster.jobEventsOf(id, JobKind::kAttemptDeployed);
  ASSERT_EQ(deployed.size(), 1u) << cluster.describe();
  EXPECT_EQ(deployed[0].attempt, markers[1].attempt);
  EXPECT_EQ(deployed[0].attemptNumber, 1u);
  const auto ended = cluster.jobEventsOf(id, JobKind::kJobEnded);
  ASSERT_EQ(ended.size(), 1u) << cluster.describe();
  EXPECT_EQ(ended[0].state, "FINISHED");
  EXPECT_EQ(ended[0].restarts, 1u);
  ASSERT_OK(cluster.waitForAllSlotsFree(kJobsTimeout));
}

TEST(JobsReconcileGap, AJobCancelledJustBeforeTheFailoverStaysCanceled) {
  auto started = JobCluster::start("reconcile-gap-cancel", {.masters = 2, .workers = 2});
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  const std::string dir = cluster.taskDir();
  constexpr uint32_t kParallelism = 2;
  auto job =
      submitAndWaitRunning(cluster, markedJob("cancelled", dir, {{"work", kParallelism, {}}}),
                           "work", kParallelism, kJobsTimeout);
  ASSERT_OK(job);
  const std::string id = job.value().id;
  const std::vector<TaskMarker> markers = job.value().markers;

  // `jobs cancel` answers once the CANCELED result is stored; the leader dies right after,
  // before or while its JobMaster cancels the attempts.
  const uint64_t firstEpoch = cluster.epoch();
  CtlResult cancel = cluster.ctl({"jobs", "cancel", id});
  ASSERT_EQ(cancel.exit.exitCode, 0) << cancel.output;
  ASSERT_OK(cluster.masters().kill(cluster.leader()));
  ASSERT_OK(cluster.followLeader(firstEpoch + 1));

  // Every attempt ends CANCELED on its worker (cancelled by the old leader, or by the worker
  // when the new one does not know the job), its processes gone, every slot free.
  for (const TaskMarker& marker : markers) {
    auto ended = cluster.waitForTaskEvent(
        [&](const TaskEvent& e) {
          return e.kind == TaskKind::kEnded && e.attempt == marker.attempt;
        },
        kJobsTimeout);
    ASSERT_OK(ended);
    EXPECT_EQ(ended.value().state, "CANCELED") << ended.value().describe();
  }
  std::vector<pid_t> pids;
  for (const TaskMarker& marker : markers) pids.push_back(marker.pid);
  const auto alive = waitForProcessesGone(pids, kJobsTimeout);
  EXPECT_TRUE(alive.empty()) << "still running: " << ::testing::PrintToString(alive);
  ASSERT_OK(cluster.waitForAllSlotsFree(kJobsTimeout));

  auto status = cluster.waitForStatus(
      id, [](const nlohmann::json& s) { return textField(s, "state") == "CANCELED"; },
      kJobsTimeout);
  ASSERT_OK(status);
  // The new leader ran nothing of it.
  EXPECT_TRUE(cluster.jobEventsOf(id, JobKind::kAttemptDeployed).empty()) << cluster.describe();
  EXPECT_TRUE(cluster.jobEventsOf(id, JobKind::kJobReconciling).empty()) << cluster.describe();
  EXPECT_TRUE(cluster.jobEventsOf(id, JobKind::kAttemptAdopted).empty()) << cluster.describe();
  for (const JobEvent& event : cluster.jobEventsOf(id, JobKind::kJobState)) {
    EXPECT_NE(event.state, "RUNNING") << event.describe();
  }
  for (uint32_t i = 0; i < kParallelism; ++i) {
    EXPECT_EQ(readMarkers(dir, "work", i).size(), 1u) << "subtask " << i << " started again";
  }
  auto jobs = cluster.listJobs();
  ASSERT_OK(jobs);
  EXPECT_EQ(jobs.value()[id], "CANCELED");
}

}  // namespace
}  // namespace regent::testing

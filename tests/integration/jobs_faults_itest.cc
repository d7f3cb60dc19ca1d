// Jobs through worker faults and a short cluster, on real processes: a worker SIGKILLed while it
// runs a subtask takes the task's processes with it (no orphan), the JobMaster fails the attempt
// after heartbeat.timeout and restarts it on the other worker, and the job finishes; a worker
// stopped with SIGTERM kills its tasks before it disconnects, and the subtask runs again on the
// other worker; a worker paused past heartbeat.timeout has its attempt replaced, and cancelled
// once it wakes up; a job that
// needs more slots than the cluster has free waits, with the reason in `jobs status`, and runs
// once a worker joins.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "tests/fixtures/wait_test_util.h"
#include "tests/integration/job_cluster_test_util.h"

namespace regent::testing {
namespace {

using JobKind = JobEvent::Kind;

// A job of one subtask whose first run records its pid and its child's in $DIR/pids and waits
// for ten minutes; a later run (the restart) finds the marker and finishes at once.
std::string survivorJob(const std::string& dir) {
  return "name: survivor\nvertices:\n  - name: work\n    command:\n      argv:\n"
         "        - /bin/sh\n        - -c\n        - |\n"
         "          if [ -e \"$DIR/first\" ]; then exit 0; fi\n"
         "          touch \"$DIR/first\"\n"
         "          sleep 600 &\n"
         "          echo $$ >> \"$DIR/pids\"\n"
         "          echo $! >> \"$DIR/pids\"\n"
         "          wait\n"
         "      env:\n        DIR: " +
         dir +
         "\n"
         "restart_strategy:\n  type: fixed-delay\n  attempts: 3\n  delay: 100ms\n";
}

// A survivorJob running: its id, its first attempt's deployment, its task's two processes (the
// shell and its child) and the worker slot running it.
struct RunningSurvivor {
  std::string id;
  JobEvent first;
  std::vector<pid_t> pids;
  size_t worker = 0;
};

// Submits survivorJob and waits until its first attempt is deployed and its task's processes
// started; fails naming the step that did not happen within kJobsTimeout.
Result<RunningSurvivor> submitSurvivor(JobCluster& cluster) {
  const std::string dir = cluster.taskDir();
  auto job = cluster.submit(survivorJob(dir));
  if (!job.ok()) return job.error();
  RunningSurvivor running;
  running.id = job.value();
  auto first = cluster.waitForJobEvent(
      [&](const JobEvent& e) { return e.kind == JobKind::kAttemptDeployed && e.job == running.id; },
      kJobsTimeout);
  if (!first.ok()) return first.error();
  running.first = first.value();
  const bool started = waitUntil(
      [&] {
        running.pids = readPids(dir + "/pids");
        return running.pids.size() == 2;
      },
      kJobsTimeout, Duration(50));
  if (!started) return Error::fatal("the task wrote no two pids\n" + cluster.describe());
  const auto worker = cluster.workerSlotOf(running.first.resourceId);
  if (!worker) return Error::fatal("no worker slot runs " + running.first.describe());
  running.worker = *worker;
  return running;
}

// How the test stops the worker running the subtask: SIGKILL, or SIGTERM (the worker's own stop).
enum class WorkerStop { kKill, kTerminate };

void PrintTo(WorkerStop stop, std::ostream* out) {
  *out << (stop == WorkerStop::kKill ? "SIGKILL" : "SIGTERM");
}

std::string workerStopName(const ::testing::TestParamInfo<WorkerStop>& info) {
  return info.param == WorkerStop::kKill ? "Sigkill" : "Sigterm";
}

class JobsWorkerStopped : public ::testing::TestWithParam<WorkerStop> {};

// A worker stopped under a running subtask leaves no process of the task behind, its attempt
// ends on the master and runs again on the other worker, and the job finishes. SIGKILL: the
// task's processes die with the worker (its cgroup or subreaper), and the JobMaster fails the
// attempt once the worker is silent for heartbeat.timeout, naming it lost. SIGTERM: the worker
// kills its tasks before it disconnects, then exits 0.
TEST_P(JobsWorkerStopped, LeavesNoProcessOfItsTaskAndTheTaskRunsAgainElsewhere) {
  const WorkerStop stop = GetParam();
  auto started = JobCluster::start(
      stop == WorkerStop::kKill ? "jobs-worker-kill" : "jobs-worker-term",
      {.workers = 2, .slotsPerWorker = 1});
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  auto submitted = submitSurvivor(cluster);
  ASSERT_OK(submitted);
  const RunningSurvivor& run = submitted.value();
  const size_t victim = run.worker;
  const size_t survivor = 1 - victim;

  if (stop == WorkerStop::kKill) {
    ASSERT_OK(cluster.workers().kill(victim));
  } else {
    ASSERT_OK(cluster.workers().process(victim).terminate());
    auto exit = cluster.workers().process(victim).waitForExit(kJobsTimeout);
    ASSERT_TRUE(exit) << cluster.describe();
    EXPECT_EQ(exit->exitCode, 0) << exit->describe();
  }
  // The task's shell and its child are gone with their worker.
  const auto alive = waitForProcessesGone(run.pids, kJobsTimeout);
  EXPECT_TRUE(alive.empty()) << "left behind by the stopped worker: "
                             << ::testing::PrintToString(alive);
  if (stop == WorkerStop::kTerminate) {
    // The worker's task ended before it disconnected.
    const std::string output = cluster.workers().process(victim).output();
    const size_t ended = output.find("task ended resource_id=");
    const size_t disconnected = output.find("worker disconnected");
    EXPECT_NE(ended, std::string::npos) << output;
    EXPECT_NE(disconnected, std::string::npos) << output;
    EXPECT_LT(ended, disconnected) << "the worker disconnected before its task ended:\n" << output;
  }

  // Its attempt ends on the master: a killed worker's FAILED once it is silent for
  // heartbeat.timeout, naming it lost; a stopped one's FAILED or CANCELED as it reported.
  auto failed = cluster.waitForJobEvent(
      [&](const JobEvent& e) {
        return e.kind == JobKind::kAttemptState && e.attempt == run.first.attempt &&
               (e.state == "FAILED" || (stop == WorkerStop::kTerminate && e.state == "CANCELED"));
      },
      kJobsTimeout);
  ASSERT_OK(failed);
  if (stop == WorkerStop::kKill) {
    EXPECT_TRUE(containsText(failed.value().message, run.first.resourceId))
        << failed.value().describe();
    EXPECT_TRUE(containsText(failed.value().message, "lost")) << failed.value().describe();
  }

  // The restart runs on the other worker and the job finishes, its result clean.
  ASSERT_OK(cluster.waitForJobEnd(run.id, "FINISHED", 1, kJobsTimeout));
  const auto deployed = cluster.jobEventsOf(run.id, JobKind::kAttemptDeployed);
  ASSERT_EQ(deployed.size(), 2u) << cluster.describe();
  EXPECT_EQ(deployed[1].attemptNumber, 1u);
  EXPECT_EQ(deployed[1].resourceId, cluster.workers().resourceId(survivor));
  ASSERT_OK(cluster.endedStatus(run.id, "FINISHED"));
}

INSTANTIATE_TEST_SUITE_P(JobsFaults, JobsWorkerStopped,
                         ::testing::Values(WorkerStop::kKill, WorkerStop::kTerminate),
                         workerStopName);

TEST(JobsFaults, AWorkerPausedPastTheTimeoutHasItsOldAttemptCancelledWhenItWakesUp) {
  auto started = JobCluster::start("jobs-worker-pause", {.workers = 2, .slotsPerWorker = 1});
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  auto submitted = submitSurvivor(cluster);
  ASSERT_OK(submitted);
  const RunningSurvivor& run = submitted.value();
  const size_t paused = run.worker;

  // Paused past heartbeat.timeout: the attempt fails and runs again on the other worker, and
  // the job finishes while the paused worker's task still runs (a pause stops only the worker).
  ASSERT_OK(cluster.workers().process(paused).pause());
  auto clean = cluster.waitForJobClean(run.id, kJobsTimeout);
  const bool resumed = cluster.workers().process(paused).resume().ok();
  ASSERT_TRUE(resumed);
  ASSERT_OK(clean);
  EXPECT_EQ(clean.value().state, "FINISHED");
  const auto deployed = cluster.jobEventsOf(run.id, JobKind::kAttemptDeployed);
  ASSERT_EQ(deployed.size(), 2u) << cluster.describe();
  EXPECT_NE(deployed[1].resourceId, run.first.resourceId);

  // Woken up, the worker learns that nobody wants its attempt any more: it is cancelled, its
  // processes go, and every slot ends free.
  auto ended = cluster.waitForTaskEvent(
      [&](const TaskEvent& e) {
        return e.kind == TaskEvent::Kind::kEnded && e.attempt == run.first.attempt;
      },
      kJobsTimeout);
  ASSERT_OK(ended);
  EXPECT_EQ(ended.value().state, "CANCELED") << ended.value().describe();
  const auto alive = waitForProcessesGone(run.pids, kJobsTimeout);
  EXPECT_TRUE(alive.empty()) << "still running after the worker woke up: "
                             << ::testing::PrintToString(alive);
  ASSERT_OK(cluster.waitForAllSlotsFree(kJobsTimeout));
  auto running = cluster.tasksRunning(paused);
  ASSERT_OK(running);
  EXPECT_EQ(running.value(), 0);
}

TEST(JobsFaults, AJobNeedingMoreSlotsThanFreeWaitsThenRunsWhenAWorkerJoins) {
  auto started = JobCluster::start("jobs-waiting", {.workers = 1, .slotsPerWorker = 2});
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  // Three subtasks on a cluster of two slots; each runs until the file `go` appears (bounded), so
  // the third cannot take a slot the first two free.
  const std::string dir = cluster.taskDir();
  auto job = cluster.submit(
      "name: wide\nvertices:\n  - name: wide\n    parallelism: 3\n    command:\n      argv:\n"
      "        - /bin/sh\n        - -c\n        - |\n"
      "          echo $$ >> \"$DIR/started\"\n"
      "          n=0\n"
      "          while [ ! -e \"$DIR/go\" ] && [ $n -lt 1200 ]; do sleep 0.1; n=$((n+1)); done\n"
      "          [ -e \"$DIR/go\" ]\n"
      "      env:\n        DIR: " +
      dir + "\n");
  ASSERT_OK(job);
  const std::string id = job.value();

  // Two run, one waits, and jobs status says why (for the job and for the waiting subtask).
  auto waiting = cluster.waitForStatus(
      id,
      [](const nlohmann::json& s) {
        return textField(s, "state") == "RUNNING" && s.contains("tasks") &&
               s["tasks"].value("running", 0) == 2 && !textField(s, "waiting_reason").empty();
      },
      kJobsTimeout);
  ASSERT_OK(waiting);
  const nlohmann::json& status = waiting.value();
  size_t subtasksWaiting = 0;
  for (uint32_t index = 0; index < 3; ++index) {
    const nlohmann::json* subtask = subtaskStatus(status, "wide", index);
    ASSERT_NE(subtask, nullptr) << status.dump();
    if (!textField(*subtask, "waiting_reason").empty()) ++subtasksWaiting;
  }
  EXPECT_EQ(subtasksWaiting, 1u) << status.dump();
  EXPECT_EQ(readPids(dir + "/started").size(), 2u);
  // `jobs status` shows it to a person too.
  CtlResult text = cluster.ctl({"jobs", "status", id});
  EXPECT_EQ(text.exit.exitCode, 0) << text.output;
  EXPECT_TRUE(containsText(text.output, textField(status, "waiting_reason"))) << text.output;

  // A worker joins: the third subtask runs on it while the first two still run.
  auto joined = cluster.addWorker();
  ASSERT_OK(joined);
  ASSERT_TRUE(
      waitUntil([&] { return readPids(dir + "/started").size() == 3; }, kJobsTimeout, Duration(50)))
      << cluster.describe();
  const auto deployed = cluster.jobEventsOf(id, JobKind::kAttemptDeployed);
  ASSERT_EQ(deployed.size(), 3u) << cluster.describe();
  EXPECT_EQ(deployed[2].resourceId, cluster.workers().resourceId(joined.value()));

  std::ofstream(dir + "/go") << "";
  auto clean = cluster.waitForJobClean(id, kJobsTimeout);
  ASSERT_OK(clean);
  EXPECT_EQ(clean.value().state, "FINISHED");
  ASSERT_OK(cluster.waitForAllSlotsFree(kJobsTimeout));
}

}  // namespace
}  // namespace regent::testing

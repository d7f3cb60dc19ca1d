// Reconciliation after a failover when more goes wrong, on real processes (docs/jobgraph.md): a
// worker dies with the leader, so its attempt is never reported and the next JobMaster fails it
// at jobmaster.reconciliation-timeout and runs it again on another worker, while it adopts the
// attempt of the worker that came back; and two failovers in quick succession (the second
// leader killed while it still reconciles, a worker stopped so that it cannot finish) end with a
// third leader adopting every attempt, no subtask started twice.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/fixtures/wait_test_util.h"
#include "tests/integration/job_cluster_test_util.h"

namespace regent::testing {
namespace {

using JobKind = JobEvent::Kind;

constexpr uint32_t kParallelism = 2;
const char* const kVertex = "work";

// Submits a job of two marked subtasks on a cluster of one slot per worker (so each runs on a
// worker of its own) and waits until both run; returns the job id, the first start of each
// subtask and the worker slot running each.
struct SpreadJob {
  std::string id;
  std::vector<TaskMarker> markers;
  std::vector<size_t> workers;
};

void submitSpread(JobCluster& cluster, SpreadJob& job, const std::string& restartStrategy) {
  auto running = submitAndWaitRunning(
      cluster,
      markedJob("spread", cluster.taskDir(), {{kVertex, kParallelism, {}}}, restartStrategy),
      kVertex, kParallelism, kJobsTimeout);
  ASSERT_OK(running);
  job.id = running.value().id;
  job.markers = running.value().markers;
  auto status = cluster.status(job.id);
  ASSERT_OK(status);
  for (uint32_t i = 0; i < kParallelism; ++i) {
    const nlohmann::json* subtask = subtaskStatus(status.value(), kVertex, i);
    ASSERT_NE(subtask, nullptr) << status.value().dump();
    auto worker = cluster.workerSlotOf(textField(*subtask, "resource_id"));
    ASSERT_TRUE(worker.has_value()) << status.value().dump();
    job.workers.push_back(*worker);
  }
  ASSERT_NE(job.workers[0], job.workers[1]) << cluster.describe();
}

TEST(JobsReconcileFaults, AnAttemptOfAWorkerThatDoesNotComeBackFailsAtTheTimeoutAndRunsElsewhere) {
  // A short reconciliation timeout: the test waits for it once.
  auto started = JobCluster::start("reconcile-lost-worker",
                                   {.masters = 2,
                                    .workers = 3,
                                    .slotsPerWorker = 1,
                                    .masterSet = {"jobmaster.reconciliation-timeout=3s"}});
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  const std::string dir = cluster.taskDir();
  SpreadJob job;
  submitSpread(cluster, job, "  type: fixed-delay\n  attempts: 2\n  delay: 200ms\n");
  if (HasFatalFailure()) return;

  // The leader dies, and the worker running subtask 0 with it (its task dies with it).
  const uint64_t firstEpoch = cluster.epoch();
  const size_t lost = job.workers[0];
  const std::string lostId = cluster.workers().resourceId(lost);
  ASSERT_OK(cluster.masters().kill(cluster.leader()));
  ASSERT_OK(cluster.workers().kill(lost));
  ASSERT_OK(cluster.followLeader(firstEpoch + 1));

  ASSERT_OK(waitForReconciliation(
      cluster, job.id, {.adopted = 1u, .unreported = 1u, .timedOut = true}, kJobsTimeout));
  const auto adopted = cluster.jobEventsOf(job.id, JobKind::kAttemptAdopted);
  ASSERT_EQ(adopted.size(), 1u) << cluster.describe();
  EXPECT_EQ(adopted[0].attempt, job.markers[1].attempt) << adopted[0].describe();

  // The unreported attempt failed naming the option, and subtask 0 runs again elsewhere.
  auto failed = cluster.waitForJobEvent(
      [&](const JobEvent& e) {
        return e.kind == JobKind::kAttemptState && e.job == job.id &&
               e.attempt == job.markers[0].attempt && e.state == "FAILED";
      },
      kJobsTimeout);
  ASSERT_OK(failed);
  EXPECT_TRUE(containsText(failed.value().message, "jobmaster.reconciliation-timeout"))
      << failed.value().describe();
  auto again = waitForMarkers(dir, kVertex, 0, 2, kJobsTimeout);
  ASSERT_OK(again);
  EXPECT_EQ(again.value()[1].attemptNumber, 1u) << again.value()[1].describe();
  auto rerun =
      waitForSubtaskAttempts(cluster, job.id, kVertex, kParallelism, "RUNNING", kJobsTimeout);
  ASSERT_OK(rerun);
  EXPECT_EQ(textField(rerun.value()[0], "attempt_id"), again.value()[1].attempt);
  EXPECT_EQ(textField(rerun.value()[1], "attempt_id"), job.markers[1].attempt);
  auto status = cluster.status(job.id);
  ASSERT_OK(status);
  const nlohmann::json* subtask = subtaskStatus(status.value(), kVertex, 0);
  ASSERT_NE(subtask, nullptr);
  EXPECT_NE(textField(*subtask, "resource_id"), lostId) << status.value().dump();
  EXPECT_TRUE(containsText(textField(*subtask, "last_failure"), "jobmaster.reconciliation-timeout"))
      << status.value().dump();

  for (uint32_t i = 0; i < kParallelism; ++i) letSubtaskEnd(dir, kVertex, i);
  auto clean = cluster.waitForJobClean(job.id, kJobsTimeout);
  ASSERT_OK(clean);
  EXPECT_EQ(clean.value().state, "FINISHED");
  const auto ended = cluster.jobEventsOf(job.id, JobKind::kJobEnded);
  ASSERT_EQ(ended.size(), 1u) << cluster.describe();
  EXPECT_EQ(ended[0].restarts, 1u);
  EXPECT_EQ(readMarkers(dir, kVertex, 0).size(), 2u);
  EXPECT_EQ(readMarkers(dir, kVertex, 1).size(), 1u) << "the adopted subtask started again";
}

TEST(JobsReconcileFaults, TwoFailoversInQuickSuccessionRestartNothing) {
  auto started =
      JobCluster::start("reconcile-twice", {.masters = 3, .workers = 2, .slotsPerWorker = 1});
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  const std::string dir = cluster.taskDir();
  SpreadJob job;
  submitSpread(cluster, job, "");
  if (HasFatalFailure()) return;

  // The worker of subtask 0 is stopped, so that the second leader cannot finish reconciling:
  // it adopts subtask 1 and waits for subtask 0 when it is killed.
  const uint64_t firstEpoch = cluster.epoch();
  const size_t stopped = job.workers[0];
  ASSERT_OK(cluster.workers().process(stopped).pause());
  ASSERT_OK(cluster.masters().kill(cluster.leader()));
  ASSERT_OK(cluster.followLeader(firstEpoch + 1, {stopped}));
  auto reconciling = cluster.waitForJobEvent(
      [&](const JobEvent& e) { return e.kind == JobKind::kJobReconciling && e.job == job.id; },
      kJobsTimeout);
  ASSERT_OK(reconciling);
  EXPECT_EQ(reconciling.value().expected, kParallelism) << reconciling.value().describe();
  auto adopted = cluster.waitForJobEvent(
      [&](const JobEvent& e) {
        return e.kind == JobKind::kAttemptAdopted && e.job == job.id &&
               e.attempt == job.markers[1].attempt;
      },
      kJobsTimeout);
  ASSERT_OK(adopted);
  ASSERT_TRUE(cluster.jobEventsOf(job.id, JobKind::kJobReconciled).empty()) << cluster.describe();
  // Still reconciling (subtask 0 unreported): `jobs list` and `jobs status` say so.
  auto jobs = cluster.listJobs();
  ASSERT_OK(jobs);
  EXPECT_EQ(jobs.value()[job.id], "RECONCILING");
  auto status = cluster.status(job.id);
  ASSERT_OK(status);
  EXPECT_EQ(textField(status.value(), "state"), "RECONCILING") << status.value().dump();
  ASSERT_OK(cluster.masters().kill(cluster.leader()));

  ASSERT_OK(cluster.followLeader(firstEpoch + 2, {stopped}));
  ASSERT_OK(cluster.workers().process(stopped).resume());
  ASSERT_OK(cluster.workers().waitForRegistered(stopped, firstEpoch + 2, kJobsTimeout));

  ASSERT_OK(waitForReconciliation(cluster, job.id, {.adopted = kParallelism}, kJobsTimeout));
  for (uint32_t i = 0; i < kParallelism; ++i) {
    const auto markers = readMarkers(dir, kVertex, i);
    ASSERT_EQ(markers.size(), 1u) << "subtask " << i << " started again";
    EXPECT_FALSE(processGone(markers[0].pid)) << markers[0].describe();
  }

  for (uint32_t i = 0; i < kParallelism; ++i) letSubtaskEnd(dir, kVertex, i);
  auto clean = cluster.waitForJobClean(job.id, kJobsTimeout);
  ASSERT_OK(clean);
  EXPECT_EQ(clean.value().state, "FINISHED");
  EXPECT_EQ(clean.value().epoch, firstEpoch + 2);
  const auto ended = cluster.jobEventsOf(job.id, JobKind::kJobEnded);
  ASSERT_EQ(ended.size(), 1u) << cluster.describe();
  EXPECT_EQ(ended[0].restarts, 0u);
  EXPECT_TRUE(cluster.jobEventsOf(job.id, JobKind::kAttemptDeployed).empty()) << cluster.describe();
  for (uint32_t i = 0; i < kParallelism; ++i) {
    EXPECT_EQ(readMarkers(dir, kVertex, i).size(), 1u) << "subtask " << i << " started again";
  }
  ASSERT_OK(cluster.waitForAllSlotsFree(kJobsTimeout));
}

}  // namespace
}  // namespace regent::testing

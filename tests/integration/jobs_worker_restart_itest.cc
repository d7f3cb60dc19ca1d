// A worker SIGKILLed and restarted on its data directory, on real processes (docs/workers.md, "A
// worker that dies"): it keeps its resource id, and its new registration alone ends the attempts
// of its previous process: under one leader they FAIL at once, naming the worker and its restart,
// and run again by the job's restart strategy. When the leader is killed right after, the next
// leader does not wait for jobmaster.reconciliation-timeout either; nor when the leader that ran
// the attempt never saw the restart (stopped first): the progress record names the attempt's
// worker and slot, and the restarted worker's first slot report to the next leader holds no such
// slot. heartbeat.timeout and the reconciliation timeout are ten minutes here, far beyond every
// wait of the test (kJobsTimeout): only the restart can end the attempt in time.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/fixtures/wait_test_util.h"
#include "tests/integration/job_cluster_test_util.h"

namespace regent::testing {
namespace {

using JobKind = JobEvent::Kind;

const char* const kVertex = "work";

JobClusterOptions restartOptions(size_t masters) {
  return {.masters = masters,
          .workers = 1,
          .slotsPerWorker = 1,
          .masterSet = {"heartbeat.timeout=10m", "jobmaster.reconciliation-timeout=10m"}};
}

std::string restartJob(JobCluster& cluster) {
  return markedJob("restarted-worker", cluster.taskDir(), {{kVertex, 1, {}}},
                   "  type: fixed-delay\n  attempts: 3\n  delay: 100ms\n");
}

// SIGKILLs the only worker and starts it again on its data directory; waits until the leader
// registered the new process as a replacement. Returns the worker's resource id.
Result<std::string> killAndRestartWorker(JobCluster& cluster) {
  const std::string before = cluster.workers().resourceId(0);
  auto killed = cluster.workers().kill(0);
  if (!killed.ok()) return killed.error();
  auto restarted = cluster.workers().restart(0);
  if (!restarted.ok()) return restarted.error();
  auto registered = waitForMasterWorkerEvent(
      cluster.masters(), cluster.leader(),
      [&](const MasterWorkerEvent& e) {
        return e.kind == MasterWorkerEvent::Kind::kRegistered && e.resourceId == before &&
               e.replaced;
      },
      kJobsTimeout);
  if (!registered.ok()) return registered.error();
  const std::string after = cluster.workers().resourceId(0);
  if (after != before) {
    return Error::fatal("the restarted worker has resource id " + after + ", not " + before);
  }
  return before;
}

// The job's subtask runs again (attempt number 1 or later) and, let to end, finishes the job.
void expectRunsAgainAndFinishes(JobCluster& cluster, const std::string& job) {
  const std::string dir = cluster.taskDir();
  auto again = waitForMarkers(dir, kVertex, 0, 2, kJobsTimeout);
  ASSERT_OK(again);
  EXPECT_GE(again.value().back().attemptNumber, 1u) << again.value().back().describe();
  letSubtaskEnd(dir, kVertex, 0);
  auto clean = cluster.waitForJobClean(job, kJobsTimeout);
  ASSERT_OK(clean);
  EXPECT_EQ(clean.value().state, "FINISHED") << cluster.describe();
}

TEST(JobsWorkerRestart, ARestartedWorkersAttemptFailsAtOnceAndRunsAgain) {
  auto started = JobCluster::start("worker-restart", restartOptions(1));
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  auto running = submitAndWaitRunning(cluster, restartJob(cluster), kVertex, 1, kJobsTimeout);
  ASSERT_OK(running);
  const RunningJob& job = running.value();

  auto worker = killAndRestartWorker(cluster);
  ASSERT_OK(worker);
  // The first attempt FAILS, naming the worker and its restart, long before heartbeat.timeout.
  auto failed = cluster.waitForJobEvent(
      [&](const JobEvent& e) {
        return e.kind == JobKind::kAttemptState && e.job == job.id &&
               e.attempt == job.markers[0].attempt && e.state == "FAILED";
      },
      kJobsTimeout);
  ASSERT_OK(failed);
  EXPECT_TRUE(containsText(failed.value().message, "worker " + worker.value() + " restarted"))
      << failed.value().describe();
  // The restart strategy runs it again, in the restarted worker's slot (the only one).
  auto redeployed = cluster.waitForJobEvent(
      [&](const JobEvent& e) {
        return e.kind == JobKind::kAttemptDeployed && e.job == job.id && e.attemptNumber == 1;
      },
      kJobsTimeout);
  ASSERT_OK(redeployed);
  EXPECT_EQ(redeployed.value().resourceId, worker.value());
  expectRunsAgainAndFinishes(cluster, job.id);
  if (HasFatalFailure()) return;
  const auto ended = cluster.jobEventsOf(job.id, JobKind::kJobEnded);
  ASSERT_EQ(ended.size(), 1u) << cluster.describe();
  EXPECT_EQ(ended[0].restarts, 1u);
}

TEST(JobsWorkerRestart, AfterARestartAndAFailoverTheNextLeaderDoesNotWaitForTheTimeout) {
  auto started = JobCluster::start("worker-restart-failover", restartOptions(2));
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  auto running = submitAndWaitRunning(cluster, restartJob(cluster), kVertex, 1, kJobsTimeout);
  ASSERT_OK(running);
  const RunningJob& job = running.value();

  auto worker = killAndRestartWorker(cluster);
  ASSERT_OK(worker);
  // The leader dies right after: whatever it stored of the restart before (nothing, the failed
  // attempt, or the next one written but maybe not deployed), the next leader finds the
  // restarted worker's word in its report and offers.
  const uint64_t firstEpoch = cluster.epoch();
  ASSERT_OK(cluster.masters().kill(cluster.leader()));
  ASSERT_OK(cluster.followLeader(firstEpoch + 1));

  auto reconciled = cluster.waitForJobReconciled(job.id, kJobsTimeout);
  ASSERT_OK(reconciled);
  EXPECT_FALSE(reconciled.value().timedOut) << reconciled.value().describe();
  // The first attempt is over: failed (by either leader), never adopted.
  for (const JobEvent& adopted : cluster.jobEventsOf(job.id, JobKind::kAttemptAdopted)) {
    EXPECT_NE(adopted.attempt, job.markers[0].attempt) << adopted.describe();
  }
  expectRunsAgainAndFinishes(cluster, job.id);
}

TEST(JobsWorkerRestart, AWorkerRestartedWhileTheLeaderIsStoppedIsAccountedForByItsFirstReport) {
  auto started = JobCluster::start("worker-restart-unseen", restartOptions(2));
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  auto running = submitAndWaitRunning(cluster, restartJob(cluster), kVertex, 1, kJobsTimeout);
  ASSERT_OK(running);
  const RunningJob& job = running.value();

  // The leader hears nothing of the restart: it is stopped before the worker is killed, and
  // killed while stopped. The record it left says the attempt runs on that worker.
  const uint64_t firstEpoch = cluster.epoch();
  const size_t stopped = cluster.leader();
  const std::string worker = cluster.workers().resourceId(0);
  ASSERT_OK(cluster.masters().process(stopped).pause());
  ASSERT_OK(cluster.workers().kill(0));
  ASSERT_OK(cluster.workers().restart(0));
  ASSERT_OK(cluster.followLeader(firstEpoch + 1));
  ASSERT_OK(cluster.masters().kill(stopped));
  EXPECT_EQ(cluster.workers().resourceId(0), worker);

  // The restarted worker's first report holds no slot of the job: the attempt fails at once.
  ASSERT_OK(
      waitForReconciliation(cluster, job.id, {.adopted = 0u, .unreported = 1u}, kJobsTimeout));
  auto failed = cluster.waitForJobEvent(
      [&](const JobEvent& e) {
        return e.kind == JobKind::kAttemptState && e.job == job.id &&
               e.attempt == job.markers[0].attempt && e.state == "FAILED";
      },
      kJobsTimeout);
  ASSERT_OK(failed);
  EXPECT_TRUE(containsText(failed.value().message,
                           "worker " + worker + " reported its slots to the new leader without"))
      << failed.value().describe();
  expectRunsAgainAndFinishes(cluster, job.id);
}

}  // namespace
}  // namespace regent::testing

// Running tasks survive a failover of the leader, on real processes (docs/jobgraph.md): a job's
// two subtasks run on the workers when the leader is SIGKILLed, SIGSTOPped past its ZooKeeper
// session, or hands over (`regentctl failover`); the next leader's JobMaster adopts both
// attempts from the workers' offers, the same attempt ids and the same processes run on, no
// subtask starts a second time (the tasks' own marker files), and the job finishes in the new
// term without a restart. A leader woken from SIGSTOP cancels and deploys nothing.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/fixtures/wait_test_util.h"
#include "tests/integration/job_cluster_test_util.h"

namespace regent::testing {
namespace {

using JobKind = JobEvent::Kind;
using TaskKind = TaskEvent::Kind;

constexpr uint32_t kParallelism = 2;
const char* const kVertex = "work";

// Runs the job of two marked subtasks; the ids `jobs status` shows are those the tasks started.
void submitAndRun(JobCluster& cluster, RunningJob& running) {
  auto started = submitAndWaitRunning(
      cluster, markedJob("survivor", cluster.taskDir(), {{kVertex, kParallelism}}), kVertex,
      kParallelism, kJobsTimeout);
  ASSERT_OK(started);
  running = std::move(started.value());
  for (uint32_t i = 0; i < kParallelism; ++i) {
    ASSERT_EQ(textField(running.attempts[i], "attempt_id"), running.markers[i].attempt)
        << running.attempts[i].dump();
  }
}

// The task ended lines of `job` with `state` on every worker.
std::vector<TaskEvent> tasksEnded(JobCluster& cluster, const std::string& job,
                                  const std::string& state) {
  std::vector<TaskEvent> ended;
  for (TaskEvent& event : cluster.taskEventsOf(job, TaskKind::kEnded)) {
    if (event.state == state) ended.push_back(std::move(event));
  }
  return ended;
}

// After the failover to the leader the cluster follows: both attempts adopted, the same ids and
// processes running, nothing started again; then the tasks end and the job finishes without a
// restart, cleaned up in the new term.
void expectAdoptedThenFinished(JobCluster& cluster, const RunningJob& running) {
  const std::string dir = cluster.taskDir();
  ASSERT_OK(waitForReconciliation(cluster, running.id, {.adopted = kParallelism}, kJobsTimeout));

  const auto adopted = cluster.jobEventsOf(running.id, JobKind::kAttemptAdopted);
  ASSERT_EQ(adopted.size(), kParallelism) << cluster.describe();
  for (const JobEvent& event : adopted) {
    ASSERT_LT(event.subtask, kParallelism) << event.describe();
    EXPECT_EQ(event.vertex, kVertex) << event.describe();
    EXPECT_EQ(event.attempt, running.markers[event.subtask].attempt) << event.describe();
    EXPECT_EQ(event.attemptNumber, 0u) << event.describe();
    EXPECT_EQ(event.pid, running.attempts[event.subtask].value("pid", int64_t{-1}))
        << event.describe();
  }

  // `jobs status` of the new leader: the same attempts, RUNNING, with the same pids.
  auto now =
      waitForSubtaskAttempts(cluster, running.id, kVertex, kParallelism, "RUNNING", kJobsTimeout);
  ASSERT_OK(now);
  for (uint32_t i = 0; i < kParallelism; ++i) {
    EXPECT_EQ(textField(now.value()[i], "attempt_id"), running.markers[i].attempt);
    EXPECT_EQ(now.value()[i].value("pid", int64_t{-1}),
              running.attempts[i].value("pid", int64_t{-2}));
    EXPECT_EQ(now.value()[i].value("attempt_number", -1), 0);
    // Started once, and the process of that start still runs.
    const auto markers = readMarkers(dir, kVertex, i);
    ASSERT_EQ(markers.size(), 1u) << "subtask " << i << " started again";
    EXPECT_FALSE(processGone(markers[0].pid)) << markers[0].describe();
  }
  EXPECT_TRUE(cluster.jobEventsOf(running.id, JobKind::kAttemptDeployed).empty())
      << cluster.describe();

  for (uint32_t i = 0; i < kParallelism; ++i) letSubtaskEnd(dir, kVertex, i);
  auto clean = cluster.waitForJobClean(running.id, kJobsTimeout);
  ASSERT_OK(clean);
  EXPECT_EQ(clean.value().state, "FINISHED");
  EXPECT_EQ(clean.value().epoch, cluster.epoch());
  const auto ended = cluster.jobEventsOf(running.id, JobKind::kJobEnded);
  ASSERT_EQ(ended.size(), 1u) << cluster.describe();
  EXPECT_EQ(ended[0].state, "FINISHED");
  EXPECT_EQ(ended[0].restarts, 0u);
  EXPECT_TRUE(cluster.jobEventsOf(running.id, JobKind::kAttemptDeployed).empty())
      << cluster.describe();
  for (uint32_t i = 0; i < kParallelism; ++i) {
    EXPECT_EQ(readMarkers(dir, kVertex, i).size(), 1u) << "subtask " << i << " started again";
  }
  EXPECT_TRUE(tasksEnded(cluster, running.id, "CANCELED").empty()) << cluster.describe();
  EXPECT_EQ(tasksEnded(cluster, running.id, "FINISHED").size(), kParallelism) << cluster.describe();

  auto status = cluster.status(running.id);
  ASSERT_OK(status);
  EXPECT_EQ(textField(status.value(), "state"), "FINISHED") << status.value().dump();
  EXPECT_EQ(status.value().value("restarts", -1), 0) << status.value().dump();
  for (uint32_t i = 0; i < kParallelism; ++i) {
    const nlohmann::json* subtask = subtaskStatus(status.value(), kVertex, i);
    ASSERT_NE(subtask, nullptr) << status.value().dump();
    EXPECT_EQ(subtask->value("attempts", -1), 1) << status.value().dump();
    EXPECT_EQ(textField((*subtask)["attempt"], "attempt_id"), running.markers[i].attempt);
  }
  auto graphStored = cluster.jobGraphStored(running.id);
  ASSERT_OK(graphStored);
  EXPECT_FALSE(graphStored.value());
  ASSERT_OK(cluster.waitForAllSlotsFree(kJobsTimeout));
}

// Each test runs the job (submitAndRun) on two masters and two workers of its own, then fails
// the leader over in its own way.
class JobsReconcileFailover : public ::testing::Test {
 protected:
  // Starts the cluster (its id prefixed by `name`) into cluster_ and runs the job into running_.
  void startRunning(const std::string& name) {
    auto started = JobCluster::start(name, {.masters = 2, .workers = 2});
    ASSERT_OK(started);
    cluster_ = std::move(started).value();
    submitAndRun(*cluster_, running_);
  }

  std::unique_ptr<JobCluster> cluster_;
  RunningJob running_;
};

TEST_F(JobsReconcileFailover, AfterTheLeaderIsKilledTheNextOneAdoptsTheRunningAttempts) {
  startRunning("reconcile-kill");
  if (HasFatalFailure()) return;
  JobCluster& cluster = *cluster_;
  const RunningJob& running = running_;

  const uint64_t firstEpoch = cluster.epoch();
  ASSERT_OK(cluster.masters().kill(cluster.leader()));
  ASSERT_OK(cluster.followLeader(firstEpoch + 1));
  expectAdoptedThenFinished(cluster, running);
}

TEST_F(JobsReconcileFailover, ALeaderStoppedPastItsSessionChangesNothingWhenItWakes) {
  startRunning("reconcile-stop");
  if (HasFatalFailure()) return;
  JobCluster& cluster = *cluster_;
  const RunningJob& running = running_;

  const uint64_t firstEpoch = cluster.epoch();
  const size_t stopped = cluster.leader();
  ASSERT_OK(cluster.masters().process(stopped).pause());
  ASSERT_OK(cluster.followLeader(firstEpoch + 1));
  auto reconciled = cluster.waitForJobReconciled(running.id, kJobsTimeout);
  ASSERT_OK(reconciled);

  // Woken, it learns its term is over; whatever its JobMaster still tried on the workers was
  // refused (their epoch gate): no attempt cancelled, none started.
  ASSERT_OK(cluster.masters().process(stopped).resume());
  auto revoked = cluster.masters().waitForEvent(
      stopped,
      [&](const MasterEvent& e) {
        return e.kind == MasterEvent::Kind::kRevoked && e.epoch == firstEpoch;
      },
      kJobsTimeout);
  ASSERT_OK(revoked);
  EXPECT_TRUE(tasksEnded(cluster, running.id, "CANCELED").empty()) << cluster.describe();
  for (uint32_t i = 0; i < kParallelism; ++i) {
    EXPECT_EQ(readMarkers(cluster.taskDir(), kVertex, i).size(), 1u);
  }
  expectAdoptedThenFinished(cluster, running);
}

TEST_F(JobsReconcileFailover, AfterAHandOverTheNextLeaderAdoptsTheRunningAttempts) {
  startRunning("reconcile-handover");
  if (HasFatalFailure()) return;
  JobCluster& cluster = *cluster_;
  const RunningJob& running = running_;

  const uint64_t firstEpoch = cluster.epoch();
  CtlResult failover = cluster.ctl({"failover"});
  ASSERT_EQ(failover.exit.exitCode, 0) << failover.output;
  ASSERT_OK(cluster.followLeader(firstEpoch + 1));
  expectAdoptedThenFinished(cluster, running);
}

}  // namespace
}  // namespace regent::testing

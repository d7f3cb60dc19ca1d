// TaskExecutor with its attempts run as real processes by a ProcessTaskRunner (under the real
// regent-task-shim), against the in-process fake leading master of task_executor_test_util.h: a
// task runs with its job's, vertex's, subtask's and attempt's variables in its environment (the
// JobGraph's env winning), its RUNNING and terminal updates (exit code, cancel) reach the
// JobMaster in order, and a worker killing its tasks to stop refuses new work and delivers their
// CANCELED updates. The TaskExecutor's logic without processes: task_executor_test.cc.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "services/taskexecutor/process_task_runner.h"
#include "services/taskexecutor/task_executor.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/services/taskexecutor/attempts_dir_test_util.h"
#include "tests/services/taskexecutor/task_executor_test_util.h"

namespace regent::taskexecutor {
namespace {

class TaskExecutorProcessTest : public TaskExecutorTestBase {
 protected:
  ~TaskExecutorProcessTest() noexcept override {
    executor_ = nullptr;  // Before the runner, and the runner before its attempts directory.
    runner_ = nullptr;
  }

  // Tasks run through a real ProcessTaskRunner (regent-task-shim next to the test binary),
  // their attempts under a temporary directory.
  void withRunner() override {
    ProcessTaskRunnerOptions options;
    options.attemptsDir = attemptsDir_.path() + "/attempts";
    attemptsFd_ = regent::testing::openAttemptsDirForTests(options.attemptsDir);
    options.attemptsFd = attemptsFd_.get();
    options.cancelTimeout = Duration(2000);
    auto runner = kj::heap<ProcessTaskRunner>(loop_, loop_.timer(), std::move(options));
    process_ = runner.get();
    runner_ = kj::mv(runner);
  }

  ProcessTaskRunner& process() {
    KJ_REQUIRE(process_ != nullptr, "withRunner() first");
    return *process_;
  }

  testing::TempDir attemptsDir_{"task-executor-itest"};
  kj::AutoCloseFd attemptsFd_;            // The runner holds its own duplicate.
  ProcessTaskRunner* process_ = nullptr;  // Owned by runner_.
};

TEST_F(TaskExecutorProcessTest, SubmitTaskRunsTheProcessAndItsUpdatesArriveInOrder) {
  TaskExecutor& executor = startWithAcceptedSlot(0, kAllocation);
  ASSERT_FALSE(submitTask(1, kAttempt, kAllocation, {"sh", "-c", "echo out"}));
  EXPECT_FALSE(submitTask(1, kAttempt, kAllocation, {"sh", "-c", "echo out"}))
      << "the same attempt again succeeds";
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return updatesOf(kAttempt).size() == 2; }, kBound))
      << "timed out waiting for RUNNING and FINISHED";
  auto updates = updatesOf(kAttempt);
  EXPECT_EQ(updates[0].state, wire::ExecutionState::RUNNING);
  EXPECT_GT(updates[0].pid, 0u);
  EXPECT_GT(updates[0].startedAtMs, 0);
  EXPECT_EQ(updates[0].job, kJob);
  EXPECT_EQ(updates[0].allocation, kAllocation);
  EXPECT_EQ(updates[0].vertex, "v");
  EXPECT_EQ(updates[0].subtask, 1u);
  EXPECT_EQ(updates[0].attemptNumber, 3u);
  EXPECT_EQ(updates[1].state, wire::ExecutionState::FINISHED);
  EXPECT_EQ(updates[1].exitCode, 0);
  EXPECT_GE(updates[1].endedAtMs, updates[0].startedAtMs);
  EXPECT_EQ(master_->updates[0].epoch, 1u);
  EXPECT_EQ(executor.counters().tasksStarted, 1u);
  EXPECT_EQ(executor.counters().tasksFinished, 1u);
  EXPECT_EQ(executor.tasksRunning(), 0u);
}

TEST_F(TaskExecutorProcessTest, ATaskLearnsItsJobVertexSubtaskAndAttemptFromItsEnvironment) {
  startWithAcceptedSlot(0, kAllocation);
  testing::TempDir out("task-env");
  const std::string file = out.path() + "/env";
  // The JobGraph's env wins over the worker's REGENT_* variables.
  ASSERT_FALSE(submitTask(1, kAttempt, kAllocation, {"sh", "-c", "env > " + file}, kJob,
                          {{"REGENT_TASK_VERTEX", "from-the-graph"}, {"OWN", "1"}}));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return updatesOf(kAttempt).size() == 2; }, kBound))
      << "timed out waiting for RUNNING and FINISHED";
  ASSERT_EQ(updatesOf(kAttempt)[1].state, wire::ExecutionState::FINISHED);
  std::ifstream lines(file);
  std::map<std::string, std::string> env;
  std::string line;
  while (std::getline(lines, line)) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  EXPECT_EQ(env["REGENT_TASK_JOB_ID"], kJob.toHex());
  EXPECT_EQ(env["REGENT_TASK_JOB_NAME"], "nightly report");
  EXPECT_EQ(env["REGENT_TASK_VERTEX"], "from-the-graph");
  EXPECT_EQ(env["REGENT_TASK_SUBTASK_INDEX"], "1");
  EXPECT_EQ(env["REGENT_TASK_PARALLELISM"], "2");
  EXPECT_EQ(env["REGENT_TASK_ATTEMPT_ID"], kAttempt.toHex());
  EXPECT_EQ(env["REGENT_TASK_ATTEMPT_NUMBER"], "3");
  EXPECT_EQ(env["OWN"], "1");
}

TEST_F(TaskExecutorProcessTest, AFailingTaskIsReportedFailedWithItsExitCode) {
  TaskExecutor& executor = startWithAcceptedSlot(0, kAllocation);
  ASSERT_FALSE(submitTask(1, kAttempt, kAllocation, {"sh", "-c", "exit 3"}));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return updatesOf(kAttempt).size() == 2; }, kBound))
      << "timed out waiting for RUNNING and FAILED";
  auto ended = updatesOf(kAttempt)[1];
  EXPECT_EQ(ended.state, wire::ExecutionState::FAILED);
  EXPECT_EQ(ended.exitCode, 3);
  EXPECT_FALSE(ended.failureMessage.empty());
  EXPECT_EQ(executor.counters().tasksFailed, 1u);
}

TEST_F(TaskExecutorProcessTest, CancelTaskEndsTheAttemptCanceled) {
  TaskExecutor& executor = startWithAcceptedSlot(0, kAllocation);
  ASSERT_FALSE(submitTask(1, kAttempt, kAllocation, {"sleep", "30"}));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return updatesOf(kAttempt).size() == 1; }, kBound))
      << "timed out waiting for RUNNING";
  EXPECT_EQ(executor.tasksRunning(), 1u);
  EXPECT_FALSE(cancelTask(1, kAttempt));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return updatesOf(kAttempt).size() == 2; }, kBound))
      << "timed out waiting for CANCELED";
  EXPECT_EQ(updatesOf(kAttempt)[1].state, wire::ExecutionState::CANCELED);
  EXPECT_FALSE(cancelTask(1, kAttempt)) << "an ended attempt cancels successfully";
  auto unknown = cancelTask(1, kOtherAttempt);
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->which, wire::Failure::NOT_FOUND);
  EXPECT_EQ(executor.slots()[0].allocation, kAllocation) << "the slot stays allocated";
}

TEST_F(TaskExecutorProcessTest, AWorkerKillingItsTasksToStopAnswersUnavailableToNewSlotsAndTasks) {
  TaskExecutor& executor = startWithAcceptedSlot(0, kAllocation);
  loop_.run(process().killAll());  // As the worker does first when it stops.
  auto task = submitTask(master_->epoch, kAttempt, kAllocation, {"true"});
  ASSERT_TRUE(task);
  EXPECT_EQ(task->which, wire::Failure::UNAVAILABLE) << task->message;
  EXPECT_NE(task->message.find("stopping"), std::string::npos) << task->message;
  auto slot = requestSlot(master_->epoch, 1, kJob, kOtherAllocation);
  ASSERT_TRUE(slot);
  EXPECT_EQ(slot->which, wire::Failure::UNAVAILABLE) << slot->message;
  EXPECT_FALSE(executor.slots()[1].allocation);
  EXPECT_EQ(executor.counters().tasksStarted, 0u);
}

// The worker's stop: its tasks killed, their CANCELED updates delivered before it leaves.
TEST_F(TaskExecutorProcessTest, FlushUpdatesResolvesOnceTheKilledTasksUpdatesAreDelivered) {
  TaskExecutor& executor = startWithAcceptedSlot(0, kAllocation);
  ASSERT_FALSE(submitTask(1, kAttempt, kAllocation, {"sleep", "30"}));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return updatesOf(kAttempt).size() == 1; }, kBound))
      << "timed out waiting for RUNNING";
  loop_.run(process().killAll());
  loop_.run(executor.flushUpdates(Duration(10000)));
  ASSERT_EQ(updatesOf(kAttempt).size(), 2u);
  EXPECT_EQ(updatesOf(kAttempt)[1].state, wire::ExecutionState::CANCELED);
  loop_.run(executor.flushUpdates(Duration(10000)));  // Nothing pending: at once.
}

}  // namespace
}  // namespace regent::taskexecutor

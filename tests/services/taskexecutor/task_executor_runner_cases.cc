// The TaskExecutor's behaviours that hold whatever runs its attempts, written once over
// TaskExecutorRunnerTest (task_executor_test_util.h): submitTask starts the attempt and its
// RUNNING and terminal updates (exit code, cancel) reach the JobMaster in order; the task's
// environment names its job, vertex, subtask and attempt (the JobGraph's env winning); a worker
// killing its tasks to stop refuses new work and delivers their CANCELED updates. Compiled into
// task_executor_test (the fake runner: no process) and task_executor_itest (real processes under
// regent-task-shim), each instantiating the suite with its own runner.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "services/taskexecutor/task_executor.h"
#include "tests/services/taskexecutor/task_executor_test_util.h"

namespace regent::taskexecutor {
namespace {

TEST_P(TaskExecutorRunnerTest, SubmitTaskStartsTheAttemptAndItsUpdatesArriveInOrder) {
  TaskExecutor& executor = startWithAcceptedSlot(0, kAllocation);
  ASSERT_FALSE(submitTask(1, kAttempt, kAllocation, {"sh", "-c", "echo out"}));
  EXPECT_FALSE(submitTask(1, kAttempt, kAllocation, {"sh", "-c", "echo out"}))
      << "the same attempt again succeeds";
  driver().letEnd(kAttempt, 0);
  ASSERT_TRUE(waitForUpdates(kAttempt, 2)) << "RUNNING and FINISHED";
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
  EXPECT_EQ(executor.counters().tasksStarted, 1u) << "the attempt submitted again was started";
  EXPECT_EQ(executor.counters().tasksFinished, 1u);
  EXPECT_EQ(executor.tasksRunning(), 0u);
}

TEST_P(TaskExecutorRunnerTest, ATaskLearnsItsJobVertexSubtaskAndAttemptFromItsEnvironment) {
  startWithAcceptedSlot(0, kAllocation);
  // The JobGraph's env wins over the worker's REGENT_TASK_* variables.
  ASSERT_FALSE(submitTask(1, kAttempt, kAllocation, driver().environmentCommand(), kJob,
                          {{"REGENT_TASK_VERTEX", "from-the-graph"}, {"OWN", "1"}}));
  driver().letEnd(kAttempt, 0);
  ASSERT_TRUE(waitForUpdates(kAttempt, 2)) << "RUNNING and FINISHED";
  ASSERT_EQ(updatesOf(kAttempt)[1].state, wire::ExecutionState::FINISHED);
  std::map<std::string, std::string> env = driver().environmentOf(kAttempt);
  EXPECT_EQ(env["REGENT_TASK_JOB_ID"], kJob.toHex());
  EXPECT_EQ(env["REGENT_TASK_JOB_NAME"], "nightly report");
  EXPECT_EQ(env["REGENT_TASK_VERTEX"], "from-the-graph");
  EXPECT_EQ(env["REGENT_TASK_SUBTASK_INDEX"], "1");
  EXPECT_EQ(env["REGENT_TASK_PARALLELISM"], "2");
  EXPECT_EQ(env["REGENT_TASK_ATTEMPT_ID"], kAttempt.toHex());
  EXPECT_EQ(env["REGENT_TASK_ATTEMPT_NUMBER"], "3");
  EXPECT_EQ(env["OWN"], "1");
}

TEST_P(TaskExecutorRunnerTest, AFailingTaskIsReportedFailedWithItsExitCode) {
  TaskExecutor& executor = startWithAcceptedSlot(0, kAllocation);
  ASSERT_FALSE(submitTask(1, kAttempt, kAllocation, {"sh", "-c", "exit 3"}));
  driver().letEnd(kAttempt, 3);
  ASSERT_TRUE(waitForUpdates(kAttempt, 2)) << "RUNNING and FAILED";
  auto ended = updatesOf(kAttempt)[1];
  EXPECT_EQ(ended.state, wire::ExecutionState::FAILED);
  EXPECT_EQ(ended.exitCode, 3);
  EXPECT_EQ(ended.failureMessage, "exited with code 3");
  EXPECT_EQ(executor.counters().tasksFailed, 1u);
}

TEST_P(TaskExecutorRunnerTest, CancelTaskEndsTheAttemptCanceled) {
  TaskExecutor& executor = startWithAcceptedSlot(0, kAllocation);
  ASSERT_TRUE(submitRunning(kAttempt, kAllocation));
  EXPECT_EQ(executor.tasksRunning(), 1u);
  EXPECT_FALSE(cancelTask(1, kAttempt));
  ASSERT_TRUE(waitForUpdates(kAttempt, 2)) << "CANCELED";
  EXPECT_EQ(updatesOf(kAttempt)[1].state, wire::ExecutionState::CANCELED);
  EXPECT_EQ(executor.tasksRunning(), 0u);
  EXPECT_FALSE(cancelTask(1, kAttempt)) << "an ended attempt cancels successfully";
  auto unknown = cancelTask(1, kOtherAttempt);
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->which, wire::Failure::NOT_FOUND);
  EXPECT_EQ(executor.slots()[0].allocation, kAllocation) << "the slot stays allocated";
}

TEST_P(TaskExecutorRunnerTest, AWorkerKillingItsTasksToStopAnswersUnavailableToNewSlotsAndTasks) {
  TaskExecutor& executor = startWithAcceptedSlot(0, kAllocation);
  loop_.run(driver().killAll());
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
TEST_P(TaskExecutorRunnerTest, FlushUpdatesResolvesOnceTheKilledTasksUpdatesAreDelivered) {
  TaskExecutor& executor = startWithAcceptedSlot(0, kAllocation);
  ASSERT_TRUE(submitRunning(kAttempt, kAllocation));
  loop_.run(driver().killAll());
  loop_.run(executor.flushUpdates(Duration(10000)));
  ASSERT_EQ(updatesOf(kAttempt).size(), 2u);
  EXPECT_EQ(updatesOf(kAttempt)[1].state, wire::ExecutionState::CANCELED);
  loop_.run(executor.flushUpdates(Duration(10000)));  // Nothing pending: at once.
}

}  // namespace
}  // namespace regent::taskexecutor

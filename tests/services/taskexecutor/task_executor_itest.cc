// TaskExecutor with its attempts run as real processes by a ProcessTaskRunner (under the real
// regent-task-shim), against the in-process fake leading master of task_executor_test_util.h: the
// behaviours that hold whatever runs the attempts (task_executor_runner_cases.cc: a task's updates
// in order, its environment, an exit code, cancelTask, the worker killing its tasks to stop), with
// real commands. The same behaviours with the fake runner, and the TaskExecutor's logic without
// processes: task_executor_test.cc.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "services/taskexecutor/process_task_runner.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/services/taskexecutor/attempts_dir_test_util.h"
#include "tests/services/taskexecutor/task_executor_test_util.h"

namespace regent::taskexecutor {
namespace {

// Tasks run through a real ProcessTaskRunner (regent-task-shim next to the test binary), their
// attempts under a temporary directory; a command ends by itself.
class ProcessTaskRunnerDriver final : public TaskRunnerDriver {
 public:
  ~ProcessTaskRunnerDriver() noexcept override = default;

  kj::Own<TaskRunner> makeRunner(EventLoop& loop) override {
    ProcessTaskRunnerOptions options;
    options.attemptsDir = dir_.path() + "/attempts";
    attemptsFd_ = regent::testing::openAttemptsDirForTests(options.attemptsDir);
    options.attemptsFd = attemptsFd_.get();
    options.cancelTimeout = Duration(2000);
    auto runner = kj::heap<ProcessTaskRunner>(loop, loop.timer(), std::move(options));
    process_ = runner.get();
    return runner;
  }

  void letEnd(const AttemptId&, int32_t) override {}

  // Writes its environment to a file named by its attempt id.
  std::vector<std::string> environmentCommand() override {
    return {"sh", "-c", "env > " + dir_.path() + "/\"$REGENT_TASK_ATTEMPT_ID\""};
  }

  std::map<std::string, std::string> environmentOf(const AttemptId& attempt) override {
    std::ifstream file(dir_.path() + "/" + attempt.toHex());
    std::vector<std::string> lines;
    for (std::string line; std::getline(file, line);) lines.push_back(line);
    return environmentFrom(lines);
  }

  kj::Promise<void> killAll() override { return process_->killAll(); }

 private:
  testing::TempDir dir_{"task-executor-itest"};  // Outlives the runner (the fixture's).
  kj::AutoCloseFd attemptsFd_;                   // The runner holds its own duplicate.
  ProcessTaskRunner* process_ = nullptr;         // Owned by the fixture's runner_.
};

INSTANTIATE_TEST_SUITE_P(
    Process, TaskExecutorRunnerTest,
    ::testing::Values(driverFactoryOf<ProcessTaskRunnerDriver>("ProcessTaskRunner")),
    taskRunnerName);

}  // namespace
}  // namespace regent::taskexecutor

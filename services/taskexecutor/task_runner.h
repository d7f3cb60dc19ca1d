// What runs a worker's subtask attempts for its TaskExecutor (task_executor.h): the TaskRunner
// interface and the updates it reports. regent-worker's is the ProcessTaskRunner
// (process_task_runner.h: child processes under regent-task-shim); the slot benchmark's simulated
// workers use the NoTaskRunner below; unit tests use a fake
// (tests/services/taskexecutor/fake_task_runner_test_util.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/result.h"

namespace regent::taskexecutor {

// What to run for one attempt (from wire::TaskDeployment).
struct TaskSpec {
  AttemptId attempt;
  JobId job;
  std::vector<std::string> argv;  // Non-empty.
  std::vector<std::string> env;   // "NAME=value", on top of the base environment (later wins).
  std::string workingDir;         // Empty: the attempt's directory; relative: below it.
};

enum class TaskPhase { kRunning, kFinished, kFailed, kCanceled };

// One state change of an attempt, in order: kRunning once (unless it could not start), then
// exactly one terminal phase.
struct TaskUpdate {
  AttemptId attempt;
  TaskPhase phase = TaskPhase::kRunning;
  uint32_t pid = 0;         // The shim's pid (the group's id); set from kRunning on.
  int32_t exitCode = 0;     // kFinished / kFailed by exit.
  int32_t termSignal = 0;   // kFailed / kCanceled by a signal, 0 = none.
  std::string message;      // kFailed: "exited with code 3", "killed by signal 9 (Killed)",
                            // "cannot execute /x: No such file or directory (errno 2)", ...
  int64_t startedAtMs = 0;  // Unix ms.
  int64_t endedAtMs = 0;    // Unix ms, terminal phases.
  // Terminal phases: why a stream of the attempt's output is incomplete, empty when it is whole:
  // "truncated at 67108864 bytes (worker.attempt-output.max)", "capture failed after 4096 bytes:
  // No space left on device (errno 28)".
  std::string stdoutProblem;
  std::string stderrProblem;
  // kFailed before running: the worker could not start the attempt for want of its own resources
  // (file descriptors, processes, memory: EMFILE, ENFILE, EAGAIN, ENOMEM), a fault of the worker
  // and not of the task.
  bool workerFault = false;
};

// "stdout truncated at ...; stderr capture failed ...", or empty when the output is whole.
std::string outputProblems(const TaskUpdate& update);

// "RUNNING", "FINISHED", "FAILED", "CANCELED" (for logs and the HTTP header).
const char* phaseName(TaskPhase phase);

// What the TaskExecutor needs of whatever runs its attempts. Loop-thread only. `onUpdate`
// callbacks may call start() and cancel() but must not destroy the runner.
class TaskRunner {
 public:
  using OnUpdate = std::function<void(const TaskUpdate&)>;

  virtual ~TaskRunner() noexcept = default;

  // Whether this runner runs anything. false (the NoTaskRunner): the TaskExecutor offers no slot
  // (an allocation is recorded and reported only) and answers submitTask failedPrecondition.
  virtual bool runsTasks() const { return true; }
  // Starts the attempt. `onUpdate` is called later, never from inside start, for kRunning and
  // the terminal phase, so that every accepted attempt ends with exactly one terminal update.
  // Error when `spec.attempt` is already known, while stopping(), or while unusableReason().
  virtual Status start(const TaskSpec& spec, OnUpdate onUpdate) = 0;
  // Cancels a running attempt; its terminal update is kCanceled (or the phase it reached first).
  // No-op for ended or unknown attempts.
  virtual void cancel(const AttemptId& attempt) = 0;
  // Whether the runner kills its attempts for the worker's exit: start() refuses from then on.
  virtual bool stopping() const = 0;
  // The attempt's latest update (kRunning while running), or nullopt when unknown (or forgotten).
  virtual std::optional<TaskUpdate> latest(const AttemptId& attempt) const = 0;
  // Why the runner cannot start attempts now, or nullopt.
  virtual const std::optional<std::string>& unusableReason() const = 0;
};

// Runs no tasks: the slot benchmark's simulated workers, which only register and hold slots.
class NoTaskRunner final : public TaskRunner {
 public:
  bool runsTasks() const override { return false; }
  Status start(const TaskSpec& spec, OnUpdate onUpdate) override;
  void cancel(const AttemptId&) override {}
  bool stopping() const override { return false; }
  std::optional<TaskUpdate> latest(const AttemptId&) const override { return std::nullopt; }
  const std::optional<std::string>& unusableReason() const override { return usable_; }

 private:
  std::optional<std::string> usable_;
};

}  // namespace regent::taskexecutor

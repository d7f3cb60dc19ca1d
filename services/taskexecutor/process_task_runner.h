// The ProcessTaskRunner: the TaskRunner (task_runner.h) of regent-worker, a worker's child
// processes, one per subtask attempt (docs/workers.md, "Tasks").
// Each attempt runs under regent-task-shim (services/taskexecutor/task_shim.cc), spawned with
// the loop's child-process support, in a session and process group of its own:
//
//   <worker.data-dir>/attempts/<attempt id>/   the attempt's directory (its default working dir)
//       stdout, stderr                          the task's output, appended as it is written
//
// The shim sets PR_SET_PDEATHSIG so that a worker that dies (even by SIGKILL) takes the whole
// group with it, changes directory (a relative working directory is taken from the attempt's
// directory), and execs the command (argv[0] looked up in the task's own PATH); what it could not
// do (no such working directory, not found on PATH, no such file, not executable) fails the
// attempt with a message naming the path and errno. When the worker runs as root the shim runs as
// worker.task-user (uid, primary gid, no supplementary groups).
//
// Environment: the shim and the task get the options' base environment (PATH, the task user's
// HOME, USER and LOGNAME, the worker's LANG and TZ: taskEnvironment()) with the TaskSpec's env on
// top, and nothing else of the worker's: not its REGENT_* configuration, not its secrets.
//
// Output: the shim copies the command's stdout and stderr into the attempt's files, at most
// outputMax bytes of each; what it dropped or could not write (a full disk) is the terminal
// update's stdoutProblem / stderrProblem.
//
// Cancel: SIGTERM to the group, SIGKILL to the group after worker.task-cancel-timeout if any of
// it is left. When the main process ends on its own, whatever it left in the group gets the same
// treatment, so nothing of an ended attempt outlives it. Ended attempts' directories beyond
// worker.attempts.retain are removed, oldest first, off the loop thread.
//
// Every file operation under `attempts` goes through the descriptor the runner holds (mkdirat,
// openat, fchown, unlinkat, fstatat; O_NOFOLLOW / AT_SYMLINK_NOFOLLOW), never by path, so a link
// put in place of `attempts` or of anything in an attempt's directory redirects none of them. The
// path is given to the shim alone (its working directory), which runs as the task user. Once the
// runner cannot create an attempt's directory (the directory at the path is no longer the one
// held, or mkdir fails), it is unusable: it says why (unusableReason), the worker reports not
// ready and refuses new work, and it checks again every second until it can (a replaced
// directory: until the worker restarts).
#pragma once

#include <kj/async.h>
#include <kj/timer.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/result.h"
#include "common/time.h"
#include "services/taskexecutor/loop_stall_watch.h"
#include "services/taskexecutor/task_runner.h"

namespace regent {
class EventLoop;
}

namespace regent::taskexecutor {

// worker.task-path's default: the PATH of a task whose job's env sets none.
inline constexpr const char* kDefaultTaskPath = "/usr/local/bin:/usr/bin:/bin";

class TaskContainment;

struct ProcessTaskRunnerOptions {
  std::string attemptsDir;  // <worker.data-dir>/attempts, for the shim and messages.
  // The attempts directory, open (O_DIRECTORY, opened without following a link; the worker's data
  // directory opens it at start). Required; the runner keeps a duplicate.
  int attemptsFd = -1;
  std::string shimPath;  // regent-task-shim; by default next to the running executable.
  // Set when the worker runs as root: the user tasks run as (worker.task-user, resolved once at
  // start by resolveTaskUser()).
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
  Duration cancelTimeout{5000};  // worker.task-cancel-timeout
  size_t retainAttempts = 100;   // worker.attempts.retain
  // The environment every task (and its shim) starts from, "NAME=value"; the TaskSpec's env goes
  // on top. The worker's is taskEnvironment(); nothing else of the worker's own reaches a task.
  std::vector<std::string> baseEnv{std::string("PATH=") + kDefaultTaskPath};
  uint64_t outputMax = uint64_t{64} << 20;  // worker.attempt-output.max, bytes per stream.
  std::function<int64_t()> nowMs;           // Unix ms; null: wallClockMillis().
  // Each attempt's cgroup or subreaper shim (task_containment.h), shared: work on the thread pool
  // may outlive the runner. Null: the process group alone contains an attempt.
  std::shared_ptr<const TaskContainment> containment;
  // The worker's loop stall watch (loop_stall_watch.h), which must outlive the runner: an
  // attempt whose start a stall of the loop overtook (accepted before the worker was stopped,
  // started after it ran again) is not started but FAILS as a worker fault, since its JobMaster
  // may have given it up and run it elsewhere meanwhile. Null: none.
  const LoopStallWatch* stalls = nullptr;
};

// worker.task-user / worker.task-allow-root resolved for a worker running with `euid`: uid and
// gid to run tasks as, or nullopt/nullopt when the worker is not root (tasks run as the worker's
// own user). A fatal Error naming the option for an unknown user, or for root without
// allowRoot. Reads the user database (getpwnam_r): call at start, not on the loop.
struct TaskUser {
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
  std::string name;  // for the start-up log line, and the tasks' USER and LOGNAME
  std::string home;  // the user's home directory (the tasks' HOME); empty when unknown
};
Result<TaskUser> resolveTaskUser(const std::string& user, bool allowRoot, uid_t euid);

// The base environment of tasks run as `user` (ProcessTaskRunnerOptions::baseEnv): PATH=`path`
// (worker.task-path), HOME, USER and LOGNAME of the user (when known), and LANG and TZ when the
// worker's own environment has them. Nothing else of the worker's environment.
std::vector<std::string> taskEnvironment(const TaskUser& user, const std::string& path);

// Loop-thread only. `loop` and `timer` must outlive it. Destroying it kills every group still
// running (SIGKILL) without waiting, and reports nothing more; use killAll() first for an orderly
// exit. `onUpdate` callbacks may call start() and cancel() but must not destroy the runner; an
// exception they throw is logged and dropped.
//
// A terminal update comes once the attempt's group is empty or got SIGKILL (at most
// cancelTimeout after the command ended, when it left processes behind that ignore SIGTERM).
//
// WARNING: PR_SET_PDEATHSIG fires when the *thread* that spawned the shim ends, so the runner
// must live on a thread that lasts as long as the process (the worker's loop thread does). A
// process that leaves the group (setsid, setpgid) escapes cancel and PDEATHSIG alike unless
// options.containment holds the attempt (its cgroup is killed whole once the group is gone).
class ProcessTaskRunner final : public TaskRunner {
 public:
  ProcessTaskRunner(EventLoop& loop, kj::Timer& timer, ProcessTaskRunnerOptions options);
  ~ProcessTaskRunner() noexcept override;
  ProcessTaskRunner(const ProcessTaskRunner&) = delete;
  ProcessTaskRunner& operator=(const ProcessTaskRunner&) = delete;

  // Starts the attempt: creates its directory and output files, spawns the shim. `onUpdate` is
  // called (later, never from inside start) for kRunning and the terminal phase; a spawn that
  // fails at once still reports kFailed through `onUpdate` (never an Error here), so every
  // accepted attempt ends with exactly one terminal update. Error only when `spec.attempt` is
  // already known (running or ended and retained), after killAll() (the worker is stopping), or
  // while unusable (unusableReason()).
  Status start(const TaskSpec& spec, OnUpdate onUpdate) override;
  // Cancels a running attempt (SIGTERM, SIGKILL after cancelTimeout); its terminal update is
  // kCanceled (or the phase it reached first). No-op for ended or unknown attempts.
  void cancel(const AttemptId& attempt) override;
  // Cancels every running attempt and resolves once all their shims exited (bounded by
  // cancelTimeout plus a second). For the worker's exit: from then on start() refuses.
  kj::Promise<void> killAll();
  // Whether killAll() was called.
  bool stopping() const override;

  bool running(const AttemptId& attempt) const;
  size_t runningCount() const;
  // The attempt's output files (running or retained), or nullopt when unknown or pruned.
  std::optional<std::string> stdoutPath(const AttemptId& attempt) const;
  std::optional<std::string> stderrPath(const AttemptId& attempt) const;
  // The attempt's latest update (kRunning while running), or nullopt when unknown or pruned.
  std::optional<TaskUpdate> latest(const AttemptId& attempt) const override;
  // Why the runner cannot start attempts (their directories cannot be created), or nullopt.
  const std::optional<std::string>& unusableReason() const override;

 private:
  struct Attempt;
  struct State;
  kj::Own<State> state_;
};

}  // namespace regent::taskexecutor

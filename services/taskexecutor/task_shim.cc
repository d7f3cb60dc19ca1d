// regent-task-shim: what a worker runs for each task attempt (docs/workers.md, "Tasks"). It ties
// the attempt's process group to the worker's life, starts the command, and ends the way the
// command ended. libc only, so that it execs fast.
//
//   regent-task-shim --parent-pid PID [--cwd DIR] [--status-fd FD] [--hold] [--kill-fd FD]
//                    [--subreaper --kill-after-ms MS] -- COMMAND [ARG]...
//
// The containment options (--hold, --kill-fd, --subreaper) are shim_containment.h's.
//
// The worker spawns it in a new session (it leads the session and the process group, so the
// worker signals the whole attempt with kill(-pid, ...)). The shim
//   1. asks for SIGHUP when its parent dies (PR_SET_PDEATHSIG) and checks that its parent is still
//      PID; once it is not, it SIGKILLs its whole process group, itself included;
//   2. catches SIGTERM with a handler that does nothing, so the group's SIGTERM reaches the
//      command while the shim stays to report (exec restores the default in the command);
//   3. changes to DIR, forks, and the child execs COMMAND (looked up in PATH);
//   4. waits for the child and exits with its exit code, or dies of the signal that killed it.
// What it could not do (the working directory, the exec) it writes as one line to FD and to
// stderr, then exits 127. FD reaches end of file once the command is running (or the shim is
// gone), with nothing written when the command started. The command gets neither FD nor any
// descriptor above stderr.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "services/taskexecutor/shim_containment.h"

namespace {

constexpr int kExitCannotRun = 127;  // As a shell's "command not found".
constexpr int kParentDeathSignal = SIGHUP;

pid_t gParentPid = 0;

void onParentDeathSignal(int) {
  // Also delivered when anything else sends SIGHUP: only an orphaned shim kills its group.
  if (getppid() != gParentPid) {
    regent::shim::containOnParentDeath();
    kill(0, SIGKILL);
  }
}

void ignoreForSelf(int) { regent::shim::containOnTerm(); }

// Writes `line` to the status descriptor and to stderr, then exits 127.
[[noreturn]] void fail(int statusFd, const char* line, size_t length) {
  if (statusFd >= 0 && write(statusFd, line, length) < 0) {
    // Nobody to tell there: stderr below is the last resort.
  }
  if (write(STDERR_FILENO, "regent-task-shim: ", 18) < 0 ||
      write(STDERR_FILENO, line, length) < 0) {
    // The output file is gone; the status descriptor carried the line already.
  }
  _exit(kExitCannotRun);
}

// "<what> <path>: <strerror> (errno N)".
[[noreturn]] void failWithErrno(int statusFd, const char* what, const char* path, int error) {
  char line[4096];
  int length = snprintf(line, sizeof line, "%s%s%s: %s (errno %d)\n", what, path[0] ? " " : "",
                        path, strerror(error), error);
  if (length < 0) length = 0;
  if (static_cast<size_t>(length) >= sizeof line) length = sizeof line - 1;
  fail(statusFd, line, static_cast<size_t>(length));
}

[[noreturn]] void usage(int statusFd, const char* problem, const char* what) {
  char line[4096];
  int length = snprintf(line, sizeof line,
                        "%s%s (usage: regent-task-shim --parent-pid PID [--cwd DIR] "
                        "[--status-fd FD] [--hold] [--kill-fd FD] [--subreaper "
                        "--kill-after-ms MS] -- COMMAND [ARG]...)\n",
                        problem, what);
  if (length < 0) length = 0;
  if (static_cast<size_t>(length) >= sizeof line) length = sizeof line - 1;
  fail(statusFd, line, static_cast<size_t>(length));
}

bool parseInt(const char* text, long& value) {
  char* end = nullptr;
  errno = 0;
  value = strtol(text, &end, 10);
  return errno == 0 && end != text && *end == '\0';
}

void closeDescriptorsFrom(int first) {
  if (close_range(static_cast<unsigned>(first), ~0U, 0) == 0) return;
  long max = sysconf(_SC_OPEN_MAX);
  for (long fd = first; fd < (max > 0 ? max : 65536); ++fd) close(static_cast<int>(fd));
}

// Ends the shim the way the command ended, so that the worker sees the command's own status.
[[noreturn]] void endLike(int status) {
  if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
  const int signum = WTERMSIG(status);
  // The shim must not dump core for a command that did.
  struct rlimit noCore = {0, 0};
  setrlimit(RLIMIT_CORE, &noCore);
  signal(signum, SIG_DFL);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, signum);
  sigprocmask(SIG_UNBLOCK, &only, nullptr);
  raise(signum);
  _exit(128 + signum);  // A signal whose default is not to terminate.
}

}  // namespace

int main(int argc, char** argv) {
  long parentPid = 0, statusFd = -1;
  const char* cwd = nullptr;
  int first = 1;
  regent::shim::ContainmentSetup containment;
  for (; first < argc; ++first) {
    const char* option = argv[first];
    if (strcmp(option, "--") == 0) {
      ++first;
      break;
    }
    const int fd = static_cast<int>(statusFd);
    const int taken = regent::shim::parseContainmentOption(argc, argv, first, containment);
    if (taken < 0) usage(fd, "bad or no value for ", option);
    if (taken > 0) {
      first += taken - 1;
      continue;
    }
    if (first + 1 >= argc) usage(fd, "no value for ", option);
    const char* value = argv[++first];
    if (strcmp(option, "--parent-pid") == 0) {
      if (!parseInt(value, parentPid) || parentPid <= 0) usage(fd, "bad --parent-pid ", value);
    } else if (strcmp(option, "--status-fd") == 0) {
      if (!parseInt(value, statusFd) || statusFd < 0 || statusFd > 1 << 20) {
        usage(-1, "bad --status-fd ", value);
      }
    } else if (strcmp(option, "--cwd") == 0) {
      cwd = value;
    } else {
      usage(fd, "unknown option ", option);
    }
  }
  const int status = static_cast<int>(statusFd);
  if (parentPid == 0) usage(status, "--parent-pid is required", "");
  if (first >= argc) usage(status, "no command after --", "");
  if (status >= 0) fcntl(status, F_SETFD, FD_CLOEXEC);
  if (const char* failed = regent::shim::startContainment(containment)) {
    failWithErrno(status, failed, "", errno);
  }

  // 1. Die with the parent. Checked after asking, since it may have died before.
  gParentPid = static_cast<pid_t>(parentPid);
  struct sigaction action = {};
  sigemptyset(&action.sa_mask);
  action.sa_handler = onParentDeathSignal;
  sigaction(kParentDeathSignal, &action, nullptr);
  if (prctl(PR_SET_PDEATHSIG, kParentDeathSignal) != 0) {
    failWithErrno(status, "prctl(PR_SET_PDEATHSIG)", "", errno);
  }
  if (getppid() != gParentPid) onParentDeathSignal(kParentDeathSignal);

  // 2. SIGTERM is for the command; the shim stays to report how it ended. No SA_RESTART, so
  // the blocking calls below return EINTR and go round again.
  action.sa_handler = ignoreForSelf;
  sigaction(SIGTERM, &action, nullptr);

  // Held until the worker has put the shim in the attempt's cgroup (shim_containment.h).
  if (containment.hold && (status < 0 || !regent::shim::awaitRelease(status))) {
    _exit(kExitCannotRun);
  }

  // 3. The working directory, then the command in a child. The child tells the shim exec's errno
  // over a close-on-exec pipe: end of file without a word means exec succeeded.
  if (cwd != nullptr && cwd[0] != '\0' && chdir(cwd) != 0) {
    failWithErrno(status, "working directory", cwd, errno);
  }
  int execPipe[2];
  if (pipe2(execPipe, O_CLOEXEC) != 0) failWithErrno(status, "pipe", "", errno);
  const pid_t child = fork();
  if (child < 0) failWithErrno(status, "fork", "", errno);
  if (child == 0) {
    // The command starts with default dispositions (exec resets the caught SIGTERM and SIGHUP;
    // PDEATHSIG is not inherited across fork) and an empty signal mask.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (dup2(execPipe[1], 3) < 0) _exit(kExitCannotRun);
    fcntl(3, F_SETFD, FD_CLOEXEC);
    closeDescriptorsFrom(4);
    execvp(argv[first], argv + first);
    const int error = errno;
    if (write(3, &error, sizeof error) < 0) {
      // The shim then sees end of file and reports the exit code 127 below.
    }
    _exit(kExitCannotRun);
  }
  close(execPipe[1]);
  int execError = 0;
  ssize_t n;
  do {
    n = read(execPipe[0], &execError, sizeof execError);
  } while (n < 0 && errno == EINTR);
  close(execPipe[0]);

  int childStatus = 0;
  pid_t waited;
  if (n == static_cast<ssize_t>(sizeof execError)) {
    do {
      waited = waitpid(child, &childStatus, 0);
    } while (waited < 0 && errno == EINTR);
    failWithErrno(status, "cannot execute", argv[first], execError);
  }
  if (status >= 0) close(status);  // The command runs: the worker sees end of file, no words.

  // 4. End as the command ended.
  do {
    waited = waitpid(child, &childStatus, 0);
  } while (waited < 0 && errno == EINTR);
  if (waited < 0) failWithErrno(-1, "waitpid", "", errno);
  regent::shim::endContainment();
  endLike(childStatus);
}

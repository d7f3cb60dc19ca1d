// regent-task-shim: what a worker runs for each task attempt (docs/workers.md, "Tasks"). It ties
// the attempt's process group to the worker's life, starts the command, and ends the way the
// command ended. libc only, so that it execs fast.
//
//   regent-task-shim --parent-pid PID [--cwd DIR] [--status-fd FD]
//                    [--output-max BYTES --report-fd FD] [--hold] [--kill-fd FD]
//                    [--subreaper --kill-after-ms MS] -- COMMAND [ARG]...
//
// The containment options (--hold, --kill-fd, --subreaper) are shim_containment.h's.
//
// The worker spawns it in a new session (it leads the session and the process group, so the
// worker signals the whole attempt with kill(-pid, ...)), with the task's environment only. The
// shim
//   1. asks for SIGHUP when its parent dies (PR_SET_PDEATHSIG) and checks that its parent is still
//      PID; once it is not, it SIGKILLs its whole process group, itself included;
//   2. catches SIGTERM with a handler that does nothing, so the group's SIGTERM reaches the
//      command while the shim stays to report (exec restores the default in the command);
//   3. changes to DIR, looks COMMAND up in its own PATH when it has no '/' (as the task user:
//      directories it cannot search are skipped), forks, and the child execs it;
//   4. with --output-max: copies the command's stdout and stderr (pipes) to its own (the
//      attempt's files), at most BYTES of each; what goes beyond, or what cannot be written (a
//      full disk), is read and dropped, and said on the report descriptor at the end, one line per
//      stream ("stdout truncated at N bytes", "stderr capture failed after N bytes: <strerror>
//      (errno N)"). Once the command exited, what its pipes still hold is copied and the shim
//      ends: a process the command left behind loses its output (it is killed by the worker);
//   5. waits for the command and exits with its exit code, or dies of the signal that killed it.
// What it could not do (the working directory, a command not found on PATH, the exec) it writes
// as one line to the status FD and to stderr, then exits 127. The status FD reaches end of file
// once the command is running (or the shim is gone), with nothing written when the command
// started. The command gets neither descriptor nor any descriptor above stderr.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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
                        "[--status-fd FD] [--output-max BYTES --report-fd FD] [--hold] "
                        "[--kill-fd FD] [--subreaper --kill-after-ms MS] -- COMMAND [ARG]...)\n",
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

// ---- 3. The command on PATH ----------------------------------------------------------------------

// Where COMMAND is: itself when it holds a '/', else the first regular file of that name in a
// directory of PATH that the task user may execute (written to `found`). Directories the task
// user cannot search, and names that are not there, are skipped, as a shell does; an entry it
// may not execute is remembered and reported only when nothing further on PATH fits. Fails with
// the status line written: "<cmd>: not found on PATH (<PATH>)".
void resolveCommand(int statusFd, const char* command, char* found, size_t size) {
  if (strchr(command, '/') != nullptr) {
    snprintf(found, size, "%s", command);
    return;
  }
  const char* path = getenv("PATH");
  char denied[4096] = "";
  if (command[0] != '\0' && path != nullptr) {
    for (const char* dir = path;; ++dir) {
      const char* end = strchrnul(dir, ':');
      const int length = static_cast<int>(end - dir);
      char candidate[4096];
      // An empty entry is the working directory, as for execvp.
      const int n = snprintf(candidate, sizeof candidate, "%.*s%s%s", length, dir,
                             length == 0 ? "./" : "/", command);
      struct stat info {};
      if (n > 0 && static_cast<size_t>(n) < sizeof candidate && stat(candidate, &info) == 0 &&
          S_ISREG(info.st_mode)) {
        if (access(candidate, X_OK) == 0) {
          snprintf(found, size, "%s", candidate);
          return;
        }
        if (denied[0] == '\0') snprintf(denied, sizeof denied, "%s", candidate);
      }
      if (*end == '\0') break;
      dir = end;
    }
  }
  if (denied[0] != '\0') failWithErrno(statusFd, "cannot execute", denied, EACCES);
  char line[4096];
  int length = snprintf(line, sizeof line, "%s: not found on PATH (%s)\n", command,
                        path == nullptr ? "PATH is not set" : path);
  if (length < 0) length = 0;
  if (static_cast<size_t>(length) >= sizeof line) length = sizeof line - 1;
  fail(statusFd, line, static_cast<size_t>(length));
}

// ---- 4. The command's output ----------------------------------------------------------------------

// One of the command's streams on its way from a pipe to the shim's own descriptor (the file).
struct Stream {
  const char* name;  // "stdout", "stderr"
  int from = -1;     // Read end of the command's pipe; -1 once at end of file.
  int to = -1;       // STDOUT_FILENO or STDERR_FILENO.
  unsigned long long written = 0;
  bool truncated = false;
  int writeError = 0;  // The first write that failed; nothing is written after it.
};

void copyOut(Stream& stream, const char* bytes, size_t size, unsigned long long max) {
  if (stream.writeError != 0) return;
  if (stream.written + size > max) {
    size = static_cast<size_t>(max - stream.written);
    stream.truncated = true;
  }
  while (size > 0) {
    const ssize_t n = write(stream.to, bytes, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      stream.writeError = n < 0 ? errno : EIO;
      return;
    }
    stream.written += static_cast<unsigned long long>(n);
    bytes += n;
    size -= static_cast<size_t>(n);
  }
}

enum class Pumped { kData, kEmpty, kClosed };

// Reads what `stream`'s pipe holds now (one read); closes it at end of file or on an error.
Pumped pump(Stream& stream, unsigned long long max) {
  char buffer[65536];
  ssize_t n;
  do {
    n = read(stream.from, buffer, sizeof buffer);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    copyOut(stream, buffer, static_cast<size_t>(n), max);
    return Pumped::kData;
  }
  if (n < 0 && errno == EAGAIN) return Pumped::kEmpty;
  close(stream.from);
  stream.from = -1;
  return Pumped::kClosed;
}

// Whether the command `child` exited (without reaping it).
bool exitedWithoutPidfd(pid_t child) {
  siginfo_t info {};
  return waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == child;
}

// Copies both streams until the command `child` exited, then what their pipes still hold.
void pumpUntilExit(Stream* streams, pid_t child, unsigned long long max) {
  const int exited = static_cast<int>(syscall(SYS_pidfd_open, child, 0));
  for (;;) {
    struct pollfd fds[3];
    nfds_t count = 0;
    for (int i = 0; i < 2; ++i) {
      if (streams[i].from >= 0) fds[count++] = {streams[i].from, POLLIN, 0};
    }
    const nfds_t watching = count;
    if (exited >= 0) fds[count++] = {exited, POLLIN, 0};
    // Without a pidfd (a kernel before 5.3), the child's exit is polled for.
    const int ready = poll(fds, count, exited >= 0 ? -1 : 100);
    if (ready < 0 && errno != EINTR) break;
    if (ready > 0) {
      for (nfds_t f = 0; f < watching; ++f) {
        if (fds[f].revents == 0) continue;
        for (int i = 0; i < 2; ++i) {
          if (streams[i].from == fds[f].fd) pump(streams[i], max);
        }
      }
    }
    const bool gone = exited >= 0 ? ready > 0 && (fds[watching].revents & POLLIN) != 0
                                  : exitedWithoutPidfd(child);
    if (gone || (streams[0].from < 0 && streams[1].from < 0)) break;
  }
  // The rest, without waiting: a process the command left holding a pipe writes no more here.
  for (int i = 0; i < 2; ++i) {
    if (streams[i].from < 0) continue;
    fcntl(streams[i].from, F_SETFL, fcntl(streams[i].from, F_GETFL) | O_NONBLOCK);
    while (pump(streams[i], max) == Pumped::kData) {
    }
    if (streams[i].from >= 0) close(streams[i].from);
    streams[i].from = -1;
  }
  if (exited >= 0) close(exited);
}

// One line per stream whose capture is incomplete, to `reportFd`.
void report(int reportFd, const Stream* streams) {
  for (int i = 0; i < 2; ++i) {
    const Stream& stream = streams[i];
    char line[512];
    int length = 0;
    if (stream.writeError != 0) {
      length = snprintf(line, sizeof line, "%s capture failed after %llu bytes: %s (errno %d)\n",
                        stream.name, stream.written, strerror(stream.writeError),
                        stream.writeError);
    } else if (stream.truncated) {
      length = snprintf(line, sizeof line, "%s truncated at %llu bytes\n", stream.name,
                        stream.written);
    }
    if (length <= 0) continue;
    if (static_cast<size_t>(length) >= sizeof line) length = sizeof line - 1;
    // MSG_NOSIGNAL: a worker that is gone must not kill the shim with SIGPIPE before it ends
    // like the command (ignoring SIGPIPE instead would be inherited by the command).
    if (send(reportFd, line, static_cast<size_t>(length), MSG_NOSIGNAL) < 0 && errno == ENOTSOCK &&
        write(reportFd, line, static_cast<size_t>(length)) < 0) {
      // Nobody to tell.
    }
  }
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
  long parentPid = 0, statusFd = -1, reportFd = -1;
  long long outputMax = -1;  // -1: the command writes to the shim's stdout and stderr itself.
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
    } else if (strcmp(option, "--report-fd") == 0) {
      if (!parseInt(value, reportFd) || reportFd < 3 || reportFd > 1 << 20) {
        usage(fd, "bad --report-fd ", value);
      }
    } else if (strcmp(option, "--output-max") == 0) {
      char* end = nullptr;
      errno = 0;
      outputMax = strtoll(value, &end, 10);
      if (errno != 0 || end == value || *end != '\0' || outputMax < 0) {
        usage(fd, "bad --output-max ", value);
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
  if ((outputMax >= 0) != (reportFd >= 0)) {
    usage(status, "--output-max and --report-fd go together", "");
  }
  if (status >= 0) fcntl(status, F_SETFD, FD_CLOEXEC);
  if (reportFd >= 0) fcntl(static_cast<int>(reportFd), F_SETFD, FD_CLOEXEC);
  // The command runs as the same user: it must not be able to trace the shim (and write to its
  // status and report descriptors). exec makes the command itself dumpable again.
  prctl(PR_SET_DUMPABLE, 0);
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

  // 3. The working directory, the command on PATH, then the command in a child. The child tells
  // the shim exec's errno over a close-on-exec pipe: end of file without a word means exec
  // succeeded.
  if (cwd != nullptr && cwd[0] != '\0' && chdir(cwd) != 0) {
    failWithErrno(status, "working directory", cwd, errno);
  }
  char command[4096];
  resolveCommand(status, argv[first], command, sizeof command);
  Stream streams[2] = {{"stdout", -1, STDOUT_FILENO}, {"stderr", -1, STDERR_FILENO}};
  int outputPipes[2][2] = {{-1, -1}, {-1, -1}};
  if (outputMax >= 0) {
    for (int i = 0; i < 2; ++i) {
      if (pipe2(outputPipes[i], O_CLOEXEC) != 0) failWithErrno(status, "pipe", "", errno);
      streams[i].from = outputPipes[i][0];
    }
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
    if (outputMax >= 0 && (dup2(outputPipes[0][1], STDOUT_FILENO) < 0 ||
                           dup2(outputPipes[1][1], STDERR_FILENO) < 0)) {
      _exit(kExitCannotRun);
    }
    if (dup2(execPipe[1], 3) < 0) _exit(kExitCannotRun);
    fcntl(3, F_SETFD, FD_CLOEXEC);
    closeDescriptorsFrom(4);
    // A path with a '/' is not looked up again; execvp still runs a script without "#!" with
    // /bin/sh.
    execvp(command, argv + first);
    const int error = errno;
    if (write(3, &error, sizeof error) < 0) {
      // The shim then sees end of file and reports the exit code 127 below.
    }
    _exit(kExitCannotRun);
  }
  close(execPipe[1]);
  for (auto& pipe : outputPipes) {
    if (pipe[1] >= 0) close(pipe[1]);
  }
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
    failWithErrno(status, "cannot execute", command, execError);
  }
  if (status >= 0) close(status);  // The command runs: the worker sees end of file, no words.

  // 4. The command's output, until it exited.
  if (outputMax >= 0) {
    pumpUntilExit(streams, child, static_cast<unsigned long long>(outputMax));
    report(static_cast<int>(reportFd), streams);
    close(static_cast<int>(reportFd));
  }

  // 5. End as the command ended.
  do {
    waited = waitpid(child, &childStatus, 0);
  } while (waited < 0 && errno == EINTR);
  if (waited < 0) failWithErrno(-1, "waitpid", "", errno);
  regent::shim::endContainment();
  endLike(childStatus);
}

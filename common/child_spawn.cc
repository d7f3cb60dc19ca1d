// cloneAndExec (child_spawn.h): the child runs in the parent's memory until it execs, so it
// touches only what the parent prepared and calls only system calls: no allocation, no locks,
// no sanitizer instrumentation (its stack is not one the sanitizers know), credentials changed
// with the raw system calls (the C library's setuid() would change every thread of the parent).
#include "common/child_spawn.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace regent {
namespace {

// What the child reads, and the two fields it writes for the parent (which sees them once clone
// returns: CLONE_VFORK suspends the parent until the child exec'd or exited).
struct ChildArgs {
  char* const* candidates;
  size_t candidateCount;
  char* const* argv;
  char* const* envp;
  int* fds;  // The child's copy of the plan's descriptors; rewritten as they move.
  size_t fdCount;
  const char* cwd;  // nullptr: unchanged.
  bool newSession;
  bool hasUid;
  uid_t uid;
  bool hasGid;
  gid_t gid;
  int error;         // Set by the child when it fails.
  const char* step;  // Set with it.
};

// The stack the child runs on until it execs.
constexpr size_t kChildStackSize = 64 * 1024;

#define REGENT_CHILD_CODE __attribute__((no_sanitize("address", "undefined"), noinline))

[[noreturn]] REGENT_CHILD_CODE void childFailed(ChildArgs* args, const char* step) {
  args->error = errno;
  args->step = step;
  _exit(127);
}

REGENT_CHILD_CODE int childMain(void* raw) {
  auto* args = static_cast<ChildArgs*>(raw);
  if (args->newSession && setsid() < 0) childFailed(args, "setsid");

  // /dev/null where no descriptor is given (stdin always).
  for (size_t i = 0; i < args->fdCount; ++i) {
    if (args->fds[i] >= 0) continue;
    const int fd = open("/dev/null", (i == 0 ? O_RDONLY : O_RDWR) | O_CLOEXEC);
    if (fd < 0) childFailed(args, "open /dev/null");
    args->fds[i] = fd;
  }
  // A source that sits where another one must go is moved above them all first.
  for (size_t i = 0; i < args->fdCount; ++i) {
    const int fd = args->fds[i];
    if (fd < static_cast<int>(args->fdCount) && fd != static_cast<int>(i)) {
      const int moved = fcntl(fd, F_DUPFD_CLOEXEC, static_cast<int>(args->fdCount));
      if (moved < 0) childFailed(args, "dup");
      for (size_t j = i; j < args->fdCount; ++j) {
        if (args->fds[j] == fd) args->fds[j] = moved;
      }
    }
  }
  for (size_t i = 0; i < args->fdCount; ++i) {
    const int target = static_cast<int>(i);
    if (args->fds[i] == target) {
      if (fcntl(target, F_SETFD, 0) < 0) childFailed(args, "fcntl");
    } else if (dup2(args->fds[i], target) < 0) {
      childFailed(args, "dup2");
    }
    if (target <= 2) {
      // Standard streams start blocking, whatever the parent's end was set to.
      const int flags = fcntl(target, F_GETFL);
      if (flags >= 0 && (flags & O_NONBLOCK) != 0) fcntl(target, F_SETFL, flags & ~O_NONBLOCK);
    }
  }
  if (args->cwd != nullptr && chdir(args->cwd) < 0) childFailed(args, "chdir");
  if (args->hasUid || args->hasGid) {
    // Without root there are no groups to drop (EPERM); as root this must succeed.
    if (syscall(SYS_setgroups, 0, nullptr) < 0 && errno != EPERM) childFailed(args, "setgroups");
    if (args->hasGid && syscall(SYS_setgid, args->gid) < 0) childFailed(args, "setgid");
    if (args->hasUid && syscall(SYS_setuid, args->uid) < 0) childFailed(args, "setuid");
  }
  // Every signal back to its default, then none blocked (the parent blocked them all around
  // clone, so no handler of the parent ran here).
  for (int signum = 1; signum < 32; ++signum) {
    if (signum == SIGKILL || signum == SIGSTOP) continue;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = SIG_DFL;
    sigaction(signum, &action, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);

  // As execvp does: a candidate that is missing or not searchable lets the next one be tried;
  // EACCES is reported if no candidate ran and one was not executable.
  bool denied = false;
  for (size_t i = 0; i < args->candidateCount; ++i) {
    execve(args->candidates[i], args->argv, args->envp);
    switch (errno) {
      case EACCES:
        denied = true;
        break;
      case ENOENT:
      case ENOTDIR:
      case ESTALE:
      case ENODEV:
      case ETIMEDOUT:
        break;
      default:
        childFailed(args, "exec");
    }
  }
  errno = denied ? EACCES : ENOENT;
  childFailed(args, "exec");
}

std::vector<char*> pointersTo(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (auto& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

}  // namespace

std::vector<std::string> execCandidates(const std::string& program, const char* path) {
  if (program.find('/') != std::string::npos) return {program};
  const std::string searched = path != nullptr ? path : "/bin:/usr/bin";
  std::vector<std::string> candidates;
  size_t start = 0;
  while (true) {
    const size_t end = searched.find(':', start);
    std::string dir = searched.substr(start, end == std::string::npos ? end : end - start);
    // An empty entry is the working directory, as for execvp.
    candidates.push_back(dir.empty() ? program : dir + "/" + program);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return candidates;
}

std::variant<ClonedChild, SpawnFailure> cloneAndExec(ExecPlan plan) {
  std::vector<char*> candidatePointers = pointersTo(plan.candidates);
  std::vector<char*> argvPointers = pointersTo(plan.argv);
  std::vector<char*> envPointers = pointersTo(plan.envp);
  ChildArgs args{};
  args.candidates = candidatePointers.data();
  args.candidateCount = plan.candidates.size();
  args.argv = argvPointers.data();
  args.envp = envPointers.data();
  args.fds = plan.fds.data();  // The child rewrites them as they move: the plan is its own.
  args.fdCount = plan.fds.size();
  args.cwd = plan.cwd.empty() ? nullptr : plan.cwd.c_str();
  args.newSession = plan.newSession;
  args.hasUid = plan.uid.has_value();
  args.uid = plan.uid.value_or(0);
  args.hasGid = plan.gid.has_value();
  args.gid = plan.gid.value_or(0);

  void* stack = mmap(nullptr, kChildStackSize, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return SpawnFailure{errno, "mmap"};
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &previous);
  int pidfd = -1;
  const pid_t pid = clone(childMain, static_cast<char*>(stack) + kChildStackSize,
                          CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD, &args, &pidfd);
  const int cloneError = errno;
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  munmap(stack, kChildStackSize);
  if (pid < 0) return SpawnFailure{cloneError, "clone"};
  if (args.error != 0) {
    // The child failed before exec and has exited: reap it.
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    close(pidfd);
    return SpawnFailure{args.error, args.step};
  }
  return ClonedChild{pid, pidfd};
}

}  // namespace regent

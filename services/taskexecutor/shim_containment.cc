// regent-task-shim's containment (see shim_containment.h). The descendant scan reads /proc with
// raw system calls into static buffers, so that signal handlers may run it; the main path blocks
// the shim's signals while it scans.
#include "services/taskexecutor/shim_containment.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

namespace regent::shim {
namespace {

ContainmentSetup gSetup;

constexpr int kMaxProcesses = 1 << 16;
pid_t gPid[kMaxProcesses];
pid_t gParent[kMaxProcesses];
char gState[kMaxProcesses];
bool gDescendant[kMaxProcesses];

bool parseLong(const char* text, long& value) {
  char* end = nullptr;
  errno = 0;
  value = strtol(text, &end, 10);
  return errno == 0 && end != text && *end == '\0';
}

// Reads /proc/<pid>/stat's state and parent. Async-signal-safe.
bool readStat(pid_t pid, char& state, pid_t& parent) {
  char path[64] = "/proc/";
  char digits[16];
  int n = 0;
  for (pid_t p = pid; p > 0 && n < 15; p /= 10) digits[n++] = static_cast<char>('0' + p % 10);
  size_t at = 6;
  while (n > 0) path[at++] = digits[--n];
  memcpy(path + at, "/stat", 6);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[1024];
  const ssize_t length = read(fd, text, sizeof text - 1);
  close(fd);
  if (length <= 0) return false;
  text[length] = '\0';
  // "pid (comm) S ppid ...": comm may hold spaces and parentheses; the last ')' ends it.
  const char* commEnd = nullptr;
  for (ssize_t i = 0; i < length; ++i) {
    if (text[i] == ')') commEnd = text + i;
  }
  if (commEnd == nullptr || commEnd[1] != ' ' || commEnd[2] == '\0' || commEnd[3] != ' ') {
    return false;
  }
  state = commEnd[2];
  long value = 0;
  for (const char* c = commEnd + 4; *c >= '0' && *c <= '9'; ++c) value = value * 10 + (*c - '0');
  parent = static_cast<pid_t>(value);
  return true;
}

// The live (not zombie) descendants of the shim, signalled with `signum`; returns how many.
// Async-signal-safe.
int signalDescendants(int signum) {
  const int dir = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return 0;
  int count = 0;
  alignas(8) char buffer[16384];
  for (;;) {
    const long n = syscall(SYS_getdents64, dir, buffer, sizeof buffer);
    if (n <= 0) break;
    for (long offset = 0; offset < n;) {
      struct Entry {
        unsigned long long ino;
        long long off;
        unsigned short reclen;
        unsigned char type;
        char name[1];
      };
      const Entry* entry = reinterpret_cast<const Entry*>(buffer + offset);
      offset += entry->reclen;
      long pid = 0;
      bool numeric = entry->name[0] != '\0';
      for (const char* c = entry->name; *c != '\0'; ++c) {
        if (*c < '0' || *c > '9') numeric = false;
        else pid = pid * 10 + (*c - '0');
      }
      if (!numeric || count >= kMaxProcesses) continue;
      if (readStat(static_cast<pid_t>(pid), gState[count], gParent[count])) {
        gPid[count] = static_cast<pid_t>(pid);
        gDescendant[count] = false;
        ++count;
      }
    }
  }
  close(dir);
  // Mark the descendants: children of the shim, then their children, until nothing changes.
  const pid_t self = getpid();
  for (bool changed = true; changed;) {
    changed = false;
    for (int i = 0; i < count; ++i) {
      if (gDescendant[i]) continue;
      bool below = gParent[i] == self;
      for (int j = 0; !below && j < count; ++j) below = gDescendant[j] && gPid[j] == gParent[i];
      if (below) gDescendant[i] = changed = true;
    }
  }
  int live = 0;
  for (int i = 0; i < count; ++i) {
    if (!gDescendant[i] || gState[i] == 'Z' || gState[i] == 'X') continue;
    kill(gPid[i], signum);
    ++live;
  }
  return live;
}

void reapFinished() {
  while (waitpid(-1, nullptr, WNOHANG) > 0) {
  }
}

// A descendant may fork between a scan and its kill: go round until none is left alive (killed
// ones turn zombies). `reap`: collect the shim's finished children on the way; never from a
// signal handler, which would take the command's status from the shim's own waitpid.
void killAllDescendants(bool reap) {
  for (int round = 0; round < 10000; ++round) {
    if (signalDescendants(SIGKILL) == 0) break;
    if (reap) reapFinished();
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, nullptr);
  }
}

void onKillAfter(int) { killAllDescendants(false); }

}  // namespace

int parseContainmentOption(int argc, char** argv, int i, ContainmentSetup& setup) {
  const char* option = argv[i];
  if (strcmp(option, "--hold") == 0) {
    setup.hold = true;
    return 1;
  }
  if (strcmp(option, "--subreaper") == 0) {
    setup.subreaper = true;
    return 1;
  }
  const bool killFd = strcmp(option, "--kill-fd") == 0;
  const bool killAfter = strcmp(option, "--kill-after-ms") == 0;
  if (!killFd && !killAfter) return 0;
  long value = 0;
  if (i + 1 >= argc || !parseLong(argv[i + 1], value) || value < 0 || value > 1 << 30) return -1;
  if (killFd) setup.killFd = static_cast<int>(value);
  if (killAfter) setup.killAfterMs = value;
  return 2;
}

const char* startContainment(const ContainmentSetup& setup) {
  gSetup = setup;
  if (setup.killFd >= 0) fcntl(setup.killFd, F_SETFD, FD_CLOEXEC);
  if (setup.subreaper) {
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) return "prctl(PR_SET_CHILD_SUBREAPER)";
    struct sigaction action = {};
    sigemptyset(&action.sa_mask);
    sigaddset(&action.sa_mask, SIGHUP);
    sigaddset(&action.sa_mask, SIGTERM);
    action.sa_handler = onKillAfter;
    sigaction(SIGALRM, &action, nullptr);
  }
  return nullptr;
}

void containOnParentDeath() {
  if (gSetup.killFd >= 0) {
    // Kills the whole cgroup, the shim with it.
    if (write(gSetup.killFd, "1", 1) == 1) return;
  }
  if (gSetup.subreaper) killAllDescendants(false);
}

void containOnTerm() {
  if (!gSetup.subreaper) return;
  // The group got the SIGTERM already; those that left it get it too.
  signalDescendants(SIGTERM);
  if (gSetup.killAfterMs > 0) {
    struct itimerval timer = {};
    timer.it_value.tv_sec = gSetup.killAfterMs / 1000;
    timer.it_value.tv_usec = (gSetup.killAfterMs % 1000) * 1000;
    setitimer(ITIMER_REAL, &timer, nullptr);
  }
}

bool awaitRelease(int statusFd) {
  // The worker's socket end comes non-blocking; this end is the shim's alone.
  const int flags = fcntl(statusFd, F_GETFL);
  if (flags >= 0 && (flags & O_NONBLOCK) != 0) fcntl(statusFd, F_SETFL, flags & ~O_NONBLOCK);
  char go = 0;
  ssize_t n;
  do {
    n = read(statusFd, &go, 1);
  } while (n < 0 && errno == EINTR);
  return n == 1;
}

void endContainment() {
  if (!gSetup.subreaper) return;
  sigset_t blocked, previous;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGHUP);
  sigaddset(&blocked, SIGTERM);
  sigaddset(&blocked, SIGALRM);
  sigprocmask(SIG_BLOCK, &blocked, &previous);
  killAllDescendants(true);
  // Whatever is left are children being torn down: wait for each.
  while (waitpid(-1, nullptr, 0) > 0 || errno == EINTR) {
  }
  sigprocmask(SIG_SETMASK, &previous, nullptr);
}

}  // namespace regent::shim

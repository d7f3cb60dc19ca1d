// regent-task-shim's side of task containment (task_containment.h), libc only:
//
//   --hold            wait for one byte on the status descriptor before running the command (the
//                     worker sends it once the shim is in the attempt's cgroup: no task code runs
//                     outside it); end of file instead: exit 127 without a word.
//   --kill-fd FD      the attempt's cgroup.kill, opened by the worker: written when the worker
//                     dies, so that what left the process group dies too.
//   --subreaper       be a child subreaper: kill every descendant (in the group or not) when the
//                     command ends, when the worker dies, and --kill-after-ms MS after a SIGTERM
//                     (a cancel), SIGTERM going to the escaped ones at once.
#pragma once

namespace regent::shim {

struct ContainmentSetup {
  bool hold = false;
  int killFd = -1;
  bool subreaper = false;
  long killAfterMs = 0;
};

// If argv[i] is a containment option: stores it and returns how many arguments it took (1 or 2);
// 0 when it is not one; -1 for a bad or missing value.
int parseContainmentOption(int argc, char** argv, int i, ContainmentSetup& setup);

// Once the parent-death signal is armed. Returns null, or what failed (for the status line).
const char* startContainment(const ContainmentSetup& setup);

// Async-signal-safe. The worker died: kill the attempt's cgroup, or every descendant.
void containOnParentDeath();

// Async-signal-safe. The shim got SIGTERM (a cancel).
void containOnTerm();

// --hold: true once the worker's byte came on `statusFd`, false on end of file or error.
bool awaitRelease(int statusFd);

// After the command ended (subreaper): kills and reaps every descendant left.
void endContainment();

}  // namespace regent::shim

// How a worker contains its task attempts (worker.containment; docs/security.md, "Containment
// modes"), so that nothing an attempt starts outlives it, whatever process group or session it
// moved to:
//
//   cgroup     each attempt runs in a cgroup of its own under the worker's subtree
//              (cgroup_layout.h), created before the command runs, with the slot's profile as its
//              limits (memory, cpu) and worker.task-pids-max; the attempt's end (cancel, the job's
//              end, freeSlot, the command's own end) kills the whole cgroup and removes it. The
//              shim holds an open cgroup.kill and writes it when the worker dies; a worker that
//              starts kills and removes whatever an earlier run left in its subtree.
//   subreaper  no cgroup can be had: the shim is a child subreaper (PR_SET_CHILD_SUBREAPER) and
//              kills every descendant, in its group or not, when the command ends, on cancel and
//              when the worker dies. Best effort: a task runs as the shim's user and can kill it.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/result.h"
#include "services/taskexecutor/cgroup_layout.h"

namespace regent::taskexecutor {

enum class ContainmentKind { kCgroup, kSubreaper };

// "cgroup" / "subreaper" (the metric's label, the registration's first word).
const char* containmentKindName(ContainmentKind kind);

// One attempt's containment, made off the loop by TaskContainment::prepare. Its blocking calls run
// off the loop, one at a time, in this order: enter (when holdsShim), release. Destroying it
// closes the descriptors it holds; it does not kill anything.
class AttemptContainment {
 public:
  virtual ~AttemptContainment() = default;
  // The shim's extra arguments; `firstFd` is the shim's number for shimFds()[0].
  virtual std::vector<std::string> shimArgs(int firstFd) const = 0;
  // Descriptors for the shim (the caller passes them at spawn and then calls closeShimFds()).
  virtual std::vector<int> shimFds() const = 0;
  virtual void closeShimFds() = 0;
  // Whether the shim waits, before it runs the command, for one byte on its status descriptor:
  // the runner sends it once enter() succeeded.
  virtual bool holdsShim() const = 0;
  // Blocking. Moves the (held) shim into the attempt's cgroup; an error names the file.
  virtual Status enter(pid_t shim) = 0;
  // Blocking. Kills whatever is left of the attempt, waits (bounded) until nothing is, and
  // removes its cgroup. Returns what the attempt's failure message should say when its memory
  // limit killed something in it ("killed by its memory limit ..."), else empty. Problems
  // (a cgroup that would not empty or be removed) are logged.
  virtual std::string release() = 0;
};

class TaskContainment {
 public:
  virtual ~TaskContainment() = default;
  virtual ContainmentKind kind() const = 0;
  // For the start-up line, /metrics and the registration: "cgroup v2 (hybrid: limits via v1
  // memory,cpu,pids) under /sys/fs/cgroup/unified/regent-worker-…", "subreaper (no cgroup: …)".
  virtual const std::string& description() const = 0;
  // Blocking; safe from any thread (it reads only what create() set up). Creates the attempt's
  // cgroup with its limits (an error names the path) and opens what the shim needs.
  virtual Result<std::unique_ptr<AttemptContainment>> prepare(const AttemptId& attempt) const = 0;
};

struct ContainmentOptions {
  std::string mode = "auto";  // worker.containment: auto | cgroup | subreaper
  std::string subtree;        // The worker's directory name: regent-worker-<resource id>.
  CgroupLimits limits;        // The slot's profile and worker.task-pids-max.
  // Subreaper: the shim SIGKILLs every descendant this long after the cancel's SIGTERM, before
  // the worker's own SIGKILL at worker.task-cancel-timeout would take the shim first.
  uint32_t killAfterMs = 4000;
  // Where the host is read; tests point these at fake trees.
  std::string mountInfoPath = "/proc/self/mountinfo";
  std::string cgroupPath = "/proc/self/cgroup";
};

// Blocking: call at start, before the loop runs. Decides the containment (auto: a cgroup when
// one can be made, else subreaper with the reason in its description; cgroup: a fatal error
// naming why there is none; subreaper: subreaper), creates the worker's subtree, and kills and
// removes every attempt cgroup an earlier run of this worker left in it. Destroying the cgroup
// one (blocking too: after the loop ended) removes the subtree when no attempt cgroup is left.
Result<std::unique_ptr<TaskContainment>> createTaskContainment(const ContainmentOptions& options);

}  // namespace regent::taskexecutor

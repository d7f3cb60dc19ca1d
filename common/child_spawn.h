// Starting a child without copying the parent's address space: clone(CLONE_VM | CLONE_VFORK)
// runs the child on a stack of its own in the parent's memory until it execs, so the cost of a
// spawn does not grow with the parent's size (fork() copies every page table of it, and a
// worker spawns a shim per attempt). CLONE_PIDFD hands back a pidfd, which the loop polls for
// the child's exit and signals through, so no pid is ever reused under the parent's feet.
// ChildProcess (event_loop.h) is the one user; this file is the part that runs in the child.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace regent {

// Everything the child does between clone and exec, prepared by the parent (the child must not
// allocate: it shares the parent's heap while the parent's thread is suspended).
struct ExecPlan {
  // Paths tried in order with execve (argv[0] looked up in the child's PATH, or argv[0] alone
  // when it contains a '/').
  std::vector<std::string> candidates;
  std::vector<std::string> argv;
  std::vector<std::string> envp;  // NAME=value, exactly the child's environment.
  // The child's descriptors 0, 1, 2, 3, ... in order: the parent's descriptor each becomes, or -1
  // for /dev/null (stdin always is). Every other descriptor is close-on-exec in the parent.
  std::vector<int> fds;
  std::string cwd;  // Empty: the parent's.
  bool newSession = false;
  std::optional<uid_t> uid;  // Set either: supplementary groups are dropped.
  std::optional<gid_t> gid;
};

struct ClonedChild {
  int pid = -1;
  int pidfd = -1;  // Close-on-exec; the caller owns it.
};

// Why a spawn failed: the errno, and the step that failed ("exec", "chdir", "setuid", ... or
// "clone" when no child was made).
struct SpawnFailure {
  int error = 0;
  const char* step = "";
};

// The paths execve should try for `program` with `path` the child's PATH (nullptr: unset, the
// C library's default "/bin:/usr/bin"), in order; `program` alone when it contains a '/'.
std::vector<std::string> execCandidates(const std::string& program, const char* path);

// Starts the child; returns once it has exec'd (the parent's calling thread is suspended until
// then) or failed. On failure no child is left behind (one that failed before exec is reaped).
// EINVAL / ENOSYS / EPERM from clone itself mean the kernel (or a seccomp filter) refuses
// CLONE_PIDFD: the caller may fall back to another way of spawning.
std::variant<ClonedChild, SpawnFailure> cloneAndExec(ExecPlan plan);

}  // namespace regent

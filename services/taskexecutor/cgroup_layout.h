// Where a worker's task cgroups go and which files carry an attempt's limits (docs/workers.md,
// "Task containment"). Pure decisions over the text of /proc/self/mountinfo, /proc/self/cgroup and
// files read through a callback, so that both host layouts are unit-tested on any host:
//
//   pure v2 (Debian 12):  <v2 mount><own cgroup>/regent-worker-<id>/attempt-<id>, limits in its
//                         memory.max, cpu.max, pids.max; killed through its cgroup.kill;
//   hybrid (v2 with no controllers, v1 controllers beside it): the same v2 directory for the kill,
//                         and <v1 mount>/<controller><own cgroup>/regent-worker-<id>/attempt-<id>
//                         for memory.limit_in_bytes, cpu.cfs_quota_us, pids.max;
//   v1 only:              the v1 directories, killed by freezing its freezer cgroup and SIGKILLing
//                         every pid in it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace regent::taskexecutor {

// One cgroup mount of /proc/self/mountinfo.
struct CgroupMount {
  std::string mountPoint;                // "/sys/fs/cgroup/unified"
  std::string root;                      // The hierarchy's path mounted there, usually "/".
  bool v2 = false;                       // cgroup2; else a v1 hierarchy.
  std::vector<std::string> controllers;  // v1: its controllers (super options), e.g. {"memory"}.
};
std::vector<CgroupMount> parseCgroupMounts(std::string_view mountinfo);

// /proc/self/cgroup: the process's path in the v2 hierarchy ("0::/x") and in each v1 one.
struct ProcessCgroups {
  std::optional<std::string> unified;
  std::map<std::string, std::string> v1;  // controller → path
};
ProcessCgroups parseProcessCgroups(std::string_view text);

// Reads a file; nullopt when it cannot be read (missing). The real one reads the host.
using ReadCgroupFile = std::function<std::optional<std::string>(const std::string& path)>;

// The controllers a slot's limits need, in this order.
inline constexpr std::string_view kLimitControllers[] = {"memory", "cpu", "pids"};

// Where the worker's subtree goes in each hierarchy.
struct CgroupLayout {
  // The v2 directory under which the worker's subtree goes (its cgroup.kill ends an attempt), or
  // empty without a v2 hierarchy.
  std::string unifiedParent;
  // Limit controllers enabled in the v2 hierarchy (pure v2): their files live in the v2 dirs.
  std::vector<std::string> v2Controllers;
  // Limit controllers of v1 hierarchies: controller → parent dir.
  std::map<std::string, std::string> v1Parents;
  // The v1 freezer hierarchy's parent dir, or empty: kills an attempt where the v2 hierarchy
  // has no cgroup.kill (or there is none).
  std::string freezerParent;
  // Limit controllers found in no hierarchy: the slot's limit of that kind is not enforced.
  std::vector<std::string> unlimited;

  bool hybrid() const { return !unifiedParent.empty() && !v1Parents.empty(); }
  // "cgroup v2 (hybrid: limits via v1 memory,cpu,pids) under /sys/fs/cgroup/unified/<subtree>"
  std::string describe(const std::string& subtree) const;
};

// The layout for a process with `cgroups` on a host with `mounts`; `read` reads cgroup.controllers
// of the v2 parent. An error says why no cgroup can be had (no cgroup mount at all). A v2
// hierarchy wins for the kill; the limits come from v2 where the parent offers the controller,
// else from a v1 hierarchy holding it.
Result<CgroupLayout> decideCgroupLayout(const std::vector<CgroupMount>& mounts,
                                        const ProcessCgroups& cgroups, const ReadCgroupFile& read);

// An attempt's slot limits.
struct CgroupLimits {
  uint32_t cpuMillis = 0;     // thousandths of a core; 0 = none
  uint64_t memoryBytes = 0;   // 0 = none
  uint64_t pidsMax = 0;       // 0 = none
};

struct CgroupWrite {
  std::string path;
  std::string value;
};

// The directories and files of one attempt's cgroup.
struct AttemptCgroupPlan {
  std::vector<std::string> dirs;     // Created in this order, removed in the reverse; the shim's
                                     // pid goes into each one's cgroup.procs.
  std::vector<CgroupWrite> limits;   // Written after the dirs exist, before the shim enters.
  std::vector<CgroupWrite> optionalLimits;  // Written when the file exists (swap limits).
  std::string killFile;              // cgroup.kill, or empty (then the freezer).
  std::string freezerDir;            // Without cgroup.kill: the dir to freeze, or empty.
  bool freezerV2 = false;            // freezerDir is a v2 dir (cgroup.freeze), not v1.
  std::string oomFile;               // memory.events (v2) or memory.oom_control (v1), or empty.
};

// `subtree` is the worker's directory name (regent-worker-<id>), `cell` the attempt's
// (attempt-<id>); `haveKill` whether the v2 hierarchy has cgroup.kill (kernel 5.14+).
AttemptCgroupPlan planAttemptCgroup(const CgroupLayout& layout, const std::string& subtree,
                                    const std::string& cell, const CgroupLimits& limits,
                                    bool haveKill);

// The worker's subtree directories, one per hierarchy its cells use (the v2 one first; the v1
// freezer only where planAttemptCgroup with `haveKill` freezes).
std::vector<std::string> subtreeDirs(const CgroupLayout& layout, const std::string& subtree,
                                     bool haveKill);

// The count of the "oom_kill N" line of memory.events or memory.oom_control, 0 when absent.
uint64_t parseOomKills(std::string_view text);

// CFS quota and period (µs) for `cpuMillis`: the period is 100 ms, or longer so that the quota
// stays at or above the kernel's 1 ms minimum.
struct CpuQuota {
  uint64_t quotaUs = 0;
  uint64_t periodUs = 0;
};
CpuQuota cpuQuotaFor(uint32_t cpuMillis);

}  // namespace regent::taskexecutor

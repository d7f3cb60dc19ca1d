// The cgroup layout decisions (services/taskexecutor/cgroup_layout.h) against fake mountinfo,
// /proc/self/cgroup and cgroup.controllers texts: a hybrid host like the ones these tests run on,
// a pure v2 host (Debian 12), a v1-only host, a container's namespaced mounts.
#include "services/taskexecutor/cgroup_layout.h"

#include <gtest/gtest.h>

#include <map>

namespace regent::taskexecutor {
namespace {

// This machine's /proc/self/mountinfo, cut to its cgroup lines plus one other.
constexpr const char* kHybridMountInfo =
    "23 1 0:21 / /sys rw,nosuid - sysfs sysfs rw\n"
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer\n"
    "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
    "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
constexpr const char* kHybridCgroups =
    "9:name=systemd:/\n8:pids:/\n6:freezer:/\n4:memory:/sandbox/abc\n1:cpu:/\n0::/\n";

constexpr const char* kPureV2MountInfo =
    "25 21 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n";
constexpr const char* kPureV2Cgroups = "0::/system.slice/regent-worker.service\n";

ReadCgroupFile files(std::map<std::string, std::string> contents) {
  return [contents = std::move(contents)](const std::string& path) -> std::optional<std::string> {
    auto it = contents.find(path);
    if (it == contents.end()) return std::nullopt;
    return it->second;
  };
}

CgroupLayout layoutOf(const char* mountInfo, const char* cgroups, const ReadCgroupFile& read) {
  auto layout =
      decideCgroupLayout(parseCgroupMounts(mountInfo), parseProcessCgroups(cgroups), read);
  EXPECT_TRUE(layout.ok()) << (layout.ok() ? "" : layout.error().message);
  return layout.ok() ? layout.value() : CgroupLayout{};
}

const CgroupLimits kLimits{.cpuMillis = 500, .memoryBytes = 32 << 20, .pidsMax = 64};

TEST(CgroupLayout, MountInfoYieldsEveryCgroupMountWithItsControllers) {
  auto mounts = parseCgroupMounts(kHybridMountInfo);
  ASSERT_EQ(mounts.size(), 7u);
  EXPECT_EQ(mounts[0].mountPoint, "/sys/fs/cgroup/cpu");
  EXPECT_EQ(mounts[0].controllers, std::vector<std::string>{"cpu"});
  EXPECT_FALSE(mounts[0].v2);
  EXPECT_TRUE(mounts[5].controllers.empty()) << "name=systemd is no controller";
  EXPECT_TRUE(mounts[6].v2);
  EXPECT_EQ(mounts[6].mountPoint, "/sys/fs/cgroup/unified");
}

TEST(CgroupLayout, EscapedMountPointsAreUnescaped) {
  auto mounts = parseCgroupMounts("41 31 0:38 / /mnt/my\\040cgroups rw - cgroup2 cgroup2 rw\n");
  ASSERT_EQ(mounts.size(), 1u);
  EXPECT_EQ(mounts[0].mountPoint, "/mnt/my cgroups");
}

TEST(CgroupLayout, ProcSelfCgroupGivesTheV2PathAndEachV1ControllersPath) {
  auto cgroups = parseProcessCgroups("2:cpu,cpuacct:/a\n4:memory:/sandbox/abc\n0::/b/c\n");
  EXPECT_EQ(cgroups.unified, "/b/c");
  EXPECT_EQ(cgroups.v1.at("cpu"), "/a");
  EXPECT_EQ(cgroups.v1.at("cpuacct"), "/a");
  EXPECT_EQ(cgroups.v1.at("memory"), "/sandbox/abc");
}

TEST(CgroupLayout, AHybridHostKillsThroughV2AndLimitsThroughV1UnderTheWorkersOwnCgroups) {
  CgroupLayout layout = layoutOf(kHybridMountInfo, kHybridCgroups,
                                 files({{"/sys/fs/cgroup/unified/cgroup.controllers", ""}}));
  EXPECT_EQ(layout.unifiedParent, "/sys/fs/cgroup/unified");
  EXPECT_TRUE(layout.v2Controllers.empty());
  EXPECT_EQ(layout.v1Parents.at("memory"), "/sys/fs/cgroup/memory/sandbox/abc");
  EXPECT_EQ(layout.v1Parents.at("cpu"), "/sys/fs/cgroup/cpu");
  EXPECT_EQ(layout.v1Parents.at("pids"), "/sys/fs/cgroup/pids");
  EXPECT_TRUE(layout.unlimited.empty());
  EXPECT_TRUE(layout.hybrid());
  EXPECT_EQ(layout.describe("regent-worker-1"),
            "cgroup v2 (hybrid: limits via v1 memory,cpu,pids) under "
            "/sys/fs/cgroup/unified/regent-worker-1");

  AttemptCgroupPlan plan = planAttemptCgroup(layout, "regent-worker-1", "attempt-2", kLimits, true);
  EXPECT_EQ(plan.dirs, (std::vector<std::string>{
                           "/sys/fs/cgroup/unified/regent-worker-1/attempt-2",
                           "/sys/fs/cgroup/memory/sandbox/abc/regent-worker-1/attempt-2",
                           "/sys/fs/cgroup/cpu/regent-worker-1/attempt-2",
                           "/sys/fs/cgroup/pids/regent-worker-1/attempt-2"}));
  ASSERT_EQ(plan.limits.size(), 4u);
  EXPECT_EQ(plan.limits[0].path,
            "/sys/fs/cgroup/memory/sandbox/abc/regent-worker-1/attempt-2/memory.limit_in_bytes");
  EXPECT_EQ(plan.limits[0].value, "33554432");
  EXPECT_EQ(plan.limits[1].path, "/sys/fs/cgroup/cpu/regent-worker-1/attempt-2/cpu.cfs_period_us");
  EXPECT_EQ(plan.limits[1].value, "100000");
  EXPECT_EQ(plan.limits[2].path, "/sys/fs/cgroup/cpu/regent-worker-1/attempt-2/cpu.cfs_quota_us");
  EXPECT_EQ(plan.limits[2].value, "50000");
  EXPECT_EQ(plan.limits[3].path, "/sys/fs/cgroup/pids/regent-worker-1/attempt-2/pids.max");
  EXPECT_EQ(plan.limits[3].value, "64");
  EXPECT_EQ(plan.killFile, "/sys/fs/cgroup/unified/regent-worker-1/attempt-2/cgroup.kill");
  EXPECT_TRUE(plan.freezerDir.empty());
  EXPECT_EQ(plan.oomFile,
            "/sys/fs/cgroup/memory/sandbox/abc/regent-worker-1/attempt-2/memory.oom_control");
}

TEST(CgroupLayout, AHybridKernelWithoutCgroupKillFreezesThroughTheV1Freezer) {
  CgroupLayout layout = layoutOf(kHybridMountInfo, kHybridCgroups, files({}));
  AttemptCgroupPlan plan = planAttemptCgroup(layout, "w", "a", kLimits, false);
  EXPECT_TRUE(plan.killFile.empty());
  EXPECT_EQ(plan.freezerDir, "/sys/fs/cgroup/freezer/w/a");
  EXPECT_FALSE(plan.freezerV2);
  EXPECT_EQ(plan.dirs.back(), "/sys/fs/cgroup/freezer/w/a");
  EXPECT_EQ(subtreeDirs(layout, "w", false).back(), "/sys/fs/cgroup/freezer/w");
}

TEST(CgroupLayout, TheSubtreeHasNoFreezerDirectoryWhenCgroupKillEndsTheCells) {
  CgroupLayout layout = layoutOf(kHybridMountInfo, kHybridCgroups, files({}));
  EXPECT_EQ(subtreeDirs(layout, "w", true),
            (std::vector<std::string>{"/sys/fs/cgroup/unified/w",
                                      "/sys/fs/cgroup/memory/sandbox/abc/w",
                                      "/sys/fs/cgroup/cpu/w", "/sys/fs/cgroup/pids/w"}));
}

TEST(CgroupLayout, APureV2HostLimitsAndKillsInOneDirectoryUnderTheWorkersCgroup) {
  CgroupLayout layout = layoutOf(
      kPureV2MountInfo, kPureV2Cgroups,
      files({{"/sys/fs/cgroup/system.slice/regent-worker.service/cgroup.controllers",
              "cpuset cpu io memory pids\n"}}));
  EXPECT_EQ(layout.unifiedParent, "/sys/fs/cgroup/system.slice/regent-worker.service");
  EXPECT_EQ(layout.v2Controllers, (std::vector<std::string>{"memory", "cpu", "pids"}));
  EXPECT_TRUE(layout.v1Parents.empty());
  EXPECT_FALSE(layout.hybrid());
  EXPECT_EQ(layout.describe("w"),
            "cgroup v2 (limits via v2 memory,cpu,pids) under "
            "/sys/fs/cgroup/system.slice/regent-worker.service/w");

  AttemptCgroupPlan plan = planAttemptCgroup(layout, "w", "a", kLimits, true);
  const std::string dir = "/sys/fs/cgroup/system.slice/regent-worker.service/w/a";
  EXPECT_EQ(plan.dirs, std::vector<std::string>{dir});
  ASSERT_EQ(plan.limits.size(), 3u);
  EXPECT_EQ(plan.limits[0].path, dir + "/memory.max");
  EXPECT_EQ(plan.limits[0].value, "33554432");
  EXPECT_EQ(plan.limits[1].path, dir + "/cpu.max");
  EXPECT_EQ(plan.limits[1].value, "50000 100000");
  EXPECT_EQ(plan.limits[2].path, dir + "/pids.max");
  ASSERT_EQ(plan.optionalLimits.size(), 1u);
  EXPECT_EQ(plan.optionalLimits[0].path, dir + "/memory.swap.max");
  EXPECT_EQ(plan.optionalLimits[0].value, "0");
  EXPECT_EQ(plan.killFile, dir + "/cgroup.kill");
  EXPECT_EQ(plan.oomFile, dir + "/memory.events");
  EXPECT_EQ(subtreeDirs(layout, "w", true),
            std::vector<std::string>{"/sys/fs/cgroup/system.slice/regent-worker.service/w"});
}

TEST(CgroupLayout, APureV2KernelWithoutCgroupKillFreezesTheV2Cgroup) {
  CgroupLayout layout = layoutOf(kPureV2MountInfo, "0::/\n",
                                 files({{"/sys/fs/cgroup/cgroup.controllers", "memory pids"}}));
  EXPECT_EQ(layout.unifiedParent, "/sys/fs/cgroup");
  EXPECT_EQ(layout.unlimited, std::vector<std::string>{"cpu"});
  EXPECT_EQ(layout.describe("w"),
            "cgroup v2 (limits via v2 memory,pids) under /sys/fs/cgroup/w; not limited: cpu");
  AttemptCgroupPlan plan = planAttemptCgroup(layout, "w", "a", kLimits, false);
  EXPECT_EQ(plan.freezerDir, "/sys/fs/cgroup/w/a");
  EXPECT_TRUE(plan.freezerV2);
  EXPECT_TRUE(plan.killFile.empty());
}

TEST(CgroupLayout, AContainersNamespacedMountShowsItsRootForPathsOutsideIt) {
  // A cgroup namespace: the mount's root is the container's cgroup, and the process sits in it.
  CgroupLayout layout = layoutOf(
      "41 31 0:38 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", "0::/docker/abc/init\n",
      files({{"/sys/fs/cgroup/init/cgroup.controllers", "memory cpu pids"}}));
  EXPECT_EQ(layout.unifiedParent, "/sys/fs/cgroup/init");
  layout = layoutOf("41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", "0::/../../x\n",
                    files({}));
  EXPECT_EQ(layout.unifiedParent, "/sys/fs/cgroup");
}

TEST(CgroupLayout, AV1OnlyHostKillsThroughTheFreezer) {
  CgroupLayout layout = layoutOf(
      "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
      "37 31 0:34 / /sys/fs/cgroup/freezer rw - cgroup cgroup rw,freezer\n",
      "4:memory:/\n6:freezer:/\n", files({}));
  EXPECT_TRUE(layout.unifiedParent.empty());
  EXPECT_EQ(layout.freezerParent, "/sys/fs/cgroup/freezer");
  EXPECT_EQ(layout.unlimited, (std::vector<std::string>{"cpu", "pids"}));
  EXPECT_EQ(layout.describe("w"),
            "cgroup v1 (freezer; limits via v1 memory) under /sys/fs/cgroup/freezer/w; not "
            "limited: cpu,pids");
  AttemptCgroupPlan plan = planAttemptCgroup(layout, "w", "a", kLimits, true);
  EXPECT_TRUE(plan.killFile.empty());
  EXPECT_EQ(plan.freezerDir, "/sys/fs/cgroup/freezer/w/a");
}

TEST(CgroupLayout, NoCgroupMountIsAnErrorSayingSo) {
  auto none = decideCgroupLayout({}, {}, files({}));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message, "no cgroup hierarchy is mounted (/proc/self/mountinfo)");
  auto memoryOnly = decideCgroupLayout(
      parseCgroupMounts("35 31 0:32 / /m rw - cgroup cgroup rw,memory\n"), {}, files({}));
  ASSERT_FALSE(memoryOnly.ok());
  EXPECT_NE(memoryOnly.error().message.find("no v1 freezer"), std::string::npos);
}

TEST(CgroupLayout, OomKillsAreReadFromMemoryEventsAndOomControl) {
  EXPECT_EQ(parseOomKills("low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 0\n"), 1u);
  EXPECT_EQ(parseOomKills("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"), 3u);
  EXPECT_EQ(parseOomKills(""), 0u);
}

TEST(CgroupLayout, ACpuQuotaNeverFallsBelowTheKernelsMinimum) {
  EXPECT_EQ(cpuQuotaFor(1000).quotaUs, 100000u);
  EXPECT_EQ(cpuQuotaFor(2500).quotaUs, 250000u);
  EXPECT_EQ(cpuQuotaFor(5).periodUs, 1000000u);
  EXPECT_EQ(cpuQuotaFor(5).quotaUs, 5000u);
  EXPECT_EQ(cpuQuotaFor(1).quotaUs, 1000u);
}

TEST(CgroupLayout, LimitsOfZeroAreNotWritten) {
  CgroupLayout layout = layoutOf(kHybridMountInfo, kHybridCgroups, files({}));
  AttemptCgroupPlan plan = planAttemptCgroup(layout, "w", "a", {}, true);
  EXPECT_TRUE(plan.limits.empty());
  EXPECT_FALSE(plan.oomFile.empty());
}

}  // namespace
}  // namespace regent::taskexecutor

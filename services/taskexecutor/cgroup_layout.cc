// The cgroup layout decisions (see cgroup_layout.h): text in, paths out, no file system access.
#include "services/taskexecutor/cgroup_layout.h"

#include <algorithm>
#include <charconv>

namespace regent::taskexecutor {
namespace {

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(separator, start);
    if (end == std::string_view::npos) end = text.size();
    if (end > start) parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescapeMountField(std::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      const std::string_view digits = field.substr(i + 1, 3);
      int value = 0;
      auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value, 8);
      if (error == std::errc() && end == digits.data() + digits.size()) {
        out.push_back(static_cast<char>(value));
        i += 3;
        continue;
      }
    }
    out.push_back(field[i]);
  }
  return out;
}

bool isController(std::string_view option) {
  static constexpr std::string_view kNotControllers[] = {
      "rw", "ro", "clone_children", "noprefix", "xattr", "nsdelegate", "memory_recursiveprot",
      "memory_localevents", "memory_hugetlb_accounting", "favordynmods", "cpuset_v2_mode"};
  if (option.find('=') != std::string_view::npos) return false;  // name=systemd, release_agent=
  return std::find(std::begin(kNotControllers), std::end(kNotControllers), option) ==
         std::end(kNotControllers);
}

// The directory of hierarchy path `path` under `mount`: the mount shows its root there.
std::string dirFor(const CgroupMount& mount, const std::string& path) {
  std::string relative;
  if (mount.root == "/") {
    relative = path;
  } else if (path == mount.root) {
    relative = "/";
  } else if (path.size() > mount.root.size() && path.compare(0, mount.root.size(), mount.root) == 0 &&
             path[mount.root.size()] == '/') {
    relative = path.substr(mount.root.size());
  } else {
    relative = "/";  // Outside what the mount shows (another namespace): its root.
  }
  // A path that climbs ("/../x", from a cgroup namespace) is outside what the mount shows too.
  if (relative.find("/..") != std::string::npos) relative = "/";
  std::string dir = mount.mountPoint;
  if (relative != "/") dir += relative;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ",") + name;
  return out;
}

}  // namespace

std::vector<CgroupMount> parseCgroupMounts(std::string_view mountinfo) {
  std::vector<CgroupMount> mounts;
  for (std::string_view line : split(mountinfo, '\n')) {
    const auto fields = split(line, ' ');
    auto dash = std::find(fields.begin(), fields.end(), std::string_view("-"));
    if (fields.size() < 5 || dash == fields.end() || dash + 2 >= fields.end()) continue;
    const std::string_view type = *(dash + 1);
    if (type != "cgroup" && type != "cgroup2") continue;
    CgroupMount mount;
    mount.root = unescapeMountField(fields[3]);
    mount.mountPoint = unescapeMountField(fields[4]);
    mount.v2 = type == "cgroup2";
    if (!mount.v2) {
      for (std::string_view option : split(*(dash + 3), ',')) {
        if (isController(option)) mount.controllers.emplace_back(option);
      }
    }
    mounts.push_back(std::move(mount));
  }
  return mounts;
}

ProcessCgroups parseProcessCgroups(std::string_view text) {
  ProcessCgroups cgroups;
  for (std::string_view line : split(text, '\n')) {
    const size_t first = line.find(':');
    const size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    const std::string_view id = line.substr(0, first);
    const std::string_view controllers = line.substr(first + 1, second - first - 1);
    const std::string path(line.substr(second + 1));
    if (id == "0" && controllers.empty()) {
      cgroups.unified = path;
      continue;
    }
    for (std::string_view controller : split(controllers, ',')) {
      cgroups.v1.emplace(std::string(controller), path);
    }
  }
  return cgroups;
}

Result<CgroupLayout> decideCgroupLayout(const std::vector<CgroupMount>& mounts,
                                        const ProcessCgroups& cgroups,
                                        const ReadCgroupFile& read) {
  CgroupLayout layout;
  auto v1Mount = [&](std::string_view controller) -> const CgroupMount* {
    for (const auto& mount : mounts) {
      if (!mount.v2 && std::find(mount.controllers.begin(), mount.controllers.end(),
                                 controller) != mount.controllers.end()) {
        return &mount;
      }
    }
    return nullptr;
  };
  auto v1Path = [&](std::string_view controller) {
    auto it = cgroups.v1.find(std::string(controller));
    return it == cgroups.v1.end() ? std::string("/") : it->second;
  };
  std::vector<std::string> v2Available;
  for (const auto& mount : mounts) {
    if (!mount.v2) continue;
    layout.unifiedParent = dirFor(mount, cgroups.unified.value_or("/"));
    if (auto text = read(layout.unifiedParent + "/cgroup.controllers")) {
      for (std::string_view name : split(*text, ' ')) {
        while (!name.empty() && (name.back() == '\n' || name.back() == '\r')) name.remove_suffix(1);
        if (!name.empty()) v2Available.emplace_back(name);
      }
    }
    break;
  }
  if (const CgroupMount* freezer = v1Mount("freezer")) {
    layout.freezerParent = dirFor(*freezer, v1Path("freezer"));
  }
  if (layout.unifiedParent.empty() && layout.freezerParent.empty()) {
    return Error::fatal(
        mounts.empty() ? "no cgroup hierarchy is mounted (/proc/self/mountinfo)"
                       : "no cgroup v2 hierarchy and no v1 freezer hierarchy is mounted "
                         "(/proc/self/mountinfo): nothing can kill an attempt as a whole");
  }
  for (std::string_view controller : kLimitControllers) {
    if (!layout.unifiedParent.empty() &&
        std::find(v2Available.begin(), v2Available.end(), controller) != v2Available.end()) {
      layout.v2Controllers.emplace_back(controller);
    } else if (const CgroupMount* mount = v1Mount(controller)) {
      layout.v1Parents.emplace(std::string(controller), dirFor(*mount, v1Path(controller)));
    } else {
      layout.unlimited.emplace_back(controller);
    }
  }
  return layout;
}

std::string CgroupLayout::describe(const std::string& subtree) const {
  std::vector<std::string> v1;
  for (std::string_view controller : kLimitControllers) {
    if (v1Parents.count(std::string(controller)) != 0) v1.emplace_back(controller);
  }
  std::string out;
  if (unifiedParent.empty()) {
    out = "cgroup v1 (freezer";
    if (!v1.empty()) out += "; limits via v1 " + joined(v1);
    out += ") under " + freezerParent + "/" + subtree;
  } else {
    out = "cgroup v2 (";
    if (!v1.empty()) {
      out += "hybrid: limits via v1 " + joined(v1);
      if (!v2Controllers.empty()) out += " and v2 " + joined(v2Controllers);
    } else {
      out += "limits via v2 " + joined(v2Controllers);
    }
    out += ") under " + unifiedParent + "/" + subtree;
  }
  if (!unlimited.empty()) out += "; not limited: " + joined(unlimited);
  return out;
}

std::vector<std::string> subtreeDirs(const CgroupLayout& layout, const std::string& subtree,
                                     bool haveKill) {
  std::vector<std::string> dirs;
  auto add = [&](const std::string& parent) {
    const std::string dir = parent + "/" + subtree;
    if (std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(dir);
  };
  if (!layout.unifiedParent.empty()) add(layout.unifiedParent);
  for (std::string_view controller : kLimitControllers) {
    auto it = layout.v1Parents.find(std::string(controller));
    if (it != layout.v1Parents.end()) add(it->second);
  }
  const bool killsThroughV2 = !layout.unifiedParent.empty() && haveKill;
  if (!killsThroughV2 && !layout.freezerParent.empty()) add(layout.freezerParent);
  return dirs;
}

AttemptCgroupPlan planAttemptCgroup(const CgroupLayout& layout, const std::string& subtree,
                                    const std::string& cell, const CgroupLimits& limits,
                                    bool haveKill) {
  AttemptCgroupPlan plan;
  auto addDir = [&](const std::string& parent) {
    const std::string dir = parent + "/" + subtree + "/" + cell;
    if (std::find(plan.dirs.begin(), plan.dirs.end(), dir) == plan.dirs.end()) {
      plan.dirs.push_back(dir);
    }
    return dir;
  };
  const std::string v2Dir = layout.unifiedParent.empty() ? "" : addDir(layout.unifiedParent);
  auto dirOf = [&](std::string_view controller) -> std::pair<std::string, bool> {
    if (std::find(layout.v2Controllers.begin(), layout.v2Controllers.end(), controller) !=
        layout.v2Controllers.end()) {
      return {v2Dir, true};
    }
    auto it = layout.v1Parents.find(std::string(controller));
    if (it != layout.v1Parents.end()) return {addDir(it->second), false};
    return {"", false};
  };
  if (auto [dir, v2] = dirOf("memory"); !dir.empty()) {
    plan.oomFile = dir + (v2 ? "/memory.events" : "/memory.oom_control");
    if (limits.memoryBytes != 0) {
      const std::string bytes = std::to_string(limits.memoryBytes);
      if (v2) {
        plan.limits.push_back({dir + "/memory.max", bytes});
        // No swapping past the limit: the slot's memory is the attempt's memory.
        plan.optionalLimits.push_back({dir + "/memory.swap.max", "0"});
      } else {
        plan.limits.push_back({dir + "/memory.limit_in_bytes", bytes});
        plan.optionalLimits.push_back({dir + "/memory.memsw.limit_in_bytes", bytes});
      }
    }
  }
  if (auto [dir, v2] = dirOf("cpu"); !dir.empty() && limits.cpuMillis != 0) {
    const CpuQuota quota = cpuQuotaFor(limits.cpuMillis);
    if (v2) {
      plan.limits.push_back(
          {dir + "/cpu.max", std::to_string(quota.quotaUs) + " " + std::to_string(quota.periodUs)});
    } else {
      plan.limits.push_back({dir + "/cpu.cfs_period_us", std::to_string(quota.periodUs)});
      plan.limits.push_back({dir + "/cpu.cfs_quota_us", std::to_string(quota.quotaUs)});
    }
  }
  if (auto [dir, v2] = dirOf("pids"); !dir.empty() && limits.pidsMax != 0) {
    plan.limits.push_back({dir + "/pids.max", std::to_string(limits.pidsMax)});
  }
  if (!v2Dir.empty() && haveKill) {
    plan.killFile = v2Dir + "/cgroup.kill";
  } else if (!layout.freezerParent.empty()) {
    plan.freezerDir = addDir(layout.freezerParent);
  } else if (!v2Dir.empty()) {
    plan.freezerDir = v2Dir;
    plan.freezerV2 = true;
  }
  return plan;
}

uint64_t parseOomKills(std::string_view text) {
  for (std::string_view line : split(text, '\n')) {
    constexpr std::string_view kKey = "oom_kill ";
    if (line.substr(0, kKey.size()) != kKey) continue;
    line.remove_prefix(kKey.size());
    uint64_t value = 0;
    auto [end, error] = std::from_chars(line.data(), line.data() + line.size(), value);
    if (error == std::errc()) return value;
  }
  return 0;
}

CpuQuota cpuQuotaFor(uint32_t cpuMillis) {
  constexpr uint64_t kPeriodUs = 100'000;
  constexpr uint64_t kMinQuotaUs = 1'000;
  constexpr uint64_t kMaxPeriodUs = 1'000'000;
  uint64_t period = kPeriodUs;
  if (uint64_t{cpuMillis} * period / 1000 < kMinQuotaUs) period = kMaxPeriodUs;
  return {std::max(uint64_t{cpuMillis} * period / 1000, kMinQuotaUs), period};
}

}  // namespace regent::taskexecutor

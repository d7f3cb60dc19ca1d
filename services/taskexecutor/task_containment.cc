// TaskContainment (see task_containment.h): the cgroup and subreaper implementations. Every call
// here blocks on the cgroup file system and runs off the loop (or before it starts).
#include "services/taskexecutor/task_containment.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>

#include "common/errno_text.h"

namespace regent::taskexecutor {
namespace {

// How long a killed cgroup may take to empty, and a frozen one to report frozen.
constexpr auto kEmptyWait = std::chrono::seconds(5);
constexpr auto kPoll = std::chrono::milliseconds(5);

std::optional<std::string> readFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(fd, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<size_t>(n));
  ::close(fd);
  if (n < 0) return std::nullopt;
  return text;
}

// 0, or the errno.
int writeFile(const std::string& path, const std::string& value) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const ssize_t n = ::write(fd, value.data(), value.size());
  const int error = n < 0 ? errno : 0;
  ::close(fd);
  return error;
}

std::vector<pid_t> pidsIn(const std::string& dir) {
  std::vector<pid_t> pids;
  auto text = readFile(dir + "/cgroup.procs");
  if (!text) return pids;
  size_t start = 0;
  while (start < text->size()) {
    size_t end = text->find('\n', start);
    if (end == std::string::npos) end = text->size();
    if (end > start) pids.push_back(static_cast<pid_t>(std::stol(text->substr(start, end - start))));
    start = end + 1;
  }
  return pids;
}

bool emptyDirs(const std::vector<std::string>& dirs) {
  for (const auto& dir : dirs) {
    auto text = readFile(dir + "/cgroup.procs");
    if (text && !text->empty()) return false;
  }
  return true;
}

template <typename Done>
bool waitFor(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + kEmptyWait;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(kPoll);
  }
  return true;
}

// Kills everything in the cell's cgroup and waits until it is empty. Empty on success, else why.
std::string killCell(const AttemptCgroupPlan& plan) {
  if (!plan.killFile.empty()) {
    const int error = writeFile(plan.killFile, "1");
    if (error != 0 && error != ENOENT) return "cannot write " + plan.killFile + ": " + errnoText(error);
  } else if (!plan.freezerDir.empty()) {
    // Frozen, nothing in it can fork while its pids are read and killed.
    const std::string& dir = plan.freezerDir;
    const std::string stateFile = dir + (plan.freezerV2 ? "/cgroup.freeze" : "/freezer.state");
    writeFile(stateFile, plan.freezerV2 ? "1" : "FROZEN");
    waitFor([&] {
      auto text = readFile(plan.freezerV2 ? dir + "/cgroup.events" : stateFile);
      return !text || (plan.freezerV2 ? text->find("frozen 1") != std::string::npos
                                      : text->rfind("FROZEN", 0) == 0);
    });
    for (pid_t pid : pidsIn(dir)) ::kill(pid, SIGKILL);
    writeFile(stateFile, plan.freezerV2 ? "0" : "THAWED");
  }
  if (!waitFor([&] { return emptyDirs(plan.dirs); })) {
    // Without cgroup.kill a process may have forked between the read and the kill: once more.
    if (!plan.freezerDir.empty()) {
      for (pid_t pid : pidsIn(plan.freezerDir)) ::kill(pid, SIGKILL);
      if (waitFor([&] { return emptyDirs(plan.dirs); })) return {};
    }
    return "still holds processes after SIGKILL";
  }
  return {};
}

std::string removeDirs(const std::vector<std::string>& dirs) {
  std::string problem;
  for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
    int error = 0;
    waitFor([&] {
      error = ::rmdir(it->c_str()) == 0 || errno == ENOENT ? 0 : errno;
      return error != EBUSY;
    });
    if (error != 0 && problem.empty()) problem = "cannot remove " + *it + ": " + errnoText(error);
  }
  return problem;
}

std::string humanBytes(uint64_t bytes) {
  if (bytes % (1024 * 1024) == 0) return std::to_string(bytes / (1024 * 1024)) + " MiB";
  return std::to_string(bytes) + " bytes";
}

class CgroupAttempt final : public AttemptContainment {
 public:
  CgroupAttempt(AttemptCgroupPlan plan, int killFd, uint64_t memoryBytes)
      : plan_(std::move(plan)), killFd_(killFd), memoryBytes_(memoryBytes) {}
  ~CgroupAttempt() override { closeShimFds(); }

  std::vector<std::string> shimArgs(int firstFd) const override {
    std::vector<std::string> args = {"--hold"};
    if (killFd_ >= 0) {
      args.push_back("--kill-fd");
      args.push_back(std::to_string(firstFd));
    }
    return args;
  }
  std::vector<int> shimFds() const override {
    if (killFd_ < 0) return {};
    return {killFd_};
  }
  void closeShimFds() override {
    if (killFd_ >= 0) ::close(killFd_);
    killFd_ = -1;
  }
  bool holdsShim() const override { return true; }

  Status enter(pid_t shim) override {
    for (const auto& dir : plan_.dirs) {
      const int error = writeFile(dir + "/cgroup.procs", std::to_string(shim));
      if (error != 0) {
        return Error::fatal("cannot move the attempt into its cgroup " + dir + "/cgroup.procs: " +
                            errnoText(error));
      }
    }
    return {};
  }

  std::string release() override {
    closeShimFds();
    std::string problem = killCell(plan_);
    std::string oom;
    if (!plan_.oomFile.empty()) {
      const uint64_t kills = parseOomKills(readFile(plan_.oomFile).value_or(""));
      if (kills != 0) {
        oom = "killed by its memory limit (" + humanBytes(memoryBytes_) +
              ", the slot's memory: worker.slot-memory; " + std::to_string(kills) +
              " out-of-memory kill" + (kills == 1 ? "" : "s") + " in its cgroup)";
      }
    }
    const std::string removal = removeDirs(plan_.dirs);
    if (problem.empty()) problem = removal;
    if (!problem.empty()) {
      spdlog::warn("task containment: the cgroup of {} {}", plan_.dirs.front(), problem);
    }
    return oom;
  }

 private:
  AttemptCgroupPlan plan_;
  int killFd_;
  uint64_t memoryBytes_;
};

class CgroupContainment final : public TaskContainment {
 public:
  CgroupContainment(CgroupLayout layout, ContainmentOptions options, bool haveKill,
                    std::string description)
      : layout_(std::move(layout)),
        options_(std::move(options)),
        haveKill_(haveKill),
        description_(std::move(description)) {}
  // The worker's subtree goes with it when no attempt cgroup is left in it (rmdir refuses
  // otherwise; the next start cleans up).
  ~CgroupContainment() override {
    const auto dirs = subtreeDirs(layout_, options_.subtree, haveKill_);
    for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) ::rmdir(it->c_str());
  }

  ContainmentKind kind() const override { return ContainmentKind::kCgroup; }
  const std::string& description() const override { return description_; }

  Result<std::unique_ptr<AttemptContainment>> prepare(const AttemptId& attempt) const override {
    AttemptCgroupPlan plan = planAttemptCgroup(layout_, options_.subtree,
                                               "attempt-" + attempt.toHex(), options_.limits,
                                               haveKill_);
    for (const auto& dir : plan.dirs) {
      if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
        const int error = errno;
        removeDirs(plan.dirs);
        return Error::fatal("cannot create the attempt's cgroup " + dir + ": " + errnoText(error));
      }
    }
    for (const auto& limit : plan.limits) {
      const int error = writeFile(limit.path, limit.value);
      if (error != 0) {
        removeDirs(plan.dirs);
        return Error::fatal("cannot set the attempt's limit " + limit.path + " to " + limit.value +
                            ": " + errnoText(error));
      }
    }
    for (const auto& limit : plan.optionalLimits) writeFile(limit.path, limit.value);
    int killFd = -1;
    if (!plan.killFile.empty()) {
      killFd = ::open(plan.killFile.c_str(), O_WRONLY | O_CLOEXEC);
      if (killFd < 0) {
        const int error = errno;
        removeDirs(plan.dirs);
        return Error::fatal("cannot open " + plan.killFile + ": " + errnoText(error));
      }
    }
    return std::unique_ptr<AttemptContainment>(
        std::make_unique<CgroupAttempt>(std::move(plan), killFd, options_.limits.memoryBytes));
  }

 private:
  const CgroupLayout layout_;
  const ContainmentOptions options_;
  const bool haveKill_;
  const std::string description_;
};

class SubreaperAttempt final : public AttemptContainment {
 public:
  explicit SubreaperAttempt(uint32_t killAfterMs) : killAfterMs_(killAfterMs) {}
  std::vector<std::string> shimArgs(int) const override {
    return {"--subreaper", "--kill-after-ms", std::to_string(killAfterMs_)};
  }
  std::vector<int> shimFds() const override { return {}; }
  void closeShimFds() override {}
  bool holdsShim() const override { return false; }
  Status enter(pid_t) override { return {}; }
  std::string release() override { return {}; }

 private:
  uint32_t killAfterMs_;
};

class SubreaperContainment final : public TaskContainment {
 public:
  SubreaperContainment(uint32_t killAfterMs, std::string description)
      : killAfterMs_(killAfterMs), description_(std::move(description)) {}
  ContainmentKind kind() const override { return ContainmentKind::kSubreaper; }
  const std::string& description() const override { return description_; }
  Result<std::unique_ptr<AttemptContainment>> prepare(const AttemptId&) const override {
    return std::unique_ptr<AttemptContainment>(std::make_unique<SubreaperAttempt>(killAfterMs_));
  }

 private:
  uint32_t killAfterMs_;
  std::string description_;
};

// Kills and removes the attempt cgroups an earlier run left in `subtreeDir`; returns how many.
size_t removeStaleCells(const CgroupLayout& layout, const std::string& subtree, bool haveKill) {
  // The cells' names, from every hierarchy (a v1 one may hold a cell the v2 one lost).
  std::vector<std::string> cells;
  for (const auto& dir : subtreeDirs(layout, subtree, haveKill)) {
    DIR* listing = ::opendir(dir.c_str());
    if (listing == nullptr) continue;
    while (const dirent* entry = ::readdir(listing)) {
      const std::string name = entry->d_name;
      if (name.rfind("attempt-", 0) == 0 &&
          std::find(cells.begin(), cells.end(), name) == cells.end()) {
        cells.push_back(name);
      }
    }
    ::closedir(listing);
  }
  for (const auto& cell : cells) {
    AttemptCgroupPlan plan = planAttemptCgroup(layout, subtree, cell, {}, haveKill);
    const std::string problem = killCell(plan);
    const std::string removal = removeDirs(plan.dirs);
    if (!problem.empty() || !removal.empty()) {
      spdlog::warn("task containment: an earlier run's cgroup {}: {}", cell,
                   problem.empty() ? removal : problem);
    }
  }
  return cells.size();
}

// The cgroup containment, or why there is none.
Result<std::unique_ptr<TaskContainment>> createCgroupContainment(
    const ContainmentOptions& options) {
  auto mountInfo = readFile(options.mountInfoPath);
  auto ownCgroups = readFile(options.cgroupPath);
  if (!mountInfo || !ownCgroups) {
    return Error::fatal("cannot read " + (mountInfo ? options.cgroupPath : options.mountInfoPath));
  }
  auto layout = decideCgroupLayout(parseCgroupMounts(*mountInfo),
                                   parseProcessCgroups(*ownCgroups), readFile);
  if (!layout.ok()) return layout.error();
  CgroupLayout& chosen = layout.value();
  std::string notes;
  // Pure v2: the worker's subtree and its cells need the controllers enabled above them.
  if (!chosen.v2Controllers.empty()) {
    std::string enable;
    for (const auto& controller : chosen.v2Controllers) enable += "+" + controller + " ";
    const int error = writeFile(chosen.unifiedParent + "/cgroup.subtree_control", enable);
    if (error != 0) {
      notes = "; cannot enable " + enable + "in " + chosen.unifiedParent +
              "/cgroup.subtree_control: " + errnoText(error);
      for (auto& controller : chosen.v2Controllers) chosen.unlimited.push_back(controller);
      chosen.v2Controllers.clear();
    }
  }
  auto makeDirs = [](const std::vector<std::string>& dirs) -> Status {
    for (const auto& dir : dirs) {
      if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
        return Error::fatal("cannot create " + dir + ": " + errnoText(errno));
      }
    }
    return {};
  };
  // First without the v1 freezer: whether it is needed depends on the v2 subtree's cgroup.kill.
  std::vector<std::string> dirs = subtreeDirs(chosen, options.subtree, true);
  if (Status made = makeDirs(dirs); !made.ok()) return made.error();
  if (!chosen.v2Controllers.empty()) {
    std::string enable;
    for (const auto& controller : chosen.v2Controllers) enable += "+" + controller + " ";
    const int error = writeFile(dirs.front() + "/cgroup.subtree_control", enable);
    if (error != 0) {
      return Error::fatal("cannot enable " + enable + "in " + dirs.front() +
                          "/cgroup.subtree_control: " + errnoText(error));
    }
  }
  const bool haveKill =
      !chosen.unifiedParent.empty() && ::access((dirs.front() + "/cgroup.kill").c_str(), F_OK) == 0;
  dirs = subtreeDirs(chosen, options.subtree, haveKill);
  if (Status made = makeDirs(dirs); !made.ok()) return made.error();
  const size_t stale = removeStaleCells(chosen, options.subtree, haveKill);
  if (stale != 0) {
    spdlog::warn("task containment: killed and removed {} attempt cgroup(s) an earlier run of "
                 "this worker left in {}",
                 stale, dirs.front());
  }
  std::string description = chosen.describe(options.subtree) + notes;
  if (chosen.unifiedParent.empty() || !haveKill) description += "; killed by freezing";
  return std::unique_ptr<TaskContainment>(std::make_unique<CgroupContainment>(
      std::move(chosen), options, haveKill, std::move(description)));
}

}  // namespace

const char* containmentKindName(ContainmentKind kind) {
  return kind == ContainmentKind::kCgroup ? "cgroup" : "subreaper";
}

Result<std::unique_ptr<TaskContainment>> createTaskContainment(const ContainmentOptions& options) {
  if (options.mode == "subreaper") {
    return std::unique_ptr<TaskContainment>(std::make_unique<SubreaperContainment>(
        options.killAfterMs, "subreaper (worker.containment is subreaper)"));
  }
  if (options.mode != "auto" && options.mode != "cgroup") {
    return Error::fatal("bad value for worker.containment: \"" + options.mode +
                        "\" (expected auto, cgroup or subreaper)");
  }
  auto cgroup = createCgroupContainment(options);
  if (cgroup.ok()) return cgroup;
  if (options.mode == "cgroup") {
    return Error::fatal("worker.containment is cgroup, but no cgroup can be had: " +
                        cgroup.error().message);
  }
  return std::unique_ptr<TaskContainment>(std::make_unique<SubreaperContainment>(
      options.killAfterMs, "subreaper (no cgroup: " + cgroup.error().message + ")"));
}

}  // namespace regent::taskexecutor

// The process provider (process_worker_provider.h): regent-worker processes on this host.
#include "services/providers/process_worker_provider.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <system_error>

#include "common/errno_text.h"
#include "services/providers/worker_config.h"

namespace regent::providers {

namespace fs = std::filesystem;

namespace {

constexpr const char* kStateFile = "provider";
constexpr const char* kConfigFile = "worker.yaml";
constexpr Duration kPollStep{100};
constexpr Duration kKillBound{5000};

// The state (field 3) and start time in clock ticks after boot (field 22) of /proc/<pid>/stat.
struct ProcStat {
  char state = '?';
  uint64_t startTicks = 0;
};

// nullopt when the process is gone (the read of an exiting process fails with ESRCH: read with
// read(2), which reports it, not a stream, which throws).
std::optional<ProcStat> procStat(int pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buffer[1024];
  ssize_t n;
  do {
    n = ::read(fd, buffer, sizeof buffer - 1);
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n <= 0) return std::nullopt;
  const std::string text(buffer, static_cast<size_t>(n));
  // The command name (field 2) is in parentheses and may hold spaces: the fields after it
  // start after the last ')'.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(close + 1));
  ProcStat stat;
  fields >> stat.state;
  std::string skipped;
  for (int field = 4; field < 22; ++field) fields >> skipped;
  if (!(fields >> stat.startTicks)) return std::nullopt;
  return stat;
}

// The process `pid` that started at `startTicks` is alive (not a zombie, not another process
// that got the pid later).
bool alive(int pid, uint64_t startTicks) {
  const auto stat = procStat(pid);
  return stat && stat->startTicks == startTicks && stat->state != 'Z' && stat->state != 'X';
}

Status writeFile(const std::string& path, const std::string& contents, mode_t mode) {
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return Error::fatal("cannot write " + path + ": " + errnoText(errno));
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = errno;
      ::close(fd);
      return Error::fatal("cannot write " + path + ": " + errnoText(error));
    }
    done += static_cast<size_t>(n);
  }
  if (::fchmod(fd, mode) != 0 || ::close(fd) != 0) {
    return Error::fatal("cannot write " + path + ": " + errnoText(errno));
  }
  return Status();
}

// What a state file holds.
struct StateLine {
  std::string cluster;
  int pid = 0;
  uint64_t startTicks = 0;
  uint64_t epoch = 0;
};

std::optional<StateLine> readState(const fs::path& dir) {
  std::ifstream in(dir / kStateFile);
  StateLine line;
  if (!(in >> line.cluster >> line.pid >> line.startTicks >> line.epoch)) return std::nullopt;
  return line;
}

std::string describeExit(const ChildExit& exit) {
  if (exit.termSignal != 0) return "killed by signal " + std::to_string(exit.termSignal);
  return "exited with status " + std::to_string(exit.exitStatus);
}

}  // namespace

Result<kj::Own<ProcessWorkerProvider>> ProcessWorkerProvider::create(
    EventLoop& loop, EventSink& events, ProcessProviderOptions options) {
  if (::access(options.workerBinary.c_str(), X_OK) != 0) {
    return Error::fatal("resourcemanager.process.worker-binary: cannot run " +
                        options.workerBinary + ": " + errnoText(errno));
  }
  std::error_code kind;
  if (!fs::is_regular_file(options.workerBinary, kind)) {
    return Error::fatal("resourcemanager.process.worker-binary: " + options.workerBinary +
                        " is not a regular file");
  }
  std::error_code error;
  const fs::path clusterDir = fs::path(options.dataRoot) / options.clusterId;
  fs::create_directories(clusterDir, error);
  if (error) {
    return Error::fatal("resourcemanager.process.data-root: cannot create " +
                        clusterDir.string() + ": " + error.message());
  }
  ::chmod(clusterDir.c_str(), 0711);
  return kj::heap<ProcessWorkerProvider>(FactoryKey<ProcessWorkerProvider>(), loop, events,
                                         std::move(options));
}

ProcessWorkerProvider::ProcessWorkerProvider(FactoryKey<ProcessWorkerProvider>, EventLoop& loop,
                                             EventSink& events, ProcessProviderOptions options)
    : loop_(loop),
      events_(events),
      options_(std::move(options)),
      clusterDir_((fs::path(options_.dataRoot) / options_.clusterId).string()) {}

ProcessWorkerProvider::~ProcessWorkerProvider() noexcept {
  for (auto& [id, worker] : tracked_) {
    if (worker.child.get() != nullptr) worker.child->leaveRunning();
  }
}

resourcemanager::Vouch ProcessWorkerProvider::vouches(const std::string& id, const std::string&,
                                                      uint32_t pid) const {
  auto found = tracked_.find(id);
  if (found == tracked_.end()) return resourcemanager::Vouch::kUnknown;
  return found->second.pid == static_cast<int>(pid) ? resourcemanager::Vouch::kYes
                                                     : resourcemanager::Vouch::kNo;
}

std::string ProcessWorkerProvider::workerDir(const std::string& id) const {
  return (fs::path(clusterDir_) / id).string();
}

void ProcessWorkerProvider::follow(const std::string& id, int pid, uint64_t startTicks,
                                   kj::Own<ChildProcess> child) {
  Tracked& tracked = tracked_[id];
  tracked.pid = pid;
  tracked.startTicks = startTicks;
  if (child.get() != nullptr) {
    tasks_.add(child->onExit().then([this, id, pid](ChildExit exit) {
      auto found = tracked_.find(id);
      if (found == tracked_.end() || found->second.pid != pid) return;
      if (found->second.releasing) return;  // release() waits for it.
      ended(id, "worker " + id + " (pid " + std::to_string(pid) + ") " + describeExit(exit));
    }));
    tracked.child = kj::mv(child);
  } else {
    ensurePolling();
  }
}

void ProcessWorkerProvider::ensurePolling() {
  if (polling_) return;
  polling_ = true;
  tasks_.add(pollLoop());
}

void ProcessWorkerProvider::ended(const std::string& id, const std::string& reason) {
  tracked_.erase(id);
  events_.emit(Event("provider worker ended", EventLevel::kWarn)
                   .field("provider", name_)
                   .field("worker", id)
                   .quotedField("reason", reason));
  if (listener_ != nullptr) listener_->workerEnded(id, reason);
}

kj::Promise<void> ProcessWorkerProvider::pollLoop() {
  return loop_.timer()
      .afterDelay(options_.pollInterval.count() * kj::MILLISECONDS)
      .then([this]() {
        std::vector<std::pair<std::string, std::pair<int, uint64_t>>> watched;
        for (const auto& [id, worker] : tracked_) {
          if (worker.child.get() == nullptr && !worker.releasing) {
            watched.push_back({id, {worker.pid, worker.startTicks}});
          }
        }
        if (watched.empty()) {
          polling_ = false;
          return kj::Promise<void>(kj::READY_NOW);
        }
        return loop_
            .runBlocking([watched]() {
              std::vector<std::string> gone;
              for (const auto& [id, process] : watched) {
                if (!alive(process.first, process.second)) gone.push_back(id);
              }
              return gone;
            })
            .then([this](std::vector<std::string> gone) {
              for (const std::string& id : gone) {
                auto found = tracked_.find(id);
                if (found == tracked_.end() || found->second.releasing ||
                    found->second.child.get() != nullptr) {
                  continue;
                }
                ended(id, "worker " + id + " (pid " + std::to_string(found->second.pid) +
                              ") is no longer running");
              }
              return pollLoop();
            });
      });
}

kj::Promise<Status> ProcessWorkerProvider::start(const std::string& id, uint64_t epoch) {
  if (!isSafeWorkerId(id)) return Status(Error::fatal("not a worker id: \"" + id + "\""));
  const fs::path dir = fs::path(clusterDir_) / id;
  std::string yaml =
      "# Written by the process provider of the leader of epoch " + std::to_string(epoch) +
      " for worker " + id + ".\n";
  for (const auto& [key, value] : options_.settings) yaml += key + ": " + yamlQuoted(value) + "\n";
  yaml += "worker.data-dir: " + yamlQuoted((dir / "data").string()) + "\n";
  yaml += "worker.provider-id: " + yamlQuoted(name_ + ":" + id) + "\n";
  yaml += "worker.http.bind: " + yamlQuoted(options_.httpHost + ":0") + "\n";
  yaml += "events.file: " + yamlQuoted((dir / "events.jsonl").string()) + "\n";
  return loop_
      .runBlocking([dir, yaml = std::move(yaml)]() -> Status {
        std::error_code error;
        fs::create_directories(dir, error);
        if (error) return Error::fatal("cannot create " + dir.string() + ": " + error.message());
        // Others may pass through (the worker's task user reaches its attempt directories under
        // data/, which the worker creates and guards), not list it; worker.yaml is 0600.
        ::chmod(dir.c_str(), 0711);
        ::unlink((dir / "worker.out").c_str());  // A retry of the same id: new files.
        ::unlink((dir / "worker.err").c_str());
        return writeFile((dir / kConfigFile).string(), yaml, 0600);
      })
      .then([this, id, epoch, dir](Status prepared) -> kj::Promise<Status> {
        if (!prepared.ok()) return prepared;
        SpawnOptions spawn;
        spawn.argv = {options_.workerBinary, "--config", (dir / kConfigFile).string()};
        spawn.inheritEnvironment = false;
        spawn.env = {"PATH=/usr/local/bin:/usr/bin:/bin"};
        // The master's working directory: relative paths in the options mean the same there.
        spawn.captureOutput = false;
        spawn.stdoutPath = (dir / "worker.out").string();
        spawn.stderrPath = (dir / "worker.err").string();
        spawn.outputMode = 0600;  // Its log is not its tasks' to read.
        spawn.newSession = true;  // Its own session: it outlives this master.
        auto child = ChildProcess::spawn(loop_, std::move(spawn));
        if (!child.ok()) return Status(Error::fatal(child.error().message));
        kj::Own<ChildProcess> process = kj::mv(child).value();
        const int pid = process->pid();
        // Followed at once (its exit is watched); the state file is for a later master.
        follow(id, pid, 0, kj::mv(process));
        const std::string cluster = options_.clusterId;
        return loop_
            .runBlocking([dir, pid, epoch, cluster]() -> Result<uint64_t> {
              const auto stat = procStat(pid);
              const uint64_t ticks = stat ? stat->startTicks : 0;
              Status written = writeFile((dir / kStateFile).string(),
                                         cluster + " " + std::to_string(pid) + " " +
                                             std::to_string(ticks) + " " + std::to_string(epoch) +
                                             "\n",
                                         0600);
              if (!written.ok()) return written.error();
              return ticks;
            })
            .then([this, id, epoch, dir, pid](Result<uint64_t> recorded) -> Status {
              auto found = tracked_.find(id);
              if (!recorded.ok()) {
                // A worker no later master could find: not started.
                if (found != tracked_.end() && found->second.pid == pid) {
                  found->second.releasing = true;  // Its exit is no "ended".
                  if (found->second.child.get() != nullptr) found->second.child->signal(SIGKILL).ok();
                  tracked_.erase(found);
                }
                return recorded.error();
              }
              if (found != tracked_.end() && found->second.pid == pid) {
                found->second.startTicks = recorded.value();
              }
              events_.emit(Event("provider worker started")
                               .field("provider", name_)
                               .field("worker", id)
                               .field("pid", uint64_t(pid))
                               .field("epoch", epoch)
                               .field("dir", dir.string()));
              return Status();
            });
      });
}

kj::Promise<bool> ProcessWorkerProvider::waitGone(int pid, uint64_t startTicks, Duration bound) {
  // /proc is read off the loop, as every file is.
  return loop_.runBlocking([pid, startTicks]() { return alive(pid, startTicks); })
      .then([=, this](bool running) -> kj::Promise<bool> {
        if (!running) return true;
        if (bound <= Duration(0)) return false;
        return loop_.timer().afterDelay(kPollStep.count() * kj::MILLISECONDS).then([=, this]() {
          return waitGone(pid, startTicks, bound - kPollStep);
        });
      });
}

kj::Promise<Status> ProcessWorkerProvider::release(const std::string& id, Duration grace) {
  if (!isSafeWorkerId(id)) return Status(Error::fatal("not a worker id: \"" + id + "\""));
  const std::string dir = workerDir(id);
  auto removeDir = [this, dir]() {
    return loop_.runBlocking([dir]() -> Status {
      std::error_code error;
      fs::remove_all(dir, error);
      if (error) return Error::fatal("cannot remove " + dir + ": " + error.message());
      return Status();
    });
  };
  auto found = tracked_.find(id);
  if (found == tracked_.end()) return removeDir();
  found->second.releasing = true;
  const int pid = found->second.pid;
  const uint64_t ticks = found->second.startTicks;
  return waitGone(pid, ticks, grace)
      .then([this, id, pid, ticks](bool gone) -> kj::Promise<bool> {
        if (gone) return true;
        // Its whole session: the worker leads it (newSession).
        spdlog::warn("process provider: worker {} (pid {}) did not stop within its grace; "
                     "killing it",
                     id, pid);
        return loop_.runBlocking([pid, ticks]() { return alive(pid, ticks); })
            .then([this, pid, ticks](bool running) {
              // Its session, only while the pid is still that worker's (not a later process's).
              if (running) ::kill(-pid, SIGKILL);
              return waitGone(pid, ticks, kKillBound);
            });
      })
      .then([this, id, pid, removeDir](bool gone) -> kj::Promise<Status> {
        tracked_.erase(id);
        if (!gone) {
          return Status(Error::fatal("worker " + id + " (pid " + std::to_string(pid) +
                                     ") still runs after SIGKILL"));
        }
        events_.emit(Event("provider worker released")
                         .field("provider", name_)
                         .field("worker", id)
                         .field("pid", uint64_t(pid)));
        return removeDir();
      });
}

kj::Promise<Result<std::vector<std::string>>> ProcessWorkerProvider::list() {
  struct Found {
    std::string id;
    int pid;
    uint64_t startTicks;
  };
  using Listed = Result<std::vector<Found>>;
  return loop_
      .runBlocking([dir = clusterDir_, cluster = options_.clusterId]() -> Listed {
        std::vector<Found> found;
        std::error_code error;
        fs::directory_iterator entries(dir, error);
        if (error) return Error::fatal("cannot list " + dir + ": " + error.message());
        for (const fs::directory_entry& entry : entries) {
          if (!entry.is_directory(error)) continue;
          const auto state = readState(entry.path());
          if (!state || state->cluster != cluster) continue;
          if (!alive(state->pid, state->startTicks)) continue;
          found.push_back(Found{entry.path().filename().string(), state->pid, state->startTicks});
        }
        return found;
      })
      .then([this](Listed listed) -> Result<std::vector<std::string>> {
        if (!listed.ok()) return listed.error();
        std::vector<std::string> ids;
        for (const Found& worker : listed.value()) {
          ids.push_back(worker.id);
          auto known = tracked_.find(worker.id);
          if (known == tracked_.end()) {
            follow(worker.id, worker.pid, worker.startTicks, kj::Own<ChildProcess>());
          } else {
            // A release that an ended term left half done is nobody's now: the new term
            // follows the worker again (and releases it when it is idle).
            known->second.releasing = false;
            if (known->second.child.get() == nullptr) ensurePolling();
          }
        }
        // A release that an ended term left half done, whose worker is gone since: finished
        // here (its directory goes, as the release would have removed it).
        for (auto it = tracked_.begin(); it != tracked_.end();) {
          const bool listedNow = std::find(ids.begin(), ids.end(), it->first) != ids.end();
          if (!it->second.releasing || listedNow) {
            ++it;
            continue;
          }
          const std::string dir = workerDir(it->first);
          it = tracked_.erase(it);
          tasks_.add(loop_
                         .runBlocking([dir]() {
                           std::error_code error;
                           fs::remove_all(dir, error);
                         }));
        }
        return ids;
      });
}

}  // namespace regent::providers

// The docker provider (docker_worker_provider.h): workers as containers.
#include "services/providers/docker_worker_provider.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/errno_text.h"
#include "services/providers/worker_config.h"

namespace regent::providers {

namespace {

using json = nlohmann::json;

constexpr const char* kConfigDir = "/etc/regent-worker";
constexpr const char* kDataDir = "/var/lib/regent-worker";
constexpr uint64_t kMaxCopiedFileBytes = 1024 * 1024;
// What a worker container may use beyond its slots' memory: the worker and its task shims.
constexpr uint64_t kWorkerOwnMemory = 256 * 1024 * 1024;

std::string percentEncoded(const std::string& text) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// The label filter of a container list: this cluster's, or one worker of it.
std::string labelFilter(const std::string& clusterId, const std::string& workerId) {
  json labels = json::array({"regent.cluster=" + clusterId});
  if (!workerId.empty()) labels.push_back("regent.worker-id=" + workerId);
  return percentEncoded(json{{"label", labels}}.dump());
}

Result<std::string> readSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error::fatal("cannot read " + path + ": " + errnoText(errno));
  std::ostringstream text;
  text << in.rdbuf();
  std::string contents = text.str();
  if (contents.size() > kMaxCopiedFileBytes) {
    return Error::fatal(path + " is larger than 1MiB");
  }
  return contents;
}

// "Exited (1) 2 seconds ago" -> "exited with status 1"; other statuses as they are.
std::string describeStatus(const std::string& status) {
  if (status.rfind("Exited (", 0) == 0) {
    const size_t close = status.find(')');
    if (close != std::string::npos) return "exited with status " + status.substr(8, close - 8);
  }
  return status.empty() ? "stopped" : status;
}

// The last non-empty line of a log, shortened.
std::string lastLine(const std::string& log) {
  std::istringstream lines(log);
  std::string line;
  std::string last;
  while (std::getline(lines, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) last = line;
  }
  return last.size() > 300 ? last.substr(0, 300) + "..." : last;
}

// The files of worker `id`: its worker.yaml and the files its settings name, read on the master
// (off the loop: it takes copies, never the provider).
Result<std::vector<ArchiveFile>> workerFiles(const DockerProviderOptions& options,
                                             const std::string& providerId,
                                             const std::string& advertisedHost,
                                             const std::string& id, uint64_t epoch) {
  std::vector<ArchiveFile> files;
  std::map<std::string, std::string> own{
      {"worker.data-dir", kDataDir},
      {"worker.provider-id", providerId},
      // Any free port: on the host network, workers share the host's ports.
      {"worker.http.bind", "0.0.0.0:0"},
  };
  if (!advertisedHost.empty()) own["worker.advertised-host"] = advertisedHost;
  std::string yaml = "# Written by the docker provider of the leader of epoch " +
                     std::to_string(epoch) + " for worker " + id + ".\n";
  for (const auto& [key, value] : options.settings) {
    if (own.count(key) != 0 || key == "events.file") continue;
    std::string text = value;
    const bool copied =
        std::find(options.copiedFileSettings.begin(), options.copiedFileSettings.end(), key) !=
        options.copiedFileSettings.end();
    if (copied && !value.empty()) {
      auto contents = readSmallFile(value);
      if (!contents.ok()) return Error::fatal(contents.error().message + " (" + key + ")");
      text = std::string(kConfigDir) + "/" + key;
      files.push_back(
          ArchiveFile{text, key == "rpc.tls.ca" ? 0644u : 0600u, std::move(contents).value()});
    }
    yaml += key + ": " + yamlQuoted(text) + "\n";
  }
  for (const auto& [key, value] : own) yaml += key + ": " + yamlQuoted(value) + "\n";
  files.insert(files.begin(),
               ArchiveFile{std::string(kConfigDir) + "/worker.yaml", 0600, std::move(yaml)});
  return files;
}

}  // namespace

Result<kj::Own<DockerWorkerProvider>> DockerWorkerProvider::create(EventLoop& loop,
                                                                   EventSink& events,
                                                                   DockerProviderOptions options) {
  if (options.image.empty()) {
    return Error::fatal(
        "resourcemanager.docker.image: empty; the docker provider needs the image its workers "
        "run (one that holds regent-worker, such as the image of docker/Dockerfile)");
  }
  if (options.workerCommand.empty() || options.workerCommand[0].empty()) {
    return Error::fatal("resourcemanager.docker.worker-command: empty");
  }
  struct stat info {};
  if (::stat(options.socket.c_str(), &info) != 0) {
    return Error::fatal("resourcemanager.docker.socket: " + options.socket + ": " +
                        errnoText(errno) + " (is the Docker daemon running, and its socket " +
                        "mounted into this master's container?)");
  }
  if (!S_ISSOCK(info.st_mode)) {
    return Error::fatal("resourcemanager.docker.socket: " + options.socket +
                        " is not a unix socket");
  }
  return kj::heap<DockerWorkerProvider>(FactoryKey<DockerWorkerProvider>(), loop, events,
                                        std::move(options));
}

DockerWorkerProvider::DockerWorkerProvider(FactoryKey<DockerWorkerProvider>, EventLoop& loop,
                                           EventSink& events, DockerProviderOptions options)
    : loop_(loop),
      events_(events),
      options_(std::move(options)),
      engine_(loop.io().getNetwork(), loop.timer(), options_.socket) {}

DockerWorkerProvider::~DockerWorkerProvider() noexcept = default;

std::string DockerWorkerProvider::containerName(const std::string& id) const {
  const std::string name = "regent-" + options_.clusterId + "-" + id;
  const bool valid = std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '-';
  });
  return valid ? name : "";
}

std::string DockerWorkerProvider::explained(const std::string& what, unsigned status,
                                            const std::string& message) const {
  // The two a person most often gets wrong, named by their options.
  if (status == 404 && message.find("image") != std::string::npos) {
    return "image " + options_.image + " not found (resourcemanager.docker.image): " + message;
  }
  if (status == 404 && message.find("network") != std::string::npos) {
    return "network " + options_.network +
           " not found (resourcemanager.docker.network): " + message;
  }
  return what + ": " + message + " (HTTP " + std::to_string(status) + ")";
}

bool DockerWorkerProvider::networkHasNames() const {
  // Docker's DNS resolves container names on user-defined networks only: not on the default
  // bridge, the host's or none, nor in another container's network.
  const std::string& network = options_.network;
  return network != "bridge" && network != "default" && network != "host" && network != "none" &&
         network.rfind("container:", 0) != 0;
}

resourcemanager::Vouch DockerWorkerProvider::vouches(const std::string& id, const std::string& host,
                                                     uint32_t) const {
  auto found = tracked_.find(id);
  if (found == tracked_.end() || !networkHasNames() || containerName(id).empty()) {
    return resourcemanager::Vouch::kUnknown;
  }
  return host == containerName(id) ? resourcemanager::Vouch::kYes : resourcemanager::Vouch::kNo;
}

kj::Promise<Status> DockerWorkerProvider::start(const std::string& id, uint64_t epoch) {
  if (!isSafeWorkerId(id)) return Status(Error::fatal("not a worker id: \"" + id + "\""));
  if (daemonCpus_ > 0) return create(id, epoch, false);
  // The daemon's CPUs, once, to bound the containers' CPU limit.
  return engine_.call(kj::HttpMethod::GET, "/info", options_.requestTimeout)
      .then([this, id, epoch](Result<DockerAnswer> info) {
        if (info.ok() && info.value().status == 200) {
          const auto parsed = json::parse(info.value().body, nullptr, false);
          if (parsed.is_object() && parsed.contains("NCPU") &&
              parsed["NCPU"].is_number_unsigned()) {
            daemonCpus_ = parsed["NCPU"].get<uint64_t>();
          }
        }
        return create(id, epoch, false);
      });
}

kj::Promise<Status> DockerWorkerProvider::create(const std::string& id, uint64_t epoch,
                                                 bool retried) {
  json command = json::array();
  for (const std::string& part : options_.workerCommand) command.push_back(part);
  command.push_back("--config");
  command.push_back(std::string(kConfigDir) + "/worker.yaml");
  json body{
      {"Image", options_.image},
      {"Entrypoint", command},
      {"Cmd", nullptr},
      {"User", "0"},
      // The image's own health check (the compose image's probes a fixed port) is not the
      // worker's: a started worker's health is its registration.
      {"Healthcheck", {{"Test", json::array({"NONE"})}}},
      {"Labels",
       {{"regent.cluster", options_.clusterId},
        {"regent.worker-id", id},
        {"regent.epoch", std::to_string(epoch)}}},
      {"HostConfig",
       {{"NetworkMode", options_.network},
        {"Init", true},
        {"RestartPolicy", {{"Name", "no"}}},
        {"CapDrop", json::array({"ALL"})},
        {"CapAdd", json::array({"CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID"})},
        {"SecurityOpt", json::array({"no-new-privileges:true"})},
        // The container holds what its slots offer, and the worker itself: inside it, the
        // cgroups are read-only, so the worker cannot confine each task to its slot.
        {"Memory", static_cast<int64_t>(options_.slotsPerWorker * options_.slotProfile.memoryBytes +
                                        kWorkerOwnMemory)}}},
  };
  if (daemonCpus_ > 0) {
    const uint64_t wanted = uint64_t{options_.slotsPerWorker} * options_.slotProfile.cpuMillis;
    // At most the daemon's host's CPUs (a larger limit is refused).
    body["HostConfig"]["NanoCpus"] =
        static_cast<int64_t>(std::min<uint64_t>(wanted, daemonCpus_ * 1000) * 1000000);
  }
  const std::string name = containerName(id);
  if (networkHasNames() && !name.empty()) body["Hostname"] = name;
  const std::string path =
      "/containers/create" + (name.empty() ? std::string() : "?name=" + percentEncoded(name));
  return engine_
      .call(kj::HttpMethod::POST, path, options_.requestTimeout, "application/json",
            body.dump(-1, ' ', false, json::error_handler_t::replace))
      .then([this, id, epoch, retried, name](Result<DockerAnswer> answer) -> kj::Promise<Status> {
        if (!answer.ok()) return Status(Error::fatal(answer.error().message));
        const DockerAnswer& created = answer.value();
        const std::string message = dockerMessage(created);
        if (created.status == 409 && !retried) {
          // A container of that name is left from an earlier start of the same id (a start
          // whose answer was lost): it never ran for anyone, so it goes, and the start again.
          return listContainers(id).then(
              [this, id, epoch](Result<std::vector<Listed>> listed) -> kj::Promise<Status> {
                kj::Promise<void> removed = kj::READY_NOW;
                if (listed.ok()) {
                  for (const Listed& old : listed.value()) {
                    removed = removed.then([this, cid = old.containerId] { return remove(cid); });
                  }
                }
                return removed.then([this, id, epoch] { return create(id, epoch, true); });
              });
        }
        if (created.status != 201) {
          return Status(Error::fatal(
              explained("cannot create the container of worker " + id + " from " + options_.image,
                        created.status, message)));
        }
        const auto parsed = json::parse(created.body, nullptr, false);
        if (!parsed.is_object() || !parsed.contains("Id") || !parsed["Id"].is_string()) {
          return Status(Error::fatal("the daemon created no container id for worker " + id + ": " +
                                     created.body.substr(0, 200)));
        }
        return copyFilesAndStart(id, epoch, parsed["Id"].get<std::string>());
      });
}

kj::Promise<Status> DockerWorkerProvider::copyFilesAndStart(const std::string& id, uint64_t epoch,
                                                            const std::string& containerId) {
  // The files are read off the loop (the secret may sit on a slow mount).
  const std::string advertised = networkHasNames() ? containerName(id) : "";
  return loop_
      .runBlocking([options = options_, providerId = name_ + ":" + id, advertised, id, epoch]() {
        return workerFiles(options, providerId, advertised, id, epoch);
      })
      .then([this, id, containerId](Result<std::vector<ArchiveFile>> files) {
        if (!files.ok()) return kj::Promise<Result<DockerAnswer>>(files.error());
        auto archive = tarArchive(files.value());
        if (!archive.ok()) return kj::Promise<Result<DockerAnswer>>(archive.error());
        return engine_.call(kj::HttpMethod::PUT, "/containers/" + containerId + "/archive?path=/",
                            options_.requestTimeout, "application/x-tar",
                            std::move(archive).value());
      })
      .then([this, id, containerId](Result<DockerAnswer> copied) -> kj::Promise<Status> {
        std::string failure;
        if (!copied.ok()) {
          failure = copied.error().message;
        } else if (copied.value().status != 200) {
          failure = "cannot copy the configuration into the container of worker " + id + ": " +
                    dockerMessage(copied.value());
        }
        if (!failure.empty()) {
          return remove(containerId).then([failure] { return Status(Error::fatal(failure)); });
        }
        return engine_
            .call(kj::HttpMethod::POST, "/containers/" + containerId + "/start",
                  options_.requestTimeout)
            .then([this, id, containerId](Result<DockerAnswer> started) -> kj::Promise<Status> {
              if (started.ok() &&
                  (started.value().status == 204 || started.value().status == 304)) {
                return Status();
              }
              const std::string failure =
                  started.ok() ? explained("cannot start the container of worker " + id + " (" +
                                               options_.image + ")",
                                           started.value().status, dockerMessage(started.value()))
                               : started.error().message;
              return remove(containerId).then([failure] { return Status(Error::fatal(failure)); });
            });
      })
      .then([this, id, epoch, containerId](Status started) -> Status {
        if (!started.ok()) return started;
        Tracked& tracked = tracked_[id];
        tracked.containerId = containerId;
        tracked.releasing = false;
        tracked.since = ++generation_;
        ensurePolling();
        events_.emit(Event("provider worker started")
                         .field("provider", name_)
                         .field("worker", id)
                         .field("container", containerId.substr(0, 12))
                         .field("epoch", epoch)
                         .field("image", options_.image));
        return Status();
      });
}

kj::Promise<void> DockerWorkerProvider::remove(const std::string& containerId) {
  return engine_
      .call(kj::HttpMethod::DELETE, "/containers/" + containerId + "?force=true&v=true",
            options_.requestTimeout)
      .then([containerId](Result<DockerAnswer> removed) {
        if (!removed.ok()) {
          spdlog::warn("docker provider: cannot remove container {}: {}", containerId.substr(0, 12),
                       removed.error().message);
        } else if (removed.value().status != 204 && removed.value().status != 404) {
          spdlog::warn("docker provider: cannot remove container {}: {}", containerId.substr(0, 12),
                       dockerMessage(removed.value()));
        }
      });
}

kj::Promise<Result<std::vector<DockerWorkerProvider::Listed>>> DockerWorkerProvider::listContainers(
    const std::string& workerId) {
  return engine_
      .call(kj::HttpMethod::GET,
            "/containers/json?all=true&filters=" + labelFilter(options_.clusterId, workerId),
            options_.requestTimeout)
      .then([](Result<DockerAnswer> answer) -> Result<std::vector<Listed>> {
        if (!answer.ok()) return Error::retryable(answer.error().message);
        if (answer.value().status != 200) {
          return Error::retryable("cannot list containers: " + dockerMessage(answer.value()));
        }
        const auto parsed = json::parse(answer.value().body, nullptr, false);
        if (!parsed.is_array()) {
          return Error::retryable("the container list is not a JSON array");
        }
        std::vector<Listed> listed;
        for (const json& container : parsed) {
          if (!container.is_object()) continue;
          // Each field only when it is a string: an odd answer is no exception.
          auto text = [](const json& object, const char* key) {
            const auto found = object.find(key);
            return found != object.end() && found->is_string() ? found->get<std::string>() : "";
          };
          Listed entry;
          entry.containerId = text(container, "Id");
          entry.state = text(container, "State");
          entry.status = text(container, "Status");
          const auto labels = container.find("Labels");
          if (labels != container.end() && labels->is_object()) {
            entry.workerId = text(*labels, "regent.worker-id");
          }
          if (!entry.containerId.empty() && isSafeWorkerId(entry.workerId)) listed.push_back(entry);
        }
        return listed;
      });
}

kj::Promise<Status> DockerWorkerProvider::stopAndRemove(const std::string& id,
                                                        const std::string& containerId,
                                                        Duration grace) {
  const int64_t seconds = std::max<int64_t>(0, (grace.count() + 999) / 1000);
  return engine_
      .call(kj::HttpMethod::POST,
            "/containers/" + containerId + "/stop?t=" + std::to_string(seconds),
            options_.requestTimeout + grace)
      .then([this, id, containerId](Result<DockerAnswer> stopped) -> kj::Promise<Status> {
        if (!stopped.ok()) return Status(Error::fatal(stopped.error().message));
        const unsigned status = stopped.value().status;
        if (status != 204 && status != 304 && status != 404) {
          return Status(Error::fatal("cannot stop the container of worker " + id + ": " +
                                     dockerMessage(stopped.value())));
        }
        return engine_
            .call(kj::HttpMethod::DELETE, "/containers/" + containerId + "?force=true&v=true",
                  options_.requestTimeout)
            .then([id](Result<DockerAnswer> removed) -> Status {
              if (!removed.ok()) return Error::fatal(removed.error().message);
              const unsigned status = removed.value().status;
              if (status != 204 && status != 404) {
                return Error::fatal("cannot remove the container of worker " + id + ": " +
                                    dockerMessage(removed.value()));
              }
              return Status();
            });
      });
}

kj::Promise<Status> DockerWorkerProvider::release(const std::string& id, Duration grace) {
  if (!isSafeWorkerId(id)) return Status(Error::fatal("not a worker id: \"" + id + "\""));
  auto found = tracked_.find(id);
  if (found != tracked_.end()) found->second.releasing = true;
  // By label, not only by what this process follows: a container an earlier leader started.
  return listContainers(id).then([this, id, grace](
                                     Result<std::vector<Listed>> listed) -> kj::Promise<Status> {
    if (!listed.ok()) {
      following(id);
      return Status(listed.error());
    }
    kj::Promise<Status> all = Status();
    for (const Listed& container : listed.value()) {
      all = all.then([this, id, grace, cid = container.containerId](Status before) {
        return stopAndRemove(id, cid, grace).then([before](Status now) {
          return before.ok() ? now : before;
        });
      });
    }
    return all.then([this, id](Status released) -> Status {
      if (!released.ok()) {
        following(id);
        return released;
      }
      tracked_.erase(id);
      events_.emit(Event("provider worker released").field("provider", name_).field("worker", id));
      return Status();
    });
  });
}

kj::Promise<Result<std::vector<std::string>>> DockerWorkerProvider::list() {
  return listContainers().then(
      [this](Result<std::vector<Listed>> listed) -> Result<std::vector<std::string>> {
        if (!listed.ok()) return listed.error();
        std::vector<std::string> ids;
        for (const Listed& container : listed.value()) {
          if (container.state != "running" && container.state != "created" &&
              container.state != "restarting" && container.state != "paused") {
            // Ended while no master followed it: nobody's worker; it goes.
            events_.emit(Event("provider worker removed")
                             .field("provider", name_)
                             .field("worker", container.workerId)
                             .field("container", container.containerId.substr(0, 12))
                             .quotedField("status", container.status));
            tasks_.add(remove(container.containerId));
            continue;
          }
          ids.push_back(container.workerId);
          Tracked& tracked = tracked_[container.workerId];
          tracked.containerId = container.containerId;
          tracked.since = ++generation_;
          // A release that an ended term left half done is nobody's now: the new term follows
          // the worker again (and releases it when it is idle).
          tracked.releasing = false;
        }
        std::sort(ids.begin(), ids.end());
        ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
        // What is followed and no longer runs (a release an ended term left half done, whose
        // container the daemon stopped since) is forgotten.
        for (auto it = tracked_.begin(); it != tracked_.end();) {
          if (std::binary_search(ids.begin(), ids.end(), it->first)) {
            ++it;
          } else {
            it = tracked_.erase(it);
          }
        }
        if (!tracked_.empty()) ensurePolling();
        return ids;
      });
}

void DockerWorkerProvider::following(const std::string& id) {
  auto found = tracked_.find(id);
  if (found == tracked_.end()) return;
  found->second.releasing = false;
  ensurePolling();
}

void DockerWorkerProvider::ensurePolling() {
  if (polling_) return;
  polling_ = true;
  tasks_.add(pollLoop().catch_([this](kj::Exception&& exception) {
    // Whatever broke this round, the workers are still followed: the next round starts anew.
    spdlog::warn("docker provider: following the started workers failed: {}",
                 exception.getDescription().cStr());
    polling_ = false;
    ensurePolling();
  }));
}

void DockerWorkerProvider::ended(const std::string& id, const std::string& containerId,
                                 const std::string& reason) {
  tracked_.erase(id);
  events_.emit(Event("provider worker ended", EventLevel::kWarn)
                   .field("provider", name_)
                   .field("worker", id)
                   .field("container", containerId.substr(0, 12))
                   .quotedField("reason", reason));
  if (listener_ != nullptr) listener_->workerEnded(id, reason);
}

kj::Promise<void> DockerWorkerProvider::pollLoop() {
  return loop_.timer()
      .afterDelay(options_.pollInterval.count() * kj::MILLISECONDS)
      .then([this]() -> kj::Promise<void> {
        const bool watching = std::any_of(tracked_.begin(), tracked_.end(), [](const auto& entry) {
          return !entry.second.releasing;
        });
        if (!watching) {
          polling_ = false;
          return kj::READY_NOW;
        }
        // Only what was followed when the list was asked for can be missing from it.
        const uint64_t asOf = generation_;
        return listContainers().then([this, asOf](Result<std::vector<Listed>> listed) {
          if (!listed.ok()) {
            if (!daemonUnreachable_) {
              spdlog::warn("docker provider: cannot follow the started workers: {}",
                           listed.error().message);
            }
            daemonUnreachable_ = true;
            return pollLoop();
          }
          if (daemonUnreachable_) spdlog::info("docker provider: the Docker daemon answers again");
          daemonUnreachable_ = false;
          std::map<std::string, const Listed*> byContainer;
          for (const Listed& container : listed.value()) {
            byContainer[container.containerId] = &container;
          }
          std::vector<std::pair<std::string, std::string>> gone;  // (worker, container)
          std::vector<std::pair<std::string, Listed>> exited;
          for (const auto& [id, tracked] : tracked_) {
            if (tracked.releasing || tracked.since > asOf) continue;
            auto container = byContainer.find(tracked.containerId);
            if (container == byContainer.end()) {
              gone.emplace_back(id, tracked.containerId);
            } else if (container->second->state == "exited" || container->second->state == "dead") {
              exited.emplace_back(id, *container->second);
            }
          }
          for (const auto& [id, containerId] : gone) {
            ended(id, containerId,
                  "worker " + id + " (container " + containerId.substr(0, 12) + ") is gone");
          }
          for (const auto& entry : exited) {
            const std::string id = entry.first;
            const Listed container = entry.second;
            tracked_[id].releasing = true;  // Reported once, below, after its log is read.
            tasks_.add(engine_
                           .call(kj::HttpMethod::GET,
                                 "/containers/" + container.containerId +
                                     "/logs?stdout=true&stderr=true&tail=20",
                                 options_.requestTimeout)
                           .then([this, id, container](Result<DockerAnswer> log) {
                             // Released or started again meanwhile: not this report's.
                             const auto now = tracked_.find(id);
                             if (now == tracked_.end() ||
                                 now->second.containerId != container.containerId) {
                               return remove(container.containerId);
                             }
                             std::string reason = "worker " + id + " (container " +
                                                  container.containerId.substr(0, 12) + ") " +
                                                  describeStatus(container.status);
                             if (log.ok() && log.value().status == 200) {
                               const std::string last =
                                   lastLine(demultiplexedLog(log.value().body));
                               if (!last.empty()) reason += ": " + last;
                             }
                             ended(id, container.containerId, reason);
                             return remove(container.containerId);
                           }));
          }
          return pollLoop();
        });
      });
}

}  // namespace regent::providers

// The resource provider of a master (worker_providers.h).
#include "services/master/worker_providers.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "conf/options.h"
#include "services/providers/docker_worker_provider.h"
#include "services/providers/process_worker_provider.h"

namespace regent::master {

namespace fs = std::filesystem;
using resourcemanager::Profile;

namespace {

// Options a started worker must not take from the master: its own (written per worker by the
// provider), the master's ZooKeeper write credential and its TLS identity (certificate and key:
// a worker presenting them would speak as the master), and the provider's options.
bool keptFromWorker(std::string_view key) {
  for (std::string_view own :
       {"worker.data-dir", "worker.provider-id", "worker.http.bind", "events.file",
        "ha.zookeeper.auth", "rpc.tls.cert", "rpc.tls.key", "rpc.credential.role",
        "rpc.credential.secret-file"}) {
    if (key == own) return true;
  }
  return key.rfind("resourcemanager.", 0) == 0;
}

std::string absolute(const std::string& path) {
  std::error_code error;
  const fs::path made = fs::absolute(path, error);
  return error ? path : made.lexically_normal().string();
}

// The regent-worker beside this regent-master.
std::string besideThisBinary() {
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  if (error) return "regent-worker";
  return (self.parent_path() / "regent-worker").string();
}

// What every started worker's configuration holds, taken from the master's: the options a
// worker reads (cluster, ZooKeeper, RPC client, worker.*), the worker role's credential by file,
// and in standalone mode the master's own addresses (a standalone worker finds the master there).
std::vector<std::pair<std::string, std::string>> workerSettings(const Config& config) {
  std::vector<std::pair<std::string, std::string>> settings;
  for (const OptionSpec& spec : allOptions()) {
    const bool readByWorker = readsOption(spec.readBy, Program::kWorker);
    const bool standaloneAddress =
        config.getString("ha.mode") == "standalone" &&
        (spec.key == "rpc.bind" || spec.key == "rpc.advertised-address" || spec.key == "http.bind");
    if ((!readByWorker && !standaloneAddress) || keptFromWorker(spec.key)) continue;
    settings.emplace_back(spec.key, config.text(spec.key));
  }
  const std::string& secret = config.getString("rpc.auth-secret.worker-file");
  if (!secret.empty()) {
    settings.emplace_back("rpc.credential.role", "worker");
    settings.emplace_back("rpc.credential.secret-file", absolute(secret));
  }
  return settings;
}

}  // namespace

Result<kj::Own<resourcemanager::WorkerProvider>> createWorkerProvider(EventLoop& loop,
                                                                      const Config& config,
                                                                      EventSink& events) {
  const std::string& kind = config.getString("resourcemanager.provider");
  if (kind == "standalone") return kj::Own<resourcemanager::WorkerProvider>();
  const Profile slotProfile{
      static_cast<uint32_t>(std::llround(config.getDouble("worker.slot-cpu") * 1000.0)),
      config.getSize("worker.slot-memory")};
  if (kind == "docker") {
    providers::DockerProviderOptions options;
    options.socket = config.getString("resourcemanager.docker.socket");
    options.image = config.getString("resourcemanager.docker.image");
    options.network = config.getString("resourcemanager.docker.network");
    options.workerCommand = {config.getString("resourcemanager.docker.worker-binary")};
    options.clusterId = config.getString("cluster-id");
    options.slotsPerWorker = static_cast<uint32_t>(config.getInt("worker.slots"));
    options.slotProfile = slotProfile;
    options.settings = workerSettings(config);
    auto provider = providers::DockerWorkerProvider::create(loop, events, std::move(options));
    if (!provider.ok()) return provider.error();
    return kj::Own<resourcemanager::WorkerProvider>(kj::mv(provider).value());
  }
  providers::ProcessProviderOptions options;
  options.dataRoot = absolute(config.getString("resourcemanager.process.data-root"));
  const std::string& binary = config.getString("resourcemanager.process.worker-binary");
  options.workerBinary = binary.empty() ? besideThisBinary() : absolute(binary);
  options.clusterId = config.getString("cluster-id");
  options.slotsPerWorker = static_cast<uint32_t>(config.getInt("worker.slots"));
  options.slotProfile = slotProfile;
  options.settings = workerSettings(config);
  auto provider = providers::ProcessWorkerProvider::create(loop, events, std::move(options));
  if (!provider.ok()) return provider.error();
  return kj::Own<resourcemanager::WorkerProvider>(kj::mv(provider).value());
}

resourcemanager::WorkerPoolOptions workerPoolOptionsFrom(const Config& config) {
  resourcemanager::WorkerPoolOptions options;
  options.max = static_cast<uint32_t>(config.getInt("resourcemanager.workers.max"));
  options.min = static_cast<uint32_t>(config.getInt("resourcemanager.workers.min"));
  options.startTimeout = config.getDuration("resourcemanager.workers.start-timeout");
  options.idleTimeout = config.getDuration("resourcemanager.workers.idle-timeout");
  options.maxFailuresPerMinute = config.getDouble("resourcemanager.workers.max-failure-rate");
  return options;
}

}  // namespace regent::master

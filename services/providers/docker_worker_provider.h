// The docker provider (resourcemanager.provider: docker): starts each worker as a container of
// resourcemanager.docker.image on resourcemanager.docker.network, through the Docker Engine API
// on the daemon's unix socket (docker_engine.h; never the `docker` command). Each container:
//   name      regent-<cluster-id>-<worker id> (when the cluster id is a valid container name part)
//   labels    regent.cluster, regent.worker-id, regent.epoch (the starting leader's): a later
//             leader lists the cluster's containers by label, whoever started them
//   command   resourcemanager.docker.worker-binary, then --config /etc/regent-worker/worker.yaml
//   files     /etc/regent-worker/worker.yaml (0600): the cluster's options a worker reads, taken
//             from the master's, with its data dir, provider id, advertised host and HTTP port;
//             the worker credential and the TLS CA the master names are copied beside it (0600,
//             0644) and named by path. Copied into the container before it starts (PUT
//             /containers/{id}/archive): never in its environment or command line, and no path
//             on the daemon's host is mounted.
//   user      root, every capability dropped but those a worker needs to run its tasks as
//             worker.task-user (CHOWN, DAC_OVERRIDE, FOWNER, KILL, SETGID, SETUID),
//             no-new-privileges, an init process, no restart policy, no health check (the
//             image's, if any: a started worker's health is its registration)
//   limits    memory: worker.slots x worker.slot-memory + 256MiB for the worker itself; CPUs:
//             worker.slots x worker.slot-cpu, at most the daemon's host's. Inside, a container's
//             cgroups are read-only: the worker cannot confine each task to its slot (its
//             containment is subreaper), so the container's limits are the bound of its tasks
//             together.
// Release: stop (the daemon's SIGTERM, then SIGKILL after the grace), then remove. A container
// that exits by itself is reported ended with its exit code and the last line of its log, and
// removed. Containers are watched by listing the cluster's every pollInterval while any is
// followed.
#pragma once

#include <kj/async.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/event_loop.h"
#include "common/event_sink.h"
#include "common/factory_key.h"
#include "common/result.h"
#include "common/task_set_error_logger.h"
#include "services/providers/docker_engine.h"
#include "services/resourcemanager/worker_provider.h"

namespace regent::providers {

struct DockerProviderOptions {
  std::string socket;   // resourcemanager.docker.socket
  std::string image;    // resourcemanager.docker.image
  std::string network;  // resourcemanager.docker.network
  // resourcemanager.docker.worker-binary: the worker executable and its leading arguments.
  std::vector<std::string> workerCommand{"regent-worker"};
  std::string clusterId;
  uint32_t slotsPerWorker = 4;
  resourcemanager::Profile slotProfile;
  // Options written into every started worker's worker.yaml, in order (key, canonical text).
  std::vector<std::pair<std::string, std::string>> settings;
  // Settings naming a file on the master that the worker needs (rpc.credential.secret-file,
  // rpc.tls.ca): the file is copied into the container and the setting names the copy.
  std::vector<std::string> copiedFileSettings{"rpc.credential.secret-file", "rpc.tls.ca"};
  Duration pollInterval{1000};
  Duration requestTimeout{30000};  // Bounds each call to the daemon (a stop: plus its grace).
};

class DockerWorkerProvider final : public resourcemanager::WorkerProvider {
 public:
  // Fails naming the option when the image is empty or the socket is not a socket.
  static Result<kj::Own<DockerWorkerProvider>> create(EventLoop& loop, EventSink& events,
                                                      DockerProviderOptions options);
  DockerWorkerProvider(FactoryKey<DockerWorkerProvider>, EventLoop& loop, EventSink& events,
                       DockerProviderOptions options);
  // Leaves every started container running (they outlive the master).
  ~DockerWorkerProvider() noexcept override;

  const std::string& name() const override { return name_; }
  uint32_t slotsPerWorker() const override { return options_.slotsPerWorker; }
  resourcemanager::Profile slotProfile() const override { return options_.slotProfile; }
  kj::Promise<Status> start(const std::string& id, uint64_t epoch) override;
  kj::Promise<Status> release(const std::string& id, Duration grace) override;
  kj::Promise<Result<std::vector<std::string>>> list() override;
  // kYes when `host` is the container name the provider gave worker `id` (its advertised host),
  // kNo when it follows `id` and the host is another; kUnknown for ids it does not follow and on
  // the host or none network (where a container has no name of its own to advertise).
  resourcemanager::Vouch vouches(const std::string& id, const std::string& host,
                                 uint32_t pid) const override;
  void setListener(resourcemanager::WorkerProviderListener* listener) override {
    listener_ = listener;
  }

  // The name a worker's container gets ("" when the cluster id makes no valid name).
  std::string containerName(const std::string& id) const;

 private:
  // A container of this cluster, as the daemon lists it.
  struct Listed {
    std::string containerId;
    std::string workerId;
    std::string state;   // "running", "exited", ...
    std::string status;  // "Exited (1) 2 seconds ago"
  };
  struct Tracked {
    std::string containerId;
    bool releasing = false;
    uint64_t since = 0;  // generation_ when it was first followed.
  };

  kj::Promise<Result<std::vector<Listed>>> listContainers(const std::string& workerId = "");
  kj::Promise<Status> create(const std::string& id, uint64_t epoch, bool retried);
  kj::Promise<Status> copyFilesAndStart(const std::string& id, uint64_t epoch,
                                        const std::string& containerId);
  kj::Promise<void> remove(const std::string& containerId);
  kj::Promise<Status> stopAndRemove(const std::string& id, const std::string& containerId,
                                    Duration grace);
  void ended(const std::string& id, const std::string& containerId, const std::string& reason);
  // Follows `id` again after a release that failed (its container may still run).
  void following(const std::string& id);
  void ensurePolling();
  kj::Promise<void> pollLoop();
  bool networkHasNames() const;
  // A failed create or start, as the job's waiting reason shows it.
  std::string explained(const std::string& what, unsigned status, const std::string& message) const;

  EventLoop& loop_;
  EventSink& events_;
  const DockerProviderOptions options_;
  const std::string name_ = "docker";
  DockerEngine engine_;
  resourcemanager::WorkerProviderListener* listener_ = nullptr;
  std::map<std::string, Tracked> tracked_;
  bool polling_ = false;
  bool daemonUnreachable_ = false;  // Logged once per outage.
  uint64_t generation_ = 0;         // Counts the workers followed, in order.
  uint64_t daemonCpus_ = 0;         // The daemon's host's CPUs (GET /info), once known.
  TaskSetErrorLogger errorLogger_{"docker provider"};
  kj::TaskSet tasks_{errorLogger_};  // Declared last: cancelled first.
};

}  // namespace regent::providers

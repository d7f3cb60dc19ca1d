// The process provider (resourcemanager.provider: process): starts regent-worker processes on
// the leader's host, each in a session of its own (so that it outlives the master that started
// it) with a directory of its own under resourcemanager.process.data-root/<cluster-id>/<id>:
//   worker.yaml   its configuration (mode 0600): the cluster's options a worker reads, taken from
//                 the master's, and its own data dir, provider id and HTTP port (any free one);
//                 the cluster's worker credential is named by file (rpc.credential.secret-file),
//                 never passed on a command line or in an environment
//   data/         its worker.data-dir (resource id, lock, attempt directories), made by the worker
//   worker.out, worker.err   its standard output and error
//   provider      "cluster pid starttime epoch": who it is, for a later leader on this host
// The environment a started worker gets is PATH alone. Single-host: a leader on another host
// finds these workers by their registrations but cannot reap their processes.
#pragma once

#include <kj/async.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/event_loop.h"
#include "common/event_sink.h"
#include "common/factory_key.h"
#include "common/result.h"
#include "common/task_set_error_logger.h"
#include "services/resourcemanager/worker_provider.h"

namespace regent::providers {

struct ProcessProviderOptions {
  std::string dataRoot;      // resourcemanager.process.data-root (made absolute).
  std::string workerBinary;  // The regent-worker executable (absolute).
  std::string clusterId;
  uint32_t slotsPerWorker = 4;
  resourcemanager::Profile slotProfile;
  // Options written into every started worker's worker.yaml, in order (key, canonical text).
  std::vector<std::pair<std::string, std::string>> settings;
  // The host part of each started worker's worker.http.bind (its port: any free one).
  std::string httpHost = "127.0.0.1";
  // How often the workers this process did not start itself are checked for being alive.
  Duration pollInterval{1000};
};

class ProcessWorkerProvider final : public resourcemanager::WorkerProvider {
 public:
  // Fails naming the option when the binary is not an executable file or the data root cannot
  // be created.
  static Result<kj::Own<ProcessWorkerProvider>> create(EventLoop& loop, EventSink& events,
                                                       ProcessProviderOptions options);
  ProcessWorkerProvider(FactoryKey<ProcessWorkerProvider>, EventLoop& loop, EventSink& events,
                        ProcessProviderOptions options);
  // Leaves every started worker running (they outlive the master).
  ~ProcessWorkerProvider() noexcept override;

  const std::string& name() const override { return name_; }
  uint32_t slotsPerWorker() const override { return options_.slotsPerWorker; }
  resourcemanager::Profile slotProfile() const override { return options_.slotProfile; }
  kj::Promise<Status> start(const std::string& id, uint64_t epoch) override;
  kj::Promise<Status> release(const std::string& id, Duration grace) override;
  kj::Promise<Result<std::vector<std::string>>> list() override;
  resourcemanager::Vouch vouches(const std::string& id, const std::string& host,
                                 uint32_t pid) const override;
  void setListener(resourcemanager::WorkerProviderListener* listener) override {
    listener_ = listener;
  }

  // The directory of worker `id` (for tests and people).
  std::string workerDir(const std::string& id) const;

 private:
  // A started worker this provider follows: its pid and /proc start time (which tell it from a
  // later process with the same pid), and the child handle when this process started it.
  struct Tracked {
    int pid = 0;
    uint64_t startTicks = 0;
    kj::Own<ChildProcess> child;  // Null for a worker an earlier master started.
    bool releasing = false;
  };

  void follow(const std::string& id, int pid, uint64_t startTicks, kj::Own<ChildProcess> child);
  void ended(const std::string& id, const std::string& reason);
  // Checks the workers this process did not start every pollInterval while there are any.
  void ensurePolling();
  kj::Promise<void> pollLoop();
  kj::Promise<bool> waitGone(int pid, uint64_t startTicks, Duration bound);

  EventLoop& loop_;
  EventSink& events_;
  const ProcessProviderOptions options_;
  const std::string name_ = "process";
  const std::string clusterDir_;
  resourcemanager::WorkerProviderListener* listener_ = nullptr;
  std::map<std::string, Tracked> tracked_;
  bool polling_ = false;
  TaskSetErrorLogger errorLogger_{"process provider"};
  kj::TaskSet tasks_{errorLogger_};  // Declared last: cancelled first.
};

}  // namespace regent::providers

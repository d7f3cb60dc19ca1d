// The regent-worker process, its composition root (docs/workers.md): the data directory's
// identity, the HA services and leader retrieval (reader identity), the follow-the-leader client
// that carries the worker's RPC connection, the TaskRunner of its tasks, one TaskExecutor, the
// worker's HTTP endpoints on worker.http.bind, and the signals (SIGTERM, SIGINT, SIGQUIT kill
// the tasks, disconnect and stop).
#pragma once

#include <kj/async.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/leader_client.h"
#include "common/descriptor_limit.h"
#include "common/event_loop.h"
#include "common/event_sink.h"
#include "common/factory_key.h"
#include "common/result.h"
#include "common/stop_signals.h"
#include "common/task_set_error_logger.h"
#include "ha/ha_services.h"
#include "http/http_server.h"
#include "rpc/rpc_tls.h"
#include "services/taskexecutor/process_task_runner.h"
#include "services/taskexecutor/task_containment.h"
#include "services/taskexecutor/task_executor.h"
#include "services/worker/worker_data_dir.h"
#include "services/worker/worker_http.h"
#include "services/worker/worker_metrics.h"

namespace regent {
class Config;
}

namespace regent::worker {

// Exit codes of regent-worker (docs/workers.md).
inline constexpr int kExitStopped = 0;       // Stopped by a stop signal (after disconnecting).
inline constexpr int kExitFailure = 1;       // Could not start: the data directory is in use,
                                             // the HTTP port cannot be bound, the HA services.
inline constexpr int kExitUsage = 2;         // Bad command line or configuration, or an
                                             // unusable data directory (a corrupt resource id,
                                             // an unsafe path, `attempts` not a directory).
inline constexpr int kExitSignalBase = 128;  // + signal number: a second stop signal.

// The slot profile of worker.slot-cpu (cores, to thousandths) and worker.slot-memory. An error
// names the option: a cpu that rounds to 0 thousandths or beyond 2^32-1 of them.
Result<taskexecutor::SlotProfile> slotProfileFrom(const Config& config);

// The worker's own credential (rpc.credential.*): nullopt when none is set; an error naming the
// option when it cannot be read or its role is not `worker` (masters let only that role
// register).
Result<std::optional<rpc::ClientCredential>> workerCredentialFrom(const Config& config);

// The host name a worker registers with: worker.advertised-host, or the local host name.
std::string workerHostName(const Config& config);

// worker.task-user / worker.task-allow-root for this process's effective user (resolveTaskUser):
// an error names the option. Reads the user database: call before the loop runs.
Result<taskexecutor::TaskUser> taskUserFrom(const Config& config);

// The first directory above `dataDir` (an existing directory) that a process of `uid` / `gid`
// (no supplementary groups) may not traverse by its mode bits, or nullopt when it reaches
// `dataDir`. The worker makes its data directory itself traversable (docs/workers.md, "Tasks");
// a directory above it that is not leaves every task as that user failing. ACLs are not read.
// Blocking (stat): call before the loop runs.
std::optional<std::string> untraversableAbove(const std::string& dataDir, uid_t uid, gid_t gid);

// The TaskRunner's options: <worker.data-dir>/attempts, `user`, worker.task-cancel-timeout,
// worker.attempts.retain, worker.attempt-output.max, and the tasks' base environment
// (taskEnvironment: worker.task-path, `user`'s HOME, USER, LOGNAME, this process's LANG and TZ);
// attemptsFd is left to the caller: the open data directory's.
taskexecutor::ProcessTaskRunnerOptions taskRunnerOptionsFrom(const Config& config,
                                                      const taskexecutor::TaskUser& user);

// worker.containment for this worker (createTaskContainment): its cgroup subtree named
// regent-worker-<resource id>, each attempt's limits the slot profile and worker.task-pids-max.
// An error (fatal) names why worker.containment=cgroup cannot be had. Blocking (the cgroup file
// system, and it kills what an earlier run left): call before the loop runs.
Result<std::unique_ptr<taskexecutor::TaskContainment>> taskContainmentFrom(
    const Config& config, const ResourceId& resourceId);

// One worker. Thread-safety: loop-thread only. Lifetime: `loop` and `config` must outlive it.
// Destroying it destroys the TaskExecutor (its calls cancelled), then the TaskRunner (tasks still
// running are killed), then the leader client (its connection closed), then the HA services, and
// last the data directory (its lock released).
class WorkerProcess final : public WorkerHttpHost {
 public:
  // `events` (must outlive it) gets the worker's events, the TaskExecutor's among them.
  // Builds the RPC network (rpc.tls.*), the HA services (reader identity) and the leader
  // retrieval, the leader client over them, and the TaskRunner running tasks as `taskUser`
  // (taskUserFrom) contained by `containment` (taskContainmentFrom). `descriptors`: the
  // open-file limit raised at start (ProcessMain), which run() fits http.max-connections into.
  // Fails (fatal) only on what retrying cannot fix: bad TLS files, options the ZooKeeper client
  // rejects, an unusable credential. An unreachable ZooKeeper or master is not a failure: the
  // worker keeps trying.
  static Result<kj::Own<WorkerProcess>> create(
      EventLoop& loop, const Config& config, EventSink& events, kj::Own<WorkerDataDir> dataDir,
      const taskexecutor::TaskUser& taskUser,
      std::unique_ptr<taskexecutor::TaskContainment> containment, DescriptorLimit descriptors);
  ~WorkerProcess() noexcept override;
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Watches the signals, fits http.max-connections into the open-file limit (logging both),
  // listens on worker.http.bind, then creates the TaskExecutor (advertising
  // the bound HTTP address) and starts registering. Resolves with kExitFailure if the HTTP
  // server cannot listen (logged as an error). SIGTERM, SIGINT and SIGQUIT kill the running tasks
  // (TaskRunner::killAll, then the "tasks killed" line), deliver their last updates (bounded by
  // rpc.call-timeout), call TaskExecutor::disconnect("worker stopping") and then resolve with
  // kExitStopped; a second one
  // while that runs ends the process at once with 128 + the signal number (after logging "worker
  // exiting"; the tasks die with it, by their PDEATHSIG). SIGHUP is logged and ignored. Call once.
  kj::Promise<int> run();

  const ResourceId& resourceId() const { return dataDir_->resourceId(); }

  // WorkerHttpHost.
  std::optional<std::string> notReadyReason() const override;
  uint64_t registeredEpoch() const override;
  uint64_t highestEpoch() const override;
  const taskexecutor::TaskExecutorCounters& counters() const override;
  const std::vector<taskexecutor::SlotState>& slots() const override;
  const rpc::FencingCounters& fencingCounters() const override;
  size_t tasksRunning() const override;
  uint64_t mastersRefused(rpc::MasterRefusal reason) const override;
  const taskexecutor::TaskContainment& containment() const override { return *containment_; }
  std::optional<AttemptOutput> attemptOutput(const AttemptId& attempt,
                                             OutputStream stream) const override;
  // True when the worker holds an RPC credential: a secret (rpc.credential.*) or a client
  // certificate (rpc.tls.cert).
  bool outputTokenRequired() const override { return outputTokenRequired_; }
  const std::optional<rpc::OutputReadKey>& outputReadKey() const override;

  // What /metrics writes: the families of worker_metrics.h over this worker, then its HTTP
  // listener's; main() adds those of what it owns (http::addEventsFileMetrics).
  http::MetricsRegistry& metrics() { return metrics_; }

  // Built by its factory only (FactoryKey).
  WorkerProcess(FactoryKey<WorkerProcess>, EventLoop& loop, const Config& config, EventSink& events,
                kj::Own<WorkerDataDir> dataDir);

 private:
  void onStopSignal(int signum);
  // Kills the tasks, delivers their ends, disconnects and exits (kExitStopped): on a stop signal,
  // or when the leader releases this started worker (TaskExecutorGateway.stop). Once.
  void stop(const std::string& why);
  // Warns when ZooKeeper stays unreachable past ha.zookeeper.connect-timeout; once connected,
  // and holding a ZooKeeper credential, warns when the cluster root or `leader` node is open to
  // anyone (ha::openClusterWarning).
  void warnIfNotConnected();
  // Once HTTP listens: the TaskExecutor, started.
  void startTaskExecutor(const std::string& httpAddress);

  EventLoop& loop_;
  const Config& config_;
  EventSink& events_;
  kj::Own<WorkerDataDir> dataDir_;  // Holds the lock until the process is gone.
  const std::string host_;
  const int64_t startedAtMs_;
  const taskexecutor::SlotProfile slotProfile_;
  DescriptorLimit descriptors_;
  kj::Own<ha::HaServices> ha_;
  kj::Own<rpc::RpcNetwork> rpcNetwork_;        // rpc.tls.*; outlives the leader client.
  kj::Own<client::LeaderClient> leaders_;      // Used by the TaskExecutor alone.
  // Shared with the TaskRunner, whose thread-pool work may outlive it.
  std::shared_ptr<const taskexecutor::TaskContainment> containment_;
  // The loop's pulse (half of rpc.call-timeout), read by the TaskRunner and the TaskExecutor.
  kj::Own<taskexecutor::LoopStallWatch> stalls_;
  kj::Own<taskexecutor::ProcessTaskRunner> taskRunner_;      // Outlives the TaskExecutor.
  kj::Own<taskexecutor::TaskExecutor> taskExecutor_;  // Once HTTP listens.
  http::MetricsRegistry metrics_;  // Outlives the HTTP server whose routes read it.
  kj::Own<http::HttpServer> httpServer_;
  kj::Own<kj::PromiseFulfiller<int>> exit_;
  std::unique_ptr<StopSignals> stopSignals_;
  bool stopping_ = false;
  // Served before the TaskExecutor exists (no slots, no counts).
  const std::vector<taskexecutor::SlotState> noSlots_;
  const taskexecutor::TaskExecutorCounters noCounters_;
  const rpc::FencingCounters noFencing_;
  const std::optional<rpc::OutputReadKey> noOutputReadKey_;
  bool outputTokenRequired_ = false;
  TaskSetErrorLogger errorLogger_{"worker"};
  kj::TaskSet tasks_{errorLogger_};  // Declared last: cancelled first.
};

}  // namespace regent::worker

// The ResourceManager of one leadership term: the ResourceManagerGateway workers and JobMasters
// call, the SlotManager it feeds, the heartbeats to every registered worker (through the
// TaskExecutorGateway each worker handed over on its own connection), and the calls that carry
// out the SlotManager's decisions (requestSlot, freeSlot). Built per term by the LeaderTerm and
// served through rpc::LeadershipTerm::serve, which checks the epoch before any handler runs.
#pragma once

#include <kj/async.h>
#include <kj/timer.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/event_sink.h"
#include "common/task_set_error_logger.h"
#include "common/time.h"
#include "rpc/schema/gateways.capnp.h"
#include "services/resourcemanager/heartbeat_monitor.h"
#include "services/resourcemanager/job_master_port.h"
#include "services/resourcemanager/slot_manager.h"
#include "services/resourcemanager/worker_binding.h"
#include "services/resourcemanager/worker_pool.h"
#include "services/resourcemanager/worker_provider.h"

namespace regent::resourcemanager {

struct ResourceManagerOptions {
  Duration heartbeatInterval{2000};  // heartbeat.interval: RM -> worker heartbeat period.
  Duration heartbeatTimeout{10000};  // heartbeat.timeout: silence after which a worker goes.
  // Bound of each call to a worker (requestSlot, freeSlot, heartbeat, the liveness probe of a
  // worker whose resource id a new registration claims); rpc.call-timeout.
  Duration callTimeout{10000};
  std::function<int64_t()> nowMs;  // Unix ms; null: wallClockMillis().
  // rpc.auth-tls.worker-name-is-resource-id: a registration must name the resource id its
  // connection's verified certificate names (WorkerBinding::certificateName).
  bool requireCertificateResourceId = false;
  // The key a registration hands to the worker to check output-read tokens with
  // (rpc::OutputTokenSigner::workerKey of the term); null: none handed.
  std::function<std::string(const ResourceId& worker, const RegistrationId& registration)>
      outputReadKey;
  // resourcemanager.provider: who starts workers for the slots jobs wait for (outlives the
  // term); null for standalone (no worker is ever started). `pool` holds the
  // resourcemanager.workers.* options (its provider, slot count and profile are the provider's).
  WorkerProvider* provider = nullptr;
  WorkerPoolOptions pool;
};

// Counts kept across terms (the master owns them; /metrics reads them).
struct ResourceManagerCounters {
  uint64_t heartbeatTimeouts = 0;     // regent_worker_heartbeat_timeouts_total
  uint64_t registrations = 0;         // accepted registerTaskExecutor calls
  uint64_t registrationsRefused = 0;  // a second live worker with the same resource id
  // Worker calls that spoke for another worker (the ResourceManager's and the JobMasters'):
  // regent_rpc_worker_identity_refusals_total.
  WorkerIdentityRefusals identityRefusals;
  uint64_t workerStartFailures = 0;  // regent_workers_start_failures_total
  uint64_t workersReleased = 0;      // regent_workers_released_total
  // The current term's started workers (zero while not leading): regent_workers_requested,
  // regent_workers_pending, regent_workers_started.
  uint64_t workersRequested = 0;
  uint64_t workersPending = 0;
  uint64_t workersStarted = 0;  // Every phase.
};

// Loop-thread only. `timer`, `events` (its event lines, docs/operations.md) and `counters` must
// outlive it. Destroying it cancels its heartbeat
// loop and every call it has in flight to workers, calls nothing on them (the term is over: the
// next leader's workers re-register there), and closes the connections its registered workers
// registered over (WorkerBinding::closeConnection), telling them the term is over.
//
// The term's JobMasters reach it in process as a JobMasterPort: the same operations as the
// gateway's JobMaster methods, with the matching they cause deferred to a later turn of the loop
// (one match for every change made in the same turn).
class ResourceManager final : public JobMasterPort,
                              private HeartbeatTargets,
                              private WorkerProviderListener {
 public:
  ResourceManager(kj::Timer& timer, EventSink& events, uint64_t epoch,
                  ResourceManagerCounters& counters, ResourceManagerOptions options);
  ~ResourceManager() noexcept;
  ResourceManager(const ResourceManager&) = delete;
  ResourceManager& operator=(const ResourceManager&) = delete;

  // The gateway's handlers for the connection whose worker identity is `caller` (one gateway
  // per connection: MasterBootstrap.resourceManager), behind the gate of worker calls
  // (guardWorkerCalls), for rpc::LeadershipTerm::serve<wire::ResourceManagerGateway>. They must
  // not outlive this object (the term drops them before destroying it).
  //
  // The worker methods take the worker's identity from `caller`, never from their parameters:
  // registerTaskExecutor binds it (a connection bound to another resource id is refused with
  // permissionDenied: one connection speaks for one worker; with requireCertificateResourceId, so
  // is a registration of another resource id than the connection's certificate names, or over a
  // connection without one); sendSlotReport, heartbeat and
  // disconnect apply to the bound registration.
  //
  // registerTaskExecutor: a registration whose resource id is held by another live worker (a
  // different host or pid whose TaskExecutorGateway still answers a heartbeat within
  // callTimeout) is refused with alreadyExists naming both hosts and pids; a dead or same
  // process holder is replaced (when the probe fails, the holder is checked again: another
  // registration accepted meanwhile is probed in turn); a holder of another process (another
  // pid or start time) is a restarted worker's previous process: the WorkerListener is told
  // (workerRestarted) once the new registration is accepted. sendSlotReport / heartbeat /
  // disconnect: notRegistered for an unknown or replaced registration (the newest registration
  // of a resource id owns it: an older connection's calls are refused by the gate).
  // declareRequiredResources: invalidArgument for a requirement no registered worker can fit,
  // notRegistered for a JobMaster that did not register. disconnectJobMaster: drops the job's
  // requirements and frees its allocations on the workers (freeSlot, best effort). After every
  // report, removal and declaration the SlotManager matches, and each decision goes to its
  // worker as requestSlot bounded by callTimeout: accepted, the slot is allocated for good;
  // refused or failed, it is free again and its requirement is matched again at once on another
  // worker's free slot, or on that slot after its worker's next heartbeat or report (not at
  // once: the same refusal would follow). The worker offering the slot to the job's JobMaster is
  // not part of this ResourceManager. The first report of each registration (by sendSlotReport
  // or heartbeat) is told to the WorkerListener (workerReported) after the matching.
  kj::Own<wire::ResourceManagerGateway::Server> makeGatewayServer(kj::Own<WorkerBinding> caller);

  // With a provider: lists the workers it started (earlier terms' included), counts them as
  // this term's, and from then on starts workers for the slots requirements lack (never more
  // than resourcemanager.workers.max, at least workers.min), releases idle ones (asked to stop
  // over their connection, TaskExecutorGateway.stop, then the provider's release()), and
  // releases those that do not register within the start timeout; every step is an event line.
  // Also starts the heartbeat rounds (HeartbeatMonitor::start: every heartbeatInterval, expire the
  // workers silent for heartbeatTimeout, each expiry counted, logged, and the worker told with
  // TaskExecutorGateway.disconnect, best effort; then heartbeat every registered worker). What
  // keeps a worker registered is its ResourceManagerGateway.heartbeat (or slot report), not the
  // reply to ours. Call once.
  void start();

  uint64_t epoch() const { return epoch_; }
  const SlotManager& slotManager() const { return slots_; }
  SlotCounts counts() const { return slots_.counts(); }

  // JobMasterPort.
  void registerJobMaster(const JobId& job) override;
  SlotOutcome declareRequiredResources(const JobId& job,
                                       const std::vector<Requirement>& needs) override;
  void disconnectJobMaster(const JobId& job, const std::string& cause) override;
  void slotFaulted(const JobId& job, const ResourceId& worker, const AllocationId& allocation,
                   const std::string& cause) override;
  std::optional<WorkerAddress> workerAddress(const ResourceId& worker) const override;
  SlotCounts slotCounts() const override { return slots_.counts(); }
  std::string workerSupplyReason() const override;
  bool holdsAllocation(const ResourceId& worker, const AllocationId& allocation,
                       const JobId& job) const override;
  WorkerIdentityRefusals& identityRefusals() override { return counters_.identityRefusals; }
  bool hasReported(const ResourceId& worker) const override;
  void setWorkerListener(WorkerListener* listener) override { workerListener_ = listener; }
  // WorkerRegistry: `identity` is its resource id's registration in the SlotManager.
  bool isCurrent(const WorkerIdentity& identity) const override;

  // Every registered worker with its latest slot report, for DispatcherGateway.listTaskExecutors
  // (regentctl workers / slots) and /v1/workers; in resource id order. `out` was initialised
  // with counts().workers entries (fewer: the first ones only). The running attempts of a slot
  // carry their attempt, job and allocation ids only.
  void listTaskExecutors(capnp::List<wire::TaskExecutorInfo>::Builder out) const;

  // The started workers by phase (all zero without a provider): /metrics.
  PoolCounts workerPoolCounts() const;
  // Every started worker (`out` has room for all of workerPoolCounts()), in id order.
  void listStartedWorkers(capnp::List<wire::StartedWorker>::Builder out) const;

 private:
  class Gateway;
  struct Connection;  // A worker's TaskExecutorGateway and its registration id.

  MonoTime monoNow() const;
  void refusedEvent(const ResourceId& worker, const std::string& reason) const;
  int64_t wallNow() const;
  // HeartbeatTargets: the SlotManager's workers. An expired worker is counted and forgotten
  // (told), and the requirements it served are matched again.
  void refreshAll(MonoTime now) override;
  void expire(MonoTime now, Duration timeout) override;
  void forEachGateway(kj::FunctionParam<void(const ResourceId&, wire::TaskExecutorGateway::Client&)>
                          visit) override;
  kj::Maybe<wire::TaskExecutorGateway::Client&> gatewayOf(const ResourceId& worker) override;
  // Removes a worker the SlotManager already dropped: its connection, the event line, and (when
  // `tellWorker`) TaskExecutorGateway.disconnect with `reason`, best effort.
  void forgetWorker(const ResourceId& worker, const std::string& reason, bool tellWorker);
  // Runs SlotManager::match() and sends requestSlot for each decision.
  void matchAndRequest();
  // matchAndRequest() in a later turn, once for every call made before it runs.
  void matchLater();
  void freeOnWorker(const SlotRelease& release, const std::string& cause);
  // The provider's part: WorkerPool::plan() with what the SlotManager lacks, carried out; and
  // once more at the pool's next deadline.
  void planWorkers();
  void planLater();
  void startWorker(const std::string& id);
  // Drains the worker (no new allocation), asks it to stop, then the provider's release(); a
  // worker that refuses to stop (not idle after all) is registered again instead.
  void releaseWorker(const PoolDecisions::Release& release);
  // provider->list(), retried with backoff from `nextWait` while it fails.
  void listProviderWorkers(Duration nextWait);
  void workerEnded(const std::string& id, const std::string& reason) override;
  void poolEvent(const char* name, const std::string& id, const std::string& reason) const;
  // `call` bounded by callTimeout, named `method` in the timeout error.
  template <typename T>
  kj::Promise<T> bounded(const char* method, kj::Promise<T> call);

  kj::Timer& timer_;
  EventSink& events_;
  const uint64_t epoch_;
  ResourceManagerCounters& counters_;
  const ResourceManagerOptions options_;
  SlotManager slots_;
  std::map<ResourceId, kj::Own<Connection>> connections_;
  HeartbeatMonitor heartbeats_;  // Reads slots_ and connections_: declared after them.
  bool matchScheduled_ = false;
  kj::Maybe<WorkerPool> pool_;  // With a provider.
  bool planScheduled_ = false;
  std::optional<MonoTime> planArmedFor_;  // The deadline a timer waits for.
  WorkerListener* workerListener_ = nullptr;  // The term's JobMasters, told of restarts.
  TaskSetErrorLogger errorLogger_{"resource manager"};
  kj::TaskSet tasks_{errorLogger_};  // Declared last: cancelled first.
};

}  // namespace regent::resourcemanager

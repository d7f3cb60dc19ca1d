// The TaskExecutor: a worker's slots, its TaskExecutorGateway behind the epoch gate (fencing
// layer 2, docs/wire.md), its registration with the leader's ResourceManager (register, report
// every slot, answer heartbeats, and register again whenever the leader changes, a higher epoch
// calls, the ResourceManager goes silent or forgets the registration), and the jobs on the
// worker (docs/workers.md, "Jobs on a worker"): slots offered to each job's JobMaster, subtask
// attempts run through a TaskRunner, their states reported to the JobMaster. regent-worker runs
// one (services/worker/); the slot-rebuild benchmark runs thousands in one process, each with
// its own LeaderClient and so its own RPC connection, and a NoTaskRunner.
//
// The parts, one loop thread owning them all: the gateway and its epoch gate
// (task_executor_gateway.h), the slot table (slot_table.h), the registration with the
// ResourceManager (registration.h) and the jobs' JobMasters, offers and updates (job_links.h).
#pragma once

#include <kj/async.h>
#include <kj/timer.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/time.h"
#include "rpc/fenced_endpoint.h"
#include "rpc/output_token.h"
#include "rpc/revocable.h"
#include "rpc/schema/gateways.capnp.h"
#include "services/taskexecutor/loop_stall_watch.h"
#include "services/taskexecutor/slot_table.h"
#include "services/taskexecutor/task_runner.h"

namespace regent {
class EventSink;
}
namespace regent::client {
class LeaderClient;
}
namespace regent::taskexecutor {

class GatewayShared;
class JobLinks;
class Registration;

// What each slot offers (worker.slot-cpu in thousandths of a core, worker.slot-memory).
struct SlotProfile {
  uint32_t cpuMillis = 0;
  uint64_t memoryBytes = 0;
};

struct TaskExecutorOptions {
  // Who this worker is (wire::TaskExecutorRegistration).
  ResourceId resourceId;
  std::string host;
  std::string dataAddress;  // "host:port" serving task files; for now the HTTP address.
  std::string httpAddress;
  std::string version;
  uint32_t pid = 0;
  int64_t startedAtMs = 0;
  uint32_t slots = 0;
  SlotProfile slotProfile;
  std::string containment;  // How its tasks are contained (TaskContainment::description()).
  // cluster.registration.initial-timeout / max-timeout: the waits between failed attempts
  // (ExponentialBackoff with jitter).
  Duration registrationInitial{100};
  Duration registrationMax{30000};
  std::function<double()> jitter;  // ExponentialBackoff's uniform01; null: random.
  // How long the connection to a leader the worker moved away from stays open, so that the
  // deposed leader's late calls reach the epoch gate and are refused with the new epoch
  // (rather than failing on a closed connection). Passed to the LeaderClient by the process.
  Duration previousLeaderLinger{30000};
  std::function<int64_t()> nowMs;  // Unix ms; null: wallClockMillis().
  // worker.update-buffer.max: attempt state changes kept while they cannot be delivered (no
  // leader, or the new leader's JobMaster not reached yet); over it the oldest are dropped with
  // a warning (counted in updatesDropped).
  size_t updateBufferMax = 10000;
  // The worker's loop stall watch (loop_stall_watch.h): a submitTask read right after the loop
  // stood still is answered `unavailable`, as it may have waited in the connection past its
  // JobMaster's rpc.call-timeout (the JobMaster then ran the attempt elsewhere). Null: none.
  const LoopStallWatch* stalls = nullptr;
  // worker.provider-id: "<provider>:<worker id>" when a resource provider of the cluster started
  // this worker (sent in the registration, so that every leader counts it as that provider's);
  // empty for a worker started by hand.
  std::string providerWorkerId;
  // TaskExecutorGateway.stop accepted (a started worker released while idle): the process stops
  // as on SIGTERM, with `cause`; it must defer the stop to a later turn, so that the call's
  // answer goes out first. Null: refused.
  std::function<void(const std::string& cause)> onStopRequested;
};

// Counts since the process started, for the worker's /metrics.
struct TaskExecutorCounters {
  uint64_t registrations = 0;         // Successful registerTaskExecutor + sendSlotReport.
  uint64_t registrationAttempts = 0;  // Including failed ones.
  uint64_t resourceManagerLost = 0;   // Heartbeat silence, disconnect, notRegistered, lost link.
  uint64_t heartbeatsAnswered = 0;    // ResourceManagerGateway.heartbeat calls made.
  uint64_t leaderChanges = 0;         // Registrations prompted by a new leader or higher epoch.
  uint64_t tasksStarted = 0;          // Attempts whose process runs (the RUNNING update).
  uint64_t tasksFinished = 0;         // Attempts ended by phase.
  uint64_t tasksFailed = 0;
  uint64_t tasksCanceled = 0;
  uint64_t updatesDropped = 0;  // Attempt updates dropped: worker.update-buffer.max hit.
};

// Loop-thread only. `timer` and `leaders` must outlive it; `leaders` is used by nothing else
// (its leaderAbove() serves this object's leader watch). Destroying it cancels its work.
//
// What it expects of `leaders`, which the process builds: backoffInitial / backoffMax set to
// registrationInitial / registrationMax (the waits between attempts inside one call),
// previousLeaderLinger to options.previousLeaderLinger, and the worker's credential (role
// `worker`). Following a LeaderRetrieval is the normal case; with a master address the leader
// watch polls that master.
//
// Registration: one LeaderClient call (resourceManager -> registerTaskExecutor, handing over
// this worker's gateway -> sendSlotReport) after another, ExponentialBackoff(registrationInitial,
// registrationMax, jitter) between failed calls, until registered or disconnect(). A leader
// whose epoch is below the gate's highest counts as stale (the LeaderClient resolves again). A
// refusal that the other side must fix (alreadyExists, invalidArgument, permissionDenied,
// unauthenticated, failedPrecondition) is logged as an error and tried again after
// registrationMax; notRegistered / notFound are tried again after the backoff. An exception the
// LeaderClient rethrows as fatal (FAILED, UNIMPLEMENTED) is logged as an error, kept in
// lastRegistrationError(), and tried again after registrationMax: it never gives up.
//
// Registered, it answers each TaskExecutorGateway.heartbeat from the ResourceManager with
// ResourceManagerGateway.heartbeat (asynchronously; the incoming call does not wait) and
// registers again, logging "resource manager lost", when: no heartbeat came for the
// registration's heartbeatTimeoutMs, the ResourceManager answers notRegistered or calls
// disconnect(resourceManager), a call to it fails DISCONNECTED, leaders.leaderAbove(epoch)
// resolves, or the gate admits a higher epoch. Slots and allocations stay as they are.
//
// The gateway (TaskExecutorGateway) is one fencedEndpoint with one HighestSeenEpoch gate: a call
// below the highest epoch seen is refused with fencing {expected = highest, received} before
// any handler runs, counted in fencingCounters() and logged ("epoch gate refused", the first ten
// and then one in a hundred). The master may hold the gateway after this object is destroyed;
// its calls then fail DISCONNECTED. The highest epoch rises in exactly two places, both on a
// master the LeaderClient handed over (with a credential: one that proved itself on that
// connection, docs/security.md "Chain of trust"): a call on the gateway, which is passed only in
// registerTaskExecutor and offerSlots through that master's bootstrap; and a registration that
// master accepted in its epoch. The epoch of a leader record (leaders.leaderAbove(), the record
// of the leader being registered with) never raises it.
//
// Jobs (docs/workers.md, "Jobs on a worker"). Every JobMaster call goes through the
// MasterBootstrap of the leader registered with (MasterBootstrap.jobMaster(epoch, job), cached
// per job and epoch) and carries the registered epoch:
// - Offers: the slots requestSlot allocates to one job in one turn are offered together
//   (offerSlots, with this worker's gateway). unavailable, notRegistered, OVERLOADED and lost
//   connections are retried with ExponentialBackoff(registrationInitial, registrationMax) while
//   the slot stays allocated, re-targeted to the epoch registered with by then; notFound (the
//   job is unknown to the term) cancels the job's attempts, frees its slots and drops its queued
//   updates (one log line); any other refusal frees the slots; slots missing from `accepted` are
//   freed. After every registration (a new epoch, or the same one after the ResourceManager
//   dropped this worker), every allocated slot is offered again to its job's JobMaster, with
//   every attempt in it: the running ones with their current state (DEPLOYING, or RUNNING with
//   pid and start time) and the ended ones whose terminal update is still queued (with that
//   state). The JobMaster adopts those it expects and cancels the others.
// - Attempts: submitTask starts the attempt through the TaskRunner (notFound when the
//   allocation is not held for the job, invalidArgument for an empty argv, failedPrecondition
//   with a runner that runs no tasks), its environment the runner's base plus REGENT_TASK_JOB_ID,
//   REGENT_TASK_JOB_NAME, REGENT_TASK_VERTEX, REGENT_TASK_SUBTASK_INDEX, REGENT_TASK_PARALLELISM,
//   REGENT_TASK_ATTEMPT_ID and REGENT_TASK_ATTEMPT_NUMBER (conf/options.h, kTaskVariablePrefix),
//   then the command's own env (which wins); cancelTask, freeSlot and disconnect(jobMaster)
//   cancel through it.
// - Updates: each update the runner reports is logged ("task started" / "task ended") and queued
//   per job, in order; the queue survives leader changes (in memory only: a worker that restarts
//   has lost its tasks with it). It is delivered with updateTaskExecutionState to the JobMaster
//   of the epoch registered with, one at a time per job: update N+1 is sent only once N was
//   answered. After every registration a job's queue waits until that registration's offer of
//   the job's slots was answered (a job holding no slot here any more: at once), so that the
//   JobMaster knows the attempts before their updates. unavailable, notRegistered, lost
//   connections and timeouts are retried with the backoff (cut short by the next registration),
//   re-targeted when the epoch changes. notFound for the job (MasterBootstrap.jobMaster) is
//   handled as for an offer; notFound for the attempt cancels it and drops its update. Bound:
//   over options.updateBufferMax queued updates (all jobs together) the oldest is dropped with
//   an "updates dropped" warning naming worker.update-buffer.max, the attempt, the job and the
//   state (the first ten, then one in a hundred), counted in updatesDropped; a RUNNING update
//   followed by a later queued state of the same attempt goes first, silently (it changes
//   nothing).
// - Heartbeats: a JobMaster's TaskExecutorGateway.heartbeat is answered asynchronously with
//   JobMasterGateway.heartbeat listing the job's attempts this worker holds (running, or ended
//   with their last update not delivered yet); notRegistered makes it offer the job's slots again.
class TaskExecutor final {
 public:
  // `runner` must outlive this object; its update callbacks are ignored once this object is
  // gone. A NoTaskRunner for the slot benchmark's simulated workers, which run no tasks: they
  // offer no slots (an allocation is recorded and reported only) and answer submitTask
  // failedPrecondition. `events` gets the worker's event lines (docs/operations.md), the epoch
  // gate's refusals among them: it must outlive the gateway too (the process's sinks outlive
  // its loop); a NullEventSink for the benchmark's simulated workers.
  TaskExecutor(kj::Timer& timer, client::LeaderClient& leaders, TaskRunner& runner,
               EventSink& events, TaskExecutorOptions options);
  ~TaskExecutor() noexcept;
  TaskExecutor(const TaskExecutor&) = delete;
  TaskExecutor& operator=(const TaskExecutor&) = delete;

  // Starts registering (and keeps registered from then on). Call once.
  void start();

  // Clean shutdown (SIGTERM; after the tasks were killed and flushUpdates()): stops registering
  // again; when registered, first calls JobMasterGateway.disconnect(epoch, resourceId, cause) of
  // every job holding slots here (together, bounded by the RPC call timeout), so that each
  // JobMaster drops this worker's slots at once instead of after heartbeat.timeout; then, when
  // registered (or once registerTaskExecutor was accepted, before the slot report's answer),
  // calls ResourceManagerGateway.disconnect once, bounded by the RPC call timeout. Never
  // rejects. Logs "worker disconnected" when done; later calls resolve at once and do nothing.
  kj::Promise<void> disconnect(const std::string& cause);

  // Resolves once no attempt update waits to be delivered (the worker's stop: after the tasks
  // were killed, so that their JobMasters learn how they ended), or after `bound`. Never rejects.
  kj::Promise<void> flushUpdates(Duration bound);

  // Registered, with its slot report accepted, with the leader of registeredEpoch(), and no
  // sign since that the registration is gone. /readyz.
  bool registered() const;
  uint64_t registeredEpoch() const;  // 0 while not registered.
  // The epoch gate's highest epoch seen (from calls, or from the leader registered with).
  uint64_t highestEpoch() const;
  std::optional<RegistrationId> registrationId() const;
  // The key the latest registration handed over for checking output-read tokens
  // (docs/security.md, "Reading task output"), with that registration's epoch; kept when the
  // registration is lost, until the next one replaces it. nullopt before the first registration
  // and after one with a master that handed none.
  const std::optional<rpc::OutputReadKey>& outputReadKey() const;
  // Why the last registration attempt failed ("" once registered): the master's message for a
  // refusal (alreadyExists, invalidArgument, permissionDenied), or the LeaderClient's obstacle.
  // For /readyz text.
  const std::string& lastRegistrationError() const;

  const std::vector<SlotState>& slots() const;
  // Attempts accepted by submitTask and not ended yet.
  size_t tasksRunning() const;
  // Attempt updates waiting to be delivered (all jobs; at most options.updateBufferMax).
  size_t updatesQueued() const;
  const TaskExecutorOptions& options() const { return options_; }
  const TaskExecutorCounters& counters() const { return counters_; }
  // Calls that reached the gateway, and the epoch gate's refusals, by method.
  const rpc::FencingCounters& fencingCounters() const;

 private:
  // The gateway's handlers and the runner's callbacks reach the private members below.
  friend class GatewayServer;
  friend class GatewayShared;
  friend TaskRunner::OnUpdate forwardTaskUpdates(std::shared_ptr<GatewayShared> shared);

  // Gateway requests (behind the epoch gate).
  void requestSlot(wire::TaskExecutorGateway::RequestSlotParams::Reader params,
                   wire::TaskExecutorGateway::RequestSlotResults::Builder results);
  void submitTask(uint64_t epoch, wire::TaskDeployment::Reader deployment,
                  wire::TaskExecutorGateway::SubmitTaskResults::Builder results);
  void cancelTask(const AttemptId& attempt,
                  wire::TaskExecutorGateway::CancelTaskResults::Builder results);
  // Cancels the allocation's attempts, then frees its slot.
  void freeSlot(const AllocationId& allocation, const std::string& cause);
  // Cancels the job's attempts, then frees its slots.
  void freeJob(const JobId& job, const std::string& cause);
  void answerHeartbeat();
  void answerJobMasterHeartbeat(const JobId& job, uint64_t epoch);
  // The ResourceManager disconnected this worker: registers again.
  void lose(const std::string& reason);
  // The ResourceManager releases this worker (TaskExecutorGateway.stop): accepted only for a
  // worker a provider started that holds no allocated slot; then options.onStopRequested.
  void stopRequested(const std::string& cause,
                     wire::TaskExecutorGateway::StopResults::Builder results);
  void onEpochRaised(uint64_t previous, uint64_t raised);
  // The runner's update of an attempt: logged, counted, queued for the job's JobMaster.
  void onTaskUpdate(const TaskUpdate& update);
  // Why this worker takes no slot and no task now (stopping, or it cannot create attempt
  // directories), or nullopt. requestSlot and submitTask answer it as `unavailable`.
  std::optional<std::string> whyNoTasks() const;
  // Why a submitTask read now may be stale (the loop stood still), or nullopt.
  std::optional<std::string> whyStale() const;

  TaskRunner& runner_;
  EventSink& events_;
  const TaskExecutorOptions options_;
  TaskExecutorCounters counters_;
  // The link the gateway and the runner's callbacks reach this object through, cut first thing
  // in the destructor.
  rpc::Revocable<TaskExecutor> self_{*this, "the task executor has shut down"};
  // The epoch gate and the fencing counters, shared with the gateway's endpoint, which the
  // master may hold (and call) after this object is gone; the gateway then answers DISCONNECTED.
  std::shared_ptr<GatewayShared> shared_;
  wire::TaskExecutorGateway::Client gateway_;
  SlotTable slots_;
  kj::Own<Registration> registration_;
  kj::Own<JobLinks> jobs_;  // Declared last: destroyed (its calls cancelled) first.
};

}  // namespace regent::taskexecutor

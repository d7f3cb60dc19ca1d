// The TaskExecutor: a worker's slots, its TaskExecutorGateway behind the epoch gate (fencing
// layer 2, docs/wire.md), and its registration with the leader's ResourceManager: register,
// report every slot, answer heartbeats, and register again whenever the leader changes, a
// higher epoch calls, the ResourceManager goes silent or forgets the registration. regent-worker
// runs one (services/worker/); the slot-rebuild benchmark runs thousands in one process, each
// with its own LeaderClient and so its own RPC connection.
#pragma once

#include <kj/async.h>
#include <kj/timer.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/leader_client.h"
#include "common/backoff.h"
#include "common/event_line.h"
#include "common/ids.h"
#include "common/task_errors.h"
#include "common/time.h"
#include "rpc/fenced_endpoint.h"
#include "rpc/schema/gateways.capnp.h"

namespace regent::taskexecutor {

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
  // Log event lines (docs/operations.md); the benchmark's simulated workers log none.
  bool logEvents = true;
};

// One slot as the worker holds it: free, or allocated to a job (requestSlot).
struct SlotState {
  uint32_t index = 0;
  std::optional<AllocationId> allocation;
  std::optional<JobId> job;
};

// Counts since the process started, for the worker's /metrics.
struct TaskExecutorCounters {
  uint64_t registrations = 0;          // Successful registerTaskExecutor + sendSlotReport.
  uint64_t registrationAttempts = 0;   // Including failed ones.
  uint64_t resourceManagerLost = 0;    // Heartbeat silence, disconnect, notRegistered, lost link.
  uint64_t heartbeatsAnswered = 0;     // ResourceManagerGateway.heartbeat calls made.
  uint64_t leaderChanges = 0;          // Registrations prompted by a new leader or higher epoch.
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
// its calls then fail DISCONNECTED.
class TaskExecutor final {
 public:
  TaskExecutor(kj::Timer& timer, client::LeaderClient& leaders, TaskExecutorOptions options);
  ~TaskExecutor() noexcept;
  TaskExecutor(const TaskExecutor&) = delete;
  TaskExecutor& operator=(const TaskExecutor&) = delete;

  // Starts registering (and keeps registered from then on). Call once.
  void start();

  // Clean shutdown (SIGTERM): stops registering again, and when registered (or once
  // registerTaskExecutor was accepted, before the slot report's answer) calls
  // ResourceManagerGateway.disconnect once, bounded by the RPC call timeout. Never rejects.
  // Logs "worker disconnected" when done; later calls resolve at once and do nothing.
  kj::Promise<void> disconnect(const std::string& cause);

  // Registered, with its slot report accepted, with the leader of registeredEpoch(), and no
  // sign since that the registration is gone. /readyz.
  bool registered() const;
  uint64_t registeredEpoch() const;  // 0 while not registered.
  // The epoch gate's highest epoch seen (from calls, or from the leader registered with).
  uint64_t highestEpoch() const;
  std::optional<RegistrationId> registrationId() const;
  // Why the last registration attempt failed ("" once registered): the master's message for a
  // refusal (alreadyExists, invalidArgument, permissionDenied), or the LeaderClient's obstacle.
  // For /readyz text.
  const std::string& lastRegistrationError() const { return lastRegistrationError_; }

  const std::vector<SlotState>& slots() const { return slots_; }
  const TaskExecutorOptions& options() const { return options_; }
  const TaskExecutorCounters& counters() const { return counters_; }
  // Calls that reached the gateway, and the epoch gate's refusals, by method.
  const rpc::FencingCounters& fencingCounters() const;

 private:
  class Gateway;
  class SharedGate;
  struct Shared;
  struct Registered;

  // Registers, then watches the registration until it is gone; after an exception the
  // LeaderClient rethrows (or any other), waits registrationMax. Never rejects; ends at
  // disconnect() only.
  kj::Promise<void> registerLoop();
  // One round: one LeaderClient call, then the watch while registered or the backoff after a
  // failed call. Rejects with what the LeaderClient rethrows.
  kj::Promise<void> registerRound();
  kj::Promise<rpc::Attempt<Registered>> attempt(wire::MasterBootstrap::Client bootstrap,
                                                const leader::LeaderInfo& leader);
  // The master's refusal of an attempt, noted in lastRefusal_.
  rpc::Attempt<Registered> refused(wire::Failure::Reader failure);
  void onRegistered(Registered&& registered);
  // Resolves with the reason the registration is gone (RM silence, a new leader, or lose()).
  kj::Promise<std::string> watchRegistration();
  // leaders.leaderAbove(epoch); an exception from it is logged and the watch taken up again
  // after registrationMax.
  kj::Promise<std::string> watchLeader(uint64_t epoch);
  kj::Promise<std::string> watchSilence(uint64_t round);
  // Ends the current registration (the watch resolves with `reason`); nothing while unregistered.
  void lose(const std::string& reason);
  void onEpochRaised(uint64_t previous, uint64_t raised);
  void answerHeartbeat();
  void fillReport(wire::SlotReport::Builder report) const;
  // Logs `line` with mono_us and wall_ms (common/event_line.h), unless options.logEvents is off.
  void logEvent(EventLine line, bool warn = false) const;

  // Gateway requests (behind the epoch gate).
  void requestSlot(wire::TaskExecutorGateway::RequestSlotParams::Reader params,
                   wire::TaskExecutorGateway::RequestSlotResults::Builder results);
  void freeSlot(const AllocationId& allocation);
  void freeJob(const JobId& job);

  kj::Timer& timer_;
  client::LeaderClient& leaders_;
  const TaskExecutorOptions options_;
  std::vector<SlotState> slots_;
  TaskExecutorCounters counters_;
  // The epoch gate and the fencing counters, shared with the gateway's endpoint, which the
  // master may hold (and call) after this object is gone; the gateway then answers DISCONNECTED.
  std::shared_ptr<Shared> shared_;
  wire::TaskExecutorGateway::Client gateway_;
  ExponentialBackoff backoff_;
  bool started_ = false;
  bool stopping_ = false;
  bool registered_ = false;
  uint64_t registeredEpoch_ = 0;
  uint64_t targetEpoch_ = 0;  // The epoch of the leader being registered with (or registered).
  std::optional<RegistrationId> registrationId_;
  kj::Maybe<wire::ResourceManagerGateway::Client> resourceManager_;
  uint64_t heartbeatTimeoutMs_ = 0;
  kj::TimePoint lastHeartbeat_;
  uint64_t round_ = 0;              // Registrations so far; a watch of an older one is stale.
  uint64_t attemptsThisRound_ = 0;  // Attempts since the last registration.
  std::string lastRegistrationError_;
  // The kind of the master's last refusal of an attempt (nullopt: it did not refuse).
  std::optional<wire::Failure::Which> lastRefusal_;
  kj::Own<kj::PromiseFulfiller<std::string>> lost_;
  TaskFailureLogger errorLogger_{"task executor"};
  kj::Maybe<kj::Promise<void>> loop_;
  kj::TaskSet tasks_{errorLogger_};  // Declared last: cancelled first.
};

}  // namespace regent::taskexecutor

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
#include <optional>
#include <string>
#include <vector>

#include "client/leader_client.h"
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
  std::string dataAddress;  // "host:port" serving task files; the HTTP address until issue 14.
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
class TaskExecutor final {
 public:
  TaskExecutor(kj::Timer& timer, client::LeaderClient& leaders, TaskExecutorOptions options);
  ~TaskExecutor() noexcept;
  TaskExecutor(const TaskExecutor&) = delete;
  TaskExecutor& operator=(const TaskExecutor&) = delete;

  // Starts registering (and keeps registered from then on). Call once.
  void start();

  // Clean shutdown (SIGTERM): stops registering again, and when registered calls
  // ResourceManagerGateway.disconnect once, bounded by the RPC call timeout. Never rejects.
  kj::Promise<void> disconnect(const std::string& cause);

  // Registered, with its slot report accepted, with the leader of registeredEpoch(), and no
  // sign since that the registration is gone. /readyz.
  bool registered() const;
  uint64_t registeredEpoch() const;  // 0 while not registered.
  // The epoch gate's highest epoch seen (from calls, or from the leader registered with).
  uint64_t highestEpoch() const;
  std::optional<RegistrationId> registrationId() const;

  const std::vector<SlotState>& slots() const { return slots_; }
  const TaskExecutorOptions& options() const { return options_; }
  const TaskExecutorCounters& counters() const { return counters_; }
  // Calls that reached the gateway, and the epoch gate's refusals, by method.
  const rpc::FencingCounters& fencingCounters() const { return fencing_; }

 private:
  class Gateway;

  kj::Timer& timer_;
  client::LeaderClient& leaders_;
  const TaskExecutorOptions options_;
  std::vector<SlotState> slots_;
  TaskExecutorCounters counters_;
  rpc::FencingCounters fencing_;
  TaskFailureLogger errorLogger_{"task executor"};
  kj::TaskSet tasks_{errorLogger_};  // Declared last: cancelled first.
};

}  // namespace regent::taskexecutor

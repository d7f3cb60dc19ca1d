// A worker's registration with the leader's ResourceManager: register, report every slot, answer
// the ResourceManager's heartbeats, register again whenever the registration is gone, and the
// ResourceManager's part of the worker's disconnect. Internal to services/taskexecutor/; the
// contract is TaskExecutor's (task_executor.h, "Registration" and "Registered").
#pragma once

#include <kj/async.h>
#include <kj/function.h>
#include <kj/timer.h>

#include <cstdint>
#include <optional>
#include <string>

#include "common/backoff.h"
#include "common/ids.h"
#include "common/task_set_error_logger.h"
#include "rpc/failure.h"
#include "rpc/output_token.h"
#include "rpc/schema/gateways.capnp.h"

namespace regent {
class EventSink;
}
namespace regent::client {
class LeaderClient;
}
namespace regent::leader {
struct LeaderInfo;
}
namespace regent::rpc {
class HighestSeenEpoch;
}

namespace regent::taskexecutor {

struct TaskExecutorOptions;
struct TaskExecutorCounters;
class SlotTable;

// Loop-thread only. Every reference must outlive it; destroying it cancels its work.
class Registration {
 public:
  // `gateway` is handed over in registerTaskExecutor; `slots` fills the slot reports;
  // `onRegistered` runs after every registration (a new epoch, or the same one again).
  Registration(kj::Timer& timer, client::LeaderClient& leaders, EventSink& events,
               const TaskExecutorOptions& options, TaskExecutorCounters& counters,
               rpc::HighestSeenEpoch& gate, wire::TaskExecutorGateway::Client gateway,
               const SlotTable& slots, kj::Function<void()> onRegistered);
  ~Registration() noexcept;
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;

  // Starts registering (and keeps registered from then on). Call once.
  void start();
  // The worker's disconnect, after `first` (the JobMasters told): stops registering again; when
  // the ResourceManager holds the registration, calls its disconnect once, bounded by the RPC
  // call timeout; then logs "worker disconnected". Never rejects.
  kj::Promise<void> disconnect(kj::Promise<void> first, const std::string& cause);
  bool stopping() const { return stopping_; }

  bool registered() const { return registered_; }
  // The epoch of the registration held, or last held (0 before the first).
  uint64_t epoch() const { return registeredEpoch_; }
  std::optional<RegistrationId> registrationId() const {
    return registered_ ? registrationId_ : std::nullopt;
  }
  const std::optional<rpc::OutputReadKey>& outputReadKey() const { return outputReadKey_; }
  const std::string& lastRegistrationError() const { return lastRegistrationError_; }
  // Registrations so far: a reaction to an older one is stale.
  uint64_t round() const { return round_; }
  // Whether the leader registered with is still the one of `epoch` (and the worker not
  // stopping): its bootstrap reaches that term's JobMasters.
  bool epochStands(uint64_t epoch) const;
  // The registered leader's bootstrap; null while not registered.
  kj::Maybe<wire::MasterBootstrap::Client>& bootstrap() { return bootstrap_; }

  // Ends the current registration (the watch resolves with `reason`); nothing while
  // unregistered.
  void lose(const std::string& reason);
  // The gate admitted `raised`, above every epoch seen.
  void onEpochRaised(uint64_t previous, uint64_t raised);
  // A TaskExecutorGateway.heartbeat from the ResourceManager: answered asynchronously.
  void answerHeartbeat();

 private:
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

  kj::Timer& timer_;
  client::LeaderClient& leaders_;
  EventSink& events_;
  const TaskExecutorOptions& options_;
  TaskExecutorCounters& counters_;
  rpc::HighestSeenEpoch& gate_;
  wire::TaskExecutorGateway::Client gateway_;
  const SlotTable& slots_;
  kj::Function<void()> onRegisteredCallback_;
  ExponentialBackoff backoff_;
  bool started_ = false;
  bool stopping_ = false;
  bool registered_ = false;
  uint64_t registeredEpoch_ = 0;
  uint64_t targetEpoch_ = 0;  // The epoch of the leader being registered with (or registered).
  std::optional<RegistrationId> registrationId_;
  std::optional<rpc::OutputReadKey> outputReadKey_;
  kj::Maybe<wire::ResourceManagerGateway::Client> resourceManager_;
  kj::Maybe<wire::MasterBootstrap::Client> bootstrap_;
  uint64_t heartbeatTimeoutMs_ = 0;
  kj::TimePoint lastHeartbeat_;
  uint64_t round_ = 0;
  uint64_t attemptsThisRound_ = 0;  // Attempts since the last registration.
  std::string lastRegistrationError_;
  // The kind of the master's last refusal of an attempt (nullopt: it did not refuse).
  std::optional<wire::Failure::Which> lastRefusal_;
  kj::Own<kj::PromiseFulfiller<std::string>> lost_;
  TaskSetErrorLogger errorLogger_{"task executor"};
  kj::Maybe<kj::Promise<void>> loop_;
  kj::TaskSet tasks_{errorLogger_};  // Declared last: cancelled first.
};

}  // namespace regent::taskexecutor

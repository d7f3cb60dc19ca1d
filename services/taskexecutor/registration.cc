// Registration (see registration.h): the loop of LeaderClient calls that registers the worker
// with the leader's ResourceManager, the watch of a registration, and the heartbeat answers.
#include "services/taskexecutor/registration.h"

#include <kj/debug.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <utility>

#include "client/leader_client.h"
#include "common/event_sink.h"
#include "rpc/fenced_endpoint.h"
#include "rpc/wire_ids.h"
#include "services/taskexecutor/slot_table.h"
#include "services/taskexecutor/task_executor.h"

namespace regent::taskexecutor {

struct Registration::Registered {
  uint64_t epoch = 0;
  std::string leaderId;
  RegistrationId registrationId;
  uint64_t heartbeatTimeoutMs = 0;
  std::string outputReadKey;  // Empty: the master handed none.
  wire::ResourceManagerGateway::Client resourceManager{nullptr};
  wire::MasterBootstrap::Client bootstrap{nullptr};
};

namespace {

// How long one LeaderClient call of the registration loop may take before the loop backs off
// and calls again: long enough for the LeaderClient's own retries.
Duration registrationCallBound(const TaskExecutorOptions& options,
                               const client::LeaderClient& leaders) {
  const Duration retries = leaders.deadline().timeout() * 3;
  return options.registrationMax > retries ? options.registrationMax : retries;
}

rpc::CallFailure staleLeader(const leader::LeaderInfo& leader, uint64_t highest) {
  rpc::CallFailure failure;
  failure.which = wire::Failure::FENCING;
  failure.message = "the leader " + leader.masterId + " (epoch " + std::to_string(leader.epoch) +
                    ") is older than epoch " + std::to_string(highest) +
                    " this worker has seen; resolving the leader again";
  return failure;
}

// A fatal refusal that registering again overcomes at once: the ResourceManager forgot the
// registration between registerTaskExecutor and sendSlotReport (notRegistered), or an entity it
// names is gone in between (notFound). The other fatal refusals wait registrationMax.
bool refusalPassesByRegistering(std::optional<wire::Failure::Which> refusal) {
  return refusal == wire::Failure::NOT_REGISTERED || refusal == wire::Failure::NOT_FOUND;
}

}  // namespace

Registration::Registration(kj::Timer& timer, client::LeaderClient& leaders, EventSink& events,
                           const TaskExecutorOptions& options, TaskExecutorCounters& counters,
                           rpc::HighestSeenEpoch& gate, wire::TaskExecutorGateway::Client gateway,
                           const SlotTable& slots, kj::Function<void()> onRegistered)
    : timer_(timer),
      leaders_(leaders),
      events_(events),
      options_(options),
      counters_(counters),
      gate_(gate),
      gateway_(kj::mv(gateway)),
      slots_(slots),
      onRegisteredCallback_(kj::mv(onRegistered)),
      backoff_(options_.registrationInitial, options_.registrationMax, options_.jitter),
      lastHeartbeat_(timer.now()) {}

Registration::~Registration() noexcept = default;

bool Registration::epochStands(uint64_t epoch) const {
  return !stopping_ && registered_ && registeredEpoch_ == epoch && gate_.highest() == epoch &&
         bootstrap_ != nullptr;
}

void Registration::start() {
  KJ_REQUIRE(!started_, "TaskExecutor::start() called twice");
  started_ = true;
  loop_ = registerLoop().eagerlyEvaluate([](kj::Exception&& exception) {
    spdlog::error("task executor: the registration loop ended: {}",
                  exception.getDescription().cStr());
  });
}

kj::Promise<void> Registration::registerLoop() {
  if (stopping_) return kj::READY_NOW;
  return registerRound()
      .catch_([this](kj::Exception&& exception) -> kj::Promise<void> {
        // The LeaderClient rethrows what it classifies fatal (FAILED, UNIMPLEMENTED: a master
        // too old to know the method, a handler's KJ_REQUIRE). The other side may be fixed, so
        // it is tried again after registrationMax, like a refusal.
        if (stopping_) return kj::READY_NOW;
        if (registered_) {
          registered_ = false;
          ++counters_.resourceManagerLost;
        }
        resourceManager_ = nullptr;
        bootstrap_ = nullptr;
        lastRegistrationError_ = exception.getDescription().cStr();
        const Duration wait = options_.registrationMax;
        spdlog::error("task executor {}: registration failed: {} (trying again in {} ms)",
                      options_.resourceId.toHex(), lastRegistrationError_, wait.count());
        return timer_.afterDelay(wait.count() * kj::MILLISECONDS);
      })
      .then([this]() { return registerLoop(); });
}

kj::Promise<void> Registration::registerRound() {
  return leaders_
      .call<Registered>(
          [this](wire::MasterBootstrap::Client bootstrap, const leader::LeaderInfo& leader) {
            return attempt(kj::mv(bootstrap), leader);
          },
          registrationCallBound(options_, leaders_))
      .then([this](Result<Registered> result) -> kj::Promise<void> {
        if (stopping_) return kj::READY_NOW;
        if (result.ok()) {
          onRegistered(std::move(result).value());
          return watchRegistration().then([this](std::string reason) {
            registered_ = false;
            resourceManager_ = nullptr;
            bootstrap_ = nullptr;
            ++counters_.resourceManagerLost;
            events_.emit(Event("resource manager lost", EventLevel::kWarn)
                             .field("resource_id", options_.resourceId.toHex())
                             .field("epoch", registeredEpoch_)
                             .quotedField("reason", reason));
          });
        }
        const Error& error = result.error();
        lastRegistrationError_ = error.message;
        Duration wait = backoff_.next();
        if (!error.isRetryable() && !refusalPassesByRegistering(lastRefusal_)) {
          // Another live worker with this resource id, a registration the master rejects, or a
          // credential it refuses: the other side may be fixed, so keep trying, slowly.
          wait = options_.registrationMax;
          spdlog::error("task executor {}: registration refused: {} (trying again in {} ms)",
                        options_.resourceId.toHex(), error.message, wait.count());
        } else {
          spdlog::debug("task executor {}: not registered yet: {}", options_.resourceId.toHex(),
                        error.message);
        }
        return timer_.afterDelay(wait.count() * kj::MILLISECONDS);
      });
}

kj::Promise<rpc::Attempt<Registration::Registered>> Registration::attempt(
    wire::MasterBootstrap::Client bootstrap, const leader::LeaderInfo& leader) {
  using Outcome = rpc::Attempt<Registered>;
  ++counters_.registrationAttempts;
  ++attemptsThisRound_;
  lastRefusal_.reset();
  if (leader.epoch < gate_.highest()) {
    return Outcome(staleLeader(leader, gate_.highest()));
  }
  targetEpoch_ = leader.epoch;
  const uint64_t epoch = leader.epoch;
  auto request = bootstrap.resourceManagerRequest();
  request.setEpoch(epoch);
  return leaders_.deadline()
      .send(kj::mv(request))
      .then([this, epoch, leaderId = leader.masterId, bootstrap](
                capnp::Response<wire::MasterBootstrap::ResourceManagerResults> response) mutable
            -> kj::Promise<Outcome> {
        if (response.hasFailure()) return refused(response.getFailure());
        auto resourceManager = response.getResourceManager();
        auto registration = resourceManager.registerTaskExecutorRequest();
        registration.setEpoch(epoch);
        auto info = registration.initRegistration();
        wire::setWireId(info.initResourceId(), options_.resourceId);
        info.setHost(options_.host);
        info.setDataAddress(options_.dataAddress);
        info.setHttpAddress(options_.httpAddress);
        info.setNumberOfSlots(options_.slots);
        auto slotProfile = info.initSlotProfile();
        slotProfile.setCpuMillis(options_.slotProfile.cpuMillis);
        slotProfile.setMemoryBytes(options_.slotProfile.memoryBytes);
        auto total = info.initTotalProfile();
        // Saturated, not wrapped: a total that cannot be carried is refused by the master.
        total.setCpuMillis(static_cast<uint32_t>(
            std::min<uint64_t>(uint64_t{options_.slotProfile.cpuMillis} * options_.slots,
                               std::numeric_limits<uint32_t>::max())));
        total.setMemoryBytes(options_.slotProfile.memoryBytes * options_.slots);
        info.setVersion(options_.version);
        info.setPid(options_.pid);
        info.setStartedAtMs(options_.startedAtMs);
        info.setContainment(options_.containment);
        info.setProviderWorkerId(options_.providerWorkerId);
        registration.setTaskExecutor(gateway_);
        return leaders_.deadline()
            .send(kj::mv(registration))
            .then([this, epoch, leaderId, resourceManager, bootstrap](
                      capnp::Response<wire::ResourceManagerGateway::RegisterTaskExecutorResults>
                          registered) mutable -> kj::Promise<Outcome> {
              if (registered.hasFailure()) return refused(registered.getFailure());
              auto success = registered.getSuccess();
              Registered done;
              done.epoch = epoch;
              done.leaderId = leaderId;
              done.registrationId = wire::idFromWire<RegistrationId>(success.getRegistrationId());
              done.heartbeatTimeoutMs = success.getHeartbeatTimeoutMs();
              done.outputReadKey = std::string(success.getOutputReadKey().asChars().begin(),
                                               success.getOutputReadKey().size());
              done.resourceManager = resourceManager;
              done.bootstrap = bootstrap;
              // The registration's epoch raises the gate: a deposed leader is refused from now.
              gate_.observe(epoch);
              // Heartbeats the ResourceManager sends before the report is accepted are answered
              // through this gateway already.
              resourceManager_ = resourceManager;
              bootstrap_ = bootstrap;
              registeredEpoch_ = epoch;
              // Held from here: a disconnect() before the report is answered still tells the
              // ResourceManager, which keeps the registration until then.
              registrationId_ = done.registrationId;
              auto report = resourceManager.sendSlotReportRequest();
              report.setEpoch(epoch);
              wire::setWireId(report.initResourceId(), options_.resourceId);
              wire::setWireId(report.initRegistrationId(), done.registrationId);
              slots_.fillReport(report.initSlotReport());
              return leaders_.deadline()
                  .send(kj::mv(report))
                  .then([this, done = std::move(done)](
                            capnp::Response<wire::ResourceManagerGateway::SendSlotReportResults>
                                reported) mutable -> Outcome {
                    if (reported.hasFailure()) {
                      resourceManager_ = nullptr;
                      bootstrap_ = nullptr;
                      registrationId_.reset();
                      return refused(reported.getFailure());
                    }
                    return Outcome(std::move(done));
                  });
            });
      });
}

rpc::Attempt<Registration::Registered> Registration::refused(wire::Failure::Reader failure) {
  rpc::CallFailure refusal = rpc::CallFailure::from(failure);
  lastRefusal_ = refusal.which;
  return refusal;
}

void Registration::onRegistered(Registered&& registered) {
  ++counters_.registrations;
  ++round_;
  registered_ = true;
  registeredEpoch_ = registered.epoch;
  targetEpoch_ = registered.epoch;
  registrationId_ = registered.registrationId;
  resourceManager_ = registered.resourceManager;
  bootstrap_ = registered.bootstrap;
  heartbeatTimeoutMs_ = registered.heartbeatTimeoutMs;
  outputReadKey_.reset();
  if (!registered.outputReadKey.empty()) {
    outputReadKey_ = rpc::OutputReadKey{registered.epoch, std::move(registered.outputReadKey)};
  }
  lastHeartbeat_ = timer_.now();
  lastRegistrationError_.clear();
  backoff_.reset();
  events_.emit(Event("worker registered")
                   .field("resource_id", options_.resourceId.toHex())
                   .field("epoch", registered.epoch)
                   .field("registration_id", registered.registrationId.toHex())
                   .field("leader", registered.leaderId)
                   .field("attempts", attemptsThisRound_));
  attemptsThisRound_ = 0;
  onRegisteredCallback_();
}

kj::Promise<std::string> Registration::watchRegistration() {
  // A higher epoch may have called while the registration was in flight.
  if (gate_.highest() > registeredEpoch_) {
    ++counters_.leaderChanges;
    return std::string("a call carried epoch ") + std::to_string(gate_.highest()) +
           ", above the registered epoch " + std::to_string(registeredEpoch_);
  }
  auto paf = kj::newPromiseAndFulfiller<std::string>();
  lost_ = kj::mv(paf.fulfiller);
  const uint64_t epoch = registeredEpoch_;
  return kj::mv(paf.promise).exclusiveJoin(watchLeader(epoch)).exclusiveJoin(watchSilence(round_));
}

kj::Promise<std::string> Registration::watchLeader(uint64_t epoch) {
  return leaders_.leaderAbove(epoch).then(
      [this](leader::LeaderInfo leader) -> kj::Promise<std::string> {
        ++counters_.leaderChanges;
        return "a new leader " + leader.masterId + " with epoch " + std::to_string(leader.epoch);
      },
      [this, epoch](kj::Exception&& exception) -> kj::Promise<std::string> {
        // What the LeaderClient classifies fatal (asking a master that fails the call):
        // the registration stands; the watch is taken up again after registrationMax.
        const Duration wait = options_.registrationMax;
        spdlog::error(
            "task executor {}: watching for a new leader failed: {} (watching "
            "again in {} ms)",
            options_.resourceId.toHex(), exception.getDescription().cStr(), wait.count());
        return timer_.afterDelay(wait.count() * kj::MILLISECONDS).then([this, epoch]() {
          return watchLeader(epoch);
        });
      });
}

kj::Promise<std::string> Registration::watchSilence(uint64_t round) {
  if (heartbeatTimeoutMs_ == 0) return kj::NEVER_DONE;
  const kj::TimePoint due =
      lastHeartbeat_ + static_cast<int64_t>(heartbeatTimeoutMs_) * kj::MILLISECONDS;
  return timer_.atTime(due).then([this, round, due]() -> kj::Promise<std::string> {
    if (round != round_) return kj::NEVER_DONE;
    const kj::TimePoint next =
        lastHeartbeat_ + static_cast<int64_t>(heartbeatTimeoutMs_) * kj::MILLISECONDS;
    if (next > due) return watchSilence(round);
    return "no heartbeat from the resource manager for " + std::to_string(heartbeatTimeoutMs_) +
           " ms";
  });
}

void Registration::lose(const std::string& reason) {
  if (lost_.get() == nullptr || !lost_->isWaiting()) return;
  registered_ = false;  // At once: /readyz must not say ready until registered again.
  lost_->fulfill(std::string(reason));
}

void Registration::onEpochRaised(uint64_t /*previous*/, uint64_t raised) {
  // The leader being registered with raises the gate as its calls arrive: not a change.
  if (raised <= targetEpoch_) return;
  if (lost_.get() != nullptr && lost_->isWaiting()) {
    ++counters_.leaderChanges;
    lose("a call carried epoch " + std::to_string(raised) + ", above the registered epoch " +
         std::to_string(registeredEpoch_));
  }
  // While registering, the next attempt finds the leader it names below the gate and resolves
  // the leader again (attempt()).
}

void Registration::answerHeartbeat() {
  lastHeartbeat_ = timer_.now();
  KJ_IF_MAYBE (resourceManager, resourceManager_) {
    auto request = resourceManager->heartbeatRequest();
    request.setEpoch(registeredEpoch_);
    wire::setWireId(request.initResourceId(), options_.resourceId);
    auto payload = request.initPayload();
    slots_.fillReport(payload.initSlotReport());
    if (registrationId_) wire::setWireId(payload.initRegistrationId(), *registrationId_);
    ++counters_.heartbeatsAnswered;
    const uint64_t round = round_;
    // The incoming heartbeat does not wait for this call.
    tasks_.add(
        leaders_.deadline()
            .send(kj::mv(request))
            .then(
                [this,
                 round](capnp::Response<wire::ResourceManagerGateway::HeartbeatResults> response) {
                  if (!response.hasFailure() || round != round_) return;
                  auto failure = rpc::CallFailure::from(response.getFailure());
                  if (failure.which == wire::Failure::NOT_REGISTERED) {
                    lose("the resource manager does not know this registration: " +
                         failure.message);
                  } else {
                    spdlog::warn("task executor {}: heartbeat refused: {}",
                                 options_.resourceId.toHex(), failure.describe());
                  }
                },
                [this, round](kj::Exception&& exception) {
                  if (round != round_) return;
                  if (exception.getType() == kj::Exception::Type::DISCONNECTED) {
                    lose(std::string("the connection to the resource manager was lost: ") +
                         exception.getDescription().cStr());
                  } else {
                    spdlog::warn("task executor {}: heartbeat failed: {}",
                                 options_.resourceId.toHex(), exception.getDescription().cStr());
                  }
                }));
  }
}

kj::Promise<void> Registration::disconnect(kj::Promise<void> first, const std::string& cause) {
  if (stopping_) return kj::READY_NOW;
  kj::Promise<void> jobMasters = kj::mv(first);
  stopping_ = true;
  loop_ = nullptr;  // No registering again.
  // Registered, or registerTaskExecutor accepted and the report not answered yet: either way
  // the ResourceManager holds this registration until told (or until heartbeat.timeout).
  const bool held = resourceManager_ != nullptr && registrationId_.has_value();
  const uint64_t epoch = held ? registeredEpoch_ : 0;
  auto logged = [this, epoch, cause]() {
    events_.emit(Event("worker disconnected")
                     .field("resource_id", options_.resourceId.toHex())
                     .field("epoch", epoch)
                     .quotedField("cause", cause));
  };
  registered_ = false;
  bootstrap_ = nullptr;
  kj::Maybe<wire::ResourceManagerGateway::Client> resourceManager = kj::mv(resourceManager_);
  resourceManager_ = nullptr;
  if (!held) {
    return jobMasters.then(kj::mv(logged));
  }
  return jobMasters.then([this, resourceManager = kj::mv(resourceManager), epoch, cause,
                          logged]() mutable -> kj::Promise<void> {
    KJ_IF_MAYBE (gateway, resourceManager) {
      auto request = gateway->disconnectRequest();
      request.setEpoch(epoch);
      wire::setWireId(request.initResourceId(), options_.resourceId);
      request.setCause(cause);
      wire::setWireId(request.initRegistrationId(), *registrationId_);
      return leaders_.deadline()
          .send(kj::mv(request))
          .then(
              [this](capnp::Response<wire::ResourceManagerGateway::DisconnectResults> response) {
                if (response.hasFailure()) {
                  spdlog::warn("task executor {}: disconnect refused: {}",
                               options_.resourceId.toHex(),
                               rpc::CallFailure::from(response.getFailure()).describe());
                }
              },
              [this](kj::Exception&& exception) {
                spdlog::warn("task executor {}: disconnect failed: {}", options_.resourceId.toHex(),
                             exception.getDescription().cStr());
              })
          .then(kj::mv(logged));
    }
    logged();
    return kj::READY_NOW;
  });
}

}  // namespace regent::taskexecutor

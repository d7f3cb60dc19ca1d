// TaskExecutor (see task_executor.h): the slots, the gateway behind the epoch gate, and the
// registration loop with the leader's ResourceManager.
#include "services/taskexecutor/task_executor.h"

#include <kj/debug.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <utility>

#include "common/event_line.h"
#include "rpc/failure.h"
#include "rpc/wire_ids.h"

namespace regent::taskexecutor {

// What the gateway and its endpoint share with the TaskExecutor; they may outlive it (the
// master holds the gateway), so `owner` is null once it is gone.
struct TaskExecutor::Shared {
  TaskExecutor* owner = nullptr;
  rpc::HighestSeenEpoch gate;
  rpc::FencingCounters fencing;
  std::string resourceId;
  bool logEvents = true;
  uint64_t refusalsLogged = 0;

  explicit Shared(TaskExecutor* owner)
      : owner(owner),
        gate(0, [this](uint64_t previous, uint64_t raised) {
          if (this->owner != nullptr) this->owner->onEpochRaised(previous, raised);
        }) {}
};

// The endpoint's rule: the shared gate, which also logs its refusals.
class TaskExecutor::SharedGate final : public rpc::EpochRule {
 public:
  explicit SharedGate(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}

  bool admits(uint64_t received) override { return shared_->gate.admits(received); }

  void refuse(const std::string& method, uint64_t received,
              wire::Failure::Builder failure) override {
    shared_->gate.refuse(method, received, failure);
    // A deposed leader may call many times: the first refusals, then one in a hundred.
    const uint64_t n = ++shared_->refusalsLogged;
    if (shared_->logEvents && (n <= 10 || n % 100 == 0)) {
      spdlog::warn("{}", EventLine("epoch gate refused")
                             .field("resource_id", shared_->resourceId)
                             .field("method", method)
                             .field("received", received)
                             .field("highest", shared_->gate.highest())
                             .field("mono_us", monotonicMicros())
                             .field("wall_ms", wallClockMillis())
                             .str());
    }
  }

 private:
  std::shared_ptr<Shared> shared_;
};

// The TaskExecutorGateway's handlers. Epochs were judged by the endpoint before any of these
// runs. submitTask / cancelTask come with the JobMaster: the endpoint answers them "not
// implemented by this process".
class TaskExecutor::Gateway final : public wire::TaskExecutorGateway::Server {
 public:
  explicit Gateway(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}

  kj::Promise<void> requestSlot(RequestSlotContext context) override {
    owner().requestSlot(context.getParams(), context.getResults());
    return kj::READY_NOW;
  }

  kj::Promise<void> freeSlot(FreeSlotContext context) override {
    owner().freeSlot(wire::idFromWire<AllocationId>(context.getParams().getAllocationId()));
    return kj::READY_NOW;
  }

  kj::Promise<void> heartbeat(HeartbeatContext context) override {
    auto sender = context.getParams().getSender();
    // JobMaster heartbeats come with the JobMaster: it will be answered with
    // JobMasterGateway.heartbeat; until then it succeeds and nothing is called back.
    if (sender.isResourceManager()) owner().answerHeartbeat();
    return kj::READY_NOW;
  }

  kj::Promise<void> disconnect(DisconnectContext context) override {
    auto params = context.getParams();
    auto sender = params.getSender();
    if (sender.isJobMaster()) {
      owner().freeJob(wire::idFromWire<JobId>(sender.getJobMaster()));
    } else {
      owner().lose(std::string("the resource manager disconnected this worker: ") +
                   params.getCause().cStr());
    }
    return kj::READY_NOW;
  }

 private:
  TaskExecutor& owner() {
    if (shared_->owner == nullptr) {
      kj::throwFatalException(
          KJ_EXCEPTION(DISCONNECTED, "the task executor has shut down"));
    }
    return *shared_->owner;
  }

  std::shared_ptr<Shared> shared_;
};

struct TaskExecutor::Registered {
  uint64_t epoch = 0;
  std::string leaderId;
  RegistrationId registrationId;
  uint64_t heartbeatTimeoutMs = 0;
  wire::ResourceManagerGateway::Client resourceManager{nullptr};
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

std::string describeException(const kj::Exception& exception) {
  return exception.getDescription().cStr();
}

}  // namespace

TaskExecutor::TaskExecutor(kj::Timer& timer, client::LeaderClient& leaders,
                           TaskExecutorOptions options)
    : timer_(timer),
      leaders_(leaders),
      options_(std::move(options)),
      shared_(std::make_shared<Shared>(this)),
      gateway_(nullptr),
      backoff_(options_.registrationInitial, options_.registrationMax, options_.jitter),
      lastHeartbeat_(timer.now()) {
  shared_->resourceId = options_.resourceId.toHex();
  shared_->logEvents = options_.logEvents;
  slots_.reserve(options_.slots);
  for (uint32_t i = 0; i < options_.slots; ++i) slots_.push_back(SlotState{i, {}, {}});
  gateway_ = rpc::fencedEndpoint<wire::TaskExecutorGateway>(
      kj::heap<Gateway>(shared_), kj::heap<SharedGate>(shared_), shared_->fencing);
}

TaskExecutor::~TaskExecutor() noexcept { shared_->owner = nullptr; }

bool TaskExecutor::registered() const { return registered_; }
uint64_t TaskExecutor::registeredEpoch() const { return registered_ ? registeredEpoch_ : 0; }
uint64_t TaskExecutor::highestEpoch() const { return shared_->gate.highest(); }
std::optional<RegistrationId> TaskExecutor::registrationId() const {
  return registered_ ? registrationId_ : std::nullopt;
}
const rpc::FencingCounters& TaskExecutor::fencingCounters() const { return shared_->fencing; }

void TaskExecutor::logEvent(EventLine line, bool warn) const {
  if (!options_.logEvents) return;
  line.field("mono_us", monotonicMicros()).field("wall_ms", wallClockMillis());
  if (warn) {
    spdlog::warn("{}", line.str());
  } else {
    spdlog::info("{}", line.str());
  }
}

void TaskExecutor::start() {
  KJ_REQUIRE(!started_, "TaskExecutor::start() called twice");
  started_ = true;
  loop_ = registerLoop().eagerlyEvaluate([](kj::Exception&& exception) {
    spdlog::error("task executor: the registration loop ended: {}", describeException(exception));
  });
}

kj::Promise<void> TaskExecutor::registerLoop() {
  if (stopping_) return kj::READY_NOW;
  return registerRound()
      .catch_([this](kj::Exception&& exception) -> kj::Promise<void> {
        // The LeaderClient rethrows what it classifies fatal (FAILED, UNIMPLEMENTED: a master's
        // wrong auth proof, a master too old to know the method, a handler's KJ_REQUIRE). The
        // other side may be fixed, so it is tried again after registrationMax, like a refusal.
        if (stopping_) return kj::READY_NOW;
        if (registered_) {
          registered_ = false;
          ++counters_.resourceManagerLost;
        }
        resourceManager_ = nullptr;
        lastRegistrationError_ = describeException(exception);
        const Duration wait = options_.registrationMax;
        spdlog::error("task executor {}: registration failed: {} (trying again in {} ms)",
                      options_.resourceId.toHex(), lastRegistrationError_, wait.count());
        return timer_.afterDelay(wait.count() * kj::MILLISECONDS);
      })
      .then([this]() { return registerLoop(); });
}

kj::Promise<void> TaskExecutor::registerRound() {
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
            ++counters_.resourceManagerLost;
            logEvent(EventLine("resource manager lost")
                         .field("resource_id", options_.resourceId.toHex())
                         .field("epoch", registeredEpoch_)
                         .quotedField("reason", reason),
                     /*warn=*/true);
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

kj::Promise<rpc::Attempt<TaskExecutor::Registered>> TaskExecutor::attempt(
    wire::MasterBootstrap::Client bootstrap, const leader::LeaderInfo& leader) {
  using Outcome = rpc::Attempt<Registered>;
  ++counters_.registrationAttempts;
  ++attemptsThisRound_;
  lastRefusal_.reset();
  if (leader.epoch < shared_->gate.highest()) {
    return Outcome(staleLeader(leader, shared_->gate.highest()));
  }
  targetEpoch_ = leader.epoch;
  const uint64_t epoch = leader.epoch;
  auto request = bootstrap.resourceManagerRequest();
  request.setEpoch(epoch);
  return leaders_.deadline()
      .send(kj::mv(request))
      .then([this, epoch, leaderId = leader.masterId](
                capnp::Response<wire::MasterBootstrap::ResourceManagerResults> response)
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
        registration.setTaskExecutor(gateway_);
        return leaders_.deadline()
            .send(kj::mv(registration))
            .then([this, epoch, leaderId, resourceManager](
                      capnp::Response<wire::ResourceManagerGateway::RegisterTaskExecutorResults>
                          registered) mutable -> kj::Promise<Outcome> {
              if (registered.hasFailure()) return refused(registered.getFailure());
              auto success = registered.getSuccess();
              Registered done;
              done.epoch = epoch;
              done.leaderId = leaderId;
              done.registrationId = wire::idFromWire<RegistrationId>(success.getRegistrationId());
              done.heartbeatTimeoutMs = success.getHeartbeatTimeoutMs();
              done.resourceManager = resourceManager;
              // The registration's epoch raises the gate: a deposed leader is refused from now.
              shared_->gate.observe(epoch);
              // Heartbeats the ResourceManager sends before the report is accepted are answered
              // through this gateway already.
              resourceManager_ = resourceManager;
              registeredEpoch_ = epoch;
              // Held from here: a disconnect() before the report is answered still tells the
              // ResourceManager, which keeps the registration until then.
              registrationId_ = done.registrationId;
              auto report = resourceManager.sendSlotReportRequest();
              report.setEpoch(epoch);
              wire::setWireId(report.initResourceId(), options_.resourceId);
              wire::setWireId(report.initRegistrationId(), done.registrationId);
              fillReport(report.initSlotReport());
              return leaders_.deadline()
                  .send(kj::mv(report))
                  .then([this, done = std::move(done)](
                            capnp::Response<wire::ResourceManagerGateway::SendSlotReportResults>
                                reported) mutable -> Outcome {
                    if (reported.hasFailure()) {
                      resourceManager_ = nullptr;
                      registrationId_.reset();
                      return refused(reported.getFailure());
                    }
                    return Outcome(std::move(done));
                  });
            });
      });
}

rpc::Attempt<TaskExecutor::Registered> TaskExecutor::refused(wire::Failure::Reader failure) {
  rpc::CallFailure refusal = rpc::CallFailure::from(failure);
  lastRefusal_ = refusal.which;
  return refusal;
}

void TaskExecutor::onRegistered(Registered&& registered) {
  ++counters_.registrations;
  ++round_;
  registered_ = true;
  registeredEpoch_ = registered.epoch;
  targetEpoch_ = registered.epoch;
  registrationId_ = registered.registrationId;
  resourceManager_ = registered.resourceManager;
  heartbeatTimeoutMs_ = registered.heartbeatTimeoutMs;
  lastHeartbeat_ = timer_.now();
  lastRegistrationError_.clear();
  backoff_.reset();
  logEvent(EventLine("worker registered")
               .field("resource_id", options_.resourceId.toHex())
               .field("epoch", registered.epoch)
               .field("registration_id", registered.registrationId.toHex())
               .field("leader", registered.leaderId)
               .field("attempts", attemptsThisRound_));
  attemptsThisRound_ = 0;
}

kj::Promise<std::string> TaskExecutor::watchRegistration() {
  // A higher epoch may have called while the registration was in flight.
  if (shared_->gate.highest() > registeredEpoch_) {
    ++counters_.leaderChanges;
    return std::string("a call carried epoch ") + std::to_string(shared_->gate.highest()) +
           ", above the registered epoch " + std::to_string(registeredEpoch_);
  }
  auto paf = kj::newPromiseAndFulfiller<std::string>();
  lost_ = kj::mv(paf.fulfiller);
  const uint64_t epoch = registeredEpoch_;
  return kj::mv(paf.promise)
      .exclusiveJoin(watchLeader(epoch))
      .exclusiveJoin(watchSilence(round_));
}

kj::Promise<std::string> TaskExecutor::watchLeader(uint64_t epoch) {
  return leaders_.leaderAbove(epoch)
      .then(
          [this](leader::LeaderInfo leader) -> kj::Promise<std::string> {
            ++counters_.leaderChanges;
            return "a new leader " + leader.masterId + " with epoch " +
                   std::to_string(leader.epoch);
          },
          [this, epoch](kj::Exception&& exception) -> kj::Promise<std::string> {
            // What the LeaderClient classifies fatal (asking a master that fails the call):
            // the registration stands; the watch is taken up again after registrationMax.
            const Duration wait = options_.registrationMax;
            spdlog::error("task executor {}: watching for a new leader failed: {} (watching "
                          "again in {} ms)",
                          options_.resourceId.toHex(), describeException(exception),
                          wait.count());
            return timer_.afterDelay(wait.count() * kj::MILLISECONDS)
                .then([this, epoch]() { return watchLeader(epoch); });
          });
}

kj::Promise<std::string> TaskExecutor::watchSilence(uint64_t round) {
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

void TaskExecutor::lose(const std::string& reason) {
  if (lost_.get() == nullptr || !lost_->isWaiting()) return;
  registered_ = false;  // At once: /readyz must not say ready until registered again.
  lost_->fulfill(std::string(reason));
}

void TaskExecutor::onEpochRaised(uint64_t /*previous*/, uint64_t raised) {
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

void TaskExecutor::answerHeartbeat() {
  lastHeartbeat_ = timer_.now();
  KJ_IF_MAYBE (resourceManager, resourceManager_) {
    auto request = resourceManager->heartbeatRequest();
    request.setEpoch(registeredEpoch_);
    wire::setWireId(request.initResourceId(), options_.resourceId);
    auto payload = request.initPayload();
    fillReport(payload.initSlotReport());
    if (registrationId_) wire::setWireId(payload.initRegistrationId(), *registrationId_);
    ++counters_.heartbeatsAnswered;
    const uint64_t round = round_;
    // The incoming heartbeat does not wait for this call.
    tasks_.add(
        leaders_.deadline()
            .send(kj::mv(request))
            .then(
                [this, round](
                    capnp::Response<wire::ResourceManagerGateway::HeartbeatResults> response) {
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
                    lose("the connection to the resource manager was lost: " +
                         describeException(exception));
                  } else {
                    spdlog::warn("task executor {}: heartbeat failed: {}",
                                 options_.resourceId.toHex(), describeException(exception));
                  }
                }));
  }
}

void TaskExecutor::fillReport(wire::SlotReport::Builder report) const {
  wire::setWireId(report.initResourceId(), options_.resourceId);
  auto list = report.initSlots(static_cast<unsigned>(slots_.size()));
  for (size_t i = 0; i < slots_.size(); ++i) {
    const SlotState& slot = slots_[i];
    auto status = list[static_cast<unsigned>(i)];
    auto slotId = status.initSlotId();
    wire::setWireId(slotId.initResourceId(), options_.resourceId);
    slotId.setSlotIndex(slot.index);
    auto profile = status.initProfile();
    profile.setCpuMillis(options_.slotProfile.cpuMillis);
    profile.setMemoryBytes(options_.slotProfile.memoryBytes);
    if (slot.allocation) wire::setWireId(status.initAllocationId(), *slot.allocation);
    if (slot.job) wire::setWireId(status.initJobId(), *slot.job);
  }
}

void TaskExecutor::requestSlot(wire::TaskExecutorGateway::RequestSlotParams::Reader params,
                               wire::TaskExecutorGateway::RequestSlotResults::Builder results) {
  const auto slotId = params.getSlotId();
  const uint32_t index = slotId.getSlotIndex();
  const auto resourceId = wire::idFromWire<ResourceId>(slotId.getResourceId());
  const auto job = wire::idFromWire<JobId>(params.getJobId());
  const auto allocation = wire::idFromWire<AllocationId>(params.getAllocationId());
  if (resourceId != options_.resourceId || index >= slots_.size()) {
    rpc::failures::notFoundSlot(
        results.initFailure(), resourceId, index,
        "no slot " + std::to_string(index) + " of " + resourceId.toHex() + ": this worker is " +
            options_.resourceId.toHex() + " with " + std::to_string(slots_.size()) + " slots");
    return;
  }
  SlotState& slot = slots_[index];
  if (slot.allocation && *slot.allocation != allocation) {
    rpc::failures::failedPrecondition(
        results.initFailure(),
        "slot " + std::to_string(index) + " is allocated to allocation " +
            slot.allocation->toHex() + " of job " + (slot.job ? slot.job->toHex() : "?") +
            ", not to allocation " + allocation.toHex());
    return;
  }
  // Offering the slot to the job's JobMaster (JobMasterGateway.offerSlots) comes with the
  // JobMaster; until then the allocation is recorded and reported.
  slot.allocation = allocation;
  slot.job = job;
}

void TaskExecutor::freeSlot(const AllocationId& allocation) {
  for (SlotState& slot : slots_) {
    if (slot.allocation == allocation) {
      slot.allocation.reset();
      slot.job.reset();
    }
  }
}

void TaskExecutor::freeJob(const JobId& job) {
  for (SlotState& slot : slots_) {
    if (slot.job == job) {
      slot.allocation.reset();
      slot.job.reset();
    }
  }
}

kj::Promise<void> TaskExecutor::disconnect(const std::string& cause) {
  if (stopping_) return kj::READY_NOW;
  stopping_ = true;
  loop_ = nullptr;  // No registering again.
  // Registered, or registerTaskExecutor accepted and the report not answered yet: either way
  // the ResourceManager holds this registration until told (or until heartbeat.timeout).
  const bool held = resourceManager_ != nullptr && registrationId_.has_value();
  const uint64_t epoch = held ? registeredEpoch_ : 0;
  auto logged = [this, epoch, cause]() {
    logEvent(EventLine("worker disconnected")
                 .field("resource_id", options_.resourceId.toHex())
                 .field("epoch", epoch)
                 .quotedField("cause", cause));
  };
  registered_ = false;
  kj::Maybe<wire::ResourceManagerGateway::Client> resourceManager = kj::mv(resourceManager_);
  resourceManager_ = nullptr;
  KJ_IF_MAYBE (gateway, resourceManager) {
    if (held) {
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
                spdlog::warn("task executor {}: disconnect failed: {}",
                             options_.resourceId.toHex(), describeException(exception));
              })
          .then(kj::mv(logged));
    }
  }
  logged();
  return kj::READY_NOW;
}

}  // namespace regent::taskexecutor

// TaskExecutor (see task_executor.h): the slots, the gateway behind the epoch gate, the
// registration loop with the leader's ResourceManager, and the jobs on the worker (offers,
// attempts, their updates, the JobMasters' heartbeats).
#include "services/taskexecutor/task_executor.h"

#include <kj/debug.h>
#include <kj/vector.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <set>
#include <utility>

#include "common/event_sink.h"
#include "common/wakeable_delay.h"
#include "conf/options.h"
#include "rpc/failure.h"
#include "rpc/wire_ids.h"

namespace regent::taskexecutor {

// What the gateway and its endpoint share with the TaskExecutor; they may outlive it (the
// master holds the gateway), so `owner` is null once it is gone.
struct TaskExecutor::Shared {
  TaskExecutor* owner = nullptr;
  EventSink& events;  // Outlives the gateway (TaskExecutor's constructor).
  rpc::HighestSeenEpoch gate;
  rpc::FencingCounters fencing;
  std::string resourceId;
  uint64_t refusalsLogged = 0;

  Shared(TaskExecutor* owner, EventSink& events)
      : owner(owner), events(events), gate(0, [this](uint64_t previous, uint64_t raised) {
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
    if (n <= 10 || n % 100 == 0) {
      shared_->events.emit(Event("epoch gate refused", EventLevel::kWarn)
                               .field("resource_id", shared_->resourceId)
                               .field("method", method)
                               .field("received", received)
                               .field("highest", shared_->gate.highest()));
    }
  }

 private:
  std::shared_ptr<Shared> shared_;
};

// The TaskExecutorGateway's handlers. Epochs were judged by the endpoint before any of these
// runs.
class TaskExecutor::Gateway final : public wire::TaskExecutorGateway::Server {
 public:
  explicit Gateway(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}

  kj::Promise<void> requestSlot(RequestSlotContext context) override {
    owner().requestSlot(context.getParams(), context.getResults());
    return kj::READY_NOW;
  }

  kj::Promise<void> submitTask(SubmitTaskContext context) override {
    auto params = context.getParams();
    owner().submitTask(params.getEpoch(), params.getDeployment(), context.getResults());
    return kj::READY_NOW;
  }

  kj::Promise<void> cancelTask(CancelTaskContext context) override {
    owner().cancelTask(wire::idFromWire<AttemptId>(context.getParams().getAttemptId()),
                       context.getResults());
    return kj::READY_NOW;
  }

  kj::Promise<void> freeSlot(FreeSlotContext context) override {
    auto params = context.getParams();
    owner().freeSlot(wire::idFromWire<AllocationId>(params.getAllocationId()),
                     params.getCause().cStr());
    return kj::READY_NOW;
  }

  kj::Promise<void> heartbeat(HeartbeatContext context) override {
    auto params = context.getParams();
    auto sender = params.getSender();
    if (sender.isResourceManager()) {
      owner().answerHeartbeat();
    } else {
      owner().answerJobMasterHeartbeat(wire::idFromWire<JobId>(sender.getJobMaster()),
                                       params.getEpoch());
    }
    return kj::READY_NOW;
  }

  kj::Promise<void> disconnect(DisconnectContext context) override {
    auto params = context.getParams();
    auto sender = params.getSender();
    if (sender.isJobMaster()) {
      owner().freeJob(wire::idFromWire<JobId>(sender.getJobMaster()),
                      std::string("the JobMaster disconnected: ") + params.getCause().cStr());
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
  std::string outputReadKey;  // Empty: the master handed none.
  wire::ResourceManagerGateway::Client resourceManager{nullptr};
  wire::MasterBootstrap::Client bootstrap{nullptr};
};

struct TaskExecutor::JobLink {
  JobLink(const TaskExecutorOptions& options, kj::Timer& timer)
      : offerBackoff(options.registrationInitial, options.registrationMax, options.jitter),
        updateBackoff(options.registrationInitial, options.registrationMax, options.jitter),
        backoffWaits(timer) {}

  // The job's JobMaster as reached in `gatewayEpoch`.
  kj::Maybe<wire::JobMasterGateway::Client> gateway;
  uint64_t gatewayEpoch = 0;
  std::deque<PendingUpdate> updates;  // In the order the runner reported them.
  // The registration (round_) whose offer of the job's slots was answered, or in which the job
  // held no slot: its updates go from then on.
  uint64_t offeredRound = 0;
  // The registration in which the leader answered notFound for the job: its later updates are
  // dropped (its attempts are being cancelled).
  std::optional<uint64_t> unknownRound;
  bool delivering = false;            // deliverLoop() runs.
  bool offering = false;              // offerLoop() runs.
  bool offerScheduled = false;        // offerLoop() starts after this turn.
  ExponentialBackoff offerBackoff;
  ExponentialBackoff updateBackoff;
  // backoffWait() callers, woken early by the next registration (wakeJob).
  WakeableDelay backoffWaits;
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

// What the worker does after a JobMaster call (or MasterBootstrap.jobMaster) failed.
enum class Reaction {
  kRetry,          // The leadership moved or is busy, the link was lost: again after a backoff.
  kUnknown,        // notFound: the job (or the attempt) is unknown to the term.
  kNotRegistered,  // The worker is not registered (yet) with the term's ResourceManager.
  kGiveUp,         // A refusal retrying cannot fix.
};

Reaction reactionTo(const rpc::CallFailure& failure) {
  if (failure.which == wire::Failure::NOT_FOUND) return Reaction::kUnknown;
  if (failure.which == wire::Failure::NOT_REGISTERED) return Reaction::kNotRegistered;
  return failure.action() == rpc::FailureAction::kFatal ? Reaction::kGiveUp : Reaction::kRetry;
}

Reaction reactionTo(const kj::Exception& exception) {
  return rpc::classify(exception) == rpc::FailureAction::kFatal ? Reaction::kGiveUp
                                                                 : Reaction::kRetry;
}

wire::ExecutionState executionState(TaskPhase phase) {
  switch (phase) {
    case TaskPhase::kRunning:
      return wire::ExecutionState::RUNNING;
    case TaskPhase::kFinished:
      return wire::ExecutionState::FINISHED;
    case TaskPhase::kFailed:
      return wire::ExecutionState::FAILED;
    case TaskPhase::kCanceled:
      return wire::ExecutionState::CANCELED;
  }
  return wire::ExecutionState::FAILED;
}

Duration waitBefore(ExponentialBackoff& backoff, Duration retryAfter, Duration max) {
  const Duration next = backoff.next();
  if (retryAfter > next) return retryAfter < max ? retryAfter : max;
  return next;
}

}  // namespace

TaskExecutor::TaskExecutor(kj::Timer& timer, client::LeaderClient& leaders, TaskRunner* runner,
                           EventSink& events, TaskExecutorOptions options)
    : timer_(timer),
      leaders_(leaders),
      runner_(runner),
      events_(events),
      options_(std::move(options)),
      shared_(std::make_shared<Shared>(this, events)),
      gateway_(nullptr),
      backoff_(options_.registrationInitial, options_.registrationMax, options_.jitter),
      lastHeartbeat_(timer.now()) {
  shared_->resourceId = options_.resourceId.toHex();
  slots_.reserve(options_.slots);
  for (uint32_t i = 0; i < options_.slots; ++i) slots_.push_back(SlotState{i, {}, {}, 0});
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
              shared_->gate.observe(epoch);
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
              fillReport(report.initSlotReport());
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
  onJobsRegistered();
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
    if (!slot.allocation || attempts_.empty()) continue;
    std::vector<const AttemptRecord*> running;
    for (const auto& [id, record] : attempts_) {
      if (record.allocation == *slot.allocation) running.push_back(&record);
    }
    auto list = status.initRunningAttempts(static_cast<unsigned>(running.size()));
    for (size_t j = 0; j < running.size(); ++j) {
      fillAttempt(list[static_cast<unsigned>(j)], *running[j]);
    }
  }
}

void TaskExecutor::fillAttempt(wire::TaskExecutionState::Builder state,
                               const AttemptRecord& record) const {
  wire::setWireId(state.initAttemptId(), record.attempt);
  wire::setWireId(state.initJobId(), record.job);
  wire::setWireId(state.initAllocationId(), record.allocation);
  state.setVertexName(record.vertex);
  state.setSubtaskIndex(record.subtask);
  state.setAttemptNumber(record.attemptNumber);
  const TaskUpdate& latest = record.latest;
  // Accepted but not spawned yet: deploying.
  state.setState(record.started || latest.phase != TaskPhase::kRunning
                     ? executionState(latest.phase)
                     : wire::ExecutionState::DEPLOYING);
  state.setPid(latest.phase == TaskPhase::kRunning ? latest.pid : 0);
  state.setExitCode(latest.exitCode);
  state.setTermSignal(latest.termSignal);
  if (latest.phase == TaskPhase::kFailed) {
    std::string message = latest.message;
    if (latest.workerFault) {
      message = "worker " + options_.resourceId.toHex() + " could not start the attempt: " +
                message + " (a fault of the worker, not of the task)";
    }
    state.setFailureMessage(message);
    state.setWorkerFault(latest.workerFault);
  }
  state.setOutputProblem(outputProblems(latest));
  state.setStartedAtMs(latest.startedAtMs);
  state.setEndedAtMs(latest.endedAtMs);
  state.setStateChangedAtMs(latest.phase == TaskPhase::kRunning ? latest.startedAtMs
                                                                : latest.endedAtMs);
}

std::optional<std::string> TaskExecutor::whyNoTasks() const {
  if (stopping_ || (runner_ != nullptr && runner_->stopping())) {
    return "worker " + options_.resourceId.toHex() + " is stopping";
  }
  if (runner_ != nullptr && runner_->unusableReason()) {
    return "worker " + options_.resourceId.toHex() + " cannot run tasks: " +
           *runner_->unusableReason();
  }
  return std::nullopt;
}

void TaskExecutor::requestSlot(wire::TaskExecutorGateway::RequestSlotParams::Reader params,
                               wire::TaskExecutorGateway::RequestSlotResults::Builder results) {
  const auto slotId = params.getSlotId();
  const uint32_t index = slotId.getSlotIndex();
  const auto resourceId = wire::idFromWire<ResourceId>(slotId.getResourceId());
  const auto job = wire::idFromWire<JobId>(params.getJobId());
  const auto allocation = wire::idFromWire<AllocationId>(params.getAllocationId());
  // A worker that cannot create attempt directories takes no slot: the job goes elsewhere.
  if (auto why = whyNoTasks()) {
    rpc::failures::unavailable(results.initFailure(), 0, *why);
    return;
  }
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
  if (slot.allocation == allocation) return;  // Repeated: offered (or being offered) already.
  slot.allocation = allocation;
  slot.job = job;
  slot.acceptedEpoch = 0;
  scheduleOffer(job);
}

// ---- Jobs on the worker -----------------------------------------------------------------------

TaskExecutor::JobLink& TaskExecutor::link(const JobId& job) {
  auto found = jobs_.find(job);
  if (found == jobs_.end()) found = jobs_.emplace(job, kj::heap<JobLink>(options_, timer_)).first;
  return *found->second;
}

void TaskExecutor::forgetIfIdle(const JobId& job) {
  auto found = jobs_.find(job);
  if (found == jobs_.end()) return;
  const JobLink& held = *found->second;
  if (held.delivering || held.offering || held.offerScheduled || !held.updates.empty()) return;
  for (const SlotState& slot : slots_) {
    if (slot.job == job) return;
  }
  for (const auto& [id, record] : attempts_) {
    if (record.job == job) return;
  }
  jobs_.erase(found);
}

bool TaskExecutor::epochStands(uint64_t epoch) const {
  return !stopping_ && registered_ && registeredEpoch_ == epoch &&
         shared_->gate.highest() == epoch && bootstrap_ != nullptr;
}

void TaskExecutor::onJobsRegistered() {
  // Asked again through this registration's bootstrap: a JobMaster reached before may be gone
  // (released while this worker was away) even when the epoch is the same.
  for (auto& [job, held] : jobs_) held->gateway = nullptr;
  // Every allocated slot, also one accepted in this epoch already: registering again in the
  // same epoch means the ResourceManager dropped this worker (a pause past heartbeat.timeout,
  // say), and the JobMaster may have dropped it too, failed its attempts, or ended. The offer
  // tells the JobMaster what runs (and what ended) here; it adopts what it expects and cancels
  // the rest, and a job the leader no longer runs (notFound) is cancelled here (jobUnknown).
  std::set<JobId> toOffer;
  for (SlotState& slot : slots_) {
    if (!slot.allocation || !slot.job) continue;
    slot.acceptedEpoch = 0;
    toOffer.insert(*slot.job);
  }
  // Loops waiting out a backoff try at once, against this registration.
  for (auto& [job, held] : jobs_) wakeJob(*held);
  for (const JobId& job : toOffer) scheduleOffer(job);
  // The queued updates of a job holding slots here wait for the answer to its offer (offerLoop
  // marks it offered): the JobMaster learns the attempts from the offer, then how they went on.
  // A job holding no slot here any more has nothing to offer: its updates go at once.
  std::vector<JobId> slotless;
  for (const auto& [job, held] : jobs_) {
    if (toOffer.count(job) == 0 || runner_ == nullptr) slotless.push_back(job);
  }
  for (const JobId& job : slotless) markOffered(job);
}

kj::Promise<rpc::Attempt<wire::JobMasterGateway::Client>> TaskExecutor::jobMaster(
    const JobId& job, uint64_t epoch) {
  using Outcome = rpc::Attempt<wire::JobMasterGateway::Client>;
  JobLink& held = link(job);
  KJ_IF_MAYBE (gateway, held.gateway) {
    if (held.gatewayEpoch == epoch) return Outcome(*gateway);
  }
  if (!epochStands(epoch)) {
    rpc::CallFailure failure;
    failure.which = wire::Failure::UNAVAILABLE;
    failure.message = "not registered with the leader of epoch " + std::to_string(epoch);
    return Outcome(std::move(failure));
  }
  auto request = KJ_ASSERT_NONNULL(bootstrap_).jobMasterRequest();
  request.setEpoch(epoch);
  wire::setWireId(request.initJobId(), job);
  return leaders_.deadline()
      .send(kj::mv(request))
      .then([this, job, epoch](capnp::Response<wire::MasterBootstrap::JobMasterResults> response)
                -> Outcome {
        if (response.hasFailure()) return rpc::CallFailure::from(response.getFailure());
        wire::JobMasterGateway::Client gateway = response.getJobMaster();
        auto found = jobs_.find(job);
        if (found != jobs_.end() && epochStands(epoch)) {
          found->second->gateway = gateway;
          found->second->gatewayEpoch = epoch;
        }
        return Outcome(kj::mv(gateway));
      })
      .catch_([](kj::Exception&& exception) -> Outcome {
        // The leader went away with the call in flight (DISCONNECTED), or it timed out: a
        // failure the callers retry, not an exception that would end their loop with its flag
        // (JobLink::delivering, offering) still set. Any other exception is retried too: giving
        // up would mean freeing the job's slots, so cancelling tasks that may be running fine.
        rpc::CallFailure failure;
        failure.which = wire::Failure::UNAVAILABLE;
        failure.message = "MasterBootstrap.jobMaster: " + describeException(exception);
        return Outcome(std::move(failure));
      });
}

void TaskExecutor::scheduleOffer(const JobId& job) {
  if (runner_ == nullptr) return;  // Runs no tasks: the allocation is only recorded, reported.
  JobLink& held = link(job);
  // A running offer looks for slots allocated meanwhile when it is done.
  if (held.offerScheduled || held.offering) return;
  held.offerScheduled = true;
  // After this turn, so that the slots requestSlot allocates to the job together go together.
  tasks_.add(kj::evalLater([this, job]() {
    link(job).offerScheduled = false;
    return offerLoop(job, registeredEpoch_);
  }));
}

kj::Promise<void> TaskExecutor::offerLoop(JobId job, uint64_t epoch) {
  JobLink& held = link(job);
  std::vector<std::pair<uint32_t, AllocationId>> offered;
  if (epochStands(epoch)) {
    for (const SlotState& slot : slots_) {
      if (slot.job == job && slot.allocation && slot.acceptedEpoch != epoch) {
        offered.emplace_back(slot.index, *slot.allocation);
      }
    }
  }
  if (offered.empty()) {
    // Registered in another epoch meanwhile: that registration's offer (onJobsRegistered) found
    // this loop running and left the slots to it.
    if (epoch != registeredEpoch_ && epochStands(registeredEpoch_)) {
      return offerLoop(job, registeredEpoch_);
    }
    held.offering = false;
    // Every slot of the job accepted in this registration, or freed: its updates may go.
    if (epochStands(epoch)) markOffered(job);
    forgetIfIdle(job);
    return kj::READY_NOW;
  }
  held.offering = true;

  // The offered slots that still hold their allocation.
  auto stillHeld = [this, offered]() {
    std::vector<SlotState*> slots;
    for (const auto& [index, allocation] : offered) {
      if (slots_[index].allocation == allocation) slots.push_back(&slots_[index]);
    }
    return slots;
  };
  // After a failure: again after the backoff, or the slots freed.
  auto failed = [this, job, epoch, stillHeld](Reaction reaction, const std::string& why,
                                              Duration retryAfter) -> kj::Promise<void> {
    JobLink& held = link(job);
    held.gateway = nullptr;  // Asked again next time.
    if (reaction == Reaction::kRetry || reaction == Reaction::kNotRegistered) {
      const Duration wait = waitBefore(held.offerBackoff, retryAfter, options_.registrationMax);
      spdlog::debug("task executor {}: offering slots to job {} failed: {} (again in {} ms)",
                    options_.resourceId.toHex(), job.toHex(), why, wait.count());
      return backoffWait(job, wait).then([this, job, epoch]() { return offerLoop(job, epoch); });
    }
    if (reaction == Reaction::kUnknown) {
      jobUnknown(job, why);
      return offerLoop(job, epoch);
    }
    const std::string cause =
        "the JobMaster of job " + job.toHex() + " refused the slot offer: " + why;
    spdlog::warn("task executor {}: freeing {} slot(s): {}", options_.resourceId.toHex(),
                 stillHeld().size(), cause);
    for (SlotState* slot : stillHeld()) releaseSlot(*slot, cause);
    return offerLoop(job, epoch);
  };

  return jobMaster(job, epoch)
      .then([this, job, epoch, offered, stillHeld,
             failed](rpc::Attempt<wire::JobMasterGateway::Client> reached) -> kj::Promise<void> {
        if (auto* failure = std::get_if<rpc::CallFailure>(&reached)) {
          return failed(reactionTo(*failure), failure->describe(), failure->retryAfter);
        }
        auto request = std::get<wire::JobMasterGateway::Client>(reached).offerSlotsRequest();
        request.setEpoch(epoch);
        wire::setWireId(request.initResourceId(), options_.resourceId);
        request.setTaskExecutor(gateway_);
        std::vector<SlotState*> slots = stillHeld();
        auto list = request.initSlots(static_cast<unsigned>(slots.size()));
        for (size_t i = 0; i < slots.size(); ++i) {
          auto offer = list[static_cast<unsigned>(i)];
          const SlotState& slot = *slots[i];
          wire::setWireId(offer.initAllocationId(), *slot.allocation);
          offer.setSlotIndex(slot.index);
          auto profile = offer.initProfile();
          profile.setCpuMillis(options_.slotProfile.cpuMillis);
          profile.setMemoryBytes(options_.slotProfile.memoryBytes);
          // Every attempt in the slot: running (its current state), or ended with its
          // terminal update still queued (that state; the update follows the offer's answer).
          std::map<AttemptId, const AttemptRecord*> inSlot;
          for (const auto& [id, record] : attempts_) {
            if (record.allocation == *slot.allocation) inSlot.emplace(id, &record);
          }
          for (const PendingUpdate& pending : link(job).updates) {
            const AttemptRecord& record = pending.record;
            if (record.allocation == *slot.allocation &&
                record.latest.phase != TaskPhase::kRunning &&
                attempts_.count(record.attempt) == 0) {
              inSlot[record.attempt] = &record;
            }
          }
          auto attempts = offer.initRunningAttempts(static_cast<unsigned>(inSlot.size()));
          unsigned j = 0;
          for (const auto& [id, record] : inSlot) fillAttempt(attempts[j++], *record);
        }
        // An answer arriving after a newer registration (same epoch) no longer counts: that
        // registration wants its own offer answered.
        const uint64_t round = round_;
        return leaders_.deadline()
            .send(kj::mv(request))
            .then(
                [this, job, epoch, round, stillHeld, failed](
                    capnp::Response<wire::JobMasterGateway::OfferSlotsResults> response)
                    -> kj::Promise<void> {
                  if (response.hasFailure()) {
                    auto failure = rpc::CallFailure::from(response.getFailure());
                    return failed(reactionTo(failure), failure.describe(), failure.retryAfter);
                  }
                  std::set<AllocationId> accepted;
                  for (auto id : response.getAccepted()) {
                    accepted.insert(wire::idFromWire<AllocationId>(id));
                  }
                  link(job).offerBackoff.reset();
                  for (SlotState* slot : stillHeld()) {
                    if (accepted.count(*slot->allocation) != 0) {
                      if (epochStands(epoch) && round == round_) slot->acceptedEpoch = epoch;
                    } else {
                      releaseSlot(*slot, "the JobMaster of job " + job.toHex() +
                                             " did not accept the slot");
                    }
                  }
                  return offerLoop(job, epoch);
                },
                [failed](kj::Exception&& exception) {
                  return failed(reactionTo(exception), describeException(exception),
                                Duration(0));
                });
      });
}

void TaskExecutor::releaseSlot(SlotState& slot, const std::string& cause) {
  if (!slot.allocation) return;
  const AllocationId allocation = *slot.allocation;
  const std::optional<JobId> job = slot.job;
  if (runner_ != nullptr) {
    std::vector<AttemptId> cancel;
    for (const auto& [id, record] : attempts_) {
      if (record.allocation == allocation) cancel.push_back(id);
    }
    for (const AttemptId& attempt : cancel) runner_->cancel(attempt);
  }
  slot.allocation.reset();
  slot.job.reset();
  slot.acceptedEpoch = 0;
  spdlog::debug("task executor {}: slot {} (allocation {}) freed: {}",
                options_.resourceId.toHex(), slot.index, allocation.toHex(), cause);
  if (job) forgetIfIdle(*job);
}

void TaskExecutor::freeSlot(const AllocationId& allocation, const std::string& cause) {
  for (SlotState& slot : slots_) {
    if (slot.allocation == allocation) releaseSlot(slot, cause);
  }
}

void TaskExecutor::freeJob(const JobId& job, const std::string& cause) {
  for (SlotState& slot : slots_) {
    if (slot.job == job) releaseSlot(slot, cause);
  }
  // Attempts whose slot was freed before they ended.
  if (runner_ == nullptr) return;
  std::vector<AttemptId> cancel;
  for (const auto& [id, record] : attempts_) {
    if (record.job == job) cancel.push_back(id);
  }
  for (const AttemptId& attempt : cancel) runner_->cancel(attempt);
}

void TaskExecutor::submitTask(uint64_t epoch, wire::TaskDeployment::Reader deployment,
                              wire::TaskExecutorGateway::SubmitTaskResults::Builder results) {
  if (runner_ == nullptr) {
    rpc::failures::failedPrecondition(results.initFailure(), "this worker runs no tasks");
    return;
  }
  // The JobMaster takes `unavailable` for the worker's fault: the attempt goes elsewhere.
  if (auto why = whyNoTasks()) {
    rpc::failures::unavailable(results.initFailure(), 0, *why);
    return;
  }
  const auto job = wire::idFromWire<JobId>(deployment.getJobId());
  const auto attempt = wire::idFromWire<AttemptId>(deployment.getAttemptId());
  const auto allocation = wire::idFromWire<AllocationId>(deployment.getAllocationId());
  // Repeated: accepted before (running, or ended and still known to the runner).
  if (attempts_.count(attempt) != 0 || runner_->latest(attempt)) return;
  const bool held = std::any_of(slots_.begin(), slots_.end(), [&](const SlotState& slot) {
    return slot.allocation == allocation && slot.job == job;
  });
  if (!held) {
    rpc::failures::notFound(results.initFailure(), allocation,
                            "allocation " + allocation.toHex() + " is not held for job " +
                                job.toHex() + " on worker " + options_.resourceId.toHex());
    return;
  }
  auto command = deployment.getCommand();
  if (command.getArgv().size() == 0) {
    rpc::failures::invalidArgument(results.initFailure(), "deployment.command.argv",
                                   "is empty",
                                   "the command of vertex " +
                                       std::string(deployment.getVertexName().cStr()) +
                                       " has no argv");
    return;
  }
  TaskSpec spec;
  spec.attempt = attempt;
  spec.job = job;
  for (auto arg : command.getArgv()) spec.argv.emplace_back(arg.cStr());
  // Who the task is (docs/jobgraph.md, "Fields"), under the prefix configuration skips; the
  // JobGraph's env comes later and wins.
  const std::string prefix(kTaskVariablePrefix);
  spec.env = {
      prefix + "JOB_ID=" + job.toHex(),
      prefix + "JOB_NAME=" + deployment.getJobName().cStr(),
      prefix + "VERTEX=" + deployment.getVertexName().cStr(),
      prefix + "SUBTASK_INDEX=" + std::to_string(deployment.getSubtaskIndex()),
      prefix + "PARALLELISM=" + std::to_string(deployment.getParallelism()),
      prefix + "ATTEMPT_ID=" + attempt.toHex(),
      prefix + "ATTEMPT_NUMBER=" + std::to_string(deployment.getAttemptNumber()),
  };
  for (auto var : command.getEnv()) {
    spec.env.push_back(std::string(var.getName().cStr()) + "=" + var.getValue().cStr());
  }
  spec.workingDir = command.getWorkingDir().cStr();

  AttemptRecord record;
  record.attempt = attempt;
  record.job = job;
  record.allocation = allocation;
  record.vertex = deployment.getVertexName().cStr();
  record.subtask = deployment.getSubtaskIndex();
  record.attemptNumber = deployment.getAttemptNumber();
  record.latest.attempt = attempt;
  attempts_.emplace(attempt, std::move(record));
  // The runner calls back later (never from inside start); after this object is gone the
  // callbacks find no owner.
  Status started = runner_->start(spec, [shared = shared_](const TaskUpdate& update) {
    if (shared->owner != nullptr) shared->owner->onTaskUpdate(update);
  });
  if (!started.ok()) {
    attempts_.erase(attempt);
    rpc::failures::failedPrecondition(results.initFailure(), started.error().message);
    return;
  }
  spdlog::debug("task executor {}: attempt {} of job {} accepted in epoch {}",
                options_.resourceId.toHex(), attempt.toHex(), job.toHex(), epoch);
}

void TaskExecutor::cancelTask(const AttemptId& attempt,
                              wire::TaskExecutorGateway::CancelTaskResults::Builder results) {
  if (runner_ != nullptr) {
    if (attempts_.count(attempt) != 0) {
      runner_->cancel(attempt);
      return;
    }
    if (runner_->latest(attempt)) return;  // Already ended.
  }
  rpc::failures::notFound(results.initFailure(), attempt,
                          "no attempt " + attempt.toHex() + " on worker " +
                              options_.resourceId.toHex());
}

void TaskExecutor::onTaskUpdate(const TaskUpdate& update) {
  auto found = attempts_.find(update.attempt);
  if (found == attempts_.end()) return;
  AttemptRecord& record = found->second;
  record.latest = update;
  const std::string state = phaseName(update.phase);
  if (update.phase == TaskPhase::kRunning) {
    record.started = true;
    ++counters_.tasksStarted;
    events_.emit(Event("task started")
                     .field("resource_id", options_.resourceId.toHex())
                     .field("job", record.job.toHex())
                     .field("attempt", record.attempt.toHex())
                     .field("pid", uint64_t{update.pid}));
  } else {
    if (update.phase == TaskPhase::kFinished) ++counters_.tasksFinished;
    if (update.phase == TaskPhase::kFailed) ++counters_.tasksFailed;
    if (update.phase == TaskPhase::kCanceled) ++counters_.tasksCanceled;
    Event line("task ended");
    line.field("resource_id", options_.resourceId.toHex())
        .field("job", record.job.toHex())
        .field("attempt", record.attempt.toHex())
        .field("state", state)
        .field("exit_code", int64_t{update.exitCode})
        .field("signal", int64_t{update.termSignal});
    if (update.phase == TaskPhase::kFailed) line.quotedField("message", update.message);
    if (update.workerFault) line.field("worker_fault", "true");
    const std::string output = outputProblems(update);
    if (!output.empty()) line.quotedField("output", output);
    events_.emit(line);
  }
  const JobId job = record.job;
  const AttemptRecord queued = record;
  if (update.phase != TaskPhase::kRunning) attempts_.erase(found);
  const JobLink& held = link(job);
  if (held.unknownRound == round_) {
    // The leader does not know the job: nobody to tell (its attempts are being cancelled).
    spdlog::debug("task executor {}: not delivering the {} update of attempt {}: job {} is "
                  "unknown to the leader",
                  options_.resourceId.toHex(), state, queued.attempt.toHex(), job.toHex());
    forgetIfIdle(job);
    return;
  }
  queueUpdate(job, queued);
  kickDelivery(job);
}

size_t TaskExecutor::updatesQueued() const {
  size_t queued = 0;
  for (const auto& [job, held] : jobs_) queued += held->updates.size();
  return queued;
}

void TaskExecutor::queueUpdate(const JobId& job, const AttemptRecord& record) {
  const size_t max = std::max<size_t>(options_.updateBufferMax, 1);
  std::optional<JobId> dropped;
  if (updatesQueued() >= max) {
    // A terminal update supersedes its attempt's queued RUNNING update, which changes nothing
    // once the terminal state is known: that one goes first, silently.
    bool superseded = false;
    if (record.latest.phase != TaskPhase::kRunning) {
      std::deque<PendingUpdate>& updates = link(job).updates;
      for (auto it = updates.rbegin(); it != updates.rend(); ++it) {
        if (it->record.attempt == record.attempt &&
            it->record.latest.phase == TaskPhase::kRunning) {
          updates.erase(std::next(it).base());
          superseded = true;
          break;
        }
      }
    }
    if (!superseded) dropped = dropOldestUpdate();
  }
  link(job).updates.push_back(PendingUpdate{++updateSeq_, record});
  if (dropped && *dropped != job) forgetIfIdle(*dropped);
}

std::optional<JobId> TaskExecutor::dropOldestUpdate() {
  JobLink* oldest = nullptr;
  for (auto& [job, held] : jobs_) {
    if (held->updates.empty()) continue;
    if (oldest == nullptr || held->updates.front().seq < oldest->updates.front().seq) {
      oldest = held.get();
    }
  }
  if (oldest == nullptr) return std::nullopt;
  // An update in flight may still arrive; its answer no longer pops anything (deliverLoop
  // matches the front by seq).
  const AttemptRecord dropped = oldest->updates.front().record;
  oldest->updates.pop_front();
  const uint64_t n = ++counters_.updatesDropped;
  if (n <= 10 || n % 100 == 0) {
    events_.emit(Event("updates dropped", EventLevel::kWarn)
                     .field("resource_id", options_.resourceId.toHex())
                     .field("job", dropped.job.toHex())
                     .field("attempt", dropped.attempt.toHex())
                     .field("vertex", dropped.vertex)
                     .field("subtask", uint64_t{dropped.subtask})
                     .field("state", phaseName(dropped.latest.phase))
                     .field("dropped", n)
                     .quotedField("reason", "worker.update-buffer.max (" +
                                                std::to_string(options_.updateBufferMax) +
                                                ") attempt updates wait for their JobMaster; the "
                                                "oldest is dropped"));
  }
  return dropped.job;
}

void TaskExecutor::notifyIfFlushed() {
  if (flushed_.empty() || updatesQueued() != 0) return;
  for (auto& waiter : flushed_) waiter->fulfill();
  flushed_.clear();
}

void TaskExecutor::jobUnknown(const JobId& job, const std::string& why) {
  JobLink& held = link(job);
  const size_t dropped = held.updates.size();
  held.updates.clear();
  held.unknownRound = round_;
  spdlog::warn("task executor {}: job {} is unknown to the leader ({}); cancelling its "
               "attempts, freeing its slots, dropping its {} queued update(s)",
               options_.resourceId.toHex(), job.toHex(), why, dropped);
  freeJob(job, "job " + job.toHex() + " is unknown to the leader: " + why);
  notifyIfFlushed();
}

kj::Promise<void> TaskExecutor::backoffWait(const JobId& job, Duration wait) {
  return link(job).backoffWaits.wait(wait);
}

void TaskExecutor::wakeJob(JobLink& held) {
  held.backoffWaits.wakeAll();
  held.offerBackoff.reset();
  held.updateBackoff.reset();
}

void TaskExecutor::markOffered(const JobId& job) {
  JobLink& held = link(job);
  held.offeredRound = round_;
  if (!held.updates.empty()) kickDelivery(job);
}

void TaskExecutor::kickDelivery(const JobId& job) {
  JobLink& held = link(job);
  if (held.delivering) return;
  held.delivering = true;
  tasks_.add(deliverLoop(job));
}

kj::Promise<void> TaskExecutor::deliverLoop(JobId job) {
  JobLink& held = link(job);
  const uint64_t epoch = registeredEpoch_;
  if (held.updates.empty() || !epochStands(epoch) || held.offeredRound != round_) {
    // Nothing left, or waiting: for a registration (onJobsRegistered), or for the answer to the
    // job's offer in this one (markOffered).
    held.delivering = false;
    forgetIfIdle(job);
    notifyIfFlushed();
    return kj::READY_NOW;
  }
  const uint64_t seq = held.updates.front().seq;
  auto retry = [this, job](Duration retryAfter, const std::string& why) -> kj::Promise<void> {
    JobLink& held = link(job);
    held.gateway = nullptr;
    const Duration wait = waitBefore(held.updateBackoff, retryAfter, options_.registrationMax);
    spdlog::debug("task executor {}: an attempt update of job {} failed: {} (again in {} ms)",
                  options_.resourceId.toHex(), job.toHex(), why, wait.count());
    return backoffWait(job, wait).then([this, job]() { return deliverLoop(job); });
  };
  // The update numbered `sent` is settled: the next one. (It is no longer the front when the
  // bound dropped it meanwhile.)
  auto settled = [this, job](uint64_t sent) -> kj::Promise<void> {
    JobLink& held = link(job);
    if (!held.updates.empty() && held.updates.front().seq == sent) held.updates.pop_front();
    return deliverLoop(job);
  };
  return jobMaster(job, epoch)
      .then([this, job, epoch, seq, retry,
             settled](rpc::Attempt<wire::JobMasterGateway::Client> reached) -> kj::Promise<void> {
        if (auto* failure = std::get_if<rpc::CallFailure>(&reached)) {
          const Reaction reaction = reactionTo(*failure);
          if (reaction == Reaction::kUnknown) {
            jobUnknown(job, failure->describe());
            return deliverLoop(job);
          }
          if (reaction == Reaction::kGiveUp) {
            spdlog::error("task executor {}: cannot reach the JobMaster of job {}: {}",
                          options_.resourceId.toHex(), job.toHex(), failure->describe());
            return settled(seq);
          }
          return retry(failure->retryAfter, failure->describe());
        }
        JobLink& held = link(job);
        if (held.updates.empty()) return deliverLoop(job);  // Dropped meanwhile.
        // What is sent is the front now (the bound may have dropped the one `seq` names).
        const PendingUpdate& front = held.updates.front();
        const AttemptId attempt = front.record.attempt;
        const uint64_t sent = front.seq;
        auto request =
            std::get<wire::JobMasterGateway::Client>(reached).updateTaskExecutionStateRequest();
        request.setEpoch(epoch);
        fillAttempt(request.initState(), front.record);
        return leaders_.deadline()
            .send(kj::mv(request))
            .then(
                [this, job, attempt, sent, retry, settled](
                    capnp::Response<wire::JobMasterGateway::UpdateTaskExecutionStateResults>
                        response) -> kj::Promise<void> {
                  if (!response.hasFailure()) {
                    link(job).updateBackoff.reset();
                    return settled(sent);
                  }
                  auto failure = rpc::CallFailure::from(response.getFailure());
                  switch (reactionTo(failure)) {
                    case Reaction::kUnknown:
                      spdlog::warn("task executor {}: the JobMaster of job {} does not know "
                                   "attempt {}: cancelling it ({})",
                                   options_.resourceId.toHex(), job.toHex(), attempt.toHex(),
                                   failure.describe());
                      if (runner_ != nullptr && attempts_.count(attempt) != 0) {
                        runner_->cancel(attempt);
                      }
                      return settled(sent);
                    case Reaction::kGiveUp:
                      spdlog::error("task executor {}: the JobMaster of job {} refused the "
                                    "update of attempt {}: {}",
                                    options_.resourceId.toHex(), job.toHex(), attempt.toHex(),
                                    failure.describe());
                      return settled(sent);
                    case Reaction::kRetry:
                    case Reaction::kNotRegistered:
                      break;
                  }
                  return retry(failure.retryAfter, failure.describe());
                },
                [this, job, sent, retry, settled](kj::Exception&& exception) -> kj::Promise<void> {
                  if (reactionTo(exception) == Reaction::kGiveUp) {
                    spdlog::error("task executor {}: an attempt update of job {} failed: {}",
                                  options_.resourceId.toHex(), job.toHex(),
                                  describeException(exception));
                    return settled(sent);
                  }
                  return retry(Duration(0), describeException(exception));
                });
      });
}

void TaskExecutor::answerJobMasterHeartbeat(const JobId& job, uint64_t epoch) {
  if (!epochStands(epoch)) return;  // Registering with that leader first.
  tasks_.add(jobMaster(job, epoch).then([this, job, epoch](
                                            rpc::Attempt<wire::JobMasterGateway::Client> reached)
                                            -> kj::Promise<void> {
    if (auto* failure = std::get_if<rpc::CallFailure>(&reached)) {
      spdlog::debug("task executor {}: cannot answer the heartbeat of job {}: {}",
                    options_.resourceId.toHex(), job.toHex(), failure->describe());
      forgetIfIdle(job);
      return kj::READY_NOW;
    }
    // Every attempt of the job held here: running, or ended with its update still on the way.
    std::set<AttemptId> held;
    for (const auto& [id, record] : attempts_) {
      if (record.job == job) held.insert(id);
    }
    auto found = jobs_.find(job);
    if (found != jobs_.end()) {
      for (const PendingUpdate& pending : found->second->updates) {
        held.insert(pending.record.attempt);
      }
    }
    auto request = std::get<wire::JobMasterGateway::Client>(reached).heartbeatRequest();
    request.setEpoch(epoch);
    wire::setWireId(request.initResourceId(), options_.resourceId);
    auto list = request.initPayload().initDeployedAttempts(static_cast<unsigned>(held.size()));
    unsigned i = 0;
    for (const AttemptId& attempt : held) wire::setWireId(list[i++], attempt);
    return leaders_.deadline()
        .send(kj::mv(request))
        .then(
            [this, job, epoch](capnp::Response<wire::JobMasterGateway::HeartbeatResults> response) {
              if (!response.hasFailure()) return;
              auto failure = rpc::CallFailure::from(response.getFailure());
              if (failure.which == wire::Failure::NOT_REGISTERED && epochStands(epoch)) {
                // The JobMaster does not hold this worker's slots: offer them again.
                for (SlotState& slot : slots_) {
                  if (slot.job == job) slot.acceptedEpoch = 0;
                }
                scheduleOffer(job);
                return;
              }
              spdlog::debug("task executor {}: the JobMaster heartbeat of job {} was refused: {}",
                            options_.resourceId.toHex(), job.toHex(), failure.describe());
            },
            [this, job](kj::Exception&& exception) {
              auto found = jobs_.find(job);
              if (found != jobs_.end()) found->second->gateway = nullptr;
              spdlog::debug("task executor {}: the JobMaster heartbeat of job {} failed: {}",
                            options_.resourceId.toHex(), job.toHex(),
                            describeException(exception));
            });
  }));
}

kj::Promise<void> TaskExecutor::flushUpdates(Duration bound) {
  const bool pending = std::any_of(jobs_.begin(), jobs_.end(), [](const auto& entry) {
    return !entry.second->updates.empty();
  });
  if (!pending) return kj::READY_NOW;
  auto paf = kj::newPromiseAndFulfiller<void>();
  flushed_.push_back(kj::mv(paf.fulfiller));
  return kj::mv(paf.promise).exclusiveJoin(timer_.afterDelay(bound.count() * kj::MILLISECONDS));
}

kj::Promise<void> TaskExecutor::disconnectJobMasters(const std::string& cause) {
  if (runner_ == nullptr || !epochStands(registeredEpoch_)) return kj::READY_NOW;
  const uint64_t epoch = registeredEpoch_;
  std::set<JobId> jobs;
  for (const SlotState& slot : slots_) {
    if (slot.allocation && slot.job) jobs.insert(*slot.job);
  }
  if (jobs.empty()) return kj::READY_NOW;
  kj::Vector<kj::Promise<void>> calls;
  for (const JobId& job : jobs) {
    calls.add(
        jobMaster(job, epoch)
            .then([this, job, epoch, cause](
                      rpc::Attempt<wire::JobMasterGateway::Client> reached) -> kj::Promise<void> {
              if (auto* failure = std::get_if<rpc::CallFailure>(&reached)) {
                spdlog::info(
                    "task executor {}: not telling the JobMaster of job {} that the "
                    "worker leaves: {}",
                    options_.resourceId.toHex(), job.toHex(), failure->describe());
                return kj::READY_NOW;
              }
              auto request = std::get<wire::JobMasterGateway::Client>(reached).disconnectRequest();
              request.setEpoch(epoch);
              wire::setWireId(request.initResourceId(), options_.resourceId);
              request.setCause(cause);
              return leaders_.deadline()
                  .send(kj::mv(request))
                  .then([this,
                         job](capnp::Response<wire::JobMasterGateway::DisconnectResults> response) {
                    if (!response.hasFailure()) return;
                    spdlog::info(
                        "task executor {}: the JobMaster of job {} refused the "
                        "disconnect: {}",
                        options_.resourceId.toHex(), job.toHex(),
                        rpc::CallFailure::from(response.getFailure()).describe());
                  });
            })
            .catch_([this, job](kj::Exception&& exception) {
              spdlog::warn(
                  "task executor {}: disconnecting from the JobMaster of job {} failed: "
                  "{}",
                  options_.resourceId.toHex(), job.toHex(), describeException(exception));
            }));
  }
  const Duration bound = leaders_.deadline().timeout();
  return kj::joinPromises(calls.releaseAsArray())
      .exclusiveJoin(timer_.afterDelay(bound.count() * kj::MILLISECONDS).then([this, bound] {
        spdlog::warn(
            "task executor {}: the JobMasters did not answer the disconnect within {} "
            "ms; leaving anyway",
            options_.resourceId.toHex(), bound.count());
      }));
}

kj::Promise<void> TaskExecutor::disconnect(const std::string& cause) {
  if (stopping_) return kj::READY_NOW;
  // The JobMasters first, while the registration still stands to reach them.
  kj::Promise<void> jobMasters = disconnectJobMasters(cause);
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
                spdlog::warn("task executor {}: disconnect failed: {}",
                             options_.resourceId.toHex(), describeException(exception));
              })
          .then(kj::mv(logged));
    }
    logged();
    return kj::READY_NOW;
  });
}

}  // namespace regent::taskexecutor

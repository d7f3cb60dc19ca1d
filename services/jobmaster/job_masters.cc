// The JobMasters of one term: the RPC glue around each job's ExecutionGraph (the
// JobMasterGateway workers call, submitTask / cancelTask / freeSlot / heartbeat calls to workers,
// restart and heartbeat timers, event lines, counters).
#include "services/jobmaster/job_masters.h"

#include <capnp/message.h>
#include <kj/debug.h>
#include <kj/vector.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "common/backoff.h"
#include "common/event_sink.h"
#include "common/task_set_error_logger.h"
#include "common/units.h"
#include "common/utf8.h"
#include "rpc/call_deadline.h"
#include "rpc/failure.h"
#include "rpc/wire_ids.h"
#include "services/jobmaster/execution_graph.h"

namespace regent::jobmaster {

namespace {

// The longest failure message kept from a worker's report (bytes of UTF-8).
constexpr size_t kMaxFailureMessageBytes = 4096;

using wire::ExecutionState;

Profile profileOf(wire::ResourceProfile::Reader profile) {
  return Profile{profile.getCpuMillis(), profile.getMemoryBytes()};
}

bool sameNeeds(const std::vector<Requirement>& a, const std::vector<Requirement>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].profile != b[i].profile || a[i].count != b[i].count) return false;
  }
  return true;
}

std::string describeException(const kj::Exception& exception) {
  return exception.getDescription().cStr();
}

// The first delay before a failed progress put is tried again; later ones grow (with jitter,
// common/backoff.h) up to heartbeat.interval.
constexpr Duration kFirstPutRetryDelay{100};

// A live attempt missing from this many heartbeats of its worker in a row fails.
constexpr uint32_t kHeartbeatsMissedToFail = 2;

// `state` as an AttemptReport (its vertex views `state`'s text; the failure message is a bounded
// copy).
AttemptReport reportOf(wire::TaskExecutionState::Reader state) {
  const auto vertex = state.getVertexName();
  const auto failure = state.getFailureMessage();
  AttemptReport report;
  report.attempt = wire::idFromWire<AttemptId>(state.getAttemptId());
  report.vertex = {vertex.cStr(), vertex.size()};
  report.subtaskIndex = state.getSubtaskIndex();
  report.state = state.getState();
  report.pid = state.getPid();
  report.exitCode = state.getExitCode();
  report.termSignal = state.getTermSignal();
  // A worker's message is kept per failed subtask and in the JobResult: bounded, so that one
  // report cannot make the result too large to store.
  report.failureMessage =
      truncateUtf8(std::string_view(failure.cStr(), failure.size()), kMaxFailureMessageBytes);
  const auto output = state.getOutputProblem();
  report.outputProblem =
      truncateUtf8(std::string_view(output.cStr(), output.size()), kMaxFailureMessageBytes);
  report.startedAtMs = state.getStartedAtMs();
  report.endedAtMs = state.getEndedAtMs();
  report.workerFault = state.getWorkerFault();
  return report;
}

}  // namespace

void JobMasterCounters::observeSubmitToRunning(double seconds) {
  for (size_t i = 0; i < kSubmitToRunningBounds.size(); ++i) {
    if (seconds <= kSubmitToRunningBounds[i]) ++submitToRunningBuckets[i];
  }
  submitToRunningSum += seconds;
  ++submitToRunningCount;
}

// ---- One job's JobMaster ----------------------------------------------------------------------

// Loop-thread only. Owned by JobMasters; destroying it cancels its timers and calls, and its
// served gateway answers DISCONNECTED from then on.
class JobMasters::JobMaster final {
 public:
  // With `recovered` (an earlier term's progress record) the job starts from it and reconciles
  // (ExecutionGraph::recover).
  JobMaster(JobMasters& owner, JobId job, wire::JobGraph::Reader graph,
            kj::Maybe<wire::JobProgress::Reader> recovered);
  ~JobMaster() noexcept;

  // Serves the gateway, registers with the ResourceManager, starts heartbeats and, for a
  // reconciling job, the reconciliation timer; the first declaration and the first state report
  // follow from the event loop (never inside start()).
  void start();
  // A gateway of this JobMaster for the connection whose worker identity is `caller`, behind
  // the gate of worker calls (resourcemanager::guardWorkerCalls), served by the term.
  wire::JobMasterGateway::Client serveFor(kj::Own<resourcemanager::WorkerBinding> caller);
  bool releasing() const { return releasing_; }
  const ExecutionGraph& execution() const { return execution_; }
  MonoTime monoNow() const { return owner_.monoNow(); }

  // JobRunner::release: resolves once attempts ended (or the bound passed), slots are freed and
  // the JobMaster is disconnected from the ResourceManager. The caller then destroys it.
  kj::Promise<void> release(const std::string& cause);

  // Gateway handlers. `caller` is the connection's worker identity, bound (the gate admitted the
  // call): the worker the call speaks for.
  void offerSlots(const resourcemanager::WorkerBinding& caller,
                  wire::JobMasterGateway::OfferSlotsParams::Reader params,
                  wire::JobMasterGateway::OfferSlotsResults::Builder results);
  // Resolves at once, or for a terminal state once a progress put that includes it settled
  // (failing: `unavailable` in `results`, which must stay valid until then).
  kj::Promise<void> updateTaskExecutionState(
      const resourcemanager::WorkerBinding& caller, wire::TaskExecutionState::Reader state,
      wire::JobMasterGateway::UpdateTaskExecutionStateResults::Builder results);
  void heartbeat(const ResourceId& worker, wire::JobMasterGateway::HeartbeatParams::Reader params,
                 wire::JobMasterGateway::HeartbeatResults::Builder results);
  void disconnect(const ResourceId& worker, const std::string& cause,
                  wire::JobMasterGateway::DisconnectResults::Builder results);

 private:
  struct Worker {
    wire::TaskExecutorGateway::Client client;
    MonoTime lastHeard;
    // Which offer handed over `client`: a call that lost its connection takes the worker away
    // only while no later offer (a new connection) replaced the client it went through.
    uint64_t link = 0;
  };

  int64_t nowMs() const { return owner_.wallNow(); }
  void queueSettle();
  // Applies what the ExecutionGraph decided: deployments, surplus slots, the declaration, the
  // restart timer, the job's state (last: the listener may call back into the runner).
  void settle();
  void deploy(const Deployment& deployment);
  void deployFailed(const Deployment& deployment, const std::string& message,
                    FailureCause cause = FailureCause::kAttempt);
  void cancelOnWorker(wire::TaskExecutorGateway::Client client, const AttemptId& attempt,
                      const ResourceId& worker, std::function<void()> onFailure);
  kj::Promise<void> freeOnWorker(const HeldSlot& slot, const std::string& cause);
  void declare();
  void armRestartTimer();
  void reportState();
  void loseWorker(const ResourceId& worker, const std::string& message);
  // Event lines and counters for the attempts' changes since the last call.
  void drainTransitions();
  // During release: fulfils the wait once no attempt is live.
  void checkDrained();
  kj::Promise<void> heartbeatLoop();
  // Sends heartbeats to the job's workers and loses those silent past heartbeat.timeout, unless
  // the round itself is late by more than heartbeat.timeout (this process was paused): then every
  // worker counts as heard now.
  void heartbeatRound();
  void event(const Event& event) const { owner_.events_.emit(event); }

  // ---- The progress record (write-ahead) ----
  // Starts a put of the progress record when it changed since the last stored one, none is in
  // flight, no retry delay runs, and the term and the release allow it.
  void maybePut();
  void putSettled(uint64_t version, const store::StoreResult<void>& result);
  // Resolves true once a put including everything so far succeeded; false when that put failed
  // or the term is over (the caller answers `unavailable`).
  kj::Promise<bool> persisted();
  // Release: no put starts any more; resolves once the one in flight settled. Waiting
  // acknowledgements resolve true (the job is over) and deployments still waiting are dropped.
  kj::Promise<void> closePuts();
  // Deploys the deployments whose version is stored.
  void deployPersisted();

  // ---- Reconciliation ----
  // Ends RECONCILING once every expected attempt is accounted for.
  void checkReconciled();
  void endReconciliation(bool timedOut);
  // The `job reconciled` event line of a recovered job (all counts 0 when it had no expected
  // attempts and so did not reconcile).
  void reportReconciled(const ExecutionGraph::Reconciliation& outcome, bool timedOut);

  JobMasters& owner_;
  const JobId job_;
  const wire::JobGraph::Reader graph_;
  ExecutionGraph execution_;
  // Cleared on destruction: the gateway servers the term keeps answer DISCONNECTED then.
  std::shared_ptr<JobMaster*> link_ = std::make_shared<JobMaster*>(this);
  wire::JobMasterGateway::Client gateway_ = nullptr;  // Set by start().
  std::map<ResourceId, Worker> workers_;
  // Per worker, the live attempts it has (its submitTask was accepted, or it was adopted) with
  // their subtask and the number of its heartbeats in a row that did not list them; at
  // kHeartbeatsMissedToFail the attempt fails. Entries of attempts no longer live are dropped at
  // the worker's next heartbeat, or with the worker.
  struct Unlisted {
    uint32_t subtask = 0;
    uint32_t misses = 0;
  };
  std::map<ResourceId, std::map<AttemptId, Unlisted>> unlisted_;
  RoundGaps rounds_;  // Heartbeat rounds: a late one means this process was paused.
  uint64_t nextLink_ = 0;  // Worker::link of the latest offer.
  std::vector<Requirement> declared_;
  bool declaredOnce_ = false;
  bool declareRetryArmed_ = false;  // A refused declaration is tried again after an interval.
  wire::JobState reportedState_ = wire::JobState::CREATED;
  bool endReported_ = false;
  bool releasing_ = false;
  bool settleQueued_ = false;
  std::optional<MonoTime> restartArmedAt_;
  kj::Maybe<kj::Own<kj::PromiseFulfiller<void>>> drained_;
  // Recovered from a progress record: logs `job reconciled` when reconciliation ends.
  const bool recovered_;
  uint32_t expected_ = 0;  // Expected attempts at recovery.
  // The progress record: the ExecutionGraph's version the last successful put held; one put at
  // a time; a failed put is tried again after putRetry_'s next delay (kFirstPutRetryDelay, then
  // growing with jitter up to heartbeat.interval); a successful put resets it.
  uint64_t persistedVersion_ = 0;
  bool putInFlight_ = false;
  bool putRetryArmed_ = false;
  bool putsFenced_ = false;  // kFenced: the term is over; nothing is written or deployed.
  // kTooLarge: no put can succeed; the job failed, nothing more is written or deployed.
  bool putsTooLarge_ = false;
  bool putsClosed_ = false;  // release() ends: no put starts.
  ExponentialBackoff putRetry_;
  struct PendingDeploy {
    Deployment deployment;
    uint64_t version;  // Deployed once a put of this version succeeded.
  };
  std::vector<PendingDeploy> pendingDeploys_;
  struct PendingAck {
    uint64_t version;
    kj::Own<kj::PromiseFulfiller<bool>> fulfiller;
  };
  std::vector<PendingAck> pendingAcks_;
  kj::Maybe<kj::Own<kj::PromiseFulfiller<void>>> putDrained_;  // closePuts() waits.
  TaskSetErrorLogger errorLogger_{"job master"};
  kj::Maybe<kj::Promise<void>> restartTimer_;  // Reports its failure to errorLogger_.
  kj::TaskSet tasks_{errorLogger_};            // Declared last: cancelled first.
};

// The JobMasterGateway of one JobMaster for one connection (`caller`: its worker identity), as
// the term serves it (fenced there, behind the gate of worker calls). Holds no reference to the
// JobMaster beyond the link it clears when it goes.
class JobMasters::Gateway final : public wire::JobMasterGateway::Server {
 public:
  Gateway(JobId job, std::shared_ptr<JobMaster*> link,
          kj::Own<resourcemanager::WorkerBinding> caller)
      : job_(job), link_(std::move(link)), caller_(kj::mv(caller)) {}

 protected:
  kj::Promise<void> offerSlots(OfferSlotsContext context) override {
    master().offerSlots(*caller_, context.getParams(), context.getResults());
    return kj::READY_NOW;
  }
  kj::Promise<void> updateTaskExecutionState(UpdateTaskExecutionStateContext context) override {
    return master().updateTaskExecutionState(*caller_, context.getParams().getState(),
                                             context.getResults());
  }
  kj::Promise<void> heartbeat(HeartbeatContext context) override {
    master().heartbeat(worker(), context.getParams(), context.getResults());
    return kj::READY_NOW;
  }
  kj::Promise<void> disconnect(DisconnectContext context) override {
    master().disconnect(worker(), context.getParams().getCause().cStr(), context.getResults());
    return kj::READY_NOW;
  }

 private:
  JobMaster& master() {
    if (*link_ == nullptr) {
      kj::throwFatalException(
          KJ_EXCEPTION(DISCONNECTED, "the JobMaster of this job was released", job_.toHex()));
    }
    return **link_;
  }
  ResourceId worker() const { return caller_->bound().resourceId; }

  const JobId job_;
  const std::shared_ptr<JobMaster*> link_;
  kj::Own<resourcemanager::WorkerBinding> caller_;
};

// ---- JobMaster --------------------------------------------------------------------------------

JobMasters::JobMaster::JobMaster(JobMasters& owner, JobId job, wire::JobGraph::Reader graph,
                                 kj::Maybe<wire::JobProgress::Reader> recovered)
    : owner_(owner),
      job_(job),
      graph_(graph),
      execution_(job, graph, RestartStrategy::fromGraph(graph), owner.wallNow()),
      recovered_(recovered != nullptr),
      putRetry_(kFirstPutRetryDelay, owner.options_.heartbeatInterval) {
  KJ_IF_MAYBE (progress, recovered) {
    expected_ = execution_.recover(*progress, owner.wallNow());
  }
}

JobMasters::JobMaster::~JobMaster() noexcept { *link_ = nullptr; }

wire::JobMasterGateway::Client JobMasters::JobMaster::serveFor(
    kj::Own<resourcemanager::WorkerBinding> caller) {
  auto handlers = kj::heap<Gateway>(job_, link_, kj::addRef(*caller));
  return owner_.serve_(resourcemanager::guardWorkerCalls<wire::JobMasterGateway>(
      kj::mv(handlers), kj::mv(caller), owner_.resourceManager_,
      owner_.resourceManager_.identityRefusals()));
}

void JobMasters::JobMaster::start() {
  // The gateway the ResourceManager registers speaks for no worker: workers get their own.
  gateway_ = serveFor(kj::refcounted<resourcemanager::WorkerBinding>("in process"));
  owner_.resourceManager_.registerJobMaster(job_, gateway_);
  rounds_.start(monoNow());
  tasks_.add(heartbeatLoop());
  if (execution_.reconciling()) {
    Event line("job reconciling");
    line.field("job", job_.toHex()).field("expected", expected_);
    event(line);
    tasks_.add(
        owner_.timer_.afterDelay(owner_.options_.reconciliationTimeout.count() * kj::MILLISECONDS)
            .then([this] {
              if (execution_.reconciling() && !releasing_) endReconciliation(true);
            }));
  } else if (recovered_) {
    reportReconciled(ExecutionGraph::Reconciliation{}, false);
  }
  queueSettle();
}

// ---- The progress record ----------------------------------------------------------------------

void JobMasters::JobMaster::maybePut() {
  if (putInFlight_ || putRetryArmed_ || putsFenced_ || putsClosed_ || putsTooLarge_) return;
  const uint64_t version = execution_.version();
  if (version <= persistedVersion_) return;
  capnp::MallocMessageBuilder message;
  auto progress = message.initRoot<wire::JobProgress>();
  execution_.fillProgress(progress, owner_.epoch_, nowMs());
  putInFlight_ = true;
  // put() encodes the record before it returns: the message may go with this scope.
  tasks_.add(
      owner_.progress_.put(progress.asReader())
          .then([this, version](store::StoreResult<void> result) { putSettled(version, result); },
                [this, version](kj::Exception&& exception) {
                  putSettled(version, store::StoreError::unavailable("put failed: " +
                                                                     describeException(exception)));
                }));
}

void JobMasters::JobMaster::putSettled(uint64_t version, const store::StoreResult<void>& result) {
  putInFlight_ = false;
  if (result.ok()) {
    persistedVersion_ = std::max(persistedVersion_, version);
    putRetry_.reset();
  } else if (result.error().code == store::StoreErrorCode::kFenced) {
    if (!putsFenced_) {
      spdlog::warn(
          "job {}: its progress record is fenced ({}); the term is over, nothing more "
          "is deployed",
          job_.toHex(), result.error().message);
    }
    putsFenced_ = true;
    pendingDeploys_.clear();
  } else if (result.error().code == store::StoreErrorCode::kTooLarge) {
    // No put of this record can ever succeed (the store's limit shrank below what the job was
    // admitted with): the job fails now instead of waiting for a put forever.
    if (!putsTooLarge_) {
      spdlog::error("job {}: its progress record cannot be stored: {}; the job fails",
                    job_.toHex(), result.error().message);
    }
    putsTooLarge_ = true;
    pendingDeploys_.clear();
    execution_.failJob("its progress record cannot be stored: " + result.error().message,
                       nowMs());
    queueSettle();
  } else if (!putsClosed_) {
    // kUnavailable is expected to pass; anything else is logged as an error, and tried again
    // the same way: the job deploys and acknowledges nothing until a put succeeds.
    const auto level = result.error().retryable() ? spdlog::level::warn : spdlog::level::err;
    const Duration delay = putRetry_.next();
    spdlog::log(level, "job {}: storing its progress record failed: {}; trying again in {}",
                job_.toHex(), result.error().message, formatDuration(delay));
    putRetryArmed_ = true;
    tasks_.add(owner_.timer_.afterDelay(delay.count() * kj::MILLISECONDS).then([this] {
      putRetryArmed_ = false;
      maybePut();
    }));
  }
  // Acknowledgements the settled put decided: stored, or failed (the worker delivers again).
  const bool stored = result.ok();
  for (auto it = pendingAcks_.begin(); it != pendingAcks_.end();) {
    if (putsFenced_ || putsTooLarge_ || it->version <= version) {
      it->fulfiller->fulfill(stored && it->version <= persistedVersion_);
      it = pendingAcks_.erase(it);
    } else {
      ++it;
    }
  }
  KJ_IF_MAYBE (fulfiller, putDrained_) {
    (*fulfiller)->fulfill();
    putDrained_ = nullptr;
    return;
  }
  deployPersisted();
  maybePut();
  if (execution_.ended() && !endReported_) queueSettle();  // A FAILED end waits for this put.
}

kj::Promise<bool> JobMasters::JobMaster::persisted() {
  if (putsClosed_) return true;
  if (putsFenced_ || putsTooLarge_) return false;
  const uint64_t version = execution_.version();
  if (version <= persistedVersion_) return true;
  auto paf = kj::newPromiseAndFulfiller<bool>();
  pendingAcks_.push_back(PendingAck{version, kj::mv(paf.fulfiller)});
  maybePut();
  return kj::mv(paf.promise);
}

kj::Promise<void> JobMasters::JobMaster::closePuts() {
  putsClosed_ = true;
  pendingDeploys_.clear();
  for (PendingAck& ack : pendingAcks_) ack.fulfiller->fulfill(true);
  pendingAcks_.clear();
  if (!putInFlight_) return kj::READY_NOW;
  auto paf = kj::newPromiseAndFulfiller<void>();
  putDrained_ = kj::mv(paf.fulfiller);
  return kj::mv(paf.promise);
}

void JobMasters::JobMaster::deployPersisted() {
  if (releasing_) return;
  std::vector<Deployment> ready;
  for (auto it = pendingDeploys_.begin(); it != pendingDeploys_.end();) {
    if (it->version <= persistedVersion_) {
      ready.push_back(it->deployment);
      it = pendingDeploys_.erase(it);
    } else {
      ++it;
    }
  }
  for (const Deployment& deployment : ready) {
    // A worker lost meanwhile failed the attempt: it is not sent.
    if (execution_.awaitsDeploy(deployment.subtask, deployment.attempt)) deploy(deployment);
  }
}

// ---- Reconciliation ---------------------------------------------------------------------------

void JobMasters::JobMaster::checkReconciled() {
  if (execution_.reconciling() && execution_.expectedLeft() == 0 && !releasing_) {
    endReconciliation(false);
  }
}

void JobMasters::JobMaster::endReconciliation(bool timedOut) {
  const std::string message =
      "not reported by any worker within jobmaster.reconciliation-timeout (" +
      formatDuration(owner_.options_.reconciliationTimeout) + ") after the failover";
  const ExecutionGraph::Reconciliation outcome =
      execution_.endReconciliation(message, monoNow(), nowMs());
  if (timedOut) ++owner_.counters_.reconciliationTimeouts;
  drainTransitions();
  reportReconciled(outcome, timedOut);
  queueSettle();
}

void JobMasters::JobMaster::reportReconciled(const ExecutionGraph::Reconciliation& outcome,
                                             bool timedOut) {
  Event line("job reconciled");
  line.field("job", job_.toHex())
      .field("adopted", outcome.adopted)
      .field("ended", outcome.ended)
      .field("unreported", outcome.unreported)
      .field("timed_out", timedOut ? "true" : "false");
  event(line);
}

void JobMasters::JobMaster::queueSettle() {
  if (settleQueued_) return;
  settleQueued_ = true;
  tasks_.add(kj::evalLater([this] { settle(); }));
}

void JobMasters::JobMaster::settle() {
  settleQueued_ = false;
  if (releasing_) return;
  execution_.restartDue(monoNow());
  const std::vector<Deployment> deployments = execution_.schedule(nowMs());
  drainTransitions();
  // Write-ahead: each new attempt is deployed once a put holding it succeeded.
  for (const Deployment& deployment : deployments) {
    pendingDeploys_.push_back(PendingDeploy{deployment, execution_.version()});
  }
  maybePut();
  for (const HeldSlot& slot : execution_.takeSurplusSlots()) {
    tasks_.add(freeOnWorker(slot, "job " + job_.toHex() + " needs the slot no more"));
  }
  for (const HeldSlot& slot : execution_.takeFaultedSlots()) {
    owner_.resourceManager_.slotFaulted(
        job_, slot.worker, slot.allocation,
        "worker " + slot.worker.toHex() + " could not start an attempt of job " + job_.toHex() +
            " in the slot");
  }
  for (auto it = workers_.begin(); it != workers_.end();) {
    it = execution_.holdsSlotsOn(it->first) ? std::next(it) : workers_.erase(it);
  }
  // While reconciling no requirement is declared: the ResourceManager keeps the job's reported
  // allocations, and new slots would be refused for attempts whose worker has not come back.
  if (!execution_.reconciling()) declare();
  armRestartTimer();
  reportState();
}

void JobMasters::JobMaster::deploy(const Deployment& deployment) {
  auto worker = workers_.find(deployment.worker);
  if (worker == workers_.end()) {
    deployFailed(deployment, "worker " + deployment.worker.toHex() + " holds no slot of the job");
    return;
  }
  const auto vertex = execution_.vertexReader(execution_.vertexOf(deployment.subtask));
  const uint64_t link = worker->second.link;
  auto request = worker->second.client.submitTaskRequest();
  request.setEpoch(owner_.epoch_);
  auto out = request.initDeployment();
  wire::setWireId(out.initJobId(), job_);
  out.setJobName(graph_.getName());
  wire::setWireId(out.initAttemptId(), deployment.attempt);
  wire::setWireId(out.initAllocationId(), deployment.allocation);
  out.setVertexName(vertex.getName());
  out.setSubtaskIndex(execution_.indexInVertex(deployment.subtask));
  out.setParallelism(vertex.getParallelism());
  out.setAttemptNumber(deployment.attemptNumber);
  out.setCommand(vertex.getCommand());
  out.setResources(vertex.getResources());
  tasks_.add(
      rpc::withDeadline(owner_.timer_, owner_.options_.callTimeout,
                        "TaskExecutorGateway.submitTask", request.send())
          .then(
              [this, deployment](auto response) {
                if (response.hasFailure()) {
                  const auto failure = rpc::CallFailure::from(response.getFailure());
                  // `unavailable`: the worker cannot run tasks now (stopping, or no attempt
                  // directory), whatever the task: it goes elsewhere.
                  deployFailed(deployment,
                               "worker " + deployment.worker.toHex() +
                                   " refused submitTask: " + failure.describe(),
                               failure.which == wire::Failure::UNAVAILABLE
                                   ? FailureCause::kWorker
                                   : FailureCause::kAttempt);
                  return;
                }
                if (execution_.isLive(deployment.subtask, deployment.attempt)) {
                  unlisted_[deployment.worker].emplace(deployment.attempt,
                                                       Unlisted{deployment.subtask, 0});
                }
                ++owner_.counters_.attemptsStarted;
                if (deployment.restart) ++owner_.counters_.attemptsRestarted;
                const auto vertex =
                    execution_.vertexReader(execution_.vertexOf(deployment.subtask));
                Event line("attempt deployed");
                line.field("epoch", owner_.epoch_)
                    .field("job", job_.toHex())
                    .field("vertex", vertex.getName().cStr())
                    .field("subtask", execution_.indexInVertex(deployment.subtask))
                    .field("attempt", deployment.attempt.toHex())
                    .field("attempt_number", deployment.attemptNumber)
                    .field("resource_id", deployment.worker.toHex());
                event(line);
              },
              [this, deployment, link](kj::Exception&& exception) {
                const std::string why = "submitTask to worker " + deployment.worker.toHex() +
                                        " failed: " + describeException(exception);
                auto worker = workers_.find(deployment.worker);
                if (exception.getType() == kj::Exception::Type::DISCONNECTED &&
                    worker != workers_.end() && worker->second.link == link) {
                  // The connection the worker's slots were offered on is gone: none of them can
                  // be deployed into any more. The worker is lost at once, as after
                  // heartbeat.timeout (its live attempts, this one included, fail).
                  loseWorker(deployment.worker,
                             "worker " + deployment.worker.toHex() +
                                 " lost: submitTask failed: " + describeException(exception));
                  return;
                }
                deployFailed(deployment, why);
              }));
}

void JobMasters::JobMaster::deployFailed(const Deployment& deployment, const std::string& message,
                                         FailureCause cause) {
  execution_.deployFailed(deployment.subtask, deployment.attempt, message, monoNow(), nowMs(),
                          cause);
  drainTransitions();
  checkDrained();
  queueSettle();
}

void JobMasters::JobMaster::cancelOnWorker(wire::TaskExecutorGateway::Client client,
                                           const AttemptId& attempt, const ResourceId& worker,
                                           std::function<void()> onFailure) {
  auto request = client.cancelTaskRequest();
  request.setEpoch(owner_.epoch_);
  wire::setWireId(request.initAttemptId(), attempt);
  tasks_.add(rpc::withDeadline(owner_.timer_, owner_.options_.callTimeout,
                               "TaskExecutorGateway.cancelTask", request.send())
                 .then(
                     [attempt, worker, onFailure](auto response) {
                       if (!response.hasFailure()) return;
                       spdlog::info("cancelTask of attempt {} on worker {}: {}", attempt.toHex(),
                                    worker.toHex(), response.getFailure().getMessage().cStr());
                       if (onFailure) onFailure();
                     },
                     [attempt, worker, onFailure](kj::Exception&& exception) {
                       spdlog::warn("cancelTask of attempt {} on worker {} failed: {}",
                                    attempt.toHex(), worker.toHex(), describeException(exception));
                       if (onFailure) onFailure();
                     }));
}

kj::Promise<void> JobMasters::JobMaster::freeOnWorker(const HeldSlot& slot,
                                                      const std::string& cause) {
  auto worker = workers_.find(slot.worker);
  if (worker == workers_.end()) return kj::READY_NOW;
  auto request = worker->second.client.freeSlotRequest();
  request.setEpoch(owner_.epoch_);
  wire::setWireId(request.initAllocationId(), slot.allocation);
  request.setCause(cause);
  return rpc::withDeadline(owner_.timer_, owner_.options_.callTimeout,
                           "TaskExecutorGateway.freeSlot", request.send())
      .then(
          [slot](auto response) {
            if (response.hasFailure()) {
              spdlog::warn("freeSlot of allocation {} on worker {} refused: {}",
                           slot.allocation.toHex(), slot.worker.toHex(),
                           response.getFailure().getMessage().cStr());
            }
          },
          [slot](kj::Exception&& exception) {
            spdlog::warn("freeSlot of allocation {} on worker {} failed: {}",
                         slot.allocation.toHex(), slot.worker.toHex(),
                         describeException(exception));
          });
}

void JobMasters::JobMaster::declare() {
  const std::vector<Requirement> needs = execution_.requirements();
  if (declaredOnce_ && sameNeeds(needs, declared_)) return;
  declared_ = needs;
  declaredOnce_ = true;
  if (auto failure = owner_.resourceManager_.declareRequiredResources(job_, needs)) {
    spdlog::warn(
        "job {}: declaring its required slots failed: {}; declaring again in {}", job_.toHex(),
        failure->field.empty() ? failure->message : failure->field + ": " + failure->message,
        formatDuration(owner_.options_.heartbeatInterval));
    // Refused (no registered worker fits yet, e.g. right after a failover): the ResourceManager
    // holds no requirement for the job, so declare again later even if the needs stay the same.
    declaredOnce_ = false;
    if (!declareRetryArmed_) {
      declareRetryArmed_ = true;
      tasks_.add(owner_.timer_
                     .afterDelay(owner_.options_.heartbeatInterval.count() * kj::MILLISECONDS)
                     .then([this] {
                       declareRetryArmed_ = false;
                       queueSettle();
                     }));
    }
  }
}

void JobMasters::JobMaster::armRestartTimer() {
  const std::optional<MonoTime> next = execution_.nextRestartAt();
  if (next == restartArmedAt_) return;
  restartArmedAt_ = next;
  restartTimer_ = nullptr;
  if (!next) return;
  const auto delay = std::chrono::duration_cast<std::chrono::nanoseconds>(*next - monoNow());
  restartTimer_ = owner_.timer_.afterDelay(std::max<int64_t>(0, delay.count()) * kj::NANOSECONDS)
                      .then([this] {
                        // Not settle() here: it may arm this timer again, destroying the
                        // promise whose continuation runs now.
                        restartArmedAt_.reset();
                        queueSettle();
                      })
                      .eagerlyEvaluate([this](kj::Exception&& exception) {
                        errorLogger_.taskFailed(kj::mv(exception));
                      });
}

void JobMasters::JobMaster::reportState() {
  dispatcher::JobRunnerListener* listener = owner_.listener_;
  const wire::JobState state = execution_.state();
  if (execution_.ended()) {
    if (endReported_) return;
    const dispatcher::JobEnd end = *execution_.end();
    if (end.state == wire::JobState::FAILED && !putsFenced_ && !putsTooLarge_ &&
        execution_.version() > persistedVersion_) {
      // Told once a put saying the strategy gave up succeeded (putSettled settles again): the
      // Dispatcher stores the result next, and a leader dying before the record says so would
      // leave the next one to run the job again.
      maybePut();
      return;
    }
    endReported_ = true;
    if (end.state == wire::JobState::FAILED) {
      Event line("job state");
      line.field("epoch", owner_.epoch_)
          .field("job", job_.toHex())
          .field("state", "FAILING")
          .field("restarts", end.restarts);
      event(line);
      if (listener) listener->jobStateChanged(job_, wire::JobState::FAILING, nowMs());
    }
    if (listener) listener->jobEnded(job_, end);
    return;
  }
  if (state == reportedState_) return;
  reportedState_ = state;
  Event line("job state");
  line.field("epoch", owner_.epoch_)
      .field("job", job_.toHex())
      .field("state", wire::enumNameUpper(state))
      .field("restarts", execution_.restarts());
  event(line);
  if (listener) listener->jobStateChanged(job_, state, nowMs());
}

void JobMasters::JobMaster::drainTransitions() {
  for (const Transition& transition : execution_.takeTransitions()) {
    switch (transition.state) {
      case ExecutionState::RUNNING:
      case ExecutionState::FINISHED:
      case ExecutionState::FAILED:
      case ExecutionState::CANCELED:
        break;
      default:
        continue;
    }
    if (transition.state == ExecutionState::FAILED) ++owner_.counters_.attemptsFailed;
    const auto vertex = execution_.vertexReader(execution_.vertexOf(transition.subtask));
    Event line("attempt state");
    line.field("epoch", owner_.epoch_)
        .field("job", job_.toHex())
        .field("vertex", vertex.getName().cStr())
        .field("subtask", execution_.indexInVertex(transition.subtask))
        .field("attempt", transition.attempt.toHex())
        .field("state", wire::enumNameUpper(transition.state))
        .field("exit_code", transition.exitCode)
        .field("signal", transition.termSignal);
    if (transition.state == ExecutionState::FAILED) {
      line.quotedField("message", execution_.failureMessage(transition.subtask));
    }
    event(line);
  }
}

void JobMasters::JobMaster::checkDrained() {
  KJ_IF_MAYBE (fulfiller, drained_) {
    if (execution_.liveAttempts().empty()) {
      (*fulfiller)->fulfill();
      drained_ = nullptr;
    }
  }
}

void JobMasters::JobMaster::loseWorker(const ResourceId& worker, const std::string& message) {
  execution_.workerLost(worker, message, monoNow(), nowMs());
  workers_.erase(worker);
  unlisted_.erase(worker);
  drainTransitions();
  checkDrained();
  queueSettle();
}

kj::Promise<void> JobMasters::JobMaster::heartbeatLoop() {
  return owner_.timer_.afterDelay(owner_.options_.heartbeatInterval.count() * kj::MILLISECONDS)
      .then([this] {
        heartbeatRound();
        return heartbeatLoop();
      });
}

void JobMasters::JobMaster::heartbeatRound() {
  const MonoTime now = monoNow();
  if (rounds_.lateRound(now, owner_.options_.heartbeatTimeout)) {
    // This round comes long after the last one: the process was paused (SIGSTOP) or the loop
    // blocked. The workers' silence meanwhile is this JobMaster's own: declaring them lost would
    // tell them to cancel the job's attempts (a worker that has not seen the next term yet would
    // obey), so each worker's heartbeat.timeout starts over now.
    spdlog::warn("job {}: heartbeat rounds were late by {} ms (paused?); not counting it as "
                 "silence of its {} workers",
                 job_.toHex(), (rounds_.lastGap() - owner_.options_.heartbeatInterval).count(),
                 workers_.size());
    for (auto& [id, worker] : workers_) worker.lastHeard = now;
  }
  std::vector<ResourceId> silent;
  for (auto& [id, worker] : workers_) {
    if (now - worker.lastHeard > owner_.options_.heartbeatTimeout) {
      silent.push_back(id);
      continue;
    }
    auto request = worker.client.heartbeatRequest();
    request.setEpoch(owner_.epoch_);
    wire::setWireId(request.initSender().initJobMaster(), job_);
    tasks_.add(rpc::withDeadline(owner_.timer_, owner_.options_.callTimeout,
                                 "TaskExecutorGateway.heartbeat", request.send())
                   .then([](auto) {},
                         [id = id](kj::Exception&& exception) {
                           spdlog::debug("heartbeat to worker {} failed: {}", id.toHex(),
                                         describeException(exception));
                         }));
  }
  for (const ResourceId& id : silent) {
    const std::string message = "worker " + id.toHex() + " lost: no heartbeat for " +
                                formatDuration(owner_.options_.heartbeatTimeout);
    // Told, best effort: a worker that was only paused reads this once it wakes up, cancels the
    // job's attempts and frees its slots. No JobMaster heartbeat reaches it any more, so while
    // its registration with the ResourceManager stands it would not learn otherwise.
    auto request = workers_.at(id).client.disconnectRequest();
    request.setEpoch(owner_.epoch_);
    wire::setWireId(request.initSender().initJobMaster(), job_);
    request.setCause(message);
    tasks_.add(rpc::withDeadline(owner_.timer_, owner_.options_.callTimeout,
                                 "TaskExecutorGateway.disconnect", request.send())
                   .then([](auto) {},
                         [id](kj::Exception&& exception) {
                           spdlog::debug("disconnect of lost worker {} failed: {}", id.toHex(),
                                         describeException(exception));
                         }));
    loseWorker(id, message);
  }
}

void JobMasters::JobMaster::offerSlots(const resourcemanager::WorkerBinding& caller,
                                       wire::JobMasterGateway::OfferSlotsParams::Reader params,
                                       wire::JobMasterGateway::OfferSlotsResults::Builder results) {
  const ResourceId worker = caller.bound().resourceId;
  if (!owner_.resourceManager_.workerAddress(worker)) {
    rpc::failures::notRegistered(
        results.initFailure(), worker,
        "worker " + worker.toHex() + " is not registered with the ResourceManager");
    return;
  }
  const auto slots = params.getSlots();
  // A worker offers only slots it holds for this job: the ResourceManager allocated them to it
  // (or it reported them after a failover), and no other worker's slot of the job is named.
  for (auto slot : slots) {
    const auto allocation = wire::idFromWire<AllocationId>(slot.getAllocationId());
    const auto heldOn = execution_.workerOfSlot(allocation);
    if (owner_.resourceManager_.holdsAllocation(worker, allocation, job_) &&
        (!heldOn || *heldOn == worker)) {
      continue;
    }
    owner_.resourceManager_.identityRefusals().refuse(
        caller, "JobMasterGateway.offerSlots", heldOn ? heldOn->toHex() : std::string(),
        "worker " + worker.toHex() + " holds no allocation " + allocation.toHex() + " of job " +
            job_.toHex() + (heldOn ? "; the job holds it on worker " + heldOn->toHex() : ""),
        results.initFailure());
    return;
  }
  std::vector<OfferedSlot> offers;
  offers.reserve(slots.size());
  for (auto slot : slots) {
    offers.push_back(OfferedSlot{wire::idFromWire<AllocationId>(slot.getAllocationId()),
                                 profileOf(slot.getProfile())});
  }
  // Adoption: an offered attempt that is the expected attempt of its subtask (a recovered job
  // reconciling) keeps running under this JobMaster, in the slot it runs in.
  struct Adopted {
    uint32_t subtask;
    AttemptReport report;
  };
  std::vector<Adopted> adopted;
  std::vector<AttemptId> adoptedIds;
  if (!releasing_ && execution_.reconciling()) {
    // Live attempts first: each takes the slot it runs in, which an attempt that ended in the
    // same slot must not hold it against.
    for (const bool ended : {false, true}) {
      for (unsigned i = 0; i < slots.size(); ++i) {
        for (auto running : slots[i].getRunningAttempts()) {
          if (isTerminal(running.getState()) != ended) continue;
          AttemptReport report = reportOf(running);
          if (auto index = execution_.adopt(worker, offers[i], report, nowMs())) {
            adoptedIds.push_back(report.attempt);
            adopted.push_back(Adopted{*index, std::move(report)});
          }
        }
      }
    }
  }
  std::vector<bool> accepted(offers.size(), false);
  if (!releasing_) accepted = execution_.offerSlots(worker, offers);
  size_t count = 0;
  for (bool yes : accepted) count += yes ? 1 : 0;
  auto out = results.initAccepted(static_cast<unsigned>(count));
  unsigned next = 0;
  for (size_t i = 0; i < offers.size(); ++i) {
    if (accepted[i]) wire::setWireId(out[next++], offers[i].allocation);
  }
  auto client = params.getTaskExecutor();
  if (count > 0) workers_.insert_or_assign(worker, Worker{client, monoNow(), ++nextLink_});
  for (Adopted& entry : adopted) {
    ++owner_.counters_.attemptsAdopted;
    if (!isTerminal(entry.report.state)) {
      unlisted_[worker].emplace(entry.report.attempt, Unlisted{entry.subtask, 0});
    }
    Event line("attempt adopted");
    line.field("job", job_.toHex())
        .field("vertex", std::string(entry.report.vertex))
        .field("subtask", entry.report.subtaskIndex)
        .field("attempt", entry.report.attempt.toHex())
        .field("attempt_number", execution_.attemptNumberOf(entry.subtask))
        .field("worker", worker.toHex())
        .field("pid", entry.report.pid);
    event(line);
    // An attempt that ended while no leader listened: its end counts now (its worker delivers
    // the terminal update after the offer; that one is then a repeat).
    if (isTerminal(entry.report.state)) {
      execution_.update(entry.report, monoNow(), nowMs());
    }
  }
  // Attempts in the offered slots that this JobMaster does not follow as live: unknown to it,
  // superseded by a later attempt, of a finished subtask, failed at the end of reconciliation,
  // or failed when it lost the worker (a worker paused past heartbeat.timeout offers its slots
  // again once it registers again). They stop. Attempts that ended need no cancelling.
  for (auto slot : slots) {
    for (auto running : slot.getRunningAttempts()) {
      const auto attempt = wire::idFromWire<AttemptId>(running.getAttemptId());
      const auto vertex = running.getVertexName();
      if (isTerminal(running.getState())) continue;
      if (std::find(adoptedIds.begin(), adoptedIds.end(), attempt) != adoptedIds.end()) continue;
      if (execution_.isLiveAttempt({vertex.cStr(), vertex.size()}, running.getSubtaskIndex(),
                                   attempt)) {
        continue;
      }
      spdlog::info("job {}: cancelling attempt {} offered running in allocation {} of worker {}",
                   job_.toHex(), attempt.toHex(),
                   wire::idFromWire<AllocationId>(slot.getAllocationId()).toHex(), worker.toHex());
      cancelOnWorker(client, attempt, worker, nullptr);
    }
  }
  drainTransitions();
  checkReconciled();
  if (count > 0) queueSettle();
}

kj::Promise<void> JobMasters::JobMaster::updateTaskExecutionState(
    const resourcemanager::WorkerBinding& caller, wire::TaskExecutionState::Reader state,
    wire::JobMasterGateway::UpdateTaskExecutionStateResults::Builder results) {
  const AttemptReport report = reportOf(state);
  const AttemptId attempt = report.attempt;
  const bool otherJob = state.hasJobId() && wire::idFromWire<JobId>(state.getJobId()) != job_;
  // Only the worker an attempt runs on reports it. An expected attempt of a recovered job that
  // no worker offered yet is reported by a worker holding the allocation it names for the job.
  const ResourceId worker = caller.bound().resourceId;
  const auto runsOn = otherJob ? std::nullopt
                               : execution_.workerOfAttempt(report.vertex, report.subtaskIndex,
                                                            attempt);
  if (runsOn && *runsOn != worker &&
      !(runsOn->isZero() && state.hasAllocationId() &&
        owner_.resourceManager_.holdsAllocation(
            worker, wire::idFromWire<AllocationId>(state.getAllocationId()), job_))) {
    owner_.resourceManager_.identityRefusals().refuse(
        caller, "JobMasterGateway.updateTaskExecutionState",
        runsOn->isZero() ? std::string() : runsOn->toHex(),
        "attempt " + attempt.toHex() + " of job " + job_.toHex() +
            (runsOn->isZero() ? " was offered by no worker yet, and worker " + worker.toHex() +
                                    " holds no allocation of the job it names"
                              : " runs on worker " + runsOn->toHex() + ", not on " +
                                    worker.toHex()),
        results.initFailure());
    return kj::READY_NOW;
  }
  const ExecutionGraph::Update outcome =
      otherJob ? ExecutionGraph::Update::kUnknown : execution_.update(report, monoNow(), nowMs());
  if (outcome == ExecutionGraph::Update::kUnknown) {
    rpc::failures::notFound(
        results.initFailure(), attempt,
        "attempt " + attempt.toHex() + " is not known to the JobMaster of job " + job_.toHex());
    return kj::READY_NOW;
  }
  if (outcome == ExecutionGraph::Update::kApplied) {
    if (execution_.takeFirstRunning() && graph_.getSubmittedAtMs() >= owner_.termStartedAtMs_) {
      const int64_t submittedAtMs = graph_.getSubmittedAtMs();
      owner_.counters_.observeSubmitToRunning(
          static_cast<double>(std::max<int64_t>(0, nowMs() - submittedAtMs)) / 1000.0);
    }
    drainTransitions();
    checkDrained();
    checkReconciled();
    queueSettle();
  }
  if (!isTerminal(report.state)) return kj::READY_NOW;
  // A terminal state is acknowledged once the progress record holds it (a repeat too: the first
  // delivery's put may still be in flight, or have failed).
  return persisted().then([this, results, attempt](bool stored) mutable {
    if (stored) return;
    rpc::failures::unavailable(results.initFailure(), 0,
                               "the progress of job " + job_.toHex() +
                                   " could not be stored; deliver the state of attempt " +
                                   attempt.toHex() + " again");
  });
}

void JobMasters::JobMaster::heartbeat(const ResourceId& worker,
                                      wire::JobMasterGateway::HeartbeatParams::Reader params,
                                      wire::JobMasterGateway::HeartbeatResults::Builder results) {
  auto known = workers_.find(worker);
  if (known == workers_.end()) {
    rpc::failures::notRegistered(results.initFailure(), worker,
                                 "worker " + worker.toHex() + " holds no slot of job " +
                                     job_.toHex() + " known to its JobMaster");
    return;
  }
  known->second.lastHeard = monoNow();
  const auto listed = params.getPayload().getDeployedAttempts();
  std::vector<AttemptId> attempts;
  attempts.reserve(listed.size());
  for (auto attempt : listed) attempts.push_back(wire::idFromWire<AttemptId>(attempt));
  // Attempts the worker holds for this job that are no subtask's latest attempt (a submitTask
  // that timed out here but reached the worker, say) are stopped.
  for (const AttemptId& attempt : execution_.unknownAmong(attempts)) {
    spdlog::info(
        "job {}: cancelling attempt {} that worker {} runs and the JobMaster does not know",
        job_.toHex(), attempt.toHex(), worker.toHex());
    cancelOnWorker(known->second.client, attempt, worker, nullptr);
  }
  // Live attempts the worker has (submitTask accepted, or adopted) and did not list in two
  // heartbeats in a row fail: the worker lists the attempts it runs and those whose terminal
  // update it still holds, and a terminal update is applied here on receipt, so the worker lost
  // the attempt's end (its update buffer overflowed, say). One miss is allowed: a heartbeat may
  // overtake the submitTask's answer. Attempts whose submitTask is in flight are not counted.
  auto tracked = unlisted_.find(worker);
  if (tracked == unlisted_.end()) return;
  std::sort(attempts.begin(), attempts.end());
  std::vector<std::pair<AttemptId, uint32_t>> lost;  // (attempt, subtask)
  auto& held = tracked->second;
  for (auto it = held.begin(); it != held.end();) {
    const AttemptId& attempt = it->first;
    Unlisted& entry = it->second;
    if (!execution_.isLive(entry.subtask, attempt)) {
      it = held.erase(it);  // Ended, or failed otherwise: nothing to watch.
      continue;
    }
    entry.misses =
        std::binary_search(attempts.begin(), attempts.end(), attempt) ? 0 : entry.misses + 1;
    if (entry.misses >= kHeartbeatsMissedToFail) {
      lost.emplace_back(attempt, entry.subtask);
      it = held.erase(it);
      continue;
    }
    ++it;
  }
  if (held.empty()) unlisted_.erase(tracked);
  if (lost.empty()) return;
  for (const auto& [attempt, subtask] : lost) {
    execution_.attemptLost(subtask, attempt,
                           "worker " + worker.toHex() +
                               " no longer reports the attempt in its heartbeats (missing from " +
                               std::to_string(kHeartbeatsMissedToFail) + " in a row)",
                           monoNow(), nowMs());
  }
  drainTransitions();
  checkDrained();
  queueSettle();
}

void JobMasters::JobMaster::disconnect(const ResourceId& worker, const std::string& cause,
                                       wire::JobMasterGateway::DisconnectResults::Builder results) {
  if (workers_.count(worker) == 0) {
    rpc::failures::notRegistered(results.initFailure(), worker,
                                 "worker " + worker.toHex() + " holds no slot of job " +
                                     job_.toHex() + " known to its JobMaster");
    return;
  }
  loseWorker(worker, "worker " + worker.toHex() + " disconnected: " + cause);
}

kj::Promise<void> JobMasters::JobMaster::release(const std::string& cause) {
  releasing_ = true;
  execution_.stop();
  restartTimer_ = nullptr;
  restartArmedAt_.reset();
  // Deployments still waiting for their put are never sent: their attempts end here.
  for (const PendingDeploy& pending : pendingDeploys_) {
    execution_.abandon(pending.deployment.subtask, pending.deployment.attempt, nowMs());
  }
  pendingDeploys_.clear();
  for (const auto& live : execution_.liveAttempts()) {
    auto worker = workers_.find(live.worker);
    if (worker == workers_.end()) {
      execution_.abandon(live.subtask, live.attempt, nowMs());
      continue;
    }
    cancelOnWorker(worker->second.client, live.attempt, live.worker,
                   [this, subtask = live.subtask, attempt = live.attempt] {
                     execution_.abandon(subtask, attempt, nowMs());
                     drainTransitions();
                     checkDrained();
                   });
  }
  drainTransitions();
  kj::Promise<void> drained = kj::READY_NOW;
  if (!execution_.liveAttempts().empty()) {
    auto paf = kj::newPromiseAndFulfiller<void>();
    drained_ = kj::mv(paf.fulfiller);
    const Duration bound = owner_.options_.heartbeatTimeout;
    drained = paf.promise.exclusiveJoin(
        owner_.timer_.afterDelay(bound.count() * kj::MILLISECONDS).then([this, bound] {
          spdlog::warn(
              "job {}: {} attempts did not end within {} of their cancellation; "
              "releasing the job anyway",
              job_.toHex(), execution_.liveAttempts().size(), formatDuration(bound));
        }));
  }
  return drained
      .then([this, cause] {
        kj::Vector<kj::Promise<void>> frees;
        for (const HeldSlot& slot : execution_.heldSlots()) frees.add(freeOnWorker(slot, cause));
        return kj::joinPromises(frees.releaseAsArray());
      })
      .then([this, cause] { owner_.resourceManager_.disconnectJobMaster(job_, cause); })
      // Last: the Dispatcher removes the progress record once this resolves, and a put after
      // that would store it again.
      .then([this] { return closePuts(); });
}

// ---- JobMasters -------------------------------------------------------------------------------

JobMasters::JobMasters(kj::Timer& timer, EventSink& events, uint64_t epoch,
                       resourcemanager::JobMasterPort& resourceManager,
                       store::JobProgressStore& progress, Serve serve, JobMasterCounters& counters,
                       JobMasterOptions options)
    : timer_(timer),
      events_(events),
      epoch_(epoch),
      resourceManager_(resourceManager),
      progress_(progress),
      serve_(std::move(serve)),
      counters_(counters),
      options_(std::move(options)) {
  termStartedAtMs_ = wallNow();
}

JobMasters::~JobMasters() noexcept {
  releases_.cancel("the term's JobMasters are gone");
  jobs_.clear();
}

void JobMasters::setListener(dispatcher::JobRunnerListener& listener) { listener_ = &listener; }

void JobMasters::start(JobId job, wire::JobGraph::Reader graph,
                       kj::Maybe<wire::JobProgress::Reader> recovered) {
  if (jobs_.count(job) != 0) {
    spdlog::warn("job {}: start() for a job already running in this term; ignored", job.toHex());
    return;
  }
  auto master = kj::heap<JobMaster>(*this, job, graph, recovered);
  JobMaster& started = *master;
  jobs_.emplace(job, kj::mv(master));
  started.start();
}

kj::Promise<kj::Array<capnp::word>> JobMasters::release(JobId job, const std::string& cause) {
  auto found = jobs_.find(job);
  if (found == jobs_.end()) {
    resourceManager_.disconnectJobMaster(job, cause);
    return kj::Array<capnp::word>();
  }
  if (found->second->releasing()) {
    // The first release() still runs and drops the JobMaster when done.
    spdlog::warn("job {}: release() while its release runs; nothing more to do", job.toHex());
    return kj::Array<capnp::word>();
  }
  return releases_.wrap(found->second->release(cause).then([this, job] {
    // The final detail (the cancelled attempts' ends) for the Dispatcher to keep.
    capnp::MallocMessageBuilder message;
    describe(job, message.initRoot<wire::JobStatus>());
    jobs_.erase(job);
    return capnp::canonicalize(message.getRoot<wire::JobStatus>().asReader());
  }));
}

bool JobMasters::describe(JobId job, wire::JobStatus::Builder status) const {
  auto found = jobs_.find(job);
  if (found == jobs_.end()) return false;
  found->second->execution().describe(status, monoNow(), resourceManager_);
  return true;
}

bool JobMasters::counts(JobId job, wire::TaskCounts::Builder tasks, uint32_t& restarts) const {
  auto found = jobs_.find(job);
  if (found == jobs_.end()) return false;
  found->second->execution().counts(tasks);
  restarts = found->second->execution().restarts();
  return true;
}

kj::Maybe<wire::JobMasterGateway::Client> JobMasters::gateway(
    JobId job, kj::Own<resourcemanager::WorkerBinding> caller) {
  auto found = jobs_.find(job);
  if (found == jobs_.end()) return nullptr;
  return found->second->serveFor(kj::mv(caller));
}

size_t JobMasters::size() const { return jobs_.size(); }

size_t JobMasters::heldBytesForTests() const {
  size_t bytes = sizeof(*this);
  for (const auto& [job, master] : jobs_) {
    bytes += sizeof(JobMaster) + 48 + master->execution().heldBytes();
  }
  return bytes;
}

MonoTime JobMasters::monoNow() const {
  const int64_t nanos = (timer_.now() - kj::origin<kj::TimePoint>()) / kj::NANOSECONDS;
  return MonoTime(std::chrono::duration_cast<MonoTime::duration>(std::chrono::nanoseconds(nanos)));
}

int64_t JobMasters::wallNow() const {
  return options_.nowMs ? options_.nowMs() : wallClockMillis();
}

}  // namespace regent::jobmaster

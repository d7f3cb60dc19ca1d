// One job's JobMaster (job_master.h): its life from start() to release(), what it does with the
// ExecutionGraph's decisions (deployments, surplus and faulted slots, the declaration, restart
// timers, the job's state), the calls it makes on workers, and reconciliation after a failover.
// The handlers of the gateway workers call are in job_master_gateway.cc.
#include "services/jobmaster/job_master.h"

#include <kj/debug.h>
#include <kj/vector.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "common/units.h"
#include "rpc/call_deadline.h"
#include "rpc/failure.h"
#include "rpc/wire_ids.h"

namespace regent::jobmaster {

namespace {

using wire::ExecutionState;

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

}  // namespace

JobMaster::JobMaster(JobMasterTerm& term, JobId job, wire::JobGraph::Reader graph,
                     kj::Maybe<wire::JobProgress::Reader> recovered)
    : term_(term),
      job_(job),
      execution_(job, graph, RestartStrategy::fromGraph(graph), term.wallNow()),
      recovered_(recovered != nullptr),
      progress_(job, execution_, term, *this) {
  KJ_IF_MAYBE (progress, recovered) {
    expected_ = execution_.recover(*progress, term.wallNow());
    deployedOnce_ = true;  // A recovered job deploys what fits at once.
  }
}

JobMaster::~JobMaster() noexcept { term_.settles.remove(*this); }

void JobMaster::start() {
  term_.resourceManager.registerJobMaster(job_);
  if (execution_.reconciling()) {
    Event line("job reconciling");
    line.field("job", job_.toHex()).field("expected", expected_);
    event(line);
    tasks_.add(
        term_.timer.afterDelay(term_.options.reconciliationTimeout.count() * kj::MILLISECONDS)
            .then([this] {
              if (execution_.reconciling() && !releasing_) endReconciliation(true);
            }));
    // Workers that reported to this term before the job started: their word counts now.
    for (const ResourceId& worker : execution_.expectedWorkers()) checkExpectedOn(worker);
  } else if (recovered_) {
    reportReconciled(ExecutionGraph::Reconciliation{}, false);
  }
  queueSettle();
}

// ---- The progress record ----------------------------------------------------------------------

void JobMaster::deployStored(const Deployment& deployment) {
  if (releasing_) return;
  // A worker lost meanwhile failed the attempt: it is not sent.
  if (execution_.awaitsDeploy(deployment.subtask, deployment.attempt)) deploy(deployment);
}

void JobMaster::recordTooLarge(const std::string& message) {
  execution_.failJob(message, nowMs());
  queueSettle();
}

void JobMaster::putSettled() {
  if (execution_.ended() && !endReported_) queueSettle();  // A FAILED end waits for this put.
}

// ---- Reconciliation ---------------------------------------------------------------------------

void JobMaster::checkReconciled() {
  if (execution_.reconciling() && execution_.expectedLeft() == 0 && !releasing_) {
    endReconciliation(false);
  }
}

void JobMaster::checkExpectedOn(const ResourceId& worker) {
  if (!execution_.reconciling() || releasing_ || !term_.resourceManager.hasReported(worker)) {
    return;
  }
  bool failed = false;
  for (const ExecutionGraph::ExpectedAttempt& expected : execution_.expectedOn(worker)) {
    if (term_.resourceManager.holdsAllocation(worker, expected.allocation, job_)) continue;
    failed |= execution_.expectedMissing(
        expected.subtask, expected.attempt,
        "worker " + worker.toHex() + " reported its slots to the new leader without allocation " +
            expected.allocation.toHex() +
            " of the attempt (the worker restarted, or freed the slot)",
        monoNow(), nowMs());
  }
  if (!failed) return;
  drainTransitions();
  queueSettle();
  checkReconciled();
}

void JobMaster::failExpectedNotOffered(const ResourceId& worker,
                                       const std::vector<OfferedSlot>& offers,
                                       const std::vector<AttemptId>& adopted) {
  for (const ExecutionGraph::ExpectedAttempt& expected : execution_.expectedOn(worker)) {
    if (std::find(adopted.begin(), adopted.end(), expected.attempt) != adopted.end()) continue;
    const bool offered = std::any_of(offers.begin(), offers.end(), [&](const OfferedSlot& slot) {
      return slot.allocation == expected.allocation;
    });
    if (!offered) continue;
    if (execution_.expectedMissing(expected.subtask, expected.attempt,
                                   "worker " + worker.toHex() + " offered the slot of allocation " +
                                       expected.allocation.toHex() +
                                       " without the attempt: it was never deployed there (the "
                                       "earlier leader was lost before its submitTask)",
                                   monoNow(), nowMs())) {
      queueSettle();
    }
  }
}

void JobMaster::workerRestarted(const ResourceId& worker, const std::string& message) {
  bool failed = false;
  if (execution_.reconciling() && !releasing_) {
    for (const ExecutionGraph::ExpectedAttempt& expected : execution_.expectedOn(worker)) {
      failed |= execution_.expectedMissing(expected.subtask, expected.attempt, message, monoNow(),
                                           nowMs());
    }
  }
  if (execution_.holdsSlotsOn(worker) || findWorker(worker) != nullptr) {
    loseWorker(worker, message);
  } else if (failed) {
    drainTransitions();
    queueSettle();
  }
  checkReconciled();
}

void JobMaster::workerReported(const ResourceId& worker) { checkExpectedOn(worker); }

void JobMaster::endReconciliation(bool timedOut) {
  const std::string message =
      "not reported by any worker within jobmaster.reconciliation-timeout (" +
      formatDuration(term_.options.reconciliationTimeout) + ") after the failover";
  const ExecutionGraph::Reconciliation outcome =
      execution_.endReconciliation(message, monoNow(), nowMs());
  if (timedOut) ++term_.counters.reconciliationTimeouts;
  drainTransitions();
  reportReconciled(outcome, timedOut);
  queueSettle();
}

void JobMaster::reportReconciled(const ExecutionGraph::Reconciliation& outcome, bool timedOut) {
  Event line("job reconciled");
  line.field("job", job_.toHex())
      .field("adopted", outcome.adopted)
      .field("ended", outcome.ended)
      .field("unreported", outcome.unreported)
      .field("timed_out", timedOut ? "true" : "false");
  event(line);
}

void JobMaster::queueSettle() {
  // Once nothing else is queued: the offers and updates already read go into one settle, and
  // the deployments it makes into one put.
  term_.settles.add(*this);
}

JobWorkers& JobMaster::workers() {
  if (!workers_) {
    workers_ = std::make_unique<JobWorkers>(
        term_.timer, term_.epoch, job_,
        resourcemanager::HeartbeatOptions{term_.options.heartbeatInterval,
                                          term_.options.heartbeatTimeout,
                                          term_.options.callTimeout},
        static_cast<JobWorkers::Listener&>(*this));
    workers_->start(monoNow());
  }
  return *workers_;
}

bool JobMaster::gathersSlots() {
  const Duration wait = term_.options.firstDeployWait;
  if (deployedOnce_ || wait.count() == 0 || !execution_.schedulesPartly()) return false;
  if (waits().gatherWait == nullptr) {
    waits_->gatherWait = term_.timer.afterDelay(wait.count() * kj::MILLISECONDS)
                             .then([this] {
                               deployedOnce_ = true;
                               queueSettle();
                             })
                             .eagerlyEvaluate([this](kj::Exception&& e) {
                               term_.taskErrors.taskFailed(kj::mv(e));
                             });
  }
  return true;
}

void JobMaster::settle() {
  if (releasing_) return;
  execution_.restartDue(monoNow());
  std::vector<Deployment> deployments;
  if (!gathersSlots()) deployments = execution_.schedule(nowMs());
  if (!deployments.empty()) {
    deployedOnce_ = true;
    if (waits_) waits_->gatherWait = nullptr;  // Its slots all came: the wait is over.
  }
  drainTransitions();
  // Write-ahead: each new attempt is deployed once a put holding it succeeded.
  for (const Deployment& deployment : deployments) progress_.deployWhenStored(deployment);
  progress_.write();
  freeWhenStored(execution_.takeSurplusSlots());
  for (const HeldSlot& slot : execution_.takeFaultedSlots()) {
    term_.resourceManager.slotFaulted(job_, slot.worker, slot.allocation,
                                      "worker " + slot.worker.toHex() +
                                          " could not start an attempt of job " + job_.toHex() +
                                          " in the slot");
  }
  if (workers_) {
    workers_->keepOnly([this](const ResourceId& worker) {
      if (execution_.holdsSlotsOn(worker)) return true;
      return waits_ && std::any_of(waits_->freeing.begin(), waits_->freeing.end(),
                                   [&worker](const auto& entry) { return entry.second == worker; });
    });
  }
  // While reconciling no requirement is declared: the ResourceManager keeps the job's reported
  // allocations, and new slots would be refused for attempts whose worker has not come back.
  if (!execution_.reconciling()) declare();
  armRestartTimer();
  reportState();
}

void JobMaster::deploy(const Deployment& deployment) {
  JobWorkers::Worker* worker = findWorker(deployment.worker);
  if (worker == nullptr) {
    deployFailed(deployment, "worker " + deployment.worker.toHex() + " holds no slot of the job");
    return;
  }
  const auto vertex = execution_.vertexReader(execution_.vertexOf(deployment.subtask));
  const uint64_t link = worker->link;
  auto request = worker->client.submitTaskRequest();
  request.setEpoch(term_.epoch);
  auto out = request.initDeployment();
  wire::setWireId(out.initJobId(), job_);
  out.setJobName(execution_.graph().getName());
  wire::setWireId(out.initAttemptId(), deployment.attempt);
  wire::setWireId(out.initAllocationId(), deployment.allocation);
  out.setVertexName(vertex.getName());
  out.setSubtaskIndex(execution_.indexInVertex(deployment.subtask));
  out.setParallelism(vertex.getParallelism());
  out.setAttemptNumber(deployment.attemptNumber);
  out.setCommand(vertex.getCommand());
  out.setResources(vertex.getResources());
  tasks_.add(rpc::withDeadline(term_.timer, term_.options.callTimeout,
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
                         workers().expect(deployment.worker, deployment.attempt,
                                          deployment.subtask);
                       }
                       ++term_.counters.attemptsStarted;
                       if (deployment.restart) ++term_.counters.attemptsRestarted;
                       const auto vertex =
                           execution_.vertexReader(execution_.vertexOf(deployment.subtask));
                       Event line("attempt deployed");
                       line.field("epoch", term_.epoch)
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
                       const JobWorkers::Worker* worker = findWorker(deployment.worker);
                       if (exception.getType() == kj::Exception::Type::DISCONNECTED &&
                           worker != nullptr && worker->link == link) {
                         // The connection the worker's slots were offered on is gone: none of them
                         // can be deployed into any more. The worker is lost at once, as after
                         // heartbeat.timeout (its live attempts, this one included, fail).
                         loseWorker(deployment.worker, "worker " + deployment.worker.toHex() +
                                                           " lost: submitTask failed: " +
                                                           describeException(exception));
                         return;
                       }
                       // No answer within rpc.call-timeout says nothing of the task: the worker
                       // is paused or overloaded. A fault of the worker, then: no restart is
                       // counted and the subtask runs elsewhere (docs/jobgraph.md, "Worker
                       // faults"). The request may still reach the worker; an attempt it starts
                       // then is one this JobMaster no longer follows, and is cancelled.
                       deployFailed(deployment, why,
                                    exception.getType() == kj::Exception::Type::OVERLOADED
                                        ? FailureCause::kWorker
                                        : FailureCause::kAttempt);
                     }));
}

void JobMaster::deployFailed(const Deployment& deployment, const std::string& message,
                             FailureCause cause) {
  execution_.deployFailed(deployment.subtask, deployment.attempt, message, monoNow(), nowMs(),
                          cause);
  drainTransitions();
  checkDrained();
  queueSettle();
}

void JobMaster::cancelOnWorker(wire::TaskExecutorGateway::Client client, const AttemptId& attempt,
                               const ResourceId& worker, std::function<void()> onFailure) {
  auto request = client.cancelTaskRequest();
  request.setEpoch(term_.epoch);
  wire::setWireId(request.initAttemptId(), attempt);
  tasks_.add(rpc::withDeadline(term_.timer, term_.options.callTimeout,
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

// A slot the job needs no more is freed on its worker only once the progress record holds
// everything so far, the end of the attempt that ran in it included: a worker reports its slots to
// the next leader, and an allocation it freed no longer carries that attempt's end, which that
// leader would take for an attempt lost with the slot, and run again (docs/jobgraph.md,
// "Failover").
void JobMaster::freeWhenStored(std::vector<HeldSlot> slots) {
  if (slots.empty()) return;
  for (const HeldSlot& slot : slots) waits().freeing[slot.allocation] = slot.worker;
  // Lazily: a FINISHED attempt's slot waits for a put its end may share with the others'.
  tasks_.add(progress_.storedSoon().then([this, slots = std::move(slots)](bool stored) mutable {
    if (!stored) {
      // That put failed: the next one may hold it. Fenced or too large: the term's record can
      // never hold it, and the slots stay with the job (and in `freeing`) for the next leader to
      // settle.
      if (progress_.canStore()) freeWhenStored(std::move(slots));
      return;
    }
    for (const HeldSlot& slot : slots) {
      tasks_.add(freeOnWorker(slot, "job " + job_.toHex() + " needs the slot no more")
                     .then([this, allocation = slot.allocation] {
                       waits_->freeing.erase(allocation);
                     }));
    }
  }));
}

kj::Promise<void> JobMaster::freeOnWorker(const HeldSlot& slot, const std::string& cause) {
  JobWorkers::Worker* worker = findWorker(slot.worker);
  if (worker == nullptr) return kj::READY_NOW;
  return workers_->calls().freeSlot(slot.worker, worker->client, slot.allocation, cause);
}

void JobMaster::declare() {
  const std::vector<Requirement> needs = execution_.requirements();
  if (declaredOnce_ && sameNeeds(needs, declared_)) return;
  declared_ = needs;
  declaredOnce_ = true;
  const resourcemanager::SlotOutcome declared =
      term_.resourceManager.declareRequiredResources(job_, needs);
  execution_.setSlotProblem(
      declared.ok() ? std::string()
                    : (declared.error().field.empty()
                           ? declared.error().message
                           : declared.error().field + ": " + declared.error().message));
  if (!declared.ok()) {
    const resourcemanager::SlotFailure& failure = declared.error();
    spdlog::warn("job {}: declaring its required slots failed: {}; declaring again in {}",
                 job_.toHex(),
                 failure.field.empty() ? failure.message : failure.field + ": " + failure.message,
                 formatDuration(term_.options.heartbeatInterval));
    // Refused (no registered worker fits yet, e.g. right after a failover): the ResourceManager
    // holds no requirement for the job, so declare again later even if the needs stay the same.
    declaredOnce_ = false;
    if (!declareRetryArmed_) {
      declareRetryArmed_ = true;
      tasks_.add(term_.timer.afterDelay(term_.options.heartbeatInterval.count() * kj::MILLISECONDS)
                     .then([this] {
                       declareRetryArmed_ = false;
                       queueSettle();
                     }));
    }
  }
}

void JobMaster::armRestartTimer() {
  const std::optional<MonoTime> next = execution_.nextRestartAt();
  if (!waits_ && !next) return;
  Waits& waits = this->waits();
  if (next == waits.restartArmedAt) return;
  waits.restartArmedAt = next;
  waits.restartTimer = nullptr;
  if (!next) return;
  const auto delay = std::chrono::duration_cast<std::chrono::nanoseconds>(*next - monoNow());
  waits.restartTimer =
      term_.timer.afterDelay(std::max<int64_t>(0, delay.count()) * kj::NANOSECONDS)
          .then([this] {
            // Not settle() here: it may arm this timer again, destroying the promise whose
            // continuation runs now.
            waits_->restartArmedAt.reset();
            queueSettle();
          })
          .eagerlyEvaluate([this](kj::Exception&& exception) {
            term_.taskErrors.taskFailed(kj::mv(exception));
          });
}

void JobMaster::reportState() {
  dispatcher::JobRunnerListener* listener = term_.listener;
  const wire::JobState state = execution_.state();
  if (execution_.ended()) {
    if (endReported_) return;
    const dispatcher::JobEnd end = *execution_.end();
    if (end.state == wire::JobState::FAILED && progress_.behind()) {
      // Told once a put saying the strategy gave up succeeded (putSettled settles again): the
      // Dispatcher stores the result next, and a leader dying before the record says so would
      // leave the next one to run the job again.
      progress_.writeNow();
      return;
    }
    endReported_ = true;
    if (end.state == wire::JobState::FAILED) {
      Event line("job state");
      line.field("epoch", term_.epoch)
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
  line.field("epoch", term_.epoch)
      .field("job", job_.toHex())
      .field("state", wire::enumNameUpper(state))
      .field("restarts", execution_.restarts());
  event(line);
  if (listener) listener->jobStateChanged(job_, state, nowMs());
}

void JobMaster::drainTransitions() {
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
    if (transition.state == ExecutionState::FAILED) ++term_.counters.attemptsFailed;
    const auto vertex = execution_.vertexReader(execution_.vertexOf(transition.subtask));
    Event line("attempt state");
    line.field("epoch", term_.epoch)
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

void JobMaster::checkDrained() {
  if (!waits_) return;
  KJ_IF_MAYBE (fulfiller, waits_->drained) {
    if (execution_.liveAttempts().empty()) {
      (*fulfiller)->fulfill();
      waits_->drained = nullptr;
    }
  }
}

void JobMaster::loseWorker(const ResourceId& worker, const std::string& message) {
  execution_.workerLost(worker, message, monoNow(), nowMs());
  if (workers_) workers_->forget(worker);
  drainTransitions();
  checkDrained();
  queueSettle();
}

void JobMaster::workerSilent(const ResourceId& worker, const std::string& message) {
  loseWorker(worker, message);
}

kj::Promise<void> JobMaster::release(const std::string& cause) {
  releasing_ = true;
  execution_.stop();
  if (waits_) {
    waits_->restartTimer = nullptr;
    waits_->restartArmedAt.reset();
  }
  // Deployments still waiting for their put are never sent: their attempts end here.
  for (const Deployment& waiting : progress_.takeWaitingDeployments()) {
    execution_.abandon(waiting.subtask, waiting.attempt, nowMs());
  }
  for (const auto& live : execution_.liveAttempts()) {
    JobWorkers::Worker* worker = findWorker(live.worker);
    if (worker == nullptr) {
      execution_.abandon(live.subtask, live.attempt, nowMs());
      continue;
    }
    cancelOnWorker(worker->client, live.attempt, live.worker,
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
    waits().drained = kj::mv(paf.fulfiller);
    const Duration bound = term_.options.heartbeatTimeout;
    drained = paf.promise.exclusiveJoin(
        term_.timer.afterDelay(bound.count() * kj::MILLISECONDS).then([this, bound] {
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
      .then([this, cause] { term_.resourceManager.disconnectJobMaster(job_, cause); })
      // Last: the Dispatcher removes the progress record once this resolves, and a put after
      // that would store it again.
      .then([this] { return progress_.close(); });
}

}  // namespace regent::jobmaster

// The JobMasterGateway a JobMaster serves to workers (job_masters.h lists what each call does):
// slot offers and the adoption of a recovered job's attempts, attempt updates, the workers'
// heartbeats and disconnects. Every call speaks for the worker its connection registered.
#include "services/jobmaster/job_master.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/utf8.h"
#include "rpc/failure.h"
#include "rpc/wire_ids.h"

namespace regent::jobmaster {

namespace {

// The longest failure message kept from a worker's report (bytes of UTF-8).
constexpr size_t kMaxFailureMessageBytes = 4096;

Profile profileOf(wire::ResourceProfile::Reader profile) {
  return Profile{profile.getCpuMillis(), profile.getMemoryBytes()};
}

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

// The JobMasterGateway of one JobMaster for one connection (`caller`: its worker identity), as
// the term serves it (fenced there, behind the gate of worker calls). Holds no reference to the
// JobMaster beyond the link the JobMaster cuts when it goes.
class JobMaster::Gateway final : public wire::JobMasterGateway::Server {
 public:
  Gateway(rpc::Revocable<JobMaster>::Link master, kj::Own<resourcemanager::WorkerBinding> caller)
      : master_(kj::mv(master)), caller_(kj::mv(caller)) {}

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
  // Throws DISCONNECTED once the JobMaster was released.
  JobMaster& master() { return master_.get(); }
  ResourceId worker() const { return caller_->bound().resourceId; }

  const rpc::Revocable<JobMaster>::Link master_;
  kj::Own<resourcemanager::WorkerBinding> caller_;
};

wire::JobMasterGateway::Client JobMaster::serveFor(kj::Own<resourcemanager::WorkerBinding> caller) {
  if (!self_) self_.emplace(*this, "the JobMaster of job " + job_.toHex() + " was released");
  auto handlers = kj::heap<Gateway>(self_->link(), kj::addRef(*caller));
  return term_.serve(resourcemanager::guardWorkerCalls<wire::JobMasterGateway>(
      kj::mv(handlers), kj::mv(caller), term_.resourceManager,
      term_.resourceManager.identityRefusals()));
}

void JobMaster::offerSlots(const resourcemanager::WorkerBinding& caller,
                           wire::JobMasterGateway::OfferSlotsParams::Reader params,
                           wire::JobMasterGateway::OfferSlotsResults::Builder results) {
  const ResourceId worker = caller.bound().resourceId;
  if (!term_.resourceManager.workerAddress(worker)) {
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
    if (term_.resourceManager.holdsAllocation(worker, allocation, job_) &&
        (!heldOn || *heldOn == worker)) {
      continue;
    }
    term_.resourceManager.identityRefusals().refuse(
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
  // An expected attempt the record places in an offered slot that does not carry it was never
  // deployed there: it fails now (and may run again in that very slot), not at the timeout.
  if (!releasing_ && execution_.reconciling()) failExpectedNotOffered(worker, offers, adoptedIds);
  std::vector<bool> accepted(offers.size(), false);
  if (!releasing_) {
    accepted = execution_.offerSlots(worker, offers);
    // A slot being freed (freeWhenStored) stays the job's until a put holds what ended in it.
    for (size_t i = 0; i < offers.size(); ++i) {
      if (freeing(offers[i].allocation)) accepted[i] = true;
    }
  }
  size_t count = 0;
  for (bool yes : accepted) count += yes ? 1 : 0;
  auto out = results.initAccepted(static_cast<unsigned>(count));
  unsigned next = 0;
  for (size_t i = 0; i < offers.size(); ++i) {
    if (accepted[i]) wire::setWireId(out[next++], offers[i].allocation);
  }
  auto client = params.getTaskExecutor();
  if (count > 0) workers().offered(worker, client, monoNow());
  for (Adopted& entry : adopted) {
    ++term_.counters.attemptsAdopted;
    if (!isTerminal(entry.report.state)) {
      workers().expect(worker, entry.report.attempt, entry.subtask);
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

kj::Promise<void> JobMaster::updateTaskExecutionState(
    const resourcemanager::WorkerBinding& caller, wire::TaskExecutionState::Reader state,
    wire::JobMasterGateway::UpdateTaskExecutionStateResults::Builder results) {
  const AttemptReport report = reportOf(state);
  const AttemptId attempt = report.attempt;
  const bool otherJob = state.hasJobId() && wire::idFromWire<JobId>(state.getJobId()) != job_;
  // Only the worker an attempt runs on reports it. An expected attempt of a recovered job that
  // no worker offered yet is reported by a worker holding the allocation it names for the job.
  const ResourceId worker = caller.bound().resourceId;
  const auto runsOn = otherJob
                          ? std::nullopt
                          : execution_.workerOfAttempt(report.vertex, report.subtaskIndex, attempt);
  if (runsOn && *runsOn != worker &&
      !(runsOn->isZero() && state.hasAllocationId() &&
        term_.resourceManager.holdsAllocation(
            worker, wire::idFromWire<AllocationId>(state.getAllocationId()), job_))) {
    term_.resourceManager.identityRefusals().refuse(
        caller, "JobMasterGateway.updateTaskExecutionState",
        runsOn->isZero() ? std::string() : runsOn->toHex(),
        "attempt " + attempt.toHex() + " of job " + job_.toHex() +
            (runsOn->isZero()
                 ? " was offered by no worker yet, and worker " + worker.toHex() +
                       " holds no allocation of the job it names"
                 : " runs on worker " + runsOn->toHex() + ", not on " + worker.toHex()),
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
    const int64_t submittedAtMs = execution_.graph().getSubmittedAtMs();
    if (execution_.takeFirstRunning() && submittedAtMs >= term_.startedAtMs) {
      term_.counters.observeSubmitToRunning(
          static_cast<double>(std::max<int64_t>(0, nowMs() - submittedAtMs)) / 1000.0);
    }
    drainTransitions();
    checkDrained();
    checkReconciled();
    queueSettle();
  }
  if (!isTerminal(report.state)) return kj::READY_NOW;
  // FINISHED is acknowledged at once (unless jobmaster.finished-put-delay is 0): its worker keeps
  // offering it with its slot (SlotState::finished) until the slot is freed or runs another
  // attempt, and either waits for a put, or the job's result, that holds the end (the lazy put,
  // ProgressLog::storedSoon).
  const bool finishedAtOnce = term_.options.finishedPutDelay.count() > 0;
  if (report.state == wire::ExecutionState::FINISHED && finishedAtOnce) return kj::READY_NOW;
  // FAILED and CANCELED are acknowledged once the progress record holds them (a repeat too: the
  // first delivery's put may still be in flight, or have failed).
  return progress_.stored().then([this, results, attempt](bool stored) mutable {
    if (stored) return;
    rpc::failures::unavailable(results.initFailure(), 0,
                               "the progress of job " + job_.toHex() +
                                   " could not be stored; deliver the state of attempt " +
                                   attempt.toHex() + " again");
  });
}

void JobMaster::heartbeat(const ResourceId& worker,
                          wire::JobMasterGateway::HeartbeatParams::Reader params,
                          wire::JobMasterGateway::HeartbeatResults::Builder results) {
  JobWorkers::Worker* known = findWorker(worker);
  if (known == nullptr) {
    rpc::failures::notRegistered(results.initFailure(), worker,
                                 "worker " + worker.toHex() + " holds no slot of job " +
                                     job_.toHex() + " known to its JobMaster");
    return;
  }
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
    cancelOnWorker(known->client, attempt, worker, nullptr);
  }
  // Live attempts the worker has (submitTask accepted, or adopted) and did not list in two
  // heartbeats in a row fail: the worker lists the attempts it runs and those whose terminal
  // update it still holds, and a terminal update is applied here on receipt, so the worker lost
  // the attempt's end (its update buffer overflowed, say). One miss is allowed: a heartbeat may
  // overtake the submitTask's answer. Attempts whose submitTask is in flight are not counted.
  std::sort(attempts.begin(), attempts.end());
  const auto lost = workers_->heartbeat(worker, attempts, monoNow(),
                                       [this](uint32_t subtask, const AttemptId& attempt) {
                                         return execution_.isLive(subtask, attempt);
                                       });
  if (lost.empty()) return;
  for (const auto& [attempt, subtask] : lost) {
    execution_.attemptLost(subtask, attempt,
                           "worker " + worker.toHex() +
                               " no longer reports the attempt in its heartbeats (missing from " +
                               std::to_string(JobWorkers::kHeartbeatsMissedToFail) + " in a row)",
                           monoNow(), nowMs());
  }
  drainTransitions();
  checkDrained();
  queueSettle();
}

void JobMaster::disconnect(const ResourceId& worker, const std::string& cause,
                           wire::JobMasterGateway::DisconnectResults::Builder results) {
  if (findWorker(worker) == nullptr) {
    rpc::failures::notRegistered(results.initFailure(), worker,
                                 "worker " + worker.toHex() + " holds no slot of job " +
                                     job_.toHex() + " known to its JobMaster");
    return;
  }
  loseWorker(worker, "worker " + worker.toHex() + " disconnected: " + cause);
}

}  // namespace regent::jobmaster

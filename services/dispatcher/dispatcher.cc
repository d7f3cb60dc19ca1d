// The Dispatcher: recovery at the start of a term, submission (validate, persist, accept, run),
// the end of a job (FINISHED: result, detail and cleanup in one transaction, then release on the
// runner; otherwise dirty result, release, then the cleanup), and the jobs it keeps in memory.
#include "services/dispatcher/dispatcher.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/debug.h>
#include <spdlog/spdlog.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/time.h"
#include "rpc/wire_ids.h"

namespace regent::dispatcher {
namespace {

constexpr uint64_t kBusyRetryMs = 500;
// The retries of a job's end (storeEnd) while the store is unavailable.
constexpr Duration kDirtyRetryInitial = std::chrono::milliseconds(200);
constexpr Duration kDirtyRetryMax = std::chrono::seconds(10);

JobFailure failure(JobFailure::Kind kind, std::string message, JobId job = JobId()) {
  JobFailure failed{kind, std::move(message)};
  failed.job = job;
  return failed;
}

// A store failure as the caller sees it: too large is the caller's problem, everything else is
// the leader's (retry later; a fenced store means this term is ending).
JobFailure storeFailure(const store::StoreError& error) {
  if (error.code == store::StoreErrorCode::kTooLarge) {
    JobFailure tooLarge = failure(JobFailure::Kind::kTooLarge, error.message);
    tooLarge.sizeBytes = error.sizeBytes;
    tooLarge.limitBytes = error.limitBytes;
    return tooLarge;
  }
  if (error.code == store::StoreErrorCode::kInvalid) {
    JobFailure invalid = failure(JobFailure::Kind::kInvalidArgument, error.message);
    invalid.fieldMessage = error.message;
    return invalid;
  }
  return failure(JobFailure::Kind::kUnavailable,
                 "the job store cannot be used: " + error.message);
}

// The refusal of a call on a job whose stored record is corrupt: what it is and what to do.
JobFailure corruptFailure(JobId id, const std::string& reason, bool resultRecord) {
  if (resultRecord) {
    return failure(JobFailure::Kind::kFailedPrecondition,
                   "job " + id.toHex() + " is CORRUPT: " + reason +
                       "; it ended and never runs again, and its records are left in place for "
                       "an operator",
                   id);
  }
  return failure(JobFailure::Kind::kFailedPrecondition,
                 "job " + id.toHex() + " is CORRUPT: its stored JobGraph record does not decode (" +
                     reason + "); it is left in place and not replaced; remove it with "
                     "`regentctl jobs remove-corrupt " + id.toHex() + "`, then submit again",
                 id);
}

// A message of its own size: the canonical form of `root` (one segment, no slack), read back
// with readOnly<T>() without validation (it was validated when it was built).
template <typename Reader>
kj::Array<capnp::word> flatCopy(Reader root) {
  return capnp::canonicalize(root);
}

template <typename Struct>
typename Struct::Reader readOnly(kj::ArrayPtr<const capnp::word> flat) {
  return capnp::readMessageUnchecked<Struct>(flat.begin());
}

// The graph as compared for idempotent resubmission: everything but submittedAtMs.
kj::Array<capnp::word> canonicalWithoutSubmitTime(wire::JobGraph::Reader graph) {
  capnp::MallocMessageBuilder copy;
  copy.setRoot(graph);
  copy.getRoot<wire::JobGraph>().setSubmittedAtMs(0);
  return capnp::canonicalize(copy.getRoot<wire::JobGraph>().asReader());
}

bool sameGraph(wire::JobGraph::Reader a, wire::JobGraph::Reader b) {
  const auto left = canonicalWithoutSubmitTime(a);
  const auto right = canonicalWithoutSubmitTime(b);
  return left.asBytes() == right.asBytes();
}

// Why a recovered progress record cannot be the progress of `graph` (its subtasks, by global
// index: the vertices in order, then the subtask index), nullopt when it can. The store checked
// that it decodes; this checks what a JobMaster relies on when it starts from it.
std::optional<std::string> progressMisfit(wire::JobGraph::Reader graph,
                                          wire::JobProgress::Reader progress) {
  uint64_t total = 0;
  for (auto vertex : graph.getVertices()) total += vertex.getParallelism();
  int64_t previous = -1;
  for (auto subtask : progress.getSubtasks()) {
    const uint32_t index = subtask.getSubtask();
    const std::string named = "subtask " + std::to_string(index);
    if (index >= total) {
      return named + " is beyond the job's " + std::to_string(total) + " subtasks";
    }
    if (static_cast<int64_t>(index) <= previous) return named + " is out of order or repeated";
    previous = index;
    const std::optional<AttemptId> attempt =
        wire::idFromWireIfSet<AttemptId>(subtask.hasAttemptId(), subtask.getAttemptId());
    if (!attempt || attempt->isZero()) return named + " has no attempt id";
    const auto state = static_cast<uint16_t>(subtask.getState());
    if (state > static_cast<uint16_t>(wire::ExecutionState::RECONCILING)) {
      return named + " has an unknown state (" + std::to_string(state) + ")";
    }
  }
  return std::nullopt;
}

// A job's result as far as its graph and its end decide: id, name, state, submission and end
// times. The caller adds what its kind of end knows (restarts, run time, the failure).
wire::JobResult::Builder initResult(capnp::MessageBuilder& message, wire::JobGraph::Reader graph,
                                    wire::JobState state, int64_t endedAtMs) {
  auto result = message.initRoot<wire::JobResult>();
  result.setJobId(graph.getJobId());
  result.setJobName(graph.getName());
  result.setState(state);
  result.setSubmittedAtMs(graph.getSubmittedAtMs());
  result.setEndedAtMs(endedAtMs);
  return result;
}

}  // namespace

Dispatcher::Dispatcher(uint64_t epoch, store::LeaderStores& stores, kj::Timer& timer,
                       EventSink& events, jobgraph::JobGraphLimits limits, size_t retainClean,
                       std::function<int64_t()> nowMs, JobRunner* runner,
                       size_t endedDetailBudgetBytes)
    : epoch_(epoch),
      stores_(stores),
      timer_(timer),
      events_(events),
      limits_(std::move(limits)),
      retainClean_(retainClean),
      endedDetailBudgetBytes_(endedDetailBudgetBytes),
      nowMs_(std::move(nowMs)),
      runner_(runner) {
  if (runner_ != nullptr) runner_->setListener(*this);
}

Dispatcher::~Dispatcher() noexcept = default;

void Dispatcher::addEnded(JobId id, wire::JobResult::Reader result, bool clean) {
  auto previous = ended_.find(id);
  if (previous != ended_.end()) {
    endedByAge_.erase({previous->second.endedAtMs, id});
    cleanByAge_.erase({previous->second.endedAtMs, id});
    eraseEnded(previous);
  }
  EndedJob job;
  job.result = flatCopy(result);
  job.clean = clean;
  job.endedAtMs = result.getEndedAtMs();
  endedByAge_.insert({job.endedAtMs, id});
  if (clean) cleanByAge_.insert({job.endedAtMs, id});
  ended_.emplace(id, kj::mv(job));
  pruneClean();
}

void Dispatcher::markCleanInMemory(JobId id) {
  auto found = ended_.find(id);
  if (found == ended_.end() || found->second.clean) return;
  capnp::MallocMessageBuilder copy;
  copy.setRoot(readOnly<wire::JobResult>(found->second.result));
  copy.getRoot<wire::JobResult>().setClean(true);
  found->second.result = flatCopy(copy.getRoot<wire::JobResult>().asReader());
  found->second.clean = true;
  cleanByAge_.insert({found->second.endedAtMs, id});
  pruneClean();
}

// The store's retention: the oldest clean results go first; dirty ones stay.
void Dispatcher::pruneClean() {
  while (cleanByAge_.size() > retainClean_) {
    auto oldest = cleanByAge_.begin();
    endedByAge_.erase(*oldest);
    eraseEnded(ended_.find(oldest->second));
    cleanByAge_.erase(oldest);
  }
}

void Dispatcher::eraseEnded(std::map<JobId, EndedJob>::iterator ended) {
  detailBytes_ -= ended->second.detail.asBytes().size();
  ended_.erase(ended);
}

void Dispatcher::setDetail(EndedJob& job, kj::Array<capnp::word> detail) {
  detailBytes_ -= job.detail.asBytes().size();
  job.detail = kj::mv(detail);
  detailBytes_ += job.detail.asBytes().size();
  if (job.detail.size() > 0) job.detailMissing.clear();
  for (auto it = endedByAge_.begin();
       it != endedByAge_.end() && detailBytes_ > endedDetailBudgetBytes_; ++it) {
    EndedJob& oldest = ended_.at(it->second);
    // Never the detail just set (one read back from the store for an old job, say): it is
    // what the caller is about to show. The budget is over by at most that one detail.
    if (&oldest == &job) continue;
    detailBytes_ -= oldest.detail.asBytes().size();
    oldest.detail = nullptr;
  }
}

kj::Promise<Status> Dispatcher::recover() {
  recovered_ = false;
  active_.clear();
  ended_.clear();
  detailBytes_ = 0;
  endedByAge_.clear();
  cleanByAge_.clear();
  corrupt_.clear();
  corruptResults_.clear();
  return canceler_.wrap(
      stores_.jobResults().listAll().then(
          [this](store::StoreResult<store::JobResults>&& results) -> kj::Promise<Status> {
            if (!results.ok()) {
              return Status(Error::retryable("cannot read the job results: " +
                                             results.error().message));
            }
            for (auto& result : results.value().results) {
              addEnded(wire::idFromWire<JobId>(result.get().getJobId()), result.get(),
                       result.get().getClean());
            }
            // A job with a result never runs again, even when that result does not decode.
            for (const store::CorruptRecord& record : results.value().corrupt) {
              const std::optional<JobId> id = JobId::fromHex(record.key);
              if (!id) continue;  // Not a job id: the store logged it.
              corrupt_[*id] = "its stored job result record does not decode (" + record.reason + ")";
              corruptResults_.insert(*id);
              spdlog::warn("dispatcher: job {} is CORRUPT (its job result record does not decode: "
                           "{}); it is never run again and its records are left in place",
                           id->toHex(), record.reason);
            }
            return stores_.jobGraphs().recoverAll().then(
                [this](store::StoreResult<store::RecoveredJobGraphs>&& graphs)
                    -> kj::Promise<Status> {
                  if (!graphs.ok()) {
                    return Status(Error::retryable("cannot read the JobGraphs: " +
                                                   graphs.error().message));
                  }
                  std::set<JobId> withGraph;  // Ended jobs whose JobGraph is still stored.
                  for (auto& graph : graphs.value().graphs) {
                    const JobId id = wire::idFromWire<JobId>(graph.get().getJobId());
                    if (corruptResults_.count(id) > 0) continue;  // Ended: never started.
                    if (ended_.count(id) > 0) {
                      // The job ended in an earlier term: finish its cleanup, never re-run it.
                      withGraph.insert(id);
                      continue;
                    }
                    ActiveJob job;
                    job.graph = flatCopy(graph.get());
                    job.stateChangedAtMs = nowMs_();
                    active_.emplace(id, kj::mv(job));
                  }
                  for (const store::CorruptRecord& record : graphs.value().corrupt) {
                    const std::optional<JobId> id = JobId::fromHex(record.key);
                    // A key that is not a job id cannot be named by one (the store logged it);
                    // an ended job's record is removed by its cleanup.
                    if (!id || ended_.count(*id) > 0 || corrupt_.count(*id) > 0) continue;
                    corrupt_[*id] = record.reason;
                    spdlog::warn(
                        "dispatcher: job {} is CORRUPT (its JobGraph record does not decode: {}); "
                        "it is left in place; remove it with regentctl jobs remove-corrupt {}",
                        id->toHex(), record.reason, id->toHex());
                  }
                  return stores_.jobProgress().recoverAll().then(
                      [this, withGraph = std::move(withGraph)](
                          store::StoreResult<store::RecoveredJobProgress>&& progress)
                          -> kj::Promise<Status> {
                        if (!progress.ok()) {
                          return Status(Error::retryable("cannot read the job progress records: " +
                                                         progress.error().message));
                        }
                        kj::Vector<kj::Promise<Status>> cleanups;
                        std::set<JobId> cleaned;  // Ended jobs whose cleanup runs now.
                        for (auto& [id, job] : ended_) {
                          if (withGraph.count(id) > 0 || !job.clean) {
                            cleaned.insert(id);
                            cleanups.add(finishCleanup(id, false));
                          }
                        }
                        adoptProgress(progress.value(), cleaned);
                        return kj::joinPromises(cleanups.releaseAsArray())
                            .then([this](kj::Array<Status>&& done) -> Status {
                              for (auto& status : done) {
                                if (!status.ok()) return status;
                              }
                              recovered_ = true;
                              spdlog::info("dispatcher recovered epoch={} jobs={}", epoch_,
                                           active_.size());
                              // Every job without a result runs again in this term.
                              for (auto& [id, job] : active_) start(id, job);
                              return Status();
                            });
                      });
                });
          }));
}

void Dispatcher::adoptProgress(store::RecoveredJobProgress& progress,
                               const std::set<JobId>& cleaned) {
  // Whose record is it: a job to run (kept for start()), an ended job whose cleanup removes it,
  // a CORRUPT job (left in place with its other records), or nobody's (removed).
  const auto orphanReason = [this, &cleaned](JobId id) -> std::optional<std::string> {
    if (active_.count(id) > 0 || cleaned.count(id) > 0 || corrupt_.count(id) > 0) {
      return std::nullopt;
    }
    if (ended_.count(id) > 0) return std::string("the job has a result");
    return std::string("the job has no JobGraph");
  };
  for (auto& record : progress.records) {
    const JobId id = wire::idFromWire<JobId>(record.get().getJobId());
    auto active = active_.find(id);
    if (active != active_.end()) {
      if (auto misfit =
              progressMisfit(readOnly<wire::JobGraph>(active->second.graph), record.get())) {
        logCorruptProgress(id, "it does not fit the job's JobGraph: " + *misfit);
      } else {
        active->second.progress = flatCopy(record.get());
      }
    } else if (auto why = orphanReason(id)) {
      removeOrphanProgress(id, *why);
    }
  }
  for (const store::CorruptRecord& record : progress.corrupt) {
    const std::optional<JobId> id = JobId::fromHex(record.key);
    if (!id) continue;  // Not a job id: the store logged it.
    if (active_.count(*id) > 0) {
      logCorruptProgress(*id, "it does not decode: " + record.reason);
    } else if (auto why = orphanReason(*id)) {
      removeOrphanProgress(*id, *why);
    }
  }
}

void Dispatcher::logCorruptProgress(JobId id, const std::string& reason) const {
  spdlog::error("dispatcher: the progress record of job {} is corrupt ({}); the job starts "
                "without it: its attempts still running are not adopted, and its JobMaster's "
                "first write replaces the record",
                id.toHex(), reason);
}

void Dispatcher::removeOrphanProgress(JobId id, const std::string& why) {
  const bool submittable = ended_.count(id) == 0;
  if (submittable) inFlight_.insert(id);
  tasks_.add(stores_.jobProgress().remove(id).then(
      [this, id, why, submittable](store::StoreResult<bool>&& removed) {
        if (submittable) inFlight_.erase(id);
        if (removed.ok()) {
          spdlog::info("dispatcher removed the progress record of job {} ({})", id.toHex(), why);
        } else {
          spdlog::warn("dispatcher: cannot remove the progress record of job {} ({}): {}; the "
                       "next leader tries again",
                       id.toHex(), why, removed.error().message);
        }
      }));
}

kj::Promise<Status> Dispatcher::finishCleanup(JobId id, bool withDetail) {
  auto ended = ended_.find(id);
  if (ended == ended_.end()) return Status();  // Pruned: its cleanup was finished.
  capnp::MallocMessageBuilder detailMessage;
  kj::Maybe<wire::JobStatus::Reader> detail;
  if (withDetail && fillStoredDetail(readOnly<wire::JobResult>(ended->second.result),
                                     ended->second.detail, detailMessage)) {
    detail = detailMessage.getRoot<wire::JobStatus>().asReader();
  }
  const bool dirty = !ended->second.clean;
  // cleanUp() encodes what it writes before it returns: the messages may go with this scope.
  return stores_.jobResults()
      .cleanUp(readOnly<wire::JobResult>(ended->second.result), detail)
      .then([this, id, dirty](store::StoreResult<std::string>&& cleaned) -> Status {
        if (!cleaned.ok()) {
          return Error::retryable("cannot finish the cleanup of ended job " + id.toHex() +
                                  " (its JobGraph and progress record removed and its result "
                                  "marked clean, in one transaction): " +
                                  cleaned.error().message);
        }
        if (!cleaned.value().empty()) {
          spdlog::warn("dispatcher: the detail of ended job {} is not kept (later leaders show "
                       "its result without subtask rows): {}",
                       id.toHex(), cleaned.value());
        }
        if (dirty) {
          spdlog::info("dispatcher finished the cleanup of job {} (dirty result)", id.toHex());
          markCleanInMemory(id);
        }
        return Status();
      });
}

kj::Promise<JobOutcome> Dispatcher::submit(wire::JobGraph::Reader graph) {
  if (auto violation = jobgraph::findJobGraphViolation(graph, limits_)) {
    JobFailure invalid = failure(JobFailure::Kind::kInvalidArgument, violation->describe());
    invalid.field = violation->field;
    invalid.fieldMessage = violation->message;
    return JobOutcome(kj::mv(invalid));
  }
  const JobId id = wire::idFromWire<JobId>(graph.getJobId());
  if (auto corrupt = corrupt_.find(id); corrupt != corrupt_.end()) {
    return JobOutcome(corruptFailure(id, corrupt->second, corruptResults_.count(id) > 0));
  }
  // A job whose progress record could outgrow the store would fail its puts for good once
  // running: refused now, naming the limit.
  uint64_t subtasks = 0;
  for (auto vertex : graph.getVertices()) subtasks += vertex.getParallelism();
  store::StoreResult<void> fits =
      stores_.jobProgress().admits(static_cast<uint32_t>(std::min<uint64_t>(subtasks, UINT32_MAX)));
  if (!fits.ok()) {
    JobFailure tooLarge = storeFailure(fits.error());
    tooLarge.field = "vertices";
    tooLarge.fieldMessage = fits.error().message;
    return JobOutcome(kj::mv(tooLarge));
  }
  auto existing = active_.find(id);
  if (existing != active_.end()) {
    if (sameGraph(graph, readOnly<wire::JobGraph>(existing->second.graph))) {
      return JobOutcome();  // A retried submission.
    }
    return JobOutcome(failure(JobFailure::Kind::kAlreadyExists,
                              "job " + id.toHex() + " exists with a different JobGraph", id));
  }
  // A job that already ended keeps its id for good while its result is kept (also while its
  // cleanup still runs).
  if (ended_.count(id) > 0) {
    return JobOutcome(failure(JobFailure::Kind::kAlreadyExists,
                              "job " + id.toHex() + " already ended; submit it with a new id", id));
  }
  if (inFlight_.count(id) > 0) {
    JobFailure busy = failure(JobFailure::Kind::kUnavailable,
                              "job " + id.toHex() + " is being submitted or cancelled; retry shortly");
    busy.retryAfterMs = kBusyRetryMs;
    return JobOutcome(kj::mv(busy));
  }

  kj::Array<capnp::word> accepted;
  {
    capnp::MallocMessageBuilder copy;
    copy.setRoot(graph);
    copy.getRoot<wire::JobGraph>().setSubmittedAtMs(nowMs_());
    accepted = flatCopy(copy.getRoot<wire::JobGraph>().asReader());
  }
  inFlight_.insert(id);
  auto written = stores_.jobGraphs().put(readOnly<wire::JobGraph>(accepted));
  return canceler_.wrap(written.then(
      [this, id, accepted = kj::mv(accepted)](store::StoreResult<void>&& written) mutable
      -> JobOutcome {
        inFlight_.erase(id);
        if (!written.ok()) return storeFailure(written.error());
        // Persisted before accepted.
        ActiveJob job;
        job.graph = kj::mv(accepted);
        job.stateChangedAtMs = nowMs_();
        auto added = active_.emplace(id, kj::mv(job)).first;
        spdlog::info("dispatcher accepted job {} epoch={}", id.toHex(), epoch_);
        start(id, added->second);
        return JobOutcome();
      }));
}

void Dispatcher::start(JobId id, ActiveJob& job) {
  if (runner_ == nullptr || job.started) return;
  job.started = true;
  kj::Maybe<wire::JobProgress::Reader> recovered;
  if (job.progress.size() > 0) recovered = readOnly<wire::JobProgress>(job.progress);
  runner_->start(id, readOnly<wire::JobGraph>(job.graph), recovered);
  job.progress = nullptr;  // The runner copied what it needs during the call.
}

bool Dispatcher::fillStoredDetail(wire::JobResult::Reader result,
                                  kj::ArrayPtr<const capnp::word> runnerDetail,
                                  capnp::MallocMessageBuilder& message) {
  if (runnerDetail.size() == 0) return false;
  message.setRoot(readOnly<wire::JobStatus>(runnerDetail));
  auto detail = message.getRoot<wire::JobStatus>();
  detail.setJobId(result.getJobId());
  detail.setName(result.getJobName());
  detail.setState(result.getState());
  detail.setSubmittedAtMs(result.getSubmittedAtMs());
  detail.setStateChangedAtMs(result.getEndedAtMs());
  detail.setEndedAtMs(result.getEndedAtMs());
  detail.setRestarts(result.getRestarts());
  detail.setWaitingReason("");
  return true;
}

kj::Promise<std::string> Dispatcher::loadDetail(JobId id) {
  auto ended = ended_.find(id);
  if (ended == ended_.end() || ended->second.detail.size() > 0) return std::string();
  if (!ended->second.detailMissing.empty()) return ended->second.detailMissing;
  return canceler_.wrap(stores_.jobResults().getDetail(id).then(
      [this, id](store::StoreResult<store::JobDetailMessage>&& stored) -> std::string {
        auto ended = ended_.find(id);
        if (ended == ended_.end()) return std::string();
        if (stored.ok()) {
          setDetail(ended->second, flatCopy(stored.value().get()));
          return std::string();
        }
        switch (stored.error().code) {
          case store::StoreErrorCode::kNotFound: {
            const std::string missing =
                "no detail of it is kept (it never ran, or it ended before details were kept)";
            // Kept only once the job's cleanup is done: until then its detail may still be on
            // its way to the store.
            if (ended->second.clean) ended->second.detailMissing = missing;
            return missing;
          }
          case store::StoreErrorCode::kCorrupt:
            spdlog::warn("dispatcher: {}", stored.error().message);
            ended->second.detailMissing = "its stored detail does not decode";
            return ended->second.detailMissing;
          default:  // Unavailable: tried again by the next call.
            return "its stored detail cannot be read now: " + stored.error().message;
        }
      }));
}

kj::Array<capnp::word> Dispatcher::describeOnRunner(JobId id) const {
  capnp::MallocMessageBuilder message;
  auto status = message.initRoot<wire::JobStatus>();
  if (!runner_->describe(id, status)) return nullptr;
  return flatCopy(status.asReader());
}

kj::Promise<JobOutcome> Dispatcher::cancel(JobId id) {
  auto found = active_.find(id);
  // Already being cancelled, or ended by its runner and being stored: the job is ending anyway,
  // and a repeated cancel succeeds without a second write.
  if (found != active_.end() &&
      (found->second.state == wire::JobState::CANCELLING || found->second.ending)) {
    return JobOutcome();
  }
  if (found == active_.end() && ended_.count(id) > 0) {  // Also while its cleanup still runs.
    return JobOutcome(
        failure(JobFailure::Kind::kFailedPrecondition, "job " + id.toHex() + " already ended", id));
  }
  if (inFlight_.count(id) > 0) {  // Its submission is being persisted.
    JobFailure busy = failure(JobFailure::Kind::kUnavailable,
                              "job " + id.toHex() + " is being submitted; retry shortly");
    busy.retryAfterMs = kBusyRetryMs;
    return JobOutcome(kj::mv(busy));
  }
  if (found == active_.end()) {
    if (auto corrupt = corrupt_.find(id); corrupt != corrupt_.end()) {
      return JobOutcome(corruptFailure(id, corrupt->second, corruptResults_.count(id) > 0));
    }
    if (ended_.count(id) > 0) {
      return JobOutcome(
          failure(JobFailure::Kind::kFailedPrecondition, "job " + id.toHex() + " already ended", id));
    }
    return JobOutcome(failure(JobFailure::Kind::kNotFound, "no job " + id.toHex(), id));
  }
  ActiveJob& job = found->second;
  const wire::JobState previous = job.state;
  job.state = wire::JobState::CANCELLING;
  job.stateChangedAtMs = nowMs_();
  auto graph = readOnly<wire::JobGraph>(job.graph);
  capnp::MallocMessageBuilder message;
  auto result = initResult(message, graph, wire::JobState::CANCELED, nowMs_());
  if (job.started) {
    capnp::MallocMessageBuilder scratch;
    uint32_t restarts = 0;
    if (runner_->counts(id, scratch.initRoot<wire::TaskCounts>(), restarts)) {
      result.setRestarts(restarts);
    }
  }
  // No retry: the caller learns the failure and may cancel again.
  return endJob(id, flatCopy(result.asReader()), "job canceled", previous, false)
      .then([this, id](JobOutcome&& outcome) {
        if (outcome.ok()) spdlog::info("dispatcher canceled job {} epoch={}", id.toHex(), epoch_);
        return kj::mv(outcome);
      });
}

void Dispatcher::jobStateChanged(JobId id, wire::JobState state, int64_t atMs) {
  auto found = active_.find(id);
  if (found == active_.end() || found->second.ending ||
      found->second.state == wire::JobState::CANCELLING) {
    return;  // Its end decides.
  }
  found->second.state = state;
  found->second.stateChangedAtMs = atMs;
}

void Dispatcher::jobEnded(JobId id, const JobEnd& end) {
  auto found = active_.find(id);
  if (found == active_.end() || found->second.ending) return;  // Unknown, or already ending.
  if (found->second.state == wire::JobState::CANCELLING) {
    // A cancel's CANCELED wins once stored; kept in case that write fails.
    found->second.endDuringCancel = std::make_unique<JobEnd>(end);
    return;
  }
  ActiveJob& job = found->second;
  const wire::JobState previous = job.state;
  job.ending = true;
  if (end.state == wire::JobState::FAILED) {
    job.state = wire::JobState::FAILING;
    job.stateChangedAtMs = nowMs_();
  }
  auto graph = readOnly<wire::JobGraph>(job.graph);
  capnp::MallocMessageBuilder message;
  auto result = initResult(message, graph, end.state, nowMs_());
  result.setNetRuntimeMs(end.netRuntimeMs);
  result.setRestarts(end.restarts);
  if (end.state == wire::JobState::FAILED || !end.failureMessage.empty()) {
    auto failed = result.initFailure();
    failed.setMessage(end.failureMessage);
    failed.setVertexName(end.failureVertex);
    failed.setSubtaskIndex(end.failureSubtask);
    if (!end.failureAttempt.isZero()) wire::setWireId(failed.initAttemptId(), end.failureAttempt);
    failed.setExitCode(end.failureExitCode);
    failed.setAtMs(end.failureAtMs);
  }
  const std::string cause = "job " + wire::enumNameUpper(end.state) +
                            (end.failureMessage.empty() ? "" : ": " + end.failureMessage);
  tasks_.add(endJob(id, flatCopy(result.asReader()), cause, previous, true).ignoreResult());
}

kj::Promise<store::StoreResult<void>> Dispatcher::storeEnd(JobId id,
                                                           wire::JobResult::Reader result,
                                                           kj::ArrayPtr<const capnp::word> detail,
                                                           bool retry, ExponentialBackoff backoff) {
  kj::Promise<store::StoreResult<void>> stored = nullptr;
  if (result.getState() == wire::JobState::FINISHED) {
    capnp::MallocMessageBuilder detailMessage;
    kj::Maybe<wire::JobStatus::Reader> storedDetail;
    if (fillStoredDetail(result, detail, detailMessage)) {
      storedDetail = detailMessage.getRoot<wire::JobStatus>().asReader();
    }
    // cleanUp() encodes what it writes before it returns: the message may go with this scope.
    stored = stores_.jobResults().cleanUp(result, storedDetail).then(
        [id](store::StoreResult<std::string>&& cleaned) -> store::StoreResult<void> {
          if (!cleaned.ok()) return cleaned.error();
          if (!cleaned.value().empty()) {
            spdlog::warn("dispatcher: the detail of ended job {} is not kept (later leaders "
                         "show its result without subtask rows): {}",
                         id.toHex(), cleaned.value());
          }
          return store::StoreResult<void>();
        });
  } else {
    stored = stores_.jobResults().createDirty(result);
  }
  return stored.then([this, id, result, detail, retry, backoff](
                         store::StoreResult<void>&& stored) mutable
                     -> kj::Promise<store::StoreResult<void>> {
    if (stored.ok() || !retry || stored.error().code != store::StoreErrorCode::kUnavailable) {
      return kj::mv(stored);
    }
    const Duration delay = backoff.next();
    spdlog::warn("dispatcher: the {} result of job {} could not be stored: {}; retrying in "
                 "{} ms",
                 wire::enumNameUpper(result.getState()), id.toHex(), stored.error().message,
                 delay.count());
    return timer_.afterDelay(delay.count() * kj::MILLISECONDS)
        .then([this, id, result, detail, retry, backoff]() mutable {
          return storeEnd(id, result, detail, retry, backoff);
        });
  });
}

kj::Promise<JobOutcome> Dispatcher::endJob(JobId id, kj::Array<capnp::word> result,
                                           std::string cause, wire::JobState previous,
                                           bool retry) {
  inFlight_.insert(id);
  cleaning_.insert(id);
  // A FINISHED end is stored with the cleanup (storeEnd): its detail goes with it, taken now.
  // The runner keeps the job's attempts as they are until release().
  const bool finished = readOnly<wire::JobResult>(result).getState() == wire::JobState::FINISHED;
  kj::Array<capnp::word> detail;
  if (auto found = active_.find(id); finished && found != active_.end() && found->second.started) {
    detail = describeOnRunner(id);
  }
  // The arrays move into the continuation; their words stay where the readers point.
  auto dirty = storeEnd(id, readOnly<wire::JobResult>(result), detail, retry,
                        ExponentialBackoff(kDirtyRetryInitial, kDirtyRetryMax));
  return canceler_.wrap(dirty.then(
      [this, id, result = kj::mv(result), detail = kj::mv(detail), finished,
       cause = std::move(cause), previous](store::StoreResult<void>&& dirty) mutable -> JobOutcome {
        auto found = active_.find(id);
        const auto ended = readOnly<wire::JobResult>(result);
        if (!dirty.ok()) {
          inFlight_.erase(id);
          cleaning_.erase(id);
          std::unique_ptr<JobEnd> endDuringCancel;
          if (found != active_.end()) {
            found->second.state = previous;
            found->second.ending = false;
            endDuringCancel = std::move(found->second.endDuringCancel);
          }
          if (endDuringCancel) {
            spdlog::warn("dispatcher: the CANCELED result of job {} could not be stored: {}; the "
                         "job ends as its runner reported meanwhile ({})",
                         id.toHex(), dirty.error().message,
                         wire::enumNameUpper(endDuringCancel->state));
            jobEnded(id, *endDuringCancel);
          } else if (dirty.error().code == store::StoreErrorCode::kFenced) {
            spdlog::warn("dispatcher: the {} result of job {} could not be stored: {}; this term "
                         "is over, and the next leader runs the job on from its JobGraph and "
                         "progress record",
                         wire::enumNameUpper(ended.getState()), id.toHex(), dirty.error().message);
          } else {
            spdlog::warn("dispatcher: the {} result of job {} could not be stored: {}; the job "
                         "stays active",
                         wire::enumNameUpper(ended.getState()), id.toHex(), dirty.error().message);
          }
          return storeFailure(dirty.error());
        }
        // From here the job is over: a new leader finishes a cleanup left half done.
        kj::Array<capnp::word> graph;
        bool started = false;
        if (found != active_.end()) {
          started = found->second.started;
          // Before release: the runner still holds the job's attempts as they are.
          if (started && !finished) detail = describeOnRunner(id);
          graph = kj::mv(found->second.graph);
          active_.erase(found);
        }
        addEnded(id, ended, false);
        // A job that never ran has no detail, here or in the store: nothing to read later.
        if (!started) ended_.at(id).detailMissing = "it ended before any of its subtasks ran";
        setDetail(ended_.at(id), kj::mv(detail));
        Event endedEvent("job ended");
        endedEvent.field("epoch", epoch_)
            .field("job", id.toHex())
            .field("state", wire::enumNameUpper(ended.getState()))
            .field("restarts", uint64_t{ended.getRestarts()});
        if (ended.hasFailure()) {
          const auto message = ended.getFailure().getMessage();
          endedEvent.quotedField("failure", std::string_view(message.begin(), message.size()));
        }
        events_.emit(endedEvent);
        releaseAndClean(id, kj::mv(graph), started, cause, ended.getState(), finished);
        return JobOutcome();
      }));
}

void Dispatcher::releaseAndClean(JobId id, kj::Array<capnp::word> graph, bool started,
                                 std::string cause, wire::JobState state, bool cleanStored) {
  kj::Promise<kj::Array<capnp::word>> released = kj::Array<capnp::word>();
  // The runner may read the graph until its release resolved.
  if (started) released = runner_->release(id, cause).attach(kj::mv(graph));
  tasks_.add(released
                 .then([this, id, cleanStored](
                           kj::Array<capnp::word>&& finalDetail) -> kj::Promise<Status> {
                   // The cancelled attempts in their final states. The job is dirty in memory
                   // until its cleanup is done, so it cannot have been pruned.
                   auto ended = ended_.find(id);
                   if (ended != ended_.end() && finalDetail.size() > 0) {
                     setDetail(ended->second, kj::mv(finalDetail));
                   }
                   if (cleanStored) {
                     // storeEnd() stored it clean with its cleanup and detail, before release.
                     markCleanInMemory(id);
                     return Status();
                   }
                   // Kept with the result marked clean: a clean result has its detail.
                   return finishCleanup(id, true);
                 })
                 .then([this, id, state](Status&& cleaned) {
                   inFlight_.erase(id);
                   cleaning_.erase(id);
                   if (!cleaned.ok()) {
                     spdlog::warn("dispatcher: job {} ended; cleanup left to the next leader: {}",
                                  id.toHex(), cleaned.error().message);
                     return;
                   }
                   events_.emit(Event("job clean")
                                    .field("epoch", epoch_)
                                    .field("job", id.toHex())
                                    .field("state", wire::enumNameUpper(state)));
                 }));
}

kj::Promise<JobOutcome> Dispatcher::removeCorrupt(JobId id) {
  if (inFlight_.count(id) > 0) {
    JobFailure busy = failure(JobFailure::Kind::kUnavailable,
                              "job " + id.toHex() + " is being changed; retry shortly");
    busy.retryAfterMs = kBusyRetryMs;
    return JobOutcome(kj::mv(busy));
  }
  if (active_.count(id) > 0 || ended_.count(id) > 0) {
    return JobOutcome(failure(JobFailure::Kind::kFailedPrecondition,
                              "job " + id.toHex() + " is not corrupt; only a JobGraph record that "
                              "does not decode can be removed (cancel a job instead)",
                              id));
  }
  if (corruptResults_.count(id) > 0) {
    return JobOutcome(failure(JobFailure::Kind::kFailedPrecondition,
                              "job " + id.toHex() + " is CORRUPT because its job result record "
                              "does not decode; only a JobGraph record that does not decode can "
                              "be removed, and a job with a result never runs again",
                              id));
  }
  // Read the record again: only what still does not decode is removed.
  inFlight_.insert(id);
  return canceler_.wrap(stores_.jobGraphs().get(id).then(
      [this, id](store::StoreResult<store::JobGraphMessage>&& record)
          -> kj::Promise<JobOutcome> {
        if (record.ok()) {
          inFlight_.erase(id);
          return JobOutcome(failure(
              JobFailure::Kind::kFailedPrecondition,
              "the JobGraph record of job " + id.toHex() +
                  " decodes; it is not corrupt and was not removed (cancel the job instead)",
              id));
        }
        if (record.error().code == store::StoreErrorCode::kNotFound) {
          inFlight_.erase(id);
          corrupt_.erase(id);
          return JobOutcome(failure(JobFailure::Kind::kNotFound,
                                    "no JobGraph record is stored for job " + id.toHex(), id));
        }
        if (record.error().code != store::StoreErrorCode::kCorrupt) {
          inFlight_.erase(id);
          return JobOutcome(storeFailure(record.error()));
        }
        const std::string reason = record.error().message;
        // Its progress record first: the id is free once the JobGraph is gone, and a job
        // submitted again under it must not inherit the old job's progress.
        return stores_.jobProgress()
            .remove(id)
            .then([this, id](store::StoreResult<bool>&& progressRemoved)
                      -> kj::Promise<store::StoreResult<bool>> {
              if (!progressRemoved.ok()) return kj::mv(progressRemoved);
              return stores_.jobGraphs().remove(id);
            })
            .then([this, id, reason](store::StoreResult<bool>&& removed) -> JobOutcome {
              inFlight_.erase(id);
              if (!removed.ok()) return storeFailure(removed.error());
              corrupt_.erase(id);
              spdlog::warn("dispatcher removed the corrupt JobGraph record of job {} epoch={} ({})",
                           id.toHex(), epoch_, reason);
              return JobOutcome();
            });
      }));
}

JobView Dispatcher::corruptViewOf(JobId id, const std::string& reason) const {
  JobView view;
  view.id = id;
  view.state = wire::JobState::CORRUPT;
  view.corruptReason = reason;
  return view;
}

JobView Dispatcher::viewOf(JobId id, const ActiveJob& job) const {
  JobView view;
  view.id = id;
  view.state = job.state;
  view.stateChangedAtMs = job.stateChangedAtMs;
  view.graph = readOnly<wire::JobGraph>(job.graph);
  if (job.started) view.runner = runner_;
  return view;
}

JobView Dispatcher::viewOf(JobId id, const EndedJob& job) const {
  JobView view;
  view.id = id;
  auto result = readOnly<wire::JobResult>(job.result);
  view.state = result.getState();
  view.stateChangedAtMs = result.getEndedAtMs();
  view.result = result;
  if (job.detail.size() > 0) view.detail = readOnly<wire::JobStatus>(job.detail);
  view.detailMissing = job.detailMissing;
  return view;
}

kj::Maybe<JobView> Dispatcher::job(JobId id) const {
  auto active = active_.find(id);
  if (active != active_.end()) return viewOf(id, active->second);
  auto ended = ended_.find(id);
  if (ended != ended_.end()) return viewOf(id, ended->second);
  auto corrupt = corrupt_.find(id);
  if (corrupt != corrupt_.end()) return corruptViewOf(id, corrupt->second);
  return nullptr;
}

void Dispatcher::forEachJob(const std::function<void(const JobView&)>& visit) const {
  for (const auto& [id, job] : active_) visit(viewOf(id, job));
  for (const auto& [id, reason] : corrupt_) visit(corruptViewOf(id, reason));
  for (auto it = endedByAge_.rbegin(); it != endedByAge_.rend(); ++it) {
    visit(viewOf(it->second, ended_.at(it->second)));
  }
}

JobCounts Dispatcher::counts() const {
  JobCounts counts;
  counts.active = static_cast<uint32_t>(active_.size());
  auto count = [&counts](wire::JobState state) {
    const auto index = static_cast<size_t>(state);
    if (index < counts.byState.size()) ++counts.byState[index];
  };
  for (const auto& [id, job] : active_) count(job.state);
  for (const auto& [id, job] : ended_) count(readOnly<wire::JobResult>(job.result).getState());
  counts.byState[static_cast<size_t>(wire::JobState::CORRUPT)] +=
      static_cast<uint32_t>(corrupt_.size());
  return counts;
}

size_t Dispatcher::heldBytesForTests() const {
  size_t bytes = 0;
  for (const auto& [id, job] : active_) {
    bytes += job.graph.asBytes().size() + job.progress.asBytes().size();
  }
  for (const auto& [id, job] : ended_) {
    bytes += job.result.asBytes().size() + job.detail.asBytes().size();
  }
  return bytes;
}

}  // namespace regent::dispatcher

// The Dispatcher: recovery at the start of a term, submission (validate, persist, accept),
// cancellation (dirty result, JobGraph removed, result clean), listing and status.
#include "services/dispatcher/dispatcher.h"

#include <capnp/message.h>
#include <kj/debug.h>
#include <spdlog/spdlog.h>

#include <string>
#include <utility>
#include <vector>

namespace regent::dispatcher {
namespace {

constexpr uint64_t kRecoveringRetryMs = 500;

JobId jobIdOf(wire::Id128::Reader id) { return JobId(id.getHi(), id.getLo()); }

void setJobId(wire::Id128::Builder target, const JobId& id) {
  target.setHi(id.hi());
  target.setLo(id.lo());
}

void setUnavailable(wire::Failure::Builder failure, const std::string& message,
                    uint64_t retryAfterMs = 0) {
  failure.setMessage(message);
  failure.initUnavailable().setRetryAfterMs(retryAfterMs);
}

void setRecovering(wire::Failure::Builder failure, uint64_t epoch) {
  setUnavailable(failure,
                 "the leader of epoch " + std::to_string(epoch) +
                     " is still recovering its jobs; retry shortly",
                 kRecoveringRetryMs);
}

void setNotFound(wire::Failure::Builder failure, const JobId& id) {
  failure.setMessage("no job " + id.toHex());
  setJobId(failure.initNotFound().initJob(), id);
}

// A store failure as the caller sees it: too large is the caller's problem, everything else is
// the leader's (retry later; a fenced store means this term is ending).
void setStoreFailure(wire::Failure::Builder failure, const store::StoreError& error) {
  if (error.code == store::StoreErrorCode::kTooLarge) {
    failure.setMessage(error.message);
    auto tooLarge = failure.initTooLarge();
    tooLarge.setSizeBytes(error.sizeBytes);
    tooLarge.setLimitBytes(error.limitBytes);
    return;
  }
  if (error.code == store::StoreErrorCode::kInvalid) {
    failure.setMessage(error.message);
    failure.initInvalidArgument().setMessage(error.message);
    return;
  }
  setUnavailable(failure, "the job store cannot be used: " + error.message);
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

// Status of a job that has a JobGraph and no result: every subtask pending.
void fillActiveStatus(wire::JobStatus::Builder status, wire::JobGraph::Reader graph,
                      wire::JobState state, int64_t stateChangedAtMs) {
  status.setJobId(graph.getJobId());
  status.setName(graph.getName());
  status.setState(state);
  status.setSubmittedAtMs(graph.getSubmittedAtMs());
  status.setStateChangedAtMs(stateChangedAtMs);
  uint32_t total = 0;
  auto vertices = status.initVertices(graph.getVertices().size());
  for (uint32_t i = 0; i < graph.getVertices().size(); ++i) {
    auto vertex = graph.getVertices()[i];
    vertices[i].setName(vertex.getName());
    vertices[i].setParallelism(vertex.getParallelism());
    vertices[i].initTasks().setTotal(vertex.getParallelism());
    vertices[i].getTasks().setPending(vertex.getParallelism());
    total += vertex.getParallelism();
  }
  status.initTasks().setTotal(total);
  status.getTasks().setPending(total);
}

void fillTerminalStatus(wire::JobStatus::Builder status, wire::JobResult::Reader result) {
  status.setJobId(result.getJobId());
  status.setName(result.getJobName());
  status.setState(result.getState());
  status.setSubmittedAtMs(result.getSubmittedAtMs());
  status.setStateChangedAtMs(result.getEndedAtMs());
  status.setEndedAtMs(result.getEndedAtMs());
  status.setRestarts(result.getRestarts());
  if (result.hasFailure()) status.setFailure(result.getFailure());
}

}  // namespace

Dispatcher::Dispatcher(uint64_t epoch, store::LeaderStores& stores, JobGraphLimits limits,
                       std::function<int64_t()> nowMs)
    : epoch_(epoch), stores_(stores), limits_(std::move(limits)), nowMs_(std::move(nowMs)) {}

Dispatcher::~Dispatcher() noexcept = default;

template <typename Context>
bool Dispatcher::recoveredOrAnswered(Context& context) {
  if (recovered_) return true;
  setRecovering(context.getResults().initFailure(), epoch_);
  return false;
}

kj::Promise<Status> Dispatcher::recover() {
  return canceler_.wrap(
      stores_.jobResults().listAll().then(
          [this](store::StoreResult<store::JobResults>&& results) -> kj::Promise<Status> {
            if (!results.ok()) {
              return Status(Error::retryable("cannot read the job results: " +
                                             results.error().message));
            }
            std::map<JobId, bool> ended;  // job -> dirty
            for (auto& result : results.value().results) {
              ended[jobIdOf(result.get().getJobId())] = !result.get().getClean();
            }
            return stores_.jobGraphs().recoverAll().then(
                [this, ended = kj::mv(ended)](
                    store::StoreResult<store::RecoveredJobGraphs>&& graphs) mutable
                -> kj::Promise<Status> {
                  if (!graphs.ok()) {
                    return Status(Error::retryable("cannot read the JobGraphs: " +
                                                   graphs.error().message));
                  }
                  kj::Vector<kj::Promise<Status>> cleanups;
                  for (auto& graph : graphs.value().graphs) {
                    const JobId id = jobIdOf(graph.get().getJobId());
                    auto endedJob = ended.find(id);
                    if (endedJob != ended.end()) {
                      // The job ended in an earlier term: finish its cleanup, never re-run it.
                      cleanups.add(finishCleanup(id, endedJob->second));
                      ended.erase(endedJob);
                      continue;
                    }
                    Job job;
                    job.graph = kj::heap<capnp::MallocMessageBuilder>();
                    job.graph->setRoot(graph.get());
                    job.stateChangedAtMs = nowMs_();
                    jobs_.emplace(id, kj::mv(job));
                  }
                  for (auto& [id, dirty] : ended) {
                    if (dirty) cleanups.add(finishCleanup(id, true));
                  }
                  return kj::joinPromises(cleanups.releaseAsArray())
                      .then([this](kj::Array<Status>&& done) -> Status {
                        for (auto& status : done) {
                          if (!status.ok()) return status;
                        }
                        recovered_ = true;
                        spdlog::info("dispatcher recovered epoch={} jobs={}", epoch_,
                                     jobs_.size());
                        return Status();
                      });
                });
          }));
}

kj::Promise<Status> Dispatcher::finishCleanup(JobId id, bool dirty) {
  return stores_.jobGraphs().remove(id).then(
      [this, id, dirty](store::StoreResult<bool>&& removed) -> kj::Promise<Status> {
        if (!removed.ok()) {
          return Status(Error::retryable("cannot remove the JobGraph of ended job " +
                                         id.toHex() + ": " + removed.error().message));
        }
        if (!dirty) return Status();
        spdlog::info("dispatcher finished the cleanup of job {} (dirty result)", id.toHex());
        return stores_.jobResults().markClean(id).then(
            [id](store::StoreResult<void>&& clean) -> Status {
              if (!clean.ok()) {
                return Error::retryable("cannot mark the result of job " + id.toHex() +
                                        " clean: " + clean.error().message);
              }
              return Status();
            });
      });
}

kj::Promise<void> Dispatcher::submitJob(SubmitJobContext context) {
  if (!recoveredOrAnswered(context)) return kj::READY_NOW;
  auto params = context.getParams();
  if (!params.hasJobGraph()) {
    auto failure = context.getResults().initFailure();
    failure.setMessage("jobGraph: missing");
    failure.initInvalidArgument().setField("jobGraph");
    failure.getInvalidArgument().setMessage("missing");
    return kj::READY_NOW;
  }
  auto graph = params.getJobGraph();
  if (auto violation = findJobGraphViolation(graph, limits_)) {
    auto failure = context.getResults().initFailure();
    failure.setMessage(violation->describe());
    failure.initInvalidArgument().setField(violation->field);
    failure.getInvalidArgument().setMessage(violation->message);
    return kj::READY_NOW;
  }
  const JobId id = jobIdOf(graph.getJobId());
  auto existing = jobs_.find(id);
  if (existing != jobs_.end()) {
    auto stored = existing->second.graph->getRoot<wire::JobGraph>().asReader();
    if (sameGraph(graph, stored)) {  // A retried submission.
      setJobId(context.getResults().initJobId(), id);
    } else {
      auto failure = context.getResults().initFailure();
      failure.setMessage("job " + id.toHex() + " exists with a different JobGraph");
      setJobId(failure.initAlreadyExists().initJob(), id);
    }
    return kj::READY_NOW;
  }
  if (inFlight_.count(id) > 0) {
    setUnavailable(context.getResults().initFailure(),
                   "job " + id.toHex() + " is being submitted or cancelled; retry shortly",
                   kRecoveringRetryMs);
    return kj::READY_NOW;
  }

  auto accepted = kj::heap<capnp::MallocMessageBuilder>();
  accepted->setRoot(graph);
  accepted->getRoot<wire::JobGraph>().setSubmittedAtMs(nowMs_());
  context.releaseParams();
  inFlight_.insert(id);
  // A job that already ended keeps its id for good: its result is still in the store.
  return canceler_.wrap(
      stores_.jobResults().get(id).then(
          [this, id, context, accepted = kj::mv(accepted)](
              store::StoreResult<store::JobResultMessage>&& ended) mutable -> kj::Promise<void> {
            if (ended.ok()) {
              inFlight_.erase(id);
              auto failure = context.getResults().initFailure();
              failure.setMessage("job " + id.toHex() + " already ended; submit it with a new id");
              setJobId(failure.initAlreadyExists().initJob(), id);
              return kj::READY_NOW;
            }
            if (ended.error().code != store::StoreErrorCode::kNotFound &&
                ended.error().code != store::StoreErrorCode::kCorrupt) {
              inFlight_.erase(id);
              setStoreFailure(context.getResults().initFailure(), ended.error());
              return kj::READY_NOW;
            }
            auto reader = accepted->getRoot<wire::JobGraph>().asReader();
            return stores_.jobGraphs().put(reader).then(
                [this, id, context, accepted = kj::mv(accepted)](
                    store::StoreResult<void>&& written) mutable {
                  inFlight_.erase(id);
                  if (!written.ok()) {
                    setStoreFailure(context.getResults().initFailure(), written.error());
                    return;
                  }
                  // Persisted before accepted (DESIGN §7).
                  Job job;
                  job.graph = kj::mv(accepted);
                  job.stateChangedAtMs = nowMs_();
                  jobs_.emplace(id, kj::mv(job));
                  setJobId(context.getResults().initJobId(), id);
                  spdlog::info("dispatcher accepted job {} epoch={}", id.toHex(), epoch_);
                });
          }));
}

kj::Promise<void> Dispatcher::cancelJob(CancelJobContext context) {
  if (!recoveredOrAnswered(context)) return kj::READY_NOW;
  const JobId id = jobIdOf(context.getParams().getJobId());
  auto found = jobs_.find(id);
  // Already being cancelled: a repeated cancel succeeds without a second write.
  if (found != jobs_.end() && found->second.state == wire::JobState::CANCELLING) {
    return kj::READY_NOW;
  }
  if (inFlight_.count(id) > 0) {  // Its submission is being persisted.
    setUnavailable(context.getResults().initFailure(),
                   "job " + id.toHex() + " is being submitted; retry shortly", kRecoveringRetryMs);
    return kj::READY_NOW;
  }
  if (found == jobs_.end()) {
    return canceler_.wrap(stores_.jobResults().get(id).then(
        [id, context](store::StoreResult<store::JobResultMessage>&& result) mutable {
          auto failure = context.getResults().initFailure();
          if (result.ok()) {
            failure.setMessage("job " + id.toHex() + " already ended");
            failure.setFailedPrecondition();
          } else if (result.error().code == store::StoreErrorCode::kNotFound) {
            setNotFound(failure, id);
          } else {
            setStoreFailure(failure, result.error());
          }
        }));
  }
  Job& job = found->second;
  job.state = wire::JobState::CANCELLING;
  job.stateChangedAtMs = nowMs_();
  auto graph = job.graph->getRoot<wire::JobGraph>().asReader();
  capnp::MallocMessageBuilder message;
  auto result = message.initRoot<wire::JobResult>();
  result.setJobId(graph.getJobId());
  result.setJobName(graph.getName());
  result.setState(wire::JobState::CANCELED);
  result.setSubmittedAtMs(graph.getSubmittedAtMs());
  result.setEndedAtMs(nowMs_());
  inFlight_.insert(id);
  return canceler_.wrap(
      stores_.jobResults()
          .createDirty(result.asReader())
          .then([this, id, context](store::StoreResult<void>&& dirty) mutable
                -> kj::Promise<void> {
            if (!dirty.ok()) {
              inFlight_.erase(id);
              auto job = jobs_.find(id);
              if (job != jobs_.end()) job->second.state = wire::JobState::CREATED;
              setStoreFailure(context.getResults().initFailure(), dirty.error());
              return kj::READY_NOW;
            }
            // From here the job is over: a new leader finishes a cleanup left half done.
            jobs_.erase(id);
            return finishCleanup(id, true).then([this, id, context](Status&& cleaned) mutable {
              inFlight_.erase(id);
              if (!cleaned.ok()) {
                spdlog::warn("dispatcher: job {} canceled; cleanup left to the next leader: {}",
                             id.toHex(), cleaned.error().message);
              }
              spdlog::info("dispatcher canceled job {} epoch={}", id.toHex(), epoch_);
            });
          }));
}

kj::Promise<void> Dispatcher::listJobs(ListJobsContext context) {
  if (!recoveredOrAnswered(context)) return kj::READY_NOW;
  return canceler_.wrap(stores_.jobResults().listAll().then(
      [this, context](store::StoreResult<store::JobResults>&& results) mutable {
        if (!results.ok()) {
          setStoreFailure(context.getResults().initFailure(), results.error());
          return;
        }
        auto& ended = results.value().results;
        auto jobs = context.getResults().initJobs(jobs_.size() + ended.size());
        uint32_t i = 0;
        for (auto& [id, job] : jobs_) {
          fillActiveStatus(jobs[i++], job.graph->getRoot<wire::JobGraph>().asReader(), job.state,
                           job.stateChangedAtMs);
        }
        for (auto& result : ended) fillTerminalStatus(jobs[i++], result.get());
      }));
}

kj::Promise<void> Dispatcher::jobStatus(JobStatusContext context) {
  if (!recoveredOrAnswered(context)) return kj::READY_NOW;
  const JobId id = jobIdOf(context.getParams().getJobId());
  auto found = jobs_.find(id);
  if (found != jobs_.end()) {
    fillActiveStatus(context.getResults().initStatus(),
                     found->second.graph->getRoot<wire::JobGraph>().asReader(),
                     found->second.state, found->second.stateChangedAtMs);
    return kj::READY_NOW;
  }
  return canceler_.wrap(stores_.jobResults().get(id).then(
      [id, context](store::StoreResult<store::JobResultMessage>&& result) mutable {
        auto results = context.getResults();
        if (!result.ok()) {
          if (result.error().code == store::StoreErrorCode::kNotFound) {
            setNotFound(results.initFailure(), id);
          } else {
            setStoreFailure(results.initFailure(), result.error());
          }
          return;
        }
        fillTerminalStatus(results.initStatus(), result.value().get());
        results.setResult(result.value().get());
      }));
}

kj::Promise<void> Dispatcher::clusterOverview(ClusterOverviewContext context) {
  if (!recoveredOrAnswered(context)) return kj::READY_NOW;
  return canceler_.wrap(stores_.jobResults().listAll().then(
      [this, context](store::StoreResult<store::JobResults>&& results) mutable {
        auto overview = context.getResults().initOverview();
        overview.setJobsRunning(static_cast<uint32_t>(jobs_.size()));
        if (!results.ok()) return;  // Counts of ended jobs stay 0; never fails (schema).
        uint32_t finished = 0, canceled = 0, failed = 0;
        for (auto& result : results.value().results) {
          switch (result.get().getState()) {
            case wire::JobState::FINISHED: ++finished; break;
            case wire::JobState::CANCELED: ++canceled; break;
            case wire::JobState::FAILED: ++failed; break;
            default: break;
          }
        }
        overview.setJobsFinished(finished);
        overview.setJobsCanceled(canceled);
        overview.setJobsFailed(failed);
      }));
}

}  // namespace regent::dispatcher

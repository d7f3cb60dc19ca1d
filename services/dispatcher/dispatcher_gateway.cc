// DispatcherGatewayServer: wire <-> Dispatcher.
#include "services/dispatcher/dispatcher_gateway.h"

#include <capnp/message.h>

#include <utility>

#include "common/time.h"
#include "rpc/failure.h"
#include "rpc/wire_ids.h"

namespace regent::dispatcher {

void toWire(const JobFailure& outcome, wire::Failure::Builder failure) {
  namespace failures = rpc::failures;
  switch (outcome.kind) {
    case JobFailure::Kind::kInvalidArgument:
      failures::invalidArgument(failure, outcome.field, outcome.fieldMessage, outcome.message);
      return;
    case JobFailure::Kind::kNotFound:
      failures::notFound(failure, outcome.job, outcome.message);
      return;
    case JobFailure::Kind::kAlreadyExists:
      failures::alreadyExists(failure, outcome.job, outcome.message);
      return;
    case JobFailure::Kind::kFailedPrecondition:
      failures::failedPrecondition(failure, outcome.message);
      return;
    case JobFailure::Kind::kTooLarge:
      failures::tooLarge(failure, outcome.sizeBytes, outcome.limitBytes, outcome.message);
      return;
    case JobFailure::Kind::kUnavailable:
      failures::unavailable(failure, outcome.retryAfterMs, outcome.message);
      return;
  }
  failure.setMessage(outcome.message);
}

void toWire(const JobView& job, wire::JobStatus::Builder status, JobDetail detail) {
  KJ_IF_MAYBE (reason, job.corruptReason) {
    wire::setWireId(status.initJobId(), job.id);
    status.setState(wire::JobState::CORRUPT);
    status.setCorruptReason(*reason);
    return;
  }
  KJ_IF_MAYBE (result, job.result) {
    status.setJobId(result->getJobId());
    status.setName(result->getJobName());
    status.setState(result->getState());
    status.setSubmittedAtMs(result->getSubmittedAtMs());
    status.setStateChangedAtMs(result->getEndedAtMs());
    status.setEndedAtMs(result->getEndedAtMs());
    status.setRestarts(result->getRestarts());
    if (result->hasFailure()) status.setFailure(result->getFailure());
    // jobStatus: its final attempts (from its runner in this term, or kept in the store).
    KJ_IF_MAYBE (last, job.detail) {
      if (detail == JobDetail::kSubtasks) {
        status.setTasks(last->getTasks());
        status.setVertices(last->getVertices());
        if (last->hasSubtasksOmitted()) status.setSubtasksOmitted(last->getSubtasksOmitted());
      }
    } else if (detail == JobDetail::kSubtasks && !job.detailMissing.empty()) {
      status.setSubtasksOmitted(job.detailMissing);
    }
    return;
  }
  auto graph = KJ_ASSERT_NONNULL(job.graph);
  status.setJobId(graph.getJobId());
  status.setName(graph.getName());
  status.setState(job.state);
  status.setSubmittedAtMs(graph.getSubmittedAtMs());
  status.setStateChangedAtMs(job.stateChangedAtMs);
  if (job.runner != nullptr) {
    // The live detail comes from the runner; the state is the Dispatcher's (it alone knows a
    // job being cancelled or whose end is being stored).
    if (detail == JobDetail::kSubtasks && job.runner->describe(job.id, status)) {
      status.setState(job.state);
      status.setStateChangedAtMs(job.stateChangedAtMs);
      return;
    }
    uint32_t restarts = 0;
    if (detail == JobDetail::kCounts && job.runner->counts(job.id, status.initTasks(), restarts)) {
      status.setRestarts(restarts);
      // Per vertex only the size: listJobs carries the counts of the whole job.
      auto vertices = status.initVertices(graph.getVertices().size());
      for (uint32_t i = 0; i < graph.getVertices().size(); ++i) {
        vertices[i].setName(graph.getVertices()[i].getName());
        vertices[i].setParallelism(graph.getVertices()[i].getParallelism());
        vertices[i].initTasks().setTotal(graph.getVertices()[i].getParallelism());
      }
      return;
    }
  }
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

kj::Promise<void> DispatcherGatewayServer::submitJob(SubmitJobContext context) {
  auto params = context.getParams();
  if (!params.hasJobGraph()) {
    auto failure = context.getResults().initFailure();
    failure.setMessage("jobGraph: missing");
    failure.initInvalidArgument().setField("jobGraph");
    failure.getInvalidArgument().setMessage("missing");
    return kj::READY_NOW;
  }
  const JobId id = wire::idFromWire<JobId>(params.getJobGraph().getJobId());
  auto submitted = dispatcher_.submit(params.getJobGraph());  // Copies what it keeps.
  context.releaseParams();
  return submitted.then([context, id](JobOutcome&& outcome) mutable {
    if (!outcome.ok()) {
      toWire(outcome.error(), context.getResults().initFailure());
    } else {
      wire::setWireId(context.getResults().initJobId(), id);
    }
  });
}

kj::Promise<void> DispatcherGatewayServer::cancelJob(CancelJobContext context) {
  return dispatcher_.cancel(wire::idFromWire<JobId>(context.getParams().getJobId()))
      .then([context](JobOutcome&& outcome) mutable {
        if (!outcome.ok()) toWire(outcome.error(), context.getResults().initFailure());
      });
}

kj::Promise<void> DispatcherGatewayServer::listJobs(ListJobsContext context) {
  auto jobs = context.getResults().initJobs(static_cast<uint32_t>(dispatcher_.jobCount()));
  uint32_t i = 0;
  dispatcher_.forEachJob([&](const JobView& job) {
    toWire(job, jobs[i++], JobDetail::kCounts);
  });
  return kj::READY_NOW;
}

kj::Promise<void> DispatcherGatewayServer::jobStatus(JobStatusContext context) {
  const JobId id = wire::idFromWire<JobId>(context.getParams().getJobId());
  KJ_IF_MAYBE (job, dispatcher_.job(id)) {
    if (job->result != nullptr && job->detail == nullptr) {
      // Ended under an earlier leader (or let go from memory): its detail from the store.
      return dispatcher_.loadDetail(id).then([this, context, id](std::string missing) mutable {
        auto results = context.getResults();
        KJ_IF_MAYBE (job, dispatcher_.job(id)) {
          auto status = results.initStatus();
          toWire(*job, status, JobDetail::kSubtasks);
          KJ_IF_MAYBE (result, job->result) results.setResult(*result);
          // A read that failed for now (not kept in detailMissing): said this once.
          if (job->detail == nullptr && !status.hasSubtasksOmitted() && !missing.empty()) {
            status.setSubtasksOmitted(missing);
          }
        } else {
          toWire(JobFailure{JobFailure::Kind::kNotFound, "no job " + id.toHex(), id},
                 results.initFailure());
        }
      });
    }
  }
  auto results = context.getResults();
  KJ_IF_MAYBE (job, dispatcher_.job(id)) {
    toWire(*job, results.initStatus(), JobDetail::kSubtasks);
    KJ_IF_MAYBE (result, job->result) results.setResult(*result);
  } else {
    toWire(JobFailure{JobFailure::Kind::kNotFound, "no job " + id.toHex(), id},
           results.initFailure());
  }
  return kj::READY_NOW;
}

kj::Promise<void> DispatcherGatewayServer::removeCorruptJob(RemoveCorruptJobContext context) {
  return dispatcher_.removeCorrupt(wire::idFromWire<JobId>(context.getParams().getJobId()))
      .then([context](JobOutcome&& outcome) mutable {
        if (!outcome.ok()) toWire(outcome.error(), context.getResults().initFailure());
      });
}

kj::Promise<void> DispatcherGatewayServer::attemptOutputToken(AttemptOutputTokenContext context) {
  auto params = context.getParams();
  const JobId job = wire::idFromWire<JobId>(params.getJobId());
  const AttemptId attempt = wire::idFromWire<AttemptId>(params.getAttemptId());
  auto failure = [&]() { return context.getResults().initFailure(); };
  if (outputTokens_ == nullptr) {
    rpc::failures::failedPrecondition(failure(), "this master issues no output-read tokens");
    return kj::READY_NOW;
  }
  const rpc::OutputStreamSet streams =
      params.getStreams() == wire::OutputStreams::STDOUT_ONLY   ? rpc::OutputStreamSet::kStdout
      : params.getStreams() == wire::OutputStreams::STDERR_ONLY ? rpc::OutputStreamSet::kStderr
                                                                : rpc::OutputStreamSet::kBoth;
  KJ_IF_MAYBE (view, dispatcher_.job(job)) {
    // The same description jobStatus answers: a token only for an attempt a reader can see there.
    capnp::MallocMessageBuilder scratch;
    auto status = scratch.initRoot<wire::JobStatus>();
    toWire(*view, status, JobDetail::kSubtasks);
    for (auto vertex : status.asReader().getVertices()) {
      for (auto subtask : vertex.getSubtasks()) {
        if (!subtask.hasAttempt() ||
            wire::idFromWire<AttemptId>(subtask.getAttempt().getAttemptId()) != attempt) {
          continue;
        }
        if (!subtask.hasResourceId()) {
          rpc::failures::failedPrecondition(
              failure(), "attempt " + attempt.toHex() + " of job " + job.toHex() +
                             " has no worker yet, so there is no output to read");
          return kj::READY_NOW;
        }
        const ResourceId worker = wire::idFromWire<ResourceId>(subtask.getResourceId());
        const std::optional<RegistrationId> registration = outputTokens_->registrationOf(worker);
        if (!registration) {
          rpc::failures::failedPrecondition(
              failure(), "the worker " + worker.toHex() + " of attempt " + attempt.toHex() +
                             " is not registered with this leader, so its output cannot be "
                             "reached");
          return kj::READY_NOW;
        }
        const int64_t nowMs = outputTokens_->nowMs ? outputTokens_->nowMs() : wallClockMillis();
        auto results = context.getResults();
        results.setToken(
            outputTokens_->signer.sign(worker, *registration, attempt, streams, nowMs / 1000));
        // The token's expiry is in whole seconds: what is left of the TTL after this one.
        results.setValidForMs(
            static_cast<uint64_t>(outputTokens_->signer.ttlSeconds() * 1000 - nowMs % 1000));
        results.setHttpAddress(subtask.getHttpAddress());
        return kj::READY_NOW;
      }
    }
    rpc::failures::notFound(failure(), attempt,
                            "attempt " + attempt.toHex() +
                                " is not the latest attempt of a subtask of job " + job.toHex() +
                                " that this leader describes");
    return kj::READY_NOW;
  }
  toWire(JobFailure{JobFailure::Kind::kNotFound, "no job " + job.toHex(), job}, failure());
  return kj::READY_NOW;
}

kj::Promise<void> DispatcherGatewayServer::clusterOverview(ClusterOverviewContext context) {
  const JobCounts counts = dispatcher_.counts();
  auto overview = context.getResults().initOverview();
  overview.setJobsRunning(counts.active);  // Every job not terminal.
  overview.setJobsFinished(counts.of(wire::JobState::FINISHED));
  overview.setJobsCanceled(counts.of(wire::JobState::CANCELED));
  overview.setJobsFailed(counts.of(wire::JobState::FAILED));
  if (describeLeader_) describeLeader_(overview.initLeader());
  if (taskExecutors_ != nullptr) {
    const TaskExecutorView::Counts workers = taskExecutors_->counts();
    overview.setTaskExecutors(workers.taskExecutors);
    overview.setSlotsTotal(workers.slotsTotal);
    overview.setSlotsFree(workers.slotsFree);
  }
  return kj::READY_NOW;
}

kj::Promise<void> DispatcherGatewayServer::listTaskExecutors(ListTaskExecutorsContext context) {
  auto results = context.getResults();
  if (taskExecutors_ == nullptr) {
    results.initTaskExecutors(0);
    return kj::READY_NOW;
  }
  results.adoptTaskExecutors(
      taskExecutors_->list(capnp::Orphanage::getForMessageContaining(results)));
  taskExecutors_->listStartedWorkers(results.initStartedWorkers(
      static_cast<unsigned>(taskExecutors_->startedWorkerCount())));
  return kj::READY_NOW;
}

}  // namespace regent::dispatcher

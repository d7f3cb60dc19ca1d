// TaskExecutor (see task_executor.h): the parts wired together, and the gateway's requests on
// the slot table (requestSlot, submitTask, cancelTask, freeSlot) with the runner's updates.
// Registration: registration.cc; jobs: job_links.cc, job_updates.cc; the gateway and its epoch
// gate: task_executor_gateway.cc; the slots: slot_table.cc.
#include "services/taskexecutor/task_executor.h"

#include <kj/debug.h>
#include <spdlog/spdlog.h>

#include <utility>

#include "common/event_sink.h"
#include "conf/options.h"
#include "rpc/failure.h"
#include "rpc/wire_ids.h"
#include "services/taskexecutor/job_links.h"
#include "services/taskexecutor/registration.h"
#include "services/taskexecutor/task_executor_gateway.h"

namespace regent::taskexecutor {

TaskExecutor::TaskExecutor(kj::Timer& timer, client::LeaderClient& leaders, TaskRunner& runner,
                           EventSink& events, TaskExecutorOptions options)
    : runner_(runner),
      events_(events),
      options_(std::move(options)),
      shared_(std::make_shared<GatewayShared>(self_.link(), events, options_.resourceId.toHex())),
      gateway_(serveTaskExecutorGateway(shared_)),
      slots_(options_, runner_),
      registration_(kj::heap<Registration>(timer, leaders, events_, options_, counters_,
                                           shared_->gate(), gateway_, slots_,
                                           [this]() { jobs_->onRegistered(); })),
      jobs_(kj::heap<JobLinks>(timer, leaders, events_, options_, counters_, *registration_, slots_,
                               runner_, gateway_)) {}

TaskExecutor::~TaskExecutor() noexcept { self_.revoke(); }

void TaskExecutor::start() { registration_->start(); }

std::optional<std::string> TaskExecutor::whyStale() const {
  if (options_.stalls == nullptr) return std::nullopt;
  const std::optional<Duration> stood = options_.stalls->recentStall();
  if (!stood) return std::nullopt;
  return "worker " + options_.resourceId.toHex() + " did not run for " +
         std::to_string(stood->count()) +
         " ms (paused or starved): a submitTask read now may have waited past its caller's "
         "rpc.call-timeout, and the attempt may run elsewhere already";
}

kj::Promise<void> TaskExecutor::disconnect(const std::string& cause) {
  if (registration_->stopping()) return kj::READY_NOW;
  // The JobMasters first, while the registration still stands to reach them.
  kj::Promise<void> jobMasters = jobs_->disconnectJobMasters(cause);
  return registration_->disconnect(kj::mv(jobMasters), cause);
}

kj::Promise<void> TaskExecutor::flushUpdates(Duration bound) { return jobs_->flushUpdates(bound); }

bool TaskExecutor::registered() const { return registration_->registered(); }
uint64_t TaskExecutor::registeredEpoch() const {
  return registration_->registered() ? registration_->epoch() : 0;
}
uint64_t TaskExecutor::highestEpoch() const { return shared_->gate().highest(); }
std::optional<RegistrationId> TaskExecutor::registrationId() const {
  return registration_->registrationId();
}
const std::optional<rpc::OutputReadKey>& TaskExecutor::outputReadKey() const {
  return registration_->outputReadKey();
}
const std::string& TaskExecutor::lastRegistrationError() const {
  return registration_->lastRegistrationError();
}
const std::vector<SlotState>& TaskExecutor::slots() const { return slots_.slots(); }
size_t TaskExecutor::tasksRunning() const { return slots_.attempts().size(); }
size_t TaskExecutor::updatesQueued() const { return jobs_->updatesQueued(); }
const rpc::FencingCounters& TaskExecutor::fencingCounters() const { return shared_->fencing(); }

void TaskExecutor::lose(const std::string& reason) { registration_->lose(reason); }

void TaskExecutor::stopRequested(const std::string& cause,
                                 wire::TaskExecutorGateway::StopResults::Builder results) {
  if (options_.providerWorkerId.empty() || !options_.onStopRequested) {
    rpc::failures::failedPrecondition(
        results.initFailure(),
        "worker " + options_.resourceId.toHex() +
            " was not started by a resource provider (worker.provider-id is empty): stop it "
            "where it was started");
    return;
  }
  for (const SlotState& slot : slots_.slots()) {
    if (!slot.allocation) continue;
    rpc::failures::failedPrecondition(
        results.initFailure(), "worker " + options_.resourceId.toHex() + " is not idle: slot " +
                                   std::to_string(slot.index) + " holds allocation " +
                                   slot.allocation->toHex());
    return;
  }
  events_.emit(Event("worker stop requested")
                   .field("resource_id", options_.resourceId.toHex())
                   .field("provider_id", options_.providerWorkerId)
                   .quotedField("cause", cause));
  options_.onStopRequested(cause);  // Which defers the stop: the answer goes out first.
}

void TaskExecutor::onEpochRaised(uint64_t previous, uint64_t raised) {
  registration_->onEpochRaised(previous, raised);
}

void TaskExecutor::answerHeartbeat() { registration_->answerHeartbeat(); }

void TaskExecutor::answerJobMasterHeartbeat(const JobId& job, uint64_t epoch) {
  jobs_->answerHeartbeat(job, epoch);
}

std::optional<std::string> TaskExecutor::whyNoTasks() const {
  if (registration_->stopping() || runner_.stopping()) {
    return "worker " + options_.resourceId.toHex() + " is stopping";
  }
  if (runner_.unusableReason()) {
    return "worker " + options_.resourceId.toHex() +
           " cannot run tasks: " + *runner_.unusableReason();
  }
  return std::nullopt;
}

void TaskExecutor::requestSlot(wire::TaskExecutorGateway::RequestSlotParams::Reader params,
                               wire::TaskExecutorGateway::RequestSlotResults::Builder results) {
  // A worker that cannot create attempt directories takes no slot: the job goes elsewhere.
  if (auto why = whyNoTasks()) {
    rpc::failures::unavailable(results.initFailure(), 0, *why);
    return;
  }
  if (auto job = slots_.allocate(params, results)) jobs_->scheduleOffer(*job);
}

void TaskExecutor::freeSlot(const AllocationId& allocation, const std::string& cause) {
  for (SlotState& slot : slots_.slots()) {
    if (slot.allocation == allocation) jobs_->releaseSlot(slot, cause);
  }
}

void TaskExecutor::freeJob(const JobId& job, const std::string& cause) {
  jobs_->freeJob(job, cause);
}

void TaskExecutor::submitTask(uint64_t epoch, wire::TaskDeployment::Reader deployment,
                              wire::TaskExecutorGateway::SubmitTaskResults::Builder results) {
  if (!runner_.runsTasks()) {
    rpc::failures::failedPrecondition(results.initFailure(), "this worker runs no tasks");
    return;
  }
  // The JobMaster takes `unavailable` for the worker's fault: the attempt goes elsewhere.
  if (auto why = whyNoTasks()) {
    rpc::failures::unavailable(results.initFailure(), 0, *why);
    return;
  }
  if (auto why = whyStale()) {
    rpc::failures::unavailable(results.initFailure(), 0, *why);
    return;
  }
  const auto job = wire::idFromWire<JobId>(deployment.getJobId());
  const auto attempt = wire::idFromWire<AttemptId>(deployment.getAttemptId());
  const auto allocation = wire::idFromWire<AllocationId>(deployment.getAllocationId());
  // Repeated: accepted before (running, or ended and still known to the runner).
  if (slots_.attempts().count(attempt) != 0 || runner_.latest(attempt)) return;
  if (!slots_.holds(allocation, job)) {
    rpc::failures::notFound(results.initFailure(), allocation,
                            "allocation " + allocation.toHex() + " is not held for job " +
                                job.toHex() + " on worker " + options_.resourceId.toHex());
    return;
  }
  auto command = deployment.getCommand();
  if (command.getArgv().size() == 0) {
    rpc::failures::invalidArgument(
        results.initFailure(), "deployment.command.argv", "is empty",
        "the command of vertex " + std::string(deployment.getVertexName().cStr()) + " has no argv");
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
  slots_.attemptStarting(allocation);
  slots_.attempts().emplace(attempt, std::move(record));
  // The runner calls back later (never from inside start); after this object is gone the
  // callbacks find no owner.
  Status started = runner_.start(spec, forwardTaskUpdates(shared_));
  if (!started.ok()) {
    slots_.attempts().erase(attempt);
    rpc::failures::failedPrecondition(results.initFailure(), started.error().message);
    return;
  }
  spdlog::debug("task executor {}: attempt {} of job {} accepted in epoch {}",
                options_.resourceId.toHex(), attempt.toHex(), job.toHex(), epoch);
}

void TaskExecutor::cancelTask(const AttemptId& attempt,
                              wire::TaskExecutorGateway::CancelTaskResults::Builder results) {
  if (slots_.attempts().count(attempt) != 0) {
    runner_.cancel(attempt);
    return;
  }
  if (runner_.latest(attempt)) return;  // Already ended.
  rpc::failures::notFound(
      results.initFailure(), attempt,
      "no attempt " + attempt.toHex() + " on worker " + options_.resourceId.toHex());
}

void TaskExecutor::onTaskUpdate(const TaskUpdate& update) {
  auto found = slots_.attempts().find(update.attempt);
  if (found == slots_.attempts().end()) return;
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
  const AttemptRecord queued = record;
  if (update.phase != TaskPhase::kRunning) {
    slots_.attempts().erase(found);
    slots_.attemptEnded(queued);
  }
  jobs_->onTaskUpdate(queued);
}

}  // namespace regent::taskexecutor

// SlotTable (see slot_table.h): the slots and attempts of a worker, and their wire form.
#include "services/taskexecutor/slot_table.h"

#include <spdlog/spdlog.h>

#include "rpc/failure.h"
#include "rpc/wire_ids.h"
#include "services/taskexecutor/task_executor.h"

namespace regent::taskexecutor {
namespace {

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

}  // namespace

SlotTable::SlotTable(const TaskExecutorOptions& options, TaskRunner& runner)
    : options_(options), runner_(runner) {
  slots_.reserve(options_.slots);
  for (uint32_t i = 0; i < options_.slots; ++i) slots_.push_back(SlotState{i, {}, {}, 0});
}

std::optional<JobId> SlotTable::allocate(
    wire::TaskExecutorGateway::RequestSlotParams::Reader params,
    wire::TaskExecutorGateway::RequestSlotResults::Builder results) {
  const auto slotId = params.getSlotId();
  const uint32_t index = slotId.getSlotIndex();
  const auto resourceId = wire::idFromWire<ResourceId>(slotId.getResourceId());
  const auto job = wire::idFromWire<JobId>(params.getJobId());
  const auto allocation = wire::idFromWire<AllocationId>(params.getAllocationId());
  if (resourceId != options_.resourceId || index >= slots_.size()) {
    rpc::failures::notFoundSlot(results.initFailure(), resourceId, index,
                                "no slot " + std::to_string(index) + " of " + resourceId.toHex() +
                                    ": this worker is " + options_.resourceId.toHex() + " with " +
                                    std::to_string(slots_.size()) + " slots");
    return std::nullopt;
  }
  SlotState& slot = slots_[index];
  if (slot.allocation && *slot.allocation != allocation) {
    rpc::failures::failedPrecondition(
        results.initFailure(), "slot " + std::to_string(index) + " is allocated to allocation " +
                                   slot.allocation->toHex() + " of job " +
                                   (slot.job ? slot.job->toHex() : "?") + ", not to allocation " +
                                   allocation.toHex());
    return std::nullopt;
  }
  if (slot.allocation == allocation) return std::nullopt;  // Offered (or being offered) already.
  slot.allocation = allocation;
  slot.job = job;
  slot.acceptedEpoch = 0;
  return job;
}

bool SlotTable::holds(const AllocationId& allocation, const JobId& job) const {
  for (const SlotState& slot : slots_) {
    if (slot.allocation == allocation && slot.job == job) return true;
  }
  return false;
}

void SlotTable::attemptEnded(const AttemptRecord& record) {
  if (record.latest.phase != TaskPhase::kFinished) return;
  for (SlotState& slot : slots_) {
    if (slot.allocation == record.allocation) slot.finished = record;
  }
}

void SlotTable::attemptStarting(const AllocationId& allocation) {
  for (SlotState& slot : slots_) {
    if (slot.allocation == allocation) slot.finished.reset();
  }
}

std::optional<JobId> SlotTable::release(SlotState& slot, const std::string& cause) {
  if (!slot.allocation) return std::nullopt;
  const AllocationId allocation = *slot.allocation;
  const std::optional<JobId> job = slot.job;
  std::vector<AttemptId> cancel;
  for (const auto& [id, record] : attempts_) {
    if (record.allocation == allocation) cancel.push_back(id);
  }
  for (const AttemptId& attempt : cancel) runner_.cancel(attempt);
  slot.allocation.reset();
  slot.job.reset();
  slot.acceptedEpoch = 0;
  slot.finished.reset();
  spdlog::debug("task executor {}: slot {} (allocation {}) freed: {}", options_.resourceId.toHex(),
                slot.index, allocation.toHex(), cause);
  return job;
}

void SlotTable::cancelAttemptsOf(const JobId& job) {
  std::vector<AttemptId> cancel;
  for (const auto& [id, record] : attempts_) {
    if (record.job == job) cancel.push_back(id);
  }
  for (const AttemptId& attempt : cancel) runner_.cancel(attempt);
}

bool SlotTable::holdsAnythingOf(const JobId& job) const {
  for (const SlotState& slot : slots_) {
    if (slot.job == job) return true;
  }
  for (const auto& [id, record] : attempts_) {
    if (record.job == job) return true;
  }
  return false;
}

void SlotTable::fillProfile(wire::ResourceProfile::Builder profile) const {
  profile.setCpuMillis(options_.slotProfile.cpuMillis);
  profile.setMemoryBytes(options_.slotProfile.memoryBytes);
}

void SlotTable::fillReport(wire::SlotReport::Builder report) const {
  wire::setWireId(report.initResourceId(), options_.resourceId);
  auto list = report.initSlots(static_cast<unsigned>(slots_.size()));
  for (size_t i = 0; i < slots_.size(); ++i) {
    const SlotState& slot = slots_[i];
    auto status = list[static_cast<unsigned>(i)];
    auto slotId = status.initSlotId();
    wire::setWireId(slotId.initResourceId(), options_.resourceId);
    slotId.setSlotIndex(slot.index);
    fillProfile(status.initProfile());
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

void SlotTable::fillAttempt(wire::TaskExecutionState::Builder state,
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
      message = "worker " + options_.resourceId.toHex() +
                " could not start the attempt: " + message +
                " (a fault of the worker, not of the task)";
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

}  // namespace regent::taskexecutor

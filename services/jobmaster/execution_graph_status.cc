// What a job's status shows (ExecutionGraph::describe and counts, execution_graph.h): each
// subtask's latest attempt, its worker's address, why it waits, and the job's counts, failure and
// waiting reason, written into wire::JobStatus for jobs status and /v1/jobs/<id>.
#include "services/jobmaster/execution_graph.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>

#include "rpc/wire_ids.h"

namespace regent::jobmaster {

namespace {

using wire::ExecutionState;

// "1.2s", for restart delays.
std::string seconds(Duration duration) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1fs", static_cast<double>(duration.count()) / 1000.0);
  return text;
}

// Subtasks by the state of their latest attempt (wire::TaskCounts).
struct Counts {
  uint32_t total = 0, pending = 0, running = 0, finished = 0, canceling = 0, canceled = 0,
           failed = 0, reconciling = 0;

  void add(ExecutionState state) {
    ++total;
    switch (state) {
      case ExecutionState::CREATED:
      case ExecutionState::SCHEDULED:
      case ExecutionState::DEPLOYING:
        ++pending;
        break;
      case ExecutionState::RUNNING:
        ++running;
        break;
      case ExecutionState::FINISHED:
        ++finished;
        break;
      case ExecutionState::CANCELING:
        ++canceling;
        break;
      case ExecutionState::CANCELED:
        ++canceled;
        break;
      case ExecutionState::FAILED:
        ++failed;
        break;
      case ExecutionState::RECONCILING:
        ++reconciling;
        break;
    }
  }
  void write(wire::TaskCounts::Builder out) const {
    out.setTotal(total);
    out.setPending(pending);
    out.setRunning(running);
    out.setFinished(finished);
    out.setCanceling(canceling);
    out.setCanceled(canceled);
    out.setFailed(failed);
    out.setReconciling(reconciling);
  }
};

}  // namespace

void ExecutionGraph::fillAttempt(uint32_t index, wire::TaskExecutionState::Builder out) const {
  const Subtask& subtask = subtasks_[index];
  const uint32_t vertex = vertexOf(index);
  wire::setWireId(out.initAttemptId(), subtask.attempt);
  wire::setWireId(out.initJobId(), job_);
  wire::setWireId(out.initAllocationId(), subtask.allocation);
  out.setVertexName(vertexReader(vertex).getName());
  out.setSubtaskIndex(index - vertices_[vertex].first);
  out.setAttemptNumber(subtask.attempts - 1);
  out.setState(subtask.state);
  out.setPid(subtask.pid);
  out.setExitCode(subtask.exitCode);
  out.setTermSignal(subtask.termSignal);
  if (subtask.state == ExecutionState::FAILED) {
    const auto& messages = rareOrNone().failureMessages;
    auto message = messages.find(index);
    if (message != messages.end()) out.setFailureMessage(message->second);
  }
  out.setStartedAtMs(subtask.startedAtMs);
  out.setStateChangedAtMs(subtask.stateChangedAtMs);
  out.setEndedAtMs(subtask.endedAtMs);
  const auto& outputProblems = rareOrNone().outputProblems;
  auto output = outputProblems.find(index);
  if (output != outputProblems.end()) out.setOutputProblem(output->second);
}

std::string ExecutionGraph::waitingReason(uint32_t index, MonoTime now,
                                          const resourcemanager::SlotCounts& slots) const {
  const Subtask& subtask = subtasks_[index];
  const Vertex& vertex = vertices_[vertexOf(index)];
  if (subtask.phase == Phase::kExpected) {
    return "reconciling: waiting for a worker to report attempt " + subtask.attempt.toHex() +
           " after the failover";
  }
  if (subtask.phase == Phase::kRestartDelay) {
    return "restarting in " + seconds(std::max(Duration(0), std::chrono::duration_cast<Duration>(
                                                                subtask.restartAt - now)));
  }
  if (subtask.phase != Phase::kWaiting) return {};
  if (!vertex.runnable()) {
    for (uint32_t upstream : vertex.upstream) {
      const Vertex& u = vertices_[upstream];
      if (u.finished < u.parallelism) {
        return std::string("waiting for upstream vertex ") +
               vertexReader(upstream).getName().cStr();
      }
    }
  }
  return "waiting for a slot (" + resourcemanager::describe(vertex.profile) +
         "): " + std::to_string(slots.free) + " of " + std::to_string(slots.total) + " slots free";
}

void ExecutionGraph::describe(wire::JobStatus::Builder status, MonoTime now,
                              const resourcemanager::JobMasterPort& port) const {
  const wire::JobState jobState = state();
  status.setState(jobState);
  status.setRestarts(strategy_.restarts());
  const resourcemanager::SlotCounts slots = port.slotCounts();
  std::map<ResourceId, std::optional<resourcemanager::WorkerAddress>> addresses;
  Counts all;
  auto vertices = status.initVertices(static_cast<unsigned>(vertices_.size()));
  for (uint32_t v = 0; v < vertices_.size(); ++v) {
    const Vertex& vertex = vertices_[v];
    auto out = vertices[v];
    out.setName(vertexReader(v).getName());
    out.setParallelism(vertex.parallelism);
    Counts counts;
    auto subtasks = out.initSubtasks(vertex.parallelism);
    for (uint32_t i = 0; i < vertex.parallelism; ++i) {
      const uint32_t index = vertex.first + i;
      const Subtask& subtask = subtasks_[index];
      counts.add(subtask.state);
      auto entry = subtasks[i];
      entry.setIndex(i);
      entry.setAttempts(subtask.attempts);
      if (subtask.attempts > 0) {
        fillAttempt(index, entry.initAttempt());
        wire::setWireId(entry.initResourceId(), subtask.worker);
        auto address = addresses.find(subtask.worker);
        if (address == addresses.end()) {
          address = addresses.emplace(subtask.worker, port.workerAddress(subtask.worker)).first;
        }
        if (address->second) {
          entry.setHost(address->second->host);
          entry.setHttpAddress(address->second->httpAddress);
        }
      }
      const auto& failures = rareOrNone().failureMessages;
      auto failure = failures.find(index);
      if (failure != failures.end()) entry.setLastFailure(failure->second);
      const std::string reason = waitingReason(index, now, slots);
      if (!reason.empty()) entry.setWaitingReason(reason);
    }
    counts.write(out.initTasks());
    all.total += counts.total;
    all.pending += counts.pending;
    all.running += counts.running;
    all.finished += counts.finished;
    all.canceling += counts.canceling;
    all.canceled += counts.canceled;
    all.failed += counts.failed;
    all.reconciling += counts.reconciling;
  }
  all.write(status.initTasks());
  const std::optional<Failure>& failure = latestFailure();
  if (failure && (jobState == wire::JobState::RESTARTING || jobState == wire::JobState::FAILED)) {
    auto out = status.initFailure();
    out.setMessage(failure->message);
    if (failure->subtask != kNoSubtask) {
      out.setVertexName(vertexReader(vertexOf(failure->subtask)).getName());
      out.setSubtaskIndex(indexInVertex(failure->subtask));
    }
    wire::setWireId(out.initAttemptId(), failure->attempt);
    out.setExitCode(failure->exitCode);
    out.setAtMs(failure->atMs);
  }
  // The job's reason: subtasks waiting for slots, by profile, then the restart delay.
  std::map<Profile, uint32_t> waiting;
  for (const Vertex& vertex : vertices_) {
    if (vertex.runnable() && vertex.waiting > 0) waiting[vertex.profile] += vertex.waiting;
  }
  std::string reason;
  if (reconciling_ && !ended_) {
    reason = "reconciling after a failover: " + std::to_string(expectedLeft_) +
             (expectedLeft_ == 1 ? " running attempt" : " running attempts") +
             " not reported by a worker yet; nothing is deployed until then";
  }
  std::string forSlots;
  for (const auto& [profile, count] : waiting) {
    if (!forSlots.empty()) forSlots += ", ";
    forSlots += std::to_string(count) + (count == 1 ? " subtask waits" : " subtasks wait") +
                " for slots of " + resourcemanager::describe(profile);
  }
  if (!forSlots.empty()) {
    if (!reason.empty()) reason += "; ";
    reason += forSlots + "; the cluster has " + std::to_string(slots.free) + " free of " +
              std::to_string(slots.total);
    if (slotProblem_) reason += "; the slots cannot be requested: " + *slotProblem_;
    const std::string supply = port.workerSupplyReason();
    if (!supply.empty()) reason += "; " + supply;
  }
  if (const auto next = nextRestartAt()) {
    if (!reason.empty()) reason += "; ";
    reason += std::to_string(restartDelays_) +
              (restartDelays_ == 1 ? " subtask restarts in " : " subtasks restart, the next in ") +
              seconds(std::max(Duration(0), std::chrono::duration_cast<Duration>(*next - now)));
  }
  if (!reason.empty()) status.setWaitingReason(reason);
}

void ExecutionGraph::counts(wire::TaskCounts::Builder tasks) const {
  Counts counts;
  for (const Subtask& subtask : subtasks_) counts.add(subtask.state);
  counts.write(tasks);
}

}  // namespace regent::jobmaster

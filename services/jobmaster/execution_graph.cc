// The JobMaster's scheduling logic: vertices, subtasks, attempts, slots, restarts, job state (what
// a job's status shows is written in execution_graph_status.cc).
#include "services/jobmaster/execution_graph.h"

#include <algorithm>
#include <set>

#include "rpc/wire_ids.h"

namespace regent::jobmaster {

namespace {

using wire::ExecutionState;

// States only move forward along this order; the three terminal states share the last rank.
int rank(ExecutionState state) {
  switch (state) {
    case ExecutionState::CREATED:
      return 0;
    case ExecutionState::SCHEDULED:
    case ExecutionState::RECONCILING:
      return 1;
    case ExecutionState::DEPLOYING:
      return 2;
    case ExecutionState::RUNNING:
      return 3;
    case ExecutionState::CANCELING:
      return 4;
    case ExecutionState::FINISHED:
    case ExecutionState::CANCELED:
    case ExecutionState::FAILED:
      return 5;
  }
  return 0;
}

Profile profileOf(wire::ResourceProfile::Reader profile) {
  return Profile{profile.getCpuMillis(), profile.getMemoryBytes()};
}

std::string_view viewOf(capnp::Text::Reader text) { return {text.cStr(), text.size()}; }

}  // namespace

bool isTerminal(ExecutionState state) { return rank(state) == 5; }

ExecutionGraph::ExecutionGraph(JobId job, wire::JobGraph::Reader graph, RestartStrategy strategy,
                               int64_t startedAtMs)
    : job_(job), graph_(graph), strategy_(std::move(strategy)), startedAtMs_(startedAtMs) {
  const auto vertices = graph.getVertices();
  vertices_.resize(vertices.size());
  uint32_t total = 0;
  for (uint32_t v = 0; v < vertices.size(); ++v) {
    const auto reader = vertices[v];
    Vertex& vertex = vertices_[v];
    vertex.profile = profileOf(reader.getResources());
    vertex.first = total;
    vertex.parallelism = reader.getParallelism();
    vertex.waiting = vertex.parallelism;
    total += vertex.parallelism;
  }
  byName_.resize(vertices.size());
  for (uint32_t v = 0; v < vertices.size(); ++v) byName_[v] = v;
  std::stable_sort(byName_.begin(), byName_.end(), [&vertices](uint32_t a, uint32_t b) {
    return viewOf(vertices[a].getName()) < viewOf(vertices[b].getName());
  });
  for (uint32_t v = 0; v < vertices.size(); ++v) {
    for (auto name : vertices[v].getUpstream()) {
      const std::optional<uint32_t> upstream = vertexNamed(viewOf(name));
      if (!upstream || *upstream == v) continue;
      const uint32_t u = *upstream;
      auto& list = vertices_[v].upstream;
      if (std::find(list.begin(), list.end(), u) != list.end()) continue;
      list.push_back(u);
      vertices_[u].downstream.push_back(v);
    }
    vertices_[v].unfinishedUpstream = static_cast<uint32_t>(vertices_[v].upstream.size());
  }
  subtasks_ = SubtaskTable(total);
}

uint32_t ExecutionGraph::vertexOf(uint32_t subtask) const {
  auto after = std::upper_bound(vertices_.begin(), vertices_.end(), subtask,
                                [](uint32_t index, const Vertex& v) { return index < v.first; });
  return static_cast<uint32_t>(after - vertices_.begin()) - 1;
}

const ExecutionGraph::Subtask ExecutionGraph::SubtaskTable::kUnstarted{};

std::optional<uint32_t> ExecutionGraph::vertexNamed(std::string_view name) const {
  const auto vertices = graph_.getVertices();
  auto found = std::lower_bound(byName_.begin(), byName_.end(), name,
                                [&vertices](uint32_t v, std::string_view wanted) {
                                  return viewOf(vertices[v].getName()) < wanted;
                                });
  if (found == byName_.end() || viewOf(vertices[*found].getName()) != name) return std::nullopt;
  return *found;
}

uint32_t ExecutionGraph::indexInVertex(uint32_t subtask) const {
  return subtask - vertices_[vertexOf(subtask)].first;
}

// ---- Failover ---------------------------------------------------------------------------------

uint32_t ExecutionGraph::recover(wire::JobProgress::Reader progress, int64_t nowMs) {
  strategy_.restoreRestarts(progress.getRestarts());
  if (progress.getStartedAtMs() > 0) startedAtMs_ = progress.getStartedAtMs();
  restartDelayMs_ = std::max<int64_t>(0, progress.getRestartDelayMs());
  uint32_t expected = 0;
  for (auto entry : progress.getSubtasks()) {
    const uint32_t index = entry.getSubtask();
    if (index >= subtasks_.size() || !entry.hasAttemptId()) continue;
    Subtask& subtask = subtasks_[index];
    if (subtask.attempts > 0) continue;  // Listed twice: the first entry stands.
    subtask.attempt = wire::idFromWire<AttemptId>(entry.getAttemptId());
    subtask.attempts = entry.getAttemptNumber() + 1;
    subtask.stateChangedAtMs = nowMs;
    switch (entry.getState()) {
      case ExecutionState::FINISHED:
        subtask.state = ExecutionState::FINISHED;
        anyRunning_ = true;  // The job ran before the failover.
        finished(index, nowMs);
        break;
      case ExecutionState::FAILED:
      case ExecutionState::CANCELED:
        // Runs again once reconciliation ends: the strategy granted its restart already.
        subtask.state = entry.getState();
        break;
      default:
        if (entry.getState() == ExecutionState::RUNNING) anyRunning_ = true;
        subtask.state = ExecutionState::RECONCILING;
        setPhase(index, Phase::kExpected);
        if (entry.hasResourceId() && entry.hasAllocationId()) {
          rare().recordedAt[index] =
              HeldSlot{wire::idFromWire<AllocationId>(entry.getAllocationId()),
                       wire::idFromWire<ResourceId>(entry.getResourceId())};
        }
        ++expected;
        break;
    }
  }
  if (strategy_.restarts() > 0) anyRunning_ = true;
  if (progress.getEnded() == wire::JobState::FAILED && !frozen()) {
    // The earlier term's strategy gave up and the leader died before the Dispatcher stored the
    // result: the job ends failed again, with the same root cause; nothing runs or is adopted
    // (workers' attempts of it are cancelled when offered).
    for (uint32_t index = 0; index < subtasks_.size(); ++index) {
      Subtask& subtask = subtasks_[index];
      if (subtask.phase != Phase::kExpected) continue;
      subtask.state = ExecutionState::CANCELED;
      setPhase(index, Phase::kStopped);
    }
    const auto failure = progress.getFailure();
    // A failure naming no subtask (failJob's) stays the whole job's.
    uint32_t index = failure.getVertexName().size() == 0 ? kNoSubtask : 0;
    const std::optional<uint32_t> vertex = vertexNamed(viewOf(failure.getVertexName()));
    if (vertex && failure.getSubtaskIndex() < vertices_[*vertex].parallelism) {
      index = vertices_[*vertex].first + failure.getSubtaskIndex();
    }
    const AttemptId attempt =
        failure.hasAttemptId() ? wire::idFromWire<AttemptId>(failure.getAttemptId()) : AttemptId();
    rare().failure = Failure{failure.getMessage().cStr(), index, attempt, failure.getExitCode(),
                             failure.getAtMs()};
    endJob(wire::JobState::FAILED, failure.getAtMs() != 0 ? failure.getAtMs() : nowMs);
    return 0;
  }
  reconciling_ = expected > 0 && !frozen();
  return expected;
}

std::optional<uint32_t> ExecutionGraph::adopt(const ResourceId& worker, const OfferedSlot& slot,
                                              const AttemptReport& report, int64_t nowMs) {
  if (frozen()) return std::nullopt;
  const std::optional<uint32_t> vertex = vertexNamed(report.vertex);
  if (!vertex) return std::nullopt;
  const Vertex& v = vertices_[*vertex];
  if (report.subtaskIndex >= v.parallelism) return std::nullopt;
  const uint32_t index = v.first + report.subtaskIndex;
  Subtask& subtask = subtasks_[index];
  if (subtask.phase != Phase::kExpected || subtask.attempt != report.attempt) return std::nullopt;
  // An attempt that ended needs no slot: it is adopted even when a live attempt holds the one it
  // ran in (the caller applies its end, which frees nothing of the other's).
  const bool ended = isTerminal(report.state);
  auto held = slots_.find(slot.allocation);
  if (held != slots_.end() && held->second.subtask && !ended) return std::nullopt;  // Serves another.
  if (held == slots_.end()) {
    held = slots_.emplace(slot.allocation, Slot{worker, slot.profile, std::nullopt}).first;
  }
  held->second.worker = worker;
  if (!held->second.subtask) held->second.subtask = index;
  subtask.worker = worker;
  subtask.allocation = slot.allocation;
  ++reconciliation_.adopted;
  setPhase(index, Phase::kLive);
  if (report.state == ExecutionState::DEPLOYING) {
    // Not started on the worker yet: its RUNNING update, queued behind the offer, brings the pid.
    setState(index, ExecutionState::DEPLOYING, nowMs);
    return index;
  }
  subtask.pid = report.pid;
  subtask.startedAtMs = report.startedAtMs != 0 ? report.startedAtMs : nowMs;
  anyRunning_ = true;
  setState(index, ExecutionState::RUNNING, nowMs);
  return index;
}

std::vector<ExecutionGraph::ExpectedAttempt> ExecutionGraph::expectedOn(
    const ResourceId& worker) const {
  std::vector<ExpectedAttempt> out;
  for (const auto& [index, at] : rareOrNone().recordedAt) {
    if (at.worker == worker && subtasks_[index].phase == Phase::kExpected) {
      out.push_back(ExpectedAttempt{index, subtasks_[index].attempt, at.allocation});
    }
  }
  return out;
}

std::vector<ResourceId> ExecutionGraph::expectedWorkers() const {
  std::vector<ResourceId> out;
  for (const auto& [index, at] : rareOrNone().recordedAt) {
    if (subtasks_[index].phase != Phase::kExpected) continue;
    if (std::find(out.begin(), out.end(), at.worker) == out.end()) out.push_back(at.worker);
  }
  return out;
}

bool ExecutionGraph::expectedMissing(uint32_t index, const AttemptId& attempt,
                                     const std::string& message, MonoTime now, int64_t nowMs) {
  if (!reconciling_ || index >= subtasks_.size()) return false;
  Subtask& subtask = subtasks_[index];
  if (subtask.phase != Phase::kExpected || subtask.attempt != attempt) return false;
  ++reconciliation_.unreported;
  subtask.endedAtMs = nowMs;
  setState(index, ExecutionState::FAILED, nowMs);
  failed(index, message, 0, now, nowMs);
  return true;
}

ExecutionGraph::Reconciliation ExecutionGraph::endReconciliation(const std::string& message,
                                                                 MonoTime now, int64_t nowMs) {
  if (!reconciling_) return reconciliation_;
  reconciling_ = false;
  for (uint32_t index = 0; index < subtasks_.size() && expectedLeft_ > 0; ++index) {
    Subtask& subtask = subtasks_[index];
    if (subtask.phase != Phase::kExpected) continue;
    ++reconciliation_.unreported;
    subtask.endedAtMs = nowMs;
    setState(index, ExecutionState::FAILED, nowMs);
    failed(index, message, 0, now, nowMs);
  }
  return reconciliation_;
}

void ExecutionGraph::fillProgress(wire::JobProgress::Builder out, uint64_t epoch,
                                  int64_t nowMs) const {
  wire::setWireId(out.initJobId(), job_);
  out.setEpoch(epoch);
  out.setWrittenAtMs(nowMs);
  out.setRestarts(strategy_.restarts());
  out.setStartedAtMs(startedAtMs_);
  out.setRestartDelayMs(restartDelayMs_);
  if (ended_ && ended_->state == wire::JobState::FAILED) {
    // The strategy gave up: the next leader must end the job too, not run it again.
    out.setEnded(wire::JobState::FAILED);
    auto failure = out.initFailure();
    failure.setMessage(ended_->failureMessage);
    failure.setVertexName(ended_->failureVertex);
    failure.setSubtaskIndex(ended_->failureSubtask);
    if (!ended_->failureAttempt.isZero()) {
      wire::setWireId(failure.initAttemptId(), ended_->failureAttempt);
    }
    failure.setExitCode(ended_->failureExitCode);
    failure.setAtMs(ended_->failureAtMs);
  }
  uint32_t count = 0;
  for (const Subtask& subtask : subtasks_) count += subtask.attempts > 0 ? 1 : 0;
  auto list = out.initSubtasks(count);
  uint32_t next = 0;
  for (uint32_t index = 0; index < subtasks_.size(); ++index) {
    const Subtask& subtask = subtasks_[index];
    if (subtask.attempts == 0) continue;
    auto entry = list[next++];
    entry.setSubtask(index);
    wire::setWireId(entry.initAttemptId(), subtask.attempt);
    entry.setAttemptNumber(subtask.attempts - 1);
    // Where a live attempt runs, so that the next leader fails it as soon as that worker
    // accounts for its slots without it (it restarted, or the submitTask never reached it).
    if (subtask.phase == Phase::kLive && !subtask.worker.isZero()) {
      wire::setWireId(entry.initResourceId(), subtask.worker);
      wire::setWireId(entry.initAllocationId(), subtask.allocation);
    } else if (subtask.phase == Phase::kExpected) {
      const auto& recordedAt = rareOrNone().recordedAt;
      auto at = recordedAt.find(index);
      if (at != recordedAt.end()) {
        wire::setWireId(entry.initResourceId(), at->second.worker);
        wire::setWireId(entry.initAllocationId(), at->second.allocation);
      }
    }
    switch (subtask.state) {
      case ExecutionState::FINISHED:
      case ExecutionState::FAILED:
      case ExecutionState::CANCELED:
      case ExecutionState::DEPLOYING:
      case ExecutionState::RUNNING:
        entry.setState(subtask.state);
        break;
      default:  // RECONCILING, CANCELING: still live on some worker.
        entry.setState(ExecutionState::RUNNING);
        break;
    }
  }
}

bool ExecutionGraph::awaitsDeploy(uint32_t index, const AttemptId& attempt) const {
  const Subtask& subtask = subtasks_[index];
  return subtask.attempt == attempt && subtask.phase == Phase::kLive &&
         subtask.state == ExecutionState::DEPLOYING;
}

// ---- Slots and deployment ---------------------------------------------------------------------

std::map<Profile, uint32_t> ExecutionGraph::unservedNeeds() const {
  std::map<Profile, uint32_t> needs;
  for (const Vertex& vertex : vertices_) {
    if (!vertex.runnable()) continue;
    const uint32_t count = vertex.waiting + vertex.restarting;
    if (count > 0) needs[vertex.profile] += count;
  }
  for (const auto& [allocation, slot] : slots_) {
    if (slot.subtask) continue;
    for (auto& [profile, count] : needs) {
      if (count > 0 && slot.profile.fits(profile)) {
        --count;
        break;
      }
    }
  }
  return needs;
}

std::vector<bool> ExecutionGraph::offerSlots(const ResourceId& worker,
                                             const std::vector<OfferedSlot>& offers) {
  std::vector<bool> accepted(offers.size(), false);
  auto needs = frozen() ? std::map<Profile, uint32_t>() : unservedNeeds();
  for (size_t i = 0; i < offers.size(); ++i) {
    const OfferedSlot& offer = offers[i];
    // Held: kept, also by an ended job until its release (an attempt's FINISHED state, answered
    // at once, may live only in its worker's slot until the job's result is stored).
    if (slots_.count(offer.allocation) != 0) {
      accepted[i] = true;
      continue;
    }
    for (auto& [profile, count] : needs) {
      if (count > 0 && offer.profile.fits(profile)) {
        --count;
        slots_.emplace(offer.allocation, Slot{worker, offer.profile, std::nullopt});
        accepted[i] = true;
        break;
      }
    }
  }
  return accepted;
}

std::vector<std::pair<uint32_t, AllocationId>> ExecutionGraph::placements() const {
  std::vector<std::pair<uint32_t, AllocationId>> out;
  if (frozen() || reconciling_) return out;
  std::vector<std::map<AllocationId, Slot>::const_iterator> free;
  for (auto it = slots_.begin(); it != slots_.end(); ++it) {
    if (!it->second.subtask) free.push_back(it);
  }
  for (const Vertex& vertex : vertices_) {
    if (free.empty()) break;
    if (!vertex.runnable() || vertex.waiting == 0) continue;
    uint32_t placed = 0;
    for (uint32_t index = vertex.first;
         index < vertex.first + vertex.parallelism && placed < vertex.waiting; ++index) {
      if (subtasks_[index].phase != Phase::kWaiting) continue;
      auto fits = [&](const auto& it) { return it->second.profile.fits(vertex.profile); };
      auto slot = free.end();
      // After a worker fault, a slot on another worker first.
      const auto& workerFaults = rareOrNone().workerFaults;
      if (auto faults = workerFaults.find(index); faults != workerFaults.end()) {
        slot = std::find_if(free.begin(), free.end(), [&](const auto& it) {
          return fits(it) && it->second.worker != faults->second.worker;
        });
      }
      if (slot == free.end()) slot = std::find_if(free.begin(), free.end(), fits);
      if (slot == free.end()) break;
      out.emplace_back(index, (*slot)->first);
      free.erase(slot);
      ++placed;
    }
  }
  return out;
}

std::vector<Deployment> ExecutionGraph::schedule(int64_t nowMs) {
  std::vector<Deployment> out;
  for (const auto& [index, allocation] : placements()) {
    Slot& slot = slots_.at(allocation);
    Subtask& subtask = subtasks_[index];
    const bool restart = subtask.attempts > 0;
    subtask.attempt = AttemptId::random();
    subtask.worker = slot.worker;
    subtask.allocation = allocation;
    subtask.pid = 0;
    subtask.exitCode = 0;
    subtask.termSignal = 0;
    if (rare_) rare_->outputProblems.erase(index);
    subtask.startedAtMs = 0;
    subtask.endedAtMs = 0;
    ++subtask.attempts;
    slot.subtask = index;
    setPhase(index, Phase::kLive);
    setState(index, ExecutionState::DEPLOYING, nowMs);
    out.push_back(
        Deployment{index, subtask.attempt, subtask.attempts - 1, allocation, slot.worker, restart});
  }
  return out;
}

bool ExecutionGraph::schedulesPartly() const {
  const size_t placed = placements().size();
  uint32_t waiting = 0;
  for (const Vertex& vertex : vertices_) {
    if (vertex.runnable()) waiting += vertex.waiting;
  }
  return placed > 0 && placed < waiting;
}

std::vector<HeldSlot> ExecutionGraph::takeSurplusSlots() {
  std::vector<HeldSlot> surplus;
  if (frozen()) return surplus;
  std::map<Profile, uint32_t> needs;
  for (const Vertex& vertex : vertices_) {
    if (vertex.runnable() && vertex.waiting + vertex.restarting > 0) {
      needs[vertex.profile] += vertex.waiting + vertex.restarting;
    }
  }
  for (auto it = slots_.begin(); it != slots_.end();) {
    bool needed = it->second.subtask.has_value();
    for (auto& [profile, count] : needs) {
      if (needed) break;
      if (count > 0 && it->second.profile.fits(profile)) {
        --count;
        needed = true;
      }
    }
    if (needed) {
      ++it;
      continue;
    }
    surplus.push_back(HeldSlot{it->first, it->second.worker});
    it = slots_.erase(it);
  }
  return surplus;
}

std::vector<Requirement> ExecutionGraph::requirements() const {
  std::vector<Requirement> out;
  if (frozen() || reconciling_) return out;
  std::map<Profile, uint32_t> counts;
  for (const Vertex& vertex : vertices_) {
    if (vertex.runnable() && vertex.finished < vertex.parallelism) {
      counts[vertex.profile] += vertex.parallelism - vertex.finished;
    }
  }
  for (const auto& [profile, count] : counts) out.push_back(Requirement{profile, count});
  return out;
}

// ---- Attempt states ---------------------------------------------------------------------------

void ExecutionGraph::setState(uint32_t index, ExecutionState state, int64_t nowMs) {
  Subtask& subtask = subtasks_[index];
  subtask.state = state;
  subtask.stateChangedAtMs = nowMs;
  if (state == ExecutionState::DEPLOYING || isTerminal(state)) ++version_;
  transitions_.push_back(
      Transition{index, subtask.attempt, state, subtask.exitCode, subtask.termSignal});
}

void ExecutionGraph::setPhase(uint32_t index, Phase phase) {
  Subtask& subtask = subtasks_[index];
  Vertex& vertex = vertices_[vertexOf(index)];
  if (subtask.phase == Phase::kWaiting) --vertex.waiting;
  if (subtask.phase == Phase::kRestartDelay) {
    --vertex.restarting;
    --restartDelays_;
  }
  if (subtask.phase == Phase::kExpected) --expectedLeft_;
  if (phase == Phase::kExpected) ++expectedLeft_;
  if (subtask.phase == Phase::kExpected && phase != Phase::kExpected && rare_) {
    rare_->recordedAt.erase(index);
  }
  subtask.phase = phase;
  if (phase == Phase::kWaiting) ++vertex.waiting;
  if (phase == Phase::kRestartDelay) {
    ++vertex.restarting;
    ++restartDelays_;
  }
}

void ExecutionGraph::releaseSlot(uint32_t index) {
  auto slot = slots_.find(subtasks_[index].allocation);
  if (slot != slots_.end() && slot->second.subtask == index) slot->second.subtask.reset();
}

ExecutionGraph::Update ExecutionGraph::update(const AttemptReport& report, MonoTime now,
                                              int64_t nowMs) {
  const std::optional<uint32_t> vertex = vertexNamed(report.vertex);
  if (!vertex) return Update::kUnknown;
  const Vertex& v = vertices_[*vertex];
  if (report.subtaskIndex >= v.parallelism) return Update::kUnknown;
  const uint32_t index = v.first + report.subtaskIndex;
  Subtask& subtask = subtasks_[index];
  if (subtask.attempts == 0 || subtask.attempt != report.attempt) return Update::kUnknown;
  if (isTerminal(subtask.state) || rank(report.state) <= rank(subtask.state)) {
    return Update::kRepeated;
  }
  if (subtask.phase == Phase::kExpected && isTerminal(report.state)) ++reconciliation_.ended;
  if (isTerminal(report.state) && !report.outputProblem.empty()) {
    rare().outputProblems[index] = report.outputProblem;
  }
  switch (report.state) {
    case ExecutionState::RUNNING:
      if (rare_) rare_->workerFaults.erase(index);
      subtask.pid = report.pid;
      subtask.startedAtMs = report.startedAtMs != 0 ? report.startedAtMs : nowMs;
      anyRunning_ = true;
      setState(index, report.state, nowMs);
      break;
    case ExecutionState::FINISHED:
      subtask.exitCode = report.exitCode;
      subtask.endedAtMs = report.endedAtMs != 0 ? report.endedAtMs : nowMs;
      setState(index, report.state, nowMs);
      finished(index, nowMs);
      break;
    case ExecutionState::FAILED: {
      subtask.exitCode = report.exitCode;
      subtask.termSignal = report.termSignal;
      subtask.endedAtMs = report.endedAtMs != 0 ? report.endedAtMs : nowMs;
      setState(index, report.state, nowMs);
      std::string message(report.failureMessage);
      if (message.empty()) {
        message = report.termSignal != 0 ? "killed by signal " + std::to_string(report.termSignal)
                                         : "exited with code " + std::to_string(report.exitCode);
      }
      if (report.workerFault) {
        workerFaulted(index, message, now, nowMs);
      } else {
        failed(index, message, report.exitCode, now, nowMs);
      }
      break;
    }
    case ExecutionState::CANCELED:
      subtask.endedAtMs = report.endedAtMs != 0 ? report.endedAtMs : nowMs;
      setState(index, report.state, nowMs);
      if (frozen()) {
        releaseSlot(index);
        setPhase(index, Phase::kStopped);
      } else {
        // Nobody asked for it while the job runs (the worker freed the slot, say): the subtask
        // has to run again, as after a failure.
        failed(index, "attempt canceled by its worker", 0, now, nowMs);
      }
      break;
    default:
      setState(index, report.state, nowMs);
      break;
  }
  return Update::kApplied;
}

void ExecutionGraph::deployFailed(uint32_t index, const AttemptId& attempt,
                                  const std::string& message, MonoTime now, int64_t nowMs,
                                  FailureCause cause) {
  Subtask& subtask = subtasks_[index];
  if (subtask.attempt != attempt || subtask.phase != Phase::kLive ||
      subtask.state != ExecutionState::DEPLOYING) {
    return;
  }
  subtask.endedAtMs = nowMs;
  setState(index, ExecutionState::FAILED, nowMs);
  if (cause == FailureCause::kWorker) {
    workerFaulted(index, message, now, nowMs);
  } else {
    failed(index, message, 0, now, nowMs);
  }
}

void ExecutionGraph::attemptLost(uint32_t index, const AttemptId& attempt,
                                 const std::string& message, MonoTime now, int64_t nowMs) {
  Subtask& subtask = subtasks_[index];
  if (subtask.attempt != attempt || subtask.phase != Phase::kLive) return;
  subtask.endedAtMs = nowMs;
  setState(index, ExecutionState::FAILED, nowMs);
  failed(index, message, 0, now, nowMs);
}

std::vector<HeldSlot> ExecutionGraph::workerLost(const ResourceId& worker,
                                                 const std::string& message, MonoTime now,
                                                 int64_t nowMs) {
  std::vector<uint32_t> live;
  std::vector<HeldSlot> dropped;
  for (const auto& [allocation, slot] : slots_) {
    if (slot.worker != worker) continue;
    dropped.push_back(HeldSlot{allocation, worker});
    if (slot.subtask) live.push_back(*slot.subtask);
  }
  for (uint32_t index : live) {
    Subtask& subtask = subtasks_[index];
    if (subtask.phase != Phase::kLive) continue;
    subtask.endedAtMs = nowMs;
    setState(index, ExecutionState::FAILED, nowMs);
    failed(index, message, 0, now, nowMs);
  }
  for (const HeldSlot& slot : dropped) slots_.erase(slot.allocation);
  return dropped;
}

void ExecutionGraph::abandon(uint32_t index, const AttemptId& attempt, int64_t nowMs) {
  Subtask& subtask = subtasks_[index];
  if (subtask.attempt != attempt ||
      (subtask.phase != Phase::kLive && subtask.phase != Phase::kExpected)) {
    return;
  }
  subtask.endedAtMs = nowMs;
  setState(index, ExecutionState::CANCELED, nowMs);
  releaseSlot(index);
  setPhase(index, Phase::kStopped);
}

void ExecutionGraph::stop() {
  if (stopped_) return;
  stopped_ = true;
  // Nothing waits for a slot or a restart any more.
  for (uint32_t index = 0; index < subtasks_.size(); ++index) {
    const Phase phase = subtasks_[index].phase;
    if (phase == Phase::kWaiting || phase == Phase::kRestartDelay) setPhase(index, Phase::kStopped);
  }
}

std::vector<Transition> ExecutionGraph::takeTransitions() {
  std::vector<Transition> out;
  out.swap(transitions_);
  return out;
}

void ExecutionGraph::failed(uint32_t index, const std::string& message, int32_t exitCode,
                            MonoTime now, int64_t nowMs) {
  Subtask& subtask = subtasks_[index];
  releaseSlot(index);
  rare().failureMessages[index] = message;
  if (frozen()) {
    // A failure while the job is released or after it ended: no restart, and the job's root
    // cause stays.
    setPhase(index, Phase::kStopped);
    return;
  }
  rare().failure = Failure{message, index, subtask.attempt, exitCode, nowMs};
  const std::optional<Duration> delay = strategy_.onFailure(now);
  if (!delay) {
    setPhase(index, Phase::kStopped);
    rare_->failure->message = message + " (" + strategy_.giveUpReason() + ")";
    endJob(wire::JobState::FAILED, nowMs);
    return;
  }
  restartDelayMs_ += delay->count();
  subtask.restartAt = now + *delay;
  setPhase(index, Phase::kRestartDelay);
}

void ExecutionGraph::workerFaulted(uint32_t index, const std::string& message, MonoTime now,
                                   int64_t nowMs) {
  Subtask& subtask = subtasks_[index];
  if (frozen()) {
    failed(index, message, 0, now, nowMs);
    return;
  }
  WorkerFaults& faults = rare().workerFaults[index];
  if (++faults.inARow >= kMaxWorkerFaults) {
    rare_->workerFaults.erase(index);
    failed(index,
           message + " (the " + std::to_string(kMaxWorkerFaults) +
               "th worker fault of the subtask in a row, counted as its failure)",
           0, now, nowMs);
    return;
  }
  // The slot leaves the job: its worker could not use it, and the ResourceManager is told to
  // match the subtask elsewhere (takeFaultedSlots).
  auto slot = slots_.find(subtask.allocation);
  if (slot != slots_.end() && slot->second.subtask == index) {
    rare_->faultedSlots.push_back(HeldSlot{slot->first, slot->second.worker});
    slots_.erase(slot);
  }
  rare_->failureMessages[index] = message;
  faults.worker = subtask.worker;
  const Duration delay = std::min(
      kWorkerFaultMaxDelay, kWorkerFaultDelay * (1 << std::min<uint32_t>(faults.inARow - 1, 16)));
  restartDelayMs_ += delay.count();
  subtask.restartAt = now + delay;
  setPhase(index, Phase::kRestartDelay);
}

std::vector<HeldSlot> ExecutionGraph::takeFaultedSlots() {
  std::vector<HeldSlot> out;
  if (rare_) out.swap(rare_->faultedSlots);
  return out;
}

void ExecutionGraph::failJob(const std::string& message, int64_t nowMs) {
  if (frozen()) return;
  rare().failure = Failure{message, kNoSubtask, AttemptId(), 0, nowMs};
  endJob(wire::JobState::FAILED, nowMs);
}

void ExecutionGraph::finished(uint32_t index, int64_t nowMs) {
  releaseSlot(index);
  if (rare_) rare_->workerFaults.erase(index);
  setPhase(index, Phase::kFinished);
  Vertex& vertex = vertices_[vertexOf(index)];
  if (++vertex.finished < vertex.parallelism) return;
  ++finishedVertices_;
  for (uint32_t downstream : vertex.downstream) --vertices_[downstream].unfinishedUpstream;
  if (finishedVertices_ == vertices_.size()) endJob(wire::JobState::FINISHED, nowMs);
}

void ExecutionGraph::endJob(wire::JobState state, int64_t nowMs) {
  dispatcher::JobEnd end;
  end.state = state;
  end.restarts = strategy_.restarts();
  end.netRuntimeMs =
      static_cast<uint64_t>(std::max<int64_t>(0, nowMs - startedAtMs_ - restartDelayMs_));
  const std::optional<Failure>& failure = latestFailure();
  if (state == wire::JobState::FAILED && failure) {
    end.failureMessage = failure->message;
    if (failure->subtask != kNoSubtask) {
      end.failureVertex = viewOf(vertexReader(vertexOf(failure->subtask)).getName());
      end.failureSubtask = indexInVertex(failure->subtask);
    }
    end.failureAttempt = failure->attempt;
    end.failureExitCode = failure->exitCode;
    end.failureAtMs = failure->atMs;
  }
  ended_ = std::make_unique<const dispatcher::JobEnd>(std::move(end));
  stop();
}

// ---- Restarts ---------------------------------------------------------------------------------

std::optional<MonoTime> ExecutionGraph::nextRestartAt() const {
  if (restartDelays_ == 0) return std::nullopt;
  std::optional<MonoTime> next;
  for (const Subtask& subtask : subtasks_) {
    if (subtask.phase == Phase::kRestartDelay && (!next || subtask.restartAt < *next)) {
      next = subtask.restartAt;
    }
  }
  return next;
}

void ExecutionGraph::restartDue(MonoTime now) {
  if (restartDelays_ == 0) return;
  for (uint32_t index = 0; index < subtasks_.size(); ++index) {
    const Subtask& subtask = subtasks_[index];
    if (subtask.phase == Phase::kRestartDelay && subtask.restartAt <= now) {
      setPhase(index, Phase::kWaiting);
    }
  }
}

// ---- The job ----------------------------------------------------------------------------------

wire::JobState ExecutionGraph::state() const {
  if (ended_) return ended_->state;
  if (reconciling_) return wire::JobState::RECONCILING;
  if (restartDelays_ > 0) return wire::JobState::RESTARTING;
  // CREATED until an attempt first runs (docs/jobgraph.md, "How a job runs and ends").
  return anyRunning_ || strategy_.restarts() > 0 ? wire::JobState::RUNNING
                                                 : wire::JobState::CREATED;
}

bool ExecutionGraph::takeFirstRunning() {
  if (!anyRunning_ || firstRunningTaken_) return false;
  firstRunningTaken_ = true;
  return true;
}

std::vector<ExecutionGraph::LiveAttempt> ExecutionGraph::liveAttempts() const {
  std::vector<LiveAttempt> out;
  for (const auto& [allocation, slot] : slots_) {
    if (!slot.subtask) continue;
    const Subtask& subtask = subtasks_[*slot.subtask];
    if (subtask.phase == Phase::kLive) {
      out.push_back(LiveAttempt{*slot.subtask, subtask.attempt, subtask.worker});
    }
  }
  if (expectedLeft_ == 0) return out;
  for (uint32_t index = 0; index < subtasks_.size(); ++index) {
    // No worker known yet: a zero ResourceId.
    if (subtasks_[index].phase == Phase::kExpected) {
      out.push_back(LiveAttempt{index, subtasks_[index].attempt, ResourceId()});
    }
  }
  return out;
}

std::vector<HeldSlot> ExecutionGraph::heldSlots() const {
  std::vector<HeldSlot> out;
  out.reserve(slots_.size());
  for (const auto& [allocation, slot] : slots_) out.push_back(HeldSlot{allocation, slot.worker});
  return out;
}

bool ExecutionGraph::holdsSlotsOn(const ResourceId& worker) const {
  return std::any_of(slots_.begin(), slots_.end(),
                     [&](const auto& entry) { return entry.second.worker == worker; });
}

// ---- Reads ------------------------------------------------------------------------------------

bool ExecutionGraph::isLiveAttempt(std::string_view vertex, uint32_t subtaskIndex,
                                   const AttemptId& attempt) const {
  const std::optional<uint32_t> found = vertexNamed(vertex);
  if (!found) return false;
  const Vertex& v = vertices_[*found];
  if (subtaskIndex >= v.parallelism) return false;
  const Subtask& subtask = subtasks_[v.first + subtaskIndex];
  return subtask.attempts > 0 && subtask.attempt == attempt &&
         (subtask.phase == Phase::kLive || subtask.phase == Phase::kExpected);
}

std::optional<ResourceId> ExecutionGraph::workerOfAttempt(std::string_view vertex,
                                                          uint32_t subtaskIndex,
                                                          const AttemptId& attempt) const {
  const std::optional<uint32_t> found = vertexNamed(vertex);
  if (!found) return std::nullopt;
  const Vertex& v = vertices_[*found];
  if (subtaskIndex >= v.parallelism) return std::nullopt;
  const Subtask& subtask = subtasks_[v.first + subtaskIndex];
  if (subtask.attempts == 0 || subtask.attempt != attempt || isTerminal(subtask.state)) {
    return std::nullopt;
  }
  return subtask.worker;
}

std::optional<ResourceId> ExecutionGraph::workerOfSlot(const AllocationId& allocation) const {
  auto found = slots_.find(allocation);
  if (found == slots_.end()) return std::nullopt;
  return found->second.worker;
}

std::vector<AttemptId> ExecutionGraph::unknownAmong(const std::vector<AttemptId>& attempts) const {
  std::set<AttemptId> unknown(attempts.begin(), attempts.end());
  for (const Subtask& subtask : subtasks_) {
    if (unknown.empty()) break;
    if (subtask.attempts > 0) unknown.erase(subtask.attempt);
  }
  return {unknown.begin(), unknown.end()};
}

std::string_view ExecutionGraph::failureMessage(uint32_t subtask) const {
  const auto& messages = rareOrNone().failureMessages;
  auto found = messages.find(subtask);
  return found == messages.end() ? std::string_view() : std::string_view(found->second);
}

const ExecutionGraph::Rare& ExecutionGraph::rareOrNone() const {
  static const Rare kNone;
  return rare_ ? *rare_ : kNone;
}

size_t ExecutionGraph::heldBytes() const {
  size_t bytes = sizeof(*this) + subtasks_.heldBytes();
  for (const Vertex& vertex : vertices_) {
    bytes += sizeof(Vertex) +
             (vertex.upstream.capacity() + vertex.downstream.capacity()) * sizeof(uint32_t);
  }
  constexpr size_t kNode = 32;  // A std::map node's links and colour.
  bytes += byName_.capacity() * sizeof(uint32_t);
  bytes += slots_.size() * (kNode + sizeof(std::pair<AllocationId, Slot>));
  if (rare_) {
    const Rare& rare = *rare_;
    bytes += sizeof(Rare);
    if (rare.failure) bytes += rare.failure->message.capacity();
    bytes += rare.recordedAt.size() * (kNode + sizeof(std::pair<uint32_t, HeldSlot>));
    for (const auto* messages : {&rare.failureMessages, &rare.outputProblems}) {
      for (const auto& [index, message] : *messages) {
        bytes += kNode + sizeof(std::pair<uint32_t, std::string>) + message.capacity();
      }
    }
    bytes += rare.workerFaults.size() * (kNode + sizeof(std::pair<uint32_t, WorkerFaults>));
    bytes += rare.faultedSlots.capacity() * sizeof(HeldSlot);
  }
  if (slotProblem_) bytes += sizeof(std::string) + slotProblem_->capacity();
  bytes += transitions_.capacity() * sizeof(Transition);
  return bytes;
}

}  // namespace regent::jobmaster

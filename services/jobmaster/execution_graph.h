// The scheduling logic of one JobMaster, without RPC or timers: the job's vertices and subtasks
// (read from the JobGraph the Dispatcher keeps), the latest attempt of each subtask, the slots
// the job holds, which subtask goes into which slot, the requirements to declare, failures and
// their restarts by the restart strategy, the job's state, and what jobs status shows. The
// JobMaster (job_master.cc) carries out what it decides and feeds it what arrives; unit tests
// drive it on a fake clock.
//
// Memory: one small fixed-size record per subtask (no strings, no containers); vertex data
// (names, commands) is read from the JobGraph reader, which must outlive this object. Failure
// messages are kept only for subtasks that failed.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/ids.h"
#include "common/time.h"
#include "rpc/schema/jobs.capnp.h"
#include "services/dispatcher/job_runner.h"
#include "services/jobmaster/restart_strategy.h"
#include "services/resourcemanager/job_master_port.h"
#include "services/resourcemanager/resource_profile.h"

namespace regent::jobmaster {

using resourcemanager::Profile;
using resourcemanager::Requirement;

// A subtask attempt to deploy into a slot (TaskExecutorGateway.submitTask).
struct Deployment {
  uint32_t subtask = 0;  // Global subtask index (ExecutionGraph::vertexOf / indexInVertex).
  AttemptId attempt;
  uint32_t attemptNumber = 0;
  AllocationId allocation;
  ResourceId worker;
  bool restart = false;  // The subtask's previous attempt failed.
};

// A slot offered by a worker (wire::SlotOffer).
struct OfferedSlot {
  AllocationId allocation;
  Profile profile;
};

// A slot the job holds and no longer needs, or held on a lost worker.
struct HeldSlot {
  AllocationId allocation;
  ResourceId worker;
};

// FINISHED, FAILED or CANCELED: an attempt in one of these states never changes again.
bool isTerminal(wire::ExecutionState state);

// An attempt's state as a worker reports it (wire::TaskExecutionState).
struct AttemptReport {
  AttemptId attempt;
  std::string_view vertex;
  uint32_t subtaskIndex = 0;
  wire::ExecutionState state = wire::ExecutionState::CREATED;
  uint32_t pid = 0;
  int32_t exitCode = 0;
  int32_t termSignal = 0;
  std::string failureMessage;  // Owned: a report outlives the message it was read from.
  std::string outputProblem;   // Owned, bounded: why the attempt's output is incomplete.
  int64_t startedAtMs = 0;
  int64_t endedAtMs = 0;
  // FAILED: the worker could not start the attempt for want of its own resources
  // (wire::TaskExecutionState.workerFault). Ignored with any other state.
  bool workerFault = false;
};

// Why an attempt failed, for what follows (docs/jobgraph.md, "Worker faults").
enum class FailureCause {
  kAttempt,  // The task, its command, or a worker lost: the restart strategy decides.
  kWorker,   // The worker could not start it: it runs again elsewhere, no restart counted.
};

// Consecutive worker faults of one subtask after which the next one counts as the task's failure
// (a worker that keeps faulting, or claims to, cannot hold a job forever).
inline constexpr uint32_t kMaxWorkerFaults = 8;
// The wait before a subtask that a worker could not start runs again: this, doubled per worker
// fault in a row, at most kWorkerFaultMaxDelay.
inline constexpr Duration kWorkerFaultDelay{100};
inline constexpr Duration kWorkerFaultMaxDelay{5000};

// One change of an attempt's state, in the order they happened (for event lines and counters).
struct Transition {
  uint32_t subtask = 0;
  AttemptId attempt;
  wire::ExecutionState state = wire::ExecutionState::CREATED;
  int32_t exitCode = 0;
  int32_t termSignal = 0;
};

// Thread-safety: none (the JobMaster's loop thread owns it).
class ExecutionGraph final {
 public:
  enum class Update {
    kApplied,   // The state moved forward.
    kRepeated,  // Known attempt, state not newer than what is known: nothing changed.
    kUnknown,   // No attempt of this job by that id (the worker cancels it).
  };

  // `graph` (validated: names unique, upstream names exist, acyclic) must outlive this object.
  // `startedAtMs` (Unix ms) starts the job's net runtime.
  ExecutionGraph(JobId job, wire::JobGraph::Reader graph, RestartStrategy strategy,
                 int64_t startedAtMs);

  // ---- Failover (docs/jobgraph.md, "Failover") -------------------------------------------------
  // Starts from the progress record an earlier term wrote: FINISHED subtasks stay finished
  // (their downstream vertices runnable accordingly), live ones (DEPLOYING / RUNNING) become
  // expected attempts in RECONCILING, FAILED / CANCELED ones wait to run again (attempt numbers
  // continue); restarts, start time and restart delays are restored. Call once, right after
  // construction. Entries naming no subtask of this graph are skipped. Returns the number of
  // expected attempts; with none the job does not reconcile at all. A record that says the
  // strategy gave up (ended FAILED) ends the job FAILED at once with its stored root cause; live
  // entries then count as CANCELED (their workers' offers are cancelled) and 0 is returned.
  uint32_t recover(wire::JobProgress::Reader progress, int64_t nowMs);
  // While reconciling nothing is deployed and no requirement is stated; the job is RECONCILING.
  bool reconciling() const { return reconciling_; }
  // Expected attempts not yet accounted for (adopted, or reported terminal).
  uint32_t expectedLeft() const { return expectedLeft_; }
  // A worker offers `attempt` running in `slot`: adopted when it is the expected attempt of its
  // subtask (the slot is held for it, the attempt is live on `worker`: DEPLOYING when `report`
  // says so, the later RUNNING update bringing the pid; RUNNING with `report`'s pid otherwise; a
  // terminal state in `report` is applied with update() by the caller). A live attempt is not
  // adopted into a slot that serves another subtask; one that ended is (it takes no slot), so
  // callers adopt the live attempts of an offer first. Returns the subtask's global index when
  // adopted.
  std::optional<uint32_t> adopt(const ResourceId& worker, const OfferedSlot& slot,
                                const AttemptReport& report, int64_t nowMs);
  // An expected attempt and the slot the record says it was deployed into on its worker.
  struct ExpectedAttempt {
    uint32_t subtask = 0;
    AttemptId attempt;
    AllocationId allocation;
  };
  // The expected attempts the progress record places on `worker` (none from a record written
  // before it named workers: those wait for an offer or the end of reconciliation).
  std::vector<ExpectedAttempt> expectedOn(const ResourceId& worker) const;
  // The workers the record places expected attempts on, each once.
  std::vector<ResourceId> expectedWorkers() const;
  // The worker of expected `attempt` accounted for its slots without it (its slot report holds
  // no such allocation of the job: it restarted, or freed the slot; or it offered the slot
  // without the attempt: submitTask never reached it). While reconciling and `attempt` is still
  // `subtask`'s expected attempt, it FAILS with `message` (to the restart strategy) and counts
  // as unreported; returns whether it did.
  bool expectedMissing(uint32_t subtask, const AttemptId& attempt, const std::string& message,
                       MonoTime now, int64_t nowMs);
  struct Reconciliation {
    uint32_t adopted = 0;     // Expected attempts a worker offered.
    uint32_t ended = 0;       // Expected attempts reported terminal without being adopted.
    // Expected attempts failed: their worker accounted for its slots without them
    // (expectedMissing), or nobody reported them by the end (endReconciliation's `message`).
    uint32_t unreported = 0;
  };
  // Leaves RECONCILING: expected attempts nobody reported FAIL with `message` (to the restart
  // strategy); from now on the job schedules normally. No-op when not reconciling.
  Reconciliation endReconciliation(const std::string& message, MonoTime now, int64_t nowMs);

  // ---- The progress record --------------------------------------------------------------------
  // Moves on every change the progress record must hold (a new attempt, a terminal state, a
  // restart granted).
  uint64_t version() const { return version_; }
  // The record of everything so far (the latest attempt of every subtask that had one).
  void fillProgress(wire::JobProgress::Builder out, uint64_t epoch, int64_t nowMs) const;
  // Whether `attempt` is still `subtask`'s latest attempt and waits in DEPLOYING for its
  // submitTask.
  bool awaitsDeploy(uint32_t subtask, const AttemptId& attempt) const;

  // ---- Slots and deployment -------------------------------------------------------------------
  // Accepts the offered slots a subtask of a runnable vertex needs (a slot fits the subtask's
  // profile and no slot already held serves it); returns one flag per offer. A slot the job
  // holds already is accepted again, also once the job ended (until its release); no other is.
  std::vector<bool> offerSlots(const ResourceId& worker, const std::vector<OfferedSlot>& offers);
  // Puts the subtasks waiting for a slot into free held slots that fit them: each gets a fresh
  // attempt in DEPLOYING. Nothing once the job ended.
  std::vector<Deployment> schedule(int64_t nowMs);
  // Whether schedule() would deploy some but not all of the subtasks waiting for a slot: a free
  // held slot fits one of them, and the free slots cannot place them all.
  bool schedulesPartly() const;
  // The held slots no waiting or restarting subtask of a runnable vertex needs; they are dropped
  // (the caller frees them). None once the job ended (release frees everything).
  std::vector<HeldSlot> takeSurplusSlots();
  // The slots whose worker could not start an attempt in them since the last call: dropped
  // already; the caller frees them and tells the ResourceManager to look elsewhere.
  std::vector<HeldSlot> takeFaultedSlots();
  // One requirement per distinct profile: the subtasks of runnable vertices that did not
  // FINISH. Empty once the job ended.
  std::vector<Requirement> requirements() const;

  // ---- Attempt states -------------------------------------------------------------------------
  // A worker's report. States only move forward (CREATED < SCHEDULED < DEPLOYING < RUNNING <
  // CANCELING < terminal); a terminal state is never replaced. FAILED (and a CANCELED the job
  // did not ask for) goes to the restart strategy while the job runs, except a worker fault
  // (AttemptReport::workerFault): its slot is dropped (takeFaultedSlots), and the subtask runs
  // again after a short delay (kWorkerFaultDelay, growing), in a slot on another worker when the
  // job holds one, without counting a restart; the kMaxWorkerFaults-th fault in a row goes to
  // the strategy.
  Update update(const AttemptReport& report, MonoTime now, int64_t nowMs);
  // submitTask of `attempt` failed (refused, timed out, connection lost): the attempt FAILS with
  // `message` unless a worker already reported it RUNNING or later. kWorker when the worker
  // refused because it cannot run tasks now (stopping, no attempt directory).
  void deployFailed(uint32_t subtask, const AttemptId& attempt, const std::string& message,
                    MonoTime now, int64_t nowMs, FailureCause cause = FailureCause::kAttempt);
  // `attempt`'s worker no longer lists it in its heartbeats: the attempt FAILS with `message`
  // (to the restart strategy) while it is `subtask`'s latest attempt and live.
  void attemptLost(uint32_t subtask, const AttemptId& attempt, const std::string& message,
                   MonoTime now, int64_t nowMs);
  // `worker` is gone (silent, disconnected): its live attempts FAIL with `message`, its slots
  // are dropped and returned (to free, best effort).
  std::vector<HeldSlot> workerLost(const ResourceId& worker, const std::string& message,
                                   MonoTime now, int64_t nowMs);
  // The job is being released (cancelled, or ended and cleaned up): from now on nothing is
  // accepted, deployed or restarted, requirements are empty, and attempts that end (CANCELED or
  // FAILED) just stop. The job's state stays what it was.
  void stop();
  bool stopped() const { return stopped_; }
  // The job cannot go on for a reason no restart mends (its progress record cannot be stored):
  // it ends FAILED at once, whatever the restart strategy says, with `message` as its root cause
  // (naming no subtask). Nothing once the job ended or is released.
  void failJob(const std::string& message, int64_t nowMs);
  // Marks a live attempt CANCELED without a worker's word (release: the worker does not know
  // it or cannot be reached). Never restarts.
  void abandon(uint32_t subtask, const AttemptId& attempt, int64_t nowMs);
  // The attempts changed since the last call, in order.
  std::vector<Transition> takeTransitions();

  // ---- Restarts ---------------------------------------------------------------------------------
  // When the earliest restart delay ends; nullopt when none runs.
  std::optional<MonoTime> nextRestartAt() const;
  // Subtasks whose restart delay ended by `now` wait for a slot again.
  void restartDue(MonoTime now);

  // ---- The job ----------------------------------------------------------------------------------
  // CREATED until an attempt first runs (or the first restart), then RUNNING; RESTARTING while a
  // restart delay runs; once ended FINISHED / FAILED.
  wire::JobState state() const;
  bool ended() const { return ended_ != nullptr; }
  // Null until the job ended; FAILED carries the root cause.
  const dispatcher::JobEnd* end() const { return ended_.get(); }
  uint32_t restarts() const { return strategy_.restarts(); }
  // True once, for the first report of RUNNING of any attempt of the job.
  bool takeFirstRunning();

  // Live attempts (DEPLOYING, RUNNING, CANCELING): (subtask, attempt, worker).
  struct LiveAttempt {
    uint32_t subtask;
    AttemptId attempt;
    ResourceId worker;
  };
  std::vector<LiveAttempt> liveAttempts() const;
  // Every held slot.
  std::vector<HeldSlot> heldSlots() const;
  // Whether `worker` holds slots of the job.
  bool holdsSlotsOn(const ResourceId& worker) const;

  // ---- Reads ------------------------------------------------------------------------------------
  size_t vertexCount() const { return vertices_.size(); }
  size_t subtaskCount() const { return subtasks_.size(); }
  uint32_t vertexOf(uint32_t subtask) const;
  uint32_t indexInVertex(uint32_t subtask) const;
  wire::JobGraph::Reader graph() const { return graph_; }
  wire::JobVertex::Reader vertexReader(uint32_t vertex) const {
    return graph_.getVertices()[vertex];
  }
  AttemptId attemptOf(uint32_t subtask) const { return subtasks_[subtask].attempt; }
  // The latest attempt's number (0 for the first); meaningful once the subtask had one.
  uint32_t attemptNumberOf(uint32_t subtask) const { return subtasks_[subtask].attempts - 1; }
  // Whether `attempt` is the latest attempt of subtask `subtaskIndex` of vertex `vertex` and
  // still live (DEPLOYING, RUNNING, CANCELING). An attempt the JobMaster failed (its worker was
  // lost, say) is not live any more, even before the subtask's next attempt is deployed.
  bool isLiveAttempt(std::string_view vertex, uint32_t subtaskIndex,
                     const AttemptId& attempt) const;
  // The worker `attempt`, the latest attempt of subtask `subtaskIndex` of `vertex`, was
  // deployed to or adopted on: a zero id while no worker accounted for it (an expected attempt
  // of a recovered job), nullopt when `attempt` is no such latest attempt or has ended (no
  // report can change it any more).
  std::optional<ResourceId> workerOfAttempt(std::string_view vertex, uint32_t subtaskIndex,
                                            const AttemptId& attempt) const;
  // The worker a held slot is on, or nullopt when the job holds no slot `allocation`.
  std::optional<ResourceId> workerOfSlot(const AllocationId& allocation) const;
  // Whether `attempt` is `subtask`'s latest attempt and live on its worker (not expected).
  bool isLive(uint32_t subtask, const AttemptId& attempt) const {
    return subtasks_[subtask].attempt == attempt && subtasks_[subtask].phase == Phase::kLive;
  }
  // Those of `attempts` that are no subtask's latest attempt (a worker's heartbeat lists them:
  // the worker runs what this JobMaster does not know, or no longer wants).
  std::vector<AttemptId> unknownAmong(const std::vector<AttemptId>& attempts) const;
  // The latest failure message of `subtask`; empty when none failed.
  std::string_view failureMessage(uint32_t subtask) const;
  // Why the ResourceManager refused the job's slot requirements (a profile no registered worker
  // and no provider's worker fits, naming the options), shown in the waiting reason; "" once a
  // declaration was accepted.
  void setSlotProblem(std::string problem) {
    slotProblem_ =
        problem.empty() ? nullptr : std::make_unique<const std::string>(std::move(problem));
  }
  // jobStatus: state, tasks, vertices with subtasks, failure, restarts, waitingReason.
  // `port` gives the workers' addresses and the cluster's slot counts.
  void describe(wire::JobStatus::Builder status, MonoTime now,
                const resourcemanager::JobMasterPort& port) const;
  // listJobs: counts over all vertices.
  void counts(wire::TaskCounts::Builder tasks) const;
  // The latest failure (the root cause once FAILED), if any.
  // `subtask` is kNoSubtask for a failure of the whole job (failJob).
  static constexpr uint32_t kNoSubtask = UINT32_MAX;
  struct Failure {
    std::string message;
    uint32_t subtask = 0;
    AttemptId attempt;
    int32_t exitCode = 0;
    int64_t atMs = 0;
  };
  const std::optional<Failure>& latestFailure() const { return rareOrNone().failure; }
  // Approximate bytes held (containers' sizes).
  size_t heldBytes() const;

 private:
  enum class Phase : uint8_t {
    kWaiting,       // No live attempt; deploys when its vertex is runnable and a slot is free.
    kLive,          // The latest attempt is DEPLOYING, RUNNING or CANCELING.
    kRestartDelay,  // The latest attempt FAILED; a new one waits for restartAt.
    kFinished,
    kStopped,   // Ended without finishing (the job ended).
    kExpected,  // Recovered live attempt (RECONCILING) no worker accounted for yet.
  };
  struct Subtask {
    AttemptId attempt;        // The latest attempt; zero before the first.
    ResourceId worker;        // Of the latest attempt.
    AllocationId allocation;  // Of the latest attempt.
    MonoTime restartAt{};
    int64_t startedAtMs = 0;
    int64_t stateChangedAtMs = 0;
    int64_t endedAtMs = 0;
    uint32_t attempts = 0;
    uint32_t pid = 0;
    int32_t exitCode = 0;
    int32_t termSignal = 0;
    wire::ExecutionState state = wire::ExecutionState::CREATED;
    Phase phase = Phase::kWaiting;
  };
  struct Vertex {
    Profile profile;
    uint32_t first = 0;  // Global index of subtask 0.
    uint32_t parallelism = 0;
    uint32_t finished = 0;
    uint32_t waiting = 0;             // Subtasks in kWaiting.
    uint32_t restarting = 0;          // Subtasks in kRestartDelay.
    uint32_t unfinishedUpstream = 0;  // Upstream vertices not all FINISHED.
    std::vector<uint32_t> upstream;
    std::vector<uint32_t> downstream;
    bool runnable() const { return unfinishedUpstream == 0; }
  };
  struct Slot {
    ResourceId worker;
    Profile profile;
    std::optional<uint32_t> subtask;  // The live attempt in it.
  };
  // The subtasks' records, by global index, made with the first write: until then every subtask
  // reads as one that never had an attempt, so that a job waiting for its first slot holds
  // records per vertex, not per subtask. Reads through a const table never make them.
  class SubtaskTable {
   public:
    explicit SubtaskTable(uint32_t count) : count_(count) {}
    uint32_t size() const { return count_; }
    const Subtask& operator[](uint32_t index) const {
      return rows_.empty() ? kUnstarted : rows_[index];
    }
    Subtask& operator[](uint32_t index) {
      if (rows_.empty()) rows_.resize(count_);
      return rows_[index];
    }
    size_t heldBytes() const { return rows_.capacity() * sizeof(Subtask); }

    class Iterator {
     public:
      Iterator(const SubtaskTable& table, uint32_t index) : table_(&table), index_(index) {}
      const Subtask& operator*() const { return (*table_)[index_]; }
      Iterator& operator++() {
        ++index_;
        return *this;
      }
      bool operator!=(const Iterator& other) const { return index_ != other.index_; }

     private:
      const SubtaskTable* table_;
      uint32_t index_;
    };
    Iterator begin() const { return Iterator(*this, 0); }
    Iterator end() const { return Iterator(*this, count_); }

   private:
    static const Subtask kUnstarted;
    uint32_t count_;
    std::vector<Subtask> rows_;
  };

  // schedule()'s matching, without applying it: each subtask waiting in a runnable vertex
  // (vertices in order) with the free held slot it gets (after a worker fault, one on another
  // worker first), a vertex's turn over at its first subtask no free slot fits. Empty once the
  // job ended, is stopped or reconciles.
  std::vector<std::pair<uint32_t, AllocationId>> placements() const;
  // The vertex named `name` (the first of that name), or nullopt.
  std::optional<uint32_t> vertexNamed(std::string_view name) const;
  void setState(uint32_t index, wire::ExecutionState state, int64_t nowMs);
  void setPhase(uint32_t index, Phase phase);
  void releaseSlot(uint32_t index);
  // The latest attempt of `index` failed with `message`: restart or fail the job.
  void failed(uint32_t index, const std::string& message, int32_t exitCode, MonoTime now,
              int64_t nowMs);
  // The latest attempt of `index` could not be started by its worker: its slot is dropped and
  // the subtask waits a short delay, or the fault goes to failed() once too many came in a row.
  void workerFaulted(uint32_t index, const std::string& message, MonoTime now, int64_t nowMs);
  void finished(uint32_t index, int64_t nowMs);
  void endJob(wire::JobState state, int64_t nowMs);
  // Per profile: subtasks of runnable vertices waiting for a slot or a restart, less the free
  // held slots that serve them.
  std::map<Profile, uint32_t> unservedNeeds() const;
  std::string waitingReason(uint32_t index, MonoTime now,
                            const resourcemanager::SlotCounts& slots) const;
  void fillAttempt(uint32_t index, wire::TaskExecutionState::Builder out) const;

  const JobId job_;
  const wire::JobGraph::Reader graph_;
  RestartStrategy strategy_;
  std::vector<Vertex> vertices_;
  // Vertex indices in the order of their names (read from graph_; the first of equal names
  // first), for vertexNamed().
  std::vector<uint32_t> byName_;
  SubtaskTable subtasks_{0};
  std::map<AllocationId, Slot> slots_;
  struct WorkerFaults {
    uint32_t inARow = 0;  // Worker faults of the subtask since an attempt of it last ran.
    ResourceId worker;    // The worker of the latest one.
  };
  // What a job holds only once something went off the plain path (a failure, a worker fault, cut
  // output) or it was recovered with expected attempts: allocated with the first such fact, so
  // that a queued job, of which a master may hold many thousands, carries none of it.
  struct Rare {
    std::vector<HeldSlot> faultedSlots;  // Dropped by worker faults, for takeFaultedSlots.
    // Subtasks whose latest attempts were worker faults.
    std::map<uint32_t, WorkerFaults> workerFaults;
    std::map<uint32_t, std::string> failureMessages;  // Latest failure of each subtask that failed.
    // Where the progress record places each expected attempt (kExpected subtasks whose record
    // named a worker; erased when they leave kExpected).
    std::map<uint32_t, HeldSlot> recordedAt;
    // Why the latest attempt's output is incomplete, for the few subtasks whose output was cut.
    std::map<uint32_t, std::string> outputProblems;
    std::optional<Failure> failure;  // latestFailure().
  };
  Rare& rare() {
    if (!rare_) rare_ = std::make_unique<Rare>();
    return *rare_;
  }
  // Reads: an empty Rare while none was allocated.
  const Rare& rareOrNone() const;
  std::unique_ptr<Rare> rare_;
  // setSlotProblem(); null while there is none. Apart from Rare: every job waiting for a profile
  // no worker offers holds one.
  std::unique_ptr<const std::string> slotProblem_;
  std::vector<Transition> transitions_;
  std::unique_ptr<const dispatcher::JobEnd> ended_;  // Apart: larger than a queued job needs.
  uint32_t restartDelays_ = 0;  // Subtasks in kRestartDelay.
  uint32_t finishedVertices_ = 0;
  bool anyRunning_ = false;
  bool stopped_ = false;  // stop() was called.
  bool reconciling_ = false;
  uint32_t expectedLeft_ = 0;  // Subtasks in kExpected.
  Reconciliation reconciliation_;
  uint64_t version_ = 0;
  // Nothing is deployed or restarted any more.
  bool frozen() const { return ended_ != nullptr || stopped_; }
  bool firstRunningTaken_ = false;
  int64_t startedAtMs_ = 0;
  int64_t restartDelayMs_ = 0;  // Restart delays granted, left out of the net runtime.
};

}  // namespace regent::jobmaster

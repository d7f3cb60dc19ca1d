// The TaskExecutor's slot table: the worker's slots, the attempts running in them, and how both
// read on the wire (slot reports, attempt states). Internal to services/taskexecutor/.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/ids.h"
#include "rpc/schema/gateways.capnp.h"
#include "services/taskexecutor/task_runner.h"

namespace regent::taskexecutor {

struct TaskExecutorOptions;

// One attempt as the worker holds it while it runs, and as it reports it.
struct AttemptRecord {
  AttemptId attempt;
  JobId job;
  AllocationId allocation;
  std::string vertex;
  uint32_t subtask = 0;
  uint32_t attemptNumber = 0;
  TaskUpdate latest;     // Phase kRunning until the terminal update.
  bool started = false;  // The runner reported kRunning.
};

// One slot as the worker holds it: free, or allocated to a job (requestSlot).
struct SlotState {
  uint32_t index = 0;
  std::optional<AllocationId> allocation;
  std::optional<JobId> job;
  // The epoch whose JobMaster accepted the slot (offerSlots); 0 while not accepted by any.
  uint64_t acceptedEpoch = 0;
  // The last attempt that FINISHED in the slot, kept while the slot stays allocated and starts
  // no other attempt, and offered with the slot: a JobMaster acknowledges a FINISHED update
  // before any store holds it and frees the slot only once one does, so a leader that dies
  // before leaves the end here for the next one to read in the offer (docs/jobgraph.md,
  // "Failover").
  std::optional<AttemptRecord> finished;
};

// Loop-thread only. `options` and `runner` must outlive it.
class SlotTable {
 public:
  SlotTable(const TaskExecutorOptions& options, TaskRunner& runner);

  std::vector<SlotState>& slots() { return slots_; }
  const std::vector<SlotState>& slots() const { return slots_; }
  // Attempts accepted by submitTask and not ended yet.
  std::map<AttemptId, AttemptRecord>& attempts() { return attempts_; }
  const std::map<AttemptId, AttemptRecord>& attempts() const { return attempts_; }

  // requestSlot: allocates the slot the request names to its job, or fills `results`' failure.
  // Returns the job when the slot was newly allocated (it is to be offered), nullopt otherwise
  // (refused, or the same allocation again).
  std::optional<JobId> allocate(wire::TaskExecutorGateway::RequestSlotParams::Reader params,
                                wire::TaskExecutorGateway::RequestSlotResults::Builder results);
  // Whether `allocation` is held for `job`.
  bool holds(const AllocationId& allocation, const JobId& job) const;
  // `record` (its latest update terminal) ended in its slot: a FINISHED one stays offered with
  // the slot (SlotState::finished).
  void attemptEnded(const AttemptRecord& record);
  // Another attempt is to start in `allocation`: its JobMaster stored what ended there before.
  void attemptStarting(const AllocationId& allocation);
  // Cancels the slot's attempts through the runner and frees it. Returns the job it held.
  std::optional<JobId> release(SlotState& slot, const std::string& cause);
  // Cancels the job's attempts (also those whose slot was freed before they ended).
  void cancelAttemptsOf(const JobId& job);
  // Whether anything of the job is left here: a slot or an attempt.
  bool holdsAnythingOf(const JobId& job) const;

  // Every slot, with its allocation and the attempts running in it.
  void fillReport(wire::SlotReport::Builder report) const;
  void fillAttempt(wire::TaskExecutionState::Builder state, const AttemptRecord& record) const;
  // A slot's profile as offered and reported (worker.slot-cpu, worker.slot-memory).
  void fillProfile(wire::ResourceProfile::Builder profile) const;

 private:
  const TaskExecutorOptions& options_;
  TaskRunner& runner_;
  std::vector<SlotState> slots_;
  std::map<AttemptId, AttemptRecord> attempts_;
};

}  // namespace regent::taskexecutor

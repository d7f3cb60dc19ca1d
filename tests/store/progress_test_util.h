// Building a JobMaster's progress record (wire::JobProgress, rpc/schema/jobs.capnp) in tests: the
// one builder of the suite, so a test states only the subtasks and counters it is about.
#pragma once

#include <capnp/message.h>
#include <kj/memory.h>

#include <cstdint>
#include <vector>

#include "common/ids.h"
#include "rpc/schema/jobs.capnp.h"
#include "rpc/wire_ids.h"

namespace regent::testing {

// One subtask's latest attempt, as a SubtaskProgress holds it.
struct ProgressEntry {
  uint32_t subtask;
  AttemptId attempt;
  uint32_t attemptNumber;
  wire::ExecutionState state;
  // Where a live attempt was deployed; zero ids: not written (a record of an older master).
  ResourceId worker{};
  AllocationId allocation{};
};

// A progress record of job `id` written in term `epoch`, with `entries` as its subtasks (in the
// order given) and `restarts` granted so far. The other fields keep their defaults: a test that
// needs them sets them on the returned message's root.
inline kj::Own<capnp::MallocMessageBuilder> progressRecord(
    const JobId& id, const std::vector<ProgressEntry>& entries, uint32_t restarts = 0,
    uint64_t epoch = 1) {
  auto message = kj::heap<capnp::MallocMessageBuilder>();
  auto progress = message->initRoot<wire::JobProgress>();
  wire::setWireId(progress.initJobId(), id);
  progress.setEpoch(epoch);
  progress.setRestarts(restarts);
  auto list = progress.initSubtasks(static_cast<unsigned>(entries.size()));
  for (unsigned i = 0; i < entries.size(); ++i) {
    list[i].setSubtask(entries[i].subtask);
    wire::setWireId(list[i].initAttemptId(), entries[i].attempt);
    list[i].setAttemptNumber(entries[i].attemptNumber);
    list[i].setState(entries[i].state);
    if (!entries[i].worker.isZero()) {
      wire::setWireId(list[i].initResourceId(), entries[i].worker);
      wire::setWireId(list[i].initAllocationId(), entries[i].allocation);
    }
  }
  return message;
}

// `subtasks` subtasks 0.. each on an attempt of its own (random ids, so the record packs as a
// real one does), numbered `attemptNumber`: subtask 0 finished, the others running.
inline std::vector<ProgressEntry> firstFinishedOthersRunning(uint32_t subtasks,
                                                             uint32_t attemptNumber = 0) {
  std::vector<ProgressEntry> entries;
  for (uint32_t i = 0; i < subtasks; ++i) {
    entries.push_back({i, AttemptId::random(), attemptNumber,
                       i == 0 ? wire::ExecutionState::FINISHED : wire::ExecutionState::RUNNING});
  }
  return entries;
}

}  // namespace regent::testing

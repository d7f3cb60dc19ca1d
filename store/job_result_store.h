// JobResultStore (docs/stores.md): the outcome of every terminal job. A result is created dirty
// before the job's cleanup (JobGraph removed, slots freed) and marked clean after it, so a new
// leader finishes the cleanup of dirty results and never re-runs their jobs.
#pragma once

#include <kj/async.h>

#include <vector>

#include "common/ids.h"
#include "rpc/schema/jobs.capnp.h"
#include "store/store_error.h"
#include "store/stored_message.h"

namespace regent::store {

using JobResultMessage = StoredMessage<wire::JobResult>;
using JobDetailMessage = StoredMessage<wire::JobStatus>;

// The most bytes (packed) an ended job's detail takes in the store unless configured
// (store.job-details.max-size).
inline constexpr size_t kDefaultJobDetailMaxBytes = 256 * 1024;

struct JobResults {
  // Newest first (by endedAtMs, then job id).
  std::vector<JobResultMessage> results;
  std::vector<CorruptRecord> corrupt;
};

// Opened for one leadership term; same threading, cancellation and fencing rules as
// JobGraphStore. Retention: at most `store.job-results.retain` clean results are kept; marking
// one clean beyond that removes the oldest clean ones (dirty results are never removed).
class JobResultStore {
 public:
  virtual ~JobResultStore() noexcept(false) = default;

  // Stores `result` with clean = false, replacing an earlier result of the job (a retried
  // cleanup). kInvalid without a job id or with a state that is not terminal (finished, failed,
  // canceled); kTooLarge; kFenced; kUnavailable.
  virtual kj::Promise<StoreResult<void>> createDirty(wire::JobResult::Reader result) = 0;
  // Sets clean = true, then applies the retention (the first call of a term reads every result
  // to index the clean ones; if that fails, pruning waits for the next call and the result is
  // still marked clean). Marking a clean result again does not rewrite it.
  // kNotFound; kCorrupt; kFenced; kUnavailable.
  virtual kj::Promise<StoreResult<void>> markClean(JobId id) = 0;
  // A terminal job's cleanup in one transaction: its JobGraph and progress record removed (no
  // error when they are gone), `detail` stored as putDetail() stores it when given, and
  // `result` (the job's stored result) rewritten clean unless it is clean already; then the
  // retention, as markClean(). value: why the detail was left out (kTooLarge even without its
  // rows, not this job's), empty when it was stored or none was given; the rest is written
  // regardless. kInvalid without a job id; kFenced; kUnavailable (nothing written).
  virtual kj::Promise<StoreResult<std::string>> cleanUp(
      wire::JobResult::Reader result, kj::Maybe<wire::JobStatus::Reader> detail) = 0;
  // kNotFound; kCorrupt.
  virtual kj::Promise<StoreResult<JobResultMessage>> get(JobId id) = 0;
  // The dirty results only: the jobs whose cleanup a new leader must finish.
  virtual kj::Promise<StoreResult<JobResults>> listDirty() = 0;
  // Every result kept: all dirty ones and at most `retain` clean ones.
  virtual kj::Promise<StoreResult<JobResults>> listAll() = 0;

  // An ended job's final detail (its JobStatus with vertices, subtasks and attempts), kept beside
  // its result so that any later leader shows it; removed when retention removes the result.
  // A detail over the size cap (store.job-details.max-size) is kept without its subtask rows,
  // counts and vertices kept, and `subtasksOmitted` saying why. kInvalid without a job id;
  // kTooLarge when even that does not fit; kFenced; kUnavailable.
  virtual kj::Promise<StoreResult<void>> putDetail(wire::JobStatus::Reader detail) = 0;
  // kNotFound when none is kept; kCorrupt when it does not decode (the result is unaffected).
  virtual kj::Promise<StoreResult<JobDetailMessage>> getDetail(JobId id) = 0;
};

}  // namespace regent::store

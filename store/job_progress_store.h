// JobProgressStore (docs/stores.md): each running job's progress (wire::JobProgress), written by
// its JobMaster before it deploys an attempt and before it acknowledges an attempt's end, read
// by the next leader's Dispatcher at recovery so that the job's new JobMaster adopts the attempts
// still running and never runs a finished subtask again. The Dispatcher removes a job's record
// with its JobGraph.
#pragma once

#include <kj/async.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/ids.h"
#include "rpc/schema/jobs.capnp.h"
#include "store/store_error.h"
#include "store/stored_message.h"

namespace regent::store {

using JobProgressMessage = StoredMessage<wire::JobProgress>;

// The text a progress record may carry at most, for JobProgressStore::admits(): the root cause's
// message (JobMasters cut it to 4 KiB) and vertex name, with room to spare.
constexpr size_t kProgressTextAllowance = 8 * 1024;

// A large job's record is split (wire::JobProgress.parts): part k holds subtasks [32k, 32(k+1)),
// each part a record of its own, so a put rewrites only the parts whose subtasks changed (a part
// is about 1 KB packed). A record whose subtasks all fall in part 0 keeps them itself.
constexpr uint32_t kProgressPartSubtasks = 32;

struct RecoveredJobProgress {
  std::vector<JobProgressMessage> records;  // Sorted by job id.
  std::vector<CorruptRecord> corrupt;
};

// Opened for one leadership term; same threading, cancellation and fencing rules as
// JobGraphStore (writes fail kFenced once the term is over, and change nothing). A writer issues
// one put per job at a time: the ZooKeeper backend does not order concurrent writes to one record.
class JobProgressStore {
 public:
  virtual ~JobProgressStore() noexcept(false) = default;

  // Creates or replaces the record under progress.jobId (its `parts` are ignored: the store
  // splits the subtasks itself), in one transaction with the parts that changed since this
  // term's last successful put or read of them; parts the record no longer has are removed in
  // it. The record is encoded before put() returns. kInvalid without a job id; kTooLarge
  // (naming the job, its size and the limit, for any one record or the transaction); kFenced;
  // kUnavailable.
  virtual kj::Promise<StoreResult<void>> put(wire::JobProgress::Reader progress) = 0;
  // Whether the record of a job of `subtasks` subtasks fits the backend's limit however the job
  // runs (every subtask with an attempt, a root cause of kProgressTextAllowance bytes of text):
  // kTooLarge naming the bound, the limit and its option otherwise. The Dispatcher refuses such
  // a job at submission, so that no put of an accepted job is ever too large.
  virtual StoreResult<void> admits(uint32_t subtasks) const = 0;
  // Removes the record and its parts in one transaction. value: whether a record existed (true
  // for a job with parts this term wrote or read). kFenced; kUnavailable.
  virtual kj::Promise<StoreResult<bool>> remove(JobId id) = 0;
  // Every stored record (many reads in flight), each with its parts merged back (`subtasks`
  // whole, `parts` empty); corrupt ones are reported and skipped: a record that does not decode
  // or whose listed part is missing, does not decode or does not fit, and parts without a
  // record (reported under their job's id).
  virtual kj::Promise<StoreResult<RecoveredJobProgress>> recoverAll() = 0;
};

}  // namespace regent::store

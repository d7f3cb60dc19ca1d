// JobProgressStore (docs/stores.md): each running job's progress (wire::JobProgress), written by
// its JobMaster before it deploys an attempt and before it acknowledges an attempt's end, read
// by the next leader's Dispatcher at recovery so that the job's new JobMaster adopts the attempts
// still running and never runs a finished subtask again. The Dispatcher removes a job's record
// with its JobGraph.
#pragma once

#include <kj/async.h>

#include <vector>

#include "common/ids.h"
#include "rpc/schema/jobs.capnp.h"
#include "store/store_error.h"
#include "store/stored_message.h"

namespace regent::store {

using JobProgressMessage = StoredMessage<wire::JobProgress>;

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

  // Creates or replaces the record under progress.jobId. The record is encoded before put()
  // returns. kInvalid without a job id; kTooLarge (naming the job, its size and the limit);
  // kFenced; kUnavailable.
  virtual kj::Promise<StoreResult<void>> put(wire::JobProgress::Reader progress) = 0;
  // value: whether a record existed. kFenced; kUnavailable.
  virtual kj::Promise<StoreResult<bool>> remove(JobId id) = 0;
  // Every stored record (many reads in flight); corrupt ones are reported and skipped.
  virtual kj::Promise<StoreResult<RecoveredJobProgress>> recoverAll() = 0;
};

}  // namespace regent::store

// JobGraphStore (docs/stores.md): the submitted JobGraphs a new leader recovers. One
// implementation, PackedJobGraphStore, over either backend; the interface lets services use a
// fake in unit tests.
#pragma once

#include <kj/async.h>

#include <vector>

#include "common/ids.h"
#include "rpc/schema/jobs.capnp.h"
#include "store/store_error.h"
#include "store/stored_message.h"

namespace regent::store {

using JobGraphMessage = StoredMessage<wire::JobGraph>;

struct RecoveredJobGraphs {
  std::vector<JobGraphMessage> graphs;  // Sorted by job id.
  std::vector<CorruptRecord> corrupt;
};

struct JobGraphIds {
  std::vector<JobId> ids;               // Sorted.
  std::vector<CorruptRecord> corrupt;   // Keys that are not job ids.
};

// Opened for one leadership term and closed (destroyed) when the term ends. Loop-thread only;
// every promise resolves on the loop thread. Destroying the store cancels what is in flight.
// Writes fail kFenced once the term is over, and change nothing.
class JobGraphStore {
 public:
  virtual ~JobGraphStore() noexcept(false) = default;

  // Creates or replaces the JobGraph under graph.jobId. The graph is encoded before put()
  // returns, so `graph` need only live for the call. kInvalid without a job id; kTooLarge
  // (naming the job, its size and the limit) above the backend's limit; kFenced; kUnavailable.
  virtual kj::Promise<StoreResult<void>> put(wire::JobGraph::Reader graph) = 0;
  // kNotFound; kCorrupt (naming the job and the reason) when the record does not decode.
  virtual kj::Promise<StoreResult<JobGraphMessage>> get(JobId id) = 0;
  // value: whether a record existed.
  virtual kj::Promise<StoreResult<bool>> remove(JobId id) = 0;
  virtual kj::Promise<StoreResult<JobGraphIds>> listIds() = 0;
  // Every stored JobGraph (many reads in flight); corrupt records are reported and skipped.
  virtual kj::Promise<StoreResult<RecoveredJobGraphs>> recoverAll() = 0;
};

}  // namespace regent::store

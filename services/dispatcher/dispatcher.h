// The Dispatcher: the leader's job front door for one leadership term (docs/jobgraph.md,
// docs/stores.md). It recovers every stored JobGraph and job result when the term starts, then
// validates, persists and accepts submissions, and cancels jobs through the dirty -> clean
// protocol. It is the only writer of its term's stores, so it answers every read (list, status,
// counts) from memory. Jobs do not run yet (no JobMaster): a recovered or submitted job stays
// CREATED. The wire side is DispatcherGatewayServer (services/dispatcher/dispatcher_gateway.h).
#pragma once

#include <capnp/message.h>
#include <kj/array.h>
#include <kj/async.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "common/ids.h"
#include "common/result.h"
#include "rpc/schema/jobs.capnp.h"
#include "services/dispatcher/job_graph_validation.h"
#include "store/store_services.h"

namespace regent::dispatcher {

// Why a Dispatcher operation did not succeed (an expected outcome). The gateway maps it onto
// wire::Failure in one place.
struct JobFailure {
  enum class Kind {
    kInvalidArgument,     // `field` and `fieldMessage` say what is wrong.
    kNotFound,            // `job` is unknown in this term.
    kAlreadyExists,       // `job` exists with another graph, or already ended.
    kFailedPrecondition,  // `job` already ended.
    kTooLarge,            // `sizeBytes` above `limitBytes`.
    kUnavailable,         // Cannot serve now; retry after `retryAfterMs` (0: caller's choice).
  };
  Kind kind;
  std::string message;
  JobId job;
  std::string field;
  std::string fieldMessage;
  uint64_t sizeBytes = 0;
  uint64_t limitBytes = 0;
  uint64_t retryAfterMs = 0;
};

// nullopt on success.
using JobOutcome = std::optional<JobFailure>;

// One job as the Dispatcher knows it. Exactly one of `graph` (a job of this term, not terminal),
// `result` (a job that ended, in this term or an earlier one) and `corruptReason` (a stored
// JobGraph record that does not decode; state CORRUPT) is set. The readers are valid until the
// Dispatcher next changes (use them within the current turn of the loop).
struct JobView {
  JobId id;
  wire::JobState state = wire::JobState::CREATED;
  int64_t stateChangedAtMs = 0;
  kj::Maybe<wire::JobGraph::Reader> graph;
  kj::Maybe<wire::JobResult::Reader> result;
  kj::Maybe<const std::string&> corruptReason;
};

// Jobs by state, for the overview and /metrics.
struct JobCounts {
  uint32_t active = 0;  // CREATED or CANCELLING.
  uint32_t finished = 0;
  uint32_t canceled = 0;
  uint32_t failed = 0;
};

// One term's Dispatcher. Loop-thread only. `stores` must outlive it; destroying it cancels its
// store operations in flight (their promises reject). It knows nothing of epochs or readiness:
// the term's gateway (LeadershipTerm::serve) checks both before any call reaches it.
//
// Memory: each job's graph and each ended job's result is kept as one flat, canonical Cap'n
// Proto buffer of its own size. Ended results are bounded like the store's retention: every dirty
// one, and at most `retainClean` (`store.job-results.retain`) clean ones, the oldest dropped first.
class Dispatcher final {
 public:
  // `nowMs` gives Unix milliseconds (injected for tests).
  Dispatcher(uint64_t epoch, store::LeaderStores& stores, JobGraphLimits limits,
             size_t retainClean, std::function<int64_t()> nowMs);
  ~Dispatcher() noexcept;
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // Reads every JobGraph and job result, replacing what an earlier failed attempt read (it may
  // be called again after a failure; not while a call of it is running). A job with a result
  // (dirty or clean) ended in an earlier term: a dirty result's cleanup is finished (its JobGraph
  // removed, the result marked clean) and the job is never re-run. Every other job is CREATED.
  // A JobGraph record that does not decode is logged and kept as a CORRUPT job under its id
  // (other corrupt records are logged and skipped). A retryable error when the store cannot be
  // read.
  // Logs "dispatcher recovered epoch=E jobs=N" on success.
  kj::Promise<Status> recover();
  bool recovered() const { return recovered_; }

  // Validates `graph` (read only during the call), persists it with submittedAtMs set, then
  // accepts it. Resubmitting the same graph under the same id succeeds again. A job id whose
  // stored record is corrupt is refused (kFailedPrecondition, naming the job and
  // removeCorrupt): the record is never silently replaced.
  kj::Promise<JobOutcome> submit(wire::JobGraph::Reader graph);
  // Writes a dirty CANCELED result, removes the JobGraph, marks the result clean; resolves once
  // the dirty result is stored. Cancelling a job already cancelling succeeds. A corrupt job is
  // refused (kFailedPrecondition).
  kj::Promise<JobOutcome> cancel(JobId id);
  // Removes the JobGraph record of `id` only if it is corrupt: the record is read again first
  // and removed only when it still does not decode, so a healthy job is never removed
  // (kFailedPrecondition). kNotFound when no record is stored under `id`; kUnavailable when the
  // store cannot be used or the job is being submitted or cancelled. Logs the removal.
  kj::Promise<JobOutcome> removeCorrupt(JobId id);

  // Reads, from memory, no store access.
  kj::Maybe<JobView> job(JobId id) const;
  // Active jobs by id, then corrupt ones by id, then ended jobs newest first (endedAtMs, then
  // job id).
  void forEachJob(const std::function<void(const JobView&)>& visit) const;
  size_t jobCount() const { return active_.size() + ended_.size() + corrupt_.size(); }
  JobCounts counts() const;
  // Jobs known in this term, for metrics: not terminal.
  size_t activeJobCount() const { return active_.size(); }

  // Bytes of the flat buffers held (graphs and results), for the memory benchmark and tests.
  size_t heldBytesForTests() const;

 private:
  struct ActiveJob {
    kj::Array<capnp::word> graph;  // Canonical, as persisted (submittedAtMs set).
    wire::JobState state = wire::JobState::CREATED;
    int64_t stateChangedAtMs = 0;
  };
  struct EndedJob {
    kj::Array<capnp::word> result;  // Canonical.
    bool clean = false;
    int64_t endedAtMs = 0;
  };

  // Finishes the cleanup of a job that ended: JobGraph removed, result marked clean.
  kj::Promise<Status> finishCleanup(JobId id, bool dirty);
  void addEnded(JobId id, wire::JobResult::Reader result, bool clean);
  void markCleanInMemory(JobId id);
  void pruneClean();
  JobView viewOf(JobId id, const ActiveJob& job) const;
  JobView viewOf(JobId id, const EndedJob& job) const;
  JobView corruptViewOf(JobId id, const std::string& reason) const;

  const uint64_t epoch_;
  store::LeaderStores& stores_;
  const JobGraphLimits limits_;
  const size_t retainClean_;
  const std::function<int64_t()> nowMs_;
  bool recovered_ = false;
  std::map<JobId, ActiveJob> active_;
  std::map<JobId, EndedJob> ended_;
  std::set<std::pair<int64_t, JobId>> endedByAge_;  // Every ended job, by (endedAtMs, id).
  std::set<std::pair<int64_t, JobId>> cleanByAge_;  // The clean ones.
  // Stored JobGraph records that do not decode, by job id: why. Kept until removeCorrupt.
  std::map<JobId, std::string> corrupt_;
  std::set<JobId> inFlight_;  // Submissions, cancellations or removals being persisted.
  kj::Canceler canceler_;
};

}  // namespace regent::dispatcher

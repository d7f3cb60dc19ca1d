// The Dispatcher: the leader's job front door for one leadership term (docs/jobgraph.md,
// docs/stores.md). It recovers every stored JobGraph, job result and job progress record when the
// term starts, then validates, persists and accepts submissions, and cancels jobs through the
// dirty -> clean protocol. It is the only writer of its term's JobGraphs and job results (the
// JobMasters write only their jobs' progress records, which it reads at recovery and removes with
// the JobGraph), so it answers every read (list, status, counts) from memory. Accepted jobs run on
// its JobRunner (the term's JobMasters), which tells it their live states and their end; the
// Dispatcher then writes the result and cleans up (docs/jobgraph.md, "How a job runs and ends").
// Without a runner a job stays CREATED. The wire side is DispatcherGatewayServer
// (services/dispatcher/dispatcher_gateway.h).
#pragma once

#include <capnp/message.h>
#include <kj/array.h>
#include <kj/async.h>
#include <kj/timer.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "common/backoff.h"
#include "common/event_sink.h"
#include "common/ids.h"
#include "common/result.h"
#include "common/task_set_error_logger.h"
#include "jobgraph/job_graph_validation.h"
#include "rpc/schema/jobs.capnp.h"
#include "services/dispatcher/job_runner.h"
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

// What a job operation ended with: ok, or the JobFailure saying why not.
using JobOutcome = Result<void, JobFailure>;

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
  // An ended job's last detail from its runner (vertices, subtasks, task counts), when it ran in
  // this term: taken when its result was stored, replaced by the final one once released.
  kj::Maybe<wire::JobStatus::Reader> detail;
  // Why an ended job has no detail, once the store was asked (Dispatcher::loadDetail); "" else.
  std::string detailMissing;
  kj::Maybe<const std::string&> corruptReason;
  // The runner running the job (its live detail: JobRunner::describe / counts); null when the
  // job is not running (ended, corrupt, or no runner).
  const JobRunner* runner = nullptr;
};

// The number of wire::JobState values (CORRUPT is the last).
inline constexpr size_t kJobStateCount = static_cast<size_t>(wire::JobState::CORRUPT) + 1;

// Jobs by state, for the overview and /metrics (regent_jobs{state}): counted from memory, no
// message built and no runner asked.
struct JobCounts {
  uint32_t active = 0;  // Not terminal (being ended included): the jobs of a live state.
  // Every job by its state as jobStatus reports it: a live job's (RECONCILING: recovered, waiting
  // for workers to report its attempts; FAILING: ended by its runner, its result being stored),
  // an ended job's result's, CORRUPT for a record that does not decode. Indexed by the state.
  std::array<uint32_t, kJobStateCount> byState{};

  uint32_t of(wire::JobState state) const { return byState.at(static_cast<size_t>(state)); }
};

// One term's Dispatcher. Loop-thread only. `stores` must outlive it; destroying it cancels its
// store operations in flight (their promises reject) and the cleanups it runs in the background.
// It knows nothing of epochs or readiness: the term's gateway (LeadershipTerm::serve) checks both
// before any call reaches it.
//
// With a JobRunner (`runner`, which must outlive it): recover() starts every recovered job that
// has no result, submit() starts a job once its JobGraph is persisted, and the runner's
// jobEnded() ends the job as cancel() does: dirty result, JobRunner::release, JobGraph removed,
// progress record removed, result clean. The runner's end is final (its JobMaster runs nothing
// more), so its dirty result is written again with backoff on `timer` while the store is
// unavailable, the job staying "ending"; only a fenced store (this term is over) stops it, and the
// next leader runs the job on from its JobGraph and progress record. A failure later on the way
// is logged and the rest is left to the next leader (which finishes a dirty result's cleanup).
//
// Memory: each job's graph and each ended job's result is kept as one flat, canonical Cap'n
// Proto buffer of its own size, and so is the detail of a job that ended in this term (its
// runner's describe(), so that jobStatus keeps showing its subtasks and where their output is).
// A detail grows with the job's subtasks, so the details together are bounded apart:
// `endedDetailBudgetBytes`, the oldest ended jobs' details dropped first (their results stay).
// Ended jobs are bounded like the store's retention: every dirty one, and at most `retainClean`
// (`store.job-results.retain`) clean ones, the oldest dropped first (with its detail). Details are
// not persisted: a job that ended under an earlier leader has none.
class Dispatcher final : public JobRunnerListener {
 public:
  // Enough for the detail of a few dozen jobs at `jobmaster.max-subtasks` (10,000 subtasks are
  // about 2-3 MB), or of every retained job of a few subtasks.
  static constexpr size_t kEndedDetailBudgetBytes = size_t{64} << 20;

  // `nowMs` gives Unix milliseconds (injected for tests); `timer` (must outlive it) paces the
  // retries of a runner's dirty result; `events` (must outlive it) gets "job ended" and "job
  // clean" (docs/operations.md). `runner` may be null (jobs stay CREATED); the Dispatcher sets
  // itself as its listener.
  Dispatcher(uint64_t epoch, store::LeaderStores& stores, kj::Timer& timer, EventSink& events,
             jobgraph::JobGraphLimits limits, size_t retainClean, std::function<int64_t()> nowMs,
             JobRunner* runner = nullptr, size_t endedDetailBudgetBytes = kEndedDetailBudgetBytes);
  ~Dispatcher() noexcept;
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // Reads every JobGraph, job result and progress record, replacing what an earlier failed
  // attempt read (it may be called again after a failure; not while a call of it is running). A
  // job with a result (dirty or clean) ended in an earlier term: a dirty result's cleanup is
  // finished (its JobGraph and progress record removed, the result marked clean) and the job is
  // never re-run. Every other job is CREATED and, once everything is read, started on the runner
  // with its progress record (JobRunner::start), or with none when it has none or its record is
  // corrupt: does not decode, or does not fit the job's JobGraph (a subtask index beyond its
  // subtasks or out of order, no attempt id, an unknown state; logged as an error naming the job
  // and why). Progress records of jobs that have no
  // JobGraph, or have a clean result, are removed in the background (best effort, logged); those
  // of CORRUPT jobs are left in place with their other records.
  // A JobGraph record that does not decode is logged and kept as a CORRUPT job under its id, and
  // so is a job whose result record does not decode (it ended: it is never started, and
  // removeCorrupt refuses it); other corrupt records are logged and skipped. A retryable error
  // when the store cannot be read.
  // Logs "dispatcher recovered epoch=E jobs=N" on success.
  kj::Promise<Status> recover();
  bool recovered() const { return recovered_; }

  // Validates `graph` (read only during the call), persists it with submittedAtMs set, then
  // accepts it and starts it on the runner. Resubmitting the same graph under the same id succeeds again. A job id whose
  // stored record is corrupt is refused (kFailedPrecondition, naming the job and
  // removeCorrupt): the record is never silently replaced.
  kj::Promise<JobOutcome> submit(wire::JobGraph::Reader graph);
  // Writes a dirty CANCELED result and resolves once it is stored; then, in the background,
  // releases the job on the runner (its attempts cancelled, its slots freed), removes the
  // JobGraph and marks the result clean. Cancelling a job already cancelling succeeds, and so
  // does cancelling a job its runner ended whose result is not stored yet (the runner's end
  // wins). A corrupt job is refused (kFailedPrecondition).
  kj::Promise<JobOutcome> cancel(JobId id);
  // Removes the JobGraph record of `id` only if it is corrupt: the record is read again first
  // and removed only when it still does not decode, so a healthy job is never removed
  // (kFailedPrecondition); its progress record, if any, is removed before it. kNotFound when no
  // record is stored under `id`; kUnavailable when the store cannot be used or the job is being
  // submitted or cancelled. Logs the removal.
  kj::Promise<JobOutcome> removeCorrupt(JobId id);

  // Reads, from memory, no store access.
  kj::Maybe<JobView> job(JobId id) const;
  // For an ended job whose detail is not in memory (it ended under an earlier leader, or the
  // memory budget let it go): reads it from the store into memory (job() then has it). Resolves
  // with why there is none ("" when there is, or the job is not an ended one); never rejects
  // but when the term ends.
  kj::Promise<std::string> loadDetail(JobId id);
  // Active jobs by id, then corrupt ones by id, then ended jobs newest first (endedAtMs, then
  // job id).
  void forEachJob(const std::function<void(const JobView&)>& visit) const;
  size_t jobCount() const { return active_.size() + ended_.size() + corrupt_.size(); }
  JobCounts counts() const;
  // Jobs known in this term, for metrics: not terminal.
  size_t activeJobCount() const { return active_.size(); }

  // Bytes of the flat buffers held (graphs, results, ended jobs' details), for the memory
  // benchmark and tests.
  size_t heldBytesForTests() const;
  // Bytes of the ended jobs' details alone.
  size_t detailBytesForTests() const { return detailBytes_; }
  // Jobs whose end is being stored, or whose release and cleanup still run in the background.
  size_t cleanupsRunning() const { return cleaning_.size(); }

  // JobRunnerListener (the runner's reports). jobStateChanged sets a running job's live state
  // (not while it is being cancelled). jobEnded writes the dirty result (restarts, net runtime,
  // failure from `end`; logs "job ended"), keeps the runner's detail of the job, then releases
  // (keeping the final detail release() resolves with), removes the JobGraph and the progress
  // record and marks the result clean (logs "job clean"). A job being cancelled keeps its CANCELED end; if the
  // cancel's dirty write then fails, the job ends with the runner's end instead.
  void jobStateChanged(JobId job, wire::JobState state, int64_t atMs) override;
  void jobEnded(JobId job, const JobEnd& end) override;

 private:
  struct ActiveJob {
    kj::Array<capnp::word> graph;  // Canonical, as persisted (submittedAtMs set).
    // The job's progress record as recovered (canonical), handed to the runner by start() and
    // dropped then; empty when there is none (submitted in this term, missing or corrupt).
    kj::Array<capnp::word> progress;
    wire::JobState state = wire::JobState::CREATED;
    int64_t stateChangedAtMs = 0;
    bool started = false;  // Given to the runner (the graph stays until release resolved).
    bool ending = false;   // Its runner reported its end; the result is being stored.
    // The runner's end, reported while a cancel's result was being stored: the job's end if
    // that write fails. Held apart (rare, and a JobEnd is larger than the rest of the entry).
    std::unique_ptr<JobEnd> endDuringCancel;
  };
  struct EndedJob {
    kj::Array<capnp::word> result;  // Canonical.
    kj::Array<capnp::word> detail;  // Canonical JobStatus from the runner; empty when none.
    std::string detailMissing;      // Why the store keeps no detail of it, once read; "" else.
    bool clean = false;
    int64_t endedAtMs = 0;
  };

  // Finishes the cleanup of ended job `id` in one store transaction (JobResultStore::cleanUp):
  // JobGraph and progress record removed, the final detail stored beside the result (when
  // `withDetail` and the runner gave one; a detail that cannot be kept is logged, the cleanup
  // goes on), the result marked clean (when dirty), then in memory.
  kj::Promise<Status> finishCleanup(JobId id, bool withDetail);
  // The runner's detail of a job (`runnerDetail`, a flat JobStatus) named and dated by its
  // `result`, so that a later leader reads it alone; false when the runner gave none (empty).
  static bool fillStoredDetail(wire::JobResult::Reader result,
                               kj::ArrayPtr<const capnp::word> runnerDetail,
                               capnp::MallocMessageBuilder& message);
  // At recovery, after the JobGraphs and results: hands each active job its progress record and
  // removes, in the background, the records of jobs that have no JobGraph or have a result
  // (`cleaned`: the ended jobs whose finishCleanup() removes it anyway).
  void adoptProgress(store::RecoveredJobProgress& progress, const std::set<JobId>& cleaned);
  // The error log of a recovered progress record the job starts without.
  void logCorruptProgress(JobId id, const std::string& reason) const;
  // Removes the progress record of `id`, a job that has no JobGraph or has a result; best effort
  // (logged). The id is in flight meanwhile, so it cannot be submitted until the removal settled.
  void removeOrphanProgress(JobId id, const std::string& why);
  void start(JobId id, ActiveJob& job);
  // Stores the end of active job `id` (already ending or CANCELLING): storeEnd(); once stored
  // the job moves to the ended ones, "job ended" is logged and releaseAndClean() runs. With
  // `retry`, an unavailable store is tried again with backoff. Resolves with the store's failure,
  // if any: the job then stays active, back in `previous` (and ends with endDuringCancel if it
  // has one).
  kj::Promise<JobOutcome> endJob(JobId id, kj::Array<capnp::word> result, std::string cause,
                                 wire::JobState previous, bool retry);
  // A FINISHED `result`: stored clean with the job's whole cleanup and `detail` (the runner's,
  // flat; empty for none), one transaction (JobResultStore::cleanUp). Its end needs no release
  // first: the runner cancels nothing of a FINISHED job, and no progress put follows the end
  // (ProgressLog). Any other result: createDirty(result), the cleanup following the release.
  // Again after a backoff delay while it fails kUnavailable and `retry`.
  kj::Promise<store::StoreResult<void>> storeEnd(JobId id, wire::JobResult::Reader result,
                                                 kj::ArrayPtr<const capnp::word> detail,
                                                 bool retry, ExponentialBackoff backoff);
  // In the background: release on the runner (when it was started; `graph` is kept until the
  // release resolved), then, unless `cleanStored` (storeEnd did it), JobGraph and progress record
  // removed and result clean; "job clean" logged.
  void releaseAndClean(JobId id, kj::Array<capnp::word> graph, bool started, std::string cause,
                       wire::JobState state, bool cleanStored);
  // The runner's describe() of `id` as a flat message; empty when it does not run `id`.
  kj::Array<capnp::word> describeOnRunner(JobId id) const;
  void addEnded(JobId id, wire::JobResult::Reader result, bool clean);
  // Replaces the detail of ended job `job`, then drops the oldest details beyond the budget.
  void setDetail(EndedJob& job, kj::Array<capnp::word> detail);
  void eraseEnded(std::map<JobId, EndedJob>::iterator ended);
  void markCleanInMemory(JobId id);
  void pruneClean();
  JobView viewOf(JobId id, const ActiveJob& job) const;
  JobView viewOf(JobId id, const EndedJob& job) const;
  JobView corruptViewOf(JobId id, const std::string& reason) const;

  const uint64_t epoch_;
  store::LeaderStores& stores_;
  kj::Timer& timer_;
  EventSink& events_;
  const jobgraph::JobGraphLimits limits_;
  const size_t retainClean_;
  const size_t endedDetailBudgetBytes_;
  size_t detailBytes_ = 0;  // Of every ended job's detail.
  const std::function<int64_t()> nowMs_;
  JobRunner* const runner_;
  bool recovered_ = false;
  std::map<JobId, ActiveJob> active_;
  std::map<JobId, EndedJob> ended_;
  std::set<std::pair<int64_t, JobId>> endedByAge_;  // Every ended job, by (endedAtMs, id).
  std::set<std::pair<int64_t, JobId>> cleanByAge_;  // The clean ones.
  // Stored JobGraph records that do not decode, by job id: why. Kept until removeCorrupt.
  std::map<JobId, std::string> corrupt_;
  // The ids in corrupt_ because their job result record does not decode: ended, never started.
  std::set<JobId> corruptResults_;
  std::set<JobId> inFlight_;  // Submissions, cancellations or removals being persisted.
  std::set<JobId> cleaning_;  // From endJob() until the cleanup is done or failed.
  kj::Canceler canceler_;
  TaskSetErrorLogger errorLogger_{"dispatcher"};
  kj::TaskSet tasks_{errorLogger_};  // Declared last: cancelled first.
};

}  // namespace regent::dispatcher

// The JobMasters of one leadership term (docs/jobgraph.md, "How a job runs and ends"): one
// JobMaster per running job, started by the Dispatcher (dispatcher::JobRunner) right after the
// JobGraph is persisted. A JobMaster registers with the ResourceManager, declares the slots its
// runnable subtasks need, accepts the slots workers offer (JobMasterGateway.offerSlots), deploys
// subtask attempts (TaskExecutorGateway.submitTask), follows their states
// (updateTaskExecutionState, idempotent by attempt id and state), restarts failed subtasks by
// the job's restart strategy, heartbeats the workers holding its slots and fails the attempts of
// a worker silent for heartbeat.timeout (and tells it, best effort, with
// TaskExecutorGateway.disconnect: a paused worker frees the job's slots once it wakes up), and
// reports the job's end to the Dispatcher. A worker that registers again from another process
// (restarted on its data directory: resourcemanager::WorkerListener::workerRestarted) is lost at
// once, as if silent: its live attempts fail with a message naming it and saying it restarted.
//
// A vertex is runnable once every subtask of every upstream vertex FINISHED. A job is CREATED
// until an attempt first runs, then RUNNING, RESTARTING while a restart delay runs
// (JobRunnerListener::jobStateChanged, the `job state` event line).
//
// The progress record (docs/jobgraph.md, "Failover"): each JobMaster writes its job's
// wire::JobProgress to the term's JobProgressStore ahead of what workers act on. A new attempt
// is deployed only once a put holding it succeeded; a terminal state (FINISHED, FAILED,
// CANCELED) is applied at once but answered only once a put holding it succeeded (`unavailable`
// when that put failed or the store is fenced: the worker delivers it again). One put per job is
// in flight; changes made meanwhile go into the next. kUnavailable: tried again after 100 ms,
// doubling up to heartbeatInterval. kFenced: nothing is written or deployed any more.
//
// After a failover (start() with the record an earlier term wrote) the job starts RECONCILING
// when the record names live attempts: FINISHED subtasks stay finished, FAILED / CANCELED ones
// wait to run again, live ones are expected. While RECONCILING nothing is deployed and nothing
// is declared. An offered attempt that is its subtask's expected attempt is adopted (same
// attempt id, the slot held for it, its worker heartbeated). Reconciliation ends once every
// expected attempt is adopted or reported ended, or at reconciliationTimeout: the unreported
// ones FAIL (to the restart strategy); then the job declares and deploys normally. An expected
// attempt the record places on a worker (JobProgress names the worker and allocation of each
// live attempt) FAILS before that, at once, when that worker accounts for its slots without it:
// its first slot report to this term holds no such allocation of the job (it restarted, or
// freed the slot), it offers that slot without the attempt (the earlier leader was lost between
// the record and submitTask), or it restarts. Event lines
// `job reconciling`, `attempt adopted`, `job reconciled` (docs/operations.md).
//
// The gateway a JobMaster serves (workers call it), one per connection (gateway()): every call
// speaks for the worker that connection registered, never for the one its parameters name, and
// passes resourcemanager::guardWorkerCalls first (permissionDenied before registration or for
// another worker's resource id; notRegistered for a registration that is not current):
// - offerSlots: permissionDenied for an allocation the worker does not hold for the job
//   (JobMasterPort::holdsAllocation) or that the job holds on another worker; notRegistered
//   unless JobMasterPort::workerAddress knows the worker; adopts the
//   expected attempts it carries (their slots accepted); accepts the slots a waiting subtask of
//   a runnable vertex fits (the rest the worker frees); cancels the offered running attempts
//   that are not a subtask's live attempt (unknown to it, superseded, or failed when it lost the
//   worker or at the end of reconciliation); deploys in a later turn, after the put.
// - updateTaskExecutionState: permissionDenied for a live attempt deployed to or adopted on
//   another worker (an expected attempt no worker offered yet: unless the worker holds the
//   allocation the update names); notFound for an attempt that is no subtask's latest attempt;
//   repeats and states older than the known one change nothing (a repeated terminal state is
//   answered, like the first, once the record holds it). The job's first RUNNING feeds
//   JobMasterCounters' submit-to-running histogram.
// - heartbeat: notRegistered for a worker holding none of the job's slots (it offers them
//   again); attempts it lists that the JobMaster does not know are cancelled; a live attempt
//   whose submitTask was accepted (or that was adopted) and that two heartbeats of its worker in
//   a row do not list FAILS (the worker lists the attempts it runs and those whose end it still
//   delivers, and a terminal update is applied on receipt, so its end was lost).
// Heartbeat rounds that come later than heartbeatTimeout (the process was paused, or the loop
// blocked) refresh every worker instead of losing them: the silence was the JobMaster's own.
// A FAILED end is reported to the Dispatcher only once a put holding it (JobProgress.ended)
// succeeded, or the store is fenced. A record written after the restart strategy gave up ends
// the job FAILED at once with the stored root cause (jobEnded a turn later); nothing runs or is
// adopted.
// - disconnect: the worker's attempts FAIL at once and its slots leave the job.
// A submitTask that is refused (a Failure) or times out (callTimeout) fails its attempt with a
// message naming why. One that loses its connection (DISCONNECTED) loses the worker, as
// heartbeat.timeout does: its live attempts fail and its slots leave the job, so no restart is
// deployed into a slot that cannot be reached. Failures, a lost worker's included, go to the
// restart strategy (restart_strategy.h), scheduling decisions to the ExecutionGraph
// (execution_graph.h).
#pragma once

#include <kj/async.h>
#include <kj/timer.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "common/event_sink.h"
#include "common/ids.h"
#include "common/time.h"
#include "rpc/schema/gateways.capnp.h"
#include "services/dispatcher/job_runner.h"
#include "services/jobmaster/job_master_term.h"
#include "services/resourcemanager/job_master_port.h"
#include "store/job_progress_store.h"

namespace regent::jobmaster {

class JobMaster;

// One term's JobMasters. Loop-thread only. `timer`, `resourceManager`, `progress` and `counters`
// must outlive it. Destroying it drops every JobMaster: its timers, calls and puts in flight are
// cancelled, nothing is called on workers (the next leader takes over).
class JobMasters final : public dispatcher::JobRunner, private resourcemanager::WorkerListener {
 public:
  // Serves one JobMaster's gateway as a capability of the term (rpc::LeadershipTerm::serve,
  // fenced for the epoch, revoked with the term).
  using Serve = ServeJobMasterGateway;

  // `progress` (the term's JobProgressStore) receives each job's progress record: before any
  // attempt is deployed, and before an attempt's terminal state is acknowledged to its worker.
  // `events` (must outlive it) gets the jobs' and attempts' event lines (docs/operations.md).
  JobMasters(kj::Timer& timer, EventSink& events, uint64_t epoch,
             resourcemanager::JobMasterPort& resourceManager, store::JobProgressStore& progress,
             Serve serve, JobMasterCounters& counters, JobMasterOptions options);
  ~JobMasters() noexcept override;
  JobMasters(const JobMasters&) = delete;
  JobMasters& operator=(const JobMasters&) = delete;

  // dispatcher::JobRunner.
  void setListener(dispatcher::JobRunnerListener& listener) override;
  void start(JobId job, wire::JobGraph::Reader graph,
             kj::Maybe<wire::JobProgress::Reader> recovered) override;
  kj::Promise<kj::Array<capnp::word>> release(JobId job, const std::string& cause) override;
  bool describe(JobId job, wire::JobStatus::Builder status) const override;
  bool counts(JobId job, wire::TaskCounts::Builder tasks, uint32_t& restarts) const override;

  // release(): cancels the live attempts (cancelTask; expected attempts not reported yet are
  // marked CANCELED without a worker's word, and deployments still waiting for their put are
  // never sent), waits for their terminal updates at most heartbeatTimeout (then logs and goes
  // on; an attempt whose cancelTask fails counts as ended), frees every held slot (freeSlot,
  // each bounded by callTimeout), calls disconnectJobMaster, waits for the job's progress put in
  // flight (none starts after: the Dispatcher removes the record once this resolves; terminal
  // updates still waiting for a put are answered), and drops the JobMaster (resolving with its
  // describe() taken just before): its served gateway throws DISCONNECTED from then on. Updates
  // keep being applied while it runs; nothing is deployed or restarted. Unknown jobs:
  // disconnectJobMaster only.
  //
  // MasterBootstrap.jobMaster: the gateway of `job`'s JobMaster, or nullptr when this term runs
  // no JobMaster for it (unknown, or released). A job that ended keeps its gateway until
  // release() completes: its workers still report the ends of the attempts release() cancels
  // (its offers are refused: nothing is accepted).
  // `caller` is the worker identity of the connection asking (one gateway per connection: its
  // calls speak for that worker only, docs/security.md).
  kj::Maybe<wire::JobMasterGateway::Client> gateway(JobId job,
                                                    kj::Own<resourcemanager::WorkerBinding> caller);
  size_t size() const;

  // Bytes held per job and subtask, for the benchmark's memory figure (approximate, from the
  // containers' sizes).
  size_t heldBytesForTests() const;

 private:
  // resourcemanager::WorkerListener (set on the ResourceManager while this object lives): each
  // JobMaster hears of it.
  void workerRestarted(const ResourceId& worker, const std::string& message) override;
  void workerReported(const ResourceId& worker) override;

  JobMasterTerm term_;  // Outlives jobs_.
  std::map<JobId, kj::Own<JobMaster>> jobs_;
  // The release() promises handed out; cancelled on destruction (they refer to JobMasters).
  kj::Canceler releases_;
};

}  // namespace regent::jobmaster

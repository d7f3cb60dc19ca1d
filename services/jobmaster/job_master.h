// One job's JobMaster (job_masters.h says what it does for the Dispatcher and the workers): the
// RPC glue around the job's ExecutionGraph. Its parts: the progress record written ahead
// (ProgressLog), the workers holding its slots with their heartbeats (JobWorkers), reconciliation
// after a failover, deployment (submitTask, cancelTask, freeSlot, the declaration to the
// ResourceManager, restart timers), the gateway workers call (job_master_gateway.cc) and release.
// Internal to services/jobmaster: JobMasters owns one per running job.
#pragma once

#include <kj/async.h>
#include <kj/timer.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/event_sink.h"
#include "common/ids.h"
#include "common/time.h"
#include "rpc/revocable.h"
#include "rpc/schema/gateways.capnp.h"
#include "services/jobmaster/execution_graph.h"
#include "services/jobmaster/job_master_term.h"
#include "services/jobmaster/job_workers.h"
#include "services/jobmaster/progress_log.h"

namespace regent::jobmaster {

// Loop-thread only. Destroying it cancels its timers, calls and puts, and its served gateways
// answer DISCONNECTED from then on (rpc::Revocable).
class JobMaster final : private ProgressLog::Listener,
                        private JobWorkers::Listener,
                        private SettleQueue::Entry {
 public:
  // With `recovered` (an earlier term's progress record) the job starts from it and reconciles
  // (ExecutionGraph::recover).
  JobMaster(JobMasterTerm& term, JobId job, wire::JobGraph::Reader graph,
            kj::Maybe<wire::JobProgress::Reader> recovered);
  ~JobMaster() noexcept override;
  JobMaster(const JobMaster&) = delete;
  JobMaster& operator=(const JobMaster&) = delete;

  // Registers with the ResourceManager and, for a reconciling job, starts the reconciliation
  // timer (heartbeats start with the first worker followed); the first declaration and the first
  // state report follow from the event loop (never inside start()).
  void start();
  // A gateway of this JobMaster for the connection whose worker identity is `caller`, behind
  // the gate of worker calls (resourcemanager::guardWorkerCalls), served by the term.
  wire::JobMasterGateway::Client serveFor(kj::Own<resourcemanager::WorkerBinding> caller);
  bool releasing() const { return releasing_; }
  const ExecutionGraph& execution() const { return execution_; }

  // JobRunner::release: resolves once attempts ended (or the bound passed), slots are freed and
  // the JobMaster is disconnected from the ResourceManager. The caller then destroys it.
  kj::Promise<void> release(const std::string& cause);

  // Gateway handlers (job_master_gateway.cc). `caller` is the connection's worker identity,
  // bound (the gate admitted the call): the worker the call speaks for.
  void offerSlots(const resourcemanager::WorkerBinding& caller,
                  wire::JobMasterGateway::OfferSlotsParams::Reader params,
                  wire::JobMasterGateway::OfferSlotsResults::Builder results);
  // Resolves at once, or for a terminal state once a progress put that includes it settled
  // (failing: `unavailable` in `results`, which must stay valid until then).
  kj::Promise<void> updateTaskExecutionState(
      const resourcemanager::WorkerBinding& caller, wire::TaskExecutionState::Reader state,
      wire::JobMasterGateway::UpdateTaskExecutionStateResults::Builder results);
  void heartbeat(const ResourceId& worker, wire::JobMasterGateway::HeartbeatParams::Reader params,
                 wire::JobMasterGateway::HeartbeatResults::Builder results);
  void disconnect(const ResourceId& worker, const std::string& cause,
                  wire::JobMasterGateway::DisconnectResults::Builder results);

  // resourcemanager::WorkerListener, through JobMasters. A restarted worker is lost at once
  // (its live attempts and the expected attempts the record places on it FAIL with `message`);
  // a worker's first report to this term fails the expected attempts it holds no slot for.
  void workerRestarted(const ResourceId& worker, const std::string& message);
  void workerReported(const ResourceId& worker);

 private:
  class Gateway;  // The JobMasterGateway server of one connection.

  MonoTime monoNow() const { return term_.monoNow(); }
  int64_t nowMs() const { return term_.wallNow(); }
  void event(const Event& event) const { term_.events.emit(event); }

  void queueSettle();
  // The workers followed, made (their heartbeat rounds started) on the first call.
  JobWorkers& workers();
  // The followed `worker`, or null when it is not followed.
  JobWorkers::Worker* findWorker(const ResourceId& worker) {
    return workers_ ? workers_->find(worker) : nullptr;
  }
  // Whether the first deployment waits for more slots (jobmaster.first-deploy-wait): the job
  // deployed nothing yet and schedule() would deploy only part of what waits. Arms the wait's
  // timer with the first slot; once it ran out the job deploys what it holds.
  bool gathersSlots();
  // Applies what the ExecutionGraph decided: deployments (once stored), surplus slots, the
  // declaration, the restart timer, the job's state (last: the listener may call back into the
  // runner).
  void settle();
  void deploy(const Deployment& deployment);
  void deployFailed(const Deployment& deployment, const std::string& message,
                    FailureCause cause = FailureCause::kAttempt);
  void cancelOnWorker(wire::TaskExecutorGateway::Client client, const AttemptId& attempt,
                      const ResourceId& worker, std::function<void()> onFailure);
  kj::Promise<void> freeOnWorker(const HeldSlot& slot, const std::string& cause);
  // Frees `slots` on their workers once the progress record holds everything so far.
  void freeWhenStored(std::vector<HeldSlot> slots);
  void declare();
  void armRestartTimer();
  void reportState();
  void loseWorker(const ResourceId& worker, const std::string& message);
  // Event lines and counters for the attempts' changes since the last call.
  void drainTransitions();
  // During release: fulfils the wait once no attempt is live.
  void checkDrained();

  // SettleQueue::Entry.
  void settleNow() override { settle(); }
  // ProgressLog::Listener.
  void deployStored(const Deployment& deployment) override;
  void recordTooLarge(const std::string& message) override;
  void putSettled() override;
  // JobWorkers::Listener.
  void workerSilent(const ResourceId& worker, const std::string& message) override;

  // ---- Reconciliation (job_master_gateway.cc adopts the offered attempts) ----
  // Ends RECONCILING once every expected attempt is accounted for.
  void checkReconciled();
  // While reconciling: the expected attempts the record places on `worker` whose slot its
  // report to this term does not hold (ResourceManager's table) FAIL at once.
  void checkExpectedOn(const ResourceId& worker);
  // While reconciling: `worker` offered `offers` without the expected attempts the record places
  // in them (their submitTask never reached it): they FAIL at once.
  void failExpectedNotOffered(const ResourceId& worker, const std::vector<OfferedSlot>& offers,
                              const std::vector<AttemptId>& adopted);
  void endReconciliation(bool timedOut);
  // The `job reconciled` event line of a recovered job (all counts 0 when it had no expected
  // attempts and so did not reconcile).
  void reportReconciled(const ExecutionGraph::Reconciliation& outcome, bool timedOut);

  JobMasterTerm& term_;
  const JobId job_;
  ExecutionGraph execution_;  // Holds the job's graph.
  // Recovered from a progress record: logs `job reconciled` when reconciliation ends.
  const bool recovered_;
  uint32_t expected_ = 0;  // Expected attempts at recovery.
  ProgressLog progress_;   // Reads execution_: declared after it.
  // The workers followed, made with the first one (workers()): a job that never held a slot
  // (a queued one) holds no heartbeat monitor.
  std::unique_ptr<JobWorkers> workers_;
  std::vector<Requirement> declared_;
  bool declaredOnce_ = false;
  bool declareRetryArmed_ = false;  // A refused declaration is tried again after an interval.
  wire::JobState reportedState_ = wire::JobState::CREATED;
  bool endReported_ = false;
  bool releasing_ = false;
  // The job deployed something (or came from a progress record, or its first deployment waited
  // jobmaster.first-deploy-wait): every later settle deploys whatever fits at once.
  bool deployedOnce_ = false;
  // What a job holds only once it had slots, attempts or a release to wait for: made with the
  // first use (waits()), so that a queued job holds none of it.
  struct Waits {
    // Slots freeWhenStored() frees once a put holds what ended in them, by allocation: until
    // then their workers stay known and offers of them are accepted, so that no worker frees a
    // slot that may carry an end no store holds yet (a FINISHED one, acknowledged at once).
    std::map<AllocationId, ResourceId> freeing;
    std::optional<MonoTime> restartArmedAt;
    kj::Maybe<kj::Own<kj::PromiseFulfiller<void>>> drained;  // release() waits.
    kj::Maybe<kj::Promise<void>> restartTimer;  // Reports its failure to term_.taskErrors.
    // The first deployment's wait for more slots (gathersSlots), while it runs; reports its
    // failure to term_.taskErrors.
    kj::Maybe<kj::Promise<void>> gatherWait;
  };
  Waits& waits() {
    if (!waits_) waits_ = std::make_unique<Waits>();
    return *waits_;
  }
  bool freeing(const AllocationId& allocation) const {
    return waits_ && waits_->freeing.count(allocation) != 0;
  }
  std::unique_ptr<Waits> waits_;
  kj::TaskSet tasks_{term_.taskErrors};
  // Cut first on destruction: the gateway servers the term keeps answer DISCONNECTED then. Made
  // with the first gateway served (serveFor): a job that never had a worker's call (a queued one)
  // holds no link record.
  std::optional<rpc::Revocable<JobMaster>> self_;
};

}  // namespace regent::jobmaster

// The jobs on a worker as their JobMasters see them: per job, the JobMaster reached through the
// registered leader's bootstrap, the offer of the job's slots, the queue of attempt updates and
// their delivery, the answers to the JobMaster's heartbeats, and the JobMasters' part of the
// worker's disconnect. Internal to services/taskexecutor/; the contract is TaskExecutor's
// (task_executor.h, "Jobs"). Offers and JobMaster calls are in job_links.cc, the update queue and
// its delivery in job_updates.cc.
#pragma once

#include <kj/async.h>
#include <kj/timer.h>

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>

#include "common/backoff.h"
#include "common/ids.h"
#include "common/task_set_error_logger.h"
#include "common/time.h"
#include "common/wakeable_delay.h"
#include "rpc/failure.h"
#include "rpc/schema/gateways.capnp.h"
#include "services/taskexecutor/slot_table.h"

namespace regent {
class EventSink;
}
namespace regent::client {
class LeaderClient;
}

namespace regent::taskexecutor {

struct TaskExecutorOptions;
struct TaskExecutorCounters;
class Registration;

// Loop-thread only. Every reference must outlive it; destroying it cancels its work.
class JobLinks {
 public:
  // `gateway` is the worker's, handed over with every offer.
  JobLinks(kj::Timer& timer, client::LeaderClient& leaders, EventSink& events,
           const TaskExecutorOptions& options, TaskExecutorCounters& counters,
           Registration& registration, SlotTable& slots, TaskRunner& runner,
           wire::TaskExecutorGateway::Client gateway);
  ~JobLinks() noexcept;
  JobLinks(const JobLinks&) = delete;
  JobLinks& operator=(const JobLinks&) = delete;

  // Registered (a new epoch or the same one again): offers every allocated slot again, asks for
  // the JobMasters afresh, delivers what waited.
  void onRegistered();
  // Offers the job's allocated slots not accepted in the registered epoch (after this turn's
  // requestSlot calls); one offer per job at a time.
  void scheduleOffer(const JobId& job);
  // Frees the slot (its attempts cancelled), forgetting the job once nothing of it is left.
  void releaseSlot(SlotState& slot, const std::string& cause);
  // Cancels the job's attempts, then frees its slots.
  void freeJob(const JobId& job, const std::string& cause);
  // A JobMaster's TaskExecutorGateway.heartbeat: answered asynchronously.
  void answerHeartbeat(const JobId& job, uint64_t epoch);
  // disconnect(): JobMasterGateway.disconnect of every job holding slots here, while the
  // registration stands. Resolves when all answered, or after the call timeout; never rejects.
  kj::Promise<void> disconnectJobMasters(const std::string& cause);

  // An update of `record` (already the attempt's latest state) for its job's JobMaster: queued
  // and delivered in order, or dropped while the leader does not know the job.
  void onTaskUpdate(const AttemptRecord& record);
  // Resolves once no update waits, or after `bound`. Never rejects.
  kj::Promise<void> flushUpdates(Duration bound);
  // Attempt updates waiting to be delivered (all jobs).
  size_t updatesQueued() const;

 private:
  // An update on its way to the job's JobMaster; `seq` orders the updates of every job.
  struct PendingUpdate {
    uint64_t seq = 0;
    AttemptRecord record;
  };
  // What the worker keeps per job it holds slots or attempts of.
  struct JobLink {
    JobLink(const TaskExecutorOptions& options, kj::Timer& timer);

    // The job's JobMaster as reached in `gatewayEpoch`.
    kj::Maybe<wire::JobMasterGateway::Client> gateway;
    uint64_t gatewayEpoch = 0;
    std::deque<PendingUpdate> updates;  // In the order the runner reported them.
    // The registration (Registration::round()) whose offer of the job's slots was answered, or
    // in which the job held no slot: its updates go from then on.
    uint64_t offeredRound = 0;
    // The registration in which the leader answered notFound for the job: its later updates are
    // dropped (its attempts are being cancelled).
    std::optional<uint64_t> unknownRound;
    bool delivering = false;      // deliverLoop() runs.
    bool offering = false;        // offerLoop() runs.
    bool offerScheduled = false;  // offerLoop() starts after this turn.
    // An offer of several slots was refused (the JobMaster refuses a whole offer for one slot
    // it does not grant, permissionDenied): until none is left to offer, each slot is offered
    // alone, so that only the refused ones are freed (another may carry a FINISHED end its
    // JobMaster acknowledged and has not stored yet).
    bool offerSingly = false;
    ExponentialBackoff offerBackoff;
    ExponentialBackoff updateBackoff;
    // backoffWait() callers, woken early by the next registration (wakeJob).
    WakeableDelay backoffWaits;
  };
  // What the worker does after a JobMaster call (or MasterBootstrap.jobMaster) failed.
  enum class Reaction {
    kRetry,          // The leadership moved or is busy, the link was lost: again after a backoff.
    kUnknown,        // notFound: the job (or the attempt) is unknown to the term.
    kNotRegistered,  // The worker is not registered (yet) with the term's ResourceManager.
    kGiveUp,         // A refusal retrying cannot fix.
  };
  static Reaction reactionTo(const rpc::CallFailure& failure);
  static Reaction reactionTo(const kj::Exception& exception);
  // The backoff's next wait, or the failure's retryAfter when longer (at most `max`).
  static Duration waitBefore(ExponentialBackoff& backoff, Duration retryAfter, Duration max);

  JobLink& link(const JobId& job);
  // Forgets the job's link once nothing of the job is left on the worker.
  void forgetIfIdle(const JobId& job);
  kj::Promise<void> offerLoop(JobId job, uint64_t epoch);
  // The job's JobMaster in `epoch` (cached), through the registered leader's bootstrap.
  kj::Promise<rpc::Attempt<wire::JobMasterGateway::Client>> jobMaster(const JobId& job,
                                                                      uint64_t epoch);
  // The leader does not know the job (notFound): its attempts cancelled, its slots freed, its
  // queued updates dropped; the job's updates produced later in this registration too.
  void jobUnknown(const JobId& job, const std::string& why);
  // Waits `wait`, or less when the next registration wakes the job's loops (wakeJob).
  kj::Promise<void> backoffWait(const JobId& job, Duration wait);
  void wakeJob(JobLink& held);

  // job_updates.cc
  // Delivers the job's pending updates in order, once its offer in this registration was
  // answered; one loop per job at a time.
  void kickDelivery(const JobId& job);
  kj::Promise<void> deliverLoop(JobId job);
  // Queues `record` as the job's next update, first dropping the oldest queued one when the
  // queue is at options.updateBufferMax.
  void queueUpdate(const JobId& job, const AttemptRecord& record);
  // Returns the job whose update was dropped (nullopt: none was queued).
  std::optional<JobId> dropOldestUpdate();
  // Tells the flushUpdates() callers when no update waits any more.
  void notifyIfFlushed();
  // The job's offer in the current registration was answered (or it holds no slot here): its
  // updates may go.
  void markOffered(const JobId& job);

  kj::Timer& timer_;
  client::LeaderClient& leaders_;
  EventSink& events_;
  const TaskExecutorOptions& options_;
  TaskExecutorCounters& counters_;
  Registration& registration_;
  SlotTable& slots_;
  TaskRunner& runner_;
  wire::TaskExecutorGateway::Client gateway_;
  std::map<JobId, kj::Own<JobLink>> jobs_;
  uint64_t updateSeq_ = 0;  // The last PendingUpdate::seq given.
  // flushUpdates() callers, told when no update waits any more.
  std::vector<kj::Own<kj::PromiseFulfiller<void>>> flushed_;
  TaskSetErrorLogger errorLogger_{"task executor"};
  kj::TaskSet tasks_{errorLogger_};  // Declared last: cancelled first.
};

}  // namespace regent::taskexecutor

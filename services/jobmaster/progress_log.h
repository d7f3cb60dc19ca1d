// One job's progress record written ahead of what workers act on (docs/jobgraph.md, "Failover"):
// a new attempt is deployed only once a put holding it succeeded, and a FAILED or CANCELED state
// is acknowledged only once a put holding it succeeded. A FINISHED state is acknowledged at once
// (its worker keeps offering it with its slot), and the slot it leaves is freed once a put holds
// it. That put is lazy (storedSoon): it starts `lazyPutDelay` (jobmaster.finished-put-delay)
// after the change unless something wants one now, so that the ends of a job's subtasks that
// finish together go into one put, or into none: the states that end the job FINISHED are held
// by no put but by the Dispatcher's result, which no leader runs again and which is stored with
// the job's cleanup; whatever waits for them resolves at close(), which the job's release calls
// after that result is stored. A FAILED end is put first: its root cause must outlive a leader
// that dies before the result is stored. One put per job is in flight; changes made meanwhile go
// into the next. kUnavailable (and any other failure but two): tried again after
// 100 ms, doubling with jitter up to heartbeat.interval. kFenced: the term is over, nothing is
// written or deployed any more. kTooLarge: no put can succeed; the job fails.
#pragma once

#include <kj/async.h>
#include <kj/timer.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/backoff.h"
#include "common/ids.h"
#include "common/time.h"
#include "services/jobmaster/execution_graph.h"
#include "services/jobmaster/job_master_term.h"
#include "store/job_progress_store.h"

namespace regent::jobmaster {

// Loop-thread only. Every reference given to it must outlive it. Destroying it cancels the put in
// flight and its retry; the promises it handed out are dropped unresolved.
class ProgressLog final {
 public:
  // What the log tells its JobMaster, each when a put settles (never inside a call to the log).
  class Listener {
   public:
    virtual ~Listener() = default;
    // A put holding `deployment` succeeded: it may be sent (unless its worker was lost meanwhile).
    virtual void deployStored(const Deployment& deployment) = 0;
    // No put of the record can succeed (`message` says why): the job must fail.
    virtual void recordTooLarge(const std::string& message) = 0;
    // A put settled (and the log is not closing): a FAILED end may be reported now.
    virtual void putSettled() = 0;
  };

  // `graph` is the job's state the record is written from (its version() orders the puts).
  // From `term`: the epoch, the progress store, the timer, the wall clock the record is stamped
  // with, the longest retry delay (heartbeat.interval) and how long a put nobody waits for now
  // (storedSoon, or no waiter at all) waits for more changes (jobmaster.finished-put-delay; 0:
  // none waits).
  ProgressLog(JobId job, const ExecutionGraph& graph, JobMasterTerm& term, Listener& listener);
  ProgressLog(const ProgressLog&) = delete;
  ProgressLog& operator=(const ProgressLog&) = delete;

  // When the graph changed since the last stored version, no put is in flight, no retry delay
  // runs, and the log is neither fenced, too large nor closed: starts a put now if a deployment,
  // a stored() caller or writeNow() waits for one, else one lazyPutDelay later (none then when
  // one started meanwhile and nothing changed since).
  void write();
  // write(), the put started now.
  void writeNow();
  // Sends `deployment` (made at the graph's current version) once a put of that version
  // succeeded (Listener::deployStored).
  void deployWhenStored(const Deployment& deployment);
  // Resolves true once a put holding everything so far succeeded (at once when it did already,
  // or once the log is closed: the job is over); false when that put failed or the log is
  // fenced or too large (the caller answers `unavailable`).
  kj::Promise<bool> stored();
  // stored(), but the put it waits for may start up to lazyPutDelay later, holding what changed
  // meanwhile (or none follows: the job ended, and close() resolves it true).
  kj::Promise<bool> storedSoon();
  // Deployments still waiting for their put, taken away: they will never be sent.
  std::vector<Deployment> takeWaitingDeployments();
  // No put starts any more; waiting acknowledgements resolve true and waiting deployments are
  // dropped. Resolves once the put in flight settled.
  kj::Promise<void> close();

  // Whether the graph holds changes no successful put holds yet, that a put may still store
  // (not fenced, not too large).
  bool behind() const;
  // Whether a put may still succeed: neither fenced nor too large.
  bool canStore() const { return !fenced_ && !tooLarge_; }

 private:
  void settled(uint64_t version, const store::StoreResult<void>& result);
  kj::Promise<bool> waitForPut(bool now);
  // Whether a deployment, a stored() caller or writeNow() waits for a put now.
  bool putWantedNow();
  void armLazyPut();
  // Whether the job ended FINISHED: its result, not a put, stores the end.
  bool endStoredByResult() const;
  void deployStoredOnes();

  Duration lazyPutDelay() const { return term_.options.finishedPutDelay; }

  const JobId job_;
  const ExecutionGraph& graph_;
  JobMasterTerm& term_;
  Listener& listener_;
  // The graph's version the last successful put held; a failed put is tried again after
  // retry_'s next delay (made with the first failure); a successful put drops it.
  uint64_t storedVersion_ = 0;
  bool inFlight_ = false;
  bool retryArmed_ = false;
  bool fenced_ = false;    // kFenced: the term is over; nothing is written or deployed.
  bool tooLarge_ = false;  // kTooLarge: no put can succeed; nothing more is written or deployed.
  bool closed_ = false;    // close(): no put starts.
  bool nowWanted_ = false;  // writeNow() or the lazy delay: the next put starts at once.
  bool lazyArmed_ = false;  // The lazy delay runs.
  std::unique_ptr<ExponentialBackoff> retry_;
  struct WaitingDeployment {
    Deployment deployment;
    uint64_t version;  // Deployed once a put of this version succeeded.
  };
  std::vector<WaitingDeployment> waitingDeployments_;
  struct WaitingAck {
    uint64_t version;
    kj::Own<kj::PromiseFulfiller<bool>> fulfiller;
    bool now;  // stored(), not storedSoon().
  };
  std::vector<WaitingAck> waitingAcks_;
  kj::Maybe<kj::Own<kj::PromiseFulfiller<void>>> closing_;  // close() waits.
  kj::TaskSet tasks_{term_.taskErrors};  // Declared last: cancelled first.
};

}  // namespace regent::jobmaster

// What the JobMasters of one term share (job_masters.h): their options, the counters the master
// keeps across terms, and the term's timer, event sink, ResourceManager and progress store.
#pragma once

#include <kj/async.h>
#include <kj/list.h>
#include <kj/timer.h>

#include <array>
#include <cstdint>
#include <functional>

#include "common/event_sink.h"
#include "common/task_set_error_logger.h"
#include "common/time.h"
#include "rpc/schema/gateways.capnp.h"
#include "services/dispatcher/job_runner.h"
#include "services/resourcemanager/job_master_port.h"
#include "store/job_progress_store.h"

namespace regent::jobmaster {

struct JobMasterOptions {
  Duration heartbeatInterval{2000};  // heartbeat.interval: JobMaster -> worker heartbeats.
  Duration heartbeatTimeout{10000};  // heartbeat.timeout: a silent worker's attempts fail.
  Duration callTimeout{10000};       // rpc.call-timeout: each call to a worker.
  // jobmaster.reconciliation-timeout: how long a recovered job waits for workers to report the
  // live attempts of its progress record before failing the unreported ones.
  Duration reconciliationTimeout{30000};
  // jobmaster.finished-put-delay: how long a put nothing waits for at once (FINISHED states,
  // the frees of their slots, changes no worker waits for) waits for more changes
  // (ProgressLog); 0: every put starts at once and FINISHED is answered once stored.
  Duration finishedPutDelay{500};
  // jobmaster.first-deploy-wait: how long a job's first deployment waits, from the first slot it
  // holds, for the slots its other runnable subtasks need (ExecutionGraph::schedulesPartly), so
  // that one put holds them all; 0: every slot deploys at once.
  Duration firstDeployWait{200};
  std::function<int64_t()> nowMs;  // Unix ms; null: wallClockMillis().
};

// Counts kept across terms (the master owns them; /metrics reads them).
struct JobMasterCounters {
  uint64_t attemptsStarted = 0;    // regent_attempts_started_total: submitTask accepted.
  uint64_t attemptsFailed = 0;     // regent_attempts_failed_total: reached FAILED.
  uint64_t attemptsRestarted = 0;  // regent_attempts_restarted_total: attempts after a failure.
  // regent_attempts_adopted_total: attempts of an earlier term a worker offered and this term's
  // JobMaster adopted (docs/jobgraph.md, "Failover").
  uint64_t attemptsAdopted = 0;
  // regent_job_reconciliation_timeouts_total: recovered jobs that left RECONCILING by
  // jobmaster.reconciliation-timeout (some expected attempt was not reported).
  uint64_t reconciliationTimeouts = 0;
  // regent_job_submit_to_running_seconds: JobGraph submittedAtMs -> its first attempt RUNNING
  // (per job and term), cumulative buckets in seconds plus sum and count.
  static constexpr std::array<double, 12> kSubmitToRunningBounds = {
      0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
  std::array<uint64_t, kSubmitToRunningBounds.size()> submitToRunningBuckets{};
  double submitToRunningSum = 0;
  uint64_t submitToRunningCount = 0;
  void observeSubmitToRunning(double seconds);
};

// Serves one JobMaster's gateway as a capability of the term (rpc::LeadershipTerm::serve,
// fenced for the epoch, revoked with the term).
using ServeJobMasterGateway =
    std::function<wire::JobMasterGateway::Client(kj::Own<wire::JobMasterGateway::Server>)>;

// The settles the JobMasters of a term ask for, run in one event-loop task once nothing else is
// queued (kj::evalLast), in the order they were asked for: a term that starts thousands of jobs at
// once allocates one task, not one per job. Loop-thread only.
class SettleQueue final {
 public:
  class Entry {
   public:
    virtual void settleNow() = 0;

   protected:
    Entry() = default;
    ~Entry() = default;  // Its owner removes it first (remove()).

   private:
    friend class SettleQueue;
    kj::ListLink<Entry> link_;
    uint64_t round_ = 0;  // The round that settles it.
  };

  // A settle that throws is reported to `errors`; the round goes on with the next entry.
  explicit SettleQueue(kj::TaskSet::ErrorHandler& errors) : errors_(errors), tasks_(errors) {}
  ~SettleQueue() noexcept;
  SettleQueue(const SettleQueue&) = delete;
  SettleQueue& operator=(const SettleQueue&) = delete;

  // Queues `entry` unless it is queued. Asked while a round runs, it waits for the next one (the
  // next time nothing else is queued).
  void add(Entry& entry);
  // Takes `entry` out of the queue, if it is in it. An entry must be out of it when destroyed.
  void remove(Entry& entry);
  bool queued(const Entry& entry) const { return entry.link_.isLinked(); }

 private:
  void run();

  kj::TaskSet::ErrorHandler& errors_;
  kj::List<Entry, &Entry::link_> queued_;
  uint64_t round_ = 0;  // The round entries added now join.
  bool armed_ = false;  // A round is queued.
  kj::TaskSet tasks_;
};

// What every JobMaster of a term shares; JobMasters owns it and it outlives them.
struct JobMasterTerm {
  kj::Timer& timer;
  EventSink& events;
  const uint64_t epoch;
  resourcemanager::JobMasterPort& resourceManager;
  store::JobProgressStore& progress;
  const ServeJobMasterGateway serve;
  JobMasterCounters& counters;
  const JobMasterOptions options;
  dispatcher::JobRunnerListener* listener = nullptr;
  // Unix ms this term's JobMasters were created: the submit-to-running histogram observes only
  // jobs submitted since (a job recovered from an earlier term would count the failover).
  int64_t startedAtMs = 0;
  // Logs the failed tasks of every JobMaster's task sets (one for all: a JobMaster of a queued
  // job should cost little).
  TaskSetErrorLogger taskErrors{"job master"};
  SettleQueue settles{taskErrors};

  MonoTime monoNow() const { return regent::monoNow(timer); }
  int64_t wallNow() const { return options.nowMs ? options.nowMs() : wallClockMillis(); }
};

}  // namespace regent::jobmaster

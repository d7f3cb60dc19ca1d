// The workers holding slots of one job, as its JobMaster follows them: the gateway each handed
// over with its offer, when each was last heard, the heartbeats to them and the loss of a silent
// one (resourcemanager::HeartbeatMonitor), and the live attempts each must list in its heartbeats.
#pragma once

#include <kj/function.h>
#include <kj/timer.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/ids.h"
#include "common/time.h"
#include "rpc/schema/gateways.capnp.h"
#include "services/resourcemanager/heartbeat_monitor.h"

namespace regent::jobmaster {

// Loop-thread only. `timer` and `listener` must outlive it. Destroying it cancels its heartbeat
// rounds and its calls on the workers.
class JobWorkers final : private resourcemanager::HeartbeatTargets {
 public:
  struct Worker {
    wire::TaskExecutorGateway::Client client;
    MonoTime lastHeard;
    // Which offer handed over `client`: a call that lost its connection takes the worker away
    // only while no later offer (a new connection) replaced the client it went through.
    uint64_t link = 0;
  };

  class Listener {
   public:
    virtual ~Listener() = default;
    // `worker` was silent for heartbeat.timeout and was told, best effort (a paused worker reads
    // it once it wakes up, cancels the job's attempts and frees its slots). The listener loses
    // it (forget()). `message` names the worker and the timeout.
    virtual void workerSilent(const ResourceId& worker, const std::string& message) = 0;
  };

  // A live attempt missing from this many heartbeats of its worker in a row is lost.
  static constexpr uint32_t kHeartbeatsMissedToFail = 2;

  JobWorkers(kj::Timer& timer, uint64_t epoch, const JobId& job,
             resourcemanager::HeartbeatOptions options, Listener& listener);
  ~JobWorkers() noexcept override;
  JobWorkers(const JobWorkers&) = delete;
  JobWorkers& operator=(const JobWorkers&) = delete;

  // Starts the heartbeat rounds (HeartbeatMonitor::start, until idle): they run while the job
  // follows a worker, so a job waiting for slots holds no timer.
  void start(MonoTime now) { heartbeats_.start(now, true); }
  // The calls on the workers (freeSlot, disconnect), as this job's JobMaster.
  resourcemanager::HeartbeatMonitor& calls() { return heartbeats_; }

  // `worker` offered slots the job accepted over `client`: it is followed, heard at `now`.
  void offered(const ResourceId& worker, wire::TaskExecutorGateway::Client client, MonoTime now);
  Worker* find(const ResourceId& worker);
  bool contains(const ResourceId& worker) const { return workers_.count(worker) != 0; }
  size_t size() const { return workers_.size(); }
  // The worker and the attempts it must list are forgotten.
  void forget(const ResourceId& worker);
  // Stops following the workers `holdsSlots` says hold none of the job's slots (the attempts
  // they must list are kept until their next heartbeat: an entry of an attempt no longer live
  // is dropped then).
  void keepOnly(kj::FunctionParam<bool(const ResourceId&)> holdsSlots);

  // `attempt` (of global subtask `subtask`) is live on `worker`: its heartbeats must list it.
  void expect(const ResourceId& worker, const AttemptId& attempt, uint32_t subtask);
  // A heartbeat of `worker` listing `listed` (sorted), heard at `now`: the live attempts
  // (`isLive(subtask, attempt)`) it did not list in kHeartbeatsMissedToFail heartbeats in a row,
  // as (attempt, subtask). Attempts no longer live are not watched any more.
  std::vector<std::pair<AttemptId, uint32_t>> heartbeat(
      const ResourceId& worker, const std::vector<AttemptId>& listed, MonoTime now,
      kj::FunctionParam<bool(uint32_t subtask, const AttemptId& attempt)> isLive);

 private:
  // HeartbeatTargets.
  void refreshAll(MonoTime now) override;
  void expire(MonoTime now, Duration timeout) override;
  void forEachGateway(kj::FunctionParam<void(const ResourceId&, wire::TaskExecutorGateway::Client&)>
                          visit) override;
  kj::Maybe<wire::TaskExecutorGateway::Client&> gatewayOf(const ResourceId& worker) override;

  Listener& listener_;
  std::map<ResourceId, Worker> workers_;
  uint64_t nextLink_ = 0;  // Worker::link of the latest offer.
  // Per worker, the live attempts it has (its submitTask was accepted, or it was adopted) with
  // their subtask and the number of its heartbeats in a row that did not list them.
  struct Unlisted {
    uint32_t subtask = 0;
    uint32_t misses = 0;
  };
  std::map<ResourceId, std::map<AttemptId, Unlisted>> unlisted_;
  resourcemanager::HeartbeatMonitor heartbeats_;  // Reads workers_: declared after it.
};

}  // namespace regent::jobmaster

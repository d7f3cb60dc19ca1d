// The heartbeats a leader-side service sends to the workers it follows, and its other calls on
// them: the ResourceManager follows every registered worker, each JobMaster the workers holding
// its job's slots. One monitor per follower: the rounds, the late round that means this process
// was paused, and the calls on a worker's TaskExecutorGateway (heartbeat, disconnect, freeSlot),
// each bounded by rpc.call-timeout and never throwing. Who was heard when stays in the owner's
// table (HeartbeatTargets).
#pragma once

#include <kj/async.h>
#include <kj/function.h>
#include <kj/timer.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/task_set_error_logger.h"
#include "common/time.h"
#include "rpc/schema/gateways.capnp.h"

namespace regent::resourcemanager {

struct HeartbeatOptions {
  Duration interval{2000};      // heartbeat.interval: between two rounds.
  Duration timeout{10000};      // heartbeat.timeout: a worker silent this long is lost.
  Duration callTimeout{10000};  // rpc.call-timeout: each call on a worker.
};

// The owner's table of the workers it follows (the SlotManager's workers for the
// ResourceManager, the workers holding a job's slots for its JobMaster). Called on the loop
// thread, from the monitor's rounds only.
class HeartbeatTargets {
 public:
  virtual ~HeartbeatTargets() = default;
  // Every followed worker counts as heard at `now`: the round came later than heartbeat.timeout
  // after the previous one, so the workers' silence meanwhile was the owner's own (a paused
  // process, a blocked loop). Losing them would tell them to leave.
  virtual void refreshAll(MonoTime now) = 0;
  // Drops the workers not heard of for longer than `timeout` at `now`, each told, best effort,
  // with HeartbeatMonitor::disconnect (a paused worker reads it when it wakes up).
  virtual void expire(MonoTime now, Duration timeout) = 0;
  // Calls `visit` with each followed worker and the gateway it handed over.
  virtual void forEachGateway(
      kj::FunctionParam<void(const ResourceId&, wire::TaskExecutorGateway::Client&)> visit) = 0;
  // The gateway `worker` handed over, or null when it is not followed (any more).
  virtual kj::Maybe<wire::TaskExecutorGateway::Client&> gatewayOf(const ResourceId& worker) = 0;
};

// Loop-thread only. `timer` and `targets` must outlive it. Destroying it cancels its rounds and
// every call it has in flight; it calls nothing on destruction.
class HeartbeatMonitor final {
 public:
  // `jobMaster`: the job whose JobMaster sends (HeartbeatSender.jobMaster); nullopt: the
  // ResourceManager. `name` starts its log lines ("resource manager", "job 2a…").
  HeartbeatMonitor(kj::Timer& timer, uint64_t epoch, std::optional<JobId> jobMaster,
                   std::string name, HeartbeatOptions options, HeartbeatTargets& targets);
  HeartbeatMonitor(const HeartbeatMonitor&) = delete;
  HeartbeatMonitor& operator=(const HeartbeatMonitor&) = delete;

  // Starts the rounds at `now`: every interval, a round that is late by more than timeout first
  // refreshes every target (targets.refreshAll, with a warning), then drops the silent ones
  // (targets.expire), then heartbeats each remaining one. At most kHeartbeatsInFlight heartbeats
  // wait for their answers at once: each answer (or failure) sends the round's next one, so a
  // leader following thousands of workers does not hold thousands of calls at a time. A round's
  // heartbeat waits at most roundCallTimeout() (a quarter of the interval, at least 100 ms, at
  // most rpc.call-timeout) for its answer, so workers that do not answer (paused, cut off)
  // slow the round down but never stop it: the others still get their heartbeat, and with it
  // send theirs. A round that has not reached every worker when the next is due goes on instead
  // of starting over.
  // What keeps a worker followed is what it sends (its heartbeat, a slot report), not the reply
  // to ours; a failed heartbeat is logged at debug level only. Call once.
  //
  // `untilIdle` (a JobMaster's, which follows only the workers holding its job's slots): the
  // rounds wait for wake() before the first, and a round that leaves no target to heartbeat
  // stops them until the next wake(), so that a job waiting for slots holds no timer.
  void start(MonoTime now, bool untilIdle = false);
  // With untilIdle: starts the rounds again at `now` when they stopped (a target was added);
  // nothing while they run.
  void wake(MonoTime now);

  // TaskExecutorGateway.heartbeat on `worker`: resolves once it answered (whatever the answer),
  // fails when it did not within callTimeout (the ResourceManager probes the live holder of a
  // resource id with it).
  kj::Promise<void> probe(wire::TaskExecutorGateway::Client& worker);
  // TaskExecutorGateway.disconnect with `cause`, best effort: a failure is logged at debug level.
  void disconnect(const ResourceId& worker, wire::TaskExecutorGateway::Client& client,
                  const std::string& cause);
  // TaskExecutorGateway.freeSlot of `allocation` with `cause`: resolves once answered or failed
  // (then a warning is logged); never fails.
  kj::Promise<void> freeSlot(const ResourceId& worker, wire::TaskExecutorGateway::Client& client,
                             const AllocationId& allocation, const std::string& cause);

  static constexpr size_t kHeartbeatsInFlight = 256;
  // Heartbeats sent and not answered yet, and the round's workers still to heartbeat.
  size_t heartbeatsInFlight() const { return inFlight_; }
  size_t heartbeatsDue() const { return due_.size() - nextDue_; }

 private:
  kj::Promise<void> loop();
  // Whether the round has any target to heartbeat.
  bool round();
  // Heartbeats the round's next workers while fewer than kHeartbeatsInFlight wait for answers.
  void sendDue();
  // A heartbeat was answered or failed: the next one goes.
  void heartbeatEnded();
  // How long a round's heartbeat waits for its answer.
  Duration roundCallTimeout() const;
  // Sets the request's epoch and this monitor's sender.
  template <typename Request>
  void address(Request& request) const;

  kj::Timer& timer_;
  const uint64_t epoch_;
  const std::optional<JobId> jobMaster_;
  const std::string name_;
  const HeartbeatOptions options_;
  HeartbeatTargets& targets_;
  RoundGaps rounds_;
  bool untilIdle_ = false;
  bool idle_ = false;  // untilIdle: the rounds wait for wake().
  std::vector<ResourceId> due_;  // The round's workers, in order; those before nextDue_ are sent.
  size_t nextDue_ = 0;
  size_t inFlight_ = 0;
  TaskSetErrorLogger errorLogger_;
  kj::TaskSet tasks_{errorLogger_};  // Declared last: cancelled first.
};

}  // namespace regent::resourcemanager

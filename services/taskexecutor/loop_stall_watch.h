// LoopStallWatch: a pulse on a worker's loop every 100 ms, telling when the loop stood still (the
// process was stopped, or starved of CPU) for longer than a threshold. A worker that stood that
// long may hold work its JobMaster already gave up on (a submitTask answered after the caller's
// rpc.call-timeout, which the JobMaster then took for a worker fault and ran elsewhere): the
// TaskExecutor refuses a submitTask read right after such a stall, and the ProcessTaskRunner does
// not start an attempt the stall overtook (docs/workers.md, "Jobs on a worker").
#pragma once

#include <kj/async.h>
#include <kj/timer.h>

#include <optional>

#include "common/time.h"

namespace regent::taskexecutor {

// Loop-thread only. `timer` must outlive it.
class LoopStallWatch final {
 public:
  // `threshold`: a stall longer than this counts; zero: none ever does (and no pulse runs).
  LoopStallWatch(kj::Timer& timer, Duration threshold);
  LoopStallWatch(const LoopStallWatch&) = delete;
  LoopStallWatch& operator=(const LoopStallWatch&) = delete;

  // Starts the pulse. Call once.
  void start();

  // A stall that may hold a call read now: one still going on (the pulse is overdue by more than
  // the threshold), or one that ended within the last two pulses (stallSince two pulses ago).
  // nullopt otherwise.
  std::optional<Duration> recentStall() const;
  // A stall that came after `since`: still going on, or ended after it.
  std::optional<Duration> stallSince(MonoTime since) const;

 private:
  kj::Promise<void> pulse();
  // How long the loop has stood still now, beyond the pulse's period. Measured on the steady
  // clock: the loop's timer reads the time only when it polls, so it may not have moved yet
  // when the first work after a stall runs.
  Duration overdue() const;

  kj::Timer& timer_;
  const Duration threshold_;
  std::optional<MonoTime> lastPulse_;
  std::optional<MonoTime> lastStallEnd_;  // When the pulse that came late ran.
  Duration lastStall_{0};
  kj::Promise<void> pulsing_ = nullptr;
};

}  // namespace regent::taskexecutor

// Durations and clock readings shared by every folder. Time is injected as a kj::Timer: code
// that waits takes the loop's timer, and unit tests drive a kj::TimerImpl by hand.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace kj {
class Timer;
}

namespace regent {

using Duration = std::chrono::milliseconds;
using MonoTime = std::chrono::steady_clock::time_point;

// Milliseconds since the Unix epoch, for logs and records people read.
int64_t wallClockMillis();

// "2026-11-21T10:47:49.123Z" (ISO-8601, UTC, milliseconds), how every time people read is shown.
std::string formatUtcMillis(int64_t unixMillis);
// formatUtcMillis, or "-" for 0 (a time not reached yet).
std::string timeOrDash(int64_t unixMillis);

// steady_clock (CLOCK_MONOTONIC) in microseconds: the clock of event lines' mono_us fields, so
// readings of different processes on one host compare.
int64_t monotonicMicros();

// `timer`'s reading as a MonoTime (kj's timers count from kj::origin<TimePoint>()): the clock the
// loop's components keep their timeouts on, advanced by hand in unit tests.
MonoTime monoNow(const kj::Timer& timer);

// The times of a periodic round (a heartbeat round) that checks peers for silence, to tell a
// pause of this process (SIGSTOP, a blocked loop) from silence of its peers: a round that comes
// more than the peers' timeout after the previous one finds every peer silent only because this
// process did not run, so its caller refreshes every peer instead of declaring them lost.
//
// Owned by the round's loop; not thread-safe.
class RoundGaps final {
 public:
  // The first round's reference: call when the rounds start.
  void start(MonoTime now) { last_ = now; }
  // Records a round at `now`; true when it came more than `timeout` after the previous round
  // (or start()).
  bool lateRound(MonoTime now, Duration timeout) {
    gap_ = std::chrono::duration_cast<Duration>(now - last_);
    last_ = now;
    return gap_ > timeout;
  }
  // The time between the last round lateRound() recorded and the one before it (or start()).
  Duration lastGap() const { return gap_; }

 private:
  MonoTime last_{};
  Duration gap_{0};
};

}  // namespace regent

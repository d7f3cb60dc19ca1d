// Durations and clock readings shared by every folder. Time is injected as a kj::Timer: code
// that waits takes the loop's timer, and unit tests drive a kj::TimerImpl by hand.
#pragma once

#include <chrono>
#include <cstdint>

namespace regent {

using Duration = std::chrono::milliseconds;
using MonoTime = std::chrono::steady_clock::time_point;

// Milliseconds since the Unix epoch, for logs and records people read.
int64_t wallClockMillis();

// steady_clock (CLOCK_MONOTONIC) in microseconds: the clock of event lines' mono_us fields, so
// readings of different processes on one host compare.
int64_t monotonicMicros();

}  // namespace regent

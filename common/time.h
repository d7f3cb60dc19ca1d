// Durations and clocks shared by every folder. Time is injected (STYLE §8): code that waits
// takes a Clock so unit tests can advance a fake one.
#pragma once

#include <chrono>
#include <cstdint>

namespace regent {

using Duration = std::chrono::milliseconds;
using MonoTime = std::chrono::steady_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual MonoTime now() const = 0;
};

class SteadyClock final : public Clock {
 public:
  MonoTime now() const override { return std::chrono::steady_clock::now(); }
};

// Can be replaced in tests: time moves only when advance() is called.
class FakeClock final : public Clock {
 public:
  MonoTime now() const override { return now_; }
  void advance(Duration by) { now_ += by; }

 private:
  MonoTime now_{};
};

// Milliseconds since the Unix epoch, for logs and records people read.
int64_t wallClockMillis();

}  // namespace regent

// Exponential backoff with jitter for retries of logistical failures: RPC reconnects, a term's
// recovery, ZooKeeper retries, registrations.
#pragma once

#include <cstdint>
#include <functional>
#include <random>

#include "common/time.h"

namespace regent {

// The n-th delay (n = failures so far, from 0) is drawn uniformly from [initial, ceiling(n)],
// where ceiling(n) = min(max, initial * 2^n): the first retry waits exactly `initial`, later
// ones spread ("full jitter" above a floor of `initial`) so that many clients cut off at once
// do not come back in step, and no delay exceeds `max`.
//
// Not thread-safe; cheap to copy.
class ExponentialBackoff final {
 public:
  // `uniform01` returns numbers in [0, 1] (a test may fix it at 0 or 1); null draws from the
  // thread's generator, seeded once from std::random_device. Requires 0 < initial <= max.
  ExponentialBackoff(Duration initial, Duration max, std::function<double()> uniform01 = nullptr);

  // The delay to wait before the next attempt; counts one more failure.
  Duration next();
  // Back to the first delay (after a success).
  void reset() { failures_ = 0; }

  // Failures counted since construction or the last reset().
  uint32_t failures() const { return failures_; }
  // The upper bound of the delay next() would return now.
  Duration ceiling() const;

 private:
  Duration initial_;
  Duration max_;
  std::function<double()> uniform01_;
  uint32_t failures_ = 0;

  // Uniform in [0, 1] from a generator per thread (what a null `uniform01` means).
  static double uniformFromThreadGenerator();
};

}  // namespace regent

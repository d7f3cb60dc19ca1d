// Exponential backoff with jitter (see backoff.h).
#include "common/backoff.h"

#include <algorithm>
#include <memory>

namespace regent {

ExponentialBackoff::ExponentialBackoff(Duration initial, Duration max,
                                       std::function<double()> uniform01)
    : initial_(std::max(initial, Duration(1))),
      max_(std::max(max, initial_)),
      uniform01_(std::move(uniform01)) {
  // One generator per thread, shared by every backoff on it: each job's JobMaster holds two
  // backoffs, and a generator of their own cost 2.5 KB and a random_device read each.
  if (!uniform01_) uniform01_ = &uniformFromThreadGenerator;
}

double ExponentialBackoff::uniformFromThreadGenerator() {
  thread_local std::mt19937_64 generator(std::random_device{}());
  return std::uniform_real_distribution<double>(0.0, 1.0)(generator);
}

Duration ExponentialBackoff::ceiling() const {
  // Doubles until the cap; stops early so the shift never overflows.
  Duration ceiling = initial_;
  for (uint32_t i = 0; i < failures_ && ceiling < max_; ++i) ceiling *= 2;
  return std::min(ceiling, max_);
}

Duration ExponentialBackoff::next() {
  const Duration top = ceiling();
  const double u = std::clamp(uniform01_(), 0.0, 1.0);
  const auto spread = static_cast<double>((top - initial_).count());
  ++failures_;
  return initial_ + Duration(static_cast<Duration::rep>(spread * u + 0.5));
}

}  // namespace regent

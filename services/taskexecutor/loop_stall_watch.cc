#include "services/taskexecutor/loop_stall_watch.h"

#include <spdlog/spdlog.h>

#include <chrono>

namespace regent::taskexecutor {
namespace {
constexpr Duration kPulse{100};

MonoTime steadyNow() { return std::chrono::steady_clock::now(); }
}  // namespace

LoopStallWatch::LoopStallWatch(kj::Timer& timer, Duration threshold)
    : timer_(timer), threshold_(threshold) {}

void LoopStallWatch::start() {
  if (threshold_ <= Duration(0)) return;
  lastPulse_ = steadyNow();
  pulsing_ = pulse().eagerlyEvaluate([](kj::Exception&& e) {
    spdlog::error("worker: the loop's pulse stopped: {}", e.getDescription().cStr());
  });
}

kj::Promise<void> LoopStallWatch::pulse() {
  return timer_.afterDelay(kPulse.count() * kj::MILLISECONDS).then([this]() {
    const Duration stood = overdue();
    if (stood > threshold_) {
      lastStallEnd_ = steadyNow();
      lastStall_ = stood;
    }
    lastPulse_ = steadyNow();
    return pulse();
  });
}

Duration LoopStallWatch::overdue() const {
  if (!lastPulse_) return Duration(0);
  const auto gap = std::chrono::duration_cast<Duration>(steadyNow() - *lastPulse_);
  return gap > kPulse ? gap - kPulse : Duration(0);
}

std::optional<Duration> LoopStallWatch::recentStall() const {
  return stallSince(steadyNow() - 2 * kPulse);
}

std::optional<Duration> LoopStallWatch::stallSince(MonoTime since) const {
  if (threshold_ <= Duration(0)) return std::nullopt;
  const Duration stood = overdue();
  if (stood > threshold_) return stood;
  if (lastStallEnd_ && *lastStallEnd_ >= since) return lastStall_;
  return std::nullopt;
}

}  // namespace regent::taskexecutor

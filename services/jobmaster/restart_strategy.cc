// The restart strategies of docs/jobgraph.md: none, fixed-delay, exponential-delay (with reset),
// failure-rate.
#include "services/jobmaster/restart_strategy.h"

#include <algorithm>
#include <cmath>

namespace regent::jobmaster {

RestartStrategy RestartStrategy::fromGraph(wire::JobGraph::Reader graph) {
  if (!graph.hasRestartStrategy()) return none();
  return fromWire(graph.getRestartStrategy());
}

RestartStrategy RestartStrategy::fromWire(wire::RestartStrategy::Reader strategy) {
  RestartStrategy out;
  switch (strategy.which()) {
    case wire::RestartStrategy::NONE:
      break;
    case wire::RestartStrategy::FIXED_DELAY: {
      auto fixed = strategy.getFixedDelay();
      out.kind_ = Kind::kFixedDelay;
      out.attempts_ = fixed.getAttempts();
      out.delay_ = Duration(fixed.getDelayMs());
      break;
    }
    case wire::RestartStrategy::EXPONENTIAL_DELAY: {
      auto exponential = strategy.getExponentialDelay();
      out.kind_ = Kind::kExponentialDelay;
      out.initialDelay_ = Duration(exponential.getInitialDelayMs());
      out.maxDelay_ =
          Duration(std::max(exponential.getMaxDelayMs(), exponential.getInitialDelayMs()));
      out.multiplier_ = std::max(1.0, exponential.getMultiplier());
      out.resetAfter_ = Duration(exponential.getResetAfterMs());
      out.attempts_ = exponential.getAttempts();
      out.nextDelay_ = out.initialDelay_;
      break;
    }
    case wire::RestartStrategy::FAILURE_RATE: {
      auto rate = strategy.getFailureRate();
      out.kind_ = Kind::kFailureRate;
      out.maxFailures_ = rate.getMaxFailures();
      out.interval_ = Duration(rate.getIntervalMs());
      out.delay_ = Duration(rate.getDelayMs());
      break;
    }
  }
  return out;
}

std::optional<Duration> RestartStrategy::onFailure(MonoTime now) {
  switch (kind_) {
    case Kind::kNone:
      return std::nullopt;
    case Kind::kFixedDelay:
      if (restarts_ >= attempts_) return std::nullopt;
      ++restarts_;
      return delay_;
    case Kind::kExponentialDelay: {
      if (attempts_ != 0 && restarts_ >= attempts_) return std::nullopt;
      if (lastFailure_ && now - *lastFailure_ >= resetAfter_) nextDelay_ = initialDelay_;
      lastFailure_ = now;
      const Duration delay = nextDelay_;
      const double grown = static_cast<double>(delay.count()) * multiplier_;
      const double cap = static_cast<double>(maxDelay_.count());
      nextDelay_ = Duration(static_cast<int64_t>(std::llround(std::min(grown, cap))));
      ++restarts_;
      return delay;
    }
    case Kind::kFailureRate: {
      failures_.push_back(now);
      failures_.erase(failures_.begin(),
                      std::find_if(failures_.begin(), failures_.end(),
                                   [&](MonoTime at) { return now - at < interval_; }));
      if (failures_.size() > maxFailures_) return std::nullopt;
      ++restarts_;
      return delay_;
    }
  }
  return std::nullopt;
}

std::string RestartStrategy::giveUpReason() const {
  switch (kind_) {
    case Kind::kNone:
      return "no restart strategy";
    case Kind::kFixedDelay:
      return "restart strategy fixed-delay allows " + std::to_string(attempts_) + " restarts";
    case Kind::kExponentialDelay:
      return "restart strategy exponential-delay allows " + std::to_string(attempts_) + " restarts";
    case Kind::kFailureRate:
      return "restart strategy failure-rate allows " + std::to_string(maxFailures_) +
             " failures within " + std::to_string(interval_.count()) + "ms";
  }
  return "restart strategy gave up";
}

}  // namespace regent::jobmaster

// A job's restart strategy (docs/jobgraph.md, "Restart strategies"): told of each failure and the
// time it happened, it answers with the delay before the restart or that the job fails. Pure
// logic on injected time; the JobMaster runs the delays on its timer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/time.h"
#include "rpc/schema/jobs.capnp.h"

namespace regent::jobmaster {

// Thread-safety: none (the JobMaster's loop thread owns it).
class RestartStrategy final {
 public:
  enum class Kind { kNone, kFixedDelay, kExponentialDelay, kFailureRate };

  // The strategy of a JobGraph; an absent field means none.
  static RestartStrategy fromGraph(wire::JobGraph::Reader graph);
  static RestartStrategy fromWire(wire::RestartStrategy::Reader strategy);
  static RestartStrategy none() { return RestartStrategy(); }

  // A failure at `now` (times must not go backwards): the delay before its restart, or nullopt
  // when the strategy gives up (the job fails). Each restart granted counts in restarts().
  std::optional<Duration> onFailure(MonoTime now);

  // Restarts granted so far, across the whole job.
  uint32_t restarts() const { return restarts_; }
  // A job recovered after a failover continues the count an earlier term left in its progress
  // record (the failure history of the rate and delay strategies starts afresh).
  void restoreRestarts(uint32_t restarts) { restarts_ = restarts; }
  Kind kind() const { return kind_; }
  // Why the strategy gave up, for the job's failure ("restart strategy fixed-delay allows 2
  // restarts"); meaningful after onFailure returned nullopt.
  std::string giveUpReason() const;

 private:
  Kind kind_ = Kind::kNone;
  uint32_t attempts_ = 0;  // fixed-delay; exponential-delay (0 = no limit).
  Duration delay_{0};      // fixed-delay, failure-rate.
  Duration initialDelay_{0};
  Duration maxDelay_{0};
  double multiplier_ = 1;
  Duration resetAfter_{0};
  uint32_t maxFailures_ = 0;
  Duration interval_{0};

  uint32_t restarts_ = 0;
  // exponential-delay: the delay the next restart gets, and when the last failure happened.
  Duration nextDelay_{0};
  std::optional<MonoTime> lastFailure_;
  // failure-rate: failures within the interval (oldest first), at most maxFailures + 1. A vector,
  // not a deque: an empty one allocates nothing (a libstdc++ deque takes 576 bytes even empty, and
  // every job, queued or not, has a strategy).
  std::vector<MonoTime> failures_;
};

}  // namespace regent::jobmaster

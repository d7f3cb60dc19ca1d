// The WorkerPool (worker_pool.h): the started workers' phases and the plan of what to start and
// release.
#include "services/resourcemanager/worker_pool.h"

#include <algorithm>
#include <utility>

#include "common/units.h"

namespace regent::resourcemanager {

namespace {

constexpr Duration kMinute{60000};

}  // namespace

const char* phaseName(PooledPhase phase) {
  switch (phase) {
    case PooledPhase::kRequested:
      return "requested";
    case PooledPhase::kPending:
      return "pending registration";
    case PooledPhase::kRegistered:
      return "registered";
    case PooledPhase::kReleasing:
      return "releasing";
  }
  return "?";
}

WorkerPool::WorkerPool(WorkerPoolOptions options, uint64_t epoch, std::function<double()> jitter)
    : options_(std::move(options)),
      epoch_(epoch),
      backoff_(options_.retryInitial, std::max(options_.retryInitial, options_.retryMax),
               std::move(jitter)) {}

void WorkerPool::enter(PooledWorker& worker, PooledPhase phase, MonoTime now) {
  worker.phase = phase;
  worker.since = now;
  if (phase != PooledPhase::kRegistered) worker.idleSince.reset();
  // A releasing worker keeps its resource id (its stop goes over its connection).
  if (phase == PooledPhase::kRequested || phase == PooledPhase::kPending) {
    worker.resourceId.reset();
  }
}

std::string WorkerPool::providerWorkerId(const std::string& id) const {
  return options_.provider + ":" + id;
}

void WorkerPool::listed(const std::vector<std::string>& ids, MonoTime now) {
  listed_ = true;
  listError_.clear();
  for (const std::string& id : ids) {
    if (workers_.count(id) != 0) continue;  // Registered before the list came back.
    PooledWorker worker;
    worker.id = id;
    worker.recovered = true;
    enter(worker, PooledPhase::kPending, now);
    workers_.emplace(id, std::move(worker));
  }
}

void WorkerPool::listFailed(const std::string& error) { listError_ = error; }

void WorkerPool::started(const std::string& id, MonoTime now) {
  auto found = workers_.find(id);
  if (found == workers_.end() || found->second.phase != PooledPhase::kRequested) return;
  enter(found->second, PooledPhase::kPending, now);
}

void WorkerPool::failedStart(const std::string& error, MonoTime now) {
  ++startFailures_;
  lastError_ = error;
  failures_.push_back(now);
  retryAt_ = now + backoff_.next();
}

void WorkerPool::startFailed(const std::string& id, const std::string& error, MonoTime now) {
  auto found = workers_.find(id);
  if (found == workers_.end()) return;
  workers_.erase(found);
  failedStart(error, now);
}

bool WorkerPool::registered(const std::string& providerWorkerId, const ResourceId& resourceId,
                            MonoTime now, Vouch vouch) {
  const std::string prefix = options_.provider + ":";
  if (providerWorkerId.size() <= prefix.size() ||
      providerWorkerId.compare(0, prefix.size(), prefix) != 0 || vouch == Vouch::kNo) {
    return false;
  }
  const std::string id = providerWorkerId.substr(prefix.size());
  // One worker is one id: a resource id holding another id of the pool claims a second one.
  for (const auto& [other, worker] : workers_) {
    if (other != id && worker.resourceId == resourceId) return false;
  }
  auto found = workers_.find(id);
  if (found == workers_.end()) {
    // Started by an earlier leader and not listed (yet): it is this pool's all the same.
    PooledWorker worker;
    worker.id = id;
    worker.recovered = true;
    found = workers_.emplace(id, std::move(worker)).first;
  } else if (found->second.phase == PooledPhase::kReleasing) {
    return found->second.resourceId == resourceId || !found->second.resourceId;
  } else if (found->second.phase == PooledPhase::kRegistered && found->second.resourceId &&
             *found->second.resourceId != resourceId) {
    // Another worker claims the id of one registered under another resource id: it is not
    // taken for the pool's (never released, never counted), the first keeps the id.
    return false;
  }
  PooledWorker& worker = found->second;
  if (worker.phase != PooledPhase::kRegistered) {
    enter(worker, PooledPhase::kRegistered, now);
    // A registration is the proof that starting works: the backoff starts over.
    backoff_.reset();
  }
  worker.resourceId = resourceId;
  worker.everRegistered = true;
  return true;
}

void WorkerPool::releaseCalledOff(const std::string& id, MonoTime now) {
  auto found = workers_.find(id);
  if (found == workers_.end() || found->second.phase != PooledPhase::kReleasing ||
      !found->second.resourceId) {
    return;
  }
  enter(found->second, PooledPhase::kRegistered, now);
}

void WorkerPool::unregistered(const ResourceId& resourceId, MonoTime now) {
  for (auto& [id, worker] : workers_) {
    if (worker.phase == PooledPhase::kRegistered && worker.resourceId == resourceId) {
      enter(worker, PooledPhase::kPending, now);
      return;
    }
  }
}

void WorkerPool::ended(const std::string& id, const std::string& reason, MonoTime now) {
  auto found = workers_.find(id);
  if (found == workers_.end()) return;
  const PooledPhase phase = found->second.phase;
  const bool everRegistered = found->second.everRegistered;
  if (phase == PooledPhase::kReleasing) return;  // released() follows.
  workers_.erase(found);
  // Only a worker that never registered failed to start (one that registered and left, by a
  // stop signal say, did not).
  if (!everRegistered && (phase == PooledPhase::kRequested || phase == PooledPhase::kPending)) {
    failedStart(reason, now);
  }
}

void WorkerPool::released(const std::string& id) {
  auto found = workers_.find(id);
  if (found == workers_.end()) return;
  workers_.erase(found);
  ++releasedTotal_;
}

size_t WorkerPool::failuresInLastMinute(MonoTime now) const {
  return static_cast<size_t>(std::count_if(failures_.begin(), failures_.end(),
                                           [now](MonoTime at) { return now - at < kMinute; }));
}

PoolDecisions WorkerPool::plan(uint32_t unmetSlots,
                               const std::function<SlotView(const ResourceId&)>& view,
                               MonoTime now) {
  PoolDecisions decisions;
  while (!failures_.empty() && now - failures_.front() >= kMinute) failures_.pop_front();
  if (retryAt_ && now >= *retryAt_) retryAt_.reset();
  if (!listed_) return decisions;  // A failover: what earlier leaders started is not known yet.

  PoolCounts live = counts();
  size_t alive = live.requested + live.pending + live.registered;
  auto release = [&](PooledWorker& worker, std::string reason, bool failed) {
    decisions.release.push_back(
        PoolDecisions::Release{worker.id, worker.resourceId, std::move(reason), failed});
    enter(worker, PooledPhase::kReleasing, now);
    --alive;
  };

  // Started (or registered once, then gone), not registered within the start timeout:
  // released; a failed start when it never registered.
  for (auto& [id, worker] : workers_) {
    if (worker.phase == PooledPhase::kPending && now - worker.since >= options_.startTimeout) {
      const bool failed = !worker.everRegistered;
      const std::string reason =
          "worker " + providerWorkerId(id) + " did not register" +
          (failed ? std::string() : std::string(" again")) +
          " within resourcemanager.workers.start-timeout (" +
          formatDuration(options_.startTimeout) + ")";
      release(worker, reason, failed);
      if (failed) failedStart(reason, now);
    }
  }

  // Idle registered workers: released after the idle timeout, down to the floor, and never
  // while requirements wait (a wait for slots is what an idle worker is for).
  size_t unreported = 0;  // Registered, slots not in the table yet: still coming.
  for (auto& [id, worker] : workers_) {
    if (worker.phase != PooledPhase::kRegistered) continue;
    const SlotView slots = worker.resourceId ? view(*worker.resourceId) : SlotView{};
    if (!slots.reported) ++unreported;
    if (!slots.idle) {
      worker.idleSince.reset();
      continue;
    }
    if (!worker.idleSince) worker.idleSince = now;
    if (unmetSlots == 0 && alive > options_.min &&
        now - *worker.idleSince >= options_.idleTimeout) {
      release(worker,
              "idle for resourcemanager.workers.idle-timeout (" +
                  formatDuration(options_.idleTimeout) + ")",
              false);
    }
  }

  // Workers to start: for the slots the starting ones will not cover, and up to the floor.
  live = counts();
  const uint64_t coming =
      uint64_t{live.requested + live.pending + unreported} * options_.slotsPerWorker;
  const uint64_t uncovered = unmetSlots > coming ? unmetSlots - coming : 0;
  const uint32_t perWorker = std::max<uint32_t>(options_.slotsPerWorker, 1);
  uint64_t wanted = (uncovered + perWorker - 1) / perWorker;
  if (alive + wanted < options_.min) wanted = options_.min - alive;
  const size_t total = alive + live.releasing;
  const uint64_t room = total < options_.max ? options_.max - total : 0;
  wanted = std::min(wanted, room);
  if (wanted == 0) return decisions;
  if (retryAt_ && now < *retryAt_) return decisions;  // Backing off after a failed start.
  if (static_cast<double>(failuresInLastMinute(now)) >= options_.maxFailuresPerMinute) {
    return decisions;
  }
  retryAt_.reset();
  // After a failed start, one at a time until one registers.
  if (!lastError_.empty() && backoff_.failures() > 0) wanted = std::min<uint64_t>(wanted, 1);
  for (uint64_t i = 0; i < wanted; ++i) {
    PooledWorker worker;
    worker.id = "e" + std::to_string(epoch_) + "-" + std::to_string(nextId_++);
    enter(worker, PooledPhase::kRequested, now);
    decisions.start.push_back(worker.id);
    workers_.emplace(worker.id, std::move(worker));
  }
  return decisions;
}

std::string WorkerPool::waitingReason(MonoTime now) const {
  if (!listed_ && !listError_.empty()) {
    return options_.provider + ": cannot list the workers earlier leaders started (" + listError_ +
           "); starting none until it can";
  }
  const PoolCounts live = counts();
  std::string reason;
  if (live.requested + live.pending > 0) {
    reason = "waiting for a worker to start: " + std::to_string(live.requested) + " requested, " +
             std::to_string(live.pending) + " pending registration";
  }
  if (!lastError_.empty() && backoff_.failures() > 0) {
    if (!reason.empty()) reason += "; ";
    const size_t failures = failuresInLastMinute(now);
    if (static_cast<double>(failures) >= options_.maxFailuresPerMinute) {
      reason += std::to_string(failures) +
                " worker starts failed in the last minute, at resourcemanager.workers.max-failure-"
                "rate; starting none until the rate falls: " +
                lastError_;
    } else {
      reason += "the last worker start failed (" + lastError_ + ")";
      if (retryAt_ && now < *retryAt_) {
        reason += "; trying again in " +
                  formatDuration(std::chrono::duration_cast<Duration>(*retryAt_ - now));
      }
    }
  }
  return reason;
}

std::optional<MonoTime> WorkerPool::nextDeadline(MonoTime now) const {
  std::optional<MonoTime> next;
  auto consider = [&next, now](MonoTime at) {
    if (at > now && (!next || at < *next)) next = at;
  };
  if (retryAt_) consider(*retryAt_);
  if (!failures_.empty()) consider(failures_.front() + kMinute);
  for (const auto& [id, worker] : workers_) {
    if (worker.phase == PooledPhase::kPending) consider(worker.since + options_.startTimeout);
    if (worker.phase == PooledPhase::kRegistered && worker.idleSince) {
      consider(*worker.idleSince + options_.idleTimeout);
    }
  }
  return next;
}

PoolCounts WorkerPool::counts() const {
  PoolCounts counts;
  for (const auto& [id, worker] : workers_) {
    switch (worker.phase) {
      case PooledPhase::kRequested:
        ++counts.requested;
        break;
      case PooledPhase::kPending:
        ++counts.pending;
        break;
      case PooledPhase::kRegistered:
        ++counts.registered;
        break;
      case PooledPhase::kReleasing:
        ++counts.releasing;
        break;
    }
  }
  return counts;
}

const PooledWorker* WorkerPool::byResourceId(const ResourceId& resourceId) const {
  for (const auto& [id, worker] : workers_) {
    if (worker.resourceId == resourceId) return &worker;
  }
  return nullptr;
}

}  // namespace regent::resourcemanager

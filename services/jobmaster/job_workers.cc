// JobWorkers (job_workers.h): the workers holding a job's slots and the attempts they must list.
#include "services/jobmaster/job_workers.h"

#include <algorithm>

#include "common/units.h"

namespace regent::jobmaster {

JobWorkers::JobWorkers(kj::Timer& timer, uint64_t epoch, const JobId& job,
                       resourcemanager::HeartbeatOptions options, Listener& listener)
    : listener_(listener), heartbeats_(timer, epoch, job, "job " + job.toHex(), options, *this) {}

JobWorkers::~JobWorkers() noexcept = default;

void JobWorkers::offered(const ResourceId& worker, wire::TaskExecutorGateway::Client client,
                         MonoTime now) {
  workers_.insert_or_assign(worker, Worker{kj::mv(client), now, ++nextLink_});
  heartbeats_.wake(now);
}

JobWorkers::Worker* JobWorkers::find(const ResourceId& worker) {
  auto found = workers_.find(worker);
  return found == workers_.end() ? nullptr : &found->second;
}

void JobWorkers::forget(const ResourceId& worker) {
  workers_.erase(worker);
  unlisted_.erase(worker);
}

void JobWorkers::keepOnly(kj::FunctionParam<bool(const ResourceId&)> holdsSlots) {
  for (auto it = workers_.begin(); it != workers_.end();) {
    it = holdsSlots(it->first) ? std::next(it) : workers_.erase(it);
  }
}

void JobWorkers::expect(const ResourceId& worker, const AttemptId& attempt, uint32_t subtask) {
  unlisted_[worker].emplace(attempt, Unlisted{subtask, 0});
}

std::vector<std::pair<AttemptId, uint32_t>> JobWorkers::heartbeat(
    const ResourceId& worker, const std::vector<AttemptId>& listed, MonoTime now,
    kj::FunctionParam<bool(uint32_t subtask, const AttemptId& attempt)> isLive) {
  std::vector<std::pair<AttemptId, uint32_t>> lost;
  if (Worker* known = find(worker)) known->lastHeard = now;
  auto tracked = unlisted_.find(worker);
  if (tracked == unlisted_.end()) return lost;
  auto& held = tracked->second;
  for (auto it = held.begin(); it != held.end();) {
    const AttemptId& attempt = it->first;
    Unlisted& entry = it->second;
    if (!isLive(entry.subtask, attempt)) {
      it = held.erase(it);  // Ended, or failed otherwise: nothing to watch.
      continue;
    }
    entry.misses = std::binary_search(listed.begin(), listed.end(), attempt) ? 0 : entry.misses + 1;
    if (entry.misses >= kHeartbeatsMissedToFail) {
      lost.emplace_back(attempt, entry.subtask);
      it = held.erase(it);
      continue;
    }
    ++it;
  }
  if (held.empty()) unlisted_.erase(tracked);
  return lost;
}

void JobWorkers::refreshAll(MonoTime now) {
  for (auto& [id, worker] : workers_) worker.lastHeard = now;
}

void JobWorkers::expire(MonoTime now, Duration timeout) {
  std::vector<ResourceId> silent;
  for (const auto& [id, worker] : workers_) {
    if (now - worker.lastHeard > timeout) silent.push_back(id);
  }
  for (const ResourceId& id : silent) {
    auto found = workers_.find(id);
    if (found == workers_.end()) continue;  // Lost meanwhile, with an earlier one.
    const std::string message =
        "worker " + id.toHex() + " lost: no heartbeat for " + formatDuration(timeout);
    // Told, best effort: no JobMaster heartbeat reaches it any more, so while its registration
    // with the ResourceManager stands it would not learn otherwise.
    heartbeats_.disconnect(id, found->second.client, message);
    listener_.workerSilent(id, message);
  }
}

void JobWorkers::forEachGateway(
    kj::FunctionParam<void(const ResourceId&, wire::TaskExecutorGateway::Client&)> visit) {
  for (auto& [id, worker] : workers_) visit(id, worker.client);
}

kj::Maybe<wire::TaskExecutorGateway::Client&> JobWorkers::gatewayOf(const ResourceId& worker) {
  auto found = workers_.find(worker);
  if (found == workers_.end()) return nullptr;
  return found->second.client;
}

}  // namespace regent::jobmaster

// The SlotManager's table and matching (slot_manager.h). Counts and per-job holdings are kept
// incrementally (account()), so a report or heartbeat costs O(its slots), not O(the cluster).
#include "services/resourcemanager/slot_manager.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace regent::resourcemanager {
namespace {

SlotFailure notRegistered(std::string message) {
  return SlotFailure{SlotError::kNotRegistered, std::move(message), ""};
}

SlotFailure invalidArgument(std::string field, std::string message) {
  return SlotFailure{SlotError::kInvalidArgument, std::move(message), std::move(field)};
}

// Same slots with the same profiles and allocations (what matching depends on).
bool sameAllocations(const std::vector<Slot>& a, const std::vector<Slot>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].index != b[i].index || a[i].profile != b[i].profile ||
        a[i].allocation != b[i].allocation || a[i].job != b[i].job ||
        a[i].pending != b[i].pending) {
      return false;
    }
  }
  return true;
}

}  // namespace

void SlotManager::indexFree(const Worker& worker) {
  auto sequence = sequenceOf_.find(worker.registration.resourceId);
  if (sequence == sequenceOf_.end()) return;
  const bool choosable =
      worker.reported && std::any_of(worker.slots.begin(), worker.slots.end(), [](const Slot& slot) {
        return !slot.allocation && !slot.avoid;
      });
  if (choosable) {
    withFree_.insert(sequence->second);
  } else {
    withFree_.erase(sequence->second);
  }
}

void SlotManager::account(const Worker& worker, int sign) {
  if (!worker.reported) return;
  if (sign < 0) {
    auto sequence = sequenceOf_.find(worker.registration.resourceId);
    if (sequence != sequenceOf_.end()) withFree_.erase(sequence->second);
  } else {
    indexFree(worker);
  }
  auto add = [sign](size_t& counter, size_t amount) {
    counter = sign > 0 ? counter + amount : counter - amount;
  };
  add(counts_.reported, 1);
  add(counts_.total, worker.slots.size());
  for (const Slot& slot : worker.slots) {
    if (!slot.allocation) continue;
    add(counts_.allocated, 1);
    if (slot.pending) add(counts_.pending, 1);
    if (!slot.job) continue;
    HeldByProfile& held = held_[*slot.job];
    if (sign > 0) {
      ++held[slot.profile];
    } else {
      auto it = held.find(slot.profile);
      if (it != held.end() && --it->second == 0) held.erase(it);
      if (held.empty()) held_.erase(*slot.job);
    }
  }
  counts_.free = counts_.total - counts_.allocated;
}

const Worker* SlotManager::worker(const ResourceId& id) const {
  auto it = workers_.find(id);
  return it == workers_.end() ? nullptr : &it->second;
}

Slot* SlotManager::findSlot(const ResourceId& worker, uint32_t index) {
  auto it = workers_.find(worker);
  if (it == workers_.end()) return nullptr;
  for (Slot& slot : it->second.slots) {
    if (slot.index == index) return &slot;
  }
  return nullptr;
}

void SlotManager::dropRegistration(std::map<ResourceId, Worker>::iterator it) {
  account(it->second, -1);
  auto offered = offeredProfiles_.find(it->second.registration.slotProfile);
  if (offered != offeredProfiles_.end() && --offered->second == 0) {
    offeredProfiles_.erase(offered);
  }
  auto sequence = sequenceOf_.find(it->first);
  if (sequence != sequenceOf_.end()) {
    order_.erase(sequence->second);
    sequenceOf_.erase(sequence);
  }
  workers_.erase(it);
  --counts_.workers;
  matchDue_ = true;  // Requirements its allocations served are unmet again.
}

RegistrationId SlotManager::registerWorker(const WorkerRegistration& registration, MonoTime now,
                                           int64_t nowMs) {
  auto existing = workers_.find(registration.resourceId);
  if (existing != workers_.end()) dropRegistration(existing);

  Worker worker;
  worker.registration = registration;
  worker.registrationId = RegistrationId::random();
  worker.registeredAtMs = nowMs;
  worker.lastHeartbeatAtMs = nowMs;
  worker.lastHeard = now;
  const RegistrationId id = worker.registrationId;
  workers_.emplace(registration.resourceId, std::move(worker));
  const uint64_t sequence = nextSequence_++;
  order_.emplace(sequence, registration.resourceId);
  sequenceOf_[registration.resourceId] = sequence;
  ++offeredProfiles_[registration.slotProfile];
  ++counts_.workers;
  return id;
}

SlotOutcome SlotManager::applyReport(const ResourceId& workerId,
                                     const RegistrationId& registrationId,
                                     const std::vector<ReportedSlot>& slots, MonoTime now,
                                     int64_t nowMs) {
  auto it = workers_.find(workerId);
  if (it == workers_.end()) {
    return notRegistered("resource id " + workerId.toHex() +
                         " is not registered with this ResourceManager; register again");
  }
  Worker& worker = it->second;
  if (worker.registrationId != registrationId) {
    return notRegistered("registration id " + registrationId.toHex() + " of resource id " +
                         workerId.toHex() + " is not its current registration; register again");
  }
  // Validate before touching anything: a malformed report leaves the table as it was.
  std::vector<bool> seen(worker.registration.numberOfSlots, false);
  for (size_t i = 0; i < slots.size(); ++i) {
    const uint32_t index = slots[i].index;
    const std::string field = "slots[" + std::to_string(i) + "].slotId.slotIndex";
    if (index >= worker.registration.numberOfSlots) {
      return invalidArgument(field, "slot index " + std::to_string(index) +
                                        " is not below the registered numberOfSlots " +
                                        std::to_string(worker.registration.numberOfSlots));
    }
    if (seen[index]) {
      return invalidArgument(field, "slot index " + std::to_string(index) + " is reported twice");
    }
    seen[index] = true;
  }

  std::vector<Slot> next;
  next.reserve(slots.size());
  for (const ReportedSlot& reported : slots) {
    Slot slot;
    slot.index = reported.index;
    slot.profile = reported.profile;
    slot.runningAttempts = reported.runningAttempts;
    if (reported.allocation) {
      slot.allocation = reported.allocation;
      slot.job = reported.job;
    } else {
      // A pending allocation the worker has not taken yet (requestSlot in flight) stays pending.
      auto previous =
          std::lower_bound(worker.slots.begin(), worker.slots.end(), reported.index,
                           [](const Slot& held, uint32_t index) { return held.index < index; });
      if (previous != worker.slots.end() && previous->index == reported.index &&
          previous->pending) {
        slot.allocation = previous->allocation;
        slot.job = previous->job;
        slot.pending = true;
      }
    }
    next.push_back(std::move(slot));
  }
  std::sort(next.begin(), next.end(),
            [](const Slot& a, const Slot& b) { return a.index < b.index; });
  worker.lastHeard = now;
  worker.lastHeartbeatAtMs = nowMs;
  if (worker.reported && sameAllocations(worker.slots, next)) {
    // The usual heartbeat: only the running attempts may differ; counts and holdings stand. A
    // slot a failed requestSlot set aside may be chosen again from now (Slot::avoid).
    const bool hadAvoided = std::any_of(worker.slots.begin(), worker.slots.end(),
                                        [](const Slot& slot) { return slot.avoid; });
    worker.slots = std::move(next);
    if (hadAvoided) {
      matchDue_ = true;
      indexFree(worker);
    }
    return {};
  }
  matchDue_ = true;
  account(worker, -1);
  worker.slots = std::move(next);
  worker.reported = true;
  account(worker, +1);
  return {};
}

bool SlotManager::removeWorker(const ResourceId& workerId) {
  auto it = workers_.find(workerId);
  if (it == workers_.end()) return false;
  dropRegistration(it);
  return true;
}

std::vector<ResourceId> SlotManager::expire(MonoTime now, Duration timeout) {
  std::vector<ResourceId> expired;
  for (const auto& [id, worker] : workers_) {
    if (now - worker.lastHeard > timeout) expired.push_back(id);
  }
  for (const ResourceId& id : expired) removeWorker(id);
  return expired;
}

void SlotManager::refreshAll(MonoTime now) {
  for (auto& [id, worker] : workers_) worker.lastHeard = now;
}

void SlotManager::registerJob(const JobId& job) { jobs_.try_emplace(job); }

bool SlotManager::jobRegistered(const JobId& job) const { return jobs_.count(job) != 0; }

SlotOutcome SlotManager::declare(const JobId& job, const std::vector<Requirement>& needs) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) {
    return notRegistered("the JobMaster of job " + job.toHex() +
                         " is not registered with this ResourceManager; register it first");
  }
  if (!workers_.empty() || providedProfile_) {
    for (size_t i = 0; i < needs.size(); ++i) {
      bool fits = providedProfile_ && providedProfile_->fits(needs[i].profile);
      for (const auto& [offered, workers] : offeredProfiles_) {
        if (fits) break;
        fits = offered.fits(needs[i].profile);
      }
      if (fits) continue;
      std::string offered;
      for (const auto& [profile, workers] : offeredProfiles_) {
        if (!offered.empty()) offered += ", ";
        offered += "(" + describe(profile) + ")";
      }
      const std::string field = "requirements[" + std::to_string(i) + "].profile";
      std::string message = "requirement " + std::to_string(i) + " (" +
                            describe(needs[i].profile) + ") fits no slot a registered worker offers";
      message += offered.empty() ? " (none is registered)" : " (" + offered + ")";
      if (providedProfile_) {
        message += " nor the slots of the workers the provider starts (" +
                   describe(*providedProfile_) + ": worker.slot-cpu, worker.slot-memory)";
      }
      return invalidArgument(field, message);
    }
  }
  it->second.needs = needs;
  matchDue_ = true;
  return {};
}

std::vector<SlotRelease> SlotManager::disconnectJob(const JobId& job) {
  std::vector<SlotRelease> releases;
  jobs_.erase(job);
  matchDue_ = true;
  if (held_.count(job) == 0) return releases;
  for (auto& [id, worker] : workers_) {
    bool holds = false;
    for (const Slot& slot : worker.slots) holds = holds || (slot.job && *slot.job == job);
    if (!holds) continue;
    account(worker, -1);
    for (Slot& slot : worker.slots) {
      if (!slot.job || *slot.job != job) continue;
      if (slot.allocation) releases.push_back(SlotRelease{id, *slot.allocation});
      slot.allocation.reset();
      slot.job.reset();
      slot.pending = false;
      slot.runningAttempts.clear();
    }
    account(worker, +1);
  }
  return releases;
}

std::vector<uint32_t> SlotManager::unmetPerRequirement(const JobId& job, const Job& state) const {
  std::vector<uint32_t> unmet;
  unmet.reserve(state.needs.size());
  HeldByProfile held;
  if (auto it = held_.find(job); it != held_.end()) held = it->second;
  for (const Requirement& need : state.needs) {
    uint32_t missing = need.count;
    // Smallest fitting profiles first (the map's order), so larger slots stay for larger needs.
    for (auto it = held.begin(); it != held.end() && missing > 0;) {
      if (!it->first.fits(need.profile)) {
        ++it;
        continue;
      }
      const uint32_t taken = std::min(missing, it->second);
      missing -= taken;
      it->second -= taken;
      it = it->second == 0 ? held.erase(it) : std::next(it);
    }
    unmet.push_back(missing);
  }
  return unmet;
}

bool SlotManager::setDraining(const ResourceId& worker, bool draining) {
  auto found = workers_.find(worker);
  if (found == workers_.end()) return false;
  found->second.draining = draining;
  if (!draining) matchDue_ = true;  // Its free slots count again.
  return true;
}

uint32_t SlotManager::unmetFitting(const Profile& offered) const {
  uint64_t sum = 0;
  for (const auto& [job, state] : jobs_) {
    const std::vector<uint32_t> missing = unmetPerRequirement(job, state);
    for (size_t i = 0; i < missing.size() && i < state.needs.size(); ++i) {
      if (offered.fits(state.needs[i].profile)) sum += missing[i];
    }
  }
  return static_cast<uint32_t>(std::min<uint64_t>(sum, UINT32_MAX));
}

uint32_t SlotManager::unmet(const JobId& job) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return 0;
  uint32_t sum = 0;
  for (uint32_t missing : unmetPerRequirement(job, it->second)) sum += missing;
  return sum;
}

std::vector<SlotRequest> SlotManager::match() {
  std::vector<SlotRequest> requests;
  if (!matchDue_) return requests;
  matchDue_ = false;
  for (const auto& [jobId, job] : jobs_) {
    if (counts_.free == 0) break;
    std::vector<uint32_t> unmet = unmetPerRequirement(jobId, job);
    for (size_t r = 0; r < job.needs.size() && counts_.free > 0; ++r) {
      uint32_t missing = unmet[r];
      if (missing == 0) continue;
      const Profile& required = job.needs[r].profile;
      // Only the workers with a slot to choose, in registration order. account() below takes
      // the worker out of the index and puts it back (or not): go on after its sequence.
      for (auto next = withFree_.begin(); next != withFree_.end() && missing > 0;) {
        const uint64_t sequence = *next;
        const ResourceId id = order_.at(sequence);
        Worker& worker = workers_.at(id);
        next = withFree_.upper_bound(sequence);  // Before account() changes the index.
        if (worker.draining) continue;
        bool anyFree = false;
        for (const Slot& slot : worker.slots) {
          if (!slot.allocation && !slot.avoid && slot.profile.fits(required)) {
            anyFree = true;
            break;
          }
        }
        if (!anyFree) continue;
        account(worker, -1);
        for (Slot& slot : worker.slots) {
          if (missing == 0) break;
          if (slot.allocation || slot.avoid || !slot.profile.fits(required)) continue;
          slot.allocation = AllocationId::random();
          slot.job = jobId;
          slot.pending = true;
          slot.runningAttempts.clear();
          requests.push_back(SlotRequest{id, slot.index, jobId, *slot.allocation, slot.profile});
          --missing;
        }
        account(worker, +1);
      }
    }
  }
  return requests;
}

void SlotManager::confirmed(const SlotRequest& request) {
  Slot* slot = findSlot(request.worker, request.slotIndex);
  if (slot == nullptr) return;  // Gone, or registered again and not reported yet.
  Worker& worker = workers_.at(request.worker);
  if (slot->allocation == request.allocation) {
    if (!slot->pending) return;
    account(worker, -1);
    slot->pending = false;
    account(worker, +1);
    return;
  }
  // The worker registered again meanwhile and reported the slot free before taking the
  // request: it holds the allocation now. Held by another allocation, or for a job gone since
  // (its freeSlot follows the request), the table stands until the next report.
  if (slot->allocation || jobs_.count(request.job) == 0) return;
  account(worker, -1);
  slot->allocation = request.allocation;
  slot->job = request.job;
  slot->pending = false;
  slot->avoid = false;
  slot->runningAttempts.clear();
  account(worker, +1);
  matchDue_ = true;
}

void SlotManager::requestFailed(const SlotRequest& request) {
  Slot* slot = findSlot(request.worker, request.slotIndex);
  // A report since then that lists the allocation (or another) overrides the failed request.
  if (slot == nullptr || slot->allocation != request.allocation || !slot->pending) return;
  Worker& worker = workers_.at(request.worker);
  account(worker, -1);
  slot->allocation.reset();
  slot->job.reset();
  slot->pending = false;
  slot->avoid = true;  // Until the worker's next report: another worker's slot may serve.
  account(worker, +1);
  matchDue_ = true;
}

bool SlotManager::slotFaulted(const ResourceId& worker, const AllocationId& allocation,
                              const JobId& job) {
  auto found = workers_.find(worker);
  if (found == workers_.end()) return false;
  Worker& state = found->second;
  auto slot = std::find_if(state.slots.begin(), state.slots.end(), [&](const Slot& candidate) {
    return candidate.allocation == allocation && candidate.job == job;
  });
  if (slot == state.slots.end()) return false;
  account(state, -1);
  slot->allocation.reset();
  slot->job.reset();
  slot->pending = false;
  slot->runningAttempts.clear();
  for (Slot& other : state.slots) {
    if (!other.allocation) other.avoid = true;
  }
  account(state, +1);
  matchDue_ = true;
  return true;
}

}  // namespace regent::resourcemanager

// The WorkerPool: the active ResourceManager's bookkeeping of the workers a resource provider
// starts (worker_provider.h): requested → pending registration → registered → releasing, with
// the cap (resourcemanager.workers.max), the floor (workers.min), the start and idle timeouts,
// and failed starts retried with backoff and stopped above the failure rate. Pure logic: no RPC,
// no timers, time comes in as arguments. The ResourceManager feeds it what happens (starts
// answered, registrations, slot tables) and carries out what plan() decides.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/backoff.h"
#include "common/ids.h"
#include "common/time.h"
#include "services/resourcemanager/resource_profile.h"
#include "services/resourcemanager/worker_provider.h"

namespace regent::resourcemanager {

struct WorkerPoolOptions {
  std::string provider;         // "process": the prefix of the workers' provider ids.
  uint32_t max = 10;            // resourcemanager.workers.max
  uint32_t min = 0;             // resourcemanager.workers.min
  uint32_t slotsPerWorker = 4;  // worker.slots of the workers it starts.
  Profile slotProfile;          // worker.slot-cpu / worker.slot-memory of those workers.
  Duration startTimeout{120000};
  Duration idleTimeout{30000};
  double maxFailuresPerMinute = 10;  // resourcemanager.workers.max-failure-rate
  Duration retryInitial{1000};       // The backoff after a failed start.
  Duration retryMax{60000};
};

enum class PooledPhase {
  kRequested,   // The provider is starting it (its start not answered yet).
  kPending,     // Started (or found by the provider after a failover), not registered yet.
  kRegistered,  // Registered with this leader under `resourceId`.
  kReleasing,   // Asked to stop; the provider reaps it.
};
const char* phaseName(PooledPhase phase);

struct PooledWorker {
  std::string id;  // The provider's worker id (without the "<provider>:" prefix).
  PooledPhase phase = PooledPhase::kRequested;
  MonoTime since{};  // When it entered `phase`.
  std::optional<ResourceId> resourceId;
  std::optional<MonoTime> idleSince;  // Registered with no allocated slot since.
  bool recovered = false;             // Started by an earlier leader, found in this term.
  bool everRegistered = false;        // Its start worked: an end later is no failed start.
};

// What plan() decided: workers to start (already counted as requested) and to release (already
// counted as releasing), each with why.
struct PoolDecisions {
  std::vector<std::string> start;
  struct Release {
    std::string id;
    std::optional<ResourceId> resourceId;  // Registered: ask it to stop over its connection.
    std::string reason;
    bool failedStart = false;  // The start timeout: counted as a failed start.
  };
  std::vector<Release> release;
};

struct PoolCounts {
  size_t requested = 0;
  size_t pending = 0;
  size_t registered = 0;
  size_t releasing = 0;
};

// Thread-safety: none (the loop thread owns it).
class WorkerPool final {
 public:
  // `epoch` names the workers this pool starts ("e<epoch>-<n>"), unique across terms.
  WorkerPool(WorkerPoolOptions options, uint64_t epoch, std::function<double()> jitter = nullptr);

  const WorkerPoolOptions& options() const { return options_; }

  // The provider listed what earlier leaders started (once per term, before plan() starts
  // anything: until then it starts nothing, so that a failover never doubles the workers).
  void listed(const std::vector<std::string>& ids, MonoTime now);
  bool hasListed() const { return listed_; }
  // The provider could not list its workers: plan() waits, and the reason says why.
  void listFailed(const std::string& error);

  // The provider answered a start.
  void started(const std::string& id, MonoTime now);
  void startFailed(const std::string& id, const std::string& error, MonoTime now);
  // A registration carried "<provider>:<id>" of this pool's provider: the worker is (or becomes)
  // this pool's, registered. False when `providerWorkerId` names another provider or none, or an
  // id another registered worker (another resource id) holds: that one is not the pool's.
  // `vouch` is the provider's word on the registering process (WorkerProvider::vouches): kNo is
  // refused; so is a resource id that already holds another id of the pool.
  bool registered(const std::string& providerWorkerId, const ResourceId& resourceId,
                  MonoTime now, Vouch vouch = Vouch::kUnknown);
  // The worker refused to stop (it is not idle after all): registered again, not releasing.
  void releaseCalledOff(const std::string& id, MonoTime now);
  // The worker's registration is gone (heartbeat timeout, replaced, disconnected): it may come
  // back, so it is pending again (the start timeout counts from now).
  void unregistered(const ResourceId& resourceId, MonoTime now);
  // The provider saw the worker's process or container end. A worker that had not registered
  // counts as a failed start (`reason` becomes the waiting reason).
  void ended(const std::string& id, const std::string& reason, MonoTime now);
  // The provider finished releasing it.
  void released(const std::string& id);

  // How the SlotManager sees a registered worker.
  struct SlotView {
    bool reported = false;  // Its slots are in the table (matched from now on).
    bool idle = false;      // Reported, and no slot allocated.
  };
  // What to start and release now. `unmetSlots`: slots of requirements that fit the provider's
  // slot profile and that no registered worker serves. A registered worker whose slots are not
  // reported yet still counts as coming, like a pending one.
  PoolDecisions plan(uint32_t unmetSlots,
                     const std::function<SlotView(const ResourceId&)>& view, MonoTime now);

  // Why jobs wait for workers ("waiting for a worker to start: 2 requested, 1 pending
  // registration", or the provider's last error when starts fail), or "" when nothing is being
  // started.
  std::string waitingReason(MonoTime now) const;
  // The earliest time after `now` at which plan() may decide something new (a start or idle
  // timeout, the backoff ending, a failure leaving the last minute), if any.
  std::optional<MonoTime> nextDeadline(MonoTime now) const;

  PoolCounts counts() const;
  const std::map<std::string, PooledWorker>& workers() const { return workers_; }
  const PooledWorker* byResourceId(const ResourceId& resourceId) const;
  // The provider id a worker of this pool registers with: "<provider>:<id>".
  std::string providerWorkerId(const std::string& id) const;
  uint64_t startFailures() const { return startFailures_; }
  uint64_t releasedTotal() const { return releasedTotal_; }

 private:
  void failedStart(const std::string& error, MonoTime now);
  size_t failuresInLastMinute(MonoTime now) const;
  void enter(PooledWorker& worker, PooledPhase phase, MonoTime now);

  const WorkerPoolOptions options_;
  const uint64_t epoch_;
  uint64_t nextId_ = 1;
  bool listed_ = false;
  std::string listError_;
  std::map<std::string, PooledWorker> workers_;
  std::deque<MonoTime> failures_;  // Failed starts within the last minute.
  std::string lastError_;
  ExponentialBackoff backoff_;
  std::optional<MonoTime> retryAt_;  // No start before this (after a failed start).
  uint64_t startFailures_ = 0;
  uint64_t releasedTotal_ = 0;
};

}  // namespace regent::resourcemanager

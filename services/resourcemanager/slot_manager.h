// The SlotManager: the leader's table of registered workers and their slots (free, or allocated
// to a job under an allocation id), built from registrations and slot reports alone, and the
// matching of JobMasters' declared requirements to free slots. Pure logic: no RPC, no timers.
// The ResourceManager (resource_manager.h) feeds it what arrives and carries out what it decides.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/result.h"
#include "common/time.h"
#include "services/resourcemanager/resource_profile.h"

namespace regent::resourcemanager {

// One slot as the SlotManager holds it.
struct Slot {
  uint32_t index = 0;
  Profile profile;
  // Free when unset. Set by a report, or by match() (then `pending` until the worker confirms).
  std::optional<AllocationId> allocation;
  std::optional<JobId> job;
  std::vector<AttemptId> runningAttempts;  // As last reported.
  // Allocated by match(); requestSlot not yet answered by the worker.
  bool pending = false;
  // requestSlot for this slot failed: match() does not choose it again until the worker's next
  // report (or heartbeat) rebuilds its slots, so a refusal is not repeated at once.
  bool avoid = false;
};

// What a worker said about itself in registerTaskExecutor (wire::TaskExecutorRegistration).
struct WorkerRegistration {
  ResourceId resourceId;
  std::string host;
  std::string dataAddress;
  std::string httpAddress;
  std::string version;
  uint32_t pid = 0;
  int64_t startedAtMs = 0;
  std::string containment;  // How it contains tasks; empty from an older worker.
  std::string providerWorkerId;  // "<provider>:<id>" of a started worker; empty: by hand.
  uint32_t numberOfSlots = 0;
  Profile slotProfile;
  Profile totalProfile;
};

// One registered worker.
struct Worker {
  WorkerRegistration registration;
  RegistrationId registrationId;
  int64_t registeredAtMs = 0;     // Unix ms, for people.
  int64_t lastHeartbeatAtMs = 0;  // Unix ms of the last heartbeat or report; for people.
  MonoTime lastHeard;             // For the heartbeat timeout.
  bool reported = false;          // A slot report arrived for this registration.
  // Being released (a started worker asked to stop): match() allocates none of its slots.
  bool draining = false;
  std::vector<Slot> slots;        // One per index; empty until the first report.
};

// One slot a worker reports (wire::SlotStatus).
struct ReportedSlot {
  uint32_t index = 0;
  Profile profile;
  std::optional<AllocationId> allocation;
  std::optional<JobId> job;
  std::vector<AttemptId> runningAttempts;
};

// A slot match() allocated: the ResourceManager calls requestSlot on the worker with it, then
// tells the SlotManager the outcome (confirmed / requestFailed).
struct SlotRequest {
  ResourceId worker;
  uint32_t slotIndex = 0;
  JobId job;
  AllocationId allocation;
  Profile profile;  // The slot's profile (what requestSlot carries).
};

// An allocation to release on a worker (freeSlot), e.g. after disconnectJob.
struct SlotRelease {
  ResourceId worker;
  AllocationId allocation;
};

struct SlotCounts {
  size_t workers = 0;   // Registered (reported or not).
  size_t reported = 0;  // Registered and reported at least once.
  size_t total = 0;     // Slots of reported workers.
  size_t free = 0;
  size_t allocated = 0;  // Includes pending.
  size_t pending = 0;
};

// Why a registration was refused or a call names an unknown caller.
enum class SlotError {
  kNotRegistered,    // Unknown resource id, or a registration id that is not the current one.
  kInvalidArgument,  // A requirement no registered worker can fit; a malformed report.
};
struct SlotFailure {
  SlotError error;
  std::string message;  // One line naming what is wrong (without the field's path).
  std::string field;    // kInvalidArgument: the offending field ("requirements[1].profile").
};
// Accepted, or the SlotFailure saying why not.
using SlotOutcome = Result<void, SlotFailure>;

// Thread-safety: none (the loop thread owns it). Time comes in as arguments.
class SlotManager final {
 public:
  // Adds or replaces the worker `registration.resourceId` with a fresh registration id; a
  // replaced worker's slots are dropped until the new registration reports (the report is the
  // truth). Whether a second live worker may claim the id is the ResourceManager's decision,
  // made before this is called.
  RegistrationId registerWorker(const WorkerRegistration& registration, MonoTime now,
                                int64_t nowMs);

  // The worker's slots become exactly `slots` ("the report wins"): allocations it lists are
  // kept under their ids (after a failover this rebuilds the table), slots it lists free are
  // free (a pending allocation the worker does not list yet stays pending). Counts as a
  // heartbeat. kNotRegistered unless `registrationId` is the worker's current one;
  // kInvalidArgument when an index repeats or is >= numberOfSlots.
  SlotOutcome applyReport(const ResourceId& worker, const RegistrationId& registrationId,
                          const std::vector<ReportedSlot>& slots, MonoTime now, int64_t nowMs);

  // Removes the worker and its slots; false when unknown. Requirements its allocations served
  // become unmet again (the next match() may allocate elsewhere).
  bool removeWorker(const ResourceId& worker);
  // Workers not heard of for longer than `timeout` at `now`, removed; in no particular order.
  std::vector<ResourceId> expire(MonoTime now, Duration timeout);
  // Every worker counts as heard at `now` (the caller's own rounds were late: a paused process).
  void refreshAll(MonoTime now);

  // JobMasters.
  void registerJob(const JobId& job);
  bool jobRegistered(const JobId& job) const;
  // Replaces the job's requirements. kNotRegistered if the job is not registered;
  // kInvalidArgument when at least one worker is registered (or a provider starts workers) and
  // neither a registered worker nor the provided profile offers a slot profile that fits a
  // requirement (named by its index; the message names the required profile and the offered
  // ones). With no worker registered and no provider a requirement waits: it is served by the
  // first worker that registers and reports fitting free slots, and is not checked again then.
  SlotOutcome declare(const JobId& job, const std::vector<Requirement>& needs);
  // Drops the job's requirements and its registration; returns its allocations to free.
  std::vector<SlotRelease> disconnectJob(const JobId& job);

  // Allocates free slots of reported workers to unmet requirements (first fit, workers in
  // registration order) and marks them pending. The caller sends requestSlot for each.
  // A job's held slots (allocated or pending, wherever they came from: match() or a report)
  // count toward its requirements greedily, requirements in declaration order, each slot once
  // and only toward a requirement its profile fits. Returns at once when nothing that could
  // change its outcome happened since the last call (a heartbeat that repeats the table changes
  // nothing), so the ResourceManager runs it after every report. It looks only at the workers
  // that have a slot it may choose (an index kept by account()), so workers whose slots are all
  // taken cost nothing however many there are.
  std::vector<SlotRequest> match();
  // The worker accepted requestSlot: the slot is allocated for good. When the worker registered
  // again meanwhile and its report listed the slot free, the slot (free in the current
  // registration, its job still registered) is allocated to the request: the worker holds it.
  void confirmed(const SlotRequest& request);
  // requestSlot failed: the slot is free again unless a report since says otherwise, but not
  // chosen by match() until the worker's next report (Slot::avoid); the requirement is unmet
  // again and may be matched on another worker's free slot at once.
  void requestFailed(const SlotRequest& request);
  // `worker` could not start an attempt of `job` in the slot of `allocation` (a worker fault):
  // the slot is free in the table (its job lets it go; the caller frees it on the worker), and
  // neither it nor any other free slot of the worker is chosen by match() until the worker's
  // next report (Slot::avoid), so the job's requirement goes to another worker when one has a
  // fitting free slot, and back to this one only after it reported again. False (nothing
  // changed) when the worker's table holds no such allocation for the job.
  bool slotFaulted(const ResourceId& worker, const AllocationId& allocation, const JobId& job);

  // A worker being released gets no new allocation from match() (`draining`), until it is
  // removed or the release is called off. False when `worker` is not registered.
  bool setDraining(const ResourceId& worker, bool draining);

  // Reads.
  const std::map<ResourceId, Worker>& workers() const { return workers_; }
  const Worker* worker(const ResourceId& id) const;
  SlotCounts counts() const { return counts_; }
  // Slots the job still needs beyond what it holds or has pending, summed over requirements.
  uint32_t unmet(const JobId& job) const;
  // unmet() over every job, counting only the requirements a slot of `offered` fits: what
  // workers started with that slot profile would serve.
  uint32_t unmetFitting(const Profile& offered) const;

  // The slot profile of the workers a resource provider starts (resourcemanager.provider), or
  // none: declare() also accepts a requirement that profile fits, and with no worker registered
  // refuses one it does not fit.
  void setProvidedProfile(std::optional<Profile> profile) { providedProfile_ = profile; }

 private:
  struct Job {
    std::vector<Requirement> needs;
  };
  // Held slots of one job by profile (allocated or pending), for the requirement accounting.
  using HeldByProfile = std::map<Profile, uint32_t>;

  // Adds (sign +1) or takes away (-1) `worker`'s slots in the counts and the per-job holdings;
  // every change to a worker's slots is bracketed by account(-1) ... account(+1).
  void account(const Worker& worker, int sign);
  // Puts `worker` into withFree_ when it reported and has a free slot not set aside, else takes
  // it out.
  void indexFree(const Worker& worker);
  // The unmet count of each of `job`'s requirements, given the slots it holds.
  std::vector<uint32_t> unmetPerRequirement(const JobId& job, const Job& state) const;
  Slot* findSlot(const ResourceId& worker, uint32_t index);
  void dropRegistration(std::map<ResourceId, Worker>::iterator it);

  std::map<ResourceId, Worker> workers_;
  // Registration order: sequence number -> worker, and each worker's sequence number.
  std::map<uint64_t, ResourceId> order_;
  std::map<ResourceId, uint64_t> sequenceOf_;
  // The sequences of the reported workers with a slot match() may choose (free, not set aside),
  // kept by account() and indexFree(): what match() scans, in registration order.
  std::set<uint64_t> withFree_;
  uint64_t nextSequence_ = 0;
  // Slot profiles registered workers offer, with the number of workers offering each.
  std::map<Profile, size_t> offeredProfiles_;
  std::map<JobId, Job> jobs_;
  std::map<JobId, HeldByProfile> held_;
  SlotCounts counts_;  // `workers` kept by registerWorker / dropRegistration, the rest by account.
  std::optional<Profile> providedProfile_;
  // Something match() depends on changed since it last ran (slots, holdings, requirements).
  bool matchDue_ = false;
};

}  // namespace regent::resourcemanager

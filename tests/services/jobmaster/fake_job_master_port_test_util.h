// A fake ResourceManager as JobMasters reach it (resourcemanager::JobMasterPort): records
// registrations, declarations and disconnections, answers workerAddress / slotCounts /
// holdsAllocation / hasReported from what the test sets, and holds the JobMasters' worker
// listener for the test to call.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "services/resourcemanager/job_master_port.h"

namespace regent::jobmaster::testing {

class FakeJobMasterPort final : public resourcemanager::JobMasterPort {
 public:
  void registerJobMaster(const JobId& job) override { registered.push_back(job); }
  resourcemanager::SlotOutcome declareRequiredResources(
      const JobId& job, const std::vector<resourcemanager::Requirement>& needs) override {
    declarations[job].push_back(needs);
    if (refuseDeclarations > 0) {
      --refuseDeclarations;
      return resourcemanager::SlotFailure{resourcemanager::SlotError::kInvalidArgument,
                                          "no registered worker offers a slot that fits",
                                          "requirements[0].profile"};
    }
    return {};
  }
  void disconnectJobMaster(const JobId& job, const std::string& cause) override {
    disconnected.emplace_back(job, cause);
  }
  void slotFaulted(const JobId& job, const ResourceId& worker, const AllocationId& allocation,
                   const std::string& cause) override {
    faulted.push_back(Faulted{job, worker, allocation, cause});
  }
  std::optional<resourcemanager::WorkerAddress> workerAddress(
      const ResourceId& worker) const override {
    auto found = workers.find(worker);
    if (found == workers.end()) return std::nullopt;
    return found->second;
  }
  resourcemanager::SlotCounts slotCounts() const override { return counts; }
  // A worker holds the allocations `allocations` names for it (any job) and, unless
  // `strictAllocations`, every allocation: most tests offer what they like.
  bool holdsAllocation(const ResourceId& worker, const AllocationId& allocation,
                       const JobId&) const override {
    if (!strictAllocations) return true;
    auto found = allocations.find(worker);
    return found != allocations.end() && found->second.count(allocation) != 0;
  }
  resourcemanager::WorkerIdentityRefusals& identityRefusals() override { return refusals; }
  // A registration is current unless `replaced` names it.
  bool isCurrent(const resourcemanager::WorkerIdentity& identity) const override {
    return replaced.count(identity.registrationId) == 0;
  }

  // A worker has reported when `reported` names it.
  bool hasReported(const ResourceId& worker) const override { return reported.count(worker) != 0; }
  void setWorkerListener(resourcemanager::WorkerListener* set) override { listener = set; }

  // The next this many declarations are refused (invalidArgument), as when no registered worker
  // fits yet.
  int refuseDeclarations = 0;

  // The job's latest declaration as (cpuMillis, count) pairs; empty when none was made.
  std::vector<std::pair<uint32_t, uint32_t>> latest(const JobId& job) const {
    std::vector<std::pair<uint32_t, uint32_t>> out;
    auto found = declarations.find(job);
    if (found == declarations.end() || found->second.empty()) return out;
    for (const auto& need : found->second.back())
      out.emplace_back(need.profile.cpuMillis, need.count);
    return out;
  }

  std::vector<JobId> registered;
  std::map<JobId, std::vector<std::vector<resourcemanager::Requirement>>> declarations;
  std::vector<std::pair<JobId, std::string>> disconnected;
  struct Faulted {
    JobId job;
    ResourceId worker;
    AllocationId allocation;
    std::string cause;
  };
  std::vector<Faulted> faulted;
  std::map<ResourceId, resourcemanager::WorkerAddress> workers;
  resourcemanager::SlotCounts counts;
  bool strictAllocations = false;
  std::map<ResourceId, std::set<AllocationId>> allocations;
  std::set<RegistrationId> replaced;
  std::set<ResourceId> reported;
  // The JobMasters' listener while they live: a test tells them of restarts and reports.
  resourcemanager::WorkerListener* listener = nullptr;
  resourcemanager::WorkerIdentityRefusals refusals;
};

}  // namespace regent::jobmaster::testing

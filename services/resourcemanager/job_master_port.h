// The ResourceManager as the term's JobMasters reach it: in process, the same operations the
// ResourceManagerGateway's JobMaster methods carry (registerJobMaster, declareRequiredResources,
// disconnectJobMaster), plus the registered workers' addresses for job status. The
// ResourceManager implements it; JobMaster unit tests use a fake.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/ids.h"
#include "rpc/schema/gateways.capnp.h"
#include "services/resourcemanager/slot_manager.h"

namespace regent::resourcemanager {

// A registered worker as a JobMaster shows it (jobs status, jobs logs).
struct WorkerAddress {
  std::string host;
  std::string httpAddress;
};

// Loop-thread only. Matching and the requestSlot calls it causes run after the call returns
// (never inside it), so a JobMaster may call these from its own handlers.
class JobMasterPort {
 public:
  virtual ~JobMasterPort() = default;
  // Registers (or registers again) `job`'s JobMaster; `gateway` is what workers' offers reach.
  virtual void registerJobMaster(const JobId& job, wire::JobMasterGateway::Client gateway) = 0;
  // Replaces the job's requirements (SlotManager::declare): nullopt when accepted, else why not
  // (kNotRegistered, or kInvalidArgument naming the requirement no registered worker fits).
  virtual std::optional<SlotFailure> declareRequiredResources(
      const JobId& job, const std::vector<Requirement>& needs) = 0;
  // Drops the job's requirements and registration, and frees what it still holds on workers
  // (freeSlot, best effort). Unknown jobs: nothing.
  virtual void disconnectJobMaster(const JobId& job, const std::string& cause) = 0;
  // The registered worker `worker`, or nullopt (not registered in this term).
  virtual std::optional<WorkerAddress> workerAddress(const ResourceId& worker) const = 0;
  // Slot counts, for the "waiting for slots" reason.
  virtual SlotCounts slotCounts() const = 0;
};

}  // namespace regent::resourcemanager

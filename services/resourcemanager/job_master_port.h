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
#include "services/resourcemanager/worker_binding.h"

namespace regent::resourcemanager {

// A registered worker as a JobMaster shows it (jobs status, jobs logs).
struct WorkerAddress {
  std::string host;
  std::string httpAddress;
};

// What the ResourceManager tells the term's JobMasters about workers as it learns it, so that a
// worker's attempts are accounted for at once instead of at a timeout (docs/workers.md, "A worker
// that dies"). Loop-thread only; called from the ResourceManager's handlers, so a listener
// must not call back into the ResourceManager's registration of workers from inside.
class WorkerListener {
 public:
  virtual ~WorkerListener() = default;
  // A registration of `worker` replaced one from another process (another pid or start time on
  // its host: the worker was restarted, on the same data directory). The previous process and
  // every attempt it ran are gone. `message` names the worker and says it restarted. Called
  // before the new registration's first slot report; not called when the same process registers
  // again (a lost connection: its tasks keep running).
  virtual void workerRestarted(const ResourceId& worker, const std::string& message) = 0;
  // The current registration of `worker` sent its first slot report: holdsAllocation() answers
  // from the worker's own word from now on.
  virtual void workerReported(const ResourceId& worker) = 0;
};

// Loop-thread only. Matching and the requestSlot calls it causes run after the call returns
// (never inside it), so a JobMaster may call these from its own handlers. As a WorkerRegistry it
// says whether a connection's registration is current: the gate of each JobMaster's gateway
// (guardWorkerCalls) asks it.
class JobMasterPort : public WorkerRegistry {
 public:
  ~JobMasterPort() override = default;
  // Registers (or registers again) `job`'s JobMaster: its requirements may be declared from now
  // on. (Workers reach the JobMaster through MasterBootstrap.jobMaster, not through this.)
  virtual void registerJobMaster(const JobId& job) = 0;
  // Replaces the job's requirements (SlotManager::declare): ok when accepted, else why not
  // (kNotRegistered, or kInvalidArgument naming the requirement no registered worker fits).
  virtual SlotOutcome declareRequiredResources(const JobId& job,
                                               const std::vector<Requirement>& needs) = 0;
  // Drops the job's requirements and registration, and frees what it still holds on workers
  // (freeSlot, best effort). Unknown jobs: nothing.
  virtual void disconnectJobMaster(const JobId& job, const std::string& cause) = 0;
  // `worker` could not start an attempt of `job` in the slot of `allocation` (a worker fault,
  // docs/jobgraph.md "Worker faults"): the slot is freed on the worker with `cause`, and the
  // job's requirement is matched on another worker's slot when one is free
  // (SlotManager::slotFaulted). Unknown allocations: nothing.
  virtual void slotFaulted(const JobId& job, const ResourceId& worker,
                           const AllocationId& allocation, const std::string& cause) = 0;
  // The registered worker `worker`, or nullopt (not registered in this term).
  virtual std::optional<WorkerAddress> workerAddress(const ResourceId& worker) const = 0;
  // Slot counts, for the "waiting for slots" reason.
  virtual SlotCounts slotCounts() const = 0;
  // What the resource provider is doing about the slots jobs wait for ("waiting for a worker to
  // start: 2 requested, 1 pending registration", or its last error), or "" (no provider, or
  // nothing being started). Appended to a waiting job's reason.
  virtual std::string workerSupplyReason() const { return {}; }
  // Whether `worker`'s slot table (its latest report, or a slot allocated to it and pending)
  // holds `allocation` for `job`: a worker offers only slots it holds.
  virtual bool holdsAllocation(const ResourceId& worker, const AllocationId& allocation,
                               const JobId& job) const = 0;
  // Where the JobMasters count and log the worker calls they refuse (worker_binding.h).
  virtual WorkerIdentityRefusals& identityRefusals() = 0;
  // Whether the current registration of `worker` sent a slot report (false when `worker` is not
  // registered in this term): then holdsAllocation() says what the worker itself holds.
  virtual bool hasReported(const ResourceId& worker) const = 0;
  // The one listener told of workers' restarts and reports (the term's JobMasters), or nullptr
  // for none. It must stay valid until replaced.
  virtual void setWorkerListener(WorkerListener* listener) = 0;
};

}  // namespace regent::resourcemanager

// The snapshots of the cluster view (see cluster_view.h).
#include "services/master/cluster_view.h"

#include <algorithm>

#include "rpc/wire_ids.h"

namespace regent::master {

bool WorkersSnapshot::slotPending(const ResourceId& worker, uint32_t index) const {
  return std::find(pendingSlots.begin(), pendingSlots.end(), std::make_pair(worker, index)) !=
         pendingSlots.end();
}

JobsSnapshot jobsSnapshot(const dispatcher::Dispatcher& from) {
  JobsSnapshot snapshot{.message = kj::heap<capnp::MallocMessageBuilder>()};
  auto jobs = snapshot.message->getRoot<capnp::AnyPointer>().initAs<capnp::List<wire::JobStatus>>(
      static_cast<uint32_t>(from.jobCount()));
  uint32_t i = 0;
  from.forEachJob([&](const dispatcher::JobView& job) { dispatcher::toWire(job, jobs[i++]); });
  snapshot.jobs = jobs.asReader();
  return snapshot;
}

std::optional<JobDetailSnapshot> jobDetailSnapshot(const dispatcher::Dispatcher& from,
                                                   const JobId& id) {
  KJ_IF_MAYBE (view, from.job(id)) {
    JobDetailSnapshot snapshot{.message = kj::heap<capnp::MallocMessageBuilder>()};
    auto status = snapshot.message->initRoot<wire::JobStatus>();
    dispatcher::toWire(*view, status, dispatcher::JobDetail::kSubtasks);
    snapshot.status = status.asReader();
    return snapshot;
  }
  return std::nullopt;
}

WorkersSnapshot workersSnapshot(const dispatcher::TaskExecutorView& taskExecutors) {
  WorkersSnapshot snapshot{.counts = taskExecutors.counts(),
                           .message = kj::heap<capnp::MallocMessageBuilder>()};
  auto root = snapshot.message->getRoot<capnp::AnyPointer>();
  root.adopt(taskExecutors.list(snapshot.message->getOrphanage()));
  snapshot.workers = root.getAs<capnp::List<wire::TaskExecutorInfo>>().asReader();
  for (auto info : snapshot.workers) {
    const auto id = wire::idFromWire<ResourceId>(info.getRegistration().getResourceId());
    for (auto slot : info.getSlots()) {
      const uint32_t index = slot.getSlotId().getSlotIndex();
      if (taskExecutors.slotPending(id, index)) snapshot.pendingSlots.emplace_back(id, index);
    }
  }
  return snapshot;
}

}  // namespace regent::master

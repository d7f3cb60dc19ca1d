// The JSON shape of a worker and its slots (see task_executor_json.h).
#include "rpc/task_executor_json.h"

#include <string_view>

#include "common/ids.h"
#include "common/utf8.h"
#include "rpc/wire_ids.h"

namespace regent::wire {
namespace {

std::string text(capnp::Text::Reader value) {
  return sanitizeUtf8(std::string_view(value.begin(), value.size()));
}

template <typename Id>
nlohmann::json idOrNull(bool has, wire::Id128::Reader id) {
  const auto typed = wire::idFromWireIfSet<Id>(has, id);
  if (!typed) return nullptr;
  return typed->toHex();
}

}  // namespace

std::string slotState(wire::SlotStatus::Reader slot, bool pending) {
  if (!wire::idFromWireIfSet<AllocationId>(slot.hasAllocationId(), slot.getAllocationId())) {
    return "FREE";
  }
  return pending ? "PENDING" : "ALLOCATED";
}

nlohmann::json slotJson(wire::SlotStatus::Reader slot, bool pending) {
  return {
      {"index", slot.getSlotId().getSlotIndex()},
      {"cpu_millis", slot.getProfile().getCpuMillis()},
      {"memory_bytes", slot.getProfile().getMemoryBytes()},
      {"state", slotState(slot, pending)},
      {"job_id", idOrNull<JobId>(slot.hasJobId(), slot.getJobId())},
      {"allocation_id", idOrNull<AllocationId>(slot.hasAllocationId(), slot.getAllocationId())}};
}

nlohmann::json taskExecutorJson(wire::TaskExecutorInfo::Reader info, const SlotPending& pending) {
  auto registration = info.getRegistration();
  nlohmann::json slots = nlohmann::json::array();
  for (auto slot : info.getSlots()) {
    const bool isPending = pending && pending(slot.getSlotId().getSlotIndex());
    slots.push_back(slotJson(slot, isPending));
  }
  return {{"resource_id", wire::idFromWire<ResourceId>(registration.getResourceId()).toHex()},
          {"host", text(registration.getHost())},
          {"pid", registration.getPid()},
          {"data_address", text(registration.getDataAddress())},
          {"http_address", text(registration.getHttpAddress())},
          {"containment", text(registration.getContainment())},
          {"provider_worker_id", registration.getProviderWorkerId().size() == 0
                                     ? nlohmann::json(nullptr)
                                     : nlohmann::json(text(registration.getProviderWorkerId()))},
          {"registered_at_ms", info.getRegisteredAtMs()},
          {"last_heartbeat_ms", info.getLastHeartbeatAtMs()},
          {"slots", slots}};
}

}  // namespace regent::wire

// The JSON shape of a registered worker and its slots, one format for /v1/workers and for
// `regentctl workers --json` / `regentctl slots --json` (docs/operations.md).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "rpc/schema/cluster.capnp.h"

namespace regent::wire {

// Whether the leader still waits for the worker to confirm the allocation of slot `index`: the
// wire's SlotStatus does not carry it, so only an in-process reader (/v1/workers) can tell.
using SlotPending = std::function<bool(uint32_t index)>;

// "FREE", "ALLOCATED" (an allocation id is set) or "PENDING" (allocated, `pending`).
std::string slotState(wire::SlotStatus::Reader slot, bool pending);

// {"index","cpu_millis","memory_bytes","state","job_id","allocation_id"}; the ids are hex, or
// null for a free slot.
nlohmann::json slotJson(wire::SlotStatus::Reader slot, bool pending);

// {"resource_id","host","pid","data_address","http_address","registered_at_ms",
// "last_heartbeat_ms","slots":[slotJson...]}. Text from the worker is sanitized to valid UTF-8.
// Without `pending` no slot is PENDING.
nlohmann::json taskExecutorJson(wire::TaskExecutorInfo::Reader info,
                                const SlotPending& pending = {});

}  // namespace regent::wire

// The TaskExecutorGateway a worker hands to the leader (docs/wire.md): one fenced endpoint behind
// the worker's epoch gate, whose refusals it logs, with handlers that forward each call to the
// TaskExecutor. Internal to services/taskexecutor/.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "rpc/fenced_endpoint.h"
#include "rpc/revocable.h"
#include "rpc/schema/gateways.capnp.h"
#include "services/taskexecutor/task_runner.h"

namespace regent {
class EventSink;
}

namespace regent::taskexecutor {

class TaskExecutor;

// What may outlive the TaskExecutor shares with it: the epoch gate and the fencing counters (the
// master may hold, and call, the gateway after the TaskExecutor is gone; so may the runner's
// update callbacks), and the link back to it (rpc/revocable.h), cut when it is destroyed.
// Loop-thread only.
class GatewayShared final {
 public:
  using OwnerLink = rpc::Revocable<TaskExecutor>::Link;
  // `events` must outlive every holder (the process's sinks outlive its loop). The gate's rises
  // go to the owner's onEpochRaised() while the link stands.
  GatewayShared(OwnerLink owner, EventSink& events, std::string resourceId);

  // The link to the TaskExecutor: get() throws DISCONNECTED once it is gone, tryGet() is null.
  const OwnerLink& owner() const { return owner_; }

  rpc::HighestSeenEpoch& gate() { return gate_; }
  const rpc::HighestSeenEpoch& gate() const { return gate_; }
  rpc::FencingCounters& fencing() { return fencing_; }
  const rpc::FencingCounters& fencing() const { return fencing_; }
  // Logs a refusal of the gate ("epoch gate refused": the first ten, then one in a hundred).
  void logRefusal(const std::string& method, uint64_t received);
  // Logs a call the gate admitted that acts on slots or tasks ("call admitted"; heartbeats never),
  // with the epoch it carried: the first of each epoch, and every one below the highest epoch seen.
  void logAdmitted(const std::string& method, uint64_t epoch);

 private:
  const OwnerLink owner_;
  EventSink& events_;
  const std::string resourceId_;
  rpc::HighestSeenEpoch gate_;
  rpc::FencingCounters fencing_;
  uint64_t refusalsLogged_ = 0;
  uint64_t lastAdmittedEpoch_ = 0;  // Of the last "call admitted" line.
};

// The gateway of `shared`'s owner: a call below the gate's highest epoch is refused (fencing
// {expected = highest, received}) and counted before any handler runs; a call once the owner is
// gone fails DISCONNECTED.
wire::TaskExecutorGateway::Client serveTaskExecutorGateway(std::shared_ptr<GatewayShared> shared);

// A TaskRunner callback handing each update to the owner's onTaskUpdate(), and dropping it once
// the owner is gone.
TaskRunner::OnUpdate forwardTaskUpdates(std::shared_ptr<GatewayShared> shared);

}  // namespace regent::taskexecutor

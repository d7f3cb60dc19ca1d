// HeartbeatMonitor (heartbeat_monitor.h): the rounds and the calls on followed workers.
#include "services/resourcemanager/heartbeat_monitor.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "rpc/call_deadline.h"
#include "rpc/wire_ids.h"

namespace regent::resourcemanager {

namespace {

// The first segment of a small call to a worker (heartbeat, disconnect): a few dozen words with
// the RPC header. Without a hint every message gets an 8 KiB first segment, and a round builds
// one per worker at once (40 MB for 5,000 workers, kept by the heap afterwards).
constexpr capnp::MessageSize kSmallRequest{64, 0};

}  // namespace

HeartbeatMonitor::HeartbeatMonitor(kj::Timer& timer, uint64_t epoch, std::optional<JobId> jobMaster,
                                   std::string name, HeartbeatOptions options,
                                   HeartbeatTargets& targets)
    : timer_(timer),
      epoch_(epoch),
      jobMaster_(jobMaster),
      name_(std::move(name)),
      options_(options),
      targets_(targets),
      errorLogger_(name_) {}

void HeartbeatMonitor::start(MonoTime now, bool untilIdle) {
  untilIdle_ = untilIdle;
  if (untilIdle) {
    idle_ = true;
    return;
  }
  rounds_.start(now);
  tasks_.add(loop());
}

void HeartbeatMonitor::wake(MonoTime now) {
  if (!idle_) return;
  idle_ = false;
  rounds_.start(now);
  tasks_.add(loop());
}

kj::Promise<void> HeartbeatMonitor::loop() {
  return timer_.afterDelay(options_.interval.count() * kj::MILLISECONDS)
      .then([this]() -> kj::Promise<void> {
        if (!round() && untilIdle_) {
          idle_ = true;
          return kj::READY_NOW;
        }
        return loop();
      });
}

bool HeartbeatMonitor::round() {
  const MonoTime now = regent::monoNow(timer_);
  if (rounds_.lateRound(now, options_.timeout)) {
    spdlog::warn(
        "{}: heartbeat rounds were late by {} ms (paused?); not counting it as silence "
        "of the workers it follows",
        name_, (rounds_.lastGap() - options_.interval).count());
    targets_.refreshAll(now);
  }
  targets_.expire(now, options_.timeout);
  if (nextDue_ < due_.size()) {
    spdlog::debug("{}: the previous heartbeat round goes on ({} workers still to heartbeat)", name_,
                  due_.size() - nextDue_);
    return true;
  }
  due_.clear();
  nextDue_ = 0;
  targets_.forEachGateway(
      [this](const ResourceId& id, wire::TaskExecutorGateway::Client&) { due_.push_back(id); });
  sendDue();
  return !due_.empty();
}

void HeartbeatMonitor::sendDue() {
  while (inFlight_ < kHeartbeatsInFlight && nextDue_ < due_.size()) {
    const ResourceId worker = due_[nextDue_++];
    KJ_IF_MAYBE (client, targets_.gatewayOf(worker)) {
      auto request = client->heartbeatRequest(kSmallRequest);
      address(request);
      ++inFlight_;
      tasks_.add(rpc::withDeadline(timer_, roundCallTimeout(), "TaskExecutorGateway.heartbeat",
                                   request.send())
                     .then(
                         [this, worker](auto response) {
                           if (response.hasFailure()) {
                             spdlog::debug("heartbeat to worker {} answered: {}", worker.toHex(),
                                           response.getFailure().getMessage().cStr());
                           }
                           heartbeatEnded();
                         },
                         [this, worker](kj::Exception&& exception) {
                           spdlog::debug("heartbeat to worker {} failed: {}", worker.toHex(),
                                         exception.getDescription().cStr());
                           heartbeatEnded();
                         }));
    }
  }
  if (nextDue_ == due_.size() && due_.capacity() > kHeartbeatsInFlight) {
    // A large round is sent: its list goes.
    std::vector<ResourceId>().swap(due_);
    nextDue_ = 0;
  }
}

Duration HeartbeatMonitor::roundCallTimeout() const {
  return std::min(options_.callTimeout, std::max(options_.interval / 4, Duration(100)));
}

void HeartbeatMonitor::heartbeatEnded() {
  --inFlight_;
  sendDue();
}

kj::Promise<void> HeartbeatMonitor::probe(wire::TaskExecutorGateway::Client& worker) {
  auto request = worker.heartbeatRequest();
  address(request);
  return rpc::withDeadline(timer_, options_.callTimeout, "TaskExecutorGateway.heartbeat",
                           request.send().ignoreResult());
}

void HeartbeatMonitor::disconnect(const ResourceId& worker,
                                  wire::TaskExecutorGateway::Client& client,
                                  const std::string& cause) {
  auto request = client.disconnectRequest();
  address(request);
  request.setCause(cause);
  tasks_.add(rpc::withDeadline(timer_, options_.callTimeout, "TaskExecutorGateway.disconnect",
                               request.send().ignoreResult())
                 .catch_([worker](kj::Exception&& exception) {
                   spdlog::debug("disconnect to worker {} failed: {}", worker.toHex(),
                                 exception.getDescription().cStr());
                 }));
}

kj::Promise<void> HeartbeatMonitor::freeSlot(const ResourceId& worker,
                                             wire::TaskExecutorGateway::Client& client,
                                             const AllocationId& allocation,
                                             const std::string& cause) {
  auto request = client.freeSlotRequest();
  request.setEpoch(epoch_);
  wire::setWireId(request.initAllocationId(), allocation);
  request.setCause(cause);
  return rpc::withDeadline(timer_, options_.callTimeout, "TaskExecutorGateway.freeSlot",
                           request.send())
      .then(
          [worker, allocation](auto response) {
            if (response.hasFailure()) {
              spdlog::warn("freeSlot of allocation {} on worker {} refused: {}", allocation.toHex(),
                           worker.toHex(), response.getFailure().getMessage().cStr());
            }
          },
          [worker, allocation](kj::Exception&& exception) {
            spdlog::warn("freeSlot of allocation {} on worker {} failed: {}", allocation.toHex(),
                         worker.toHex(), exception.getDescription().cStr());
          });
}

template <typename Request>
void HeartbeatMonitor::address(Request& request) const {
  request.setEpoch(epoch_);
  if (jobMaster_) {
    wire::setWireId(request.initSender().initJobMaster(), *jobMaster_);
  } else {
    request.initSender().setResourceManager();
  }
}

}  // namespace regent::resourcemanager

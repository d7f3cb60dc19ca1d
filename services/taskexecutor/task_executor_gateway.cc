// The worker's gateway and its epoch gate (see task_executor_gateway.h).
#include "services/taskexecutor/task_executor_gateway.h"

#include <kj/debug.h>

#include <utility>

#include "common/event_sink.h"
#include "rpc/wire_ids.h"
#include "services/taskexecutor/task_executor.h"

namespace regent::taskexecutor {

GatewayShared::GatewayShared(OwnerLink owner, EventSink& events, std::string resourceId)
    : owner_(std::move(owner)),
      events_(events),
      resourceId_(std::move(resourceId)),
      gate_(0, [this](uint64_t previous, uint64_t raised) {
        if (TaskExecutor* owner = owner_.tryGet()) owner->onEpochRaised(previous, raised);
      }) {}

void GatewayShared::logRefusal(const std::string& method, uint64_t received) {
  // A deposed leader may call many times: the first refusals, then one in a hundred.
  const uint64_t n = ++refusalsLogged_;
  if (n <= 10 || n % 100 == 0) {
    events_.emit(Event("epoch gate refused", EventLevel::kWarn)
                     .field("resource_id", resourceId_)
                     .field("method", method)
                     .field("received", received)
                     .field("highest", gate_.highest()));
  }
}

void GatewayShared::logAdmitted(const std::string& method, uint64_t epoch) {
  // Off the hot path: the first admitted call of each epoch, and any below the highest seen (which
  // only a gate that admits too much lets through). An epoch going back is always logged.
  if (epoch == lastAdmittedEpoch_ && epoch >= gate_.highest()) return;
  lastAdmittedEpoch_ = epoch;
  events_.emit(Event("call admitted")
                   .field("resource_id", resourceId_)
                   .field("method", method)
                   .field("epoch", epoch));
}

namespace {

// The endpoint's rule: the shared gate, which also logs its refusals.
class SharedGate final : public rpc::EpochRule {
 public:
  explicit SharedGate(std::shared_ptr<GatewayShared> shared) : shared_(std::move(shared)) {}

  bool admits(uint64_t received) override { return shared_->gate().admits(received); }

  void refuse(const std::string& method, uint64_t received,
              wire::Failure::Builder failure) override {
    shared_->gate().refuse(method, received, failure);
    shared_->logRefusal(method, received);
  }

 private:
  std::shared_ptr<GatewayShared> shared_;
};

}  // namespace

// The TaskExecutorGateway's handlers (a friend of TaskExecutor). Epochs were judged by the
// endpoint before any of these runs.
class GatewayServer final : public wire::TaskExecutorGateway::Server {
 public:
  explicit GatewayServer(std::shared_ptr<GatewayShared> shared) : shared_(std::move(shared)) {}

  kj::Promise<void> requestSlot(RequestSlotContext context) override {
    shared_->logAdmitted("TaskExecutorGateway.requestSlot", context.getParams().getEpoch());
    owner().requestSlot(context.getParams(), context.getResults());
    return kj::READY_NOW;
  }

  kj::Promise<void> submitTask(SubmitTaskContext context) override {
    auto params = context.getParams();
    shared_->logAdmitted("TaskExecutorGateway.submitTask", params.getEpoch());
    owner().submitTask(params.getEpoch(), params.getDeployment(), context.getResults());
    return kj::READY_NOW;
  }

  kj::Promise<void> cancelTask(CancelTaskContext context) override {
    shared_->logAdmitted("TaskExecutorGateway.cancelTask", context.getParams().getEpoch());
    owner().cancelTask(wire::idFromWire<AttemptId>(context.getParams().getAttemptId()),
                       context.getResults());
    return kj::READY_NOW;
  }

  kj::Promise<void> freeSlot(FreeSlotContext context) override {
    auto params = context.getParams();
    shared_->logAdmitted("TaskExecutorGateway.freeSlot", params.getEpoch());
    owner().freeSlot(wire::idFromWire<AllocationId>(params.getAllocationId()),
                     params.getCause().cStr());
    return kj::READY_NOW;
  }

  kj::Promise<void> heartbeat(HeartbeatContext context) override {
    auto params = context.getParams();
    auto sender = params.getSender();
    if (sender.isResourceManager()) {
      owner().answerHeartbeat();
    } else {
      owner().answerJobMasterHeartbeat(wire::idFromWire<JobId>(sender.getJobMaster()),
                                       params.getEpoch());
    }
    return kj::READY_NOW;
  }

  kj::Promise<void> disconnect(DisconnectContext context) override {
    auto params = context.getParams();
    shared_->logAdmitted("TaskExecutorGateway.disconnect", params.getEpoch());
    auto sender = params.getSender();
    if (sender.isJobMaster()) {
      owner().freeJob(wire::idFromWire<JobId>(sender.getJobMaster()),
                      std::string("the JobMaster disconnected: ") + params.getCause().cStr());
    } else {
      owner().lose(std::string("the resource manager disconnected this worker: ") +
                   params.getCause().cStr());
    }
    return kj::READY_NOW;
  }

  kj::Promise<void> stop(StopContext context) override {
    auto params = context.getParams();
    shared_->logAdmitted("TaskExecutorGateway.stop", params.getEpoch());
    owner().stopRequested(params.getCause().cStr(), context.getResults());
    return kj::READY_NOW;
  }

 private:
  // Fails the call DISCONNECTED once the TaskExecutor is gone.
  TaskExecutor& owner() { return shared_->owner().get(); }

  std::shared_ptr<GatewayShared> shared_;
};

wire::TaskExecutorGateway::Client serveTaskExecutorGateway(std::shared_ptr<GatewayShared> shared) {
  rpc::FencingCounters& fencing = shared->fencing();
  return rpc::fencedEndpoint<wire::TaskExecutorGateway>(kj::heap<GatewayServer>(shared),
                                                        kj::heap<SharedGate>(shared), fencing);
}

TaskRunner::OnUpdate forwardTaskUpdates(std::shared_ptr<GatewayShared> shared) {
  return [shared = std::move(shared)](const TaskUpdate& update) {
    if (TaskExecutor* owner = shared->owner().tryGet()) owner->onTaskUpdate(update);
  };
}

}  // namespace regent::taskexecutor

// A fake leading master for worker-side tests: a MasterBootstrap whose leaderInfo names itself as
// the leader of `epoch`, and whose resourceManager(epoch) hands out a ResourceManagerGateway that
// records every call (registrations with the worker's gateway capability, slot reports,
// heartbeats, disconnects) in a shared FakeMasterState the test reads and scripts.
#pragma once

#include <capnp/capability.h>
#include <kj/debug.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/ids.h"
#include "rpc/failure.h"
#include "rpc/schema/gateways.capnp.h"
#include "rpc/wire_ids.h"

namespace regent::testing {

// One slot as a report lists it.
struct ReportedSlot {
  uint32_t index = 0;
  std::optional<AllocationId> allocation;
  std::optional<JobId> job;
};

struct FakeRegistration {
  uint64_t epoch = 0;
  RegistrationId registrationId;
  ResourceId resourceId;
  std::string host;
  uint32_t slots = 0;
  uint32_t pid = 0;
  wire::TaskExecutorGateway::Client taskExecutor{nullptr};
};

struct FakeReport {
  uint64_t epoch = 0;
  ResourceId resourceId;
  std::optional<RegistrationId> registrationId;  // As the call names it; nullopt: unset.
  std::vector<ReportedSlot> slots;
};

struct FakeMasterState {
  uint64_t epoch = 1;
  std::string masterId = "fake-master";
  std::string rpcAddress;  // Set by the test once listening: what leaderInfo names.
  uint64_t heartbeatIntervalMs = 1000;
  uint64_t heartbeatTimeoutMs = 600000;
  // The next ResourceManagerGateway.heartbeat is answered notRegistered (then reset).
  bool notRegisteredOnce = false;
  // The next ResourceManagerGateway.heartbeat fails with a DISCONNECTED exception, as a call
  // on a lost connection does.
  bool heartbeatDisconnectedOnce = false;
  // The next sendSlotReport is answered notRegistered (then reset): a registration the
  // ResourceManager dropped in between.
  bool slotReportNotRegisteredOnce = false;
  // When set, registerTaskExecutor is refused with alreadyExists and this message.
  std::optional<std::string> refuseRegistration;
  // The next MasterBootstrap.resourceManager / registerTaskExecutor throws a FAILED exception
  // (then reset), as a handler's KJ_REQUIRE or a master's wrong auth proof does.
  bool resourceManagerThrowsOnce = false;
  bool registrationThrowsOnce = false;
  // The next this many MasterBootstrap.leaderInfo calls throw a FAILED exception.
  int leaderInfoThrows = 0;
  // While set, sendSlotReport is not answered: a worker stopped between registerTaskExecutor
  // and the report's answer.
  bool holdSlotReports = false;

  std::vector<uint64_t> resourceManagerEpochs;  // MasterBootstrap.resourceManager calls.
  std::vector<FakeRegistration> registrations;
  std::vector<FakeReport> slotReports;  // sendSlotReport.
  std::vector<FakeReport> heartbeats;   // ResourceManagerGateway.heartbeat.
  std::vector<std::pair<uint64_t, std::string>> disconnects;  // (epoch, cause).
  std::vector<std::optional<RegistrationId>> disconnectRegistrations;  // As each names it.

  // The TaskExecutorGateway of the latest registration.
  wire::TaskExecutorGateway::Client taskExecutor() {
    return registrations.back().taskExecutor;
  }
};

inline FakeReport readReport(uint64_t epoch, wire::SlotReport::Reader report) {
  FakeReport out;
  out.epoch = epoch;
  out.resourceId = wire::idFromWire<ResourceId>(report.getResourceId());
  for (auto slot : report.getSlots()) {
    ReportedSlot reported;
    reported.index = slot.getSlotId().getSlotIndex();
    reported.allocation =
        wire::idFromWireIfSet<AllocationId>(slot.hasAllocationId(), slot.getAllocationId());
    reported.job = wire::idFromWireIfSet<JobId>(slot.hasJobId(), slot.getJobId());
    out.slots.push_back(reported);
  }
  return out;
}

class FakeResourceManager final : public wire::ResourceManagerGateway::Server {
 public:
  explicit FakeResourceManager(std::shared_ptr<FakeMasterState> state) : state_(std::move(state)) {}

  kj::Promise<void> registerTaskExecutor(RegisterTaskExecutorContext context) override {
    auto params = context.getParams();
    auto results = context.getResults();
    auto registration = params.getRegistration();
    const auto resourceId = wire::idFromWire<ResourceId>(registration.getResourceId());
    if (state_->registrationThrowsOnce) {
      state_->registrationThrowsOnce = false;
      return KJ_EXCEPTION(FAILED, "registerTaskExecutor failed in the handler");
    }
    if (state_->refuseRegistration) {
      rpc::failures::alreadyExists(results.initFailure(), resourceId, *state_->refuseRegistration);
      return kj::READY_NOW;
    }
    FakeRegistration recorded;
    recorded.epoch = params.getEpoch();
    recorded.registrationId = RegistrationId::random();
    recorded.resourceId = resourceId;
    recorded.host = registration.getHost().cStr();
    recorded.slots = registration.getNumberOfSlots();
    recorded.pid = registration.getPid();
    recorded.taskExecutor = params.getTaskExecutor();
    auto success = results.initSuccess();
    wire::setWireId(success.initRegistrationId(), recorded.registrationId);
    success.setHeartbeatIntervalMs(state_->heartbeatIntervalMs);
    success.setHeartbeatTimeoutMs(state_->heartbeatTimeoutMs);
    state_->registrations.push_back(std::move(recorded));
    return kj::READY_NOW;
  }

  kj::Promise<void> sendSlotReport(SendSlotReportContext context) override {
    auto params = context.getParams();
    FakeReport report = readReport(params.getEpoch(), params.getSlotReport());
    report.registrationId = wire::idFromWire<RegistrationId>(params.getRegistrationId());
    state_->slotReports.push_back(std::move(report));
    if (state_->holdSlotReports) return kj::NEVER_DONE;
    if (state_->slotReportNotRegisteredOnce) {
      state_->slotReportNotRegisteredOnce = false;
      rpc::failures::notRegistered(context.getResults().initFailure(),
                                   wire::idFromWire<ResourceId>(params.getResourceId()),
                                   "unknown registration id");
    }
    return kj::READY_NOW;
  }

  kj::Promise<void> heartbeat(HeartbeatContext context) override {
    auto params = context.getParams();
    auto payload = params.getPayload();
    FakeReport report = readReport(params.getEpoch(), payload.getSlotReport());
    report.registrationId = wire::idFromWireIfSet<RegistrationId>(payload.hasRegistrationId(),
                                                                  payload.getRegistrationId());
    state_->heartbeats.push_back(std::move(report));
    if (state_->heartbeatDisconnectedOnce) {
      state_->heartbeatDisconnectedOnce = false;
      return KJ_EXCEPTION(DISCONNECTED, "the connection to the worker was lost");
    }
    if (state_->notRegisteredOnce) {
      state_->notRegisteredOnce = false;
      rpc::failures::notRegistered(context.getResults().initFailure(),
                                   wire::idFromWire<ResourceId>(params.getResourceId()),
                                   "no registration of this worker in this term");
    }
    return kj::READY_NOW;
  }

  kj::Promise<void> disconnect(DisconnectContext context) override {
    auto params = context.getParams();
    state_->disconnects.emplace_back(params.getEpoch(), params.getCause().cStr());
    state_->disconnectRegistrations.push_back(wire::idFromWireIfSet<RegistrationId>(
        params.hasRegistrationId(), params.getRegistrationId()));
    return kj::READY_NOW;
  }

 private:
  std::shared_ptr<FakeMasterState> state_;
};

class FakeMasterBootstrap final : public wire::MasterBootstrap::Server {
 public:
  explicit FakeMasterBootstrap(std::shared_ptr<FakeMasterState> state) : state_(std::move(state)) {}

  kj::Promise<void> leaderInfo(LeaderInfoContext context) override {
    if (state_->leaderInfoThrows > 0) {
      --state_->leaderInfoThrows;
      return KJ_EXCEPTION(FAILED, "leaderInfo failed in the handler");
    }
    auto results = context.getResults();
    auto leader = results.initLeader().initLeader();
    leader.setEpoch(state_->epoch);
    leader.setMasterId(state_->masterId);
    leader.setRpcAddress(state_->rpcAddress);
    results.setLeading(true);
    return kj::READY_NOW;
  }

  // The current epoch only (fencing otherwise), as the leader's term would answer.
  kj::Promise<void> resourceManager(ResourceManagerContext context) override {
    const uint64_t epoch = context.getParams().getEpoch();
    state_->resourceManagerEpochs.push_back(epoch);
    if (state_->resourceManagerThrowsOnce) {
      state_->resourceManagerThrowsOnce = false;
      return KJ_EXCEPTION(FAILED, "resourceManager failed in the handler");
    }
    auto results = context.getResults();
    if (epoch != state_->epoch) {
      rpc::failures::fencing(results.initFailure(), state_->epoch, epoch,
                             "this master serves epoch " + std::to_string(state_->epoch));
      return kj::READY_NOW;
    }
    results.setResourceManager(kj::heap<FakeResourceManager>(state_));
    return kj::READY_NOW;
  }

 private:
  std::shared_ptr<FakeMasterState> state_;
};

}  // namespace regent::testing

// A fake leading master for worker-side tests: a MasterBootstrap whose leaderInfo names itself as
// the leader of `epoch`, whose resourceManager(epoch) hands out a ResourceManagerGateway and whose
// jobMaster(epoch, job) a JobMasterGateway, both recording every call (registrations with the
// worker's gateway capability, slot reports, heartbeats, disconnects, slot offers, attempt
// updates, JobMaster heartbeats and disconnects) in a shared FakeMasterState the test reads and
// scripts. It asks for no credential unless given a secret, which it then proves it holds.
#pragma once

#include <capnp/capability.h>
#include <kj/debug.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/ids.h"
#include "rpc/auth_proof.h"
#include "rpc/auth_roles.h"
#include "rpc/failure.h"
#include "rpc/schema/gateways.capnp.h"
#include "rpc/wire_ids.h"

namespace regent::testing {

// One slot as a report lists it.
struct ReportedSlot {
  uint32_t index = 0;
  std::optional<AllocationId> allocation;
  std::optional<JobId> job;
  std::vector<AttemptId> running;  // runningAttempts.
};

struct FakeRegistration {
  uint64_t epoch = 0;
  RegistrationId registrationId;
  ResourceId resourceId;
  std::string host;
  uint32_t slots = 0;
  uint32_t pid = 0;
  std::string providerWorkerId;
  wire::TaskExecutorGateway::Client taskExecutor{nullptr};
};

struct FakeReport {
  uint64_t epoch = 0;
  ResourceId resourceId;
  std::optional<RegistrationId> registrationId;  // As the call names it; nullopt: unset.
  std::vector<ReportedSlot> slots;
};

// One attempt as a worker reports it (an update, or a running attempt in an offer or report).
struct FakeAttemptState {
  AttemptId attempt;
  JobId job;
  AllocationId allocation;
  std::string vertex;
  uint32_t subtask = 0;
  uint32_t attemptNumber = 0;
  wire::ExecutionState state = wire::ExecutionState::CREATED;
  uint32_t pid = 0;
  int32_t exitCode = 0;
  int32_t termSignal = 0;
  std::string failureMessage;
  int64_t startedAtMs = 0;
  int64_t endedAtMs = 0;
};

inline FakeAttemptState readAttempt(wire::TaskExecutionState::Reader state) {
  FakeAttemptState out;
  out.attempt = wire::idFromWire<AttemptId>(state.getAttemptId());
  out.job = wire::idFromWire<JobId>(state.getJobId());
  out.allocation = wire::idFromWire<AllocationId>(state.getAllocationId());
  out.vertex = state.getVertexName().cStr();
  out.subtask = state.getSubtaskIndex();
  out.attemptNumber = state.getAttemptNumber();
  out.state = state.getState();
  out.pid = state.getPid();
  out.exitCode = state.getExitCode();
  out.termSignal = state.getTermSignal();
  out.failureMessage = state.getFailureMessage().cStr();
  out.startedAtMs = state.getStartedAtMs();
  out.endedAtMs = state.getEndedAtMs();
  return out;
}

struct FakeSlotOffer {
  AllocationId allocation;
  uint32_t slotIndex = 0;
  std::vector<FakeAttemptState> running;
};

struct FakeOffer {
  uint64_t epoch = 0;
  JobId job;
  ResourceId resourceId;
  std::vector<FakeSlotOffer> slots;
  wire::TaskExecutorGateway::Client taskExecutor{nullptr};
  size_t updatesBefore = 0;  // FakeMasterState::updates received before this offer.
};

struct FakeUpdate {
  uint64_t epoch = 0;
  JobId jobMaster;  // The JobMaster called.
  FakeAttemptState state;
};

struct FakeJobMasterHeartbeat {
  uint64_t epoch = 0;
  JobId job;
  ResourceId resourceId;
  std::vector<AttemptId> deployed;
};

struct FakeJobMasterDisconnect {
  uint64_t epoch = 0;
  JobId job;
  ResourceId resourceId;
  std::string cause;
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
  // (then reset), as a handler's KJ_REQUIRE does.
  bool resourceManagerThrowsOnce = false;
  bool registrationThrowsOnce = false;
  // The next this many MasterBootstrap.leaderInfo calls throw a FAILED exception.
  int leaderInfoThrows = 0;
  // While set, sendSlotReport is not answered: a worker stopped between registerTaskExecutor
  // and the report's answer.
  bool holdSlotReports = false;
  // When set, the master requires the shared-secret authentication and proves it holds this
  // secret (for any role); otherwise authChallenge says `required` false, as a master with
  // rpc.auth none does.
  std::optional<std::string> secret;

  std::vector<uint64_t> resourceManagerEpochs;  // MasterBootstrap.resourceManager calls.
  std::vector<FakeRegistration> registrations;
  std::vector<FakeReport> slotReports;  // sendSlotReport.
  std::vector<FakeReport> heartbeats;   // ResourceManagerGateway.heartbeat.
  std::vector<std::pair<uint64_t, std::string>> disconnects;  // (epoch, cause).
  std::vector<std::optional<RegistrationId>> disconnectRegistrations;  // As each names it.

  // MasterBootstrap.jobMaster: jobs answered notFound; the next this many calls answered
  // unavailable.
  std::set<JobId> unknownJobs;
  int jobMasterUnavailable = 0;
  // offerSlots: accept every offered slot (else none). An offer naming one of
  // `refusedAllocations` is refused whole with permissionDenied, as a JobMaster refuses an offer
  // of a slot the ResourceManager does not hold for the worker.
  bool acceptOffers = true;
  std::set<AllocationId> refusedAllocations;
  // updateTaskExecutionState: attempts answered notFound; the next this many calls answered
  // unavailable (recorded all the same).
  std::set<AttemptId> unknownAttempts;
  int updatesUnavailable = 0;
  std::vector<std::pair<uint64_t, JobId>> jobMasterCalls;  // (epoch, job).
  std::vector<FakeOffer> offers;
  std::vector<FakeUpdate> updates;
  std::vector<FakeJobMasterHeartbeat> jobMasterHeartbeats;
  std::vector<FakeJobMasterDisconnect> jobMasterDisconnects;  // JobMasterGateway.disconnect.
  // For each ResourceManagerGateway.disconnect: the JobMasterGateway.disconnect calls before it.
  std::vector<size_t> jobMasterDisconnectsBeforeResourceManager;

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
    for (auto running : slot.getRunningAttempts()) {
      reported.running.push_back(wire::idFromWire<AttemptId>(running.getAttemptId()));
    }
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
    recorded.providerWorkerId = registration.getProviderWorkerId().cStr();
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
    state_->jobMasterDisconnectsBeforeResourceManager.push_back(
        state_->jobMasterDisconnects.size());
    state_->disconnectRegistrations.push_back(wire::idFromWireIfSet<RegistrationId>(
        params.hasRegistrationId(), params.getRegistrationId()));
    return kj::READY_NOW;
  }

 private:
  std::shared_ptr<FakeMasterState> state_;
};

// The JobMaster of one job: records offers, updates and heartbeats.
class FakeJobMaster final : public wire::JobMasterGateway::Server {
 public:
  FakeJobMaster(std::shared_ptr<FakeMasterState> state, JobId job)
      : state_(std::move(state)), job_(job) {}

  kj::Promise<void> offerSlots(OfferSlotsContext context) override {
    auto params = context.getParams();
    FakeOffer offer;
    offer.epoch = params.getEpoch();
    offer.job = job_;
    offer.resourceId = wire::idFromWire<ResourceId>(params.getResourceId());
    offer.taskExecutor = params.getTaskExecutor();
    offer.updatesBefore = state_->updates.size();
    for (auto slot : params.getSlots()) {
      FakeSlotOffer offered;
      offered.allocation = wire::idFromWire<AllocationId>(slot.getAllocationId());
      offered.slotIndex = slot.getSlotIndex();
      for (auto running : slot.getRunningAttempts()) offered.running.push_back(readAttempt(running));
      offer.slots.push_back(std::move(offered));
    }
    bool refused = false;
    for (const FakeSlotOffer& offered : offer.slots) {
      refused |= state_->refusedAllocations.count(offered.allocation) != 0;
    }
    if (refused) {
      rpc::failures::permissionDenied(context.getResults().initFailure(), wire::Role::WORKER,
                                      wire::Role::WORKER,
                                      "JobMasterGateway.offerSlots refused: an allocation the "
                                      "worker does not hold");
    } else if (state_->acceptOffers) {
      auto accepted = context.getResults().initAccepted(static_cast<unsigned>(offer.slots.size()));
      for (unsigned i = 0; i < offer.slots.size(); ++i) {
        wire::setWireId(accepted[i], offer.slots[i].allocation);
      }
    }
    state_->offers.push_back(std::move(offer));
    return kj::READY_NOW;
  }

  kj::Promise<void> updateTaskExecutionState(UpdateTaskExecutionStateContext context) override {
    auto params = context.getParams();
    FakeUpdate update{params.getEpoch(), job_, readAttempt(params.getState())};
    const AttemptId attempt = update.state.attempt;
    state_->updates.push_back(std::move(update));
    if (state_->unknownAttempts.count(attempt) != 0) {
      rpc::failures::notFound(context.getResults().initFailure(), attempt, "unknown attempt");
    } else if (state_->updatesUnavailable > 0) {
      --state_->updatesUnavailable;
      rpc::failures::unavailable(context.getResults().initFailure(), 0,
                                 "the update is not persisted yet");
    }
    return kj::READY_NOW;
  }

  kj::Promise<void> heartbeat(HeartbeatContext context) override {
    auto params = context.getParams();
    FakeJobMasterHeartbeat heartbeat;
    heartbeat.epoch = params.getEpoch();
    heartbeat.job = job_;
    heartbeat.resourceId = wire::idFromWire<ResourceId>(params.getResourceId());
    for (auto id : params.getPayload().getDeployedAttempts()) {
      heartbeat.deployed.push_back(wire::idFromWire<AttemptId>(id));
    }
    state_->jobMasterHeartbeats.push_back(std::move(heartbeat));
    return kj::READY_NOW;
  }

  kj::Promise<void> disconnect(DisconnectContext context) override {
    auto params = context.getParams();
    state_->jobMasterDisconnects.push_back(FakeJobMasterDisconnect{
        params.getEpoch(), job_, wire::idFromWire<ResourceId>(params.getResourceId()),
        params.getCause().cStr()});
    return kj::READY_NOW;
  }

 private:
  std::shared_ptr<FakeMasterState> state_;
  JobId job_;
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

  kj::Promise<void> authChallenge(AuthChallengeContext context) override {
    auto results = context.getResults();
    serverNonce_ = rpc::randomAuthNonce();
    results.setServerNonce(bytesOf(serverNonce_));
    results.setRequired(state_->secret.has_value());
    return kj::READY_NOW;
  }

  // Proves state_->secret for the role asked (without checking the client's proof: the tests
  // are about the worker checking the master).
  kj::Promise<void> authenticate(AuthenticateContext context) override {
    auto params = context.getParams();
    auto results = context.getResults();
    if (!state_->secret) {
      rpc::failures::unauthenticated(results.initFailure(),
                                     "this master requires no authentication");
      return kj::READY_NOW;
    }
    const std::string clientNonce(reinterpret_cast<const char*>(params.getClientNonce().begin()),
                                  params.getClientNonce().size());
    results.setServerProof(bytesOf(rpc::authProof(rpc::ProofSide::kServer, *state_->secret,
                                                  rpc::roleName(params.getRole()), serverNonce_,
                                                  clientNonce)));
    results.setBootstrap(kj::heap<FakeMasterBootstrap>(state_));
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

  // The current epoch only; notFound for the unknown jobs, unavailable while scripted.
  kj::Promise<void> jobMaster(JobMasterContext context) override {
    auto params = context.getParams();
    const uint64_t epoch = params.getEpoch();
    const auto job = wire::idFromWire<JobId>(params.getJobId());
    state_->jobMasterCalls.emplace_back(epoch, job);
    auto results = context.getResults();
    if (epoch != state_->epoch) {
      rpc::failures::fencing(results.initFailure(), state_->epoch, epoch,
                             "this master serves epoch " + std::to_string(state_->epoch));
    } else if (state_->unknownJobs.count(job) != 0) {
      rpc::failures::notFound(results.initFailure(), job, "no job " + job.toHex());
    } else if (state_->jobMasterUnavailable > 0) {
      --state_->jobMasterUnavailable;
      rpc::failures::unavailable(results.initFailure(), 0, "the JobMaster is not started yet");
    } else {
      results.setJobMaster(kj::heap<FakeJobMaster>(state_, job));
    }
    return kj::READY_NOW;
  }

 private:
  static kj::ArrayPtr<const kj::byte> bytesOf(const std::string& text) {
    return kj::arrayPtr(reinterpret_cast<const kj::byte*>(text.data()), text.size());
  }

  std::shared_ptr<FakeMasterState> state_;
  std::string serverNonce_;
};

}  // namespace regent::testing

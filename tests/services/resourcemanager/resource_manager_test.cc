// The ResourceManager through its gateway behind the fenced endpoint, as workers and JobMasters
// call it, with fake TaskExecutorGateways that record the calls the ResourceManager makes and a
// kj::TimerImpl advanced by hand: registration and listing, heartbeat expiry, a second live
// worker with the same resource id refused, a dead or silent holder replaced, requestSlot for a
// declared requirement, and the failures for stale registrations and unfittable requirements;
// one test over a real two-party connection whose worker end goes away.
#include "services/resourcemanager/resource_manager.h"

#include <capnp/message.h>
#include <capnp/rpc-twoparty.h>
#include <gtest/gtest.h>
#include <kj/debug.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/event_line.h"
#include "common/event_loop.h"
#include "common/log_event_sink.h"
#include "rpc/fenced_endpoint.h"
#include "rpc/wire_ids.h"
#include "tests/common/logging_test_util.h"

namespace regent::resourcemanager {
namespace {

using wire::ResourceManagerGateway;
using wire::TaskExecutorGateway;

constexpr uint64_t kEpoch = 7;
constexpr uint64_t kGiB = uint64_t{1} << 30;

// What a fake worker's TaskExecutorGateway was called with, and how it answers.
struct FakeWorker {
  enum class Mode {
    kAnswers,       // Answers every call (requestSlot with `refuseRequests` as said).
    kDisconnected,  // Every call throws DISCONNECTED, as a dead peer's connection does.
    kSilent,        // No call ever completes.
  };
  Mode mode = Mode::kAnswers;
  bool refuseRequests = false;  // requestSlot answers failedPrecondition.

  struct RequestedSlot {
    uint64_t epoch;
    ResourceId worker;
    uint32_t index;
    JobId job;
    AllocationId allocation;
    uint32_t cpuMillis;
  };
  std::vector<RequestedSlot> requested;
  std::vector<AllocationId> freed;
  std::vector<std::string> disconnects;
  size_t heartbeats = 0;
};

class FakeTaskExecutor final : public TaskExecutorGateway::Server {
 public:
  explicit FakeTaskExecutor(FakeWorker& state) : state_(state) {}

  kj::Promise<void> requestSlot(RequestSlotContext context) override {
    auto params = context.getParams();
    state_.requested.push_back(FakeWorker::RequestedSlot{
        params.getEpoch(), wire::idFromWire<ResourceId>(params.getSlotId().getResourceId()),
        params.getSlotId().getSlotIndex(), wire::idFromWire<JobId>(params.getJobId()),
        wire::idFromWire<AllocationId>(params.getAllocationId()),
        params.getProfile().getCpuMillis()});
    if (auto trouble = misbehave()) return kj::mv(*trouble);
    if (state_.refuseRequests) {
      auto failure = context.getResults().initFailure();
      failure.setMessage("slot allocated to another allocation");
      failure.setFailedPrecondition();
    }
    return kj::READY_NOW;
  }

  kj::Promise<void> freeSlot(FreeSlotContext context) override {
    state_.freed.push_back(wire::idFromWire<AllocationId>(context.getParams().getAllocationId()));
    if (auto trouble = misbehave()) return kj::mv(*trouble);
    return kj::READY_NOW;
  }

  kj::Promise<void> heartbeat(HeartbeatContext context) override {
    EXPECT_EQ(context.getParams().getEpoch(), kEpoch);
    EXPECT_TRUE(context.getParams().getSender().isResourceManager());
    ++state_.heartbeats;
    if (auto trouble = misbehave()) return kj::mv(*trouble);
    return kj::READY_NOW;
  }

  kj::Promise<void> disconnect(DisconnectContext context) override {
    state_.disconnects.push_back(context.getParams().getCause());
    if (auto trouble = misbehave()) return kj::mv(*trouble);
    return kj::READY_NOW;
  }

 private:
  std::optional<kj::Promise<void>> misbehave() {
    switch (state_.mode) {
      case FakeWorker::Mode::kAnswers:
        return std::nullopt;
      case FakeWorker::Mode::kDisconnected:
        return kj::Promise<void>(KJ_EXCEPTION(DISCONNECTED, "the worker's connection is gone"));
      case FakeWorker::Mode::kSilent:
        return kj::Promise<void>(kj::NEVER_DONE);
    }
    return std::nullopt;
  }

  FakeWorker& state_;
};

struct TestWorker {
  ResourceId id;
  std::string host = "host-a";
  uint32_t pid = 100;
  int64_t startedAtMs = 1700000000000;
  uint32_t slots = 2;
  uint32_t slotCpuMillis = 1000;
};

class ResourceManagerTest : public DefaultLoggerTest {
 protected:
  ResourceManagerTest() {
    ResourceManagerOptions options;
    options.heartbeatInterval = Duration(2000);
    options.heartbeatTimeout = Duration(10000);
    options.callTimeout = Duration(1000);
    options.nowMs = [this] { return nowMs_; };
    manager_ = std::make_unique<ResourceManager>(timer_, events_, kEpoch, counters_, options);
    jobMasterGateway_ = connect("a JobMaster");
  }
  ~ResourceManagerTest() noexcept override {
    jobMasterGateway_ = nullptr;
    connections_.clear();
    manager_ = nullptr;
  }

  // A gateway of a connection of its own, with a fresh worker identity (MasterBootstrap makes
  // one per connection) and a gate whose close() the test records in closed_.
  ResourceManagerGateway::Client connect(const std::string& peer,
                                         const std::string& certificateName = "") {
    auto gate = kj::refcounted<rpc::ConnectionGate>(true);
    gate->setOnClose(kj::Function<void(const std::string&)>(
        [this, peer](const std::string& reason) { closed_.emplace_back(peer, reason); }));
    return rpc::fencedEndpoint<ResourceManagerGateway>(
        manager_->makeGatewayServer(
            kj::refcounted<WorkerBinding>(peer, certificateName, kj::mv(gate))),
        kEpoch, fencing_);
  }
  // The connection of the worker process `who` (its resource id, host, pid and start): each
  // process calls over a connection of its own, as real workers do.
  ResourceManagerGateway::Client gateway(const TestWorker& who) {
    const std::string key = who.id.toHex() + " " + who.host + " " + std::to_string(who.pid) +
                            " " + std::to_string(who.startedAtMs);
    auto found = connections_.find(key);
    if (found == connections_.end()) found = connections_.emplace(key, connect(key)).first;
    return found->second;
  }

  void settle() { loop_.waitScope().poll(); }
  void advance(Duration by) {
    nowMs_ += by.count();
    timer_.advanceTo(timer_.now() + by.count() * kj::MILLISECONDS);
    settle();
  }

  capnp::Request<ResourceManagerGateway::RegisterTaskExecutorParams,
                 ResourceManagerGateway::RegisterTaskExecutorResults>
  registerRequest(const TestWorker& who, FakeWorker& fake) {
    auto request = gateway(who).registerTaskExecutorRequest();
    request.setEpoch(kEpoch);
    auto registration = request.initRegistration();
    wire::setWireId(registration.initResourceId(), who.id);
    registration.setHost(who.host);
    registration.setDataAddress(who.host + ":8083");
    registration.setHttpAddress(who.host + ":8082");
    registration.setNumberOfSlots(who.slots);
    registration.getSlotProfile().setCpuMillis(who.slotCpuMillis);
    registration.getSlotProfile().setMemoryBytes(kGiB);
    registration.getTotalProfile().setCpuMillis(who.slotCpuMillis * who.slots);
    registration.getTotalProfile().setMemoryBytes(kGiB * who.slots);
    registration.setVersion("test");
    registration.setPid(who.pid);
    registration.setStartedAtMs(who.startedAtMs);
    request.setTaskExecutor(kj::heap<FakeTaskExecutor>(fake));
    return request;
  }

  capnp::Response<ResourceManagerGateway::RegisterTaskExecutorResults> registerWorker(
      const TestWorker& who, FakeWorker& fake) {
    return loop_.run(registerRequest(who, fake).send());
  }

  // Registers `who` and reports all its slots free; returns the registration id.
  RegistrationId registerAndReport(const TestWorker& who, FakeWorker& fake) {
    auto registered = registerWorker(who, fake);
    KJ_REQUIRE(!registered.hasFailure(), registered.getFailure().getMessage().cStr());
    const auto id = wire::idFromWire<RegistrationId>(registered.getSuccess().getRegistrationId());
    auto reported = report(who, id, {});
    KJ_REQUIRE(!reported.hasFailure(), reported.getFailure().getMessage().cStr());
    return id;
  }

  // One slot report of `who`: every slot free except those listed in `allocated`.
  struct Allocated {
    uint32_t index;
    JobId job;
    AllocationId allocation;
  };
  void fillReport(wire::SlotReport::Builder report, const TestWorker& who,
                  const std::vector<Allocated>& allocated) {
    wire::setWireId(report.initResourceId(), who.id);
    auto slots = report.initSlots(who.slots);
    for (uint32_t i = 0; i < who.slots; ++i) {
      wire::setWireId(slots[i].initSlotId().initResourceId(), who.id);
      slots[i].getSlotId().setSlotIndex(i);
      slots[i].initProfile().setCpuMillis(who.slotCpuMillis);
      slots[i].getProfile().setMemoryBytes(kGiB);
      for (const Allocated& slot : allocated) {
        if (slot.index != i) continue;
        wire::setWireId(slots[i].initJobId(), slot.job);
        wire::setWireId(slots[i].initAllocationId(), slot.allocation);
      }
    }
  }

  capnp::Response<ResourceManagerGateway::SendSlotReportResults> report(
      const TestWorker& who, const RegistrationId& registration,
      const std::vector<Allocated>& allocated) {
    auto request = gateway(who).sendSlotReportRequest();
    request.setEpoch(kEpoch);
    wire::setWireId(request.initResourceId(), who.id);
    wire::setWireId(request.initRegistrationId(), registration);
    fillReport(request.initSlotReport(), who, allocated);
    return loop_.run(request.send());
  }

  // A heartbeat of `who` (all slots free except `allocated`), naming `registration` when set.
  capnp::Response<ResourceManagerGateway::HeartbeatResults> heartbeat(
      const TestWorker& who, std::optional<RegistrationId> registration = std::nullopt,
      const std::vector<Allocated>& allocated = {}) {
    auto request = gateway(who).heartbeatRequest();
    request.setEpoch(kEpoch);
    wire::setWireId(request.initResourceId(), who.id);
    auto payload = request.initPayload();
    fillReport(payload.initSlotReport(), who, allocated);
    if (registration) wire::setWireId(payload.initRegistrationId(), *registration);
    return loop_.run(request.send());
  }

  capnp::Response<ResourceManagerGateway::DisconnectResults> disconnect(
      const TestWorker& who, std::optional<RegistrationId> registration) {
    auto request = gateway(who).disconnectRequest();
    request.setEpoch(kEpoch);
    wire::setWireId(request.initResourceId(), who.id);
    request.setCause("SIGTERM");
    if (registration) wire::setWireId(request.initRegistrationId(), *registration);
    return loop_.run(request.send());
  }

  void registerJobMaster(const JobId& job) {
    auto request = jobMasterGateway_.registerJobMasterRequest();
    request.setEpoch(kEpoch);
    wire::setWireId(request.initJobId(), job);
    auto response = loop_.run(request.send());
    KJ_REQUIRE(!response.hasFailure(), response.getFailure().getMessage().cStr());
  }

  capnp::Response<ResourceManagerGateway::DeclareRequiredResourcesResults> declare(
      const JobId& job, uint32_t cpuMillis, uint32_t count) {
    auto request = jobMasterGateway_.declareRequiredResourcesRequest();
    request.setEpoch(kEpoch);
    wire::setWireId(request.initJobId(), job);
    auto requirement = request.initRequirements(1)[0];
    requirement.initProfile().setCpuMillis(cpuMillis);
    requirement.getProfile().setMemoryBytes(kGiB);
    requirement.setNumberOfRequiredSlots(count);
    return loop_.run(request.send());
  }

  // listTaskExecutors into a message of its own.
  struct Listed {
    capnp::MallocMessageBuilder message;
    capnp::List<wire::TaskExecutorInfo>::Reader workers;
  };
  std::unique_ptr<Listed> list() {
    auto listed = std::make_unique<Listed>();
    auto out =
        listed->message.getRoot<capnp::AnyPointer>().initAs<capnp::List<wire::TaskExecutorInfo>>(
            static_cast<uint32_t>(manager_->counts().workers));
    manager_->listTaskExecutors(out);
    listed->workers = out.asReader();
    return listed;
  }

  EventLoop loop_;
  kj::TimerImpl timer_{kj::origin<kj::TimePoint>()};
  LogEventSink events_;  // The event lines the tests read from the captured log.
  int64_t nowMs_ = 1700000100000;
  ResourceManagerCounters counters_;
  rpc::FencingCounters fencing_;
  std::unique_ptr<ResourceManager> manager_;
  ResourceManagerGateway::Client jobMasterGateway_ = nullptr;
  std::map<std::string, ResourceManagerGateway::Client> connections_;
  // The connections closed through their gates: (peer, reason).
  std::vector<std::pair<std::string, std::string>> closed_;
};

TEST_F(ResourceManagerTest, ARegisteredWorkerThatReportedIsListedWithItsSlots) {
  FakeWorker fake;
  const TestWorker who{.id = ResourceId::random()};
  auto registered = registerWorker(who, fake);
  ASSERT_FALSE(registered.hasFailure()) << registered.getFailure().getMessage().cStr();
  EXPECT_EQ(registered.getSuccess().getHeartbeatIntervalMs(), 2000u);
  EXPECT_EQ(registered.getSuccess().getHeartbeatTimeoutMs(), 10000u);
  EXPECT_EQ(counters_.registrations, 1u);
  const auto id = wire::idFromWire<RegistrationId>(registered.getSuccess().getRegistrationId());
  EXPECT_FALSE(id.isZero());

  const JobId job = JobId::random();
  const AllocationId allocation = AllocationId::random();
  nowMs_ += 5;
  ASSERT_FALSE(report(who, id, {{1, job, allocation}}).hasFailure());

  auto listed = list();
  ASSERT_EQ(listed->workers.size(), 1u);
  auto worker = listed->workers[0];
  EXPECT_EQ(wire::idFromWire<ResourceId>(worker.getRegistration().getResourceId()), who.id);
  EXPECT_EQ(std::string(worker.getRegistration().getHost().cStr()), "host-a");
  EXPECT_EQ(worker.getRegistration().getPid(), 100u);
  EXPECT_EQ(worker.getRegistration().getNumberOfSlots(), 2u);
  EXPECT_EQ(worker.getRegisteredAtMs(), 1700000100000);
  EXPECT_EQ(worker.getLastHeartbeatAtMs(), 1700000100005);
  ASSERT_EQ(worker.getSlots().size(), 2u);
  EXPECT_FALSE(worker.getSlots()[0].hasAllocationId());
  EXPECT_EQ(worker.getSlots()[1].getSlotId().getSlotIndex(), 1u);
  EXPECT_EQ(wire::idFromWire<AllocationId>(worker.getSlots()[1].getAllocationId()), allocation);
  EXPECT_EQ(wire::idFromWire<JobId>(worker.getSlots()[1].getJobId()), job);
  EXPECT_EQ(manager_->counts().total, 2u);
  EXPECT_EQ(manager_->counts().allocated, 1u);
}

// The term is over: the connections its workers registered over are closed, telling them so (a
// worker's linger on a leader it left ends then), and no other connection is.
TEST_F(ResourceManagerTest, TheConnectionsItsWorkersRegisteredOverCloseWhenTheTermEnds) {
  const TestWorker a{.id = ResourceId::random()};
  const TestWorker b{.id = ResourceId::random(), .host = "host-b"};
  FakeWorker fakeA;
  FakeWorker fakeB;
  registerAndReport(a, fakeA);
  registerAndReport(b, fakeB);
  auto onlyConnected = connect("a client that registered nothing");
  EXPECT_TRUE(closed_.empty());
  onlyConnected = nullptr;
  connections_.clear();
  jobMasterGateway_ = nullptr;
  manager_ = nullptr;
  ASSERT_EQ(closed_.size(), 2u);
  std::vector<std::string> peers;
  for (const auto& [peer, reason] : closed_) {
    peers.push_back(peer);
    EXPECT_EQ(reason, "the leader's term of epoch 7 is over");
  }
  const auto closedOn = [&peers](const std::string& host) {
    return std::count_if(peers.begin(), peers.end(), [&host](const std::string& peer) {
      return peer.find(" " + host + " ") != std::string::npos;
    });
  };
  EXPECT_EQ(closedOn("host-a"), 1);
  EXPECT_EQ(closedOn("host-b"), 1);
}

TEST_F(ResourceManagerTest, ARegistrationWithABadFieldIsRefusedNamingItAndNothingIsStored) {
  FakeWorker fake;
  TestWorker who{.id = ResourceId::random()};
  who.slots = 0;
  auto refused = registerWorker(who, fake);
  ASSERT_TRUE(refused.hasFailure());
  ASSERT_TRUE(refused.getFailure().isInvalidArgument());
  EXPECT_EQ(std::string(refused.getFailure().getInvalidArgument().getField().cStr()),
            "registration.numberOfSlots");

  who.slots = 2;
  auto request = registerRequest(who, fake);
  request.getRegistration().getTotalProfile().setCpuMillis(1500);  // Less than 2 x 1000.
  auto short_ = loop_.run(request.send());
  ASSERT_TRUE(short_.hasFailure());
  ASSERT_TRUE(short_.getFailure().isInvalidArgument());
  EXPECT_EQ(std::string(short_.getFailure().getInvalidArgument().getField().cStr()),
            "registration.totalProfile");

  // Slots whose sum does not fit the wire's 32 bits: a total that wrapped around is refused.
  who.slotCpuMillis = 0x80000000u;
  auto wrapped = registerWorker(who, fake);  // Total cpu: 2 x 2^31 wraps to 0.
  ASSERT_TRUE(wrapped.hasFailure());
  ASSERT_TRUE(wrapped.getFailure().isInvalidArgument());
  EXPECT_EQ(std::string(wrapped.getFailure().getInvalidArgument().getField().cStr()),
            "registration.totalProfile");

  who.slotCpuMillis = 1000;
  who.id = ResourceId();
  auto zero = registerWorker(who, fake);
  ASSERT_TRUE(zero.hasFailure());
  EXPECT_EQ(std::string(zero.getFailure().getInvalidArgument().getField().cStr()),
            "registration.resourceId");

  // A provider id that is not <provider>:<name> (the name becomes a provider's path component).
  who.id = ResourceId::random();
  for (const char* bad : {"process:..", "process:../../etc", "process", ":e1-1", "process:a/b"}) {
    auto request = registerRequest(who, fake);
    request.getRegistration().setProviderWorkerId(bad);
    auto refused = loop_.run(request.send());
    ASSERT_TRUE(refused.hasFailure()) << bad;
    ASSERT_TRUE(refused.getFailure().isInvalidArgument()) << bad;
    EXPECT_EQ(std::string(refused.getFailure().getInvalidArgument().getField().cStr()),
              "registration.providerWorkerId")
        << bad;
  }
  EXPECT_EQ(manager_->counts().workers, 0u);
  EXPECT_EQ(counters_.registrations, 0u);
}

TEST_F(ResourceManagerTest, AWorkerSilentForTheHeartbeatTimeoutIsRemovedCountedAndTold) {
  FakeWorker fake;
  const TestWorker who{.id = ResourceId::random()};
  registerAndReport(who, fake);
  manager_->start();

  advance(Duration(2000));
  EXPECT_EQ(fake.heartbeats, 1u) << "the ResourceManager heartbeats every interval";
  ASSERT_FALSE(heartbeat(who).hasFailure());  // The worker's answer, heard at t=2s.
  advance(Duration(2000));
  EXPECT_EQ(fake.heartbeats, 2u);

  advance(Duration(8000));  // t=12s: 10 s since the worker was heard, not more.
  EXPECT_EQ(manager_->counts().workers, 1u);
  EXPECT_EQ(counters_.heartbeatTimeouts, 0u);
  advance(Duration(2000));  // t=14s.
  EXPECT_EQ(manager_->counts().workers, 0u);
  EXPECT_EQ(manager_->counts().total, 0u);
  EXPECT_EQ(counters_.heartbeatTimeouts, 1u);
  EXPECT_EQ(fake.disconnects, std::vector<std::string>{"heartbeat timeout"});
  EXPECT_EQ(list()->workers.size(), 0u);

  auto late = heartbeat(who);
  ASSERT_TRUE(late.hasFailure());
  EXPECT_TRUE(late.getFailure().isNotRegistered()) << late.getFailure().getMessage().cStr();
  const size_t heartbeats = fake.heartbeats;
  advance(Duration(2000));
  EXPECT_EQ(fake.heartbeats, heartbeats) << "a removed worker is not heartbeated";
}

TEST_F(ResourceManagerTest, HeartbeatRoundsLateAfterAPauseDoNotCountAsSilence) {
  FakeWorker fake;
  const TestWorker who{.id = ResourceId::random()};
  registerAndReport(who, fake);
  manager_->start();
  advance(Duration(2000));
  ASSERT_FALSE(heartbeat(who).hasFailure());  // Heard at t=2s.
  // The ResourceManager's process was stopped for longer than heartbeat.timeout: its next round
  // runs late, and the worker's silence meanwhile is its own.
  advance(Duration(15000));
  EXPECT_EQ(manager_->counts().workers, 1u);
  EXPECT_EQ(counters_.heartbeatTimeouts, 0u);
  EXPECT_TRUE(fake.disconnects.empty());
  // Rounds on time again: the worker is heard and stays.
  advance(Duration(2000));
  ASSERT_FALSE(heartbeat(who).hasFailure());
  advance(Duration(2000));
  EXPECT_EQ(manager_->counts().workers, 1u);
  // Real silence afterwards still removes it.
  for (int i = 0; i < 5; ++i) advance(Duration(2000));
  EXPECT_EQ(manager_->counts().workers, 0u);
  EXPECT_EQ(counters_.heartbeatTimeouts, 1u);
}

TEST_F(ResourceManagerTest, ASecondLiveWorkerWithTheSameResourceIdIsRefusedNamingBoth) {
  FakeWorker holder;
  FakeWorker claimant;
  const TestWorker first{.id = ResourceId::random(), .host = "host-a", .pid = 100};
  const TestWorker second{.id = first.id, .host = "host-b", .pid = 200};
  const RegistrationId held = registerAndReport(first, holder);

  auto refused = registerWorker(second, claimant);
  ASSERT_TRUE(refused.hasFailure());
  EXPECT_TRUE(refused.getFailure().isAlreadyExists());
  EXPECT_EQ(std::string(refused.getFailure().getMessage().cStr()),
            "resource id " + first.id.toHex() +
                " is held by the live worker on host host-a pid 100; this registration comes "
                "from host host-b pid 200");
  EXPECT_EQ(holder.heartbeats, 1u) << "the holder was probed";
  EXPECT_EQ(counters_.registrationsRefused, 1u);
  auto listed = list();
  ASSERT_EQ(listed->workers.size(), 1u);
  EXPECT_EQ(std::string(listed->workers[0].getRegistration().getHost().cStr()), "host-a");
  EXPECT_FALSE(report(first, held, {}).hasFailure()) << "the holder's registration stands";
}

TEST_F(ResourceManagerTest, AHolderWhoseConnectionIsGoneIsReplaced) {
  FakeWorker holder;
  FakeWorker claimant;
  const TestWorker first{.id = ResourceId::random(), .host = "host-a", .pid = 100};
  const TestWorker second{.id = first.id, .host = "host-b", .pid = 200};
  const RegistrationId old = registerAndReport(first, holder);
  holder.mode = FakeWorker::Mode::kDisconnected;

  auto registered = registerWorker(second, claimant);
  ASSERT_FALSE(registered.hasFailure()) << registered.getFailure().getMessage().cStr();
  auto listed = list();
  ASSERT_EQ(listed->workers.size(), 1u);
  EXPECT_EQ(std::string(listed->workers[0].getRegistration().getHost().cStr()), "host-b");
  EXPECT_EQ(listed->workers[0].getSlots().size(), 0u) << "slots come from the new report";
  auto stale = report(first, old, {});
  ASSERT_TRUE(stale.hasFailure());
  EXPECT_TRUE(stale.getFailure().isNotRegistered());
  EXPECT_EQ(counters_.registrations, 2u);
}

// What the JobMasters hear of workers.
struct RecordingWorkerListener final : WorkerListener {
  void workerRestarted(const ResourceId& worker, const std::string& message) override {
    restarted.emplace_back(worker, message);
  }
  void workerReported(const ResourceId& worker) override { reported.push_back(worker); }
  std::vector<std::pair<ResourceId, std::string>> restarted;
  std::vector<ResourceId> reported;
};

TEST_F(ResourceManagerTest, JobMastersHearOfAWorkerRestartedOnItsDataDirectoryAndOfFirstReports) {
  RecordingWorkerListener heard;
  manager_->setWorkerListener(&heard);
  FakeWorker killed;
  FakeWorker restarted;
  // The same host and resource id, another process: a restart on the same data directory.
  const TestWorker first{.id = ResourceId::random(), .host = "host-a", .pid = 100};
  const TestWorker second{.id = first.id, .host = "host-a", .pid = 101};
  registerAndReport(first, killed);
  EXPECT_EQ(heard.reported, std::vector<ResourceId>{first.id});
  heartbeat(first);  // Not a first report.
  EXPECT_EQ(heard.reported.size(), 1u);
  EXPECT_TRUE(heard.restarted.empty());
  EXPECT_FALSE(manager_->hasReported(ResourceId::random()));
  EXPECT_TRUE(manager_->hasReported(first.id));

  killed.mode = FakeWorker::Mode::kDisconnected;
  auto registered = registerWorker(second, restarted);
  ASSERT_FALSE(registered.hasFailure()) << registered.getFailure().getMessage().cStr();
  ASSERT_EQ(heard.restarted.size(), 1u);
  EXPECT_EQ(heard.restarted[0].first, first.id);
  EXPECT_EQ(heard.restarted[0].second,
            "worker " + first.id.toHex() +
                " restarted (host host-a pid 101 replaces pid 100): its attempts ended with its "
                "previous process");
  // Told before the new registration reported: its slots are not the worker's word yet.
  EXPECT_FALSE(manager_->hasReported(first.id));
  const auto id = wire::idFromWire<RegistrationId>(registered.getSuccess().getRegistrationId());
  ASSERT_FALSE(report(second, id, {}).hasFailure());
  EXPECT_EQ(heard.reported, (std::vector<ResourceId>{first.id, first.id}));
  EXPECT_TRUE(manager_->hasReported(first.id));

  // The same process registering again (a lost connection) keeps its tasks: no restart.
  restarted.mode = FakeWorker::Mode::kSilent;  // Not probed: the same process is replaced.
  ASSERT_FALSE(registerWorker(second, restarted).hasFailure());
  EXPECT_EQ(heard.restarted.size(), 1u);
  manager_->setWorkerListener(nullptr);
}

TEST_F(ResourceManagerTest, AHolderThatDoesNotAnswerWithinTheCallTimeoutIsReplaced) {
  FakeWorker holder;
  FakeWorker claimant;
  const TestWorker first{.id = ResourceId::random(), .host = "host-a", .pid = 100};
  const TestWorker second{.id = first.id, .host = "host-b", .pid = 200};
  registerAndReport(first, holder);
  holder.mode = FakeWorker::Mode::kSilent;

  auto pending = registerRequest(second, claimant).send();
  settle();
  EXPECT_FALSE(pending.poll(loop_.waitScope())) << "waits for the probe";
  advance(Duration(1000));
  ASSERT_TRUE(pending.poll(loop_.waitScope()));
  auto registered = pending.wait(loop_.waitScope());
  ASSERT_FALSE(registered.hasFailure()) << registered.getFailure().getMessage().cStr();
  EXPECT_EQ(manager_->slotManager().worker(first.id)->registration.host, "host-b");
}

// Worker A was stopped, expired from the probe, and B took its resource id; A wakes up and
// answers a queued heartbeat, then sends disconnect on SIGTERM: neither touches B.
TEST_F(ResourceManagerTest, AHeartbeatOrDisconnectOfAReplacedRegistrationLeavesTheNewOne) {
  FakeWorker holder;
  FakeWorker claimant;
  const TestWorker first{.id = ResourceId::random(), .host = "host-a", .pid = 100};
  const TestWorker second{.id = first.id, .host = "host-b", .pid = 200};
  const RegistrationId old = registerAndReport(first, holder);
  holder.mode = FakeWorker::Mode::kDisconnected;
  const RegistrationId fresh = registerAndReport(second, claimant);

  auto stale = heartbeat(first, old, {{0, JobId::random(), AllocationId::random()}});
  ASSERT_TRUE(stale.hasFailure());
  EXPECT_TRUE(stale.getFailure().isNotRegistered()) << stale.getFailure().getMessage().cStr();
  EXPECT_EQ(manager_->counts().allocated, 0u) << "the replaced registration's slots are ignored";

  auto gone = disconnect(first, old);
  ASSERT_TRUE(gone.hasFailure());
  EXPECT_TRUE(gone.getFailure().isNotRegistered()) << gone.getFailure().getMessage().cStr();
  ASSERT_NE(manager_->slotManager().worker(first.id), nullptr);
  EXPECT_EQ(manager_->slotManager().worker(first.id)->registrationId, fresh);

  EXPECT_FALSE(heartbeat(second, fresh).hasFailure());
  EXPECT_FALSE(heartbeat(second).hasFailure()) << "an older worker's heartbeat names no id";
  EXPECT_FALSE(disconnect(second, fresh).hasFailure());
  EXPECT_EQ(manager_->counts().workers, 0u);
}

// Two newcomers B and C claim the id of dead holder A at once: both probes of A fail, B is
// accepted, and C then finds live B holding the id, not A: it is refused, not B replaced.
TEST_F(ResourceManagerTest, TwoNewcomersProbingTheSameDeadHolderDoNotReplaceEachOther) {
  FakeWorker dead;
  FakeWorker b;
  FakeWorker c;
  const TestWorker holder{.id = ResourceId::random(), .host = "host-a", .pid = 100};
  const TestWorker first{.id = holder.id, .host = "host-b", .pid = 200};
  const TestWorker second{.id = holder.id, .host = "host-c", .pid = 300};
  registerAndReport(holder, dead);
  dead.mode = FakeWorker::Mode::kSilent;

  auto fromB = registerRequest(first, b).send();
  auto fromC = registerRequest(second, c).send();
  settle();
  advance(Duration(1000));
  auto acceptedB = fromB.wait(loop_.waitScope());
  ASSERT_FALSE(acceptedB.hasFailure()) << acceptedB.getFailure().getMessage().cStr();
  auto refusedC = fromC.wait(loop_.waitScope());
  ASSERT_TRUE(refusedC.hasFailure()) << "C replaced live B without probing it";
  EXPECT_TRUE(refusedC.getFailure().isAlreadyExists()) << refusedC.getFailure().getMessage().cStr();
  EXPECT_EQ(manager_->slotManager().worker(holder.id)->registration.host, "host-b");
  EXPECT_EQ(b.heartbeats, 1u) << "B was probed";
  EXPECT_EQ(counters_.registrationsRefused, 1u);
}

TEST_F(ResourceManagerTest, TheSameProcessRegisteringAgainReplacesItsOldRegistration) {
  FakeWorker fake;
  const TestWorker who{.id = ResourceId::random()};
  const RegistrationId old = registerAndReport(who, fake);
  fake.mode = FakeWorker::Mode::kSilent;  // Not probed: it would hang here.
  auto again = registerWorker(who, fake);
  ASSERT_FALSE(again.hasFailure()) << again.getFailure().getMessage().cStr();
  const auto fresh = wire::idFromWire<RegistrationId>(again.getSuccess().getRegistrationId());
  EXPECT_NE(fresh, old);
  EXPECT_EQ(fake.heartbeats, 0u);

  auto stale = report(who, old, {});
  ASSERT_TRUE(stale.hasFailure());
  ASSERT_TRUE(stale.getFailure().isNotRegistered()) << stale.getFailure().getMessage().cStr();
  EXPECT_EQ(wire::idFromWire<ResourceId>(stale.getFailure().getNotRegistered().getTaskExecutor()),
            who.id);
  EXPECT_FALSE(report(who, fresh, {}).hasFailure());
  EXPECT_EQ(manager_->counts().workers, 1u);
}

TEST_F(ResourceManagerTest, ADeclaredRequirementIsRequestedFromAWorkerAndItsAllocationKept) {
  FakeWorker fake;
  const TestWorker who{.id = ResourceId::random()};
  const RegistrationId registration = registerAndReport(who, fake);
  const JobId job = JobId::random();
  registerJobMaster(job);
  auto declared = declare(job, 500, 1);
  ASSERT_FALSE(declared.hasFailure()) << declared.getFailure().getMessage().cStr();
  settle();

  ASSERT_EQ(fake.requested.size(), 1u);
  const auto& requested = fake.requested[0];
  EXPECT_EQ(requested.epoch, kEpoch);
  EXPECT_EQ(requested.worker, who.id);
  EXPECT_EQ(requested.index, 0u);
  EXPECT_EQ(requested.job, job);
  EXPECT_EQ(requested.cpuMillis, 1000u) << "the slot's profile, not the requirement's";
  EXPECT_EQ(manager_->counts().pending, 0u) << "the worker accepted: allocated for good";
  EXPECT_EQ(manager_->counts().allocated, 1u);

  // The worker's next report lists the allocation: it stays under its id.
  ASSERT_FALSE(report(who, registration, {{0, job, requested.allocation}}).hasFailure());
  auto listed = list();
  ASSERT_EQ(listed->workers.size(), 1u);
  auto slot = listed->workers[0].getSlots()[0];
  EXPECT_EQ(wire::idFromWire<AllocationId>(slot.getAllocationId()), requested.allocation);
  EXPECT_EQ(wire::idFromWire<JobId>(slot.getJobId()), job);
  EXPECT_EQ(fake.requested.size(), 1u) << "nothing more requested";
}

// Not at once, and not at another worker's heartbeat: at the refusing worker's next heartbeat
// (its answer to the round's heartbeat), when its report says the slot is free.
TEST_F(ResourceManagerTest, ARefusedRequestFreesTheSlotAndIsRetriedAtTheWorkersNextHeartbeat) {
  FakeWorker fake;
  FakeWorker full;
  fake.refuseRequests = true;
  const TestWorker who{.id = ResourceId::random(), .slots = 1};
  const TestWorker other{.id = ResourceId::random(), .host = "host-b", .slots = 1};
  registerAndReport(who, fake);
  const RegistrationId otherRegistration = registerAndReport(other, full);
  manager_->start();
  const JobId job = JobId::random();
  const JobId otherJob = JobId::random();
  // The other worker's slot is held by another job.
  ASSERT_FALSE(report(other, otherRegistration, {{0, otherJob, AllocationId::random()}})
                   .hasFailure());
  registerJobMaster(job);
  ASSERT_FALSE(declare(job, 1000, 1).hasFailure());
  settle();
  ASSERT_EQ(fake.requested.size(), 1u);
  EXPECT_EQ(manager_->counts().allocated, 1u);

  fake.refuseRequests = false;
  EXPECT_FALSE(heartbeat(other, otherRegistration,
                         {{0, otherJob, manager_->slotManager().worker(other.id)
                                             ->slots[0].allocation.value()}})
                   .hasFailure());
  advance(Duration(2000));
  EXPECT_EQ(fake.requested.size(), 1u) << "matched again before the worker's report";
  EXPECT_FALSE(heartbeat(who).hasFailure());
  settle();
  ASSERT_EQ(fake.requested.size(), 2u);
  EXPECT_NE(fake.requested[1].allocation, fake.requested[0].allocation);
  EXPECT_EQ(manager_->counts().allocated, 2u);
  EXPECT_EQ(manager_->counts().pending, 0u);
}

TEST_F(ResourceManagerTest, DisconnectingAJobMasterFreesItsAllocationsOnTheWorkers) {
  FakeWorker fake;
  const TestWorker who{.id = ResourceId::random()};
  registerAndReport(who, fake);
  const JobId job = JobId::random();
  registerJobMaster(job);
  ASSERT_FALSE(declare(job, 1000, 2).hasFailure());
  settle();
  ASSERT_EQ(fake.requested.size(), 2u);

  auto request = jobMasterGateway_.disconnectJobMasterRequest();
  request.setEpoch(kEpoch);
  wire::setWireId(request.initJobId(), job);
  request.setCause("job finished");
  ASSERT_FALSE(loop_.run(request.send()).hasFailure());
  settle();
  ASSERT_EQ(fake.freed.size(), 2u);
  EXPECT_EQ(manager_->counts().allocated, 0u);

  auto again = jobMasterGateway_.disconnectJobMasterRequest();
  again.setEpoch(kEpoch);
  wire::setWireId(again.initJobId(), job);
  auto unknown = loop_.run(again.send());
  ASSERT_TRUE(unknown.hasFailure());
  EXPECT_TRUE(unknown.getFailure().isNotRegistered());
}

TEST_F(ResourceManagerTest, JobMastersReachItInProcessAndTheMatchingRunsAfterTheCall) {
  FakeWorker fake;
  const TestWorker who{.id = ResourceId::random(), .host = "host-a"};
  registerAndReport(who, fake);
  JobMasterPort& port = *manager_;
  const JobId job = JobId::random();
  EXPECT_EQ(port.declareRequiredResources(job, {Requirement{Profile{1000, kGiB}, 1}}).error().error,
            SlotError::kNotRegistered);
  port.registerJobMaster(job);
  EXPECT_TRUE(port.declareRequiredResources(job, {Requirement{Profile{1000, kGiB}, 2}}).ok());
  EXPECT_EQ(port.slotCounts().allocated, 0u) << "matched inside the call";
  settle();
  ASSERT_EQ(fake.requested.size(), 2u);
  EXPECT_EQ(port.slotCounts().allocated, 2u);

  auto address = port.workerAddress(who.id);
  ASSERT_TRUE(address.has_value());
  EXPECT_EQ(address->host, "host-a");
  EXPECT_EQ(address->httpAddress, "host-a:8082");
  EXPECT_FALSE(port.workerAddress(ResourceId::random()).has_value());

  auto unfit = port.declareRequiredResources(job, {Requirement{Profile{64000, kGiB}, 1}});
  ASSERT_FALSE(unfit.ok());
  EXPECT_EQ(unfit.error().error, SlotError::kInvalidArgument);

  port.disconnectJobMaster(job, "job finished");
  settle();
  EXPECT_EQ(fake.freed.size(), 2u);
  EXPECT_EQ(port.slotCounts().allocated, 0u);
  port.disconnectJobMaster(job, "again");  // Unknown now: nothing.
  settle();
  EXPECT_EQ(fake.freed.size(), 2u);
}

TEST_F(ResourceManagerTest, ARequirementNoWorkerCanFitIsInvalidArgument) {
  FakeWorker fake;
  registerAndReport(TestWorker{.id = ResourceId::random()}, fake);
  const JobId job = JobId::random();
  registerJobMaster(job);
  auto refused = declare(job, 64000, 1);
  ASSERT_TRUE(refused.hasFailure());
  ASSERT_TRUE(refused.getFailure().isInvalidArgument()) << refused.getFailure().getMessage().cStr();
  EXPECT_EQ(std::string(refused.getFailure().getInvalidArgument().getField().cStr()),
            "requirements[0].profile");
  EXPECT_NE(std::string(refused.getFailure().getMessage().cStr()).find("cpu=64.000"),
            std::string::npos);
  settle();
  EXPECT_TRUE(fake.requested.empty());

  auto unregistered = declare(JobId::random(), 1000, 1);
  ASSERT_TRUE(unregistered.hasFailure());
  EXPECT_TRUE(unregistered.getFailure().isNotRegistered());
}

TEST_F(ResourceManagerTest, ADisconnectingWorkerIsRemovedAtOnce) {
  FakeWorker fake;
  const TestWorker who{.id = ResourceId::random()};
  registerAndReport(who, fake);
  auto request = gateway(who).disconnectRequest();
  request.setEpoch(kEpoch);
  wire::setWireId(request.initResourceId(), who.id);
  request.setCause("SIGTERM");
  ASSERT_FALSE(loop_.run(request.send()).hasFailure());
  EXPECT_EQ(manager_->counts().workers, 0u);
  EXPECT_TRUE(fake.disconnects.empty()) << "the worker left by itself; nothing to tell it";

  auto again = gateway(who).disconnectRequest();
  again.setEpoch(kEpoch);
  wire::setWireId(again.initResourceId(), who.id);
  auto unknown = loop_.run(again.send());
  ASSERT_TRUE(unknown.hasFailure());
  EXPECT_TRUE(unknown.getFailure().isNotRegistered());
}

TEST_F(ResourceManagerTest, ACallWithAnotherEpochIsFencedBeforeAnyHandler) {
  FakeWorker fake;
  auto request = registerRequest(TestWorker{.id = ResourceId::random()}, fake);
  request.setEpoch(kEpoch - 1);
  auto fenced = loop_.run(request.send());
  ASSERT_TRUE(fenced.hasFailure());
  EXPECT_TRUE(fenced.getFailure().isFencing());
  EXPECT_EQ(manager_->counts().workers, 0u);
}

// A worker's own connection to the master, as regent-worker has: the ResourceManagerGateway
// bootstrapped over a Cap'n Proto two-party connection, its TaskExecutorGateway passed back on it.
struct WorkerConnection {
  WorkerConnection(EventLoop& loop, ResourceManagerGateway::Client gateway) {
    auto pipe = loop.io().newTwoWayPipe();
    server = kj::heap<capnp::TwoPartyServer>(kj::mv(gateway));
    server->accept(kj::mv(pipe.ends[0]));
    stream = kj::mv(pipe.ends[1]);
    client = kj::heap<capnp::TwoPartyClient>(*stream);
    remote = client->bootstrap().castAs<ResourceManagerGateway>();
  }
  // The worker's end goes away (process killed): its TaskExecutorGateway is unreachable.
  void drop() {
    remote = nullptr;
    client = nullptr;
    stream = nullptr;
  }
  kj::Own<capnp::TwoPartyServer> server;
  kj::Own<kj::AsyncIoStream> stream;
  kj::Own<capnp::TwoPartyClient> client;
  ResourceManagerGateway::Client remote = nullptr;
};

TEST_F(ResourceManagerTest, AWorkerWhoseConnectionDroppedIsReplacedByANewProcess) {
  FakeWorker killed;
  FakeWorker restarted;
  const TestWorker first{.id = ResourceId::random(), .host = "host-a", .pid = 100};
  const TestWorker second{.id = first.id, .host = "host-a", .pid = 101};
  WorkerConnection old(loop_, connect("the killed process"));
  auto request = old.remote.registerTaskExecutorRequest();
  request.setEpoch(kEpoch);
  request.setRegistration(registerRequest(first, killed).getRegistration().asReader());
  request.setTaskExecutor(kj::heap<FakeTaskExecutor>(killed));
  auto registered = loop_.run(request.send());
  ASSERT_FALSE(registered.hasFailure()) << registered.getFailure().getMessage().cStr();

  // While its connection lives, a second process is refused: the holder answers over it.
  WorkerConnection fresh(loop_, connect("the restarted process"));
  auto claim = [&] {
    auto call = fresh.remote.registerTaskExecutorRequest();
    call.setEpoch(kEpoch);
    call.setRegistration(registerRequest(second, restarted).getRegistration().asReader());
    call.setTaskExecutor(kj::heap<FakeTaskExecutor>(restarted));
    return loop_.run(call.send());
  };
  auto refused = claim();
  ASSERT_TRUE(refused.hasFailure());
  EXPECT_TRUE(refused.getFailure().isAlreadyExists());
  EXPECT_EQ(killed.heartbeats, 1u);

  old.drop();
  settle();
  auto replaced = claim();
  ASSERT_FALSE(replaced.hasFailure()) << replaced.getFailure().getMessage().cStr();
  EXPECT_EQ(manager_->slotManager().worker(first.id)->registration.pid, 101u);
  EXPECT_EQ(counters_.registrations, 2u);
  EXPECT_EQ(counters_.registrationsRefused, 1u);
}

// The fields of every line of `log` holding `event`.
std::vector<EventFields> eventsIn(const std::string& log, std::string_view event) {
  std::vector<EventFields> found;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (auto fields = parseEventLine(line, event)) found.push_back(*fields);
  }
  return found;
}

TEST_F(ResourceManagerTest, EventLinesNameRegistrationsTheFirstReportOfEachAndRemovals) {
  std::ostringstream log;
  const auto original = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "captured", std::make_shared<spdlog::sinks::ostream_sink_st>(log)));
  KJ_DEFER(spdlog::set_default_logger(original));

  FakeWorker first;
  FakeWorker second;
  const TestWorker a{.id = ResourceId::random(), .slots = 2};
  const TestWorker b{.id = ResourceId::random(), .host = "host-b", .pid = 200, .slots = 3};
  const RegistrationId registration = registerAndReport(a, first);
  ASSERT_FALSE(
      report(a, registration, {{0, JobId::random(), AllocationId::random()}}).hasFailure());
  ASSERT_FALSE(heartbeat(a).hasFailure());
  registerAndReport(b, second);
  registerAndReport(b, second);  // The same process again: replaces its registration.

  auto registered = eventsIn(log.str(), "worker registered");
  ASSERT_EQ(registered.size(), 3u) << log.str();
  EXPECT_EQ(registered[0].getUint("epoch"), kEpoch);
  EXPECT_EQ(registered[0].get("resource_id"), a.id.toHex());
  EXPECT_EQ(registered[0].get("registration_id"), registration.toHex());
  EXPECT_EQ(registered[0].get("host"), "host-a");
  EXPECT_EQ(registered[0].getUint("pid"), 100u);
  EXPECT_EQ(registered[0].getUint("slots"), 2u);
  EXPECT_EQ(registered[0].get("replaced"), "false");
  EXPECT_EQ(registered[2].get("replaced"), "true");
  EXPECT_TRUE(registered[0].get("mono_us").has_value());
  EXPECT_TRUE(registered[0].get("wall_ms").has_value());

  auto reports = eventsIn(log.str(), "slot report");
  ASSERT_EQ(reports.size(), 3u) << "one per registration, not per report or heartbeat";
  EXPECT_EQ(reports[0].get("resource_id"), a.id.toHex());
  EXPECT_EQ(reports[0].getUint("slots"), 2u);
  EXPECT_EQ(reports[0].getUint("allocated"), 0u);
  EXPECT_EQ(reports[0].getUint("workers_reported"), 1u);
  EXPECT_EQ(reports[0].getUint("slots_total"), 2u);
  EXPECT_EQ(reports[1].getUint("workers_reported"), 2u);
  EXPECT_EQ(reports[1].getUint("slots_total"), 5u);
  EXPECT_EQ(reports[2].getUint("workers_reported"), 2u) << "the replaced registration left";

  auto removed = eventsIn(log.str(), "worker removed");
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].get("resource_id"), b.id.toHex());
  EXPECT_EQ(removed[0].get("reason"), "replaced by a new registration");
}

// ---- Worker identity (docs/security.md, "Worker identity") --------------------------------

// A heartbeat over `connection` naming `who` (every slot free), and its answer.
capnp::Response<ResourceManagerGateway::HeartbeatResults> heartbeatOver(
    EventLoop& loop, ResourceManagerGateway::Client connection, const TestWorker& who) {
  auto request = connection.heartbeatRequest();
  request.setEpoch(kEpoch);
  wire::setWireId(request.initResourceId(), who.id);
  auto report = request.initPayload().initSlotReport();
  wire::setWireId(report.initResourceId(), who.id);
  report.initSlots(0);
  return loop.run(request.send());
}

capnp::Response<ResourceManagerGateway::DisconnectResults> disconnectOver(
    EventLoop& loop, ResourceManagerGateway::Client connection, const TestWorker& who) {
  auto request = connection.disconnectRequest();
  request.setEpoch(kEpoch);
  wire::setWireId(request.initResourceId(), who.id);
  request.setCause("SIGTERM");
  return loop.run(request.send());
}

bool permissionDenied(const capnp::Response<ResourceManagerGateway::HeartbeatResults>& r) {
  return r.hasFailure() && r.getFailure().isPermissionDenied();
}

TEST_F(ResourceManagerTest, AConnectionSpeaksOnlyForTheWorkerItRegistered) {
  captureLog();
  FakeWorker a;
  FakeWorker b;
  const TestWorker first{.id = ResourceId::random(), .host = "host-a", .pid = 100};
  const TestWorker second{.id = ResourceId::random(), .host = "host-b", .pid = 200};
  const JobId job = JobId::random();
  const AllocationId allocation = AllocationId::random();
  const RegistrationId registration = registerAndReport(first, a);
  ASSERT_FALSE(report(first, registration, {{1, job, allocation}}).hasFailure());
  registerAndReport(second, b);

  // The second worker's connection names the first: an empty report, a report, a disconnect.
  auto heartbeat = heartbeatOver(loop_, gateway(second), first);
  ASSERT_TRUE(permissionDenied(heartbeat)) << heartbeat.getFailure().getMessage().cStr();
  EXPECT_EQ(std::string(heartbeat.getFailure().getMessage().cStr()),
            "ResourceManagerGateway.heartbeat refused: this connection speaks for worker " +
                second.id.toHex() + ", not for " + first.id.toHex());
  auto reporting = gateway(second).sendSlotReportRequest();
  reporting.setEpoch(kEpoch);
  wire::setWireId(reporting.initResourceId(), first.id);
  wire::setWireId(reporting.initRegistrationId(), registration);
  fillReport(reporting.initSlotReport(), first, {});
  auto reported = loop_.run(reporting.send());
  ASSERT_TRUE(reported.hasFailure());
  EXPECT_TRUE(reported.getFailure().isPermissionDenied())
      << reported.getFailure().getMessage().cStr();
  auto disconnected = disconnectOver(loop_, gateway(second), first);
  ASSERT_TRUE(disconnected.hasFailure());
  EXPECT_TRUE(disconnected.getFailure().isPermissionDenied())
      << disconnected.getFailure().getMessage().cStr();

  // Nothing changed: the first worker stays, with its allocation.
  const Worker* held = manager_->slotManager().worker(first.id);
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(held->registrationId, registration);
  ASSERT_EQ(held->slots.size(), 2u);
  EXPECT_EQ(held->slots[1].allocation, allocation);
  EXPECT_EQ(counters_.identityRefusals.total(), 3u);
  EXPECT_EQ(counters_.identityRefusals.byMethod().at("ResourceManagerGateway.heartbeat"), 1u);
  EXPECT_EQ(counters_.identityRefusals.byMethod().at("ResourceManagerGateway.sendSlotReport"), 1u);
  EXPECT_EQ(counters_.identityRefusals.byMethod().at("ResourceManagerGateway.disconnect"), 1u);
  // Each refusal is logged with both identities.
  const auto refusals = capturedEvents("worker identity refused");
  ASSERT_EQ(refusals.size(), 3u) << capturedLog();
  EXPECT_EQ(refusals[0].get("resource_id"), second.id.toHex());
  EXPECT_EQ(refusals[0].get("named"), first.id.toHex());
  EXPECT_EQ(refusals[0].get("method"), "ResourceManagerGateway.heartbeat");

  // Its own calls still pass.
  EXPECT_FALSE(heartbeatOver(loop_, gateway(first), first).hasFailure());
}

TEST_F(ResourceManagerTest, WorkerCallsOfAConnectionThatRegisteredNoWorkerAreRefused) {
  FakeWorker fake;
  const TestWorker who{.id = ResourceId::random()};
  registerAndReport(who, fake);
  auto stranger = connect("a stranger");
  auto heartbeat = heartbeatOver(loop_, stranger, who);
  ASSERT_TRUE(permissionDenied(heartbeat)) << heartbeat.getFailure().getMessage().cStr();
  EXPECT_NE(std::string(heartbeat.getFailure().getMessage().cStr()).find("registered no worker"),
            std::string::npos);
  auto disconnected = disconnectOver(loop_, stranger, who);
  ASSERT_TRUE(disconnected.hasFailure());
  EXPECT_TRUE(disconnected.getFailure().isPermissionDenied());
  EXPECT_NE(manager_->slotManager().worker(who.id), nullptr);
  EXPECT_EQ(counters_.identityRefusals.total(), 2u);
}

TEST_F(ResourceManagerTest, OneConnectionRegistersOneWorker) {
  FakeWorker fake;
  const TestWorker who{.id = ResourceId::random()};
  registerAndReport(who, fake);
  // The same connection registers another resource id.
  auto request = registerRequest(who, fake);
  const ResourceId other = ResourceId::random();
  wire::setWireId(request.getRegistration().initResourceId(), other);
  auto refused = loop_.run(request.send());
  ASSERT_TRUE(refused.hasFailure());
  EXPECT_TRUE(refused.getFailure().isPermissionDenied()) << refused.getFailure().getMessage().cStr();
  EXPECT_EQ(manager_->slotManager().worker(other), nullptr);
  EXPECT_EQ(manager_->counts().workers, 1u);
  // Registering its own resource id again is fine (after a notRegistered, say).
  auto again = registerWorker(who, fake);
  EXPECT_FALSE(again.hasFailure()) << again.getFailure().getMessage().cStr();
}

TEST_F(ResourceManagerTest, TheNewestRegistrationsConnectionOwnsTheIdentity) {
  FakeWorker fake;
  const TestWorker who{.id = ResourceId::random()};
  registerAndReport(who, fake);
  auto old = gateway(who);
  // The same process registers again over a new connection (it reconnected after a blip).
  auto fresh = connect("the reconnected worker");
  auto request = fresh.registerTaskExecutorRequest();
  request.setEpoch(kEpoch);
  request.setRegistration(registerRequest(who, fake).getRegistration().asReader());
  request.setTaskExecutor(kj::heap<FakeTaskExecutor>(fake));
  auto registered = loop_.run(request.send());
  ASSERT_FALSE(registered.hasFailure()) << registered.getFailure().getMessage().cStr();
  const auto current = wire::idFromWire<RegistrationId>(registered.getSuccess().getRegistrationId());

  // The old connection's calls are stale now: notRegistered (not counted), nothing removed.
  auto stale = heartbeatOver(loop_, old, who);
  ASSERT_TRUE(stale.hasFailure());
  EXPECT_TRUE(stale.getFailure().isNotRegistered()) << stale.getFailure().getMessage().cStr();
  auto gone = disconnectOver(loop_, old, who);
  ASSERT_TRUE(gone.hasFailure());
  EXPECT_TRUE(gone.getFailure().isNotRegistered()) << gone.getFailure().getMessage().cStr();
  ASSERT_NE(manager_->slotManager().worker(who.id), nullptr);
  EXPECT_EQ(manager_->slotManager().worker(who.id)->registrationId, current);
  EXPECT_EQ(counters_.identityRefusals.total(), 0u);
  EXPECT_FALSE(heartbeatOver(loop_, fresh, who).hasFailure());
}

// rpc.auth-tls.worker-name-is-resource-id: the certificate's common name is the only resource
// id its connection may register.
TEST_F(ResourceManagerTest, WithCertificateNamesAsResourceIdsAWorkerRegistersOnlyItsOwn) {
  ResourceManagerOptions options;
  options.requireCertificateResourceId = true;
  options.nowMs = [this] { return nowMs_; };
  jobMasterGateway_ = nullptr;
  connections_.clear();
  manager_ = std::make_unique<ResourceManager>(timer_, events_, kEpoch, counters_, options);
  FakeWorker fake;
  const TestWorker who{.id = ResourceId::random()};
  auto registerOver = [&](ResourceManagerGateway::Client connection) {
    auto request = connection.registerTaskExecutorRequest();
    request.setEpoch(kEpoch);
    request.setRegistration(registerRequest(who, fake).getRegistration().asReader());
    request.setTaskExecutor(kj::heap<FakeTaskExecutor>(fake));
    return loop_.run(request.send());
  };
  auto noCertificate = registerOver(connect("a secret holder"));
  ASSERT_TRUE(noCertificate.hasFailure());
  EXPECT_TRUE(noCertificate.getFailure().isPermissionDenied())
      << noCertificate.getFailure().getMessage().cStr();
  auto anotherName = registerOver(connect("another worker", ResourceId::random().toHex()));
  ASSERT_TRUE(anotherName.hasFailure());
  EXPECT_TRUE(anotherName.getFailure().isPermissionDenied())
      << anotherName.getFailure().getMessage().cStr();
  EXPECT_EQ(manager_->counts().workers, 0u);
  EXPECT_EQ(counters_.identityRefusals.byMethod().at("ResourceManagerGateway.registerTaskExecutor"),
            2u);
  auto own = registerOver(connect("the worker", who.id.toHex()));
  EXPECT_FALSE(own.hasFailure()) << own.getFailure().getMessage().cStr();
  EXPECT_EQ(manager_->counts().workers, 1u);
}

}  // namespace
}  // namespace regent::resourcemanager

// MasterBootstrap behind its fenced endpoint: a standby answers notLeader naming the leader, a
// leader refuses another epoch, and both checks run before any handler; the ResourceManager
// gateway is handed out as soon as the term has one, before the term is ready; a job's JobMaster
// only once the term is ready, and notFound for a job the term does not run.
#include "services/master/master_bootstrap.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/event_loop.h"
#include "rpc/wire_ids.h"

namespace regent::master {
namespace {

class FakeBootstrapHost final : public MasterBootstrapHost {
 public:
  FakeBootstrapHost() { self_.masterId = "self"; }
  ~FakeBootstrapHost() noexcept override = default;
  const leader::ContenderInfo& self() const override { return self_; }
  std::optional<leader::LeaderInfo> knownLeader() const override { return leader; }
  uint64_t leadingEpoch() const override { return epoch; }
  kj::Maybe<wire::DispatcherGateway::Client> dispatcherGateway() override { return nullptr; }
  kj::Maybe<wire::ResourceManagerGateway::Client> resourceManagerGateway(
      kj::Own<resourcemanager::WorkerBinding> caller) override {
    callers.push_back(caller.get());
    return resourceManager;
  }
  LeaderTerm::JobMasterLookup jobMaster(const JobId& job,
                                        kj::Own<resourcemanager::WorkerBinding> caller) override {
    callers.push_back(caller.get());
    asked.push_back(job);
    LeaderTerm::JobMasterLookup lookup;
    lookup.ready = termReady;
    if (termReady && job == runningJob) lookup.gateway = jobMasterGateway;
    return lookup;
  }
  // Waits while `holdReady`, until readyNow(); resolves at once otherwise.
  kj::Promise<void> whenTermReady() override {
    if (!holdReady) return kj::READY_NOW;
    auto paf = kj::newPromiseAndFulfiller<void>();
    readyWaiters.push_back(kj::mv(paf.fulfiller));
    return kj::mv(paf.promise);
  }
  void readyNow() {
    termReady = true;
    for (auto& waiter : readyWaiters) waiter->fulfill();
    readyWaiters.clear();
  }
  kj::Promise<Status> handOverForCaller() override {
    ++handOvers;
    return handOverOutcome;
  }

  leader::ContenderInfo self_;
  std::optional<leader::LeaderInfo> leader;
  uint64_t epoch = 0;
  int handOvers = 0;
  Status handOverOutcome;
  kj::Maybe<wire::ResourceManagerGateway::Client> resourceManager;
  bool termReady = false;
  JobId runningJob = JobId::random();
  wire::JobMasterGateway::Client jobMasterGateway = nullptr;
  std::vector<JobId> asked;
  // The worker identity each gateway was asked for (the connection's: compared, never used).
  std::vector<const resourcemanager::WorkerBinding*> callers;
  bool holdReady = false;
  std::vector<kj::Own<kj::PromiseFulfiller<void>>> readyWaiters;
};

// Counts the worker heartbeats that reached it.
class CountingJobMaster final : public wire::JobMasterGateway::Server {
 public:
  explicit CountingJobMaster(int& reached) : reached_(reached) {}
  kj::Promise<void> heartbeat(HeartbeatContext) override {
    ++reached_;
    return kj::READY_NOW;
  }

 private:
  int& reached_;
};

// Counts the worker calls that reached it.
class CountingResourceManager final : public wire::ResourceManagerGateway::Server {
 public:
  explicit CountingResourceManager(int& reached) : reached_(reached) {}
  kj::Promise<void> heartbeat(HeartbeatContext) override {
    ++reached_;
    return kj::READY_NOW;
  }

 private:
  int& reached_;
};

class MasterBootstrapTest : public ::testing::Test {
 protected:
  ~MasterBootstrapTest() noexcept override = default;

  capnp::Response<wire::MasterBootstrap::HandOverResults> handOver(uint64_t epoch) {
    auto request = bootstrap_.handOverRequest();
    request.setEpoch(epoch);
    return loop_.run(request.send());
  }

  EventLoop loop_;
  FakeBootstrapHost host_;
  rpc::FencingCounters counters_;
  wire::MasterBootstrap::Client bootstrap_ = serveMasterBootstrap(host_, counters_);
};

TEST_F(MasterBootstrapTest, AStandbyAnswersNotLeaderNamingTheLeaderWithoutHandingOver) {
  leader::LeaderInfo other;
  other.epoch = 3;
  other.masterId = "other";
  other.rpcAddress = "10.0.0.2:7000";
  host_.leader = other;
  auto response = handOver(3);
  ASSERT_TRUE(response.hasFailure());
  ASSERT_TRUE(response.getFailure().isNotLeader());
  EXPECT_EQ(response.getFailure().getNotLeader().getLeader().getEpoch(), 3u);
  EXPECT_EQ(std::string(response.getFailure().getMessage().cStr()),
            "master self does not lead; the leader is other at 10.0.0.2:7000 (epoch 3)");
  EXPECT_EQ(host_.handOvers, 0);
  EXPECT_EQ(counters_.rejected("MasterBootstrap.handOver"), 1u);

  host_.leader.reset();
  auto unknown = loop_.run([&] {
    auto request = bootstrap_.dispatcherRequest();
    request.setEpoch(3);
    return request.send();
  }());
  ASSERT_TRUE(unknown.hasFailure());
  EXPECT_TRUE(unknown.getFailure().getNotLeader().isUnknown());
}

TEST_F(MasterBootstrapTest, ALeaderRefusesAnotherEpochAndHandsOverForItsOwn) {
  host_.epoch = 5;
  auto stale = handOver(4);
  ASSERT_TRUE(stale.hasFailure());
  ASSERT_TRUE(stale.getFailure().isFencing());
  EXPECT_EQ(stale.getFailure().getFencing().getExpected(), 5u);
  EXPECT_EQ(stale.getFailure().getFencing().getReceived(), 4u);
  EXPECT_EQ(std::string(stale.getFailure().getMessage().cStr()),
            "called with epoch 4, this master leads epoch 5");
  EXPECT_EQ(host_.handOvers, 0);

  EXPECT_FALSE(handOver(5).hasFailure());
  EXPECT_EQ(host_.handOvers, 1);
  EXPECT_TRUE(loop_.run(bootstrap_.leaderInfoRequest().send()).hasContender());
}

TEST_F(MasterBootstrapTest, AHandOverThatDidNotApplyIsAFailureNotASuccess) {
  host_.epoch = 5;
  host_.handOverOutcome = Error::retryable("the hand-over transaction failed with ZCONNECTIONLOSS");
  auto response = handOver(5);
  EXPECT_EQ(host_.handOvers, 1);
  ASSERT_TRUE(response.hasFailure());
  EXPECT_TRUE(response.getFailure().isFailedPrecondition());
  EXPECT_EQ(std::string(response.getFailure().getMessage().cStr()),
            "the hand-over of epoch 5 did not apply: the hand-over transaction failed with "
            "ZCONNECTIONLOSS");
}

TEST_F(MasterBootstrapTest, ALeaderWhoseStoresAreOpeningAnswersUnavailableForItsDispatcher) {
  host_.epoch = 5;
  auto request = bootstrap_.dispatcherRequest();
  request.setEpoch(5);
  auto response = loop_.run(request.send());
  ASSERT_TRUE(response.hasFailure());
  EXPECT_TRUE(response.getFailure().isUnavailable());
}

TEST_F(MasterBootstrapTest, TheResourceManagerIsHandedOutByTheLeaderOnlyForItsEpoch) {
  auto resourceManager = [&](uint64_t epoch) {
    auto request = bootstrap_.resourceManagerRequest();
    request.setEpoch(epoch);
    return loop_.run(request.send());
  };
  leader::LeaderInfo other;
  other.epoch = 3;
  other.masterId = "other";
  other.rpcAddress = "10.0.0.2:7000";
  host_.leader = other;
  auto standby = resourceManager(3);
  ASSERT_TRUE(standby.hasFailure());
  EXPECT_TRUE(standby.getFailure().isNotLeader());
  EXPECT_EQ(counters_.rejected("MasterBootstrap.resourceManager"), 1u);

  host_.epoch = 5;
  auto stale = resourceManager(4);
  ASSERT_TRUE(stale.hasFailure());
  EXPECT_TRUE(stale.getFailure().isFencing());
  EXPECT_EQ(stale.getFailure().getFencing().getExpected(), 5u);

  // A term without its ResourceManager yet.
  auto early = resourceManager(5);
  ASSERT_TRUE(early.hasFailure());
  ASSERT_TRUE(early.getFailure().isUnavailable());
  EXPECT_EQ(std::string(early.getFailure().getMessage().cStr()),
            "the leader of epoch 5 has not started its resource manager yet; retry shortly");

  // The term serves it before it is ready (the Dispatcher may still recover).
  rpc::LeadershipTerm term(5, counters_);
  int reached = 0;
  host_.resourceManager = term.serve<wire::ResourceManagerGateway>(
      kj::heap<CountingResourceManager>(reached), rpc::LeadershipTerm::Readiness::kImmediately);
  auto served = resourceManager(5);
  ASSERT_FALSE(served.hasFailure()) << served.getFailure().getMessage().cStr();
  auto heartbeat = served.getResourceManager().heartbeatRequest();
  heartbeat.setEpoch(5);
  EXPECT_FALSE(loop_.run(heartbeat.send()).hasFailure());
  EXPECT_EQ(reached, 1);
  EXPECT_FALSE(term.ready());
}

TEST_F(MasterBootstrapTest, AJobMasterIsHandedOutOnlyByAReadyTermAndOnlyForAJobItRuns) {
  auto jobMaster = [&](uint64_t epoch, const JobId& job) {
    auto request = bootstrap_.jobMasterRequest();
    request.setEpoch(epoch);
    wire::setWireId(request.initJobId(), job);
    return loop_.run(request.send());
  };
  // A standby, and a leader called with another epoch, refuse before the host is asked.
  auto standby = jobMaster(3, host_.runningJob);
  ASSERT_TRUE(standby.hasFailure());
  EXPECT_TRUE(standby.getFailure().isNotLeader());
  host_.epoch = 5;
  auto stale = jobMaster(4, host_.runningJob);
  ASSERT_TRUE(stale.hasFailure());
  EXPECT_TRUE(stale.getFailure().isFencing());
  EXPECT_TRUE(host_.asked.empty());

  // Still recovering once the host's wait is over: unavailable, so that a worker keeps its
  // slots and asks again.
  auto recovering = jobMaster(5, host_.runningJob);
  ASSERT_TRUE(recovering.hasFailure());
  ASSERT_TRUE(recovering.getFailure().isUnavailable());
  EXPECT_EQ(std::string(recovering.getFailure().getMessage().cStr()),
            "the leader of epoch 5 is still recovering its jobs; retry shortly");

  int reached = 0;
  host_.jobMasterGateway = kj::heap<CountingJobMaster>(reached);
  host_.termReady = true;
  const JobId other = JobId::random();
  auto unknown = jobMaster(5, other);
  ASSERT_TRUE(unknown.hasFailure());
  ASSERT_TRUE(unknown.getFailure().isNotFound());
  EXPECT_EQ(std::string(unknown.getFailure().getMessage().cStr()),
            "job " + other.toHex() + " is not running under the leader of epoch 5");

  auto found = jobMaster(5, host_.runningJob);
  ASSERT_FALSE(found.hasFailure()) << found.getFailure().getMessage().cStr();
  auto heartbeat = found.getJobMaster().heartbeatRequest();
  heartbeat.setEpoch(5);
  loop_.run(heartbeat.send());
  EXPECT_EQ(reached, 1);
  // The recovering call asked before and after the wait.
  EXPECT_EQ(host_.asked, (std::vector<JobId>{host_.runningJob, host_.runningJob, other,
                                             host_.runningJob}));
}

TEST_F(MasterBootstrapTest, AJobMasterAskedForDuringRecoveryIsHandedOutOnceTheTermIsReady) {
  host_.epoch = 5;
  host_.holdReady = true;
  int reached = 0;
  host_.jobMasterGateway = kj::heap<CountingJobMaster>(reached);
  auto request = bootstrap_.jobMasterRequest();
  request.setEpoch(5);
  wire::setWireId(request.initJobId(), host_.runningJob);
  auto answer = request.send();
  loop_.waitScope().poll();
  EXPECT_FALSE(answer.poll(loop_.waitScope()));  // Waits for the term.
  ASSERT_EQ(host_.readyWaiters.size(), 1u);

  host_.readyNow();
  auto found = answer.wait(loop_.waitScope());
  ASSERT_FALSE(found.hasFailure()) << found.getFailure().getMessage().cStr();
  auto heartbeat = found.getJobMaster().heartbeatRequest();
  heartbeat.setEpoch(5);
  loop_.run(heartbeat.send());
  EXPECT_EQ(reached, 1);
}

TEST_F(MasterBootstrapTest, AJobMasterCallThatWaitedOutATermThatEndedIsUnavailable) {
  host_.epoch = 5;
  host_.holdReady = true;
  auto request = bootstrap_.jobMasterRequest();
  request.setEpoch(5);
  wire::setWireId(request.initJobId(), host_.runningJob);
  auto answer = request.send();
  loop_.waitScope().poll();
  host_.epoch = 0;  // Deposed while the call waited.
  host_.readyNow();
  auto ended = answer.wait(loop_.waitScope());
  ASSERT_TRUE(ended.hasFailure());
  ASSERT_TRUE(ended.getFailure().isUnavailable());
  EXPECT_EQ(std::string(ended.getFailure().getMessage().cStr()),
            "the leader of epoch 5 no longer leads; find the leader again");
}

}  // namespace
}  // namespace regent::master

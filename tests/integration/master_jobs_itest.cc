// Jobs survive failover, over real RPC to real regent-master processes: 50 jobs submitted to the
// leader's fenced Dispatcher gateway are listed by the next leader after a SIGKILL or a SIGSTOP
// past the session, a job cancelled before the failover is not resurrected, a dirty job result
// left by a dead leader is cleaned up and its job not re-run, stale epochs are fenced, and rogue
// clients are dropped.
#include <gtest/gtest.h>
#include <kj/debug.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "common/host_port.h"
#include "common/ids.h"
#include "conf/config.h"
#include "ha/zookeeper_client.h"
#include "rpc/rpc_client.h"
#include "rpc/rpc_options.h"
#include "rpc/schema/gateways.capnp.h"
#include "rpc/wire_ids.h"
#include "store/store_services.h"
#include "tests/fixtures/job_graph_test_util.h"
#include "tests/fixtures/wait_test_util.h"
#include "tests/fixtures/zookeeper_server.h"
#include "tests/ha/zookeeper_client_test_util.h"
#include "tests/integration/master_cluster_test_util.h"

namespace regent::testing {
namespace {

using Kind = MasterEvent::Kind;

constexpr Duration kStartTimeout{60000};
constexpr int kJobs = 50;

// The address a master's RPC server listens on, from its "rpc listening on" line.
std::string rpcAddressOf(MasterCluster& cluster, size_t slot) {
  auto address = masterRpcAddress(cluster, slot, kStartTimeout);
  KJ_REQUIRE(address.ok(), address.error().message);
  return address.value();
}

class MasterJobsTest : public ::testing::Test {
 protected:
  ~MasterJobsTest() noexcept override = default;

  // A client of the master in `slot`, and the epoch it serves (after it logged SERVING).
  struct Leader {
    kj::Own<rpc::RpcClient> client;
    wire::MasterBootstrap::Client bootstrap = nullptr;
    uint64_t epoch = 0;
  };

  Leader connect(MasterCluster& cluster, size_t slot, uint64_t epoch) {
    auto serving = cluster.waitForEvent(
        slot, [&](const MasterEvent& e) { return e.kind == Kind::kServing && e.epoch == epoch; },
        kStartTimeout);
    KJ_REQUIRE(serving.ok(), serving.error().message, cluster.describe());
    Leader leader;
    leader.client = kj::heap<rpc::RpcClient>(loop_.io().getNetwork(), loop_.timer(),
                                             rpcAddressOf(cluster, slot), rpc::RpcOptions{});
    leader.bootstrap = loop_.run(leader.client->bootstrapAs<wire::MasterBootstrap>());
    auto info = loop_.run(leader.bootstrap.leaderInfoRequest().send());
    KJ_REQUIRE(info.getLeading());
    leader.epoch = info.getLeader().getLeader().getEpoch();
    KJ_REQUIRE(leader.epoch == epoch, leader.epoch, epoch);
    return leader;
  }

  wire::DispatcherGateway::Client dispatcher(Leader& leader, uint64_t epoch) {
    auto request = leader.bootstrap.dispatcherRequest();
    request.setEpoch(epoch);
    auto response = loop_.run(request.send());
    KJ_REQUIRE(!response.hasFailure(), response.getFailure().getMessage().cStr());
    return response.getDispatcher();
  }

  // Submits a one-vertex job named `name` (the leader serves: connect() waited for SERVING).
  JobId submit(wire::DispatcherGateway::Client& gateway, uint64_t epoch, const std::string& name) {
    const JobId id = JobId::random();
    auto request = gateway.submitJobRequest();
    request.setEpoch(epoch);
    fillJobGraph(request.initJobGraph(), id, {.name = name});
    auto response = loop_.run(request.send());
    KJ_REQUIRE(!response.hasFailure(), name, response.getFailure().getMessage().cStr());
    return id;
  }

  // Submits kJobs jobs "job-0".. and cancels "job-3"; returns what a listing must show then.
  std::map<std::string, wire::JobState> submitJobsAndCancelOne(
      wire::DispatcherGateway::Client& gateway, uint64_t epoch) {
    std::map<std::string, wire::JobState> expected;
    std::vector<JobId> ids;
    for (int i = 0; i < kJobs; ++i) {
      const std::string name = "job-" + std::to_string(i);
      ids.push_back(submit(gateway, epoch, name));
      expected[ids.back().toHex() + " " + name] = wire::JobState::CREATED;
    }
    auto cancel = gateway.cancelJobRequest();
    cancel.setEpoch(epoch);
    wire::setWireId(cancel.initJobId(), ids[3]);
    auto canceled = loop_.run(cancel.send());
    KJ_REQUIRE(!canceled.hasFailure(), canceled.getFailure().getMessage().cStr());
    expected[ids[3].toHex() + " job-3"] = wire::JobState::CANCELED;
    return expected;
  }

  // Every job as "<id hex> <name>" -> state.
  std::map<std::string, wire::JobState> list(wire::DispatcherGateway::Client& gateway,
                                             uint64_t epoch) {
    auto request = gateway.listJobsRequest();
    request.setEpoch(epoch);
    auto response = loop_.run(request.send());
    KJ_REQUIRE(!response.hasFailure(), response.getFailure().getMessage().cStr());
    std::map<std::string, wire::JobState> jobs;
    for (auto job : response.getJobs()) {
      jobs[wire::idFromWire<JobId>(job.getJobId()).toHex() + " " +
           job.getName().cStr()] = job.getState();
    }
    return jobs;
  }

  EventLoop loop_;
};

TEST_F(MasterJobsTest, JobsSubmittedToALeaderAreListedByTheNextAfterASigkill) {
  auto server = sharedZooKeeperServer();
  ASSERT_TRUE(server.ok()) << server.error().message;
  MasterCluster cluster({.quorum = server.value()->connectString(),
                         .clusterId = uniqueClusterId("jobs"),
                         .extraSet = {"rpc.advertised-address="}});
  ASSERT_TRUE(cluster.startMasters(2).ok());
  auto first = cluster.waitForGrant(1, kStartTimeout);
  ASSERT_TRUE(first.ok()) << first.error().message;
  const size_t leaderSlot = first.value();
  const size_t standbySlot = 1 - leaderSlot;

  std::map<std::string, wire::JobState> expected;
  {
    Leader leader = connect(cluster, leaderSlot, 1);
    auto gateway = dispatcher(leader, 1);
    expected = submitJobsAndCancelOne(gateway, 1);
    ASSERT_EQ(expected.size(), static_cast<size_t>(kJobs));
    EXPECT_EQ(list(gateway, 1), expected);

    // A stale epoch on the leader's gateway is fenced and changes nothing.
    auto stale = gateway.listJobsRequest();
    stale.setEpoch(0);
    auto fenced = loop_.run(stale.send());
    ASSERT_TRUE(fenced.hasFailure());
    EXPECT_TRUE(fenced.getFailure().isFencing());
  }

  ASSERT_TRUE(cluster.kill(leaderSlot).ok());
  auto second = cluster.waitForGrant(2, kStartTimeout);
  ASSERT_TRUE(second.ok()) << second.error().message;
  ASSERT_EQ(second.value(), standbySlot);
  Leader next = connect(cluster, standbySlot, 2);
  auto gateway = dispatcher(next, 2);
  EXPECT_EQ(list(gateway, 2), expected);

  // The old epoch is refused by the new leader's bootstrap, naming both epochs.
  auto stale = next.bootstrap.dispatcherRequest();
  stale.setEpoch(1);
  auto refused = loop_.run(stale.send());
  ASSERT_TRUE(refused.hasFailure());
  ASSERT_TRUE(refused.getFailure().isFencing());
  EXPECT_EQ(refused.getFailure().getFencing().getExpected(), 2u);
  EXPECT_EQ(refused.getFailure().getFencing().getReceived(), 1u);
}

TEST_F(MasterJobsTest, ALeaderStoppedPastItsSessionChangesNothingWhenItWakesUp) {
  auto server = sharedZooKeeperServer();
  ASSERT_TRUE(server.ok()) << server.error().message;
  MasterCluster cluster({.quorum = server.value()->connectString(),
                         .clusterId = uniqueClusterId("jobs-stop"),
                         .extraSet = {"rpc.advertised-address="}});
  ASSERT_TRUE(cluster.startMasters(2).ok());
  auto first = cluster.waitForGrant(1, kStartTimeout);
  ASSERT_TRUE(first.ok()) << first.error().message;
  const size_t stoppedSlot = first.value();
  const size_t standbySlot = 1 - stoppedSlot;

  Leader stopped = connect(cluster, stoppedSlot, 1);
  auto oldGateway = dispatcher(stopped, 1);
  const auto expected = submitJobsAndCancelOne(oldGateway, 1);

  ASSERT_TRUE(cluster.process(stoppedSlot).pause().ok());
  // A call sent while the leader is stopped waits in its socket and is read when it wakes up,
  // possibly before it learns that its session expired.
  auto late = oldGateway.submitJobRequest();
  late.setEpoch(1);
  const JobId lateId = JobId::random();
  fillJobGraph(late.initJobGraph(), lateId, {.name = "late"});
  auto lateReply = late.send();

  auto second = cluster.waitForGrant(2, kStartTimeout);
  ASSERT_TRUE(second.ok()) << second.error().message;
  ASSERT_EQ(second.value(), standbySlot);
  Leader next = connect(cluster, standbySlot, 2);
  ASSERT_TRUE(cluster.process(stoppedSlot).resume().ok());

  // The woken leader's answer, whatever it is, is not an acceptance: its store writes check a
  // latch node that is gone, and its capabilities are revoked once it notices.
  bool accepted = false;
  try {
    auto reply = loop_.run(loop_.timer().timeoutAfter(30 * kj::SECONDS, kj::mv(lateReply)));
    accepted = !reply.hasFailure();
    if (reply.hasFailure()) {
      EXPECT_FALSE(reply.getFailure().isInvalidArgument()) << reply.getFailure().getMessage().cStr();
    }
  } catch (const kj::Exception&) {
    // Revoked or disconnected: refused.
  }
  EXPECT_FALSE(accepted) << "a deposed leader accepted a job";
  auto revoked = cluster.waitForEvent(
      stoppedSlot, [](const MasterEvent& e) { return e.kind == Kind::kRevoked && e.epoch == 1; },
      kStartTimeout);
  EXPECT_TRUE(revoked.ok()) << cluster.describe();

  // Every job submitted before the stop, the cancelled one still cancelled, and not the late one.
  auto gateway = dispatcher(next, 2);
  EXPECT_EQ(list(gateway, 2), expected);
}

TEST_F(MasterJobsTest, AGatewayFromAnEarlierTermIsFencedAndChangesNothing) {
  auto server = sharedZooKeeperServer();
  ASSERT_TRUE(server.ok()) << server.error().message;
  MasterCluster cluster({.quorum = server.value()->connectString(),
                         .clusterId = uniqueClusterId("jobs-earlier-term"),
                         .extraSet = {"rpc.advertised-address="}});
  ASSERT_TRUE(cluster.startMasters(2).ok());
  auto first = cluster.waitForGrant(1, kStartTimeout);
  ASSERT_TRUE(first.ok()) << first.error().message;
  const size_t firstSlot = first.value();

  Leader old = connect(cluster, firstSlot, 1);
  auto oldGateway = dispatcher(old, 1);
  const JobId kept = submit(oldGateway, 1, "kept");

  // The leader hands over (as regentctl failover asks) and stays up as a standby.
  auto handOver = old.bootstrap.handOverRequest();
  handOver.setEpoch(1);
  auto handedOver = loop_.run(handOver.send());
  ASSERT_FALSE(handedOver.hasFailure()) << handedOver.getFailure().getMessage().cStr();
  auto second = cluster.waitForGrant(2, kStartTimeout);
  ASSERT_TRUE(second.ok()) << second.error().message;
  ASSERT_EQ(second.value(), 1 - firstSlot);

  // The term-1 gateway, still connected to a live master, refuses everything with a
  // FencingError, even with the epoch it was obtained in.
  auto listing = oldGateway.listJobsRequest();
  listing.setEpoch(1);
  auto listed = loop_.run(listing.send());
  ASSERT_TRUE(listed.hasFailure());
  ASSERT_TRUE(listed.getFailure().isFencing()) << listed.getFailure().getMessage().cStr();
  EXPECT_EQ(listed.getFailure().getFencing().getReceived(), 1u);
  EXPECT_EQ(listed.getFailure().getFencing().getExpected(), 0u);
  for (uint64_t epoch : {uint64_t{1}, uint64_t{2}}) {
    auto cancel = oldGateway.cancelJobRequest();
    cancel.setEpoch(epoch);
    wire::setWireId(cancel.initJobId(), kept);
    auto canceled = loop_.run(cancel.send());
    ASSERT_TRUE(canceled.hasFailure()) << "epoch " << epoch;
    EXPECT_TRUE(canceled.getFailure().isFencing()) << canceled.getFailure().getMessage().cStr();
  }
  auto late = oldGateway.submitJobRequest();
  late.setEpoch(1);
  const JobId lateId = JobId::random();
  fillJobGraph(late.initJobGraph(), lateId, {.name = "late"});
  auto refused = loop_.run(late.send());
  ASSERT_TRUE(refused.hasFailure());
  EXPECT_TRUE(refused.getFailure().isFencing()) << refused.getFailure().getMessage().cStr();

  // The former leader's bootstrap answers with the new leader; the new leader's store holds
  // exactly the job submitted in term 1, not cancelled.
  auto stale = old.bootstrap.dispatcherRequest();
  stale.setEpoch(1);
  auto notServed = loop_.run(stale.send());
  ASSERT_TRUE(notServed.hasFailure());
  Leader next = connect(cluster, 1 - firstSlot, 2);
  auto gateway = dispatcher(next, 2);
  EXPECT_EQ(list(gateway, 2),
            (std::map<std::string, wire::JobState>{{kept.toHex() + " kept", wire::JobState::CREATED}}));
}

TEST_F(MasterJobsTest, ADirtyResultLeftByADeadLeaderIsCleanedUpAndItsJobIsNotRerun) {
  auto server = sharedZooKeeperServer();
  ASSERT_TRUE(server.ok()) << server.error().message;
  const std::string clusterId = uniqueClusterId("jobs-dirty");
  ConfigSources sources;
  sources.set = {"cluster-id=" + clusterId, "ha.zookeeper.quorum=" + server.value()->connectString(),
                 "store.backend=zookeeper"};
  auto config = loadConfig(sources);
  ASSERT_TRUE(config.ok()) << config.error().message;
  auto zk = ha::connectForTests(loop_, ha::zooKeeperClientOptionsFrom(config.value()), kStartTimeout);

  // A leader that died between writing a job's dirty result and cleaning it up: its JobGraph
  // and the dirty result are both stored. The term is fenced by a node of the test's own (not
  // under latch/, so the masters' election does not see it).
  const JobId ended = JobId::random();
  const JobId running = JobId::random();
  auto services = store::StoreServices::create(loop_, config.value(), zk.get());
  ASSERT_TRUE(services.ok()) << services.error().message;
  ASSERT_TRUE(loop_.run(zk->ensurePath("dead-leader-term")).ok());
  auto readerTerm = [&] {
    auto opened = loop_.run(services.value()->openTerm(store::StoreTerm{1, "dead-leader-term"}));
    KJ_REQUIRE(opened.ok(), opened.error().message);
    return std::move(opened).value();
  };
  {
    auto stores = readerTerm();
    for (const auto& [id, name] : {std::pair{ended, "ended"}, std::pair{running, "created"}}) {
      capnp::MallocMessageBuilder message;
      auto graph = message.initRoot<wire::JobGraph>();
      fillJobGraph(graph, id, {.name = name});
      ASSERT_TRUE(loop_.run(stores->jobGraphs().put(graph.asReader())).ok());
    }
    capnp::MallocMessageBuilder message;
    auto result = message.initRoot<wire::JobResult>();
    wire::setWireId(result.initJobId(), ended);
    result.setJobName("ended");
    result.setState(wire::JobState::FAILED);
    result.setEndedAtMs(5);
    ASSERT_TRUE(loop_.run(stores->jobResults().createDirty(result.asReader())).ok());
  }

  MasterCluster cluster({.quorum = server.value()->connectString(),
                         .clusterId = clusterId,
                         .extraSet = {"rpc.advertised-address="}});
  ASSERT_TRUE(cluster.startMasters(1).ok());
  Leader leader = connect(cluster, 0, 1);
  auto gateway = dispatcher(leader, 1);
  EXPECT_EQ(list(gateway, 1), (std::map<std::string, wire::JobState>{
                                  {ended.toHex() + " ended", wire::JobState::FAILED},
                                  {running.toHex() + " created", wire::JobState::CREATED}}));

  // The recovery cleaned up: the result is clean, the ended job's JobGraph is gone (it will not
  // be scheduled again), the other job's is kept.
  auto stores = readerTerm();
  auto dirty = loop_.run(stores->jobResults().listDirty());
  ASSERT_TRUE(dirty.ok()) << dirty.error().message;
  EXPECT_TRUE(dirty.value().results.empty());
  auto all = loop_.run(stores->jobResults().listAll());
  ASSERT_TRUE(all.ok()) << all.error().message;
  ASSERT_EQ(all.value().results.size(), 1u);
  auto ids = loop_.run(stores->jobGraphs().listIds());
  ASSERT_TRUE(ids.ok()) << ids.error().message;
  ASSERT_EQ(ids.value().ids.size(), 1u);
  EXPECT_EQ(ids.value().ids[0], running);
  stores = nullptr;
  loop_.run(services.value()->close());
}

TEST_F(MasterJobsTest, ARogueClientIsDisconnectedAndTheMasterKeepsServingOthers) {
  auto server = sharedZooKeeperServer();
  ASSERT_TRUE(server.ok()) << server.error().message;
  MasterCluster cluster({.quorum = server.value()->connectString(),
                         .clusterId = uniqueClusterId("jobs-rogue"),
                         .extraSet = {"rpc.advertised-address=", "rpc.max-message-size=64KiB"}});
  ASSERT_TRUE(cluster.startMasters(1).ok());
  ASSERT_TRUE(cluster.waitForGrant(1, kStartTimeout).ok());
  const std::string address = rpcAddressOf(cluster, 0);
  auto parts = splitHostPort(address);
  ASSERT_TRUE(parts.ok()) << parts.error().message;
  const uint16_t port = parts.value().port;

  // Garbage: not a Cap'n Proto frame at all.
  auto garbage = loop_.run(loop_.io().getNetwork().parseAddress("127.0.0.1", port))->connect();
  auto rogue = loop_.run(kj::mv(garbage));
  const std::string junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n" + std::string(64, '\xff');
  loop_.run(rogue->write(junk.data(), junk.size()));
  // The master may answer with an Abort message, then closes the connection: reading reaches the
  // end (0 bytes or an error) within the bound.
  bool closed = false;
  char buffer[4096];
  std::function<kj::Promise<void>()> readToEnd = [&]() -> kj::Promise<void> {
    return rogue->tryRead(buffer, 1, sizeof(buffer)).then([&](size_t n) -> kj::Promise<void> {
      if (n == 0) return kj::READY_NOW;
      return readToEnd();
    });
  };
  try {
    loop_.run(loop_.timer().timeoutAfter(30 * kj::SECONDS, readToEnd()));
    closed = true;
  } catch (const kj::Exception& e) {
    closed = e.getType() != kj::Exception::Type::OVERLOADED;  // OVERLOADED: the bound passed.
  }
  EXPECT_TRUE(closed) << "the master kept the rogue connection open";

  // An oversized message from a client whose own limit is larger than the master's.
  rpc::RpcOptions big;
  big.maxMessageSize = 8 * 1024 * 1024;
  rpc::RpcClient oversized(loop_.io().getNetwork(), loop_.timer(), address, big);
  auto bootstrap = loop_.run(oversized.bootstrapAs<wire::MasterBootstrap>());
  auto huge = bootstrap.dispatcherRequest();
  huge.setEpoch(1);
  Leader leader = connect(cluster, 0, 1);
  auto gateway = dispatcher(leader, 1);
  auto hugeGateway = [&]() {
    auto response = loop_.run(huge.send());
    return response.getDispatcher();
  }();
  auto hugeSubmit = hugeGateway.submitJobRequest();
  hugeSubmit.setEpoch(1);
  auto hugeGraph = hugeSubmit.initJobGraph();
  hugeGraph.setName(std::string(200 * 1024, 'x'));
  EXPECT_THROW(loop_.run(hugeSubmit.send()), kj::Exception);

  // The master still serves a well-behaved client.
  EXPECT_EQ(list(gateway, 1).size(), 0u);
  const JobId id = submit(gateway, 1, "after-the-rogues");
  EXPECT_EQ(list(gateway, 1).count(id.toHex() + " after-the-rogues"), 1u);
}

}  // namespace
}  // namespace regent::testing

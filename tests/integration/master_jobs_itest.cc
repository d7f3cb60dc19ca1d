// Jobs survive failover, over real RPC to real regent-master processes: jobs submitted to the
// leader's fenced Dispatcher gateway are listed by the next leader after a SIGKILL, a job
// cancelled before the failover is not resurrected, and stale epochs are fenced.
#include <gtest/gtest.h>
#include <kj/debug.h>

#include <map>
#include <regex>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "common/ids.h"
#include "rpc/rpc_client.h"
#include "rpc/rpc_options.h"
#include "rpc/schema/gateways.capnp.h"
#include "tests/fixtures/wait_test_util.h"
#include "tests/fixtures/zookeeper_server.h"
#include "tests/integration/master_cluster_test_util.h"

namespace regent::testing {
namespace {

using Kind = MasterEvent::Kind;

constexpr Duration kStartTimeout{60000};

// The address a master's RPC server listens on, from its "rpc listening on" line.
std::string rpcAddressOf(MasterCluster& cluster, size_t slot) {
  auto line = cluster.process(slot).waitForLine(std::regex("rpc listening on (\\S+)"),
                                                kStartTimeout);
  KJ_REQUIRE(line.ok(), line.error().message);
  std::smatch match;
  KJ_REQUIRE(std::regex_search(line.value(), match, std::regex("rpc listening on (\\S+)")));
  return match[1];
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

  // Submits until the Dispatcher stops answering "still recovering".
  JobId submit(wire::DispatcherGateway::Client& gateway, uint64_t epoch, const std::string& name) {
    const JobId id = JobId::random();
    for (int attempt = 0; attempt < 200; ++attempt) {
      auto request = gateway.submitJobRequest();
      request.setEpoch(epoch);
      auto graph = request.initJobGraph();
      graph.initJobId().setHi(id.hi());
      graph.getJobId().setLo(id.lo());
      graph.setName(name);
      auto vertex = graph.initVertices(1)[0];
      vertex.setName("work");
      vertex.setParallelism(1);
      auto argv = vertex.initCommand().initArgv(2);
      argv.set(0, "sleep");
      argv.set(1, "1");
      auto response = loop_.run(request.send());
      if (!response.hasFailure()) return id;
      KJ_REQUIRE(response.getFailure().isUnavailable(), response.getFailure().getMessage().cStr());
      loop_.run(loop_.timer().afterDelay(50 * kj::MILLISECONDS));  // Bounded retry back-off.
    }
    KJ_FAIL_REQUIRE("the Dispatcher never finished recovering");
  }

  std::map<std::string, wire::JobState> list(wire::DispatcherGateway::Client& gateway,
                                             uint64_t epoch) {
    for (int attempt = 0; attempt < 200; ++attempt) {
      auto request = gateway.listJobsRequest();
      request.setEpoch(epoch);
      auto response = loop_.run(request.send());
      if (response.hasFailure()) {
        KJ_REQUIRE(response.getFailure().isUnavailable(),
                   response.getFailure().getMessage().cStr());
        loop_.run(loop_.timer().afterDelay(50 * kj::MILLISECONDS));
        continue;
      }
      std::map<std::string, wire::JobState> jobs;
      for (auto job : response.getJobs()) {
        jobs[JobId(job.getJobId().getHi(), job.getJobId().getLo()).toHex() + " " +
             job.getName().cStr()] = job.getState();
      }
      return jobs;
    }
    KJ_FAIL_REQUIRE("the Dispatcher never finished recovering");
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
    std::vector<JobId> ids;
    for (int i = 0; i < 10; ++i) {
      const std::string name = "job-" + std::to_string(i);
      ids.push_back(submit(gateway, 1, name));
      expected[ids.back().toHex() + " " + name] = wire::JobState::CREATED;
    }
    auto cancel = gateway.cancelJobRequest();
    cancel.setEpoch(1);
    cancel.initJobId().setHi(ids[3].hi());
    cancel.getJobId().setLo(ids[3].lo());
    auto canceled = loop_.run(cancel.send());
    ASSERT_FALSE(canceled.hasFailure()) << canceled.getFailure().getMessage().cStr();
    expected[ids[3].toHex() + " job-3"] = wire::JobState::CANCELED;
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

}  // namespace
}  // namespace regent::testing

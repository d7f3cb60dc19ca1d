// regent-master's hand-over when ZooKeeper cannot apply it: a leader told to stop while
// ZooKeeper is frozen (its traffic stalled by the fault proxy) logs what happened and exits 1,
// never "handover done" and 0, and no standby takes over before the leader's session is gone.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/fixtures/tcp_fault_proxy.h"
#include "tests/fixtures/wait_test_util.h"
#include "tests/fixtures/zookeeper_server.h"
#include "tests/integration/master_cluster_test_util.h"

namespace regent::testing {
namespace {

using Kind = MasterEvent::Kind;

// Generous bounds: ASan builds and parallel tests on two cores are slow; none of these waits is
// a claim about speed.
constexpr Duration kStartTimeout{60000};
constexpr Duration kFailoverTimeout{60000};
constexpr Duration kExitTimeout{60000};

bool logged(const std::vector<MasterEvent>& events, Kind kind) {
  return std::any_of(events.begin(), events.end(),
                     [kind](const MasterEvent& e) { return e.kind == kind; });
}

TEST(MasterHandOver, AHandOverWhoseTransactionCannotApplyIsLoggedAndExitsOne) {
  auto server = sharedZooKeeperServer();
  ASSERT_OK(server);
  auto proxy = ThreadedTcpFaultProxy::start("127.0.0.1", server.value()->clientPort());
  ASSERT_OK(proxy);
  MasterCluster cluster({.quorum = server.value()->connectString(),
                         .clusterId = uniqueClusterId("handover-frozen"),
                         .sessionTimeout = Duration(6000)});
  auto leader = cluster.startMaster({}, proxy.value()->address());
  ASSERT_OK(leader);
  auto granted = cluster.waitForEvent(
      leader.value(), [](const MasterEvent& e) { return e.kind == Kind::kGranted; },
      kStartTimeout);
  ASSERT_OK(granted);
  auto standby = cluster.startMaster();
  ASSERT_OK(standby);
  ASSERT_OK(cluster.waitForEvent(
      standby.value(), [](const MasterEvent& e) { return e.kind == Kind::kContending; },
      kStartTimeout));

  // ZooKeeper frozen, as the leader sees it: nothing it sends is answered.
  proxy.value()->stall();
  ASSERT_OK(cluster.terminate(leader.value()));
  auto exit = cluster.process(leader.value()).waitForExit(kExitTimeout);
  ASSERT_TRUE(exit) << cluster.describe();
  EXPECT_EQ(exit->exitCode, 1) << cluster.describe();
  const auto events = cluster.events(leader.value());
  EXPECT_TRUE(logged(events, Kind::kHandoverRequested)) << cluster.describe();
  EXPECT_FALSE(logged(events, Kind::kHandoverDone)) << cluster.describe();
  const std::string output = cluster.process(leader.value()).output();
  EXPECT_NE(output.find("handover failed master_id="), std::string::npos) << output;
  EXPECT_NE(output.find("the hand-over transaction failed with"), std::string::npos) << output;
  EXPECT_NE(output.find("master exiting master_id=" + cluster.masterId(leader.value()) + " code=1"),
            std::string::npos)
      << output;

  // The standby takes over once the leader's session ends, with the next epoch.
  auto next = cluster.waitForGrant(granted.value().epoch + 1, kFailoverTimeout);
  ASSERT_OK(next);
  EXPECT_EQ(next.value(), standby.value());
}

}  // namespace
}  // namespace regent::testing

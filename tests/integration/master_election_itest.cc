// Leader election among real regent-master processes on the real ZooKeeper server: exclusive
// terms and dense epochs through failovers, session expiry, stopped and cut-off leaders, and the
// graceful hand-over. Every claim is checked from the processes' own event lines.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <memory>
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
constexpr Duration kFailoverTimeout{30000};
constexpr Duration kExitTimeout{30000};

bool hasEvent(const std::vector<MasterEvent>& events, Kind kind, uint64_t epoch) {
  return std::any_of(events.begin(), events.end(), [&](const MasterEvent& e) {
    return e.kind == kind && e.epoch == epoch;
  });
}

std::optional<MasterEvent> findEvent(const std::vector<MasterEvent>& events, Kind kind,
                                     uint64_t epoch) {
  for (const auto& e : events) {
    if (e.kind == kind && e.epoch == epoch) return e;
  }
  return std::nullopt;
}

// Waits for the first grant of a fresh cluster and returns its epoch and holder.
std::pair<uint64_t, size_t> waitForFirstLeader(MasterCluster& cluster) {
  waitUntil([&]() { return cluster.highestEpoch() > 0; }, kStartTimeout, Duration(20));
  const uint64_t epoch = cluster.highestEpoch();
  if (epoch == 0) throw std::runtime_error("no master was granted\n" + cluster.describe());
  auto holder = cluster.waitForGrant(epoch, Duration(0));
  if (!holder.ok()) throw std::runtime_error(holder.error().message);
  return {epoch, holder.value()};
}

// `former` led `formerEpoch`, lost it to `current` (granted `formerEpoch + 1`) and contends
// again: it is granted nothing while `current` leads. Shown without waiting a while: `current`
// hands over (SIGTERM), which comes after any grant `former` could have got while it led, and
// the next grant goes to `former` as the second and last of its run; `current`'s term ends only
// after its hand-over began.
void expectNoGrantUntilTheLeaderHandsOver(MasterCluster& cluster, size_t former, size_t current,
                                          uint64_t formerEpoch) {
  const uint64_t currentEpoch = formerEpoch + 1;
  ASSERT_OK(cluster.terminate(current));
  auto next = cluster.waitForGrant(currentEpoch + 1, kFailoverTimeout);
  ASSERT_OK(next);
  EXPECT_EQ(next.value(), former) << cluster.describe();
  std::vector<uint64_t> granted;
  for (const auto& e : cluster.events(former)) {
    if (e.kind == Kind::kGranted) granted.push_back(e.epoch);
  }
  EXPECT_EQ(granted, (std::vector<uint64_t>{formerEpoch, currentEpoch + 1})) << cluster.describe();
  const auto events = cluster.events(current);
  const auto handover = std::find_if(events.begin(), events.end(), [](const MasterEvent& e) {
    return e.kind == Kind::kHandoverRequested;
  });
  const auto revoked = std::find_if(events.begin(), events.end(), [&](const MasterEvent& e) {
    return e.kind == Kind::kRevoked && e.epoch == currentEpoch;
  });
  ASSERT_NE(handover, events.end()) << cluster.describe();
  ASSERT_NE(revoked, events.end()) << cluster.describe();
  EXPECT_LT(handover - events.begin(), revoked - events.begin()) << cluster.describe();
}

// Kills or terminates the leader `failovers` times (alternating, starting with SIGKILL),
// restarting each stopped slot so `masters` keep contending; then checks the terms. The masters
// log in `logFormat` (text or json).
void runFailovers(size_t masters, int failovers, const std::string& logFormat) {
  ZooKeeperServer& server = sharedServer();
  MasterCluster cluster({.quorum = server.connectString(),
                         .clusterId = uniqueClusterId("failover" + std::to_string(masters)),
                         .logFormat = logFormat});
  ASSERT_OK(cluster.startMasters(masters));
  auto [epoch, leader] = waitForFirstLeader(cluster);

  for (int i = 0; i < failovers; ++i) {
    const bool graceful = i % 2 == 1;
    if (graceful) {
      ASSERT_OK(cluster.terminate(leader));
      auto exit = cluster.process(leader).waitForExit(kExitTimeout);
      ASSERT_TRUE(exit) << "the leader did not exit after SIGTERM\n" << cluster.describe();
      EXPECT_TRUE(exit->exited() && exit->exitCode == 0) << exit->describe();
    } else {
      ASSERT_OK(cluster.kill(leader));
    }
    ASSERT_OK(cluster.restart(leader));
    auto next = cluster.waitForGrant(epoch + 1, kFailoverTimeout);
    ASSERT_OK(next);
    EXPECT_NE(next.value(), leader);
    epoch += 1;
    leader = next.value();
  }

  const std::string problems = cluster.terms().empty()
                                   ? std::string("no terms")
                                   : checkTermsExclusiveAndDense(cluster.terms());
  EXPECT_EQ(problems, "") << cluster.describe();
  EXPECT_EQ(cluster.highestEpoch(), epoch);
  EXPECT_EQ(cluster.terms().size(), static_cast<size_t>(failovers + 1));
}

TEST(MasterElection, AtMostOneOfThreeMastersLeadsAtATimeAndEpochsRiseByOnePerTerm) {
  runFailovers(3, 6, "text");
}

TEST(MasterElection, AtMostOneOfTenMastersLeadsAtATimeAndEpochsRiseByOnePerTerm) {
  // JSON log lines here, so the event lines are checked in both formats.
  runFailovers(10, 4, "json");
}

TEST(MasterElection, WithoutFastFailoverStandbyIsGrantedOnceTheKilledLeadersSessionExpires) {
  ZooKeeperServer& server = sharedServer();
  const MasterClusterOptions options{.quorum = server.connectString(),
                                     .clusterId = uniqueClusterId("killed-leader"),
                                     .extraSet = {"ha.fast-failover=false"}};
  MasterCluster cluster(options);
  ASSERT_OK(cluster.startMasters(2));
  auto [epoch, leader] = waitForFirstLeader(cluster);
  const size_t standby = 1 - leader;

  ASSERT_OK(cluster.kill(leader));
  const int64_t killedAt = monotonicMicros();
  auto next = cluster.waitForGrant(epoch + 1, kFailoverTimeout);
  ASSERT_OK(next);
  EXPECT_EQ(next.value(), standby);
  auto grant = findEvent(cluster.events(standby), Kind::kGranted, epoch + 1);
  ASSERT_TRUE(grant);
  // The killed leader's latch node lives until its session expires. The server may expire it up
  // to one ping interval (a third of the session timeout) after the last ping, so the grant
  // comes at least two thirds of the session timeout after the kill; this is a lower bound,
  // not a speed claim.
  const int64_t sessionTimeoutUs = int64_t{options.sessionTimeout.count()} * 1000;
  EXPECT_GT(grant->monoUs - killedAt, sessionTimeoutUs * 2 / 3 - 250 * 1000)
      << "the standby was granted before the leader's session could have expired";
  EXPECT_EQ(checkTermsExclusiveAndDense(cluster.terms()), "") << cluster.describe();
}

// The cluster's masters advertise made-up RPC addresses (127.0.0.1:17000 + slot) to tell them
// apart; fast failover dials the advertised address, so these tests advertise the bound port.
constexpr const char* kAdvertiseTheBoundRpcPort = "rpc.advertised-address=";

// Waits until `standby` holds its fast-failover connection to the leader of `epoch` after that
// leader was marked SERVING (its output: the follow line of that record, then the liveness
// connection), so that the leader's end from now on is seen. The record does not change again
// while that leader lives.
void waitUntilFollowingTheServingLeader(MasterCluster& cluster, size_t standby, uint64_t epoch) {
  const std::string follows = "follows the leader of epoch=" + std::to_string(epoch) + " (SERVING)";
  const bool following = waitUntil(
      [&]() {
        const std::string output = cluster.process(standby).output();
        const size_t at = output.rfind(follows);
        return at != std::string::npos &&
               output.find("leader liveness: connected to", at) != std::string::npos;
      },
      kFailoverTimeout);
  ASSERT_TRUE(following) << "the standby does not follow the leader\n" << cluster.describe();
}

// Two masters with a session of `sessionTimeout`: the leader SERVING and the standby following
// it for fast failover. Returns the epoch and the leader's slot.
std::pair<uint64_t, size_t> startLeaderFollowedByStandby(MasterCluster& cluster) {
  auto started = cluster.startMasters(2);
  if (!started.ok()) throw std::runtime_error(started.error().message);
  auto [epoch, leader] = waitForFirstLeader(cluster);
  auto serving = cluster.waitForEvent(
      leader,
      [epoch = epoch](const MasterEvent& e) {
        return e.kind == Kind::kServing && e.epoch == epoch;
      },
      kStartTimeout);
  if (!serving.ok()) throw std::runtime_error(serving.error().message);
  waitUntilFollowingTheServingLeader(cluster, 1 - leader, epoch);
  return {epoch, leader};
}

// With a 30 s session, the server cannot expire the killed leader's session before two thirds of
// it (20 s) have passed: a grant of epoch + 1 to `standby` within 15 s did not wait for it.
void expectStandbyGrantedBeforeTheSessionCouldExpire(MasterCluster& cluster, uint64_t epoch,
                                                     size_t standby) {
  auto next = cluster.waitForGrant(epoch + 1, Duration(15000));
  ASSERT_TRUE(next.ok()) << "the standby was not granted before the killed leader's session "
                            "could expire: "
                         << next.error().message << "\n"
                         << cluster.describe();
  EXPECT_EQ(next.value(), standby);
}

TEST(MasterElection, FastFailoverGrantsTheStandbyBeforeTheKilledLeadersSessionCouldExpire) {
  ZooKeeperServer& server = sharedServer();
  // A 30 s session: the server cannot expire the killed leader's session before two thirds of
  // it (20 s) have passed, so a grant within the bound below did not wait for it.
  const MasterClusterOptions options{.quorum = server.connectString(),
                                     .clusterId = uniqueClusterId("fast-failover"),
                                     .sessionTimeout = Duration(30000),
                                     .extraSet = {kAdvertiseTheBoundRpcPort}};
  MasterCluster cluster(options);
  auto [epoch, leader] = startLeaderFollowedByStandby(cluster);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  const size_t standby = 1 - leader;

  ASSERT_OK(cluster.kill(leader));
  expectStandbyGrantedBeforeTheSessionCouldExpire(cluster, epoch, standby);
  EXPECT_EQ(checkTermsExclusiveAndDense(cluster.terms()), "") << cluster.describe();
}

// The leader's address keeps answering after its process died (a proxy in front of it, as a
// load balancer or a port forward would be; or its restart on the same port winning the race to
// the standby's reconnect), so no reconnect is refused. Once the restarted process joins the
// latch on the leader's host and address under its new master id, the standby knows the leader's
// process is gone and takes the fast path, long before the 30 s session could expire.
TEST(MasterElection, FastFailoverGrantsTheStandbyOnceTheKilledLeaderRestartedOnItsAddress) {
  ZooKeeperServer& server = sharedServer();
  const MasterClusterOptions options{.quorum = server.connectString(),
                                     .clusterId = uniqueClusterId("fast-failover-restart"),
                                     .sessionTimeout = Duration(30000)};
  MasterCluster cluster(options);
  // Each master binds a fixed port and advertises a proxy in front of it, which stays open.
  std::vector<std::unique_ptr<ThreadedTcpFaultProxy>> proxies;
  for (size_t m = 0; m < 2; ++m) {
    auto port = pickFreeLoopbackPort();
    ASSERT_OK(port);
    auto proxy = ThreadedTcpFaultProxy::start("127.0.0.1", port.value());
    ASSERT_OK(proxy);
    proxies.push_back(std::move(proxy).value());
    auto slot = cluster.startMaster({"rpc.bind=127.0.0.1:" + std::to_string(port.value()),
                                     "rpc.advertised-address=" + proxies.back()->address()});
    ASSERT_OK(slot);
    ASSERT_OK(cluster.waitForEvent(
        slot.value(), [](const MasterEvent& e) { return e.kind == Kind::kContending; },
        kStartTimeout));
  }
  auto [epoch, leader] = waitForFirstLeader(cluster);
  ASSERT_OK(cluster.waitForEvent(
      leader,
      [epoch = epoch](const MasterEvent& e) {
        return e.kind == Kind::kServing && e.epoch == epoch;
      },
      kStartTimeout));
  const size_t standby = 1 - leader;
  waitUntilFollowingTheServingLeader(cluster, standby, epoch);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());

  const uint64_t acceptedBefore = proxies[leader]->acceptedCount();
  ASSERT_OK(cluster.kill(leader));
  // The proxy still answers: the standby reconnects, is answered, and waits (no refusal).
  ASSERT_TRUE(waitUntil(
      [&, leader = leader] { return proxies[leader]->acceptedCount() > acceptedBefore; },
      kFailoverTimeout));
  EXPECT_FALSE(cluster.currentLeader() == standby);
  ASSERT_OK(cluster.restart(leader));
  expectStandbyGrantedBeforeTheSessionCouldExpire(cluster, epoch, standby);
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_NE(cluster.process(standby).output().find("is served by a new process"),
            std::string::npos)
      << cluster.describe();
  EXPECT_EQ(checkTermsExclusiveAndDense(cluster.terms()), "") << cluster.describe();
}

TEST(MasterElection, FastFailoverLeavesAStoppedLeaderToItsSession) {
  ZooKeeperServer& server = sharedServer();
  const MasterClusterOptions options{.quorum = server.connectString(),
                                     .clusterId = uniqueClusterId("fast-failover-stopped"),
                                     .sessionTimeout = Duration(8000),
                                     .extraSet = {kAdvertiseTheBoundRpcPort}};
  MasterCluster cluster(options);
  auto [epoch, leader] = startLeaderFollowedByStandby(cluster);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  const size_t standby = 1 - leader;

  // A stopped process keeps its sockets: the standby's connection stays open and a new one lands
  // in the listen backlog, so nothing says the leader is gone until its session expires.
  ASSERT_OK(cluster.process(leader).pause());
  const int64_t pausedAt = monotonicMicros();
  auto next = cluster.waitForGrant(epoch + 1, kFailoverTimeout);
  ASSERT_OK(next);
  EXPECT_EQ(next.value(), standby);
  auto grant = findEvent(cluster.events(standby), Kind::kGranted, epoch + 1);
  ASSERT_TRUE(grant);
  // As in the test without fast failover above: the server expires the session at the earliest
  // two thirds of its timeout after the last ping; a lower bound, not a speed claim.
  const int64_t sessionTimeoutUs = int64_t{options.sessionTimeout.count()} * 1000;
  EXPECT_GT(grant->monoUs - pausedAt, sessionTimeoutUs * 2 / 3 - 250 * 1000)
      << "the standby was granted before the stopped leader's session could have expired";

  ASSERT_OK(cluster.process(leader).resume());
  auto revoked = cluster.waitForEvent(
      leader,
      [epoch = epoch](const MasterEvent& e) {
        return e.kind == Kind::kRevoked && e.epoch == epoch;
      },
      kFailoverTimeout);
  // Its logged term ends only now, after the grant (the stopped leader's own view: the test
  // below covers what it does when it runs again), so the terms are not checked for overlap.
  ASSERT_OK(revoked);
}

TEST(MasterElection, StoppedLeaderReportsRevocationWhenResumedAndNeverLeadsTheNewEpoch) {
  ZooKeeperServer& server = sharedServer();
  MasterCluster cluster(
      {.quorum = server.connectString(), .clusterId = uniqueClusterId("stopped-leader")});
  ASSERT_OK(cluster.startMasters(2));
  auto [epoch, leader] = waitForFirstLeader(cluster);
  const size_t standby = 1 - leader;
  const size_t contendedBefore = countEvents(cluster.events(leader), Kind::kContending);

  ASSERT_OK(cluster.process(leader).pause());
  auto next = cluster.waitForGrant(epoch + 1, kFailoverTimeout);
  ASSERT_OK(next);
  EXPECT_EQ(next.value(), standby);

  const int64_t resumedAt = monotonicMicros();
  ASSERT_OK(cluster.process(leader).resume());
  auto revoked = cluster.waitForEvent(
      leader,
      [epoch = epoch](const MasterEvent& e) {
        return e.kind == Kind::kRevoked && e.epoch == epoch;
      },
      kFailoverTimeout);
  ASSERT_OK(revoked);
  EXPECT_GT(revoked.value().monoUs, resumedAt);
  // It contends again (a new latch node) and stays a standby while the new leader leads.
  ASSERT_TRUE(waitUntil(
      [&, leader = leader]() {
        return countEvents(cluster.events(leader), Kind::kContending) > contendedBefore;
      },
      kFailoverTimeout))
      << cluster.describe();
  EXPECT_FALSE(hasEvent(cluster.events(leader), Kind::kGranted, epoch + 1));
  expectNoGrantUntilTheLeaderHandsOver(cluster, leader, standby, epoch);
}

// A master whose ZooKeeper traffic goes through a fault proxy leads; another master stands by.
struct ProxiedLeader {
  std::unique_ptr<ThreadedTcpFaultProxy> proxy;
  std::unique_ptr<MasterCluster> cluster;
  uint64_t epoch = 0;
  size_t leader = 0;   // Behind the proxy.
  size_t standby = 1;  // Direct.
};

void startProxiedLeader(ProxiedLeader& setup, const std::string& name, Duration sessionTimeout,
                        std::vector<std::string> leaderSet) {
  ZooKeeperServer& server = sharedServer();
  auto proxy = ThreadedTcpFaultProxy::start("127.0.0.1", server.clientPort());
  ASSERT_OK(proxy);
  setup.proxy = std::move(proxy).value();
  setup.cluster = std::make_unique<MasterCluster>(
      MasterClusterOptions{.quorum = server.connectString(),
                           .clusterId = uniqueClusterId(name),
                           .sessionTimeout = sessionTimeout});
  MasterCluster& cluster = *setup.cluster;
  auto leader = cluster.startMaster(std::move(leaderSet), setup.proxy->address());
  ASSERT_OK(leader);
  setup.leader = leader.value();
  auto granted = cluster.waitForEvent(
      setup.leader, [](const MasterEvent& e) { return e.kind == Kind::kGranted; }, kStartTimeout);
  ASSERT_OK(granted);
  setup.epoch = granted.value().epoch;
  auto standby = cluster.startMaster();
  ASSERT_OK(standby);
  setup.standby = standby.value();
  ASSERT_OK(cluster.waitForEvent(
      setup.standby, [](const MasterEvent& e) { return e.kind == Kind::kContending; },
      kStartTimeout));
}

TEST(MasterElection, LeaderCutOffFromZooKeeperIsRevokedAtOnceAndContendsAgainAsStandby) {
  ProxiedLeader setup;
  // Tolerance 0, explicitly (the default rides out a third of the session).
  ASSERT_NO_FATAL_FAILURE(startProxiedLeader(setup, "cut-leader", Duration(2000),
                                             {"ha.zookeeper.suspend-tolerance=0"}));
  MasterCluster& cluster = *setup.cluster;
  const size_t contendedBefore = countEvents(cluster.events(setup.leader), Kind::kContending);

  setup.proxy->cut();
  auto revoked = cluster.waitForEvent(
      setup.leader,
      [&](const MasterEvent& e) { return e.kind == Kind::kRevoked && e.epoch == setup.epoch; },
      kFailoverTimeout);
  ASSERT_OK(revoked);
  auto next = cluster.waitForGrant(setup.epoch + 1, kFailoverTimeout);
  ASSERT_OK(next);
  EXPECT_EQ(next.value(), setup.standby);
  auto grant = findEvent(cluster.events(setup.standby), Kind::kGranted, setup.epoch + 1);
  ASSERT_TRUE(grant);
  // Tolerance 0: the leader let go on the connection loss, before its session could expire and
  // so before anyone else could be granted.
  EXPECT_LT(revoked.value().monoUs, grant->monoUs);

  setup.proxy->resume();
  ASSERT_TRUE(waitUntil(
      [&]() {
        return countEvents(cluster.events(setup.leader), Kind::kContending) > contendedBefore;
      },
      kFailoverTimeout))
      << cluster.describe();
  ASSERT_NO_FATAL_FAILURE(
      expectNoGrantUntilTheLeaderHandsOver(cluster, setup.leader, setup.standby, setup.epoch));
  EXPECT_EQ(checkTermsExclusiveAndDense(cluster.terms()), "") << cluster.describe();
}

// Cuts the leader's connection and lets it straight back in: a blip the client notices (its
// connection is closed) and recovers from within a few tens of milliseconds. Returns whether the
// leader logged a revocation within `watchFor` after the blip.
bool leaderRevokedAfterBlip(ProxiedLeader& setup, Duration watchFor) {
  MasterCluster& cluster = *setup.cluster;
  const uint64_t acceptedBefore = setup.proxy->acceptedCount();
  setup.proxy->cut();
  setup.proxy->resume();
  // The client reconnected through the proxy: the blip was noticed and is over.
  EXPECT_TRUE(waitUntil(
      [&]() {
        return setup.proxy->acceptedCount() > acceptedBefore &&
               setup.proxy->connectionCount() == 1;
      },
      Duration(10000)));
  return waitUntil(
      [&]() { return countEvents(cluster.events(setup.leader), Kind::kRevoked) > 0; }, watchFor);
}

TEST(MasterElection, ConnectionBlipShorterThanTheSuspendToleranceDoesNotRevoke) {
  ProxiedLeader setup;
  // A 2 s tolerance (the most a 6 s session allows) leaves the reconnect room on a loaded
  // machine; watching 3 s after the blip covers the whole tolerance.
  ASSERT_NO_FATAL_FAILURE(startProxiedLeader(setup, "blip-tolerated", Duration(6000),
                                             {"ha.zookeeper.suspend-tolerance=2s"}));
  EXPECT_FALSE(leaderRevokedAfterBlip(setup, Duration(3000))) << setup.cluster->describe();
  EXPECT_EQ(setup.cluster->currentLeader(), std::optional<size_t>(setup.leader));
  EXPECT_EQ(countEvents(setup.cluster->events(setup.standby), Kind::kGranted), 0u);
}

// The control for the test above: the same blip revokes with a tolerance of 0.
TEST(MasterElection, ConnectionBlipRevokesWithoutSuspendTolerance) {
  ProxiedLeader setup;
  ASSERT_NO_FATAL_FAILURE(startProxiedLeader(setup, "blip-revoked", Duration(2000),
                                             {"ha.zookeeper.suspend-tolerance=0"}));
  EXPECT_TRUE(leaderRevokedAfterBlip(setup, Duration(10000))) << setup.cluster->describe();
}

TEST(MasterElection, ALeaderExistsAgainAfterZooKeeperRestartsOnTheSameData) {
  // Its own server: a restart would disturb the other tests' masters.
  auto started = ZooKeeperServer::start();
  ASSERT_OK(started);
  ZooKeeperServer& server = *started.value();
  MasterCluster cluster(
      {.quorum = server.connectString(), .clusterId = uniqueClusterId("zk-restart")});
  ASSERT_OK(cluster.startMasters(3));
  auto [epoch, leader] = waitForFirstLeader(cluster);

  ASSERT_OK(server.restart());
  // Whether the term survives depends on how fast the server came back (the sessions are 2 s);
  // either way a leader exists afterwards, and a new term has a higher epoch.
  ASSERT_TRUE(waitUntil(
      [&]() {
        auto current = cluster.currentLeader();
        return current && countEvents(cluster.events(*current), Kind::kServing) > 0;
      },
      kFailoverTimeout))
      << cluster.describe();
  const auto current = cluster.currentLeader();
  ASSERT_TRUE(current);
  if (cluster.highestEpoch() == epoch) {
    EXPECT_EQ(*current, leader) << "the term did not change, so its holder must still lead";
  } else {
    EXPECT_GT(cluster.highestEpoch(), epoch);
  }
  EXPECT_EQ(checkTermsExclusiveAndDense(cluster.terms()), "") << cluster.describe();
}

TEST(MasterElection, SigtermHandsOverWithoutWaitingForTheSessionTimeout) {
  ZooKeeperServer& server = sharedServer();
  // A 20 s session, so the standby cannot be waiting for an expiry. This checks the exit code
  // and the order of revoke, hand-over and grant; that the hand-over transaction alone (with
  // the session still open) lets the standby in is shown by leader_itest's hand-over test.
  MasterCluster cluster({.quorum = server.connectString(),
                         .clusterId = uniqueClusterId("handover"),
                         .sessionTimeout = Duration(20000)});
  ASSERT_OK(cluster.startMasters(2));
  auto [epoch, leader] = waitForFirstLeader(cluster);
  const size_t standby = 1 - leader;

  ASSERT_OK(cluster.terminate(leader));
  auto next = cluster.waitForGrant(epoch + 1, Duration(10000));
  ASSERT_OK(next);
  EXPECT_EQ(next.value(), standby);
  auto exit = cluster.process(leader).waitForExit(kExitTimeout);
  ASSERT_TRUE(exit);
  EXPECT_TRUE(exit->exited() && exit->exitCode == 0) << exit->describe();

  const auto events = cluster.events(leader);
  ASSERT_EQ(countEvents(events, Kind::kHandoverRequested), 1u) << cluster.describe();
  ASSERT_EQ(countEvents(events, Kind::kHandoverDone), 1u) << cluster.describe();
  auto revoked = findEvent(events, Kind::kRevoked, epoch);
  ASSERT_TRUE(revoked);
  auto grant = findEvent(cluster.events(standby), Kind::kGranted, epoch + 1);
  ASSERT_TRUE(grant);
  EXPECT_LT(revoked->monoUs, grant->monoUs);
  EXPECT_EQ(events.back().kind, Kind::kExiting);
  EXPECT_EQ(events.back().code, 0);
  EXPECT_EQ(checkTermsExclusiveAndDense(cluster.terms()), "") << cluster.describe();
}

TEST(MasterElection, SecondSigtermDuringAStalledHandOverExitsAtOnce) {
  ProxiedLeader setup;
  // A long session, so the stalled connection is not declared lost during the test.
  ASSERT_NO_FATAL_FAILURE(startProxiedLeader(setup, "second-sigterm", Duration(20000), {}));
  MasterCluster& cluster = *setup.cluster;
  setup.proxy->stall();
  ASSERT_OK(cluster.terminate(setup.leader));
  ASSERT_OK(cluster.waitForEvent(
      setup.leader, [](const MasterEvent& e) { return e.kind == Kind::kHandoverRequested; },
      kExitTimeout));
  ASSERT_OK(cluster.terminate(setup.leader));
  auto exit = cluster.process(setup.leader).waitForExit(Duration(10000));
  ASSERT_TRUE(exit) << cluster.describe();
  EXPECT_TRUE(exit->exited() && exit->exitCode == 128 + SIGTERM) << exit->describe();
  const auto events = cluster.events(setup.leader);
  EXPECT_EQ(countEvents(events, Kind::kHandoverDone), 0u);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().kind, Kind::kExiting);
  EXPECT_EQ(events.back().code, 128 + SIGTERM);
}

}  // namespace
}  // namespace regent::testing

// Leader election and retrieval against the real ZooKeeper server: real ZooKeeperClient
// instances on one event loop, so every grant and revoke lands in one ordered log. Sessions are
// short (a few seconds against the fixture's 200 ms tick) to keep the suite fast.
#include <gtest/gtest.h>
#include <kj/debug.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <list>
#include <memory>
#include <thread>

#include "common/event_loop.h"
#include "common/ids.h"
#include "conf/config.h"
#include "ha/ha_services.h"
#include "ha/zookeeper_client.h"
#include "leader/latch_names.h"
#include "leader/leader_services.h"
#include "leader/zookeeper_leader_election.h"
#include "leader/zookeeper_leader_retrieval.h"
#include "tests/fixtures/loop_wait_test_util.h"
#include "tests/fixtures/tcp_fault_proxy.h"
#include "tests/fixtures/zookeeper_server.h"
#include "tests/fixtures/zookeeper_test_client.h"
#include "tests/ha/zookeeper_client_test_util.h"
#include "tests/leader/leader_test_util.h"

namespace regent::leader {
namespace {

using ha::SessionState;
using ha::ZkCode;
using ha::ZooKeeperClient;
using ha::ZooKeeperClientOptions;
using testing::ElectionLog;
using testing::RecordingContender;
using testing::RecordingListener;

constexpr Duration kWait{30000};

struct Contender {
  kj::Own<ZooKeeperClient> zk;
  std::unique_ptr<RecordingContender> contender;
  std::unique_ptr<ZooKeeperLeaderElection> election;
  std::vector<SessionState> sessionStates;
  kj::Own<void> sessionListener;
};

class LeaderElectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = regent::testing::sharedZooKeeperServer();
    ASSERT_TRUE(server.ok()) << server.error().message;
    server_ = server.value();
    root_ = "/regent-leader-itest/" + JobId::random().toHex();
  }

  void TearDown() override {
    // Elections before their clients, clients before the loop.
    for (auto& member : members_) member.election.reset();
    retrieval_.reset();
    members_.clear();
    extraClients_.clear();
  }

  ZooKeeperClientOptions options(const std::string& quorum = "") const {
    ZooKeeperClientOptions o;
    o.quorum = quorum.empty() ? server_->connectString() : quorum;
    o.root = root_;
    o.sessionTimeout = sessionTimeout_;
    o.auth = auth_;
    o.readAuth = readAuth_;
    return o;
  }

  kj::Own<ZooKeeperClient> connect(ZooKeeperClientOptions o) {
    return ha::connectForTests(loop_, std::move(o), kWait);
  }

  // A connected contender named `name`, started unless told otherwise.
  Contender& addContender(const std::string& name,
                          ZooKeeperLeaderElectionOptions electionOptions = {},
                          const std::string& quorum = "") {
    Contender member;
    member.zk = connect(options(quorum));
    member.contender = std::make_unique<RecordingContender>(name, log_);
    member.election = std::make_unique<ZooKeeperLeaderElection>(
        *member.zk, loop_.timer(), testing::contenderInfoForTests(name), electionOptions);
    members_.push_back(std::move(member));
    Contender& added = members_.back();
    added.sessionListener = added.zk->onSessionState(
        [&added](SessionState state) { added.sessionStates.push_back(state); });
    added.election->start(*added.contender);
    return added;
  }

  // Runs the loop until `done` holds; false after `timeout`.
  bool runUntil(const std::function<bool()>& done, Duration timeout = kWait) {
    return regent::testing::runLoopUntil(loop_, done, timeout);
  }
  // Runs the loop for `duration` (bounded negative waits only).
  void runFor(Duration duration) {
    loop_.run(loop_.timer().afterDelay(duration.count() * kj::MILLISECONDS));
  }

  template <typename T>
  T run(kj::Promise<T>&& promise) {
    return loop_.run(kj::mv(promise).exclusiveJoin(
        loop_.timer().afterDelay(kWait.count() * kj::MILLISECONDS).then([]() -> T {
          KJ_FAIL_REQUIRE("timed out waiting for ZooKeeper");
        })));
  }

  // Runs `blocking` on another thread while the loop keeps serving its clients.
  template <typename T>
  T runAside(std::function<T()> blocking) {
    auto future = std::async(std::launch::async, std::move(blocking));
    EXPECT_TRUE(runUntil(
        [&] { return future.wait_for(std::chrono::seconds(0)) == std::future_status::ready; }));
    return future.get();
  }

  Contender* leader() {
    Contender* found = nullptr;
    for (auto& member : members_) {
      if (member.contender->leading()) {
        EXPECT_EQ(found, nullptr) << "two contenders lead at once";
        found = &member;
      }
    }
    return found;
  }
  int leaders() {
    int count = 0;
    for (auto& member : members_) count += member.contender->leading() ? 1 : 0;
    return count;
  }

  void expectConsistentLog() {
    EXPECT_EQ(testing::checkElectionLog(log_), "");
    for (auto& member : members_) {
      EXPECT_TRUE(member.contender->violations().empty())
          << member.contender->name() << ": " << member.contender->violations().front();
    }
  }

  // The `leader` and `epoch` nodes as a fresh client sees them.
  std::optional<LeaderInfo> readLeader() {
    auto& reader = extraClients_.emplace_back(connect(options()));
    auto node = run(reader->get("leader"));
    if (node.code == ZkCode::kNoNode) return std::nullopt;
    KJ_REQUIRE(node.ok(), ha::zkCodeName(node.code));
    auto info = leaderInfoFromJson(node.value.data);
    KJ_REQUIRE(info.ok(), info.error().message);
    return info.value();
  }
  std::string readEpoch() {
    auto& reader = extraClients_.emplace_back(connect(options()));
    return run(reader->get("epoch")).value.data;
  }

  EventLoop loop_;
  regent::testing::ZooKeeperServer* server_ = nullptr;
  std::string root_;
  Duration sessionTimeout_{2000};
  std::string auth_;
  std::string readAuth_;
  ElectionLog log_;
  std::list<Contender> members_;
  std::list<kj::Own<ZooKeeperClient>> extraClients_;
  std::unique_ptr<ZooKeeperLeaderRetrieval> retrieval_;
};

regent::testing::ZooKeeperSession sessionOf(const ZooKeeperClient& client) {
  regent::testing::ZooKeeperSession session;
  session.id = client.sessionId();
  const std::string password = client.sessionPasswordForTests();
  KJ_REQUIRE(password.size() == session.password.size());
  std::copy(password.begin(), password.end(), session.password.begin());
  return session;
}

TEST_F(LeaderElectionTest, WithTenContendersALeaderChangeWakesOnlyTheNextContender) {
  for (int i = 0; i < 10; ++i) {
    Contender& added = addContender("m" + std::to_string(i));
    // In join order, so the latch order is the list order.
    ASSERT_TRUE(runUntil([&] { return added.election->latchNode().has_value(); }));
  }
  ASSERT_TRUE(runUntil([&] { return leaders() == 1; }));
  Contender& first = members_.front();
  ASSERT_TRUE(first.contender->leading());
  // Wait until every standby is parked on its predecessor's watch.
  ASSERT_TRUE(runUntil([&] {
    for (auto it = std::next(members_.begin()); it != members_.end(); ++it) {
      if (it->election->phase() != ZooKeeperLeaderElection::Phase::kWatchingPredecessor) {
        return false;
      }
    }
    return true;
  }));
  std::vector<uint64_t> before;
  for (auto& member : members_) before.push_back(member.zk->watchesFiredForTests());

  // The leader's session ends: its latch and leader nodes go at once, and it revokes.
  first.zk->close();
  auto second = std::next(members_.begin());
  ASSERT_TRUE(runUntil([&] { return second->contender->leading(); }));
  EXPECT_EQ(second->contender->epoch(), 2u);
  EXPECT_EQ(first.contender->lastReason(), "session closed");
  // A round trip through every standby's session: ZooKeeper sends a session the watch events of
  // a change before its reply to any later request, so a herd woken by the deletion (which came
  // before the second was granted) has been counted once each reply is in.
  for (auto it = std::next(members_.begin()); it != members_.end(); ++it) {
    ASSERT_TRUE(run(it->zk->exists("latch")).ok()) << it->contender->name();
  }
  size_t index = 0;
  for (auto& member : members_) {
    if (index >= 1) {
      uint64_t fired = member.zk->watchesFiredForTests() - before[index];
      EXPECT_EQ(fired, index == 1 ? 1u : 0u) << member.contender->name();
    }
    ++index;
  }
  EXPECT_EQ(leaders(), 1);
  expectConsistentLog();
}

TEST_F(LeaderElectionTest, ForcedSessionExpiryOfTheLeaderRevokesThenAStandbyIsGranted) {
  Contender& a = addContender("a");
  ASSERT_TRUE(runUntil([&] { return a.contender->leading(); }));
  Contender& b = addContender("b");
  ASSERT_TRUE(runUntil([&] {
    return b.election->phase() == ZooKeeperLeaderElection::Phase::kWatchingPredecessor;
  }));
  const uint64_t epoch = a.contender->epoch();
  const int64_t oldSession = a.zk->sessionId();

  const std::string connect = server_->connectString();
  auto session = sessionOf(*a.zk);
  Status expired = runAside<Status>([connect, session] {
    return regent::testing::ZooKeeperTestClient::expireSession(connect, session);
  });
  ASSERT_TRUE(expired.ok()) << expired.error().message;

  ASSERT_TRUE(runUntil([&] { return b.contender->leading(); }));
  EXPECT_EQ(b.contender->epoch(), epoch + 1);
  EXPECT_EQ(a.contender->revokes(), 1);
  // The leader learns of the end of its session: it revokes at the first sign (the server
  // drops its connection when the second handle attaches) and then sees the expiry.
  ASSERT_TRUE(runUntil([&] { return a.zk->sessionId() != oldSession; }));
  EXPECT_NE(std::find(a.sessionStates.begin(), a.sessionStates.end(), SessionState::kExpired),
            a.sessionStates.end());
  ASSERT_FALSE(log_.empty());
  // A contends again in its new session, as a standby behind b.
  ASSERT_TRUE(runUntil([&] { return a.election->latchNode().has_value(); }));
  EXPECT_FALSE(a.contender->leading());
  ASSERT_EQ(log_.size(), 3u);
  EXPECT_EQ(log_[1].contender, "a");
  EXPECT_FALSE(log_[1].granted);
  EXPECT_EQ(log_[2].contender, "b");
  EXPECT_TRUE(log_[2].granted);
  expectConsistentLog();
}

TEST_F(LeaderElectionTest, CutConnectionRevokesAtOnceAndTheLeaderReturnsAsAStandby) {
  sessionTimeout_ = Duration(6000);
  auto proxy = regent::testing::ThreadedTcpFaultProxy::start("127.0.0.1", server_->clientPort());
  ASSERT_TRUE(proxy.ok()) << proxy.error().message;
  Contender& a = addContender("a", {}, proxy.value()->address());
  ASSERT_TRUE(runUntil([&] { return a.contender->leading(); }));
  Contender& b = addContender("b");
  ASSERT_TRUE(runUntil([&] { return b.election->latchNode().has_value(); }));
  const int64_t session = a.zk->sessionId();
  const uint64_t epoch = a.contender->epoch();

  proxy.value()->cut();
  ASSERT_TRUE(runUntil([&] { return !a.contender->leading(); }));
  EXPECT_EQ(a.contender->lastReason(), "connection lost");
  // At once: the session is only suspended, far from its expiry.
  EXPECT_EQ(a.zk->sessionState(), SessionState::kSuspended);
  // Nobody else leads while a's session, and its leader node, may still live.
  EXPECT_FALSE(b.contender->leading());

  proxy.value()->resume();
  ASSERT_TRUE(runUntil([&] { return b.contender->leading(); }));
  EXPECT_EQ(b.contender->epoch(), epoch + 1);
  EXPECT_EQ(a.zk->sessionId(), session) << "the same session came back";
  ASSERT_TRUE(runUntil([&] { return a.election->latchNode().has_value(); }));
  auto& inspector = extraClients_.emplace_back(connect(options()));
  auto children = run(inspector->children("latch"));
  ASSERT_TRUE(children.ok());
  EXPECT_EQ(sortedLatchNodes(children.value),
            (std::vector<std::string>{*b.election->latchNode(), *a.election->latchNode()}));
  EXPECT_FALSE(a.contender->leading());
  expectConsistentLog();
}

TEST_F(LeaderElectionTest, ShortBlipWithinTheSuspendToleranceDoesNotRevoke) {
  sessionTimeout_ = Duration(9000);
  auto proxy = regent::testing::ThreadedTcpFaultProxy::start("127.0.0.1", server_->clientPort());
  ASSERT_TRUE(proxy.ok()) << proxy.error().message;
  // 2.5 s: below a third of the 9 s session.
  Contender& a = addContender("a", {.suspendTolerance = Duration(2500)}, proxy.value()->address());
  ASSERT_TRUE(runUntil([&] { return a.contender->leading(); }));
  Contender& b = addContender("b");
  ASSERT_TRUE(runUntil([&] { return b.election->latchNode().has_value(); }));
  ASSERT_EQ(a.zk->negotiatedSessionTimeout(), Duration(9000));

  // A stall shorter than the client's read timeout is not even a disconnect.
  proxy.value()->stall();
  runFor(Duration(300));
  proxy.value()->resume();
  // A cut is: the client suspends, reconnects within the tolerance and keeps its term.
  a.sessionStates.clear();
  proxy.value()->cut();
  ASSERT_TRUE(runUntil([&] { return a.zk->sessionState() == SessionState::kSuspended; }));
  proxy.value()->resume();
  ASSERT_TRUE(runUntil([&] { return a.zk->sessionState() == SessionState::kReconnected; }));
  // A round trip through a's session after it reconnected: any request the election sent on
  // reconnecting is answered first, and so is handled before this reply.
  ASSERT_TRUE(run(a.zk->exists("latch")).ok());
  EXPECT_EQ(a.sessionStates,
            (std::vector<SessionState>{SessionState::kSuspended, SessionState::kReconnected}));
  EXPECT_TRUE(a.contender->leading());
  EXPECT_EQ(a.contender->revokes(), 0);
  EXPECT_EQ(a.contender->epoch(), 1u);
  EXPECT_FALSE(b.contender->leading());
  // Control: a cut that outlasts the tolerance does revoke.
  proxy.value()->cut();
  ASSERT_TRUE(runUntil([&] { return !a.contender->leading(); }));
  EXPECT_EQ(a.contender->lastReason(), "connection lost");
  proxy.value()->resume();
  ASSERT_TRUE(runUntil([&] { return b.contender->leading(); }));
  EXPECT_EQ(b.contender->epoch(), 2u);
  expectConsistentLog();
}

TEST_F(LeaderElectionTest, WithAuthOnlyTheWriterChangesTheNodesAndTheReaderStillReads) {
  auth_ = "admin:secret";
  readAuth_ = "reader:pw";
  Contender& a = addContender("a");
  ASSERT_TRUE(runUntil([&] { return a.contender->leading(); }));
  Contender& b = addContender("b");
  ASSERT_TRUE(runUntil([&] { return b.election->latchNode().has_value(); }));
  const std::string latchPath = "latch/" + *b.election->latchNode();

  auto anonymousOptions = options();
  anonymousOptions.auth.clear();
  anonymousOptions.readAuth.clear();
  auto& anonymous = extraClients_.emplace_back(connect(anonymousOptions));
  auto readerOptions = options();
  readerOptions.readOnlyIdentity = true;
  auto& reader = extraClients_.emplace_back(connect(readerOptions));

  for (ZooKeeperClient* intruder : {anonymous.get(), reader.get()}) {
    for (const std::string& path : {std::string("leader"), std::string("epoch"), latchPath}) {
      EXPECT_EQ(run(intruder->remove(path)).code, ZkCode::kNoAuth) << path;
      EXPECT_EQ(run(intruder->set(path, "{}")).code, ZkCode::kNoAuth) << path;
    }
    EXPECT_EQ(run(intruder->multi({ha::ZkOp::remove("leader"), ha::ZkOp::remove(latchPath)})).code,
              ZkCode::kNoAuth);
    EXPECT_EQ(run(intruder->create("latch/m-", "{}", ha::CreateMode::kEphemeralSequential)).code,
              ZkCode::kNoAuth);
  }
  EXPECT_EQ(run(anonymous->get("leader")).code, ZkCode::kNoAuth);

  // The reader reads every node, and retrieval with the read identity works.
  EXPECT_TRUE(run(reader->get("leader")).ok());
  EXPECT_EQ(run(reader->get("epoch")).value.data, "1");
  EXPECT_TRUE(run(reader->get(latchPath)).ok());
  ZooKeeperLeaderRetrieval retrieval(*reader, loop_.timer());
  auto leader = run(retrieval.leader());
  ASSERT_TRUE(leader.ok()) << leader.error().message;
  ASSERT_TRUE(leader.value());
  EXPECT_EQ(leader.value()->masterId, "a");
  auto entries = run(retrieval.contenders());
  ASSERT_TRUE(entries.ok()) << entries.error().message;
  ASSERT_EQ(entries.value().size(), 2u);
  EXPECT_TRUE(entries.value()[0].leader);
  EXPECT_EQ(entries.value()[1].info.masterId, "b");
  RecordingListener listener;
  retrieval.start(listener);
  ASSERT_TRUE(runUntil([&] { return !listener.changes.empty(); }));
  ASSERT_TRUE(listener.current());
  EXPECT_EQ(listener.current()->epoch, 1u);

  // Nothing the intruders tried changed anything: the writers still work the election.
  EXPECT_TRUE(a.contender->leading());
  EXPECT_TRUE(a.election->handOver(false).wait(loop_.waitScope()).ok());
  ASSERT_TRUE(runUntil([&] { return b.contender->leading(); }));
  EXPECT_EQ(b.contender->epoch(), 2u);
  ASSERT_TRUE(runUntil([&] { return listener.current() && listener.current()->masterId == "b"; }));
  expectConsistentLog();
}

TEST_F(LeaderElectionTest, GracefulHandOverPublishesTheNextLeaderWhileTheOldSessionIsOpen) {
  sessionTimeout_ = Duration(20000);  // Far longer than the test waits: no expiry can help.
  Contender& a = addContender("a");
  ASSERT_TRUE(runUntil([&] { return a.contender->leading(); }));
  Contender& b = addContender("b");
  ASSERT_TRUE(runUntil([&] { return b.election->latchNode().has_value(); }));
  Contender& c = addContender("c");  // Behind b.
  ASSERT_TRUE(runUntil([&] { return c.election->latchNode().has_value(); }));
  ASSERT_TRUE(run(a.election->markServing(1)).ok());

  auto& watcher = extraClients_.emplace_back(connect(options()));
  retrieval_ = std::make_unique<ZooKeeperLeaderRetrieval>(*watcher, loop_.timer());
  RecordingListener listener;
  retrieval_->start(listener);
  ASSERT_TRUE(runUntil([&] { return !listener.changes.empty(); }));
  ASSERT_EQ(listener.current()->masterId, "a");
  EXPECT_EQ(listener.current()->status, LeaderStatus::kServing);

  const int64_t session = a.zk->sessionId();
  bool handedOver = false;
  auto done = a.election->handOver(false)
                  .then([&](Status outcome) { handedOver = outcome.ok(); })
                  .eagerlyEvaluate(nullptr);
  ASSERT_TRUE(runUntil([&] { return handedOver; }));
  EXPECT_EQ(a.contender->lastReason(), "handed over");
  ASSERT_TRUE(runUntil([&] { return listener.current() && listener.current()->masterId == "b"; },
                       Duration(5000)));
  EXPECT_TRUE(b.contender->leading());
  EXPECT_EQ(listener.current()->epoch, 2u);
  EXPECT_EQ(listener.current()->status, LeaderStatus::kRecovering);
  // The old leader's session is still open: the hand-over did not wait for any timeout.
  EXPECT_EQ(a.zk->sessionId(), session);
  EXPECT_EQ(a.zk->sessionState(), SessionState::kConnected);
  EXPECT_FALSE(a.election->latchNode());
  EXPECT_FALSE(c.contender->leading());
  expectConsistentLog();
}

TEST_F(LeaderElectionTest, EpochsRiseByOnePerTermAcrossFailoversAndNeverTwoLeaders) {
  for (const char* name : {"a", "b", "c", "d"}) addContender(name);
  ASSERT_TRUE(runUntil([&] { return leaders() == 1; }));
  int replacements = 0;
  for (int round = 0; round < 6; ++round) {
    Contender* current = leader();
    ASSERT_NE(current, nullptr);
    const uint64_t epoch = current->contender->epoch();
    switch (round % 3) {
      case 0:  // Graceful hand-over, back in line.
        EXPECT_TRUE(current->election->handOver(true).wait(loop_.waitScope()).ok());
        break;
      case 1: {  // Forced expiry.
        const std::string connect = server_->connectString();
        auto session = sessionOf(*current->zk);
        Status expired = runAside<Status>([connect, session] {
          return regent::testing::ZooKeeperTestClient::expireSession(connect, session);
        });
        ASSERT_TRUE(expired.ok()) << expired.error().message;
        break;
      }
      case 2:  // The process closes its session and goes away; a new one joins.
        current->zk->close();
        addContender("n" + std::to_string(replacements++));
        break;
    }
    ASSERT_TRUE(runUntil([&] {
      Contender* next = nullptr;
      for (auto& member : members_) {
        if (member.contender->leading()) next = &member;
      }
      return next != nullptr && next->contender->epoch() > epoch;
    })) << "round "
        << round;
    EXPECT_EQ(leader()->contender->epoch(), epoch + 1) << "round " << round;
  }
  // Settled: every contender with a live session but the leader is parked on its predecessor's
  // watch, so no other grant is on its way (one would need a latch node to go).
  Contender* const settled = leader();
  ASSERT_NE(settled, nullptr);
  ASSERT_TRUE(runUntil([&] {
    for (auto& member : members_) {
      if (&member == settled || member.zk->sessionState() == SessionState::kClosed ||
          member.zk->sessionState() == SessionState::kExpired) {
        continue;
      }
      if (member.election->phase() != ZooKeeperLeaderElection::Phase::kWatchingPredecessor) {
        return false;
      }
    }
    return true;
  }));
  EXPECT_EQ(leaders(), 1);
  EXPECT_EQ(readEpoch(), "7");
  auto published = readLeader();
  ASSERT_TRUE(published);
  EXPECT_EQ(published->epoch, 7u);
  EXPECT_EQ(published->masterId, leader()->contender->name());
  expectConsistentLog();
}

TEST_F(LeaderElectionTest, RetrievalFollowsTheLeaderAcrossItsOwnSessionExpiry) {
  Contender& a = addContender("a");
  ASSERT_TRUE(runUntil([&] { return a.contender->leading(); }));
  Contender& b = addContender("b");
  ASSERT_TRUE(runUntil([&] { return b.election->latchNode().has_value(); }));
  auto& watcher = extraClients_.emplace_back(connect(options()));
  retrieval_ = std::make_unique<ZooKeeperLeaderRetrieval>(*watcher, loop_.timer());
  RecordingListener listener;
  retrieval_->start(listener);
  ASSERT_TRUE(runUntil([&] { return listener.current().has_value(); }));
  EXPECT_EQ(listener.current()->masterId, "a");

  // The watcher's session ends: its watch is gone with it and must be set again.
  const int64_t oldSession = watcher->sessionId();
  const std::string connect = server_->connectString();
  auto session = sessionOf(*watcher);
  Status expired = runAside<Status>([connect, session] {
    return regent::testing::ZooKeeperTestClient::expireSession(connect, session);
  });
  ASSERT_TRUE(expired.ok()) << expired.error().message;
  ASSERT_TRUE(runUntil([&] {
    return watcher->sessionId() != oldSession &&
           watcher->sessionState() == SessionState::kConnected;
  }));
  // Told that the view may be stale, then that it is live again.
  // (The forced expiry may take several re-attaches, each one a lost connection.)
  ASSERT_TRUE(runUntil([&] { return listener.connection.size() >= 2; }));
  ASSERT_TRUE(runUntil([&] { return listener.connection.back(); }));
  EXPECT_FALSE(listener.connection.front());
  for (size_t i = 1; i < listener.connection.size(); ++i) {
    EXPECT_NE(listener.connection[i], listener.connection[i - 1]) << "report " << i;
  }

  EXPECT_TRUE(a.election->handOver(false).wait(loop_.waitScope()).ok());
  ASSERT_TRUE(runUntil([&] { return listener.current() && listener.current()->masterId == "b"; }));
  EXPECT_EQ(listener.current()->epoch, 2u);
  // Each reported value differs from the one before it.
  for (size_t i = 1; i < listener.changes.size(); ++i) {
    EXPECT_NE(listener.changes[i], listener.changes[i - 1]) << "change " << i;
  }
}

TEST_F(LeaderElectionTest, FactoriesBuildTheZooKeeperElectionAndRetrievalFromTheConfig) {
  auto config = loadConfig(ConfigSources{
      .set = {"ha.zookeeper.quorum=" + server_->connectString(),
              "ha.zookeeper.root=/regent-leader-itest", "cluster-id=" + JobId::random().toHex(),
              "ha.zookeeper.session-timeout=3s", "ha.zookeeper.suspend-tolerance=1s"}});
  ASSERT_TRUE(config.ok()) << config.error().message;
  auto writer = ha::HaServices::create(loop_, config.value(), ha::HaServices::Identity::kWriter);
  ASSERT_TRUE(writer.ok()) << writer.error().message;
  auto reader = ha::HaServices::create(loop_, config.value(), ha::HaServices::Identity::kReader);
  ASSERT_TRUE(reader.ok()) << reader.error().message;
  {
    auto election = createLeaderElection(loop_, config.value(), *writer.value(),
                                         testing::contenderInfoForTests("f"));
    ASSERT_TRUE(election.ok()) << election.error().message;
    RecordingContender contender("f", log_);
    election.value()->start(contender);
    ASSERT_TRUE(runUntil([&] { return contender.leading(); }));
    EXPECT_EQ(election.value()->currentEpoch(), 1u);

    auto retrieval = createLeaderRetrieval(loop_, config.value(), *reader.value());
    ASSERT_TRUE(retrieval.ok()) << retrieval.error().message;
    auto leader = run(retrieval.value()->leader());
    ASSERT_TRUE(leader.ok()) << leader.error().message;
    ASSERT_TRUE(leader.value());
    EXPECT_EQ(leader.value()->masterId, "f");
    EXPECT_EQ(leader.value()->epoch, 1u);
    EXPECT_TRUE(run(election.value()->handOver(false)).ok());
    EXPECT_EQ(contender.lastReason(), "handed over");
    auto none = run(retrieval.value()->leader());
    ASSERT_TRUE(none.ok());
    EXPECT_FALSE(none.value());
  }
}

// Its own server: restarting the shared one would disturb other tests of this binary.
TEST(LeaderElectionRestart, ServerRestartedOnTheSameDataEndsWithALeader) {
  auto started = regent::testing::ZooKeeperServer::start();
  ASSERT_TRUE(started.ok()) << started.error().message;
  auto& server = *started.value();
  EventLoop loop;
  ElectionLog log;
  std::list<Contender> members;
  ZooKeeperClientOptions o;
  o.quorum = server.connectString();
  o.root = "/regent-leader-itest/restart";
  o.sessionTimeout = Duration(6000);
  for (const char* name : {"a", "b", "c"}) {
    Contender member;
    auto client = ZooKeeperClient::start(loop, o);
    ASSERT_TRUE(client.ok());
    member.zk = std::move(client).value();
    ASSERT_TRUE(loop.run(member.zk->waitConnected(kWait)).ok());
    member.contender = std::make_unique<RecordingContender>(name, log);
    member.election = std::make_unique<ZooKeeperLeaderElection>(
        *member.zk, loop.timer(), testing::contenderInfoForTests(name));
    member.election->start(*member.contender);
    members.push_back(std::move(member));
  }
  auto runUntil = [&](const std::function<bool()>& done) {
    auto deadline = loop.timer().now() + kWait.count() * kj::MILLISECONDS;
    while (!done()) {
      if (loop.timer().now() >= deadline) return false;
      loop.run(loop.timer().afterDelay(2 * kj::MILLISECONDS));
    }
    return true;
  };
  auto leaderOf = [&]() -> Contender* {
    for (auto& member : members) {
      if (member.contender->leading()) return &member;
    }
    return nullptr;
  };
  ASSERT_TRUE(runUntil([&] { return leaderOf() != nullptr; }));
  const uint64_t before = leaderOf()->contender->epoch();
  const size_t eventsBefore = log.size();

  // Blocks the loop on purpose: every client finds its connection gone once the loop runs again.
  ASSERT_TRUE(server.restart().ok());

  // Some contender leads again and ZooKeeper publishes it.
  auto published = [&]() -> std::optional<LeaderInfo> {
    Contender* current = leaderOf();
    if (current == nullptr) return std::nullopt;
    auto node = loop.run(current->zk->get("leader"));
    if (!node.ok()) return std::nullopt;
    auto info = leaderInfoFromJson(node.value.data);
    if (!info.ok()) return std::nullopt;
    return info.value();
  };
  std::optional<LeaderInfo> after;
  ASSERT_TRUE(runUntil([&] {
    after = published();
    return after && leaderOf() && after->epoch == leaderOf()->contender->epoch() &&
           after->masterId == leaderOf()->contender->name();
  }));
  bool termChanged = log.size() > eventsBefore;
  if (termChanged) {
    EXPECT_GT(after->epoch, before);
  } else {
    EXPECT_EQ(after->epoch, before);
  }
  // With the default suspend tolerance (0) the lost connection ends the term.
  EXPECT_TRUE(termChanged);
  EXPECT_EQ(testing::checkElectionLog(log), "");
  for (auto& member : members) member.election.reset();
  members.clear();
}

// A server restarted on its data restores the sessions it had, each with a fresh timeout. A
// master whose client gave its session up meanwhile (the server was down longer than the
// session timeout) comes back with a new session; the old session's `leader` record and latch
// node would block every contender, and say SERVING, until the server expires that session.
// The election removes them, so a term is granted while the restored sessions still live.
TEST(LeaderElectionRestart, NodesOfARestoredSessionAreRemovedByTheirMasterOnceItIsBack) {
  auto started = regent::testing::ZooKeeperServer::start();
  ASSERT_TRUE(started.ok()) << started.error().message;
  auto& server = *started.value();
  EventLoop loop;
  ElectionLog log;
  std::list<Contender> members;
  ZooKeeperClientOptions o;
  o.quorum = server.connectString();
  o.root = "/regent-leader-itest/restored";
  // Long enough that the restored sessions outlive the restart and the clean-up by far.
  o.sessionTimeout = Duration(15000);
  for (const char* name : {"a", "b"}) {
    Contender member;
    auto client = ZooKeeperClient::start(loop, o);
    ASSERT_TRUE(client.ok());
    member.zk = std::move(client).value();
    ASSERT_TRUE(loop.run(member.zk->waitConnected(kWait)).ok());
    member.contender = std::make_unique<RecordingContender>(name, log);
    member.election = std::make_unique<ZooKeeperLeaderElection>(
        *member.zk, loop.timer(), testing::contenderInfoForTests(name));
    member.election->start(*member.contender);
    members.push_back(std::move(member));
  }
  auto runUntil = [&](const std::function<bool()>& done) {
    return regent::testing::runLoopUntil(loop, done, Duration(60000));
  };
  Contender* holder = nullptr;
  ASSERT_TRUE(runUntil([&] {
    for (auto& member : members) {
      if (member.contender->leading()) holder = &member;
    }
    return holder != nullptr;
  }));
  // The session holding `leader` (and the lowest latch node).
  const int64_t oldSession = holder->zk->sessionId();
  char oldSessionHex[32];
  std::snprintf(oldSessionHex, sizeof oldSessionHex, "0x%llx",
                static_cast<unsigned long long>(oldSession));

  ASSERT_TRUE(server.stop().ok());
  // Both clients give their sessions up (the local timer of the session timeout): after
  // SUSPENDED, only an expiry leads back to CONNECTING.
  ASSERT_TRUE(runUntil([&] {
    return std::all_of(members.begin(), members.end(), [](Contender& member) {
      return member.zk->sessionState() == SessionState::kConnecting;
    });
  }));
  // From this (the main) thread: the server's death signal is tied to the thread that forked it.
  ASSERT_TRUE(server.restart().ok());
  ASSERT_TRUE(runUntil([&] {
    return std::any_of(members.begin(), members.end(),
                       [](Contender& member) { return member.contender->epoch() == 2; });
  }));
  // Granted while the server still holds the restored session: nobody waited for its expiry.
  auto dump = server.fourLetterWord(0, "dump");
  ASSERT_TRUE(dump.ok()) << dump.error().message;
  EXPECT_NE(dump.value().find(oldSessionHex), std::string::npos)
      << "session " << oldSessionHex << " is gone from the server:\n" << dump.value();
  EXPECT_EQ(testing::checkElectionLog(log), "");
  for (auto& member : members) member.election.reset();
  members.clear();
}

}  // namespace
}  // namespace regent::leader

// Unit tests of leader/: the JSON codecs, the ZooKeeper election and retrieval logic on an
// in-memory coordination fake with a manually advanced timer, and the standalone election's
// epoch file.
#include <gtest/gtest.h>
#include <kj/async.h>
#include <kj/timer.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "common/event_loop.h"
#include "conf/config.h"
#include "ha/ha_services.h"
#include "leader/epoch_file.h"
#include "leader/latch_names.h"
#include "leader/leader_info.h"
#include "leader/leader_services.h"
#include "leader/standalone_leader_election.h"
#include "leader/zookeeper_leader_election.h"
#include "leader/zookeeper_leader_retrieval.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/leader/fake_coordination_test_util.h"
#include "tests/leader/leader_test_util.h"

namespace regent::leader {
namespace {

using ha::ZkCode;
using testing::ElectionLog;
using testing::FakeCoordination;
using testing::FakeZooKeeper;
using testing::RecordingContender;
using testing::RecordingListener;

// ---------------------------------------------------------------------------------------------
// JSON codecs

TEST(LeaderInfoJson, ContenderInfoRoundTripsWithSnakeCaseFields) {
  ContenderInfo info = testing::contenderInfoForTests("a1b2");
  std::string json = toJson(info);
  for (const char* field : {"\"master_id\"", "\"rpc_address\"", "\"http_address\"", "\"host\"",
                            "\"pid\"", "\"version\"", "\"started_at_ms\""}) {
    EXPECT_NE(json.find(field), std::string::npos) << field << " in " << json;
  }
  auto parsed = contenderInfoFromJson(json);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed.value(), info);
}

TEST(LeaderInfoJson, LeaderInfoRoundTripsWithStatusNames) {
  LeaderInfo info = leaderInfoFor(testing::contenderInfoForTests("c3"), 17, 1700000000123);
  EXPECT_EQ(info.status, LeaderStatus::kRecovering);
  std::string json = toJson(info);
  EXPECT_NE(json.find("\"status\":\"RECOVERING\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"elected_at_ms\":1700000000123"), std::string::npos) << json;
  EXPECT_NE(json.find("\"epoch\":17"), std::string::npos) << json;
  auto parsed = leaderInfoFromJson(json);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed.value(), info);

  info.status = LeaderStatus::kServing;
  auto serving = leaderInfoFromJson(toJson(info));
  ASSERT_TRUE(serving.ok());
  EXPECT_EQ(serving.value().status, LeaderStatus::kServing);
  EXPECT_STREQ(leaderStatusName(LeaderStatus::kServing), "SERVING");
}

TEST(LeaderInfoJson, ErrorsNameTheField) {
  auto missing = leaderInfoFromJson(R"({"epoch":1,"master_id":"a"})");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("\"rpc_address\" is missing"), std::string::npos)
      << missing.error().message;

  auto wrongType = contenderInfoFromJson(
      R"({"master_id":"a","rpc_address":"x","http_address":"y","host":"h","pid":"12",)"
      R"("version":"v","started_at_ms":1})");
  ASSERT_FALSE(wrongType.ok());
  EXPECT_NE(wrongType.error().message.find("\"pid\""), std::string::npos)
      << wrongType.error().message;

  auto negativeEpoch = leaderInfoFromJson(
      R"({"epoch":-1,"master_id":"a","rpc_address":"x","http_address":"y","host":"h","pid":1,)"
      R"("elected_at_ms":1,"status":"SERVING"})");
  ASSERT_FALSE(negativeEpoch.ok());
  EXPECT_NE(negativeEpoch.error().message.find("\"epoch\""), std::string::npos);

  auto badStatus = leaderInfoFromJson(
      R"({"epoch":1,"master_id":"a","rpc_address":"x","http_address":"y","host":"h","pid":1,)"
      R"("elected_at_ms":1,"status":"LEADING"})");
  ASSERT_FALSE(badStatus.ok());
  EXPECT_NE(badStatus.error().message.find("\"status\""), std::string::npos);
  EXPECT_NE(badStatus.error().message.find("LEADING"), std::string::npos);

  auto malformed = leaderInfoFromJson("{not json");
  ASSERT_FALSE(malformed.ok());
  EXPECT_NE(malformed.error().message.find("malformed"), std::string::npos);
  EXPECT_FALSE(contenderInfoFromJson("[1,2]").ok());
}

TEST(LeaderInfoJson, UnknownFieldsAreIgnored) {
  ContenderInfo info = testing::contenderInfoForTests("d4");
  std::string json = toJson(info);
  json.insert(1, R"("zone":"eu-1",)");
  auto parsed = contenderInfoFromJson(json);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed.value(), info);
}

TEST(LatchNames, SortBySequenceAndIgnoreOtherChildren) {
  EXPECT_EQ(sortedLatchNodes({"m-0000000010", "lock", "m-0000000002", "m-0000000007"}),
            (std::vector<std::string>{"m-0000000002", "m-0000000007", "m-0000000010"}));
  EXPECT_EQ(latchNodeName("latch/m-0000000003"), "m-0000000003");
}

// ---------------------------------------------------------------------------------------------
// ZooKeeperLeaderElection on the fake

// One fake server, clients and elections on a kj loop with a manually advanced timer.
class FakeElectionTest : public ::testing::Test {
 protected:
  struct Member {
    std::unique_ptr<FakeCoordination> zk;
    std::unique_ptr<RecordingContender> contender;
    std::unique_ptr<ZooKeeperLeaderElection> election;
  };

  FakeElectionTest() : waitScope_(kjLoop_), timer_(kj::origin<kj::TimePoint>()) {}
  ~FakeElectionTest() noexcept override {
    for (auto& member : members_) {
      member.election.reset();
      member.zk.reset();
    }
  }

  Member& add(const std::string& name, ZooKeeperLeaderElectionOptions options = {},
              bool startNow = true) {
    Member member;
    member.zk = std::make_unique<FakeCoordination>(server_);
    member.contender = std::make_unique<RecordingContender>(name, log_);
    member.election = std::make_unique<ZooKeeperLeaderElection>(
        *member.zk, timer_, testing::contenderInfoForTests(name), options);
    members_.push_back(std::move(member));
    Member& added = members_.back();
    if (startNow) {
      added.election->start(*added.contender);
      settle();
    }
    return added;
  }

  // Runs every continuation that is ready.
  void settle() { waitScope_.poll(); }
  void advance(Duration by) {
    timer_.advanceTo(timer_.now() + by.count() * kj::MILLISECONDS);
    settle();
  }

  std::vector<std::string> latch() const { return sortedLatchNodes(server_.children("latch")); }
  std::optional<LeaderInfo> leaderNode() const {
    if (!server_.exists("leader")) return std::nullopt;
    auto info = leaderInfoFromJson(server_.data("leader"));
    EXPECT_TRUE(info.ok());
    return info.ok() ? std::optional<LeaderInfo>(info.value()) : std::nullopt;
  }
  void expectConsistentLog() {
    EXPECT_EQ(testing::checkElectionLog(log_), "");
    for (auto& member : members_) {
      EXPECT_TRUE(member.contender->violations().empty())
          << member.contender->name() << ": " << member.contender->violations().front();
    }
  }

  kj::EventLoop kjLoop_;
  kj::WaitScope waitScope_;
  kj::TimerImpl timer_;
  FakeZooKeeper server_;
  ElectionLog log_;
  std::list<Member> members_;
};

TEST_F(FakeElectionTest, LowestLatchNodeWinsEpochOneInOneTransaction) {
  Member& a = add("a");
  Member& b = add("b");
  Member& c = add("c");
  EXPECT_TRUE(a.contender->leading());
  EXPECT_EQ(a.contender->epoch(), 1u);
  EXPECT_EQ(a.election->currentEpoch(), 1u);
  EXPECT_FALSE(b.contender->leading());
  EXPECT_FALSE(c.contender->leading());
  EXPECT_EQ(b.election->currentEpoch(), 0u);
  EXPECT_EQ(server_.data("epoch"), "1");
  auto leader = leaderNode();
  ASSERT_TRUE(leader);
  EXPECT_EQ(leader->epoch, 1u);
  EXPECT_EQ(leader->masterId, "a");
  EXPECT_EQ(leader->status, LeaderStatus::kRecovering);
  EXPECT_EQ(server_.nodes().at("leader").stat.ephemeralOwner, a.zk->sessionId());
  // The win was one multi: check latch, create leader, set epoch.
  int multis = 0;
  for (const auto& op : a.zk->opLog()) multis += op.rfind("multi", 0) == 0 ? 1 : 0;
  EXPECT_EQ(multis, 1);
  EXPECT_EQ(latch().size(), 3u);
  EXPECT_EQ(a.election->latchNode(), latch()[0]);
  expectConsistentLog();
}

TEST_F(FakeElectionTest, StandbysWatchOnlyTheirPredecessor) {
  Member& a = add("a");
  Member& b = add("b");
  Member& c = add("c");
  auto nodes = latch();
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(b.zk->watchedPaths(), std::vector<std::string>{"latch/" + nodes[0]});
  EXPECT_EQ(c.zk->watchedPaths(), std::vector<std::string>{"latch/" + nodes[1]});
  // The leader watches its own latch node only.
  EXPECT_EQ(a.zk->watchedPaths(), std::vector<std::string>{"latch/" + nodes[0]});
}

TEST_F(FakeElectionTest, LeaderLossWakesOnlyTheNextContender) {
  for (const char* name : {"a", "b", "c", "d", "e"}) add(name);
  std::vector<uint64_t> before;
  for (auto& member : members_) before.push_back(member.zk->watchesFired());
  auto it = members_.begin();
  it->zk->close();  // The leader's session ends: its latch and leader nodes go.
  settle();
  ++it;
  EXPECT_TRUE(it->contender->leading());
  EXPECT_EQ(it->contender->epoch(), 2u);
  EXPECT_EQ(it->zk->watchesFired(), before[1] + 1);
  size_t index = 2;
  for (++it; it != members_.end(); ++it, ++index) {
    EXPECT_EQ(it->zk->watchesFired(), before[index]) << it->contender->name();
    EXPECT_FALSE(it->contender->leading());
  }
  EXPECT_EQ(server_.data("epoch"), "2");
  expectConsistentLog();
}

TEST_F(FakeElectionTest, EpochIsComparedAndSetAndContinuesFromTheStoredValue) {
  FakeCoordination admin(server_);
  server_.nodes();
  ASSERT_TRUE(admin.create("epoch", "41", ha::CreateMode::kPersistent).wait(waitScope_).ok());
  // Someone bumps the epoch between our read and our transaction: the CAS fails, we read again.
  Member& a = add("a", {}, /*startNow=*/false);
  int multis = 0;
  a.zk->setFaultHook([&](const FakeCoordination::OpInfo& op) {
    if (op.kind == "multi" && multis++ == 0) server_.setForTests("epoch", "50");
    return FakeCoordination::Fault::kNone;
  });
  a.election->start(*a.contender);
  settle();
  EXPECT_EQ(multis, 2);
  EXPECT_EQ(a.contender->epoch(), 51u);
  EXPECT_EQ(server_.data("epoch"), "51");
  EXPECT_EQ(leaderNode()->epoch, 51u);
}

TEST_F(FakeElectionTest, ConnectionLossRevokesAtOnceAndTheLeaderRejoinsAtTheBack) {
  Member& a = add("a");
  Member& b = add("b");
  std::string oldLatch = *a.election->latchNode();
  a.zk->suspend();
  EXPECT_FALSE(a.contender->leading()) << "tolerance 0 revokes inside the SUSPENDED event";
  EXPECT_EQ(a.contender->lastReason(), "connection lost");
  settle();
  // Nobody else may lead while a's session (and its `leader` node) lives on.
  EXPECT_FALSE(b.contender->leading());
  a.zk->reconnect();
  settle();
  EXPECT_TRUE(b.contender->leading());
  EXPECT_EQ(b.contender->epoch(), 2u);
  ASSERT_TRUE(a.election->latchNode());
  EXPECT_NE(*a.election->latchNode(), oldLatch);
  EXPECT_EQ(latch(),
            (std::vector<std::string>{*b.election->latchNode(), *a.election->latchNode()}));
  EXPECT_EQ(a.contender->latchNodes(),
            (std::vector<std::string>{oldLatch, *a.election->latchNode()}));
  ASSERT_EQ(log_.size(), 3u);
  EXPECT_EQ(log_[1].contender, "a");
  EXPECT_FALSE(log_[1].granted);
  EXPECT_EQ(log_[2].contender, "b");
  expectConsistentLog();
}

TEST_F(FakeElectionTest, SuspendToleranceKeepsLeadershipThroughAShortBlip) {
  Member& a = add("a", {.suspendTolerance = Duration(1000)});
  a.zk->suspend();
  advance(Duration(999));
  EXPECT_TRUE(a.contender->leading());
  a.zk->reconnect();
  settle();
  advance(Duration(5000));
  EXPECT_TRUE(a.contender->leading());
  EXPECT_EQ(a.contender->revokes(), 0);
  // A longer outage revokes once the tolerance is used up.
  a.zk->suspend();
  advance(Duration(999));
  EXPECT_TRUE(a.contender->leading());
  advance(Duration(1));
  EXPECT_FALSE(a.contender->leading());
  EXPECT_EQ(a.contender->lastReason(), "connection lost");
  // Back: the old term's nodes go and a new term starts (it is the only contender).
  a.zk->reconnect();
  settle();
  EXPECT_TRUE(a.contender->leading());
  EXPECT_EQ(a.contender->epoch(), 2u);
  expectConsistentLog();
}

TEST_F(FakeElectionTest, SuspendToleranceIsCappedAtAThirdOfTheSessionTimeout) {
  Member& a = add("a", {.suspendTolerance = Duration(2000)});
  a.zk->setNegotiatedSessionTimeout(Duration(1500));
  a.zk->suspend();
  advance(Duration(499));
  EXPECT_TRUE(a.contender->leading());
  advance(Duration(1));
  EXPECT_FALSE(a.contender->leading());
}

TEST_F(FakeElectionTest, SessionExpiryRevokesAndContendsAgainInTheNewSession) {
  Member& a = add("a", {.suspendTolerance = Duration(1000)});
  Member& b = add("b");
  a.zk->suspend();
  a.zk->expire();
  EXPECT_FALSE(a.contender->leading());
  EXPECT_EQ(a.contender->lastReason(), "session expired");
  settle();
  EXPECT_TRUE(b.contender->leading());
  EXPECT_EQ(b.contender->epoch(), 2u);
  EXPECT_FALSE(a.election->latchNode());
  // The tolerance timer of the old term must not act any more.
  advance(Duration(2000));
  EXPECT_EQ(a.contender->revokes(), 1);
  a.zk->connectNewSession();
  settle();
  ASSERT_TRUE(a.election->latchNode());
  EXPECT_EQ(latch().back(), *a.election->latchNode());
  EXPECT_FALSE(a.contender->leading());
  expectConsistentLog();
}

TEST_F(FakeElectionTest, DeletedLatchNodeRevokesAndFreesTheLeaderNode) {
  Member& a = add("a");
  Member& b = add("b");
  ASSERT_EQ(server_.removeForTests("latch/" + *a.election->latchNode()), ZkCode::kOk);
  settle();
  EXPECT_EQ(a.contender->revokes(), 1);
  EXPECT_EQ(a.contender->lastReason(), "latch node deleted");
  EXPECT_TRUE(b.contender->leading());
  EXPECT_EQ(b.contender->epoch(), 2u);
  EXPECT_EQ(leaderNode()->masterId, "b");
  ASSERT_TRUE(a.election->latchNode());
  EXPECT_EQ(latch().back(), *a.election->latchNode());
  expectConsistentLog();
}

TEST_F(FakeElectionTest, HandOverDeletesLeaderAndLatchInOneTransaction) {
  Member& a = add("a");
  Member& b = add("b");
  size_t opsBefore = a.zk->opLog().size();
  auto done = a.election->handOver(/*recontend=*/false);
  EXPECT_TRUE(a.contender->leading()) << "the revoke is never called from inside handOver()";
  done.wait(waitScope_);
  EXPECT_EQ(a.contender->lastReason(), "handed over");
  std::vector<std::string> ops(a.zk->opLog().begin() + opsBefore, a.zk->opLog().end());
  EXPECT_EQ(ops, std::vector<std::string>{"multi leader"});
  settle();
  EXPECT_TRUE(b.contender->leading());
  EXPECT_EQ(b.contender->epoch(), 2u);
  EXPECT_FALSE(a.election->latchNode());
  EXPECT_EQ(latch().size(), 1u);
  // Handed over for good: a stays out even when b goes.
  b.zk->close();
  settle();
  EXPECT_FALSE(a.contender->leading());
  EXPECT_EQ(a.contender->grants(), 1);
  expectConsistentLog();
}

TEST_F(FakeElectionTest, HandOverWithRecontendJoinsAtTheBack) {
  Member& a = add("a");
  Member& b = add("b");
  a.election->handOver(/*recontend=*/true).wait(waitScope_);
  settle();
  EXPECT_TRUE(b.contender->leading());
  ASSERT_TRUE(a.election->latchNode());
  EXPECT_EQ(latch(),
            (std::vector<std::string>{*b.election->latchNode(), *a.election->latchNode()}));
  b.election->handOver(true).wait(waitScope_);
  settle();
  EXPECT_TRUE(a.contender->leading());
  EXPECT_EQ(a.contender->epoch(), 3u);
  expectConsistentLog();
}

TEST_F(FakeElectionTest, MarkServingPublishesServingAndRejectsAnotherEpoch) {
  Member& a = add("a");
  auto stale = a.election->markServing(7).wait(waitScope_);
  EXPECT_FALSE(stale.ok());
  EXPECT_NE(stale.error().message.find("epoch 7"), std::string::npos) << stale.error().message;
  EXPECT_EQ(leaderNode()->status, LeaderStatus::kRecovering);
  auto serving = a.election->markServing(1).wait(waitScope_);
  ASSERT_TRUE(serving.ok()) << serving.error().message;
  EXPECT_EQ(leaderNode()->status, LeaderStatus::kServing);
  EXPECT_EQ(leaderNode()->epoch, 1u);
  // The versioned leader node can still be handed over after the update.
  add("b");
  a.election->handOver(false).wait(waitScope_);
  settle();
  EXPECT_EQ(leaderNode()->masterId, "b");
  EXPECT_EQ(leaderNode()->status, LeaderStatus::kRecovering);
}

TEST_F(FakeElectionTest, LostCreateReplyFindsTheNodeAlreadyCreated) {
  Member& a = add("a", {}, /*startNow=*/false);
  int creates = 0;
  a.zk->setFaultHook([&](const FakeCoordination::OpInfo& op) {
    if (op.kind == "create" && op.path == "latch/m-" && creates++ == 0) {
      return FakeCoordination::Fault::kLoseReplyAfterApply;
    }
    return FakeCoordination::Fault::kNone;
  });
  a.election->start(*a.contender);
  settle();
  advance(Duration(100));  // The retry after the (retryable) loss.
  EXPECT_EQ(creates, 1) << "no second latch node for the same contender";
  EXPECT_EQ(latch().size(), 1u);
  EXPECT_EQ(a.contender->latchNodes(), latch());
  EXPECT_TRUE(a.contender->leading());
}

TEST_F(FakeElectionTest, LeaderNodeLeftByOwnSessionIsRemovedBeforeWinning) {
  Member& a = add("a", {}, /*startNow=*/false);
  ASSERT_TRUE(a.zk->create("leader", "{}", ha::CreateMode::kEphemeral).wait(waitScope_).ok());
  a.election->start(*a.contender);
  settle();
  EXPECT_TRUE(a.contender->leading());
  EXPECT_EQ(leaderNode()->masterId, "a");
}

TEST_F(FakeElectionTest, LeaderNodeOfAnotherSessionIsAwaited) {
  FakeCoordination other(server_);
  ASSERT_TRUE(other.create("leader", "{}", ha::CreateMode::kEphemeral).wait(waitScope_).ok());
  Member& a = add("a");
  EXPECT_FALSE(a.contender->leading());
  EXPECT_EQ(a.zk->watchedPaths().size(), 1u);
  other.close();
  settle();
  EXPECT_TRUE(a.contender->leading());
  EXPECT_EQ(a.contender->epoch(), 1u);
}

TEST_F(FakeElectionTest, UnexpectedErrorsAreRetriedWithDoublingBackoff) {
  Member& a = add("a", {}, /*startNow=*/false);
  int creates = 0;
  a.zk->setFaultHook(
      [&](const FakeCoordination::OpInfo& op) {
        if (op.kind == "create" && op.path == "latch/m-" && creates++ < 2) {
          return FakeCoordination::Fault::kFailBefore;
        }
        return FakeCoordination::Fault::kNone;
      },
      ZkCode::kNoAuth);
  a.election->start(*a.contender);
  settle();
  EXPECT_EQ(creates, 1);
  advance(Duration(99));
  EXPECT_EQ(creates, 1);
  advance(Duration(1));
  EXPECT_EQ(creates, 2);
  advance(Duration(199));
  EXPECT_EQ(creates, 2);
  advance(Duration(1));
  EXPECT_EQ(creates, 3);
  EXPECT_TRUE(a.contender->leading());
}

TEST_F(FakeElectionTest, FatalErrorWhileLeadingRevokesAndRecovers) {
  Member& a = add("a");
  Member& b = add("b");
  // The leader's latch watch is re-armed after a data change; make that read fail with NOAUTH.
  a.zk->setFaultHook(
      [&](const FakeCoordination::OpInfo& op) {
        return op.kind == "existsAndWatch" ? FakeCoordination::Fault::kFailBefore
                                           : FakeCoordination::Fault::kNone;
      },
      ZkCode::kNoAuth);
  ASSERT_EQ(server_.setForTests("latch/" + *a.election->latchNode(), "touched"), ZkCode::kOk);
  settle();
  EXPECT_FALSE(a.contender->leading());
  EXPECT_NE(a.contender->lastReason().find("ZNOAUTH"), std::string::npos)
      << a.contender->lastReason();
  a.zk->setFaultHook(nullptr);
  advance(Duration(100));
  EXPECT_TRUE(b.contender->leading());
  EXPECT_EQ(b.contender->epoch(), 2u);
  expectConsistentLog();
}

TEST_F(FakeElectionTest, AWinLandingAfterHandOverIsUndoneAndNeverGranted) {
  Member& a = add("a", {}, /*startNow=*/false);
  a.election->start(*a.contender);
  // Let the latch and epoch reads through, then hold the win transaction's reply.
  int multis = 0;
  a.zk->setFaultHook([&](const FakeCoordination::OpInfo& op) {
    if (op.kind == "multi" && multis++ == 0) a.zk->holdReplies();
    return FakeCoordination::Fault::kNone;
  });
  settle();
  ASSERT_EQ(multis, 1);
  ASSERT_TRUE(server_.exists("leader")) << "the server applied the win";
  auto done = a.election->handOver(false);
  a.zk->releaseReplies();
  done.wait(waitScope_);
  settle();
  EXPECT_EQ(a.contender->grants(), 0);
  EXPECT_FALSE(server_.exists("leader"));
  EXPECT_TRUE(latch().empty());
}

TEST_F(FakeElectionTest, CorruptEpochNodeIsNotOverwritten) {
  FakeCoordination admin(server_);
  ASSERT_TRUE(
      admin.create("epoch", "forty-one", ha::CreateMode::kPersistent).wait(waitScope_).ok());
  Member& a = add("a");
  advance(Duration(1000));
  EXPECT_FALSE(a.contender->leading());
  EXPECT_EQ(server_.data("epoch"), "forty-one");
  EXPECT_FALSE(server_.exists("leader"));
}

TEST_F(FakeElectionTest, StartBeforeTheFirstSessionWaitsForIt) {
  Member member;
  member.zk = std::make_unique<FakeCoordination>(server_, /*connected=*/false);
  member.contender = std::make_unique<RecordingContender>("a", log_);
  member.election = std::make_unique<ZooKeeperLeaderElection>(*member.zk, timer_,
                                                              testing::contenderInfoForTests("a"));
  members_.push_back(std::move(member));
  Member& a = members_.back();
  a.election->start(*a.contender);
  settle();
  EXPECT_TRUE(a.zk->opLog().empty());
  a.zk->connectNewSession();
  settle();
  EXPECT_TRUE(a.contender->leading());
}

TEST_F(FakeElectionTest, ALateConnectedEventOfTheSameSessionDoesNotStartASecondAttempt) {
  Member& a = add("a", {}, /*startNow=*/false);
  a.election->start(*a.contender);
  a.zk->replayStateForTests(ha::SessionState::kConnected);
  settle();
  int starts = 0;
  for (const auto& op : a.zk->opLog()) starts += op == "ensurePath latch" ? 1 : 0;
  EXPECT_EQ(starts, 1) << "one attempt, not two";
  EXPECT_EQ(latch().size(), 1u);
  EXPECT_TRUE(a.contender->leading());
}

TEST_F(FakeElectionTest, ManyFailoversIssueDenseEpochsWithNeverTwoLeaders) {
  for (int i = 0; i < 6; ++i) add("m" + std::to_string(i));
  // Take turns: hand over, expire, cut, delete the latch, repeatedly.
  for (int round = 0; round < 12; ++round) {
    Member* leader = nullptr;
    for (auto& member : members_) {
      if (member.contender->leading()) leader = &member;
    }
    ASSERT_NE(leader, nullptr) << "round " << round;
    switch (round % 4) {
      case 0:
        leader->election->handOver(true).wait(waitScope_);
        break;
      case 1:
        leader->zk->expire();
        settle();
        leader->zk->connectNewSession();
        break;
      case 2:
        leader->zk->suspend();
        settle();
        leader->zk->reconnect();
        break;
      case 3:
        server_.removeForTests("latch/" + *leader->election->latchNode());
        break;
    }
    settle();
  }
  expectConsistentLog();
  EXPECT_EQ(log_.back().epoch, 13u);
  EXPECT_EQ(server_.data("epoch"), "13");
}

// ---------------------------------------------------------------------------------------------
// ZooKeeperLeaderRetrieval on the fake

class FakeRetrievalTest : public FakeElectionTest {};

TEST_F(FakeRetrievalTest, ReportsTheLeaderAndEveryChangeOnce) {
  FakeCoordination watcherZk(server_);
  ZooKeeperLeaderRetrieval retrieval(watcherZk, timer_);
  RecordingListener listener;
  retrieval.start(listener);
  settle();
  ASSERT_EQ(listener.changes.size(), 1u);
  EXPECT_FALSE(listener.changes[0]);

  Member& a = add("a");
  settle();
  ASSERT_EQ(listener.changes.size(), 2u);
  ASSERT_TRUE(listener.current());
  EXPECT_EQ(listener.current()->masterId, "a");
  EXPECT_EQ(listener.current()->epoch, 1u);

  ASSERT_TRUE(a.election->markServing(1).wait(waitScope_).ok());
  settle();
  ASSERT_EQ(listener.changes.size(), 3u);
  EXPECT_EQ(listener.current()->status, LeaderStatus::kServing);

  // Touching the node without changing it is not a change.
  ASSERT_EQ(server_.setForTests("leader", server_.data("leader")), ZkCode::kOk);
  settle();
  EXPECT_EQ(listener.changes.size(), 3u);

  a.election->handOver(false).wait(waitScope_);
  settle();
  ASSERT_EQ(listener.changes.size(), 4u);
  EXPECT_FALSE(listener.current());
  EXPECT_LE(watcherZk.pendingWatches(), 2u) << "watches are not piling up";
}

TEST_F(FakeRetrievalTest, ConnectionChangesAndReArmingAfterExpiry) {
  FakeCoordination watcherZk(server_);
  ZooKeeperLeaderRetrieval retrieval(watcherZk, timer_);
  RecordingListener listener;
  retrieval.start(listener);
  Member& a = add("a");
  settle();
  watcherZk.suspend();
  watcherZk.reconnect();
  settle();
  EXPECT_EQ(listener.connection, (std::vector<bool>{false, true}));
  watcherZk.suspend();
  watcherZk.expire();
  settle();
  // While the watcher has no session the leader changes: it is told once it has a new one.
  a.zk->close();
  add("b");
  settle();
  EXPECT_EQ(listener.current()->masterId, "a");
  watcherZk.connectNewSession();
  settle();
  ASSERT_TRUE(listener.current());
  EXPECT_EQ(listener.current()->masterId, "b");
  EXPECT_EQ(listener.current()->epoch, 2u);
  EXPECT_EQ(listener.connection, (std::vector<bool>{false, true, false, true}));
  // And it keeps watching in the new session.
  members_.back().zk->close();
  settle();
  EXPECT_FALSE(listener.current());
}

TEST_F(FakeRetrievalTest, MalformedLeaderIsReportedAsNoLeaderAndAnErrorOnRead) {
  FakeCoordination other(server_);
  ASSERT_TRUE(other.create("leader", "{oops", ha::CreateMode::kEphemeral).wait(waitScope_).ok());
  FakeCoordination watcherZk(server_);
  ZooKeeperLeaderRetrieval retrieval(watcherZk, timer_);
  RecordingListener listener;
  retrieval.start(listener);
  settle();
  ASSERT_EQ(listener.changes.size(), 1u);
  EXPECT_FALSE(listener.changes[0]);
  auto read = retrieval.leader().wait(waitScope_);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.error().message.find("malformed"), std::string::npos) << read.error().message;
}

TEST_F(FakeRetrievalTest, ContendersAreListedInLatchOrderWithTheLeaderFlagged) {
  add("a");
  add("b");
  FakeCoordination other(server_);
  ASSERT_TRUE(other.create("latch/m-", "garbage", ha::CreateMode::kEphemeralSequential)
                  .wait(waitScope_)
                  .ok());
  add("c");
  FakeCoordination watcherZk(server_);
  ZooKeeperLeaderRetrieval retrieval(watcherZk, timer_);
  auto entries = retrieval.contenders().wait(waitScope_);
  ASSERT_TRUE(entries.ok()) << entries.error().message;
  ASSERT_EQ(entries.value().size(), 4u);
  std::vector<std::string> ids;
  for (const auto& entry : entries.value()) ids.push_back(entry.info.masterId);
  EXPECT_EQ(ids, (std::vector<std::string>{"a", "b", "?", "c"}));
  EXPECT_TRUE(entries.value()[0].leader);
  EXPECT_FALSE(entries.value()[1].leader);
  EXPECT_FALSE(entries.value()[2].leader);
  EXPECT_EQ(entries.value()[0].latchNode, latch()[0]);
  auto leader = retrieval.leader().wait(waitScope_);
  ASSERT_TRUE(leader.ok());
  ASSERT_TRUE(leader.value());
  EXPECT_EQ(leader.value()->masterId, "a");

  FakeZooKeeper empty;
  FakeCoordination emptyZk(empty);
  ZooKeeperLeaderRetrieval none(emptyZk, timer_);
  auto noEntries = none.contenders().wait(waitScope_);
  ASSERT_TRUE(noEntries.ok());
  EXPECT_TRUE(noEntries.value().empty());
  auto noLeader = none.leader().wait(waitScope_);
  ASSERT_TRUE(noLeader.ok());
  EXPECT_FALSE(noLeader.value());
}

// ---------------------------------------------------------------------------------------------
// Standalone

// Runs the loop until `done` holds or `timeout` passes.
bool runUntil(EventLoop& loop, const std::function<bool()>& done, Duration timeout) {
  auto deadline = loop.timer().now() + timeout.count() * kj::MILLISECONDS;
  while (!done()) {
    if (loop.timer().now() >= deadline) return false;
    loop.run(loop.timer().afterDelay(2 * kj::MILLISECONDS));
  }
  return true;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

TEST(StandaloneLeaderElection, EpochGrowsAcrossRestarts) {
  regent::testing::TempDir dir("leader-standalone");
  const std::string file = dir.path() + "/epoch";
  EventLoop loop;
  ElectionLog log;
  for (uint64_t run = 1; run <= 3; ++run) {
    RecordingContender contender("standalone", log);
    StandaloneLeaderElection election(loop, file);
    election.start(contender);
    ASSERT_TRUE(runUntil(
        loop, [&] { return contender.leading(); }, Duration(5000)));
    EXPECT_EQ(contender.epoch(), run);
    EXPECT_EQ(contender.latchNodes(), std::vector<std::string>{"standalone"});
    EXPECT_EQ(election.currentEpoch(), run);
    EXPECT_EQ(readFile(file), std::to_string(run) + "\n");
    EXPECT_TRUE(loop.run(election.markServing(run)).ok());
    EXPECT_FALSE(loop.run(election.markServing(run + 1)).ok());
  }
  EXPECT_FALSE(std::filesystem::exists(file + ".tmp"));
}

TEST(StandaloneLeaderElection, CorruptEpochFileIsAnErrorAndNothingIsGranted) {
  regent::testing::TempDir dir("leader-standalone");
  const std::string file = dir.path() + "/epoch";
  std::ofstream(file) << "12abc\n";
  auto read = readEpochFile(file);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.error().message.find("corrupt"), std::string::npos) << read.error().message;
  EXPECT_NE(read.error().message.find(file), std::string::npos);

  EventLoop loop;
  ElectionLog log;
  RecordingContender contender("standalone", log);
  StandaloneLeaderElection election(loop, file);
  election.start(contender);
  // The file work finishes on the pool; give it a bounded moment, then check nothing happened.
  EXPECT_FALSE(runUntil(
      loop, [&] { return contender.grants() > 0; }, Duration(300)));
  EXPECT_EQ(readFile(file), "12abc\n");

  std::ofstream(file, std::ios::trunc) << "";
  EXPECT_FALSE(readEpochFile(file).ok());
}

TEST(StandaloneLeaderElection, HandOverRevokesAndRecontendTakesTheNextEpoch) {
  regent::testing::TempDir dir("leader-standalone");
  const std::string file = dir.path() + "/epoch";
  EventLoop loop;
  ElectionLog log;
  RecordingContender contender("standalone", log);
  StandaloneLeaderElection election(loop, file);
  election.start(contender);
  ASSERT_TRUE(runUntil(
      loop, [&] { return contender.leading(); }, Duration(5000)));
  loop.run(election.handOver(true));
  EXPECT_EQ(contender.lastReason(), "handed over");
  ASSERT_TRUE(runUntil(
      loop, [&] { return contender.leading(); }, Duration(5000)));
  EXPECT_EQ(contender.epoch(), 2u);
  loop.run(election.handOver(false));
  EXPECT_FALSE(contender.leading());
  EXPECT_EQ(election.currentEpoch(), 0u);
  EXPECT_EQ(testing::checkElectionLog(log), "");
}

Config loadConfigForTests(std::vector<std::string> set) {
  auto config = loadConfig(ConfigSources{.set = std::move(set)});
  if (!config.ok()) throw std::runtime_error(config.error().message);
  return std::move(config).value();
}

TEST(LeaderServices, StandaloneModeBuildsTheStandaloneElectionAndRetrieval) {
  regent::testing::TempDir dir("leader-services");
  const std::string file = dir.path() + "/epoch";
  Config config =
      loadConfigForTests({"ha.mode=standalone", "ha.standalone.epoch-file=" + file,
                          "rpc.advertised-address=master-1:7000", "http.bind=0.0.0.0:9000"});
  EventLoop loop;
  auto ha = ha::HaServices::create(loop, config, ha::HaServices::Identity::kWriter);
  ASSERT_TRUE(ha.ok()) << ha.error().message;

  auto retrieval = createLeaderRetrieval(loop, config, *ha.value());
  ASSERT_TRUE(retrieval.ok()) << retrieval.error().message;
  auto before = loop.run(retrieval.value()->leader());
  ASSERT_TRUE(before.ok());
  ASSERT_TRUE(before.value());
  EXPECT_EQ(before.value()->epoch, 0u) << "no epoch file yet";
  EXPECT_EQ(before.value()->rpcAddress, "master-1:7000");
  EXPECT_EQ(before.value()->host, "master-1");
  EXPECT_EQ(before.value()->httpAddress, "0.0.0.0:9000");

  auto election =
      createLeaderElection(loop, config, *ha.value(), testing::contenderInfoForTests("s"));
  ASSERT_TRUE(election.ok()) << election.error().message;
  ElectionLog log;
  RecordingContender contender("s", log);
  election.value()->start(contender);
  ASSERT_TRUE(runUntil(
      loop, [&] { return contender.leading(); }, Duration(5000)));

  RecordingListener listener;
  retrieval.value()->start(listener);
  ASSERT_TRUE(runUntil(
      loop, [&] { return !listener.changes.empty(); }, Duration(5000)));
  ASSERT_TRUE(listener.current());
  EXPECT_EQ(listener.current()->epoch, 1u);
  auto entries = loop.run(retrieval.value()->contenders());
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries.value().size(), 1u);
  EXPECT_TRUE(entries.value()[0].leader);
  EXPECT_EQ(entries.value()[0].latchNode, "standalone");
}

}  // namespace
}  // namespace regent::leader

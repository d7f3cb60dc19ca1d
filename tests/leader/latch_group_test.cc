// Unit tests of LatchGroup on the in-memory coordination fake: membership in sequence order, the
// members of one session, watches on a member, and the removal of orphan members with backoff.
#include "leader/latch_group.h"

#include <gtest/gtest.h>
#include <kj/async.h>
#include <kj/timer.h>

#include <list>
#include <memory>
#include <string>
#include <vector>

#include "tests/leader/fake_coordination_test_util.h"

namespace regent::leader {
namespace {

using ha::ZkCode;
using testing::FakeCoordination;
using testing::FakeZooKeeper;

class LatchGroupTest : public ::testing::Test {
 protected:
  LatchGroupTest() : waitScope_(kjLoop_), timer_(kj::origin<kj::TimePoint>()) {}
  ~LatchGroupTest() noexcept override { members_.clear(); }

  // A group over a new client of the shared fake server; retries wait the full doubled delay.
  struct Member {
    std::unique_ptr<FakeCoordination> zk;
    std::unique_ptr<LatchGroup> group;
  };
  Member& add() {
    Member member;
    member.zk = std::make_unique<FakeCoordination>(server_);
    member.group = std::make_unique<LatchGroup>(*member.zk, timer_, Duration(100), Duration(1000),
                                                [] { return 1.0; });
    members_.push_back(std::move(member));
    return members_.back();
  }

  template <typename T>
  T wait(kj::Promise<T>&& promise) {
    return promise.wait(waitScope_);
  }
  std::string join(Member& member, const std::string& data) {
    EXPECT_TRUE(wait(member.group->ensureFolder()).ok());
    auto joined = wait(member.group->join(data));
    EXPECT_TRUE(joined.ok()) << ha::zkCodeName(joined.code);
    return joined.value;
  }
  void settle() { waitScope_.poll(); }
  void advance(Duration by) {
    timer_.advanceTo(timer_.now() + by.count() * kj::MILLISECONDS);
    settle();
  }

  kj::EventLoop kjLoop_;
  kj::WaitScope waitScope_;
  kj::TimerImpl timer_;
  FakeZooKeeper server_;
  std::list<Member> members_;
};

TEST_F(LatchGroupTest, WithoutALatchFolderThereAreNoMembers) {
  Member& a = add();
  auto names = wait(a.group->memberNames());
  ASSERT_TRUE(names.ok()) << ha::zkCodeName(names.code);
  EXPECT_TRUE(names.value.empty());
  auto members = wait(a.group->readMembers());
  ASSERT_TRUE(members.ok());
  EXPECT_TRUE(members.value.empty());
}

TEST_F(LatchGroupTest, MembersAreListedLowestSequenceFirstWithWhatTheyPublished) {
  Member& a = add();
  Member& b = add();
  const std::string first = join(b, "b");
  const std::string second = join(a, "a");
  EXPECT_EQ(first.rfind("m-", 0), 0u) << first;
  EXPECT_TRUE(server_.exists(LatchGroup::pathOf(first)));
  // Another child of the folder is not a member.
  ASSERT_TRUE(wait(a.zk->create("latch/other", "", ha::CreateMode::kPersistent)).ok());

  auto names = wait(a.group->memberNames());
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(names.value, (std::vector<std::string>{first, second}));
  auto members = wait(a.group->readMembers());
  ASSERT_TRUE(members.ok());
  ASSERT_EQ(members.value.size(), 2u);
  EXPECT_EQ(members.value[0].name, first);
  EXPECT_EQ(members.value[0].node.value.data, "b");
  EXPECT_EQ(members.value[1].node.value.data, "a");
}

TEST_F(LatchGroupTest, OnlyTheCurrentSessionsMembersAreItsOwn) {
  Member& a = add();
  Member& b = add();
  const std::string a1 = join(a, "a");
  const std::string b1 = join(b, "b");
  const std::string a2 = join(a, "a");
  auto owned = wait(a.group->ownedBySession({a1, b1, a2, "m-9999999999"}));
  ASSERT_TRUE(owned.ok());
  EXPECT_EQ(owned.value, (std::vector<std::string>{a1, a2}));
}

TEST_F(LatchGroupTest, CancelAllCountsMembersAlreadyGoneAsRemoved) {
  Member& a = add();
  const std::string a1 = join(a, "a");
  const std::string a2 = join(a, "a");
  EXPECT_EQ(wait(a.group->cancelAll({a1, "m-9999999999", a2})), ZkCode::kOk);
  EXPECT_TRUE(server_.children("latch").empty());
  EXPECT_EQ(wait(a.group->cancel(a1)).code, ZkCode::kNoNode);
}

TEST_F(LatchGroupTest, AWatchOnAMemberFiresWhenItGoes) {
  Member& a = add();
  Member& b = add();
  const std::string predecessor = join(a, "a");
  auto watched = wait(b.group->watch(predecessor));
  ASSERT_TRUE(watched.reply.ok());
  ASSERT_TRUE(watched.reply.value.has_value());
  auto event = kj::mv(KJ_ASSERT_NONNULL(watched.watch));
  a.zk->close();
  EXPECT_EQ(event.wait(waitScope_).type, ha::WatchEvent::Type::kDeleted);
}

TEST_F(LatchGroupTest, AnOrphanIsRemovedWithBackoffUntilItIsGone) {
  Member& a = add();
  const std::string orphan = join(a, "a");
  int removes = 0;
  a.zk->setFaultHook(
      [&](const FakeCoordination::OpInfo& op) {
        if (op.kind == "remove" && removes++ < 2) return FakeCoordination::Fault::kFailBefore;
        return FakeCoordination::Fault::kNone;
      },
      ZkCode::kNoAuth);
  a.group->removeOrphan(orphan);
  settle();
  EXPECT_EQ(removes, 1);
  EXPECT_EQ(a.group->orphanCount(), 1u);
  advance(Duration(99));
  EXPECT_EQ(removes, 1);
  advance(Duration(1));
  EXPECT_EQ(removes, 2);
  advance(Duration(199));
  EXPECT_EQ(removes, 2) << "the second retry waits twice as long";
  advance(Duration(1));
  EXPECT_EQ(removes, 3);
  EXPECT_EQ(a.group->orphanCount(), 0u);
  EXPECT_FALSE(server_.exists(LatchGroup::pathOf(orphan)));
}

TEST_F(LatchGroupTest, AnOrphanRemovalCutOffByTheConnectionWaitsForTheSessionToComeBack) {
  Member& a = add();
  const std::string orphan = join(a, "a");
  a.zk->suspend();
  a.group->removeOrphan(orphan);
  settle();
  advance(Duration(5000));
  EXPECT_EQ(a.group->orphanCount(), 1u);
  EXPECT_TRUE(server_.exists(LatchGroup::pathOf(orphan)));
  a.zk->reconnect();
  a.group->resumeOrphanRemoval();
  settle();
  EXPECT_EQ(a.group->orphanCount(), 0u);
  EXPECT_FALSE(server_.exists(LatchGroup::pathOf(orphan)));
}

TEST_F(LatchGroupTest, OrphansOfAnEndedSessionAreForgotten) {
  Member& a = add();
  const std::string orphan = join(a, "a");
  a.zk->suspend();
  a.group->removeOrphan(orphan);
  settle();
  a.zk->expire();
  a.group->forgetOrphans();
  EXPECT_EQ(a.group->orphanCount(), 0u);
  a.zk->connectNewSession();
  const size_t before = a.zk->opLog().size();
  a.group->resumeOrphanRemoval();
  settle();
  EXPECT_EQ(a.zk->opLog().size(), before) << "nothing is sent for a node of an ended session";
}

}  // namespace
}  // namespace regent::leader

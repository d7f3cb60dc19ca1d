// Unit tests of SharedLeaderRetrieval: one source retrieval (a fake the test drives) followed by
// many views, as the slot-rebuild benchmark's simulated workers follow one ZooKeeper watch.
#include "leader/shared_leader_retrieval.h"

#include <gtest/gtest.h>
#include <kj/async.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/leader/leader_test_util.h"

namespace regent::leader {
namespace {

using testing::RecordingListener;

// The source: reports what the test tells it to; one-shot reads answer from `state`.
struct SourceState {
  LeaderRetrievalListener* listener = nullptr;
  int starts = 0;
  int leaderReads = 0;
  int contenderReads = 0;
  std::optional<LeaderInfo> current;
  bool destroyed = false;
};

class DrivenRetrieval final : public LeaderRetrieval {
 public:
  explicit DrivenRetrieval(std::shared_ptr<SourceState> state) : state_(std::move(state)) {}
  ~DrivenRetrieval() noexcept override { state_->destroyed = true; }

  void start(LeaderRetrievalListener& listener) override {
    state_->listener = &listener;
    ++state_->starts;
  }
  kj::Promise<Result<std::optional<LeaderInfo>>> leader() override {
    ++state_->leaderReads;
    return Result<std::optional<LeaderInfo>>(state_->current);
  }
  kj::Promise<Result<std::vector<ContenderEntry>>> contenders() override {
    ++state_->contenderReads;
    ContenderEntry entry{"m-0000000003", testing::contenderInfoForTests("c"), true};
    return Result<std::vector<ContenderEntry>>(std::vector<ContenderEntry>{entry});
  }

 private:
  std::shared_ptr<SourceState> state_;
};

LeaderInfo leaderAt(uint64_t epoch) {
  return leaderInfoFor(testing::contenderInfoForTests("m" + std::to_string(epoch)), epoch,
                       1700000000000 + static_cast<int64_t>(epoch));
}

// A listener that runs `onChange` after recording each leader change.
class HookedListener final : public LeaderRetrievalListener {
 public:
  void leaderChanged(const std::optional<LeaderInfo>& leader) override {
    changes.push_back(leader);
    if (onChange) onChange();
  }
  std::vector<std::optional<LeaderInfo>> changes;
  std::function<void()> onChange;
};

class SharedLeaderRetrievalTest : public ::testing::Test {
 protected:
  std::shared_ptr<SourceState> source_ = std::make_shared<SourceState>();
  std::unique_ptr<SharedLeaderRetrieval> shared_ =
      std::make_unique<SharedLeaderRetrieval>(kj::heap<DrivenRetrieval>(source_));

  LeaderRetrievalListener& source() { return *source_->listener; }
};

TEST_F(SharedLeaderRetrievalTest, StartsTheSourceOnceWhateverTheNumberOfViews) {
  EXPECT_EQ(source_->starts, 1);
  RecordingListener a, b;
  auto first = shared_->view();
  auto second = shared_->view();
  first->start(a);
  second->start(b);
  EXPECT_EQ(source_->starts, 1);
  EXPECT_EQ(shared_->listeningViews(), 2u);
}

TEST_F(SharedLeaderRetrievalTest, ViewsStartedBeforeTheFirstReportHearEveryChangeInOrder) {
  RecordingListener a, b;
  auto first = shared_->view();
  auto second = shared_->view();
  first->start(a);
  second->start(b);
  EXPECT_TRUE(a.changes.empty());
  EXPECT_TRUE(a.connection.empty());

  source().connectionChanged(true);
  source().leaderChanged(leaderAt(3));
  source().connectionChanged(false);
  source().leaderChanged(std::nullopt);
  source().connectionChanged(true);
  source().leaderChanged(leaderAt(4));

  const std::vector<std::optional<LeaderInfo>> expected = {leaderAt(3), std::nullopt,
                                                           leaderAt(4)};
  for (RecordingListener* listener : {&a, &b}) {
    EXPECT_EQ(listener->changes, expected);
    EXPECT_EQ(listener->connection, (std::vector<bool>{true, false, true}));
  }
}

TEST_F(SharedLeaderRetrievalTest, AViewStartedLateHearsTheConnectionAndTheCurrentLeaderInsideStart) {
  source().connectionChanged(true);
  source().leaderChanged(leaderAt(5));
  source().connectionChanged(false);

  RecordingListener late;
  auto view = shared_->view();
  view->start(late);
  EXPECT_EQ(late.connection, (std::vector<bool>{false}));
  EXPECT_EQ(late.changes, (std::vector<std::optional<LeaderInfo>>{leaderAt(5)}));

  source().connectionChanged(true);
  source().leaderChanged(leaderAt(6));
  EXPECT_EQ(late.connection, (std::vector<bool>{false, true}));
  EXPECT_EQ(late.changes, (std::vector<std::optional<LeaderInfo>>{leaderAt(5), leaderAt(6)}));
}

TEST_F(SharedLeaderRetrievalTest, AViewStartedAfterNoLeaderWasReportedHearsNoLeader) {
  source().leaderChanged(std::nullopt);
  RecordingListener late;
  auto view = shared_->view();
  view->start(late);
  EXPECT_TRUE(late.connection.empty());
  EXPECT_EQ(late.changes, (std::vector<std::optional<LeaderInfo>>{std::nullopt}));
}

TEST_F(SharedLeaderRetrievalTest, ADestroyedViewHearsNothingMore) {
  RecordingListener kept, dropped;
  auto keptView = shared_->view();
  auto droppedView = shared_->view();
  keptView->start(kept);
  droppedView->start(dropped);
  source().leaderChanged(leaderAt(1));
  droppedView = nullptr;
  EXPECT_EQ(shared_->listeningViews(), 1u);
  source().leaderChanged(leaderAt(2));
  EXPECT_EQ(kept.changes.size(), 2u);
  EXPECT_EQ(dropped.changes, (std::vector<std::optional<LeaderInfo>>{leaderAt(1)}));
}

TEST_F(SharedLeaderRetrievalTest, AListenerMayDestroyALaterViewWhileHearingAChange) {
  HookedListener first;
  RecordingListener second;
  auto firstView = shared_->view();
  auto secondView = shared_->view();
  firstView->start(first);
  secondView->start(second);
  first.onChange = [&] { secondView = nullptr; };

  source().leaderChanged(leaderAt(7));
  EXPECT_EQ(first.changes.size(), 1u);
  EXPECT_TRUE(second.changes.empty());
  EXPECT_EQ(shared_->listeningViews(), 1u);
}

TEST_F(SharedLeaderRetrievalTest, AViewStartedWhileAChangeIsToldHearsItOnce) {
  HookedListener first;
  RecordingListener started;
  kj::Own<LeaderRetrieval> startedView;
  auto firstView = shared_->view();
  firstView->start(first);
  first.onChange = [&] {
    if (startedView) return;
    startedView = shared_->view();
    startedView->start(started);
  };

  source().leaderChanged(leaderAt(8));
  EXPECT_EQ(started.changes, (std::vector<std::optional<LeaderInfo>>{leaderAt(8)}));
  source().leaderChanged(leaderAt(9));
  EXPECT_EQ(started.changes,
            (std::vector<std::optional<LeaderInfo>>{leaderAt(8), leaderAt(9)}));
}

TEST_F(SharedLeaderRetrievalTest, OneShotReadsAreTheSources) {
  kj::EventLoop loop;
  kj::WaitScope waitScope(loop);
  source_->current = leaderAt(11);
  auto view = shared_->view();

  auto read = view->leader().wait(waitScope);
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(read.value(), leaderAt(11));
  auto record = view->leaderRecord().wait(waitScope);
  ASSERT_TRUE(record.ok()) << record.error().message;
  EXPECT_EQ(record.value().leader, leaderAt(11));
  auto contenders = view->contenders().wait(waitScope);
  ASSERT_TRUE(contenders.ok()) << contenders.error().message;
  ASSERT_EQ(contenders.value().size(), 1u);
  EXPECT_EQ(contenders.value()[0].latchNode, "m-0000000003");

  EXPECT_EQ(source_->leaderReads, 2);
  EXPECT_EQ(source_->contenderReads, 1);
}

TEST_F(SharedLeaderRetrievalTest, DestroyingTheSharedRetrievalStopsTheSource) {
  shared_ = nullptr;
  EXPECT_TRUE(source_->destroyed);
}

}  // namespace
}  // namespace regent::leader

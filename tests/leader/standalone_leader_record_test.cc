// The standalone leader record: a standalone master's term is published next to its epoch file
// with the time it became leader, and the standalone retrieval reports it and follows it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>

#include "common/event_loop.h"
#include "common/time.h"
#include "leader/epoch_file.h"
#include "leader/leader_info.h"
#include "leader/standalone_leader_election.h"
#include "tests/fixtures/loop_wait_test_util.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/leader/leader_test_util.h"

namespace regent::leader {
namespace {

using testing::ElectionLog;
using testing::RecordingContender;
using testing::RecordingListener;

constexpr Duration kWait{5000};

// Runs the loop until `done` holds or `timeout` passes (then false).
bool runUntil(EventLoop& loop, const std::function<bool()>& done, Duration timeout) {
  return regent::testing::runLoopUntil(loop, done, timeout);
}

LeaderInfo configuredLeader() {
  LeaderInfo leader;
  leader.masterId = "standalone";
  leader.rpcAddress = "0.0.0.0:6123";
  leader.status = LeaderStatus::kServing;
  return leader;
}

bool reports(const RecordingListener& listener, uint64_t epoch, LeaderStatus status) {
  auto current = listener.current();
  return current && current->epoch == epoch && current->status == status;
}

TEST(StandaloneLeaderRecord, RetrievalReportsTheTermWithTheTimeTheMasterBecameLeader) {
  regent::testing::TempDir dir("leader-record");
  const std::string file = dir.path() + "/epoch";
  EventLoop loop;
  // The retrieval starts first, as in a master: it reports the configuration until the
  // election wrote the record, then the record.
  StandaloneLeaderRetrieval retrieval(loop, configuredLeader(), file);
  RecordingListener listener;
  retrieval.start(listener);
  ASSERT_TRUE(runUntil(loop, [&] { return !listener.changes.empty(); }, kWait));
  EXPECT_EQ(listener.current()->masterId, "standalone");
  EXPECT_EQ(listener.current()->electedAtMs, 0);

  const ContenderInfo self = testing::contenderInfoForTests("a1b2");
  ElectionLog log;
  RecordingContender contender("a1b2", log);
  StandaloneLeaderElection election(loop, file, self);
  const int64_t before = wallClockMillis();
  election.start(contender);
  ASSERT_TRUE(runUntil(loop, [&] { return contender.leading(); }, kWait));
  const int64_t after = wallClockMillis();

  ASSERT_TRUE(runUntil(loop, [&] { return reports(listener, 1, LeaderStatus::kRecovering); },
                       kWait));
  LeaderInfo reported = *listener.current();
  EXPECT_EQ(reported.masterId, "a1b2");
  EXPECT_EQ(reported.rpcAddress, self.rpcAddress);
  EXPECT_EQ(reported.pid, self.pid);
  EXPECT_GE(reported.electedAtMs, before);
  EXPECT_LE(reported.electedAtMs, after);

  // SERVING is published too, with the same election time; a one-shot read agrees.
  ASSERT_TRUE(loop.run(election.markServing(1)).ok());
  ASSERT_TRUE(runUntil(loop, [&] { return reports(listener, 1, LeaderStatus::kServing); },
                       kWait));
  EXPECT_EQ(listener.current()->electedAtMs, reported.electedAtMs);
  auto read = loop.run(retrieval.leader());
  ASSERT_TRUE(read.ok());
  ASSERT_TRUE(read.value());
  EXPECT_EQ(*read.value(), *listener.current());
  // Consecutive reports never repeat a view.
  for (size_t i = 1; i < listener.changes.size(); ++i) {
    EXPECT_NE(listener.changes[i], listener.changes[i - 1]) << "report " << i;
  }
}

TEST(StandaloneLeaderRecord, RetrievalFollowsAHandOverToTheNextTerm) {
  regent::testing::TempDir dir("leader-record");
  const std::string file = dir.path() + "/epoch";
  EventLoop loop;
  ElectionLog log;
  RecordingContender contender("c3d4", log);
  StandaloneLeaderElection election(loop, file, testing::contenderInfoForTests("c3d4"));
  election.start(contender);
  ASSERT_TRUE(runUntil(loop, [&] { return contender.leading(); }, kWait));

  StandaloneLeaderRetrieval retrieval(loop, configuredLeader(), file);
  RecordingListener listener;
  retrieval.start(listener);
  ASSERT_TRUE(runUntil(loop, [&] { return reports(listener, 1, LeaderStatus::kRecovering); },
                       kWait));
  const int64_t firstElected = listener.current()->electedAtMs;
  EXPECT_GT(firstElected, 0);

  EXPECT_TRUE(loop.run(election.handOver(true)).ok());
  ASSERT_TRUE(runUntil(loop, [&] { return contender.epoch() == 2; }, kWait));
  ASSERT_TRUE(runUntil(loop, [&] { return reports(listener, 2, LeaderStatus::kRecovering); },
                       kWait));
  EXPECT_EQ(listener.current()->masterId, "c3d4");
  EXPECT_GE(listener.current()->electedAtMs, firstElected);
}

TEST(StandaloneLeaderRecord, ARecordOfAnOlderTermIsNotReported) {
  regent::testing::TempDir dir("leader-record");
  const std::string file = dir.path() + "/epoch";
  LeaderInfo old = leaderInfoFor(testing::contenderInfoForTests("old"), 4, 1700000000000);
  ASSERT_TRUE(writeEpochFile(file, 5).ok());
  {
    std::ofstream(leaderRecordPathFor(file)) << toJson(old) << "\n";
  }
  EventLoop loop;
  StandaloneLeaderRetrieval retrieval(loop, configuredLeader(), file);
  auto read = loop.run(retrieval.leader());
  ASSERT_TRUE(read.ok());
  ASSERT_TRUE(read.value());
  EXPECT_EQ(read.value()->epoch, 5u);
  EXPECT_EQ(read.value()->masterId, "standalone");
  EXPECT_EQ(read.value()->electedAtMs, 0);
}

}  // namespace
}  // namespace regent::leader

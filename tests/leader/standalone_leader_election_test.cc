// The standalone election's failure path: an epoch file it cannot use (not a number, a
// directory, a place it cannot write) ends the election with electionFailed naming the file,
// grants nothing, and leaves the file as it was; a hand-over that finds the file unusable ends it
// the same way.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "common/event_loop.h"
#include "leader/epoch_file.h"
#include "leader/standalone_leader_election.h"
#include "tests/fixtures/loop_wait_test_util.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/leader/leader_test_util.h"

namespace regent::leader {
namespace {

using testing::ElectionLog;
using testing::RecordingContender;

constexpr Duration kWait{5000};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Starts an election on `file` and runs the loop until it failed; returns the contender's
// failure message ("" if it never failed, which fails the test).
std::string failureOf(const std::string& file) {
  EventLoop loop;
  ElectionLog log;
  RecordingContender contender("standalone", log);
  StandaloneLeaderElection election(loop, file);
  election.start(contender);
  EXPECT_TRUE(regent::testing::runLoopUntil(
      loop, [&] { return !contender.failure().empty(); }, kWait))
      << "electionFailed did not fire for " << file;
  EXPECT_EQ(contender.grants(), 0);
  EXPECT_EQ(election.currentEpoch(), 0u);
  EXPECT_TRUE(contender.violations().empty()) << contender.violations().front();
  return contender.failure();
}

TEST(StandaloneLeaderElection, AnEpochFileThatIsNotANumberFailsTheElectionNamingTheFile) {
  regent::testing::TempDir dir("standalone-election");
  const std::string file = dir.path() + "/epoch";
  std::ofstream(file) << "12abc\n";
  const std::string failure = failureOf(file);
  EXPECT_TRUE(contains(failure, "epoch file " + file)) << failure;
  EXPECT_TRUE(contains(failure, "corrupt")) << failure;
  EXPECT_EQ(readFile(file), "12abc\n");
}

TEST(StandaloneLeaderElection, ADirectoryInPlaceOfTheEpochFileFailsTheElectionSayingSo) {
  regent::testing::TempDir dir("standalone-election");
  const std::string file = dir.path() + "/epoch";
  std::filesystem::create_directory(file);
  const std::string failure = failureOf(file);
  EXPECT_TRUE(contains(failure, "epoch file " + file + ": it is a directory")) << failure;
  EXPECT_TRUE(std::filesystem::is_directory(file));
}

TEST(StandaloneLeaderElection, AnEpochFileThatCannotBeWrittenFailsTheElectionNamingTheFile) {
  regent::testing::TempDir dir("standalone-election");
  // A regular file where its directory should be: no one can create the epoch file there, root
  // included (permission bits would not stop root).
  std::ofstream(dir.path() + "/not-a-directory") << "x\n";
  const std::string file = dir.path() + "/not-a-directory/epoch";
  const std::string failure = failureOf(file);
  EXPECT_TRUE(contains(failure, "cannot write epoch file " + file + ": ")) << failure;
}

TEST(StandaloneLeaderElection, AHandOverThatFindsTheFileUnusableFailsTheElectionAfterTheRevoke) {
  regent::testing::TempDir dir("standalone-election");
  const std::string file = dir.path() + "/epoch";
  EventLoop loop;
  ElectionLog log;
  RecordingContender contender("standalone", log);
  StandaloneLeaderElection election(loop, file);
  election.start(contender);
  ASSERT_TRUE(regent::testing::runLoopUntil(loop, [&] { return contender.leading(); }, kWait));

  std::ofstream(file, std::ios::trunc) << "not an epoch\n";
  // The hand-over itself applies (a standalone term has nothing to remove); the file fails the
  // next epoch, reported through electionFailed.
  EXPECT_TRUE(loop.run(election.handOver(true)).ok());
  EXPECT_EQ(contender.revokes(), 1);
  ASSERT_TRUE(regent::testing::runLoopUntil(
      loop, [&] { return !contender.failure().empty(); }, kWait));
  EXPECT_TRUE(contains(contender.failure(), file)) << contender.failure();
  EXPECT_EQ(contender.grants(), 1);
  EXPECT_FALSE(contender.leading());
  EXPECT_EQ(readFile(file), "not an epoch\n");
  EXPECT_TRUE(contender.violations().empty()) << contender.violations().front();
}

}  // namespace
}  // namespace regent::leader

// regent-master's command line run as a process: --help, --print-config, configuration errors,
// and the standalone mode (one master, always leader, epoch kept in a file across restarts).
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "tests/fixtures/process_harness.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/integration/master_cluster_test_util.h"

namespace regent::testing {
namespace {

using Kind = MasterEvent::Kind;

struct Finished {
  ProcessExit exit;
  std::string output;
};

Result<Finished> runMaster(const std::string& dir, std::vector<std::string> args) {
  static int counter = 0;
  ProcessOptions options;
  options.argv = {REGENT_BIN_DIR "/regent-master"};
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.outputPath = dir + "/master-" + std::to_string(counter++) + ".log";
  auto process = ProcessHarness::start(options);
  if (!process.ok()) return process.error();
  auto exit = process.value()->waitForExit(Duration(30000));
  if (!exit) return Error::fatal("regent-master did not exit: " + process.value()->output());
  return Finished{*exit, process.value()->output()};
}

TEST(MasterCommandLine, HelpSaysWhatTheMasterServes) {
  TempDir dir("master-cli");
  auto run = runMaster(dir.path(), {"--help"});
  ASSERT_OK(run);
  EXPECT_EQ(run.value().exit.exitCode, 0);
  EXPECT_NE(run.value().output.find("leader election"), std::string::npos) << run.value().output;
  EXPECT_NE(run.value().output.find("Cap'n Proto RPC on rpc.bind"), std::string::npos)
      << run.value().output;
  EXPECT_NE(run.value().output.find("/metrics"), std::string::npos) << run.value().output;
}

TEST(MasterCommandLine, PrintConfigShowsEachValueWithItsSourceAndExitsZero) {
  TempDir dir("master-cli");
  auto run = runMaster(dir.path(), {"--set", "ha.zookeeper.quorum=zk9:2181", "--log-format",
                                    "json", "--print-config"});
  ASSERT_OK(run);
  const std::string& out = run.value().output;
  EXPECT_EQ(run.value().exit.exitCode, 0) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(ha\.zookeeper\.quorum\s+zk9:2181\s+--set)")))
      << out;
  // The shortcut names itself as the source (docs/configuration.md).
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(log\.format\s+json\s+--log-format)"))) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(cluster-id\s+default\s+default)"))) << out;
  EXPECT_EQ(out.find("master starting"), std::string::npos) << "--print-config started a master";
}

TEST(MasterCommandLine, BadSetExitsWithTwoNamingTheKey) {
  TempDir dir("master-cli");
  auto badValue = runMaster(dir.path(), {"--set", "ha.zookeeper.session-timeout=soon"});
  ASSERT_OK(badValue);
  EXPECT_EQ(badValue.value().exit.exitCode, 2) << badValue.value().output;
  EXPECT_NE(badValue.value().output.find("ha.zookeeper.session-timeout"), std::string::npos)
      << badValue.value().output;

  auto unknownKey = runMaster(dir.path(), {"--set", "ha.zookeeper.quorom=zk1:2181"});
  ASSERT_OK(unknownKey);
  EXPECT_EQ(unknownKey.value().exit.exitCode, 2) << unknownKey.value().output;
  EXPECT_NE(unknownKey.value().output.find("ha.zookeeper.quorom"), std::string::npos)
      << unknownKey.value().output;

  auto badFlag = runMaster(dir.path(), {"--log-format", "xml"});
  ASSERT_OK(badFlag);
  EXPECT_EQ(badFlag.value().exit.exitCode, 2) << badFlag.value().output;
}

TEST(MasterCommandLine, StandaloneMasterLeadsAloneAndItsEpochGrowsAcrossRestarts) {
  TempDir dir("master-standalone");
  ProcessOptions options;
  options.argv = {REGENT_BIN_DIR "/regent-master", "--set", "ha.mode=standalone", "--set",
                  "ha.standalone.epoch-file=" + dir.path() + "/epoch", "--set",
                  "store.rocksdb.path=" + dir.path() + "/store", "--set", "rpc.bind=127.0.0.1:0",
                  "--set", "http.bind=127.0.0.1:0"};
  uint64_t previous = 0;
  for (int run = 0; run < 2; ++run) {
    options.outputPath = dir.path() + "/master-" + std::to_string(run) + ".log";
    auto started = ProcessHarness::start(options);
    ASSERT_OK(started);
    ProcessHarness& master = *started.value();
    auto serving = master.waitForLine(std::regex("leader serving epoch="), Duration(30000));
    ASSERT_OK(serving);
    ASSERT_OK(master.terminate());
    auto exit = master.waitForExit(Duration(30000));
    ASSERT_TRUE(exit) << master.output();
    EXPECT_TRUE(exit->exited() && exit->exitCode == 0) << exit->describe();

    const auto events = parseMasterEvents(master.output());
    ASSERT_FALSE(events.empty()) << master.output();
    EXPECT_EQ(events.front().kind, Kind::kStarting);
    EXPECT_EQ(events.front().haMode, "standalone");
    uint64_t granted = 0;
    for (const auto& event : events) {
      if (event.kind == Kind::kContending) {
        EXPECT_EQ(event.latch, "standalone");
      }
      if (event.kind == Kind::kGranted) granted = event.epoch;
    }
    EXPECT_GT(granted, previous) << master.output();
    previous = granted;
    EXPECT_EQ(events.back().kind, Kind::kExiting);
    EXPECT_EQ(events.back().code, 0);
  }
}

}  // namespace
}  // namespace regent::testing

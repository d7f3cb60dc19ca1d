// A regent-master that cannot run exits, naming what is wrong, and ends with the `master exiting`
// event line (docs/operations.md, "Exit codes"): a standalone epoch file it cannot use (exit 1),
// a RocksDB store another master holds past store.rocksdb.lock-timeout (exit 1), bad options
// and an events.file it cannot open (exit 2).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fixtures/process_harness.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/integration/master_cluster_test_util.h"

namespace regent::testing {
namespace {

using Kind = MasterEvent::Kind;

// Bounds for slow ASan builds on shared cores; none is a claim about speed. A master that does
// not exit at all (the defect) fails at the bound.
constexpr Duration kStartTimeout{60000};
constexpr Duration kExitTimeout{60000};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> standaloneArgs(const std::string& epochFile, const std::string& store) {
  return {REGENT_BIN_DIR "/regent-master", "--set", "ha.mode=standalone",
          "--set", "ha.standalone.epoch-file=" + epochFile,
          "--set", "store.rocksdb.path=" + store,
          "--set", "rpc.bind=127.0.0.1:0",
          "--set", "http.bind=127.0.0.1:0"};
}

std::unique_ptr<ProcessHarness> startMaster(const std::string& dir, std::vector<std::string> argv,
                                            const std::string& name) {
  ProcessOptions options;
  options.argv = std::move(argv);
  options.outputPath = dir + "/" + name + ".log";
  auto started = ProcessHarness::start(options);
  EXPECT_TRUE(started.ok()) << started.error().message;
  return started.ok() ? std::move(started).value() : nullptr;
}

// Waits for the master to exit and checks that it exited with `code` and that its last event
// line is `master exiting ... code=<code>`.
void expectExitWithLine(ProcessHarness& master, int code) {
  auto exit = master.waitForExit(kExitTimeout);
  ASSERT_TRUE(exit) << "the master did not exit\n" << master.output();
  EXPECT_TRUE(exit->exited() && exit->exitCode == code) << exit->describe() << "\n"
                                                        << master.output();
  const auto events = parseMasterEvents(master.output());
  ASSERT_FALSE(events.empty()) << master.output();
  EXPECT_EQ(events.back().kind, Kind::kExiting) << master.output();
  EXPECT_EQ(events.back().code, code) << master.output();
}

struct UnusableEpochFile {
  const char* name;
  // Prepares `dir` and returns the epoch file to configure.
  std::function<std::string(const std::string& dir)> prepare;

  friend void PrintTo(const UnusableEpochFile& epochFile, std::ostream* out) {
    *out << epochFile.name;
  }
};

class MasterUnusableEpochFile : public ::testing::TestWithParam<UnusableEpochFile> {};

TEST_P(MasterUnusableEpochFile, StandaloneMasterExitsOneNamingTheFile) {
  TempDir dir("master-epoch-file");
  const std::string epochFile = GetParam().prepare(dir.path());
  const std::string before = readFile(epochFile);
  auto master = startMaster(dir.path(), standaloneArgs(epochFile, dir.path() + "/store"), "master");
  ASSERT_TRUE(master);

  ASSERT_NO_FATAL_FAILURE(expectExitWithLine(*master, 1));
  const std::string output = master->output();
  EXPECT_TRUE(contains(output, "epoch file " + epochFile)) << output;
  const auto events = parseMasterEvents(output);
  for (const auto& event : events) {
    EXPECT_NE(event.kind, Kind::kGranted) << output;
  }
  // Left as it was, for a person to look at.
  EXPECT_EQ(readFile(epochFile), before);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MasterUnusableEpochFile,
    ::testing::Values(
        UnusableEpochFile{"NotANumber",
                          [](const std::string& dir) {
                            std::ofstream(dir + "/epoch") << "seven\n";
                            return dir + "/epoch";
                          }},
        UnusableEpochFile{"ADirectory",
                          [](const std::string& dir) {
                            std::filesystem::create_directory(dir + "/epoch");
                            return dir + "/epoch";
                          }},
        // Its directory cannot hold it (a regular file stands in its place): the epoch cannot
        // be written, whoever runs the test (root ignores permission bits).
        UnusableEpochFile{"InAPlaceThatCannotBeWritten",
                          [](const std::string& dir) {
                            std::ofstream(dir + "/not-a-directory") << "x\n";
                            return dir + "/not-a-directory/epoch";
                          }}),
    [](const ::testing::TestParamInfo<UnusableEpochFile>& info) { return info.param.name; });

TEST(MasterStartupFailure, SecondMasterOnTheSameRocksDbStoreGivesUpAfterTheLockTimeout) {
  TempDir dir("master-rocksdb-lock");
  const std::string epochFile = dir.path() + "/epoch";
  const std::string store = dir.path() + "/store";
  auto first = startMaster(dir.path(), standaloneArgs(epochFile, store), "first");
  ASSERT_TRUE(first);
  ASSERT_OK(first->waitForLine(std::regex("leader serving epoch=1 "), kStartTimeout));

  // The same configuration started twice (the usual mistake), with a short lock timeout.
  std::vector<std::string> argv = standaloneArgs(epochFile, store);
  argv.insert(argv.end(), {"--set", "store.rocksdb.lock-timeout=1s"});
  auto second = startMaster(dir.path(), argv, "second");
  ASSERT_TRUE(second);
  ASSERT_NO_FATAL_FAILURE(expectExitWithLine(*second, 1));
  const std::string output = second->output();
  EXPECT_TRUE(contains(output, store)) << output;
  EXPECT_TRUE(contains(output, "store.rocksdb.lock-timeout")) << output;
  // It gave up before it took an epoch: the first master's term is untouched.
  for (const auto& event : parseMasterEvents(output)) {
    EXPECT_NE(event.kind, Kind::kGranted) << output;
  }
  EXPECT_EQ(readFile(epochFile), "1\n");

  ASSERT_TRUE(first->running()) << first->output();
  ASSERT_OK(first->terminate());
  ASSERT_NO_FATAL_FAILURE(expectExitWithLine(*first, 0));
}

TEST(MasterStartupFailure, BadOptionsEndWithTheExitingLineAndCodeTwo) {
  TempDir dir("master-bad-options");
  const std::vector<std::vector<std::string>> cases = {
      {"--set", "ha.zookeeper.quorom=zk1:2181"},           // an unknown key
      {"--set", "ha.zookeeper.session-timeout=soon"},      // a bad value
      {"--set", "worker.data-dir=w"},                      // another program's option
      {"--set", "resourcemanager.provider=kubernetes"},    // a provider that does not exist
      {"--set", "resourcemanager.workers.min=3", "--set",
       "resourcemanager.workers.max=2"},                   // a floor above the cap
      {"--set", "resourcemanager.provider=docker"},        // docker without an image
      {"--no-such-flag"},                                  // the command line itself
      {"--config", dir.path() + "/missing.yaml"},          // a file that is not there
  };
  int run = 0;
  for (const auto& args : cases) {
    std::vector<std::string> argv = {REGENT_BIN_DIR "/regent-master"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto master = startMaster(dir.path(), argv, "run-" + std::to_string(run++));
    ASSERT_TRUE(master);
    SCOPED_TRACE(args.back());
    ASSERT_NO_FATAL_FAILURE(expectExitWithLine(*master, 2));
    const auto events = parseMasterEvents(master->output());
    EXPECT_EQ(events.back().masterId, "?") << master->output();
  }

  // An events file that cannot be opened is a bad option too, named with the reason.
  const std::string eventsPath = dir.path() + "/no-such-dir/events.jsonl";
  auto events = startMaster(dir.path(),
                            {REGENT_BIN_DIR "/regent-master", "--set",
                             "events.file=" + eventsPath},
                            "events-file");
  ASSERT_TRUE(events);
  ASSERT_NO_FATAL_FAILURE(expectExitWithLine(*events, 2));
  EXPECT_TRUE(contains(events->output(), "events.file: cannot open the events file " +
                                             eventsPath + ": No such file or directory"))
      << events->output();

  // A process provider whose worker binary cannot run: exit 1, naming the option and the file.
  auto provider = startMaster(dir.path(),
                              {REGENT_BIN_DIR "/regent-master", "--set",
                               "resourcemanager.provider=process", "--set",
                               "resourcemanager.process.data-root=" + dir.path() + "/workers",
                               "--set",
                               "resourcemanager.process.worker-binary=" + dir.path() +
                                   "/no-such-worker",
                               "--set", "rpc.bind=127.0.0.1:0", "--set", "http.bind=127.0.0.1:0"},
                              "provider");
  ASSERT_TRUE(provider);
  ASSERT_NO_FATAL_FAILURE(expectExitWithLine(*provider, 1));
  EXPECT_TRUE(contains(provider->output(),
                       "resourcemanager.process.worker-binary: cannot run " + dir.path() +
                           "/no-such-worker: No such file or directory"))
      << provider->output();

  // A docker provider whose socket is not there: exit 1, naming the option and the path.
  auto docker = startMaster(dir.path(),
                            {REGENT_BIN_DIR "/regent-master", "--set",
                             "resourcemanager.provider=docker", "--set",
                             "resourcemanager.docker.image=regent:latest", "--set",
                             "resourcemanager.docker.socket=" + dir.path() + "/docker.sock",
                             "--set", "rpc.bind=127.0.0.1:0", "--set", "http.bind=127.0.0.1:0"},
                            "docker");
  ASSERT_TRUE(docker);
  ASSERT_NO_FATAL_FAILURE(expectExitWithLine(*docker, 1));
  EXPECT_TRUE(contains(docker->output(), "resourcemanager.docker.socket: " + dir.path() +
                                             "/docker.sock: No such file or directory"))
      << docker->output();

  // With --log-format json the line is a JSON object like every other log line.
  auto json = startMaster(dir.path(),
                          {REGENT_BIN_DIR "/regent-master", "--log-format", "json", "--set",
                           "ha.zookeeper.quorom=zk1:2181"},
                          "json");
  ASSERT_TRUE(json);
  ASSERT_NO_FATAL_FAILURE(expectExitWithLine(*json, 2));
  bool sawJson = false;
  for (const auto& line : jsonLines(json->output())) {
    auto parsed = nlohmann::json::parse(line, nullptr, false);
    if (parsed.is_object() && contains(parsed.value("msg", ""), "master exiting")) sawJson = true;
  }
  EXPECT_TRUE(sawJson) << json->output();
}

}  // namespace
}  // namespace regent::testing

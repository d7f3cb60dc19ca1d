// regentctl run as a process against real masters: leader (text and JSON), leader --watch,
// masters (text and JSON), its exit codes, and reading with only the read credential.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/fixtures/wait_test_util.h"
#include "tests/fixtures/zookeeper_server.h"
#include "tests/integration/master_cluster_test_util.h"

namespace regent::testing {
namespace {

using Kind = MasterEvent::Kind;
constexpr Duration kTimeout{60000};

// Masters started one after another (so latch order is slot order); waits until one serves.
struct ServingCluster {
  std::unique_ptr<MasterCluster> cluster;
  uint64_t epoch = 0;
  size_t leader = 0;
  std::vector<std::string> ctlArgs;  // --zk and --cluster-id for regentctl.
};

void startServingCluster(ServingCluster& setup, const std::string& name, size_t masters,
                         std::vector<std::string> extraSet = {}) {
  ZooKeeperServer& server = sharedServer();
  const std::string clusterId = uniqueClusterId(name);
  setup.cluster = std::make_unique<MasterCluster>(MasterClusterOptions{
      .quorum = server.connectString(), .clusterId = clusterId, .extraSet = extraSet});
  ASSERT_OK(setup.cluster->startMasters(masters));
  // The first master's latch node is the lowest, so it leads.
  auto serving = setup.cluster->waitForEvent(
      0, [](const MasterEvent& e) { return e.kind == Kind::kServing; }, kTimeout);
  ASSERT_OK(serving);
  setup.epoch = serving.value().epoch;
  setup.leader = 0;
  setup.ctlArgs = {"--zk", server.connectString(), "--cluster-id", clusterId};
}

std::vector<std::string> with(std::vector<std::string> base, std::vector<std::string> more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Regentctl, LeaderPrintsTheLeadersEpochIdAddressesElectionTimeAndStatus) {
  ServingCluster setup;
  ASSERT_NO_FATAL_FAILURE(startServingCluster(setup, "ctl-leader", 2));
  TempDir dir("regentctl");
  auto run = runRegentctl(dir.path(), with(setup.ctlArgs, {"leader"}));
  ASSERT_OK(run);
  const std::string& out = run.value().output;
  EXPECT_EQ(run.value().exit.exitCode, 0) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("epoch:\\s+" + std::to_string(setup.epoch) + "\n")))
      << out;
  EXPECT_TRUE(std::regex_search(
      out, std::regex("master id:\\s+" + setup.cluster->masterId(setup.leader) + "\n")))
      << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("rpc address:\\s+127\\.0\\.0\\.1:17000\n"))) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("http address:\\s+127\\.0\\.0\\.1:[1-9][0-9]*\n")))
      << out;
  EXPECT_TRUE(std::regex_search(
      out, std::regex("pid:\\s+" + std::to_string(setup.cluster->process(0).pid()) + "\n")))
      << out;
  EXPECT_TRUE(std::regex_search(
      out, std::regex(R"(elected at:\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)"))) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("status:\\s+SERVING\n"))) << out;
}

TEST(Regentctl, LeaderJsonPrintsOneObjectWithTheLeadersFields) {
  ServingCluster setup;
  ASSERT_NO_FATAL_FAILURE(startServingCluster(setup, "ctl-leader-json", 1));
  TempDir dir("regentctl");
  auto run = runRegentctl(dir.path(), with(setup.ctlArgs, {"leader", "--json"}));
  ASSERT_OK(run);
  const std::string& out = run.value().output;
  EXPECT_EQ(run.value().exit.exitCode, 0) << out;
  auto lines = jsonLines(out);
  ASSERT_EQ(lines.size(), 1u) << out;
  auto leader = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(leader["epoch"], setup.epoch);
  EXPECT_EQ(leader["master_id"], setup.cluster->masterId(0));
  EXPECT_EQ(leader["rpc_address"], "127.0.0.1:17000");
  EXPECT_TRUE(std::regex_match(leader["http_address"].get<std::string>(),
                               std::regex("127\\.0\\.0\\.1:[1-9][0-9]*")))
      << leader["http_address"];
  EXPECT_EQ(leader["pid"], setup.cluster->process(0).pid());
  EXPECT_EQ(leader["status"], "SERVING");
  EXPECT_TRUE(leader["elected_at"].is_string());
  EXPECT_TRUE(leader["host"].is_string());
}

TEST(Regentctl, LeaderExitsWithThreeWhenNoMasterLeads) {
  ZooKeeperServer& server = sharedServer();
  TempDir dir("regentctl");
  const std::vector<std::string> args = {"--zk", server.connectString(), "--cluster-id",
                                         uniqueClusterId("ctl-empty")};
  auto run = runRegentctl(dir.path(), with(args, {"leader"}));
  ASSERT_OK(run);
  EXPECT_EQ(run.value().exit.exitCode, 3) << run.value().output;
  EXPECT_TRUE(contains(run.value().output, "no master leads")) << run.value().output;

  auto json = runRegentctl(dir.path(), with(args, {"--json", "leader"}));
  ASSERT_OK(json);
  EXPECT_EQ(json.value().exit.exitCode, 3) << json.value().output;
  auto lines = jsonLines(json.value().output);
  ASSERT_EQ(lines.size(), 1u) << json.value().output;
  EXPECT_EQ(nlohmann::json::parse(lines[0])["status"], "NONE");
}

TEST(Regentctl, LeaderWatchPrintsOneLinePerLeaderChangeUntilTerminated) {
  ZooKeeperServer& server = sharedServer();
  const std::string clusterId = uniqueClusterId("ctl-watch");
  MasterCluster cluster({.quorum = server.connectString(), .clusterId = clusterId});
  ASSERT_OK(cluster.startMasters(1));
  auto serving = cluster.waitForEvent(
      0, [](const MasterEvent& e) { return e.kind == Kind::kServing; }, kTimeout);
  ASSERT_OK(serving);
  const uint64_t epoch = serving.value().epoch;

  TempDir dir("regentctl");
  const std::vector<std::string> args = {"--zk", server.connectString(), "--cluster-id",
                                         clusterId, "leader", "--watch"};
  auto text = startRegentctl(dir.path(), args);
  ASSERT_OK(text);
  auto json = startRegentctl(dir.path(), with(args, {"--json"}));
  ASSERT_OK(json);
  ProcessHarness& textWatch = *text.value();
  ProcessHarness& jsonWatch = *json.value();

  const std::string first = "leader epoch=" + std::to_string(epoch) +
                            " master_id=" + cluster.masterId(0) + " .*status=SERVING";
  ASSERT_OK(textWatch.waitForLine(std::regex(first), kTimeout));
  ASSERT_OK(jsonWatch.waitForLine(
      std::regex("\"epoch\":" + std::to_string(epoch) + ",.*\"status\":\"SERVING\""), kTimeout));

  // The only master hands over: nobody leads.
  ASSERT_OK(cluster.terminate(0));
  ASSERT_TRUE(cluster.process(0).waitForExit(kTimeout));
  ASSERT_OK(textWatch.waitForLine(std::regex(R"(Z no leader$)"), kTimeout));
  ASSERT_OK(jsonWatch.waitForLine(std::regex(R"("status":"NONE")"), kTimeout));

  // A new master leads with the next epoch.
  auto next = cluster.startMaster();
  ASSERT_OK(next);
  const std::string second = "leader epoch=" + std::to_string(epoch + 1) +
                             " master_id=" + cluster.masterId(next.value());
  ASSERT_OK(cluster.waitForGrant(epoch + 1, kTimeout));
  ASSERT_OK(textWatch.waitForLine(std::regex(second), kTimeout));
  ASSERT_OK(jsonWatch.waitForLine(std::regex("\"epoch\":" + std::to_string(epoch + 1) + ","),
                                  kTimeout));

  for (ProcessHarness* watch : {&textWatch, &jsonWatch}) {
    ASSERT_OK(watch->terminate());
    auto exit = watch->waitForExit(Duration(10000));
    ASSERT_TRUE(exit) << watch->output();
    EXPECT_TRUE(exit->exited() && exit->exitCode == 0) << exit->describe();
  }
  // Every line of --json output is one JSON object, and no two consecutive lines are the same
  // view (the time it was observed aside).
  std::vector<nlohmann::json> views;
  std::istringstream output(jsonWatch.output());
  for (std::string line; std::getline(output, line);) {
    if (line.empty()) continue;
    auto parsed = nlohmann::json::parse(line, nullptr, false);
    ASSERT_TRUE(!parsed.is_discarded() && parsed.is_object()) << "not a JSON object: " << line;
    parsed.erase("observed_at");
    views.push_back(std::move(parsed));
  }
  ASSERT_GE(views.size(), 3u) << jsonWatch.output();
  for (size_t i = 1; i < views.size(); ++i) {
    EXPECT_NE(views[i], views[i - 1]) << "line " << i << " repeats the view before it";
  }
}

TEST(Regentctl, MastersListsEveryContenderInLatchOrderWithItsRole) {
  ServingCluster setup;
  ASSERT_NO_FATAL_FAILURE(startServingCluster(setup, "ctl-masters", 3));
  MasterCluster& cluster = *setup.cluster;
  TempDir dir("regentctl");

  auto text = runRegentctl(dir.path(), with(setup.ctlArgs, {"masters"}));
  ASSERT_OK(text);
  const std::string& out = text.value().output;
  EXPECT_EQ(text.value().exit.exitCode, 0) << out;
  std::vector<std::string> rows;
  {
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
      if (std::regex_search(line, std::regex(R"(^m-\d+ )"))) rows.push_back(line);
    }
  }
  ASSERT_EQ(rows.size(), 3u) << out;
  EXPECT_TRUE(contains(out, "LATCH")) << out;
  for (size_t slot = 0; slot < 3; ++slot) {
    EXPECT_TRUE(contains(rows[slot], cluster.masterId(slot))) << out;
    EXPECT_TRUE(contains(rows[slot], "127.0.0.1:1700" + std::to_string(slot))) << out;
    EXPECT_TRUE(contains(rows[slot], slot == 0 ? " LEADER " : " STANDBY ")) << out;
  }

  auto json = runRegentctl(dir.path(), with(setup.ctlArgs, {"masters", "--json"}));
  ASSERT_OK(json);
  EXPECT_EQ(json.value().exit.exitCode, 0) << json.value().output;
  auto lines = jsonLines(json.value().output);
  ASSERT_EQ(lines.size(), 3u) << json.value().output;
  std::string previousLatch;
  for (size_t slot = 0; slot < 3; ++slot) {
    auto contender = nlohmann::json::parse(lines[slot]);
    EXPECT_EQ(contender["master_id"], cluster.masterId(slot));
    EXPECT_EQ(contender["role"], slot == 0 ? "LEADER" : "STANDBY");
    EXPECT_EQ(contender["pid"], cluster.process(slot).pid());
    EXPECT_EQ(contender["version"], REGENT_VERSION);
    const std::string latch = contender["latch"];
    EXPECT_GT(latch, previousLatch);  // Same-width sequence numbers sort as text.
    previousLatch = latch;
  }
}

TEST(Regentctl, UnreachableZooKeeperFailsWithExitOneNamingTheQuorum) {
  auto port = pickFreeLoopbackPort();
  ASSERT_OK(port);
  const std::string quorum = "127.0.0.1:" + std::to_string(port.value());
  TempDir dir("regentctl");
  for (const char* command : {"leader", "masters"}) {
    auto run = runRegentctl(
        dir.path(), {"--zk", quorum, "--set", "ha.zookeeper.connect-timeout=1s", command});
    ASSERT_OK(run);
    EXPECT_EQ(run.value().exit.exitCode, 1) << run.value().output;
    EXPECT_TRUE(contains(run.value().output, "cannot reach ZooKeeper at " + quorum))
        << run.value().output;
  }
}

TEST(Regentctl, UnreachableMultiHostQuorumFailsWithExitOneNamingTheQuorum) {
  auto first = pickFreeLoopbackPort();
  ASSERT_OK(first);
  auto second = pickFreeLoopbackPort();
  ASSERT_OK(second);
  const std::string quorum = "127.0.0.1:" + std::to_string(first.value()) + ",127.0.0.1:" +
                             std::to_string(second.value());
  TempDir dir("regentctl");
  auto run = runRegentctl(
      dir.path(), {"--zk", quorum, "--set", "ha.zookeeper.connect-timeout=1s", "leader"},
      Duration(20000));
  ASSERT_OK(run);
  EXPECT_EQ(run.value().exit.exitCode, 1) << run.value().output;
  EXPECT_TRUE(contains(run.value().output, "cannot reach ZooKeeper at " + quorum))
      << run.value().output;
}

TEST(Regentctl, ReadCredentialAloneIsEnoughToInspectAClusterWithAuth) {
  ServingCluster setup;
  ASSERT_NO_FATAL_FAILURE(startServingCluster(
      setup, "ctl-auth", 2,
      {"ha.zookeeper.auth=regent:master-secret", "ha.zookeeper.read-auth=viewer:viewer-secret"}));
  TempDir dir("regentctl");
  // regentctl logs in with ha.zookeeper.read-auth: the operator holds no master credential.
  const auto reader =
      with(setup.ctlArgs, {"--set", "ha.zookeeper.read-auth=viewer:viewer-secret"});

  auto leader = runRegentctl(dir.path(), with(reader, {"--json", "leader"}));
  ASSERT_OK(leader);
  EXPECT_EQ(leader.value().exit.exitCode, 0) << leader.value().output;
  auto lines = jsonLines(leader.value().output);
  ASSERT_EQ(lines.size(), 1u) << leader.value().output;
  EXPECT_EQ(nlohmann::json::parse(lines[0])["epoch"], setup.epoch);

  auto masters = runRegentctl(dir.path(), with(reader, {"--json", "masters"}));
  ASSERT_OK(masters);
  EXPECT_EQ(masters.value().exit.exitCode, 0) << masters.value().output;
  EXPECT_EQ(jsonLines(masters.value().output).size(), 2u) << masters.value().output;

  // Without any credential the cluster's nodes cannot be read.
  auto anonymous = runRegentctl(dir.path(), with(setup.ctlArgs, {"leader"}));
  ASSERT_OK(anonymous);
  EXPECT_EQ(anonymous.value().exit.exitCode, 1) << anonymous.value().output;
}

TEST(Regentctl, BadUsageExitsWithTwo) {
  TempDir dir("regentctl");
  const std::vector<std::vector<std::string>> usages = {
      {},                                             // no command
      {"leader", "--no-such-flag"},                   // unknown flag
      {"frobnicate"},                                 // unknown command
      {"--set", "ha.zookeeper.session-timeout=soon", "leader"},  // bad value
      {"--set", "no-equals-sign", "leader"},          // not key=value
      {"--set", "http.bind=127.0.0.1:8081", "leader"},  // a master's option
  };
  for (const auto& args : usages) {
    auto run = runRegentctl(dir.path(), args);
    ASSERT_OK(run);
    EXPECT_EQ(run.value().exit.exitCode, 2) << run.value().output;
  }
}

}  // namespace
}  // namespace regent::testing

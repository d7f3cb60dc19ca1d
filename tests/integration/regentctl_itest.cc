// regentctl run as a process against real masters: leader (text and JSON), leader --watch,
// masters (text and JSON), its exit codes, and reading with only the read credential.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fixtures/wait_test_util.h"
#include "tests/integration/master_cluster_test_util.h"
#include "tests/integration/regentctl_test_util.h"

namespace regent::testing {
namespace {

class Regentctl : public RegentctlTest {};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_F(Regentctl, LeaderPrintsTheLeadersEpochIdAddressesElectionTimeAndStatus) {
  ASSERT_NO_FATAL_FAILURE(startCluster("ctl-leader", 2));
  auto run = runRegentctl(dir_.path(), withArgs(ctlArgs_, {"leader"}));
  ASSERT_OK(run);
  const std::string& out = run.value().output;
  EXPECT_EQ(run.value().exit.exitCode, 0) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("epoch:\\s+" + std::to_string(epoch_) + "\n")))
      << out;
  EXPECT_TRUE(std::regex_search(
      out, std::regex("master id:\\s+" + cluster_->masterId(0) + "\n")))
      << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("rpc address:\\s+127\\.0\\.0\\.1:17000\n"))) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("http address:\\s+127\\.0\\.0\\.1:[1-9][0-9]*\n")))
      << out;
  EXPECT_TRUE(std::regex_search(
      out, std::regex("pid:\\s+" + std::to_string(cluster_->process(0).pid()) + "\n")))
      << out;
  EXPECT_TRUE(std::regex_search(
      out, std::regex(R"(elected at:\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)"))) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("status:\\s+SERVING\n"))) << out;
}

TEST_F(Regentctl, LeaderJsonPrintsOneObjectWithTheLeadersFields) {
  ASSERT_NO_FATAL_FAILURE(startCluster("ctl-leader-json", 1));
  auto run = runRegentctl(dir_.path(), withArgs(ctlArgs_, {"leader", "--json"}));
  ASSERT_OK(run);
  const std::string& out = run.value().output;
  EXPECT_EQ(run.value().exit.exitCode, 0) << out;
  auto lines = jsonLines(out);
  ASSERT_EQ(lines.size(), 1u) << out;
  auto leader = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(leader["epoch"], epoch_);
  EXPECT_EQ(leader["master_id"], cluster_->masterId(0));
  EXPECT_EQ(leader["rpc_address"], "127.0.0.1:17000");
  EXPECT_TRUE(std::regex_match(leader["http_address"].get<std::string>(),
                               std::regex("127\\.0\\.0\\.1:[1-9][0-9]*")))
      << leader["http_address"];
  EXPECT_EQ(leader["pid"], cluster_->process(0).pid());
  EXPECT_EQ(leader["status"], "SERVING");
  EXPECT_TRUE(leader["elected_at"].is_string());
  EXPECT_TRUE(leader["host"].is_string());
}

TEST_F(Regentctl, LeaderExitsWithThreeWhenNoMasterLeads) {
  ASSERT_NO_FATAL_FAILURE(useCluster("ctl-empty"));
  auto run = runRegentctl(dir_.path(), withArgs(ctlArgs_, {"leader"}));
  ASSERT_OK(run);
  EXPECT_EQ(run.value().exit.exitCode, 3) << run.value().output;
  EXPECT_TRUE(contains(run.value().output, "no master leads")) << run.value().output;

  auto json = runRegentctl(dir_.path(), withArgs(ctlArgs_, {"--json", "leader"}));
  ASSERT_OK(json);
  EXPECT_EQ(json.value().exit.exitCode, 3) << json.value().output;
  auto lines = jsonLines(json.value().output);
  ASSERT_EQ(lines.size(), 1u) << json.value().output;
  EXPECT_EQ(nlohmann::json::parse(lines[0])["status"], "NONE");
}

TEST_F(Regentctl, LeaderWatchPrintsOneLinePerLeaderChangeUntilTerminated) {
  ASSERT_NO_FATAL_FAILURE(startCluster("ctl-watch", 1));
  MasterCluster& cluster = *cluster_;
  const uint64_t epoch = epoch_;

  const std::vector<std::string> args = withArgs(ctlArgs_, {"leader", "--watch"});
  auto text = startRegentctl(dir_.path(), args);
  ASSERT_OK(text);
  auto json = startRegentctl(dir_.path(), withArgs(args, {"--json"}));
  ASSERT_OK(json);
  ProcessHarness& textWatch = *text.value();
  ProcessHarness& jsonWatch = *json.value();

  const std::string first = "leader epoch=" + std::to_string(epoch) +
                            " master_id=" + cluster.masterId(0) + " .*status=SERVING";
  ASSERT_OK(textWatch.waitForLine(std::regex(first), kCtlWait));
  ASSERT_OK(jsonWatch.waitForLine(
      std::regex("\"epoch\":" + std::to_string(epoch) + ",.*\"status\":\"SERVING\""), kCtlWait));

  // The only master hands over: nobody leads.
  ASSERT_OK(cluster.terminate(0));
  ASSERT_TRUE(cluster.process(0).waitForExit(kCtlWait));
  ASSERT_OK(textWatch.waitForLine(std::regex(R"(Z no leader$)"), kCtlWait));
  ASSERT_OK(jsonWatch.waitForLine(std::regex(R"("status":"NONE")"), kCtlWait));

  // A new master leads with the next epoch.
  auto next = cluster.startMaster();
  ASSERT_OK(next);
  const std::string second = "leader epoch=" + std::to_string(epoch + 1) +
                             " master_id=" + cluster.masterId(next.value());
  ASSERT_OK(cluster.waitForGrant(epoch + 1, kCtlWait));
  ASSERT_OK(textWatch.waitForLine(std::regex(second), kCtlWait));
  ASSERT_OK(jsonWatch.waitForLine(std::regex("\"epoch\":" + std::to_string(epoch + 1) + ","),
                                  kCtlWait));

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

TEST_F(Regentctl, MastersListsEveryContenderInLatchOrderWithItsRole) {
  ASSERT_NO_FATAL_FAILURE(startCluster("ctl-masters", 3));
  MasterCluster& cluster = *cluster_;

  auto text = runRegentctl(dir_.path(), withArgs(ctlArgs_, {"masters"}));
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

  auto json = runRegentctl(dir_.path(), withArgs(ctlArgs_, {"masters", "--json"}));
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

TEST_F(Regentctl, UnreachableZooKeeperFailsWithExitOneNamingTheQuorum) {
  auto port = pickFreeLoopbackPort();
  ASSERT_OK(port);
  const std::string quorum = "127.0.0.1:" + std::to_string(port.value());
  for (const char* command : {"leader", "masters"}) {
    auto run = runRegentctl(
        dir_.path(), {"--zk", quorum, "--set", "ha.zookeeper.connect-timeout=1s", command});
    ASSERT_OK(run);
    EXPECT_EQ(run.value().exit.exitCode, 1) << run.value().output;
    EXPECT_TRUE(contains(run.value().output, "cannot reach ZooKeeper at " + quorum))
        << run.value().output;
  }
}

TEST_F(Regentctl, UnreachableMultiHostQuorumFailsWithExitOneNamingTheQuorum) {
  auto first = pickFreeLoopbackPort();
  ASSERT_OK(first);
  auto second = pickFreeLoopbackPort();
  ASSERT_OK(second);
  const std::string quorum = "127.0.0.1:" + std::to_string(first.value()) + ",127.0.0.1:" +
                             std::to_string(second.value());
  auto run = runRegentctl(
      dir_.path(), {"--zk", quorum, "--set", "ha.zookeeper.connect-timeout=1s", "leader"},
      Duration(20000));
  ASSERT_OK(run);
  EXPECT_EQ(run.value().exit.exitCode, 1) << run.value().output;
  EXPECT_TRUE(contains(run.value().output, "cannot reach ZooKeeper at " + quorum))
      << run.value().output;
}

TEST_F(Regentctl, ReadCredentialAloneIsEnoughToInspectAClusterWithAuth) {
  ASSERT_NO_FATAL_FAILURE(startCluster("ctl-auth", 2,
      {"ha.zookeeper.auth=regent:master-secret", "ha.zookeeper.read-auth=viewer:viewer-secret"}));
  // regentctl logs in with ha.zookeeper.read-auth: the operator holds no master credential.
  const auto reader =
      withArgs(ctlArgs_, {"--set", "ha.zookeeper.read-auth=viewer:viewer-secret"});

  auto leader = runRegentctl(dir_.path(), withArgs(reader, {"--json", "leader"}));
  ASSERT_OK(leader);
  EXPECT_EQ(leader.value().exit.exitCode, 0) << leader.value().output;
  auto lines = jsonLines(leader.value().output);
  ASSERT_EQ(lines.size(), 1u) << leader.value().output;
  EXPECT_EQ(nlohmann::json::parse(lines[0])["epoch"], epoch_);

  auto masters = runRegentctl(dir_.path(), withArgs(reader, {"--json", "masters"}));
  ASSERT_OK(masters);
  EXPECT_EQ(masters.value().exit.exitCode, 0) << masters.value().output;
  EXPECT_EQ(jsonLines(masters.value().output).size(), 2u) << masters.value().output;

  // Without any credential the cluster's nodes cannot be read.
  auto anonymous = runRegentctl(dir_.path(), withArgs(ctlArgs_, {"leader"}));
  ASSERT_OK(anonymous);
  EXPECT_EQ(anonymous.value().exit.exitCode, 1) << anonymous.value().output;
}

TEST_F(Regentctl, BadUsageExitsWithTwo) {
  const std::vector<std::vector<std::string>> usages = {
      {},                                             // no command
      {"leader", "--no-such-flag"},                   // unknown flag
      {"frobnicate"},                                 // unknown command
      {"--set", "ha.zookeeper.session-timeout=soon", "leader"},  // bad value
      {"--set", "no-equals-sign", "leader"},          // not key=value
      {"--set", "http.bind=127.0.0.1:8081", "leader"},  // a master's option
  };
  for (const auto& args : usages) {
    auto run = runRegentctl(dir_.path(), args);
    ASSERT_OK(run);
    EXPECT_EQ(run.value().exit.exitCode, 2) << run.value().output;
  }
}

}  // namespace
}  // namespace regent::testing

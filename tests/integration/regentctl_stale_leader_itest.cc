// `regentctl leader` in front of a `leader` record that no live contender holds (as one left by a
// session a restarted ZooKeeper server restored): the record is shown, with a sentence saying it
// is stale, and the exit code says no master leads.
#include <gtest/gtest.h>
#include <zookeeper/zookeeper.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/fixtures/zookeeper_server.h"
#include "tests/fixtures/zookeeper_test_client.h"
#include "tests/integration/master_cluster_test_util.h"

namespace regent::testing {
namespace {

TEST(RegentctlStaleLeader, ARecordWhoseOwnerSessionHoldsNoLatchNodeIsStaleAndExitsThree) {
  auto server = sharedZooKeeperServer();
  ASSERT_OK(server);
  const std::string clusterId = uniqueClusterId("ctl-stale");
  const std::string root = "/regent/" + clusterId;
  // A session that holds the record and nothing in the latch: no term lives behind it.
  auto owner = ZooKeeperTestClient::connect(server.value()->connectString());
  ASSERT_OK(owner);
  ASSERT_OK(owner.value()->ensurePath(root + "/latch"));
  ASSERT_OK(owner.value()->create(
      root + "/leader",
      R"({"epoch":7,"master_id":"gone","rpc_address":"127.0.0.1:1","http_address":"127.0.0.1:2",)"
      R"("host":"h","pid":1,"elected_at_ms":0,"status":"SERVING"})",
      ZOO_EPHEMERAL));

  TempDir dir("regentctl");
  const std::vector<std::string> args = {"--zk", server.value()->connectString(), "--cluster-id",
                                         clusterId};
  auto text = runRegentctl(dir.path(), {args[0], args[1], args[2], args[3], "leader"});
  ASSERT_OK(text);
  const std::string& output = text.value().output;
  EXPECT_EQ(text.value().exit.exitCode, 3) << output;
  EXPECT_NE(output.find("master id:     gone"), std::string::npos) << output;
  EXPECT_NE(output.find("no master leads cluster \"" + clusterId +
                        "\" right now; the leader record above is stale: the record's owner "
                        "session 0x"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("holds no latch node"), std::string::npos) << output;

  auto json = runRegentctl(dir.path(), {args[0], args[1], args[2], args[3], "--json", "leader"});
  ASSERT_OK(json);
  EXPECT_EQ(json.value().exit.exitCode, 3) << json.value().output;
  auto lines = jsonLines(json.value().output);
  ASSERT_EQ(lines.size(), 1u) << json.value().output;
  const auto record = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(record["master_id"], "gone");
  EXPECT_EQ(record["status"], "SERVING");
  ASSERT_TRUE(record.contains("stale")) << lines[0];
  EXPECT_NE(record["stale"].get<std::string>().find("holds no latch node"), std::string::npos);
}

}  // namespace
}  // namespace regent::testing

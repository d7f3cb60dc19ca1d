// `regentctl leader` in front of a `leader` record that no live contender holds (as one left by a
// session a restarted ZooKeeper server restored): the record is shown, with a sentence saying it
// is stale, and the exit code says no master leads.
#include <gtest/gtest.h>
#include <zookeeper/zookeeper.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/fixtures/zookeeper_test_client.h"
#include "tests/integration/master_cluster_test_util.h"
#include "tests/integration/regentctl_test_util.h"

namespace regent::testing {
namespace {

class RegentctlStaleLeader : public RegentctlTest {};

TEST_F(RegentctlStaleLeader, ARecordWhoseOwnerSessionHoldsNoLatchNodeIsStaleAndExitsThree) {
  ASSERT_NO_FATAL_FAILURE(useCluster("ctl-stale"));
  const std::string root = "/regent/" + clusterId_;
  // A session that holds the record and nothing in the latch: no term lives behind it.
  auto owner = ZooKeeperTestClient::connect(quorum_);
  ASSERT_OK(owner);
  ASSERT_OK(owner.value()->ensurePath(root + "/latch"));
  ASSERT_OK(owner.value()->create(
      root + "/leader",
      R"({"epoch":7,"master_id":"gone","rpc_address":"127.0.0.1:1","http_address":"127.0.0.1:2",)"
      R"("host":"h","pid":1,"elected_at_ms":0,"status":"SERVING"})",
      ZOO_EPHEMERAL));

  auto text = runRegentctl(dir_.path(), withArgs(ctlArgs_, {"leader"}));
  ASSERT_OK(text);
  const std::string& output = text.value().output;
  EXPECT_EQ(text.value().exit.exitCode, 3) << output;
  EXPECT_NE(output.find("master id:     gone"), std::string::npos) << output;
  EXPECT_NE(output.find("no master leads cluster \"" + clusterId_ +
                        "\" right now; the leader record above is stale: the record's owner "
                        "session 0x"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("holds no latch node"), std::string::npos) << output;

  auto json = runRegentctl(dir_.path(), withArgs(ctlArgs_, {"--json", "leader"}));
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

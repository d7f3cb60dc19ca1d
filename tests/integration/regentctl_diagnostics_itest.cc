// regentctl says what went wrong: an unknown or missing subcommand by name, an empty --zk as a
// bad quorum, the last cause when it gives up (a refused ZooKeeper connection), the whole
// --timeout spent waiting for ZooKeeper, and a leader it may not read (ZNOAUTH) not retried.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/integration/master_cluster_test_util.h"
#include "tests/integration/regentctl_test_util.h"

namespace regent::testing {
namespace {

class RegentctlDiagnostics : public RegentctlTest {};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_F(RegentctlDiagnostics, AnUnknownSubcommandIsNamedWithTheSubcommandsThereAre) {
  auto top = runRegentctl(dir_.path(), {"frobnicate"});
  ASSERT_OK(top);
  EXPECT_EQ(top.value().exit.exitCode, 2) << top.value().output;
  EXPECT_TRUE(contains(top.value().output,
                       "regentctl: unknown subcommand \"frobnicate\"; the subcommands are leader, "
                       "masters, jobs, failover"))
      << top.value().output;

  auto jobs = runRegentctl(dir_.path(), {"jobs", "frob"});
  ASSERT_OK(jobs);
  EXPECT_EQ(jobs.value().exit.exitCode, 2) << jobs.value().output;
  EXPECT_TRUE(contains(jobs.value().output,
                       "regentctl: unknown jobs subcommand \"frob\"; the jobs subcommands are "
                       "submit, list, status, cancel"))
      << jobs.value().output;

  auto none = runRegentctl(dir_.path(), {"--json"});
  ASSERT_OK(none);
  EXPECT_EQ(none.value().exit.exitCode, 2) << none.value().output;
  EXPECT_TRUE(contains(none.value().output,
                       "regentctl: a subcommand is required: leader, masters, jobs, failover"))
      << none.value().output;

  auto extra = runRegentctl(dir_.path(), {"leader", "now"});
  ASSERT_OK(extra);
  EXPECT_EQ(extra.value().exit.exitCode, 2) << extra.value().output;
  EXPECT_TRUE(contains(extra.value().output, "regentctl: unexpected argument \"now\""))
      << extra.value().output;
}

TEST_F(RegentctlDiagnostics, AnEmptyZkIsABadQuorumNotTheDefaultOne) {
  auto run = runRegentctl(dir_.path(), {"--zk", "", "leader"});
  ASSERT_OK(run);
  EXPECT_EQ(run.value().exit.exitCode, 2) << run.value().output;
  EXPECT_TRUE(contains(run.value().output, "bad value \"\" for ha.zookeeper.quorum from --zk"))
      << run.value().output;
}

TEST_F(RegentctlDiagnostics, JobsWaitForZooKeeperTheWholeTimeoutAndNameTheRefusedConnection) {
  auto port = pickFreeLoopbackPort();
  ASSERT_OK(port);
  const std::string quorum = "127.0.0.1:" + std::to_string(port.value());
  auto run = runRegentctl(dir_.path(), {"--zk", quorum, "--set", "ha.zookeeper.connect-timeout=1s",
                                       "--timeout", "3s", "jobs", "list"});
  ASSERT_OK(run);
  EXPECT_EQ(run.value().exit.exitCode, 1) << run.value().output;
  // Bounded by --timeout, not cut short by ha.zookeeper.connect-timeout.
  EXPECT_TRUE(contains(run.value().output, "cannot reach ZooKeeper at " + quorum))
      << run.value().output;
  EXPECT_TRUE(contains(run.value().output, "(--timeout is 3s)")) << run.value().output;
  // The cause, which only the debug log had.
  EXPECT_TRUE(contains(run.value().output, "Connection refused")) << run.value().output;
  EXPECT_FALSE(contains(run.value().output, "no answer from")) << run.value().output;
}

TEST_F(RegentctlDiagnostics, LeaderNamesTheRefusedConnectionWhenZooKeeperIsUnreachable) {
  auto port = pickFreeLoopbackPort();
  ASSERT_OK(port);
  auto run = runRegentctl(dir_.path(), {"--zk", "127.0.0.1:" + std::to_string(port.value()),
                                       "--set", "ha.zookeeper.connect-timeout=1s", "leader"});
  ASSERT_OK(run);
  EXPECT_EQ(run.value().exit.exitCode, 1) << run.value().output;
  EXPECT_TRUE(contains(run.value().output, "Connection refused")) << run.value().output;
}

TEST_F(RegentctlDiagnostics, ALeaderItMayNotReadEndsJobsAtOnceInsteadOfRetryingUntilTimeout) {
  ASSERT_NO_FATAL_FAILURE(startCluster("ctl-noauth", 1,
                                       {"ha.zookeeper.auth=regent:master-secret",
                                        "ha.zookeeper.read-auth=viewer:viewer-secret"}));
  // No credential: every read of the cluster's nodes is ZNOAUTH, and stays so. With a --timeout
  // of ten minutes, only a command that does not retry ends within the run's bound.
  auto run = runRegentctl(dir_.path(), withArgs(ctlArgs_, {"--timeout", "10m", "jobs", "list"}),
                          Duration(60000));
  ASSERT_OK(run);
  EXPECT_EQ(run.value().exit.exitCode, 1) << run.value().output;
  EXPECT_TRUE(contains(run.value().output, "cannot read the leader of cluster \"" + clusterId_))
      << run.value().output;
  EXPECT_TRUE(contains(run.value().output, "ZNOAUTH")) << run.value().output;
}

}  // namespace
}  // namespace regent::testing

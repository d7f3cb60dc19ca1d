// An ended job's detail survives failover (docs/stores.md, "An ended job's detail"): after
// `regentctl failover`, `jobs status` of a job that FINISHED under the earlier leader still
// shows its subtasks, their attempts, exit codes and workers, read from the store by the new
// leader; and `jobs logs` still finds the attempt's output on its worker.
#include <gtest/gtest.h>

#include <string>

#include "tests/integration/job_cluster_test_util.h"

namespace regent::testing {
namespace {

TEST(JobsEndedDetail, AFinishedJobsSubtasksAreShownByTheNextLeader) {
  auto made = JobCluster::start("ended-detail", {.masters = 2, .workers = 1});
  ASSERT_OK(made);
  JobCluster& cluster = *made.value();
  auto job = cluster.submit(
      "name: short\nvertices:\n  - name: v\n    parallelism: 2\n    command:\n"
      "      argv: [/bin/sh, -c, 'echo done $0', x]\n    resources: {cpu: 0.1, memory: 16MiB}\n");
  ASSERT_OK(job);
  ASSERT_OK(cluster.waitForJobEnd(job.value(), "FINISHED", 0, kJobsTimeout));
  ASSERT_OK(cluster.waitForJobClean(job.value(), kJobsTimeout));
  auto before = cluster.status(job.value());
  ASSERT_OK(before);

  const uint64_t epoch = cluster.epoch();
  CtlResult failover = cluster.ctl({"failover"});
  ASSERT_EQ(failover.exit.exitCode, 0) << failover.output;
  ASSERT_OK(cluster.followLeader(epoch + 1));

  auto after = cluster.status(job.value());
  ASSERT_OK(after);
  const nlohmann::json& status = after.value();
  EXPECT_EQ(textField(status, "state"), "FINISHED") << status.dump();
  EXPECT_FALSE(status.contains("subtasks_omitted")) << status.dump();
  ASSERT_EQ(status["vertices"].size(), 1u) << status.dump();
  const nlohmann::json& subtasks = status["vertices"][0]["subtasks"];
  ASSERT_EQ(subtasks.size(), 2u) << status.dump();
  for (const nlohmann::json& subtask : subtasks) {
    EXPECT_EQ(subtask["attempt"]["state"], "FINISHED") << subtask.dump();
    EXPECT_EQ(subtask["attempt"]["exit_code"], 0) << subtask.dump();
    EXPECT_TRUE(subtask["host"].is_string()) << subtask.dump();
  }
  // The same rows the leader that ran it showed.
  EXPECT_EQ(status["vertices"], before.value()["vertices"]);
  // And the output is still found on its worker.
  CtlResult logs = cluster.ctl({"jobs", "logs", job.value(), "--vertex", "v", "--subtask", "1"});
  EXPECT_EQ(logs.exit.exitCode, 0) << logs.output;
  EXPECT_NE(logs.output.find("done x"), std::string::npos) << logs.output;
}

}  // namespace
}  // namespace regent::testing

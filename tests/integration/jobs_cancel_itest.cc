// `regentctl jobs cancel` really stops a job on real processes: a task whose shell and child both
// ignore SIGTERM are killed as a group after worker.task-cancel-timeout, the job ends CANCELED
// through the dirty -> clean protocol, and nothing of it is left on any worker.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/fixtures/wait_test_util.h"
#include "tests/integration/job_cluster_test_util.h"

namespace regent::testing {
namespace {

using JobKind = JobEvent::Kind;
using TaskKind = TaskEvent::Kind;

// Generous bounds: ASan builds and parallel tests on two cores are slow; none of these waits is
// a claim about speed.
constexpr Duration kTimeout{60000};

TEST(JobsCancel, CancelKillsTheWholeGroupOfATaskIgnoringSigtermAndTheJobIsCanceled) {
  auto started = JobCluster::start("jobs-cancel");
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  // Two subtasks; each shell ignores SIGTERM (and so does the child it starts: an ignored signal
  // stays ignored across fork and exec), records its own pid and its child's, and waits.
  const std::string pidsPath = cluster.taskDir() + "/pids";
  auto job = cluster.submit(
      "name: stubborn\nvertices:\n  - name: stubborn\n    parallelism: 2\n    command:\n"
      "      argv:\n        - /bin/sh\n        - -c\n        - |\n"
      "          trap '' TERM\n"
      "          sleep 600 &\n"
      "          echo $$ >> \"$PIDS\"\n"
      "          echo $! >> \"$PIDS\"\n"
      "          wait\n"
      "      env:\n        PIDS: " + pidsPath + "\n");
  ASSERT_OK(job);
  const std::string id = job.value();

  std::vector<pid_t> pids;
  ASSERT_TRUE(waitUntil(
      [&] {
        pids = readPids(pidsPath);
        return pids.size() == 4;
      },
      kTimeout, Duration(50)))
      << "the tasks did not record their pids in " << pidsPath << "\n" << cluster.describe();
  for (pid_t pid : pids) EXPECT_FALSE(processGone(pid)) << pid;

  auto canceled = cluster.ctl({"jobs", "cancel", id});
  ASSERT_EQ(canceled.exit.exitCode, 0) << canceled.output;

  auto clean = cluster.waitForJobClean(id, kTimeout);
  ASSERT_OK(clean);
  EXPECT_EQ(clean.value().state, "CANCELED");
  // Every process of both groups is gone: SIGTERM did nothing, SIGKILL after the cancel timeout
  // ended them all, the child as well as the shell.
  const auto alive = waitForProcessesGone(pids, kTimeout);
  EXPECT_TRUE(alive.empty()) << "still running: " << ::testing::PrintToString(alive);

  // The workers say so: both tasks ended CANCELED by SIGKILL, none runs.
  size_t ended = 0;
  for (size_t w = 0; w < cluster.workers().size(); ++w) {
    for (const TaskEvent& event : cluster.taskEvents(w)) {
      if (event.kind != TaskKind::kEnded || event.job != id) continue;
      ++ended;
      EXPECT_EQ(event.state, "CANCELED") << event.describe();
      EXPECT_EQ(event.signal, SIGKILL) << event.describe();
    }
    auto running = cluster.tasksRunning(w);
    ASSERT_OK(running);
    EXPECT_EQ(running.value(), 0) << "worker " << w;
  }
  EXPECT_EQ(ended, 2u) << cluster.describe();
  for (const JobEvent& event : cluster.jobEventsOf(id, JobKind::kAttemptState)) {
    EXPECT_TRUE(event.state == "RUNNING" || event.state == "CANCELED") << event.describe();
  }

  auto status = cluster.status(id);
  ASSERT_OK(status);
  EXPECT_EQ(textField(status.value(), "state"), "CANCELED") << status.value().dump();
  ASSERT_TRUE(status.value().contains("result")) << status.value().dump();
  EXPECT_EQ(status.value()["result"].value("clean", false), true) << status.value().dump();
  auto graphStored = cluster.jobGraphStored(id);
  ASSERT_OK(graphStored);
  EXPECT_FALSE(graphStored.value());
  ASSERT_OK(cluster.waitForAllSlotsFree(kTimeout));
}

}  // namespace
}  // namespace regent::testing

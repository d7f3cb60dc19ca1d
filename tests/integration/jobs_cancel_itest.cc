// `regentctl jobs cancel` really stops a job on real processes: a task whose shell and child both
// ignore SIGTERM are killed as a group after worker.task-cancel-timeout, the job ends CANCELED
// through the dirty -> clean protocol, and nothing of it is left on any worker; a job cancelled
// while it waits for slots leaves no requirement behind; a job cancelled during a restart delay
// is not restarted.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "tests/fixtures/wait_test_util.h"
#include "tests/integration/job_cluster_test_util.h"

namespace regent::testing {
namespace {

using JobKind = JobEvent::Kind;
using TaskKind = TaskEvent::Kind;

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
      "      env:\n        PIDS: " +
      pidsPath + "\n");
  ASSERT_OK(job);
  const std::string id = job.value();

  std::vector<pid_t> pids;
  ASSERT_TRUE(waitUntil(
      [&] {
        pids = readPids(pidsPath);
        return pids.size() == 4;
      },
      kJobsTimeout, Duration(50)))
      << "the tasks did not record their pids in " << pidsPath << "\n"
      << cluster.describe();
  for (pid_t pid : pids) EXPECT_FALSE(processGone(pid)) << pid;

  auto canceled = cluster.ctl({"jobs", "cancel", id});
  ASSERT_EQ(canceled.exit.exitCode, 0) << canceled.output;

  auto clean = cluster.waitForJobClean(id, kJobsTimeout);
  ASSERT_OK(clean);
  EXPECT_EQ(clean.value().state, "CANCELED");
  // Every process of both groups is gone: SIGTERM did nothing, SIGKILL after the cancel timeout
  // ended them all, the child as well as the shell.
  const auto alive = waitForProcessesGone(pids, kJobsTimeout);
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

  auto status = cluster.endedStatus(id, "CANCELED");
  ASSERT_OK(status);
  auto graphStored = cluster.jobGraphStored(id);
  ASSERT_OK(graphStored);
  EXPECT_FALSE(graphStored.value());
  ASSERT_OK(cluster.waitForAllSlotsFree(kJobsTimeout));
}

TEST(JobsCancel, AJobCancelledWhileItWaitsForSlotsTakesNoSlotOfAWorkerThatJoinsLater) {
  auto started = JobCluster::start("jobs-cancel-waiting", {.workers = 1, .slotsPerWorker = 1});
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  // "busy" holds the only slot until the file `go` appears (bounded); "waiting" needs a slot too.
  const std::string dir = cluster.taskDir();
  auto busy = cluster.submit(
      "name: busy\nvertices:\n  - name: busy\n    command:\n      argv:\n        - /bin/sh\n"
      "        - -c\n        - |\n"
      "          n=0\n"
      "          while [ ! -e \"$DIR/go\" ] && [ $n -lt 1200 ]; do sleep 0.1; n=$((n+1)); done\n"
      "      env:\n        DIR: " +
      dir + "\n");
  ASSERT_OK(busy);
  ASSERT_OK(cluster.waitForJobEvent(
      [&](const JobEvent& e) {
        return e.kind == JobKind::kAttemptState && e.job == busy.value() && e.state == "RUNNING";
      },
      kJobsTimeout));
  auto waiting = cluster.submit(
      "name: waiting\nvertices:\n  - name: waiting\n    command:\n      argv: [/bin/true]\n");
  ASSERT_OK(waiting);
  ASSERT_OK(cluster.waitForStatus(
      waiting.value(),
      [](const nlohmann::json& s) { return !textField(s, "waiting_reason").empty(); },
      kJobsTimeout));

  auto canceled = cluster.ctl({"jobs", "cancel", waiting.value()});
  ASSERT_EQ(canceled.exit.exitCode, 0) << canceled.output;
  auto clean = cluster.waitForJobClean(waiting.value(), kJobsTimeout);
  ASSERT_OK(clean);
  EXPECT_EQ(clean.value().state, "CANCELED");

  // A worker joins after the cancel: its slot stays free (the cancelled job's requirement was
  // withdrawn), while "busy" keeps its own.
  auto joined = cluster.addWorker();
  ASSERT_OK(joined);
  const std::string joinedId = cluster.workers().resourceId(joined.value());
  auto table = cluster.regentctl().waitForTable(
      [&](const SlotTable& t) { return t.size() == 2 && countState(t, "ALLOCATED") == 1; },
      kJobsTimeout);
  ASSERT_OK(table);
  for (const SlotRow& row : table.value()) {
    if (row.resourceId == joinedId) {
      EXPECT_EQ(row.state, "FREE") << describeTable(table.value());
    }
    EXPECT_NE(row.jobId, waiting.value()) << describeTable(table.value());
  }
  EXPECT_TRUE(cluster.jobEventsOf(waiting.value(), JobKind::kAttemptDeployed).empty());

  std::ofstream(dir + "/go") << "";
  auto busyClean = cluster.waitForJobClean(busy.value(), kJobsTimeout);
  ASSERT_OK(busyClean);
  EXPECT_EQ(busyClean.value().state, "FINISHED");
  ASSERT_OK(cluster.waitForAllSlotsFree(kJobsTimeout));
  EXPECT_TRUE(cluster.jobEventsOf(waiting.value(), JobKind::kAttemptDeployed).empty());
}

TEST(JobsCancel, AJobCancelledWhileARestartDelayRunsIsNotRestarted) {
  auto started = JobCluster::start("jobs-cancel-restarting", {.workers = 1});
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  // The subtask fails at once; its restart waits for a delay far longer than the test.
  auto job = cluster.submit(
      "name: failing\nvertices:\n  - name: failing\n    command:\n      argv: [/bin/false]\n"
      "restart_strategy:\n  type: fixed-delay\n  attempts: 5\n  delay: 1h\n");
  ASSERT_OK(job);
  const std::string id = job.value();
  auto restarting = cluster.waitForStatus(
      id, [](const nlohmann::json& s) { return textField(s, "state") == "RESTARTING"; },
      kJobsTimeout);
  ASSERT_OK(restarting);
  // jobs status says why nothing runs: the failure and the restart delay.
  ASSERT_TRUE(restarting.value()["failure"].is_object()) << restarting.value().dump();
  EXPECT_FALSE(textField(restarting.value()["failure"], "message").empty())
      << restarting.value().dump();
  EXPECT_FALSE(textField(restarting.value(), "waiting_reason").empty())
      << restarting.value().dump();
  const nlohmann::json* subtask = subtaskStatus(restarting.value(), "failing", 0);
  ASSERT_NE(subtask, nullptr) << restarting.value().dump();
  EXPECT_FALSE(textField(*subtask, "last_failure").empty()) << subtask->dump();

  auto canceled = cluster.ctl({"jobs", "cancel", id});
  ASSERT_EQ(canceled.exit.exitCode, 0) << canceled.output;
  auto clean = cluster.waitForJobClean(id, kJobsTimeout);
  ASSERT_OK(clean);
  EXPECT_EQ(clean.value().state, "CANCELED");
  EXPECT_EQ(cluster.jobEventsOf(id, JobKind::kAttemptDeployed).size(), 1u) << cluster.describe();
  ASSERT_OK(cluster.waitForAllSlotsFree(kJobsTimeout));
  auto status = cluster.status(id);
  ASSERT_OK(status);
  EXPECT_EQ(textField(status.value(), "state"), "CANCELED") << status.value().dump();
  EXPECT_EQ(status.value().value("restarts", 0), 1) << status.value().dump();
}

}  // namespace
}  // namespace regent::testing

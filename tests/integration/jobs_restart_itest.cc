// Failed subtasks and restart strategies on real processes: a subtask that exits 1 twice and then
// 0 is restarted by a fixed-delay strategy and the job finishes; with one restart allowed the job
// fails and its other attempts are cancelled; commands that cannot start (no such binary, a file
// that is not executable, a working directory that does not exist) fail their attempts with a
// message naming the problem, the strategy applies, and the worker goes on serving.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tests/fixtures/wait_test_util.h"
#include "tests/integration/job_cluster_test_util.h"

namespace regent::testing {
namespace {

using JobKind = JobEvent::Kind;
using TaskKind = TaskEvent::Kind;

// A job with vertex "flaky": it counts its runs in $DIR/count and exits 1 on the first two, 0
// from the third on; with `sleepers` > 0 also vertex "sleeper", whose subtasks record their pid
// in $DIR/sleepers and run for ten minutes, and each run of "flaky" first waits (bounded) until
// every sleeper runs, so that the job fails while they do.
std::string flakyJob(const std::string& dir, uint32_t restartAttempts, int sleepers) {
  std::string yaml =
      "name: flaky\nvertices:\n  - name: flaky\n    command:\n      argv:\n"
      "        - /bin/sh\n        - -c\n        - |\n"
      "          w=0\n"
      "          while [ \"$(cat \"$DIR/sleepers\" 2>/dev/null | wc -l)\" -lt $SLEEPERS ] &&\n"
      "                [ $w -lt 600 ]; do sleep 0.1; w=$((w+1)); done\n"
      "          n=$(cat \"$DIR/count\" 2>/dev/null || echo 0)\n"
      "          n=$((n+1))\n"
      "          echo $n > \"$DIR/count\"\n"
      "          [ $n -ge 3 ]\n"
      "      env:\n        DIR: " +
      dir + "\n        SLEEPERS: \"" + std::to_string(sleepers) + "\"\n";
  if (sleepers > 0) {
    yaml += "  - name: sleeper\n    parallelism: " + std::to_string(sleepers) +
            "\n    command:\n      argv: [/bin/sh, -c, 'echo $$ >> \"$DIR/sleepers\"; exec sleep "
            "600']\n"
            "      env:\n        DIR: " +
            dir + "\n";
  }
  yaml += "restart_strategy:\n  type: fixed-delay\n  attempts: " + std::to_string(restartAttempts) +
          "\n  delay: 200ms\n";
  return yaml;
}

// The attempt states the leader logged for `vertex` of `job`, in order.
std::vector<JobEvent> attemptStates(JobCluster& cluster, const std::string& job,
                                    const std::string& vertex) {
  std::vector<JobEvent> states;
  for (JobEvent& event : cluster.jobEventsOf(job, JobKind::kAttemptState)) {
    if (event.vertex == vertex) states.push_back(std::move(event));
  }
  return states;
}

TEST(JobsRestart, ASubtaskFailingTwiceIsRestartedByFixedDelayAndTheJobFinishes) {
  auto started = JobCluster::start("jobs-restart", {.workers = 1});
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  auto job = cluster.submit(flakyJob(cluster.taskDir(), 2, 0));
  ASSERT_OK(job);
  const std::string id = job.value();

  ASSERT_OK(cluster.waitForJobEnd(id, "FINISHED", 2, kJobsTimeout));

  // Three attempts of subtask 0, numbered 0, 1, 2, with fresh ids: FAILED (exit 1), FAILED,
  // FINISHED.
  const auto deployed = cluster.jobEventsOf(id, JobKind::kAttemptDeployed);
  ASSERT_EQ(deployed.size(), 3u) << cluster.describe();
  std::set<std::string> ids;
  for (uint32_t n = 0; n < 3; ++n) {
    EXPECT_EQ(deployed[n].attemptNumber, n) << deployed[n].describe();
    ids.insert(deployed[n].attempt);
  }
  EXPECT_EQ(ids.size(), 3u);
  std::vector<std::string> terminal;
  for (const JobEvent& event : attemptStates(cluster, id, "flaky")) {
    if (event.state == "RUNNING") continue;
    terminal.push_back(event.state);
    if (event.state == "FAILED") {
      EXPECT_EQ(event.exitCode, 1) << event.describe();
      EXPECT_TRUE(containsText(event.message, "1")) << event.describe();
    }
  }
  EXPECT_EQ(terminal, (std::vector<std::string>{"FAILED", "FAILED", "FINISHED"}));
  // The job went through RESTARTING while the delays ran.
  bool restarting = false;
  for (const JobEvent& event : cluster.jobEventsOf(id, JobKind::kJobState)) {
    restarting = restarting || event.state == "RESTARTING";
  }
  EXPECT_TRUE(restarting) << cluster.describe();

  auto status = cluster.endedStatus(id, "FINISHED");
  ASSERT_OK(status);
  EXPECT_EQ(status.value().value("restarts", 0), 2) << status.value().dump();
  ASSERT_OK(cluster.waitForAllSlotsFree(kJobsTimeout));

  // Three attempts started, two failed, two were restarts.
  auto metrics = cluster.masterMetrics();
  ASSERT_OK(metrics);
  EXPECT_EQ(metricValue(metrics.value(), "regent_attempts_started_total", ""), 3)
      << metrics.value();
  EXPECT_EQ(metricValue(metrics.value(), "regent_attempts_failed_total", ""), 2) << metrics.value();
  EXPECT_EQ(metricValue(metrics.value(), "regent_attempts_restarted_total", ""), 2)
      << metrics.value();
}

TEST(JobsRestart, WithOneRestartAllowedTheJobFailsAndItsOtherAttemptsAreCancelled) {
  auto started = JobCluster::start("jobs-restart-fail", {.workers = 2});
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  auto job = cluster.submit(flakyJob(cluster.taskDir(), 1, 2));
  ASSERT_OK(job);
  const std::string id = job.value();

  ASSERT_OK(cluster.waitForJobEnd(id, "FAILED", 1, kJobsTimeout));

  // Two attempts of "flaky" failed; nothing restarted it a third time.
  std::vector<std::string> flaky;
  for (const JobEvent& event : attemptStates(cluster, id, "flaky")) {
    if (event.state != "RUNNING") flaky.push_back(event.state);
  }
  EXPECT_EQ(flaky, (std::vector<std::string>{"FAILED", "FAILED"}));
  std::ifstream count(cluster.taskDir() + "/count");
  int runs = 0;
  count >> runs;
  EXPECT_EQ(runs, 2);

  // Both sleepers ran and were cancelled: CANCELED on the master and on their workers, and
  // their processes are gone.
  std::vector<std::string> sleepers;
  for (const JobEvent& event : attemptStates(cluster, id, "sleeper")) {
    if (event.state != "RUNNING") sleepers.push_back(event.state);
  }
  EXPECT_EQ(sleepers, (std::vector<std::string>{"CANCELED", "CANCELED"})) << cluster.describe();
  size_t canceledTasks = 0;
  for (size_t w = 0; w < cluster.workers().size(); ++w) {
    for (const TaskEvent& event : cluster.taskEvents(w)) {
      if (event.kind == TaskKind::kEnded && event.job == id && event.state == "CANCELED") {
        ++canceledTasks;
      }
    }
  }
  EXPECT_EQ(canceledTasks, 2u) << cluster.describe();
  const auto pids = readPids(cluster.taskDir() + "/sleepers");
  EXPECT_EQ(pids.size(), 2u);
  EXPECT_TRUE(waitForProcessesGone(pids, kJobsTimeout).empty());

  // The result names the root cause: the flaky subtask's exit code.
  auto status = cluster.endedStatus(id, "FAILED");
  ASSERT_OK(status);
  EXPECT_EQ(status.value().value("restarts", 0), 1) << status.value().dump();
  ASSERT_TRUE(status.value()["failure"].is_object()) << status.value().dump();
  EXPECT_EQ(textField(status.value()["failure"], "vertex"), "flaky") << status.value().dump();
  EXPECT_EQ(status.value()["failure"].value("exit_code", 0), 1) << status.value().dump();
  auto graphStored = cluster.jobGraphStored(id);
  ASSERT_OK(graphStored);
  EXPECT_FALSE(graphStored.value());
  ASSERT_OK(cluster.waitForAllSlotsFree(kJobsTimeout));
}

TEST(JobsRestart, ACommandThatCannotStartFailsNamingTheProblemAndTheWorkerKeepsServing) {
  auto started = JobCluster::start("jobs-bad-command", {.workers = 1, .slotsPerWorker = 3});
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  const std::string notExecutable = cluster.taskDir() + "/not-executable";
  std::ofstream(notExecutable) << "#!/bin/sh\nexit 0\n";
  ASSERT_EQ(::chmod(notExecutable.c_str(), 0644), 0);
  const std::string missingBinary = cluster.taskDir() + "/no-such-binary";
  const std::string missingDir = cluster.taskDir() + "/no-such-dir";

  struct Case {
    std::string name;
    std::string command;  // The command map's body.
    std::string named;    // What the failure message must name.
  };
  const std::vector<Case> cases = {
      {"missing-binary", "      argv: [" + missingBinary + "]\n", missingBinary},
      {"not-executable", "      argv: [" + notExecutable + "]\n", notExecutable},
      {"missing-dir", "      argv: [/bin/true]\n      working_dir: " + missingDir + "\n",
       missingDir},
  };
  std::vector<std::string> ids;
  for (const Case& c : cases) {
    auto job = cluster.submit("name: " + c.name + "\nvertices:\n  - name: work\n    command:\n" +
                              c.command +
                              "restart_strategy:\n  type: fixed-delay\n  attempts: 1\n"
                              "  delay: 100ms\n");
    ASSERT_OK(job);
    ids.push_back(job.value());
  }

  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].name);
    const std::string& id = ids[i];
    // The strategy applied: a second attempt after the first failed, then the job failed.
    ASSERT_OK(cluster.waitForJobEnd(id, "FAILED", 1, kJobsTimeout));
    const auto deployed = cluster.jobEventsOf(id, JobKind::kAttemptDeployed);
    ASSERT_EQ(deployed.size(), 2u) << cluster.describe();
    EXPECT_EQ(deployed[1].attemptNumber, 1u);
    size_t failed = 0;
    for (const JobEvent& event : attemptStates(cluster, id, "work")) {
      if (event.state != "FAILED") continue;
      ++failed;
      EXPECT_TRUE(containsText(event.message, cases[i].named)) << event.describe();
    }
    EXPECT_EQ(failed, 2u) << cluster.describe();
    // The worker's line says it too.
    auto taskEnded = cluster.waitForTaskEvent(
        [&](const TaskEvent& e) { return e.kind == TaskKind::kEnded && e.job == id; },
        kJobsTimeout);
    ASSERT_OK(taskEnded);
    EXPECT_EQ(taskEnded.value().state, "FAILED");
    EXPECT_TRUE(containsText(taskEnded.value().message, cases[i].named))
        << taskEnded.value().describe();
    // And so does the job's result.
    auto status = cluster.status(id);
    ASSERT_OK(status);
    EXPECT_EQ(textField(status.value(), "state"), "FAILED") << status.value().dump();
    ASSERT_TRUE(status.value()["failure"].is_object()) << status.value().dump();
    EXPECT_TRUE(containsText(textField(status.value()["failure"], "message"), cases[i].named))
        << status.value().dump();
  }

  // The worker keeps serving: a job after those runs to the end.
  auto good = cluster.submit(
      "name: good\nvertices:\n  - name: work\n    parallelism: 3\n    command:\n"
      "      argv: [/bin/true]\n");
  ASSERT_OK(good);
  auto clean = cluster.waitForJobClean(good.value(), kJobsTimeout);
  ASSERT_OK(clean);
  EXPECT_EQ(clean.value().state, "FINISHED");
  EXPECT_TRUE(cluster.workers().process(0).running());
  ASSERT_OK(cluster.waitForAllSlotsFree(kJobsTimeout));
}

}  // namespace
}  // namespace regent::testing

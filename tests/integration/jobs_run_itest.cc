// Jobs run end to end on real processes: a three-vertex DAG submitted with regentctl runs its
// subtasks on real workers in dependency order, finishes, and ends with its result stored clean
// and its JobGraph removed from ZooKeeper in one transaction, its slots free again; a task runs
// as the task user with its environment, in its working directory or its attempt's own; a job
// over jobmaster.max-subtasks is refused; `jobs logs` prints an attempt's output and `--follow`
// streams it while the attempt still runs.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fixtures/wait_test_util.h"
#include "tests/integration/job_cluster_test_util.h"

namespace regent::testing {
namespace {

using JobKind = JobEvent::Kind;
using TaskKind = TaskEvent::Kind;

// One line a DAG task appended to the shared log: "<vertex> start|end <unix ns> <pid>".
struct LogLine {
  std::string vertex;
  std::string what;
  std::string line;
};

std::vector<LogLine> readLog(const std::string& path) {
  std::vector<LogLine> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    LogLine parsed;
    fields >> parsed.vertex >> parsed.what;
    parsed.line = line;
    lines.push_back(std::move(parsed));
  }
  return lines;
}

// A vertex whose subtasks append their start and end (with the time and their pid) to $LOG.
// The order of the lines in the file is the order the tasks wrote them (O_APPEND), which is
// what the test checks; the times are for a person reading a failure, not for assertions.
std::string dagVertex(const std::string& name, int parallelism, const std::string& upstream,
                      const std::string& log) {
  std::string vertex = "  - name: " + name + "\n    parallelism: " + std::to_string(parallelism) +
                       "\n    command:\n      argv:\n        - /bin/sh\n        - -c\n        - |\n"
                       "          echo \"" +
                       name +
                       " start $(date +%s%N) $$\" >> \"$LOG\"\n"
                       "          sleep 0.3\n"
                       "          echo \"" +
                       name +
                       " end $(date +%s%N) $$\" >> \"$LOG\"\n"
                       "      env:\n        LOG: " +
                       log + "\n";
  if (!upstream.empty()) vertex += "    upstream: [" + upstream + "]\n";
  return vertex;
}

TEST(JobsRun, AThreeVertexDagRunsInDependencyOrderFinishesAndIsCleanedUp) {
  auto started = JobCluster::start("jobs-dag");
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  const std::string log = cluster.taskDir() + "/log";
  const std::map<std::string, int> parallelism = {{"a", 2}, {"b", 3}, {"c", 4}};

  auto job = cluster.submit("name: dag\nvertices:\n" + dagVertex("a", 2, "", log) +
                            dagVertex("b", 3, "a", log) + dagVertex("c", 4, "a, b", log));
  ASSERT_OK(job);
  const std::string id = job.value();

  ASSERT_OK(cluster.waitForJobEnd(id, "FINISHED", 0, kJobsTimeout));

  // Every subtask ran once, and every upstream subtask ended before any downstream one started.
  const auto lines = readLog(log);
  std::string shown;
  for (const LogLine& line : lines) shown += "  " + line.line + "\n";
  std::map<std::string, int> starts, ends;
  std::map<std::string, size_t> firstStart, lastEnd;
  for (size_t i = 0; i < lines.size(); ++i) {
    const LogLine& line = lines[i];
    if (line.what == "start") {
      if (starts[line.vertex]++ == 0) firstStart[line.vertex] = i;
    } else if (line.what == "end") {
      ++ends[line.vertex];
      lastEnd[line.vertex] = i;
    } else {
      ADD_FAILURE() << "unexpected line in " << log << ": " << line.line;
    }
  }
  for (const auto& [vertex, count] : parallelism) {
    EXPECT_EQ(starts[vertex], count) << vertex << "\n" << shown;
    EXPECT_EQ(ends[vertex], count) << vertex << "\n" << shown;
  }
  const std::vector<std::pair<std::string, std::string>> edges = {
      {"a", "b"}, {"a", "c"}, {"b", "c"}};
  for (const auto& [up, down] : edges) {
    ASSERT_TRUE(lastEnd.count(up) && firstStart.count(down)) << shown;
    EXPECT_LT(lastEnd[up], firstStart[down])
        << "a subtask of " << down << " started before every subtask of " << up << " ended\n"
        << shown;
  }

  // The master saw the same: one attempt per subtask, each FINISHED with exit code 0.
  const auto deployed = cluster.jobEventsOf(id, JobKind::kAttemptDeployed);
  EXPECT_EQ(deployed.size(), 9u) << cluster.describe();
  for (const JobEvent& event : deployed) {
    EXPECT_EQ(event.attemptNumber, 0u) << event.describe();
    EXPECT_TRUE(cluster.workerSlotOf(event.resourceId)) << event.describe();
  }
  size_t finished = 0;
  for (const JobEvent& event : cluster.jobEventsOf(id, JobKind::kAttemptState)) {
    if (event.state == "FINISHED") {
      ++finished;
      EXPECT_EQ(event.exitCode, 0) << event.describe();
    }
    EXPECT_NE(event.state, "FAILED") << event.describe();
  }
  EXPECT_EQ(finished, 9u) << cluster.describe();
  size_t tasksEnded = 0;
  for (size_t w = 0; w < cluster.workers().size(); ++w) {
    for (const TaskEvent& event : cluster.taskEvents(w)) {
      if (event.kind != TaskKind::kEnded || event.job != id) continue;
      ++tasksEnded;
      EXPECT_EQ(event.state, "FINISHED") << event.describe();
    }
  }
  EXPECT_EQ(tasksEnded, 9u) << cluster.describe();

  // The result is clean, the JobGraph gone, the result kept, and the slots free again.
  auto status = cluster.endedStatus(id, "FINISHED");
  ASSERT_OK(status);
  EXPECT_EQ(status.value()["restarts"], 0) << status.value().dump();
  auto jobs = cluster.listJobs();
  ASSERT_OK(jobs);
  EXPECT_EQ(jobs.value(), (std::map<std::string, std::string>{{id, "FINISHED"}}));
  auto graphStored = cluster.jobGraphStored(id);
  ASSERT_OK(graphStored);
  EXPECT_FALSE(graphStored.value()) << "the JobGraph of " << id << " is still in ZooKeeper";
  auto resultStored = cluster.jobResultStored(id);
  ASSERT_OK(resultStored);
  EXPECT_TRUE(resultStored.value());
  ASSERT_OK(cluster.waitForAllSlotsFree(kJobsTimeout));

  // The metrics count the same: nine attempts started and none failed, one job finished and its
  // submit-to-running latency observed once; nine tasks started and ended on the workers.
  auto master = cluster.masterMetrics();
  ASSERT_OK(master);
  const std::string& metrics = master.value();
  EXPECT_EQ(metricValue(metrics, "regent_attempts_started_total", ""), 9) << metrics;
  EXPECT_EQ(metricValue(metrics, "regent_attempts_failed_total", ""), 0) << metrics;
  EXPECT_EQ(metricValue(metrics, "regent_attempts_restarted_total", ""), 0) << metrics;
  EXPECT_EQ(metricValue(metrics, "regent_jobs", "state=\"finished\""), 1) << metrics;
  EXPECT_EQ(metricValue(metrics, "regent_job_submit_to_running_seconds_count", ""), 1) << metrics;
  // Every event reached the events file the cluster reads them from.
  EXPECT_EQ(metricValue(metrics, "regent_events_file_write_failures_total", ""), 0) << metrics;
  double startedTotal = 0, endedTotal = 0;
  for (size_t w = 0; w < cluster.workers().size(); ++w) {
    auto running = cluster.tasksRunning(w);
    ASSERT_OK(running);
    EXPECT_EQ(running.value(), 0) << "worker " << w;
    auto worker = cluster.workerMetrics(w);
    ASSERT_OK(worker);
    startedTotal += metricSum(worker.value(), "regent_worker_tasks_started_total").value_or(0);
    endedTotal += metricSum(worker.value(), "regent_worker_tasks_ended_total").value_or(0);
    EXPECT_EQ(metricValue(worker.value(), "regent_events_file_write_failures_total", ""), 0)
        << worker.value();
  }
  EXPECT_EQ(startedTotal, 9);
  EXPECT_EQ(endedTotal, 9);
}

TEST(JobsRun, ATaskRunsAsTheTaskUserWithItsEnvironmentAndWorkingDirectory) {
  auto started = JobCluster::start("jobs-task-env", {.workers = 1});
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  // "here" runs in the test's directory, "default" in its attempt's own directory; both record
  // where they ran, an environment variable and who they ran as.
  const std::string dir = cluster.taskDir();
  auto vertex = [&](const std::string& name, const std::string& workingDir) {
    return "  - name: " + name +
           "\n    command:\n      argv: [/bin/sh, -c, 'echo \"$(pwd) $GREETING $(id -un)\" > "
           "\"$OUT\"']\n      env:\n        GREETING: hello-" +
           name + "\n        OUT: " + dir + "/" + name + "\n" +
           (workingDir.empty() ? "" : "      working_dir: " + workingDir + "\n");
  };
  auto job = cluster.submit("name: env\nvertices:\n" + vertex("here", dir) + vertex("default", ""));
  ASSERT_OK(job);
  auto clean = cluster.waitForJobClean(job.value(), kJobsTimeout);
  ASSERT_OK(clean);
  EXPECT_EQ(clean.value().state, "FINISHED");

  auto read = [&](const std::string& name) {
    std::ifstream in(dir + "/" + name);
    std::string line;
    std::getline(in, line);
    return line;
  };
  // The tests run as root, so the tasks run as worker.task-user, nobody.
  EXPECT_EQ(read("here"), dir + " hello-here nobody");
  std::string attempt;
  for (const JobEvent& event : cluster.jobEventsOf(job.value(), JobKind::kAttemptDeployed)) {
    if (event.vertex == "default") attempt = event.attempt;
  }
  ASSERT_FALSE(attempt.empty()) << cluster.describe();
  EXPECT_EQ(read("default"),
            cluster.workers().dataDir(0) + "/attempts/" + attempt + " hello-default nobody");
}

TEST(JobsRun, AJobOverTheSubtaskLimitIsRefusedNamingTheTotalAndTheOption) {
  auto started =
      JobCluster::start("jobs-limit", {.workers = 0, .masterSet = {"jobmaster.max-subtasks=4"}});
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  const std::string path =
      cluster.writeFile("wide.yaml",
                        "name: wide\nvertices:\n  - name: a\n    parallelism: 3\n    command:\n"
                        "      argv: [/bin/true]\n  - name: b\n    parallelism: 2\n    command:\n"
                        "      argv: [/bin/true]\n");
  CtlResult refused = cluster.ctl({"jobs", "submit", path});
  EXPECT_EQ(refused.exit.exitCode, 4) << refused.output;
  EXPECT_TRUE(containsText(refused.output, "vertices")) << refused.output;
  EXPECT_TRUE(containsText(refused.output, "5 subtasks")) << refused.output;
  EXPECT_TRUE(containsText(refused.output, "jobmaster.max-subtasks")) << refused.output;
  auto jobs = cluster.listJobs();
  ASSERT_OK(jobs);
  EXPECT_TRUE(jobs.value().empty());
}

TEST(JobsRun, LogsPrintsAnAttemptsOutputAndFollowStreamsItWhileItRuns) {
  auto started = JobCluster::start("jobs-logs", {.workers = 1});
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  // The task prints five lines, then waits until the test saw them through `jobs logs --follow`
  // (the file `seen` appears) before it prints five more and ends. Its last line says whether
  // the file appeared: a follower that printed nothing before the end would leave the task to
  // its own bound, and "waited: timeout" in the output.
  const std::string seen = cluster.taskDir() + "/seen";
  auto job = cluster.submit(
      "name: talk\nvertices:\n  - name: talk\n    command:\n      argv:\n        - /bin/sh\n"
      "        - -c\n        - |\n"
      "          for i in 1 2 3 4 5; do echo \"line-$i\"; done\n"
      "          echo \"to stderr\" >&2\n"
      "          n=0\n"
      "          while [ ! -e \"$SEEN\" ] && [ $n -lt 1200 ]; do sleep 0.1; n=$((n+1)); done\n"
      "          if [ -e \"$SEEN\" ]; then waited=seen; else waited=timeout; fi\n"
      "          for i in 6 7 8 9 10; do echo \"line-$i\"; sleep 0.05; done\n"
      "          echo \"waited: $waited\"\n"
      "      env:\n        SEEN: " +
      seen + "\n");
  ASSERT_OK(job);
  const std::string id = job.value();
  ASSERT_OK(cluster.waitForJobEvent(
      [&](const JobEvent& e) {
        return e.kind == JobKind::kAttemptState && e.job == id && e.state == "RUNNING";
      },
      kJobsTimeout));

  auto follower =
      startRegentctl(cluster.regentctl().dir(),
                     {"--zk", sharedServer().connectString(), "--cluster-id", cluster.clusterId(),
                      "--timeout", "30s", "jobs", "logs", id, "--vertex", "talk", "--follow"});
  ASSERT_OK(follower);
  ProcessHarness& follow = *follower.value();
  const bool early = waitUntil([&] { return containsText(follow.output(), "line-5\n"); },
                               kJobsTimeout, Duration(50));
  if (!early) std::ofstream(seen) << "";  // Let the task end, so nothing is left waiting.
  ASSERT_TRUE(early) << "jobs logs --follow printed no line of a running attempt:\n"
                     << follow.output() << cluster.describe();
  EXPECT_FALSE(containsText(follow.output(), "line-6")) << follow.output();

  // Meanwhile (the task waits for `seen`): jobs status names the running attempt and the worker
  // serving its output; the output so far at once, stderr on its own, and a vertex the job does
  // not have refused, naming the one it has.
  auto status = cluster.status(id);
  ASSERT_OK(status);
  const nlohmann::json* subtask = subtaskStatus(status.value(), "talk", 0);
  ASSERT_NE(subtask, nullptr) << status.value().dump();
  EXPECT_EQ(textField(*subtask, "http_address"), cluster.workers().httpAddress(0))
      << subtask->dump();
  EXPECT_EQ(textField(*subtask, "resource_id"), cluster.workers().resourceId(0)) << subtask->dump();
  ASSERT_TRUE(subtask->contains("attempt") && (*subtask)["attempt"].is_object()) << subtask->dump();
  EXPECT_EQ(textField((*subtask)["attempt"], "state"), "RUNNING") << subtask->dump();
  EXPECT_NE((*subtask)["attempt"].value("pid", 0), 0) << subtask->dump();
  std::string firstHalf;
  for (int i = 1; i <= 5; ++i) firstHalf += "line-" + std::to_string(i) + "\n";
  CtlResult logs = cluster.ctl({"jobs", "logs", id, "--vertex", "talk"});
  EXPECT_EQ(logs.exit.exitCode, 0) << logs.output;
  EXPECT_EQ(logs.output, firstHalf);
  CtlResult errors = cluster.ctl({"jobs", "logs", id, "--vertex", "talk", "--stderr"});
  EXPECT_EQ(errors.exit.exitCode, 0) << errors.output;
  EXPECT_EQ(errors.output, "to stderr\n");
  CtlResult unknown = cluster.ctl({"jobs", "logs", id, "--vertex", "nope"});
  EXPECT_NE(unknown.exit.exitCode, 0) << unknown.output;
  EXPECT_TRUE(containsText(unknown.output, "talk")) << unknown.output;

  std::ofstream(seen) << "";
  auto exit = follow.waitForExit(kJobsTimeout);
  ASSERT_TRUE(exit) << "jobs logs --follow did not end after the attempt ended:\n"
                    << follow.output();
  EXPECT_EQ(exit->exitCode, 0) << exit->describe() << "\n" << follow.output();
  std::string expected = firstHalf;
  for (int i = 6; i <= 10; ++i) expected += "line-" + std::to_string(i) + "\n";
  expected += "waited: seen\n";
  EXPECT_EQ(follow.output(), expected);

  auto clean = cluster.waitForJobClean(id, kJobsTimeout);
  ASSERT_OK(clean);
  EXPECT_EQ(clean.value().state, "FINISHED");
}

TEST(JobsRun, LogsOfAFinishedJobStayReadable) {
  auto started = JobCluster::start("jobs-logs-ended", {.workers = 1});
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  auto job = cluster.submit(
      "name: hello\nvertices:\n  - name: hello\n    parallelism: 2\n    command:\n"
      "      argv: [/bin/sh, -c, 'echo hello; echo oops >&2']\n");
  ASSERT_OK(job);
  const std::string id = job.value();
  auto clean = cluster.waitForJobClean(id, kJobsTimeout);
  ASSERT_OK(clean);
  EXPECT_EQ(clean.value().state, "FINISHED");

  // What a person runs after the job is done (the demo does): the output of each subtask.
  for (const char* subtask : {"0", "1"}) {
    CtlResult logs = cluster.ctl({"jobs", "logs", id, "--vertex", "hello", "--subtask", subtask});
    EXPECT_EQ(logs.exit.exitCode, 0) << logs.output;
    EXPECT_EQ(logs.output, "hello\n");
  }
  CtlResult errors = cluster.ctl({"jobs", "logs", id, "--vertex", "hello", "--stderr"});
  EXPECT_EQ(errors.exit.exitCode, 0) << errors.output;
  EXPECT_EQ(errors.output, "oops\n");
}

}  // namespace
}  // namespace regent::testing

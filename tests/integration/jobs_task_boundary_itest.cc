// What a task gets from its worker, on real processes (docs/workers.md, "Tasks"): its job's env,
// the REGENT_TASK_* variables and a small allow-list, never the worker's configuration or
// secrets; regentctl runs inside a task; a command missing from the task's PATH fails saying so;
// a relative working_dir is below the attempt's directory; output over
// worker.attempt-output.max is cut, and the attempt's status and `jobs logs` say so.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/integration/job_cluster_test_util.h"

namespace regent::testing {
namespace {

using JobKind = JobEvent::Kind;
using TaskKind = TaskEvent::Kind;

std::string readWholeFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// "NAME=value" lines of `env` output; a value spanning lines keeps only its first.
std::map<std::string, std::string> parseEnv(const std::string& text) {
  std::map<std::string, std::string> env;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const size_t equals = line.find('=');
    if (equals != std::string::npos) env[line.substr(0, equals)] = line.substr(equals + 1);
  }
  return env;
}

// The FAILED attempt-state event of `job`, once it came.
Result<JobEvent> waitForFailedAttempt(JobCluster& cluster, const std::string& job) {
  return cluster.waitForJobEvent(
      [&](const JobEvent& e) {
        return e.kind == JobKind::kAttemptState && e.job == job && e.state == "FAILED";
      },
      kJobsTimeout);
}

TEST(TaskBoundary, ATaskGetsItsJobsEnvironmentAndTheTaskVariablesButNothingOfTheWorkers) {
  // The worker is configured partly through REGENT_* variables, one of them a ZooKeeper
  // credential, and holds a secret of its own in its environment.
  auto started = JobCluster::start(
      "task-env", {.workers = 1,
                   .workerEnv = {"REGENT_HA_ZOOKEEPER_AUTH=worker:zk-secret-1234",
                                 "REGENT_WORKER_TASK_CANCEL_TIMEOUT=500ms",
                                 "WORKER_SECRET_TOKEN=hunter2", "LANG=C.UTF-8"}});
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  const std::string dir = cluster.taskDir();
  // The task dumps its environment, then runs regentctl with it: a program a task runs must be
  // able to load regent's configuration (the task variables are not configuration).
  auto job = cluster.submit(
      "name: env-dump\nvertices:\n  - name: dump\n    command:\n      argv:\n"
      "        - /bin/sh\n        - -c\n        - |\n"
      "          env > \"$OUT/env\"\n"
      "          \"$CTL\" --zk \"$ZK\" --cluster-id \"$CLUSTER\" leader > \"$OUT/ctl\" 2>&1\n"
      "      env:\n        OUT: " +
      dir + "\n        CTL: " REGENT_BIN_DIR "/regentctl\n        ZK: " +
      sharedServer().connectString() + "\n        CLUSTER: " + cluster.clusterId() +
      "\n        ASAN_OPTIONS: detect_leaks=0\n");
  ASSERT_OK(job);
  auto clean = cluster.waitForJobClean(job.value(), kJobsTimeout);
  ASSERT_OK(clean);
  const std::string dumped = readWholeFile(dir + "/env");
  const std::string ctl = readWholeFile(dir + "/ctl");
  EXPECT_EQ(clean.value().state, "FINISHED") << "regentctl inside the task:\n"
                                              << ctl << cluster.describe();

  const auto env = parseEnv(dumped);
  for (const auto& [name, value] : env) {
    EXPECT_TRUE(!name.starts_with("REGENT_") || name.starts_with("REGENT_TASK_"))
        << "the worker's configuration reached the task: " << name << "=" << value;
  }
  EXPECT_EQ(dumped.find("zk-secret-1234"), std::string::npos) << dumped;
  EXPECT_EQ(env.count("WORKER_SECRET_TOKEN"), 0u) << dumped;
  // The allow-list: worker.task-path, the task user's (nobody's) identity, the worker's LANG.
  EXPECT_EQ(env.count("PATH") ? env.at("PATH") : "", "/usr/local/bin:/usr/bin:/bin") << dumped;
  EXPECT_EQ(env.count("HOME") ? env.at("HOME") : "", "/nonexistent") << dumped;
  EXPECT_EQ(env.count("USER") ? env.at("USER") : "", "nobody") << dumped;
  EXPECT_EQ(env.count("LANG") ? env.at("LANG") : "", "C.UTF-8") << dumped;
  // The job's env and the task variables.
  EXPECT_EQ(env.count("OUT") ? env.at("OUT") : "", dir) << dumped;
  EXPECT_EQ(env.count("REGENT_TASK_VERTEX") ? env.at("REGENT_TASK_VERTEX") : "", "dump")
      << dumped;
  EXPECT_EQ(env.count("REGENT_TASK_PARALLELISM") ? env.at("REGENT_TASK_PARALLELISM") : "", "1")
      << dumped;
  EXPECT_EQ(env.count("REGENT_TASK_JOB_ID") ? env.at("REGENT_TASK_JOB_ID") : "", job.value())
      << dumped;
  // Every name the task saw is one of these: nothing else of the worker's came along.
  for (const auto& [name, value] : env) {
    const bool expected = name.starts_with("REGENT_TASK_") || name == "PATH" || name == "HOME" ||
                          name == "USER" || name == "LOGNAME" || name == "LANG" ||
                          name == "OUT" || name == "CTL" || name == "ZK" || name == "CLUSTER" ||
                          name == "ASAN_OPTIONS" || name == "PWD" || name == "SHLVL" ||
                          name == "_";  // The last three are the shell's own.
    EXPECT_TRUE(expected) << "unexpected variable in the task's environment: " << name << "="
                          << value;
  }
  EXPECT_NE(ctl.find("SERVING"), std::string::npos) << ctl;
}

TEST(TaskBoundary, ACommandNotFoundOnTheTasksPathFailsSayingSoAndNamingThePath) {
  auto started = JobCluster::start("task-path", {.workers = 1});
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  auto job = cluster.submit(
      "name: missing\nvertices:\n  - name: missing\n"
      "    command:\n      argv: [regent-no-such-command]\n");
  ASSERT_OK(job);
  auto failed = waitForFailedAttempt(cluster, job.value());
  ASSERT_OK(failed);
  EXPECT_EQ(failed.value().message,
            "regent-no-such-command: not found on PATH (/usr/local/bin:/usr/bin:/bin)")
      << failed.value().describe();
  for (const JobEvent& event : cluster.jobEventsOf(job.value(), JobKind::kAttemptState)) {
    EXPECT_NE(event.state, "RUNNING") << "a command that was not found ran: " << event.describe();
  }

  // A job that sets its own PATH is looked up there, and the message names that one.
  auto own = cluster.submit(
      "name: own-path\nvertices:\n  - name: own\n"
      "    command:\n      argv: [regent-no-such-command]\n"
      "      env:\n        PATH: /opt/regent-nothing:/usr/bin\n");
  ASSERT_OK(own);
  auto ownFailed = waitForFailedAttempt(cluster, own.value());
  ASSERT_OK(ownFailed);
  EXPECT_EQ(ownFailed.value().message,
            "regent-no-such-command: not found on PATH (/opt/regent-nothing:/usr/bin)")
      << ownFailed.value().describe();
}

TEST(TaskBoundary, ARelativeWorkingDirIsTakenFromTheAttemptsDirectory) {
  auto started = JobCluster::start("task-relative-dir", {.workers = 1});
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  const std::string out = cluster.taskDir() + "/pwd";
  auto job = cluster.submit(
      "name: relative\nvertices:\n  - name: here\n    command:\n"
      "      argv: [/bin/sh, -c, 'pwd > \"$OUT\"']\n      working_dir: .\n"
      "      env:\n        OUT: " +
      out + "\n  - name: below\n    command:\n      argv: [/bin/true]\n"
            "      working_dir: sub/dir\n    upstream: [here]\n");
  ASSERT_OK(job);
  auto failed = waitForFailedAttempt(cluster, job.value());
  ASSERT_OK(failed);
  auto clean = cluster.waitForJobClean(job.value(), kJobsTimeout);
  ASSERT_OK(clean);

  std::map<std::string, std::string> attempts;  // vertex -> attempt id
  for (const JobEvent& event : cluster.jobEventsOf(job.value(), JobKind::kAttemptDeployed)) {
    attempts[event.vertex] = event.attempt;
  }
  ASSERT_EQ(attempts.size(), 2u) << cluster.describe();
  const std::string attemptsDir = cluster.workers().dataDir(0) + "/attempts/";
  std::string pwd = readWholeFile(out);
  if (!pwd.empty() && pwd.back() == '\n') pwd.pop_back();
  EXPECT_EQ(pwd, attemptsDir + attempts["here"]);
  EXPECT_EQ(failed.value().vertex, "below") << failed.value().describe();
  EXPECT_EQ(failed.value().message, "working directory " + attemptsDir + attempts["below"] +
                                        "/sub/dir: No such file or directory (errno 2)")
      << failed.value().describe();
}

TEST(TaskBoundary, OutputOverTheCapIsCutAndTheStatusAndJobsLogsSaySo) {
  auto started = JobCluster::start(
      "task-output-cap", {.workers = 1, .workerSet = {"worker.attempt-output.max=4KiB"}});
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  // 10000 bytes on stdout, one line on stderr, then the task finishes.
  auto job = cluster.submit(
      "name: chatty\nvertices:\n  - name: chatty\n    command:\n"
      "      argv: [/bin/sh, -c, 'head -c 10000 /dev/zero | tr \"\\\\0\" x; echo fine >&2']\n");
  ASSERT_OK(job);
  const std::string problem = "stdout truncated at 4096 bytes (worker.attempt-output.max)";
  auto status = cluster.waitForStatus(
      job.value(),
      [&](const nlohmann::json& s) {
        const nlohmann::json* subtask = subtaskStatus(s, "chatty", 0);
        return subtask != nullptr && subtask->contains("attempt") &&
               (*subtask)["attempt"].is_object() &&
               textField((*subtask)["attempt"], "state") == "FINISHED";
      },
      kJobsTimeout);
  ASSERT_OK(status);
  const nlohmann::json& attempt = (*subtaskStatus(status.value(), "chatty", 0))["attempt"];
  EXPECT_EQ(textField(attempt, "output_problem"), problem) << attempt.dump();
  const std::string attemptId = textField(attempt, "attempt_id");
  auto ended = cluster.waitForTaskEvent(
      [&](const TaskEvent& e) { return e.kind == TaskKind::kEnded && e.job == job.value(); },
      kJobsTimeout);
  ASSERT_OK(ended);
  CtlResult text = cluster.ctl({"jobs", "status", job.value()});
  EXPECT_TRUE(containsText(text.output, "output: " + problem + "\n")) << text.output;

  CtlResult logs = cluster.ctl({"jobs", "logs", job.value(), "--vertex", "chatty"});
  EXPECT_EQ(logs.exit.exitCode, 0) << logs.output;
  const std::string note = "regentctl: the stdout of attempt " + attemptId +
                           " (subtask 0 of vertex chatty) is incomplete: truncated at 4096 bytes "
                           "(worker.attempt-output.max)\n";
  EXPECT_EQ(logs.output, std::string(4096, 'x') + note);
  CtlResult errors = cluster.ctl({"jobs", "logs", job.value(), "--vertex", "chatty", "--stderr"});
  EXPECT_EQ(errors.exit.exitCode, 0) << errors.output;
  EXPECT_EQ(errors.output, "fine\n") << "stderr was whole: no note";
}

}  // namespace
}  // namespace regent::testing

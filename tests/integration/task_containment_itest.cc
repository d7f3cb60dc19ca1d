// Task containment on real processes (docs/security.md, "Containment modes"): a task's processes
// that left its process group (a `setsid` one, and a double-forked daemon in a session of its
// own) are gone after a cancel, after the job ended, and after the worker was SIGKILLed, in the
// cgroup containment this host offers (hybrid: cgroup v2 for the kill, v1 for the limits) and in
// the subreaper one; a task over its slot's memory fails saying so; the worker shows which
// containment it uses. Each escapee sleeps a duration no other test uses.
#include <gtest/gtest.h>
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <regex>
#include <string>
#include <vector>

#include "tests/fixtures/wait_test_util.h"
#include "tests/integration/job_cluster_test_util.h"

namespace regent::testing {
namespace {

// A job of one subtask that starts two escapees, each recording its pid in `pidsPath` (its own
// session: `setsid`, and a daemon whose parent exits at once), waits until both recorded it, then
// runs `tail` (`exit 0`, or `exec sleep 1000` to keep running).
std::string escapingJob(const std::string& name, const std::string& pidsPath, int sleepA,
                        int sleepB, const std::string& tail) {
  return "name: " + name +
         "\nvertices:\n  - name: main\n    parallelism: 1\n    command:\n"
         "      argv:\n        - /bin/sh\n        - -c\n        - |\n"
         "          setsid sh -c 'echo $$ >> \"$PIDS\"; exec sleep " +
         std::to_string(sleepA) +
         "' &\n"
         "          (setsid sh -c 'echo $$ >> \"$PIDS\"; exec sleep " +
         std::to_string(sleepB) +
         "' &)\n"
         "          until [ \"$(wc -l < \"$PIDS\")\" -ge 2 ] 2>/dev/null; do sleep 0.05; done\n"
         "          " +
         tail +
         "\n"
         "      env:\n        PIDS: " +
         pidsPath + "\n";
}

// Waits until the job's two escapees recorded their pids.
std::vector<pid_t> waitForPids(JobCluster& cluster, const std::string& pidsPath) {
  std::vector<pid_t> pids;
  EXPECT_TRUE(waitUntil(
      [&] {
        pids = readPids(pidsPath);
        return pids.size() == 2;
      },
      kJobsTimeout, Duration(50)))
      << "the escapees did not record their pids in " << pidsPath << "\n"
      << cluster.describe();
  return pids;
}

// waitForPids, and checks that the escapees run and left the task's group: each leads a session
// of its own.
std::vector<pid_t> waitForEscapees(JobCluster& cluster, const std::string& pidsPath) {
  std::vector<pid_t> pids = waitForPids(cluster, pidsPath);
  for (pid_t pid : pids) {
    EXPECT_FALSE(processGone(pid)) << pid;
    EXPECT_EQ(::getsid(pid), pid) << "escapee " << pid << " does not lead a session of its own";
  }
  return pids;
}

void expectGone(const std::vector<pid_t>& pids, JobCluster& cluster) {
  const auto alive = waitForProcessesGone(pids, Duration(10000));
  EXPECT_TRUE(alive.empty()) << "escapees still running: " << ::testing::PrintToString(alive)
                             << "\n"
                             << cluster.describe();
}

// The attempt cgroups under the worker's subtree in the v2 hierarchy of this host. The subtree
// exists while the worker runs: a missing one fails the test (an empty list would prove nothing).
std::vector<std::string> attemptCgroups(const std::string& resourceId) {
  std::vector<std::string> cells;
  const std::string dir = "/sys/fs/cgroup/unified/regent-worker-" + resourceId;
  DIR* listing = ::opendir(dir.c_str());
  if (listing == nullptr) {
    ADD_FAILURE() << "cannot list the worker's cgroup subtree " << dir << ": "
                  << std::strerror(errno);
    return cells;
  }
  while (const dirent* entry = ::readdir(listing)) {
    const std::string name = entry->d_name;
    if (name.rfind("attempt-", 0) == 0) cells.push_back(name);
  }
  ::closedir(listing);
  return cells;
}

JobClusterOptions oneWorker(std::vector<std::string> workerSet = {}) {
  return {.masters = 1, .workers = 1, .slotsPerWorker = 2, .workerSet = std::move(workerSet)};
}

TEST(TaskContainment, CancelKillsWhatLeftTheTasksProcessGroup) {
  auto started = JobCluster::start("contain-cancel", oneWorker());
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  const std::string pidsPath = cluster.taskDir() + "/cancel-pids";
  auto job = cluster.submit(escapingJob("escape-cancel", pidsPath, 3111, 3112, "exec sleep 1000"));
  ASSERT_OK(job);
  const auto pids = waitForEscapees(cluster, pidsPath);

  auto canceled = cluster.ctl({"jobs", "cancel", job.value()});
  ASSERT_EQ(canceled.exit.exitCode, 0) << canceled.output;
  auto clean = cluster.waitForJobClean(job.value(), kJobsTimeout);
  ASSERT_OK(clean);
  EXPECT_EQ(clean.value().state, "CANCELED");
  expectGone(pids, cluster);
  EXPECT_TRUE(attemptCgroups(cluster.workers().resourceId(0)).empty());
}

TEST(TaskContainment, TheJobsEndKillsTheDaemonsItsTaskLeft) {
  auto started = JobCluster::start("contain-end", oneWorker());
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  const std::string pidsPath = cluster.taskDir() + "/end-pids";
  auto job = cluster.submit(escapingJob("escape-end", pidsPath, 3121, 3122, "exit 0"));
  ASSERT_OK(job);
  const auto pids = waitForPids(cluster, pidsPath);
  auto clean = cluster.waitForJobClean(job.value(), kJobsTimeout);
  ASSERT_OK(clean);
  EXPECT_EQ(clean.value().state, "FINISHED") << cluster.describe();
  ASSERT_EQ(pids.size(), 2u);
  expectGone(pids, cluster);
  EXPECT_TRUE(attemptCgroups(cluster.workers().resourceId(0)).empty());
}

TEST(TaskContainment, ASigkilledWorkerTakesWhatLeftItsTasksGroupsAlong) {
  auto started = JobCluster::start("contain-kill", oneWorker());
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  const std::string pidsPath = cluster.taskDir() + "/kill-pids";
  auto job = cluster.submit(escapingJob("escape-kill", pidsPath, 3131, 3132, "exec sleep 1000"));
  ASSERT_OK(job);
  const auto pids = waitForEscapees(cluster, pidsPath);
  const std::string resourceId = cluster.workers().resourceId(0);
  EXPECT_EQ(attemptCgroups(resourceId).size(), 1u);

  ASSERT_OK(cluster.workers().kill(0));
  expectGone(pids, cluster);
  // The attempt's cgroup, empty now, is removed by the next run of the worker.
  ASSERT_OK(cluster.workers().restart(0));
  ASSERT_OK(cluster.workers().waitForRegistered(0, 0, kJobsTimeout));
  EXPECT_TRUE(attemptCgroups(resourceId).empty());
}

TEST(TaskContainment, ATaskOverItsSlotsMemoryFailsSayingSo) {
  auto started = JobCluster::start("contain-memory",
                                   oneWorker({"worker.slot-memory=32MiB"}));
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  auto job = cluster.submit(
      "name: hungry\nvertices:\n  - name: hungry\n    parallelism: 1\n    command:\n"
      "      argv: [python3, -c, 'b = bytearray(300 * 1024 * 1024); print(len(b))']\n");
  ASSERT_OK(job);
  auto clean = cluster.waitForJobClean(job.value(), kJobsTimeout);
  ASSERT_OK(clean);
  EXPECT_EQ(clean.value().state, "FAILED");
  auto ended = cluster.waitForTaskEvent(
      [&](const TaskEvent& event) {
        return event.kind == TaskEvent::Kind::kEnded && event.job == job.value();
      },
      kJobsTimeout);
  ASSERT_OK(ended);
  EXPECT_EQ(ended.value().state, "FAILED");
  EXPECT_NE(ended.value().message.find("killed by its memory limit (32 MiB"), std::string::npos)
      << ended.value().describe();
}

TEST(TaskContainment, TheWorkerSaysWhichContainmentItUses) {
  auto started = JobCluster::start("contain-show", oneWorker());
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  const std::string resourceId = cluster.workers().resourceId(0);
  const std::string expected =
      "cgroup v2 (hybrid: limits via v1 memory,cpu,pids) under /sys/fs/cgroup/unified/"
      "regent-worker-" +
      resourceId;
  EXPECT_NE(cluster.workers().process(0).output().find("task containment: " + expected),
            std::string::npos)
      << cluster.workers().process(0).outputTail();
  auto metrics = cluster.workerMetrics(0);
  ASSERT_OK(metrics);
  EXPECT_NE(metrics.value().find("regent_worker_task_containment{mode=\"cgroup\",description=\"" +
                                 expected + "\"} 1"),
            std::string::npos)
      << metrics.value();
  auto workers = cluster.ctl({"--json", "workers"});
  ASSERT_EQ(workers.exit.exitCode, 0) << workers.output;
  EXPECT_NE(workers.output.find("\"containment\":\"" + expected + "\""), std::string::npos)
      << workers.output;
  auto table = cluster.ctl({"workers"});
  ASSERT_EQ(table.exit.exitCode, 0) << table.output;
  EXPECT_TRUE(std::regex_search(table.output, std::regex(resourceId + " .* cgroup v2 ")))
      << table.output;
}

TEST(TaskContainment, WithoutACgroupTheSubreaperShimKillsWhatLeftTheGroup) {
  auto started = JobCluster::start("contain-subreaper",
                                   oneWorker({"worker.containment=subreaper"}));
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  EXPECT_NE(cluster.workers().process(0).output().find(
                "task containment: subreaper (worker.containment is subreaper)"),
            std::string::npos)
      << cluster.workers().process(0).outputTail();
  auto metrics = cluster.workerMetrics(0);
  ASSERT_OK(metrics);
  EXPECT_NE(metrics.value().find("regent_worker_task_containment{mode=\"subreaper\""),
            std::string::npos)
      << metrics.value();

  // Cancel.
  const std::string cancelPids = cluster.taskDir() + "/sub-cancel-pids";
  auto canceled = cluster.submit(
      escapingJob("sub-cancel", cancelPids, 3141, 3142, "exec sleep 1000"));
  ASSERT_OK(canceled);
  auto pids = waitForEscapees(cluster, cancelPids);
  auto cancel = cluster.ctl({"jobs", "cancel", canceled.value()});
  ASSERT_EQ(cancel.exit.exitCode, 0) << cancel.output;
  ASSERT_OK(cluster.waitForJobClean(canceled.value(), kJobsTimeout));
  expectGone(pids, cluster);

  // The job's end.
  const std::string endPids = cluster.taskDir() + "/sub-end-pids";
  auto ended = cluster.submit(escapingJob("sub-end", endPids, 3151, 3152, "exit 0"));
  ASSERT_OK(ended);
  auto clean = cluster.waitForJobClean(ended.value(), kJobsTimeout);
  ASSERT_OK(clean);
  EXPECT_EQ(clean.value().state, "FINISHED") << cluster.describe();
  pids = waitForPids(cluster, endPids);
  ASSERT_EQ(pids.size(), 2u);
  expectGone(pids, cluster);

  // The worker's death.
  const std::string killPids = cluster.taskDir() + "/sub-kill-pids";
  auto killed = cluster.submit(
      escapingJob("sub-kill", killPids, 3161, 3162, "exec sleep 1000"));
  ASSERT_OK(killed);
  pids = waitForEscapees(cluster, killPids);
  ASSERT_OK(cluster.workers().kill(0));
  expectGone(pids, cluster);
}

}  // namespace
}  // namespace regent::testing

// The ProcessTaskRunner with the subreaper containment (task_containment.h), real processes under
// the real regent-task-shim, no cgroup: what left the attempt's process group (a `setsid`
// process, a double-forked daemon, one ignoring SIGTERM) dies when the command ends and on
// cancel. The cgroup containment needs a host's cgroups: task_containment_itest covers it.
#include "services/taskexecutor/task_containment.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "services/taskexecutor/process_task_runner.h"
#include "tests/services/taskexecutor/attempts_dir_test_util.h"
#include "tests/fixtures/loop_wait_test_util.h"
#include "tests/fixtures/temp_dir_test_util.h"

namespace regent::taskexecutor {
namespace {

using regent::testing::runLoopUntil;
using regent::testing::openAttemptsDirForTests;
using regent::testing::TempDir;

constexpr Duration kBound{10000};

std::vector<pid_t> readPids(const std::string& path) {
  std::ifstream in(path);
  std::vector<pid_t> pids;
  for (long pid; in >> pid;) pids.push_back(static_cast<pid_t>(pid));
  return pids;
}

// Alive: in the process table and not a zombie.
bool processLive(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z';
}

// Two escapees, each in a session of its own, record their pids in `pids` (the second one's
// parent exits at once, so it is a daemon); `ignoreTerm` makes both ignore SIGTERM.
std::string escapees(bool ignoreTerm) {
  const std::string trap = ignoreTerm ? "trap \"\" TERM; " : "";
  return "setsid sh -c '" + trap + "echo $$ >> pids; exec sleep 1000' & "
         "(setsid sh -c '" + trap + "echo $$ >> pids; exec sleep 1000' &); "
         "until [ \"$(wc -l < pids)\" -ge 2 ] 2>/dev/null; do sleep 0.01; done; ";
}

class SubreaperContainmentTest : public ::testing::Test {
 protected:
  SubreaperContainmentTest()
      : dataDir_("subreaper-test"),
        attemptsFd_(openAttemptsDirForTests(dataDir_.path() + "/attempts")) {
    containment_ = createTaskContainment({.mode = "subreaper", .killAfterMs = 200}).value();
    runner_ = std::make_unique<ProcessTaskRunner>(
        loop_, loop_.timer(),
        ProcessTaskRunnerOptions{.attemptsDir = dataDir_.path() + "/attempts",
                          .attemptsFd = attemptsFd_.get(),
                          .cancelTimeout = Duration(5000),
                          .containment = containment_});
  }

  ~SubreaperContainmentTest() noexcept override = default;

  AttemptId start(const std::string& script) {
    const AttemptId id = AttemptId::random();
    auto status = runner_->start({.attempt = id, .job = JobId(1, 1), .argv = {"sh", "-c", script}},
                                 [this](const TaskUpdate& update) { updates_.push_back(update); });
    EXPECT_TRUE(status.ok());
    return id;
  }

  std::string pidsPath(const AttemptId& id) const {
    return dataDir_.path() + "/attempts/" + id.toHex() + "/pids";
  }

  bool ended() const { return !updates_.empty() && updates_.back().phase != TaskPhase::kRunning; }

  EventLoop loop_;
  TempDir dataDir_;
  kj::AutoCloseFd attemptsFd_;
  std::shared_ptr<const TaskContainment> containment_;
  std::unique_ptr<ProcessTaskRunner> runner_;
  std::vector<TaskUpdate> updates_;
};

TEST_F(SubreaperContainmentTest, TheShimKillsWhatLeftItsGroupWhenTheCommandEnds) {
  const AttemptId id = start(escapees(false) + "exit 0");
  ASSERT_TRUE(runLoopUntil(loop_, [&] { return ended(); }, kBound));
  EXPECT_EQ(updates_.back().phase, TaskPhase::kFinished) << updates_.back().message;
  const auto pids = readPids(pidsPath(id));
  ASSERT_EQ(pids.size(), 2u);
  for (pid_t pid : pids) EXPECT_FALSE(processLive(pid)) << pid;
}

TEST_F(SubreaperContainmentTest, CancelKillsEscapeesThatIgnoreSigtermBeforeTheWorkersSigkill) {
  const AttemptId id = start(escapees(true) + "exec sleep 1000");
  ASSERT_TRUE(runLoopUntil(loop_, [&] { return readPids(pidsPath(id)).size() == 2; }, kBound));
  const auto pids = readPids(pidsPath(id));
  for (pid_t pid : pids) {
    EXPECT_TRUE(processLive(pid)) << pid;
    EXPECT_EQ(::getsid(pid), pid) << "the escapee " << pid << " leads a session of its own";
  }
  runner_->cancel(id);
  // The worker's own SIGKILL would come after 5 s; the shim's comes after 200 ms.
  ASSERT_TRUE(runLoopUntil(loop_, [&] { return ended(); }, kBound));
  EXPECT_EQ(updates_.back().phase, TaskPhase::kCanceled);
  for (pid_t pid : pids) EXPECT_FALSE(processLive(pid)) << pid;
}

TEST(TaskContainment, AnUnknownModeIsRefusedNamingTheOption) {
  auto bad = createTaskContainment({.mode = "jail"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message,
            "bad value for worker.containment: \"jail\" (expected auto, cgroup or subreaper)");
}

TEST(TaskContainment, AutoFallsBackToSubreaperSayingWhyWhenNoCgroupCanBeHad) {
  TempDir dir("no-cgroups");
  std::ofstream(dir.path() + "/mountinfo") << "23 1 0:21 / /sys rw - sysfs sysfs rw\n";
  std::ofstream(dir.path() + "/cgroup") << "0::/\n";
  auto containment = createTaskContainment({.mode = "auto",
                                            .subtree = "regent-worker-x",
                                            .mountInfoPath = dir.path() + "/mountinfo",
                                            .cgroupPath = dir.path() + "/cgroup"});
  ASSERT_TRUE(containment.ok());
  EXPECT_EQ(containment.value()->kind(), ContainmentKind::kSubreaper);
  EXPECT_EQ(containment.value()->description(),
            "subreaper (no cgroup: no cgroup hierarchy is mounted (/proc/self/mountinfo))");
  auto strict = createTaskContainment({.mode = "cgroup",
                                       .subtree = "regent-worker-x",
                                       .mountInfoPath = dir.path() + "/mountinfo",
                                       .cgroupPath = dir.path() + "/cgroup"});
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(strict.error().message,
            "worker.containment is cgroup, but no cgroup can be had: no cgroup hierarchy is "
            "mounted (/proc/self/mountinfo)");
}

TEST(TaskContainment, AutoFallsBackToSubreaperWhenTheSubtreeCannotBeCreated) {
  TempDir dir("readonly-cgroups");
  // A "v2 mount" at a directory that does not exist: mkdir of the subtree fails.
  std::ofstream(dir.path() + "/mountinfo")
      << "41 31 0:38 / " << dir.path() << "/missing/cgroup2 rw - cgroup2 cgroup2 rw\n";
  std::ofstream(dir.path() + "/cgroup") << "0::/\n";
  auto containment = createTaskContainment({.mode = "auto",
                                            .subtree = "regent-worker-x",
                                            .mountInfoPath = dir.path() + "/mountinfo",
                                            .cgroupPath = dir.path() + "/cgroup"});
  ASSERT_TRUE(containment.ok());
  EXPECT_EQ(containment.value()->kind(), ContainmentKind::kSubreaper);
  EXPECT_NE(containment.value()->description().find(
                "subreaper (no cgroup: cannot create " + dir.path() +
                "/missing/cgroup2/regent-worker-x: No such file or directory"),
            std::string::npos)
      << containment.value()->description();
}

}  // namespace
}  // namespace regent::taskexecutor

// The ProcessTaskRunner with real processes under the real regent-task-shim: how an attempt ends
// (exit code, signal, what could not be started, a command not on the task's PATH, a worker out of
// descriptors), the task's environment (the base, never the worker's own), working directory
// (relative: below the attempt's), output files and their cap, cancel of a group
// whose processes ignore SIGTERM, what a finished task leaves behind, killAll, retention, the task
// user, resolveTaskUser, and the shim taking its group down when its parent dies.
#include "services/taskexecutor/process_task_runner.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/event_loop.h"
#include "tests/fixtures/loop_wait_test_util.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/fixtures/wait_test_util.h"
#include "tests/services/taskexecutor/attempts_dir_test_util.h"

namespace regent::taskexecutor {
namespace {

namespace fs = std::filesystem;
using regent::testing::runLoopBounded;
using regent::testing::runLoopUntil;
using regent::testing::TempDir;

constexpr Duration kBound{10000};
constexpr Duration kShortCancel{300};

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The fields of /proc/<pid>/stat after the command name: state, ppid, pgrp, ...
std::optional<std::vector<std::string>> procStat(const std::string& pid) {
  std::string text = readFile("/proc/" + pid + "/stat");
  auto close = text.rfind(')');
  if (text.empty() || close == std::string::npos) return std::nullopt;
  std::istringstream rest(text.substr(close + 1));
  std::vector<std::string> fields;
  for (std::string field; rest >> field;) fields.push_back(field);
  if (fields.size() < 3) return std::nullopt;
  return fields;
}

// Alive: in the process table and not a zombie (a dead process its new parent has not reaped).
bool processLive(pid_t pid) {
  auto fields = procStat(std::to_string(pid));
  return fields && (*fields)[0] != "Z";
}

// Any live process whose process group is `pgid`.
bool groupLive(pid_t pgid) {
  std::unique_ptr<DIR, int (*)(DIR*)> proc(::opendir("/proc"), ::closedir);
  if (!proc) return true;
  while (dirent* entry = ::readdir(proc.get())) {
    std::string name = entry->d_name;
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    auto fields = procStat(name);
    if (fields && (*fields)[0] != "Z" && (*fields)[2] == std::to_string(pgid)) return true;
  }
  return false;
}

pid_t pgidOf(pid_t pid) {
  auto fields = procStat(std::to_string(pid));
  return fields ? static_cast<pid_t>(std::stol((*fields)[2])) : 0;
}

// A pid a task wrote to `path`, once it is there (0 after the deadline).
pid_t awaitPidFile(EventLoop& loop, const std::string& path) {
  pid_t pid = 0;
  runLoopUntil(
      loop,
      [&] {
        std::string text = readFile(path);
        if (text.empty() || text.back() != '\n') return false;
        pid = static_cast<pid_t>(std::stol(text));
        return true;
      },
      kBound);
  return pid;
}

// The updates of one attempt, and a promise for its terminal one.
struct Observed {
  std::vector<TaskUpdate> updates;
  kj::Own<kj::PromiseFulfiller<void>> ended;
};

class TaskRunnerTest : public ::testing::Test {
 protected:
  TaskRunnerTest() : dataDir_("task-runner-test") {}
  ~TaskRunnerTest() noexcept override = default;

  void makeRunner(ProcessTaskRunnerOptions options = {}) {
    if (options.attemptsDir.empty()) options.attemptsDir = attemptsDir();
    if (options.cancelTimeout == Duration{5000}) options.cancelTimeout = kShortCancel;
    attemptsFd_ = regent::testing::openAttemptsDirForTests(attemptsDir());
    options.attemptsFd = attemptsFd_.get();
    runner_ = std::make_unique<ProcessTaskRunner>(loop_, loop_.timer(), std::move(options));
  }

  std::string attemptsDir() const { return dataDir_.path() + "/attempts"; }
  std::string attemptDir(const AttemptId& id) const { return attemptsDir() + "/" + id.toHex(); }

  // Starts `spec` and returns the id; its updates land in observed(id).
  AttemptId start(TaskSpec spec, kj::Promise<void>* ended = nullptr) {
    if (spec.attempt.isZero()) spec.attempt = AttemptId::random();
    auto paf = kj::newPromiseAndFulfiller<void>();
    auto& observed = observed_[spec.attempt];
    observed = std::make_shared<Observed>();
    observed->ended = kj::mv(paf.fulfiller);
    std::weak_ptr<Observed> sink = observed;
    auto status = runner_->start(spec, [sink](const TaskUpdate& update) {
      auto o = sink.lock();
      if (!o) return;
      o->updates.push_back(update);
      if (update.phase != TaskPhase::kRunning) o->ended->fulfill();
    });
    EXPECT_TRUE(status.ok()) << status.error().message;
    if (ended != nullptr) {
      *ended = kj::mv(paf.promise);
    } else {
      endings_.push_back(kj::mv(paf.promise));
    }
    return spec.attempt;
  }

  // Runs `argv` to its end and returns every update it reported.
  std::vector<TaskUpdate> run(TaskSpec spec) {
    kj::Promise<void> ended = nullptr;
    AttemptId id = start(std::move(spec), &ended);
    runLoopBounded(loop_, kj::mv(ended), kBound, "the attempt's terminal update");
    return observed_[id]->updates;
  }

  std::vector<TaskUpdate> run(std::vector<std::string> argv) {
    return run(TaskSpec{.job = JobId(1, 1), .argv = std::move(argv)});
  }

  bool awaitRunning(const AttemptId& id) {
    return runLoopUntil(
               loop_, [&] { return !observed_[id]->updates.empty(); }, kBound) &&
           observed_[id]->updates.front().phase == TaskPhase::kRunning;
  }

  void awaitEnd(const AttemptId& id) {
    runLoopUntil(
        loop_,
        [&] {
          auto& u = observed_[id]->updates;
          return !u.empty() && u.back().phase != TaskPhase::kRunning;
        },
        kBound);
  }

  const std::vector<TaskUpdate>& updates(const AttemptId& id) { return observed_[id]->updates; }

  EventLoop loop_;
  TempDir dataDir_;
  kj::AutoCloseFd attemptsFd_;  // The runner holds its own duplicate.
  std::map<AttemptId, std::shared_ptr<Observed>> observed_;
  std::vector<kj::Promise<void>> endings_;
  std::unique_ptr<ProcessTaskRunner> runner_;
};

TEST_F(TaskRunnerTest, ExitZeroIsRunningThenFinished) {
  makeRunner();
  auto updates = run({"true"});
  ASSERT_EQ(updates.size(), 2u);
  EXPECT_EQ(updates[0].phase, TaskPhase::kRunning);
  EXPECT_GT(updates[0].pid, 0u);
  EXPECT_GT(updates[0].startedAtMs, 0);
  EXPECT_EQ(updates[1].phase, TaskPhase::kFinished);
  EXPECT_EQ(updates[1].exitCode, 0);
  EXPECT_EQ(updates[1].termSignal, 0);
  EXPECT_EQ(updates[1].pid, updates[0].pid);
  EXPECT_GE(updates[1].endedAtMs, updates[1].startedAtMs);
  EXPECT_EQ(runner_->runningCount(), 0u);
}

// A worker stopped between accepting an attempt and starting it may hold one its JobMaster gave
// up on meanwhile (and ran elsewhere): the attempt is not started, and FAILS as a worker fault
// naming the stall.
TEST_F(TaskRunnerTest, AnAttemptAStallOfTheLoopOvertookIsNotStartedAndFailsAsAWorkerFault) {
  LoopStallWatch stalls(loop_.timer(), Duration(300));
  stalls.start();
  makeRunner({.stalls = &stalls});
  const std::string marker = dataDir_.path() + "/ran";
  kj::Promise<void> ended = nullptr;
  const AttemptId id = start(TaskSpec{.job = JobId(1, 1), .argv = {"touch", marker}}, &ended);
  // The stimulus: the loop does not run for a second, as in a stopped process.
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  runLoopBounded(loop_, kj::mv(ended), kBound, "the attempt's terminal update");
  const std::vector<TaskUpdate>& u = updates(id);
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].phase, TaskPhase::kFailed);
  EXPECT_TRUE(u[0].workerFault);
  EXPECT_NE(u[0].message.find("did not run for"), std::string::npos) << u[0].message;
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the command ran";
  runner_.reset();  // Before the watch it reads.
}

TEST_F(TaskRunnerTest, NonZeroExitFailsWithTheCode) {
  makeRunner();
  auto updates = run({"sh", "-c", "exit 3"});
  ASSERT_EQ(updates.size(), 2u);
  EXPECT_EQ(updates[1].phase, TaskPhase::kFailed);
  EXPECT_EQ(updates[1].exitCode, 3);
  EXPECT_EQ(updates[1].message, "exited with code 3");
}

TEST_F(TaskRunnerTest, ACommandKilledByASignalFailsNamingTheSignal) {
  makeRunner();
  for (int signum : {SIGKILL, SIGABRT}) {
    // No core file from the shell; the shim makes none either when it re-raises the signal.
    auto updates = run({"sh", "-c", "ulimit -c 0; kill -" + std::to_string(signum) + " $$"});
    ASSERT_EQ(updates.size(), 2u);
    EXPECT_EQ(updates[1].phase, TaskPhase::kFailed);
    EXPECT_EQ(updates[1].termSignal, signum);
    EXPECT_EQ(updates[1].message,
              "killed by signal " + std::to_string(signum) + " (" + ::sigdescr_np(signum) + ")");
  }
}

TEST_F(TaskRunnerTest, AMissingBinaryFailsNamingThePathAndErrnoWithoutRunning) {
  makeRunner();
  auto updates = run({"/no/such/binary", "arg"});
  ASSERT_EQ(updates.size(), 1u) << "no kRunning before the failure";
  EXPECT_EQ(updates[0].phase, TaskPhase::kFailed);
  EXPECT_EQ(updates[0].message,
            "cannot execute /no/such/binary: No such file or directory (errno 2)");
}

TEST_F(TaskRunnerTest, ANonExecutableFileFailsNamingThePathAndErrnoWithoutRunning) {
  makeRunner();
  const std::string script = dataDir_.path() + "/not-executable.sh";
  std::ofstream(script) << "#!/bin/sh\nexit 0\n";
  ASSERT_EQ(::chmod(script.c_str(), 0644), 0);
  auto updates = run({script});
  ASSERT_EQ(updates.size(), 1u) << "no kRunning before the failure";
  EXPECT_EQ(updates[0].phase, TaskPhase::kFailed);
  EXPECT_EQ(updates[0].message, "cannot execute " + script + ": Permission denied (errno 13)");
}

TEST_F(TaskRunnerTest, AMissingWorkingDirectoryFailsNamingItWithoutRunning) {
  makeRunner();
  auto updates = run(TaskSpec{.argv = {"true"}, .workingDir = "/no/such/dir"});
  ASSERT_EQ(updates.size(), 1u) << "no kRunning before the failure";
  EXPECT_EQ(updates[0].phase, TaskPhase::kFailed);
  EXPECT_EQ(updates[0].message,
            "working directory /no/such/dir: No such file or directory (errno 2)");
}

TEST_F(TaskRunnerTest, ACommandNotOnThePathFailsSayingSoAndNamingThePathWithoutRunning) {
  makeRunner({.baseEnv = {"PATH=/usr/local/bin:/usr/bin:/bin"}});
  auto updates = run({"regent-no-such-command"});
  ASSERT_EQ(updates.size(), 1u) << "no kRunning before the failure";
  EXPECT_EQ(updates[0].phase, TaskPhase::kFailed);
  EXPECT_EQ(updates[0].message,
            "regent-no-such-command: not found on PATH (/usr/local/bin:/usr/bin:/bin)");
  // The task's own PATH (its env) is the one searched, not the worker's.
  auto own = run(TaskSpec{.argv = {"true"}, .env = {"PATH=/regent/nowhere"}});
  ASSERT_EQ(own.size(), 1u);
  EXPECT_EQ(own[0].message, "true: not found on PATH (/regent/nowhere)");
}

TEST_F(TaskRunnerTest, APathDirectoryTheTaskUserCannotSearchIsSkipped) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to change user";
  auto user = resolveTaskUser("nobody", false, 0);
  ASSERT_TRUE(user.ok()) << user.error().message;
  const std::string hidden = dataDir_.path() + "/private-bin";
  fs::create_directory(hidden);
  ASSERT_EQ(::chmod(hidden.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dataDir_.path().c_str(), 0711), 0);
  makeRunner({.uid = user.value().uid,
              .gid = user.value().gid,
              .baseEnv = {"PATH=" + hidden + ":/usr/bin:/bin"}});
  auto missing = run({"regent-no-such-command"});
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0].message,
            "regent-no-such-command: not found on PATH (" + hidden + ":/usr/bin:/bin)");
  EXPECT_EQ(run({"true"}).back().phase, TaskPhase::kFinished);
}

TEST_F(TaskRunnerTest, TheTaskGetsTheBaseEnvironmentAndItsOwnAndNothingOfTheWorkers) {
  ::setenv("REGENT_TASK_RUNNER_TEST_SECRET", "worker only", 1);
  makeRunner({.baseEnv = {"PATH=/usr/bin:/bin", "HOME=/home/task", "LANG=C"}});
  TaskSpec spec{.attempt = AttemptId::random(),
                .argv = {"/usr/bin/env"},
                .env = {"REGENT_TASK_VERTEX=v", "HOME=/from/the/job"}};
  auto updates = run(spec);
  ::unsetenv("REGENT_TASK_RUNNER_TEST_SECRET");
  ASSERT_EQ(updates.back().phase, TaskPhase::kFinished);
  EXPECT_EQ(readFile(*runner_->stdoutPath(spec.attempt)),
            "PATH=/usr/bin:/bin\nLANG=C\nREGENT_TASK_VERTEX=v\nHOME=/from/the/job\n");
}

TEST(TaskEnvironment, IsThePathTheUsersIdentityAndTheWorkersLangAndTzOnly) {
  ::setenv("LANG", "C.UTF-8", 1);
  ::unsetenv("TZ");
  ::setenv("REGENT_HA_ZOOKEEPER_AUTH", "worker:secret", 1);
  auto env = taskEnvironment(TaskUser{.name = "nobody", .home = "/nonexistent"}, "/usr/bin");
  ::unsetenv("REGENT_HA_ZOOKEEPER_AUTH");
  EXPECT_EQ(env, (std::vector<std::string>{"PATH=/usr/bin", "HOME=/nonexistent", "USER=nobody",
                                           "LOGNAME=nobody", "LANG=C.UTF-8"}));
  // A uid without a name in the user database gives no USER.
  EXPECT_EQ(taskEnvironment(TaskUser{.name = "uid 4242"}, "/bin").size(), 2u);
}

TEST_F(TaskRunnerTest, ARelativeWorkingDirectoryIsBelowTheAttemptsDirectory) {
  makeRunner();
  TaskSpec here{.attempt = AttemptId::random(), .argv = {"pwd"}, .workingDir = "."};
  ASSERT_EQ(run(here).back().phase, TaskPhase::kFinished);
  EXPECT_EQ(readFile(*runner_->stdoutPath(here.attempt)), attemptDir(here.attempt) + "\n");
  TaskSpec below{.attempt = AttemptId::random(), .argv = {"pwd"}, .workingDir = "sub"};
  auto updates = run(below);
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].message, "working directory " + attemptDir(below.attempt) +
                                    "/sub: No such file or directory (errno 2)");
}

TEST_F(TaskRunnerTest, OutputBeyondTheCapIsDroppedAndTheUpdateSaysSo) {
  makeRunner({.outputMax = 100});
  TaskSpec spec{.attempt = AttemptId::random(),
                .argv = {"sh", "-c", "head -c 5000 /dev/zero; echo short >&2"}};
  auto updates = run(spec);
  ASSERT_EQ(updates.back().phase, TaskPhase::kFinished);
  EXPECT_EQ(readFile(*runner_->stdoutPath(spec.attempt)), std::string(100, '\0'));
  EXPECT_EQ(readFile(*runner_->stderrPath(spec.attempt)), "short\n");
  EXPECT_EQ(updates.back().stdoutProblem, "truncated at 100 bytes (worker.attempt-output.max)");
  EXPECT_EQ(updates.back().stderrProblem, "");
  EXPECT_EQ(outputProblems(updates.back()),
            "stdout truncated at 100 bytes (worker.attempt-output.max)");
  EXPECT_EQ(runner_->latest(spec.attempt)->stdoutProblem, updates.back().stdoutProblem);
}

TEST_F(TaskRunnerTest, OutputWithinTheCapIsWholeAndCarriesNoProblem) {
  makeRunner({.outputMax = 100});
  TaskSpec spec{.attempt = AttemptId::random(), .argv = {"sh", "-c", "head -c 100 /dev/zero"}};
  auto updates = run(spec);
  ASSERT_EQ(updates.back().phase, TaskPhase::kFinished);
  EXPECT_EQ(readFile(*runner_->stdoutPath(spec.attempt)).size(), 100u);
  EXPECT_EQ(outputProblems(updates.back()), "");
}

// Descriptors counted in /proc/self/fd (the listing's own included).
size_t openDescriptors() {
  size_t count = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator("/proc/self/fd")) ++count;
  return count;
}

TEST_F(TaskRunnerTest, AWorkerOutOfDescriptorsFailsTheAttemptAsItsOwnFault) {
  makeRunner();
  // Let the loop settle (the runner's first directory scan) before counting.
  ASSERT_EQ(run({"true"}).back().phase, TaskPhase::kFinished);
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  // Room for nothing the spawn needs (its sockets, the output files).
  struct rlimit tight = saved;
  tight.rlim_cur = openDescriptors();
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &tight), 0);
  kj::Promise<void> ended = nullptr;
  AttemptId id = start(TaskSpec{.argv = {"true"}}, &ended);
  runLoopBounded(loop_, kj::mv(ended), kBound, "the attempt's terminal update");
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  const auto& got = updates(id);
  ASSERT_EQ(got.size(), 1u) << "no kRunning before the failure";
  EXPECT_EQ(got[0].phase, TaskPhase::kFailed);
  EXPECT_TRUE(got[0].workerFault) << got[0].message;
  EXPECT_NE(got[0].message.find("Too many open files"), std::string::npos) << got[0].message;
  // Out of descriptors, the worker could not make the attempt's directory: it takes no task (not
  // ready) until its next check of the attempts directory finds it can again.
  ASSERT_TRUE(runner_->unusableReason().has_value());
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return !runner_->unusableReason().has_value(); }, kBound))
      << "the runner is usable again once descriptors are back";
  // A command's own failure is not the worker's.
  auto own = run({"/no/such/binary"});
  EXPECT_FALSE(own.back().workerFault);
  EXPECT_EQ(run({"true"}).back().phase, TaskPhase::kFinished) << "the runner serves again";
}

TEST_F(TaskRunnerTest, ABadCommandLeavesTheRunnerServing) {
  makeRunner();
  ASSERT_EQ(run({"/no/such/binary"}).back().phase, TaskPhase::kFailed);
  EXPECT_EQ(run({"true"}).back().phase, TaskPhase::kFinished);
}

TEST_F(TaskRunnerTest, EnvironmentAndWorkingDirectoryAreApplied) {
  makeRunner();
  const std::string workDir = dataDir_.path() + "/work";
  fs::create_directory(workDir);
  TaskSpec spec{.attempt = AttemptId::random(),
                .argv = {"sh", "-c", "echo \"$GREETING\"; pwd"},
                .env = {"GREETING=hello there"},
                .workingDir = workDir};
  ASSERT_EQ(run(spec).back().phase, TaskPhase::kFinished);
  EXPECT_EQ(readFile(*runner_->stdoutPath(spec.attempt)), "hello there\n" + workDir + "\n");
}

TEST_F(TaskRunnerTest, TheDefaultWorkingDirectoryIsTheAttemptsDirectory) {
  makeRunner();
  TaskSpec spec{.attempt = AttemptId::random(), .argv = {"pwd"}};
  ASSERT_EQ(run(spec).back().phase, TaskPhase::kFinished);
  EXPECT_EQ(readFile(*runner_->stdoutPath(spec.attempt)), attemptDir(spec.attempt) + "\n");
}

TEST_F(TaskRunnerTest, ARelativeAttemptsDirectoryIsTakenFromTheWorkersWorkingDirectory) {
  makeRunner({.attemptsDir = fs::relative(attemptsDir(), fs::current_path()).string() + "/"});
  TaskSpec spec{.attempt = AttemptId::random(), .argv = {"pwd"}};
  ASSERT_EQ(run(spec).back().phase, TaskPhase::kFinished);
  EXPECT_EQ(*runner_->stdoutPath(spec.attempt), attemptDir(spec.attempt) + "/stdout");
  EXPECT_EQ(readFile(*runner_->stdoutPath(spec.attempt)), attemptDir(spec.attempt) + "\n");
}

TEST_F(TaskRunnerTest, OutputIsCapturedInTheAttemptsFilesAndTheCommandSeesNoExtraDescriptors) {
  makeRunner();
  TaskSpec spec{.attempt = AttemptId::random(),
                .argv = {"sh", "-c", "echo to-out; echo to-err >&2; ls /proc/self/fd"}};
  auto updates = run(spec);
  ASSERT_EQ(updates.back().phase, TaskPhase::kFinished);
  EXPECT_EQ(*runner_->stdoutPath(spec.attempt), attemptDir(spec.attempt) + "/stdout");
  EXPECT_EQ(*runner_->stderrPath(spec.attempt), attemptDir(spec.attempt) + "/stderr");
  // ls's own directory handle is fd 3: nothing of the worker or the shim is open besides.
  EXPECT_EQ(readFile(*runner_->stdoutPath(spec.attempt)), "to-out\n0\n1\n2\n3\n");
  EXPECT_EQ(readFile(*runner_->stderrPath(spec.attempt)), "to-err\n");
  auto latest = runner_->latest(spec.attempt);
  ASSERT_TRUE(latest);
  EXPECT_EQ(latest->phase, TaskPhase::kFinished);
  EXPECT_FALSE(runner_->running(spec.attempt));
}

TEST_F(TaskRunnerTest, StartFailureIsAlsoWrittenToTheAttemptsStderr) {
  makeRunner();
  TaskSpec spec{.attempt = AttemptId::random(), .argv = {"/no/such/binary"}};
  run(spec);
  EXPECT_EQ(
      readFile(*runner_->stderrPath(spec.attempt)),
      "regent-task-shim: cannot execute /no/such/binary: No such file or directory (errno 2)\n");
}

TEST_F(TaskRunnerTest, AKnownAttemptIsRefused) {
  makeRunner();
  TaskSpec spec{.attempt = AttemptId::random(), .argv = {"true"}};
  run(spec);
  auto again = runner_->start(spec, [](const TaskUpdate&) {});
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().message.find(spec.attempt.toHex()), std::string::npos);
}

TEST_F(TaskRunnerTest, NoAttemptStartsAfterKillAll) {
  makeRunner();
  runLoopBounded(loop_, runner_->killAll(), kBound, "killAll");
  EXPECT_TRUE(runner_->stopping());
  const AttemptId attempt = AttemptId::random();
  bool updated = false;
  auto refused = runner_->start(TaskSpec{.attempt = attempt, .argv = {"true"}},
                                [&](const TaskUpdate&) { updated = true; });
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("stopping"), std::string::npos) << refused.error().message;
  EXPECT_NE(refused.error().message.find(attempt.toHex()), std::string::npos);
  loop_.run(kj::evalLast([] {}));
  EXPECT_FALSE(updated);
  EXPECT_EQ(runner_->runningCount(), 0u);
}

TEST_F(TaskRunnerTest, AnUpdateCallbackThatThrowsDoesNotStopTheAttempt) {
  makeRunner();
  std::vector<TaskPhase> phases;
  ASSERT_TRUE(runner_
                  ->start({.attempt = AttemptId::random(), .argv = {"true"}},
                          [&](const TaskUpdate& update) {
                            phases.push_back(update.phase);
                            if (update.phase == TaskPhase::kRunning) {
                              throw std::runtime_error("callback failure");
                            }
                          })
                  .ok());
  EXPECT_TRUE(runLoopUntil(
      loop_, [&] { return phases.size() == 2; }, kBound));
  EXPECT_EQ(phases, (std::vector<TaskPhase>{TaskPhase::kRunning, TaskPhase::kFinished}));
}

// SIGHUP is also the shim's parent-death signal: one sent by the task to its own group while the
// worker lives must not make the shim kill the group.
TEST_F(TaskRunnerTest, ASighupFromTheTaskItselfDoesNotKillTheGroup) {
  makeRunner();
  TaskSpec spec{.attempt = AttemptId::random(),
                .argv = {"sh", "-c", "trap '' HUP; kill -HUP 0; echo survived"}};
  auto updates = run(spec);
  ASSERT_EQ(updates.size(), 2u);
  EXPECT_EQ(updates[1].phase, TaskPhase::kFinished) << updates[1].message;
  EXPECT_EQ(readFile(*runner_->stdoutPath(spec.attempt)), "survived\n");
}

// The task's child ignores SIGTERM: SIGTERM ends the task's shell, the child outlives it until
// the cancel timeout's SIGKILL, and only then is the attempt CANCELED.
TEST_F(TaskRunnerTest, CancelKillsTheWholeGroupIncludingAChildThatIgnoresSigterm) {
  makeRunner();
  // The child writes its pid once it ignores SIGTERM.
  AttemptId id =
      start({.argv = {"sh", "-c",
                      "sh -c 'trap \"\" TERM; echo $$ > child.pid; exec sleep 1000' & wait"}});
  ASSERT_TRUE(awaitRunning(id));
  const pid_t child = awaitPidFile(loop_, attemptDir(id) + "/child.pid");
  ASSERT_GT(child, 0);
  const auto pgid = static_cast<pid_t>(updates(id)[0].pid);
  EXPECT_EQ(pgidOf(child), pgid) << "the task's child is in the attempt's group";
  runner_->cancel(id);
  awaitEnd(id);
  ASSERT_EQ(updates(id).size(), 2u);
  EXPECT_EQ(updates(id)[1].phase, TaskPhase::kCanceled);
  EXPECT_EQ(updates(id)[1].termSignal, SIGTERM) << "the shell died of the SIGTERM";
  EXPECT_FALSE(processLive(child)) << "the child that ignored SIGTERM got SIGKILL";
  EXPECT_FALSE(groupLive(pgid));
  EXPECT_TRUE(runLoopUntil(
      loop_, [&] { return ::kill(-pgid, 0) != 0 && errno == ESRCH; }, kBound))
      << "the group is gone once its zombies are reaped";
}

TEST_F(TaskRunnerTest, CancelOfAnEndedOrUnknownAttemptIsANoOp) {
  makeRunner();
  TaskSpec spec{.attempt = AttemptId::random(), .argv = {"true"}};
  run(spec);
  runner_->cancel(spec.attempt);
  runner_->cancel(AttemptId::random());
  EXPECT_EQ(runner_->latest(spec.attempt)->phase, TaskPhase::kFinished);
}

TEST_F(TaskRunnerTest, CancelBeforeTheSpawnEndsCanceledWithoutRunning) {
  makeRunner();
  AttemptId id = start({.argv = {"sleep", "1000"}});
  runner_->cancel(id);  // The attempt's directory is still being made off the loop.
  awaitEnd(id);
  ASSERT_EQ(updates(id).size(), 1u);
  EXPECT_EQ(updates(id)[0].phase, TaskPhase::kCanceled);
}

TEST_F(TaskRunnerTest, WhatAFinishedTaskLeftInItsGroupIsKilledBeforeItEnds) {
  makeRunner();
  // One leftover obeys SIGTERM, the other ignores it and needs SIGKILL; the task exits once the
  // second one ignores SIGTERM.
  AttemptId id = start({.argv = {"sh", "-c",
                                 "sleep 1000 & echo $! > obeys.pid; "
                                 "sh -c 'trap \"\" TERM; echo $$ > ignores.pid; exec sleep 1000' & "
                                 "until [ -s ignores.pid ]; do sleep 0.01; done; exit 0"}});
  awaitEnd(id);
  ASSERT_EQ(updates(id).size(), 2u);
  EXPECT_EQ(updates(id)[1].phase, TaskPhase::kFinished);
  for (const char* file : {"/obeys.pid", "/ignores.pid"}) {
    const pid_t leftover = awaitPidFile(loop_, attemptDir(id) + file);
    ASSERT_GT(leftover, 0);
    EXPECT_FALSE(processLive(leftover)) << file;
  }
  EXPECT_FALSE(groupLive(static_cast<pid_t>(updates(id)[0].pid)));
}

TEST_F(TaskRunnerTest, KillAllCancelsEveryRunningAttemptAndResolvesWhenTheyEnded) {
  makeRunner();
  std::vector<AttemptId> ids = {
      start({.argv = {"sleep", "1000"}}),
      start({.argv = {"sh", "-c", "trap '' TERM; sleep 1000 & echo $! > ignores.pid; wait; wait"}}),
      start({.argv = {"sh", "-c", "sleep 1000"}})};
  for (const auto& id : ids) ASSERT_TRUE(awaitRunning(id));
  // Only once the second one ignores SIGTERM does killAll need SIGKILL for it.
  ASSERT_GT(awaitPidFile(loop_, attemptDir(ids[1]) + "/ignores.pid"), 0);
  EXPECT_EQ(runner_->runningCount(), 3u);
  runLoopBounded(loop_, runner_->killAll(), kBound, "killAll");
  EXPECT_EQ(runner_->runningCount(), 0u);
  for (const auto& id : ids) {
    ASSERT_EQ(updates(id).size(), 2u);
    EXPECT_EQ(updates(id)[1].phase, TaskPhase::kCanceled);
    EXPECT_FALSE(groupLive(static_cast<pid_t>(updates(id)[0].pid)));
  }
  runLoopBounded(loop_, runner_->killAll(), kBound, "killAll with nothing running");
}

TEST_F(TaskRunnerTest, DestroyingTheRunnerKillsWhatStillRuns) {
  makeRunner();
  AttemptId id = start({.argv = {"sh", "-c", "trap '' TERM; sleep 1000 & wait; wait"}});
  ASSERT_TRUE(awaitRunning(id));
  const auto pgid = static_cast<pid_t>(updates(id)[0].pid);
  runner_ = nullptr;
  EXPECT_TRUE(runLoopUntil(
      loop_, [&] { return !groupLive(pgid); }, kBound));
  EXPECT_EQ(updates(id).size(), 1u) << "no update after the runner is gone";
}

TEST_F(TaskRunnerTest, RetentionKeepsTheNewestEndedAttemptsAndNeverARunningOne) {
  makeRunner({.retainAttempts = 2});
  AttemptId longRunning = start({.argv = {"sleep", "1000"}});
  ASSERT_TRUE(awaitRunning(longRunning));
  std::vector<AttemptId> ended;
  for (int i = 0; i < 4; ++i) {
    TaskSpec spec{.attempt = AttemptId::random(), .argv = {"true"}};
    run(spec);
    ended.push_back(spec.attempt);
  }
  for (int i = 0; i < 2; ++i) {
    EXPECT_FALSE(runner_->latest(ended[i])) << i;
    EXPECT_FALSE(runner_->stdoutPath(ended[i])) << i;
    EXPECT_TRUE(runLoopUntil(
        loop_, [&] { return !fs::exists(attemptDir(ended[i])); }, kBound));
  }
  for (int i = 2; i < 4; ++i) {
    EXPECT_TRUE(runner_->latest(ended[i])) << i;
    EXPECT_TRUE(fs::exists(attemptDir(ended[i]) + "/stdout")) << i;
  }
  EXPECT_TRUE(runner_->running(longRunning));
  EXPECT_TRUE(fs::exists(attemptDir(longRunning)));
  runLoopBounded(loop_, runner_->killAll(), kBound, "killAll");
}

TEST_F(TaskRunnerTest, AttemptDirectoriesOfAnEarlierRunArePrunedFirst) {
  fs::create_directories(attemptsDir());
  const std::string old1 = attemptDir(AttemptId::random()), old2 = attemptDir(AttemptId::random());
  const std::string notAnAttempt = attemptsDir() + "/keep-me";
  for (const auto& dir : {old1, old2, notAnAttempt}) fs::create_directory(dir);
  std::ofstream(old1 + "/stdout") << "old output\n";
  makeRunner({.retainAttempts = 1});
  TaskSpec spec{.attempt = AttemptId::random(), .argv = {"true"}};
  run(spec);
  EXPECT_TRUE(runLoopUntil(
      loop_, [&] { return !fs::exists(old1) && !fs::exists(old2); }, kBound));
  EXPECT_TRUE(fs::exists(notAnAttempt)) << "only attempt directories are pruned";
  EXPECT_TRUE(fs::exists(attemptDir(spec.attempt) + "/stdout"));
}

TEST_F(TaskRunnerTest, AsRootTasksRunAsTheTaskUserInADirectoryTheyOwn) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to change user";
  auto user = resolveTaskUser("nobody", false, 0);
  ASSERT_TRUE(user.ok()) << user.error().message;
  ASSERT_TRUE(user.value().uid && *user.value().uid != 0);
  // The worker's data directory lets the task user through (WorkerDataDir::open; tested there).
  ASSERT_EQ(::chmod(dataDir_.path().c_str(), 0711), 0);
  makeRunner({.uid = user.value().uid, .gid = user.value().gid});
  TaskSpec spec{.attempt = AttemptId::random(),
                .argv = {"sh", "-c", "id -u; id -G; echo written > here; cat here"}};
  auto updates = run(spec);
  ASSERT_EQ(updates.back().phase, TaskPhase::kFinished)
      << readFile(*runner_->stderrPath(spec.attempt));
  EXPECT_EQ(
      readFile(*runner_->stdoutPath(spec.attempt)),
      std::to_string(*user.value().uid) + "\n" + std::to_string(*user.value().gid) + "\nwritten\n");
  struct stat info {};
  ASSERT_EQ(::stat(attemptDir(spec.attempt).c_str(), &info), 0);
  EXPECT_EQ(info.st_uid, *user.value().uid);
}

// A link put in place of `attempts` while an attempt runs (by a task that could write the data
// directory): the attempt's end prunes its real directory, not the one of the same name the link
// leads to; the runner becomes unusable, refuses new attempts, and creates nothing there.
TEST_F(TaskRunnerTest, AnAttemptsDirectoryReplacedByALinkLeadsNothingOutside) {
  makeRunner({.retainAttempts = 0});
  const std::string go = dataDir_.path() + "/go";
  AttemptId running =
      start(TaskSpec{.argv = {"sh", "-c", "while [ ! -e " + go + " ]; do sleep 0.05; done"}});
  ASSERT_TRUE(awaitRunning(running));
  TempDir outside("task-runner-outside");
  const std::string lookalike = outside.path() + "/" + running.toHex();
  ASSERT_EQ(::mkdir(lookalike.c_str(), 0700), 0);
  std::ofstream(lookalike + "/precious") << "keep me\n";
  const std::string moved = dataDir_.path() + "/attempts.moved";
  ASSERT_EQ(::rename(attemptsDir().c_str(), moved.c_str()), 0);
  ASSERT_EQ(::symlink(outside.path().c_str(), attemptsDir().c_str()), 0);

  std::ofstream(go) << "go\n";
  awaitEnd(running);
  EXPECT_EQ(updates(running).back().phase, TaskPhase::kFinished);
  EXPECT_TRUE(runLoopUntil(
      loop_, [&] { return !fs::exists(moved + "/" + running.toHex()); }, kBound))
      << "the ended attempt's own directory was not pruned";
  EXPECT_TRUE(fs::exists(lookalike + "/precious")) << "pruned through the link";

  EXPECT_TRUE(runLoopUntil(loop_, [&] { return runner_->unusableReason().has_value(); }, kBound));
  ASSERT_TRUE(runner_->unusableReason());
  EXPECT_NE(runner_->unusableReason()->find(attemptsDir() + " was replaced"), std::string::npos)
      << *runner_->unusableReason();
  Status refused = runner_->start(TaskSpec{.attempt = AttemptId::random(), .argv = {"true"}},
                                  [](const TaskUpdate&) {});
  EXPECT_FALSE(refused.ok());
  size_t entries = 0;
  for (const auto& entry : fs::directory_iterator(outside.path())) {
    (void)entry;
    ++entries;
  }
  EXPECT_EQ(entries, 1u) << "something was created through the link";
}

// A task's attempt directory is its own: a link it leaves there to a directory elsewhere is
// removed with the attempt, and what it points at is not.
TEST_F(TaskRunnerTest, PruningRemovesALinkATaskLeftNotWhatItPointsAt) {
  makeRunner({.retainAttempts = 0});
  TempDir outside("task-runner-outside");
  std::ofstream(outside.path() + "/precious") << "keep me\n";
  TaskSpec spec{.attempt = AttemptId::random(),
                .argv = {"sh", "-c", "ln -s " + outside.path() + " link && mkdir -p sub/deeper"}};
  ASSERT_EQ(run(spec).back().phase, TaskPhase::kFinished);
  EXPECT_TRUE(runLoopUntil(
      loop_, [&] { return !fs::exists(attemptDir(spec.attempt)); }, kBound));
  EXPECT_TRUE(fs::exists(outside.path() + "/precious"));
}

TEST(ResolveTaskUser, AWorkerThatIsNotRootRunsTasksAsItself) {
  auto user = resolveTaskUser("nobody", false, 1000);
  ASSERT_TRUE(user.ok()) << user.error().message;
  EXPECT_FALSE(user.value().uid);
  EXPECT_FALSE(user.value().gid);
}

TEST(ResolveTaskUser, AsRootTheNamedUsersIdsAreReturned) {
  auto user = resolveTaskUser("nobody", false, 0);
  ASSERT_TRUE(user.ok()) << user.error().message;
  ASSERT_TRUE(user.value().uid && user.value().gid);
  EXPECT_NE(*user.value().uid, 0u);
  EXPECT_EQ(user.value().name, "nobody");
}

TEST(ResolveTaskUser, AnUnknownUserIsRefusedNamingTheOption) {
  auto user = resolveTaskUser("regent-no-such-user", false, 0);
  ASSERT_FALSE(user.ok());
  EXPECT_NE(user.error().message.find("worker.task-user"), std::string::npos);
  EXPECT_NE(user.error().message.find("regent-no-such-user"), std::string::npos);
}

TEST(ResolveTaskUser, RootIsRefusedUnlessAllowedNamingTheOption) {
  auto refused = resolveTaskUser("root", false, 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("worker.task-allow-root"), std::string::npos);
  auto allowed = resolveTaskUser("root", true, 0);
  ASSERT_TRUE(allowed.ok()) << allowed.error().message;
  EXPECT_EQ(allowed.value().uid, uid_t{0});
}

TEST(ResolveTaskUser, AnEmptyUserIsRefusedAsRoot) {
  auto user = resolveTaskUser("", false, 0);
  ASSERT_FALSE(user.ok());
  EXPECT_NE(user.error().message.find("worker.task-user"), std::string::npos);
}

// A stream the shim cannot write (a full disk, here /dev/full) is reported at its end on the
// report descriptor, and the command still runs to its own end.
TEST(TaskShim, ReportsAStreamItCouldNotWrite) {
  EventLoop loop;
  const std::string shim = REGENT_BIN_DIR "/regent-task-shim";
  auto child = ChildProcess::spawn(
      loop, {.argv = {"/bin/sh", "-c",
                      "exec \"$0\" --parent-pid \"$PPID\" --report-fd 3 --output-max 1000 -- "
                      "/bin/sh -c 'echo lost; echo kept >&2; exit 4' 3>&1 1>/dev/full",
                      shim}});
  ASSERT_TRUE(child.ok()) << child.error().message;
  ChildExit exit = loop.run(child.value()->onExit());
  EXPECT_EQ(exit.exitStatus, 4);
  EXPECT_EQ(exit.out, "stdout capture failed after 0 bytes: No space left on device (errno 28)\n");
  EXPECT_EQ(exit.err, "kept\n");
}

// The shim's parent (here a throwaway process standing in for the worker) dies by SIGKILL: the
// shim's PDEATHSIG takes the whole group down, the command and its child included.
TEST(TaskShim, KillsItsGroupWhenItsParentDies) {
  TempDir dir("task-shim-test");
  const std::string shim = REGENT_BIN_DIR "/regent-task-shim";
  const std::string script = "echo $$ > main.pid; (exec sleep 1000) & echo $! > child.pid; wait";
  // Everything the forked processes need, prepared before fork.
  std::string cwd = dir.path();
  char parentPid[32] = "";
  const pid_t parent = ::fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {
    // The stand-in worker: async-signal-safe calls only until exec.
    pid_t self = ::getpid();
    char digits[32];
    int n = 0;
    do {
      digits[n++] = static_cast<char>('0' + self % 10);
      self /= 10;
    } while (self > 0);
    for (int i = 0; i < n; ++i) parentPid[i] = digits[n - 1 - i];
    parentPid[n] = '\0';
    if (::fork() == 0) {
      ::setsid();
      const char* argv[] = {shim.c_str(), "--parent-pid", parentPid, "--cwd",        cwd.c_str(),
                            "--",         "/bin/sh",      "-c",      script.c_str(), nullptr};
      ::execv(shim.c_str(), const_cast<char* const*>(argv));
      ::_exit(127);
    }
    ::execl("/bin/sleep", "sleep", "1000", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  auto pidIn = [&](const std::string& file) -> pid_t {
    pid_t pid = 0;
    regent::testing::waitUntil(
        [&] {
          std::string text = readFile(dir.path() + "/" + file);
          if (text.empty() || text.back() != '\n') return false;
          pid = static_cast<pid_t>(std::stol(text));
          return true;
        },
        kBound);
    return pid;
  };
  const pid_t main = pidIn("main.pid"), child = pidIn("child.pid");
  ASSERT_GT(main, 0);
  ASSERT_GT(child, 0);
  const pid_t pgid = pgidOf(main);
  ASSERT_GT(pgid, 0);
  EXPECT_EQ(pgidOf(child), pgid);
  EXPECT_TRUE(groupLive(pgid));
  ASSERT_EQ(::kill(parent, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(parent, &status, 0), parent);
  EXPECT_TRUE(regent::testing::waitUntil([&] { return !groupLive(pgid); }, kBound))
      << "the shim's group outlived its parent";
  EXPECT_FALSE(processLive(main));
  EXPECT_FALSE(processLive(child));
}

}  // namespace
}  // namespace regent::taskexecutor

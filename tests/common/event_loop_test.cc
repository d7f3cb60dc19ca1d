// EventLoop: kj promises, Cap'n Proto RPC, uv timers, signals, child processes, the thread pool
// and cross-thread wake-ups all on one thread; and an idle loop does not spin.
#include "common/event_loop.h"

#include <capnp/rpc-twoparty.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "loop_test.capnp.h"

namespace regent {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

double threadCpuMillis() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

std::string tempPath(const std::string& name) {
  return ::testing::TempDir() + "/event_loop_test_" + std::to_string(::getpid()) + "_" + name;
}

TEST(EventLoop, UvTimerCallbackRunsOnTheLoopThreadAndResolvesKjPromises) {
  EventLoop loop;
  UvTimer timer(loop);
  auto paf = kj::newPromiseAndFulfiller<std::thread::id>();
  timer.start(milliseconds(5), milliseconds(0),
              [&] { paf.fulfiller->fulfill(std::this_thread::get_id()); });
  EXPECT_EQ(loop.run(kj::mv(paf.promise)), std::this_thread::get_id());
  EXPECT_FALSE(timer.isActive());
}

TEST(EventLoop, UvTimerStartedAfterBusyWorkDoesNotFireEarly) {
  EventLoop loop;
  UvTimer timer(loop);
  // Let the loop run once so uv caches its time, then keep the thread busy without pumping:
  // uv's cached time is now 200 ms stale. This is the loop being busy, not synchronization.
  loop.run(kj::evalLater([] {}));
  std::this_thread::sleep_for(milliseconds(200));
  auto started = steady_clock::now();
  auto paf = kj::newPromiseAndFulfiller<void>();
  timer.start(milliseconds(100), milliseconds(0), [&] { paf.fulfiller->fulfill(); });
  loop.run(kj::mv(paf.promise));
  // uv keeps time in whole milliseconds, so allow 1 ms of truncation; a stale cached time
  // would fire the timer at once (~0 ms).
  EXPECT_GE(steady_clock::now() - started, milliseconds(99));
}

TEST(EventLoop, RepeatingUvTimerFiresUntilStopped) {
  EventLoop loop;
  UvTimer timer(loop);
  int fired = 0;
  auto paf = kj::newPromiseAndFulfiller<void>();
  timer.start(milliseconds(1), milliseconds(2), [&] {
    if (++fired == 3) {
      timer.stop();
      paf.fulfiller->fulfill();
    }
  });
  loop.run(kj::mv(paf.promise));
  EXPECT_FALSE(timer.isActive());
  // A stopped timer stays silent: a timer due 15 of its periods later fires after any of them
  // would have (uv runs due timers in the order they are due, however late the loop runs).
  UvTimer later(loop);
  auto laterFired = kj::newPromiseAndFulfiller<void>();
  later.start(milliseconds(30), milliseconds(0), [&] { laterFired.fulfiller->fulfill(); });
  loop.run(kj::mv(laterFired.promise));
  EXPECT_EQ(fired, 3);
}

TEST(EventLoop, UvTimerCallbackMayDestroyItsOwnTimer) {
  EventLoop loop;
  auto timer = std::make_unique<UvTimer>(loop);
  auto paf = kj::newPromiseAndFulfiller<void>();
  timer->start(milliseconds(1), milliseconds(1), [&] {
    timer.reset();
    paf.fulfiller->fulfill();
  });
  loop.run(kj::mv(paf.promise));
  EXPECT_EQ(timer, nullptr);
}

TEST(EventLoop, StoppingARepeatingTimerFromItsCallbackReleasesTheCallback) {
  EventLoop loop;
  UvTimer timer(loop);
  auto captured = std::make_shared<int>(0);
  auto paf = kj::newPromiseAndFulfiller<void>();
  timer.start(milliseconds(1), milliseconds(1), [&, captured] {
    timer.stop();
    paf.fulfiller->fulfill();
  });
  loop.run(kj::mv(paf.promise));
  EXPECT_EQ(captured.use_count(), 1) << "the stopped timer still holds its callback";
}

TEST(EventLoop, UvTimerCallbackMayRestartItsOwnTimer) {
  EventLoop loop;
  UvTimer timer(loop);
  int stage = 0;
  auto paf = kj::newPromiseAndFulfiller<void>();
  timer.start(milliseconds(1), milliseconds(0), [&] {
    stage = 1;
    timer.start(milliseconds(1), milliseconds(0), [&] {
      stage = 2;
      paf.fulfiller->fulfill();
    });
  });
  loop.run(kj::mv(paf.promise));
  EXPECT_EQ(stage, 2);
}

TEST(EventLoop, SigtermIsDeliveredToItsWatcherOnTheLoopThread) {
  EventLoop loop;
  auto paf = kj::newPromiseAndFulfiller<std::thread::id>();
  SignalWatcher watcher(loop, SIGTERM, [&] { paf.fulfiller->fulfill(std::this_thread::get_id()); });
  ASSERT_EQ(::kill(::getpid(), SIGTERM), 0);
  EXPECT_EQ(loop.run(kj::mv(paf.promise)), std::this_thread::get_id());
}

TEST(EventLoop, SigintIsDeliveredToItsWatcher) {
  EventLoop loop;
  int deliveries = 0;
  auto paf = kj::newPromiseAndFulfiller<void>();
  SignalWatcher watcher(loop, SIGINT, [&] {
    ++deliveries;
    paf.fulfiller->fulfill();
  });
  ASSERT_EQ(::kill(::getpid(), SIGINT), 0);
  loop.run(kj::mv(paf.promise));
  EXPECT_EQ(deliveries, 1);
}

// Every behaviour of ChildProcess holds both ways it starts a child: clone with a pidfd, and
// libuv's fork where the kernel refuses that clone.
class ChildProcessTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { ChildProcess::useForkForTesting(GetParam()); }
  void TearDown() override { ChildProcess::useForkForTesting(false); }
};

INSTANTIATE_TEST_SUITE_P(Spawn, ChildProcessTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "fork" : "clone";
                         });

TEST_P(ChildProcessTest, CapturesStdoutStderrAndExitStatus) {
  EventLoop loop;
  auto child = ChildProcess::spawn(
      loop, {.argv = {"/bin/sh", "-c", "echo \"out $GREETING\"; echo err >&2; exit 3"},
             .env = {"GREETING=hello"}});
  ASSERT_TRUE(child.ok()) << child.error().message;
  EXPECT_GT(child.value()->pid(), 0);
  ChildExit exit = loop.run(child.value()->onExit());
  EXPECT_EQ(exit.exitStatus, 3);
  EXPECT_EQ(exit.termSignal, 0);
  EXPECT_EQ(exit.out, "out hello\n");
  EXPECT_EQ(exit.err, "err\n");
}

TEST_P(ChildProcessTest, CapturesLargeOutputCompletely) {
  EventLoop loop;
  auto child = ChildProcess::spawn(
      loop, {.argv = {"/bin/sh", "-c", "head -c 1048576 /dev/zero | tr '\\0' a"}});
  ASSERT_TRUE(child.ok()) << child.error().message;
  ChildExit exit = loop.run(child.value()->onExit());
  EXPECT_EQ(exit.exitStatus, 0);
  ASSERT_EQ(exit.out.size(), 1048576u);
  EXPECT_EQ(exit.out.find_first_not_of('a'), std::string::npos);
}

TEST_P(ChildProcessTest, ReportsTheSignalThatKilledIt) {
  EventLoop loop;
  auto child = ChildProcess::spawn(loop, {.argv = {"sleep", "30"}});
  ASSERT_TRUE(child.ok()) << child.error().message;
  ASSERT_TRUE(child.value()->signal(SIGKILL).ok());
  ChildExit exit = loop.run(child.value()->onExit());
  EXPECT_EQ(exit.termSignal, SIGKILL);
  EXPECT_FALSE(child.value()->signal(SIGTERM).ok()) << "signalling an exited child must fail";
}

TEST_P(ChildProcessTest, WritesOutputToFilesWhenNotCapturing) {
  EventLoop loop;
  std::string outPath = tempPath("out.log"), errPath = tempPath("err.log");
  ::unlink(outPath.c_str());
  ::unlink(errPath.c_str());
  auto child = ChildProcess::spawn(loop, {.argv = {"/bin/sh", "-c", "echo to-out; echo to-err >&2"},
                                          .captureOutput = false,
                                          .stdoutPath = outPath,
                                          .stderrPath = errPath});
  ASSERT_TRUE(child.ok()) << child.error().message;
  ChildExit exit = loop.run(child.value()->onExit());
  EXPECT_EQ(exit.exitStatus, 0);
  EXPECT_EQ(exit.out, "");
  std::stringstream out, err;
  out << std::ifstream(outPath).rdbuf();
  err << std::ifstream(errPath).rdbuf();
  EXPECT_EQ(out.str(), "to-out\n");
  EXPECT_EQ(err.str(), "to-err\n");
  ::unlink(outPath.c_str());
  ::unlink(errPath.c_str());
}

TEST_P(ChildProcessTest, NeverOpensItsOutputFilesThroughALinkOrOverAnExistingFile) {
  EventLoop loop;
  std::string target = tempPath("target.log"), outPath = tempPath("linked-out.log");
  ::unlink(outPath.c_str());
  std::ofstream(target) << "kept";
  ASSERT_EQ(::symlink(target.c_str(), outPath.c_str()), 0);
  auto linked = ChildProcess::spawn(loop, {.argv = {"/bin/sh", "-c", "echo written"},
                                           .captureOutput = false,
                                           .stdoutPath = outPath});
  ASSERT_FALSE(linked.ok());
  EXPECT_NE(linked.error().message.find(outPath), std::string::npos) << linked.error().message;
  ::unlink(outPath.c_str());
  // An existing regular file is not appended to either.
  auto existing = ChildProcess::spawn(loop, {.argv = {"/bin/sh", "-c", "echo written"},
                                             .captureOutput = false,
                                             .stdoutPath = target});
  ASSERT_FALSE(existing.ok());
  std::stringstream kept;
  kept << std::ifstream(target).rdbuf();
  EXPECT_EQ(kept.str(), "kept");
  ::unlink(target.c_str());
}

TEST_P(ChildProcessTest, RunsInTheGivenWorkingDirectory) {
  EventLoop loop;
  auto child = ChildProcess::spawn(loop, {.argv = {"pwd"}, .cwd = "/usr"});
  ASSERT_TRUE(child.ok()) << child.error().message;
  EXPECT_EQ(loop.run(child.value()->onExit()).out, "/usr\n");
}

TEST_P(ChildProcessTest, MissingProgramFailsNamingIt) {
  EventLoop loop;
  auto child = ChildProcess::spawn(loop, {.argv = {"/nonexistent/regent-no-such-binary"}});
  ASSERT_FALSE(child.ok());
  EXPECT_NE(child.error().message.find("/nonexistent/regent-no-such-binary"), std::string::npos)
      << child.error().message;
  // The loop keeps working afterwards.
  auto again = ChildProcess::spawn(loop, {.argv = {"true"}});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(loop.run(again.value()->onExit()).exitStatus, 0);
}

TEST_P(ChildProcessTest, AChildThatDoesNotInheritTheEnvironmentSeesOnlyItsOwnEntries) {
  ::setenv("REGENT_EVENT_LOOP_TEST_SECRET", "parent only", 1);
  EventLoop loop;
  auto child = ChildProcess::spawn(
      loop, {.argv = {"/usr/bin/env"}, .env = {"A=1", "B=2", "A=3"}, .inheritEnvironment = false});
  ::unsetenv("REGENT_EVENT_LOOP_TEST_SECRET");
  ASSERT_TRUE(child.ok()) << child.error().message;
  ChildExit exit = loop.run(child.value()->onExit());
  EXPECT_EQ(exit.exitStatus, 0);
  EXPECT_EQ(exit.out, "B=2\nA=3\n");
}

TEST_P(ChildProcessTest, EnvironmentEntryWithoutEqualsIsRefusedNamingIt) {
  EventLoop loop;
  auto child = ChildProcess::spawn(loop, {.argv = {"true"}, .env = {"A=1", "JUSTANAME"}});
  ASSERT_FALSE(child.ok());
  EXPECT_NE(child.error().message.find("\"JUSTANAME\""), std::string::npos) << child.error().message;
}

bool reaped(int pid) {
  // Gone from the process table: not running, and not a zombie waiting for its parent.
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

TEST_P(ChildProcessTest, ChildDestroyedJustBeforeItsLoopIsStillKilledAndReaped) {
  int pid = 0;
  {
    EventLoop loop;
    auto child = ChildProcess::spawn(loop, {.argv = {"sleep", "30"}});
    ASSERT_TRUE(child.ok());
    pid = child.value()->pid();
    child.value() = nullptr;
  }  // The loop is destroyed before it had a chance to see the child exit.
  EXPECT_TRUE(reaped(pid)) << "child " << pid << " was left running or unreaped";
}

TEST_P(ChildProcessTest, DestroyingARunningChildKillsIt) {
  EventLoop loop;
  auto child = ChildProcess::spawn(loop, {.argv = {"sleep", "30"}});
  ASSERT_TRUE(child.ok());
  int pid = child.value()->pid();
  child.value() = nullptr;
  // The loop reaps it; wait (bounded) until the pid is gone.
  auto deadline = steady_clock::now() + std::chrono::seconds(10);
  while (!reaped(pid) && steady_clock::now() < deadline) {
    loop.run(loop.timer().afterDelay(5 * kj::MILLISECONDS));
  }
  EXPECT_TRUE(reaped(pid)) << "child " << pid << " still exists";
}

TEST_P(ChildProcessTest, NewSessionMakesTheChildLeadItsOwnSessionAndGroup) {
  EventLoop loop;
  auto child = ChildProcess::spawn(loop, {.argv = {"sleep", "30"}, .newSession = true});
  ASSERT_TRUE(child.ok()) << child.error().message;
  const int pid = child.value()->pid();
  // spawn returns once the child has exec'd, so its setsid() has happened.
  EXPECT_EQ(::getpgid(pid), pid);
  EXPECT_EQ(::getsid(pid), pid);
  ASSERT_TRUE(child.value()->signal(SIGKILL).ok());
  loop.run(child.value()->onExit());
}

TEST_P(ChildProcessTest, WithoutNewSessionTheChildStaysInTheParentsGroup) {
  EventLoop loop;
  auto child = ChildProcess::spawn(loop, {.argv = {"sleep", "30"}});
  ASSERT_TRUE(child.ok()) << child.error().message;
  EXPECT_EQ(::getpgid(child.value()->pid()), ::getpgrp());
  ASSERT_TRUE(child.value()->signal(SIGKILL).ok());
  loop.run(child.value()->onExit());
}

TEST_P(ChildProcessTest, ExtraFdsArriveAsFdThreeOnwardAndStdinIsDevNull) {
  EventLoop loop;
  int pipes[2][2];
  ASSERT_EQ(::pipe2(pipes[0], O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(pipes[1], O_CLOEXEC), 0);
  auto child = ChildProcess::spawn(
      loop, {.argv = {"/bin/sh", "-c", "echo three >&3; echo four >&4; readlink /proc/self/fd/0"},
             .extraFds = {pipes[0][1], pipes[1][1]}});
  ::close(pipes[0][1]);
  ::close(pipes[1][1]);
  ASSERT_TRUE(child.ok()) << child.error().message;
  ChildExit exit = loop.run(child.value()->onExit());
  EXPECT_EQ(exit.exitStatus, 0) << exit.err;
  EXPECT_EQ(exit.out, "/dev/null\n");
  for (int i = 0; i < 2; ++i) {
    char buffer[16] = {};
    ssize_t n = ::read(pipes[i][0], buffer, sizeof buffer);
    EXPECT_EQ(std::string(buffer, n > 0 ? static_cast<size_t>(n) : 0),
              i == 0 ? "three\n" : "four\n");
    ::close(pipes[i][0]);
  }
}

TEST_P(ChildProcessTest, RunsAsTheGivenUserAndGroupWithoutSupplementaryGroups) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to change user";
  struct passwd* nobody = ::getpwnam("nobody");
  ASSERT_NE(nobody, nullptr);
  EventLoop loop;
  auto child = ChildProcess::spawn(
      loop, {.argv = {"/bin/sh", "-c", "id -u; id -g; id -G"}, .uid = nobody->pw_uid,
             .gid = nobody->pw_gid});
  ASSERT_TRUE(child.ok()) << child.error().message;
  ChildExit exit = loop.run(child.value()->onExit());
  const std::string uid = std::to_string(nobody->pw_uid), gid = std::to_string(nobody->pw_gid);
  EXPECT_EQ(exit.out, uid + "\n" + gid + "\n" + gid + "\n") << exit.err;
}

TEST(EventLoop, BlockingWorkRunsOnThePoolAndItsResultArrivesOnTheLoopThread) {
  EventLoop loop;
  auto loopThread = std::this_thread::get_id();
  std::thread::id workerThread;
  auto promise = loop.runBlocking([&] {
    workerThread = std::this_thread::get_id();
    return 6 * 7;
  });
  auto resultThread = std::make_shared<std::thread::id>();
  int value = loop.run(promise.then([resultThread](int v) {
    *resultThread = std::this_thread::get_id();
    return v;
  }));
  EXPECT_EQ(value, 42);
  EXPECT_NE(workerThread, loopThread);
  EXPECT_EQ(*resultThread, loopThread);
}

TEST(EventLoop, BlockingWorkExceptionRejectsThePromise) {
  EventLoop loop;
  auto promise = loop.runBlocking([]() -> int { throw std::runtime_error("disk on fire"); });
  try {
    loop.run(kj::mv(promise));
    FAIL() << "expected an exception";
  } catch (const kj::Exception& e) {
    EXPECT_NE(std::string(e.getDescription().cStr()).find("disk on fire"), std::string::npos);
  }
}

TEST(EventLoop, ManyBlockingCallsInFlightAllComplete) {
  EventLoop loop;
  kj::Vector<kj::Promise<int>> promises;
  for (int i = 0; i < 200; ++i) promises.add(loop.runBlocking([i] { return i * i; }));
  auto results = loop.run(kj::joinPromises(promises.releaseAsArray()));
  ASSERT_EQ(results.size(), 200u);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(results[i], i * i);
}

TEST(EventLoop, DroppedBlockingWorkThatHasNotStartedNeverRuns) {
  // Declared before the loop: pool threads may touch them until the loop is destroyed.
  constexpr int kPoolThreads = 4;  // libuv's default pool size (UV_THREADPOOL_SIZE unset).
  std::atomic<int> blockersStarted{0};
  std::atomic<int> droppedRan{0};
  std::mutex gate;
  std::unique_lock<std::mutex> closed(gate);

  EventLoop loop;
  // Occupy every pool thread, so the work queued next cannot start.
  kj::Vector<kj::Promise<void>> blockers;
  for (int i = 0; i < kPoolThreads; ++i) {
    blockers.add(loop.runBlocking([&] {
      ++blockersStarted;
      std::lock_guard<std::mutex> wait(gate);
    }));
  }
  auto deadline = steady_clock::now() + std::chrono::seconds(10);
  while (blockersStarted.load() < kPoolThreads && steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_EQ(blockersStarted.load(), kPoolThreads);
  {
    kj::Vector<kj::Promise<void>> dropped;
    for (int i = 0; i < 50; ++i) dropped.add(loop.runBlocking([&] { ++droppedRan; }));
  }
  closed.unlock();
  loop.run(kj::joinPromises(blockers.releaseAsArray()));
  // Later work still completes, after the queue has been drained of anything left.
  EXPECT_EQ(loop.run(loop.runBlocking([] { return 1; })), 1);
  EXPECT_EQ(droppedRan.load(), 0);
}

TEST(EventLoop, PostFromAnotherThreadWakesTheLoop) {
  EventLoop loop;
  auto paf = kj::newPromiseAndFulfiller<std::thread::id>();
  std::thread other([&] {
    loop.post([&] { paf.fulfiller->fulfill(std::this_thread::get_id()); });
  });
  EXPECT_EQ(loop.run(kj::mv(paf.promise)), std::this_thread::get_id());
  other.join();
}

TEST(EventLoop, PostsFromManyThreadsAllRunInOrderPerThread) {
  EventLoop loop;
  constexpr int kThreads = 4, kPerThread = 500;
  std::vector<std::vector<int>> seen(kThreads);
  int total = 0;
  auto paf = kj::newPromiseAndFulfiller<void>();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        loop.post([&, t, i] {
          seen[t].push_back(i);
          if (++total == kThreads * kPerThread) paf.fulfiller->fulfill();
        });
      }
    });
  }
  loop.run(kj::mv(paf.promise));
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(seen[t].size(), static_cast<size_t>(kPerThread));
    for (int i = 0; i < kPerThread; ++i) EXPECT_EQ(seen[t][i], i);
  }
}

TEST(EventLoop, IdleLoopDoesNotSpin) {
  EventLoop loop;
  // Active uv handles with nothing due: a signal watcher and a timer far in the future.
  SignalWatcher watcher(loop, SIGUSR2, [] {});
  UvTimer far(loop);
  far.start(milliseconds(60'000), milliseconds(0), [] {});
  loop.run(kj::evalLater([] {}));
  uint64_t pumpsBefore = loop.pumpCountForTests();
  double cpuBefore = threadCpuMillis();
  loop.run(loop.timer().afterDelay(300 * kj::MILLISECONDS));
  uint64_t pumps = loop.pumpCountForTests() - pumpsBefore;
  double cpuMs = threadCpuMillis() - cpuBefore;
  // A spinning pump would run hundreds of thousands of times and burn ~300 ms of CPU.
  EXPECT_LE(pumps, 5u);
  EXPECT_LT(cpuMs, 50.0);
}

class LoopProbeServer final : public LoopProbe::Server {
 public:
  explicit LoopProbeServer(EventLoop& loop) : loop_(loop) {}

  kj::Promise<void> reverseLater(ReverseLaterContext context) override {
    auto params = context.getParams();
    std::string text = params.getText();
    auto timer = kj::heap<UvTimer>(loop_);
    auto fired = kj::newPromiseAndFulfiller<void>();
    timer->start(milliseconds(params.getDelayMs()), milliseconds(0),
                 [f = kj::mv(fired.fulfiller)]() mutable { f->fulfill(); });
    auto loopThread = std::this_thread::get_id();
    return fired.promise.attach(kj::mv(timer))
        .then([this, text] {
          return loop_.runBlocking([text] {
            return std::make_pair(std::string(text.rbegin(), text.rend()),
                                  std::this_thread::get_id());
          });
        })
        .then([context, loopThread](std::pair<std::string, std::thread::id> result) mutable {
          auto results = context.getResults();
          results.setText(result.first);
          results.setWorkerThreadDiffers(result.second != loopThread);
        });
  }

 private:
  EventLoop& loop_;
};

TEST(EventLoop, CapnpRpcOverTcpRunsOnTheSameLoopAsUvWork) {
  EventLoop loop;
  auto& network = loop.io().getNetwork();
  auto address = loop.run(network.parseAddress("127.0.0.1", 0));
  auto listener = address->listen();
  auto port = listener->getPort();

  capnp::TwoPartyServer server(kj::heap<LoopProbeServer>(loop));
  auto serving = server.listen(*listener);

  auto connectAddress = loop.run(network.parseAddress("127.0.0.1", port));
  auto stream = loop.run(connectAddress->connect());
  capnp::TwoPartyClient client(*stream);
  auto probe = client.bootstrap().castAs<LoopProbe>();

  kj::Vector<kj::Promise<void>> calls;
  std::vector<std::string> replies(20);
  std::atomic<int> offThread{0};
  for (int i = 0; i < 20; ++i) {
    auto request = probe.reverseLaterRequest();
    request.setText("call-" + std::to_string(i));
    request.setDelayMs(static_cast<uint32_t>(i % 5));
    calls.add(request.send().then([&, i](capnp::Response<LoopProbe::ReverseLaterResults>&& r) {
      replies[i] = r.getText();
      if (r.getWorkerThreadDiffers()) ++offThread;
    }));
  }
  loop.run(kj::joinPromises(calls.releaseAsArray()));
  for (int i = 0; i < 20; ++i) {
    std::string expected = "call-" + std::to_string(i);
    EXPECT_EQ(replies[i], std::string(expected.rbegin(), expected.rend()));
  }
  EXPECT_EQ(offThread.load(), 20);
}

}  // namespace
}  // namespace regent

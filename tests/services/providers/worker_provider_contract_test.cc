// The WorkerProvider contract (services/resourcemanager/worker_provider.h), run against each
// provider with a stand-in worker: a started worker is listed, runs in a session of its own with
// none of this process's environment, and gets its configuration by file; an ended worker is
// reported once and no longer listed; release() ends a worker that does not stop by itself; a
// second provider (a new leader's, on the same host) lists and reaps the workers the first one
// started; destroying a provider leaves its workers running. The process provider runs here
// against real processes; its stand-in worker is a shell script that records its arguments and
// environment, then sleeps.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "common/event_sink.h"
#include "services/providers/process_worker_provider.h"
#include "tests/fixtures/started_workers.h"
#include "tests/fixtures/temp_dir_test_util.h"

namespace regent::providers {
namespace {

namespace fs = std::filesystem;
using regent::testing::TempDir;

constexpr Duration kWait{20000};

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// No process `pid`, or only its zombie (a stand-in this test process started and nobody reaps).
// /proc is read with read(2): a stream throws when the process goes away under it.
bool processGone(int pid) {
  if (::kill(pid, 0) != 0) return true;
  const int fd = ::open(("/proc/" + std::to_string(pid) + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  char buffer[512];
  const ssize_t n = ::read(fd, buffer, sizeof buffer);
  ::close(fd);
  if (n <= 0) return true;
  const std::string stat(buffer, static_cast<size_t>(n));
  const size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

class RecordingListener final : public resourcemanager::WorkerProviderListener {
 public:
  void workerEnded(const std::string& id, const std::string& reason) override {
    ended.push_back(id + ": " + reason);
  }
  std::vector<std::string> ended;
};

class ProcessProviderContractTest : public ::testing::Test {
 protected:
  ProcessProviderContractTest() {
    ::chmod(root_.path().c_str(), 0711);
    // The stand-in worker: its arguments and environment (the env file appears whole, by a
    // rename, once both are written), then a long sleep (exec: its pid is the started process's).
    script_ = root_.path() + "/fake-worker";
    std::ofstream(script_) << "#!/bin/sh\n"
                              "dir=$(dirname \"$2\")\n"
                              "echo \"$@\" > \"$dir/args\"\n"
                              "env > \"$dir/env.tmp\" && mv \"$dir/env.tmp\" \"$dir/env\"\n"
                              "exec sleep 600\n";
    ::chmod(script_.c_str(), 0755);
  }

  ~ProcessProviderContractTest() override {
    // No stand-in left running, whatever the test did.
    testing::killStartedWorkers(root_.path() + "/data");
  }

  kj::Own<ProcessWorkerProvider> provider(const std::string& binary = "") {
    ProcessProviderOptions options;
    options.dataRoot = root_.path() + "/data";
    options.workerBinary = binary.empty() ? script_ : binary;
    options.clusterId = "test";
    options.settings = {{"cluster-id", "test"}, {"worker.slots", "2"}};
    options.pollInterval = Duration(100);
    auto created = ProcessWorkerProvider::create(loop_, events_, std::move(options));
    if (!created.ok()) ADD_FAILURE() << created.error().message;
    return kj::mv(created).value();
  }

  std::vector<std::string> list(ProcessWorkerProvider& provider) {
    auto listed = loop_.run(provider.list());
    EXPECT_TRUE(listed.ok()) << (listed.ok() ? "" : listed.error().message);
    return listed.ok() ? listed.value() : std::vector<std::string>{};
  }

  // The pid the provider recorded for `id`.
  int pidOf(ProcessWorkerProvider& provider, const std::string& id) {
    std::ifstream state(provider.workerDir(id) + "/provider");
    std::string cluster;
    int pid = 0;
    state >> cluster >> pid;
    return pid;
  }

  // Runs the loop until `done` or `kWait`.
  bool runUntil(const std::function<bool()>& done) {
    const auto until = std::chrono::steady_clock::now() + kWait;
    while (!done() && std::chrono::steady_clock::now() < until) {
      loop_.run(loop_.timer().afterDelay(20 * kj::MILLISECONDS));
    }
    return done();
  }

  TempDir root_{"regent-provider"};
  std::string script_;
  EventLoop loop_;
  NullEventSink events_;
};

TEST_F(ProcessProviderContractTest, AStartedWorkerIsListedAndRunsInItsOwnSessionWithItsConfigByFile) {
  ::setenv("REGENT_PROVIDER_TEST_SECRET", "x", 1);
  auto started = provider();
  ASSERT_TRUE(loop_.run(started->start("e1-1", 1)).ok());
  EXPECT_EQ(list(*started), (std::vector<std::string>{"e1-1"}));
  const std::string dir = started->workerDir("e1-1");
  ASSERT_TRUE(runUntil([&] { return fs::exists(dir + "/env"); }));
  const int pid = pidOf(*started, "e1-1");
  ASSERT_GT(pid, 0);
  EXPECT_EQ(::getsid(pid), pid) << "the worker leads a session of its own";
  // Its configuration: one file, only its owner may read it; named on the command line, the
  // only argument.
  EXPECT_EQ(readFile(dir + "/args"), "--config " + dir + "/worker.yaml\n");
  struct stat info {};
  ASSERT_EQ(::stat((dir + "/worker.yaml").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  const std::string yaml = readFile(dir + "/worker.yaml");
  EXPECT_NE(yaml.find("worker.slots: \"2\""), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("worker.provider-id: \"process:e1-1\""), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("worker.data-dir: \"" + dir + "/data\""), std::string::npos) << yaml;
  // None of this process's environment.
  const std::string env = readFile(dir + "/env");
  EXPECT_EQ(env.find("REGENT_"), std::string::npos) << env;
  EXPECT_NE(env.find("PATH=/usr/local/bin:/usr/bin:/bin"), std::string::npos) << env;
  // Its output files are its own.
  ASSERT_EQ(::stat((dir + "/worker.err").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  // The provider vouches for that process under that id, for no other.
  EXPECT_EQ(started->vouches("e1-1", "any", static_cast<uint32_t>(pid)),
            resourcemanager::Vouch::kYes);
  EXPECT_EQ(started->vouches("e1-1", "any", static_cast<uint32_t>(pid + 1)),
            resourcemanager::Vouch::kNo);
  EXPECT_EQ(started->vouches("e9-9", "any", static_cast<uint32_t>(pid)),
            resourcemanager::Vouch::kUnknown);
}

TEST_F(ProcessProviderContractTest, AWorkerThatEndsIsReportedOnceAndNoLongerListed) {
  auto started = provider();
  RecordingListener listener;
  started->setListener(&listener);
  ASSERT_TRUE(loop_.run(started->start("e1-1", 1)).ok());
  ASSERT_TRUE(loop_.run(started->start("e1-2", 1)).ok());
  ASSERT_EQ(::kill(pidOf(*started, "e1-1"), SIGKILL), 0);
  ASSERT_TRUE(runUntil([&] { return !listener.ended.empty(); }));
  ASSERT_EQ(listener.ended.size(), 1u);
  EXPECT_EQ(listener.ended[0].rfind("e1-1: ", 0), 0u) << listener.ended[0];
  EXPECT_NE(listener.ended[0].find("killed by signal 9"), std::string::npos) << listener.ended[0];
  EXPECT_EQ(list(*started), (std::vector<std::string>{"e1-2"}));
  started->setListener(nullptr);
}

TEST_F(ProcessProviderContractTest, ReleaseEndsAWorkerThatDoesNotStopAndForgetsIt) {
  auto started = provider();
  RecordingListener listener;
  started->setListener(&listener);
  ASSERT_TRUE(loop_.run(started->start("e1-1", 1)).ok());
  const int pid = pidOf(*started, "e1-1");
  // The stand-in never stops by itself: the grace passes, then SIGKILL.
  const Status released = loop_.run(started->release("e1-1", Duration(300)));
  EXPECT_TRUE(released.ok()) << (released.ok() ? "" : released.error().message);
  EXPECT_TRUE(runUntil([&] { return processGone(pid); })) << "pid " << pid << " still runs";
  EXPECT_TRUE(list(*started).empty());
  EXPECT_FALSE(fs::exists(started->workerDir("e1-1")));
  EXPECT_TRUE(listener.ended.empty()) << "a released worker is not reported as ended";
  started->setListener(nullptr);
}

TEST_F(ProcessProviderContractTest, ANewLeadersProviderListsAndReapsWhatTheFirstStarted) {
  int pid = 0;
  {
    auto first = provider();
    ASSERT_TRUE(loop_.run(first->start("e1-1", 1)).ok());
    pid = pidOf(*first, "e1-1");
    // Destroying the provider (its master stops) leaves the worker running.
  }
  ASSERT_EQ(::kill(pid, 0), 0) << "the worker died with its provider";
  auto second = provider();
  EXPECT_EQ(list(*second), (std::vector<std::string>{"e1-1"}));
  // Ended while the second provider follows it (not its child): reported by the poll.
  RecordingListener listener;
  second->setListener(&listener);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_TRUE(runUntil([&] { return !listener.ended.empty(); }));
  EXPECT_NE(listener.ended[0].find("no longer running"), std::string::npos) << listener.ended[0];
  EXPECT_TRUE(list(*second).empty());
  second->setListener(nullptr);
}

TEST_F(ProcessProviderContractTest, ANewLeadersProviderReleasesAWorkerItDidNotStart) {
  int pid = 0;
  {
    auto first = provider();
    ASSERT_TRUE(loop_.run(first->start("e1-1", 1)).ok());
    pid = pidOf(*first, "e1-1");
  }
  auto second = provider();
  ASSERT_EQ(list(*second).size(), 1u);
  EXPECT_TRUE(loop_.run(second->release("e1-1", Duration(200))).ok());
  EXPECT_TRUE(runUntil([&] { return processGone(pid); })) << "pid " << pid << " still runs";
}

TEST_F(ProcessProviderContractTest, ANewTermFinishesAReleaseTheLastTermLeftHalfDone) {
  auto started = provider();
  ASSERT_TRUE(loop_.run(started->start("e1-1", 1)).ok());
  const int pid = pidOf(*started, "e1-1");
  {
    // The term ends while the release waits for the worker to stop: its promise is dropped.
    auto releasing = started->release("e1-1", Duration(60000));
    loop_.run(loop_.timer().afterDelay(100 * kj::MILLISECONDS));
  }
  ASSERT_EQ(::kill(-pid, SIGKILL), 0);  // The worker stops after all (it was asked to).
  ASSERT_TRUE(runUntil([&] { return processGone(pid); }));
  // The next term lists: the worker is not counted, and its directory goes as the release
  // would have removed it.
  EXPECT_TRUE(list(*started).empty());
  EXPECT_TRUE(runUntil([&] { return !fs::exists(started->workerDir("e1-1")); }))
      << started->workerDir("e1-1") << " stays";
}

TEST_F(ProcessProviderContractTest, AWorkerBinaryThatExitsAtOnceIsReportedEnded) {
  auto started = provider("/bin/false");
  RecordingListener listener;
  started->setListener(&listener);
  ASSERT_TRUE(loop_.run(started->start("e1-1", 1)).ok());
  ASSERT_TRUE(runUntil([&] { return !listener.ended.empty(); }));
  EXPECT_NE(listener.ended[0].find("exited with status 1"), std::string::npos)
      << listener.ended[0];
  started->setListener(nullptr);
}

TEST_F(ProcessProviderContractTest, AnIdThatIsNotADirectoryNameIsRefusedAndNothingIsTouched) {
  auto started = provider();
  const std::string outside = root_.path() + "/outside";
  fs::create_directories(outside);
  for (const std::string& id : {std::string(".."), std::string("../outside"), std::string("a/b"),
                                std::string("")}) {
    EXPECT_FALSE(loop_.run(started->start(id, 1)).ok()) << id;
    EXPECT_FALSE(loop_.run(started->release(id, Duration(10))).ok()) << id;
  }
  EXPECT_TRUE(fs::exists(outside));
  EXPECT_TRUE(fs::exists(root_.path() + "/data/test"));
}

TEST_F(ProcessProviderContractTest, AMissingOrUnrunnableBinaryIsRefusedNamingTheOption) {
  ProcessProviderOptions options;
  options.dataRoot = root_.path() + "/data";
  options.clusterId = "test";
  options.workerBinary = root_.path() + "/no-such-worker";
  auto missing = ProcessWorkerProvider::create(loop_, events_, options);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("resourcemanager.process.worker-binary"),
            std::string::npos);
  EXPECT_NE(missing.error().message.find("no-such-worker"), std::string::npos);
  options.workerBinary = root_.path();  // A directory.
  auto directory = ProcessWorkerProvider::create(loop_, events_, options);
  ASSERT_FALSE(directory.ok());
  EXPECT_NE(directory.error().message.find("not a regular file"), std::string::npos);
}

}  // namespace
}  // namespace regent::providers

// A worker's data directory cannot be turned against it (docs/security.md, "Tasks"; issue 24,
// class 5), on real processes (tests run as root, tasks as worker.task-user nobody): a data
// directory the task user owns or may write, or under a parent anyone may write without the sticky
// bit, is refused at start naming the path, while a /tmp-like sticky parent is accepted; an
// `attempts` that is not a directory fails at start; an `attempts` replaced by a symbolic link
// while the worker runs makes it create, chmod or delete nothing outside its data directory; and a
// worker that can no longer create attempt directories says so on /readyz and takes no more tasks,
// which run elsewhere instead of failing.
#include <gtest/gtest.h>
#include <kj/compat/http.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pwd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tests/fixtures/process_harness.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/integration/http_get_test_util.h"
#include "tests/integration/job_cluster_test_util.h"

namespace regent::testing {
namespace {

namespace fs = std::filesystem;

constexpr Duration kStartTimeout{60000};
constexpr Duration kExitTimeout{30000};
constexpr const char* kNoZooKeeper = "127.0.0.1:1";

uid_t nobodyUid() {
  struct passwd* entry = ::getpwnam("nobody");
  return entry != nullptr ? entry->pw_uid : static_cast<uid_t>(65534);
}

// Every entry under `dir` with its mode and owner, for "untouched" comparisons.
std::set<std::string> snapshot(const std::string& dir) {
  std::set<std::string> entries;
  struct stat self {};
  if (::lstat(dir.c_str(), &self) == 0) {
    entries.insert(". mode=" + std::to_string(self.st_mode & 07777) +
                   " uid=" + std::to_string(self.st_uid));
  }
  std::error_code error;
  for (const auto& entry : fs::recursive_directory_iterator(dir, error)) {
    struct stat info {};
    ::lstat(entry.path().c_str(), &info);
    entries.insert(fs::relative(entry.path(), dir).string() +
                   " mode=" + std::to_string(info.st_mode & 07777) +
                   " uid=" + std::to_string(info.st_uid));
  }
  return entries;
}

std::string joined(const std::set<std::string>& entries) {
  std::string text;
  for (const std::string& entry : entries) text += "  " + entry + "\n";
  return text;
}

class WorkerDataDirStart : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "the task user applies to a worker running as root";
  }

  // regent-worker on `dataDir`, pointed at no ZooKeeper (it never registers).
  Result<std::unique_ptr<ProcessHarness>> startWorker(const std::string& dataDir) {
    ProcessOptions options;
    options.argv = {REGENT_BIN_DIR "/regent-worker"};
    for (const std::string& set :
         {"worker.data-dir=" + dataDir, std::string("worker.http.bind=127.0.0.1:0"),
          std::string("ha.zookeeper.quorum=") + kNoZooKeeper,
          std::string("cluster.registration.max-timeout=500ms")}) {
      options.argv.push_back("--set");
      options.argv.push_back(set);
    }
    options.outputPath = dir_.path() + "/worker-" + std::to_string(runs_++) + ".log";
    return ProcessHarness::start(std::move(options));
  }

  // Starts a worker on `dataDir` and expects it to exit 2 with an error naming `named` and saying
  // `why`, before "worker starting".
  void expectRefused(const std::string& dataDir, const std::string& named, const std::string& why) {
    auto worker = startWorker(dataDir);
    ASSERT_OK(worker);
    auto exit = worker.value()->waitForExit(kExitTimeout);
    if (!exit) {
      ADD_FAILURE() << "the worker on " << dataDir << " did not exit:\n" << worker.value()->output();
      ASSERT_OK(worker.value()->kill());
      return;
    }
    EXPECT_TRUE(exit->exited() && exit->exitCode == 2) << exit->describe();
    const std::string output = worker.value()->output();
    EXPECT_NE(output.find(named), std::string::npos) << "not naming " << named << ":\n" << output;
    EXPECT_NE(output.find(why), std::string::npos) << "not saying " << why << ":\n" << output;
    EXPECT_EQ(output.find("worker starting"), std::string::npos) << output;
  }

  // Starts a worker on `dataDir` and expects it to start (its "worker starting" line), then stops
  // it.
  void expectAccepted(const std::string& dataDir) {
    auto worker = startWorker(dataDir);
    ASSERT_OK(worker);
    auto line = worker.value()->waitForLine(std::regex("worker starting"), kStartTimeout);
    EXPECT_TRUE(line.ok()) << worker.value()->output();
    ASSERT_OK(worker.value()->terminate());
    auto exit = worker.value()->waitForExit(kExitTimeout);
    ASSERT_TRUE(exit);
    EXPECT_TRUE(exit->exited() && exit->exitCode == 0) << exit->describe();
  }

  TempDir dir_{"worker-data-dir"};
  int runs_ = 0;
};

TEST_F(WorkerDataDirStart, ADataDirOwnedByTheTaskUserIsRefusedNamingIt) {
  const std::string data = dir_.path() + "/owned";
  ASSERT_EQ(::mkdir(data.c_str(), 0700), 0);
  ASSERT_EQ(::chown(data.c_str(), nobodyUid(), static_cast<gid_t>(-1)), 0);
  expectRefused(data, data, "owned by the task user");
}

TEST_F(WorkerDataDirStart, ADataDirOthersMayWriteIsRefusedNamingIt) {
  const std::string data = dir_.path() + "/open";
  ASSERT_EQ(::mkdir(data.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(data.c_str(), 0777), 0);
  expectRefused(data, data, "writable by");
}

TEST_F(WorkerDataDirStart, AParentOthersMayWriteWithoutTheStickyBitIsRefusedNamingIt) {
  const std::string parent = dir_.path() + "/open-parent";
  ASSERT_EQ(::mkdir(parent.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(parent.c_str(), 0777), 0);
  // The data directory itself does not exist yet: the worker would create it there.
  expectRefused(parent + "/data", parent, "writable by");
}

TEST_F(WorkerDataDirStart, AParentTheTaskUserOwnsIsRefusedNamingIt) {
  const std::string parent = dir_.path() + "/nobodys";
  ASSERT_EQ(::mkdir(parent.c_str(), 0755), 0);
  ASSERT_EQ(::chown(parent.c_str(), nobodyUid(), static_cast<gid_t>(-1)), 0);
  expectRefused(parent + "/data", parent, "owned by the task user");
}

TEST_F(WorkerDataDirStart, ARootOwnedStickyParentLikeTmpIsAccepted) {
  const std::string parent = dir_.path() + "/sticky";
  ASSERT_EQ(::mkdir(parent.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(parent.c_str(), 01777), 0);
  expectAccepted(parent + "/data");
}

TEST_F(WorkerDataDirStart, AnAttemptsThatIsARegularFileFailsAtStartNamingIt) {
  const std::string data = dir_.path() + "/data";
  ASSERT_EQ(::mkdir(data.c_str(), 0700), 0);
  std::ofstream(data + "/attempts") << "not a directory\n";
  expectRefused(data, data + "/attempts", "not a directory");
}

TEST_F(WorkerDataDirStart, AnAttemptsThatIsASymbolicLinkFailsAtStartNamingIt) {
  const std::string data = dir_.path() + "/data";
  const std::string elsewhere = dir_.path() + "/elsewhere";
  ASSERT_EQ(::mkdir(data.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir(elsewhere.c_str(), 0700), 0);
  ASSERT_EQ(::symlink(elsewhere.c_str(), (data + "/attempts").c_str()), 0);
  const auto before = snapshot(elsewhere);
  expectRefused(data, data + "/attempts", "symbolic link");
  EXPECT_EQ(snapshot(elsewhere), before);
}

// The /readyz answer of worker `slot`, waiting until `done` holds for it.
HttpReply readyzUntil(JobCluster& cluster, size_t slot,
                      const std::function<bool(const HttpReply&)>& done) {
  kj::HttpHeaderTable table;
  return httpGetUntil(cluster.loop(), table, cluster.workers().httpAddress(slot), "/readyz", done);
}

// A task that could write the data directory (it was made writable after the worker started)
// replaces `attempts` with a link to a directory elsewhere while an attempt runs: its end (the
// retention prunes it at once) deletes nothing there, the next attempt creates nothing there and
// changes no mode, and the worker says it is not ready and why.
TEST(WorkerDataDirRuns, AnAttemptsReplacedByALinkMakesTheWorkerTouchNothingOutside) {
  if (::geteuid() != 0) GTEST_SKIP() << "tasks run as another user only under root";
  auto started = JobCluster::start("data-dir-link",
                                   {.workers = 1, .workerSet = {"worker.attempts.retain=0"}});
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  const std::string data = cluster.workers().dataDir(0);
  auto running = submitAndWaitRunning(
      cluster, markedJob("first", cluster.taskDir(), {{.name = "v"}}), "v", 1, kJobsTimeout);
  ASSERT_OK(running);
  const std::string attempt = running.value().markers[0].attempt;
  ASSERT_TRUE(fs::is_directory(data + "/attempts/" + attempt));

  // "Outside": a directory the worker must not touch, holding what looks like the attempt's
  // directory, with something precious in it.
  TempDir outsideDir{"worker-data-dir-outside"};
  const std::string outside = outsideDir.path();
  ASSERT_EQ(::mkdir((outside + "/" + attempt).c_str(), 0700), 0);
  std::ofstream(outside + "/" + attempt + "/precious") << "keep me\n";
  const auto before = snapshot(outside);
  ASSERT_EQ(::rename((data + "/attempts").c_str(), (data + "/attempts.moved").c_str()), 0);
  ASSERT_EQ(::symlink(outside.c_str(), (data + "/attempts").c_str()), 0);

  letSubtaskEnd(cluster.taskDir(), "v", 0);
  auto clean = cluster.waitForJobClean(running.value().id, kJobsTimeout);
  ASSERT_OK(clean);
  // The retention removes the attempt's real directory (moved along with `attempts`), not what
  // the link points at.
  bool pruned = false;
  for (int i = 0; i < 600 && !pruned; ++i) {
    pruned = !fs::exists(data + "/attempts.moved/" + attempt);
    if (!pruned) cluster.loop().run(cluster.loop().timer().afterDelay(50 * kj::MILLISECONDS));
  }
  EXPECT_TRUE(pruned) << "the ended attempt's directory was not pruned; outside holds:\n"
                      << joined(snapshot(outside));
  EXPECT_EQ(snapshot(outside), before) << "outside before:\n"
                                       << joined(before) << "after:\n"
                                       << joined(snapshot(outside));

  auto notReady = readyzUntil(cluster, 0, [](const HttpReply& reply) {
    return reply.status == 503 && reply.body.find("attempts") != std::string::npos;
  });
  EXPECT_EQ(notReady.status, 503u) << notReady.body;

  // A second job finds no slot on this worker (it refuses it), so nothing is created outside.
  auto second = cluster.submit("name: second\nvertices:\n  - name: w\n    command:\n      argv: "
                               "[/bin/true]\n");
  ASSERT_OK(second);
  const size_t leader = cluster.leader();
  bool refused = false;
  for (int i = 0; i < 1200 && !refused; ++i) {
    const std::string output = cluster.masters().process(leader).output();
    refused = output.find("requestSlot of slot") != std::string::npos &&
              output.find("cannot run tasks") != std::string::npos;
    if (!refused) {
      auto status = cluster.status(second.value());
      if (status.ok() && textField(status.value(), "state") == "FINISHED") break;
      cluster.loop().run(cluster.loop().timer().afterDelay(50 * kj::MILLISECONDS));
    }
  }
  EXPECT_TRUE(refused) << "the worker did not refuse the slot:\n" << cluster.describe();
  EXPECT_EQ(snapshot(outside), before) << "outside before:\n"
                                       << joined(before) << "after:\n"
                                       << joined(snapshot(outside));
  auto status = cluster.status(second.value());
  ASSERT_OK(status);
  EXPECT_NE(textField(status.value(), "state"), "FAILED") << status.value().dump();
}

// `attempts` becomes a regular file while the worker runs: it reports not ready (naming the
// directory), refuses slots, and a job runs on the other worker to FINISHED instead of failing.
TEST(WorkerDataDirRuns, AWorkerThatCannotCreateAttemptDirectoriesIsNotReadyAndTasksRunElsewhere) {
  auto started = JobCluster::start("data-dir-broken", {.workers = 2});
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  const std::string data = cluster.workers().dataDir(0);
  ASSERT_EQ(::rename((data + "/attempts").c_str(), (data + "/attempts.moved").c_str()), 0);
  std::ofstream(data + "/attempts") << "not a directory\n";

  auto notReady = readyzUntil(cluster, 0, [](const HttpReply& reply) {
    return reply.status == 503 && reply.body.find("attempts") != std::string::npos;
  });
  ASSERT_EQ(notReady.status, 503u) << notReady.body;
  EXPECT_NE(notReady.body.find(data + "/attempts"), std::string::npos) << notReady.body;
  auto ready = readyzUntil(cluster, 1, [](const HttpReply& reply) { return reply.status == 200; });
  ASSERT_EQ(ready.status, 200u) << ready.body;

  // Two subtasks, four slots, two of them refused: both run on the healthy worker.
  auto job = cluster.submit(
      "name: elsewhere\nvertices:\n  - name: v\n    parallelism: 2\n    command:\n      argv: "
      "[/bin/true]\n");
  ASSERT_OK(job);
  auto clean = cluster.waitForJobClean(job.value(), kJobsTimeout);
  ASSERT_OK(clean);
  EXPECT_EQ(clean.value().state, "FINISHED") << cluster.describe();
  const std::string healthy = cluster.workers().resourceId(1);
  for (const JobEvent& event : cluster.jobEventsOf(job.value(), JobEvent::Kind::kAttemptDeployed)) {
    EXPECT_EQ(event.resourceId, healthy) << event.describe();
  }
  for (const JobEvent& event : cluster.jobEventsOf(job.value(), JobEvent::Kind::kAttemptState)) {
    EXPECT_NE(event.state, "FAILED") << event.describe();
  }
}

// Sets or clears the immutable attribute of `dir` (nothing can be created in it, not even by
// root); false with errno when the file system has no such attribute.
bool setImmutable(const std::string& dir, bool immutable) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  int flags = 0;
  bool ok = ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
  if (ok) {
    flags = immutable ? (flags | FS_IMMUTABLE_FL) : (flags & ~FS_IMMUTABLE_FL);
    ok = ::ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0;
  }
  const int saved = errno;
  ::close(fd);
  errno = saved;
  return ok;
}

// The worker finds out only when it prepares an attempt that it cannot make attempt directories
// any more (`attempts` is still the directory it holds, but nothing can be created in it): that
// attempt FAILS as the worker's fault, and the job, without any restart strategy, runs the
// subtask on the other worker and FINISHES with no restart counted.
TEST(WorkerDataDirRuns, AnAttemptItsWorkerCannotPrepareRunsElsewhereWithoutARestart) {
  auto started = JobCluster::start("data-dir-fault", {.workers = 2, .slotsPerWorker = 1});
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  const std::string attempts = cluster.workers().dataDir(0) + "/attempts";
  if (!setImmutable(attempts, true)) {
    GTEST_SKIP() << "the file system of " << attempts
                 << " has no immutable attribute (FS_IOC_SETFLAGS): " << std::strerror(errno);
  }
  struct Unfreeze {
    std::string dir;
    ~Unfreeze() { setImmutable(dir, false); }
  } unfreeze{attempts};

  // One slot per worker, two subtasks: one of them is deployed to the faulty worker.
  auto job = cluster.submit(
      "name: fault\nvertices:\n  - name: v\n    parallelism: 2\n    command:\n      argv: "
      "[/bin/true]\n");
  ASSERT_OK(job);
  auto clean = cluster.waitForJobClean(job.value(), kJobsTimeout);
  ASSERT_OK(clean);
  EXPECT_EQ(clean.value().state, "FINISHED") << cluster.describe();
  auto ended = cluster.jobEventsOf(job.value(), JobEvent::Kind::kJobEnded);
  ASSERT_EQ(ended.size(), 1u) << cluster.describe();
  EXPECT_EQ(ended[0].restarts, 0u) << ended[0].describe();

  const std::string faulty = cluster.workers().resourceId(0);
  size_t onFaulty = 0;
  for (const JobEvent& event : cluster.jobEventsOf(job.value(), JobEvent::Kind::kAttemptDeployed)) {
    if (event.resourceId == faulty) ++onFaulty;
  }
  EXPECT_GE(onFaulty, 1u) << "no attempt went to the faulty worker: " << cluster.describe();
  size_t workerFaults = 0;
  for (const JobEvent& event : cluster.jobEventsOf(job.value(), JobEvent::Kind::kAttemptState)) {
    if (event.state != "FAILED") continue;
    // "worker R could not start the attempt: … (a fault of the worker, not of the task)", or its
    // refusal of a later submitTask ("worker R cannot run tasks: …").
    EXPECT_NE(event.message.find("worker " + faulty), std::string::npos) << event.describe();
    ++workerFaults;
  }
  EXPECT_EQ(workerFaults, onFaulty) << cluster.describe();
  // And the worker says it is not ready, naming the directory.
  auto notReady = readyzUntil(cluster, 0, [](const HttpReply& reply) {
    return reply.status == 503 && reply.body.find("attempts") != std::string::npos;
  });
  EXPECT_EQ(notReady.status, 503u) << notReady.body;
}

}  // namespace
}  // namespace regent::testing

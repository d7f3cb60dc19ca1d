// The worker's data directory: the resource id made once and read at every later start, a corrupt
// id file refused by name and left alone, the lock that keeps a second worker (in another
// process, or this one) off the directory while the first lives, the path checks against a task
// user that could write it, and the attempts directory opened without following a link.
#include "services/worker/worker_data_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/fixtures/temp_dir_test_util.h"

namespace regent::worker {
namespace {

const DataDirHolder kFirst{.host = "alpha", .pid = 101, .startedAtMs = 1790000000000};
const DataDirHolder kSecond{.host = "beta", .pid = 202, .startedAtMs = 1790000001000};

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void writeFile(const std::string& path, const std::string& contents) {
  std::ofstream(path, std::ios::trunc) << contents;
}

TEST(WorkerDataDir, FirstStartCreatesThePrivateDirectoryAndAResourceId) {
  testing::TempDir temp("worker-data-dir");
  const std::string dir = temp.path() + "/nested/data";
  auto opened = WorkerDataDir::open(dir, kFirst);
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  EXPECT_TRUE(opened.value()->created());
  EXPECT_FALSE(opened.value()->resourceId().isZero());
  EXPECT_EQ(readFile(dir + "/resource-id"), opened.value()->resourceId().toHex() + "\n");
  struct stat info {};
  ASSERT_EQ(::stat(dir.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0700u);
  EXPECT_EQ(readFile(dir + "/lock"), "alpha 101 1790000000000\n");
  // Nothing but the two files and the attempts directory: the temporary file of the durable write
  // is gone.
  size_t entries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    (void)entry;
    ++entries;
  }
  EXPECT_EQ(entries, 3u);
  ASSERT_EQ(::stat((dir + "/attempts").c_str(), &info), 0);
  EXPECT_TRUE(S_ISDIR(info.st_mode));
  EXPECT_EQ(info.st_mode & 07777, 0711u);
  EXPECT_EQ(opened.value()->attemptsPath(), dir + "/attempts");
  EXPECT_GE(opened.value()->attemptsFd(), 0);
}

TEST(WorkerDataDir, LaterStartsReadTheSameResourceId) {
  testing::TempDir temp("worker-data-dir");
  ResourceId first;
  {
    auto opened = WorkerDataDir::open(temp.path(), kFirst);
    ASSERT_TRUE(opened.ok()) << opened.error().message;
    first = opened.value()->resourceId();
  }
  auto again = WorkerDataDir::open(temp.path(), kSecond);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_FALSE(again.value()->created());
  EXPECT_EQ(again.value()->resourceId(), first);
  EXPECT_EQ(readFile(temp.path() + "/lock"), "beta 202 1790000001000\n");
}

TEST(WorkerDataDir, ACorruptResourceIdFileIsNamedAndLeftAsItIs) {
  testing::TempDir temp("worker-data-dir");
  const std::string idFile = temp.path() + "/resource-id";
  for (const std::string& contents :
       {std::string("not-an-id\n"), std::string(""), std::string(31, 'a'),
        std::string(32, 'a') + " trailing\n", std::string(32, 'g')}) {
    writeFile(idFile, contents);
    auto opened = WorkerDataDir::open(temp.path(), kFirst);
    ASSERT_FALSE(opened.ok()) << "accepted \"" << contents << "\"";
    EXPECT_FALSE(opened.error().isRetryable());
    EXPECT_NE(opened.error().message.find(idFile), std::string::npos) << opened.error().message;
    EXPECT_NE(opened.error().message.find("32 hex digits"), std::string::npos)
        << opened.error().message;
    EXPECT_EQ(readFile(idFile), contents);
  }
}

TEST(WorkerDataDir, ASecondOpenInThisProcessIsRefusedNamingBothWorkers) {
  testing::TempDir temp("worker-data-dir");
  auto first = WorkerDataDir::open(temp.path(), kFirst);
  ASSERT_TRUE(first.ok()) << first.error().message;
  auto second = WorkerDataDir::open(temp.path(), kSecond);
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(second.error().isRetryable());
  EXPECT_EQ(second.error().message,
            "worker.data-dir " + temp.path() +
                " is in use by the worker on host alpha pid 101 (started 2026-09-21T14:13:20Z); "
                "this worker is host beta pid 202");
  // The refused open changed nothing: the holder's line stays.
  EXPECT_EQ(readFile(temp.path() + "/lock"), "alpha 101 1790000000000\n");
  first.value() = nullptr;
  auto third = WorkerDataDir::open(temp.path(), kSecond);
  EXPECT_TRUE(third.ok()) << third.error().message;
}

TEST(WorkerDataDir, AWorkerInAnotherProcessHoldsTheLockUntilItDies) {
  testing::TempDir temp("worker-data-dir");
  int ready[2];
  int release[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(release), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child holds the directory until the parent closes `release`, then dies without
    // destroying it: the kernel releases the lock.
    ::close(release[1]);
    ::close(ready[0]);
    auto opened = WorkerDataDir::open(
        temp.path(), {.host = "child", .pid = ::getpid(), .startedAtMs = 1790000000000});
    const char byte = opened.ok() ? 'y' : 'n';
    (void)!::write(ready[1], &byte, 1);
    char ignored;
    (void)!::read(release[0], &ignored, 1);
    ::_exit(0);
  }
  ::close(ready[1]);
  ::close(release[0]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ASSERT_EQ(byte, 'y');
  auto refused = WorkerDataDir::open(temp.path(), kSecond);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("host child pid " + std::to_string(child)),
            std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().message.find("this worker is host beta pid 202"), std::string::npos)
      << refused.error().message;
  ::close(release[1]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ::close(ready[0]);
  auto taken = WorkerDataDir::open(temp.path(), kSecond);
  EXPECT_TRUE(taken.ok()) << taken.error().message;
}

TEST(WorkerDataDir, ADataDirThatIsAFileIsAnErrorNamingIt) {
  testing::TempDir temp("worker-data-dir");
  const std::string file = temp.path() + "/plain-file";
  writeFile(file, "x");
  auto opened = WorkerDataDir::open(file, kFirst);
  ASSERT_FALSE(opened.ok());
  EXPECT_FALSE(opened.error().isRetryable());
  EXPECT_NE(opened.error().message.find("worker.data-dir " + file), std::string::npos)
      << opened.error().message;
}

constexpr uid_t kTaskUid = 65534;
constexpr uid_t kRoot = 0;

TEST(UnsafeDirectoryReason, ADirectoryTheTaskUserOwnsIsUnsafeWhateverItsMode) {
  for (mode_t mode : {0700, 0755, 01777}) {
    auto reason = unsafeDirectoryReason(kTaskUid, S_IFDIR | mode, false, kTaskUid);
    ASSERT_TRUE(reason) << std::oct << mode;
    EXPECT_NE(reason->find("owned by the task user (uid 65534)"), std::string::npos) << *reason;
  }
  EXPECT_TRUE(unsafeDirectoryReason(kTaskUid, S_IFDIR | 0700, true, kTaskUid));
}

TEST(UnsafeDirectoryReason, ADataDirGroupOrOthersMayWriteIsUnsafeEvenWithTheStickyBit) {
  for (mode_t mode : {0770, 0703, 01777}) {
    auto reason = unsafeDirectoryReason(kRoot, S_IFDIR | mode, true, kTaskUid);
    ASSERT_TRUE(reason) << std::oct << mode;
    EXPECT_NE(reason->find("writable by its group or others"), std::string::npos) << *reason;
  }
  EXPECT_FALSE(unsafeDirectoryReason(kRoot, S_IFDIR | 0700, true, kTaskUid));
  EXPECT_FALSE(unsafeDirectoryReason(kRoot, S_IFDIR | 0711, true, kTaskUid));
}

TEST(UnsafeDirectoryReason, AParentOthersMayWriteIsSafeOnlyWithTheStickyBit) {
  auto open = unsafeDirectoryReason(kRoot, S_IFDIR | 0777, false, kTaskUid);
  ASSERT_TRUE(open);
  EXPECT_NE(open->find("without the sticky bit (mode 0777)"), std::string::npos) << *open;
  EXPECT_TRUE(unsafeDirectoryReason(kRoot, S_IFDIR | 0775, false, kTaskUid));
  EXPECT_FALSE(unsafeDirectoryReason(kRoot, S_IFDIR | 01777, false, kTaskUid)) << "like /tmp";
  EXPECT_FALSE(unsafeDirectoryReason(kRoot, S_IFDIR | 0755, false, kTaskUid));
  // ...but not when the task user owns it (it may remove anything in its own sticky directory).
  EXPECT_TRUE(unsafeDirectoryReason(kTaskUid, S_IFDIR | 01777, false, kTaskUid));
}

TEST(UnsafeDirectoryReason, WithTasksRunningAsTheWorkersUserOnlyWhatOthersMayWriteIsUnsafe) {
  EXPECT_FALSE(unsafeDirectoryReason(1000, S_IFDIR | 0700, true, std::nullopt));
  EXPECT_FALSE(unsafeDirectoryReason(1000, S_IFDIR | 0755, false, std::nullopt));
  EXPECT_TRUE(unsafeDirectoryReason(1000, S_IFDIR | 0777, false, std::nullopt));
  EXPECT_TRUE(unsafeDirectoryReason(1000, S_IFDIR | 0707, true, std::nullopt));
}

TEST(CheckDataDirPath, AParentOthersMayWriteIsRefusedNamingIt) {
  testing::TempDir temp("worker-data-dir");
  const std::string open = temp.path() + "/open";
  ASSERT_EQ(::mkdir(open.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(open.c_str(), 0777), 0);
  for (const std::string& dir : {open + "/data", open + "/not/yet/there"}) {
    auto checked = checkDataDirPath(dir, std::nullopt);
    ASSERT_FALSE(checked.ok()) << dir;
    EXPECT_NE(checked.error().message.find(open + " (above worker.data-dir) is unsafe"),
              std::string::npos)
        << checked.error().message;
  }
  ASSERT_EQ(::chmod(open.c_str(), 01777), 0);
  EXPECT_TRUE(checkDataDirPath(open + "/data", std::nullopt).ok());
}

TEST(CheckDataDirPath, ALinkIsResolvedAndWhereItLeadsIsChecked) {
  testing::TempDir temp("worker-data-dir");
  const std::string open = temp.path() + "/open", safe = temp.path() + "/safe";
  ASSERT_EQ(::mkdir(open.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(open.c_str(), 0777), 0);
  ASSERT_EQ(::mkdir((open + "/data").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir(safe.c_str(), 0700), 0);
  ASSERT_EQ(::symlink((open + "/data").c_str(), (safe + "/data").c_str()), 0);
  auto checked = checkDataDirPath(safe + "/data", std::nullopt);
  ASSERT_FALSE(checked.ok());
  EXPECT_NE(checked.error().message.find(open), std::string::npos) << checked.error().message;
}

TEST(CheckDataDirPath, ADataDirTheTaskUserOwnsIsRefusedNamingIt) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another user";
  testing::TempDir temp("worker-data-dir");
  const std::string dir = temp.path() + "/data";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chown(dir.c_str(), kTaskUid, static_cast<gid_t>(-1)), 0);
  auto opened = WorkerDataDir::open(dir, kFirst, kTaskUid);
  ASSERT_FALSE(opened.ok());
  EXPECT_FALSE(opened.error().isRetryable());
  EXPECT_NE(opened.error().message.find("worker.data-dir " + dir + " is unsafe: it is owned by "
                                        "the task user"),
            std::string::npos)
      << opened.error().message;
  EXPECT_FALSE(std::filesystem::exists(dir + "/lock")) << "nothing is written there";
}

TEST(WorkerDataDir, AnAttemptsThatIsAFileOrALinkIsAnErrorNamingIt) {
  testing::TempDir temp("worker-data-dir");
  const std::string dir = temp.path() + "/data", elsewhere = temp.path() + "/elsewhere";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir(elsewhere.c_str(), 0700), 0);
  writeFile(dir + "/attempts", "x");
  auto file = WorkerDataDir::open(dir, kFirst);
  ASSERT_FALSE(file.ok());
  EXPECT_FALSE(file.error().isRetryable());
  EXPECT_NE(file.error().message.find(dir + "/attempts is not a directory"), std::string::npos)
      << file.error().message;

  ASSERT_EQ(::unlink((dir + "/attempts").c_str()), 0);
  ASSERT_EQ(::symlink(elsewhere.c_str(), (dir + "/attempts").c_str()), 0);
  auto link = WorkerDataDir::open(dir, kFirst);
  ASSERT_FALSE(link.ok());
  EXPECT_NE(link.error().message.find(dir + "/attempts is a symbolic link"), std::string::npos)
      << link.error().message;
  struct stat info {};
  ASSERT_EQ(::stat(elsewhere.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0700u) << "the link's target is not touched";
}

TEST(WorkerDataDir, ForATaskUserTheDataDirIsTraversableButNotListable) {
  if (::geteuid() != 0) GTEST_SKIP() << "tasks run as another user only under root";
  testing::TempDir temp("worker-data-dir");
  const std::string dir = temp.path() + "/data";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((dir + "/attempts").c_str(), 0700), 0);  // Left private by an earlier run.
  auto opened = WorkerDataDir::open(dir, kFirst, kTaskUid);
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  struct stat info {};
  ASSERT_EQ(::stat(dir.c_str(), &info), 0);
  EXPECT_NE(info.st_mode & S_IXOTH, 0u);
  EXPECT_EQ(info.st_mode & S_IROTH, 0u);
  ASSERT_EQ(::stat((dir + "/attempts").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0711u);
}

}  // namespace
}  // namespace regent::worker

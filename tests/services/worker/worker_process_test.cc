// The worker process's start-up checks that need no process: which directory above the data
// directory keeps the task user out.
#include "services/worker/worker_process.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>

#include "tests/fixtures/temp_dir_test_util.h"

namespace regent::worker {
namespace {

TEST(UntraversableAbove, NamesTheFirstDirectoryAboveTheDataDirectoryTheTaskUserCannotEnter) {
  regent::testing::TempDir dir("worker-process-test");
  const std::string closed = dir.path() + "/closed";
  const std::string data = closed + "/open/data";
  std::filesystem::create_directories(data);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  ASSERT_EQ(::chmod(closed.c_str(), 0700), 0);
  ASSERT_EQ(::chmod((closed + "/open").c_str(), 0755), 0);
  ASSERT_EQ(::chmod(data.c_str(), 0700), 0);  // The data directory itself is not looked at.
  const uid_t other = ::getuid() + 12345;
  const gid_t otherGroup = ::getgid() + 12345;

  EXPECT_EQ(untraversableAbove(data, other, otherGroup), closed);
  // Its owner, and its group when the group may enter, pass.
  EXPECT_EQ(untraversableAbove(data, ::getuid(), otherGroup), std::nullopt);
  ASSERT_EQ(::chmod(closed.c_str(), 0710), 0);
  EXPECT_EQ(untraversableAbove(data, other, ::getgid()), std::nullopt);
  EXPECT_EQ(untraversableAbove(data, other, otherGroup), closed);
  // Traversable by others (o+x), not listable: passes.
  ASSERT_EQ(::chmod(closed.c_str(), 0711), 0);
  EXPECT_EQ(untraversableAbove(data, other, otherGroup), std::nullopt);
}

}  // namespace
}  // namespace regent::worker

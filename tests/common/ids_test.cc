// Typed 128-bit ids: random, hex round trip, strict parsing.
#include "common/ids.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>

namespace regent {
namespace {

TEST(Id128, RandomIdsAreDistinctAndNeverZero) {
  std::set<JobId> seen;
  for (int i = 0; i < 10'000; ++i) {
    JobId id = JobId::random();
    EXPECT_FALSE(id.isZero());
    EXPECT_TRUE(seen.insert(id).second) << "duplicate id " << id.toHex();
  }
}

TEST(Id128, ForkedChildDoesNotRepeatItsParentsIds) {
  JobId::random();  // The parent's generator is seeded before the fork.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    JobId id = JobId::random();
    uint64_t halves[2] = {id.hi(), id.lo()};
    ssize_t written = ::write(fds[1], halves, sizeof halves);
    ::_exit(written == sizeof halves ? 0 : 1);
  }
  uint64_t halves[2] = {0, 0};
  ASSERT_EQ(::read(fds[0], halves, sizeof halves), static_cast<ssize_t>(sizeof halves));
  int status = 0;
  ::waitpid(child, &status, 0);
  ::close(fds[0]);
  ::close(fds[1]);
  EXPECT_NE(JobId(halves[0], halves[1]), JobId::random());
}

TEST(Id128, HexRoundTripKeepsBothHalves) {
  AllocationId id(0x0123456789abcdefULL, 0xfedcba9876543210ULL);
  EXPECT_EQ(id.toHex(), "0123456789abcdeffedcba9876543210");
  auto parsed = AllocationId::fromHex(id.toHex());
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(*parsed, id);
  EXPECT_EQ(AllocationId::fromHex("0123456789ABCDEFFEDCBA9876543210"), id);
}

TEST(Id128, ParsingRejectsWrongLengthAndNonHex) {
  EXPECT_FALSE(ResourceId::fromHex("").has_value());
  EXPECT_FALSE(ResourceId::fromHex("0123").has_value());
  EXPECT_FALSE(ResourceId::fromHex("0123456789abcdeffedcba98765432100").has_value());
  EXPECT_FALSE(ResourceId::fromHex("0123456789abcdeffedcba987654321g").has_value());
  EXPECT_FALSE(ResourceId::fromHex("0123456789abcdef-edcba9876543210").has_value());
}

TEST(Id128, OrderingFollowsHighThenLowHalf) {
  EXPECT_LT(AttemptId(1, 9), AttemptId(2, 0));
  EXPECT_LT(AttemptId(1, 1), AttemptId(1, 2));
  EXPECT_EQ(AttemptId(3, 4), AttemptId(3, 4));
}

}  // namespace
}  // namespace regent

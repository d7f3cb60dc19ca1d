// Typed 128-bit ids: random, hex round trip, strict parsing.
#include "common/ids.h"

#include <gtest/gtest.h>

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

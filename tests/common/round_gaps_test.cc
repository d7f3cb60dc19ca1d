// RoundGaps: a heartbeat round that comes later than the timeout after the previous one.
#include <gtest/gtest.h>

#include "common/time.h"

namespace regent {
namespace {

const MonoTime kStart = MonoTime() + std::chrono::hours(1);

TEST(RoundGapsTest, RoundsWithinTheTimeoutAreNotLate) {
  RoundGaps rounds;
  rounds.start(kStart);
  EXPECT_FALSE(rounds.lateRound(kStart + Duration(2000), Duration(6000)));
  EXPECT_EQ(rounds.lastGap(), Duration(2000));
  // Exactly the timeout is not late: only a gap longer than it is.
  EXPECT_FALSE(rounds.lateRound(kStart + Duration(8000), Duration(6000)));
  EXPECT_EQ(rounds.lastGap(), Duration(6000));
}

TEST(RoundGapsTest, ARoundLaterThanTheTimeoutAfterStartIsLate) {
  RoundGaps rounds;
  rounds.start(kStart);
  EXPECT_TRUE(rounds.lateRound(kStart + Duration(6001), Duration(6000)));
  EXPECT_EQ(rounds.lastGap(), Duration(6001));
}

TEST(RoundGapsTest, EachRoundIsMeasuredFromThePreviousOne) {
  RoundGaps rounds;
  rounds.start(kStart);
  EXPECT_FALSE(rounds.lateRound(kStart + Duration(5000), Duration(6000)));
  EXPECT_FALSE(rounds.lateRound(kStart + Duration(10000), Duration(6000)));  // Not from start().
  EXPECT_TRUE(rounds.lateRound(kStart + Duration(20000), Duration(6000)));   // 10 s after.
  EXPECT_EQ(rounds.lastGap(), Duration(10000));
  // After a late round the next one is measured from it: the pause is not counted twice.
  EXPECT_FALSE(rounds.lateRound(kStart + Duration(22000), Duration(6000)));
  EXPECT_EQ(rounds.lastGap(), Duration(2000));
}

}  // namespace
}  // namespace regent

// ExponentialBackoff: the ceiling doubles up to the cap, delays stay within [initial, ceiling],
// and reset starts over.
#include "common/backoff.h"

#include <gtest/gtest.h>

#include <vector>

namespace regent {
namespace {

std::vector<Duration> take(ExponentialBackoff& backoff, int count) {
  std::vector<Duration> delays;
  for (int i = 0; i < count; ++i) delays.push_back(backoff.next());
  return delays;
}

TEST(ExponentialBackoff, CeilingDoublesFromInitialUpToTheCap) {
  ExponentialBackoff backoff(Duration(200), Duration(1000), [] { return 1.0; });
  EXPECT_EQ(take(backoff, 6),
            (std::vector<Duration>{Duration(200), Duration(400), Duration(800), Duration(1000),
                                   Duration(1000), Duration(1000)}));
  EXPECT_EQ(backoff.failures(), 6u);
}

TEST(ExponentialBackoff, LowestJitterWaitsTheInitialDelayEveryTime) {
  ExponentialBackoff backoff(Duration(200), Duration(10000), [] { return 0.0; });
  for (const Duration delay : take(backoff, 8)) EXPECT_EQ(delay, Duration(200));
}

TEST(ExponentialBackoff, RandomDelaysStayBetweenInitialAndTheCurrentCeiling) {
  ExponentialBackoff backoff(Duration(200), Duration(10000));
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 12; ++i) {
      const Duration ceiling = backoff.ceiling();
      const Duration delay = backoff.next();
      EXPECT_GE(delay, Duration(200));
      EXPECT_LE(delay, ceiling);
      EXPECT_LE(ceiling, Duration(10000));
    }
    backoff.reset();
    EXPECT_EQ(backoff.ceiling(), Duration(200));
  }
}

TEST(ExponentialBackoff, JitterSpreadsDelaysOverTheRange) {
  double u = 0.5;
  ExponentialBackoff backoff(Duration(100), Duration(100000), [&u] { return u; });
  take(backoff, 3);                                // Ceiling now 800.
  EXPECT_EQ(backoff.next(), Duration(100 + 350));  // Half-way between 100 and 800.
  u = 0.25;
  EXPECT_EQ(backoff.next(), Duration(100 + 375));  // A quarter of 100..1600.
}

TEST(ExponentialBackoff, ManyFailuresNeitherOverflowNorExceedTheCap) {
  ExponentialBackoff backoff(Duration(1), Duration(10000), [] { return 1.0; });
  for (int i = 0; i < 100000; ++i) backoff.next();
  EXPECT_EQ(backoff.next(), Duration(10000));
}

}  // namespace
}  // namespace regent

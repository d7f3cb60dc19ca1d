// The restart strategies on a fake clock: none, fixed-delay (delay, give-up after `attempts`),
// exponential-delay (growth, cap, reset after a quiet run, unlimited attempts), failure-rate
// (the window slides).
#include "services/jobmaster/restart_strategy.h"

#include <capnp/message.h>
#include <gtest/gtest.h>

namespace regent::jobmaster {
namespace {

using namespace std::chrono_literals;

MonoTime at(Duration offset) { return MonoTime() + offset; }

class RestartStrategyTest : public ::testing::Test {
 protected:
  ~RestartStrategyTest() noexcept override {}
  wire::RestartStrategy::Builder strategy() { return message_.getRoot<wire::RestartStrategy>(); }
  capnp::MallocMessageBuilder message_;
};

TEST_F(RestartStrategyTest, NoneGivesUpAtTheFirstFailure) {
  RestartStrategy none = RestartStrategy::none();
  EXPECT_EQ(none.onFailure(at(0ms)), std::nullopt);
  EXPECT_EQ(none.restarts(), 0u);
  EXPECT_EQ(none.giveUpReason(), "no restart strategy");
}

TEST_F(RestartStrategyTest, AGraphWithoutAStrategyRestartsNothing) {
  capnp::MallocMessageBuilder graph;
  auto root = graph.initRoot<wire::JobGraph>();
  RestartStrategy fromGraph = RestartStrategy::fromGraph(root.asReader());
  EXPECT_EQ(fromGraph.kind(), RestartStrategy::Kind::kNone);
  EXPECT_EQ(fromGraph.onFailure(at(0ms)), std::nullopt);
}

TEST_F(RestartStrategyTest, FixedDelayRestartsAttemptsTimesThenGivesUp) {
  auto fixed = strategy().initFixedDelay();
  fixed.setAttempts(2);
  fixed.setDelayMs(1500);
  RestartStrategy restart = RestartStrategy::fromWire(strategy().asReader());
  EXPECT_EQ(restart.onFailure(at(0ms)), Duration(1500));
  EXPECT_EQ(restart.onFailure(at(10ms)), Duration(1500));
  EXPECT_EQ(restart.restarts(), 2u);
  EXPECT_EQ(restart.onFailure(at(20ms)), std::nullopt);
  EXPECT_EQ(restart.restarts(), 2u);
  EXPECT_EQ(restart.giveUpReason(), "restart strategy fixed-delay allows 2 restarts");
}

TEST_F(RestartStrategyTest, ExponentialDelayGrowsUpToTheCap) {
  auto exponential = strategy().initExponentialDelay();
  exponential.setInitialDelayMs(100);
  exponential.setMaxDelayMs(1000);
  exponential.setMultiplier(3);
  exponential.setResetAfterMs(60000);
  exponential.setAttempts(0);  // No limit.
  RestartStrategy restart = RestartStrategy::fromWire(strategy().asReader());
  EXPECT_EQ(restart.onFailure(at(0ms)), Duration(100));
  EXPECT_EQ(restart.onFailure(at(1s)), Duration(300));
  EXPECT_EQ(restart.onFailure(at(2s)), Duration(900));
  EXPECT_EQ(restart.onFailure(at(3s)), Duration(1000));
  EXPECT_EQ(restart.onFailure(at(4s)), Duration(1000));
  for (int i = 0; i < 100; ++i) EXPECT_EQ(restart.onFailure(at(5s + Duration(i))), Duration(1000));
  EXPECT_EQ(restart.restarts(), 105u);
}

TEST_F(RestartStrategyTest, ExponentialDelayResetsAfterAQuietRun) {
  auto exponential = strategy().initExponentialDelay();
  exponential.setInitialDelayMs(100);
  exponential.setMaxDelayMs(10000);
  exponential.setMultiplier(2);
  exponential.setResetAfterMs(5000);
  RestartStrategy restart = RestartStrategy::fromWire(strategy().asReader());
  EXPECT_EQ(restart.onFailure(at(0ms)), Duration(100));
  EXPECT_EQ(restart.onFailure(at(4999ms)), Duration(200));  // Less than reset_after later.
  EXPECT_EQ(restart.onFailure(at(9998ms)), Duration(400));
  EXPECT_EQ(restart.onFailure(at(14998ms)), Duration(100));  // reset_after without a failure.
  EXPECT_EQ(restart.onFailure(at(15000ms)), Duration(200));
}

TEST_F(RestartStrategyTest, ExponentialDelayGivesUpAfterItsAttempts) {
  auto exponential = strategy().initExponentialDelay();
  exponential.setInitialDelayMs(100);
  exponential.setMaxDelayMs(1000);
  exponential.setMultiplier(2);
  exponential.setResetAfterMs(1000);
  exponential.setAttempts(2);
  RestartStrategy restart = RestartStrategy::fromWire(strategy().asReader());
  EXPECT_TRUE(restart.onFailure(at(0ms)));
  // A reset does not give attempts back: they count across the whole job.
  EXPECT_TRUE(restart.onFailure(at(1h)));
  EXPECT_EQ(restart.onFailure(at(2h)), std::nullopt);
  EXPECT_EQ(restart.giveUpReason(), "restart strategy exponential-delay allows 2 restarts");
}

TEST_F(RestartStrategyTest, FailureRateGivesUpOnMoreFailuresThanAllowedWithinTheInterval) {
  auto rate = strategy().initFailureRate();
  rate.setMaxFailures(2);
  rate.setIntervalMs(10000);
  rate.setDelayMs(250);
  RestartStrategy restart = RestartStrategy::fromWire(strategy().asReader());
  EXPECT_EQ(restart.onFailure(at(0s)), Duration(250));
  EXPECT_EQ(restart.onFailure(at(5s)), Duration(250));
  // The first failure left the window: two within it again, still allowed.
  EXPECT_EQ(restart.onFailure(at(10s)), Duration(250));
  EXPECT_EQ(restart.onFailure(at(14s)), std::nullopt);  // Three within 10s (10s, 14s, and 5s).
  EXPECT_EQ(restart.restarts(), 3u);
  EXPECT_EQ(restart.giveUpReason(),
            "restart strategy failure-rate allows 2 failures within 10000ms");
}

TEST_F(RestartStrategyTest, FailureRateKeepsRestartingWhileFailuresStaySparse) {
  auto rate = strategy().initFailureRate();
  rate.setMaxFailures(1);
  rate.setIntervalMs(1000);
  rate.setDelayMs(10);
  RestartStrategy restart = RestartStrategy::fromWire(strategy().asReader());
  for (int i = 0; i < 50; ++i) EXPECT_EQ(restart.onFailure(at(Duration(i * 1000))), Duration(10));
  EXPECT_EQ(restart.onFailure(at(Duration(49 * 1000 + 999))), std::nullopt);
}

}  // namespace
}  // namespace regent::jobmaster

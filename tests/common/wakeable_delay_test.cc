// WakeableDelay on a fake clock: a wait runs its whole delay unless woken, wakeAll() ends every
// pending wait and none begun after it, and destroying the delay rejects the waits left.
#include "common/wakeable_delay.h"

#include <gtest/gtest.h>
#include <kj/timer.h>

#include <memory>
#include <string>

namespace regent {
namespace {

class WakeableDelayTest : public ::testing::Test {
 protected:
  ~WakeableDelayTest() noexcept override = default;

  // Tracks one wait: `ended` once it resolved, `failure` if it rejected.
  struct Waiter {
    bool ended = false;
    std::string failure;
    kj::Promise<void> promise{nullptr};
  };

  std::unique_ptr<Waiter> start(Duration delay) {
    auto waiter = std::make_unique<Waiter>();
    Waiter* raw = waiter.get();
    waiter->promise = delay_->wait(delay)
                          .then([raw] { raw->ended = true; },
                                [raw](kj::Exception&& e) {
                                  raw->ended = true;
                                  raw->failure = e.getDescription().cStr();
                                })
                          .eagerlyEvaluate(nullptr);
    return waiter;
  }

  void settle() { waitScope_.poll(); }

  void advance(kj::Duration by) {
    timer_.advanceTo(timer_.now() + by);
    settle();
  }

  kj::EventLoop loop_;
  kj::WaitScope waitScope_{loop_};
  kj::TimerImpl timer_{kj::origin<kj::TimePoint>()};
  std::unique_ptr<WakeableDelay> delay_ = std::make_unique<WakeableDelay>(timer_);
};

TEST_F(WakeableDelayTest, AWaitThatIsNotWokenRunsItsWholeDelay) {
  auto waiter = start(Duration(1000));
  advance(999 * kj::MILLISECONDS);
  EXPECT_FALSE(waiter->ended);
  advance(1 * kj::MILLISECONDS);
  EXPECT_TRUE(waiter->ended);
  EXPECT_EQ(waiter->failure, "");
}

TEST_F(WakeableDelayTest, WakeAllEndsEveryPendingWaitAtOnce) {
  auto first = start(Duration(1000));
  auto second = start(Duration(60000));
  settle();
  EXPECT_FALSE(first->ended);
  EXPECT_FALSE(second->ended);

  delay_->wakeAll();
  settle();
  EXPECT_TRUE(first->ended);
  EXPECT_TRUE(second->ended);
  EXPECT_EQ(first->failure, "");
  EXPECT_EQ(second->failure, "");
}

TEST_F(WakeableDelayTest, AWaitBegunAfterAWakeIsEndedOnlyByItsTimerOrTheNextWake) {
  auto before = start(Duration(1000));
  delay_->wakeAll();
  auto after = start(Duration(1000));
  settle();
  EXPECT_TRUE(before->ended);
  EXPECT_FALSE(after->ended);

  delay_->wakeAll();
  settle();
  EXPECT_TRUE(after->ended);

  auto timed = start(Duration(1000));
  advance(1000 * kj::MILLISECONDS);
  EXPECT_TRUE(timed->ended);
}

TEST_F(WakeableDelayTest, AWaitEndedByItsTimerIsNotAffectedByALaterWake) {
  auto waiter = start(Duration(10));
  advance(10 * kj::MILLISECONDS);
  ASSERT_TRUE(waiter->ended);
  delay_->wakeAll();  // Nothing left to wake: no error, no second resolution.
  settle();
  EXPECT_EQ(waiter->failure, "");
}

TEST_F(WakeableDelayTest, ADroppedWaitDoesNotKeepOthersFromBeingWoken) {
  {
    auto dropped = start(Duration(1000));
    settle();
  }
  auto kept = start(Duration(1000));
  delay_->wakeAll();
  settle();
  EXPECT_TRUE(kept->ended);
  EXPECT_EQ(kept->failure, "");
}

TEST_F(WakeableDelayTest, DestroyingTheDelayRejectsTheWaitsStillPending) {
  auto waiter = start(Duration(60000));
  settle();
  delay_ = nullptr;
  settle();
  EXPECT_TRUE(waiter->ended);
  EXPECT_NE(waiter->failure, "");
}

}  // namespace
}  // namespace regent

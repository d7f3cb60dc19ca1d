// The leader term on memory stores and a fake clock: recovery retried with backoff, a revoke
// during recovery, and the term's gateway serving only after recovery.
#include "services/master/leader_term.h"

#include <gtest/gtest.h>
#include <kj/timer.h>

#include <string>

#include "common/event_loop.h"
#include "tests/store/fake_stores_test_util.h"

namespace regent::master {
namespace {

using wire::DispatcherGateway;

class LeaderTermTest : public ::testing::Test {
 protected:
  ~LeaderTermTest() noexcept override = default;

  // A term of epoch 4 whose retries wait exactly 1 s each (no jitter).
  void grant() {
    LeaderTermOptions options;
    options.jitter = [] { return 0.0; };
    options.nowMs = [] { return int64_t{1700000000000}; };
    term_ = kj::heap<LeaderTerm>(timer_, 4, counters_, services_,
                                 store::StoreTerm{4, "latch/m-0000000001"}, kj::mv(options));
    started_ = term_->start()
                   .then([this]() { startDone_ = true; },
                         [this](kj::Exception&& e) { startFailure_ = e.getDescription().cStr(); })
                   .eagerlyEvaluate(nullptr);
    settle();
  }

  // Runs everything runnable now (the fake stores answer at once; only the timer waits).
  void settle() { loop_.waitScope().poll(); }

  void advance(kj::Duration by) {
    timer_.advanceTo(timer_.now() + by);
    settle();
  }

  capnp::Response<DispatcherGateway::ListJobsResults> listJobs(DispatcherGateway::Client& gateway) {
    auto request = gateway.listJobsRequest();
    request.setEpoch(4);
    return loop_.run(request.send());
  }

  EventLoop loop_;
  kj::TimerImpl timer_{kj::origin<kj::TimePoint>()};
  store::testing::FakeStoreBackend backend_;
  store::testing::FakeStoreServices services_{backend_};
  rpc::FencingCounters counters_;
  kj::Own<LeaderTerm> term_;
  kj::Promise<void> started_ = nullptr;
  bool startDone_ = false;
  std::string startFailure_;
};

TEST_F(LeaderTermTest, ATermIsReadyAndItsGatewayServesOnlyAfterRecovery) {
  backend_.holdWrites = false;
  backend_.failReads = 1;  // The first recovery cannot read the job results.
  grant();
  EXPECT_FALSE(term_->ready());
  EXPECT_FALSE(startDone_);
  EXPECT_TRUE(term_->dispatcher() == nullptr);
  DispatcherGateway::Client gateway = KJ_ASSERT_NONNULL(term_->dispatcherGateway());
  auto early = listJobs(gateway);
  ASSERT_TRUE(early.hasFailure());
  EXPECT_TRUE(early.getFailure().isUnavailable()) << early.getFailure().getMessage().cStr();

  advance(1 * kj::SECONDS);
  EXPECT_TRUE(startDone_) << startFailure_;
  EXPECT_TRUE(term_->ready());
  EXPECT_TRUE(term_->dispatcher() != nullptr);
  EXPECT_FALSE(listJobs(gateway).hasFailure());
  EXPECT_FALSE(term_->serving());  // Published by the process, not by the term.
}

TEST_F(LeaderTermTest, OpeningAndRecoveryAreRetriedAfterTheBackoffDelay) {
  services_.failOpens = 2;
  backend_.failReads = 1;
  grant();
  EXPECT_EQ(services_.opens, 1u);
  EXPECT_TRUE(term_->dispatcherGateway() == nullptr);  // No stores, no gateway yet.

  advance(999 * kj::MILLISECONDS);
  EXPECT_EQ(services_.opens, 1u);  // Waits the whole delay.
  advance(1 * kj::MILLISECONDS);
  EXPECT_EQ(services_.opens, 2u);
  advance(1 * kj::SECONDS);
  EXPECT_EQ(services_.opens, 3u);  // Opened; the recovery's first read fails.
  ASSERT_EQ(services_.terms.size(), 1u);
  EXPECT_EQ(services_.terms[0].epoch, 4u);
  EXPECT_EQ(services_.terms[0].latchPath, "latch/m-0000000001");
  EXPECT_FALSE(term_->ready());

  advance(1 * kj::SECONDS);
  EXPECT_TRUE(startDone_) << startFailure_;
  EXPECT_TRUE(term_->ready());
  EXPECT_EQ(services_.opens, 3u);  // The recovery retry reuses the term's stores.
}

TEST_F(LeaderTermTest, EndingTheTermDuringRecoveryCancelsItsStartAndFencesItsGateway) {
  backend_.failReads = 1000;  // Recovery never succeeds.
  grant();
  advance(3 * kj::SECONDS);
  DispatcherGateway::Client gateway = KJ_ASSERT_NONNULL(term_->dispatcherGateway());
  ASSERT_FALSE(term_->ready());

  term_ = nullptr;
  settle();
  EXPECT_FALSE(startDone_);
  EXPECT_NE(startFailure_.find("epoch 4"), std::string::npos) << startFailure_;
  const size_t reads = backend_.reads;
  advance(60 * kj::SECONDS);
  EXPECT_EQ(backend_.reads, reads);  // No retry outlives the term.

  auto late = listJobs(gateway);
  ASSERT_TRUE(late.hasFailure());
  EXPECT_TRUE(late.getFailure().isFencing()) << late.getFailure().getMessage().cStr();
  EXPECT_EQ(late.getFailure().getFencing().getExpected(), 0u);
}

}  // namespace
}  // namespace regent::master

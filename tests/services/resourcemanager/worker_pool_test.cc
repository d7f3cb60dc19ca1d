// The WorkerPool on a fake clock: how many workers it starts for unmet slots (never more than
// needed, never past the cap, up to the floor), that nothing starts before the provider listed
// what earlier leaders started, the start and idle timeouts, failed starts retried with backoff
// and stopped at the failure rate, registrations that adopt workers it did not start, and the
// waiting reason.
#include "services/resourcemanager/worker_pool.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace regent::resourcemanager {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

WorkerPoolOptions poolOptions() {
  WorkerPoolOptions options;
  options.provider = "process";
  options.max = 5;
  options.min = 0;
  options.slotsPerWorker = 4;
  options.slotProfile = Profile{1000, kGiB};
  options.startTimeout = Duration(10000);
  options.idleTimeout = Duration(3000);
  options.maxFailuresPerMinute = 3;
  options.retryInitial = Duration(1000);
  options.retryMax = Duration(8000);
  return options;
}

class WorkerPoolTest : public ::testing::Test {
 protected:
  explicit WorkerPoolTest(WorkerPoolOptions options = poolOptions())
      : pool_(options, 7, [] { return 1.0; }) {}

  PoolDecisions plan(uint32_t unmet) {
    return pool_.plan(
        unmet,
        [this](const ResourceId& id) {
          auto found = views_.find(id);
          return found == views_.end() ? WorkerPool::SlotView{} : found->second;
        },
        now_);
  }

  // Starts answered and registrations made for every id in `ids`, each reported idle or not.
  void startAndRegister(const std::vector<std::string>& ids, bool idle) {
    for (const std::string& id : ids) {
      pool_.started(id, now_);
      const ResourceId resource = ResourceId::random();
      ASSERT_TRUE(pool_.registered("process:" + id, resource, now_));
      views_[resource] = WorkerPool::SlotView{true, idle};
      resources_[id] = resource;
    }
  }

  void advance(Duration by) { now_ += by; }

  WorkerPool pool_;
  MonoTime now_{};
  std::map<ResourceId, WorkerPool::SlotView> views_;
  std::map<std::string, ResourceId> resources_;
};

TEST_F(WorkerPoolTest, NothingStartsBeforeTheProviderListedWhatEarlierLeadersStarted) {
  EXPECT_TRUE(plan(8).start.empty());
  pool_.listed({"e6-1", "e6-2"}, now_);
  // Two pending workers of four slots cover the eight slots: none more.
  EXPECT_TRUE(plan(8).start.empty());
  EXPECT_EQ(pool_.counts().pending, 2u);
  // Two more slots: one more worker.
  const PoolDecisions more = plan(10);
  ASSERT_EQ(more.start.size(), 1u);
  EXPECT_EQ(more.start[0], "e7-1");
}

TEST_F(WorkerPoolTest, StartsJustTheWorkersTheUnmetSlotsNeed) {
  pool_.listed({}, now_);
  const PoolDecisions first = plan(6);
  EXPECT_EQ(first.start, (std::vector<std::string>{"e7-1", "e7-2"}));
  EXPECT_EQ(pool_.counts().requested, 2u);
  // Asking again while they start changes nothing.
  EXPECT_TRUE(plan(6).start.empty());
  // One registered but not reported yet still counts as coming.
  pool_.started("e7-1", now_);
  pool_.started("e7-2", now_);
  ASSERT_TRUE(pool_.registered("process:e7-1", ResourceId::random(), now_));
  EXPECT_TRUE(plan(6).start.empty());
}

TEST_F(WorkerPoolTest, TheCapHoldsAndTheFloorIsKept) {
  WorkerPoolOptions options = poolOptions();
  options.min = 2;
  options.max = 3;
  WorkerPool pool(options, 7, [] { return 1.0; });
  auto noView = [](const ResourceId&) { return WorkerPool::SlotView{}; };
  pool.listed({}, now_);
  // Nothing needed: the floor.
  EXPECT_EQ(pool.plan(0, noView, now_).start.size(), 2u);
  // 100 slots wanted: one more, up to the cap.
  EXPECT_EQ(pool.plan(100, noView, now_).start.size(), 1u);
  EXPECT_TRUE(pool.plan(100, noView, now_).start.empty());
  EXPECT_EQ(pool.counts().requested, 3u);
}

TEST_F(WorkerPoolTest, IdleWorkersAreReleasedAfterTheIdleTimeoutDownToTheFloor) {
  WorkerPoolOptions options = poolOptions();
  options.min = 1;
  WorkerPool pool(options, 7, [] { return 1.0; });
  pool.listed({}, now_);
  const PoolDecisions started = pool.plan(8, [](const ResourceId&) { return WorkerPool::SlotView{}; },
                                          now_);
  ASSERT_EQ(started.start.size(), 2u);
  std::map<ResourceId, WorkerPool::SlotView> views;
  for (const std::string& id : started.start) {
    pool.started(id, now_);
    const ResourceId resource = ResourceId::random();
    ASSERT_TRUE(pool.registered("process:" + id, resource, now_));
    views[resource] = WorkerPool::SlotView{true, true};
  }
  auto view = [&views](const ResourceId& id) { return views.at(id); };
  EXPECT_TRUE(pool.plan(0, view, now_).release.empty());  // Idle from now.
  advance(Duration(2999));
  EXPECT_TRUE(pool.plan(0, view, now_).release.empty());
  advance(Duration(1));
  const PoolDecisions idle = pool.plan(0, view, now_);
  ASSERT_EQ(idle.release.size(), 1u);  // The floor keeps the other.
  EXPECT_TRUE(idle.release[0].resourceId.has_value());
  EXPECT_NE(idle.release[0].reason.find("resourcemanager.workers.idle-timeout"),
            std::string::npos);
  EXPECT_EQ(pool.counts().releasing, 1u);
  pool.released(idle.release[0].id);
  EXPECT_EQ(pool.releasedTotal(), 1u);
  EXPECT_EQ(pool.counts().registered, 1u);
}

TEST_F(WorkerPoolTest, AnIdleWorkerStaysWhileSlotsAreWanted) {
  pool_.listed({}, now_);
  startAndRegister(plan(4).start, true);
  plan(0);
  advance(Duration(5000));
  // Slots wanted that its free slots could not take (another profile, say): it stays.
  const PoolDecisions wanted = plan(2);
  EXPECT_TRUE(wanted.release.empty());
  EXPECT_EQ(wanted.start.size(), 1u);
}

TEST_F(WorkerPoolTest, AWorkerThatGetsASlotAgainIsIdleAfreshAfterwards) {
  pool_.listed({}, now_);
  const PoolDecisions started = plan(4);
  startAndRegister(started.start, true);
  plan(0);
  advance(Duration(2000));
  views_[resources_["e7-1"]].idle = false;  // A slot allocated.
  plan(0);
  views_[resources_["e7-1"]].idle = true;
  advance(Duration(2000));
  EXPECT_TRUE(plan(0).release.empty());  // Idle since 2 s only.
  advance(Duration(3000));
  EXPECT_EQ(plan(0).release.size(), 1u);
}

TEST_F(WorkerPoolTest, AWorkerThatDoesNotRegisterInTimeIsReleasedAsAFailedStart) {
  pool_.listed({}, now_);
  const PoolDecisions started = plan(4);
  ASSERT_EQ(started.start.size(), 1u);
  pool_.started("e7-1", now_);
  advance(Duration(9999));
  EXPECT_TRUE(plan(4).release.empty());
  advance(Duration(1));
  const PoolDecisions late = plan(4);
  ASSERT_EQ(late.release.size(), 1u);
  EXPECT_TRUE(late.release[0].failedStart);
  EXPECT_FALSE(late.release[0].resourceId.has_value());
  EXPECT_NE(late.release[0].reason.find("resourcemanager.workers.start-timeout"),
            std::string::npos);
  EXPECT_EQ(pool_.startFailures(), 1u);
  // Its replacement waits out the backoff.
  EXPECT_TRUE(late.start.empty());
}

TEST_F(WorkerPoolTest, FailedStartsBackOffAndStopAtTheFailureRate) {
  pool_.listed({}, now_);
  std::vector<Duration> waits;
  // Each failure: the next start only after the backoff (1 s, 2 s, ...), one at a time.
  for (int failure = 0; failure < 3; ++failure) {
    PoolDecisions decisions = plan(4);
    Duration waited(0);
    while (decisions.start.empty() && waited < Duration(60000)) {
      advance(Duration(100));
      waited += Duration(100);
      decisions = plan(4);
    }
    ASSERT_FALSE(decisions.start.empty()) << "failure " << failure;
    if (failure > 0) {
      EXPECT_EQ(decisions.start.size(), 1u);
      waits.push_back(waited);
    }
    for (const std::string& id : decisions.start) {
      pool_.startFailed(id, "process: cannot start /nowhere/regent-worker: no such file", now_);
    }
  }
  EXPECT_EQ(waits, (std::vector<Duration>{Duration(1000), Duration(2000)}));
  // Three failures within a minute: the rate (3 per minute) is reached, nothing starts.
  advance(Duration(30000));
  EXPECT_TRUE(plan(4).start.empty());
  const std::string reason = pool_.waitingReason(now_);
  EXPECT_NE(reason.find("resourcemanager.workers.max-failure-rate"), std::string::npos) << reason;
  EXPECT_NE(reason.find("no such file"), std::string::npos) << reason;
  // A minute after the first failures, starting resumes.
  advance(Duration(31000));
  EXPECT_EQ(plan(4).start.size(), 1u);
}

TEST_F(WorkerPoolTest, AWorkerThatEndsBeforeRegisteringIsAFailedStart) {
  pool_.listed({}, now_);
  ASSERT_EQ(plan(4).start.size(), 1u);
  pool_.started("e7-1", now_);
  pool_.ended("e7-1", "worker e7-1 (pid 42) exited with status 2", now_);
  EXPECT_EQ(pool_.startFailures(), 1u);
  EXPECT_EQ(pool_.counts().pending, 0u);
  EXPECT_NE(pool_.waitingReason(now_).find("exited with status 2"), std::string::npos);
}

TEST_F(WorkerPoolTest, ARegistrationOfAnotherProviderOrByHandIsNotThePools) {
  pool_.listed({}, now_);
  EXPECT_FALSE(pool_.registered("", ResourceId::random(), now_));
  EXPECT_FALSE(pool_.registered("docker:e1-1", ResourceId::random(), now_));
  EXPECT_FALSE(pool_.registered("process:", ResourceId::random(), now_));
  EXPECT_EQ(pool_.counts().registered, 0u);
  // One of its provider it did not start nor list (an earlier leader's): adopted.
  EXPECT_TRUE(pool_.registered("process:e3-9", ResourceId::random(), now_));
  EXPECT_EQ(pool_.counts().registered, 1u);
  EXPECT_TRUE(pool_.workers().at("e3-9").recovered);
}

TEST_F(WorkerPoolTest, ASecondWorkerClaimingARegisteredWorkersIdIsNotThePools) {
  pool_.listed({}, now_);
  startAndRegister(plan(4).start, true);
  const ResourceId impostor = ResourceId::random();
  EXPECT_FALSE(pool_.registered("process:e7-1", impostor, now_));
  EXPECT_EQ(pool_.byResourceId(impostor), nullptr);
  EXPECT_EQ(pool_.workers().at("e7-1").resourceId, resources_["e7-1"]);
}

TEST_F(WorkerPoolTest, AClaimTheProviderDisownsOrASecondIdOfOneWorkerIsNotThePools) {
  pool_.listed({"e6-1", "e6-2"}, now_);
  // The provider follows e6-1 as another process: not it.
  EXPECT_FALSE(pool_.registered("process:e6-1", ResourceId::random(), now_, Vouch::kNo));
  EXPECT_EQ(pool_.workers().at("e6-1").phase, PooledPhase::kPending);
  const ResourceId real = ResourceId::random();
  EXPECT_TRUE(pool_.registered("process:e6-1", real, now_, Vouch::kYes));
  // The same worker claiming a second id.
  EXPECT_FALSE(pool_.registered("process:e6-2", real, now_, Vouch::kUnknown));
  EXPECT_EQ(pool_.workers().at("e6-2").phase, PooledPhase::kPending);
}

TEST_F(WorkerPoolTest, AReleaseTheWorkerRefusesIsCalledOffAndItIsRegisteredAgain) {
  pool_.listed({}, now_);
  startAndRegister(plan(4).start, true);
  plan(0);
  advance(Duration(3000));
  const PoolDecisions idle = plan(0);
  ASSERT_EQ(idle.release.size(), 1u);
  pool_.releaseCalledOff("e7-1", now_);
  EXPECT_EQ(pool_.workers().at("e7-1").phase, PooledPhase::kRegistered);
  EXPECT_EQ(pool_.workers().at("e7-1").resourceId, resources_["e7-1"]);
  EXPECT_EQ(pool_.counts().releasing, 0u);
}

TEST_F(WorkerPoolTest, AWorkerThatRegisteredOnceAndEndsIsNoFailedStart) {
  pool_.listed({}, now_);
  startAndRegister(plan(4).start, false);
  pool_.unregistered(resources_["e7-1"], now_);  // Disconnected: stopped by hand, say.
  pool_.ended("e7-1", "worker e7-1 (pid 9) exited with status 0", now_);
  EXPECT_EQ(pool_.startFailures(), 0u);
  EXPECT_EQ(pool_.waitingReason(now_), "");
  // Nor one that registered once and does not come back within the start timeout.
  startAndRegister(plan(4).start, false);
  pool_.unregistered(resources_["e7-2"], now_);
  advance(Duration(10000));
  const PoolDecisions gone = plan(4);
  ASSERT_EQ(gone.release.size(), 1u);
  EXPECT_FALSE(gone.release[0].failedStart);
  EXPECT_EQ(pool_.startFailures(), 0u);
}

TEST_F(WorkerPoolTest, TheNextDeadlineIsAlwaysAhead) {
  WorkerPoolOptions options = poolOptions();
  options.min = 1;
  WorkerPool pool(options, 7, [] { return 1.0; });
  pool.listed({}, now_);
  const PoolDecisions started = pool.plan(
      0, [](const ResourceId&) { return WorkerPool::SlotView{}; }, now_);
  ASSERT_EQ(started.start.size(), 1u);
  pool.started(started.start[0], now_);
  const ResourceId resource = ResourceId::random();
  ASSERT_TRUE(pool.registered("process:" + started.start[0], resource, now_));
  auto view = [](const ResourceId&) { return WorkerPool::SlotView{true, true}; };
  pool.plan(0, view, now_);
  ASSERT_TRUE(pool.nextDeadline(now_).has_value());
  // Past its idle timeout, kept by the floor: no deadline in the past to spin on.
  advance(Duration(10000));
  EXPECT_TRUE(pool.plan(0, view, now_).release.empty());
  EXPECT_FALSE(pool.nextDeadline(now_).has_value());
  // After a failed start the backoff's end is ahead, then gone once passed.
  pool.startFailed("nothing", "process: no", now_);  // Unknown id: nothing.
  const PoolDecisions more = pool.plan(4, view, now_);
  ASSERT_EQ(more.start.size(), 1u);
  pool.startFailed(more.start[0], "process: cannot start", now_);
  ASSERT_TRUE(pool.nextDeadline(now_).has_value());
  EXPECT_GT(*pool.nextDeadline(now_), now_);
}

TEST_F(WorkerPoolTest, AWorkerThatLostItsRegistrationIsPendingAgain) {
  pool_.listed({}, now_);
  startAndRegister(plan(4).start, false);
  pool_.unregistered(resources_["e7-1"], now_);
  EXPECT_EQ(pool_.counts().pending, 1u);
  EXPECT_TRUE(plan(4).start.empty());  // It still covers the four slots.
}

TEST_F(WorkerPoolTest, TheWaitingReasonCountsRequestedAndPendingWorkers) {
  EXPECT_EQ(pool_.waitingReason(now_), "");
  pool_.listed({}, now_);
  ASSERT_EQ(plan(12).start.size(), 3u);
  pool_.started("e7-1", now_);
  EXPECT_EQ(pool_.waitingReason(now_),
            "waiting for a worker to start: 2 requested, 1 pending registration");
}

TEST_F(WorkerPoolTest, AListThatFailsStartsNothingAndSaysWhy) {
  pool_.listFailed("cannot list /var/lib/regent-workers/default: Permission denied");
  EXPECT_TRUE(plan(8).start.empty());
  EXPECT_NE(pool_.waitingReason(now_).find("Permission denied"), std::string::npos);
}

}  // namespace
}  // namespace regent::resourcemanager

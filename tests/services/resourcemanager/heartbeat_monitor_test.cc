// HeartbeatMonitor's rounds (services/resourcemanager/heartbeat_monitor.h) on a kj::TimerImpl
// advanced by hand, over fake workers whose heartbeats are answered when the test says: a round
// to more workers than kHeartbeatsInFlight holds at most that many calls at once, each answer
// (or failure) sends the next, every worker gets one heartbeat per round, workers that never
// answer do not stop the round, a round still going when the next is due goes on, and a worker
// no longer followed is skipped.
#include "services/resourcemanager/heartbeat_monitor.h"

#include <gtest/gtest.h>
#include <kj/debug.h>

#include <map>
#include <memory>
#include <vector>

#include "common/event_loop.h"

namespace regent::resourcemanager {
namespace {

using wire::TaskExecutorGateway;

constexpr uint64_t kEpoch = 7;

// The heartbeats one fake worker received; each waits until answer() (or fail()).
struct FakeWorker {
  size_t heartbeats = 0;
  std::vector<kj::Own<kj::PromiseFulfiller<void>>> waiting;
};

class FakeTaskExecutor final : public TaskExecutorGateway::Server {
 public:
  explicit FakeTaskExecutor(FakeWorker& state) : state_(state) {}

  kj::Promise<void> heartbeat(HeartbeatContext context) override {
    EXPECT_EQ(context.getParams().getEpoch(), kEpoch);
    ++state_.heartbeats;
    auto paf = kj::newPromiseAndFulfiller<void>();
    state_.waiting.push_back(kj::mv(paf.fulfiller));
    return kj::mv(paf.promise);
  }

 private:
  FakeWorker& state_;
};

class FakeTargets final : public HeartbeatTargets {
 public:
  struct Followed {
    std::unique_ptr<FakeWorker> state = std::make_unique<FakeWorker>();
    TaskExecutorGateway::Client client = kj::heap<FakeTaskExecutor>(*state);
  };
  std::map<ResourceId, Followed> workers;

  void refreshAll(MonoTime) override {}
  void expire(MonoTime, Duration) override {}
  void forEachGateway(
      kj::FunctionParam<void(const ResourceId&, TaskExecutorGateway::Client&)> visit) override {
    for (auto& [id, worker] : workers) visit(id, worker.client);
  }
  kj::Maybe<TaskExecutorGateway::Client&> gatewayOf(const ResourceId& worker) override {
    auto found = workers.find(worker);
    if (found == workers.end()) return nullptr;
    return found->second.client;
  }
};

class HeartbeatMonitorTest : public ::testing::Test {
 protected:
  static constexpr size_t kWindow = HeartbeatMonitor::kHeartbeatsInFlight;

  HeartbeatMonitorTest() {
    for (size_t i = 0; i < kWorkers; ++i) targets_.workers[ResourceId::random()];
    monitor_.start(regent::monoNow(timer_));
  }
  ~HeartbeatMonitorTest() noexcept override = default;

  void settle() { loop_.waitScope().poll(); }
  void advance(Duration by) {
    timer_.advanceTo(timer_.now() + by.count() * kj::MILLISECONDS);
    settle();
  }
  size_t received() const {
    size_t total = 0;
    for (const auto& [id, worker] : targets_.workers) total += worker.state->heartbeats;
    return total;
  }
  size_t waiting() const {
    size_t total = 0;
    for (const auto& [id, worker] : targets_.workers) total += worker.state->waiting.size();
    return total;
  }
  // Answers every heartbeat waiting now (not those its answers let through); `fail`: fails them.
  void answerWaiting(bool fail = false) {
    std::vector<kj::Own<kj::PromiseFulfiller<void>>> now;
    for (auto& [id, worker] : targets_.workers) {
      for (auto& fulfiller : worker.state->waiting) now.push_back(kj::mv(fulfiller));
      worker.state->waiting.clear();
    }
    for (auto& fulfiller : now) {
      if (fail) {
        fulfiller->reject(KJ_EXCEPTION(DISCONNECTED, "the worker's connection is gone"));
      } else {
        fulfiller->fulfill();
      }
    }
    settle();
  }

  static constexpr size_t kWorkers = 2 * HeartbeatMonitor::kHeartbeatsInFlight + 100;
  static constexpr HeartbeatOptions kOptions{Duration(2000), Duration(10000), Duration(60000)};

  EventLoop loop_;
  kj::TimerImpl timer_{kj::origin<kj::TimePoint>()};
  FakeTargets targets_;
  HeartbeatMonitor monitor_{timer_, kEpoch, std::nullopt, "test", kOptions, targets_};
};

TEST_F(HeartbeatMonitorTest, ARoundHoldsAtMostItsWindowOfCallsAndEachAnswerSendsTheNext) {
  settle();
  EXPECT_EQ(received(), 0u) << "a heartbeat before the first interval";
  advance(Duration(2000));
  EXPECT_EQ(received(), kWindow);
  EXPECT_EQ(monitor_.heartbeatsInFlight(), kWindow);
  EXPECT_EQ(monitor_.heartbeatsDue(), kWorkers - kWindow);
  // Answers let the next ones through, as many as were answered.
  answerWaiting();
  EXPECT_EQ(received(), 2 * kWindow);
  EXPECT_EQ(monitor_.heartbeatsInFlight(), kWindow);
  // Failures count as ends too.
  answerWaiting(/*fail=*/true);
  EXPECT_EQ(received(), kWorkers);
  EXPECT_EQ(monitor_.heartbeatsInFlight(), kWorkers - 2 * kWindow);
  EXPECT_EQ(monitor_.heartbeatsDue(), 0u);
  answerWaiting();
  EXPECT_EQ(monitor_.heartbeatsInFlight(), 0u);
  // Every worker got exactly one heartbeat in the round.
  for (const auto& [id, worker] : targets_.workers) EXPECT_EQ(worker.state->heartbeats, 1u);
  // The next round reaches every worker again.
  advance(Duration(2000));
  EXPECT_EQ(received(), kWorkers + kWindow);
}

TEST_F(HeartbeatMonitorTest, ARoundNotFinishedWhenTheNextIsDueGoesOnInsteadOfStartingOver) {
  // Enough workers, none answering, that the round takes longer than the interval: seven
  // windows, each freed when its heartbeats give up after 500 ms.
  for (size_t i = 0; i < 1000; ++i) targets_.workers[ResourceId::random()];
  const size_t all = targets_.workers.size();
  advance(Duration(2000));
  ASSERT_EQ(received(), kWindow);
  for (int step = 0; step < 4; ++step) advance(Duration(500));  // t = 4 s: the next round is due.
  EXPECT_GT(monitor_.heartbeatsDue(), 0u);
  EXPECT_LT(received(), all);
  for (const auto& [id, worker] : targets_.workers) EXPECT_LE(worker.state->heartbeats, 1u);
  for (int step = 0; step < 3; ++step) advance(Duration(500));  // t = 5.5 s.
  EXPECT_EQ(received(), all);
  for (const auto& [id, worker] : targets_.workers) EXPECT_EQ(worker.state->heartbeats, 1u);
  EXPECT_EQ(monitor_.heartbeatsDue(), 0u);
}

TEST_F(HeartbeatMonitorTest, WorkersThatNeverAnswerSlowTheRoundButEveryOtherWorkerIsReachedInIt) {
  // No worker answers: each heartbeat frees its place when it gives up (a quarter of the
  // interval), not at rpc.call-timeout (a minute here), so the whole round still goes out
  // before the next is due.
  advance(Duration(2000));
  ASSERT_EQ(received(), kWindow);
  advance(Duration(499));
  EXPECT_EQ(received(), kWindow) << "a heartbeat gave up before a quarter of the interval";
  advance(Duration(1));
  EXPECT_EQ(received(), 2 * kWindow);
  advance(Duration(500));
  EXPECT_EQ(received(), kWorkers);
  for (const auto& [id, worker] : targets_.workers) EXPECT_EQ(worker.state->heartbeats, 1u);
  advance(Duration(500));
  EXPECT_EQ(monitor_.heartbeatsInFlight(), 0u);
  // The next round starts over as usual.
  advance(Duration(500));
  EXPECT_EQ(received(), kWorkers + kWindow);
}

TEST_F(HeartbeatMonitorTest, AWorkerNoLongerFollowedWhenItsTurnComesIsSkipped) {
  advance(Duration(2000));
  ASSERT_EQ(received(), kWindow);
  // The last worker of the round (the map is in id order) goes before its turn.
  auto last = std::prev(targets_.workers.end());
  FakeWorker* gone = last->second.state.get();
  auto keep = kj::mv(last->second);  // Its state outlives its removal.
  targets_.workers.erase(last);
  answerWaiting();
  answerWaiting();
  answerWaiting();
  EXPECT_EQ(gone->heartbeats, 0u);
  EXPECT_EQ(received(), kWorkers - 1);
  EXPECT_EQ(monitor_.heartbeatsInFlight(), 0u);
  EXPECT_EQ(monitor_.heartbeatsDue(), 0u);
}

}  // namespace
}  // namespace regent::resourcemanager

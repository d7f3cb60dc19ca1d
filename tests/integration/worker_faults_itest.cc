// Workers through crashes, pauses and network faults, with real masters, workers and ZooKeeper:
// a killed worker's slots leave the table after heartbeat.timeout; a worker stopped with SIGTERM
// disconnects, leaves the table at once and exits 0; a worker paused past heartbeat.timeout is
// removed, then registers again; a worker restarted on its data directory keeps its resource id
// and one entry; a worker cut from the leader by the TCP fault proxy reconnects with backoff to
// one registration; workers that cannot reach ZooKeeper keep their slots through a failover and
// register as soon as they learn the new leader.
#include <gtest/gtest.h>

#include <memory>
#include <regex>
#include <string>

#include "tests/fixtures/tcp_fault_proxy.h"
#include "tests/fixtures/wait_test_util.h"
#include "tests/fixtures/zookeeper_server.h"
#include "tests/integration/master_cluster_test_util.h"
#include "tests/integration/worker_cluster_test_util.h"

namespace regent::testing {
namespace {

using WorkerKind = WorkerEvent::Kind;
using MasterWorkerKind = MasterWorkerEvent::Kind;

// Generous bounds: ASan builds and parallel tests on two cores are slow; none of these waits is
// a claim about speed.
constexpr Duration kStartTimeout{60000};
constexpr Duration kTimeout{45000};
constexpr uint32_t kSlotsPerWorker = 2;

class WorkerFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = sharedZooKeeperServer();
    ASSERT_OK(server);
    zookeeper_ = server.value();
    quorum_ = zookeeper_->connectString();
    clusterId_ = uniqueClusterId("worker-faults");
    masters_ = std::make_unique<MasterCluster>(workerTestMasters(quorum_, clusterId_));
    workers_ = std::make_unique<WorkerCluster>(workerTestWorkers(quorum_, clusterId_));
    regentctl_ = std::make_unique<Regentctl>(quorum_, clusterId_);
  }

  // One master (with `extraSet`), leading and serving; returns its slot.
  size_t startLeader(std::vector<std::string> extraSet = {}) {
    auto slot = masters_->startMaster(std::move(extraSet));
    EXPECT_OK(slot);
    if (!slot.ok()) return 0;
    auto epoch = waitForServing(*masters_, slot.value(), kStartTimeout);
    EXPECT_OK(epoch);
    epoch_ = epoch.ok() ? epoch.value() : 0;
    return slot.value();
  }

  // `count` workers, each registered with the leader of epoch_ (optionally through `quorum`).
  void startWorkers(size_t count, std::optional<std::string> quorum = std::nullopt) {
    for (size_t i = 0; i < count; ++i) {
      auto slot = workers_->startWorker({}, quorum);
      ASSERT_OK(slot);
      ASSERT_OK(workers_->waitForRegistered(slot.value(), epoch_, kStartTimeout));
    }
  }

  // Waits until the table lists exactly the workers of `slots`, each with all its slots.
  SlotTable waitForWorkers(const std::vector<size_t>& slots) {
    std::set<std::string> ids;
    for (size_t slot : slots) ids.insert(workers_->resourceId(slot));
    auto table = regentctl_->waitForTable(
        [&](const SlotTable& t) {
          return resourceIds(t) == ids && t.size() == ids.size() * kSlotsPerWorker;
        },
        kTimeout);
    EXPECT_OK(table);
    return table.ok() ? table.value() : SlotTable{};
  }

  // Waits for the master's `worker removed` line of the worker in `slot`; returns its reason.
  std::string waitForRemoval(size_t master, size_t slot) {
    const std::string id = workers_->resourceId(slot);
    auto removed = waitForMasterWorkerEvent(
        *masters_, master,
        [&](const MasterWorkerEvent& e) {
          return e.kind == MasterWorkerKind::kRemoved && e.resourceId == id;
        },
        kTimeout);
    EXPECT_OK(removed);
    return removed.ok() ? removed.value().reason : "";
  }

  size_t masterRegistrations(size_t master, const std::string& resourceId) {
    size_t count = 0;
    for (const auto& event : masterWorkerEvents(*masters_, master)) {
      if (event.kind == MasterWorkerKind::kRegistered && event.resourceId == resourceId) ++count;
    }
    return count;
  }

  EventLoop loop_;
  ZooKeeperServer* zookeeper_ = nullptr;
  std::string quorum_;
  std::string clusterId_;
  std::unique_ptr<MasterCluster> masters_;
  std::unique_ptr<WorkerCluster> workers_;
  std::unique_ptr<Regentctl> regentctl_;
  uint64_t epoch_ = 0;
};

TEST_F(WorkerFaults, AKilledWorkersSlotsLeaveTheTableAfterTheHeartbeatTimeout) {
  const size_t master = startLeader();
  startWorkers(2);
  if (HasFailure()) return;
  waitForWorkers({0, 1});

  ASSERT_OK(workers_->kill(0));
  EXPECT_EQ(waitForRemoval(master, 0), "heartbeat timeout") << masters_->describe();
  const SlotTable after = waitForWorkers({1});
  EXPECT_EQ(after.size(), kSlotsPerWorker) << describeTable(after);
}

TEST_F(WorkerFaults, AWorkerStoppedWithSigtermLeavesTheTableAtOnceAndExitsZero) {
  const size_t master = startLeader();
  startWorkers(2);
  if (HasFailure()) return;
  waitForWorkers({0, 1});

  ASSERT_OK(workers_->process(0).terminate());
  auto exit = workers_->process(0).waitForExit(kTimeout);
  ASSERT_TRUE(exit) << workers_->describe();
  EXPECT_EQ(exit->exitCode, 0) << workers_->describe();
  const auto events = workers_->events(0);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().kind, WorkerKind::kExiting) << workers_->describe();
  EXPECT_EQ(events.back().code, 0);
  // Removed on its disconnect, not after a heartbeat timeout.
  const std::string reason = waitForRemoval(master, 0);
  EXPECT_EQ(reason.rfind("disconnected: ", 0), 0u) << reason;
  waitForWorkers({1});
}

TEST_F(WorkerFaults, AWorkerRestartedOnItsDataDirectoryKeepsItsResourceIdAndOneEntry) {
  const size_t master = startLeader();
  startWorkers(2);
  if (HasFailure()) return;
  waitForWorkers({0, 1});
  const std::string id = workers_->resourceId(0);
  ASSERT_FALSE(id.empty());

  // Restarted at once: its old registration is still in the table when the new one comes.
  ASSERT_OK(workers_->kill(0));
  ASSERT_OK(workers_->restart(0));
  ASSERT_OK(workers_->waitForRegistered(0, epoch_, kTimeout));
  EXPECT_EQ(workers_->resourceId(0), id);
  waitForWorkers({0, 1});
  auto rows = regentctl_->workers();
  ASSERT_OK(rows);
  size_t entries = 0;
  for (const WorkerRow& row : rows.value()) {
    if (row.resourceId != id) continue;
    ++entries;
    EXPECT_EQ(row.pid, workers_->process(0).pid()) << "the entry is the dead process's";
  }
  EXPECT_EQ(entries, 1u);
  EXPECT_GE(masterRegistrations(master, id), 2u) << masters_->describe();
}

TEST_F(WorkerFaults, AWorkerPausedPastTheHeartbeatTimeoutIsRemovedThenRegistersAgain) {
  const size_t master = startLeader();
  startWorkers(2);
  if (HasFailure()) return;
  waitForWorkers({0, 1});

  ASSERT_OK(workers_->process(0).pause());
  EXPECT_EQ(waitForRemoval(master, 0), "heartbeat timeout") << masters_->describe();
  waitForWorkers({1});
  ASSERT_OK(workers_->process(0).resume());

  ASSERT_OK(workers_->waitForRegistered(0, epoch_, kTimeout, 2));
  EXPECT_GE(workers_->count(0, WorkerKind::kResourceManagerLost), 1u) << workers_->describe();
  waitForWorkers({0, 1});
  EXPECT_GE(masterRegistrations(master, workers_->resourceId(0)), 2u) << masters_->describe();
}

TEST_F(WorkerFaults, AWorkerCutFromTheLeaderReconnectsWithBackoffToOneRegistration) {
  // The master advertises the proxy: workers dial the leader through it.
  auto proxy = ThreadedTcpFaultProxy::start("127.0.0.1", 1);
  ASSERT_OK(proxy);
  const size_t master = startLeader({"rpc.advertised-address=" + proxy.value()->address()});
  auto address = masterRpcAddress(*masters_, master);
  ASSERT_OK(address);
  const size_t colon = address.value().rfind(':');
  proxy.value()->setUpstream(address.value().substr(0, colon),
                             std::stoi(address.value().substr(colon + 1)));
  startWorkers(2);
  if (HasFailure()) return;
  const SlotTable before = waitForWorkers({0, 1});

  proxy.value()->cut();
  const uint64_t acceptedAtCut = proxy.value()->acceptedCount();
  for (size_t w = 0; w < 2; ++w) {
    ASSERT_OK(workers_->waitForEvent(
        w, [](const WorkerEvent& e) { return e.kind == WorkerKind::kResourceManagerLost; },
        kTimeout));
    EXPECT_EQ(waitForRemoval(master, w), "heartbeat timeout") << masters_->describe();
  }
  // They keep trying, with backoff (the proxy accepts and closes each attempt).
  EXPECT_TRUE(
      waitUntil([&] { return proxy.value()->acceptedCount() >= acceptedAtCut + 4; }, kTimeout))
      << "accepted " << proxy.value()->acceptedCount() - acceptedAtCut << " attempts while cut";
  proxy.value()->resume();

  for (size_t w = 0; w < 2; ++w) {
    auto again = workers_->waitForRegistered(w, epoch_, kTimeout, 2);
    ASSERT_OK(again);
    EXPECT_GE(again.value().attempts, 2u) << "registered again at the first attempt";
  }
  auto after = regentctl_->waitForTable([&](const SlotTable& t) { return t == before; }, kTimeout);
  ASSERT_OK(after);
  for (size_t w = 0; w < 2; ++w) {
    EXPECT_GE(masterRegistrations(master, workers_->resourceId(w)), 2u) << masters_->describe();
  }
}

TEST_F(WorkerFaults, WorkersCutFromZooKeeperKeepTheirSlotsAndRegisterOnceTheyLearnTheNewLeader) {
  auto zkProxy = ThreadedTcpFaultProxy::start("127.0.0.1", zookeeper_->clientPort());
  ASSERT_OK(zkProxy);
  ASSERT_OK(masters_->startMasters(2));
  auto first = masters_->waitForGrant(1, kStartTimeout);
  ASSERT_OK(first);
  auto epoch = waitForServing(*masters_, first.value(), kStartTimeout);
  ASSERT_OK(epoch);
  epoch_ = epoch.value();
  startWorkers(2, zkProxy.value()->address());
  if (HasFailure()) return;
  waitForWorkers({0, 1});

  // Every slot held by a running job, so that "keep their slots" has something to keep (and the
  // new leader's JobMaster, declaring before the workers are back, finds no free slot to take
  // in place of theirs).
  constexpr uint32_t kAllocated = 2 * kSlotsPerWorker;
  auto job = submitSlotHoldingJob(*regentctl_, kAllocated, "0.5", "64MiB");
  ASSERT_OK(job);
  auto before = regentctl_->waitForTable(
      [&](const SlotTable& t) {
        return t.size() == kAllocated && countState(t, "ALLOCATED") == kAllocated;
      },
      kTimeout);
  ASSERT_OK(before);
  for (const SlotRow& row : before.value()) {
    EXPECT_EQ(row.jobId, job.value().toHex()) << row.describe();
  }

  // The workers lose ZooKeeper, then their leader.
  zkProxy.value()->cut();
  ASSERT_OK(masters_->kill(first.value()));
  auto next = masters_->waitForGrant(epoch_ + 1, kTimeout);
  ASSERT_OK(next);
  ASSERT_OK(waitForServing(*masters_, next.value(), kTimeout));
  for (size_t w = 0; w < 2; ++w) {
    ASSERT_OK(workers_->waitForEvent(
        w, [](const WorkerEvent& e) { return e.kind == WorkerKind::kResourceManagerLost; },
        kTimeout));
  }
  // Still cut: they could not have learned the new leader, and hold their slots as they were.
  for (size_t w = 0; w < 2; ++w) {
    for (const WorkerEvent& event : workers_->events(w)) {
      EXPECT_FALSE(event.kind == WorkerKind::kRegistered && event.epoch == epoch_ + 1)
          << "worker " << w << " registered with the new leader while cut from ZooKeeper";
    }
    EXPECT_TRUE(workers_->process(w).running()) << workers_->describe();
  }
  double allocatedWhileCut = 0;
  for (size_t w = 0; w < 2; ++w) {
    auto metrics = httpGetText(loop_, workers_->httpAddress(w), "/metrics");
    ASSERT_OK(metrics);
    allocatedWhileCut +=
        metricValue(metrics.value().second, "regent_worker_slots", "state=\"allocated\"")
            .value_or(-100);
  }
  EXPECT_EQ(allocatedWhileCut, kAllocated);
  for (size_t w = 0; w < 2; ++w) {
    auto ready = httpGetText(loop_, workers_->httpAddress(w), "/readyz");
    ASSERT_OK(ready);
    EXPECT_EQ(ready.value().first, 503u)
        << "worker " << w << " ready without a leader: " << ready.value().second;
  }

  zkProxy.value()->resume();
  for (size_t w = 0; w < 2; ++w) {
    ASSERT_OK(workers_->waitForRegistered(w, epoch_ + 1, kTimeout));
  }
  auto after =
      regentctl_->waitForTable([&](const SlotTable& t) { return t == before.value(); }, kTimeout);
  ASSERT_OK(after);
  for (size_t w = 0; w < 2; ++w) {
    auto ready = httpGetText(loop_, workers_->httpAddress(w), "/readyz");
    ASSERT_OK(ready);
    EXPECT_EQ(ready.value().first, 200u) << ready.value().second;
  }
}

}  // namespace
}  // namespace regent::testing

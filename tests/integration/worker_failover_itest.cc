// The slot table survives every kind of failover: three real masters and three real workers,
// every slot held by the subtasks of one submitted job (long sleeps), then the leader SIGKILLed,
// handing over (regentctl failover) or SIGSTOPped past its ZooKeeper session. Every worker
// registers with the new leader, whose slot table (regentctl workers --json) settles on the old
// one: same workers, same slots, same allocation ids, same job (the new leader's JobMaster adopts
// the attempts running in the offered slots, docs/jobgraph.md). A stopped leader that wakes up
// is refused by the workers' epoch gate and changes nothing on them. A worker paused through the
// failover is missing from the new table until it registers, then brings its allocations back.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <string>

#include "tests/fixtures/wait_test_util.h"
#include "tests/fixtures/zookeeper_server.h"
#include "tests/integration/master_cluster_test_util.h"
#include "tests/integration/worker_cluster_test_util.h"

namespace regent::testing {
namespace {

// Generous bounds: ASan builds and parallel tests on two cores are slow; none of these waits is
// a claim about speed.
constexpr Duration kStartTimeout{60000};
constexpr Duration kFailoverTimeout{45000};
constexpr size_t kWorkers = 3;
constexpr uint32_t kSlotsPerWorker = 2;
// Every slot: the new leader's JobMaster may declare its requirement before every worker has
// reported its allocations, and a free slot would then be allocated in place of an offered one.
constexpr uint32_t kAllocated = kWorkers * kSlotsPerWorker;

class WorkerFailover : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = sharedZooKeeperServer();
    ASSERT_OK(server);
    quorum_ = server.value()->connectString();
    recreateClusters("text");
  }

  // Masters and workers (none started yet) of a new cluster, logging in `logFormat`.
  void recreateClusters(const std::string& logFormat) {
    const std::string clusterId = uniqueClusterId("worker-failover");
    MasterClusterOptions masters = workerTestMasters(quorum_, clusterId);
    masters.logFormat = logFormat;
    WorkerClusterOptions workers = workerTestWorkers(quorum_, clusterId);
    workers.logFormat = logFormat;
    masters_ = std::make_unique<MasterCluster>(std::move(masters));
    workers_ = std::make_unique<WorkerCluster>(std::move(workers));
    regentctl_ = std::make_unique<Regentctl>(quorum_, clusterId);
  }

  // Three masters, three workers registered with the first leader, and the six slots held by
  // the subtasks of one job; returns the leader's slot table then.
  SlotTable startAndAllocate() {
    EXPECT_OK(masters_->startMasters(3));
    auto leader = masters_->waitForGrant(1, kStartTimeout);
    EXPECT_OK(leader);
    if (!leader.ok()) return {};
    leader_ = leader.value();
    auto epoch = waitForServing(*masters_, leader_, kStartTimeout);
    EXPECT_OK(epoch);
    epoch_ = epoch.ok() ? epoch.value() : 0;
    EXPECT_OK(workers_->startWorkers(kWorkers));
    for (size_t w = 0; w < kWorkers; ++w) {
      auto registered = workers_->waitForRegistered(w, epoch_, kStartTimeout);
      EXPECT_OK(registered);
      if (registered.ok()) {
        EXPECT_EQ(registered.value().leader, masters_->masterId(leader_));
      }
    }

    // regentctl lists every worker with its pid, and every slot.
    auto rows = regentctl_->workers();
    EXPECT_OK(rows);
    if (rows.ok()) {
      EXPECT_EQ(rows.value().size(), kWorkers);
      for (size_t w = 0; w < kWorkers; ++w) {
        const std::string id = workers_->resourceId(w);
        const auto row = std::find_if(rows.value().begin(), rows.value().end(),
                                      [&](const WorkerRow& r) { return r.resourceId == id; });
        EXPECT_NE(row, rows.value().end()) << "worker " << w << " (" << id << ") not listed";
        if (row != rows.value().end()) {
          EXPECT_EQ(row->pid, workers_->process(w).pid());
          EXPECT_EQ(row->slots.size(), kSlotsPerWorker);
        }
      }
    }
    auto slotLines = regentctl_->slotLines();
    EXPECT_OK(slotLines);
    if (slotLines.ok()) {
      EXPECT_EQ(slotLines.value(), kWorkers * kSlotsPerWorker);
    }

    // A job of kAllocated subtasks of half a core each, each running until the test ends.
    auto job = submitSlotHoldingJob(*regentctl_, kAllocated, "0.5", "128MiB");
    EXPECT_OK(job);
    if (!job.ok()) return {};
    job_ = job.value();

    auto table = regentctl_->waitForTable(
        [&](const SlotTable& t) {
          return t.size() == kWorkers * kSlotsPerWorker && countState(t, "ALLOCATED") == kAllocated;
        },
        kStartTimeout);
    EXPECT_OK(table);
    if (!table.ok()) return {};
    for (const SlotRow& row : table.value()) {
      if (row.state != "ALLOCATED") continue;
      EXPECT_EQ(row.jobId, job_.toHex()) << row.describe();
      EXPECT_FALSE(row.allocationId.empty()) << row.describe();
    }
    EXPECT_EQ(resourceIds(table.value()).size(), kWorkers);
    expectEverySubtaskRunning(leader_, epoch_);
    return table.value();
  }

  // Waits until the master in `slot` logged each subtask of the job in a line `pattern` matches
  // (its group 1 the subtask index).
  void expectEverySubtask(size_t slot, const std::regex& pattern, const std::string& what,
                          uint64_t epoch) {
    std::set<std::string> subtasks;
    const bool all = waitUntil(
        [&] {
          const std::string output = masters_->process(slot).output();
          for (auto it = std::sregex_iterator(output.begin(), output.end(), pattern);
               it != std::sregex_iterator(); ++it) {
            subtasks.insert((*it)[1].str());
          }
          return subtasks.size() == kAllocated;
        },
        kFailoverTimeout, Duration(100));
    EXPECT_TRUE(all) << subtasks.size() << " of " << kAllocated << " subtasks " << what
                     << " in epoch " << epoch << "\n"
                     << masters_->describe() << workers_->describe();
  }

  // Every subtask of the job logged RUNNING in `epoch` (its "attempt state" lines): the
  // JobMaster of that term runs an attempt in each held slot.
  void expectEverySubtaskRunning(size_t slot, uint64_t epoch) {
    expectEverySubtask(
        slot,
        std::regex("attempt state epoch=" + std::to_string(epoch) + " job=" + job_.toHex() +
                   " vertex=hold subtask=(\\d+) attempt=[0-9a-f]+ state=RUNNING "),
        "RUNNING", epoch);
  }

  // Every subtask's running attempt adopted by the JobMaster of `epoch` ("attempt adopted
  // [epoch=E ]job=J vertex=V subtask=I ...", docs/operations.md): the same attempts run on.
  void expectEverySubtaskAdopted(size_t slot, uint64_t epoch) {
    expectEverySubtask(slot,
                       std::regex("attempt adopted (?:epoch=" + std::to_string(epoch) +
                                  " )?job=" + job_.toHex() + " vertex=hold subtask=(\\d+) "),
                       "adopted", epoch);
  }

  // Every worker registers with the leader of `epoch`, whose table becomes `before`, and whose
  // first slot reports reach every worker.
  void expectWorkersFollow(uint64_t epoch, const SlotTable& before) {
    auto leader = masters_->waitForGrant(epoch, kFailoverTimeout);
    ASSERT_OK(leader);
    for (size_t w = 0; w < kWorkers; ++w) {
      auto registered = workers_->waitForRegistered(w, epoch, kFailoverTimeout);
      ASSERT_OK(registered);
      EXPECT_EQ(registered.value().leader, masters_->masterId(leader.value()));
    }
    auto reported = waitForMasterWorkerEvent(
        *masters_, leader.value(),
        [&](const MasterWorkerEvent& e) {
          return e.kind == MasterWorkerEvent::Kind::kSlotReport && e.epoch == epoch &&
                 e.workersReported == kWorkers && e.slotsTotal == kWorkers * kSlotsPerWorker;
        },
        kFailoverTimeout);
    EXPECT_OK(reported);
    auto after =
        regentctl_->waitForTable([&](const SlotTable& t) { return t == before; }, kFailoverTimeout);
    ASSERT_OK(after);
    EXPECT_EQ(describeTable(after.value()), describeTable(before));
    // The new leader's JobMaster adopted the attempts running in the offered slots.
    expectEverySubtaskAdopted(leader.value(), epoch);
  }

  // The refusals every worker's epoch gate counted (regent_worker_epoch_gate_refusals_total).
  double gateRefusals() {
    double sum = 0;
    for (size_t w = 0; w < kWorkers; ++w) {
      auto metrics = httpGetText(loop_, workers_->httpAddress(w), "/metrics");
      if (!metrics.ok()) continue;
      sum +=
          metricSum(metrics.value().second, "regent_worker_epoch_gate_refusals_total").value_or(0);
    }
    return sum;
  }

  // The allocated slots each worker reports on /metrics, in worker order (-1: unreadable).
  std::vector<double> workerAllocations() {
    std::vector<double> allocated;
    for (size_t w = 0; w < kWorkers; ++w) {
      auto metrics = httpGetText(loop_, workers_->httpAddress(w), "/metrics");
      allocated.push_back(metrics.ok() ? metricValue(metrics.value().second, "regent_worker_slots",
                                                     "state=\"allocated\"")
                                             .value_or(-1)
                                       : -1);
    }
    return allocated;
  }

  EventLoop loop_;
  std::string quorum_;
  std::unique_ptr<MasterCluster> masters_;
  std::unique_ptr<WorkerCluster> workers_;
  std::unique_ptr<Regentctl> regentctl_;
  JobId job_;
  size_t leader_ = 0;
  uint64_t epoch_ = 0;
};

TEST_F(WorkerFailover,
       AfterTheLeaderIsKilledEveryWorkerRegistersWithTheNextWhoseSlotTableIsTheSame) {
  const SlotTable before = startAndAllocate();
  if (HasFailure()) return;
  ASSERT_OK(masters_->kill(leader_));
  expectWorkersFollow(epoch_ + 1, before);
}

TEST_F(WorkerFailover, AfterAHandOverEveryWorkerRegistersWithTheNextWhoseSlotTableIsTheSame) {
  // In the JSON log format, whose "msg" carries the same event lines.
  recreateClusters("json");
  const SlotTable before = startAndAllocate();
  if (HasFailure()) return;
  auto handedOver = regentctl_->run({"failover"});
  ASSERT_OK(handedOver);
  EXPECT_EQ(handedOver.value().exit.exitCode, 0) << handedOver.value().output;
  expectWorkersFollow(epoch_ + 1, before);
}

TEST_F(WorkerFailover, ALeaderStoppedPastItsSessionIsRefusedByTheEpochGateWhenItWakes) {
  const SlotTable before = startAndAllocate();
  if (HasFailure()) return;
  const std::vector<double> allocatedBefore = workerAllocations();
  const double refusalsBefore = gateRefusals();

  // Stopped for longer than its session (so a standby takes over) and shorter than the linger
  // of the workers' connections to it (TaskExecutorOptions::previousLeaderLinger, 30 s): when
  // it wakes, its calls still reach the workers, over those connections.
  ASSERT_OK(masters_->process(leader_).pause());
  expectWorkersFollow(epoch_ + 1, before);
  ASSERT_OK(masters_->process(leader_).resume());

  // Its heartbeats (and the disconnects of the workers it found silent) carry the old epoch:
  // the workers' gates refuse them with the new one.
  std::optional<WorkerEvent> refusal;
  waitUntil(
      [&] {
        for (size_t w = 0; w < kWorkers && !refusal; ++w) {
          for (const WorkerEvent& event : workers_->events(w)) {
            if (event.kind == WorkerEvent::Kind::kEpochGateRefused && event.received == epoch_) {
              refusal = event;
              break;
            }
          }
        }
        return refusal.has_value();
      },
      kFailoverTimeout, Duration(100));
  ASSERT_TRUE(refusal) << "no worker refused the deposed leader\n"
                       << workers_->describe() << masters_->describe();
  EXPECT_EQ(refusal->highest, epoch_ + 1);
  EXPECT_GT(gateRefusals(), refusalsBefore);

  // The deposed leader learns it lost, and nothing changed on the workers.
  EXPECT_OK(masters_->waitForEvent(
      leader_,
      [&](const MasterEvent& e) {
        return e.kind == MasterEvent::Kind::kRevoked && e.epoch == epoch_;
      },
      kFailoverTimeout));
  EXPECT_EQ(workerAllocations(), allocatedBefore);
  auto after = regentctl_->slotTable();
  ASSERT_OK(after);
  EXPECT_EQ(describeTable(after.value()), describeTable(before));
  for (size_t w = 0; w < kWorkers; ++w) {
    EXPECT_TRUE(workers_->process(w).running()) << workers_->describe();
  }
}

TEST_F(WorkerFailover, AWorkerPausedThroughTheFailoverIsMissingUntilItRegistersWithItsAllocations) {
  const SlotTable before = startAndAllocate();
  if (HasFailure()) return;
  // A worker holding allocations.
  size_t paused = kWorkers;
  for (size_t w = 0; w < kWorkers && paused == kWorkers; ++w) {
    for (const SlotRow& row : before) {
      if (row.resourceId == workers_->resourceId(w) && row.state == "ALLOCATED") paused = w;
    }
  }
  ASSERT_LT(paused, kWorkers) << describeTable(before);
  const std::string pausedId = workers_->resourceId(paused);
  SlotTable withoutPaused;
  for (const SlotRow& row : before) {
    if (row.resourceId != pausedId) withoutPaused.insert(row);
  }

  ASSERT_OK(workers_->process(paused).pause());
  ASSERT_OK(masters_->kill(leader_));
  auto next = masters_->waitForGrant(epoch_ + 1, kFailoverTimeout);
  ASSERT_OK(next);
  for (size_t w = 0; w < kWorkers; ++w) {
    if (w != paused) ASSERT_OK(workers_->waitForRegistered(w, epoch_ + 1, kFailoverTimeout));
  }
  // The new leader knows only what the workers reported: the paused one is not in its table.
  ASSERT_OK(regentctl_->waitForTable([&](const SlotTable& t) { return t == withoutPaused; },
                                     kFailoverTimeout));

  ASSERT_OK(workers_->process(paused).resume());
  ASSERT_OK(workers_->waitForRegistered(paused, epoch_ + 1, kFailoverTimeout));
  auto after =
      regentctl_->waitForTable([&](const SlotTable& t) { return t == before; }, kFailoverTimeout);
  ASSERT_OK(after);
  expectEverySubtaskAdopted(next.value(), epoch_ + 1);
}

}  // namespace
}  // namespace regent::testing

// Bad input to the leader's ResourceManager over real RPC, with a real master and worker: a
// requirement no worker can fit is answered invalidArgument and allocates nothing, a slot
// report for a worker another connection registered is answered permissionDenied and one with a
// registration id the leader never issued notRegistered, neither changing anything, a report
// naming a slot the worker did not register is answered invalidArgument and changes nothing, and the leader keeps serving both callers afterwards (a requirement that only
// waits for free slots stays pending and is served when a worker registers); a second live worker
// claiming the resource id of another is refused, with both named.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <memory>
#include <regex>
#include <string>

#include "tests/fixtures/zookeeper_server.h"
#include "tests/integration/master_cluster_test_util.h"
#include "tests/integration/worker_cluster_test_util.h"

namespace regent::testing {
namespace {

constexpr Duration kStartTimeout{60000};
constexpr Duration kTimeout{45000};
constexpr uint32_t kSlotsPerWorker = 2;

class WorkerBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = sharedZooKeeperServer();
    ASSERT_OK(server);
    const std::string quorum = server.value()->connectString();
    const std::string clusterId = uniqueClusterId("worker-bad-input");
    masters_ = std::make_unique<MasterCluster>(workerTestMasters(quorum, clusterId));
    workers_ = std::make_unique<WorkerCluster>(workerTestWorkers(quorum, clusterId));
    regentctl_ = std::make_unique<Regentctl>(quorum, clusterId);

    auto master = masters_->startMaster();
    ASSERT_OK(master);
    auto epoch = waitForServing(*masters_, master.value(), kStartTimeout);
    ASSERT_OK(epoch);
    epoch_ = epoch.value();
    ASSERT_OK(workers_->startWorkers(1));
    ASSERT_OK(workers_->waitForRegistered(0, epoch_, kStartTimeout));
    auto table = regentctl_->waitForTable(
        [](const SlotTable& t) { return t.size() == kSlotsPerWorker; }, kTimeout);
    ASSERT_OK(table);
    before_ = table.value();
    auto address = masterRpcAddress(*masters_, master.value());
    ASSERT_OK(address);
    auto caller = ResourceManagerCaller::connect(loop_, address.value(), epoch_);
    ASSERT_OK(caller);
    caller_ = std::move(caller).value();
  }

  EventLoop loop_;
  std::unique_ptr<MasterCluster> masters_;
  std::unique_ptr<WorkerCluster> workers_;
  std::unique_ptr<Regentctl> regentctl_;
  std::unique_ptr<ResourceManagerCaller> caller_;
  SlotTable before_;
  uint64_t epoch_ = 0;
};

TEST_F(WorkerBadInput, ARequirementNoWorkerCanFitIsInvalidAndAllocatesNothing) {
  const JobId job = JobId::random();
  auto notYet = caller_->declare(job, 500, uint64_t{64} << 20, 1);
  ASSERT_TRUE(notYet) << "a JobMaster that never registered declared requirements";
  EXPECT_EQ(notYet->which, wire::Failure::NOT_REGISTERED) << notYet->message;

  auto registered = caller_->registerJobMaster(job);
  ASSERT_FALSE(registered) << registered->message;
  // Each slot offers one core and 256 MiB; this asks for 64 cores.
  auto tooBig = caller_->declare(job, 64000, uint64_t{64} << 20, 1);
  ASSERT_TRUE(tooBig) << "a requirement no worker can fit was accepted";
  EXPECT_EQ(tooBig->which, wire::Failure::INVALID_ARGUMENT) << tooBig->message;
  EXPECT_FALSE(tooBig->message.empty());

  auto table = regentctl_->slotTable();
  ASSERT_OK(table);
  EXPECT_EQ(describeTable(table.value()), describeTable(before_));

  // The leader keeps serving: a job submitted now gets a slot, which its JobMaster keeps.
  auto submitted = submitSlotHoldingJob(*regentctl_, 1, "0.5", "64MiB");
  ASSERT_OK(submitted);
  auto allocated = regentctl_->waitForTable(
      [](const SlotTable& t) { return countState(t, "ALLOCATED") == 1; }, kTimeout);
  ASSERT_OK(allocated);
  for (const SlotRow& row : allocated.value()) {
    if (row.state == "ALLOCATED") {
      EXPECT_EQ(row.jobId, submitted.value().toHex()) << row.describe();
    }
  }
}

TEST_F(WorkerBadInput, ARequirementThatOnlyWaitsForSlotsStaysPendingUntilAWorkerRegisters) {
  // A job of one more subtask than the one worker has slots: its JobMaster's requirement is not
  // invalid, it waits.
  auto job = submitSlotHoldingJob(*regentctl_, kSlotsPerWorker + 1, "0.5", "64MiB");
  ASSERT_OK(job);
  ASSERT_OK(regentctl_->waitForTable(
      [](const SlotTable& t) { return countState(t, "ALLOCATED") == kSlotsPerWorker; }, kTimeout));

  auto second = workers_->startWorker();
  ASSERT_OK(second);
  ASSERT_OK(workers_->waitForRegistered(second.value(), epoch_, kTimeout));
  auto table = regentctl_->waitForTable(
      [](const SlotTable& t) {
        return t.size() == 2 * kSlotsPerWorker && countState(t, "ALLOCATED") == kSlotsPerWorker + 1;
      },
      kTimeout);
  ASSERT_OK(table);
  for (const SlotRow& row : table.value()) {
    if (row.state == "ALLOCATED") {
      EXPECT_EQ(row.jobId, job.value().toHex()) << row.describe();
    }
  }
}

// The rows of `table` of the worker `resourceId`.
SlotTable rowsOf(const SlotTable& table, const std::string& resourceId) {
  SlotTable rows;
  for (const SlotRow& row : table) {
    if (row.resourceId == resourceId) rows.insert(row);
  }
  return rows;
}

TEST_F(WorkerBadInput, ASlotReportForAnotherWorkerOrAStaleRegistrationChangesNothing) {
  auto resource = ResourceId::fromHex(workers_->resourceId(0));
  ASSERT_TRUE(resource) << "worker resource id " << workers_->resourceId(0);
  auto registered = workers_->waitForRegistered(0, epoch_, kTimeout);
  ASSERT_OK(registered);
  auto registration = RegistrationId::fromHex(registered.value().registrationId);
  ASSERT_TRUE(registration) << registered.value().registrationId;
  // This test's connection names the worker, even with its own registration id, and a report
  // that contradicts the worker's (three slots instead of two): it does not speak for it
  // (docs/security.md, "Worker identity").
  auto foreign = caller_->sendSlotReport(*resource, *registration, kSlotsPerWorker + 1);
  ASSERT_TRUE(foreign) << "a slot report for another connection's worker was accepted";
  EXPECT_EQ(foreign->which, wire::Failure::PERMISSION_DENIED) << foreign->message;

  // Registered as a stand-in worker of its own, the connection names a registration id the
  // leader never issued: stale.
  const ResourceId standIn = ResourceId::random();
  auto own = caller_->registerWorker(standIn, 1);
  ASSERT_OK(own);
  auto stale = caller_->sendSlotReport(standIn, RegistrationId::random(), 1);
  ASSERT_TRUE(stale) << "a slot report with an unknown registration id was accepted";
  EXPECT_EQ(stale->which, wire::Failure::NOT_REGISTERED) << stale->message;
  auto other = caller_->sendSlotReport(*resource, *registration, kSlotsPerWorker + 1);
  ASSERT_TRUE(other) << "a slot report for another worker was accepted";
  EXPECT_EQ(other->which, wire::Failure::PERMISSION_DENIED) << other->message;

  auto table = regentctl_->slotTable();
  ASSERT_OK(table);
  EXPECT_EQ(describeTable(rowsOf(table.value(), workers_->resourceId(0))), describeTable(before_));
  // The worker itself is still registered: it was never told to register again.
  EXPECT_EQ(workers_->count(0, WorkerEvent::Kind::kRegistered), 1u) << workers_->describe();
}

TEST_F(WorkerBadInput, ASlotReportThatContradictsTheRegistrationIsInvalidAndChangesNothing) {
  // A stand-in worker of two slots registered by this test reports one slot more.
  const ResourceId standIn = ResourceId::random();
  auto registration = caller_->registerWorker(standIn, kSlotsPerWorker);
  ASSERT_OK(registration);
  auto wrong = caller_->sendSlotReport(standIn, registration.value(), kSlotsPerWorker + 1);
  ASSERT_TRUE(wrong) << "a slot report naming a slot the worker does not have was accepted";
  EXPECT_EQ(wrong->which, wire::Failure::INVALID_ARGUMENT) << wrong->message;
  EXPECT_NE(wrong->message.find("slotIndex"), std::string::npos) << wrong->message;

  auto table = regentctl_->slotTable();
  ASSERT_OK(table);
  EXPECT_EQ(describeTable(table.value()), describeTable(before_));
}

TEST_F(WorkerBadInput, ASecondLiveWorkerWithTheSameResourceIdIsRefusedNamingBoth) {
  // A second data directory holding the first worker's resource id (a copied directory).
  const std::string id = workers_->resourceId(0);
  ASSERT_FALSE(id.empty());
  const std::string twinDir = regentctl_->dir() + "/twin";
  ASSERT_EQ(::mkdir(twinDir.c_str(), 0700), 0);
  std::ofstream(twinDir + "/resource-id") << id << "\n";
  auto twin = workers_->startWorker({}, std::nullopt, twinDir);
  ASSERT_OK(twin);
  ASSERT_OK(workers_->waitForEvent(
      twin.value(), [](const WorkerEvent& e) { return e.kind == WorkerEvent::Kind::kStarting; },
      kStartTimeout));
  ASSERT_EQ(workers_->resourceId(twin.value()), id);

  const std::string firstPid = std::to_string(workers_->process(0).pid());
  const std::string twinPid = std::to_string(workers_->process(twin.value()).pid());
  auto refused = waitForMasterWorkerEvent(
      *masters_, 0,
      [&](const MasterWorkerEvent& e) {
        return e.kind == MasterWorkerEvent::Kind::kRefused && e.resourceId == id;
      },
      kTimeout);
  ASSERT_OK(refused);
  EXPECT_NE(refused.value().reason.find("pid " + firstPid), std::string::npos)
      << refused.value().reason;
  EXPECT_NE(refused.value().reason.find("pid " + twinPid), std::string::npos)
      << refused.value().reason;
  // The refused worker is told why, and keeps running (the other one may stop).
  ASSERT_OK(
      workers_->process(twin.value()).waitForLine(std::regex("pid " + firstPid + "\\b"), kTimeout));
  EXPECT_TRUE(workers_->process(twin.value()).running()) << workers_->describe();

  // The first worker keeps its one entry.
  auto rows = regentctl_->workers();
  ASSERT_OK(rows);
  ASSERT_EQ(rows.value().size(), 1u);
  EXPECT_EQ(rows.value()[0].resourceId, id);
  EXPECT_EQ(rows.value()[0].pid, workers_->process(0).pid());
  EXPECT_EQ(workers_->count(twin.value(), WorkerEvent::Kind::kRegistered), 0u)
      << workers_->describe();
}

}  // namespace
}  // namespace regent::testing

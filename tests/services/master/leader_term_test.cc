// The leader term on memory stores and a fake clock: recovery retried with backoff, a revoke
// during recovery, the Dispatcher's gateway serving only after recovery, and the
// ResourceManager's serving workers from the start, and a job's JobMaster reachable once the term
// is ready, for the jobs it runs, recovered ones included.
#include "services/master/leader_term.h"

#include <gtest/gtest.h>
#include <kj/timer.h>

#include <optional>
#include <string>

#include "common/event_loop.h"
#include "common/log_event_sink.h"
#include "rpc/wire_ids.h"
#include "tests/fixtures/job_graph_test_util.h"
#include "tests/store/fake_stores_test_util.h"

namespace regent::master {
namespace {

using wire::DispatcherGateway;
using wire::ResourceManagerGateway;

// A worker's gateway that is never called in these tests (no heartbeat interval passes).
class IdleTaskExecutor final : public wire::TaskExecutorGateway::Server {};

class LeaderTermTest : public ::testing::Test {
 protected:
  ~LeaderTermTest() noexcept override = default;

  // A term of epoch 4 whose retries wait exactly 1 s each (no jitter).
  void grant() {
    LeaderTermOptions options;
    options.jitter = [] { return 0.0; };
    options.nowMs = [] { return int64_t{1700000000000}; };
    term_ = kj::heap<LeaderTerm>(timer_, events_, 4, counters_, resourceManagerCounters_,
                                 jobMasterCounters_, services_,
                                 store::StoreTerm{4, "latch/m-0000000001"}, kj::mv(options));
    started_ = term_->start()
                   .then([this]() { startDone_ = true; },
                         [this](kj::Exception&& e) { startFailure_ = e.getDescription().cStr(); })
                   .eagerlyEvaluate(nullptr);
    settle();
  }

  // Runs everything runnable now (the fake stores answer at once; only the timer waits).
  // The worker identity of a connection of its own (MasterBootstrap makes one per connection).
  static kj::Own<resourcemanager::WorkerBinding> worker() {
    return kj::refcounted<resourcemanager::WorkerBinding>("a worker");
  }
  void settle() { loop_.waitScope().poll(); }

  void advance(kj::Duration by) {
    timer_.advanceTo(timer_.now() + by);
    settle();
  }

  // Registers worker `id` ("w1", 2 slots of 1 cpu / 1 MiB) through `gateway`; the response.
  capnp::Response<ResourceManagerGateway::RegisterTaskExecutorResults> registerWorker(
      ResourceManagerGateway::Client& gateway, const ResourceId& id) {
    auto request = gateway.registerTaskExecutorRequest();
    request.setEpoch(4);
    auto registration = request.initRegistration();
    wire::setWireId(registration.initResourceId(), id);
    registration.setHost("w1");
    registration.setPid(11);
    registration.setNumberOfSlots(2);
    registration.initSlotProfile().setCpuMillis(1000);
    registration.getSlotProfile().setMemoryBytes(1 << 20);
    registration.initTotalProfile().setCpuMillis(2000);
    registration.getTotalProfile().setMemoryBytes(2 << 20);
    request.setTaskExecutor(kj::heap<IdleTaskExecutor>());
    return loop_.run(request.send());
  }

  capnp::Response<DispatcherGateway::ListJobsResults> listJobs(DispatcherGateway::Client& gateway) {
    auto request = gateway.listJobsRequest();
    request.setEpoch(4);
    return loop_.run(request.send());
  }

  EventLoop loop_;
  kj::TimerImpl timer_{kj::origin<kj::TimePoint>()};
  LogEventSink events_;
  store::testing::FakeStoreBackend backend_;
  store::testing::FakeStoreServices services_{backend_};
  rpc::FencingCounters counters_;
  resourcemanager::ResourceManagerCounters resourceManagerCounters_;
  jobmaster::JobMasterCounters jobMasterCounters_;
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

TEST_F(LeaderTermTest, WhenReadyResolvesOnceRecoveredAlsoAfterOtherCallersGaveUp) {
  backend_.failReads = 1;  // The first recovery fails; the retry after 1 s succeeds.
  grant();
  ASSERT_FALSE(term_->ready());
  // Callers that gave up (their promise dropped, as MasterProcess::whenTermReady does after its
  // bound) do not keep a later caller from being told.
  for (int i = 0; i < 100; ++i) (void)term_->whenReady();
  bool resolved = false;
  auto waiting = term_->whenReady().then([&] { resolved = true; }).eagerlyEvaluate(nullptr);
  settle();
  EXPECT_FALSE(resolved);

  advance(1 * kj::SECONDS);
  EXPECT_TRUE(term_->ready());
  EXPECT_TRUE(resolved);
  bool atOnce = false;
  term_->whenReady().then([&] { atOnce = true; }).wait(loop_.waitScope());
  EXPECT_TRUE(atOnce);
}

TEST_F(LeaderTermTest, EndingTheTermDuringRecoveryCancelsItsStartAndFencesItsGateway) {
  backend_.failReads = 1000;  // Recovery never succeeds.
  grant();
  advance(3 * kj::SECONDS);
  DispatcherGateway::Client gateway = KJ_ASSERT_NONNULL(term_->dispatcherGateway());
  ASSERT_FALSE(term_->ready());
  bool readyResolved = false;
  std::string readyFailure;
  auto waitingForReady =
      term_->whenReady()
          .then([&] { readyResolved = true; },
                [&](kj::Exception&& e) { readyFailure = e.getDescription().cStr(); })
          .eagerlyEvaluate(nullptr);

  term_ = nullptr;
  settle();
  EXPECT_FALSE(startDone_);
  EXPECT_NE(startFailure_.find("epoch 4"), std::string::npos) << startFailure_;
  EXPECT_FALSE(readyResolved);  // A caller still waiting for readiness is told it never comes.
  EXPECT_NE(readyFailure, "");
  const size_t reads = backend_.reads;
  advance(60 * kj::SECONDS);
  EXPECT_EQ(backend_.reads, reads);  // No retry outlives the term.

  auto late = listJobs(gateway);
  ASSERT_TRUE(late.hasFailure());
  EXPECT_TRUE(late.getFailure().isFencing()) << late.getFailure().getMessage().cStr();
  EXPECT_EQ(late.getFailure().getFencing().getExpected(), 0u);
}

TEST_F(LeaderTermTest, WorkersRegisterAndReportWhileTheStoresAreStillOpening) {
  services_.failOpens = 1000;  // The Dispatcher never gets its stores.
  grant();
  EXPECT_TRUE(term_->dispatcherGateway() == nullptr);
  ResourceManagerGateway::Client resourceManager =
      KJ_ASSERT_NONNULL(term_->resourceManagerGateway(worker()));
  const ResourceId worker(0xab, 1);

  auto registered = registerWorker(resourceManager, worker);
  ASSERT_FALSE(registered.hasFailure()) << registered.getFailure().getMessage().cStr();

  auto reporting = resourceManager.sendSlotReportRequest();
  reporting.setEpoch(4);
  wire::setWireId(reporting.initResourceId(), worker);
  reporting.setRegistrationId(registered.getSuccess().getRegistrationId());
  auto report = reporting.initSlotReport();
  wire::setWireId(report.initResourceId(), worker);
  auto slots = report.initSlots(2);
  for (uint32_t i = 0; i < 2; ++i) {
    wire::setWireId(slots[i].initSlotId().initResourceId(), worker);
    slots[i].getSlotId().setSlotIndex(i);
    slots[i].initProfile().setCpuMillis(1000);
    slots[i].getProfile().setMemoryBytes(1 << 20);
  }
  auto reported = loop_.run(reporting.send());
  ASSERT_FALSE(reported.hasFailure()) << reported.getFailure().getMessage().cStr();

  const dispatcher::TaskExecutorView& workers = KJ_ASSERT_NONNULL(term_->taskExecutors());
  EXPECT_EQ(workers.counts().taskExecutors, 1u);
  EXPECT_EQ(workers.counts().slotsTotal, 2u);
  EXPECT_EQ(workers.counts().slotsFree, 2u);
  EXPECT_FALSE(term_->ready());

  // Ending the term fences the ResourceManager's gateway like every other of the term.
  term_ = nullptr;
  settle();
  auto late = resourceManager.heartbeatRequest();
  late.setEpoch(4);
  wire::setWireId(late.initResourceId(), worker);
  auto refused = loop_.run(late.send());
  ASSERT_TRUE(refused.hasFailure());
  EXPECT_TRUE(refused.getFailure().isFencing()) << refused.getFailure().getMessage().cStr();
  EXPECT_EQ(refused.getFailure().getFencing().getExpected(), 0u);
}

TEST_F(LeaderTermTest, TheDispatcherListsTheWorkersOfTheTermOnceRecovered) {
  backend_.holdWrites = false;
  grant();
  ASSERT_TRUE(startDone_) << startFailure_;
  ResourceManagerGateway::Client resourceManager =
      KJ_ASSERT_NONNULL(term_->resourceManagerGateway(worker()));
  auto registered = registerWorker(resourceManager, ResourceId(0xab, 2));
  ASSERT_FALSE(registered.hasFailure()) << registered.getFailure().getMessage().cStr();

  DispatcherGateway::Client dispatcher = KJ_ASSERT_NONNULL(term_->dispatcherGateway());
  auto listing = dispatcher.listTaskExecutorsRequest();
  listing.setEpoch(4);
  auto listed = loop_.run(listing.send());
  ASSERT_FALSE(listed.hasFailure()) << listed.getFailure().getMessage().cStr();
  ASSERT_EQ(listed.getTaskExecutors().size(), 1u);
  EXPECT_EQ(std::string(listed.getTaskExecutors()[0].getRegistration().getHost().cStr()), "w1");
  auto overview = dispatcher.clusterOverviewRequest();
  overview.setEpoch(4);
  EXPECT_EQ(loop_.run(overview.send()).getOverview().getTaskExecutors(), 1u);
}

TEST_F(LeaderTermTest, AJobsJobMasterIsReachableOnceTheTermIsReadyAndOnlyForJobsItRuns) {
  // A job stored by an earlier term, without a result: this term runs it again.
  const JobId recovered = JobId::random();
  auto graph = testing::makeJobGraph(recovered, {.name = "recovered", .submittedAtMs = 5});
  {
    auto stores = backend_.openTerm();
    ASSERT_TRUE(loop_.run(stores->jobGraphs().put(graph->getRoot<wire::JobGraph>())).ok());
  }
  backend_.failReads = 1;  // The first recovery fails: the term is not ready for a while.
  grant();
  ASSERT_FALSE(term_->ready());
  EXPECT_FALSE(term_->jobMaster(recovered, worker()).ready);

  advance(1 * kj::SECONDS);
  ASSERT_TRUE(startDone_) << startFailure_;
  auto found = term_->jobMaster(recovered, worker());
  EXPECT_TRUE(found.ready);
  EXPECT_TRUE(found.gateway != nullptr) << "the recovered job got a JobMaster";
  auto unknown = term_->jobMaster(JobId::random(), worker());
  EXPECT_TRUE(unknown.ready);
  EXPECT_TRUE(unknown.gateway == nullptr);

  // A job submitted in this term gets one too; its JobMaster's gateway is fenced by the term.
  DispatcherGateway::Client dispatcher = KJ_ASSERT_NONNULL(term_->dispatcherGateway());
  const JobId submitted = JobId::random();
  auto request = dispatcher.submitJobRequest();
  request.setEpoch(4);
  testing::fillJobGraph(request.initJobGraph(), submitted, {.name = "submitted"});
  auto response = loop_.run(request.send());
  ASSERT_FALSE(response.hasFailure()) << response.getFailure().getMessage().cStr();
  auto jobMaster = KJ_ASSERT_NONNULL(term_->jobMaster(submitted, worker()).gateway);
  auto stale = jobMaster.updateTaskExecutionStateRequest();
  stale.setEpoch(3);
  auto refused = loop_.run(stale.send());
  ASSERT_TRUE(refused.hasFailure());
  EXPECT_TRUE(refused.getFailure().isFencing()) << refused.getFailure().getMessage().cStr();
}

// The term's part of the cluster view: its workers from the start, its jobs once recovered, each
// a snapshot that outlives the term.
TEST_F(LeaderTermTest, TheTermFillsTheViewsSnapshotsOfItsWorkersAtOnceAndOfItsJobsOnceRecovered) {
  const JobId stored = JobId::random();
  auto graph = testing::makeJobGraph(stored, {.name = "stored", .submittedAtMs = 5});
  {
    auto stores = backend_.openTerm();
    ASSERT_TRUE(loop_.run(stores->jobGraphs().put(graph->getRoot<wire::JobGraph>())).ok());
  }
  backend_.failReads = 1;  // The first recovery fails: the term recovers for a while.
  grant();
  ResourceManagerGateway::Client resourceManager =
      KJ_ASSERT_NONNULL(term_->resourceManagerGateway(worker()));
  auto registered = registerWorker(resourceManager, ResourceId(0xab, 3));
  ASSERT_FALSE(registered.hasFailure()) << registered.getFailure().getMessage().cStr();

  ASSERT_FALSE(term_->ready());
  EXPECT_FALSE(term_->jobs().has_value());
  EXPECT_FALSE(term_->job(stored).has_value());
  EXPECT_FALSE(term_->jobCounts().has_value());
  std::optional<WorkersSnapshot> workers = term_->workers();
  ASSERT_TRUE(workers.has_value());
  EXPECT_EQ(workers->counts.taskExecutors, 1u);
  ASSERT_EQ(workers->workers.size(), 1u);
  EXPECT_EQ(std::string(workers->workers[0].getRegistration().getHost().cStr()), "w1");

  advance(1 * kj::SECONDS);
  ASSERT_TRUE(startDone_) << startFailure_;
  std::optional<JobsSnapshot> jobs = term_->jobs();
  ASSERT_TRUE(jobs.has_value());
  ASSERT_EQ(jobs->jobs.size(), 1u);
  EXPECT_EQ(wire::idFromWire<JobId>(jobs->jobs[0].getJobId()), stored);
  EXPECT_EQ(std::string(jobs->jobs[0].getName().cStr()), "stored");
  std::optional<dispatcher::JobCounts> counts = term_->jobCounts();
  ASSERT_TRUE(counts.has_value());
  EXPECT_EQ(counts->active, 1u);
  EXPECT_EQ(counts->of(jobs->jobs[0].getState()), 1u);
  std::optional<JobDetailSnapshot> job = term_->job(stored);
  ASSERT_TRUE(job.has_value());
  EXPECT_EQ(job->status.getVertices().size(), 1u);
  EXPECT_FALSE(term_->job(JobId::random()).has_value());

  // Values: they stay readable after the term is gone.
  term_ = nullptr;
  settle();
  EXPECT_EQ(std::string(jobs->jobs[0].getName().cStr()), "stored");
  EXPECT_EQ(std::string(job->status.getName().cStr()), "stored");
  EXPECT_EQ(std::string(workers->workers[0].getRegistration().getHost().cStr()), "w1");
}

// MasterBootstrap.jobMaster must answer a worker before the worker's call times out (the
// workers run with the same rpc.call-timeout), however short that is configured.
TEST(JobMasterReadyWait, IsHalfTheCallTimeoutAndAtMostOneSecond) {
  EXPECT_EQ(jobMasterReadyWait(Duration(10000)), Duration(1000));
  EXPECT_EQ(jobMasterReadyWait(Duration(2000)), Duration(1000));
  EXPECT_EQ(jobMasterReadyWait(Duration(1500)), Duration(750));
  EXPECT_EQ(jobMasterReadyWait(Duration(200)), Duration(100));
  EXPECT_EQ(jobMasterReadyWait(Duration(1)), Duration(0));  // No wait: answered at once.
}

}  // namespace
}  // namespace regent::master

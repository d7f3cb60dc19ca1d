// The Dispatcher over the stores on a memory backend (tests/store/fake_stores_test_util.h),
// called through its gateway served by the term as regentctl will: recovery, persist-before-accept,
// validation, idempotent submission, cancellation through dirty -> clean, a dirty result found at
// recovery never re-run, reads served from memory, and ended results bounded like the store's;
// with a fake JobRunner: jobs start after they are persisted, and end FINISHED through one
// transaction (clean result, detail, JobGraph and progress removed) -> release, or otherwise
// through dirty result -> release -> JobGraph removed -> clean result.
#include "services/dispatcher/dispatcher.h"

#include <gtest/gtest.h>
#include <kj/debug.h>
#include <kj/timer.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "common/log_event_sink.h"
#include "rpc/fenced_endpoint.h"
#include "rpc/wire_ids.h"
#include "services/dispatcher/dispatcher_gateway.h"
#include "tests/fixtures/job_graph_test_util.h"
#include "tests/fixtures/loop_wait_test_util.h"
#include "tests/store/fake_stores_test_util.h"
#include "tests/store/progress_test_util.h"

namespace regent::dispatcher {
namespace {

using wire::DispatcherGateway;

// How long settle() waits for the background cleanups: a deadline far beyond the few loop
// turns the memory store needs, not a measured duration.
constexpr Duration kSettleTimeout = std::chrono::seconds(10);

// One vertex "work" running `sleep 1` in two tasks.
kj::Own<capnp::MallocMessageBuilder> jobGraph(const JobId& id, const std::string& name) {
  return testing::makeJobGraph(id, {.name = name, .parallelism = 2});
}

// Two workers, the first with one free and one allocated slot, the second not reported yet.
class FakeTaskExecutors final : public TaskExecutorView {
 public:
  Counts counts() const override {
    return {.taskExecutors = 2, .slotsTotal = 2, .slotsFree = 1, .slotsAllocated = 1};
  }
  capnp::Orphan<capnp::List<wire::TaskExecutorInfo>> list(
      capnp::Orphanage orphanage) const override {
    auto orphan = orphanage.newOrphan<capnp::List<wire::TaskExecutorInfo>>(2);
    auto first = orphan.get()[0];
    first.initRegistration().setHost("worker-a");
    first.setRegisteredAtMs(1000);
    auto slots = first.initSlots(2);
    slots[0].initSlotId().setSlotIndex(0);
    slots[1].initSlotId().setSlotIndex(1);
    wire::setWireId(slots[1].initAllocationId(), allocation);
    orphan.get()[1].initRegistration().setHost("worker-b");
    return orphan;
  }
  bool slotPending(const ResourceId&, uint32_t) const override { return false; }
  AllocationId allocation = AllocationId::random();
};

// A JobRunner that records what the Dispatcher asks of it, with what the store held at the time
// and the recovered progress it was given ("start <job> graph=stored progress=<subtasks>|none",
// "release <job> result=stored graph=stored|none"), and answers reads
// with fixed live detail. release() waits while `holdReleases`, until releaseAll().
class FakeJobRunner final : public JobRunner {
 public:
  // Subtask 0's attempt and its worker, as describe() shows them.
  static constexpr AttemptId kAttemptOfSubtask0{0xa, 0x0};
  static constexpr ResourceId kWorkerA{0xa, 0xa};

  explicit FakeJobRunner(const store::testing::FakeStoreBackend& backend) : backend_(backend) {}
  ~FakeJobRunner() noexcept override {}

  void setListener(JobRunnerListener& listener) override { this->listener = &listener; }
  void start(JobId job, wire::JobGraph::Reader graph,
             kj::Maybe<wire::JobProgress::Reader> recovered) override {
    std::string progress = "none";
    KJ_IF_MAYBE (record, recovered) {
      progress = std::to_string(record->getSubtasks().size());
      recoveredRestarts[job] = record->getRestarts();  // The record is readable.
    }
    calls.push_back("start " + job.toHex() +
                    " graph=" + stored(store::RecordFamily::kJobGraphs, job) +
                    " progress=" + progress);
    running[job] = std::string(graph.getName().cStr());  // The graph is readable.
  }
  kj::Promise<kj::Array<capnp::word>> release(JobId job, const std::string& cause) override {
    calls.push_back("release " + job.toHex() + " result=" +
                    stored(store::RecordFamily::kJobResults, job) +
                    " graph=" + stored(store::RecordFamily::kJobGraphs, job));
    causes.push_back(cause);
    if (!running.count(job)) ADD_FAILURE() << "released a job that was not started";
    if (!holdReleases) return forget(job);
    auto paf = kj::newPromiseAndFulfiller<void>();
    held.add(kj::mv(paf.fulfiller));
    return paf.promise.then([this, job]() { return forget(job); });
  }
  bool describe(JobId job, wire::JobStatus::Builder status) const override {
    if (!running.count(job)) return false;
    status.setState(wire::JobState::RUNNING);
    status.setRestarts(3);
    status.setWaitingReason("waiting for 1 slot");
    status.initTasks().setTotal(2);
    status.getTasks().setRunning(1);
    status.getTasks().setPending(1);
    auto vertex = status.initVertices(1)[0];
    vertex.setName("work");
    vertex.setParallelism(2);
    auto subtasks = vertex.initSubtasks(2);
    subtasks[0].setIndex(0);
    subtasks[0].setHost("worker-a");
    subtasks[0].setHttpAddress("worker-a:8081");
    wire::setWireId(subtasks[0].initResourceId(), kWorkerA);
    subtasks[0].initAttempt().setState(attemptState);
    wire::setWireId(subtasks[0].getAttempt().initAttemptId(), kAttemptOfSubtask0);
    subtasks[1].setIndex(1);
    subtasks[1].setWaitingReason("no free slot");
    return true;
  }
  bool counts(JobId job, wire::TaskCounts::Builder tasks, uint32_t& restarts) const override {
    if (!running.count(job)) return false;
    tasks.setTotal(2);
    tasks.setRunning(2);
    restarts = 3;
    return true;
  }
  void releaseAll() {
    holdReleases = false;
    auto fulfillers = kj::mv(held);
    for (auto& fulfiller : fulfillers) fulfiller->fulfill();
  }

  JobRunnerListener* listener = nullptr;
  wire::ExecutionState attemptState = wire::ExecutionState::RUNNING;  // Of subtask 0.
  std::vector<std::string> calls;
  std::vector<std::string> causes;
  std::map<JobId, std::string> running;  // Started, not released: the job's name.
  std::map<JobId, uint32_t> recoveredRestarts;  // Of the progress records start() was given.
  bool holdReleases = false;

 private:
  // As JobMasters does: the final detail, then the job is forgotten.
  kj::Array<capnp::word> forget(JobId job) {
    capnp::MallocMessageBuilder message;
    describe(job, message.initRoot<wire::JobStatus>());
    running.erase(job);
    return capnp::canonicalize(message.getRoot<wire::JobStatus>().asReader());
  }
  std::string stored(store::RecordFamily family, const JobId& job) const {
    return backend_.raw(family, job.toHex()) ? "stored" : "none";
  }
  const store::testing::FakeStoreBackend& backend_;
  kj::Vector<kj::Own<kj::PromiseFulfiller<void>>> held;
};

class DispatcherTest : public ::testing::Test {
 protected:
  ~DispatcherTest() noexcept override = default;

  void TearDown() override { endTerm(); }

  // Starts the next term: its stores, a Dispatcher, and its gateway served by the term (not
  // ready until recover()).
  void startTerm(size_t retain = 1000, const TaskExecutorView* taskExecutors = nullptr,
                 DispatcherGatewayServer::DescribeLeader describeLeader = {},
                 JobRunner* runner = nullptr) {
    endTerm();
    ++epoch_;
    stores_ = backend_.openTerm(retain);
    dispatcher_ = kj::heap<Dispatcher>(
        epoch_, *stores_, timer_, events_, limits_, retain, [this] { return ++clockMs_; }, runner,
        detailBudget_);
    term_ = std::make_unique<rpc::LeadershipTerm>(epoch_, counters_);
    gateway_ = term_->serve<DispatcherGateway>(kj::heap<DispatcherGatewayServer>(
        *dispatcher_, taskExecutors, kj::mv(describeLeader), &outputTokens_));
  }

  void recover() {
    auto recovered = loop_.run(dispatcher_->recover());
    ASSERT_TRUE(recovered.ok()) << recovered.error().message;
    term_->markReady();
  }

  // As the term does: revoke (running handlers dropped), then the Dispatcher, then the stores.
  void endTerm() {
    gateway_ = nullptr;
    term_ = nullptr;
    dispatcher_ = nullptr;
    stores_ = nullptr;
  }

  capnp::Response<DispatcherGateway::SubmitJobResults> submit(
      capnp::MallocMessageBuilder& graph, uint64_t epoch = 0) {
    auto request = gateway_.submitJobRequest();
    request.setEpoch(epoch == 0 ? epoch_ : epoch);
    request.setJobGraph(graph.getRoot<wire::JobGraph>().asReader());
    return loop_.run(request.send());
  }

  // cancelJob, then the cleanup that follows in the background.
  capnp::Response<DispatcherGateway::CancelJobResults> cancel(const JobId& id) {
    auto request = gateway_.cancelJobRequest();
    request.setEpoch(epoch_);
    wire::setWireId(request.initJobId(), id);
    auto response = loop_.run(request.send());
    settle();
    return response;
  }

  // Runs the loop until the Dispatcher's background cleanups are done (the memory store answers
  // at once; a cleanup waiting on a held release or held writes never settles, which fails the
  // test at the deadline).
  void settle() {
    ASSERT_TRUE(testing::runLoopUntil(
        loop_, [this] { return dispatcher_->cleanupsRunning() == 0; }, kSettleTimeout))
        << dispatcher_->cleanupsRunning() << " cleanups still running";
  }

  // The stored result of `id`: "none", "dirty" or "clean".
  std::string storedResult(const JobId& id) {
    auto result = loop_.run(stores_->jobResults().get(id));
    if (!result.ok()) return "none";
    return result.value().get().getClean() ? "clean" : "dirty";
  }

  capnp::Response<DispatcherGateway::JobStatusResults> status(const JobId& id) {
    auto request = gateway_.jobStatusRequest();
    request.setEpoch(epoch_);
    wire::setWireId(request.initJobId(), id);
    return loop_.run(request.send());
  }

  std::vector<std::string> listedNames() {
    auto request = gateway_.listJobsRequest();
    request.setEpoch(epoch_);
    auto response = loop_.run(request.send());
    KJ_REQUIRE(!response.hasFailure(), response.getFailure().getMessage().cStr());
    std::vector<std::string> names;
    for (auto job : response.getJobs()) {
      names.push_back(std::string(job.getName().cStr()) + ":" +
                      kj::str(job.getState()).cStr());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  // Whether a progress record (decoding or not) is stored for `id`.
  bool storedProgress(const JobId& id) {
    return backend_.raw(store::RecordFamily::kJobProgress, id.toHex()).has_value();
  }

  void putProgress(const JobId& id, uint32_t subtasks, uint32_t restarts = 1) {
    auto record = progressRecord(id, subtasks, restarts);
    auto put = loop_.run(stores_->jobProgress().put(record->getRoot<wire::JobProgress>()));
    KJ_REQUIRE(put.ok(), put.error().message);
  }

  // Submits a job named `name`, then stores a progress record of `subtasks` subtasks for it as
  // its JobMaster would (see progressRecord); returns its id.
  JobId submitWithProgress(const std::string& name, uint32_t subtasks) {
    const JobId id = JobId::random();
    auto submitted = submit(*jobGraph(id, name));
    KJ_REQUIRE(!submitted.hasFailure(), submitted.getFailure().getMessage().cStr());
    putProgress(id, subtasks);
    return id;
  }

  // A runner's FAILED end with the root cause `message`.
  static JobEnd failedEnd(const std::string& message) {
    JobEnd end;
    end.state = wire::JobState::FAILED;
    end.failureMessage = message;
    return end;
  }

  // Stores a dirty FINISHED result named `name` for `id` directly, as a leader that ended the
  // job and then died before its cleanup left it.
  void putDirtyFinishedResult(const JobId& id, const std::string& name) {
    capnp::MallocMessageBuilder message;
    auto result = message.initRoot<wire::JobResult>();
    wire::setWireId(result.initJobId(), id);
    result.setJobName(name);
    result.setState(wire::JobState::FINISHED);
    result.setEndedAtMs(5);
    auto created = loop_.run(stores_->jobResults().createDirty(result.asReader()));
    KJ_REQUIRE(created.ok(), created.error().message);
  }

  // A recovered job as its JobMaster left it: subtask 0 finished, the others running.
  static kj::Own<capnp::MallocMessageBuilder> progressRecord(const JobId& id, uint32_t subtasks,
                                                             uint32_t restarts) {
    return testing::progressRecord(id, testing::firstFinishedOthersRunning(subtasks), restarts);
  }

  // Runs everything runnable now (the memory store answers at once; held writes stay held).
  void drain() { loop_.waitScope().poll(); }

  size_t storedGraphs() {
    auto ids = loop_.run(stores_->jobGraphs().listIds());
    KJ_REQUIRE(ids.ok());
    return ids.value().ids.size();
  }

  capnp::Response<DispatcherGateway::ClusterOverviewResults> overview() {
    auto request = gateway_.clusterOverviewRequest();
    request.setEpoch(epoch_);
    return loop_.run(request.send());
  }

  EventLoop loop_;
  // Paces the Dispatcher's retries; moved by hand.
  kj::TimerImpl timer_{kj::origin<kj::TimePoint>()};
  LogEventSink events_;
  store::testing::FakeStoreBackend backend_;
  uint64_t epoch_ = 0;
  int64_t clockMs_ = 1700000000000;
  size_t detailBudget_ = Dispatcher::kEndedDetailBudgetBytes;
  jobgraph::JobGraphLimits limits_;
  const rpc::OutputTokenSigner signer_{1, std::string(rpc::kOutputKeySize, 't')};
  // Worker A is registered (registration kRegistrationOfA); no other worker is.
  const OutputTokenIssuer outputTokens_{
      signer_, [this] { return clockMs_; },
      [](const ResourceId& worker) -> std::optional<RegistrationId> {
        if (worker != FakeJobRunner::kWorkerA) return std::nullopt;
        return kRegistrationOfA;
      }};
  static constexpr RegistrationId kRegistrationOfA{0xa, 0xb};
  rpc::FencingCounters counters_;
  kj::Own<store::LeaderStores> stores_;
  kj::Own<Dispatcher> dispatcher_;
  std::unique_ptr<rpc::LeadershipTerm> term_;
  DispatcherGateway::Client gateway_ = nullptr;
};

TEST_F(DispatcherTest, CallsBeforeRecoveryAnswerUnavailable) {
  startTerm();
  auto graph = jobGraph(JobId::random(), "early");
  auto response = submit(*graph);
  ASSERT_TRUE(response.hasFailure());
  EXPECT_TRUE(response.getFailure().isUnavailable());
  EXPECT_EQ(storedGraphs(), 0u);
}

TEST_F(DispatcherTest, ASubmittedJobIsPersistedThenListedAsCreatedAndSurvivesTheNextTerm) {
  startTerm();
  recover();
  const JobId id = JobId::random();
  auto graph = jobGraph(id, "wordcount");
  auto response = submit(*graph);
  ASSERT_FALSE(response.hasFailure()) << response.getFailure().getMessage().cStr();
  EXPECT_EQ(wire::idFromWire<JobId>(response.getJobId()), id);
  EXPECT_EQ(storedGraphs(), 1u);
  EXPECT_EQ(listedNames(), std::vector<std::string>{"wordcount:created"});
  auto job = status(id);
  ASSERT_FALSE(job.hasFailure());
  EXPECT_EQ(job.getStatus().getTasks().getTotal(), 2u);
  EXPECT_FALSE(job.hasResult());

  startTerm();
  recover();
  EXPECT_EQ(listedNames(), std::vector<std::string>{"wordcount:created"});
}

TEST_F(DispatcherTest, AnInvalidJobGraphIsRefusedNamingTheFieldAndNothingIsStored) {
  startTerm();
  recover();
  auto graph = jobGraph(JobId::random(), "bad");
  graph->getRoot<wire::JobGraph>().getVertices()[0].setParallelism(0);
  auto response = submit(*graph);
  ASSERT_TRUE(response.hasFailure());
  ASSERT_TRUE(response.getFailure().isInvalidArgument());
  EXPECT_EQ(std::string(response.getFailure().getInvalidArgument().getField().cStr()),
            "vertices[0].parallelism");
  EXPECT_EQ(storedGraphs(), 0u);
}

TEST_F(DispatcherTest, AJobWhoseProgressRecordCouldOutgrowTheStoreIsRefusedAtSubmission) {
  // The fake store holds records of up to 1 MiB: 40,000 subtasks could need more, 1,000 cannot.
  limits_.maxParallelism = 40000;
  limits_.maxTotalSubtasks = 40000;
  startTerm();
  recover();
  auto fits = jobGraph(JobId::random(), "fits");
  fits->getRoot<wire::JobGraph>().getVertices()[0].setParallelism(1000);
  EXPECT_FALSE(submit(*fits).hasFailure());
  auto huge = jobGraph(JobId::random(), "huge");
  huge->getRoot<wire::JobGraph>().getVertices()[0].setParallelism(40000);
  auto response = submit(*huge);
  ASSERT_TRUE(response.hasFailure());
  const std::string message = response.getFailure().getMessage().cStr();
  EXPECT_NE(message.find("40000 subtasks"), std::string::npos) << message;
  EXPECT_NE(message.find("fake.max-record-size"), std::string::npos) << message;
  EXPECT_EQ(storedGraphs(), 1u);
}

TEST_F(DispatcherTest, AJobGraphWithInvalidUtf8IsRefusedNamingTheFieldAndNothingIsStored) {
  startTerm();
  recover();
  auto graph = jobGraph(JobId::random(), "ok");
  const std::string bad = "bad\xff";
  graph->getRoot<wire::JobGraph>().setName(capnp::Text::Reader(bad.data(), bad.size()));
  auto response = submit(*graph);
  ASSERT_TRUE(response.hasFailure());
  ASSERT_TRUE(response.getFailure().isInvalidArgument());
  EXPECT_EQ(std::string(response.getFailure().getInvalidArgument().getField().cStr()), "name");
  EXPECT_EQ(storedGraphs(), 0u);
}

// What a corrupt JobGraph record holds: bytes that are not a packed Cap'n Proto message.
constexpr const char* kGarbage = "\xff\xfe not a JobGraph";

capnp::Response<DispatcherGateway::RemoveCorruptJobResults> removeCorrupt(
    EventLoop& loop, DispatcherGateway::Client& gateway, uint64_t epoch, const JobId& id) {
  auto request = gateway.removeCorruptJobRequest();
  request.setEpoch(epoch);
  wire::setWireId(request.initJobId(), id);
  return loop.run(request.send());
}

TEST_F(DispatcherTest, ACorruptJobGraphRecordIsReportedCorruptAndNotReplacedBySubmit) {
  const JobId id = JobId::random();
  backend_.putRaw(store::RecordFamily::kJobGraphs, id.toHex(), kGarbage);
  startTerm();
  recover();

  auto shown = status(id);
  ASSERT_FALSE(shown.hasFailure()) << shown.getFailure().getMessage().cStr();
  EXPECT_EQ(shown.getStatus().getState(), wire::JobState::CORRUPT);
  EXPECT_EQ(wire::idFromWire<JobId>(shown.getStatus().getJobId()), id);
  EXPECT_NE(std::string(shown.getStatus().getCorruptReason().cStr()), "");
  EXPECT_EQ(listedNames(), std::vector<std::string>{":corrupt"});
  // Counted by its state as listed (regent_jobs{state="corrupt"}), not as an active job.
  EXPECT_EQ(dispatcher_->counts().of(wire::JobState::CORRUPT), 1u);
  EXPECT_EQ(dispatcher_->counts().active, 0u);

  auto refused = submit(*jobGraph(id, "replacement"));
  ASSERT_TRUE(refused.hasFailure());
  EXPECT_TRUE(refused.getFailure().isFailedPrecondition());
  const std::string message = refused.getFailure().getMessage().cStr();
  EXPECT_NE(message.find("job " + id.toHex() + " is CORRUPT"), std::string::npos) << message;
  EXPECT_NE(message.find("regentctl jobs remove-corrupt " + id.toHex()), std::string::npos)
      << message;
  auto notCanceled = cancel(id);
  ASSERT_TRUE(notCanceled.hasFailure());
  EXPECT_TRUE(notCanceled.getFailure().isFailedPrecondition());
  EXPECT_EQ(backend_.raw(store::RecordFamily::kJobGraphs, id.toHex()), kGarbage);
}

TEST_F(DispatcherTest, RemoveCorruptRemovesOnlyACorruptRecordThenTheIdIsFree) {
  const JobId corrupt = JobId::random();
  backend_.putRaw(store::RecordFamily::kJobGraphs, corrupt.toHex(), kGarbage);
  startTerm();
  recover();
  const JobId healthy = JobId::random();
  ASSERT_FALSE(submit(*jobGraph(healthy, "healthy")).hasFailure());

  auto kept = removeCorrupt(loop_, gateway_, epoch_, healthy);
  ASSERT_TRUE(kept.hasFailure());
  EXPECT_TRUE(kept.getFailure().isFailedPrecondition()) << kept.getFailure().getMessage().cStr();
  auto unknown = removeCorrupt(loop_, gateway_, epoch_, JobId::random());
  ASSERT_TRUE(unknown.hasFailure());
  EXPECT_TRUE(unknown.getFailure().isNotFound());
  EXPECT_EQ(storedGraphs(), 2u);  // listIds counts the corrupt record's key too

  auto removed = removeCorrupt(loop_, gateway_, epoch_, corrupt);
  ASSERT_FALSE(removed.hasFailure()) << removed.getFailure().getMessage().cStr();
  EXPECT_EQ(backend_.raw(store::RecordFamily::kJobGraphs, corrupt.toHex()), std::nullopt);
  EXPECT_EQ(listedNames(), std::vector<std::string>{"healthy:created"});
  ASSERT_FALSE(submit(*jobGraph(corrupt, "again")).hasFailure());
  EXPECT_EQ(listedNames(), (std::vector<std::string>{"again:created", "healthy:created"}));
}

TEST_F(DispatcherTest, RemoveCorruptRefusesARecordThatDecodesAgainByNow) {
  // Listed corrupt at recovery, then repaired in the store by someone else: it is not removed.
  const JobId id = JobId::random();
  backend_.putRaw(store::RecordFamily::kJobGraphs, id.toHex(), kGarbage);
  startTerm();
  recover();
  {
    auto other = backend_.openTerm();
    ASSERT_TRUE(loop_.run(other->jobGraphs().put(
                              jobGraph(id, "repaired")->getRoot<wire::JobGraph>().asReader()))
                    .ok());
  }
  auto refused = removeCorrupt(loop_, gateway_, epoch_, id);
  ASSERT_TRUE(refused.hasFailure());
  EXPECT_TRUE(refused.getFailure().isFailedPrecondition());
  EXPECT_NE(backend_.raw(store::RecordFamily::kJobGraphs, id.toHex()), std::nullopt);
}

TEST_F(DispatcherTest, ResubmittingTheSameGraphSucceedsAndADifferentOneWithItsIdIsRefused) {
  startTerm();
  recover();
  const JobId id = JobId::random();
  auto graph = jobGraph(id, "same");
  ASSERT_FALSE(submit(*graph).hasFailure());
  EXPECT_FALSE(submit(*graph).hasFailure());
  auto other = jobGraph(id, "different");
  auto refused = submit(*other);
  ASSERT_TRUE(refused.hasFailure());
  EXPECT_TRUE(refused.getFailure().isAlreadyExists());
  EXPECT_EQ(listedNames(), std::vector<std::string>{"same:created"});
}

TEST_F(DispatcherTest, AStaleEpochIsFencedAndNothingIsStored) {
  startTerm();
  startTerm();  // epoch 2
  recover();
  auto graph = jobGraph(JobId::random(), "stale");
  auto response = submit(*graph, 1);
  ASSERT_TRUE(response.hasFailure());
  ASSERT_TRUE(response.getFailure().isFencing());
  EXPECT_EQ(response.getFailure().getFencing().getExpected(), 2u);
  EXPECT_EQ(storedGraphs(), 0u);
  EXPECT_EQ(counters_.rejected("DispatcherGateway.submitJob"), 1u);
}

TEST_F(DispatcherTest, ACanceledJobGetsACleanResultLosesItsGraphAndIsNotResurrected) {
  startTerm();
  recover();
  const JobId kept = JobId::random();
  const JobId canceled = JobId::random();
  auto keptGraph = jobGraph(kept, "kept");
  auto canceledGraph = jobGraph(canceled, "canceled");
  ASSERT_FALSE(submit(*keptGraph).hasFailure());
  ASSERT_FALSE(submit(*canceledGraph).hasFailure());
  auto response = cancel(canceled);
  ASSERT_FALSE(response.hasFailure()) << response.getFailure().getMessage().cStr();
  EXPECT_EQ(storedGraphs(), 1u);
  auto result = status(canceled);
  ASSERT_FALSE(result.hasFailure());
  EXPECT_EQ(result.getStatus().getState(), wire::JobState::CANCELED);
  ASSERT_TRUE(result.hasResult());
  EXPECT_TRUE(result.getResult().getClean());

  auto again = cancel(canceled);
  ASSERT_TRUE(again.hasFailure());
  EXPECT_TRUE(again.getFailure().isFailedPrecondition());
  auto unknown = cancel(JobId::random());
  ASSERT_TRUE(unknown.hasFailure());
  EXPECT_TRUE(unknown.getFailure().isNotFound());
  auto resubmitted = submit(*canceledGraph);
  ASSERT_TRUE(resubmitted.hasFailure());
  EXPECT_TRUE(resubmitted.getFailure().isAlreadyExists());

  startTerm();
  recover();
  EXPECT_EQ(listedNames(), (std::vector<std::string>{"canceled:canceled", "kept:created"}));
}

TEST_F(DispatcherTest, ADirtyResultFoundAtRecoveryIsCleanedUpAndItsJobIsNotRerun) {
  startTerm();
  const JobId id = JobId::random();
  auto graph = jobGraph(id, "ended-while-failing-over");
  ASSERT_TRUE(loop_.run(stores_->jobGraphs().put(graph->getRoot<wire::JobGraph>())).ok());
  putDirtyFinishedResult(id, "ended-while-failing-over");

  startTerm();  // The previous leader died between the dirty result and its cleanup.
  recover();
  EXPECT_EQ(storedGraphs(), 0u);
  auto dirty = loop_.run(stores_->jobResults().listDirty());
  ASSERT_TRUE(dirty.ok());
  EXPECT_TRUE(dirty.value().results.empty());
  EXPECT_EQ(dispatcher_->activeJobCount(), 0u);
  EXPECT_EQ(listedNames(), std::vector<std::string>{"ended-while-failing-over:finished"});
}

TEST_F(DispatcherTest, RevokingTheTermStopsASubmitWaitingOnTheStoreAndFencesLaterCalls) {
  startTerm();
  recover();
  const JobId id = JobId::random();
  auto graph = jobGraph(id, "cut-off");
  auto request = gateway_.submitJobRequest();
  request.setEpoch(epoch_);
  request.setJobGraph(graph->getRoot<wire::JobGraph>().asReader());
  backend_.holdWrites = true;
  auto pending = request.send();
  loop_.run(kj::evalLast([] {}));  // The handler started and waits for the store.

  term_->revoke("leadership revoked");
  try {
    loop_.run(kj::mv(pending));
    ADD_FAILURE() << "a submit survived the revocation";
  } catch (const kj::Exception& e) {
    EXPECT_NE(std::string(e.getDescription().cStr()).find("leadership revoked"), std::string::npos)
        << e.getDescription().cStr();
  }
  auto list = gateway_.listJobsRequest();
  list.setEpoch(epoch_);
  auto listed = loop_.run(list.send());
  ASSERT_TRUE(listed.hasFailure());
  EXPECT_TRUE(listed.getFailure().isFencing()) << listed.getFailure().getMessage().cStr();

  // The store write may or may not have happened (the caller got no answer, so it resubmits,
  // which is idempotent); the next term agrees with what is stored either way.
  backend_.releaseWrites();
  startTerm();
  recover();
  const auto names = listedNames();
  EXPECT_TRUE(names.empty() || names == std::vector<std::string>{"cut-off:created"});
  EXPECT_EQ(storedGraphs(), names.size());
}

TEST_F(DispatcherTest, ListingStatusAndOverviewAreServedFromMemoryWithoutStoreReads) {
  startTerm();
  recover();
  const JobId active = JobId::random();
  const JobId canceled = JobId::random();
  ASSERT_FALSE(submit(*jobGraph(active, "active")).hasFailure());
  ASSERT_FALSE(submit(*jobGraph(canceled, "canceled")).hasFailure());
  ASSERT_FALSE(cancel(canceled).hasFailure());

  const size_t readsBefore = backend_.reads;
  EXPECT_EQ(listedNames(), (std::vector<std::string>{"active:created", "canceled:canceled"}));
  auto ended = status(canceled);
  ASSERT_FALSE(ended.hasFailure());
  EXPECT_EQ(ended.getStatus().getState(), wire::JobState::CANCELED);
  EXPECT_TRUE(ended.getResult().getClean());
  EXPECT_FALSE(status(active).hasFailure());
  EXPECT_TRUE(status(JobId::random()).getFailure().isNotFound());
  auto counts = overview();
  EXPECT_EQ(counts.getOverview().getJobsRunning(), 1u);
  EXPECT_EQ(counts.getOverview().getJobsCanceled(), 1u);
  EXPECT_EQ(backend_.reads, readsBefore);
}

TEST_F(DispatcherTest, WorkersTheOverviewsSlotCountsAndItsLeaderComeFromTheTerm) {
  FakeTaskExecutors workers;
  startTerm(1000, &workers, [](wire::LeaderInfo::Builder leader) {
    leader.setMasterId("m-1");
    leader.setEpoch(1);
  });
  recover();
  auto request = gateway_.listTaskExecutorsRequest();
  request.setEpoch(epoch_);
  auto listed = loop_.run(request.send());
  ASSERT_FALSE(listed.hasFailure()) << listed.getFailure().getMessage().cStr();
  ASSERT_EQ(listed.getTaskExecutors().size(), 2u);
  EXPECT_EQ(std::string(listed.getTaskExecutors()[0].getRegistration().getHost().cStr()),
            "worker-a");
  EXPECT_EQ(listed.getTaskExecutors()[0].getRegisteredAtMs(), 1000);
  ASSERT_EQ(listed.getTaskExecutors()[0].getSlots().size(), 2u);
  EXPECT_EQ(wire::idFromWire<AllocationId>(
                listed.getTaskExecutors()[0].getSlots()[1].getAllocationId()),
            workers.allocation);
  EXPECT_EQ(std::string(listed.getTaskExecutors()[1].getRegistration().getHost().cStr()),
            "worker-b");

  auto counted = overview();
  ASSERT_FALSE(counted.hasFailure());
  EXPECT_EQ(counted.getOverview().getTaskExecutors(), 2u);
  EXPECT_EQ(counted.getOverview().getSlotsTotal(), 2u);
  EXPECT_EQ(counted.getOverview().getSlotsFree(), 1u);
  EXPECT_EQ(std::string(counted.getOverview().getLeader().getMasterId().cStr()), "m-1");
  EXPECT_EQ(counted.getOverview().getLeader().getEpoch(), 1u);
}

TEST_F(DispatcherTest, WithoutAResourceManagerNoWorkerIsListedAndNoneCounted) {
  startTerm();
  recover();
  auto request = gateway_.listTaskExecutorsRequest();
  request.setEpoch(epoch_);
  auto listed = loop_.run(request.send());
  ASSERT_FALSE(listed.hasFailure()) << listed.getFailure().getMessage().cStr();
  EXPECT_EQ(listed.getTaskExecutors().size(), 0u);
  EXPECT_EQ(overview().getOverview().getTaskExecutors(), 0u);
}

TEST_F(DispatcherTest, EndedResultsInMemoryAreBoundedLikeTheStoresRetention) {
  startTerm(/*retain=*/2);
  recover();
  std::vector<JobId> ids;
  for (int i = 0; i < 3; ++i) {
    ids.push_back(JobId::random());
    ASSERT_FALSE(submit(*jobGraph(ids.back(), "job" + std::to_string(i))).hasFailure());
    ASSERT_FALSE(cancel(ids.back()).hasFailure());
  }
  // The oldest clean result is gone, from memory as from the store.
  EXPECT_EQ(listedNames(), (std::vector<std::string>{"job1:canceled", "job2:canceled"}));
  EXPECT_TRUE(status(ids[0]).getFailure().isNotFound());
  EXPECT_EQ(backend_.count(store::RecordFamily::kJobResults), 2u);

  startTerm(/*retain=*/2);
  recover();
  EXPECT_EQ(listedNames(), (std::vector<std::string>{"job1:canceled", "job2:canceled"}));
}

TEST_F(DispatcherTest, ARecoveryThatCouldNotReadTheStoreCanBeRetried) {
  startTerm();
  recover();
  ASSERT_FALSE(submit(*jobGraph(JobId::random(), "kept")).hasFailure());

  startTerm();
  backend_.failReads = 1;
  auto failed = loop_.run(dispatcher_->recover());
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(failed.error().isRetryable());
  EXPECT_FALSE(dispatcher_->recovered());
  recover();
  EXPECT_EQ(listedNames(), std::vector<std::string>{"kept:created"});
}

TEST_F(DispatcherTest, ASubmittedJobStartsOnTheRunnerOnlyAfterItsJobGraphIsPersisted) {
  FakeJobRunner runner(backend_);
  startTerm(1000, nullptr, {}, &runner);
  recover();
  EXPECT_EQ(runner.listener, dispatcher_.get());
  const JobId id = JobId::random();
  auto graph = jobGraph(id, "runs");
  ASSERT_FALSE(submit(*graph).hasFailure());
  EXPECT_EQ(runner.calls,
            std::vector<std::string>{"start " + id.toHex() + " graph=stored progress=none"});
  // A retried submission does not start it twice.
  ASSERT_FALSE(submit(*graph).hasFailure());
  EXPECT_EQ(runner.calls.size(), 1u);

  // A submission the store refuses starts nothing.
  backend_.fenced = true;
  ASSERT_TRUE(submit(*jobGraph(JobId::random(), "refused")).hasFailure());
  EXPECT_EQ(runner.calls.size(), 1u);
}

TEST_F(DispatcherTest, AnOutputTokenIsSignedForTheLatestAttemptOfASubtaskWithItsWorkersKey) {
  FakeJobRunner runner(backend_);
  startTerm(1000, nullptr, {}, &runner);
  recover();
  const JobId id = JobId::random();
  ASSERT_FALSE(submit(*jobGraph(id, "runs")).hasFailure());
  auto tokenFor = [&](const JobId& job, const AttemptId& attempt) {
    auto request = gateway_.attemptOutputTokenRequest();
    request.setEpoch(epoch_);
    wire::setWireId(request.initJobId(), job);
    wire::setWireId(request.initAttemptId(), attempt);
    request.setStreams(wire::OutputStreams::STDERR_ONLY);
    return loop_.run(request.send());
  };
  const AttemptId attempt = FakeJobRunner::kAttemptOfSubtask0;
  auto granted = tokenFor(id, attempt);
  ASSERT_FALSE(granted.hasFailure()) << granted.getFailure().getMessage().cStr();
  EXPECT_EQ(std::string(granted.getHttpAddress().cStr()), "worker-a:8081");
  EXPECT_GT(granted.getValidForMs(), 59000u);
  EXPECT_LE(granted.getValidForMs(), 60000u);
  const rpc::OutputReadKey workerA{
      1, signer_.workerKey(FakeJobRunner::kWorkerA, kRegistrationOfA)};
  const int64_t now = clockMs_ / 1000;
  EXPECT_TRUE(rpc::verifyOutputToken(granted.getToken().cStr(), workerA, attempt,
                                     rpc::OutputStreamSet::kStderr, now)
                  .ok());
  EXPECT_FALSE(rpc::verifyOutputToken(granted.getToken().cStr(), workerA, attempt,
                                      rpc::OutputStreamSet::kStdout, now)
                   .ok());
  // Another worker's key does not verify it.
  const rpc::OutputReadKey workerB{
      1, signer_.workerKey(ResourceId(0xb, 0xb), kRegistrationOfA)};
  EXPECT_FALSE(rpc::verifyOutputToken(granted.getToken().cStr(), workerB, attempt,
                                      rpc::OutputStreamSet::kStderr, now)
                   .ok());

  // No token for an attempt the job does not show, nor for an unknown job.
  EXPECT_TRUE(tokenFor(id, AttemptId::random()).getFailure().isNotFound());
  EXPECT_TRUE(tokenFor(JobId::random(), attempt).getFailure().isNotFound());
}

TEST_F(DispatcherTest, LiveStatesAndDetailOfARunningJobComeFromTheRunner) {
  FakeJobRunner runner(backend_);
  startTerm(1000, nullptr, {}, &runner);
  recover();
  const JobId id = JobId::random();
  ASSERT_FALSE(submit(*jobGraph(id, "live")).hasFailure());
  EXPECT_EQ(listedNames(), std::vector<std::string>{"live:created"});
  runner.listener->jobStateChanged(id, wire::JobState::RUNNING, 42);
  EXPECT_EQ(listedNames(), std::vector<std::string>{"live:running"});
  EXPECT_EQ(dispatcher_->counts().of(wire::JobState::RUNNING), 1u);
  runner.listener->jobStateChanged(id, wire::JobState::RESTARTING, 43);
  EXPECT_EQ(dispatcher_->counts().of(wire::JobState::RESTARTING), 1u);
  EXPECT_EQ(dispatcher_->counts().active, 1u);

  auto detail = status(id);
  ASSERT_FALSE(detail.hasFailure());
  auto job = detail.getStatus();
  EXPECT_EQ(job.getState(), wire::JobState::RESTARTING);
  EXPECT_EQ(job.getStateChangedAtMs(), 43);
  EXPECT_EQ(std::string(job.getName().cStr()), "live");
  EXPECT_EQ(job.getRestarts(), 3u);
  EXPECT_EQ(std::string(job.getWaitingReason().cStr()), "waiting for 1 slot");
  ASSERT_EQ(job.getVertices().size(), 1u);
  ASSERT_EQ(job.getVertices()[0].getSubtasks().size(), 2u);
  EXPECT_EQ(std::string(job.getVertices()[0].getSubtasks()[0].getHost().cStr()), "worker-a");

  auto request = gateway_.listJobsRequest();
  request.setEpoch(epoch_);
  auto listed = loop_.run(request.send());
  ASSERT_EQ(listed.getJobs().size(), 1u);
  EXPECT_EQ(listed.getJobs()[0].getTasks().getRunning(), 2u);
  EXPECT_EQ(listed.getJobs()[0].getRestarts(), 3u);
  ASSERT_EQ(listed.getJobs()[0].getVertices().size(), 1u);
  EXPECT_EQ(listed.getJobs()[0].getVertices()[0].getSubtasks().size(), 0u);
}

TEST_F(DispatcherTest, AnEndedJobGetsADirtyResultThenIsReleasedThenLosesItsGraphThenIsClean) {
  FakeJobRunner runner(backend_);
  startTerm(1000, nullptr, {}, &runner);
  recover();
  const JobId id = JobId::random();
  ASSERT_FALSE(submit(*jobGraph(id, "ends")).hasFailure());
  runner.listener->jobStateChanged(id, wire::JobState::RUNNING, 42);
  runner.holdReleases = true;
  JobEnd end;
  end.state = wire::JobState::FAILED;
  end.restarts = 2;
  end.netRuntimeMs = 1234;
  end.failureMessage = "exit code 1";
  end.failureVertex = "work";
  end.failureSubtask = 1;
  end.failureAttempt = AttemptId::random();
  end.failureExitCode = 1;
  end.failureAtMs = 77;
  runner.listener->jobEnded(id, end);
  loop_.run(kj::evalLast([] {}));

  // The dirty result is stored before the release, and the graph is still there.
  ASSERT_EQ(runner.calls.size(), 2u);
  EXPECT_EQ(runner.calls[1], "release " + id.toHex() + " result=stored graph=stored");
  EXPECT_EQ(runner.causes[0], "job FAILED: exit code 1");
  EXPECT_EQ(storedResult(id), "dirty");
  EXPECT_EQ(storedGraphs(), 1u);
  EXPECT_EQ(dispatcher_->cleanupsRunning(), 1u);
  auto ended = status(id);
  EXPECT_EQ(ended.getStatus().getState(), wire::JobState::FAILED);
  EXPECT_FALSE(ended.getResult().getClean());

  // Only once released: the graph goes, then the result is clean.
  runner.releaseAll();
  settle();
  EXPECT_EQ(storedGraphs(), 0u);
  EXPECT_EQ(storedResult(id), "clean");
  auto statusResponse = status(id);
  auto result = statusResponse.getResult();
  EXPECT_TRUE(result.getClean());
  EXPECT_EQ(result.getState(), wire::JobState::FAILED);
  EXPECT_EQ(result.getRestarts(), 2u);
  EXPECT_EQ(result.getNetRuntimeMs(), 1234u);
  EXPECT_EQ(std::string(result.getFailure().getMessage().cStr()), "exit code 1");
  EXPECT_EQ(std::string(result.getFailure().getVertexName().cStr()), "work");
  EXPECT_EQ(result.getFailure().getSubtaskIndex(), 1u);
  EXPECT_EQ(wire::idFromWire<AttemptId>(result.getFailure().getAttemptId()), end.failureAttempt);
  EXPECT_EQ(result.getFailure().getExitCode(), 1);
  EXPECT_EQ(dispatcher_->counts().of(wire::JobState::FAILED), 1u);

  // A later report about the ended job changes nothing, and it is not started by the next term.
  runner.listener->jobEnded(id, JobEnd{});
  runner.listener->jobStateChanged(id, wire::JobState::RUNNING, 50);
  settle();
  EXPECT_EQ(runner.calls.size(), 2u);
  startTerm(1000, nullptr, {}, &runner);
  recover();
  EXPECT_EQ(runner.calls.size(), 2u);
  EXPECT_EQ(listedNames(), std::vector<std::string>{"ends:failed"});
}

TEST_F(DispatcherTest, AFinishedJobsResultCarriesNoFailure) {
  FakeJobRunner runner(backend_);
  startTerm(1000, nullptr, {}, &runner);
  recover();
  const JobId id = JobId::random();
  ASSERT_FALSE(submit(*jobGraph(id, "done")).hasFailure());
  JobEnd end;
  end.state = wire::JobState::FINISHED;
  runner.listener->jobEnded(id, end);
  settle();
  EXPECT_EQ(storedResult(id), "clean");
  EXPECT_EQ(storedGraphs(), 0u);
  auto statusResponse = status(id);
  auto result = statusResponse.getResult();
  EXPECT_EQ(result.getState(), wire::JobState::FINISHED);
  EXPECT_FALSE(result.hasFailure());
}

TEST_F(DispatcherTest, CancelAnswersOnceTheDirtyResultIsStoredThenReleasesAndCleansUp) {
  FakeJobRunner runner(backend_);
  startTerm(1000, nullptr, {}, &runner);
  recover();
  const JobId id = JobId::random();
  ASSERT_FALSE(submit(*jobGraph(id, "canceled")).hasFailure());
  runner.holdReleases = true;
  auto request = gateway_.cancelJobRequest();
  request.setEpoch(epoch_);
  wire::setWireId(request.initJobId(), id);
  auto response = loop_.run(request.send());
  ASSERT_FALSE(response.hasFailure()) << response.getFailure().getMessage().cStr();
  // Answered while the release still runs: the result is dirty, the graph still stored.
  loop_.run(kj::evalLast([] {}));
  ASSERT_EQ(runner.calls.size(), 2u);
  EXPECT_EQ(runner.calls[1], "release " + id.toHex() + " result=stored graph=stored");
  EXPECT_EQ(runner.causes[0], "job canceled");
  EXPECT_EQ(storedResult(id), "dirty");
  // Meanwhile the job is over: cancelling or submitting it again is refused as ended, and the
  // runner's own end is ignored.
  auto again = gateway_.cancelJobRequest();
  again.setEpoch(epoch_);
  wire::setWireId(again.initJobId(), id);
  auto repeated = loop_.run(again.send());
  ASSERT_TRUE(repeated.hasFailure());
  EXPECT_TRUE(repeated.getFailure().isFailedPrecondition())
      << repeated.getFailure().getMessage().cStr();
  auto resubmitted = submit(*jobGraph(id, "canceled"));
  ASSERT_TRUE(resubmitted.hasFailure());
  EXPECT_TRUE(resubmitted.getFailure().isAlreadyExists())
      << resubmitted.getFailure().getMessage().cStr();
  runner.listener->jobEnded(id, JobEnd{});
  runner.releaseAll();
  settle();
  EXPECT_EQ(storedResult(id), "clean");
  EXPECT_EQ(storedGraphs(), 0u);
  auto statusResponse = status(id);
  auto result = statusResponse.getResult();
  EXPECT_EQ(result.getState(), wire::JobState::CANCELED);
  EXPECT_EQ(result.getRestarts(), 3u);  // The runner's count when cancelled.
  EXPECT_EQ(runner.calls.size(), 2u);
}

TEST_F(DispatcherTest, AFinishedJobKeepsItsSubtasksAndWhereTheirOutputIsWhileItsResultIsKept) {
  FakeJobRunner runner(backend_);
  startTerm(1, nullptr, {}, &runner);
  recover();
  const JobId id = JobId::random();
  ASSERT_FALSE(submit(*jobGraph(id, "dag")).hasFailure());
  runner.attemptState = wire::ExecutionState::FINISHED;
  JobEnd end;
  end.state = wire::JobState::FINISHED;
  runner.listener->jobEnded(id, end);
  settle();
  EXPECT_EQ(storedResult(id), "clean");
  EXPECT_TRUE(runner.running.empty()) << "released";

  auto response = status(id);
  auto job = response.getStatus();
  EXPECT_EQ(job.getState(), wire::JobState::FINISHED);
  EXPECT_TRUE(response.getResult().getClean());
  EXPECT_EQ(job.getTasks().getTotal(), 2u);
  ASSERT_EQ(job.getVertices().size(), 1u);
  EXPECT_EQ(std::string(job.getVertices()[0].getName().cStr()), "work");
  ASSERT_EQ(job.getVertices()[0].getSubtasks().size(), 2u);
  auto subtask = job.getVertices()[0].getSubtasks()[0];
  EXPECT_EQ(std::string(subtask.getHttpAddress().cStr()), "worker-a:8081");
  EXPECT_EQ(subtask.getAttempt().getState(), wire::ExecutionState::FINISHED);

  // listJobs stays a list of results for ended jobs.
  auto request = gateway_.listJobsRequest();
  request.setEpoch(epoch_);
  auto listed = loop_.run(request.send());
  ASSERT_EQ(listed.getJobs().size(), 1u);
  EXPECT_EQ(listed.getJobs()[0].getVertices().size(), 0u);

  // The detail goes with the result when retention drops it (retain = 1 clean result).
  const size_t withOneDetail = dispatcher_->heldBytesForTests();
  const JobId next = JobId::random();
  ASSERT_FALSE(submit(*jobGraph(next, "next")).hasFailure());
  runner.listener->jobEnded(next, end);
  settle();
  EXPECT_TRUE(dispatcher_->job(id) == nullptr);
  EXPECT_EQ(dispatcher_->heldBytesForTests(), withOneDetail);

  // Kept with the result: the next term reads it from the store when asked.
  startTerm(1, nullptr, {}, &runner);
  recover();
  auto recovered = status(next);
  EXPECT_EQ(recovered.getStatus().getState(), wire::JobState::FINISHED);
  ASSERT_EQ(recovered.getStatus().getVertices().size(), 1u);
  EXPECT_GT(recovered.getStatus().getVertices()[0].getSubtasks().size(), 0u);
  EXPECT_FALSE(recovered.getStatus().hasSubtasksOmitted());
}

TEST_F(DispatcherTest, EndedJobsDetailsAreBoundedTogetherTheOldestDroppedFirst) {
  FakeJobRunner runner(backend_);
  runner.attemptState = wire::ExecutionState::FINISHED;
  JobEnd end;
  end.state = wire::JobState::FINISHED;
  // One detail's size, with room for it but not for two.
  startTerm(1000, nullptr, {}, &runner);
  recover();
  ASSERT_FALSE(submit(*jobGraph(JobId::random(), "measure")).hasFailure());
  runner.listener->jobEnded(runner.running.begin()->first, end);
  settle();
  const size_t oneDetail = dispatcher_->detailBytesForTests();
  ASSERT_GT(oneDetail, 0u);
  detailBudget_ = oneDetail + oneDetail / 2;

  startTerm(1000, nullptr, {}, &runner);
  recover();
  EXPECT_EQ(dispatcher_->detailBytesForTests(), 0u) << "details are not recovered";
  const JobId older = JobId::random();
  const JobId newer = JobId::random();
  ASSERT_FALSE(submit(*jobGraph(older, "older")).hasFailure());
  ASSERT_FALSE(submit(*jobGraph(newer, "newer")).hasFailure());
  runner.listener->jobEnded(older, end);
  settle();
  runner.listener->jobEnded(newer, end);
  settle();
  EXPECT_EQ(dispatcher_->detailBytesForTests(), oneDetail);
  EXPECT_EQ(status(newer).getStatus().getVertices().size(), 1u);
  // The older one left memory, not the store: asked for, it is read back and shown (over the
  // budget by that one detail, which the next one set drops again).
  const size_t readsBefore = backend_.reads;
  auto dropped = status(older);
  EXPECT_EQ(dropped.getStatus().getVertices().size(), 1u);
  EXPECT_EQ(dropped.getStatus().getState(), wire::JobState::FINISHED) << "the result stays";
  EXPECT_TRUE(dropped.getResult().getClean());
  EXPECT_EQ(backend_.reads, readsBefore + 1);
  EXPECT_EQ(status(older).getStatus().getVertices().size(), 1u);
  EXPECT_EQ(backend_.reads, readsBefore + 1) << "read once, then from memory";
}

TEST_F(DispatcherTest, ACancelledJobsSubtasksShowTheirStateAtCancelThenTheirFinalOneOnceReleased) {
  FakeJobRunner runner(backend_);
  startTerm(1000, nullptr, {}, &runner);
  recover();
  const JobId id = JobId::random();
  ASSERT_FALSE(submit(*jobGraph(id, "cancelled")).hasFailure());
  runner.listener->jobStateChanged(id, wire::JobState::RUNNING, 42);
  runner.holdReleases = true;
  auto request = gateway_.cancelJobRequest();
  request.setEpoch(epoch_);
  wire::setWireId(request.initJobId(), id);
  ASSERT_FALSE(loop_.run(request.send()).hasFailure());
  loop_.run(kj::evalLast([] {}));
  ASSERT_EQ(runner.calls.size(), 2u) << "released";

  // While the release runs: the attempts as they were when the job was cancelled.
  auto during = status(id);
  EXPECT_EQ(during.getStatus().getState(), wire::JobState::CANCELED);
  ASSERT_EQ(during.getStatus().getVertices().size(), 1u);
  ASSERT_EQ(during.getStatus().getVertices()[0].getSubtasks().size(), 2u);
  EXPECT_EQ(during.getStatus().getVertices()[0].getSubtasks()[0].getAttempt().getState(),
            wire::ExecutionState::RUNNING);

  // The cancelled attempt's end arrives; the release resolves with it.
  runner.attemptState = wire::ExecutionState::CANCELED;
  runner.releaseAll();
  settle();
  auto after = status(id);
  EXPECT_TRUE(after.getResult().getClean());
  ASSERT_EQ(after.getStatus().getVertices().size(), 1u);
  EXPECT_EQ(after.getStatus().getVertices()[0].getSubtasks()[0].getAttempt().getState(),
            wire::ExecutionState::CANCELED);
}

TEST_F(DispatcherTest, ADirtyResultThatCannotBeStoredLeavesTheJobActiveAndCancellable) {
  FakeJobRunner runner(backend_);
  startTerm(1000, nullptr, {}, &runner);
  recover();
  const JobId id = JobId::random();
  ASSERT_FALSE(submit(*jobGraph(id, "stuck")).hasFailure());
  runner.listener->jobStateChanged(id, wire::JobState::RUNNING, 42);
  backend_.fenced = true;
  runner.listener->jobEnded(id, JobEnd{});
  loop_.run(kj::evalLast([] {}));
  EXPECT_EQ(storedResult(id), "none");
  EXPECT_EQ(runner.calls.size(), 1u);  // Not released: nothing of the end is stored.
  EXPECT_EQ(listedNames(), std::vector<std::string>{"stuck:running"});
  backend_.fenced = false;
  ASSERT_FALSE(cancel(id).hasFailure());
  EXPECT_EQ(storedResult(id), "clean");
  EXPECT_EQ(runner.calls.size(), 2u);
}

TEST_F(DispatcherTest, ARunnersEndWhoseDirtyWriteFailsIsWrittenAgainUntilStored) {
  FakeJobRunner runner(backend_);
  startTerm(1000, nullptr, {}, &runner);
  recover();
  const JobId id = JobId::random();
  ASSERT_FALSE(submit(*jobGraph(id, "retried")).hasFailure());
  runner.listener->jobStateChanged(id, wire::JobState::RUNNING, 42);
  backend_.failWrites = 1;
  runner.listener->jobEnded(id, JobEnd{});
  loop_.run(kj::evalLast([] {}));
  // The write failed; the job stays ending (its JobMaster runs nothing more) until it is stored.
  EXPECT_EQ(storedResult(id), "none");
  EXPECT_EQ(dispatcher_->cleanupsRunning(), 1u);
  EXPECT_EQ(runner.calls.size(), 1u);

  timer_.advanceTo(timer_.now() + 10 * kj::SECONDS);
  settle();
  EXPECT_EQ(storedResult(id), "clean");
  EXPECT_EQ(listedNames(), std::vector<std::string>{"retried:finished"});
  ASSERT_EQ(runner.calls.size(), 2u);  // Released: its slots are freed.
}

TEST_F(DispatcherTest, AnEndReportedDuringACancelWhoseWriteFailsEndsTheJob) {
  FakeJobRunner runner(backend_);
  startTerm(1000, nullptr, {}, &runner);
  recover();
  const JobId id = JobId::random();
  ASSERT_FALSE(submit(*jobGraph(id, "ends-while-cancelled")).hasFailure());
  backend_.holdWrites = true;
  auto request = gateway_.cancelJobRequest();
  request.setEpoch(epoch_);
  wire::setWireId(request.initJobId(), id);
  auto cancelled = request.send();
  loop_.run(kj::evalLast([] {}));
  runner.listener->jobEnded(id, failedEnd("exit code 3"));  // While the CANCELED result is written.
  backend_.failWrites = 1;
  backend_.releaseWrites();
  auto response = loop_.run(kj::mv(cancelled));
  ASSERT_TRUE(response.hasFailure());
  EXPECT_TRUE(response.getFailure().isUnavailable());

  settle();
  EXPECT_EQ(storedResult(id), "clean");
  EXPECT_EQ(listedNames(), std::vector<std::string>{"ends-while-cancelled:failed"});
  EXPECT_EQ(runner.calls.size(), 2u);
}

TEST_F(DispatcherTest, AJobWhoseResultRecordIsCorruptIsListedCorruptAndNeverRunAgain) {
  startTerm();
  recover();
  const JobId id = JobId::random();
  ASSERT_FALSE(submit(*jobGraph(id, "ended-corrupt")).hasFailure());
  backend_.putRaw(store::RecordFamily::kJobResults, id.toHex(), kGarbage);

  FakeJobRunner runner(backend_);
  startTerm(1000, nullptr, {}, &runner);
  recover();
  EXPECT_TRUE(runner.calls.empty());
  auto shown = status(id);
  ASSERT_FALSE(shown.hasFailure()) << shown.getFailure().getMessage().cStr();
  EXPECT_EQ(shown.getStatus().getState(), wire::JobState::CORRUPT);
  const std::string reason = shown.getStatus().getCorruptReason().cStr();
  EXPECT_NE(reason.find("job result record does not decode"), std::string::npos) << reason;
  EXPECT_EQ(listedNames(), std::vector<std::string>{":corrupt"});
  auto refused = submit(*jobGraph(id, "again"));
  ASSERT_TRUE(refused.hasFailure());
  EXPECT_TRUE(refused.getFailure().isFailedPrecondition());
  EXPECT_TRUE(cancel(id).getFailure().isFailedPrecondition());
  EXPECT_TRUE(removeCorrupt(loop_, gateway_, epoch_, id).getFailure().isFailedPrecondition());
  EXPECT_TRUE(runner.calls.empty());
  EXPECT_EQ(backend_.raw(store::RecordFamily::kJobResults, id.toHex()), kGarbage);
  EXPECT_EQ(storedGraphs(), 1u);
}

TEST_F(DispatcherTest, RecoveryStartsEveryJobWithoutAResultAndNeverOneWithADirtyResult) {
  startTerm();
  recover();
  const JobId unfinished = JobId::random();
  ASSERT_FALSE(submit(*jobGraph(unfinished, "unfinished")).hasFailure());
  const JobId ended = JobId::random();
  auto endedGraph = jobGraph(ended, "ended");
  ASSERT_TRUE(loop_.run(stores_->jobGraphs().put(endedGraph->getRoot<wire::JobGraph>())).ok());
  putDirtyFinishedResult(ended, "ended");

  FakeJobRunner runner(backend_);
  startTerm(1000, nullptr, {}, &runner);
  auto recovered = loop_.run(dispatcher_->recover());
  ASSERT_TRUE(recovered.ok()) << recovered.error().message;
  EXPECT_EQ(runner.calls, std::vector<std::string>{"start " + unfinished.toHex() +
                                                   " graph=stored progress=none"});
  EXPECT_EQ(runner.running.at(unfinished), "unfinished");
  EXPECT_EQ(storedResult(ended), "clean");
}

TEST_F(DispatcherTest, ARecoveredJobStartsWithItsProgressRecordAndOneWithoutARecordWithNone) {
  startTerm();
  recover();
  const JobId deployed = JobId::random();
  const JobId waiting = JobId::random();
  ASSERT_FALSE(submit(*jobGraph(deployed, "deployed")).hasFailure());
  ASSERT_FALSE(submit(*jobGraph(waiting, "waiting")).hasFailure());
  putProgress(deployed, 2, 4);

  FakeJobRunner runner(backend_);
  startTerm(1000, nullptr, {}, &runner);
  recover();
  std::vector<std::string> expected{"start " + deployed.toHex() + " graph=stored progress=2",
                                    "start " + waiting.toHex() + " graph=stored progress=none"};
  std::sort(expected.begin(), expected.end());
  std::vector<std::string> calls = runner.calls;
  std::sort(calls.begin(), calls.end());
  EXPECT_EQ(calls, expected);
  EXPECT_EQ(runner.recoveredRestarts.at(deployed), 4u);
  // The record stays: its job's JobMaster replaces it from now on.
  EXPECT_TRUE(storedProgress(deployed));

  // A job submitted in this term starts without one.
  const JobId fresh = JobId::random();
  ASSERT_FALSE(submit(*jobGraph(fresh, "fresh")).hasFailure());
  EXPECT_EQ(runner.calls.back(), "start " + fresh.toHex() + " graph=stored progress=none");
}

TEST_F(DispatcherTest, AJobWhoseProgressRecordIsCorruptStartsWithoutItAndTheRecordIsLeft) {
  startTerm();
  recover();
  const JobId id = JobId::random();
  ASSERT_FALSE(submit(*jobGraph(id, "garbled")).hasFailure());
  backend_.putRaw(store::RecordFamily::kJobProgress, id.toHex(), kGarbage);

  FakeJobRunner runner(backend_);
  startTerm(1000, nullptr, {}, &runner);
  recover();
  EXPECT_EQ(runner.calls,
            std::vector<std::string>{"start " + id.toHex() + " graph=stored progress=none"});
  drain();
  // Its JobMaster's first write replaces it.
  EXPECT_EQ(backend_.raw(store::RecordFamily::kJobProgress, id.toHex()), kGarbage);
}

TEST_F(DispatcherTest, ProgressRecordsOfJobsWithoutAJobGraphOrWithAResultAreRemovedAtRecovery) {
  startTerm();
  recover();
  const JobId running = submitWithProgress("running", 2);
  const JobId noGraph = JobId::random();
  putProgress(noGraph, 2);
  const JobId garbledNoGraph = JobId::random();
  backend_.putRaw(store::RecordFamily::kJobProgress, garbledNoGraph.toHex(), kGarbage);
  // Ended with a clean result, its JobGraph gone, its record left behind.
  const JobId clean = JobId::random();
  putDirtyFinishedResult(clean, "clean");
  ASSERT_TRUE(loop_.run(stores_->jobResults().markClean(clean)).ok());
  putProgress(clean, 1);

  startTerm();
  backend_.holdWrites = true;
  recover();  // Does not wait for the removals.
  ASSERT_EQ(backend_.heldWrites(), 3u);
  // An id whose record is being removed cannot be submitted meanwhile: its JobMaster's first
  // write could be removed.
  auto busy = submit(*jobGraph(noGraph, "reused"));
  ASSERT_TRUE(busy.hasFailure());
  EXPECT_TRUE(busy.getFailure().isUnavailable());
  backend_.releaseWrites();
  drain();
  EXPECT_TRUE(storedProgress(running));
  EXPECT_FALSE(storedProgress(noGraph));
  EXPECT_FALSE(storedProgress(garbledNoGraph));
  EXPECT_FALSE(storedProgress(clean));
  EXPECT_FALSE(submit(*jobGraph(noGraph, "reused")).hasFailure());
}

TEST_F(DispatcherTest, AFailedRemovalOfAnOrphanProgressRecordIsLeftToTheNextLeader) {
  startTerm();
  recover();
  const JobId noGraph = JobId::random();
  putProgress(noGraph, 1);

  startTerm();
  backend_.failWrites = 1;
  recover();
  drain();
  EXPECT_TRUE(storedProgress(noGraph));
  startTerm();
  recover();
  drain();
  EXPECT_FALSE(storedProgress(noGraph));
}

TEST_F(DispatcherTest, ARecoveryThatCannotReadTheProgressRecordsFailsRetryablyAndCanBeRetried) {
  startTerm();
  recover();
  const JobId id = submitWithProgress("kept", 2);

  FakeJobRunner runner(backend_);
  startTerm(1000, nullptr, {}, &runner);
  backend_.failReadsOf[store::RecordFamily::kJobProgress] = 1;
  auto failed = loop_.run(dispatcher_->recover());
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(failed.error().isRetryable());
  EXPECT_NE(failed.error().message.find("progress"), std::string::npos) << failed.error().message;
  EXPECT_FALSE(dispatcher_->recovered());
  EXPECT_TRUE(runner.calls.empty());  // Nothing starts without its progress.
  recover();
  EXPECT_EQ(runner.calls,
            std::vector<std::string>{"start " + id.toHex() + " graph=stored progress=2"});
}

TEST_F(DispatcherTest, AFinishedJobsResultDetailAndCleanupAreOneWriteBeforeItsRelease) {
  FakeJobRunner runner(backend_);
  startTerm(1000, nullptr, {}, &runner);
  recover();
  const JobId id = submitWithProgress("ends", 2);
  runner.attemptState = wire::ExecutionState::FINISHED;
  runner.holdReleases = true;
  backend_.holdWrites = true;
  const size_t before = backend_.transactions;
  runner.listener->jobEnded(id, JobEnd{});  // FINISHED.
  drain();
  // One transaction, not applied yet, and nothing released: the job is still as it ran.
  ASSERT_EQ(backend_.heldWrites(), 1u);
  EXPECT_EQ(runner.calls.size(), 1u);
  EXPECT_EQ(storedResult(id), "none");
  EXPECT_EQ(storedGraphs(), 1u);
  EXPECT_TRUE(storedProgress(id));
  backend_.releaseWrites();
  drain();
  // Applied whole: the result clean, the JobGraph and progress record gone, the detail kept;
  // only then released.
  EXPECT_EQ(backend_.transactions - before, 1u);
  EXPECT_EQ(storedResult(id), "clean");
  EXPECT_EQ(storedGraphs(), 0u);
  EXPECT_FALSE(storedProgress(id));
  auto detail = loop_.run(stores_->jobResults().getDetail(id));
  ASSERT_TRUE(detail.ok()) << detail.error().message;
  EXPECT_EQ(detail.value().get().getState(), wire::JobState::FINISHED);
  ASSERT_EQ(detail.value().get().getVertices().size(), 1u);
  EXPECT_EQ(detail.value().get().getVertices()[0].getSubtasks()[0].getAttempt().getState(),
            wire::ExecutionState::FINISHED);
  ASSERT_EQ(runner.calls.size(), 2u);
  EXPECT_EQ(runner.calls[1], "release " + id.toHex() + " result=stored graph=none");
  EXPECT_EQ(dispatcher_->cleanupsRunning(), 1u);  // Until the release resolves.
  runner.releaseAll();
  settle();
  EXPECT_EQ(backend_.transactions - before, 1u);  // Nothing more written.
  auto shown = status(id);
  EXPECT_TRUE(shown.getResult().getClean());
  EXPECT_EQ(shown.getStatus().getState(), wire::JobState::FINISHED);
}

TEST_F(DispatcherTest, AFinishedEndThatCannotBeWrittenLeavesTheJobToTheNextLeaderWhole) {
  FakeJobRunner runner(backend_);
  startTerm(1000, nullptr, {}, &runner);
  recover();
  const JobId id = submitWithProgress("ends", 2);
  backend_.fenced = true;  // The term ends before the end is stored.
  runner.listener->jobEnded(id, JobEnd{});  // FINISHED.
  settle();
  // Nothing of the transaction applied, nothing released.
  EXPECT_EQ(storedResult(id), "none");
  EXPECT_EQ(storedGraphs(), 1u);
  EXPECT_TRUE(storedProgress(id));
  EXPECT_EQ(runner.calls.size(), 1u);

  // The next leader runs the job on from its JobGraph and progress record.
  backend_.fenced = false;
  FakeJobRunner next(backend_);
  startTerm(1000, nullptr, {}, &next);
  recover();
  EXPECT_EQ(next.calls,
            std::vector<std::string>{"start " + id.toHex() + " graph=stored progress=2"});
}

TEST_F(DispatcherTest, AFailedJobsCleanupRemovesGraphAndProgressAndMarksCleanInOneWrite) {
  FakeJobRunner runner(backend_);
  startTerm(1000, nullptr, {}, &runner);
  recover();
  const JobId id = submitWithProgress("ends", 2);
  runner.holdReleases = true;
  runner.listener->jobEnded(id, failedEnd("exit code 1"));
  drain();
  ASSERT_EQ(runner.calls.size(), 2u);
  EXPECT_EQ(storedResult(id), "dirty");

  backend_.holdWrites = true;
  const size_t before = backend_.transactions;
  runner.releaseAll();
  drain();
  // The cleanup: JobGraph and progress record removed, the final detail kept, the result
  // marked clean, all in one transaction that has not been applied yet.
  ASSERT_EQ(backend_.heldWrites(), 1u);
  EXPECT_EQ(storedGraphs(), 1u);
  EXPECT_TRUE(storedProgress(id));
  EXPECT_EQ(storedResult(id), "dirty");
  backend_.releaseWrites();
  settle();
  EXPECT_EQ(backend_.transactions - before, 1u);
  EXPECT_EQ(storedGraphs(), 0u);
  EXPECT_FALSE(storedProgress(id));
  EXPECT_EQ(storedResult(id), "clean");
}

TEST_F(DispatcherTest, ACleanupThatCouldNotBeWrittenIsFinishedWholeByTheNextLeader) {
  FakeJobRunner runner(backend_);
  startTerm(1000, nullptr, {}, &runner);
  recover();
  const JobId id = submitWithProgress("ends", 2);
  backend_.holdWrites = true;
  runner.listener->jobEnded(id, failedEnd("exit code 1"));
  drain();
  backend_.releaseOneWrite();  // The dirty result.
  drain();
  ASSERT_EQ(backend_.heldWrites(), 1u);  // The cleanup.
  backend_.failWrites = 1;
  backend_.releaseWrites();
  settle();
  // Nothing of it was applied: left to the next leader.
  EXPECT_EQ(storedGraphs(), 1u);
  EXPECT_TRUE(storedProgress(id));
  EXPECT_EQ(storedResult(id), "dirty");

  // The next leader finishes the cleanup; while it cannot be written its recovery fails
  // retryably, and the result stays dirty.
  startTerm(1000, nullptr, {}, &runner);
  backend_.holdWrites = true;
  auto recovering = dispatcher_->recover().eagerlyEvaluate(nullptr);
  drain();
  ASSERT_EQ(backend_.heldWrites(), 1u);  // The cleanup, one transaction again.
  backend_.failWrites = 1;
  backend_.releaseWrites();
  auto failed = loop_.run(kj::mv(recovering));
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(failed.error().isRetryable());
  EXPECT_NE(failed.error().message.find("cleanup of ended job " + id.toHex()), std::string::npos)
      << failed.error().message;
  EXPECT_EQ(storedResult(id), "dirty");
  EXPECT_EQ(storedGraphs(), 1u);
  recover();
  EXPECT_EQ(storedGraphs(), 0u);
  EXPECT_FALSE(storedProgress(id));
  EXPECT_EQ(storedResult(id), "clean");
  EXPECT_EQ(runner.calls.size(), 2u);  // Never started again.
}

TEST_F(DispatcherTest, ACancelledJobsProgressRecordIsRemovedWithItsJobGraph) {
  FakeJobRunner runner(backend_);
  startTerm(1000, nullptr, {}, &runner);
  recover();
  const JobId id = submitWithProgress("cancelled", 2);
  auto response = cancel(id);
  ASSERT_FALSE(response.hasFailure()) << response.getFailure().getMessage().cStr();
  EXPECT_EQ(storedGraphs(), 0u);
  EXPECT_FALSE(storedProgress(id));
  EXPECT_EQ(storedResult(id), "clean");
}

TEST_F(DispatcherTest, ACorruptJobKeepsItsProgressRecordUntilRemoveCorruptRemovesBoth) {
  startTerm();
  recover();
  const JobId id = JobId::random();
  backend_.putRaw(store::RecordFamily::kJobGraphs, id.toHex(), kGarbage);
  putProgress(id, 2);

  startTerm();
  recover();
  drain();
  EXPECT_TRUE(storedProgress(id));  // Left in place with its JobGraph record.

  // Its progress record cannot be removed: the JobGraph record stays, and so does the refusal.
  backend_.failWrites = 1;
  auto refused = removeCorrupt(loop_, gateway_, epoch_, id);
  ASSERT_TRUE(refused.hasFailure());
  EXPECT_TRUE(refused.getFailure().isUnavailable());
  EXPECT_TRUE(backend_.raw(store::RecordFamily::kJobGraphs, id.toHex()).has_value());

  auto removed = removeCorrupt(loop_, gateway_, epoch_, id);
  ASSERT_FALSE(removed.hasFailure()) << removed.getFailure().getMessage().cStr();
  EXPECT_FALSE(storedProgress(id));
  EXPECT_FALSE(backend_.raw(store::RecordFamily::kJobGraphs, id.toHex()).has_value());
}

TEST_F(DispatcherTest, AReconcilingJobIsListedAndCountedReconciling) {
  FakeJobRunner runner(backend_);
  startTerm(1000, nullptr, {}, &runner);
  recover();
  const JobId id = JobId::random();
  ASSERT_FALSE(submit(*jobGraph(id, "adopting")).hasFailure());
  runner.listener->jobStateChanged(id, wire::JobState::RECONCILING, 42);
  EXPECT_EQ(listedNames(), std::vector<std::string>{"adopting:reconciling"});
  EXPECT_EQ(dispatcher_->counts().of(wire::JobState::RECONCILING), 1u);
  EXPECT_EQ(dispatcher_->counts().of(wire::JobState::CREATED), 0u);
  EXPECT_EQ(dispatcher_->counts().active, 1u);
}

TEST_F(DispatcherTest, AProgressRecordThatDoesNotFitItsJobGraphIsIgnoredAndTheJobStartsWithout) {
  startTerm();
  recover();
  // Each job has one vertex of parallelism 2: subtasks 0 and 1.
  const JobId beyond = JobId::random();
  const JobId repeated = JobId::random();
  const JobId noAttempt = JobId::random();
  const JobId unknownState = JobId::random();
  for (const JobId& id : {beyond, repeated, noAttempt, unknownState}) {
    ASSERT_FALSE(submit(*jobGraph(id, "misfit")).hasFailure());
  }
  auto put = [&](const JobId& id, const std::function<void(wire::JobProgress::Builder)>& change) {
    auto record = progressRecord(id, 2, 1);
    change(record->getRoot<wire::JobProgress>());
    ASSERT_TRUE(
        loop_.run(stores_->jobProgress().put(record->getRoot<wire::JobProgress>())).ok());
  };
  put(beyond, [](wire::JobProgress::Builder p) { p.getSubtasks()[1].setSubtask(2); });
  put(repeated, [](wire::JobProgress::Builder p) { p.getSubtasks()[1].setSubtask(0); });
  put(noAttempt, [](wire::JobProgress::Builder p) {
    p.getSubtasks()[0].disownAttemptId();
  });
  put(unknownState, [](wire::JobProgress::Builder p) {
    p.getSubtasks()[1].setState(static_cast<wire::ExecutionState>(99));
  });

  FakeJobRunner runner(backend_);
  startTerm(1000, nullptr, {}, &runner);
  recover();
  ASSERT_EQ(runner.calls.size(), 4u);
  for (const std::string& call : runner.calls) {
    EXPECT_NE(call.find(" progress=none"), std::string::npos) << call;
  }
  drain();
  EXPECT_TRUE(storedProgress(beyond));  // Left for its JobMaster's first write to replace.
}

}  // namespace
}  // namespace regent::dispatcher

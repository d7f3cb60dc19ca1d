// The Dispatcher over real stores (RocksDB in a temporary directory), called through its fenced
// gateway as regentctl will: recovery, persist-before-accept, validation, idempotent submission,
// cancellation through dirty -> clean, and a dirty result found at recovery never re-run.
#include "services/dispatcher/dispatcher.h"

#include <gtest/gtest.h>
#include <kj/debug.h>

#include <memory>
#include <string>

#include "common/event_loop.h"
#include "conf/config.h"
#include "rpc/fenced_endpoint.h"
#include "services/dispatcher/job_graph_spec.h"
#include "tests/fixtures/temp_dir_test_util.h"

namespace regent::dispatcher {
namespace {

using wire::DispatcherGateway;

std::string jobYaml(const JobId& id, const std::string& name, int parallelism = 2) {
  return "job_id: " + id.toHex() + "\nname: " + name +
         "\nvertices:\n  - name: work\n    parallelism: " + std::to_string(parallelism) +
         "\n    command:\n      argv: [sleep, '1']\n";
}

kj::Own<capnp::MallocMessageBuilder> jobGraph(const JobId& id, const std::string& name,
                                              int parallelism = 2) {
  auto parsed = parseJobGraphSpec(jobYaml(id, name, parallelism), JobGraphSpecFormat::kYaml);
  KJ_REQUIRE(parsed.ok(), parsed.error().message);
  return kj::mv(parsed).value();
}

class DispatcherTest : public ::testing::Test {
 protected:
  ~DispatcherTest() noexcept override = default;

  void SetUp() override {
    ConfigSources sources;
    sources.set = {"ha.mode=standalone", "store.rocksdb.path=" + dir_.path() + "/store"};
    auto config = loadConfig(sources);
    ASSERT_TRUE(config.ok()) << config.error().message;
    auto services = store::StoreServices::create(loop_, config.value(), nullptr);
    ASSERT_TRUE(services.ok()) << services.error().message;
    services_ = std::move(services).value();
  }

  void TearDown() override {
    endTerm();
    loop_.run(services_->close());
  }

  // Starts the next term: its stores, a Dispatcher that recovered, and the fenced gateway.
  void startTerm() {
    endTerm();
    ++epoch_;
    auto stores = loop_.run(services_->openTerm(store::StoreTerm{epoch_, ""}));
    KJ_REQUIRE(stores.ok(), stores.error().message);
    stores_ = kj::mv(stores).value();
    auto dispatcher = kj::heap<Dispatcher>(epoch_, *stores_, JobGraphLimits{},
                                           [this] { return ++clockMs_; });
    dispatcher_ = dispatcher.get();
    term_ = std::make_unique<rpc::LeadershipTerm>(epoch_, counters_);
    gateway_ = term_->serve<DispatcherGateway>(kj::mv(dispatcher));
  }

  void recover() {
    auto recovered = loop_.run(dispatcher_->recover());
    ASSERT_TRUE(recovered.ok()) << recovered.error().message;
  }

  // As the master does: revoke the term (its running handlers are dropped), then close its stores.
  void endTerm() {
    gateway_ = nullptr;
    dispatcher_ = nullptr;
    term_ = nullptr;
    stores_ = nullptr;
  }

  capnp::Response<DispatcherGateway::SubmitJobResults> submit(
      capnp::MallocMessageBuilder& graph, uint64_t epoch = 0) {
    auto request = gateway_.submitJobRequest();
    request.setEpoch(epoch == 0 ? epoch_ : epoch);
    request.setJobGraph(graph.getRoot<wire::JobGraph>().asReader());
    return loop_.run(request.send());
  }

  capnp::Response<DispatcherGateway::CancelJobResults> cancel(const JobId& id) {
    auto request = gateway_.cancelJobRequest();
    request.setEpoch(epoch_);
    request.initJobId().setHi(id.hi());
    request.getJobId().setLo(id.lo());
    return loop_.run(request.send());
  }

  capnp::Response<DispatcherGateway::JobStatusResults> status(const JobId& id) {
    auto request = gateway_.jobStatusRequest();
    request.setEpoch(epoch_);
    request.initJobId().setHi(id.hi());
    request.getJobId().setLo(id.lo());
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

  size_t storedGraphs() {
    auto ids = loop_.run(stores_->jobGraphs().listIds());
    KJ_REQUIRE(ids.ok());
    return ids.value().ids.size();
  }

  EventLoop loop_;
  testing::TempDir dir_{"regent-dispatcher"};
  std::unique_ptr<store::StoreServices> services_;
  uint64_t epoch_ = 0;
  int64_t clockMs_ = 1700000000000;
  rpc::FencingCounters counters_;
  kj::Own<store::LeaderStores> stores_;
  std::unique_ptr<rpc::LeadershipTerm> term_;
  Dispatcher* dispatcher_ = nullptr;
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
  EXPECT_EQ(JobId(response.getJobId().getHi(), response.getJobId().getLo()), id);
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
  capnp::MallocMessageBuilder message;
  auto result = message.initRoot<wire::JobResult>();
  result.initJobId().setHi(id.hi());
  result.getJobId().setLo(id.lo());
  result.setJobName("ended-while-failing-over");
  result.setState(wire::JobState::FINISHED);
  result.setEndedAtMs(5);
  ASSERT_TRUE(loop_.run(stores_->jobResults().createDirty(result.asReader())).ok());

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
  auto pending = request.send();
  // Runs until only I/O is left: the handler started and waits for the store's thread pool.
  loop_.run(kj::evalLast([] {}));

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
  startTerm();
  recover();
  const auto names = listedNames();
  EXPECT_TRUE(names.empty() || names == std::vector<std::string>{"cut-off:created"});
  EXPECT_EQ(storedGraphs(), names.size());
}

}  // namespace
}  // namespace regent::dispatcher

// The JobMasters through each JobMaster's gateway (behind the fenced endpoint, as the term serves
// it), with fake workers' TaskExecutorGateways that record submitTask / cancelTask / freeSlot /
// heartbeat, a fake ResourceManager (JobMasterPort), a fake Dispatcher (JobRunnerListener) and a
// kj::TimerImpl advanced by hand.
#include "services/jobmaster/job_masters.h"

#include <capnp/message.h>
#include <gtest/gtest.h>
#include <kj/debug.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "common/event_line.h"
#include "common/event_loop.h"
#include "common/log_event_sink.h"
#include "rpc/fenced_endpoint.h"
#include "rpc/wire_ids.h"
#include "services/jobmaster/execution_graph.h"
#include "tests/common/logging_test_util.h"
#include "tests/services/jobmaster/fake_job_master_port_test_util.h"
#include "tests/services/jobmaster/job_graph_builder_test_util.h"
#include "tests/store/fake_stores_test_util.h"
#include "tests/store/progress_test_util.h"

namespace regent::jobmaster {
namespace {

using testing::FakeJobMasterPort;
using testing::JobGraphBuilder;
using testing::kGiB;
using wire::ExecutionState;
using wire::JobMasterGateway;
using wire::TaskExecutorGateway;

constexpr uint64_t kEpoch = 9;
// jobmaster.finished-put-delay in these tests: a put that only stores FINISHED states waits this
// long for more.
constexpr Duration kFinishedPutDelay{100};

std::vector<AllocationId> sorted(std::vector<AllocationId> allocations) {
  std::sort(allocations.begin(), allocations.end());
  return allocations;
}

// What a fake worker was called with, and how it answers.
struct FakeWorker {
  enum class Mode { kAnswers, kRefuses, kUnavailable, kSilent, kDisconnected };
  Mode submitMode = Mode::kAnswers;

  struct Submitted {
    AttemptId attempt;
    AllocationId allocation;
    std::string vertex;
    uint32_t subtask;
    uint32_t attemptNumber;
    std::string argv0;
  };
  std::vector<Submitted> submitted;
  std::vector<AttemptId> cancelled;
  std::vector<AllocationId> freed;
  size_t heartbeats = 0;
  std::vector<std::string> disconnects;  // Causes.
};

class FakeTaskExecutor final : public TaskExecutorGateway::Server {
 public:
  explicit FakeTaskExecutor(FakeWorker& state) : state_(state) {}

  kj::Promise<void> submitTask(SubmitTaskContext context) override {
    EXPECT_EQ(context.getParams().getEpoch(), kEpoch);
    auto deployment = context.getParams().getDeployment();
    state_.submitted.push_back(FakeWorker::Submitted{
        wire::idFromWire<AttemptId>(deployment.getAttemptId()),
        wire::idFromWire<AllocationId>(deployment.getAllocationId()),
        deployment.getVertexName().cStr(), deployment.getSubtaskIndex(),
        deployment.getAttemptNumber(), deployment.getCommand().getArgv()[0].cStr()});
    switch (state_.submitMode) {
      case FakeWorker::Mode::kAnswers:
        return kj::READY_NOW;
      case FakeWorker::Mode::kRefuses: {
        auto failure = context.getResults().initFailure();
        failure.setMessage("allocation not held for this job");
        failure.initNotFound();
        return kj::READY_NOW;
      }
      case FakeWorker::Mode::kUnavailable: {
        auto failure = context.getResults().initFailure();
        failure.setMessage("worker cannot run tasks: attempts directory is not a directory");
        failure.initUnavailable();
        return kj::READY_NOW;
      }
      case FakeWorker::Mode::kSilent:
        return kj::NEVER_DONE;
      case FakeWorker::Mode::kDisconnected:
        return KJ_EXCEPTION(DISCONNECTED, "the worker's connection is gone");
    }
    return kj::READY_NOW;
  }
  kj::Promise<void> cancelTask(CancelTaskContext context) override {
    state_.cancelled.push_back(wire::idFromWire<AttemptId>(context.getParams().getAttemptId()));
    return kj::READY_NOW;
  }
  kj::Promise<void> freeSlot(FreeSlotContext context) override {
    state_.freed.push_back(wire::idFromWire<AllocationId>(context.getParams().getAllocationId()));
    return kj::READY_NOW;
  }
  kj::Promise<void> heartbeat(HeartbeatContext context) override {
    EXPECT_TRUE(context.getParams().getSender().isJobMaster());
    ++state_.heartbeats;
    return kj::READY_NOW;
  }
  kj::Promise<void> disconnect(DisconnectContext context) override {
    EXPECT_TRUE(context.getParams().getSender().isJobMaster());
    state_.disconnects.push_back(context.getParams().getCause().cStr());
    return kj::READY_NOW;
  }

 private:
  FakeWorker& state_;
};

// The Dispatcher's side: what the runner told it.
struct FakeListener final : public dispatcher::JobRunnerListener {
  void jobStateChanged(JobId job, wire::JobState state, int64_t) override {
    states.emplace_back(job, state);
  }
  void jobEnded(JobId job, const dispatcher::JobEnd& end) override { ended.emplace_back(job, end); }
  std::vector<std::pair<JobId, wire::JobState>> states;
  std::vector<std::pair<JobId, dispatcher::JobEnd>> ended;
};

class JobMastersTest : public DefaultLoggerTest {
 protected:
  JobMastersTest() {
    port_.workers[workerA_] = resourcemanager::WorkerAddress{"host-a", "host-a:8082"};
    port_.workers[workerB_] = resourcemanager::WorkerAddress{"host-b", "host-b:8082"};
    makeMasters(kFinishedPutDelay);
  }
  // The term's JobMasters, anew, with jobmaster.finished-put-delay `finishedPutDelay` and
  // jobmaster.first-deploy-wait `firstDeployWait` (0 in most tests: they offer a job's slots
  // one call at a time and expect each to deploy at once).
  void makeMasters(Duration finishedPutDelay, Duration firstDeployWait = Duration(0)) {
    JobMasterOptions options;
    options.heartbeatInterval = Duration(2000);
    options.heartbeatTimeout = Duration(10000);
    options.callTimeout = Duration(1000);
    options.finishedPutDelay = finishedPutDelay;
    options.firstDeployWait = firstDeployWait;
    options.nowMs = [this] { return nowMs_; };
    masters_ = nullptr;
    masters_ = std::make_unique<JobMasters>(
        timer_, events_, kEpoch, port_, stores_->jobProgress(),
        [this](kj::Own<JobMasterGateway::Server> server) {
          return rpc::fencedEndpoint<JobMasterGateway>(kj::mv(server), kEpoch, fencing_);
        },
        counters_, options);
    masters_->setListener(listener_);
  }
  ~JobMastersTest() noexcept override {
    gateways_.clear();
    masters_ = nullptr;
  }

  void settle() { loop_.waitScope().poll(); }
  void advance(Duration by) {
    nowMs_ += by.count();
    timer_.advanceTo(timer_.now() + by.count() * kj::MILLISECONDS);
    settle();
  }

  JobId start(JobGraphBuilder& builder) {
    masters_->start(builder.job(), builder.graph(), nullptr);
    settle();
    return builder.job();
  }

  // The worker identity of a connection `worker` registered (a fresh registration id each
  // time: MasterBootstrap makes one per connection, registerTaskExecutor binds it).
  kj::Own<resourcemanager::WorkerBinding> registeredAs(const ResourceId& worker) {
    auto binding = kj::refcounted<resourcemanager::WorkerBinding>("test " + worker.toHex());
    binding->bind({worker, RegistrationId::random()});
    return binding;
  }
  // The gateway of `job` on `worker`'s own connection, obtained once (as a worker does) and
  // kept: what it keeps calling, also after the JobMaster was released (masters_->gateway()
  // then answers nullptr).
  JobMasterGateway::Client gateway(const JobId& job, const ResourceId& worker) {
    const auto key = std::make_pair(job, worker);
    auto found = gateways_.find(key);
    if (found != gateways_.end()) return found->second;
    auto client = KJ_REQUIRE_NONNULL(masters_->gateway(job, registeredAs(worker)),
                                     "no JobMaster runs the job");
    gateways_.emplace(key, client);
    return client;
  }

  struct RunningAttempt {
    AttemptId attempt;
    std::string vertex;
    uint32_t subtask = 0;
    ExecutionState state = ExecutionState::RUNNING;
    uint32_t pid = 4242;
    std::string failureMessage;
  };
  // Offers `count` one-cpu slots of `worker`; returns the accepted allocations.
  std::vector<AllocationId> offer(const JobId& job, const ResourceId& worker, FakeWorker& fake,
                                  uint32_t count, std::vector<RunningAttempt> running = {}) {
    auto response = offerCall(job, worker, fake, count, running);
    KJ_REQUIRE(!response.hasFailure(), response.getFailure().getMessage().cStr());
    std::vector<AllocationId> accepted;
    for (auto id : response.getAccepted()) accepted.push_back(wire::idFromWire<AllocationId>(id));
    settle();
    return accepted;
  }
  capnp::Response<JobMasterGateway::OfferSlotsResults> offerCall(
      const JobId& job, const ResourceId& worker, FakeWorker& fake, uint32_t count,
      const std::vector<RunningAttempt>& running = {}) {
    auto request = gateway(job, worker).offerSlotsRequest();
    request.setEpoch(kEpoch);
    wire::setWireId(request.initResourceId(), worker);
    request.setTaskExecutor(kj::heap<FakeTaskExecutor>(fake));
    auto slots = request.initSlots(count);
    for (uint32_t i = 0; i < count; ++i) {
      const AllocationId allocation =
          i < nextAllocations_.size() ? nextAllocations_[i] : AllocationId::random();
      offered_.allocations[allocation] = worker;
      wire::setWireId(slots[i].initAllocationId(), allocation);
      slots[i].setSlotIndex(i);
      slots[i].initProfile().setCpuMillis(1000);
      slots[i].getProfile().setMemoryBytes(kGiB);
      // Attempt r runs in slot r (the last slot takes the rest).
      std::vector<const RunningAttempt*> inSlot;
      for (size_t r = 0; r < running.size(); ++r) {
        if (std::min<size_t>(r, count - 1) == i) inSlot.push_back(&running[r]);
      }
      if (!inSlot.empty()) {
        auto attempts = slots[i].initRunningAttempts(static_cast<unsigned>(inSlot.size()));
        for (unsigned r = 0; r < inSlot.size(); ++r) {
          wire::setWireId(attempts[r].initAttemptId(), inSlot[r]->attempt);
          offered_.attempts[inSlot[r]->attempt] = worker;
          wire::setWireId(attempts[r].initJobId(), job);
          attempts[r].setVertexName(inSlot[r]->vertex);
          attempts[r].setSubtaskIndex(inSlot[r]->subtask);
          attempts[r].setState(inSlot[r]->state);
          attempts[r].setPid(inSlot[r]->pid);
          attempts[r].setFailureMessage(inSlot[r]->failureMessage);
        }
      }
    }
    nextAllocations_.clear();
    return loop_.run(request.send());
  }

  // `worker` says it leaves (JobMasterGateway.disconnect with `cause`), accepted.
  void disconnect(const JobId& job, const ResourceId& worker, const std::string& cause) {
    auto request = gateway(job, worker).disconnectRequest();
    request.setEpoch(kEpoch);
    wire::setWireId(request.initResourceId(), worker);
    request.setCause(cause);
    EXPECT_FALSE(loop_.run(request.send()).hasFailure());
    settle();
  }

  capnp::Response<JobMasterGateway::UpdateTaskExecutionStateResults> update(
      const JobId& job, const FakeWorker::Submitted& attempt, ExecutionState state,
      int32_t exitCode = 0, const std::string& message = "") {
    auto response = loop_.run(updateRequest(job, attempt, state, exitCode, message).send());
    settle();
    return response;
  }
  capnp::Request<JobMasterGateway::UpdateTaskExecutionStateParams,
                 JobMasterGateway::UpdateTaskExecutionStateResults>
  updateRequest(const JobId& job, const FakeWorker::Submitted& attempt, ExecutionState state,
                int32_t exitCode = 0, const std::string& message = "") {
    // From the worker that offered the attempt's slot, or the attempt running in a slot
    // (workerA_ for one no test offered).
    ResourceId from = workerA_;
    if (auto found = offered_.allocations.find(attempt.allocation);
        found != offered_.allocations.end()) {
      from = found->second;
    } else if (auto running = offered_.attempts.find(attempt.attempt);
               running != offered_.attempts.end()) {
      from = running->second;
    }
    auto request = gateway(job, from).updateTaskExecutionStateRequest();
    request.setEpoch(kEpoch);
    auto out = request.initState();
    wire::setWireId(out.initAttemptId(), attempt.attempt);
    wire::setWireId(out.initJobId(), job);
    wire::setWireId(out.initAllocationId(), attempt.allocation);
    out.setVertexName(attempt.vertex);
    out.setSubtaskIndex(attempt.subtask);
    out.setAttemptNumber(attempt.attemptNumber);
    out.setState(state);
    out.setPid(777);
    out.setExitCode(exitCode);
    out.setFailureMessage(message);
    return request;
  }

  // The set-up most tests share: `builder`'s job started in this term, and `offered` one-cpu
  // slots of worker A offered to it, A's TaskExecutorGateway answering submitTask as `mode`
  // says. The JobMaster must accept `accepted` of them; the test stops otherwise. The fake
  // worker lives as long as the fixture: `auto [job, worker] = startOnWorkerA(builder, 2, 2);`.
  struct StartedJob {
    JobId job;
    FakeWorker& worker;
  };
  StartedJob startOnWorkerA(JobGraphBuilder& builder, uint32_t offered, uint32_t accepted,
                            FakeWorker::Mode mode = FakeWorker::Mode::kAnswers) {
    const JobId job = start(builder);
    FakeWorker& worker = fakeWorkers_.emplace_back();
    worker.submitMode = mode;
    const size_t taken = offer(job, workerA_, worker, offered).size();
    EXPECT_EQ(taken, accepted) << "slots the JobMaster accepted of the " << offered << " offered";
    KJ_REQUIRE(taken == accepted, "the set-up failed: the test stops here");
    return StartedJob{job, worker};
  }

  // Starts `builder`'s job as a new leader does after a failover, from a progress record with
  // `entries` (global subtask index, attempt, attempt number, state).
  JobId startRecovered(JobGraphBuilder& builder,
                       const std::vector<regent::testing::ProgressEntry>& entries,
                       uint32_t restarts = 0) {
    auto message = regent::testing::progressRecord(builder.job(), entries, restarts, kEpoch - 1);
    auto progress = message->getRoot<wire::JobProgress>();
    progress.setStartedAtMs(nowMs_ - 60'000);
    masters_->start(builder.job(), builder.graph(), progress.asReader());
    settle();
    return builder.job();
  }
  // The one `job reconciled` line logged so far says these counts.
  void expectReconciled(uint64_t adopted, uint64_t ended, uint64_t unreported, bool timedOut) {
    const auto reconciled = capturedEvents("job reconciled");
    ASSERT_EQ(reconciled.size(), 1u) << capturedLog();
    EXPECT_EQ(reconciled[0].getUint("adopted"), adopted);
    EXPECT_EQ(reconciled[0].getUint("ended"), ended);
    EXPECT_EQ(reconciled[0].getUint("unreported"), unreported);
    EXPECT_EQ(reconciled[0].get("timed_out"), timedOut ? "true" : "false");
  }
  // The stored progress record of `job` (the only one the tests' store holds).
  store::JobProgressMessage storedProgress(const JobId& job) {
    auto recovered = loop_.run(stores_->jobProgress().recoverAll());
    KJ_REQUIRE(recovered.ok(), recovered.error().message);
    for (auto& record : recovered.value().records) {
      if (wire::idFromWire<JobId>(record.get().getJobId()) == job) {
        return kj::mv(record);
      }
    }
    KJ_FAIL_REQUIRE("no progress record stored for the job");
  }
  wire::JobState stateOf(const JobId& job) {
    capnp::MallocMessageBuilder message;
    auto status = message.initRoot<wire::JobStatus>();
    KJ_REQUIRE(masters_->describe(job, status));
    return status.getState();
  }
  void expectApplied(const JobId& job, const FakeWorker::Submitted& attempt, ExecutionState state,
                     int32_t exitCode = 0, const std::string& message = "") {
    auto response = update(job, attempt, state, exitCode, message);
    EXPECT_FALSE(response.hasFailure()) << response.getFailure().getMessage().cStr();
  }

  // The update that ends the job FINISHED: answered at once, as every FINISHED is (its worker
  // keeps it with its slot); no put holds it, the Dispatcher's result does
  // (services/jobmaster/progress_log.h), and the job's slots are freed by its release, which the
  // Dispatcher does after it stored that result. Sends it, checks the answer, that the job ended
  // and that no put followed, and releases the job as the Dispatcher would.
  void expectAppliedEndingTheJob(const JobId& job, const FakeWorker::Submitted& attempt) {
    const size_t before = backend_.transactions;
    auto response = update(job, attempt, ExecutionState::FINISHED);
    EXPECT_FALSE(response.hasFailure()) << response.getFailure().getMessage().cStr();
    ASSERT_FALSE(listener_.ended.empty());
    EXPECT_EQ(listener_.ended.back().first, job);
    advance(kFinishedPutDelay);
    EXPECT_EQ(backend_.transactions, before) << "the end of a FINISHED job was put";
    auto released = masters_->release(job, "job ended");
    settle();
    loop_.run(kj::mv(released));
  }

  // A heartbeat of `worker` listing `attempts` (those it runs, or whose end it still delivers).
  void workerHeartbeat(const JobId& job, const ResourceId& worker,
                       const std::vector<AttemptId>& attempts = {}) {
    auto request = gateway(job, worker).heartbeatRequest();
    request.setEpoch(kEpoch);
    wire::setWireId(request.initResourceId(), worker);
    auto listed = request.initPayload().initDeployedAttempts(static_cast<unsigned>(attempts.size()));
    for (unsigned i = 0; i < attempts.size(); ++i) wire::setWireId(listed[i], attempts[i]);
    auto response = loop_.run(request.send());
    EXPECT_FALSE(response.hasFailure()) << response.getFailure().getMessage().cStr();
    settle();
  }

  EventLoop loop_;
  kj::TimerImpl timer_{kj::origin<kj::TimePoint>()};
  LogEventSink events_;  // The event lines the tests read from the captured log.
  int64_t nowMs_ = 1'700'000'000'000;
  rpc::FencingCounters fencing_;
  FakeJobMasterPort port_;
  // Which worker offered each allocation, and each attempt running in an offered slot (their
  // updates come from that worker).
  struct OfferedBy {
    std::map<AllocationId, ResourceId> allocations;
    std::map<AttemptId, ResourceId> attempts;
  };
  OfferedBy offered_;
  // The allocation ids the next offer gives its slots (in order; random past the end).
  std::vector<AllocationId> nextAllocations_;
  std::map<std::pair<JobId, ResourceId>, JobMasterGateway::Client> gateways_;
  store::testing::FakeStoreBackend backend_;
  kj::Own<store::LeaderStores> stores_ = backend_.openTerm();
  JobMasterCounters counters_;
  FakeListener listener_;
  std::unique_ptr<JobMasters> masters_;
  std::deque<FakeWorker> fakeWorkers_;  // startOnWorkerA's; the JobMasters go first.
  const ResourceId workerA_ = ResourceId::random();
  const ResourceId workerB_ = ResourceId::random();
};

TEST_F(JobMastersTest, RunsADagToFinishedAndReleasesIt) {
  // Submitted in this term: the JobMasters were created at nowMs_.
  JobGraphBuilder builder({{"a", 2}, {"b", 1, {"a"}}}, JobId::random(), nowMs_);
  const JobId job = start(builder);
  ASSERT_EQ(port_.registered, std::vector<JobId>{job});
  EXPECT_EQ(port_.latest(job), (std::vector<std::pair<uint32_t, uint32_t>>{{1000, 2}}));
  EXPECT_TRUE(listener_.states.empty());  // CREATED until an attempt runs.

  FakeWorker worker;
  ASSERT_EQ(offer(job, workerA_, worker, 3).size(), 2u);
  ASSERT_EQ(worker.submitted.size(), 2u);
  EXPECT_EQ(worker.submitted[0].vertex, "a");
  EXPECT_EQ(worker.submitted[0].argv0, "/bin/echo");
  EXPECT_EQ(counters_.attemptsStarted, 2u);

  EXPECT_TRUE(listener_.states.empty());
  advance(Duration(30));
  expectApplied(job, worker.submitted[0], ExecutionState::RUNNING);
  ASSERT_EQ(listener_.states.size(), 1u);
  EXPECT_EQ(listener_.states[0].second, wire::JobState::RUNNING);
  EXPECT_EQ(counters_.submitToRunningCount, 1u);
  EXPECT_NEAR(counters_.submitToRunningSum, 0.03, 1e-9);
  EXPECT_EQ(counters_.submitToRunningBuckets[2], 0u);   // 0.02s < 0.03s
  EXPECT_EQ(counters_.submitToRunningBuckets[3], 1u);   // 0.03s <= 0.05s
  EXPECT_EQ(counters_.submitToRunningBuckets[11], 1u);  // Cumulative.
  expectApplied(job, worker.submitted[1], ExecutionState::RUNNING);
  EXPECT_EQ(counters_.submitToRunningCount, 1u);  // Once per job.
  expectApplied(job, worker.submitted[0], ExecutionState::FINISHED);
  EXPECT_TRUE(worker.freed.empty());  // Until a put holds the end: a lazy one.
  advance(kFinishedPutDelay);
  EXPECT_EQ(worker.freed.size(), 1u);  // a[0]'s slot: b is not runnable yet.
  expectApplied(job, worker.submitted[1], ExecutionState::FINISHED);
  ASSERT_EQ(worker.submitted.size(), 3u);
  EXPECT_EQ(worker.submitted[2].vertex, "b");
  EXPECT_EQ(worker.submitted[2].allocation, worker.submitted[1].allocation);
  EXPECT_TRUE(listener_.ended.empty());
  expectApplied(job, worker.submitted[2], ExecutionState::RUNNING);
  const size_t putsBefore = backend_.transactions;
  auto last = updateRequest(job, worker.submitted[2], ExecutionState::FINISHED).send();
  settle();
  ASSERT_EQ(listener_.ended.size(), 1u);
  EXPECT_EQ(listener_.ended[0].second.state, wire::JobState::FINISHED);
  // The end is stored by the job's result, not a put: the last update is answered at once (its
  // worker keeps it with the slot), and its slot freed once the Dispatcher stored that result and
  // released the job.
  ASSERT_TRUE(last.poll(loop_.waitScope()));
  auto answered = last.wait(loop_.waitScope());
  EXPECT_FALSE(answered.hasFailure()) << answered.getFailure().getMessage().cStr();
  advance(kFinishedPutDelay);
  EXPECT_EQ(backend_.transactions, putsBefore);
  EXPECT_EQ(worker.freed.size(), 1u);
  EXPECT_TRUE(port_.latest(job).empty());      // Needs nothing any more.
  EXPECT_NE(masters_->gateway(job, registeredAs(workerA_)), nullptr);  // Until released.

  auto released = masters_->release(job, "job finished");
  settle();
  ASSERT_TRUE(released.poll(loop_.waitScope()));
  released.wait(loop_.waitScope());
  EXPECT_TRUE(worker.cancelled.empty());
  EXPECT_EQ(worker.freed.size(), 2u);
  EXPECT_EQ(worker.freed[1], worker.submitted[2].allocation);
  ASSERT_EQ(port_.disconnected.size(), 1u);
  EXPECT_EQ(port_.disconnected[0].second, "job finished");
  EXPECT_EQ(masters_->size(), 0u);
  EXPECT_EQ(masters_->gateway(job, registeredAs(workerA_)), nullptr);
  capnp::MallocMessageBuilder message;
  EXPECT_FALSE(masters_->describe(job, message.initRoot<wire::JobStatus>()));
}

TEST_F(JobMastersTest, ARefusedDeclarationIsMadeAgainAfterAHeartbeatInterval) {
  port_.refuseDeclarations = 1;
  JobGraphBuilder builder({{"a", 2}}, JobId::random(), nowMs_);
  const JobId job = start(builder);
  ASSERT_EQ(port_.declarations[job].size(), 1u);  // Refused: the ResourceManager holds nothing.
  advance(Duration(2000));
  ASSERT_EQ(port_.declarations[job].size(), 2u);  // The same needs, declared again.
  EXPECT_EQ(port_.latest(job), (std::vector<std::pair<uint32_t, uint32_t>>{{1000, 2}}));
  advance(Duration(2000));
  EXPECT_EQ(port_.declarations[job].size(), 2u);  // Accepted: not repeated.
}

TEST_F(JobMastersTest, AJobRecoveredFromAnEarlierTermIsNotObservedInTheSubmitToRunningHistogram) {
  JobGraphBuilder builder({{"a", 1}}, JobId::random(), nowMs_ - 3'600'000);
  auto [job, worker] = startOnWorkerA(builder, 1, 1);
  ASSERT_EQ(worker.submitted.size(), 1u);
  expectApplied(job, worker.submitted[0], ExecutionState::RUNNING);
  EXPECT_EQ(counters_.submitToRunningCount, 0u);
}

TEST_F(JobMastersTest, AServedGatewayAnswersDisconnectedAfterRelease) {
  JobGraphBuilder builder({{"a", 1}});
  const JobId job = start(builder);
  auto client = gateway(job, workerA_);
  auto released = masters_->release(job, "cancelled");
  released.wait(loop_.waitScope());
  auto request = client.heartbeatRequest();
  request.setEpoch(kEpoch);
  wire::setWireId(request.initResourceId(), workerA_);
  request.initPayload();
  try {
    loop_.run(request.send());
    ADD_FAILURE() << "a released JobMaster answered";
  } catch (const kj::Exception& exception) {
    EXPECT_EQ(exception.getType(), kj::Exception::Type::DISCONNECTED);
  }
}

TEST_F(JobMastersTest, OffersOfAnUnregisteredWorkerAreRefused) {
  JobGraphBuilder builder({{"a", 1}});
  const JobId job = start(builder);
  FakeWorker worker;
  auto response = offerCall(job, ResourceId::random(), worker, 1);
  ASSERT_TRUE(response.hasFailure());
  EXPECT_TRUE(response.getFailure().isNotRegistered());
  EXPECT_TRUE(worker.submitted.empty());
}

TEST_F(JobMastersTest, AnUnknownAttemptIsNotFound) {
  JobGraphBuilder builder({{"a", 1}});
  const JobId job = start(builder);
  FakeWorker::Submitted stranger{AttemptId::random(), AllocationId::random(), "a", 0, 0, ""};
  auto response = update(job, stranger, ExecutionState::RUNNING);
  ASSERT_TRUE(response.hasFailure());
  EXPECT_TRUE(response.getFailure().isNotFound());
}

TEST_F(JobMastersTest, ARefusedSubmitFailsTheAttemptAndTheStrategyRestartsIt) {
  JobGraphBuilder builder({{"a", 1}});
  builder.fixedDelay(2, 500);
  auto [job, worker] = startOnWorkerA(builder, 1, 1, FakeWorker::Mode::kRefuses);
  settle();
  ASSERT_EQ(worker.submitted.size(), 1u);
  EXPECT_EQ(counters_.attemptsFailed, 1u);
  EXPECT_EQ(counters_.attemptsStarted, 0u);
  EXPECT_EQ(listener_.states.back().second, wire::JobState::RESTARTING);
  capnp::MallocMessageBuilder message;
  auto status = message.initRoot<wire::JobStatus>();
  ASSERT_TRUE(masters_->describe(job, status));
  const std::string lastFailure = status.getVertices()[0].getSubtasks()[0].getLastFailure().cStr();
  EXPECT_NE(lastFailure.find("refused submitTask"), std::string::npos) << lastFailure;
  EXPECT_NE(lastFailure.find("allocation not held"), std::string::npos) << lastFailure;

  worker.submitMode = FakeWorker::Mode::kAnswers;
  advance(Duration(499));
  EXPECT_EQ(worker.submitted.size(), 1u);
  advance(Duration(1));
  ASSERT_EQ(worker.submitted.size(), 2u);
  EXPECT_EQ(worker.submitted[1].attemptNumber, 1u);
  EXPECT_EQ(worker.submitted[1].allocation, worker.submitted[0].allocation);
  EXPECT_EQ(counters_.attemptsStarted, 1u);
  EXPECT_EQ(counters_.attemptsRestarted, 1u);
  EXPECT_EQ(listener_.states.back().second, wire::JobState::RUNNING);
}

TEST_F(JobMastersTest, AWorkerFaultHandsTheSlotBackAndRunsTheSubtaskAgainWithoutARestart) {
  JobGraphBuilder builder({{"a", 1}});  // No restart strategy.
  auto [job, faulty] = startOnWorkerA(builder, 1, 1);
  settle();
  ASSERT_EQ(faulty.submitted.size(), 1u);
  auto request = updateRequest(job, faulty.submitted[0], ExecutionState::FAILED, 0,
                               "spawn failed: Too many open files");
  request.getState().setWorkerFault(true);
  auto response = loop_.run(request.send());
  EXPECT_FALSE(response.hasFailure());
  settle();
  EXPECT_NE(listener_.states.back().second, wire::JobState::FAILED);
  ASSERT_EQ(port_.faulted.size(), 1u);
  EXPECT_EQ(port_.faulted[0].job, job);
  EXPECT_EQ(port_.faulted[0].worker, workerA_);
  EXPECT_EQ(port_.faulted[0].allocation, faulty.submitted[0].allocation);

  // The ResourceManager found a slot on B: the subtask runs there after the short delay.
  FakeWorker healthy;
  ASSERT_EQ(offer(job, workerB_, healthy, 1).size(), 1u);
  advance(kWorkerFaultDelay);
  ASSERT_EQ(healthy.submitted.size(), 1u);
  EXPECT_EQ(healthy.submitted[0].attemptNumber, 1u);
  update(job, healthy.submitted[0], ExecutionState::RUNNING);
  expectAppliedEndingTheJob(job, healthy.submitted[0]);
  ASSERT_EQ(listener_.ended.size(), 1u);
  EXPECT_EQ(listener_.ended[0].second.state, wire::JobState::FINISHED);
  EXPECT_EQ(listener_.ended[0].second.restarts, 0u);
}

TEST_F(JobMastersTest, ASubmitTheWorkerCannotTakeIsAWorkerFault) {
  JobGraphBuilder builder({{"a", 1}});  // No restart strategy.
  auto [job, worker] = startOnWorkerA(builder, 1, 1, FakeWorker::Mode::kUnavailable);
  settle();
  ASSERT_EQ(worker.submitted.size(), 1u);
  EXPECT_NE(listener_.states.back().second, wire::JobState::FAILED);
  ASSERT_EQ(port_.faulted.size(), 1u);
  EXPECT_EQ(port_.faulted[0].allocation, worker.submitted[0].allocation);
  capnp::MallocMessageBuilder message;
  auto status = message.initRoot<wire::JobStatus>();
  ASSERT_TRUE(masters_->describe(job, status));
  const std::string lastFailure = status.getVertices()[0].getSubtasks()[0].getLastFailure().cStr();
  EXPECT_NE(lastFailure.find("cannot run tasks"), std::string::npos) << lastFailure;
}

TEST_F(JobMastersTest, ASubmitToAWorkerThatIsGoneTakesItsSlotsAwayAndTheRestartRunsElsewhere) {
  JobGraphBuilder builder({{"a", 1}});
  builder.fixedDelay(3, 100);
  auto [job, gone] = startOnWorkerA(builder, 1, 1, FakeWorker::Mode::kDisconnected);
  settle();
  ASSERT_EQ(gone.submitted.size(), 1u);
  EXPECT_EQ(counters_.attemptsFailed, 1u);
  capnp::MallocMessageBuilder message;
  auto status = message.initRoot<wire::JobStatus>();
  ASSERT_TRUE(masters_->describe(job, status));
  const std::string lastFailure = status.getVertices()[0].getSubtasks()[0].getLastFailure().cStr();
  EXPECT_NE(lastFailure.find("worker " + workerA_.toHex() + " lost"), std::string::npos)
      << lastFailure;
  // The unreachable worker's slot left the job: the restart is never deployed into it, and the
  // job declares the slot it needs again.
  advance(Duration(1000));
  EXPECT_EQ(gone.submitted.size(), 1u);
  EXPECT_EQ(port_.latest(job), (std::vector<std::pair<uint32_t, uint32_t>>{{1000, 1}}));
  FakeWorker other;
  ASSERT_EQ(offer(job, workerB_, other, 1).size(), 1u);
  ASSERT_EQ(other.submitted.size(), 1u);
  EXPECT_EQ(other.submitted[0].attemptNumber, 1u);
  EXPECT_TRUE(listener_.ended.empty());
}

TEST_F(JobMastersTest, RestartsAtDifferentTimesEachRunWhenTheirDelayEnds) {
  JobGraphBuilder builder({{"a", 2}});
  builder.fixedDelay(3, 1000);
  auto [job, worker] = startOnWorkerA(builder, 2, 2);
  ASSERT_EQ(worker.submitted.size(), 2u);
  expectApplied(job, worker.submitted[0], ExecutionState::FAILED, 1);
  advance(Duration(500));
  expectApplied(job, worker.submitted[1], ExecutionState::FAILED, 1);
  advance(Duration(499));
  EXPECT_EQ(worker.submitted.size(), 2u);
  advance(Duration(1));  // The first delay ends; the timer is armed again for the second.
  ASSERT_EQ(worker.submitted.size(), 3u);
  EXPECT_EQ(worker.submitted[2].subtask, worker.submitted[0].subtask);
  EXPECT_EQ(listener_.states.back().second, wire::JobState::RESTARTING);
  advance(Duration(499));
  EXPECT_EQ(worker.submitted.size(), 3u);
  advance(Duration(1));
  ASSERT_EQ(worker.submitted.size(), 4u);
  EXPECT_EQ(worker.submitted[3].subtask, worker.submitted[1].subtask);
  EXPECT_EQ(listener_.states.back().second, wire::JobState::RUNNING);
}

// A worker that does not answer submitTask within rpc.call-timeout (paused, overloaded) faults,
// not the task: a job without a restart strategy goes on, and the subtask runs elsewhere.
TEST_F(JobMastersTest, ASubmitThatTimesOutIsAWorkerFault) {
  JobGraphBuilder builder({{"a", 1}});  // No restart strategy.
  auto [job, silent] = startOnWorkerA(builder, 1, 1, FakeWorker::Mode::kSilent);
  ASSERT_EQ(silent.submitted.size(), 1u);
  advance(Duration(1000));  // rpc.call-timeout.
  EXPECT_TRUE(listener_.ended.empty());
  ASSERT_EQ(port_.faulted.size(), 1u);
  EXPECT_EQ(port_.faulted[0].allocation, silent.submitted[0].allocation);
  capnp::MallocMessageBuilder message;
  auto status = message.initRoot<wire::JobStatus>();
  ASSERT_TRUE(masters_->describe(job, status));
  const std::string lastFailure = status.getVertices()[0].getSubtasks()[0].getLastFailure().cStr();
  EXPECT_NE(lastFailure.find("timed out"), std::string::npos) << lastFailure;

  FakeWorker healthy;
  ASSERT_EQ(offer(job, workerB_, healthy, 1).size(), 1u);
  advance(kWorkerFaultDelay);
  ASSERT_EQ(healthy.submitted.size(), 1u);
  EXPECT_EQ(healthy.submitted[0].attemptNumber, 1u);
  update(job, healthy.submitted[0], ExecutionState::RUNNING);
  expectAppliedEndingTheJob(job, healthy.submitted[0]);
  ASSERT_EQ(listener_.ended.size(), 1u);
  EXPECT_EQ(listener_.ended[0].second.state, wire::JobState::FINISHED);
  EXPECT_EQ(listener_.ended[0].second.restarts, 0u);
}

TEST_F(JobMastersTest, GivingUpEndsTheJobFailedAndDeploysNothingMore) {
  JobGraphBuilder builder({{"a", 2}});
  builder.fixedDelay(1, 0);
  auto [job, worker] = startOnWorkerA(builder, 2, 2);
  ASSERT_EQ(worker.submitted.size(), 2u);
  expectApplied(job, worker.submitted[0], ExecutionState::FAILED, 1, "exited with code 1");
  advance(Duration(0));
  ASSERT_EQ(worker.submitted.size(), 3u);
  expectApplied(job, worker.submitted[2], ExecutionState::FAILED, 1, "exited with code 1");
  ASSERT_EQ(listener_.ended.size(), 1u);
  EXPECT_EQ(listener_.ended[0].second.state, wire::JobState::FAILED);
  EXPECT_EQ(listener_.ended[0].second.restarts, 1u);
  EXPECT_EQ(listener_.states.back().second, wire::JobState::FAILING);
  advance(Duration(5000));
  EXPECT_EQ(worker.submitted.size(), 3u);
  EXPECT_EQ(listener_.ended.size(), 1u);

  // release cancels the attempt still running and waits for its end.
  auto released = masters_->release(job, "job failed");
  settle();
  ASSERT_EQ(worker.cancelled, std::vector<AttemptId>{worker.submitted[1].attempt});
  EXPECT_FALSE(released.poll(loop_.waitScope()));
  EXPECT_TRUE(port_.disconnected.empty());
  expectApplied(job, worker.submitted[1], ExecutionState::CANCELED);
  ASSERT_TRUE(released.poll(loop_.waitScope()));
  released.wait(loop_.waitScope());
  EXPECT_EQ(worker.freed.size(), 2u);
  EXPECT_EQ(port_.disconnected.size(), 1u);
}

TEST_F(JobMastersTest, AttemptsEndingWhileARunningJobIsReleasedAreNotRestarted) {
  JobGraphBuilder builder({{"a", 2}});
  builder.fixedDelay(3, 0);
  auto [job, worker] = startOnWorkerA(builder, 2, 2);
  expectApplied(job, worker.submitted[0], ExecutionState::RUNNING);
  expectApplied(job, worker.submitted[1], ExecutionState::RUNNING);
  // The job is cancelled: the Dispatcher releases it while it runs.
  auto released = masters_->release(job, "cancelled by an operator");
  settle();
  ASSERT_EQ(worker.cancelled.size(), 2u);
  expectApplied(job, worker.submitted[0], ExecutionState::CANCELED);
  {
    capnp::MallocMessageBuilder message;
    auto status = message.initRoot<wire::JobStatus>();
    ASSERT_TRUE(masters_->describe(job, status));
    EXPECT_EQ(status.getRestarts(), 0u);
    EXPECT_NE(status.getState(), wire::JobState::RESTARTING);
    EXPECT_EQ(std::string(status.getVertices()[0].getSubtasks()[0].getWaitingReason().cStr()), "");
  }
  // A task killed by the cancel may also report FAILED (signal 15).
  expectApplied(job, worker.submitted[1], ExecutionState::FAILED, 0, "killed by signal 15");
  ASSERT_TRUE(released.poll(loop_.waitScope()));
  // It resolves with the job's final detail: the attempts in the states they ended in.
  auto finalDetail = released.wait(loop_.waitScope());
  ASSERT_GT(finalDetail.size(), 0u);
  auto last = capnp::readMessageUnchecked<wire::JobStatus>(finalDetail.begin());
  ASSERT_EQ(last.getVertices()[0].getSubtasks().size(), 2u);
  EXPECT_EQ(last.getVertices()[0].getSubtasks()[0].getAttempt().getState(),
            ExecutionState::CANCELED);
  EXPECT_EQ(last.getVertices()[0].getSubtasks()[1].getAttempt().getState(), ExecutionState::FAILED);
  advance(Duration(1000));
  EXPECT_EQ(worker.submitted.size(), 2u);
  EXPECT_EQ(counters_.attemptsRestarted, 0u);
  EXPECT_TRUE(listener_.ended.empty());  // A cancel's end is the Dispatcher's.
  for (const auto& [id, state] : listener_.states) EXPECT_EQ(state, wire::JobState::RUNNING);
}

TEST_F(JobMastersTest, ReleaseGoesOnWhenCancelledAttemptsDoNotEndInTime) {
  JobGraphBuilder builder({{"a", 1}});
  auto [job, worker] = startOnWorkerA(builder, 1, 1);
  expectApplied(job, worker.submitted[0], ExecutionState::RUNNING);
  auto released = masters_->release(job, "cancelled");
  settle();
  EXPECT_EQ(worker.cancelled.size(), 1u);
  // A second release() while the first runs changes nothing (and outlives nothing it uses).
  masters_->release(job, "again").wait(loop_.waitScope());
  EXPECT_EQ(worker.cancelled.size(), 1u);
  advance(Duration(9999));
  EXPECT_FALSE(released.poll(loop_.waitScope()));
  advance(Duration(1));
  ASSERT_TRUE(released.poll(loop_.waitScope()));
  released.wait(loop_.waitScope());
  EXPECT_EQ(worker.freed.size(), 1u);
  EXPECT_EQ(port_.disconnected.size(), 1u);
}

TEST_F(JobMastersTest, ASilentWorkersAttemptsFailAfterTheHeartbeatTimeout) {
  JobGraphBuilder builder({{"a", 1}});
  builder.fixedDelay(1, 0);
  auto [job, silent] = startOnWorkerA(builder, 1, 1);
  expectApplied(job, silent.submitted[0], ExecutionState::RUNNING);
  // Heartbeats go out every interval; answering them keeps the worker.
  for (int i = 0; i < 8; ++i) {
    advance(Duration(2000));
    workerHeartbeat(job, workerA_, {silent.submitted[0].attempt});
  }
  EXPECT_GE(silent.heartbeats, 8u);
  EXPECT_EQ(counters_.attemptsFailed, 0u);
  // Silent for more than heartbeat.timeout: its attempt fails and restarts elsewhere.
  advance(Duration(10000));
  EXPECT_EQ(counters_.attemptsFailed, 0u);
  advance(Duration(2000));
  EXPECT_EQ(counters_.attemptsFailed, 1u);
  capnp::MallocMessageBuilder message;
  auto status = message.initRoot<wire::JobStatus>();
  ASSERT_TRUE(masters_->describe(job, status));
  EXPECT_EQ(std::string(status.getVertices()[0].getSubtasks()[0].getLastFailure().cStr()),
            "worker " + workerA_.toHex() + " lost: no heartbeat for 10s");
  // It is told (a paused worker reads it when it wakes up, and frees the job's slots).
  EXPECT_EQ(silent.disconnects,
            std::vector<std::string>{"worker " + workerA_.toHex() + " lost: no heartbeat for 10s"});
  // The worker's heartbeats are refused now: it offers its slots again.
  auto request = gateway(job, workerA_).heartbeatRequest();
  request.setEpoch(kEpoch);
  wire::setWireId(request.initResourceId(), workerA_);
  request.initPayload();
  EXPECT_TRUE(loop_.run(request.send()).getFailure().isNotRegistered());

  FakeWorker other;
  ASSERT_EQ(offer(job, workerB_, other, 1).size(), 1u);
  ASSERT_EQ(other.submitted.size(), 1u);
  EXPECT_EQ(other.submitted[0].attemptNumber, 1u);
}

TEST_F(JobMastersTest, AWorkerRestartedOnItsDataDirectoryFailsItsAttemptsAtOnceAndTheyRestart) {
  JobGraphBuilder builder({{"a", 1}});
  builder.fixedDelay(1, 0);
  auto [job, killed] = startOnWorkerA(builder, 1, 1);
  expectApplied(job, killed.submitted[0], ExecutionState::RUNNING);
  ASSERT_NE(port_.listener, nullptr) << "the JobMasters listen to the ResourceManager";
  const std::string message = "worker " + workerA_.toHex() + " restarted (host host-a pid 2 " +
                              "replaces pid 1): its attempts ended with its previous process";
  // No heartbeat timeout passes: the new registration alone ends the attempt.
  port_.listener->workerRestarted(workerA_, message);
  settle();
  EXPECT_EQ(counters_.attemptsFailed, 1u);
  capnp::MallocMessageBuilder status;
  auto detail = status.initRoot<wire::JobStatus>();
  ASSERT_TRUE(masters_->describe(job, detail));
  EXPECT_EQ(std::string(detail.getVertices()[0].getSubtasks()[0].getLastFailure().cStr()), message);
  EXPECT_TRUE(killed.disconnects.empty()) << "the process it would tell is gone";
  // The new process's slot, allocated for the restart and offered, runs the next attempt.
  FakeWorker restarted;
  ASSERT_EQ(offer(job, workerA_, restarted, 1).size(), 1u);
  ASSERT_EQ(restarted.submitted.size(), 1u);
  EXPECT_EQ(restarted.submitted[0].attemptNumber, 1u);
  // A restart of a worker holding nothing of the job changes nothing.
  port_.listener->workerRestarted(workerB_, "worker B restarted");
  settle();
  EXPECT_EQ(counters_.attemptsFailed, 1u);
}

TEST_F(JobMastersTest, TheProgressRecordNamesTheWorkerAndSlotOfEachLiveAttempt) {
  JobGraphBuilder builder({{"a", 1}});
  auto [job, worker] = startOnWorkerA(builder, 1, 1);
  ASSERT_EQ(worker.submitted.size(), 1u);
  const auto record = storedProgress(job);
  const auto entry = record.get().getSubtasks()[0];
  EXPECT_EQ(wire::idFromWire<ResourceId>(entry.getResourceId()), workerA_);
  EXPECT_EQ(wire::idFromWire<AllocationId>(entry.getAllocationId()),
            worker.submitted[0].allocation);
}

TEST_F(JobMastersTest, AttemptsAWorkerHoldsThatTheJobMasterDoesNotKnowAreCancelled) {
  JobGraphBuilder builder({{"a", 1}});
  builder.fixedDelay(1, 0);
  auto [job, worker] = startOnWorkerA(builder, 1, 1, FakeWorker::Mode::kSilent);
  advance(Duration(1000));  // submitTask timed out: a worker fault; the slot left the job.
  worker.submitMode = FakeWorker::Mode::kAnswers;
  ASSERT_EQ(offer(job, workerA_, worker, 1).size(), 1u);  // Its next slot report.
  advance(kWorkerFaultDelay);
  ASSERT_EQ(worker.submitted.size(), 2u);
  // ... but the first one reached the worker, which lists both.
  auto request = gateway(job, workerA_).heartbeatRequest();
  request.setEpoch(kEpoch);
  wire::setWireId(request.initResourceId(), workerA_);
  auto listed = request.initPayload().initDeployedAttempts(2);
  wire::setWireId(listed[0], worker.submitted[0].attempt);
  wire::setWireId(listed[1], worker.submitted[1].attempt);
  EXPECT_FALSE(loop_.run(request.send()).hasFailure());
  settle();
  EXPECT_EQ(worker.cancelled, std::vector<AttemptId>{worker.submitted[0].attempt});
}

TEST_F(JobMastersTest, AWorkerThatDisconnectsFailsItsAttemptsAtOnce) {
  JobGraphBuilder builder({{"a", 1}});
  auto [job, worker] = startOnWorkerA(builder, 1, 1);
  disconnect(job, workerA_, "SIGTERM");
  ASSERT_EQ(listener_.ended.size(), 1u);
  EXPECT_EQ(listener_.ended[0].second.failureMessage,
            "worker " + workerA_.toHex() + " disconnected: SIGTERM (no restart strategy)");
}

TEST_F(JobMastersTest, AnOfferedAttemptOfAJobStartedWithoutProgressIsCancelled) {
  // No progress record: no attempt of the job was ever deployed by the write-ahead rule, so an
  // offered one is unknown and stops; the subtask runs afresh.
  JobGraphBuilder builder({{"a", 1}});
  const JobId job = start(builder);
  FakeWorker worker;
  const AttemptId previousTerms = AttemptId::random();
  ASSERT_EQ(offer(job, workerA_, worker, 1, {{previousTerms, "a", 0}}).size(), 1u);
  settle();
  EXPECT_EQ(worker.cancelled, std::vector<AttemptId>{previousTerms});
  ASSERT_EQ(worker.submitted.size(), 1u);
  EXPECT_NE(worker.submitted[0].attempt, previousTerms);
  EXPECT_EQ(worker.submitted[0].attemptNumber, 0u);
}

TEST_F(JobMastersTest, AnAttemptOfALostWorkerOfferedAgainIsCancelled) {
  JobGraphBuilder builder({{"a", 1}});
  builder.fixedDelay(1, 5000);
  auto [job, worker] = startOnWorkerA(builder, 1, 1);
  ASSERT_EQ(worker.submitted.size(), 1u);
  expectApplied(job, worker.submitted[0], ExecutionState::RUNNING);
  // Lost (here by its disconnect): the attempt FAILED and waits for its restart delay.
  disconnect(job, workerA_, "paused");
  EXPECT_EQ(counters_.attemptsFailed, 1u);
  // The worker comes back and offers its slot with the attempt still running in it: the
  // JobMaster failed that attempt, so it is cancelled.
  offer(job, workerA_, worker, 1, {{worker.submitted[0].attempt, "a", 0}});
  settle();
  EXPECT_EQ(worker.cancelled, std::vector<AttemptId>{worker.submitted[0].attempt});
}

TEST_F(JobMastersTest, EventLinesNameDeploymentsAttemptStatesAndJobStates) {
  captureLog();

  JobGraphBuilder builder({{"a", 1}});
  builder.fixedDelay(1, 1000);
  auto [job, worker] = startOnWorkerA(builder, 1, 1);
  expectApplied(job, worker.submitted[0], ExecutionState::RUNNING);
  expectApplied(job, worker.submitted[0], ExecutionState::RUNNING);  // Repeated: no line.
  expectApplied(job, worker.submitted[0], ExecutionState::FAILED, 3, "exited with code 3");

  const auto deployed = capturedEvents("attempt deployed");
  ASSERT_EQ(deployed.size(), 1u) << capturedLog();
  EXPECT_EQ(deployed[0].getUint("epoch"), kEpoch);
  EXPECT_EQ(deployed[0].get("job"), job.toHex());
  EXPECT_EQ(deployed[0].get("vertex"), "a");
  EXPECT_EQ(deployed[0].getUint("subtask"), 0u);
  EXPECT_EQ(deployed[0].get("attempt"), worker.submitted[0].attempt.toHex());
  EXPECT_EQ(deployed[0].getUint("attempt_number"), 0u);
  EXPECT_EQ(deployed[0].get("resource_id"), workerA_.toHex());
  EXPECT_TRUE(deployed[0].get("mono_us"));
  EXPECT_TRUE(deployed[0].get("wall_ms"));
  const auto states = capturedEvents("attempt state");
  ASSERT_EQ(states.size(), 2u) << capturedLog();
  EXPECT_EQ(states[0].get("state"), "RUNNING");
  EXPECT_EQ(states[0].get("message"), std::nullopt);
  EXPECT_EQ(states[1].get("state"), "FAILED");
  EXPECT_EQ(states[1].getInt("exit_code"), 3);
  EXPECT_EQ(states[1].getInt("signal"), 0);
  EXPECT_EQ(states[1].get("message"), "exited with code 3");
  const auto jobStates = capturedEvents("job state");
  ASSERT_EQ(jobStates.size(), 2u) << capturedLog();
  EXPECT_EQ(jobStates[0].get("state"), "RUNNING");
  EXPECT_EQ(jobStates[0].getUint("restarts"), 0u);
  EXPECT_EQ(jobStates[1].get("state"), "RESTARTING");
  EXPECT_EQ(jobStates[1].getUint("restarts"), 1u);
  advance(Duration(1000));
  EXPECT_EQ(capturedEvents("job state").back().get("state"), "RUNNING");
  EXPECT_EQ(capturedEvents("attempt deployed").size(), 2u);
}

// ---- The progress record (write-ahead) ---------------------------------------------------------

TEST_F(JobMastersTest, AnAttemptIsDeployedOnlyOnceAPutHoldingItSucceeded) {
  JobGraphBuilder builder({{"a", 1}});
  const JobId job = start(builder);
  backend_.holdWrites = true;
  FakeWorker worker;
  ASSERT_EQ(offer(job, workerA_, worker, 1).size(), 1u);
  settle();
  EXPECT_TRUE(worker.submitted.empty());  // The put holding the attempt has not succeeded.
  backend_.releaseWrites();
  settle();
  ASSERT_EQ(worker.submitted.size(), 1u);
  const auto stored = storedProgress(job);
  ASSERT_EQ(stored.get().getSubtasks().size(), 1u);
  const auto entry = stored.get().getSubtasks()[0];
  EXPECT_EQ(entry.getSubtask(), 0u);
  EXPECT_EQ(wire::idFromWire<AttemptId>(entry.getAttemptId()), worker.submitted[0].attempt);
  EXPECT_EQ(entry.getState(), ExecutionState::DEPLOYING);
  EXPECT_EQ(stored.get().getEpoch(), kEpoch);
}

TEST_F(JobMastersTest, AFailedUpdateIsAnsweredOnlyOnceAPutHoldingItSucceeded) {
  JobGraphBuilder builder({{"a", 2}});
  builder.fixedDelay(3, 100000);
  auto [job, worker] = startOnWorkerA(builder, 2, 2);
  ASSERT_EQ(worker.submitted.size(), 2u);
  expectApplied(job, worker.submitted[0], ExecutionState::RUNNING);
  backend_.holdWrites = true;
  auto answer = updateRequest(job, worker.submitted[0], ExecutionState::FAILED, 1).send();
  settle();
  EXPECT_FALSE(answer.poll(loop_.waitScope()));
  backend_.releaseWrites();
  settle();
  ASSERT_TRUE(answer.poll(loop_.waitScope()));
  auto response = answer.wait(loop_.waitScope());
  EXPECT_FALSE(response.hasFailure()) << response.getFailure().getMessage().cStr();
  EXPECT_EQ(storedProgress(job).get().getSubtasks()[0].getState(), ExecutionState::FAILED);
}

// A job waiting for slots holds no timer (its heartbeat rounds wait for a worker): a queued job
// costs memory only. The rounds start with the first worker that offers slots and stop once the
// job follows no worker.
TEST_F(JobMastersTest, HeartbeatRoundsRunOnlyWhileTheJobFollowsAWorker) {
  JobGraphBuilder builder({{"a", 1}});
  const JobId job = start(builder);
  EXPECT_TRUE(timer_.nextEvent() == nullptr) << "a queued job armed a timer";
  FakeWorker worker;
  ASSERT_EQ(offer(job, workerA_, worker, 1).size(), 1u);
  ASSERT_EQ(worker.submitted.size(), 1u);
  advance(Duration(2000));
  EXPECT_EQ(worker.heartbeats, 1u);
  advance(Duration(2000));
  EXPECT_EQ(worker.heartbeats, 2u);
  // The worker leaves: the job follows no worker, the next round finds none and the rounds stop.
  disconnect(job, workerA_, "SIGTERM");
  advance(Duration(2000));
  EXPECT_EQ(worker.heartbeats, 2u);
  EXPECT_TRUE(timer_.nextEvent() == nullptr) << "the rounds went on without a worker";
}

// jobmaster.first-deploy-wait: a job's first deployment waits for the slots of its other
// runnable subtasks, so that one put holds every attempt of it.
TEST_F(JobMastersTest, AJobsFirstDeploymentWaitsForTheSlotsOfItsOtherSubtasksAndOnePutHoldsThem) {
  makeMasters(kFinishedPutDelay, Duration(200));
  JobGraphBuilder builder({{"a", 2}});
  const JobId job = start(builder);
  const size_t before = backend_.transactions;
  FakeWorker a;
  FakeWorker b;
  ASSERT_EQ(offer(job, workerA_, a, 1).size(), 1u);
  advance(Duration(150));
  EXPECT_TRUE(a.submitted.empty());
  EXPECT_EQ(backend_.transactions, before);
  ASSERT_EQ(offer(job, workerB_, b, 1).size(), 1u);
  ASSERT_EQ(a.submitted.size(), 1u);
  ASSERT_EQ(b.submitted.size(), 1u);
  EXPECT_EQ(backend_.transactions, before + 1);
  const auto stored = storedProgress(job);
  ASSERT_EQ(stored.get().getSubtasks().size(), 2u);
  for (auto entry : stored.get().getSubtasks()) {
    EXPECT_EQ(entry.getState(), ExecutionState::DEPLOYING);
  }
}

// Once the wait ran out the job deploys the slots it holds; a slot that comes later deploys at
// once (the wait is the first deployment's only).
TEST_F(JobMastersTest, AFirstDeploymentDeploysWhatItHoldsOnceItsWaitRanOut) {
  makeMasters(kFinishedPutDelay, Duration(200));
  JobGraphBuilder builder({{"a", 2}});
  const JobId job = start(builder);
  FakeWorker a;
  FakeWorker b;
  ASSERT_EQ(offer(job, workerA_, a, 1).size(), 1u);
  advance(Duration(199));
  EXPECT_TRUE(a.submitted.empty());
  advance(Duration(1));
  ASSERT_EQ(a.submitted.size(), 1u);
  const size_t before = backend_.transactions;
  ASSERT_EQ(offer(job, workerB_, b, 1).size(), 1u);
  ASSERT_EQ(b.submitted.size(), 1u);
  EXPECT_EQ(backend_.transactions, before + 1);
}

// A FINISHED end is acknowledged at once: its worker keeps offering it with its slot, and the
// slot is freed only once a put holds the end. That put waits jobmaster.finished-put-delay for
// more ends: two subtasks finishing apart within it cost one put.
TEST_F(JobMastersTest, FinishedUpdatesAreAnsweredAtOnceAndStoredTogetherByOneLazyPut) {
  JobGraphBuilder builder({{"a", 3}});
  auto [job, worker] = startOnWorkerA(builder, 3, 3);
  ASSERT_EQ(worker.submitted.size(), 3u);
  const size_t before = backend_.transactions;
  auto first = update(job, worker.submitted[0], ExecutionState::FINISHED);
  EXPECT_FALSE(first.hasFailure()) << first.getFailure().getMessage().cStr();
  advance(kFinishedPutDelay / 2);
  auto second = update(job, worker.submitted[1], ExecutionState::FINISHED);
  EXPECT_FALSE(second.hasFailure()) << second.getFailure().getMessage().cStr();
  // Nothing stored or freed yet.
  EXPECT_EQ(backend_.transactions, before);
  EXPECT_TRUE(worker.freed.empty());
  EXPECT_NE(storedProgress(job).get().getSubtasks()[0].getState(), ExecutionState::FINISHED);
  advance(kFinishedPutDelay / 2);
  // One put holds both ends; then both slots are freed.
  EXPECT_EQ(backend_.transactions, before + 1);
  const auto stored = storedProgress(job);
  EXPECT_EQ(stored.get().getSubtasks()[0].getState(), ExecutionState::FINISHED);
  EXPECT_EQ(stored.get().getSubtasks()[1].getState(), ExecutionState::FINISHED);
  EXPECT_EQ(sorted(worker.freed),
            sorted({worker.submitted[0].allocation, worker.submitted[1].allocation}));
}

// jobmaster.finished-put-delay 0: a FINISHED state is stored at once and, like FAILED, answered
// only once stored; its slot is freed after.
TEST_F(JobMastersTest, WithoutAFinishedPutDelayAFinishedStateIsStoredAtOnceThenAnswered) {
  makeMasters(Duration(0));
  JobGraphBuilder builder({{"a", 2}});
  auto [job, worker] = startOnWorkerA(builder, 2, 2);
  ASSERT_EQ(worker.submitted.size(), 2u);
  const size_t before = backend_.transactions;
  backend_.holdWrites = true;
  auto answer = updateRequest(job, worker.submitted[0], ExecutionState::FINISHED).send();
  settle();
  EXPECT_FALSE(answer.poll(loop_.waitScope()));
  EXPECT_EQ(backend_.heldWrites(), 1u);  // The put started at once.
  backend_.releaseWrites();
  settle();
  ASSERT_TRUE(answer.poll(loop_.waitScope()));
  EXPECT_FALSE(answer.wait(loop_.waitScope()).hasFailure());
  EXPECT_EQ(backend_.transactions, before + 1);
  EXPECT_EQ(storedProgress(job).get().getSubtasks()[0].getState(), ExecutionState::FINISHED);
  EXPECT_EQ(worker.freed, std::vector<AllocationId>{worker.submitted[0].allocation});
}

// Until a put holds a FINISHED end, its slot stays the job's: offered again (its worker
// registered again, say), it is accepted, not left for the worker to free with the end in it;
// once the put landed it is freed.
TEST_F(JobMastersTest, ASlotWhoseFinishedEndIsNotStoredYetIsAcceptedWhenOfferedAgain) {
  JobGraphBuilder builder({{"a", 2}});
  auto [job, worker] = startOnWorkerA(builder, 2, 2);
  ASSERT_EQ(worker.submitted.size(), 2u);
  EXPECT_FALSE(update(job, worker.submitted[0], ExecutionState::FINISHED).hasFailure());
  nextAllocations_ = {worker.submitted[0].allocation, worker.submitted[1].allocation};
  const auto accepted =
      offer(job, workerA_, worker, 2,
            {{worker.submitted[0].attempt, "a", 0, ExecutionState::FINISHED},
             {worker.submitted[1].attempt, "a", 1, ExecutionState::RUNNING}});
  EXPECT_EQ(accepted.size(), 2u);
  EXPECT_TRUE(worker.freed.empty());
  advance(kFinishedPutDelay);
  EXPECT_EQ(worker.freed, std::vector<AllocationId>{worker.submitted[0].allocation});
}

// A job that ended keeps its slots until its release: no put holds the ends of its subtasks,
// its result does once the Dispatcher stored it, so an offer of them meanwhile is accepted.
TEST_F(JobMastersTest, AnEndedJobAcceptsItsOwnSlotsOfferedAgainUntilItsRelease) {
  JobGraphBuilder builder({{"a", 2}});
  auto [job, worker] = startOnWorkerA(builder, 2, 2);
  ASSERT_EQ(worker.submitted.size(), 2u);
  EXPECT_FALSE(update(job, worker.submitted[0], ExecutionState::FINISHED).hasFailure());
  EXPECT_FALSE(update(job, worker.submitted[1], ExecutionState::FINISHED).hasFailure());
  ASSERT_EQ(listener_.ended.size(), 1u);
  nextAllocations_ = {worker.submitted[0].allocation, worker.submitted[1].allocation,
                      AllocationId::random()};
  const auto accepted =
      offer(job, workerA_, worker, 3,
            {{worker.submitted[0].attempt, "a", 0, ExecutionState::FINISHED},
             {worker.submitted[1].attempt, "a", 1, ExecutionState::FINISHED}});
  // Its own two; not a new one.
  EXPECT_EQ(sorted(accepted),
            sorted({worker.submitted[0].allocation, worker.submitted[1].allocation}));
  advance(kFinishedPutDelay * 10);
  EXPECT_TRUE(worker.freed.empty());
  auto released = masters_->release(job, "job finished");
  settle();
  loop_.run(kj::mv(released));
  EXPECT_EQ(worker.freed.size(), 2u);
}

// The last subtasks' ends come within the delay: the job's result holds them, and no put does.
TEST_F(JobMastersTest, ASubtaskEndFollowedByTheJobsEndWithinTheDelayCostsNoPut) {
  JobGraphBuilder builder({{"a", 2}});
  auto [job, worker] = startOnWorkerA(builder, 2, 2);
  ASSERT_EQ(worker.submitted.size(), 2u);
  const size_t before = backend_.transactions;
  EXPECT_FALSE(update(job, worker.submitted[0], ExecutionState::FINISHED).hasFailure());
  advance(kFinishedPutDelay / 2);
  EXPECT_FALSE(update(job, worker.submitted[1], ExecutionState::FINISHED).hasFailure());
  ASSERT_EQ(listener_.ended.size(), 1u);
  EXPECT_EQ(listener_.ended[0].second.state, wire::JobState::FINISHED);
  advance(kFinishedPutDelay * 10);
  EXPECT_EQ(backend_.transactions, before);
  EXPECT_TRUE(worker.freed.empty());  // Until the release, after the result is stored.
}

TEST_F(JobMastersTest, ATerminalUpdateWhosePutFailsIsAnsweredUnavailableAndAcceptedWhenRepeated) {
  JobGraphBuilder builder({{"a", 2}});
  builder.fixedDelay(3, 100000);
  auto [job, worker] = startOnWorkerA(builder, 2, 2);
  ASSERT_EQ(worker.submitted.size(), 2u);
  backend_.failWrites = 1;
  auto response = update(job, worker.submitted[0], ExecutionState::FAILED, 1);
  ASSERT_TRUE(response.hasFailure());
  EXPECT_TRUE(response.getFailure().isUnavailable());
  // The worker delivers again; the put is retried after its backoff and succeeds.
  auto again = updateRequest(job, worker.submitted[0], ExecutionState::FAILED, 1).send();
  settle();
  EXPECT_FALSE(again.poll(loop_.waitScope()));
  advance(Duration(100));
  ASSERT_TRUE(again.poll(loop_.waitScope()));
  auto repeated = again.wait(loop_.waitScope());
  EXPECT_FALSE(repeated.hasFailure()) << repeated.getFailure().getMessage().cStr();
  EXPECT_EQ(storedProgress(job).get().getSubtasks()[0].getState(), ExecutionState::FAILED);
}

// A worker reports its slots to the next leader: a slot freed before the record held the end of
// its attempt would no longer show that end, and the next leader would run the subtask again.
TEST_F(JobMastersTest, TheSlotOfAFinishedAttemptIsFreedOnlyOnceAPutHoldingItsEndSucceeded) {
  JobGraphBuilder builder({{"a", 2}});
  auto [job, worker] = startOnWorkerA(builder, 2, 2);
  ASSERT_EQ(worker.submitted.size(), 2u);
  expectApplied(job, worker.submitted[0], ExecutionState::RUNNING);
  backend_.failWrites = 1;  // The put of the end fails; its retry succeeds.
  auto response = update(job, worker.submitted[0], ExecutionState::FINISHED);
  EXPECT_FALSE(response.hasFailure());  // Its worker keeps it with the slot.
  advance(kFinishedPutDelay);  // The lazy put fails.
  EXPECT_TRUE(worker.freed.empty());  // The job needs the slot no more, but the record is behind.
  EXPECT_NE(storedProgress(job).get().getSubtasks()[0].getState(), ExecutionState::FINISHED);
  advance(Duration(100));  // The retry succeeds.
  EXPECT_EQ(storedProgress(job).get().getSubtasks()[0].getState(), ExecutionState::FINISHED);
  ASSERT_EQ(worker.freed.size(), 1u);
  EXPECT_EQ(worker.freed[0], worker.submitted[0].allocation);
}

// The term over before the record held the end: the slot stays with the job, for the next
// leader to find the ended attempt in it.
TEST_F(JobMastersTest, AFencedPutFreesNoSlotOfAnEndedAttempt) {
  JobGraphBuilder builder({{"a", 2}});
  auto [job, worker] = startOnWorkerA(builder, 2, 2);
  ASSERT_EQ(worker.submitted.size(), 2u);
  backend_.fenced = true;
  auto response = update(job, worker.submitted[0], ExecutionState::FINISHED);
  EXPECT_FALSE(response.hasFailure());  // Its worker keeps it with the slot.
  advance(Duration(5000));
  EXPECT_TRUE(worker.freed.empty());
}

TEST_F(JobMastersTest, FailedPutsAreRetriedWithinAHeartbeatIntervalAndQuicklyAgainAfterASuccess) {
  JobGraphBuilder builder({{"a", 3}});  // The failures of two leave the job running: both put.
  builder.fixedDelay(3, 100000);         // No restart within the test.
  auto [job, worker] = startOnWorkerA(builder, 3, 3);
  ASSERT_EQ(worker.submitted.size(), 3u);
  backend_.failWrites = 6;  // The put of the end and its next five retries fail.
  auto response = update(job, worker.submitted[0], ExecutionState::FAILED, 1);
  ASSERT_TRUE(response.hasFailure());
  // Each retry is armed after the previous one failed, so one heartbeat.interval (2 s here) per
  // retry is enough only if no delay grows past it.
  for (int retry = 1; retry <= 5; ++retry) {
    workerHeartbeat(job, workerA_, {worker.submitted[1].attempt, worker.submitted[2].attempt});
    advance(Duration(2000));
    EXPECT_NE(storedProgress(job).get().getSubtasks()[0].getState(), ExecutionState::FAILED)
        << "retry " << retry;
  }
  EXPECT_EQ(backend_.failWrites, 0u);
  workerHeartbeat(job, workerA_, {worker.submitted[1].attempt, worker.submitted[2].attempt});
  advance(Duration(2000));
  EXPECT_EQ(storedProgress(job).get().getSubtasks()[0].getState(), ExecutionState::FAILED);
  // The success reset the delays: the next failed put is tried again after the first one.
  backend_.failWrites = 1;
  ASSERT_TRUE(update(job, worker.submitted[1], ExecutionState::FAILED, 1).hasFailure());
  advance(Duration(99));
  EXPECT_NE(storedProgress(job).get().getSubtasks()[1].getState(), ExecutionState::FAILED);
  advance(Duration(1));
  EXPECT_EQ(storedProgress(job).get().getSubtasks()[1].getState(), ExecutionState::FAILED);
}

TEST_F(JobMastersTest, AFencedPutDeploysNothing) {
  JobGraphBuilder builder({{"a", 1}});
  const JobId job = start(builder);
  backend_.fenced = true;
  FakeWorker worker;
  ASSERT_EQ(offer(job, workerA_, worker, 1).size(), 1u);
  advance(Duration(5000));
  EXPECT_TRUE(worker.submitted.empty());
}

TEST_F(JobMastersTest, AfterAFencedPutTerminalUpdatesAreAnsweredUnavailableAndNothingIsDeployed) {
  JobGraphBuilder builder({{"a", 2}});
  builder.fixedDelay(3, 1000);
  auto [job, worker] = startOnWorkerA(builder, 2, 2);
  ASSERT_EQ(worker.submitted.size(), 2u);
  backend_.fenced = true;  // The term is over.
  auto failed = update(job, worker.submitted[0], ExecutionState::FAILED, 1);
  ASSERT_TRUE(failed.hasFailure());
  EXPECT_TRUE(failed.getFailure().isUnavailable());  // The worker delivers to the next leader.
  auto again = update(job, worker.submitted[0], ExecutionState::FAILED, 1);
  ASSERT_TRUE(again.hasFailure());
  EXPECT_TRUE(again.getFailure().isUnavailable());
  advance(Duration(5000));  // Past the restart delay: the restart is not deployed.
  EXPECT_EQ(worker.submitted.size(), 2u);
  // RUNNING is not written: answered at once.
  expectApplied(job, worker.submitted[1], ExecutionState::RUNNING);
}

TEST_F(JobMastersTest, APutThatCanNeverFitFailsTheJobInsteadOfRetryingForever) {
  JobGraphBuilder builder({{"a", 2}});
  builder.fixedDelay(3, 1000);
  auto [job, worker] = startOnWorkerA(builder, 2, 2);
  ASSERT_EQ(worker.submitted.size(), 2u);
  backend_.maxRecordSize = 16;  // The store's limit shrank under the job.
  auto failed = update(job, worker.submitted[0], ExecutionState::FAILED, 1);
  ASSERT_TRUE(failed.hasFailure());  // Not stored: not acknowledged.
  advance(Duration(1000));
  ASSERT_EQ(listener_.ended.size(), 1u);
  EXPECT_EQ(listener_.ended[0].first, job);
  EXPECT_EQ(listener_.ended[0].second.state, wire::JobState::FAILED);
  EXPECT_NE(listener_.ended[0].second.failureMessage.find("progress record cannot be stored"),
            std::string::npos)
      << listener_.ended[0].second.failureMessage;
  EXPECT_TRUE(listener_.ended[0].second.failureVertex.empty());
  // Nothing more is tried: no restart is deployed and no put retried.
  const size_t deployed = worker.submitted.size();
  advance(Duration(10000));
  EXPECT_EQ(worker.submitted.size(), deployed);
  EXPECT_EQ(listener_.ended.size(), 1u);
}

TEST_F(JobMastersTest, ReleaseWaitsForThePutInFlightAndStartsNoneAfter) {
  JobGraphBuilder builder({{"a", 2}});
  builder.fixedDelay(3, 100000);
  auto [job, worker] = startOnWorkerA(builder, 2, 2);
  ASSERT_EQ(worker.submitted.size(), 2u);
  backend_.holdWrites = true;
  auto finished = updateRequest(job, worker.submitted[0], ExecutionState::FAILED, 1).send();
  settle();  // The put holding a[0]'s end is in flight.
  auto released = masters_->release(job, "job cancelled");
  settle();
  ASSERT_EQ(worker.cancelled, std::vector<AttemptId>{worker.submitted[1].attempt});
  auto canceled = updateRequest(job, worker.submitted[1], ExecutionState::CANCELED).send();
  settle();
  EXPECT_FALSE(released.poll(loop_.waitScope()));  // The put is still in flight.
  backend_.releaseWrites();
  settle();
  ASSERT_TRUE(released.poll(loop_.waitScope()));
  released.wait(loop_.waitScope());
  EXPECT_FALSE(finished.wait(loop_.waitScope()).hasFailure());
  EXPECT_FALSE(canceled.wait(loop_.waitScope()).hasFailure());
  // No put followed the release: the record is the one in flight (a[1] still DEPLOYING).
  const auto stored = storedProgress(job);
  EXPECT_EQ(stored.get().getSubtasks()[0].getState(), ExecutionState::FAILED);
  EXPECT_EQ(stored.get().getSubtasks()[1].getState(), ExecutionState::DEPLOYING);
}

// ---- Failover: reconciliation -----------------------------------------------------------------

TEST_F(JobMastersTest, ARecoveredJobReconcilesAndAdoptsTheAttemptsWorkersOffer) {
  captureLog();

  JobGraphBuilder builder({{"a", 2}, {"b", 1, {"a"}}});
  const AttemptId x = AttemptId::random();
  const AttemptId y = AttemptId::random();
  const JobId job = startRecovered(
      builder, {{0, x, 2, ExecutionState::RUNNING}, {1, y, 0, ExecutionState::DEPLOYING}}, 2);
  EXPECT_EQ(stateOf(job), wire::JobState::RECONCILING);
  ASSERT_EQ(listener_.states.size(), 1u);
  EXPECT_EQ(listener_.states[0].second, wire::JobState::RECONCILING);
  EXPECT_TRUE(port_.declarations[job].empty());  // Nothing declared while reconciling.
  {
    capnp::MallocMessageBuilder message;
    auto status = message.initRoot<wire::JobStatus>();
    ASSERT_TRUE(masters_->describe(job, status));
    EXPECT_EQ(std::string(status.getWaitingReason().cStr()),
              "reconciling after a failover: 2 running attempts not reported by a worker yet; "
              "nothing is deployed until then");
    EXPECT_EQ(status.getTasks().getReconciling(), 2u);
    EXPECT_EQ(status.getVertices()[0].getSubtasks()[0].getAttempt().getState(),
              ExecutionState::RECONCILING);
  }

  FakeWorker first;
  ASSERT_EQ(offer(job, workerA_, first, 1, {{x, "a", 0}}).size(), 1u);
  EXPECT_TRUE(first.submitted.empty());
  EXPECT_TRUE(first.cancelled.empty());
  EXPECT_EQ(counters_.attemptsAdopted, 1u);
  EXPECT_EQ(stateOf(job), wire::JobState::RECONCILING);  // y is not accounted for yet.

  FakeWorker second;
  ASSERT_EQ(offer(job, workerB_, second, 1, {{y, "a", 1}}).size(), 1u);
  EXPECT_EQ(counters_.attemptsAdopted, 2u);
  EXPECT_EQ(stateOf(job), wire::JobState::RUNNING);
  EXPECT_EQ(listener_.states.back().second, wire::JobState::RUNNING);
  EXPECT_EQ(port_.latest(job), (std::vector<std::pair<uint32_t, uint32_t>>{{1000, 2}}));
  EXPECT_TRUE(first.submitted.empty());
  EXPECT_TRUE(second.submitted.empty());

  // The adopted attempts are followed like the term's own: their ends run b, once.
  expectApplied(job, FakeWorker::Submitted{x, {}, "a", 0, 2, ""}, ExecutionState::FINISHED);
  expectApplied(job, FakeWorker::Submitted{y, {}, "a", 1, 0, ""}, ExecutionState::FINISHED);
  const size_t submitted = first.submitted.size() + second.submitted.size();
  ASSERT_EQ(submitted, 1u);
  const auto& b = first.submitted.empty() ? second.submitted[0] : first.submitted[0];
  EXPECT_EQ(b.vertex, "b");
  EXPECT_EQ(b.attemptNumber, 0u);
  advance(Duration(2000));
  EXPECT_GT(first.heartbeats + second.heartbeats, 0u);

  const auto reconciling = capturedEvents("job reconciling");
  ASSERT_EQ(reconciling.size(), 1u) << capturedLog();
  EXPECT_EQ(reconciling[0].get("job"), job.toHex());
  EXPECT_EQ(reconciling[0].getUint("expected"), 2u);
  const auto adopted = capturedEvents("attempt adopted");
  ASSERT_EQ(adopted.size(), 2u) << capturedLog();
  EXPECT_EQ(adopted[0].get("vertex"), "a");
  EXPECT_EQ(adopted[0].getUint("subtask"), 0u);
  EXPECT_EQ(adopted[0].get("attempt"), x.toHex());
  EXPECT_EQ(adopted[0].getUint("attempt_number"), 2u);
  EXPECT_EQ(adopted[0].get("worker"), workerA_.toHex());
  EXPECT_EQ(adopted[0].getUint("pid"), 4242u);
  EXPECT_TRUE(adopted[0].get("mono_us"));
  EXPECT_TRUE(adopted[0].get("wall_ms"));
  expectReconciled(2, 0, 0, false);
}

TEST_F(JobMastersTest, AnExpectedAttemptOfferedAfterItEndedIsAdoptedWithItsEnd) {
  JobGraphBuilder builder({{"a", 2}});
  const AttemptId x = AttemptId::random();
  const AttemptId y = AttemptId::random();
  const JobId job = startRecovered(
      builder, {{0, x, 0, ExecutionState::RUNNING}, {1, y, 0, ExecutionState::RUNNING}});
  FakeWorker worker;
  offer(job, workerA_, worker, 2,
        {{x, "a", 0, ExecutionState::FINISHED}, {y, "a", 1, ExecutionState::RUNNING}});
  EXPECT_EQ(counters_.attemptsAdopted, 2u);
  EXPECT_TRUE(worker.cancelled.empty());  // An attempt that ended needs no cancelling.
  EXPECT_TRUE(worker.submitted.empty());
  EXPECT_EQ(stateOf(job), wire::JobState::RUNNING);
  // The worker's queued update of x follows its offer: a repeat, answered at once; a lazy put
  // stores the end.
  expectApplied(job, FakeWorker::Submitted{x, {}, "a", 0, 0, ""}, ExecutionState::FINISHED);
  advance(kFinishedPutDelay);
  EXPECT_EQ(storedProgress(job).get().getSubtasks()[0].getState(), ExecutionState::FINISHED);
  expectAppliedEndingTheJob(job, FakeWorker::Submitted{y, {}, "a", 1, 0, ""});
  ASSERT_EQ(listener_.ended.size(), 1u);
  EXPECT_EQ(listener_.ended[0].second.state, wire::JobState::FINISHED);
  EXPECT_TRUE(worker.submitted.empty());  // Nothing ran twice.
}

TEST_F(JobMastersTest, AnExpectedAttemptOfferedFailedKeepsItsWorkersFailureMessage) {
  JobGraphBuilder builder({{"a", 1}});
  builder.fixedDelay(3, 1000);
  const AttemptId x = AttemptId::random();
  const JobId job = startRecovered(builder, {{0, x, 0, ExecutionState::RUNNING}});
  FakeWorker worker;
  // The message is read from the offer; the failure is applied after the adoption, from a copy
  // kept with the adopted attempt (short: a view into a moved string would dangle).
  offer(job, workerA_, worker, 1, {{x, "a", 0, ExecutionState::FAILED, 4242, "disk full"}});
  EXPECT_EQ(counters_.attemptsAdopted, 1u);
  EXPECT_EQ(counters_.attemptsFailed, 1u);
  capnp::MallocMessageBuilder message;
  auto status = message.initRoot<wire::JobStatus>();
  ASSERT_TRUE(masters_->describe(job, status));
  EXPECT_EQ(std::string(status.getVertices()[0].getSubtasks()[0].getLastFailure().cStr()),
            "disk full");
}

TEST_F(JobMastersTest, AnOfferedAttemptThatIsNotTheExpectedOneIsCancelled) {
  JobGraphBuilder builder({{"a", 1}});
  const AttemptId expected = AttemptId::random();
  const AttemptId superseded = AttemptId::random();
  const JobId job = startRecovered(builder, {{0, expected, 1, ExecutionState::RUNNING}});
  FakeWorker worker;
  offer(job, workerA_, worker, 1, {{superseded, "a", 0}});
  EXPECT_EQ(worker.cancelled, std::vector<AttemptId>{superseded});
  EXPECT_TRUE(worker.submitted.empty());
  EXPECT_EQ(counters_.attemptsAdopted, 0u);
  EXPECT_EQ(stateOf(job), wire::JobState::RECONCILING);
}

TEST_F(JobMastersTest, AFinishReportedWhileReconcilingRunsTheDownstreamOnceAfterTheEnd) {
  JobGraphBuilder builder({{"a", 1}, {"b", 1, {"a"}}, {"c", 1}});
  const AttemptId a = AttemptId::random();
  const AttemptId c = AttemptId::random();
  const JobId job = startRecovered(
      builder, {{0, a, 0, ExecutionState::RUNNING}, {2, c, 0, ExecutionState::RUNNING}});
  // a's worker holds no slot of it any more and delivers its end directly.
  expectApplied(job, FakeWorker::Submitted{a, {}, "a", 0, 0, ""}, ExecutionState::FINISHED);
  EXPECT_EQ(stateOf(job), wire::JobState::RECONCILING);  // c is not accounted for.
  FakeWorker worker;
  ASSERT_EQ(offer(job, workerA_, worker, 1).size(), 1u);  // b could use it.
  EXPECT_TRUE(worker.submitted.empty());                  // Not while reconciling.
  FakeWorker other;
  ASSERT_EQ(offer(job, workerB_, other, 1, {{c, "c", 0}}).size(), 1u);
  EXPECT_EQ(stateOf(job), wire::JobState::RUNNING);
  ASSERT_EQ(worker.submitted.size(), 1u);
  EXPECT_EQ(worker.submitted[0].vertex, "b");
  EXPECT_TRUE(other.submitted.empty());
  advance(Duration(30000));  // The reconciliation timeout passing later changes nothing.
  EXPECT_EQ(worker.submitted.size(), 1u);
  EXPECT_EQ(counters_.reconciliationTimeouts, 0u);
}

TEST_F(JobMastersTest, AFailureReportedWhileReconcilingIsRestartedOnceAfterTheEnd) {
  JobGraphBuilder builder({{"a", 2}});
  builder.fixedDelay(3, 1000);
  const AttemptId x = AttemptId::random();
  const AttemptId y = AttemptId::random();
  const JobId job = startRecovered(
      builder, {{0, x, 0, ExecutionState::RUNNING}, {1, y, 0, ExecutionState::RUNNING}});
  FakeWorker worker;
  ASSERT_EQ(offer(job, workerA_, worker, 1, {{x, "a", 0}}).size(), 1u);
  expectApplied(job, FakeWorker::Submitted{y, {}, "a", 1, 0, ""}, ExecutionState::FAILED, 1);
  EXPECT_EQ(counters_.attemptsFailed, 1u);
  // y's end accounted for it: the job leaves RECONCILING and restarts a[1] after its delay.
  ASSERT_EQ(offer(job, workerB_, worker, 1).size(), 1u);
  advance(Duration(1000));
  ASSERT_EQ(worker.submitted.size(), 1u);
  EXPECT_EQ(worker.submitted[0].subtask, 1u);
  EXPECT_EQ(worker.submitted[0].attemptNumber, 1u);
  EXPECT_EQ(counters_.attemptsRestarted, 1u);
  uint32_t restarts = 0;
  capnp::MallocMessageBuilder message;
  ASSERT_TRUE(masters_->counts(job, message.initRoot<wire::TaskCounts>(), restarts));
  EXPECT_EQ(restarts, 1u);
}

TEST_F(JobMastersTest, AFailureWhileOthersAreStillExpectedWaitsForTheEndToRestart) {
  JobGraphBuilder builder({{"a", 2}});
  builder.fixedDelay(3, 1000);
  const AttemptId x = AttemptId::random();
  const AttemptId y = AttemptId::random();
  const JobId job = startRecovered(
      builder, {{0, x, 0, ExecutionState::RUNNING}, {1, y, 0, ExecutionState::RUNNING}});
  expectApplied(job, FakeWorker::Submitted{y, {}, "a", 1, 0, ""}, ExecutionState::FAILED, 1);
  FakeWorker worker;
  ASSERT_EQ(offer(job, workerB_, worker, 1).size(), 1u);
  advance(Duration(5000));  // Past the restart delay: still reconciling (x), nothing deployed.
  EXPECT_TRUE(worker.submitted.empty());
  EXPECT_EQ(stateOf(job), wire::JobState::RECONCILING);
  offer(job, workerA_, worker, 1, {{x, "a", 0}});
  ASSERT_EQ(worker.submitted.size(), 1u);
  EXPECT_EQ(worker.submitted[0].subtask, 1u);
}

TEST_F(JobMastersTest, AnAttemptNobodyReportsFailsAtTheReconciliationTimeoutAndRestarts) {
  JobGraphBuilder builder({{"a", 1}});
  builder.fixedDelay(3, 1000);
  const AttemptId lost = AttemptId::random();
  const JobId job = startRecovered(builder, {{0, lost, 0, ExecutionState::RUNNING}});
  FakeWorker worker;
  ASSERT_EQ(offer(job, workerA_, worker, 1).size(), 0u);  // Nothing waits for a slot yet.
  advance(Duration(29999));
  EXPECT_EQ(stateOf(job), wire::JobState::RECONCILING);
  advance(Duration(1));
  EXPECT_EQ(counters_.reconciliationTimeouts, 1u);
  EXPECT_EQ(counters_.attemptsFailed, 1u);
  capnp::MallocMessageBuilder message;
  auto status = message.initRoot<wire::JobStatus>();
  ASSERT_TRUE(masters_->describe(job, status));
  EXPECT_EQ(status.getState(), wire::JobState::RESTARTING);
  EXPECT_EQ(std::string(status.getFailure().getMessage().cStr()),
            "not reported by any worker within jobmaster.reconciliation-timeout (30s) after the "
            "failover");
  ASSERT_EQ(offer(job, workerA_, worker, 1).size(), 1u);
  advance(Duration(1000));
  ASSERT_EQ(worker.submitted.size(), 1u);
  EXPECT_EQ(worker.submitted[0].attemptNumber, 1u);
  // The lost attempt, offered late, is cancelled.
  offer(job, workerB_, worker, 1, {{lost, "a", 0}});
  EXPECT_EQ(worker.cancelled, std::vector<AttemptId>{lost});
}

TEST_F(JobMastersTest, AnExpectedAttemptWhoseWorkerReportsItsSlotsWithoutItFailsAtOnce) {
  captureLog();
  JobGraphBuilder builder({{"a", 2}});
  builder.fixedDelay(3, 1000);
  const AttemptId gone = AttemptId::random();
  const AttemptId kept = AttemptId::random();
  const AllocationId goneSlot = AllocationId::random();
  const AllocationId keptSlot = AllocationId::random();
  port_.strictAllocations = true;
  port_.allocations[workerB_] = {keptSlot};
  port_.reported.insert(workerB_);  // B reported to this term before the job started.
  const JobId job =
      startRecovered(builder, {{0, gone, 0, ExecutionState::RUNNING, workerA_, goneSlot},
                               {1, kept, 0, ExecutionState::RUNNING, workerB_, keptSlot}});
  EXPECT_EQ(stateOf(job), wire::JobState::RECONCILING);
  EXPECT_EQ(counters_.attemptsFailed, 0u) << "B holds the slot: its offer is awaited";
  // A (restarted meanwhile) reports its slots, none of them the attempt's.
  port_.reported.insert(workerA_);
  port_.listener->workerReported(workerA_);
  settle();
  EXPECT_EQ(counters_.attemptsFailed, 1u);
  capnp::MallocMessageBuilder message;
  auto status = message.initRoot<wire::JobStatus>();
  ASSERT_TRUE(masters_->describe(job, status));
  EXPECT_EQ(status.getState(), wire::JobState::RECONCILING) << "the other attempt is expected";
  EXPECT_EQ(std::string(status.getVertices()[0].getSubtasks()[0].getLastFailure().cStr()),
            "worker " + workerA_.toHex() +
                " reported its slots to the new leader without allocation " + goneSlot.toHex() +
                " of the attempt (the worker restarted, or freed the slot)");
  // B offers the other one: adopted, and reconciliation ends without its timeout.
  FakeWorker b;
  nextAllocations_ = {keptSlot};
  offer(job, workerB_, b, 1, {{kept, "a", 1}});
  expectReconciled(1, 0, 1, false);
  EXPECT_EQ(counters_.reconciliationTimeouts, 0u);
  EXPECT_EQ(stateOf(job), wire::JobState::RESTARTING);
}

TEST_F(JobMastersTest, AReportThatCameBeforeARecoveredJobStartedCountsAtItsStart) {
  captureLog();
  JobGraphBuilder builder({{"a", 1}});
  builder.fixedDelay(3, 1000);
  const AttemptId gone = AttemptId::random();
  port_.strictAllocations = true;
  port_.reported.insert(workerA_);  // Restarted: it holds no allocation.
  const JobId job = startRecovered(
      builder, {{0, gone, 0, ExecutionState::RUNNING, workerA_, AllocationId::random()}});
  expectReconciled(0, 0, 1, false);
  EXPECT_EQ(counters_.attemptsFailed, 1u);
  EXPECT_EQ(stateOf(job), wire::JobState::RESTARTING);
}

TEST_F(JobMastersTest, AnAttemptOfARecordThatNamesNoWorkerWaitsForTheReconciliationTimeout) {
  captureLog();
  JobGraphBuilder builder({{"a", 1}});
  builder.fixedDelay(3, 1000);
  port_.strictAllocations = true;
  port_.reported.insert(workerA_);
  // Written by an older master: no worker, no allocation.
  const JobId job = startRecovered(builder, {{0, AttemptId::random(), 0, ExecutionState::RUNNING}});
  port_.listener->workerReported(workerA_);
  settle();
  EXPECT_EQ(stateOf(job), wire::JobState::RECONCILING);
  EXPECT_EQ(counters_.attemptsFailed, 0u);
  advance(Duration(30000));
  expectReconciled(0, 0, 1, true);
}

TEST_F(JobMastersTest, AnExpectedAttemptWhoseSlotIsOfferedWithoutItWasNeverDeployedAndRunsAgain) {
  captureLog();
  JobGraphBuilder builder({{"a", 1}});
  builder.fixedDelay(3, 0);
  const AttemptId never = AttemptId::random();
  const AllocationId slot = AllocationId::random();
  // The earlier leader stored the attempt, then died before its submitTask: the worker holds
  // the slot, with nothing in it.
  const JobId job =
      startRecovered(builder, {{0, never, 0, ExecutionState::DEPLOYING, workerA_, slot}});
  EXPECT_EQ(stateOf(job), wire::JobState::RECONCILING);
  FakeWorker worker;
  nextAllocations_ = {slot};
  ASSERT_EQ(offer(job, workerA_, worker, 1).size(), 1u) << "kept for the next attempt";
  expectReconciled(0, 0, 1, false);
  EXPECT_EQ(counters_.attemptsFailed, 1u);
  capnp::MallocMessageBuilder message;
  auto status = message.initRoot<wire::JobStatus>();
  ASSERT_TRUE(masters_->describe(job, status));
  EXPECT_EQ(std::string(status.getVertices()[0].getSubtasks()[0].getLastFailure().cStr()),
            "worker " + workerA_.toHex() + " offered the slot of allocation " + slot.toHex() +
                " without the attempt: it was never deployed there (the earlier leader was lost "
                "before its submitTask)");
  settle();
  ASSERT_EQ(worker.submitted.size(), 1u);
  EXPECT_EQ(worker.submitted[0].attemptNumber, 1u);
  EXPECT_EQ(worker.submitted[0].allocation, slot);
}

TEST_F(JobMastersTest, ARestartOfTheWorkerOfAnExpectedAttemptFailsItAtOnce) {
  captureLog();
  JobGraphBuilder builder({{"a", 1}});
  builder.fixedDelay(3, 1000);
  const JobId job = startRecovered(builder, {{0, AttemptId::random(), 0, ExecutionState::RUNNING,
                                              workerA_, AllocationId::random()}});
  port_.listener->workerRestarted(workerA_, "worker A restarted");
  settle();
  expectReconciled(0, 0, 1, false);
  EXPECT_EQ(stateOf(job), wire::JobState::RESTARTING);
}

TEST_F(JobMastersTest, FinishedSubtasksAreNeverRunAndARecordWithoutLiveAttemptsDoesNotReconcile) {
  captureLog();
  JobGraphBuilder builder({{"a", 3}});
  const JobId job = startRecovered(builder,
                                   {{0, AttemptId::random(), 0, ExecutionState::FINISHED},
                                    {1, AttemptId::random(), 4, ExecutionState::FAILED}},
                                   1);
  EXPECT_EQ(stateOf(job), wire::JobState::RUNNING);
  for (const auto& [id, state] : listener_.states) {
    EXPECT_NE(state, wire::JobState::RECONCILING);
  }
  EXPECT_EQ(port_.latest(job), (std::vector<std::pair<uint32_t, uint32_t>>{{1000, 2}}));
  FakeWorker worker;
  ASSERT_EQ(offer(job, workerA_, worker, 3).size(), 2u);
  ASSERT_EQ(worker.submitted.size(), 2u);
  EXPECT_EQ(worker.submitted[0].subtask, 1u);
  EXPECT_EQ(worker.submitted[0].attemptNumber, 5u);
  EXPECT_EQ(worker.submitted[1].subtask, 2u);
  EXPECT_EQ(worker.submitted[1].attemptNumber, 0u);
  EXPECT_EQ(counters_.attemptsRestarted, 1u);  // a[1]; a[2] runs for the first time.
  EXPECT_TRUE(capturedEvents("job reconciling").empty()) << capturedLog();
  expectReconciled(0, 0, 0, false);
}

TEST_F(JobMastersTest, ReleaseWhileReconcilingAbandonsTheUnreportedAndCancelsTheAdopted) {
  JobGraphBuilder builder({{"a", 2}});
  const AttemptId x = AttemptId::random();
  const AttemptId y = AttemptId::random();
  const JobId job = startRecovered(
      builder, {{0, x, 0, ExecutionState::RUNNING}, {1, y, 0, ExecutionState::RUNNING}});
  FakeWorker worker;
  ASSERT_EQ(offer(job, workerA_, worker, 1, {{x, "a", 0}}).size(), 1u);
  auto released = masters_->release(job, "job cancelled");
  settle();
  EXPECT_EQ(worker.cancelled, std::vector<AttemptId>{x});
  EXPECT_FALSE(released.poll(loop_.waitScope()));
  expectApplied(job, FakeWorker::Submitted{x, {}, "a", 0, 0, ""}, ExecutionState::CANCELED);
  ASSERT_TRUE(released.poll(loop_.waitScope()));
  auto detail = released.wait(loop_.waitScope());
  const auto status = capnp::readMessageUnchecked<wire::JobStatus>(detail.begin());
  EXPECT_EQ(status.getTasks().getCanceled(), 2u);
  EXPECT_EQ(worker.freed.size(), 1u);
}

TEST_F(JobMastersTest, HeldBytesGrowByLittleMoreThanASmallRecordPerSubtaskOnceTheJobDeploys) {
  const size_t before = masters_->heldBytesForTests();
  JobGraphBuilder builder({{"a", 10000}});
  const JobId job = start(builder);
  settle();
  // Queued (no slot yet): nothing per subtask.
  EXPECT_LT(masters_->heldBytesForTests() - before, 4096u);
  FakeWorker& worker = fakeWorkers_.emplace_back();
  ASSERT_EQ(offer(job, workerA_, worker, 1).size(), 1u);
  ASSERT_EQ(worker.submitted.size(), 1u);
  const size_t perSubtask = (masters_->heldBytesForTests() - before) / 10000;
  EXPECT_GT(perSubtask, 64u);  // The records exist now.
  EXPECT_LT(perSubtask, 128u);
}

// ---- Review findings --------------------------------------------------------------------------

TEST_F(JobMastersTest, AnAttemptAdoptedWhileDeployingTakesItsPidFromTheLaterRunningUpdate) {
  JobGraphBuilder builder({{"a", 1}});
  const AttemptId x = AttemptId::random();
  const JobId job = startRecovered(builder, {{0, x, 0, ExecutionState::DEPLOYING}});
  FakeWorker worker;
  // The worker had not started the attempt yet: it offers it DEPLOYING, without a pid.
  offer(job, workerA_, worker, 1, {{x, "a", 0, ExecutionState::DEPLOYING, 0}});
  EXPECT_EQ(counters_.attemptsAdopted, 1u);
  auto response = update(job, FakeWorker::Submitted{x, {}, "a", 0, 0, ""}, ExecutionState::RUNNING);
  EXPECT_FALSE(response.hasFailure());
  capnp::MallocMessageBuilder message;
  auto status = message.initRoot<wire::JobStatus>();
  ASSERT_TRUE(masters_->describe(job, status));
  auto attempt = status.getVertices()[0].getSubtasks()[0].getAttempt();
  EXPECT_EQ(attempt.getState(), ExecutionState::RUNNING);
  EXPECT_EQ(attempt.getPid(), 777u);  // updateRequest's pid.
  EXPECT_NE(attempt.getStartedAtMs(), 0);
}

TEST_F(JobMastersTest, AnEndedAndALiveExpectedAttemptInOneSlotAreBothAdopted) {
  JobGraphBuilder builder({{"a", 2}});
  const AttemptId x = AttemptId::random();
  const AttemptId y = AttemptId::random();
  const JobId job = startRecovered(
      builder, {{0, x, 0, ExecutionState::RUNNING}, {1, y, 0, ExecutionState::RUNNING}});
  FakeWorker worker;
  // One slot lists both: x ended in it, y runs in it.
  offer(job, workerA_, worker, 1,
        {{x, "a", 0, ExecutionState::FINISHED}, {y, "a", 1, ExecutionState::RUNNING}});
  EXPECT_EQ(counters_.attemptsAdopted, 2u);
  EXPECT_TRUE(worker.cancelled.empty());
  EXPECT_EQ(stateOf(job), wire::JobState::RUNNING);  // Nothing left to wait for.
  expectAppliedEndingTheJob(job, FakeWorker::Submitted{y, {}, "a", 1, 0, ""});
  ASSERT_EQ(listener_.ended.size(), 1u);
  EXPECT_EQ(listener_.ended[0].second.state, wire::JobState::FINISHED);
  EXPECT_EQ(counters_.attemptsFailed, 0u);
}

TEST_F(JobMastersTest, HeartbeatRoundsLateAfterAPauseDoNotCountAsSilence) {
  JobGraphBuilder builder({{"a", 1}});
  builder.fixedDelay(1, 0);
  auto [job, worker] = startOnWorkerA(builder, 1, 1);
  expectApplied(job, worker.submitted[0], ExecutionState::RUNNING);
  advance(Duration(2000));
  workerHeartbeat(job, workerA_, {worker.submitted[0].attempt});
  // The JobMaster's process was stopped (or its loop blocked) for longer than heartbeat.timeout:
  // the next round runs late, and the worker's silence is the JobMaster's own.
  advance(Duration(15000));
  EXPECT_EQ(counters_.attemptsFailed, 0u);
  EXPECT_TRUE(worker.disconnects.empty());
  EXPECT_TRUE(worker.cancelled.empty());
  // Rounds on time again: the worker is heard and stays.
  advance(Duration(2000));
  workerHeartbeat(job, workerA_, {worker.submitted[0].attempt});
  advance(Duration(2000));
  EXPECT_EQ(counters_.attemptsFailed, 0u);
  // Real silence afterwards still loses it.
  for (int i = 0; i < 6; ++i) advance(Duration(2000));
  EXPECT_EQ(counters_.attemptsFailed, 1u);
}

TEST_F(JobMastersTest, ALiveAttemptMissingFromTwoHeartbeatsOfItsWorkerFailsAndRestarts) {
  JobGraphBuilder builder({{"a", 2}});
  builder.fixedDelay(1, 0);
  auto [job, worker] = startOnWorkerA(builder, 2, 2);
  ASSERT_EQ(worker.submitted.size(), 2u);
  expectApplied(job, worker.submitted[0], ExecutionState::RUNNING);
  expectApplied(job, worker.submitted[1], ExecutionState::RUNNING);
  auto beat = [&, &job = job](const std::vector<AttemptId>& listed) {
    workerHeartbeat(job, workerA_, listed);
  };
  const AttemptId kept = worker.submitted[0].attempt;
  const AttemptId dropped = worker.submitted[1].attempt;
  beat({kept, dropped});
  beat({kept});  // Once missing: its terminal update may still be on its way.
  EXPECT_EQ(counters_.attemptsFailed, 0u);
  beat({kept, dropped});  // Listed again: the count starts over.
  beat({kept});
  EXPECT_EQ(counters_.attemptsFailed, 0u);
  worker.submitMode = FakeWorker::Mode::kSilent;  // The restart's submitTask stays in flight.
  beat({kept});  // Missing from two heartbeats in a row: its worker no longer runs it.
  EXPECT_EQ(counters_.attemptsFailed, 1u);
  capnp::MallocMessageBuilder message;
  auto status = message.initRoot<wire::JobStatus>();
  ASSERT_TRUE(masters_->describe(job, status));
  EXPECT_EQ(std::string(status.getVertices()[0].getSubtasks()[1].getLastFailure().cStr()),
            "worker " + workerA_.toHex() +
                " no longer reports the attempt in its heartbeats (missing from 2 in a row)");
  // The strategy restarts it.
  ASSERT_EQ(worker.submitted.size(), 3u);
  EXPECT_EQ(worker.submitted[2].subtask, 1u);
  EXPECT_EQ(worker.submitted[2].attemptNumber, 1u);
  // An attempt whose submitTask is still in flight is not counted.
  beat({kept});
  beat({kept});
  EXPECT_EQ(counters_.attemptsFailed, 1u);
}

TEST_F(JobMastersTest, AJobWhoseStrategyGaveUpEndsFailedAgainAfterAFailoverAndRunsNothing) {
  JobGraphBuilder builder({{"a", 2}});
  builder.fixedDelay(1, 0);
  auto [job, worker] = startOnWorkerA(builder, 2, 2);
  expectApplied(job, worker.submitted[0], ExecutionState::FAILED, 1, "exited with code 1");
  advance(Duration(0));
  ASSERT_EQ(worker.submitted.size(), 3u);
  expectApplied(job, worker.submitted[2], ExecutionState::FAILED, 3, "exited with code 3");
  ASSERT_EQ(listener_.ended.size(), 1u);
  const dispatcher::JobEnd first = listener_.ended[0].second;
  ASSERT_EQ(first.state, wire::JobState::FAILED);
  // The record acknowledged with the last failure says the strategy gave up.
  {
    const auto stored = storedProgress(job);
    EXPECT_EQ(stored.get().getEnded(), wire::JobState::FAILED);
    EXPECT_EQ(std::string(stored.get().getFailure().getMessage().cStr()), first.failureMessage);
  }
  auto released = masters_->release(job, "job failed");
  settle();
  expectApplied(job, worker.submitted[1], ExecutionState::CANCELED);
  released.wait(loop_.waitScope());

  // The leader died before the Dispatcher stored the result: the next one starts the job from
  // the record, which ends it failed with the same root cause; nothing runs again.
  listener_.ended.clear();
  listener_.states.clear();
  const auto stored = storedProgress(job);
  masters_->start(job, builder.graph(), stored.get());
  EXPECT_TRUE(listener_.ended.empty());  // Told a turn later, never from inside start().
  settle();
  ASSERT_EQ(listener_.ended.size(), 1u);
  const dispatcher::JobEnd& again = listener_.ended[0].second;
  EXPECT_EQ(again.state, wire::JobState::FAILED);
  EXPECT_EQ(again.failureMessage, first.failureMessage);
  EXPECT_EQ(again.failureVertex, "a");
  EXPECT_EQ(again.failureSubtask, first.failureSubtask);
  EXPECT_EQ(again.failureAttempt, first.failureAttempt);
  EXPECT_EQ(again.failureExitCode, 3);
  EXPECT_EQ(again.failureAtMs, first.failureAtMs);
  EXPECT_EQ(again.restarts, 1u);
  for (const auto& [id, state] : listener_.states) EXPECT_NE(state, wire::JobState::RECONCILING);
  FakeWorker next;
  EXPECT_TRUE(offer(job, workerB_, next, 1).empty());
  EXPECT_TRUE(next.submitted.empty());
  EXPECT_EQ(worker.submitted.size(), 3u);
}

TEST_F(JobMastersTest, ARecordInWhichEverySubtaskFinishedEndsTheJobFinishedAtOnce) {
  JobGraphBuilder builder({{"a", 1}, {"b", 1, {"a"}}});
  const JobId job = startRecovered(builder, {{0, AttemptId::random(), 0, ExecutionState::FINISHED},
                                             {1, AttemptId::random(), 0, ExecutionState::FINISHED}});
  ASSERT_EQ(listener_.ended.size(), 1u);
  EXPECT_EQ(listener_.ended[0].second.state, wire::JobState::FINISHED);
  FakeWorker worker;
  EXPECT_TRUE(offer(job, workerA_, worker, 1).empty());
  EXPECT_TRUE(worker.submitted.empty());
}

TEST_F(JobMastersTest, AFailedEndIsReportedOnlyOnceARecordSayingTheStrategyGaveUpIsStored) {
  JobGraphBuilder builder({{"a", 1}});
  auto [job, worker] = startOnWorkerA(builder, 1, 1);
  backend_.holdWrites = true;
  disconnect(job, workerA_, "SIGTERM");
  // The Dispatcher would store the result; a leader dying before the record says the job failed
  // would leave the next one to run it again.
  EXPECT_TRUE(listener_.ended.empty());
  backend_.releaseWrites();
  settle();
  ASSERT_EQ(listener_.ended.size(), 1u);
  EXPECT_EQ(listener_.ended[0].second.state, wire::JobState::FAILED);
  EXPECT_EQ(storedProgress(job).get().getEnded(), wire::JobState::FAILED);
}

// ---- Worker identity (docs/security.md, "Worker identity") --------------------------------

// Another registered worker's connection names workerA_, whose attempt runs: it cannot end the
// attempt, heartbeat in A's name (no attempt fails as missing) or disconnect A. Each refusal is
// counted; the attempt runs on and A's own report still ends it.
TEST_F(JobMastersTest, AWorkerCannotEndFailOrDisconnectTheAttemptsOfAnother) {
  JobGraphBuilder builder({{"a", 1}});
  auto [job, worker] = startOnWorkerA(builder, 1, 1);
  ASSERT_EQ(worker.submitted.size(), 1u);
  expectApplied(job, worker.submitted[0], ExecutionState::RUNNING);

  auto rogue = gateway(job, workerB_);
  auto finished = updateRequest(job, worker.submitted[0], ExecutionState::FINISHED);
  auto report = rogue.updateTaskExecutionStateRequest();
  report.setEpoch(kEpoch);
  report.setState(finished.getState().asReader());
  auto reported = loop_.run(report.send());
  ASSERT_TRUE(reported.hasFailure());
  ASSERT_TRUE(reported.getFailure().isPermissionDenied())
      << reported.getFailure().getMessage().cStr();
  EXPECT_EQ(std::string(reported.getFailure().getMessage().cStr()),
            "JobMasterGateway.updateTaskExecutionState refused: attempt " +
                worker.submitted[0].attempt.toHex() + " of job " + job.toHex() +
                " runs on worker " + workerA_.toHex() + ", not on " + workerB_.toHex());
  for (int round = 0; round < 3; ++round) {
    auto heartbeat = rogue.heartbeatRequest();
    heartbeat.setEpoch(kEpoch);
    wire::setWireId(heartbeat.initResourceId(), workerA_);
    heartbeat.initPayload();
    auto answered = loop_.run(heartbeat.send());
    ASSERT_TRUE(answered.hasFailure());
    EXPECT_TRUE(answered.getFailure().isPermissionDenied());
  }
  auto disconnect = rogue.disconnectRequest();
  disconnect.setEpoch(kEpoch);
  wire::setWireId(disconnect.initResourceId(), workerA_);
  disconnect.setCause("rogue");
  auto disconnected = loop_.run(disconnect.send());
  ASSERT_TRUE(disconnected.hasFailure());
  EXPECT_TRUE(disconnected.getFailure().isPermissionDenied());
  settle();

  EXPECT_EQ(stateOf(job), wire::JobState::RUNNING);
  EXPECT_EQ(counters_.attemptsFailed, 0u);
  EXPECT_TRUE(listener_.ended.empty());
  EXPECT_TRUE(worker.cancelled.empty());
  const auto& refused = port_.refusals.byMethod();
  EXPECT_EQ(refused.at("JobMasterGateway.updateTaskExecutionState"), 1u);
  EXPECT_EQ(refused.at("JobMasterGateway.heartbeat"), 3u);
  EXPECT_EQ(refused.at("JobMasterGateway.disconnect"), 1u);

  expectAppliedEndingTheJob(job, worker.submitted[0]);
  ASSERT_EQ(listener_.ended.size(), 1u);
  EXPECT_EQ(listener_.ended[0].second.state, wire::JobState::FINISHED);
}

TEST_F(JobMastersTest, ACallOverAConnectionThatRegisteredNoWorkerIsRefused) {
  JobGraphBuilder builder({{"a", 1}});
  const JobId job = start(builder);
  FakeWorker worker;
  auto stranger =
      KJ_ASSERT_NONNULL(masters_->gateway(job, kj::refcounted<resourcemanager::WorkerBinding>("x")));
  auto request = stranger.offerSlotsRequest();
  request.setEpoch(kEpoch);
  wire::setWireId(request.initResourceId(), workerA_);
  request.setTaskExecutor(kj::heap<FakeTaskExecutor>(worker));
  auto slot = request.initSlots(1)[0];
  wire::setWireId(slot.initAllocationId(), AllocationId::random());
  slot.initProfile().setCpuMillis(1000);
  slot.getProfile().setMemoryBytes(kGiB);
  auto offered = loop_.run(request.send());
  ASSERT_TRUE(offered.hasFailure());
  EXPECT_TRUE(offered.getFailure().isPermissionDenied()) << offered.getFailure().getMessage().cStr();
  settle();
  EXPECT_TRUE(worker.submitted.empty());
  EXPECT_EQ(port_.refusals.total(), 1u);
}

TEST_F(JobMastersTest, AWorkerOffersOnlySlotsItHolds) {
  port_.strictAllocations = true;
  JobGraphBuilder builder({{"a", 2}});
  const JobId job = start(builder);
  const AllocationId mine = AllocationId::random();
  const AllocationId theirs = AllocationId::random();
  port_.allocations[workerA_] = {mine};
  port_.allocations[workerB_] = {theirs};
  auto offerOne = [&](const ResourceId& worker, FakeWorker& fake, const AllocationId& allocation) {
    auto request = gateway(job, worker).offerSlotsRequest();
    request.setEpoch(kEpoch);
    wire::setWireId(request.initResourceId(), worker);
    request.setTaskExecutor(kj::heap<FakeTaskExecutor>(fake));
    auto slot = request.initSlots(1)[0];
    wire::setWireId(slot.initAllocationId(), allocation);
    slot.initProfile().setCpuMillis(1000);
    slot.getProfile().setMemoryBytes(kGiB);
    return loop_.run(request.send());
  };
  FakeWorker a;
  FakeWorker b;
  // B offers A's allocation: refused, nothing deployed into it.
  auto stolen = offerOne(workerB_, b, mine);
  ASSERT_TRUE(stolen.hasFailure());
  EXPECT_TRUE(stolen.getFailure().isPermissionDenied()) << stolen.getFailure().getMessage().cStr();
  auto own = offerOne(workerA_, a, mine);
  ASSERT_FALSE(own.hasFailure()) << own.getFailure().getMessage().cStr();
  settle();
  ASSERT_EQ(a.submitted.size(), 1u);
  // B reports A's allocation as its own too (its slot table says so): the job holds it on A.
  port_.allocations[workerB_].insert(mine);
  auto claimed = offerOne(workerB_, b, mine);
  ASSERT_TRUE(claimed.hasFailure());
  EXPECT_TRUE(claimed.getFailure().isPermissionDenied())
      << claimed.getFailure().getMessage().cStr();
  settle();
  EXPECT_TRUE(b.submitted.empty());
  EXPECT_EQ(port_.refusals.byMethod().at("JobMasterGateway.offerSlots"), 2u);
}

TEST_F(JobMastersTest, ACallOverARegistrationAnotherReplacedIsAnsweredNotRegistered) {
  JobGraphBuilder builder({{"a", 1}});
  auto [job, worker] = startOnWorkerA(builder, 1, 1);
  auto binding = registeredAs(workerA_);
  port_.replaced.insert(binding->bound().registrationId);
  auto old = KJ_ASSERT_NONNULL(masters_->gateway(job, kj::mv(binding)));
  auto request = old.heartbeatRequest();
  request.setEpoch(kEpoch);
  wire::setWireId(request.initResourceId(), workerA_);
  request.initPayload();
  auto answered = loop_.run(request.send());
  ASSERT_TRUE(answered.hasFailure());
  EXPECT_TRUE(answered.getFailure().isNotRegistered()) << answered.getFailure().getMessage().cStr();
  EXPECT_EQ(port_.refusals.total(), 0u);
}

}  // namespace
}  // namespace regent::jobmaster

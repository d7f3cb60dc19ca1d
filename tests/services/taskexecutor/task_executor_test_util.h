// The fixture of the TaskExecutor's tests: a TaskExecutor against an in-process fake leading
// master (fake_master_test_util.h) over loopback RPC, following it by its address or through a
// leader record the test writes (tests/client/hand_retrieval_test_util.h), and the calls the
// master makes on the worker's gateway. Its attempts run through the runner withRunner() gives:
// a fake in task_executor_test (unit), real processes in task_executor_itest. The behaviours
// that hold whatever runs the attempts are written once, over TaskExecutorRunnerTest
// (task_executor_runner_cases.cc), and run by both binaries, each with its own runner.
#pragma once

#include <gtest/gtest.h>
#include <kj/async.h>
#include <kj/debug.h>

#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "client/leader_client.h"
#include "common/event_loop.h"
#include "common/event_sink.h"
#include "common/log_event_sink.h"
#include "rpc/rpc_server.h"
#include "rpc/wire_ids.h"
#include "services/taskexecutor/task_executor.h"
#include "services/taskexecutor/task_runner.h"
#include "tests/client/hand_retrieval_test_util.h"
#include "tests/common/logging_test_util.h"
#include "tests/fixtures/loop_wait_test_util.h"
#include "tests/services/taskexecutor/fake_master_test_util.h"

namespace regent::taskexecutor {

using testing::FakeAttemptState;
using testing::FakeMasterBootstrap;
using testing::FakeMasterState;
using testing::HandRetrieval;
using testing::runLoopUntil;

inline constexpr Duration kBound{10000};
inline const ResourceId kWorker(0x1234, 0x5678);
inline const JobId kJob(1, 1);
inline const JobId kOtherJob(2, 2);
inline const AllocationId kAllocation(10, 1);
inline const AllocationId kOtherAllocation(10, 2);
inline const AttemptId kAttempt(20, 1);
inline const AttemptId kOtherAttempt(20, 2);
inline const AttemptId kThirdAttempt(20, 3);

class TaskExecutorTestBase : public DefaultLoggerTest {
 protected:
  ~TaskExecutorTestBase() noexcept override = default;

  void SetUp() override { server_ = listen(master_); }

  // A fake master on a free loopback port; `master` names that address.
  kj::Own<rpc::RpcServer> listen(std::shared_ptr<FakeMasterState> master) {
    auto listening = loop_.run(rpc::RpcServer::listen(
        loop_.io().getNetwork(), loop_.timer(), "127.0.0.1:0", rpc::RpcOptions{},
        [master](const rpc::RpcPeer&) -> capnp::Capability::Client {
          return kj::heap<FakeMasterBootstrap>(master);
        }));
    if (!listening.ok()) throw std::runtime_error(listening.error().message);
    master->rpcAddress = "127.0.0.1:" + std::to_string(listening.value()->port());
    return kj::mv(listening).value();
  }

  static leader::LeaderInfo leaderOf(const FakeMasterState& master) {
    leader::LeaderInfo leader;
    leader.epoch = master.epoch;
    leader.masterId = master.masterId;
    leader.rpcAddress = master.rpcAddress;
    return leader;
  }

  TaskExecutorOptions options(uint32_t slots = 3) {
    TaskExecutorOptions options;
    options.resourceId = kWorker;
    options.host = "worker-host";
    options.dataAddress = "127.0.0.1:1";
    options.httpAddress = "127.0.0.1:1";
    options.version = "test";
    options.pid = 4242;
    options.slots = slots;
    options.slotProfile = SlotProfile{1000, 1 << 20};
    options.registrationInitial = Duration(5);
    options.registrationMax = Duration(50);
    return options;
  }

  // The LeaderClient options the worker process sets from the TaskExecutor's.
  static client::LeaderClientOptions leaderOptions(const TaskExecutorOptions& with) {
    client::LeaderClientOptions options;
    options.rpc.callTimeout = Duration(5000);
    options.backoffInitial = with.registrationInitial;
    options.backoffMax = with.registrationMax;
    options.previousLeaderLinger = with.previousLeaderLinger;
    return options;
  }

  // A started TaskExecutor following the fake master by its address.
  TaskExecutor& start(TaskExecutorOptions with) {
    leaders_ = kj::heap<client::LeaderClient>(loop_.io().getNetwork(), loop_.timer(),
                                              master_->rpcAddress, leaderOptions(with));
    return startWith(std::move(with));
  }

  // A started TaskExecutor following the leader record `current_` (see HandRetrieval).
  TaskExecutor& startFollowing(TaskExecutorOptions with) {
    auto retrieval = kj::heap<HandRetrieval>(current_, reads_, readError_);
    retrieval_ = retrieval.get();
    leaders_ = kj::heap<client::LeaderClient>(loop_.io().getNetwork(), loop_.timer(),
                                              kj::mv(retrieval), leaderOptions(with));
    return startWith(std::move(with));
  }

  TaskExecutor& startWith(TaskExecutorOptions with) {
    executor_ =
        kj::heap<TaskExecutor>(loop_.timer(), *leaders_, *runner_, *events_, std::move(with));
    executor_->start();
    return *executor_;
  }

  // The TaskRunner the executor runs its attempts through (a NoTaskRunner until then). Call
  // before start().
  virtual void withRunner() = 0;

  TaskExecutor& startRegistered(TaskExecutorOptions with) {
    TaskExecutor& executor = start(std::move(with));
    EXPECT_TRUE(runLoopUntil(
        loop_, [&] { return executor.registered(); }, kBound))
        << "timed out waiting for the first registration";
    return executor;
  }

  // The Failure a call of the worker's gateway (as the fake master holds it) completed with.
  template <typename Results>
  static std::optional<rpc::CallFailure> failureOf(const capnp::Response<Results>& response) {
    if (!response.hasFailure()) return std::nullopt;
    return rpc::CallFailure::from(response.getFailure());
  }

  std::optional<rpc::CallFailure> requestSlot(uint64_t epoch, uint32_t index, JobId job,
                                              AllocationId allocation) {
    auto request = master_->taskExecutor().requestSlotRequest();
    request.setEpoch(epoch);
    auto slotId = request.initSlotId();
    wire::setWireId(slotId.initResourceId(), kWorker);
    slotId.setSlotIndex(index);
    wire::setWireId(request.initJobId(), job);
    wire::setWireId(request.initAllocationId(), allocation);
    return failureOf(loop_.run(request.send()));
  }

  // Slots 0 and 1 allocated to kJob (kAllocation, kOtherAllocation) in epoch 1 by two
  // requestSlot calls sent together, so that the worker reads both before it offers.
  void requestTwoSlotsTogether() {
    auto first = master_->taskExecutor().requestSlotRequest();
    auto second = master_->taskExecutor().requestSlotRequest();
    uint32_t index = 0;
    for (auto* request : {&first, &second}) {
      request->setEpoch(1);
      auto slotId = request->initSlotId();
      wire::setWireId(slotId.initResourceId(), kWorker);
      slotId.setSlotIndex(index);
      wire::setWireId(request->initJobId(), kJob);
      wire::setWireId(request->initAllocationId(), index == 0 ? kAllocation : kOtherAllocation);
      ++index;
    }
    loop_.run(
        kj::joinPromises(kj::arr(first.send().ignoreResult(), second.send().ignoreResult())));
  }

  std::optional<rpc::CallFailure> freeSlot(uint64_t epoch, AllocationId allocation) {
    auto request = master_->taskExecutor().freeSlotRequest();
    request.setEpoch(epoch);
    wire::setWireId(request.initAllocationId(), allocation);
    request.setCause("test");
    return failureOf(loop_.run(request.send()));
  }

  std::optional<rpc::CallFailure> submitTask(
      uint64_t epoch, AttemptId attempt, AllocationId allocation, std::vector<std::string> argv,
      JobId job = kJob, std::vector<std::pair<std::string, std::string>> env = {}) {
    auto request = master_->taskExecutor().submitTaskRequest();
    request.setEpoch(epoch);
    auto deployment = request.initDeployment();
    wire::setWireId(deployment.initJobId(), job);
    deployment.setJobName("nightly report");
    wire::setWireId(deployment.initAttemptId(), attempt);
    wire::setWireId(deployment.initAllocationId(), allocation);
    deployment.setVertexName("v");
    deployment.setSubtaskIndex(1);
    deployment.setParallelism(2);
    deployment.setAttemptNumber(3);
    auto list = deployment.initCommand().initArgv(static_cast<unsigned>(argv.size()));
    for (unsigned i = 0; i < argv.size(); ++i) list.set(i, argv[i]);
    auto vars = deployment.getCommand().initEnv(static_cast<unsigned>(env.size()));
    for (unsigned i = 0; i < env.size(); ++i) {
      vars[i].setName(env[i].first);
      vars[i].setValue(env[i].second);
    }
    return failureOf(loop_.run(request.send()));
  }

  // Submits `attempt` of kJob in epoch 1 on `allocation`, with a command that runs until it is
  // cancelled, and waits for its RUNNING update.
  ::testing::AssertionResult submitRunning(AttemptId attempt, AllocationId allocation) {
    if (auto refused = submitTask(1, attempt, allocation, {"sleep", "30"})) {
      return ::testing::AssertionFailure() << "submitTask refused: " << refused->message;
    }
    return waitForUpdates(attempt, 1);
  }

  // Waits until the fake JobMasters received exactly `count` updates of `attempt`.
  ::testing::AssertionResult waitForUpdates(AttemptId attempt, size_t count) {
    if (runLoopUntil(
            loop_, [&] { return updatesOf(attempt).size() == count; }, kBound)) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure()
           << "timed out waiting for " << count << " updates of attempt " << attempt.toHex() << " ("
           << updatesOf(attempt).size() << " arrived)";
  }

  std::optional<rpc::CallFailure> cancelTask(uint64_t epoch, AttemptId attempt) {
    auto request = master_->taskExecutor().cancelTaskRequest();
    request.setEpoch(epoch);
    wire::setWireId(request.initAttemptId(), attempt);
    return failureOf(loop_.run(request.send()));
  }

  std::optional<rpc::CallFailure> jobMasterHeartbeat(uint64_t epoch, JobId job) {
    auto request = master_->taskExecutor().heartbeatRequest();
    request.setEpoch(epoch);
    wire::setWireId(request.initSender().initJobMaster(), job);
    return failureOf(loop_.run(request.send()));
  }

  // The updates the fake JobMasters received for `attempt`, in order.
  std::vector<FakeAttemptState> updatesOf(AttemptId attempt) const {
    return updatesOf(attempt, *master_);
  }
  static std::vector<FakeAttemptState> updatesOf(AttemptId attempt, const FakeMasterState& master) {
    std::vector<FakeAttemptState> out;
    for (const auto& update : master.updates) {
      if (update.state.attempt == attempt) out.push_back(update.state);
    }
    return out;
  }

  // Another leader (epoch 2, "next-master", unless told), listening; not announced yet.
  std::shared_ptr<FakeMasterState> listenNext(uint64_t epoch = 2,
                                              const std::string& masterId = "next-master") {
    auto next = std::make_shared<FakeMasterState>();
    next->masterId = masterId;
    next->epoch = epoch;
    nextServers_.push_back(listen(next));
    return next;
  }

  // Registered with master_ (epoch 1) through the leader record, with slot 0 allocated to kJob
  // as kAllocation and slot 1 as kOtherAllocation, both accepted.
  TaskExecutor& startFollowingWithSlots(TaskExecutorOptions with) {
    withRunner();
    *current_ = leaderOf(*master_);
    TaskExecutor& executor = startFollowing(std::move(with));
    EXPECT_TRUE(runLoopUntil(
        loop_, [&] { return executor.registered(); }, kBound))
        << "timed out waiting for the registration with the first leader";
    EXPECT_FALSE(requestSlot(1, 0, kJob, kAllocation));
    EXPECT_FALSE(requestSlot(1, 1, kJob, kOtherAllocation));
    EXPECT_TRUE(runLoopUntil(
        loop_,
        [&] {
          return executor.slots()[0].acceptedEpoch == 1 && executor.slots()[1].acceptedEpoch == 1;
        },
        kBound))
        << "timed out waiting for both slots accepted";
    return executor;
  }

  // The leader of epoch 1 is gone and no leader is known; a call of the next term (epoch 2)
  // reached the worker first, so it no longer delivers anything to epoch 1.
  void loseTheLeader(TaskExecutor& executor) {
    *current_ = std::nullopt;
    EXPECT_FALSE(jobMasterHeartbeat(2, kJob));
    EXPECT_TRUE(runLoopUntil(
        loop_, [&] { return !executor.registered(); }, kBound))
        << "timed out waiting for the registration with epoch 1 gone";
  }

  // The leader record names `next`.
  void announce(const FakeMasterState& next) {
    *current_ = leaderOf(next);
    retrieval_->announce();
  }

  // Registered, with slot `index` allocated to kJob as `allocation` and accepted.
  TaskExecutor& startWithAcceptedSlot(uint32_t index, AllocationId allocation) {
    return startWithAcceptedSlot(index, allocation, options(2));
  }
  TaskExecutor& startWithAcceptedSlot(uint32_t index, AllocationId allocation,
                                      TaskExecutorOptions with) {
    withRunner();
    TaskExecutor& executor = startRegistered(std::move(with));
    EXPECT_FALSE(requestSlot(master_->epoch, index, kJob, allocation));
    EXPECT_TRUE(runLoopUntil(
        loop_, [&] { return executor.slots()[index].acceptedEpoch == master_->epoch; }, kBound))
        << "timed out waiting for the slot accepted";
    return executor;
  }

  std::optional<rpc::CallFailure> resourceManagerHeartbeat(uint64_t epoch) {
    auto request = master_->taskExecutor().heartbeatRequest();
    request.setEpoch(epoch);
    request.initSender().setResourceManager();
    return failureOf(loop_.run(request.send()));
  }

  std::optional<rpc::CallFailure> disconnectJobMaster(uint64_t epoch, JobId job) {
    auto request = master_->taskExecutor().disconnectRequest();
    request.setEpoch(epoch);
    wire::setWireId(request.initSender().initJobMaster(), job);
    request.setCause("job finished");
    return failureOf(loop_.run(request.send()));
  }

  // Outlive the loop, which may hold the executor's gateway: silent unless a test logs events.
  NullEventSink noEvents_;
  LogEventSink logEvents_;
  EventSink* events_ = &noEvents_;
  EventLoop loop_;
  std::shared_ptr<FakeMasterState> master_ = std::make_shared<FakeMasterState>();
  kj::Own<rpc::RpcServer> server_;
  std::shared_ptr<std::optional<leader::LeaderInfo>> current_ =
      std::make_shared<std::optional<leader::LeaderInfo>>();
  std::shared_ptr<int> reads_ = std::make_shared<int>(0);
  std::shared_ptr<std::optional<Error>> readError_ = std::make_shared<std::optional<Error>>();
  HandRetrieval* retrieval_ = nullptr;  // Owned by leaders_.
  kj::Own<client::LeaderClient> leaders_;
  std::vector<kj::Own<rpc::RpcServer>> nextServers_;       // listenNext(); outlive the executor.
  kj::Own<TaskRunner> runner_ = kj::heap<NoTaskRunner>();  // Outlives the executor.
  kj::Own<TaskExecutor> executor_;  // Declared last: destroyed before the client it uses.
};

// What runs the attempts of TaskExecutorRunnerTest, and how a test makes them end: the fake
// runner in task_executor_test (no process), real processes in task_executor_itest. One driver
// per test; the fixture destroys the runner before the driver.
class TaskRunnerDriver {
 public:
  virtual ~TaskRunnerDriver() = default;
  // The runner; called once, before the TaskExecutor starts. The driver keeps a pointer to it.
  virtual kj::Own<TaskRunner> makeRunner(EventLoop& loop) = 0;
  // The attempt's command ends with `exitCode` (a command that ends so by itself, such as
  // {"sh", "-c", "exit 3"}): the fake runner is told to end it; a real process needs nothing.
  virtual void letEnd(const AttemptId& attempt, int32_t exitCode) = 0;
  // A command after whose end environmentOf() tells the environment it ran with.
  virtual std::vector<std::string> environmentCommand() = 0;
  // The environment (name -> value, the last of a name winning) the attempt's command ran with.
  virtual std::map<std::string, std::string> environmentOf(const AttemptId& attempt) = 0;
  // What the worker does first when it stops: every running task killed, start() refused.
  virtual kj::Promise<void> killAll() = 0;
};

// How an instantiation of TaskExecutorRunnerTest makes its driver (its test parameter).
struct TaskRunnerDriverFactory {
  const char* runner;  // The runner's name, the last part of each test's name.
  std::unique_ptr<TaskRunnerDriver> (*make)();
};
inline void PrintTo(const TaskRunnerDriverFactory& factory, std::ostream* out) {
  *out << factory.runner;
}
// The factory of a default-constructed `Driver`, named `runner`.
template <typename Driver>
TaskRunnerDriverFactory driverFactoryOf(const char* runner) {
  return {runner, []() -> std::unique_ptr<TaskRunnerDriver> { return std::make_unique<Driver>(); }};
}

// The environment `variables` ("NAME=value" each) make, the last of a name winning.
inline std::map<std::string, std::string> environmentFrom(
    const std::vector<std::string>& variables) {
  std::map<std::string, std::string> env;
  for (const std::string& variable : variables) {
    const auto eq = variable.find('=');
    if (eq != std::string::npos) env[variable.substr(0, eq)] = variable.substr(eq + 1);
  }
  return env;
}

// The fixture of the behaviours written once for every runner (task_executor_runner_cases.cc);
// a test binary runs them with INSTANTIATE_TEST_SUITE_P(<Prefix>, TaskExecutorRunnerTest,
// ::testing::Values(driverFactoryOf<Driver>("Runner")), taskRunnerName).
class TaskExecutorRunnerTest : public TaskExecutorTestBase,
                               public ::testing::WithParamInterface<TaskRunnerDriverFactory> {
 protected:
  ~TaskExecutorRunnerTest() noexcept override {
    executor_ = nullptr;  // Before the runner, and the runner before its driver.
    runner_ = nullptr;
  }

  void withRunner() override {
    driver_ = GetParam().make();
    runner_ = driver_->makeRunner(loop_);
  }

  TaskRunnerDriver& driver() {
    KJ_REQUIRE(driver_ != nullptr, "withRunner() first");
    return *driver_;
  }

  std::unique_ptr<TaskRunnerDriver> driver_;
};

// The tests' names end with their runner's name rather than an index.
inline std::string taskRunnerName(const ::testing::TestParamInfo<TaskRunnerDriverFactory>& info) {
  return info.param.runner;
}

// The offered attempt `attempt` in `offer`, or nullopt.
inline std::optional<FakeAttemptState> offeredAttempt(const testing::FakeOffer& offer,
                                                      AttemptId attempt) {
  for (const auto& slot : offer.slots) {
    for (const auto& running : slot.running) {
      if (running.attempt == attempt) return running;
    }
  }
  return std::nullopt;
}

}  // namespace regent::taskexecutor

// TaskExecutor against an in-process fake leading master over loopback RPC
// (task_executor_test_util.h), its attempts run by a fake TaskRunner
// (fake_task_runner_test_util.h): no process is started. It registers and reports every slot,
// answers the ResourceManager's heartbeats with a report, registers again after silence,
// notRegistered, a higher epoch; its epoch gate refuses lower epochs before any handler runs;
// requestSlot / freeSlot / disconnect(jobMaster) keep the slots; allocations survive registering
// again; disconnect() calls ResourceManagerGateway.disconnect once; the event lines of
// docs/operations.md. Jobs: allocated slots are offered to the job's JobMaster (freed when the
// job is unknown or the offer declined, retried while it is unavailable, offered again with
// their running attempts to a new epoch); submitTask hands the runner the deployed command
// once; freeSlot, a JobMaster's disconnect and a notFound update cancel the attempt; a JobMaster
// heartbeat is answered with the attempts held. Across a leader change: updates
// produced while no leader is reachable are kept and reach the next leader's JobMaster after the
// answer to the offer (which lists the running and the ended attempts), in order and once; a job
// the next leader does not know is cancelled, freed and its updates dropped;
// worker.update-buffer.max drops the oldest update with a warning; `unavailable` answers are
// retried; a deposed leader can change nothing. Holding a credential, it registers only with a
// master that proves itself, and its gate never moves to an unproven master's epoch. What holds
// with any runner (a task's updates in order, its environment, an exit code, cancelTask, the
// worker killing its tasks to stop) is written once in task_executor_runner_cases.cc and run
// here with the fake runner, and in task_executor_itest with real processes.
#include "services/taskexecutor/task_executor.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "common/event_line.h"
#include "rpc/wire_ids.h"
#include "tests/services/taskexecutor/fake_task_runner_test_util.h"
#include "tests/services/taskexecutor/task_executor_test_util.h"

namespace regent::taskexecutor {
namespace {

using testing::FakeTaskRunner;

class TaskExecutorTest : public TaskExecutorTestBase {
 protected:
  void withRunner() override {
    auto fake = kj::heap<FakeTaskRunner>();
    fake_ = fake.get();
    runner_ = kj::mv(fake);
  }

  FakeTaskRunner& fake() {
    KJ_REQUIRE(fake_ != nullptr, "withRunner() first");
    return *fake_;
  }

  // A leader of epoch 2 takes over: the worker registers with it and offers its allocated slot
  // `slot` again. Returns that offer.
  const testing::FakeOffer& offeredToEpoch2(TaskExecutor& executor, uint32_t slot) {
    master_->epoch = 2;
    EXPECT_FALSE(resourceManagerHeartbeat(2));
    EXPECT_TRUE(runLoopUntil(
        loop_, [&] { return executor.slots()[slot].acceptedEpoch == 2; }, kBound))
        << "timed out waiting for the offer to epoch 2";
    KJ_REQUIRE(!master_->offers.empty());
    return master_->offers.back();
  }

  FakeTaskRunner* fake_ = nullptr;  // Owned by runner_.
};

// The behaviours written once for every runner (task_executor_runner_cases.cc), with the fake
// runner: a task's command never runs; it ends when the test says, and its environment is the
// one start() was given.
class FakeTaskRunnerDriver final : public TaskRunnerDriver {
 public:
  kj::Own<TaskRunner> makeRunner(EventLoop&) override {
    auto fake = kj::heap<FakeTaskRunner>();
    fake_ = fake.get();
    return fake;
  }

  void letEnd(const AttemptId& attempt, int32_t exitCode) override {
    fake_->finish(attempt, exitCode);
  }

  std::vector<std::string> environmentCommand() override { return {"env"}; }

  std::map<std::string, std::string> environmentOf(const AttemptId& attempt) override {
    const TaskSpec* spec = fake_->spec(attempt);
    return spec == nullptr ? std::map<std::string, std::string>{} : environmentFrom(spec->env);
  }

  kj::Promise<void> killAll() override { return fake_->killAll(); }

 private:
  FakeTaskRunner* fake_ = nullptr;  // Owned by the fixture's runner_.
};

INSTANTIATE_TEST_SUITE_P(Fake, TaskExecutorRunnerTest,
                         ::testing::Values(driverFactoryOf<FakeTaskRunnerDriver>("FakeTaskRunner")),
                         taskRunnerName);

TEST_F(TaskExecutorTest, RegistersAndReportsEverySlot) {
  master_->epoch = 3;
  TaskExecutor& executor = startRegistered(options(3));
  ASSERT_EQ(master_->registrations.size(), 1u);
  const auto& registration = master_->registrations[0];
  EXPECT_EQ(registration.epoch, 3u);
  EXPECT_EQ(registration.resourceId, kWorker);
  EXPECT_EQ(registration.host, "worker-host");
  EXPECT_EQ(registration.slots, 3u);
  EXPECT_EQ(registration.pid, 4242u);
  ASSERT_EQ(master_->slotReports.size(), 1u);
  const auto& report = master_->slotReports[0];
  EXPECT_EQ(report.epoch, 3u);
  EXPECT_EQ(report.registrationId, registration.registrationId);
  ASSERT_EQ(report.slots.size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(report.slots[i].index, i);
    EXPECT_FALSE(report.slots[i].allocation);
  }
  EXPECT_EQ(executor.registeredEpoch(), 3u);
  EXPECT_EQ(executor.highestEpoch(), 3u) << "the registration's epoch raises the gate";
  EXPECT_EQ(executor.registrationId(), registration.registrationId);
  EXPECT_EQ(executor.counters().registrations, 1u);
  EXPECT_TRUE(executor.lastRegistrationError().empty());
}

TEST_F(TaskExecutorTest, AnswersResourceManagerHeartbeatsWithAReport) {
  TaskExecutor& executor = startRegistered(options(2));
  EXPECT_FALSE(resourceManagerHeartbeat(1));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return master_->heartbeats.size() == 1; }, kBound))
      << "timed out waiting for the heartbeat answer";
  EXPECT_EQ(master_->heartbeats[0].epoch, 1u);
  EXPECT_EQ(master_->heartbeats[0].resourceId, kWorker);
  EXPECT_EQ(master_->heartbeats[0].slots.size(), 2u);
  EXPECT_EQ(executor.counters().heartbeatsAnswered, 1u);
  EXPECT_TRUE(executor.registered());
}

TEST_F(TaskExecutorTest, RegistersAgainAfterResourceManagerSilenceKeepingItsAllocations) {
  master_->heartbeatTimeoutMs = 300;
  TaskExecutor& executor = startRegistered(options(3));
  ASSERT_FALSE(requestSlot(1, 1, kJob, kAllocation));
  // No heartbeat comes: after 300 ms the worker considers the ResourceManager lost.
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return master_->slotReports.size() >= 2; }, kBound))
      << "timed out waiting for the second registration";
  EXPECT_GE(executor.counters().resourceManagerLost, 1u);
  const auto& report = master_->slotReports[1];
  ASSERT_EQ(report.slots.size(), 3u);
  EXPECT_EQ(report.slots[1].allocation, kAllocation);
  EXPECT_EQ(report.slots[1].job, kJob);
  EXPECT_FALSE(report.slots[0].allocation);
  EXPECT_EQ(executor.slots()[1].allocation, kAllocation);
}

TEST_F(TaskExecutorTest, RegistersAgainWhenTheResourceManagerAnswersNotRegistered) {
  TaskExecutor& executor = startRegistered(options(1));
  master_->notRegisteredOnce = true;
  EXPECT_FALSE(resourceManagerHeartbeat(1));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return master_->slotReports.size() == 2 && executor.registered(); }, kBound))
      << "timed out waiting for the second registration";
  EXPECT_EQ(master_->registrations.size(), 2u);
  EXPECT_EQ(executor.counters().resourceManagerLost, 1u);
  EXPECT_EQ(executor.registrationId(), master_->registrations[1].registrationId);
}

TEST_F(TaskExecutorTest, ALostLinkToTheResourceManagerMakesItRegisterAgain) {
  TaskExecutor& executor = startRegistered(options(1));
  master_->heartbeatDisconnectedOnce = true;
  EXPECT_FALSE(resourceManagerHeartbeat(1));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return master_->slotReports.size() == 2 && executor.registered(); }, kBound))
      << "timed out waiting for the second registration";
  EXPECT_EQ(executor.counters().resourceManagerLost, 1u);
}

TEST_F(TaskExecutorTest, ASlotReportAnsweredNotRegisteredIsFollowedByANewRegistrationAtOnce) {
  master_->slotReportNotRegisteredOnce = true;
  auto with = options(1);
  with.registrationMax = Duration(600000);  // Only the refusals that cannot pass wait this long.
  TaskExecutor& executor = start(std::move(with));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return executor.registered(); }, kBound))
      << "timed out waiting for the registration after notRegistered";
  EXPECT_EQ(master_->registrations.size(), 2u);
  EXPECT_EQ(master_->slotReports.size(), 2u);
  EXPECT_EQ(executor.registrationId(), master_->registrations[1].registrationId);
}

TEST_F(TaskExecutorTest, TheEpochGateRefusesALowerEpochBeforeTheHandlerRuns) {
  master_->epoch = 5;
  TaskExecutor& executor = startRegistered(options(2));
  auto refused = requestSlot(4, 0, kJob, kAllocation);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->which, wire::Failure::FENCING);
  EXPECT_FALSE(executor.slots()[0].allocation) << "the handler did not run";
  EXPECT_EQ(executor.fencingCounters().rejected("TaskExecutorGateway.requestSlot"), 1u);
  // The refusal names the highest epoch as expected and the call's epoch as received.
  auto request = master_->taskExecutor().freeSlotRequest();
  request.setEpoch(2);
  auto response = loop_.run(request.send());
  ASSERT_TRUE(response.hasFailure());
  ASSERT_TRUE(response.getFailure().isFencing());
  EXPECT_EQ(response.getFailure().getFencing().getExpected(), 5u);
  EXPECT_EQ(response.getFailure().getFencing().getReceived(), 2u);
  EXPECT_EQ(executor.highestEpoch(), 5u);
  EXPECT_EQ(executor.counters().resourceManagerLost, 0u);
}

TEST_F(TaskExecutorTest, AWorkerStartedByHandRefusesTheLeadersStop) {
  auto stop = [&](uint64_t epoch) {
    auto request = master_->taskExecutor().stopRequest();
    request.setEpoch(epoch);
    request.setCause("idle");
    auto response = loop_.run(request.send());
    return response.hasFailure() ? std::optional<std::string>(
                                       response.getFailure().getMessage().cStr())
                                 : std::nullopt;
  };
  master_->epoch = 3;
  std::vector<std::string> stopped;
  auto with = options(2);
  with.onStopRequested = [&stopped](const std::string& cause) { stopped.push_back(cause); };
  // Started by hand (no provider id): refused, though idle.
  startRegistered(with);
  auto refused = stop(3);
  ASSERT_TRUE(refused);
  EXPECT_NE(refused->find("not started by a resource provider"), std::string::npos) << *refused;
  EXPECT_TRUE(stopped.empty());
}

TEST_F(TaskExecutorTest, AStartedWorkerRefusesTheStopWhileASlotIsAllocatedAndObeysOnceIdle) {
  master_->epoch = 3;
  std::vector<std::string> stopped;
  auto with = options(2);
  with.providerWorkerId = "process:e3-1";
  with.onStopRequested = [&stopped](const std::string& cause) { stopped.push_back(cause); };
  TaskExecutor& executor = startRegistered(with);
  EXPECT_EQ(master_->registrations.back().providerWorkerId, "process:e3-1");
  auto stop = [&](uint64_t epoch) {
    auto request = master_->taskExecutor().stopRequest();
    request.setEpoch(epoch);
    request.setCause("idle");
    auto response = loop_.run(request.send());
    return response.hasFailure() ? std::optional<std::string>(
                                       response.getFailure().getMessage().cStr())
                                 : std::nullopt;
  };
  ASSERT_FALSE(requestSlot(3, 1, kJob, kAllocation));
  auto busy = stop(3);
  ASSERT_TRUE(busy);
  EXPECT_NE(busy->find("is not idle: slot 1 holds allocation"), std::string::npos) << *busy;
  EXPECT_TRUE(stopped.empty());
  // A deposed leader's stop is refused by the epoch gate.
  auto stale = stop(2);
  ASSERT_TRUE(stale);
  EXPECT_TRUE(stopped.empty());
  // Idle again: obeyed, with the cause.
  auto free = master_->taskExecutor().freeSlotRequest();
  free.setEpoch(3);
  wire::setWireId(free.initAllocationId(), kAllocation);
  free.setCause("done");
  ASSERT_FALSE(loop_.run(free.send()).hasFailure());
  ASSERT_TRUE(runLoopUntil(loop_, [&] { return !executor.slots()[1].allocation; }, kBound));
  EXPECT_FALSE(stop(3));
  EXPECT_EQ(stopped, (std::vector<std::string>{"idle"}));
}

TEST_F(TaskExecutorTest, AHigherEpochMakesItRegisterAgainWithThatLeader) {
  master_->epoch = 5;
  TaskExecutor& executor = startRegistered(options(2));
  ASSERT_FALSE(requestSlot(5, 0, kJob, kAllocation));
  master_->epoch = 6;  // A new term: the master now leads epoch 6.
  EXPECT_FALSE(resourceManagerHeartbeat(6));
  EXPECT_EQ(executor.highestEpoch(), 6u);
  EXPECT_FALSE(executor.registered() && executor.registeredEpoch() == 5)
      << "not ready with the deposed term once a higher epoch called";
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return executor.registered() && executor.registeredEpoch() == 6; }, kBound))
      << "timed out waiting for the registration with epoch 6";
  EXPECT_GE(executor.counters().leaderChanges, 1u);
  EXPECT_EQ(master_->registrations.back().epoch, 6u);
  EXPECT_EQ(master_->slotReports.back().slots[0].allocation, kAllocation);
  // The deposed term's calls are refused from now on.
  auto refused = requestSlot(5, 1, kJob, kOtherAllocation);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->which, wire::Failure::FENCING);
  EXPECT_FALSE(executor.slots()[1].allocation);
}

TEST_F(TaskExecutorTest, ANewLeaderIsRegisteredWithAndTheDeposedLeadersCallsMeetTheGate) {
  auto next = std::make_shared<FakeMasterState>();
  next->masterId = "next-master";
  next->epoch = 2;
  auto nextServer = listen(next);
  *current_ = leaderOf(*master_);
  TaskExecutor& executor = startFollowing(options(2));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return executor.registered(); }, kBound))
      << "timed out waiting for the registration with the first leader";
  EXPECT_EQ(executor.registeredEpoch(), 1u);
  ASSERT_FALSE(requestSlot(1, 0, kJob, kAllocation));

  // The leader record names the next leader; the deposed one does not know yet.
  *current_ = leaderOf(*next);
  retrieval_->announce();
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return executor.registered() && executor.registeredEpoch() == 2; }, kBound))
      << "timed out waiting for the registration with the next leader";
  EXPECT_EQ(executor.counters().leaderChanges, 1u);
  EXPECT_EQ(executor.highestEpoch(), 2u);
  ASSERT_EQ(next->slotReports.size(), 1u);
  EXPECT_EQ(next->slotReports[0].slots[0].allocation, kAllocation);

  // The deposed leader's call still reaches the worker (the previous connection lingers) and
  // the gate refuses it with the new epoch; nothing changes.
  auto request = master_->taskExecutor().freeSlotRequest();
  request.setEpoch(1);
  wire::setWireId(request.initAllocationId(), kAllocation);
  auto response = loop_.run(request.send());
  ASSERT_TRUE(response.hasFailure());
  ASSERT_TRUE(response.getFailure().isFencing());
  EXPECT_EQ(response.getFailure().getFencing().getExpected(), 2u);
  EXPECT_EQ(response.getFailure().getFencing().getReceived(), 1u);
  EXPECT_EQ(executor.slots()[0].allocation, kAllocation);
  EXPECT_EQ(executor.fencingCounters().rejected("TaskExecutorGateway.freeSlot"), 1u);
  executor_ = nullptr;  // Before the next master's server goes.
  leaders_ = nullptr;
}

TEST_F(TaskExecutorTest, LogsItsEventLines) {
  captureLog();
  auto with = options(1);
  events_ = &logEvents_;
  TaskExecutor& executor = startRegistered(std::move(with));
  ASSERT_TRUE(requestSlot(0, 0, kJob, kAllocation));  // Below the gate.
  master_->notRegisteredOnce = true;
  EXPECT_FALSE(resourceManagerHeartbeat(1));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return master_->registrations.size() == 2 && executor.registered(); }, kBound))
      << "timed out waiting for the second registration";
  loop_.run(executor.disconnect("SIGTERM"));

  const std::string worker = kWorker.toHex();
  auto registered = capturedEvent("worker registered");
  ASSERT_TRUE(registered) << capturedLog();
  EXPECT_EQ(registered->get("resource_id"), worker);
  EXPECT_EQ(registered->getUint("epoch"), 1u);
  EXPECT_EQ(registered->get("registration_id"), master_->registrations[0].registrationId.toHex());
  EXPECT_EQ(registered->get("leader"), "fake-master");
  EXPECT_EQ(registered->getUint("attempts"), 1u);
  EXPECT_TRUE(registered->getInt("mono_us"));
  EXPECT_TRUE(registered->getInt("wall_ms"));

  auto refused = capturedEvent("epoch gate refused");
  ASSERT_TRUE(refused) << capturedLog();
  EXPECT_EQ(refused->get("resource_id"), worker);
  EXPECT_EQ(refused->get("method"), "TaskExecutorGateway.requestSlot");
  EXPECT_EQ(refused->getUint("received"), 0u);
  EXPECT_EQ(refused->getUint("highest"), 1u);

  auto lost = capturedEvent("resource manager lost");
  ASSERT_TRUE(lost) << capturedLog();
  EXPECT_EQ(lost->get("resource_id"), worker);
  EXPECT_EQ(lost->getUint("epoch"), 1u);
  EXPECT_NE(lost->get("reason")->find("does not know this registration"), std::string::npos);

  auto disconnected = capturedEvent("worker disconnected");
  ASSERT_TRUE(disconnected) << capturedLog();
  EXPECT_EQ(disconnected->getUint("epoch"), 1u);
  EXPECT_EQ(disconnected->get("cause"), "SIGTERM");
  EXPECT_TRUE(disconnected->getInt("wall_ms"));
}

TEST_F(TaskExecutorTest, RequestSlotAndFreeSlotKeepOneAllocationPerSlot) {
  TaskExecutor& executor = startRegistered(options(2));
  auto missing = requestSlot(1, 2, kJob, kAllocation);
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->which, wire::Failure::NOT_FOUND);

  ASSERT_FALSE(requestSlot(1, 0, kJob, kAllocation));
  EXPECT_EQ(executor.slots()[0].allocation, kAllocation);
  EXPECT_EQ(executor.slots()[0].job, kJob);
  EXPECT_FALSE(requestSlot(1, 0, kJob, kAllocation)) << "the same allocation again succeeds";

  auto taken = requestSlot(1, 0, kOtherJob, kOtherAllocation);
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->which, wire::Failure::FAILED_PRECONDITION);
  EXPECT_NE(taken->message.find(kAllocation.toHex()), std::string::npos) << taken->message;
  EXPECT_EQ(executor.slots()[0].allocation, kAllocation);

  EXPECT_FALSE(freeSlot(1, kAllocation));
  EXPECT_FALSE(executor.slots()[0].allocation);
  EXPECT_FALSE(executor.slots()[0].job);
  EXPECT_FALSE(freeSlot(1, kOtherAllocation)) << "freeing an unknown allocation succeeds";

  // disconnect(jobMaster) frees that job's slots only.
  ASSERT_FALSE(requestSlot(1, 0, kJob, kAllocation));
  ASSERT_FALSE(requestSlot(1, 1, kOtherJob, kOtherAllocation));
  EXPECT_FALSE(disconnectJobMaster(1, kJob));
  EXPECT_FALSE(executor.slots()[0].allocation);
  EXPECT_EQ(executor.slots()[1].allocation, kOtherAllocation);
  EXPECT_TRUE(executor.registered()) << "a JobMaster's disconnect is not the ResourceManager's";
}

// The slot benchmark's simulated workers: a NoTaskRunner, so no offers and no tasks.
TEST_F(TaskExecutorTest, WithoutATaskRunnerItOffersNoSlotsAndRunsNoTasks) {
  TaskExecutor& executor = startRegistered(options(1));
  ASSERT_FALSE(requestSlot(1, 0, kJob, kAllocation));
  auto refused = submitTask(1, kAttempt, kAllocation, {"true"});
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->which, wire::Failure::FAILED_PRECONDITION);
  EXPECT_EQ(refused->message, "this worker runs no tasks");
  // An offer would be the first call to the job's JobMaster, scheduled in the turn requestSlot
  // ran in; the answer to a JobMaster heartbeat sent afterwards goes the same way, after it.
  EXPECT_FALSE(jobMasterHeartbeat(1, kJob));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return master_->jobMasterHeartbeats.size() == 1; }, kBound))
      << "timed out waiting for the JobMaster heartbeat's answer";
  EXPECT_TRUE(master_->offers.empty());
  EXPECT_EQ(master_->jobMasterCalls.size(), 1u) << "the heartbeat's, and no offer's";
  EXPECT_EQ(executor.counters().heartbeatsAnswered, 0u);
  EXPECT_EQ(executor.slots()[0].allocation, kAllocation);
}

TEST_F(TaskExecutorTest, AnAllocatedSlotIsOfferedToTheJobsJobMaster) {
  withRunner();
  master_->epoch = 4;
  TaskExecutor& executor = startRegistered(options(3));
  ASSERT_FALSE(requestSlot(4, 2, kJob, kAllocation));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return executor.slots()[2].acceptedEpoch == 4; }, kBound))
      << "timed out waiting for the slot accepted";
  ASSERT_EQ(master_->offers.size(), 1u);
  const auto& offer = master_->offers[0];
  EXPECT_EQ(offer.epoch, 4u);
  EXPECT_EQ(offer.job, kJob);
  EXPECT_EQ(offer.resourceId, kWorker);
  ASSERT_EQ(offer.slots.size(), 1u);
  EXPECT_EQ(offer.slots[0].allocation, kAllocation);
  EXPECT_EQ(offer.slots[0].slotIndex, 2u);
  EXPECT_TRUE(offer.slots[0].running.empty());
  ASSERT_EQ(master_->jobMasterCalls.size(), 1u);
  EXPECT_EQ(master_->jobMasterCalls[0], std::make_pair(uint64_t{4}, kJob));
  // The same allocation again is not offered again: an offer would be sent in the turn
  // requestSlot ran in, before the answer to a JobMaster heartbeat sent afterwards.
  ASSERT_FALSE(requestSlot(4, 2, kJob, kAllocation));
  EXPECT_FALSE(jobMasterHeartbeat(4, kJob));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return master_->jobMasterHeartbeats.size() == 1; }, kBound))
      << "timed out waiting for the JobMaster heartbeat's answer";
  EXPECT_EQ(master_->offers.size(), 1u);
}

TEST_F(TaskExecutorTest, TheSlotsOfAJobAllocatedTogetherAreOfferedTogether) {
  withRunner();
  TaskExecutor& executor = startRegistered(options(3));
  requestTwoSlotsTogether();
  ASSERT_TRUE(runLoopUntil(
      loop_,
      [&] {
        return executor.slots()[1].acceptedEpoch == 1 && executor.slots()[0].acceptedEpoch == 1;
      },
      kBound))
      << "timed out waiting for both slots accepted";
  size_t offered = 0;
  for (const auto& offer : master_->offers) offered += offer.slots.size();
  EXPECT_EQ(offered, 2u) << "each slot offered once";
}

// The JobMaster refuses a whole offer (permissionDenied) for one slot it does not grant: the
// worker then offers the slots one at a time and frees only the refused one; the other stays the
// job's (it may carry a FINISHED end not stored yet).
TEST_F(TaskExecutorTest, AnOfferRefusedForOneOfItsSlotsFreesOnlyThatSlot) {
  withRunner();
  master_->refusedAllocations.insert(kOtherAllocation);
  TaskExecutor& executor = startRegistered(options(3));
  requestTwoSlotsTogether();
  ASSERT_TRUE(runLoopUntil(
      loop_,
      [&] { return executor.slots()[0].acceptedEpoch == 1 && !executor.slots()[1].allocation; },
      kBound))
      << "timed out waiting for the granted slot accepted and the refused one freed";
  EXPECT_EQ(executor.slots()[0].allocation, kAllocation);
  EXPECT_EQ(executor.slots()[0].job, kJob);
  // The pair once (refused), then each alone: the granted one, then the refused one.
  ASSERT_EQ(master_->offers.size(), 3u);
  EXPECT_EQ(master_->offers[0].slots.size(), 2u);
  ASSERT_EQ(master_->offers[1].slots.size(), 1u);
  EXPECT_EQ(master_->offers[1].slots[0].allocation, kAllocation);
  ASSERT_EQ(master_->offers[2].slots.size(), 1u);
  EXPECT_EQ(master_->offers[2].slots[0].allocation, kOtherAllocation);
}

TEST_F(TaskExecutorTest, ASlotOfAJobUnknownToTheLeaderIsFreed) {
  withRunner();
  master_->unknownJobs.insert(kJob);
  TaskExecutor& executor = startRegistered(options(2));
  ASSERT_FALSE(requestSlot(1, 0, kJob, kAllocation));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return !executor.slots()[0].allocation; }, kBound))
      << "timed out waiting for the slot freed";
  EXPECT_TRUE(master_->offers.empty());
  EXPECT_FALSE(executor.slots()[0].job);
}

TEST_F(TaskExecutorTest, ASlotTheJobMasterDoesNotAcceptIsFreed) {
  withRunner();
  master_->acceptOffers = false;
  TaskExecutor& executor = startRegistered(options(2));
  ASSERT_FALSE(requestSlot(1, 1, kJob, kAllocation));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return !executor.slots()[1].allocation; }, kBound))
      << "timed out waiting for the slot freed";
  EXPECT_EQ(master_->offers.size(), 1u);
}

TEST_F(TaskExecutorTest, AnUnavailableJobMasterIsAskedAgainUntilTheOfferIsAccepted) {
  withRunner();
  master_->jobMasterUnavailable = 2;
  TaskExecutor& executor = startRegistered(options(1));
  ASSERT_FALSE(requestSlot(1, 0, kJob, kAllocation));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return executor.slots()[0].acceptedEpoch == 1; }, kBound))
      << "timed out waiting for the slot accepted";
  EXPECT_EQ(master_->jobMasterCalls.size(), 3u);
  EXPECT_EQ(master_->offers.size(), 1u);
}

// What the runner is given; what a task sees and the updates it makes, with this runner and with
// real processes: task_executor_runner_cases.cc.
TEST_F(TaskExecutorTest, SubmitTaskHandsTheRunnerTheDeployedCommandOnce) {
  startWithAcceptedSlot(0, kAllocation);
  ASSERT_FALSE(submitTask(1, kAttempt, kAllocation, {"sh", "-c", "echo out"}));
  EXPECT_FALSE(submitTask(1, kAttempt, kAllocation, {"sh", "-c", "echo out"}))
      << "the same attempt again succeeds";
  EXPECT_EQ(fake().started(), std::vector<AttemptId>{kAttempt}) << "started once";
  const TaskSpec* spec = fake().spec(kAttempt);
  ASSERT_TRUE(spec);
  EXPECT_EQ(spec->attempt, kAttempt);
  EXPECT_EQ(spec->job, kJob);
  EXPECT_EQ(spec->argv, (std::vector<std::string>{"sh", "-c", "echo out"}));
  EXPECT_TRUE(spec->workingDir.empty());
  ASSERT_TRUE(waitForUpdates(kAttempt, 1)) << "RUNNING";
  EXPECT_EQ(updatesOf(kAttempt)[0].pid, FakeTaskRunner::pidOf(0)) << "the runner's pid";
  EXPECT_EQ(updatesOf(kAttempt)[0].startedAtMs, FakeTaskRunner::kStartedAtMs);
}

// A worker whose loop stood still (its process paused) may read a submitTask that waited in the
// connection past its JobMaster's rpc.call-timeout; that JobMaster ran the attempt elsewhere. The
// call is refused `unavailable` (a worker fault for the JobMaster) until the loop ran again for a
// while; later ones are taken.
TEST_F(TaskExecutorTest, ASubmitTaskReadRightAfterTheLoopStoodStillIsRefusedUnavailable) {
  LoopStallWatch stalls(loop_.timer(), Duration(300));
  stalls.start();
  TaskExecutorOptions with = options(2);
  with.stalls = &stalls;
  startWithAcceptedSlot(0, kAllocation, with);
  // The stimulus: the loop thread does not run the loop for a second, as if the process were
  // stopped.
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  auto refused = submitTask(1, kAttempt, kAllocation, {"true"});
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->which, wire::Failure::UNAVAILABLE);
  EXPECT_NE(refused->message.find("did not run for"), std::string::npos) << refused->message;
  EXPECT_TRUE(fake().started().empty());
  // Once the loop runs again past two pulses, a submitTask is taken.
  EXPECT_TRUE(runLoopUntil(
      loop_, [&] { return !submitTask(1, kOtherAttempt, kAllocation, {"true"}); }, kBound))
      << "a submitTask was still refused long after the stall";
  EXPECT_EQ(fake().started(), std::vector<AttemptId>{kOtherAttempt});
}

TEST_F(TaskExecutorTest, SubmitTaskRefusesAnAllocationNotHeldForTheJobAndAnEmptyCommand) {
  startWithAcceptedSlot(0, kAllocation);
  auto notHeld = submitTask(1, kAttempt, kOtherAllocation, {"true"});
  ASSERT_TRUE(notHeld);
  EXPECT_EQ(notHeld->which, wire::Failure::NOT_FOUND);
  EXPECT_NE(notHeld->message.find(kOtherAllocation.toHex()), std::string::npos);
  auto otherJob = submitTask(1, kAttempt, kAllocation, {"true"}, kOtherJob);
  ASSERT_TRUE(otherJob);
  EXPECT_EQ(otherJob->which, wire::Failure::NOT_FOUND);
  auto empty = submitTask(1, kAttempt, kAllocation, {});
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->which, wire::Failure::INVALID_ARGUMENT);
  EXPECT_EQ(empty->field, "deployment.command.argv");
  EXPECT_TRUE(fake().started().empty()) << "nothing was started";
  // An attempt submitted afterwards: its RUNNING update is the first to reach the JobMaster.
  ASSERT_FALSE(submitTask(1, kOtherAttempt, kAllocation, {"true"}));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return !master_->updates.empty(); }, kBound))
      << "timed out waiting for the RUNNING update of the attempt submitted afterwards";
  EXPECT_EQ(master_->updates[0].state.attempt, kOtherAttempt) << "nothing ran before it";
  EXPECT_EQ(fake().started(), std::vector<AttemptId>{kOtherAttempt});
}

TEST_F(TaskExecutorTest, FreeSlotCancelsTheAttemptsInTheSlot) {
  TaskExecutor& executor = startWithAcceptedSlot(0, kAllocation);
  ASSERT_TRUE(submitRunning(kAttempt, kAllocation));
  EXPECT_FALSE(freeSlot(1, kAllocation));
  EXPECT_FALSE(executor.slots()[0].allocation);
  ASSERT_TRUE(waitForUpdates(kAttempt, 2)) << "CANCELED";
  EXPECT_EQ(updatesOf(kAttempt)[1].state, wire::ExecutionState::CANCELED);
}

TEST_F(TaskExecutorTest, AJobMastersDisconnectCancelsTheJobsAttemptsAndFreesItsSlots) {
  TaskExecutor& executor = startWithAcceptedSlot(0, kAllocation);
  ASSERT_TRUE(submitRunning(kAttempt, kAllocation));
  EXPECT_FALSE(disconnectJobMaster(1, kJob));
  EXPECT_FALSE(executor.slots()[0].allocation);
  ASSERT_TRUE(waitForUpdates(kAttempt, 2)) << "CANCELED";
  EXPECT_EQ(updatesOf(kAttempt)[1].state, wire::ExecutionState::CANCELED);
}

TEST_F(TaskExecutorTest, AnUpdateTheJobMasterAnswersNotFoundCancelsTheAttempt) {
  master_->unknownAttempts.insert(kAttempt);
  TaskExecutor& executor = startWithAcceptedSlot(0, kAllocation);
  ASSERT_FALSE(submitTask(1, kAttempt, kAllocation, {"sleep", "30"}));
  ASSERT_TRUE(waitForUpdates(kAttempt, 2)) << "RUNNING, then CANCELED";
  EXPECT_EQ(updatesOf(kAttempt)[1].state, wire::ExecutionState::CANCELED);
  EXPECT_EQ(executor.tasksRunning(), 0u);
  EXPECT_EQ(executor.counters().tasksCanceled, 1u);
}

TEST_F(TaskExecutorTest, AJobMasterHeartbeatIsAnsweredWithTheAttemptsHeld) {
  startWithAcceptedSlot(0, kAllocation);
  ASSERT_TRUE(submitRunning(kAttempt, kAllocation));
  EXPECT_FALSE(jobMasterHeartbeat(1, kJob));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return master_->jobMasterHeartbeats.size() == 1; }, kBound))
      << "timed out waiting for the heartbeat answer";
  const auto& heartbeat = master_->jobMasterHeartbeats[0];
  EXPECT_EQ(heartbeat.epoch, 1u);
  EXPECT_EQ(heartbeat.job, kJob);
  EXPECT_EQ(heartbeat.resourceId, kWorker);
  EXPECT_EQ(heartbeat.deployed, std::vector<AttemptId>{kAttempt});
  // The ResourceManager's report lists the attempt in its slot.
  EXPECT_FALSE(resourceManagerHeartbeat(1));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return !master_->heartbeats.empty(); }, kBound))
      << "timed out waiting for the report";
  EXPECT_EQ(master_->heartbeats.back().slots[0].running, std::vector<AttemptId>{kAttempt});
}

// The worker's stop: after its tasks' updates, it tells each job's JobMaster it leaves (the
// JobMaster drops its slots at once), and only then the ResourceManager.
TEST_F(TaskExecutorTest, AStoppingWorkerDisconnectsFromItsJobMastersBeforeTheResourceManager) {
  TaskExecutor& executor = startWithAcceptedSlot(0, kAllocation);
  loop_.run(executor.disconnect("worker stopping"));
  ASSERT_EQ(master_->jobMasterDisconnects.size(), 1u);
  EXPECT_EQ(master_->jobMasterDisconnects[0].epoch, 1u);
  EXPECT_EQ(master_->jobMasterDisconnects[0].job, kJob);
  EXPECT_EQ(master_->jobMasterDisconnects[0].resourceId, kWorker);
  EXPECT_EQ(master_->jobMasterDisconnects[0].cause, "worker stopping");
  ASSERT_EQ(master_->disconnects.size(), 1u);
  EXPECT_EQ(master_->jobMasterDisconnectsBeforeResourceManager, std::vector<size_t>{1});
}

// Registered again in the same epoch (the ResourceManager dropped the worker, say after a pause
// past heartbeat.timeout): every allocated slot is offered again with its running attempts, so
// that the JobMaster cancels what it no longer wants.
TEST_F(TaskExecutorTest, RegisteredAgainInTheSameEpochItOffersItsAllocatedSlotsAgain) {
  TaskExecutor& executor = startWithAcceptedSlot(1, kAllocation);
  ASSERT_TRUE(submitRunning(kAttempt, kAllocation));
  const size_t offers = master_->offers.size();
  master_->notRegisteredOnce = true;
  EXPECT_FALSE(resourceManagerHeartbeat(1));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return master_->registrations.size() == 2 && executor.registered(); }, kBound))
      << "timed out waiting for the second registration";
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return master_->offers.size() == offers + 1; }, kBound))
      << "timed out waiting for the slot offered again";
  const auto& offer = master_->offers.back();
  EXPECT_EQ(offer.epoch, 1u);
  ASSERT_EQ(offer.slots.size(), 1u);
  EXPECT_EQ(offer.slots[0].allocation, kAllocation);
  ASSERT_EQ(offer.slots[0].running.size(), 1u);
  EXPECT_EQ(offer.slots[0].running[0].attempt, kAttempt);
}

// ... and when the leader no longer runs the job (it ended while the worker was away), the slot
// is freed and the attempt still running in it cancelled.
TEST_F(TaskExecutorTest, RegisteredAgainItFreesTheSlotsOfAJobTheLeaderNoLongerRuns) {
  TaskExecutor& executor = startWithAcceptedSlot(1, kAllocation);
  ASSERT_TRUE(submitRunning(kAttempt, kAllocation));
  master_->unknownJobs.insert(kJob);
  master_->notRegisteredOnce = true;
  EXPECT_FALSE(resourceManagerHeartbeat(1));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return !executor.slots()[1].allocation; }, kBound))
      << "timed out waiting for the slot freed";
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return executor.tasksRunning() == 0; }, kBound))
      << "timed out waiting for the attempt cancelled";
  EXPECT_EQ(runner_->latest(kAttempt)->phase, TaskPhase::kCanceled);
}

TEST_F(TaskExecutorTest, LogsTaskStartedAndTaskEnded) {
  captureLog();
  withRunner();
  auto with = options(1);
  events_ = &logEvents_;
  TaskExecutor& executor = startRegistered(std::move(with));
  ASSERT_FALSE(requestSlot(1, 0, kJob, kAllocation));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return executor.slots()[0].acceptedEpoch == 1; }, kBound))
      << "timed out waiting for the slot accepted";
  ASSERT_FALSE(submitTask(1, kAttempt, kAllocation, {"sh", "-c", "exit 4"}));
  fake().finish(kAttempt, 4);
  ASSERT_TRUE(waitForUpdates(kAttempt, 2)) << "RUNNING and FAILED";

  auto started = capturedEvent("task started");
  ASSERT_TRUE(started) << capturedLog();
  EXPECT_EQ(started->get("resource_id"), kWorker.toHex());
  EXPECT_EQ(started->get("job"), kJob.toHex());
  EXPECT_EQ(started->get("attempt"), kAttempt.toHex());
  EXPECT_EQ(started->getUint("pid"), updatesOf(kAttempt)[0].pid);
  EXPECT_TRUE(started->getInt("mono_us"));
  auto ended = capturedEvent("task ended");
  ASSERT_TRUE(ended) << capturedLog();
  EXPECT_EQ(ended->get("attempt"), kAttempt.toHex());
  EXPECT_EQ(ended->get("state"), "FAILED");
  EXPECT_EQ(ended->getInt("exit_code"), 4);
  EXPECT_EQ(ended->getInt("signal"), 0);
  EXPECT_EQ(ended->get("message"), updatesOf(kAttempt)[1].failureMessage);
  EXPECT_TRUE(ended->getInt("wall_ms"));
}

TEST_F(TaskExecutorTest, RegisteredWithANewEpochItOffersItsSlotsWithTheirRunningAttempts) {
  TaskExecutor& executor = startWithAcceptedSlot(1, kAllocation);
  ASSERT_TRUE(submitRunning(kAttempt, kAllocation));
  const testing::FakeOffer& offer = offeredToEpoch2(executor, 1);
  EXPECT_EQ(offer.epoch, 2u);
  ASSERT_EQ(offer.slots.size(), 1u);
  EXPECT_EQ(offer.slots[0].allocation, kAllocation);
  ASSERT_EQ(offer.slots[0].running.size(), 1u);
  EXPECT_EQ(offer.slots[0].running[0].attempt, kAttempt);
  EXPECT_EQ(offer.slots[0].running[0].state, wire::ExecutionState::RUNNING);
  EXPECT_EQ(master_->slotReports.back().slots[1].running, std::vector<AttemptId>{kAttempt});
  // The new JobMaster cancels it; the update goes to the JobMaster of epoch 2.
  EXPECT_FALSE(cancelTask(2, kAttempt));
  ASSERT_TRUE(waitForUpdates(kAttempt, 2)) << "CANCELED";
  EXPECT_EQ(master_->updates.back().epoch, 2u);
}

// A FINISHED end stays with its slot once delivered (its JobMaster acknowledges it before any
// store holds it, and frees the slot only once one does): the next leader's JobMaster is offered
// the slot with it, until the slot runs another attempt or is freed.
TEST_F(TaskExecutorTest, AFinishedAttemptIsOfferedWithItsSlotUntilTheSlotRunsAnotherOrIsFreed) {
  TaskExecutor& executor = startWithAcceptedSlot(1, kAllocation);
  ASSERT_TRUE(submitRunning(kAttempt, kAllocation));
  fake().finish(kAttempt);
  ASSERT_TRUE(waitForUpdates(kAttempt, 2)) << "RUNNING, then FINISHED";
  ASSERT_TRUE(runLoopUntil(loop_, [&] { return executor.updatesQueued() == 0; }, kBound))
      << "timed out waiting for the FINISHED update to be answered";
  const testing::FakeOffer& offer = offeredToEpoch2(executor, 1);
  ASSERT_EQ(offer.slots.size(), 1u);
  ASSERT_EQ(offer.slots[0].running.size(), 1u);
  EXPECT_EQ(offer.slots[0].running[0].attempt, kAttempt);
  EXPECT_EQ(offer.slots[0].running[0].state, wire::ExecutionState::FINISHED);
  // The slot's report to the ResourceManager lists what runs only.
  EXPECT_TRUE(master_->slotReports.back().slots[1].running.empty());

  // Another attempt in the slot: its JobMaster stored what ended there before deploying it.
  EXPECT_FALSE(submitTask(2, kOtherAttempt, kAllocation, {"sleep", "30"}));
  EXPECT_FALSE(executor.slots()[1].finished);
  fake().finish(kOtherAttempt);
  ASSERT_TRUE(waitForUpdates(kOtherAttempt, 2)) << "RUNNING, then FINISHED";
  ASSERT_TRUE(executor.slots()[1].finished);
  EXPECT_EQ(executor.slots()[1].finished->attempt, kOtherAttempt);
  // Freed: nothing of the job is left in it.
  EXPECT_FALSE(freeSlot(2, kAllocation));
  EXPECT_FALSE(executor.slots()[1].finished);
}

TEST_F(TaskExecutorTest, TheResourceManagersDisconnectMakesItRegisterAgain) {
  TaskExecutor& executor = startRegistered(options(1));
  auto request = master_->taskExecutor().disconnectRequest();
  request.setEpoch(1);
  request.initSender().setResourceManager();
  request.setCause("removed by the operator");
  EXPECT_FALSE(loop_.run(request.send()).hasFailure());
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return master_->registrations.size() == 2 && executor.registered(); }, kBound))
      << "timed out waiting for the second registration";
  EXPECT_EQ(executor.counters().resourceManagerLost, 1u);
}

TEST_F(TaskExecutorTest, ARefusedRegistrationIsRetriedAndItsMessageKept) {
  master_->refuseRegistration = "resource id held by worker-b (pid 7)";
  TaskExecutor& executor = start(options(1));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return executor.counters().registrationAttempts >= 2; }, kBound))
      << "timed out waiting for a second attempt";
  EXPECT_FALSE(executor.registered());
  EXPECT_EQ(executor.lastRegistrationError(), "resource id held by worker-b (pid 7)");
  master_->refuseRegistration.reset();
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return executor.registered(); }, kBound))
      << "timed out waiting for the registration once the master accepts";
  EXPECT_TRUE(executor.lastRegistrationError().empty());
}

// A FAILED exception (a handler's KJ_REQUIRE, a master's wrong auth proof) is not the end of
// the registration loop: it waits registrationMax and registers.
TEST_F(TaskExecutorTest, AnExceptionFromResourceManagerIsRetried) {
  master_->resourceManagerThrowsOnce = true;
  TaskExecutor& executor = start(options(1));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return executor.registered(); }, kBound))
      << "timed out waiting for the registration after the failure";
  EXPECT_EQ(master_->resourceManagerEpochs.size(), 2u);
  EXPECT_TRUE(executor.lastRegistrationError().empty());
}

TEST_F(TaskExecutorTest, AnExceptionFromRegisterTaskExecutorIsRetried) {
  master_->registrationThrowsOnce = true;
  TaskExecutor& executor = start(options(1));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return executor.registered(); }, kBound))
      << "timed out waiting for the registration after the failure";
  EXPECT_EQ(master_->registrations.size(), 1u);
  EXPECT_EQ(master_->resourceManagerEpochs.size(), 2u);
}

// The leader watch (asking the master who leads) failing outright is taken up again: a new
// leader is still followed.
TEST_F(TaskExecutorTest, AnExceptionFromTheLeaderWatchIsRetried) {
  TaskExecutor& executor = startRegistered(options(1));
  master_->leaderInfoThrows = 2;
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return master_->leaderInfoThrows == 0; }, kBound))
      << "timed out waiting for the watch asking after the failures";
  master_->epoch = 2;
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return executor.registered() && executor.registeredEpoch() == 2; }, kBound))
      << "timed out waiting for the registration with epoch 2";
}

// Stopped after registerTaskExecutor succeeded but before the report was answered: the
// ResourceManager holds the registration, so it is told.
TEST_F(TaskExecutorTest, DisconnectBeforeTheReportIsAnsweredStillCallsTheResourceManager) {
  master_->holdSlotReports = true;
  TaskExecutor& executor = start(options(1));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return master_->slotReports.size() == 1; }, kBound))
      << "timed out waiting for the slot report";
  EXPECT_FALSE(executor.registered());
  loop_.run(executor.disconnect("SIGTERM"));
  ASSERT_EQ(master_->disconnects.size(), 1u);
  EXPECT_EQ(master_->disconnects[0].first, 1u);
  EXPECT_EQ(master_->disconnects[0].second, "SIGTERM");
}

// Heartbeats and the disconnect name the registration, so that a process whose resource id
// another registration took meanwhile cannot overwrite or remove that one.
TEST_F(TaskExecutorTest, HeartbeatsAndDisconnectNameTheRegistration) {
  TaskExecutor& executor = startRegistered(options(1));
  const std::optional<RegistrationId> registration = executor.registrationId();
  ASSERT_TRUE(registration);
  EXPECT_FALSE(resourceManagerHeartbeat(1));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return master_->heartbeats.size() == 1; }, kBound))
      << "timed out waiting for the heartbeat";
  EXPECT_EQ(master_->heartbeats[0].registrationId, registration);
  loop_.run(executor.disconnect("SIGTERM"));
  ASSERT_EQ(master_->disconnectRegistrations.size(), 1u);
  EXPECT_EQ(master_->disconnectRegistrations[0], registration);
}

TEST_F(TaskExecutorTest, DisconnectCallsTheResourceManagerOnce) {
  TaskExecutor& executor = startRegistered(options(1));
  loop_.run(executor.disconnect("SIGTERM"));
  loop_.run(executor.disconnect("SIGTERM"));
  ASSERT_EQ(master_->disconnects.size(), 1u);
  EXPECT_EQ(master_->disconnects[0].first, 1u);
  EXPECT_EQ(master_->disconnects[0].second, "SIGTERM");
  EXPECT_FALSE(executor.registered());
  // It does not register again.
  EXPECT_FALSE(resourceManagerHeartbeat(1));
  EXPECT_EQ(master_->registrations.size(), 1u);
  EXPECT_TRUE(master_->heartbeats.empty());
}

// No leader for a while: what ended meanwhile is kept, the next leader's JobMaster is offered
// the slots with every attempt in them (the running one with its pid, the ended ones with their
// terminal state), and only then gets the updates, in order, once each.
TEST_F(TaskExecutorTest, UpdatesOfALeaderlessGapReachTheNextLeaderAfterTheOfferInOrderOnce) {
  auto next = listenNext();
  TaskExecutor& executor = startFollowingWithSlots(options(2));
  ASSERT_FALSE(submitTask(1, kAttempt, kAllocation, {"sleep", "30"}));
  ASSERT_FALSE(submitTask(1, kOtherAttempt, kOtherAllocation, {"sleep", "30"}));
  ASSERT_FALSE(submitTask(1, kThirdAttempt, kOtherAllocation, {"sleep", "30"}));
  ASSERT_TRUE(runLoopUntil(
      loop_,
      [&] {
        return updatesOf(kAttempt).size() == 1 && updatesOf(kOtherAttempt).size() == 1 &&
               updatesOf(kThirdAttempt).size() == 1 && executor.updatesQueued() == 0;
      },
      kBound))
      << "timed out waiting for three attempts RUNNING, delivered";
  const uint32_t pid = updatesOf(kAttempt)[0].pid;

  loseTheLeader(executor);
  fake().finish(kOtherAttempt);
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return executor.tasksRunning() == 2; }, kBound))
      << "timed out waiting for the second attempt ended";
  fake().finish(kThirdAttempt, 3);
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return executor.tasksRunning() == 1; }, kBound))
      << "timed out waiting for the third attempt ended";
  EXPECT_EQ(executor.updatesQueued(), 2u);
  EXPECT_EQ(master_->updates.size(), 3u) << "nothing more reached the deposed leader";

  announce(*next);
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return executor.registeredEpoch() == 2 && executor.updatesQueued() == 0; },
      kBound))
      << "timed out waiting for the updates delivered to epoch 2";
  ASSERT_EQ(next->offers.size(), 1u);
  const auto& offer = next->offers[0];
  EXPECT_EQ(offer.epoch, 2u);
  EXPECT_EQ(offer.updatesBefore, 0u) << "the offer was answered before any update went";
  ASSERT_EQ(offer.slots.size(), 2u);
  auto running = offeredAttempt(offer, kAttempt);
  ASSERT_TRUE(running);
  EXPECT_EQ(running->state, wire::ExecutionState::RUNNING);
  EXPECT_EQ(running->pid, pid);
  EXPECT_EQ(running->allocation, kAllocation);
  auto finished = offeredAttempt(offer, kOtherAttempt);
  ASSERT_TRUE(finished);
  EXPECT_EQ(finished->state, wire::ExecutionState::FINISHED);
  EXPECT_EQ(finished->allocation, kOtherAllocation);
  auto failed = offeredAttempt(offer, kThirdAttempt);
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->state, wire::ExecutionState::FAILED);
  EXPECT_EQ(failed->exitCode, 3);

  ASSERT_EQ(next->updates.size(), 2u);
  EXPECT_EQ(next->updates[0].epoch, 2u);
  EXPECT_EQ(next->updates[0].state.attempt, kOtherAttempt);
  EXPECT_EQ(next->updates[0].state.state, wire::ExecutionState::FINISHED);
  EXPECT_EQ(next->updates[1].state.attempt, kThirdAttempt);
  EXPECT_EQ(next->updates[1].state.state, wire::ExecutionState::FAILED);
  EXPECT_EQ(executor.counters().updatesDropped, 0u);
  // The running attempt was not touched: its next update goes to epoch 2.
  EXPECT_FALSE(cancelTask(2, kAttempt));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return updatesOf(kAttempt, *next).size() == 1; }, kBound))
      << "timed out waiting for CANCELED to epoch 2";
  EXPECT_EQ(updatesOf(kAttempt, *next)[0].state, wire::ExecutionState::CANCELED);
  executor_ = nullptr;  // Before the next master's server goes.
  leaders_ = nullptr;
}

// The next leader does not know the job (it ended, or was cancelled, just before the failover):
// its attempts are cancelled, its slots freed, its queued updates dropped.
TEST_F(TaskExecutorTest, AJobTheNextLeaderDoesNotKnowIsCancelledFreedAndItsUpdatesDropped) {
  auto next = listenNext();
  next->unknownJobs.insert(kJob);
  TaskExecutor& executor = startFollowingWithSlots(options(2));
  ASSERT_FALSE(submitTask(1, kAttempt, kAllocation, {"sleep", "30"}));
  ASSERT_FALSE(submitTask(1, kOtherAttempt, kOtherAllocation, {"sleep", "30"}));
  ASSERT_TRUE(runLoopUntil(
      loop_,
      [&] {
        return updatesOf(kAttempt).size() == 1 && updatesOf(kOtherAttempt).size() == 1 &&
               executor.updatesQueued() == 0;
      },
      kBound))
      << "timed out waiting for both RUNNING, delivered";
  loseTheLeader(executor);
  fake().finish(kOtherAttempt);
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return executor.tasksRunning() == 1; }, kBound))
      << "timed out waiting for the second attempt ended";
  EXPECT_EQ(executor.updatesQueued(), 1u);

  announce(*next);
  ASSERT_TRUE(runLoopUntil(
      loop_,
      [&] {
        return executor.registeredEpoch() == 2 && executor.tasksRunning() == 0 &&
               !executor.slots()[0].allocation && !executor.slots()[1].allocation;
      },
      kBound))
      << "timed out waiting for the attempt cancelled and the slots freed";
  EXPECT_EQ(runner_->latest(kAttempt)->phase, TaskPhase::kCanceled);
  EXPECT_EQ(executor.updatesQueued(), 0u) << "the FINISHED and CANCELED updates dropped";
  EXPECT_TRUE(next->updates.empty());
  EXPECT_TRUE(next->offers.empty());
  EXPECT_EQ(executor.counters().updatesDropped, 0u) << "not the bound";
  loop_.run(executor.flushUpdates(Duration(10000)));  // Nothing waits.
  executor_ = nullptr;
  leaders_ = nullptr;
}

// Two failovers in quick succession: an update the second leader did not take yet (it answers
// `unavailable`) follows the worker to the third, after the offer, once.
TEST_F(TaskExecutorTest, AnUpdateOneLeaderDidNotTakeFollowsTheWorkerToTheNextLeader) {
  auto next = listenNext();
  next->updatesUnavailable = 1000000;
  auto third = listenNext(3, "third-master");
  TaskExecutor& executor = startFollowingWithSlots(options(2));
  ASSERT_FALSE(submitTask(1, kAttempt, kAllocation, {"sleep", "30"}));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return updatesOf(kAttempt).size() == 1 && executor.updatesQueued() == 0; },
      kBound))
      << "timed out waiting for RUNNING delivered";
  loseTheLeader(executor);
  fake().finish(kAttempt);
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return executor.tasksRunning() == 0; }, kBound))
      << "timed out waiting for the attempt ended";

  announce(*next);
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return !updatesOf(kAttempt, *next).empty(); }, kBound))
      << "timed out waiting for FINISHED refused by epoch 2";
  EXPECT_EQ(executor.updatesQueued(), 1u);

  announce(*third);
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return executor.registeredEpoch() == 3 && executor.updatesQueued() == 0; },
      kBound))
      << "timed out waiting for the update delivered to epoch 3";
  ASSERT_EQ(third->offers.size(), 1u);
  EXPECT_EQ(third->offers[0].updatesBefore, 0u);
  auto offered = offeredAttempt(third->offers[0], kAttempt);
  ASSERT_TRUE(offered);
  EXPECT_EQ(offered->state, wire::ExecutionState::FINISHED);
  ASSERT_EQ(third->updates.size(), 1u);
  EXPECT_EQ(third->updates[0].epoch, 3u);
  EXPECT_EQ(third->updates[0].state.attempt, kAttempt);
  EXPECT_EQ(third->updates[0].state.state, wire::ExecutionState::FINISHED);
  executor_ = nullptr;
  leaders_ = nullptr;
}

// A job that holds no slot here any more has nothing to offer: its waiting updates go to the
// next leader's JobMaster as soon as the worker is registered with it.
TEST_F(TaskExecutorTest, AJobWithNoSlotLeftHasItsWaitingUpdatesDeliveredToTheNextLeaderAtOnce) {
  auto next = listenNext();
  master_->updatesUnavailable = 1000000;  // The deposed leader takes no update any more.
  TaskExecutor& executor = startFollowingWithSlots(options(2));
  ASSERT_FALSE(submitTask(1, kAttempt, kAllocation, {"sleep", "30"}));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return !updatesOf(kAttempt).empty(); }, kBound))
      << "timed out waiting for RUNNING sent";
  EXPECT_FALSE(freeSlot(1, kAllocation));  // Cancels the attempt.
  EXPECT_FALSE(freeSlot(1, kOtherAllocation));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return executor.tasksRunning() == 0; }, kBound))
      << "timed out waiting for the attempt cancelled";
  loseTheLeader(executor);
  ASSERT_GE(executor.updatesQueued(), 1u);

  announce(*next);
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return executor.registeredEpoch() == 2 && executor.updatesQueued() == 0; },
      kBound))
      << "timed out waiting for the waiting updates delivered to epoch 2";
  EXPECT_TRUE(next->offers.empty());
  auto delivered = updatesOf(kAttempt, *next);
  ASSERT_FALSE(delivered.empty());
  EXPECT_EQ(delivered.back().state, wire::ExecutionState::CANCELED);
  EXPECT_EQ(next->updates.back().epoch, 2u);
  executor_ = nullptr;
  leaders_ = nullptr;
}

// worker.update-buffer.max: the oldest queued update goes, with a warning naming the option.
TEST_F(TaskExecutorTest, OverTheUpdateBufferMaxTheOldestUpdateIsDroppedWithAWarning) {
  captureLog();
  auto next = listenNext();
  auto with = options(2);
  with.updateBufferMax = 2;
  events_ = &logEvents_;
  TaskExecutor& executor = startFollowingWithSlots(std::move(with));
  // One after the other, so that no more than two updates ever wait while the leader stands.
  const std::vector<std::tuple<AttemptId, AllocationId, std::vector<std::string>>> attempts = {
      {kAttempt, kAllocation, {"sleep", "30"}},
      {kOtherAttempt, kAllocation, {"sleep", "30"}},
      {kThirdAttempt, kOtherAllocation, {"sleep", "30"}}};
  for (const auto& [attempt, allocation, argv] : attempts) {
    ASSERT_FALSE(submitTask(1, attempt, allocation, argv));
    ASSERT_TRUE(runLoopUntil(
        loop_,
        [&, attempt = attempt] {
          return updatesOf(attempt).size() == 1 && executor.updatesQueued() == 0;
        },
        kBound))
        << "timed out waiting for RUNNING delivered";
  }
  loseTheLeader(executor);
  fake().finish(kAttempt);
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return executor.tasksRunning() == 2; }, kBound))
      << "timed out waiting for the first attempt ended";
  fake().finish(kOtherAttempt);
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return executor.tasksRunning() == 1; }, kBound))
      << "timed out waiting for the second attempt ended";
  EXPECT_EQ(executor.counters().updatesDropped, 0u);
  fake().finish(kThirdAttempt, 5);
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return executor.tasksRunning() == 0; }, kBound))
      << "timed out waiting for the third attempt ended";
  EXPECT_EQ(executor.counters().updatesDropped, 1u);
  EXPECT_EQ(executor.updatesQueued(), 2u);
  auto dropped = capturedEvent("updates dropped");
  ASSERT_TRUE(dropped) << capturedLog();
  EXPECT_EQ(dropped->get("attempt"), kAttempt.toHex());
  EXPECT_EQ(dropped->get("job"), kJob.toHex());
  EXPECT_EQ(dropped->get("state"), "FINISHED");
  EXPECT_EQ(dropped->getInt("dropped"), 1);
  ASSERT_TRUE(dropped->get("reason"));
  EXPECT_NE(dropped->get("reason")->find("worker.update-buffer.max (2)"), std::string::npos)
      << *dropped->get("reason");
  EXPECT_TRUE(dropped->getInt("mono_us"));

  announce(*next);
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return executor.registeredEpoch() == 2 && executor.updatesQueued() == 0; },
      kBound))
      << "timed out waiting for the two kept updates delivered";
  ASSERT_EQ(next->updates.size(), 2u);
  EXPECT_EQ(next->updates[0].state.attempt, kOtherAttempt);
  EXPECT_EQ(next->updates[1].state.attempt, kThirdAttempt);
  EXPECT_EQ(next->updates[1].state.exitCode, 5);
  EXPECT_FALSE(offeredAttempt(next->offers.at(0), kAttempt)) << "its state is lost";
  executor_ = nullptr;
  leaders_ = nullptr;
}

// At the bound, a terminal update replaces its attempt's RUNNING update still queued: that one
// changes nothing once the end is known, so it goes silently and nothing is counted.
TEST_F(TaskExecutorTest, AtTheBoundATerminalUpdateReplacesItsQueuedRunningUpdateSilently) {
  auto with = options(2);
  with.updateBufferMax = 1;
  master_->updatesUnavailable = 1000000;  // Nothing is delivered: the RUNNING update waits.
  TaskExecutor& executor = startFollowingWithSlots(std::move(with));
  ASSERT_FALSE(submitTask(1, kAttempt, kAllocation, {"sleep", "30"}));
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return updatesOf(kAttempt).size() >= 2; }, kBound))
      << "timed out waiting for RUNNING refused twice";
  EXPECT_EQ(executor.updatesQueued(), 1u);
  fake().finish(kAttempt);
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return executor.tasksRunning() == 0; }, kBound))
      << "timed out waiting for the attempt ended";
  EXPECT_EQ(executor.updatesQueued(), 1u);
  EXPECT_EQ(executor.counters().updatesDropped, 0u);
  master_->updatesUnavailable = 0;
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return executor.updatesQueued() == 0; }, kBound))
      << "timed out waiting for the FINISHED update delivered";
  EXPECT_EQ(updatesOf(kAttempt).back().state, wire::ExecutionState::FINISHED);
}

// The JobMaster answers a terminal update only once it persisted it; until then `unavailable`,
// and the worker sends the same update again, the next one only after.
TEST_F(TaskExecutorTest, AnUpdateAnsweredUnavailableIsSentAgainUntilDeliveredThenTheNext) {
  master_->updatesUnavailable = 2;
  TaskExecutor& executor = startWithAcceptedSlot(0, kAllocation);
  ASSERT_FALSE(submitTask(1, kAttempt, kAllocation, {"true"}));
  fake().finish(kAttempt);
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return updatesOf(kAttempt).size() == 4 && executor.updatesQueued() == 0; },
      kBound))
      << "timed out waiting for RUNNING three times, FINISHED, all answered";
  auto updates = updatesOf(kAttempt);
  EXPECT_EQ(updates[0].state, wire::ExecutionState::RUNNING);
  EXPECT_EQ(updates[1].state, wire::ExecutionState::RUNNING);
  EXPECT_EQ(updates[2].state, wire::ExecutionState::RUNNING);
  EXPECT_EQ(updates[3].state, wire::ExecutionState::FINISHED);
  EXPECT_EQ(executor.counters().updatesDropped, 0u);
}

// Fencing: once the worker saw epoch 2, the deposed leader (epoch 1) can neither cancel, free
// nor deploy anything; the running attempt and its slot stay.
TEST_F(TaskExecutorTest, AfterAHigherEpochTheDeposedLeaderCannotCancelFreeOrDeploy) {
  TaskExecutor& executor = startWithAcceptedSlot(0, kAllocation);
  ASSERT_TRUE(submitRunning(kAttempt, kAllocation));
  master_->epoch = 2;
  EXPECT_FALSE(jobMasterHeartbeat(2, kJob));
  ASSERT_EQ(executor.highestEpoch(), 2u);

  auto cancel = cancelTask(1, kAttempt);
  ASSERT_TRUE(cancel);
  EXPECT_EQ(cancel->which, wire::Failure::FENCING);
  auto free = freeSlot(1, kAllocation);
  ASSERT_TRUE(free);
  EXPECT_EQ(free->which, wire::Failure::FENCING);
  auto submit = submitTask(1, kOtherAttempt, kAllocation, {"sleep", "30"});
  ASSERT_TRUE(submit);
  EXPECT_EQ(submit->which, wire::Failure::FENCING);

  EXPECT_EQ(executor.tasksRunning(), 1u);
  EXPECT_EQ(runner_->latest(kAttempt)->phase, TaskPhase::kRunning);
  EXPECT_FALSE(runner_->latest(kOtherAttempt));
  EXPECT_EQ(executor.slots()[0].allocation, kAllocation);
  EXPECT_EQ(executor.fencingCounters().rejected("TaskExecutorGateway.cancelTask"), 1u);
  EXPECT_EQ(executor.fencingCounters().rejected("TaskExecutorGateway.freeSlot"), 1u);
  EXPECT_EQ(executor.fencingCounters().rejected("TaskExecutorGateway.submitTask"), 1u);
}

// The worker holds a credential (docs/security.md, "Chain of trust"): the leader record naming a
// master that does not prove itself (ZooKeeper ACLs off, a rogue master with rpc.auth none and a
// forged epoch) gets no registration, so no gateway and no call; the epoch in the record alone
// never moves the gate; and the worker registers again once the record names the real leader.
TEST_F(TaskExecutorTest,
       HoldingACredentialItNeverRegistersWithNorRaisesItsGateForAnUnprovenMaster) {
  constexpr const char* kSecret = "worker-secret-0123456789";
  master_->secret = kSecret;
  master_->epoch = 2;
  auto rogue = listenNext(100000, "rogue");
  *current_ = leaderOf(*master_);
  auto retrieval = kj::heap<HandRetrieval>(current_, reads_, readError_);
  retrieval_ = retrieval.get();
  client::LeaderClientOptions with = leaderOptions(options());
  with.credential = rpc::ClientCredential{wire::Role::WORKER, kSecret};
  leaders_ = kj::heap<client::LeaderClient>(loop_.io().getNetwork(), loop_.timer(),
                                            kj::mv(retrieval), std::move(with));
  TaskExecutor& executor = startWith(options());
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return executor.registered(); }, kBound))
      << "timed out waiting for the registration with the real leader";
  EXPECT_EQ(executor.highestEpoch(), 2u);

  announce(*rogue);
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return leaders_->mastersRefused(rpc::MasterRefusal::kNotChallenged) >= 2; },
      kBound))
      << "timed out waiting for the rogue refused twice";
  EXPECT_TRUE(rogue->resourceManagerEpochs.empty());
  EXPECT_TRUE(rogue->registrations.empty());
  EXPECT_EQ(executor.highestEpoch(), 2u) << "an epoch from the leader record alone moved the gate";

  announce(*master_);
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return executor.registered() && executor.counters().registrations >= 2; },
      kBound))
      << "timed out waiting for the registration with the real leader again";
  EXPECT_EQ(executor.registeredEpoch(), 2u);
  EXPECT_EQ(executor.highestEpoch(), 2u);
  EXPECT_TRUE(rogue->registrations.empty());
}

}  // namespace
}  // namespace regent::taskexecutor

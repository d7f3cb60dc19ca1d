// The JobMaster's scheduling logic on a fake clock: DAG order, requirement counts as vertices
// become runnable and finish, slot acceptance and reuse, restarts of a failed subtask in its
// freed slot, give-up, worker loss, idempotent and out-of-order reports, unknown attempts,
// what jobs status shows, and the memory a subtask costs.
#include "services/jobmaster/execution_graph.h"

#include <capnp/message.h>
#include <gtest/gtest.h>

#include <deque>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>

#include "rpc/wire_ids.h"
#include "tests/services/jobmaster/fake_job_master_port_test_util.h"
#include "tests/services/jobmaster/job_graph_builder_test_util.h"
#include "tests/store/progress_test_util.h"

namespace regent::jobmaster {
namespace {

using namespace std::chrono_literals;
using testing::FakeJobMasterPort;
using testing::JobGraphBuilder;
using testing::kGiB;
using wire::ExecutionState;

const Profile kOneCpu{1000, kGiB};

class ExecutionGraphTest : public ::testing::Test {
 protected:
  void start(JobGraphBuilder& builder) {
    graph_ = std::make_unique<ExecutionGraph>(builder.job(), builder.graph(),
                                              RestartStrategy::fromGraph(builder.graph()), nowMs_);
  }
  ExecutionGraph& graph() { return *graph_; }

  void advance(Duration by) {
    now_ += by;
    nowMs_ += by.count();
  }

  // Offers `count` one-cpu slots of `worker`; returns the accepted allocations.
  std::vector<AllocationId> offer(const ResourceId& worker, size_t count,
                                  Profile profile = kOneCpu) {
    std::vector<OfferedSlot> offers;
    for (size_t i = 0; i < count; ++i)
      offers.push_back(OfferedSlot{AllocationId::random(), profile});
    const std::vector<bool> accepted = graph().offerSlots(worker, offers);
    std::vector<AllocationId> out;
    for (size_t i = 0; i < offers.size(); ++i) {
      if (accepted[i]) out.push_back(offers[i].allocation);
    }
    return out;
  }

  // FAILED by its worker, which could not start it (a worker fault).
  ExecutionGraph::Update workerFault(const Deployment& deployment) {
    return report(deployment, ExecutionState::FAILED, 0,
                  "spawn failed: Too many open files (a fault of the worker)", true);
  }

  ExecutionGraph::Update report(const Deployment& deployment, ExecutionState state,
                                int32_t exitCode = 0, std::string_view message = {},
                                bool workerFault = false) {
    AttemptReport report;
    report.workerFault = workerFault;
    report.attempt = deployment.attempt;
    const uint32_t vertex = graph().vertexOf(deployment.subtask);
    names_.push_back(graph().vertexReader(vertex).getName().cStr());
    report.vertex = names_.back();
    report.subtaskIndex = graph().indexInVertex(deployment.subtask);
    report.state = state;
    report.exitCode = exitCode;
    report.failureMessage = message;
    report.pid = 4242;
    return graph().update(report, now_, nowMs_);
  }
  // RUNNING, then `end`.
  void run(const Deployment& deployment, ExecutionState end, int32_t exitCode = 0) {
    ASSERT_EQ(report(deployment, ExecutionState::RUNNING), ExecutionGraph::Update::kApplied);
    ASSERT_EQ(report(deployment, end, exitCode), ExecutionGraph::Update::kApplied);
  }

  std::vector<std::pair<uint32_t, uint32_t>> needs() const {
    std::vector<std::pair<uint32_t, uint32_t>> out;
    for (const auto& need : graph_->requirements())
      out.emplace_back(need.profile.cpuMillis, need.count);
    return out;
  }
  std::string vertexOf(const Deployment& deployment) {
    return graph().vertexReader(graph().vertexOf(deployment.subtask)).getName().cStr();
  }

  MonoTime now_ = MonoTime() + 1h;
  int64_t nowMs_ = 1'700'000'000'000;
  std::unique_ptr<ExecutionGraph> graph_;
  std::deque<std::string> names_;
  const ResourceId workerA_ = ResourceId::random();
  const ResourceId workerB_ = ResourceId::random();
};

TEST(IsTerminalTest, OnlyFinishedFailedAndCanceledAreTerminal) {
  for (ExecutionState state : {ExecutionState::FINISHED, ExecutionState::FAILED,
                               ExecutionState::CANCELED}) {
    EXPECT_TRUE(isTerminal(state)) << wire::enumNameUpper(state);
  }
  for (ExecutionState state :
       {ExecutionState::CREATED, ExecutionState::SCHEDULED, ExecutionState::RECONCILING,
        ExecutionState::DEPLOYING, ExecutionState::RUNNING, ExecutionState::CANCELING}) {
    EXPECT_FALSE(isTerminal(state)) << wire::enumNameUpper(state);
  }
}

TEST_F(ExecutionGraphTest, DownstreamDeploysOnlyAfterEveryUpstreamSubtaskFinished) {
  JobGraphBuilder builder({{"a", 2}, {"b", 1, {"a"}, 500}, {"c", 1, {"a", "b"}}});
  start(builder);
  // Only a is runnable: two one-cpu slots.
  EXPECT_EQ(needs(), (std::vector<std::pair<uint32_t, uint32_t>>{{1000, 2}}));
  EXPECT_EQ(graph().state(), wire::JobState::CREATED);
  EXPECT_EQ(offer(workerA_, 4).size(), 2u);
  auto first = graph().schedule(nowMs_);
  EXPECT_EQ(graph().state(), wire::JobState::CREATED);  // Until an attempt runs.
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(vertexOf(first[0]), "a");
  EXPECT_EQ(vertexOf(first[1]), "a");
  EXPECT_EQ(first[0].attemptNumber, 0u);
  EXPECT_FALSE(first[0].restart);

  run(first[0], ExecutionState::FINISHED);
  // b waits for a[1]; a needs one slot more, the freed one is surplus.
  EXPECT_TRUE(graph().schedule(nowMs_).empty());
  EXPECT_EQ(needs(), (std::vector<std::pair<uint32_t, uint32_t>>{{1000, 1}}));
  EXPECT_EQ(graph().takeSurplusSlots().size(), 1u);

  run(first[1], ExecutionState::FINISHED);
  // Now b (half a cpu) is runnable, c is not (it waits for b too).
  EXPECT_EQ(needs(), (std::vector<std::pair<uint32_t, uint32_t>>{{500, 1}}));
  EXPECT_EQ(graph().takeSurplusSlots().size(), 0u);  // The slot of a[1] serves b.
  auto second = graph().schedule(nowMs_);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(vertexOf(second[0]), "b");
  EXPECT_EQ(second[0].allocation, first[1].allocation);  // Slot reuse.

  run(second[0], ExecutionState::FINISHED);
  EXPECT_EQ(needs(), (std::vector<std::pair<uint32_t, uint32_t>>{{1000, 1}}));
  auto third = graph().schedule(nowMs_);
  ASSERT_EQ(third.size(), 1u);
  EXPECT_EQ(vertexOf(third[0]), "c");
  EXPECT_FALSE(graph().ended());
  run(third[0], ExecutionState::FINISHED);
  ASSERT_TRUE(graph().ended());
  EXPECT_EQ(graph().state(), wire::JobState::FINISHED);
  EXPECT_EQ(graph().end()->restarts, 0u);
  EXPECT_TRUE(needs().empty());
  EXPECT_TRUE(graph().schedule(nowMs_).empty());
}

TEST_F(ExecutionGraphTest, SlotsBeyondTheNeedOrTooSmallAreNotAccepted) {
  JobGraphBuilder builder({{"a", 2, {}, 2000}});
  start(builder);
  EXPECT_TRUE(offer(workerA_, 2, kOneCpu).empty());  // One cpu does not fit two.
  const auto accepted = offer(workerA_, 3, Profile{4000, 4 * kGiB});
  EXPECT_EQ(accepted.size(), 2u);
  // The same allocation offered again (a retried offer) is accepted again, and held once.
  std::vector<OfferedSlot> again{OfferedSlot{accepted[0], Profile{4000, 4 * kGiB}}};
  EXPECT_EQ(graph().offerSlots(workerA_, again), std::vector<bool>{true});
  EXPECT_EQ(graph().heldSlots().size(), 2u);
}

// schedulesPartly() (what jobmaster.first-deploy-wait asks) answers what schedule() would do,
// also with slots of different sizes: a large slot is not counted for a small subtask that a
// small slot serves.
TEST_F(ExecutionGraphTest, SchedulesPartlyAnswersWhatScheduleWouldDeploy) {
  JobGraphBuilder builder({{"big", 1, {}, 2000}, {"small", 1, {}, 1000}});
  start(builder);
  EXPECT_FALSE(graph().schedulesPartly()) << "no slot: nothing would deploy";
  ASSERT_EQ(offer(workerA_, 1, kOneCpu).size(), 1u);
  EXPECT_TRUE(graph().schedulesPartly()) << "the small subtask only";
  ASSERT_EQ(offer(workerB_, 1, Profile{2000, kGiB}).size(), 1u);
  EXPECT_FALSE(graph().schedulesPartly()) << "both";
  EXPECT_EQ(graph().schedule(nowMs_).size(), 2u);
  EXPECT_FALSE(graph().schedulesPartly()) << "nothing waits";
}

TEST_F(ExecutionGraphTest, AFailedSubtaskRestartsInItsFreedSlotAfterTheDelay) {
  JobGraphBuilder builder({{"a", 1}});
  builder.fixedDelay(2, 1000);
  start(builder);
  ASSERT_EQ(offer(workerA_, 1).size(), 1u);
  auto first = graph().schedule(nowMs_);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(report(first[0], ExecutionState::RUNNING), ExecutionGraph::Update::kApplied);
  ASSERT_EQ(report(first[0], ExecutionState::FAILED, 1, "exited with code 1"),
            ExecutionGraph::Update::kApplied);
  EXPECT_EQ(graph().state(), wire::JobState::RESTARTING);
  EXPECT_EQ(graph().restarts(), 1u);
  EXPECT_EQ(graph().nextRestartAt(), now_ + 1s);
  EXPECT_TRUE(graph().takeSurplusSlots().empty());  // The restart will need the slot.
  EXPECT_EQ(needs(), (std::vector<std::pair<uint32_t, uint32_t>>{{1000, 1}}));

  advance(999ms);
  graph().restartDue(now_);
  EXPECT_TRUE(graph().schedule(nowMs_).empty());
  advance(1ms);
  graph().restartDue(now_);
  EXPECT_EQ(graph().state(), wire::JobState::RUNNING);
  auto second = graph().schedule(nowMs_);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].allocation, first[0].allocation);
  EXPECT_EQ(second[0].attemptNumber, 1u);
  EXPECT_TRUE(second[0].restart);
  EXPECT_NE(second[0].attempt, first[0].attempt);
  // The old attempt is not the subtask's any more.
  EXPECT_EQ(report(first[0], ExecutionState::FAILED), ExecutionGraph::Update::kUnknown);
  run(second[0], ExecutionState::FINISHED);
  ASSERT_TRUE(graph().ended());
  EXPECT_EQ(graph().end()->state, wire::JobState::FINISHED);
  EXPECT_EQ(graph().end()->restarts, 1u);
  // Net runtime leaves the restart delay out.
  EXPECT_EQ(graph().end()->netRuntimeMs, 0u);
}

TEST_F(ExecutionGraphTest, GivingUpFailsTheJobWithItsRootCauseAndDeploysNothingMore) {
  JobGraphBuilder builder({{"a", 2}, {"b", 1, {"a"}}});
  builder.fixedDelay(1, 0);
  start(builder);
  ASSERT_EQ(offer(workerA_, 2).size(), 2u);
  auto first = graph().schedule(nowMs_);
  ASSERT_EQ(first.size(), 2u);
  ASSERT_EQ(report(first[0], ExecutionState::RUNNING), ExecutionGraph::Update::kApplied);
  ASSERT_EQ(report(first[0], ExecutionState::FAILED, 3, "exited with code 3"),
            ExecutionGraph::Update::kApplied);
  graph().restartDue(now_);
  auto second = graph().schedule(nowMs_);
  ASSERT_EQ(second.size(), 1u);
  advance(5s);
  ASSERT_EQ(report(second[0], ExecutionState::FAILED, 4, "exited with code 4"),
            ExecutionGraph::Update::kApplied);
  ASSERT_TRUE(graph().ended());
  const dispatcher::JobEnd& end = *graph().end();
  EXPECT_EQ(end.state, wire::JobState::FAILED);
  EXPECT_EQ(end.restarts, 1u);
  EXPECT_EQ(end.failureMessage,
            "exited with code 4 (restart strategy fixed-delay allows 1 restarts)");
  EXPECT_EQ(end.failureVertex, "a");
  EXPECT_EQ(end.failureSubtask, graph().indexInVertex(second[0].subtask));
  EXPECT_EQ(end.failureAttempt, second[0].attempt);
  EXPECT_EQ(end.failureExitCode, 4);
  EXPECT_EQ(end.failureAtMs, nowMs_);
  EXPECT_EQ(graph().state(), wire::JobState::FAILED);

  // Nothing deploys or restarts any more; the other attempt still reports.
  EXPECT_TRUE(graph().schedule(nowMs_).empty());
  EXPECT_TRUE(needs().empty());
  EXPECT_EQ(graph().nextRestartAt(), std::nullopt);
  EXPECT_TRUE(offer(workerB_, 1).empty());
  EXPECT_EQ(graph().liveAttempts().size(), 1u);
  ASSERT_EQ(report(first[1], ExecutionState::FAILED, 9), ExecutionGraph::Update::kApplied);
  EXPECT_TRUE(graph().schedule(nowMs_).empty());
  EXPECT_EQ(graph().end()->failureExitCode, 4);  // The root cause stays.
  EXPECT_TRUE(graph().liveAttempts().empty());
}

TEST_F(ExecutionGraphTest, ALostWorkersAttemptsFailAndRestartElsewhere) {
  JobGraphBuilder builder({{"a", 2}});
  builder.fixedDelay(5, 0);
  start(builder);
  ASSERT_EQ(offer(workerA_, 1).size(), 1u);
  ASSERT_EQ(offer(workerB_, 1).size(), 1u);
  auto first = graph().schedule(nowMs_);
  ASSERT_EQ(first.size(), 2u);
  const Deployment onA = first[0].worker == workerA_ ? first[0] : first[1];
  const Deployment onB = first[0].worker == workerA_ ? first[1] : first[0];
  ASSERT_EQ(report(onA, ExecutionState::RUNNING), ExecutionGraph::Update::kApplied);
  graph().takeTransitions();

  const auto dropped =
      graph().workerLost(workerA_, "worker lost: no heartbeat for 10s", now_, nowMs_);
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0].allocation, onA.allocation);
  EXPECT_FALSE(graph().holdsSlotsOn(workerA_));
  const auto transitions = graph().takeTransitions();
  ASSERT_EQ(transitions.size(), 1u);
  EXPECT_EQ(transitions[0].attempt, onA.attempt);
  EXPECT_EQ(transitions[0].state, ExecutionState::FAILED);
  EXPECT_EQ(graph().failureMessage(onA.subtask), "worker lost: no heartbeat for 10s");
  EXPECT_EQ(graph().restarts(), 1u);

  graph().restartDue(now_);
  EXPECT_TRUE(graph().schedule(nowMs_).empty());  // No free slot: B's runs onB.
  EXPECT_EQ(needs(), (std::vector<std::pair<uint32_t, uint32_t>>{{1000, 2}}));
  ASSERT_EQ(offer(workerB_, 2).size(), 1u);
  auto again = graph().schedule(nowMs_);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].subtask, onA.subtask);
  EXPECT_EQ(again[0].worker, workerB_);
  EXPECT_EQ(again[0].attemptNumber, 1u);
  // The lost attempt reported late is unknown: the worker cancels it.
  EXPECT_EQ(report(onA, ExecutionState::FINISHED), ExecutionGraph::Update::kUnknown);
  run(onB, ExecutionState::FINISHED);
  run(again[0], ExecutionState::FINISHED);
  EXPECT_EQ(graph().state(), wire::JobState::FINISHED);
}

TEST_F(ExecutionGraphTest, AWorkerFaultRunsTheSubtaskAgainElsewhereWithoutARestart) {
  JobGraphBuilder builder({{"a", 2}});  // No restart strategy: a failure of the task fails the job.
  start(builder);
  ASSERT_EQ(offer(workerA_, 2).size(), 2u);
  auto first = graph().schedule(nowMs_);
  ASSERT_EQ(first.size(), 2u);
  ASSERT_EQ(workerFault(first[0]), ExecutionGraph::Update::kApplied);
  EXPECT_FALSE(graph().ended());
  EXPECT_EQ(graph().restarts(), 0u);
  EXPECT_EQ(graph().failureMessage(first[0].subtask),
            "spawn failed: Too many open files (a fault of the worker)");
  // The slot leaves the job, for the ResourceManager to match the subtask elsewhere.
  const auto faulted = graph().takeFaultedSlots();
  ASSERT_EQ(faulted.size(), 1u);
  EXPECT_EQ(faulted[0].allocation, first[0].allocation);
  EXPECT_EQ(faulted[0].worker, workerA_);
  EXPECT_TRUE(graph().takeFaultedSlots().empty());
  EXPECT_EQ(graph().nextRestartAt(), now_ + kWorkerFaultDelay);
  // The subtask still needs a slot: the job accepts one on another worker.
  EXPECT_EQ(needs(), (std::vector<std::pair<uint32_t, uint32_t>>{{1000, 2}}));
  ASSERT_EQ(offer(workerB_, 1).size(), 1u);
  EXPECT_TRUE(graph().takeSurplusSlots().empty());

  // The other subtask finished: its slot on A is free, but B's is taken first.
  run(first[1], ExecutionState::FINISHED);
  advance(kWorkerFaultDelay);
  graph().restartDue(now_);
  auto again = graph().schedule(nowMs_);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].subtask, first[0].subtask);
  EXPECT_EQ(again[0].worker, workerB_);
  EXPECT_EQ(again[0].attemptNumber, 1u);
  run(again[0], ExecutionState::FINISHED);
  ASSERT_TRUE(graph().ended());
  EXPECT_EQ(graph().end()->state, wire::JobState::FINISHED);
  EXPECT_EQ(graph().end()->restarts, 0u);
}

TEST_F(ExecutionGraphTest, AfterAWorkerFaultTheSameWorkerServesWhenNoOtherHasASlot) {
  JobGraphBuilder builder({{"a", 1}});
  start(builder);
  ASSERT_EQ(offer(workerA_, 1).size(), 1u);
  auto first = graph().schedule(nowMs_);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(workerFault(first[0]), ExecutionGraph::Update::kApplied);
  ASSERT_EQ(graph().takeFaultedSlots().size(), 1u);
  ASSERT_EQ(offer(workerA_, 1).size(), 1u);  // The ResourceManager found no other worker.
  advance(kWorkerFaultDelay);
  graph().restartDue(now_);
  auto again = graph().schedule(nowMs_);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].worker, workerA_);
  run(again[0], ExecutionState::FINISHED);
  EXPECT_EQ(graph().state(), wire::JobState::FINISHED);
}

TEST_F(ExecutionGraphTest, TooManyWorkerFaultsInARowCountAsTheTasksFailure) {
  JobGraphBuilder builder({{"a", 1}});
  start(builder);
  Duration delay = kWorkerFaultDelay;
  for (uint32_t fault = 1; fault < kMaxWorkerFaults; ++fault) {
    ASSERT_EQ(offer(workerA_, 1).size(), 1u);
    graph().restartDue(now_);
    auto deployed = graph().schedule(nowMs_);
    ASSERT_EQ(deployed.size(), 1u) << "fault " << fault;
    ASSERT_EQ(workerFault(deployed[0]), ExecutionGraph::Update::kApplied);
    ASSERT_FALSE(graph().ended()) << "fault " << fault;
    EXPECT_EQ(graph().nextRestartAt(), now_ + delay) << "fault " << fault;
    ASSERT_EQ(graph().takeFaultedSlots().size(), 1u);
    advance(delay);
    delay = std::min(kWorkerFaultMaxDelay, delay * 2);
  }
  ASSERT_EQ(offer(workerA_, 1).size(), 1u);
  graph().restartDue(now_);
  auto last = graph().schedule(nowMs_);
  ASSERT_EQ(last.size(), 1u);
  ASSERT_EQ(workerFault(last[0]), ExecutionGraph::Update::kApplied);
  ASSERT_TRUE(graph().ended());
  EXPECT_EQ(graph().end()->state, wire::JobState::FAILED);
  EXPECT_NE(graph().end()->failureMessage.find("th worker fault of the subtask in a row"),
            std::string::npos)
      << graph().end()->failureMessage;
}

TEST_F(ExecutionGraphTest, AnAttemptThatRunsEndsTheRunOfWorkerFaults) {
  JobGraphBuilder builder({{"a", 1}});
  builder.fixedDelay(1, 0);
  start(builder);
  for (uint32_t round = 0; round < 2; ++round) {
    for (uint32_t fault = 1; fault < kMaxWorkerFaults; ++fault) {
      offer(workerA_, 1);  // Taken unless the job holds a free slot.
      advance(kWorkerFaultMaxDelay);
      graph().restartDue(now_);
      auto deployed = graph().schedule(nowMs_);
      ASSERT_EQ(deployed.size(), 1u);
      ASSERT_EQ(workerFault(deployed[0]), ExecutionGraph::Update::kApplied);
      graph().takeFaultedSlots();
    }
    offer(workerA_, 1);
    advance(kWorkerFaultMaxDelay);
    graph().restartDue(now_);
    auto runs = graph().schedule(nowMs_);
    ASSERT_EQ(runs.size(), 1u);
    ASSERT_EQ(report(runs[0], ExecutionState::RUNNING), ExecutionGraph::Update::kApplied);
    if (round == 0) {
      // The task's own failure: the one restart the strategy allows.
      ASSERT_EQ(report(runs[0], ExecutionState::FAILED, 1), ExecutionGraph::Update::kApplied);
      EXPECT_EQ(graph().restarts(), 1u);
    } else {
      ASSERT_EQ(report(runs[0], ExecutionState::FINISHED), ExecutionGraph::Update::kApplied);
    }
  }
  EXPECT_EQ(graph().state(), wire::JobState::FINISHED);
}

TEST_F(ExecutionGraphTest, ASubmitTheWorkerCannotTakeIsAWorkerFault) {
  JobGraphBuilder builder({{"a", 1}});
  start(builder);
  ASSERT_EQ(offer(workerA_, 1).size(), 1u);
  auto deployed = graph().schedule(nowMs_);
  ASSERT_EQ(deployed.size(), 1u);
  graph().deployFailed(deployed[0].subtask, deployed[0].attempt,
                       "worker refused submitTask: cannot run tasks", now_, nowMs_,
                       FailureCause::kWorker);
  EXPECT_FALSE(graph().ended());
  EXPECT_EQ(graph().restarts(), 0u);
  EXPECT_EQ(graph().takeFaultedSlots().size(), 1u);
}

TEST_F(ExecutionGraphTest, ReportsAreIdempotentAndNeverMoveBackwards) {
  JobGraphBuilder builder({{"a", 1}});
  start(builder);
  ASSERT_EQ(offer(workerA_, 1).size(), 1u);
  auto deployed = graph().schedule(nowMs_);
  ASSERT_EQ(deployed.size(), 1u);
  graph().takeTransitions();
  EXPECT_EQ(report(deployed[0], ExecutionState::RUNNING), ExecutionGraph::Update::kApplied);
  EXPECT_EQ(report(deployed[0], ExecutionState::RUNNING), ExecutionGraph::Update::kRepeated);
  EXPECT_EQ(report(deployed[0], ExecutionState::DEPLOYING), ExecutionGraph::Update::kRepeated);
  EXPECT_TRUE(graph().takeFirstRunning());
  EXPECT_FALSE(graph().takeFirstRunning());
  EXPECT_EQ(report(deployed[0], ExecutionState::FINISHED), ExecutionGraph::Update::kApplied);
  EXPECT_EQ(report(deployed[0], ExecutionState::FINISHED), ExecutionGraph::Update::kRepeated);
  EXPECT_EQ(report(deployed[0], ExecutionState::FAILED, 1), ExecutionGraph::Update::kRepeated);
  EXPECT_EQ(report(deployed[0], ExecutionState::RUNNING), ExecutionGraph::Update::kRepeated);
  const auto transitions = graph().takeTransitions();
  ASSERT_EQ(transitions.size(), 2u);
  EXPECT_EQ(transitions[0].state, ExecutionState::RUNNING);
  EXPECT_EQ(transitions[1].state, ExecutionState::FINISHED);
  EXPECT_EQ(graph().state(), wire::JobState::FINISHED);
}

TEST_F(ExecutionGraphTest, AFinishedReportBeforeRunningFinishesTheSubtask) {
  JobGraphBuilder builder({{"a", 1}});
  start(builder);
  ASSERT_EQ(offer(workerA_, 1).size(), 1u);
  auto deployed = graph().schedule(nowMs_);
  ASSERT_EQ(deployed.size(), 1u);
  EXPECT_EQ(report(deployed[0], ExecutionState::FINISHED), ExecutionGraph::Update::kApplied);
  EXPECT_EQ(report(deployed[0], ExecutionState::RUNNING), ExecutionGraph::Update::kRepeated);
  EXPECT_EQ(graph().state(), wire::JobState::FINISHED);
}

TEST_F(ExecutionGraphTest, UnknownAttemptsAreUnknown) {
  JobGraphBuilder builder({{"a", 2}});
  start(builder);
  ASSERT_EQ(offer(workerA_, 2).size(), 2u);
  auto deployed = graph().schedule(nowMs_);
  ASSERT_EQ(deployed.size(), 2u);
  AttemptReport stranger;
  stranger.attempt = AttemptId::random();
  stranger.vertex = "a";
  stranger.state = ExecutionState::RUNNING;
  EXPECT_EQ(graph().update(stranger, now_, nowMs_), ExecutionGraph::Update::kUnknown);
  stranger.attempt = deployed[0].attempt;
  stranger.vertex = "nope";
  EXPECT_EQ(graph().update(stranger, now_, nowMs_), ExecutionGraph::Update::kUnknown);
  stranger.vertex = "a";
  stranger.subtaskIndex = 7;
  EXPECT_EQ(graph().update(stranger, now_, nowMs_), ExecutionGraph::Update::kUnknown);
  stranger.subtaskIndex = graph().indexInVertex(deployed[1].subtask);  // Another's attempt id.
  EXPECT_EQ(graph().update(stranger, now_, nowMs_), ExecutionGraph::Update::kUnknown);
  EXPECT_TRUE(graph().takeTransitions().size() == 2u);  // Only the two DEPLOYING.
}

TEST_F(ExecutionGraphTest, AFailedSubmitFailsTheAttemptUnlessItAlreadyRuns) {
  JobGraphBuilder builder({{"a", 2}});
  builder.fixedDelay(3, 100);
  start(builder);
  ASSERT_EQ(offer(workerA_, 2).size(), 2u);
  auto deployed = graph().schedule(nowMs_);
  ASSERT_EQ(deployed.size(), 2u);
  ASSERT_EQ(report(deployed[1], ExecutionState::RUNNING), ExecutionGraph::Update::kApplied);
  graph().deployFailed(deployed[0].subtask, deployed[0].attempt, "submitTask timed out", now_,
                       nowMs_);
  graph().deployFailed(deployed[1].subtask, deployed[1].attempt, "submitTask timed out", now_,
                       nowMs_);
  EXPECT_EQ(graph().failureMessage(deployed[0].subtask), "submitTask timed out");
  EXPECT_EQ(graph().failureMessage(deployed[1].subtask), "");
  EXPECT_EQ(graph().restarts(), 1u);
  EXPECT_EQ(graph().state(), wire::JobState::RESTARTING);
}

TEST_F(ExecutionGraphTest, ACancelNobodyAskedForRestartsTheSubtask) {
  JobGraphBuilder builder({{"a", 1}});
  builder.fixedDelay(1, 0);
  start(builder);
  ASSERT_EQ(offer(workerA_, 1).size(), 1u);
  auto deployed = graph().schedule(nowMs_);
  ASSERT_EQ(deployed.size(), 1u);
  run(deployed[0], ExecutionState::CANCELED);
  EXPECT_EQ(graph().restarts(), 1u);
  graph().restartDue(now_);
  EXPECT_EQ(graph().schedule(nowMs_).size(), 1u);
}

TEST_F(ExecutionGraphTest, AbandonedAttemptsEndCanceledWithoutRestart) {
  JobGraphBuilder builder({{"a", 1}});
  builder.fixedDelay(3, 0);
  start(builder);
  ASSERT_EQ(offer(workerA_, 1).size(), 1u);
  auto deployed = graph().schedule(nowMs_);
  ASSERT_EQ(deployed.size(), 1u);
  graph().abandon(deployed[0].subtask, deployed[0].attempt, nowMs_);
  EXPECT_TRUE(graph().liveAttempts().empty());
  EXPECT_EQ(graph().restarts(), 0u);
}

TEST_F(ExecutionGraphTest, StatusShowsEachSubtaskAndWhyItWaits) {
  JobGraphBuilder builder({{"a", 2}, {"b", 1, {"a"}}});
  builder.fixedDelay(1, 1200);
  start(builder);
  FakeJobMasterPort port;
  port.counts.total = 8;
  port.counts.free = 0;
  port.workers[workerA_] = resourcemanager::WorkerAddress{"host-a", "host-a:8082"};
  ASSERT_EQ(offer(workerA_, 1).size(), 1u);
  auto deployed = graph().schedule(nowMs_);
  ASSERT_EQ(deployed.size(), 1u);
  ASSERT_EQ(report(deployed[0], ExecutionState::RUNNING), ExecutionGraph::Update::kApplied);

  capnp::MallocMessageBuilder message;
  auto status = message.initRoot<wire::JobStatus>();
  graph().describe(status, now_, port);
  EXPECT_EQ(status.getState(), wire::JobState::RUNNING);
  EXPECT_EQ(status.getTasks().getTotal(), 3u);
  EXPECT_EQ(status.getTasks().getRunning(), 1u);
  EXPECT_EQ(status.getTasks().getPending(), 2u);
  ASSERT_EQ(status.getVertices().size(), 2u);
  auto a = status.getVertices()[0];
  EXPECT_EQ(std::string(a.getName().cStr()), "a");
  ASSERT_EQ(a.getSubtasks().size(), 2u);
  const uint32_t running = graph().indexInVertex(deployed[0].subtask);
  auto live = a.getSubtasks()[running];
  EXPECT_EQ(live.getAttempts(), 1u);
  ASSERT_TRUE(live.hasAttempt());
  EXPECT_EQ(live.getAttempt().getState(), ExecutionState::RUNNING);
  EXPECT_EQ(live.getAttempt().getPid(), 4242u);
  EXPECT_EQ(wire::idFromWire<AttemptId>(live.getAttempt().getAttemptId()), deployed[0].attempt);
  EXPECT_EQ(std::string(live.getHost().cStr()), "host-a");
  EXPECT_EQ(std::string(live.getHttpAddress().cStr()), "host-a:8082");
  EXPECT_EQ(std::string(live.getWaitingReason().cStr()), "");
  auto waiting = a.getSubtasks()[1 - running];
  EXPECT_FALSE(waiting.hasAttempt());
  EXPECT_EQ(std::string(waiting.getWaitingReason().cStr()),
            "waiting for a slot (cpu=1.000 memory=1GiB): 0 of 8 slots free");
  EXPECT_EQ(std::string(status.getVertices()[1].getSubtasks()[0].getWaitingReason().cStr()),
            "waiting for upstream vertex a");
  EXPECT_EQ(std::string(status.getWaitingReason().cStr()),
            "1 subtask waits for slots of cpu=1.000 memory=1GiB; the cluster has 0 free of 8");
  EXPECT_FALSE(status.hasFailure());

  ASSERT_EQ(report(deployed[0], ExecutionState::FAILED, 2, "exited with code 2"),
            ExecutionGraph::Update::kApplied);
  advance(200ms);
  capnp::MallocMessageBuilder again;
  auto restarting = again.initRoot<wire::JobStatus>();
  graph().describe(restarting, now_, port);
  EXPECT_EQ(restarting.getState(), wire::JobState::RESTARTING);
  EXPECT_EQ(restarting.getRestarts(), 1u);
  auto failed = restarting.getVertices()[0].getSubtasks()[running];
  EXPECT_EQ(std::string(failed.getWaitingReason().cStr()), "restarting in 1.0s");
  EXPECT_EQ(std::string(failed.getLastFailure().cStr()), "exited with code 2");
  EXPECT_EQ(std::string(failed.getAttempt().getFailureMessage().cStr()), "exited with code 2");
  EXPECT_EQ(failed.getAttempt().getExitCode(), 2);
  ASSERT_TRUE(restarting.hasFailure());
  EXPECT_EQ(std::string(restarting.getFailure().getMessage().cStr()), "exited with code 2");
  EXPECT_EQ(std::string(restarting.getFailure().getVertexName().cStr()), "a");

  capnp::MallocMessageBuilder countsMessage;
  auto counts = countsMessage.initRoot<wire::TaskCounts>();
  graph().counts(counts);
  EXPECT_EQ(counts.getTotal(), 3u);
  EXPECT_EQ(counts.getFailed(), 1u);
  EXPECT_EQ(counts.getPending(), 2u);
}

TEST_F(ExecutionGraphTest, TheVersionMovesOnlyOnChangesTheProgressRecordHolds) {
  JobGraphBuilder builder({{"a", 2}});
  builder.fixedDelay(3, 1000);
  start(builder);
  EXPECT_EQ(graph().version(), 0u);
  ASSERT_EQ(offer(workerA_, 2).size(), 2u);
  auto deployed = graph().schedule(nowMs_);
  ASSERT_EQ(deployed.size(), 2u);
  const uint64_t afterDeploy = graph().version();
  EXPECT_GT(afterDeploy, 0u);
  ASSERT_EQ(report(deployed[0], ExecutionState::RUNNING), ExecutionGraph::Update::kApplied);
  EXPECT_EQ(graph().version(), afterDeploy);  // RUNNING is not written.
  ASSERT_EQ(report(deployed[0], ExecutionState::FINISHED), ExecutionGraph::Update::kApplied);
  const uint64_t afterFinish = graph().version();
  EXPECT_GT(afterFinish, afterDeploy);
  ASSERT_EQ(report(deployed[0], ExecutionState::FINISHED), ExecutionGraph::Update::kRepeated);
  EXPECT_EQ(graph().version(), afterFinish);
  ASSERT_EQ(report(deployed[1], ExecutionState::FAILED, 1), ExecutionGraph::Update::kApplied);
  EXPECT_GT(graph().version(), afterFinish);
}

TEST_F(ExecutionGraphTest, ARecoveredGraphContinuesFromTheProgressRecordAndReconciles) {
  JobGraphBuilder builder({{"a", 3}, {"b", 1, {"a"}}});
  builder.fixedDelay(5, 1000);
  start(builder);
  ASSERT_EQ(offer(workerA_, 3).size(), 3u);
  auto deployed = graph().schedule(nowMs_);
  ASSERT_EQ(deployed.size(), 3u);
  run(deployed[0], ExecutionState::FINISHED);
  run(deployed[1], ExecutionState::FAILED, 1);  // A restart granted; a[1] waits.
  ASSERT_EQ(report(deployed[2], ExecutionState::RUNNING), ExecutionGraph::Update::kApplied);
  capnp::MallocMessageBuilder message;
  auto progress = message.initRoot<wire::JobProgress>();
  graph().fillProgress(progress, 7, nowMs_);
  EXPECT_EQ(progress.getEpoch(), 7u);
  EXPECT_EQ(progress.getRestarts(), 1u);
  EXPECT_EQ(progress.getStartedAtMs(), 1'700'000'000'000);
  EXPECT_EQ(progress.getRestartDelayMs(), 1000);
  ASSERT_EQ(progress.getSubtasks().size(), 3u);
  EXPECT_EQ(progress.getSubtasks()[0].getState(), ExecutionState::FINISHED);
  EXPECT_EQ(progress.getSubtasks()[1].getState(), ExecutionState::FAILED);
  EXPECT_EQ(progress.getSubtasks()[2].getState(), ExecutionState::RUNNING);

  // The next term's graph.
  advance(10s);
  start(builder);
  EXPECT_EQ(graph().recover(progress.asReader(), nowMs_), 1u);
  EXPECT_TRUE(graph().reconciling());
  EXPECT_EQ(graph().state(), wire::JobState::RECONCILING);
  EXPECT_EQ(graph().restarts(), 1u);
  EXPECT_TRUE(needs().empty());              // Nothing declared while reconciling.
  EXPECT_EQ(offer(workerA_, 2).size(), 1u);  // a[1] could use one.
  EXPECT_TRUE(graph().schedule(nowMs_).empty());
  capnp::MallocMessageBuilder countsMessage;
  auto counts = countsMessage.initRoot<wire::TaskCounts>();
  graph().counts(counts);
  EXPECT_EQ(counts.getFinished(), 1u);
  EXPECT_EQ(counts.getFailed(), 1u);
  EXPECT_EQ(counts.getReconciling(), 1u);
  // The expected attempt is a live attempt; an offer of another one is not adopted.
  EXPECT_TRUE(graph().isLiveAttempt("a", 2, deployed[2].attempt));
  names_.push_back("a");
  AttemptReport stale;
  stale.attempt = AttemptId::random();
  stale.vertex = names_.back();
  stale.subtaskIndex = 2;
  stale.state = ExecutionState::RUNNING;
  EXPECT_FALSE(
      graph().adopt(workerB_, OfferedSlot{AllocationId::random(), kOneCpu}, stale, nowMs_));
  AttemptReport offered = stale;
  offered.attempt = deployed[2].attempt;
  offered.pid = 99;
  const AllocationId slot = AllocationId::random();
  EXPECT_EQ(graph().adopt(workerB_, OfferedSlot{slot, kOneCpu}, offered, nowMs_), 2u);
  EXPECT_EQ(graph().expectedLeft(), 0u);
  const auto outcome = graph().endReconciliation("unreported", now_, nowMs_);
  EXPECT_EQ(outcome.adopted, 1u);
  EXPECT_EQ(outcome.unreported, 0u);
  EXPECT_FALSE(graph().reconciling());
  EXPECT_EQ(graph().state(), wire::JobState::RUNNING);
  // a[1] runs again with the next attempt number; a[0] never again.
  auto again = graph().schedule(nowMs_);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].subtask, 1u);
  EXPECT_EQ(again[0].attemptNumber, 1u);
  EXPECT_TRUE(again[0].restart);
  // The adopted attempt is followed as the term's own.
  ASSERT_EQ(report(Deployment{2, deployed[2].attempt, 0, slot, workerB_, false},
                   ExecutionState::FINISHED),
            ExecutionGraph::Update::kApplied);
}

TEST_F(ExecutionGraphTest, EndingReconciliationFailsTheUnreportedAttempts) {
  JobGraphBuilder builder({{"a", 2}});
  start(builder);  // No restart strategy: the failure ends the job.
  const AttemptId first = AttemptId::random();
  auto message = regent::testing::progressRecord(
      JobId::random(), {{0, first, 0, ExecutionState::DEPLOYING},
                        {1, AttemptId::random(), 0, ExecutionState::RUNNING},
                        // No such subtask: skipped.
                        {7, AttemptId::random(), 0, ExecutionState::CREATED}});
  EXPECT_EQ(graph().recover(message->getRoot<wire::JobProgress>().asReader(), nowMs_), 2u);
  names_.push_back("a");
  AttemptReport ended;
  ended.attempt = first;
  ended.vertex = names_.back();
  ended.state = ExecutionState::FINISHED;
  EXPECT_EQ(graph().update(ended, now_, nowMs_), ExecutionGraph::Update::kApplied);
  EXPECT_EQ(graph().expectedLeft(), 1u);
  const uint64_t before = graph().version();
  const auto outcome = graph().endReconciliation("nobody reported it", now_, nowMs_);
  EXPECT_EQ(outcome.adopted, 0u);
  EXPECT_EQ(outcome.ended, 1u);
  EXPECT_EQ(outcome.unreported, 1u);
  EXPECT_GT(graph().version(), before);
  ASSERT_TRUE(graph().ended());
  EXPECT_EQ(graph().state(), wire::JobState::FAILED);
  EXPECT_EQ(graph().failureMessage(1).substr(0, 18), "nobody reported it");
}

TEST_F(ExecutionGraphTest, ASubtaskCostsLittleMemoryAndAQueuedJobNoneUntilItsFirstSlot) {
  std::vector<testing::VertexSpec> vertices;
  for (int i = 0; i < 10; ++i) vertices.push_back({"v" + std::to_string(i), 1000});
  JobGraphBuilder builder(vertices);
  start(builder);
  EXPECT_EQ(graph().subtaskCount(), 10000u);
  // Waiting for its first slot (what a queued job does, reads included), the job holds records
  // per vertex, none per subtask.
  EXPECT_EQ(graph().state(), wire::JobState::CREATED);
  EXPECT_EQ(graph().schedule(nowMs_).size(), 0u);
  EXPECT_FALSE(graph().isLiveAttempt("v3", 7, AttemptId::random()));
  EXPECT_LT(graph().heldBytes(), 4096u);
  // Deployed: one fixed-size record per subtask, nothing per subtask on the heap besides it.
  ASSERT_EQ(offer(workerA_, 1).size(), 1u);
  ASSERT_EQ(graph().schedule(nowMs_).size(), 1u);
  EXPECT_GT(graph().heldBytes(), graph().subtaskCount() * 64);
  EXPECT_LT(graph().heldBytes() / graph().subtaskCount(), 128u);
}

}  // namespace
}  // namespace regent::jobmaster

namespace regent::jobmaster {
namespace {

// Seeded random runs: slots offered by several workers, attempts that run, finish or fail,
// workers lost, restart delays passing, in random order. After every step: no subtask of a
// vertex deploys before every upstream subtask finished, a slot holds at most one live attempt,
// a subtask has at most one, nothing deploys once the job ended; and every run ends.
TEST(ExecutionGraphRandom, InvariantsHoldUnderRandomEvents) {
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 random(seed);
    auto chance = [&](int percent) { return static_cast<int>(random() % 100) < percent; };
    testing::JobGraphBuilder builder(
        {{"a", 3}, {"b", 2, {"a"}}, {"c", 2, {"a"}}, {"d", 1, {"b", "c"}}});
    builder.fixedDelay(1000, 50);
    MonoTime now = MonoTime() + std::chrono::hours(1);
    int64_t nowMs = 1'000'000;
    ExecutionGraph graph(builder.job(), builder.graph(),
                         RestartStrategy::fromGraph(builder.graph()), nowMs);
    std::vector<ResourceId> workers{ResourceId::random(), ResourceId::random(),
                                    ResourceId::random()};
    std::map<AttemptId, Deployment> live;  // As the workers see them.
    std::set<uint32_t> finished;
    std::map<std::string, std::vector<std::string>> upstream{
        {"a", {}}, {"b", {"a"}}, {"c", {"a"}}, {"d", {"b", "c"}}};
    std::map<std::string, uint32_t> parallelism{{"a", 3}, {"b", 2}, {"c", 2}, {"d", 1}};
    auto vertexName = [&](uint32_t subtask) {
      return std::string(graph.vertexReader(graph.vertexOf(subtask)).getName().cStr());
    };
    auto finishedOf = [&](const std::string& vertex) {
      uint32_t count = 0;
      for (uint32_t subtask : finished) count += vertexName(subtask) == vertex ? 1 : 0;
      return count;
    };
    std::deque<std::string> names;
    auto send = [&](const Deployment& deployment, ExecutionState state) {
      AttemptReport report;
      report.attempt = deployment.attempt;
      names.push_back(vertexName(deployment.subtask));
      report.vertex = names.back();
      report.subtaskIndex = graph.indexInVertex(deployment.subtask);
      report.state = state;
      report.exitCode = state == ExecutionState::FAILED ? 1 : 0;
      return graph.update(report, now, nowMs);
    };

    int steps = 0;
    for (; steps < 5000 && !graph.ended(); ++steps) {
      const int action = static_cast<int>(random() % 100);
      if (action < 25) {
        const ResourceId& worker = workers[random() % workers.size()];
        std::vector<OfferedSlot> offers(1 + random() % 2,
                                        OfferedSlot{AllocationId::random(), Profile{1000, kGiB}});
        for (auto& offer : offers) offer.allocation = AllocationId::random();
        graph.offerSlots(worker, offers);
      } else if (action < 70 && !live.empty()) {
        auto it = live.begin();
        std::advance(it, random() % live.size());
        const Deployment deployment = it->second;
        const ExecutionState state = chance(75) ? ExecutionState::FINISHED : ExecutionState::FAILED;
        if (chance(50)) send(deployment, ExecutionState::RUNNING);
        ASSERT_EQ(send(deployment, state), ExecutionGraph::Update::kApplied);
        EXPECT_EQ(send(deployment, state), ExecutionGraph::Update::kRepeated);
        if (state == ExecutionState::FINISHED) finished.insert(deployment.subtask);
        live.erase(it);
      } else if (action < 75) {
        const ResourceId worker = workers[random() % workers.size()];
        graph.workerLost(worker, "lost", now, nowMs);
        for (auto it = live.begin(); it != live.end();) {
          it = it->second.worker == worker ? live.erase(it) : std::next(it);
        }
      } else {
        now += std::chrono::milliseconds(random() % 100);
        nowMs += 100;
        graph.restartDue(now);
      }
      graph.takeSurplusSlots();
      for (const Deployment& deployment : graph.schedule(nowMs)) {
        const std::string vertex = vertexName(deployment.subtask);
        for (const std::string& up : upstream[vertex]) {
          ASSERT_EQ(finishedOf(up), parallelism[up]) << vertex << " deployed before " << up;
        }
        for (const auto& [attempt, other] : live) {
          ASSERT_NE(other.allocation, deployment.allocation) << "two attempts in one slot";
          ASSERT_NE(other.subtask, deployment.subtask) << "two live attempts of one subtask";
        }
        ASSERT_EQ(finished.count(deployment.subtask), 0u) << "a finished subtask ran again";
        live.emplace(deployment.attempt, deployment);
      }
      EXPECT_EQ(graph.liveAttempts().size(), live.size());
    }
    ASSERT_TRUE(graph.ended()) << "no end after " << steps << " steps";
    EXPECT_EQ(graph.state(), wire::JobState::FINISHED);
    EXPECT_EQ(finished.size(), graph.subtaskCount());
    EXPECT_TRUE(graph.schedule(nowMs).empty());
  }
}

// Whose attempt is whose (the JobMaster refuses a report of another worker's attempt): the
// worker it was deployed to while it is live, nobody once it ended, and each held slot's worker.
TEST_F(ExecutionGraphTest, AnAttemptBelongsToTheWorkerItWasDeployedToWhileItIsLive) {
  JobGraphBuilder builder({{"a", 1}});
  start(builder);
  const auto slots = offer(workerA_, 1);
  ASSERT_EQ(slots.size(), 1u);
  EXPECT_EQ(graph().workerOfSlot(slots[0]), workerA_);
  EXPECT_EQ(graph().workerOfSlot(AllocationId::random()), std::nullopt);
  auto deployed = graph().schedule(nowMs_);
  ASSERT_EQ(deployed.size(), 1u);
  EXPECT_EQ(graph().workerOfAttempt("a", 0, deployed[0].attempt), workerA_);
  EXPECT_EQ(graph().workerOfAttempt("a", 0, AttemptId::random()), std::nullopt);
  EXPECT_EQ(graph().workerOfAttempt("b", 0, deployed[0].attempt), std::nullopt);
  run(deployed[0], ExecutionState::FINISHED);
  EXPECT_EQ(graph().workerOfAttempt("a", 0, deployed[0].attempt), std::nullopt);
}

}  // namespace
}  // namespace regent::jobmaster

// The chaos checker's judgement on small histories written by hand: a clean run passes, and
// each invariant reports the run that breaks it (and lets through the cases it allows).
#include "tests/chaos/chaos_checker.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace regent::testing::chaos {
namespace {

TaskMark start(const std::string& attempt, uint32_t number, WallMs at, uint32_t subtask = 0) {
  return TaskMark{.job = "j1", .vertex = "v", .subtask = subtask, .start = true,
                  .pid = static_cast<pid_t>(1000 + at), .attempt = attempt,
                  .attemptNumber = number, .at = at};
}

TaskMark end(const std::string& attempt, uint32_t number, WallMs at, int exitCode,
             uint32_t subtask = 0) {
  return TaskMark{.job = "j1", .vertex = "v", .subtask = subtask, .start = false, .pid = 0,
                  .attempt = attempt, .attemptNumber = number, .exitCode = exitCode, .at = at};
}

WorkerTask ranOn(const std::string& attempt, const std::string& worker, WallMs at) {
  return WorkerTask{.resourceId = worker, .job = "j1", .attempt = attempt, .at = at};
}

// One leader, one job of one subtask that ran once and finished; everything settled.
History cleanRun() {
  History h;
  h.grants = {{"m0/0", 1, 100}};
  h.claims = {{"m0/0", 1, 1000, 2000}};
  h.rounds = {{.number = 0, .fault = "leader-kill", .target = "m0", .from = 50, .healed = 60,
               .to = 90, .settleMs = 30}};
  h.jobs = {{.id = "j1", .name = "dag", .shape = "dag", .acknowledged = true}};
  h.marks = {start("a1", 0, 200), end("a1", 0, 300, 0)};
  h.workerTasks = {ranOn("a1", "w1", 199)};
  h.finished = {{"j1", "v", 0, "a1", "m0/0", 310}};
  h.jobEnds = {{"j1", "FINISHED", "m0/0", 320}};
  h.final.servingMasters = {"m0/1"};
  h.final.liveWorkers = {"w1"};
  h.final.registeredWorkers = {"w1"};
  h.final.jobStates = {{"j1", "FINISHED"}};
  h.final.zookeeperEpoch = 1;
  return h;
}

std::string describeAll(const History& h, const std::vector<Violation>& violations) {
  std::string text;
  for (const Violation& v : violations) text += describeViolation(h, 7, v);
  return text;
}

// The invariants `violations` names, in order.
std::string invariants(const std::vector<Violation>& violations) {
  std::string names;
  for (const Violation& v : violations) names += v.invariant;
  return names;
}

TEST(ChaosCheckerTest, ACleanRunHasNoViolation) {
  History h = cleanRun();
  EXPECT_EQ(describeAll(h, checkHistory(h)), "");
}

TEST(ChaosCheckerTest, AnEpochGrantedTwiceOrGoingBackIsReported) {
  History h = cleanRun();
  h.grants = {{"m0/0", 1, 100}, {"m1/0", 1, 150}};
  EXPECT_EQ(invariants(checkHistory(h)), "a");
  h.grants = {{"m0/0", 2, 100}, {"m1/0", 1, 150}};
  h.final.zookeeperEpoch = 2;
  EXPECT_EQ(invariants(checkHistory(h)), "a");
}

TEST(ChaosCheckerTest, AStaleServingClaimAfterANewerOneWasSeenIsReported) {
  History h = cleanRun();
  h.grants = {{"m0/0", 1, 100}, {"m1/0", 2, 700}};
  h.final.zookeeperEpoch = 2;
  // m1 answered SERVING 2 at 3000 us; m0's SERVING 1 was asked for at 3100 us.
  h.claims = {{"m0/0", 1, 1000, 2000}, {"m1/0", 2, 2500, 3000}, {"m0/0", 1, 3100, 3200}};
  auto violations = checkHistory(h);
  ASSERT_EQ(invariants(violations), "a");
  EXPECT_NE(violations[0].what.find("m0/0 claimed SERVING epoch 1 after master m1/0"),
            std::string::npos)
      << violations[0].what;
  // Two claims in flight at once prove nothing: m0's went out before m1's answer came.
  h.claims = {{"m0/0", 1, 1000, 2000}, {"m1/0", 2, 2500, 3000}, {"m0/0", 1, 2900, 3200}};
  EXPECT_EQ(invariants(checkHistory(h)), "");
}

TEST(ChaosCheckerTest, AWorkerActingOnAnEpochBelowOneItTookIsReported) {
  History h = cleanRun();
  h.grants = {{"m0/0", 1, 100}, {"m1/0", 2, 700}};
  h.final.zookeeperEpoch = 2;
  h.workerEpochs = {{"w0/0", "w1", "", 1, 150},
                    {"w0/0", "w1", "TaskExecutorGateway.submitTask", 1, 199},
                    {"w0/0", "w1", "", 2, 800},
                    {"w0/0", "w1", "TaskExecutorGateway.freeSlot", 2, 900}};
  EXPECT_EQ(invariants(checkHistory(h)), "");
  // The deposed leader's disconnect, obeyed after the worker registered with the next one.
  h.workerEpochs.push_back({"w0/0", "w1", "TaskExecutorGateway.disconnect", 1, 950});
  const std::vector<Violation> found = checkHistory(h);
  EXPECT_EQ(invariants(found), "a");
  EXPECT_NE(describeAll(h, found).find("TaskExecutorGateway.disconnect epoch=1"),
            std::string::npos)
      << describeAll(h, found);
  // A call of the next epoch before the worker registered with it raised what it takes.
  h.workerEpochs = {{"w0/0", "w1", "", 1, 150},
                    {"w0/0", "w1", "TaskExecutorGateway.heartbeat", 2, 750},
                    {"w0/0", "w1", "TaskExecutorGateway.cancelTask", 1, 760}};
  EXPECT_EQ(invariants(checkHistory(h)), "a");
  // Each run of a worker starts anew: a restarted worker may take a lower epoch first.
  h.workerEpochs = {{"w0/0", "w1", "", 2, 150}, {"w0/1", "w1", "TaskExecutorGateway.freeSlot", 1, 160}};
  EXPECT_EQ(invariants(checkHistory(h)), "");
}

TEST(ChaosCheckerTest, ZooKeeperHoldingAnotherEpochThanTheLastGrantIsReported) {
  History h = cleanRun();
  h.final.zookeeperEpoch = 3;
  EXPECT_EQ(invariants(checkHistory(h)), "a");
}

TEST(ChaosCheckerTest, AnAcknowledgedJobTheLastLeaderDoesNotListIsLost) {
  History h = cleanRun();
  h.jobs.push_back({.id = "j2", .name = "long", .shape = "long", .acknowledged = true});
  EXPECT_EQ(invariants(checkHistory(h)), "b");
  // A submission regentctl did not acknowledge may be lost.
  h.jobs.back().acknowledged = false;
  EXPECT_EQ(invariants(checkHistory(h)), "");
  // A job that ended under one leader and that the last one does not know is lost as well (its
  // result was never stored).
  h = cleanRun();
  h.final.jobStates.clear();
  auto violations = checkHistory(h);
  ASSERT_EQ(invariants(violations), "b");
  ASSERT_EQ(violations[0].lines.size(), 1u);  // Its "job ended".
}

TEST(ChaosCheckerTest, TwoTerminalStatesOrATaskAfterTheEndAreReported) {
  History h = cleanRun();
  h.jobEnds.push_back({"j1", "FAILED", "m1/0", 900});
  EXPECT_EQ(invariants(checkHistory(h)), "c");
  h = cleanRun();
  h.marks.push_back(start("a2", 1, 400));
  h.workerTasks.push_back(ranOn("a2", "w1", 399));
  // The late start also breaks (e) and (f); (c) comes first.
  EXPECT_EQ(invariants(checkHistory(h)).substr(0, 1), "c");
}

TEST(ChaosCheckerTest, TwoLiveAttemptsAreReportedUnlessTheOlderOnesWorkerWasPausedOrCut) {
  History h = cleanRun();
  h.jobEnds.clear();
  h.finished.clear();
  h.final.jobStates = {{"j1", "FINISHED"}};
  h.marks = {start("a1", 0, 200), end("a1", 0, 600, 1), start("a2", 1, 400), end("a2", 1, 700, 0)};
  h.workerTasks = {ranOn("a1", "w1", 199), ranOn("a2", "w2", 399)};
  EXPECT_EQ(invariants(checkHistory(h)), "d");
  h.workerFaults = {{"w1", WorkerFault::Kind::kPause, 250, 3000}};
  EXPECT_EQ(invariants(checkHistory(h)), "");
  h.workerFaults = {{"w1", WorkerFault::Kind::kCut, 100, 300}};
  EXPECT_EQ(invariants(checkHistory(h)), "");
  // A pause of the newer attempt's worker excuses nothing.
  h.workerFaults = {{"w2", WorkerFault::Kind::kPause, 250, 3000}};
  EXPECT_EQ(invariants(checkHistory(h)), "d");
}

// A worker paused with a submitTask in its socket: the JobMaster gave the attempt up and ran the
// next one elsewhere; the stale one starts when the worker resumes, after its successor.
TEST(ChaosCheckerTest, AStaleAttemptStartingAfterItsSuccessorOnAPausedWorkerIsAllowed) {
  History h = cleanRun();
  h.finished = {{"j1", "v", 0, "a2", "m0/0", 810}};
  h.jobEnds = {{"j1", "FINISHED", "m0/0", 820}};
  h.marks = {start("a2", 1, 400), start("a1", 0, 500), end("a2", 1, 800, 0)};
  h.workerTasks = {ranOn("a2", "w2", 399), ranOn("a1", "w1", 499),
                   {"w1", "j1", "a1", true, "CANCELED", 520}};
  h.workerFaults = {{"w1", WorkerFault::Kind::kPause, 100, 490}};
  EXPECT_EQ(describeAll(h, checkHistory(h)), "");
  // The same without the pause: a1 ran beside its successor, and was replaced with no cause.
  h.workerFaults.clear();
  EXPECT_EQ(invariants(checkHistory(h)), "df");
}

TEST(ChaosCheckerTest, AnAttemptWhoseWorkerWasKilledEndedThenAndItsSuccessorMayRun) {
  History h = cleanRun();
  h.finished = {{"j1", "v", 0, "a2", "m0/0", 810}};
  h.marks = {start("a1", 0, 200), start("a2", 1, 400), end("a2", 1, 800, 0)};
  h.workerTasks = {ranOn("a1", "w1", 199), ranOn("a2", "w2", 399)};
  h.jobEnds = {{"j1", "FINISHED", "m0/0", 820}};
  h.workerFaults = {{"w1", WorkerFault::Kind::kKill, 300, 300}};
  EXPECT_EQ(describeAll(h, checkHistory(h)), "");
  // Without the kill, a1 was never seen ending: two live attempts, and a restart with no cause.
  h.workerFaults.clear();
  EXPECT_EQ(invariants(checkHistory(h)), "df");
}

// Seed 12, round 36: the worker logged "task started" and was SIGKILLed before the task, spawned
// just before, wrote its own start mark; the task finished a moment later, unheard, and the master
// failed the attempt with its worker's previous process. That restart has a cause: the kill.
TEST(ChaosCheckerTest, AKillBetweenTheDeployAndTheTasksOwnStartMarkCausesItsRestart) {
  History h = cleanRun();
  h.finished = {{"j1", "v", 0, "a2", "m0/0", 810}};
  h.marks = {start("a1", 0, 200), end("a1", 0, 210, 0), start("a2", 1, 400),
             end("a2", 1, 800, 0)};
  h.workerTasks = {ranOn("a1", "w1", 190), ranOn("a2", "w2", 399)};
  h.jobEnds = {{"j1", "FINISHED", "m0/0", 820}};
  h.workerFaults = {{"w1", WorkerFault::Kind::kKill, 195, 195}};
  EXPECT_EQ(describeAll(h, checkHistory(h)), "");
  // A kill before the attempt was deployed there is no cause.
  h.workerFaults = {{"w1", WorkerFault::Kind::kKill, 150, 150}};
  EXPECT_EQ(invariants(checkHistory(h)), "f");
}

TEST(ChaosCheckerTest, ASubtaskStartedAgainAfterItFinishedIsReported) {
  History h = cleanRun();
  h.jobEnds = {{"j1", "FINISHED", "m1/0", 900}};
  h.marks.push_back(start("a2", 1, 500));
  h.marks.push_back(end("a2", 1, 600, 0));
  h.workerTasks.push_back(ranOn("a2", "w2", 499));
  // Its worker was killed after it finished, so the restart has a cause; it is still a rerun.
  h.workerFaults = {{"w1", WorkerFault::Kind::kKill, 320, 320}};
  EXPECT_EQ(invariants(checkHistory(h)), "e");
}

TEST(ChaosCheckerTest, ARestartWithoutAFailureOrAWorkerFaultIsReported) {
  History h = cleanRun();
  h.finished = {{"j1", "v", 0, "a2", "m1/0", 810}};
  h.jobEnds = {{"j1", "FINISHED", "m1/0", 820}};
  h.marks = {start("a1", 0, 200), end("a1", 0, 300, 143), start("a2", 1, 400),
             end("a2", 1, 800, 0)};
  h.workerTasks = {ranOn("a1", "w1", 199), ranOn("a2", "w1", 399)};
  // a1 ended with 143: killed by SIGTERM it still wrote its end; a failure of its own.
  EXPECT_EQ(invariants(checkHistory(h)), "");
  // a1 never ended by itself and nothing hit its worker: a master fault restarted it.
  h.marks = {start("a1", 0, 200), start("a2", 1, 400), end("a2", 1, 800, 0)};
  h.workerTasks = {ranOn("a1", "w1", 199), {"w1", "j1", "a1", true, "FAILED", 350},
                   ranOn("a2", "w1", 399)};
  auto violations = checkHistory(h);
  ASSERT_EQ(invariants(violations), "f");
  EXPECT_EQ(violations[0].at, 400);
  EXPECT_NE(describeViolation(h, 7, violations[0]).find("seed=7 round=0 fault=leader-kill"),
            std::string::npos)
      << describeViolation(h, 7, violations[0]);
}

TEST(ChaosCheckerTest, TheFinalStateMustHaveOneLeaderEveryWorkerNoHeldSlotAndNoTask) {
  History h = cleanRun();
  h.final.servingMasters = {};
  EXPECT_EQ(invariants(checkHistory(h)), "g");
  h.final.servingMasters = {"m0/1", "m1/0"};
  EXPECT_EQ(invariants(checkHistory(h)), "g");
  h = cleanRun();
  h.final.liveWorkers = {"w1", "w2"};
  EXPECT_EQ(invariants(checkHistory(h)), "g");
  h = cleanRun();
  h.final.allocatedSlots = {{"w1", 0, "j1"}};
  EXPECT_EQ(invariants(checkHistory(h)), "g");
  h = cleanRun();
  h.final.leftoverPids = {1200};
  auto violations = checkHistory(h);
  ASSERT_EQ(invariants(violations), "g");
  ASSERT_EQ(violations[0].lines.size(), 1u);  // The start mark of that pid.
  h = cleanRun();
  h.final.jobStates = {{"j1", "RUNNING"}};
  h.jobEnds.clear();
  EXPECT_EQ(invariants(checkHistory(h)), "g");
}

}  // namespace
}  // namespace regent::testing::chaos

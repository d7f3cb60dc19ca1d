// The jobs itests' readers of event lines (job_cluster_test_util.h), on the lines as
// docs/operations.md writes them, in text and JSON log format; and the leftover-process check.
#include "tests/integration/job_cluster_test_util.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

namespace regent::testing {
namespace {

TEST(JobEventLines, ReadsAttemptAndJobLinesOfTheMaster) {
  const std::string output =
      "[2026-11-24 05:00:00.000] [master] [info] attempt deployed epoch=3 job=ab vertex=a "
      "subtask=1 attempt=cd attempt_number=2 resource_id=ef mono_us=1 wall_ms=2\n"
      "attempt state epoch=3 job=ab vertex=a subtask=1 attempt=cd state=FAILED exit_code=1 "
      "signal=0 message=\"exited with code 1\" mono_us=1 wall_ms=2\n"
      "job state epoch=3 job=ab state=RESTARTING restarts=1 mono_us=1 wall_ms=2\n"
      "worker registered epoch=3 resource_id=ef registration_id=1 host=h pid=1 slots=2\n"
      "{\"msg\":\"job ended epoch=3 job=ab state=FAILED restarts=1 mono_us=1 wall_ms=2\"}\n"
      "job clean epoch=3 job=ab state=FAILED mono_us=1 wall_ms=2\n"
      "job state epoch=3 job=ab";  // Incomplete: not read.
  const auto events = parseJobEvents(output);
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[0].kind, JobEvent::Kind::kAttemptDeployed);
  EXPECT_EQ(events[0].subtask, 1u);
  EXPECT_EQ(events[0].attemptNumber, 2u);
  EXPECT_EQ(events[0].resourceId, "ef");
  EXPECT_EQ(events[1].kind, JobEvent::Kind::kAttemptState);
  EXPECT_EQ(events[1].state, "FAILED");
  EXPECT_EQ(events[1].exitCode, 1);
  EXPECT_EQ(events[1].message, "exited with code 1");
  EXPECT_EQ(events[2].kind, JobEvent::Kind::kJobState);
  EXPECT_EQ(events[2].restarts, 1u);
  EXPECT_EQ(events[3].kind, JobEvent::Kind::kJobEnded);
  EXPECT_EQ(events[3].state, "FAILED");
  EXPECT_EQ(events[4].kind, JobEvent::Kind::kJobClean);
  EXPECT_EQ(events[4].job, "ab");
}

TEST(JobEventLines, ReadsTheReconciliationLinesOfTheMaster) {
  const auto events = parseJobEvents(
      "job reconciling job=ab expected=2 mono_us=1 wall_ms=2\n"
      "attempt adopted epoch=4 job=ab vertex=a subtask=1 attempt=cd attempt_number=3 worker=ef "
      "pid=77 mono_us=1 wall_ms=2\n"
      "job reconciled job=ab adopted=1 ended=0 unreported=1 timed_out=true mono_us=1 wall_ms=2\n"
      "job reconciled job=ab adopted=1 ended=0 unreported=1 timed_out=maybe\n"  // Not a bool.
      "attempt adopted job=ab vertex=a subtask=1 attempt=cd worker=ef\n"        // No pid.
      "attempt adopted job=ab subtask=1 attempt=cd worker=ef pid=77\n");        // No vertex.
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].kind, JobEvent::Kind::kJobReconciling);
  EXPECT_EQ(events[0].expected, 2u);
  EXPECT_EQ(events[1].kind, JobEvent::Kind::kAttemptAdopted);
  EXPECT_EQ(events[1].epoch, 4u);
  EXPECT_EQ(events[1].vertex, "a");
  EXPECT_EQ(events[1].subtask, 1u);
  EXPECT_EQ(events[1].attempt, "cd");
  EXPECT_EQ(events[1].attemptNumber, 3u);
  EXPECT_EQ(events[1].resourceId, "ef");
  EXPECT_EQ(events[1].pid, 77);
  EXPECT_EQ(events[2].kind, JobEvent::Kind::kJobReconciled);
  EXPECT_EQ(events[2].adopted, 1u);
  EXPECT_EQ(events[2].unreported, 1u);
  EXPECT_TRUE(events[2].timedOut);
}

TEST(JobEventLines, AReconciledLineIsComparedOnlyOnTheCountsExpected) {
  JobEvent reconciled;
  reconciled.kind = JobEvent::Kind::kJobReconciled;
  reconciled.adopted = 1;
  reconciled.ended = 1;
  reconciled.unreported = 1;
  reconciled.timedOut = true;
  EXPECT_EQ(reconciliationMismatch(reconciled, {.unreported = 1, .timedOut = true}), "");
  EXPECT_EQ(reconciliationMismatch(
                reconciled, {.adopted = 1, .adoptedOrEnded = 2, .unreported = 1, .timedOut = true}),
            "");
  const std::string adopted =
      reconciliationMismatch(reconciled, {.adopted = 2, .unreported = 1, .timedOut = true});
  EXPECT_TRUE(containsText(adopted, "adopted=2")) << adopted;
  EXPECT_NE(
      reconciliationMismatch(reconciled, {.adoptedOrEnded = 1, .unreported = 1, .timedOut = true}),
      "");
  EXPECT_NE(reconciliationMismatch(reconciled, {.timedOut = true}), "");  // unreported=1.
  EXPECT_NE(reconciliationMismatch(reconciled, {.unreported = 1}), "");   // timed out.
}

TEST(TaskMarkers, ReadsTheStartsATaskAppended) {
  TempDir dir("regent-markers");
  std::ofstream(markerPath(dir.path(), "v", 1)) << "42 ab 0\nbroken\n43 cd 1\n";
  const auto markers = readMarkers(dir.path(), "v", 1);
  ASSERT_EQ(markers.size(), 2u);
  EXPECT_EQ(markers[0].pid, 42);
  EXPECT_EQ(markers[0].attempt, "ab");
  EXPECT_EQ(markers[1].attemptNumber, 1u);
  EXPECT_TRUE(readMarkers(dir.path(), "v", 0).empty());
}

TEST(TaskEventLines, ReadsTaskLinesOfAWorker) {
  const auto events = parseTaskEvents(
      "task started resource_id=r job=j attempt=a pid=42 mono_us=1 wall_ms=2\n"
      "task ended resource_id=r job=j attempt=a state=CANCELED exit_code=0 signal=9 mono_us=1 "
      "wall_ms=2\n"
      "task started resource_id=r job=j attempt=a mono_us=1 wall_ms=2\n");  // No pid: skipped.
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].pid, 42);
  EXPECT_EQ(events[1].state, "CANCELED");
  EXPECT_EQ(events[1].signal, 9);
}

TEST(LeftoverProcesses, ARunningProcessIsNotGoneAnEndedOneIs) {
  EXPECT_FALSE(processGone(::getpid()));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  // Not reaped yet: only its zombie is left, which counts as gone.
  EXPECT_TRUE(waitForProcessesGone({child}, Duration(10000)).empty());
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(processGone(child));
}

}  // namespace
}  // namespace regent::testing

// The jobs itests' readers of events (job_cluster_test_util.h), on events files as the process
// writes them (common/json_lines_event_sink.h); and the leftover-process check.
#include "tests/integration/job_cluster_test_util.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/event_sink.h"
#include "common/json_lines_event_sink.h"

namespace regent::testing {
namespace {

// An events file as the process writes it (common/json_lines_event_sink.h).
std::string eventsFile(const std::vector<Event>& events) {
  std::string text;
  for (const Event& event : events) text += jsonLine(event) + "\n";
  return text;
}

// The waits of the jobs itests poll events files through an EventsFileReader
// (master_cluster_test_util.h): a poll reads what was appended since the last one, not the whole
// file again, and a line being written only once it is whole.
TEST(EventsFiles, AReaderReadsOnlyWhatWasAppendedAndALineOnceItIsWhole) {
  TempDir dir("regent-events");
  const std::string path = dir.path() + "/events.jsonl";
  EventsFileReader reader(path);
  EXPECT_TRUE(reader.read().empty()) << "a file not written yet holds no events";

  const std::string two = jsonLine(Event("two"));
  std::ofstream(path) << eventsFile({Event("one")}) << two.substr(0, two.size() / 2);
  ASSERT_EQ(reader.read().size(), 1u) << "the half-written line was read";
  EXPECT_EQ(reader.read()[0].name(), "one");

  // The line read already, rewritten in place: a reader that reads it again sees "six".
  std::fstream rewrite(path, std::ios::in | std::ios::out);
  const std::string text((std::istreambuf_iterator<char>(rewrite)),
                         std::istreambuf_iterator<char>());
  ASSERT_NE(text.find("\"one\""), std::string::npos) << text;
  rewrite.seekp(static_cast<std::streamoff>(text.find("\"one\"") + 1));
  rewrite << "six";
  rewrite.close();
  std::ofstream(path, std::ios::app) << two.substr(two.size() / 2) << "\n";
  const auto& events = reader.read();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].name(), "one") << "a line read before was read again";
  EXPECT_EQ(events[1].name(), "two");
  EXPECT_EQ(reader.read().size(), 2u) << "nothing appended, nothing new";
}

TEST(JobEvents, ReadsAttemptAndJobEventsOfTheMastersEventsFile) {
  const std::string text =
      eventsFile({Event("attempt deployed")
                      .field("epoch", uint64_t{3})
                      .field("job", "ab")
                      .field("vertex", "a")
                      .field("subtask", 1u)
                      .field("attempt", "cd")
                      .field("attempt_number", 2u)
                      .field("resource_id", "ef"),
                  Event("attempt state")
                      .field("epoch", uint64_t{3})
                      .field("job", "ab")
                      .field("vertex", "a")
                      .field("subtask", 1u)
                      .field("attempt", "cd")
                      .field("state", "FAILED")
                      .field("exit_code", 1)
                      .field("signal", 0)
                      .quotedField("message", "exited with \"code\" 1"),
                  Event("job state")
                      .field("epoch", uint64_t{3})
                      .field("job", "ab")
                      .field("state", "RESTARTING")
                      .field("restarts", 1u),
                  Event("worker registered").field("epoch", uint64_t{3}).field("resource_id", "ef"),
                  Event("job ended")
                      .field("epoch", uint64_t{3})
                      .field("job", "ab")
                      .field("state", "FAILED")
                      .field("restarts", 1u),
                  Event("job clean")
                      .field("epoch", uint64_t{3})
                      .field("job", "ab")
                      .field("state", "FAILED")}) +
      "not an event\n" + jsonLine(Event("job state").field("epoch", uint64_t{3}));  // Unfinished.
  const auto events = parseJobEvents(parseEventsFile(text));
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[0].kind, JobEvent::Kind::kAttemptDeployed);
  EXPECT_EQ(events[0].subtask, 1u);
  EXPECT_EQ(events[0].attemptNumber, 2u);
  EXPECT_EQ(events[0].resourceId, "ef");
  EXPECT_EQ(events[1].kind, JobEvent::Kind::kAttemptState);
  EXPECT_EQ(events[1].state, "FAILED");
  EXPECT_EQ(events[1].exitCode, 1);
  EXPECT_EQ(events[1].message, "exited with \"code\" 1");  // The file keeps text as it is.
  EXPECT_EQ(events[2].kind, JobEvent::Kind::kJobState);
  EXPECT_EQ(events[2].restarts, 1u);
  EXPECT_EQ(events[3].kind, JobEvent::Kind::kJobEnded);
  EXPECT_EQ(events[3].state, "FAILED");
  EXPECT_EQ(events[4].kind, JobEvent::Kind::kJobClean);
  EXPECT_EQ(events[4].job, "ab");
}

TEST(JobEvents, ReadsTheReconciliationEventsOfTheMaster) {
  const auto events = parseJobEvents(parseEventsFile(eventsFile({
      Event("job reconciling").field("job", "ab").field("expected", 2u),
      Event("attempt adopted")
          .field("epoch", uint64_t{4})
          .field("job", "ab")
          .field("vertex", "a")
          .field("subtask", 1u)
          .field("attempt", "cd")
          .field("attempt_number", 3u)
          .field("worker", "ef")
          .field("pid", 77u),
      Event("job reconciled")
          .field("job", "ab")
          .field("adopted", 1u)
          .field("ended", 0u)
          .field("unreported", 1u)
          .field("timed_out", "true"),
      Event("job reconciled")  // Not a bool.
          .field("job", "ab")
          .field("adopted", 1u)
          .field("ended", 0u)
          .field("unreported", 1u)
          .field("timed_out", "maybe"),
      Event("attempt adopted")  // No pid.
          .field("job", "ab")
          .field("vertex", "a")
          .field("subtask", 1u)
          .field("attempt", "cd")
          .field("worker", "ef"),
      Event("attempt adopted")  // No vertex.
          .field("job", "ab")
          .field("subtask", 1u)
          .field("attempt", "cd")
          .field("worker", "ef")
          .field("pid", 77u),
  })));
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

TEST(TaskEvents, ReadsTaskEventsOfAWorkersEventsFile) {
  const auto events = parseTaskEvents(parseEventsFile(eventsFile({
      Event("task started")
          .field("resource_id", "r")
          .field("job", "j")
          .field("attempt", "a")
          .field("pid", uint64_t{42}),
      Event("task ended")
          .field("resource_id", "r")
          .field("job", "j")
          .field("attempt", "a")
          .field("state", "CANCELED")
          .field("exit_code", 0)
          .field("signal", 9),
      Event("task started").field("resource_id", "r").field("job", "j").field("attempt", "a"),
  })));  // The last has no pid: skipped.
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

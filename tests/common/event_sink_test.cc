// Events and the sinks every process composes: the log line an event makes (the text of
// EventLine), the log sink at the event's level, the null sink and the fan-out.
#include "common/event_sink.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "common/log_event_sink.h"
#include "common/time.h"
#include "tests/common/logging_test_util.h"

namespace regent {
namespace {

// Keeps the names of the events it gets, tagged, in one list shared by several.
class RecordingSink final : public EventSink {
 public:
  RecordingSink(std::string tag, std::vector<std::string>& seen)
      : tag_(std::move(tag)), seen_(seen) {}
  void emit(const Event& event) override { seen_.push_back(tag_ + ":" + event.name()); }

 private:
  const std::string tag_;
  std::vector<std::string>& seen_;
};

TEST(Event, ItsLineIsTheEventLineWithTheClocksLast) {
  const Event event = Event("leadership revoked")
                          .field("epoch", uint64_t{7})
                          .field("master_id", "4f2a")
                          .quotedField("reason", "the \"latch\" node\nwas deleted")
                          .field("delta", -3)
                          .field("note", "two words")
                          .at(123, 456);
  EXPECT_EQ(event.line(),
            "leadership revoked epoch=7 master_id=4f2a reason=\"the 'latch' node was deleted\" "
            "delta=-3 note=\"two words\" mono_us=123 wall_ms=456");
}

TEST(Event, IsStampedWhenMadeOnBothClocks) {
  const int64_t monoBefore = monotonicMicros();
  const int64_t wallBefore = wallClockMillis();
  const Event event("e");
  EXPECT_GE(event.monoUs(), monoBefore);
  EXPECT_LE(event.monoUs(), monotonicMicros());
  EXPECT_GE(event.wallMs(), wallBefore);
  EXPECT_LE(event.wallMs(), wallClockMillis());
}

TEST(Event, KeepsFieldsInOrderWithTheirTypes) {
  const Event event = Event("e", EventLevel::kWarn).field("a", "x").field("b", 2).field("c", 3u);
  EXPECT_EQ(event.level(), EventLevel::kWarn);
  ASSERT_EQ(event.fields().size(), 3u);
  EXPECT_EQ(event.fields()[0].key, "a");
  EXPECT_EQ(std::get<std::string>(event.fields()[0].value), "x");
  EXPECT_EQ(std::get<int64_t>(event.fields()[1].value), 2);
  EXPECT_EQ(std::get<uint64_t>(event.fields()[2].value), 3u);
}

class LogEventSinkTest : public DefaultLoggerTest {};

TEST_F(LogEventSinkTest, LogsTheEventLineAtTheEventsLevel) {
  captureLog();
  spdlog::default_logger()->set_pattern("%l %v");
  LogEventSink sink;
  sink.emit(Event("worker refused", EventLevel::kWarn).field("epoch", 3).at(1, 2));
  sink.emit(Event("handover failed", EventLevel::kError).quotedField("reason", "x").at(3, 4));
  sink.emit(Event("task started").field("pid", 42).at(5, 6));
  EXPECT_EQ(capturedLog(),
            "warning worker refused epoch=3 mono_us=1 wall_ms=2\n"
            "error handover failed reason=\"x\" mono_us=3 wall_ms=4\n"
            "info task started pid=42 mono_us=5 wall_ms=6\n");
}

TEST(FanOutEventSink, HandsEachEventToEverySinkInTheOrderAdded) {
  std::vector<std::string> seen;
  RecordingSink first("1", seen);
  RecordingSink second("2", seen);
  FanOutEventSink fanOut;
  fanOut.add(first);
  fanOut.add(second);
  fanOut.emit(Event("a"));
  fanOut.emit(Event("b"));
  EXPECT_EQ(seen, (std::vector<std::string>{"1:a", "2:a", "1:b", "2:b"}));
}

TEST(SelectedEventSink, HandsOnOnlyTheEventsNamedWithTheirFields) {
  std::vector<std::string> seen;
  RecordingSink kept("k", seen);
  SelectedEventSink selected(kept, {"job ended", "worker removed"});
  selected.emit(Event("job ended").field("job", "ab"));
  selected.emit(Event("slot report"));
  selected.emit(Event("job ended x"));  // Names match whole, not by prefix.
  selected.emit(Event("worker removed").quotedField("reason", "gone"));
  EXPECT_EQ(seen, (std::vector<std::string>{"k:job ended", "k:worker removed"}));
}

}  // namespace
}  // namespace regent

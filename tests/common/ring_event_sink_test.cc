// The in-memory ring of recent events: bounded, oldest first, the oldest dropped for the newest.
#include "common/ring_event_sink.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace regent {
namespace {

std::vector<std::string> names(const RingEventSink& ring) {
  std::vector<std::string> out;
  for (const Event& event : ring.recent()) out.push_back(event.name());
  return out;
}

TEST(RingEventSink, KeepsEveryEventInOrderUntilFull) {
  RingEventSink ring(3);
  EXPECT_TRUE(ring.recent().empty());
  ring.emit(Event("a"));
  ring.emit(Event("b"));
  EXPECT_EQ(names(ring), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(ring.emitted(), 2u);
}

TEST(RingEventSink, KeepsOnlyTheLastCapacityEventsOldestFirst) {
  RingEventSink ring(3);
  for (const char* name : {"a", "b", "c", "d", "e", "f", "g"}) ring.emit(Event(name));
  EXPECT_EQ(names(ring), (std::vector<std::string>{"e", "f", "g"}));
  EXPECT_EQ(ring.emitted(), 7u);
  ring.emit(Event("h"));
  EXPECT_EQ(names(ring), (std::vector<std::string>{"f", "g", "h"}));
}

TEST(RingEventSink, KeepsTheEventsWhole) {
  RingEventSink ring(2);
  ring.emit(Event("job state").field("job", "ab").field("restarts", 1).at(10, 20));
  const auto recent = ring.recent();
  ASSERT_EQ(recent.size(), 1u);
  EXPECT_EQ(recent[0].line(), "job state job=ab restarts=1 mono_us=10 wall_ms=20");
}

TEST(RingEventSink, ACapacityOfZeroKeepsOne) {
  RingEventSink ring(0);
  EXPECT_EQ(ring.capacity(), 1u);
  ring.emit(Event("a"));
  ring.emit(Event("b"));
  EXPECT_EQ(names(ring), (std::vector<std::string>{"b"}));
}

}  // namespace
}  // namespace regent

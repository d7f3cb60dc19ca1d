// Events: what a process reports as it runs (a grant, a registration, a task's end), built once
// and handed to one EventSink, which writes them wherever the process was told to: the log lines
// (log_event_sink.h, the text docs/operations.md lists), an in-memory ring of the recent ones
// (ring_event_sink.h, for a status page), a JSON-lines file (json_lines_event_sink.h, for tests
// and tools). A process that wants several fans out (FanOutEventSink); a component whose events
// are off gets a NullEventSink.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <unordered_set>
#include <variant>
#include <vector>

namespace regent {

enum class EventLevel { kInfo, kWarn, kError };

// One event: its name ("leadership granted"), its fields in the order they were added, the log
// level of its line, and when it happened on both clocks (common/time.h).
class Event final {
 public:
  using Value = std::variant<std::string, int64_t, uint64_t>;
  struct Field {
    std::string key;
    Value value;
    bool quoted = false;  // Free text: the log line always quotes it (EventLine::quotedField).
  };

  // Stamped now: monotonicMicros() and wallClockMillis().
  explicit Event(std::string_view name, EventLevel level = EventLevel::kInfo);

  Event& field(std::string_view key, std::string_view value);
  Event& field(std::string_view key, const std::string& value) {
    return field(key, std::string_view(value));
  }
  Event& field(std::string_view key, const char* value) {
    return field(key, std::string_view(value));
  }
  Event& field(std::string_view key, int64_t value);
  Event& field(std::string_view key, uint64_t value);
  Event& field(std::string_view key, int value) { return field(key, int64_t{value}); }
  Event& field(std::string_view key, unsigned value) { return field(key, uint64_t{value}); }
  // Free text (a reason, a message).
  Event& quotedField(std::string_view key, std::string_view value);
  // Replaces the stamp (tests, and events re-read from elsewhere).
  Event& at(int64_t monoUs, int64_t wallMs);

  const std::string& name() const { return name_; }
  EventLevel level() const { return level_; }
  const std::vector<Field>& fields() const { return fields_; }
  int64_t monoUs() const { return monoUs_; }
  int64_t wallMs() const { return wallMs_; }

  // The event line: "<name> key=value ... mono_us=<monoUs> wall_ms=<wallMs>", written by
  // EventLine (common/event_line.h) and read back by parseEventLine.
  std::string line() const;

 private:
  std::string name_;
  EventLevel level_;
  std::vector<Field> fields_;
  int64_t monoUs_;
  int64_t wallMs_;
};

// Where a process's events go. Called on the thread that owns the component reporting (the
// loop thread, or main() before and after the loop); implementations are not thread-safe.
// emit() must not block for long: it runs on the loop thread.
class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void emit(const Event& event) = 0;
};

// Drops every event: for components whose events are off (a benchmark's simulated workers).
class NullEventSink final : public EventSink {
 public:
  void emit(const Event&) override {}
};

// Hands each event to every sink added, in the order they were added. The sinks must outlive it.
class FanOutEventSink final : public EventSink {
 public:
  void add(EventSink& sink) { sinks_.push_back(&sink); }
  void emit(const Event& event) override {
    for (EventSink* sink : sinks_) sink->emit(event);
  }

 private:
  std::vector<EventSink*> sinks_;
};

// Hands `to` only the events named in `names` (a ring that keeps the few kinds a page shows out
// of a process's many). `to` must outlive it.
class SelectedEventSink final : public EventSink {
 public:
  SelectedEventSink(EventSink& to, std::initializer_list<std::string_view> names) : to_(to) {
    for (std::string_view name : names) names_.emplace(name);
  }
  void emit(const Event& event) override {
    if (names_.contains(event.name())) to_.emit(event);
  }

 private:
  EventSink& to_;
  std::unordered_set<std::string> names_;
};

}  // namespace regent

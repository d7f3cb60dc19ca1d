// Event lines, written and read in one place. A process logs one line per event that tools and
// tests read back: "<event> key=value key=value ...", for example
//   leadership granted epoch=7 master_id=4f2a mono_us=123 wall_ms=456
//   leadership revoked epoch=7 master_id=4f2a reason="session expired" mono_us=130 wall_ms=460
// Bare values run to the next space; free text (a reason) goes between double quotes and never
// contains one (quotable() replaces it), so neither side needs escapes. docs/operations.md lists
// the events each process logs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace regent {

// `text` made safe to print between double quotes on one line: '"' becomes '\'' and line
// breaks become spaces. For format strings such as `reason=\"{}\"`.
std::string quotable(std::string_view text);

// Builds one event line: EventLine("leadership granted").field("epoch", 7).str().
class EventLine final {
 public:
  explicit EventLine(std::string_view event) : line_(event) {}

  // ` key=value`. A value that is empty or holds a space, '=' or '"' is written quoted (as
  // quotedField does), so a reader always gets it back whole.
  EventLine& field(std::string_view key, std::string_view value);
  EventLine& field(std::string_view key, const std::string& value) {
    return field(key, std::string_view(value));
  }
  EventLine& field(std::string_view key, const char* value) {
    return field(key, std::string_view(value));
  }
  EventLine& field(std::string_view key, int64_t value);
  EventLine& field(std::string_view key, uint64_t value);
  EventLine& field(std::string_view key, int value) { return field(key, int64_t{value}); }
  EventLine& field(std::string_view key, unsigned value) { return field(key, uint64_t{value}); }
  // ` key="value"` always quoted, for free text (reasons, messages).
  EventLine& quotedField(std::string_view key, std::string_view value);

  const std::string& str() const { return line_; }

 private:
  std::string line_;
};

// The fields of one parsed event line, in the order they were written.
struct EventFields {
  std::vector<std::pair<std::string, std::string>> fields;

  // The value of `key` (the first, if it repeats), or nullopt.
  std::optional<std::string> get(std::string_view key) const;
  // The value of `key` as a decimal integer; nullopt if absent or not a whole number in range.
  std::optional<int64_t> getInt(std::string_view key) const;
  std::optional<uint64_t> getUint(std::string_view key) const;
};

// Reads the event line `event` out of `line`: `event` must stand at the start of the line or
// after a space (a logger's time, level and name before it are skipped), followed by the end
// of the line or a space and the fields. Returns nullopt if the line does not hold `event`
// or a field is malformed (no '=', an unterminated quote). Lines a JSON logger wrote are
// unwrapped by the caller (the event line is the object's "msg").
std::optional<EventFields> parseEventLine(std::string_view line, std::string_view event);

}  // namespace regent

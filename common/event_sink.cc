// Event (see event_sink.h): fields kept typed, so each sink writes them its own way.
#include "common/event_sink.h"

#include <utility>

#include "common/event_line.h"
#include "common/time.h"

namespace regent {

Event::Event(std::string_view name, EventLevel level)
    : name_(name), level_(level), monoUs_(monotonicMicros()), wallMs_(wallClockMillis()) {}

Event& Event::field(std::string_view key, std::string_view value) {
  fields_.push_back(Field{std::string(key), std::string(value), false});
  return *this;
}

Event& Event::field(std::string_view key, int64_t value) {
  fields_.push_back(Field{std::string(key), value, false});
  return *this;
}

Event& Event::field(std::string_view key, uint64_t value) {
  fields_.push_back(Field{std::string(key), value, false});
  return *this;
}

Event& Event::quotedField(std::string_view key, std::string_view value) {
  fields_.push_back(Field{std::string(key), std::string(value), true});
  return *this;
}

Event& Event::at(int64_t monoUs, int64_t wallMs) {
  monoUs_ = monoUs;
  wallMs_ = wallMs;
  return *this;
}

std::string Event::line() const {
  EventLine line(name_);
  for (const Field& field : fields_) {
    if (const auto* text = std::get_if<std::string>(&field.value)) {
      if (field.quoted) {
        line.quotedField(field.key, *text);
      } else {
        line.field(field.key, *text);
      }
    } else if (const auto* number = std::get_if<int64_t>(&field.value)) {
      line.field(field.key, *number);
    } else {
      line.field(field.key, std::get<uint64_t>(field.value));
    }
  }
  line.field("mono_us", monoUs_).field("wall_ms", wallMs_);
  return line.str();
}

}  // namespace regent

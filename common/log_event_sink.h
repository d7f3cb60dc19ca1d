// The event sink every process has: each event as one log line at its level, the text
// docs/operations.md lists and the benchmarks and integration tests read
// ("leadership granted epoch=7 master_id=4f2a mono_us=123 wall_ms=456", Event::line()).
#pragma once

#include "common/event_sink.h"

namespace regent {

// Writes through spdlog's default logger (common/logging.h), so --log-format json wraps the
// line as the "msg" of a JSON log line.
class LogEventSink final : public EventSink {
 public:
  void emit(const Event& event) override;
};

}  // namespace regent

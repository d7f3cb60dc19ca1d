// LogEventSink (see log_event_sink.h).
#include "common/log_event_sink.h"

#include <spdlog/spdlog.h>

namespace regent {

void LogEventSink::emit(const Event& event) {
  switch (event.level()) {
    case EventLevel::kInfo:
      spdlog::info("{}", event.line());
      return;
    case EventLevel::kWarn:
      spdlog::warn("{}", event.line());
      return;
    case EventLevel::kError:
      spdlog::error("{}", event.line());
      return;
  }
}

}  // namespace regent

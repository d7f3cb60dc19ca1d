// Tests that point spdlog's default logger at their own stream restore the original with this,
// so no later log call writes to a stream that is gone. captureLog() is that stream for tests
// that read the event lines a component logged (common/event_line.h).
#pragma once

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "common/event_line.h"

namespace regent {

class DefaultLoggerTest : public ::testing::Test {
 protected:
  void TearDown() override { spdlog::set_default_logger(original_); }

  // Sends the default logger's lines to capturedLog() for the rest of the test (TearDown puts
  // the original logger back).
  void captureLog() {
    spdlog::set_default_logger(std::make_shared<spdlog::logger>(
        "captured", std::make_shared<spdlog::sinks::ostream_sink_st>(captured_)));
  }
  std::string capturedLog() const { return captured_.str(); }
  // Every captured line that is the event line `event`, parsed, in order.
  std::vector<EventFields> capturedEvents(std::string_view event) const {
    std::vector<EventFields> found;
    std::istringstream lines(captured_.str());
    for (std::string line; std::getline(lines, line);) {
      if (auto fields = parseEventLine(line, event)) found.push_back(*fields);
    }
    return found;
  }
  // The first captured line that is the event line `event`, parsed.
  std::optional<EventFields> capturedEvent(std::string_view event) const {
    auto found = capturedEvents(event);
    if (found.empty()) return std::nullopt;
    return found.front();
  }

 private:
  std::shared_ptr<spdlog::logger> original_ = spdlog::default_logger();
  std::ostringstream captured_;
};

}  // namespace regent

// Logging set-up: text lines by default, one parseable JSON object per line in json format.
#include "common/logging.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/common/logging_test_util.h"

namespace regent {
namespace {

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

using LoggingTest = DefaultLoggerTest;

TEST_F(LoggingTest, JsonFormatWritesOneParseableObjectPerLine) {
  std::ostringstream captured;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(captured);
  ASSERT_TRUE(setupLogging({.level = "info", .format = LogFormat::kJson, .process = "master"}, sink).ok());
  spdlog::info("granted leadership epoch={}", 7);
  spdlog::warn("quote \" backslash \\ newline \n end");
  spdlog::debug("below the level, not written");

  auto out = lines(captured.str());
  ASSERT_EQ(out.size(), 2u) << captured.str();
  auto first = nlohmann::json::parse(out[0]);
  EXPECT_EQ(first["msg"], "granted leadership epoch=7");
  EXPECT_EQ(first["level"], "info");
  EXPECT_EQ(first["logger"], "master");
  EXPECT_TRUE(first["ts"].is_string());
  EXPECT_EQ(first["ts"].get<std::string>().back(), 'Z');
  auto second = nlohmann::json::parse(out[1]);
  EXPECT_EQ(second["msg"], "quote \" backslash \\ newline \n end");
  EXPECT_EQ(second["level"], "warning");
}

TEST_F(LoggingTest, TextFormatNamesLevelAndProcess) {
  std::ostringstream captured;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(captured);
  ASSERT_TRUE(setupLogging({.level = "debug", .format = LogFormat::kText, .process = "worker"}, sink).ok());
  spdlog::debug("slot report sent");
  auto out = lines(captured.str());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NE(out[0].find("debug"), std::string::npos) << out[0];
  EXPECT_NE(out[0].find("[worker]"), std::string::npos) << out[0];
  EXPECT_NE(out[0].find("slot report sent"), std::string::npos) << out[0];
  EXPECT_FALSE(nlohmann::json::accept(out[0])) << "text lines are not JSON";
}

TEST_F(LoggingTest, UnknownLevelIsAnErrorNamingIt) {
  auto status = setupLogging({.level = "verbose"});
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message.find("\"verbose\""), std::string::npos) << status.error().message;
}

}  // namespace
}  // namespace regent

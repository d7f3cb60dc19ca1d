// log.level and log.format reach the logging set-up, from any source.
#include "conf/logging_config.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/common/logging_test_util.h"

namespace regent {
namespace {

using LoggingConfig = DefaultLoggerTest;

TEST_F(LoggingConfig, DefaultsAreInfoAndText) {
  auto config = loadConfig({});
  ASSERT_TRUE(config.ok()) << config.error().message;
  LogOptions options = logOptionsFrom(config.value(), "master");
  EXPECT_EQ(options.level, "info");
  EXPECT_EQ(options.format, LogFormat::kText);
  EXPECT_EQ(options.process, "master");
}

TEST_F(LoggingConfig, JsonFormatFromTheEnvironmentProducesJsonLines) {
  auto config = loadConfig({.environment = {{"REGENT_LOG_FORMAT", "json"}},
                            .set = {"log.level=debug"}});
  ASSERT_TRUE(config.ok()) << config.error().message;
  LogOptions options = logOptionsFrom(config.value(), "worker");
  EXPECT_EQ(options.level, "debug");
  EXPECT_EQ(options.format, LogFormat::kJson);

  std::ostringstream captured;
  ASSERT_TRUE(setupLogging(options, std::make_shared<spdlog::sinks::ostream_sink_mt>(captured)).ok());
  spdlog::debug("slot {} offered", 3);
  auto line = nlohmann::json::parse(captured.str());
  EXPECT_EQ(line["msg"], "slot 3 offered");
  EXPECT_EQ(line["logger"], "worker");
}

TEST_F(LoggingConfig, EveryLevelTheRegistryAcceptsIsAcceptedByTheLogger) {
  for (const char* level : {"trace", "debug", "info", "warn", "error", "off"}) {
    auto config = loadConfig({.set = {std::string("log.level=") + level}});
    ASSERT_TRUE(config.ok()) << level << ": " << config.error().message;
    std::ostringstream captured;
    EXPECT_TRUE(setupLogging(logOptionsFrom(config.value(), "t"),
                             std::make_shared<spdlog::sinks::ostream_sink_mt>(captured))
                    .ok())
        << level;
  }
}

}  // namespace
}  // namespace regent

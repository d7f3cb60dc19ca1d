// TaskSetErrorLogger: a failed task of a kj::TaskSet is logged with its component, not rethrown.
#include "common/task_set_error_logger.h"

#include <gtest/gtest.h>
#include <kj/debug.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <sstream>

#include "common/event_loop.h"

namespace regent {
namespace {

TEST(TaskSetErrorLogger, AFailedTaskIsLoggedWithItsComponent) {
  std::ostringstream out;
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "test", std::make_shared<spdlog::sinks::ostream_sink_mt>(out)));
  {
    EventLoop loop;
    TaskSetErrorLogger logger("store");
    kj::TaskSet tasks(logger);
    tasks.add(kj::Promise<void>(KJ_EXCEPTION(FAILED, "disk on fire")));
    loop.run(tasks.onEmpty());
  }
  spdlog::set_default_logger(previous);
  EXPECT_NE(out.str().find("store task failed: disk on fire"), std::string::npos) << out.str();
}

TEST(TaskSetErrorLogger, AFailureBelowTheLevelIsNotLogged) {
  std::ostringstream out;
  auto previous = spdlog::default_logger();
  auto logger = std::make_shared<spdlog::logger>(
      "test", std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  logger->set_level(spdlog::level::info);
  spdlog::set_default_logger(logger);
  TaskSetErrorLogger quiet("rpc: connection", spdlog::level::debug);
  quiet.taskFailed(KJ_EXCEPTION(DISCONNECTED, "peer left"));
  spdlog::set_default_logger(previous);
  EXPECT_EQ(out.str(), "");
  EXPECT_EQ(quiet.describe(KJ_EXCEPTION(DISCONNECTED, "peer left")),
            "rpc: connection task failed: peer left");
}

}  // namespace
}  // namespace regent

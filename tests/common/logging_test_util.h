// Tests that point spdlog's default logger at their own stream restore the original with this,
// so no later log call writes to a stream that is gone.
#pragma once

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <memory>

namespace regent {

class DefaultLoggerTest : public ::testing::Test {
 protected:
  void TearDown() override { spdlog::set_default_logger(original_); }

 private:
  std::shared_ptr<spdlog::logger> original_ = spdlog::default_logger();
};

}  // namespace regent

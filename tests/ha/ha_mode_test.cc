// HaMode: `ha.mode` parsed once into a type, and the factory that branches on it.
#include "ha/ha_mode.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "conf/config.h"
#include "ha/ha_services.h"

namespace regent::ha {
namespace {

Config configWith(std::vector<std::string> set) {
  auto config = loadConfig(ConfigSources{.set = std::move(set)});
  if (!config.ok()) throw std::runtime_error(config.error().message);
  return std::move(config).value();
}

TEST(HaMode, NamesRoundTripThroughTheParser) {
  for (HaMode mode : {HaMode::kZooKeeper, HaMode::kStandalone}) {
    EXPECT_EQ(parseHaMode(haModeName(mode)), mode) << haModeName(mode);
  }
  EXPECT_STREQ(haModeName(HaMode::kZooKeeper), "zookeeper");
  EXPECT_STREQ(haModeName(HaMode::kStandalone), "standalone");
}

TEST(HaMode, ParserRefusesAnythingTheConfigurationWouldRefuse) {
  EXPECT_EQ(parseHaMode("ZooKeeper"), std::nullopt);
  EXPECT_EQ(parseHaMode(""), std::nullopt);
  EXPECT_EQ(parseHaMode("standalone "), std::nullopt);
}

TEST(HaMode, ReadFromTheConfigurationWithZooKeeperAsTheDefault) {
  EXPECT_EQ(haModeFrom(configWith({})), HaMode::kZooKeeper);
  EXPECT_EQ(haModeFrom(configWith({"ha.mode=standalone"})), HaMode::kStandalone);
  EXPECT_EQ(haModeFrom(configWith({"ha.mode=zookeeper"})), HaMode::kZooKeeper);
}

TEST(HaServices, FollowTheConfiguredMode) {
  EventLoop loop;
  auto standalone =
      HaServices::create(loop, configWith({"ha.mode=standalone"}), HaServices::Identity::kWriter);
  ASSERT_TRUE(standalone.ok()) << standalone.error().message;
  EXPECT_EQ(standalone.value()->mode(), HaMode::kStandalone);
  EXPECT_EQ(standalone.value()->zooKeeper(), nullptr);

  // Nothing listens there: the client starts connecting and is closed unconnected.
  auto zookeeper =
      HaServices::create(loop, configWith({"ha.mode=zookeeper", "ha.zookeeper.quorum=127.0.0.1:1"}),
                         HaServices::Identity::kWriter);
  ASSERT_TRUE(zookeeper.ok()) << zookeeper.error().message;
  EXPECT_EQ(zookeeper.value()->mode(), HaMode::kZooKeeper);
  EXPECT_NE(zookeeper.value()->zooKeeper(), nullptr);
}

}  // namespace
}  // namespace regent::ha

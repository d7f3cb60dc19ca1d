// The rpc.* options: defaults, reading them from a configuration, and the reader limit.
#include "rpc/rpc_options.h"

#include <gtest/gtest.h>

#include "conf/config.h"

namespace regent::rpc {
namespace {

TEST(RpcOptions, DefaultsMatchTheRegistry) {
  auto config = loadConfig({});
  ASSERT_TRUE(config.ok()) << config.error().message;
  const RpcOptions fromConfig = rpcOptionsFrom(config.value());
  const RpcOptions defaults;
  EXPECT_EQ(fromConfig.maxMessageSize, defaults.maxMessageSize);
  EXPECT_EQ(fromConfig.maxMessageSize, 16u * 1024 * 1024);
  EXPECT_EQ(fromConfig.callTimeout, defaults.callTimeout);
  EXPECT_EQ(fromConfig.reconnectInitial, defaults.reconnectInitial);
  EXPECT_EQ(fromConfig.reconnectMax, defaults.reconnectMax);
}

TEST(RpcOptions, ReadsEveryKey) {
  auto config =
      loadConfig(ConfigSources{.set = {"rpc.max-message-size=64KiB", "rpc.call-timeout=1500ms",
                                       "rpc.reconnect.initial=50ms", "rpc.reconnect.max=2s"}});
  ASSERT_TRUE(config.ok()) << config.error().message;
  const RpcOptions options = rpcOptionsFrom(config.value());
  EXPECT_EQ(options.maxMessageSize, 64u * 1024);
  EXPECT_EQ(options.callTimeout, Duration(1500));
  EXPECT_EQ(options.reconnectInitial, Duration(50));
  EXPECT_EQ(options.reconnectMax, Duration(2000));
  EXPECT_EQ(readerOptionsFor(options).traversalLimitInWords, 8u * 1024);
}

TEST(RpcOptions, ReconnectMaxBelowInitialIsRefusedNamingBothKeys) {
  auto config =
      loadConfig(ConfigSources{.set = {"rpc.reconnect.initial=2s", "rpc.reconnect.max=1s"}});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.error().message,
            "rpc.reconnect.max must be at least rpc.reconnect.initial (rpc.reconnect.max is 1s "
            "from --set; rpc.reconnect.initial is 2s from --set)");
}

TEST(RpcOptions, ReaderLimitRoundsUpToWholeWords) {
  RpcOptions options;
  options.maxMessageSize = 1025;
  EXPECT_EQ(readerOptionsFor(options).traversalLimitInWords, 129u);
}

}  // namespace
}  // namespace regent::rpc

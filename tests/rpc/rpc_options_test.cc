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
  EXPECT_EQ(fromConfig.preAuthMaxMessageSize, defaults.preAuthMaxMessageSize);
  EXPECT_EQ(fromConfig.preAuthMaxMessageSize, 64u * 1024);
  EXPECT_EQ(fromConfig.authTimeout, defaults.authTimeout);
  EXPECT_EQ(fromConfig.authTimeout, Duration(10000));
  EXPECT_EQ(fromConfig.maxConnections, defaults.maxConnections);
  EXPECT_EQ(fromConfig.maxConnections, 1024u);
  EXPECT_EQ(fromConfig.maxConnectionsPerPeer, defaults.maxConnectionsPerPeer);
  EXPECT_EQ(fromConfig.maxConnectionsPerPeer, 64u);
  EXPECT_EQ(fromConfig.idleTimeout, defaults.idleTimeout);
  EXPECT_EQ(fromConfig.idleTimeout, Duration(300000));
  EXPECT_EQ(fromConfig.messageTimeout, defaults.messageTimeout);
  EXPECT_EQ(fromConfig.messageTimeout, Duration(60000));
}

TEST(RpcOptions, ReadsEveryKey) {
  auto config = loadConfig(ConfigSources{
      .set = {"rpc.max-message-size=64KiB", "rpc.call-timeout=1500ms", "rpc.reconnect.initial=50ms",
              "rpc.reconnect.max=2s", "rpc.pre-auth-max-message-size=8KiB", "rpc.auth-timeout=3s",
              "rpc.max-connections=100", "rpc.max-connections-per-peer=10", "rpc.idle-timeout=0",
              "rpc.message-timeout=5s"}});
  ASSERT_TRUE(config.ok()) << config.error().message;
  const RpcOptions options = rpcOptionsFrom(config.value());
  EXPECT_EQ(options.maxMessageSize, 64u * 1024);
  EXPECT_EQ(options.callTimeout, Duration(1500));
  EXPECT_EQ(options.reconnectInitial, Duration(50));
  EXPECT_EQ(options.reconnectMax, Duration(2000));
  EXPECT_EQ(readerOptionsFor(options).traversalLimitInWords, 8u * 1024);
  EXPECT_EQ(options.preAuthMaxMessageSize, 8u * 1024);
  EXPECT_EQ(options.authTimeout, Duration(3000));
  EXPECT_EQ(options.maxConnections, 100u);
  EXPECT_EQ(options.maxConnectionsPerPeer, 10u);
  EXPECT_EQ(options.idleTimeout, Duration(0));
  EXPECT_EQ(options.messageTimeout, Duration(5000));
}

TEST(RpcOptions, AnIdleTimeoutNotLongerThanTheHeartbeatIntervalIsRefused) {
  auto config = loadConfig(ConfigSources{.set = {"rpc.idle-timeout=2s", "heartbeat.interval=2s"}});
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.error().message.find("rpc.idle-timeout must be 0 or longer than "
                                        "heartbeat.interval"),
            std::string::npos)
      << config.error().message;
}

// A small rpc.max-message-size (a client's, say) needs no matching pre-authentication cap: the
// default 64KiB cap is capped at the message limit.
TEST(RpcOptions, PreAuthenticationCapIsCappedAtTheMessageSizeLimit) {
  auto config = loadConfig(ConfigSources{.set = {"rpc.max-message-size=2500B"}});
  ASSERT_TRUE(config.ok()) << config.error().message;
  const RpcOptions options = rpcOptionsFrom(config.value());
  EXPECT_EQ(options.maxMessageSize, 2500u);
  EXPECT_EQ(options.preAuthMaxMessageSize, 2500u);
}

TEST(RpcOptions, PerPeerCapAboveTheTotalIsRefusedNamingBothKeys) {
  auto config = loadConfig(
      ConfigSources{.set = {"rpc.max-connections=10", "rpc.max-connections-per-peer=20"}});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.error().message,
            "rpc.max-connections-per-peer must be at most rpc.max-connections "
            "(rpc.max-connections-per-peer is 20 from --set; rpc.max-connections is 10 from "
            "--set)");
}

TEST(RpcOptions, ConnectionCapsAndTheAuthenticationTimeoutMustBePositive) {
  for (const char* bad : {"rpc.max-connections=0", "rpc.max-connections-per-peer=0",
                          "rpc.auth-timeout=0s", "rpc.pre-auth-max-message-size=10"}) {
    SCOPED_TRACE(bad);
    auto config = loadConfig(ConfigSources{.set = {bad}});
    ASSERT_FALSE(config.ok());
    const std::string key = std::string(bad).substr(0, std::string(bad).find('='));
    EXPECT_NE(config.error().message.find("for " + key + " from --set"), std::string::npos)
        << config.error().message;
  }
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

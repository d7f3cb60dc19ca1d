// host_port.h: splitting, joining and the advertised-address rule.
#include "common/host_port.h"

#include <gtest/gtest.h>

namespace regent {
namespace {

TEST(HostPort, SplitsHostNameAndIpv4AndBracketedIpv6) {
  auto name = splitHostPort("master-1:7000");
  ASSERT_TRUE(name.ok()) << name.error().message;
  EXPECT_EQ(name.value().host, "master-1");
  EXPECT_EQ(name.value().port, 7000);

  auto any = splitHostPort("0.0.0.0:0");
  ASSERT_TRUE(any.ok()) << any.error().message;
  EXPECT_EQ(any.value().host, "0.0.0.0");
  EXPECT_EQ(any.value().port, 0);

  auto v6 = splitHostPort("[::1]:65535");
  ASSERT_TRUE(v6.ok()) << v6.error().message;
  EXPECT_EQ(v6.value().host, "::1");
  EXPECT_EQ(v6.value().port, 65535);

  auto empty = splitHostPort(":9000");
  ASSERT_TRUE(empty.ok()) << empty.error().message;
  EXPECT_EQ(empty.value().host, "");
}

TEST(HostPort, SplitRejectsMalformedAddressesWithTheReason) {
  EXPECT_EQ(splitHostPort("master-1").error().message, "\"master-1\" is not host:port: no ':port'");
  EXPECT_EQ(splitHostPort("h:70000").error().message,
            "\"h:70000\" is not host:port: the port is not a number from 0 to 65535");
  EXPECT_EQ(splitHostPort("h:").error().message,
            "\"h:\" is not host:port: the port is not a number from 0 to 65535");
  EXPECT_EQ(splitHostPort("h:80x").error().message,
            "\"h:80x\" is not host:port: the port is not a number from 0 to 65535");
  EXPECT_EQ(splitHostPort("::1:80").error().message,
            "\"::1:80\" is not host:port: an IPv6 host must be written in brackets, as [::1]:7000");
  EXPECT_EQ(splitHostPort("[::1:80").error().message,
            "\"[::1:80\" is not host:port: '[' without ']'");
  EXPECT_EQ(splitHostPort("[::1]").error().message,
            "\"[::1]\" is not host:port: no ':port' after ']'");
}

TEST(HostPort, JoinBracketsIpv6AndRoundTripsWithSplit) {
  EXPECT_EQ(joinHostPort("master-1", 7000), "master-1:7000");
  EXPECT_EQ(joinHostPort("::1", 7000), "[::1]:7000");
  for (const char* address : {"master-1:7000", "[::1]:7000", "10.0.0.1:0", "[fe80::1]:1"}) {
    auto parts = splitHostPort(address);
    ASSERT_TRUE(parts.ok()) << parts.error().message;
    EXPECT_EQ(joinHostPort(parts.value().host, parts.value().port), address);
  }
}

TEST(HostPort, HostOfDropsPortAndBrackets) {
  EXPECT_EQ(hostOf("master-1:7000"), "master-1");
  EXPECT_EQ(hostOf("[::1]:7000"), "::1");
  EXPECT_EQ(hostOf("[::1]"), "::1");
  EXPECT_EQ(hostOf("::1"), "::1");
  EXPECT_EQ(hostOf("master-1"), "master-1");
}

TEST(HostPort, WildcardHostsAreTheAnyAddresses) {
  for (const char* host : {"", "0.0.0.0", "::", "[::]", "*"}) {
    EXPECT_TRUE(isWildcardHost(host)) << host;
  }
  for (const char* host : {"127.0.0.1", "::1", "localhost", "master-1"}) {
    EXPECT_FALSE(isWildcardHost(host)) << host;
  }
}

TEST(HostPort, AdvertisedAddressPrefersTheOptionThenTheBindWithTheHostName) {
  EXPECT_EQ(advertisedAddress("0.0.0.0:7000", "master-1.example:7000", "h", 7123),
            "master-1.example:7000");
  EXPECT_EQ(advertisedAddress("0.0.0.0:7000", "", "h", 0), "h:7000");
  EXPECT_EQ(advertisedAddress("0.0.0.0:0", "", "h", 40312), "h:40312");
  EXPECT_EQ(advertisedAddress("[::]:0", "", "h", 40312), "h:40312");
  EXPECT_EQ(advertisedAddress(":9000", "", "h", 0), "h:9000");
  EXPECT_EQ(advertisedAddress("127.0.0.1:0", "", "h", 40312), "127.0.0.1:40312");
  EXPECT_EQ(advertisedAddress("[::1]:0", "", "h", 40312), "[::1]:40312");
  EXPECT_EQ(advertisedAddress("not-an-address", "", "h", 1), "not-an-address");
}

}  // namespace
}  // namespace regent

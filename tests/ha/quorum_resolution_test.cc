// resolveQuorumHosts: the quorum's host names become the addresses the ZooKeeper C library is
// handed, in the form it parses, with the chroot kept and names that do not resolve left out.
#include "ha/quorum_resolution.h"

#include <gtest/gtest.h>

namespace regent::ha {
namespace {

TEST(QuorumResolution, AddressesStayAsTheyAreAndTheChrootIsKept) {
  auto resolved = resolveQuorumHosts("127.0.0.1:2181,127.0.0.2:2182/regent");
  ASSERT_TRUE(resolved.ok()) << resolved.error().message;
  EXPECT_EQ(resolved.value(), "127.0.0.1:2181,127.0.0.2:2182/regent");
  // IPv6 without brackets: the library takes the port after the last ':'.
  auto v6 = resolveQuorumHosts("::1:2181");
  ASSERT_TRUE(v6.ok()) << v6.error().message;
  EXPECT_EQ(v6.value(), "::1:2181");
}

TEST(QuorumResolution, ANameBecomesEveryAddressItHasWithoutDuplicates) {
  // localhost is in /etc/hosts on every machine these tests run on.
  auto resolved = resolveQuorumHosts("localhost:2181,127.0.0.1:2181");
  ASSERT_TRUE(resolved.ok()) << resolved.error().message;
  const std::string& text = resolved.value();
  EXPECT_EQ(text.find("localhost"), std::string::npos) << text;
  const size_t first = text.find("127.0.0.1:2181");
  ASSERT_NE(first, std::string::npos) << text;
  EXPECT_EQ(text.find("127.0.0.1:2181", first + 1), std::string::npos) << text;
}

TEST(QuorumResolution, BlanksAroundEntriesAreIgnoredAndEveryEntryNeedsAPort) {
  auto spaced = resolveQuorumHosts("127.0.0.1:2181, 127.0.0.2:2182 ,\t127.0.0.3:2183");
  ASSERT_TRUE(spaced.ok()) << spaced.error().message;
  EXPECT_EQ(spaced.value(), "127.0.0.1:2181,127.0.0.2:2182,127.0.0.3:2183");
  EXPECT_TRUE(checkQuorum("zk-1:2181, zk-2:2181/regent").ok());
  auto noPort = checkQuorum("zk-1:2181,zk-2");
  ASSERT_FALSE(noPort.ok());
  EXPECT_NE(noPort.error().message.find("'zk-2' is not host:port"), std::string::npos);
  EXPECT_FALSE(checkQuorum(" , ").ok());
}

TEST(QuorumResolution, NamesThatDoNotResolveAreLeftOutAndNoneResolvingIsRetryable) {
  auto some = resolveQuorumHosts("regent-no-such-host.invalid:2181,127.0.0.1:2181");
  ASSERT_TRUE(some.ok()) << some.error().message;
  EXPECT_EQ(some.value(), "127.0.0.1:2181");
  auto none = resolveQuorumHosts("regent-no-such-host.invalid:2181/regent");
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(none.error().isRetryable());
  EXPECT_NE(none.error().message.find("regent-no-such-host.invalid:"), std::string::npos)
      << none.error().message;
  auto noPort = resolveQuorumHosts("127.0.0.1");
  ASSERT_FALSE(noPort.ok());
  EXPECT_FALSE(noPort.error().isRetryable());
  EXPECT_NE(noPort.error().message.find("'127.0.0.1' is not host:port"), std::string::npos)
      << noPort.error().message;
}

}  // namespace
}  // namespace regent::ha

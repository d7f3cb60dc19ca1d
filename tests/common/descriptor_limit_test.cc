// The open-file limit raised at start and the connection caps fitted into it.
#include "common/descriptor_limit.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

namespace regent {
namespace {

TEST(DescriptorLimit, TheSoftLimitIsRaisedToTheHardLimit) {
  struct rlimit original {};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &original), 0);
  ASSERT_GT(original.rlim_max, 64u);
  struct rlimit lowered = original;
  lowered.rlim_cur = 64;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &lowered), 0);

  const DescriptorLimit limit = raiseDescriptorLimit();
  struct rlimit now {};
  ::getrlimit(RLIMIT_NOFILE, &now);
  ::setrlimit(RLIMIT_NOFILE, &original);
  EXPECT_EQ(limit.softBefore, 64u);
  EXPECT_EQ(limit.soft, limit.hard);
  EXPECT_EQ(now.rlim_cur, now.rlim_max);
  EXPECT_TRUE(limit.problem.empty()) << limit.problem;
  EXPECT_NE(describeDescriptorBudget(limit, {}).find("(raised from 64, hard "), std::string::npos)
      << describeDescriptorBudget(limit, {});
}

TEST(DescriptorLimit, CapsThatFitKeepTheirConfiguredValues) {
  std::vector<ConnectionCap> caps{{.option = "rpc.max-connections", .configured = 1024},
                                  {.option = "http.max-connections", .configured = 256}};
  EXPECT_FALSE(fitConnectionCaps(65536, caps));
  EXPECT_EQ(caps[0].fitted, 1024u);
  EXPECT_EQ(caps[1].fitted, 256u);
}

TEST(DescriptorLimit, CapsThatDoNotFitAreLoweredInProportionLeavingTheReserve) {
  std::vector<ConnectionCap> caps{{.option = "rpc.max-connections", .configured = 1024},
                                  {.option = "http.max-connections", .configured = 256}};
  EXPECT_TRUE(fitConnectionCaps(1024, caps));
  EXPECT_EQ(descriptorReserve(1024), 256u);
  EXPECT_LE(caps[0].fitted + caps[1].fitted, 1024u - 256u);
  EXPECT_EQ(caps[0].fitted, 614u);  // 1024 * 768 / 1280
  EXPECT_EQ(caps[1].fitted, 153u);
  const std::string line = describeDescriptorBudget(
      DescriptorLimit{.softBefore = 1024, .soft = 1024, .hard = 1024}, caps);
  EXPECT_EQ(line,
            "open-file limit 1024 (the hard limit); rpc.max-connections 1024 lowered to 614 to "
            "fit, http.max-connections 256 lowered to 153 to fit; 256 kept for ZooKeeper, files "
            "and tasks");
}

TEST(DescriptorLimit, ATlsListenerCountsTwiceForTheConnectionsInTheirHandshakes) {
  std::vector<ConnectionCap> caps{
      {.option = "rpc.max-connections", .configured = 1024, .weight = 2}};
  EXPECT_TRUE(fitConnectionCaps(1024, caps));
  EXPECT_EQ(caps[0].fitted, 384u);
}

TEST(DescriptorLimit, ATinyLimitStillLeavesEveryCapOneConnection) {
  std::vector<ConnectionCap> caps{{.option = "rpc.max-connections", .configured = 1024},
                                  {.option = "http.max-connections", .configured = 256}};
  EXPECT_TRUE(fitConnectionCaps(20, caps));
  EXPECT_EQ(caps[0].fitted, 1u);
  EXPECT_EQ(caps[1].fitted, 1u);
}

}  // namespace
}  // namespace regent

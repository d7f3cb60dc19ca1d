// The judgement of a cluster node's ACL: every ACL regent creates passes, and an ACL that lets
// anyone but the masters' identity write, create, delete or administer (or lets anyone read) is
// refused with a sentence saying who may do what.
#include "ha/zookeeper_acl.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace regent::ha {
namespace {

constexpr const char* kMasters = "regent:master-secret";
constexpr const char* kReaders = "viewer:viewer-secret";

AclEntry digest(const std::string& credential, int32_t perms) {
  return AclEntry{"digest", digestId(credential), perms};
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(ClusterAcl, TheDigestIdIsZooKeepersUserAndBase64OfSha1) {
  // zkCli's DigestAuthenticationProvider.generateDigest("super:test").
  EXPECT_EQ(digestId("super:test"), "super:D/InIHSb7yEEbrWz8b9l71RjZJU=");
}

TEST(ClusterAcl, EveryAclRegentCreatesPasses) {
  // The masters alone, and the masters with this read credential or another one.
  EXPECT_EQ(clusterAclProblem({digest(kMasters, kPermAll)}, kMasters), std::nullopt);
  EXPECT_EQ(clusterAclProblem({digest(kMasters, kPermAll), digest(kReaders, kPermRead)}, kMasters),
            std::nullopt);
  EXPECT_EQ(clusterAclProblem({digest(kMasters, kPermAll), digest("old:reader", kPermRead)},
                              kMasters),
            std::nullopt);
}

TEST(ClusterAcl, AnOpenNodeIsRefusedNamingWorldAnyone) {
  const auto problem = clusterAclProblem({AclEntry{"world", "anyone", kPermAll}}, kMasters);
  ASSERT_TRUE(problem);
  EXPECT_TRUE(contains(*problem, "world:anyone")) << *problem;
  EXPECT_TRUE(contains(*problem, "cdrwa")) << *problem;
}

TEST(ClusterAcl, AnyoneMayNotEvenReadBesideTheMasters) {
  const auto problem = clusterAclProblem(
      {digest(kMasters, kPermAll), AclEntry{"world", "anyone", kPermRead}}, kMasters);
  ASSERT_TRUE(problem);
  EXPECT_TRUE(contains(*problem, "world:anyone")) << *problem;
}

TEST(ClusterAcl, AnotherIdentityThatMayWriteIsRefusedByItsUserName) {
  for (int32_t perms : {kPermWrite, kPermCreate, kPermDelete, kPermAdmin}) {
    const auto problem = clusterAclProblem(
        {digest(kMasters, kPermAll), digest("intruder:secret", perms | kPermRead)}, kMasters);
    ASSERT_TRUE(problem) << perms;
    EXPECT_TRUE(contains(*problem, "digest:intruder")) << *problem;
    EXPECT_FALSE(contains(*problem, digestId("intruder:secret"))) << *problem;
  }
  const auto ip = clusterAclProblem(
      {digest(kMasters, kPermAll), AclEntry{"ip", "10.0.0.0/8", kPermAll}}, kMasters);
  ASSERT_TRUE(ip);
  EXPECT_TRUE(contains(*ip, "ip:10.0.0.0/8")) << *ip;
}

TEST(ClusterAcl, ANodeOfAnotherCredentialIsRefused) {
  // The masters' user name with another password is another identity.
  const auto problem = clusterAclProblem({digest("regent:other-secret", kPermAll)}, kMasters);
  ASSERT_TRUE(problem);
  EXPECT_TRUE(contains(*problem, "digest:regent")) << *problem;
}

TEST(ClusterAcl, MastersThatLackAPermissionAreRefused) {
  const auto problem =
      clusterAclProblem({digest(kMasters, kPermAll & ~kPermAdmin), digest(kReaders, kPermRead)},
                        kMasters);
  ASSERT_TRUE(problem);
  EXPECT_TRUE(contains(*problem, "cdrw instead of cdrwa")) << *problem;
  EXPECT_TRUE(clusterAclProblem({digest(kReaders, kPermRead)}, kMasters));
  EXPECT_TRUE(clusterAclProblem({}, kMasters));
}

TEST(ClusterAcl, TheDescriptionShowsDigestUsersWithoutTheirHash) {
  EXPECT_EQ(describeAcl({AclEntry{"world", "anyone", kPermAll}}), "world:anyone:cdrwa");
  EXPECT_EQ(describeAcl({digest(kMasters, kPermAll), digest(kReaders, kPermRead)}),
            "digest:regent:cdrwa,digest:viewer:r");
  EXPECT_EQ(describeAcl({}), "(empty)");
}

}  // namespace
}  // namespace regent::ha

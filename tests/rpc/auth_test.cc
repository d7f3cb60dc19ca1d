// RPC authentication's pure parts: the HMAC proof against known answers (openssl dgst), its
// constant-time comparison, the role table of the gateways, the loopback rule and the settings
// read from configuration (secret files, certificate names).
#include <gtest/gtest.h>
#include <kj/debug.h>
#include <sys/stat.h>

#include <string>

#include "conf/config.h"
#include "rpc/auth_config.h"
#include "rpc/auth_proof.h"
#include "rpc/auth_roles.h"
#include "rpc/schema/gateways.capnp.h"
#include "tests/conf/config_test_util.h"

namespace regent::rpc {
namespace {

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::string bytesFrom(int first) {
  std::string out;
  for (int i = 0; i < 32; ++i) out.push_back(static_cast<char>(first + i));
  return out;
}

// Expected values from:
//   printf 'regent-auth-v1 client\0admin\0' > m; (bytes 0..31, then 32..63) >> m
//   openssl dgst -sha256 -hmac 'sixteen-byte-key' m
TEST(AuthProof, MatchesHmacSha256OfLabelRoleAndNoncesKnownAnswers) {
  EXPECT_EQ(hex(authProof(ProofSide::kClient, "sixteen-byte-key", "admin", bytesFrom(0),
                          bytesFrom(32))),
            "6c4b10a4a14df99ab32b9ee7e38c15aec1b1be4e998988244a2377f259409847");
  EXPECT_EQ(hex(authProof(ProofSide::kServer, "sixteen-byte-key", "reader", bytesFrom(0),
                          bytesFrom(32))),
            "11843707189b2d4c03af6400c0fc376057dcefcd01b935d57aa28770e34afad7");
}

TEST(AuthProof, TheServersProofDiffersFromTheClientsAndEachRoleHasItsOwn) {
  const std::string client =
      authProof(ProofSide::kClient, "sixteen-byte-key", "admin", bytesFrom(0), bytesFrom(32));
  EXPECT_NE(client,
            authProof(ProofSide::kServer, "sixteen-byte-key", "admin", bytesFrom(0), bytesFrom(32)));
  EXPECT_NE(client,
            authProof(ProofSide::kClient, "sixteen-byte-key", "reader", bytesFrom(0), bytesFrom(32)));
  EXPECT_NE(client,
            authProof(ProofSide::kClient, "sixteen-byte-kez", "admin", bytesFrom(0), bytesFrom(32)));
}

TEST(AuthProof, MatchesOnlyTheSameBytesOfTheSameLength) {
  const std::string proof(32, 'a');
  EXPECT_TRUE(proofMatches(proof, proof));
  std::string last = proof;
  last.back() = 'b';
  EXPECT_FALSE(proofMatches(proof, last));
  EXPECT_FALSE(proofMatches(proof, proof.substr(0, 31)));
  EXPECT_FALSE(proofMatches(proof, ""));
  EXPECT_FALSE(proofMatches("", ""));
}

TEST(AuthProof, NoncesAreThirtyTwoFreshBytes) {
  const std::string a = randomAuthNonce();
  const std::string b = randomAuthNonce();
  EXPECT_EQ(a.size(), kAuthNonceSize);
  EXPECT_NE(a, b);
}

std::optional<wire::Role> roleOf(capnp::InterfaceSchema schema, const char* method) {
  auto found = schema.findMethodByName(method);
  EXPECT_TRUE(found != nullptr) << method;
  return requiredRole(schema, KJ_ASSERT_NONNULL(found).getIndex());
}

TEST(AuthRoles, EveryGatewayMethodNeedsTheRoleOfTheTable) {
  auto bootstrap = capnp::Schema::from<wire::MasterBootstrap>();
  EXPECT_EQ(roleOf(bootstrap, "leaderInfo"), std::nullopt);
  EXPECT_EQ(roleOf(bootstrap, "authChallenge"), std::nullopt);
  EXPECT_EQ(roleOf(bootstrap, "authenticate"), std::nullopt);
  EXPECT_EQ(roleOf(bootstrap, "dispatcher"), wire::Role::READER);
  EXPECT_EQ(roleOf(bootstrap, "handOver"), wire::Role::ADMIN);
  EXPECT_EQ(roleOf(bootstrap, "resourceManager"), wire::Role::WORKER);
  EXPECT_TRUE(adminMayCall(bootstrap, bootstrap.getMethodByName("resourceManager").getIndex()));
  EXPECT_FALSE(adminMayCall(bootstrap, bootstrap.getMethodByName("jobMaster").getIndex()));
  EXPECT_EQ(roleOf(bootstrap, "jobMaster"), wire::Role::WORKER);
  auto dispatcher = capnp::Schema::from<wire::DispatcherGateway>();
  for (const char* reader :
       {"listJobs", "jobStatus", "clusterOverview", "listTaskExecutors", "attemptOutputToken"}) {
    EXPECT_EQ(roleOf(dispatcher, reader), wire::Role::READER) << reader;
  }
  EXPECT_EQ(roleOf(dispatcher, "submitJob"), wire::Role::ADMIN);
  EXPECT_EQ(roleOf(dispatcher, "cancelJob"), wire::Role::ADMIN);
  // Default deny: a Dispatcher method the table does not name (one added later) needs admin.
  EXPECT_EQ(requiredRole(dispatcher, 60), wire::Role::ADMIN);
  // A worker's calls; the JobMaster's (it runs inside the leader) and any method added later
  // need admin.
  auto resourceManager = capnp::Schema::from<wire::ResourceManagerGateway>();
  for (const char* worker : {"registerTaskExecutor", "sendSlotReport", "heartbeat", "disconnect"}) {
    EXPECT_EQ(roleOf(resourceManager, worker), wire::Role::WORKER) << worker;
  }
  for (const char* admin :
       {"registerJobMaster", "declareRequiredResources", "disconnectJobMaster"}) {
    EXPECT_EQ(roleOf(resourceManager, admin), wire::Role::ADMIN) << admin;
  }
  EXPECT_EQ(requiredRole(resourceManager, 60), wire::Role::ADMIN);
  for (auto method : capnp::Schema::from<wire::JobMasterGateway>().getMethods()) {
    EXPECT_EQ(requiredRole(capnp::Schema::from<wire::JobMasterGateway>(), method.getIndex()),
              wire::Role::WORKER);
  }
}

TEST(AuthRoles, AdminIncludesReaderAndWorkerIsApart) {
  EXPECT_TRUE(RoleSet::of(wire::Role::ADMIN).allows(wire::Role::READER));
  EXPECT_TRUE(RoleSet::of(wire::Role::ADMIN).allows(wire::Role::ADMIN));
  EXPECT_FALSE(RoleSet::of(wire::Role::ADMIN).allows(wire::Role::WORKER));
  EXPECT_FALSE(RoleSet::of(wire::Role::READER).allows(wire::Role::ADMIN));
  EXPECT_FALSE(RoleSet::of(wire::Role::WORKER).allows(wire::Role::READER));
  EXPECT_FALSE(RoleSet::none().allows(wire::Role::READER));
  EXPECT_TRUE(RoleSet::all().allows(wire::Role::WORKER));
  EXPECT_EQ(RoleSet::all().describe(), "reader+admin+worker");
  EXPECT_EQ(RoleSet::none().describe(), "none");
  EXPECT_EQ(roleNamed("worker"), wire::Role::WORKER);
  EXPECT_EQ(roleNamed("root"), std::nullopt);
}

TEST(AuthConfig, LoopbackIsOnly127SlashEightIpv6LoopbackAndLocalhost) {
  for (const char* host : {"127.0.0.1", "127.1.2.3", "::1", "localhost"}) {
    EXPECT_TRUE(isLoopbackHost(host)) << host;
  }
  for (const char* host : {"0.0.0.0", "::", "", "10.0.0.1", "127.0.0", "127.0.0.1.5", "128.0.0.1",
                           "127.0.0.1x", "localhost.example.com", "127.a.0.1"}) {
    EXPECT_FALSE(isLoopbackHost(host)) << host;
  }
}

class AuthConfigTest : public ::testing::Test {
 protected:
  Config load(std::vector<std::string> set) {
    auto config = loadConfig(ConfigSources{.set = std::move(set)});
    EXPECT_TRUE(config.ok()) << (config.ok() ? "" : config.error().message);
    return std::move(config).value();
  }
  std::string secretFile(const std::string& name, const std::string& contents) {
    const std::string path = dir_.write(name, contents);
    ::chmod(path.c_str(), 0600);
    return path;
  }
  ScratchDirForTests dir_;
};

TEST_F(AuthConfigTest, NoCredentialMeansNoAuthenticationAndLoopbackOnly) {
  auto settings = serverAuthFrom(load({}));
  ASSERT_TRUE(settings.ok());
  EXPECT_FALSE(settings.value().required);
  EXPECT_TRUE(checkRpcBindIsSafe("127.0.0.1:6123", settings.value()).ok());
  EXPECT_TRUE(checkRpcBindIsSafe("[::1]:6123", settings.value()).ok());
  auto unsafe = checkRpcBindIsSafe("0.0.0.0:6123", settings.value());
  ASSERT_FALSE(unsafe.ok());
  EXPECT_NE(unsafe.error().message.find("rpc.auth-secret.admin-file"), std::string::npos);
  EXPECT_NE(unsafe.error().message.find("rpc.auth: none"), std::string::npos);
  EXPECT_NE(unsafe.error().message.find("rpc.bind 0.0.0.0:6123"), std::string::npos);

  auto off = serverAuthFrom(load({"rpc.auth=none"}));
  ASSERT_TRUE(off.ok());
  EXPECT_TRUE(checkRpcBindIsSafe("0.0.0.0:6123", off.value()).ok());
}

TEST_F(AuthConfigTest, ASecretFileTurnsAuthenticationOnAndDropsOneTrailingNewline) {
  const std::string path = secretFile("admin", "0123456789abcdef\n");
  auto settings = serverAuthFrom(load({"rpc.auth-secret.admin-file=" + path}));
  ASSERT_TRUE(settings.ok()) << settings.error().message;
  EXPECT_TRUE(settings.value().required);
  EXPECT_EQ(settings.value().secrets.at(wire::Role::ADMIN), "0123456789abcdef");
  EXPECT_TRUE(checkRpcBindIsSafe("0.0.0.0:6123", settings.value()).ok());
  // A secret file does not force authentication when rpc.auth says none.
  auto off = serverAuthFrom(load({"rpc.auth-secret.admin-file=" + path, "rpc.auth=none"}));
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off.value().required);
}

TEST_F(AuthConfigTest, AnUnusableSecretFileIsAnErrorNamingTheOptionAndThePath) {
  const std::string missing = dir_.path() + "/missing";
  const std::string shortSecret = secretFile("short", "too-short\n");
  const std::string empty = secretFile("empty", "\n");
  for (const auto& [path, why] : {std::pair{missing, "No such file"},
                                  std::pair{shortSecret, "at least 16"},
                                  std::pair{empty, "is empty"}, std::pair{dir_.path(), "regular"}}) {
    auto settings = serverAuthFrom(load({"rpc.auth-secret.reader-file=" + path}));
    ASSERT_FALSE(settings.ok()) << path;
    EXPECT_NE(settings.error().message.find("rpc.auth-secret.reader-file (" + path + ")"),
              std::string::npos)
        << settings.error().message;
    EXPECT_NE(settings.error().message.find(why), std::string::npos) << settings.error().message;
  }
  auto required = serverAuthFrom(load({"rpc.auth=required"}));
  ASSERT_FALSE(required.ok());
  EXPECT_NE(required.error().message.find("no credential"), std::string::npos);
}

TEST_F(AuthConfigTest, CertificateNamesMapToOneRoleEach) {
  auto settings = serverAuthFrom(
      load({"rpc.auth-tls.admin-names=ops, alice ", "rpc.auth-tls.worker-names=worker-1"}));
  ASSERT_TRUE(settings.ok());
  EXPECT_TRUE(settings.value().required);
  EXPECT_EQ(settings.value().roleForCommonName("alice"), wire::Role::ADMIN);
  EXPECT_EQ(settings.value().roleForCommonName("worker-1"), wire::Role::WORKER);
  EXPECT_EQ(settings.value().roleForCommonName("mallory"), std::nullopt);
  EXPECT_EQ(settings.value().roleForCommonName(""), std::nullopt);
  auto twice = serverAuthFrom(
      load({"rpc.auth-tls.admin-names=ops", "rpc.auth-tls.reader-names=ops"}));
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error().message.find("\"ops\""), std::string::npos);
}

TEST_F(AuthConfigTest, AClientCredentialNeedsBothItsRoleAndItsSecretFile) {
  auto none = clientCredentialFrom(load({}));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none.value().has_value());
  const std::string path = secretFile("reader", "reader-secret-0123");
  auto reader = clientCredentialFrom(
      load({"rpc.credential.role=reader", "rpc.credential.secret-file=" + path}));
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE(reader.value().has_value());
  EXPECT_EQ(reader.value()->role, wire::Role::READER);
  EXPECT_EQ(reader.value()->secret, "reader-secret-0123");
  auto half = clientCredentialFrom(load({"rpc.credential.role=reader"}));
  ASSERT_FALSE(half.ok());
  EXPECT_NE(half.error().message.find("rpc.credential.secret-file"), std::string::npos);
  auto unknown = clientCredentialFrom(
      load({"rpc.credential.role=root", "rpc.credential.secret-file=" + path}));
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("rpc.credential.role"), std::string::npos);
}

}  // namespace
}  // namespace regent::rpc

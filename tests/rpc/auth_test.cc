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

MethodAccess accessOf(capnp::InterfaceSchema schema, const char* method) {
  auto found = schema.findMethodByName(method);
  EXPECT_TRUE(found != nullptr) << method;
  return methodAccess(schema, KJ_ASSERT_NONNULL(found).getIndex());
}

// "reader or admin": the roles a method accepts, as a refusal names them.
std::string acceptedBy(capnp::InterfaceSchema schema, const char* method) {
  const MethodAccess access = accessOf(schema, method);
  return access.open ? "anyone" : access.accepted.describeAlternatives();
}

TEST(AuthRoles, EveryGatewayMethodAcceptsTheRolesOfTheTable) {
  auto bootstrap = capnp::Schema::from<wire::MasterBootstrap>();
  for (const char* open : {"leaderInfo", "authChallenge", "authenticate"}) {
    EXPECT_EQ(acceptedBy(bootstrap, open), "anyone") << open;
  }
  EXPECT_EQ(acceptedBy(bootstrap, "dispatcher"), "reader or admin");
  EXPECT_EQ(accessOf(bootstrap, "dispatcher").required, wire::Role::READER);
  EXPECT_EQ(acceptedBy(bootstrap, "handOver"), "admin");
  // The one method two unrelated roles may call is an entry of the table, not an exception.
  EXPECT_EQ(acceptedBy(bootstrap, "resourceManager"), "worker or admin");
  EXPECT_EQ(accessOf(bootstrap, "resourceManager").required, wire::Role::WORKER);
  EXPECT_EQ(acceptedBy(bootstrap, "jobMaster"), "worker");
  auto dispatcher = capnp::Schema::from<wire::DispatcherGateway>();
  for (const char* reader :
       {"listJobs", "jobStatus", "clusterOverview", "listTaskExecutors", "attemptOutputToken"}) {
    EXPECT_EQ(acceptedBy(dispatcher, reader), "reader or admin") << reader;
  }
  EXPECT_EQ(acceptedBy(dispatcher, "submitJob"), "admin");
  EXPECT_EQ(acceptedBy(dispatcher, "cancelJob"), "admin");
  // Default deny: a Dispatcher method the table does not name (one added later) needs admin.
  EXPECT_EQ(methodAccess(dispatcher, 60).accepted.describeAlternatives(), "admin");
  EXPECT_EQ(methodAccess(dispatcher, 60).required, wire::Role::ADMIN);
  // A worker's calls; the JobMaster's (it runs inside the leader) and any method added later
  // need admin.
  auto resourceManager = capnp::Schema::from<wire::ResourceManagerGateway>();
  for (const char* worker : {"registerTaskExecutor", "sendSlotReport", "heartbeat", "disconnect"}) {
    EXPECT_EQ(acceptedBy(resourceManager, worker), "worker") << worker;
  }
  for (const char* admin :
       {"registerJobMaster", "declareRequiredResources", "disconnectJobMaster"}) {
    EXPECT_EQ(acceptedBy(resourceManager, admin), "admin") << admin;
  }
  EXPECT_EQ(methodAccess(resourceManager, 60).accepted.describeAlternatives(), "admin");
  for (auto method : capnp::Schema::from<wire::JobMasterGateway>().getMethods()) {
    const MethodAccess access =
        methodAccess(capnp::Schema::from<wire::JobMasterGateway>(), method.getIndex());
    EXPECT_EQ(access.accepted.describeAlternatives(), "worker");
    EXPECT_EQ(access.required, wire::Role::WORKER);
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

TEST_F(AuthConfigTest, ASecretFileOthersMayReadIsRefusedUnlessExplicitlyAllowed) {
  for (mode_t mode : {0640, 0604, 0660, 0700 | 0004}) {
    const std::string path = secretFile("shared", "0123456789abcdef\n");
    ::chmod(path.c_str(), mode);
    for (const std::string& option : {std::string("rpc.auth-secret.admin-file"),
                                      std::string("rpc.credential.secret-file")}) {
      std::vector<std::string> set = {option + "=" + path};
      if (option == "rpc.credential.secret-file") set.push_back("rpc.credential.role=admin");
      const auto loaded = load(set);
      auto client = clientCredentialFrom(loaded);
      auto server = serverAuthFrom(loaded);
      const bool ok = option == "rpc.credential.secret-file" ? client.ok() : server.ok();
      ASSERT_FALSE(ok) << option << " mode " << std::oct << mode;
      const std::string message = option == "rpc.credential.secret-file"
                                      ? client.error().message
                                      : server.error().message;
      EXPECT_NE(message.find(option + " (" + path + ")"), std::string::npos) << message;
      EXPECT_NE(message.find("chmod 600"), std::string::npos) << message;
      EXPECT_NE(message.find("rpc.auth-secret.allow-shared-files"), std::string::npos);
      set.push_back("rpc.auth-secret.allow-shared-files=true");
      const auto allowed = load(set);
      EXPECT_TRUE(option == "rpc.credential.secret-file" ? clientCredentialFrom(allowed).ok()
                                                         : serverAuthFrom(allowed).ok())
          << option;
    }
  }
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

TEST_F(AuthConfigTest, AMasterRequiringAuthenticationInZooKeeperModeNeedsTheZooKeeperAcl) {
  const std::string path = secretFile("admin", "0123456789abcdef\n");
  auto required = serverAuthFrom(load({"rpc.auth-secret.admin-file=" + path}));
  ASSERT_TRUE(required.ok());
  auto open = checkElectionDataIsProtected(load({"rpc.auth-secret.admin-file=" + path}),
                                           required.value());
  ASSERT_FALSE(open.ok());
  EXPECT_FALSE(open.error().isRetryable());
  EXPECT_NE(open.error().message.find("ha.zookeeper.auth"), std::string::npos);
  EXPECT_NE(open.error().message.find("ha.zookeeper.read-auth"), std::string::npos);

  EXPECT_TRUE(checkElectionDataIsProtected(
                  load({"rpc.auth-secret.admin-file=" + path,
                        "ha.zookeeper.auth=regent:master-secret"}),
                  required.value())
                  .ok());
  // Standalone keeps its election in a local file; without authentication nothing is claimed.
  EXPECT_TRUE(checkElectionDataIsProtected(
                  load({"rpc.auth-secret.admin-file=" + path, "ha.mode=standalone"}),
                  required.value())
                  .ok());
  auto off = serverAuthFrom(load({}));
  ASSERT_TRUE(off.ok());
  EXPECT_TRUE(checkElectionDataIsProtected(load({}), off.value()).ok());
}

TEST_F(AuthConfigTest, AClientWithACredentialButNoZooKeeperCredentialIsWarned) {
  const std::string path = secretFile("worker", "worker-secret-0123");
  const std::vector<std::string> credential = {"rpc.credential.role=worker",
                                               "rpc.credential.secret-file=" + path};
  auto warning = unprotectedLeaderNodeWarning(load(credential), /*readsLeaderNode=*/true);
  ASSERT_TRUE(warning.has_value());
  EXPECT_NE(warning->find("ha.zookeeper.read-auth"), std::string::npos) << *warning;
  EXPECT_NE(warning->find("ZNOAUTH"), std::string::npos) << *warning;

  auto with = [&](std::string extra) {
    std::vector<std::string> set = credential;
    set.push_back(std::move(extra));
    return unprotectedLeaderNodeWarning(load(set), /*readsLeaderNode=*/true);
  };
  EXPECT_FALSE(with("ha.zookeeper.read-auth=viewer:viewer-secret"));
  EXPECT_FALSE(with("ha.zookeeper.auth=regent:master-secret"));
  EXPECT_FALSE(with("ha.mode=standalone"));
  // regentctl told its master reads no leader node; a worker whose file also holds regentctl's
  // cli.master still does, and is still warned.
  EXPECT_FALSE(unprotectedLeaderNodeWarning(load(credential), /*readsLeaderNode=*/false));
  EXPECT_TRUE(with("cli.master=127.0.0.1:6123"));
  EXPECT_FALSE(unprotectedLeaderNodeWarning(load({}), /*readsLeaderNode=*/true))
      << "no credential: nothing to protect";
  EXPECT_TRUE(unprotectedLeaderNodeWarning(
      load({"rpc.tls.cert=/etc/regent/client.pem", "rpc.tls.key=/etc/regent/client.key"}),
      /*readsLeaderNode=*/true))
      << "a client certificate is a credential too";
}

}  // namespace
}  // namespace regent::rpc

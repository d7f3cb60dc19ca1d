// TLS on the RPC transport (rpc.tls.*): real sockets on 127.0.0.1 with certificates made at
// test time. Shows who is served and who is refused, that a refused peer does not stop the
// server, and that each misconfiguration fails naming the option.
#include "rpc/rpc_tls.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "conf/config.h"
#include "rpc/rpc_client.h"
#include "rpc/rpc_server.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/rpc/rpc_transport_test_util.h"
#include "tests/rpc/tls_test_certs.h"

namespace regent::rpc {
namespace {

using ::testing::HasSubstr;
using testing::kBound;
using testing::runBounded;
using testing::runUntil;
using testing::TestCa;
using testing::TestMaster;
using testing::TestMasterRecord;

// Every peer dials the server as 127.0.0.1, so its certificate carries that name (as a DNS
// name: see RpcNetwork on how kj-tls 0.9.2 checks host names).
constexpr const char* kServerNames = "DNS:127.0.0.1,IP:127.0.0.1,DNS:localhost";

class RpcTls : public ::testing::Test {
 protected:
  ~RpcTls() noexcept override = default;
  RpcTls() : dir_("rpc-tls"), ca_("regent test CA"), otherCa_("some other CA") {
    write("ca.pem", ca_.certificatePem());
    write("other-ca.pem", otherCa_.certificatePem());
    writePair("server", ca_.issue("127.0.0.1", kServerNames));
    writePair("client", ca_.issue("regentctl", ""));
    writePair("stranger", otherCa_.issue("regentctl", ""));
  }

  std::string path(const std::string& name) const { return dir_.path() + "/" + name; }
  void write(const std::string& name, const std::string& text) const {
    testing::writeTextFile(path(name), text);
  }
  void writePair(const std::string& name, const testing::PemPair& pair) const {
    write(name + ".pem", pair.certificate);
    write(name + ".key", pair.privateKey);
  }

  RpcTlsOptions serverOptions(bool verifyClients = false) const {
    return {path("server.pem"), path("server.key"), path("ca.pem"), verifyClients};
  }
  RpcTlsOptions clientOptions(const std::string& ca = "ca.pem",
                              const std::string& identity = "") const {
    RpcTlsOptions options;
    options.caFile = path(ca);
    if (!identity.empty()) {
      options.certFile = path(identity + ".pem");
      options.keyFile = path(identity + ".key");
    }
    return options;
  }

  // A network owned by the fixture, so it outlives the server and clients made through it.
  RpcNetwork& network(const RpcTlsOptions& options, RpcTlsRole role,
                      Duration handshakeTimeout = kBound) {
    auto created =
        RpcNetwork::create(loop_.io().getNetwork(), loop_.timer(), options, role, handshakeTimeout);
    if (!created.ok()) throw std::runtime_error(created.error().message);
    networks_.push_back(kj::mv(created).value());
    return *networks_.back();
  }

  // Starts serving a TestMaster called "m1" through `serverNetwork`.
  void serve(RpcNetwork& serverNetwork, RpcOptions options = {}) {
    auto started = runBounded(
        loop_, RpcServer::listen(serverNetwork.network(), loop_.timer(), "127.0.0.1:0", options,
                                 [this](const RpcPeer& peer) -> capnp::Capability::Client {
                                   record_->peers.push_back(peer.address);
                                   commonNames_.push_back(peer.tlsCommonName);
                                   return kj::heap<TestMaster>("m1", record_);
                                 }));
    if (!started.ok()) throw std::runtime_error(started.error().message);
    server_ = kj::mv(started).value();
  }
  std::string address() const { return testing::loopback(server_->port()); }

  kj::Own<RpcClient> client(RpcNetwork& clientNetwork) {
    return kj::heap<RpcClient>(clientNetwork.network(), loop_.timer(), address(), RpcOptions{});
  }

  // The name the server gives in leaderInfo, asked through `client`; throws what the call does.
  std::string askName(RpcClient& client) {
    return runBounded(loop_, client.bootstrapAs<wire::MasterBootstrap>().then(
                                 [](wire::MasterBootstrap::Client bootstrap) {
                                   return bootstrap.leaderInfoRequest().send().then(
                                       [](auto response) -> std::string {
                                         return response.getContender().getMasterId().cStr();
                                       });
                                 }));
  }

  // One TLS connection attempt (TCP, then the handshake) through `clientNetwork`: "" when it
  // succeeds, else the reason.
  std::string tryHandshake(RpcNetwork& clientNetwork) {
    auto attempt =
        clientNetwork.network()
            .parseAddress(address())
            .then([](kj::Own<kj::NetworkAddress> resolved) {
              return resolved->connect().attach(kj::mv(resolved));
            })
            .then([](kj::Own<kj::AsyncIoStream>) { return std::string(); },
                  [](kj::Exception&& e) { return std::string(e.getDescription().cStr()); });
    return runBounded(loop_, kj::mv(attempt));
  }

  // A plain TCP connection to the server that sends nothing.
  kj::Own<kj::AsyncIoStream> connectPlainTcp() {
    return runBounded(loop_, loop_.io().getNetwork().parseAddress(address()).then(
                                 [](kj::Own<kj::NetworkAddress> resolved) {
                                   return resolved->connect().attach(kj::mv(resolved));
                                 }));
  }

  regent::testing::TempDir dir_;
  TestCa ca_;
  TestCa otherCa_;
  EventLoop loop_;
  std::shared_ptr<TestMasterRecord> record_ = std::make_shared<TestMasterRecord>();
  std::vector<std::string> commonNames_;  // RpcPeer::tlsCommonName of each connection served.
  std::vector<kj::Own<RpcNetwork>> networks_;
  kj::Own<RpcServer> server_;  // Goes before the networks.
};

TEST_F(RpcTls, NoOptionsMeanPlainTcp) {
  RpcNetwork& server = network({}, RpcTlsRole::kServer);
  RpcNetwork& clientSide = network({}, RpcTlsRole::kClient);
  EXPECT_FALSE(server.tls());
  EXPECT_EQ(&server.network(), &loop_.io().getNetwork());
  EXPECT_EQ(server.describe(), "plain TCP");
  serve(server);
  auto plain = client(clientSide);
  EXPECT_EQ(askName(*plain), "m1");
}

TEST_F(RpcTls, ClientWithTheRightCaConnectsAndCalls) {
  RpcNetwork& server = network(serverOptions(), RpcTlsRole::kServer);
  ASSERT_TRUE(server.tls());
  serve(server);
  RpcNetwork& clientSide = network(clientOptions(), RpcTlsRole::kClient);
  ASSERT_TRUE(clientSide.tls());
  auto secure = client(clientSide);
  EXPECT_EQ(askName(*secure), "m1");
  EXPECT_EQ(askName(*secure), "m1");
  EXPECT_EQ(server.handshakesFailed(), 0u);
  EXPECT_EQ(server_->connectionsAccepted(), 1u);
  // The peer address survives the TLS wrapper.
  ASSERT_EQ(record_->peers.size(), 1u);
  EXPECT_THAT(record_->peers[0], HasSubstr("127.0.0.1:"));
}

TEST_F(RpcTls, PlainClientIsRefusedAndTheServerKeepsServing) {
  RpcNetwork& server = network(serverOptions(), RpcTlsRole::kServer);
  serve(server);
  RpcNetwork& plainSide = network({}, RpcTlsRole::kClient);
  auto plain = client(plainSide);
  EXPECT_THROW(askName(*plain), kj::Exception);
  ASSERT_TRUE(runUntil(loop_, [&] { return server.handshakesFailed() >= 1; }));
  plain->close();
  // The plain client never reached the RPC server; a TLS client still does.
  EXPECT_EQ(server_->connectionsAccepted(), 0u);
  RpcNetwork& clientSide = network(clientOptions(), RpcTlsRole::kClient);
  auto secure = client(clientSide);
  EXPECT_EQ(askName(*secure), "m1");
  EXPECT_EQ(server_->connectionsAccepted(), 1u);
}

// kj-tls's client finishes the handshake and then checks the verification result, so the
// server sees a connection that closes before it carries anything: only the client refuses.
TEST_F(RpcTls, ClientTrustingAnotherCaRefusesTheServer) {
  RpcNetwork& server = network(serverOptions(), RpcTlsRole::kServer);
  serve(server);
  RpcNetwork& wrongCa = network(clientOptions("other-ca.pem"), RpcTlsRole::kClient);
  EXPECT_THAT(tryHandshake(wrongCa), HasSubstr("TLS peer's certificate is not trusted"));
  // Through RpcClient: it never gets a bootstrap capability, and keeps retrying.
  auto refused = client(wrongCa);
  ASSERT_TRUE(runUntil(loop_, [&] { return refused->attempts() >= 2; }));
  EXPECT_EQ(refused->connectionsEstablished(), 0u);
  refused->close();

  RpcNetwork& clientSide = network(clientOptions(), RpcTlsRole::kClient);
  auto secure = client(clientSide);
  EXPECT_EQ(askName(*secure), "m1");
}

TEST_F(RpcTls, ServerCertificateMustNameTheHostDialled) {
  writePair("misnamed", ca_.issue("master-1.example", "DNS:master-1.example"));
  RpcNetwork& server =
      network({path("misnamed.pem"), path("misnamed.key"), "", false}, RpcTlsRole::kServer);
  serve(server);
  RpcNetwork& clientSide = network(clientOptions(), RpcTlsRole::kClient);
  EXPECT_THAT(tryHandshake(clientSide),
              HasSubstr("TLS peer's certificate is not trusted; reason = hostname mismatch"));
}

// Documents kj-tls 0.9.2: the host name is checked against DNS names only, so an IP address
// dialled must appear as a DNS subjectAltName. If this starts failing, kj-tls now matches IP
// subjectAltNames: update RpcNetwork's comment and docs/operations.md.
TEST_F(RpcTls, AnIpSubjectAltNameAloneDoesNotMatchTheAddressDialled) {
  writePair("ip-only", ca_.issue("master-1", "IP:127.0.0.1"));
  RpcNetwork& server =
      network({path("ip-only.pem"), path("ip-only.key"), "", false}, RpcTlsRole::kServer);
  serve(server);
  RpcNetwork& clientSide = network(clientOptions(), RpcTlsRole::kClient);
  EXPECT_THAT(tryHandshake(clientSide),
              HasSubstr("TLS peer's certificate is not trusted; reason = hostname mismatch"));
}

// Handshakes run side by side: a peer that never starts one does not hold up the next.
TEST_F(RpcTls, SilentPeerDoesNotHoldUpOthers) {
  // Longer than any wait here: the good client cannot be waiting for the silent one's timeout.
  RpcNetwork& server = network(serverOptions(), RpcTlsRole::kServer, Duration(600000));
  serve(server);
  kj::Own<kj::AsyncIoStream> silent = connectPlainTcp();
  RpcNetwork& clientSide = network(clientOptions(), RpcTlsRole::kClient);
  auto secure = client(clientSide);
  EXPECT_EQ(askName(*secure), "m1");
  EXPECT_EQ(server.handshakesFailed(), 0u);
  silent = nullptr;  // Hanging up mid-handshake fails it.
  ASSERT_TRUE(runUntil(loop_, [&] { return server.handshakesFailed() >= 1; }));
  EXPECT_EQ(server_->connectionsAccepted(), 1u);
}

TEST_F(RpcTls, HandshakeHasATimeout) {
  RpcNetwork& server = network(serverOptions(), RpcTlsRole::kServer, Duration(200));
  serve(server);
  kj::Own<kj::AsyncIoStream> silent = connectPlainTcp();
  ASSERT_TRUE(runUntil(loop_, [&] { return server.handshakesFailed() >= 1; }));
  EXPECT_EQ(server_->connectionsAccepted(), 0u);
}

TEST_F(RpcTls, ConnectionsInTheirHandshakeAreHeldToTheConnectionCaps) {
  RpcNetwork& server = network(serverOptions(), RpcTlsRole::kServer);
  RpcOptions options;
  options.maxConnectionsPerPeer = 2;
  serve(server, options);
  // Two silent peers take both places for 127.0.0.1 while their handshakes wait.
  kj::Own<kj::AsyncIoStream> first = connectPlainTcp();
  kj::Own<kj::AsyncIoStream> second = connectPlainTcp();
  kj::Own<kj::AsyncIoStream> third = connectPlainTcp();
  ASSERT_TRUE(runUntil(loop_, [&] { return server_->connectionsRefusedOverPeerCap() == 1; }));
  // The third was closed at once, not left to time out.
  char byte;
  EXPECT_EQ(runBounded(loop_, third->tryRead(&byte, 1, 1)), 0u);
  EXPECT_EQ(server.handshakesFailed(), 0u);

  // Once a handshake ends (here: the peer gives up), its place is free again.
  first = nullptr;
  ASSERT_TRUE(runUntil(loop_, [&] { return server.handshakesFailed() == 1; }));
  RpcNetwork& clientSide = network(clientOptions(), RpcTlsRole::kClient);
  auto secure = client(clientSide);
  EXPECT_EQ(askName(*secure), "m1");
  EXPECT_EQ(server_->connectionsRefusedOverPeerCap(), 1u);
}

class RpcTlsMutual : public RpcTls {};

TEST_F(RpcTlsMutual, ClientWithoutCertificateIsRefused) {
  RpcNetwork& server = network(serverOptions(/*verifyClients=*/true), RpcTlsRole::kServer);
  serve(server);
  RpcNetwork& anonymousSide = network(clientOptions(), RpcTlsRole::kClient);
  auto anonymous = client(anonymousSide);
  EXPECT_THROW(askName(*anonymous), kj::Exception);
  ASSERT_TRUE(runUntil(loop_, [&] { return server.handshakesFailed() >= 1; }));
  anonymous->close();
  EXPECT_EQ(server_->connectionsAccepted(), 0u);
}

TEST_F(RpcTlsMutual, ClientWithCertificateFromAnotherCaIsRefused) {
  RpcNetwork& server = network(serverOptions(/*verifyClients=*/true), RpcTlsRole::kServer);
  serve(server);
  RpcNetwork& strangerSide = network(clientOptions("ca.pem", "stranger"), RpcTlsRole::kClient);
  auto stranger = client(strangerSide);
  EXPECT_THROW(askName(*stranger), kj::Exception);
  ASSERT_TRUE(runUntil(loop_, [&] { return server.handshakesFailed() >= 1; }));
  stranger->close();
  EXPECT_EQ(server_->connectionsAccepted(), 0u);
}

TEST_F(RpcTlsMutual, ClientWithCaSignedCertificateIsServed) {
  RpcNetwork& server = network(serverOptions(/*verifyClients=*/true), RpcTlsRole::kServer);
  EXPECT_THAT(server.describe(), HasSubstr("clients must present a certificate from"));
  serve(server);
  RpcNetwork& clientSide = network(clientOptions("ca.pem", "client"), RpcTlsRole::kClient);
  auto secure = client(clientSide);
  EXPECT_EQ(askName(*secure), "m1");
  EXPECT_EQ(server.handshakesFailed(), 0u);
}

TEST_F(RpcTlsMutual, TheVerifiedCertificatesCommonNameReachesTheBootstrapFactory) {
  writePair("worker", ca_.issue("worker-7", ""));
  RpcNetwork& server = network(serverOptions(/*verifyClients=*/true), RpcTlsRole::kServer);
  serve(server);
  RpcNetwork& cliSide = network(clientOptions("ca.pem", "client"), RpcTlsRole::kClient);
  RpcNetwork& workerSide = network(clientOptions("ca.pem", "worker"), RpcTlsRole::kClient);
  auto cli = client(cliSide);
  ASSERT_EQ(askName(*cli), "m1");
  auto worker = client(workerSide);
  ASSERT_EQ(askName(*worker), "m1");
  EXPECT_EQ(commonNames_, (std::vector<std::string>{"regentctl", "worker-7"}));
}

TEST_F(RpcTls, NoCommonNameWithoutAVerifiedClientCertificate) {
  // Plain TCP.
  RpcNetwork& plain = network({}, RpcTlsRole::kServer);
  serve(plain);
  auto plainClient = client(network({}, RpcTlsRole::kClient));
  ASSERT_EQ(askName(*plainClient), "m1");
  plainClient = nullptr;
  server_ = nullptr;
  // TLS without rpc.tls.verify-clients: the server asks for no certificate, so the one the
  // client holds is never presented.
  RpcNetwork& tls = network(serverOptions(/*verifyClients=*/false), RpcTlsRole::kServer);
  serve(tls);
  auto tlsClient = client(network(clientOptions("ca.pem", "client"), RpcTlsRole::kClient));
  ASSERT_EQ(askName(*tlsClient), "m1");
  EXPECT_EQ(commonNames_, (std::vector<std::string>{"", ""}));
}

// ---- Misconfiguration ------------------------------------------------------------------------

class RpcTlsOptionsCheck : public RpcTls {
 protected:
  std::string createError(const RpcTlsOptions& options, RpcTlsRole role) {
    auto created =
        RpcNetwork::create(loop_.io().getNetwork(), loop_.timer(), options, role, Duration(1000));
    return created.ok() ? "created" : created.error().message;
  }
};

std::string loadError(std::vector<std::string> set) {
  auto config = loadConfig(ConfigSources{.set = std::move(set)});
  return config.ok() ? "loaded" : config.error().message;
}

TEST_F(RpcTlsOptionsCheck, ConfigurationReadsEveryOption) {
  auto config =
      loadConfig(ConfigSources{.set = {"rpc.tls.cert=/c.pem", "rpc.tls.key=/k.pem",
                                       "rpc.tls.ca=/ca.pem", "rpc.tls.verify-clients=true"}});
  ASSERT_TRUE(config.ok()) << config.error().message;
  const RpcTlsOptions options = rpcTlsOptionsFrom(config.value());
  EXPECT_EQ(options.certFile, "/c.pem");
  EXPECT_EQ(options.keyFile, "/k.pem");
  EXPECT_EQ(options.caFile, "/ca.pem");
  EXPECT_TRUE(options.verifyClients);
  const RpcTlsOptions defaults = rpcTlsOptionsFrom(loadConfig(ConfigSources{}).value());
  EXPECT_EQ(defaults.certFile, "");
  EXPECT_FALSE(defaults.verifyClients);
}

TEST_F(RpcTlsOptionsCheck, CertificateWithoutKeyIsRefusedWhenLoading) {
  EXPECT_THAT(loadError({"rpc.tls.cert=/etc/regent/master.pem"}),
              HasSubstr("rpc.tls.cert and rpc.tls.key must be set together (rpc.tls.cert is "
                        "/etc/regent/master.pem from --set"));
  EXPECT_THAT(loadError({"rpc.tls.key=/etc/regent/master.key"}),
              HasSubstr("rpc.tls.cert and rpc.tls.key must be set together"));
  EXPECT_THAT(createError({path("server.pem"), "", "", false}, RpcTlsRole::kServer),
              HasSubstr("rpc.tls.cert and rpc.tls.key must be set together"));
}

TEST_F(RpcTlsOptionsCheck, VerifyClientsWithoutCaIsRefusedWhenLoading) {
  EXPECT_THAT(
      loadError({"rpc.tls.cert=/c.pem", "rpc.tls.key=/k.pem", "rpc.tls.verify-clients=true"}),
      HasSubstr("rpc.tls.verify-clients needs rpc.tls.ca"));
  EXPECT_THAT(createError({path("server.pem"), path("server.key"), "", true}, RpcTlsRole::kServer),
              HasSubstr("rpc.tls.verify-clients needs rpc.tls.ca"));
}

TEST_F(RpcTlsOptionsCheck, MissingFileNamesTheOptionAndThePath) {
  const std::string missing = path("missing.pem");
  EXPECT_EQ(createError({missing, path("server.key"), "", false}, RpcTlsRole::kServer),
            "rpc.tls.cert: cannot read " + missing + ": No such file or directory");
  EXPECT_EQ(createError({path("server.pem"), missing, "", false}, RpcTlsRole::kServer),
            "rpc.tls.key: cannot read " + missing + ": No such file or directory");
  EXPECT_EQ(createError(clientOptions("missing.pem"), RpcTlsRole::kClient),
            "rpc.tls.ca: cannot read " + missing + ": No such file or directory");
}

TEST_F(RpcTlsOptionsCheck, FileWithoutPemNamesTheOptionAndThePath) {
  write("garbage.pem", "not a certificate\n");
  const std::string garbage = path("garbage.pem");
  EXPECT_THAT(createError({garbage, path("server.key"), "", false}, RpcTlsRole::kServer),
              HasSubstr("rpc.tls.cert: " + garbage + " holds no certificate in PEM form"));
  // A certificate where the key should be.
  EXPECT_THAT(createError({path("server.pem"), path("server.pem"), "", false}, RpcTlsRole::kServer),
              HasSubstr("rpc.tls.key: " + path("server.pem") + " holds no private key"));
  EXPECT_THAT(createError(clientOptions("garbage.pem"), RpcTlsRole::kClient),
              HasSubstr("rpc.tls.ca: " + garbage + " holds no CA certificate in PEM form"));
}

TEST_F(RpcTlsOptionsCheck, KeyOfAnotherCertificateIsRefused) {
  EXPECT_EQ(createError({path("server.pem"), path("client.key"), "", false}, RpcTlsRole::kServer),
            "rpc.tls.key: " + path("client.key") +
                " is not the private key of the certificate in rpc.tls.cert (" +
                path("server.pem") + ")");
}

TEST_F(RpcTlsOptionsCheck, EachRoleRefusesHalfAConfiguration) {
  EXPECT_THAT(createError(clientOptions(), RpcTlsRole::kServer),
              HasSubstr("rpc.tls.ca is set (" + path("ca.pem") +
                        ") but rpc.tls.cert and rpc.tls.key are not"));
  EXPECT_THAT(createError({path("client.pem"), path("client.key"), "", false}, RpcTlsRole::kClient),
              HasSubstr("rpc.tls.cert is set (" + path("client.pem") + ") but rpc.tls.ca is not"));
}

}  // namespace
}  // namespace regent::rpc

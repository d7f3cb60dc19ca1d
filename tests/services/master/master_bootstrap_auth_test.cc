// A master that requires authentication, one connection at a time (serveMasterBootstrapFor,
// in process): an unauthenticated connection gets only leaderInfo and the authenticate step; a
// shared-secret or certificate role gets what its role allows and is refused the rest with
// permissionDenied naming the role needed; wrong secrets and reused challenges are refused and
// counted; the Dispatcher gateway a role obtains is still revoked with its term; a worker obtains
// the ResourceManager gateway, nobody else does.
#include <gtest/gtest.h>

#include <string>

#include "common/event_loop.h"
#include "rpc/auth_proof.h"
#include "services/master/master_bootstrap.h"
#include "tests/services/master/counting_dispatcher_test_util.h"

namespace regent::master {
namespace {

using wire::DispatcherGateway;
using wire::MasterBootstrap;
using wire::Role;

constexpr uint64_t kEpoch = 7;

// A ResourceManagerGateway whose heartbeat only counts that it was reached.
class CountingResourceManager final : public wire::ResourceManagerGateway::Server {
 public:
  explicit CountingResourceManager(uint64_t& reached) : reached_(reached) {}
  kj::Promise<void> heartbeat(HeartbeatContext) override {
    ++reached_;
    return kj::READY_NOW;
  }

 private:
  uint64_t& reached_;
};

class LeadingHost final : public MasterBootstrapHost {
 public:
  LeadingHost(rpc::FencingCounters& counters, uint64_t& reached)
      : term_(kj::heap<rpc::LeadershipTerm>(kEpoch, counters)) {
    self_.masterId = "self";
    gateway_ = term_->serve<DispatcherGateway>(kj::heap<testing::CountingDispatcher>(reached));
    resourceManager_ = term_->serve<wire::ResourceManagerGateway>(
        kj::heap<CountingResourceManager>(reached), rpc::LeadershipTerm::Readiness::kImmediately);
    term_->markReady();
  }
  ~LeadingHost() noexcept override = default;
  const leader::ContenderInfo& self() const override { return self_; }
  std::optional<leader::LeaderInfo> knownLeader() const override {
    leader::LeaderInfo info;
    info.epoch = kEpoch;
    info.masterId = "self";
    return info;
  }
  uint64_t leadingEpoch() const override { return kEpoch; }
  kj::Maybe<DispatcherGateway::Client> dispatcherGateway() override { return gateway_; }
  kj::Maybe<wire::ResourceManagerGateway::Client> resourceManagerGateway(
      kj::Own<resourcemanager::WorkerBinding> caller) override {
    callers.push_back(caller.get());
    return resourceManager_;
  }
  kj::Promise<Status> handOverForCaller() override {
    ++handOvers;
    return Status();
  }
  void endTerm() { term_->revoke("test"); }

  int handOvers = 0;
  // The worker identity each ResourceManager gateway was asked for (compared, never used).
  std::vector<const resourcemanager::WorkerBinding*> callers;

 private:
  leader::ContenderInfo self_;
  kj::Own<rpc::LeadershipTerm> term_;
  kj::Maybe<DispatcherGateway::Client> gateway_;
  kj::Maybe<wire::ResourceManagerGateway::Client> resourceManager_;
};

std::string text(capnp::Data::Reader data) {
  return std::string(reinterpret_cast<const char*>(data.begin()), data.size());
}

kj::ArrayPtr<const kj::byte> bytes(const std::string& text) {
  return kj::arrayPtr(reinterpret_cast<const kj::byte*>(text.data()), text.size());
}

class MasterBootstrapAuthTest : public ::testing::Test {
 protected:
  MasterBootstrapAuthTest() {
    settings_.required = true;
    settings_.secrets[Role::ADMIN] = "admin-secret-0123456789";
    settings_.secrets[Role::READER] = "reader-secret-0123456789";
    settings_.secrets[Role::WORKER] = "worker-secret-0123456789";
    settings_.tlsNames["ops"] = Role::ADMIN;
  }
  ~MasterBootstrapAuthTest() noexcept override = default;

  // A new connection's bootstrap; `peer_` keeps its gate.
  MasterBootstrap::Client connect(const std::string& commonName = "") {
    peer_.connectionId++;
    peer_.address = "127.0.0.1:40000";
    peer_.tlsCommonName = commonName;
    peer_.gate = kj::refcounted<rpc::ConnectionGate>(!settings_.required);
    peer_.bootstrapState = nullptr;
    return serveMasterBootstrapFor(host_, fencing_, settings_, auth_, peer_);
  }

  // Runs the challenge and authenticate with `secret` for `role`; the response.
  capnp::Response<MasterBootstrap::AuthenticateResults> authenticate(MasterBootstrap::Client& cap,
                                                                    Role role,
                                                                    const std::string& secret) {
    auto challenge = loop_.run(cap.authChallengeRequest().send());
    EXPECT_TRUE(challenge.getRequired());
    const std::string serverNonce = text(challenge.getServerNonce());
    const std::string clientNonce = rpc::randomAuthNonce();
    lastServerNonce_ = serverNonce;
    lastClientNonce_ = clientNonce;
    auto request = cap.authenticateRequest();
    request.setRole(role);
    request.setClientNonce(bytes(clientNonce));
    request.setProof(bytes(rpc::authProof(rpc::ProofSide::kClient, secret,
                                          rpc::roleName(role), serverNonce, clientNonce)));
    return loop_.run(request.send());
  }

  // The bootstrap restricted to `role`, by its secret.
  MasterBootstrap::Client as(Role role) {
    auto cap = connect();
    auto response = authenticate(cap, role, settings_.secrets.at(role));
    EXPECT_FALSE(response.hasFailure()) << response.getFailure().getMessage().cStr();
    EXPECT_EQ(text(response.getServerProof()),
              rpc::authProof(rpc::ProofSide::kServer, settings_.secrets.at(role),
                             rpc::roleName(role), lastServerNonce_, lastClientNonce_));
    return response.getBootstrap();
  }

  capnp::Response<MasterBootstrap::DispatcherResults> dispatcher(MasterBootstrap::Client& cap) {
    auto request = cap.dispatcherRequest();
    request.setEpoch(kEpoch);
    return loop_.run(request.send());
  }
  capnp::Response<DispatcherGateway::SubmitJobResults> submit(DispatcherGateway::Client& cap) {
    auto request = cap.submitJobRequest();
    request.setEpoch(kEpoch);
    return loop_.run(request.send());
  }
  capnp::Response<DispatcherGateway::CancelJobResults> cancel(DispatcherGateway::Client& cap) {
    auto request = cap.cancelJobRequest();
    request.setEpoch(kEpoch);
    return loop_.run(request.send());
  }
  capnp::Response<DispatcherGateway::ListJobsResults> list(DispatcherGateway::Client& cap) {
    auto request = cap.listJobsRequest();
    request.setEpoch(kEpoch);
    return loop_.run(request.send());
  }
  capnp::Response<MasterBootstrap::HandOverResults> handOver(MasterBootstrap::Client& cap) {
    auto request = cap.handOverRequest();
    request.setEpoch(kEpoch);
    return loop_.run(request.send());
  }

  EventLoop loop_;
  rpc::FencingCounters fencing_;
  rpc::AuthCounters auth_;
  rpc::ServerAuthSettings settings_;
  uint64_t reached_ = 0;
  LeadingHost host_{fencing_, reached_};
  rpc::RpcPeer peer_;
  std::string lastServerNonce_;
  std::string lastClientNonce_;
};

TEST_F(MasterBootstrapAuthTest, AnUnauthenticatedConnectionGetsOnlyLeaderInfoAndTheAuthenticateStep) {
  auto cap = connect();
  auto info = loop_.run(cap.leaderInfoRequest().send());
  EXPECT_TRUE(info.getLeading());

  auto refused = dispatcher(cap);
  ASSERT_TRUE(refused.hasFailure());
  EXPECT_TRUE(refused.getFailure().isUnauthenticated());
  const std::string message = refused.getFailure().getMessage().cStr();
  EXPECT_NE(message.find("MasterBootstrap.dispatcher needs an authenticated connection"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("rpc.credential.role"), std::string::npos) << message;
  auto handedOver = handOver(cap);
  ASSERT_TRUE(handedOver.hasFailure());
  EXPECT_TRUE(handedOver.getFailure().isUnauthenticated());
  EXPECT_EQ(host_.handOvers, 0);
  EXPECT_EQ(auth_.unauthenticatedRefusals(), 2u);
  EXPECT_FALSE(peer_.gate->authenticated());

  auto challenge = loop_.run(cap.authChallengeRequest().send());
  EXPECT_EQ(challenge.getServerNonce().size(), rpc::kAuthNonceSize);
  EXPECT_EQ(challenge.getMechanisms().size(), 2u);
}

// A call on an interface regent does not serve is refused whatever the connection holds, and
// counted by what it lacks: authentication on an unauthenticated connection, the admin role on
// an authenticated one.
TEST_F(MasterBootstrapAuthTest, AnUnknownInterfaceIsRefusedAndCountedByWhatTheConnectionLacks) {
  constexpr uint64_t kUnknownInterface = 0xdeadbeefcafef00dull;
  auto unauthenticated = connect();
  auto request = unauthenticated.typelessRequest(kUnknownInterface, 0, nullptr);
  EXPECT_ANY_THROW(loop_.run(request.send()));
  EXPECT_EQ(auth_.unauthenticatedRefusals(), 1u);
  EXPECT_EQ(auth_.deniedFor(Role::ADMIN), 0u);

  auto reader = as(Role::READER);
  auto asReader = reader.typelessRequest(kUnknownInterface, 0, nullptr);
  EXPECT_ANY_THROW(loop_.run(asReader.send()));
  EXPECT_EQ(auth_.unauthenticatedRefusals(), 1u);
  EXPECT_EQ(auth_.deniedFor(Role::ADMIN), 1u);
}

TEST_F(MasterBootstrapAuthTest, AReaderMayListButNotSubmitCancelOrHandOver) {
  auto reader = as(Role::READER);
  EXPECT_TRUE(peer_.gate->authenticated());
  auto gateway = dispatcher(reader);
  ASSERT_FALSE(gateway.hasFailure());
  auto dispatcherCap = gateway.getDispatcher();
  EXPECT_FALSE(list(dispatcherCap).hasFailure());
  EXPECT_EQ(reached_, 1u);

  auto submitted = submit(dispatcherCap);
  ASSERT_TRUE(submitted.hasFailure());
  ASSERT_TRUE(submitted.getFailure().isPermissionDenied());
  EXPECT_EQ(submitted.getFailure().getPermissionDenied().getRequired(), Role::ADMIN);
  EXPECT_EQ(submitted.getFailure().getPermissionDenied().getHeld(), Role::READER);
  EXPECT_EQ(std::string(submitted.getFailure().getMessage().cStr()),
            "DispatcherGateway.submitJob needs role admin; this connection holds reader");
  auto cancelled = cancel(dispatcherCap);
  ASSERT_TRUE(cancelled.hasFailure());
  EXPECT_TRUE(cancelled.getFailure().isPermissionDenied());
  auto handedOver = handOver(reader);
  ASSERT_TRUE(handedOver.hasFailure());
  EXPECT_EQ(handedOver.getFailure().getPermissionDenied().getRequired(), Role::ADMIN);
  EXPECT_EQ(host_.handOvers, 0);
  EXPECT_EQ(reached_, 1u);
  EXPECT_EQ(auth_.deniedFor(Role::ADMIN), 3u);
  EXPECT_EQ(auth_.successes().at("secret"), 1u);
}

TEST_F(MasterBootstrapAuthTest, AWorkerMayNotReachTheDispatcherSoCannotSubmit) {
  auto worker = as(Role::WORKER);
  auto gateway = dispatcher(worker);
  ASSERT_TRUE(gateway.hasFailure());
  ASSERT_TRUE(gateway.getFailure().isPermissionDenied());
  EXPECT_EQ(gateway.getFailure().getPermissionDenied().getRequired(), Role::READER);
  EXPECT_EQ(gateway.getFailure().getPermissionDenied().getHeld(), Role::WORKER);
  EXPECT_EQ(auth_.deniedFor(Role::READER), 1u);
}

TEST_F(MasterBootstrapAuthTest, AWorkerObtainsTheResourceManagerAndAReaderDoesNot) {
  auto resourceManager = [&](MasterBootstrap::Client& cap) {
    auto request = cap.resourceManagerRequest();
    request.setEpoch(kEpoch);
    return loop_.run(request.send());
  };
  auto worker = as(Role::WORKER);
  auto granted = resourceManager(worker);
  ASSERT_FALSE(granted.hasFailure()) << granted.getFailure().getMessage().cStr();
  auto heartbeat = granted.getResourceManager().heartbeatRequest();
  heartbeat.setEpoch(kEpoch);
  EXPECT_FALSE(loop_.run(heartbeat.send()).hasFailure());
  EXPECT_EQ(reached_, 1u);
  // JobMasters run inside the leader: a worker credential may not declare requirements (nor
  // register or disconnect a JobMaster, freeing another job's slots).
  auto declare = granted.getResourceManager().declareRequiredResourcesRequest();
  declare.setEpoch(kEpoch);
  auto declared = loop_.run(declare.send());
  ASSERT_TRUE(declared.hasFailure());
  ASSERT_TRUE(declared.getFailure().isPermissionDenied())
      << declared.getFailure().getMessage().cStr();
  EXPECT_EQ(declared.getFailure().getPermissionDenied().getRequired(), Role::ADMIN);
  EXPECT_EQ(declared.getFailure().getPermissionDenied().getHeld(), Role::WORKER);

  auto reader = as(Role::READER);
  auto refused = resourceManager(reader);
  ASSERT_TRUE(refused.hasFailure());
  ASSERT_TRUE(refused.getFailure().isPermissionDenied());
  EXPECT_EQ(refused.getFailure().getPermissionDenied().getRequired(), Role::WORKER);
  // The refusal names every role that may obtain it.
  EXPECT_EQ(std::string(refused.getFailure().getMessage().cStr()),
            "MasterBootstrap.resourceManager needs role worker or admin; this connection holds "
            "reader");
  auto accepted = refused.getFailure().getPermissionDenied().getAccepted();
  ASSERT_EQ(accepted.size(), 2u);
  EXPECT_EQ(accepted[0], Role::ADMIN);
  EXPECT_EQ(accepted[1], Role::WORKER);
  EXPECT_EQ(reached_, 1u);
}

TEST_F(MasterBootstrapAuthTest, AnAdminObtainsTheResourceManagerForItsJobMasterMethodsOnly) {
  auto admin = as(Role::ADMIN);
  auto request = admin.resourceManagerRequest();
  request.setEpoch(kEpoch);
  auto granted = loop_.run(request.send());
  ASSERT_FALSE(granted.hasFailure()) << granted.getFailure().getMessage().cStr();
  // A JobMaster outside the leader (the slot benchmark's) declares requirements as admin...
  auto declare = granted.getResourceManager().declareRequiredResourcesRequest();
  declare.setEpoch(kEpoch);
  auto declared = loop_.run(declare.send());
  EXPECT_FALSE(declared.hasFailure() && declared.getFailure().isPermissionDenied())
      << declared.getFailure().getMessage().cStr();
  // ...but an admin credential cannot act as a worker.
  auto heartbeat = granted.getResourceManager().heartbeatRequest();
  heartbeat.setEpoch(kEpoch);
  auto refused = loop_.run(heartbeat.send());
  ASSERT_TRUE(refused.hasFailure());
  ASSERT_TRUE(refused.getFailure().isPermissionDenied()) << refused.getFailure().getMessage().cStr();
  EXPECT_EQ(refused.getFailure().getPermissionDenied().getRequired(), Role::WORKER);
  EXPECT_EQ(refused.getFailure().getPermissionDenied().getHeld(), Role::ADMIN);
}

TEST_F(MasterBootstrapAuthTest, AnAdminSubmitsCancelsAndHandsOver) {
  auto admin = as(Role::ADMIN);
  auto dispatcherCap = dispatcher(admin).getDispatcher();
  EXPECT_FALSE(submit(dispatcherCap).hasFailure());
  EXPECT_FALSE(cancel(dispatcherCap).hasFailure());
  EXPECT_FALSE(list(dispatcherCap).hasFailure());
  EXPECT_EQ(reached_, 3u);
  EXPECT_FALSE(handOver(admin).hasFailure());
  EXPECT_EQ(host_.handOvers, 1);
}

TEST_F(MasterBootstrapAuthTest, AWrongSecretIsRefusedCountedAndItsChallengeCannotBeReused) {
  auto cap = connect();
  auto wrong = authenticate(cap, Role::ADMIN, "reader-secret-0123456789");
  ASSERT_TRUE(wrong.hasFailure());
  EXPECT_TRUE(wrong.getFailure().isUnauthenticated());
  EXPECT_FALSE(wrong.hasBootstrap());
  EXPECT_FALSE(peer_.gate->authenticated());
  EXPECT_EQ(auth_.failures().at("secret"), 1u);

  // The right proof for the challenge just used: the challenge is gone.
  auto request = cap.authenticateRequest();
  request.setRole(Role::ADMIN);
  request.setClientNonce(bytes(lastClientNonce_));
  request.setProof(bytes(rpc::authProof(rpc::ProofSide::kClient, settings_.secrets.at(Role::ADMIN),
                                        "admin", lastServerNonce_, lastClientNonce_)));
  auto replayed = loop_.run(request.send());
  ASSERT_TRUE(replayed.hasFailure());
  EXPECT_TRUE(replayed.getFailure().isUnauthenticated());
  EXPECT_EQ(auth_.failures().at("secret"), 2u);
  EXPECT_FALSE(peer_.gate->authenticated());

  // The connection may try again with a fresh challenge.
  EXPECT_FALSE(authenticate(cap, Role::ADMIN, settings_.secrets.at(Role::ADMIN)).hasFailure());
  EXPECT_TRUE(peer_.gate->authenticated());
}

TEST_F(MasterBootstrapAuthTest, AMappedCertificateGetsItsRoleAndAnUnmappedOneNothing) {
  auto ops = connect("ops");
  EXPECT_TRUE(peer_.gate->authenticated());
  auto dispatcherCap = dispatcher(ops).getDispatcher();
  EXPECT_FALSE(submit(dispatcherCap).hasFailure());
  EXPECT_EQ(auth_.successes().at("tls"), 1u);

  auto stranger = connect("mallory");
  EXPECT_FALSE(peer_.gate->authenticated());
  auto refused = dispatcher(stranger);
  ASSERT_TRUE(refused.hasFailure());
  EXPECT_TRUE(refused.getFailure().isUnauthenticated());
  EXPECT_EQ(auth_.failures().at("tls"), 1u);
}

TEST_F(MasterBootstrapAuthTest, ARolesGatewayIsStillRevokedWhenTheTermEnds) {
  auto reader = as(Role::READER);
  auto dispatcherCap = dispatcher(reader).getDispatcher();
  host_.endTerm();
  auto after = list(dispatcherCap);
  ASSERT_TRUE(after.hasFailure());
  ASSERT_TRUE(after.getFailure().isFencing());
  EXPECT_EQ(after.getFailure().getFencing().getExpected(), 0u);
  EXPECT_EQ(reached_, 0u);
}

TEST_F(MasterBootstrapAuthTest, WithoutRequiredAuthenticationEveryConnectionMayDoEverything) {
  settings_ = rpc::ServerAuthSettings();
  auto cap = connect();
  EXPECT_TRUE(peer_.gate->authenticated());
  auto challenge = loop_.run(cap.authChallengeRequest().send());
  EXPECT_FALSE(challenge.getRequired());
  auto dispatcherCap = dispatcher(cap).getDispatcher();
  EXPECT_FALSE(submit(dispatcherCap).hasFailure());
  EXPECT_FALSE(handOver(cap).hasFailure());
  EXPECT_EQ(auth_.unauthenticatedRefusals(), 0u);
}

// The worker identity is the connection's, whatever it holds (docs/security.md, "Worker
// identity"): the bootstrap authenticate answers shares it with the connection's first one, and
// another connection has its own. The same holds without authentication.
TEST_F(MasterBootstrapAuthTest, EveryGatewayOfAConnectionSharesItsWorkerIdentityAndNoOtherDoes) {
  auto resourceManager = [&](MasterBootstrap::Client& cap) {
    auto request = cap.resourceManagerRequest();
    request.setEpoch(kEpoch);
    auto response = loop_.run(request.send());
    EXPECT_FALSE(response.hasFailure()) << response.getFailure().getMessage().cStr();
  };
  auto first = connect();
  auto response = authenticate(first, Role::WORKER, settings_.secrets.at(Role::WORKER));
  ASSERT_FALSE(response.hasFailure()) << response.getFailure().getMessage().cStr();
  auto worker = response.getBootstrap();
  resourceManager(worker);
  resourceManager(worker);
  // authenticate again on the same connection: still the same identity.
  auto again = authenticate(first, Role::WORKER, settings_.secrets.at(Role::WORKER));
  ASSERT_FALSE(again.hasFailure()) << again.getFailure().getMessage().cStr();
  auto reauthenticated = again.getBootstrap();
  resourceManager(reauthenticated);
  // The connection asks for its bootstrap again (the server kept none): a new bootstrap, the
  // same identity.
  auto rebootstrapped = serveMasterBootstrapFor(host_, fencing_, settings_, auth_, peer_);
  auto third = authenticate(rebootstrapped, Role::WORKER, settings_.secrets.at(Role::WORKER));
  ASSERT_FALSE(third.hasFailure()) << third.getFailure().getMessage().cStr();
  auto thirdWorker = third.getBootstrap();
  resourceManager(thirdWorker);
  auto other = as(Role::WORKER);
  resourceManager(other);
  ASSERT_EQ(host_.callers.size(), 5u);
  EXPECT_EQ(host_.callers[0], host_.callers[1]);
  EXPECT_EQ(host_.callers[0], host_.callers[2]);
  EXPECT_EQ(host_.callers[0], host_.callers[3]);
  EXPECT_NE(host_.callers[0], host_.callers[4]);

  settings_ = rpc::ServerAuthSettings();
  auto open = connect();
  auto secondOpen = connect();
  resourceManager(open);
  resourceManager(open);
  resourceManager(secondOpen);
  ASSERT_EQ(host_.callers.size(), 8u);
  EXPECT_EQ(host_.callers[5], host_.callers[6]);
  EXPECT_NE(host_.callers[5], host_.callers[7]);
}

}  // namespace
}  // namespace regent::master

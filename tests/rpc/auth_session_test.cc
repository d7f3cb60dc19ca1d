// The client side of a connection's authentication (rpc::authenticateBootstrap) against an
// in-process MasterBootstrap: a master that proves it holds the role's secret is called through
// the bootstrap it hands back; one that asks for no credential, or answers a proof of another
// secret, is refused by the client (RefusedMaster naming it, no proof sent to the first); the
// master's own refusal comes back as its Failure. docs/security.md, "Chain of trust".
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <variant>

#include "common/event_loop.h"
#include "rpc/auth_proof.h"
#include "rpc/auth_roles.h"
#include "rpc/auth_session.h"
#include "rpc/call_deadline.h"
#include "rpc/failure.h"
#include "rpc/schema/gateways.capnp.h"

namespace regent::rpc {
namespace {

constexpr const char* kSecret = "worker-secret-0123456789";

enum class Master { kAsksForNothing, kProves, kProvesAnotherSecret, kRefuses };

struct Seen {
  int authenticateCalls = 0;
  int leaderInfoCalls = 0;
};

kj::ArrayPtr<const kj::byte> bytesOf(const std::string& text) {
  return kj::arrayPtr(reinterpret_cast<const kj::byte*>(text.data()), text.size());
}

class ScriptedBootstrap final : public wire::MasterBootstrap::Server {
 public:
  ScriptedBootstrap(Master master, std::shared_ptr<Seen> seen)
      : master_(master), seen_(std::move(seen)) {}

  kj::Promise<void> leaderInfo(LeaderInfoContext) override {
    ++seen_->leaderInfoCalls;
    return kj::READY_NOW;
  }

  kj::Promise<void> authChallenge(AuthChallengeContext context) override {
    serverNonce_ = randomAuthNonce();
    context.getResults().setServerNonce(bytesOf(serverNonce_));
    context.getResults().setRequired(master_ != Master::kAsksForNothing);
    return kj::READY_NOW;
  }

  kj::Promise<void> authenticate(AuthenticateContext context) override {
    ++seen_->authenticateCalls;
    auto params = context.getParams();
    auto results = context.getResults();
    if (master_ == Master::kRefuses || master_ == Master::kAsksForNothing) {
      failures::unauthenticated(results.initFailure(), "authentication as worker refused");
      return kj::READY_NOW;
    }
    const std::string clientNonce(reinterpret_cast<const char*>(params.getClientNonce().begin()),
                                  params.getClientNonce().size());
    const std::string clientProof(reinterpret_cast<const char*>(params.getProof().begin()),
                                  params.getProof().size());
    const char* role = roleName(params.getRole());
    EXPECT_TRUE(proofMatches(
        authProof(ProofSide::kClient, kSecret, role, serverNonce_, clientNonce), clientProof));
    const std::string secret =
        master_ == Master::kProves ? std::string(kSecret) : "another-secret-0123456789";
    results.setServerProof(
        bytesOf(authProof(ProofSide::kServer, secret, role, serverNonce_, clientNonce)));
    results.setBootstrap(kj::heap<ScriptedBootstrap>(master_, seen_));
    return kj::READY_NOW;
  }

 private:
  const Master master_;
  std::shared_ptr<Seen> seen_;
  std::string serverNonce_;
};

class AuthSessionClient : public ::testing::Test {
 protected:
  ProvenBootstrap authenticateWith(Master master) {
    wire::MasterBootstrap::Client bootstrap = kj::heap<ScriptedBootstrap>(master, seen_);
    const CallDeadline deadline(loop_.timer(), Duration(5000));
    return loop_.run(authenticateBootstrap(bootstrap,
                                           ClientCredential{wire::Role::WORKER, kSecret},
                                           deadline, "the master at 10.0.0.7:6123"));
  }

  EventLoop loop_;
  std::shared_ptr<Seen> seen_ = std::make_shared<Seen>();
};

TEST_F(AuthSessionClient, AMasterThatProvesTheSecretIsCalledThroughTheBootstrapItHandsBack) {
  ProvenBootstrap proven = authenticateWith(Master::kProves);
  auto* bootstrap = std::get_if<wire::MasterBootstrap::Client>(&proven);
  ASSERT_NE(bootstrap, nullptr);
  loop_.run(bootstrap->leaderInfoRequest().send().ignoreResult());
  EXPECT_EQ(seen_->leaderInfoCalls, 1);
  EXPECT_EQ(seen_->authenticateCalls, 1);
}

TEST_F(AuthSessionClient, AMasterThatAsksForNoCredentialIsRefusedAndGetsNoProof) {
  ProvenBootstrap proven = authenticateWith(Master::kAsksForNothing);
  auto* refused = std::get_if<RefusedMaster>(&proven);
  ASSERT_NE(refused, nullptr);
  EXPECT_EQ(refused->reason, MasterRefusal::kNotChallenged);
  EXPECT_EQ(refused->message.rfind("refusing the master at 10.0.0.7:6123: it asks for no "
                                   "credential, and this client holds the worker credential",
                                   0),
            0u)
      << refused->message;
  EXPECT_EQ(seen_->authenticateCalls, 0);
  EXPECT_EQ(classify(refused->reason), FailureAction::kResolveAgain);
}

TEST_F(AuthSessionClient, AMasterWhoseProofIsOfAnotherSecretIsRefused) {
  ProvenBootstrap proven = authenticateWith(Master::kProvesAnotherSecret);
  auto* refused = std::get_if<RefusedMaster>(&proven);
  ASSERT_NE(refused, nullptr);
  EXPECT_EQ(refused->reason, MasterRefusal::kWrongProof);
  EXPECT_NE(refused->message.find("the master at 10.0.0.7:6123"), std::string::npos);
  EXPECT_NE(refused->message.find("could not prove it holds the role's secret"),
            std::string::npos)
      << refused->message;
  EXPECT_EQ(classify(refused->reason), FailureAction::kResolveAgain);
}

TEST_F(AuthSessionClient, TheMastersRefusalOfTheCredentialIsItsFailure) {
  ProvenBootstrap proven = authenticateWith(Master::kRefuses);
  auto* failure = std::get_if<CallFailure>(&proven);
  ASSERT_NE(failure, nullptr);
  EXPECT_EQ(failure->which, wire::Failure::UNAUTHENTICATED);
  EXPECT_EQ(failure->message, "authentication as worker refused");
}

TEST(MasterRefusal, EachHasAMetricLabelAndIsRetriedLikeAnUnreachableLeader) {
  EXPECT_STREQ(masterRefusalName(MasterRefusal::kNotChallenged), "not_challenged");
  EXPECT_STREQ(masterRefusalName(MasterRefusal::kWrongProof), "wrong_proof");
  for (MasterRefusal refusal : {MasterRefusal::kNotChallenged, MasterRefusal::kWrongProof}) {
    EXPECT_EQ(classify(refusal), FailureAction::kResolveAgain);
  }
}

}  // namespace
}  // namespace regent::rpc

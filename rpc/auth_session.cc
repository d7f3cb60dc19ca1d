// One connection's challenge-response and certificate mapping (see auth_session.h).
#include "rpc/auth_session.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "rpc/auth_proof.h"

namespace regent::rpc {

ConnectionAuthenticator::ConnectionAuthenticator(const ServerAuthSettings& settings,
                                                 AuthCounters& counters, std::string peerAddress,
                                                 kj::Own<ConnectionGate> gate)
    : settings_(settings),
      counters_(counters),
      peerAddress_(std::move(peerAddress)),
      gate_(kj::mv(gate)) {}

RoleSet ConnectionAuthenticator::rolesAtConnect(const std::string& commonName) {
  if (!settings_.required) return RoleSet::all();
  if (auto role = settings_.roleForCommonName(commonName)) {
    counters_.succeeded("tls");
    gate_->markAuthenticated();
    spdlog::debug("rpc: {} authenticated as {} by its certificate (CN={})", peerAddress_,
                  roleName(*role), commonName);
    return RoleSet::of(*role);
  }
  if (!commonName.empty()) {
    counters_.failed("tls");
    spdlog::warn("rpc: {} presented a verified certificate whose name CN={} maps to no role "
                 "(rpc.auth-tls.*-names); it must authenticate with a secret",
                 peerAddress_, commonName);
  }
  return RoleSet::none();
}

std::string ConnectionAuthenticator::challenge() {
  serverNonce_ = randomAuthNonce();
  return *serverNonce_;
}

Result<std::string> ConnectionAuthenticator::authenticate(wire::Role role,
                                                          const std::string& clientNonce,
                                                          const std::string& proof) {
  std::optional<std::string> serverNonce = std::exchange(serverNonce_, std::nullopt);
  auto refuse = [&](const std::string& why) -> Result<std::string> {
    counters_.failed("secret");
    spdlog::warn("rpc: authentication of {} as {} refused: {}", peerAddress_, roleName(role), why);
    return Error::fatal("authentication as " + std::string(roleName(role)) + " refused: " + why);
  };
  if (!serverNonce) return refuse("no challenge outstanding (call authChallenge first; each is good once)");
  if (clientNonce.size() != kAuthNonceSize) {
    return refuse("the client nonce must be " + std::to_string(kAuthNonceSize) + " bytes");
  }
  auto secret = settings_.secrets.find(role);
  if (secret == settings_.secrets.end()) {
    return refuse(std::string("this master has no secret for role ") + roleName(role));
  }
  const std::string expected =
      authProof(ProofSide::kClient, secret->second, roleName(role), *serverNonce, clientNonce);
  if (!proofMatches(expected, proof)) return refuse("wrong proof (not the role's secret)");
  counters_.succeeded("secret");
  gate_->markAuthenticated();
  spdlog::debug("rpc: {} authenticated as {} with the shared secret", peerAddress_, roleName(role));
  return authProof(ProofSide::kServer, secret->second, roleName(role), *serverNonce, clientNonce);
}

namespace {

std::string textOf(capnp::Data::Reader data) {
  return std::string(reinterpret_cast<const char*>(data.begin()), data.size());
}

kj::ArrayPtr<const kj::byte> bytesOf(const std::string& text) {
  return kj::arrayPtr(reinterpret_cast<const kj::byte*>(text.data()), text.size());
}

}  // namespace

kj::Promise<ProvenBootstrap> authenticateBootstrap(wire::MasterBootstrap::Client bootstrap,
                                                   const ClientCredential& credential,
                                                   const CallDeadline& deadline,
                                                   const std::string& where) {
  const std::string role = roleName(credential.role);
  return deadline.send(bootstrap.authChallengeRequest())
      .then([bootstrap, credential, &deadline, where, role](
                capnp::Response<wire::MasterBootstrap::AuthChallengeResults> challenge) mutable
                -> kj::Promise<ProvenBootstrap> {
        if (!challenge.getRequired()) {
          return ProvenBootstrap(RefusedMaster{
              MasterRefusal::kNotChallenged,
              "refusing " + where + ": it asks for no credential, and this client holds the " +
                  role + " credential (rpc.credential.*); a master of this cluster proves it "
                  "holds the role's secret (docs/security.md, \"Chain of trust\")"});
        }
        const std::string serverNonce = textOf(challenge.getServerNonce());
        const std::string clientNonce = randomAuthNonce();
        auto request = bootstrap.authenticateRequest();
        request.setRole(credential.role);
        request.setClientNonce(bytesOf(clientNonce));
        request.setProof(bytesOf(
            authProof(ProofSide::kClient, credential.secret, role, serverNonce, clientNonce)));
        const std::string expected =
            authProof(ProofSide::kServer, credential.secret, role, serverNonce, clientNonce);
        return deadline.send(kj::mv(request))
            .then([expected, where, role](
                      capnp::Response<wire::MasterBootstrap::AuthenticateResults> answer)
                      -> ProvenBootstrap {
              if (answer.hasFailure()) return CallFailure::from(answer.getFailure());
              if (!proofMatches(expected, textOf(answer.getServerProof()))) {
                return RefusedMaster{MasterRefusal::kWrongProof,
                                     "refusing " + where + ": it accepted the " + role +
                                         " credential but could not prove it holds the role's "
                                         "secret (a wrong serverProof)"};
              }
              return answer.getBootstrap();
            });
      });
}

}  // namespace regent::rpc

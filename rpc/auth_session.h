// One connection's authentication (docs/wire.md, "Authentication"). Master side: the
// outstanding challenge, the check of a shared-secret proof, and the role a verified client
// certificate maps to; the MasterBootstrap of the connection drives it. Client side: the
// challenge-response run against a master's bootstrap.
#pragma once

#include <kj/refcount.h>

#include <optional>
#include <string>
#include <variant>

#include "common/result.h"
#include "rpc/auth_config.h"
#include "rpc/auth_roles.h"
#include "rpc/call_deadline.h"
#include "rpc/failure.h"
#include "rpc/rpc_server.h"
#include "rpc/schema/gateways.capnp.h"

namespace regent::rpc {

// Shared (kj::addRef) by every bootstrap handed out on one connection. Loop-thread only.
// `settings` and `counters` must outlive it.
class ConnectionAuthenticator final : public kj::Refcounted {
 public:
  // `gate` is the connection's (RpcPeer::gate); it is marked authenticated on success.
  ConnectionAuthenticator(const ServerAuthSettings& settings, AuthCounters& counters,
                          std::string peerAddress, kj::Own<ConnectionGate> gate);

  const ServerAuthSettings& settings() const { return settings_; }

  // The roles the connection holds at connect: every role when authentication is not required;
  // the mapped role of a verified client certificate (`commonName`, counted as a "tls" success
  // and marking the gate); none otherwise (an unmapped certificate counts as a "tls" failure and
  // is logged: it may still authenticate with a secret).
  RoleSet rolesAtConnect(const std::string& commonName);

  // A fresh nonce for authChallenge; replaces the outstanding one.
  std::string challenge();

  // Checks `proof` for `role` against the outstanding challenge, which it consumes whatever the
  // outcome (a nonce is good for one attempt). On success: marks the gate authenticated, counts
  // a "secret" success and returns the server's proof. Otherwise (no challenge outstanding, a
  // client nonce not kAuthNonceSize bytes, no secret for `role`, a wrong proof): counts a
  // "secret" failure, logs one warning naming the peer and the role (never secret material) and
  // returns Error::fatal with the message for Failure.unauthenticated.
  Result<std::string> authenticate(wire::Role role, const std::string& clientNonce,
                                   const std::string& proof);

 private:
  const ServerAuthSettings& settings_;
  AuthCounters& counters_;
  const std::string peerAddress_;
  kj::Own<ConnectionGate> gate_;
  std::optional<std::string> serverNonce_;
};

// A master that did not prove itself to a client holding a credential: why, and one line naming
// it ("refusing the master at 10.0.0.7:6123 ...: it asks for no credential ...").
struct RefusedMaster {
  MasterRefusal reason = MasterRefusal::kNotChallenged;
  std::string message;
};

// What authenticating a bootstrap came to: the bootstrap restricted to the credential's role (the
// master proved itself), the master's refusal of the credential (Failure.unauthenticated), or the
// client's refusal of the master.
using ProvenBootstrap = std::variant<wire::MasterBootstrap::Client, CallFailure, RefusedMaster>;

// Client side: `bootstrap` as `credential`'s role, the master proving itself on the way
// (docs/security.md, "Chain of trust"): authChallenge, then authenticate with the proof, then the
// check of the master's serverProof. Resolves with the restricted bootstrap once the proof
// verified; with the master's refusal (Failure.unauthenticated); or with a RefusedMaster when the
// master does not ask for the credential (`required` false: it is never downgraded to an
// unauthenticated connection) or its serverProof does not verify (it does not hold the secret).
// `where` names the master in the refusal ("the master at 10.0.0.7:6123"). Each call is bounded
// by `deadline`, which must outlive the promise; the calls' exceptions propagate.
kj::Promise<ProvenBootstrap> authenticateBootstrap(wire::MasterBootstrap::Client bootstrap,
                                                   const ClientCredential& credential,
                                                   const CallDeadline& deadline,
                                                   const std::string& where);

}  // namespace regent::rpc

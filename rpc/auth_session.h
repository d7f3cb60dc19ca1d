// One connection's authentication (docs/wire.md, "Authentication"). Master side: the
// outstanding challenge, the check of a shared-secret proof, and the role a verified client
// certificate maps to; the MasterBootstrap of the connection drives it. Client side: the
// challenge-response run against a master's bootstrap.
#pragma once

#include <kj/refcount.h>

#include <optional>
#include <string>

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

// Client side: `bootstrap` as `credential`'s role. Resolves with `bootstrap` itself when the
// master requires no authentication (authChallenge's `required` is false); with the bootstrap
// restricted to the role once the master accepted the proof and proved it holds the secret too;
// or with the master's refusal (Failure.unauthenticated). Each call is bounded by `deadline`.
// Rejects with a kj FAILED exception naming `where` when the master's proof is wrong (it does
// not hold the secret), and as the calls do otherwise. `deadline` must outlive the promise.
kj::Promise<Attempt<wire::MasterBootstrap::Client>> authenticateBootstrap(
    wire::MasterBootstrap::Client bootstrap, const ClientCredential& credential,
    const CallDeadline& deadline, const std::string& where);

}  // namespace regent::rpc

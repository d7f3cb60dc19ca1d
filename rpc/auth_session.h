// One connection's authentication on the master side (docs/wire.md, "Authentication"): the
// outstanding challenge, the check of a shared-secret proof, and the role a verified client
// certificate maps to. The MasterBootstrap of the connection drives it.
#pragma once

#include <kj/refcount.h>

#include <optional>
#include <string>

#include "common/result.h"
#include "rpc/auth_config.h"
#include "rpc/auth_roles.h"
#include "rpc/rpc_server.h"

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

}  // namespace regent::rpc

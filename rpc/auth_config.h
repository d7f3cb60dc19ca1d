// The authentication settings of RPC (docs/security.md), read once from the configuration: a
// master's (rpc.auth, the per-role secret files rpc.auth-secret.*-file, the certificate name
// mappings rpc.auth-tls.*-names) and a client's credential (rpc.credential.*). Also the rule that
// keeps a master without authentication off every address but loopback.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"
#include "rpc/schema/common.capnp.h"

namespace regent {
class Config;
}  // namespace regent

namespace regent::rpc {

// What a master accepts. Immutable once loaded.
struct ServerAuthSettings {
  // Whether every connection must authenticate before it gets more than leaderInfo.
  bool required = false;
  // rpc.auth was written `none` explicitly.
  bool explicitlyOff = false;
  // The secret of each role that has one (the file's bytes, one trailing newline dropped).
  std::map<wire::Role, std::string> secrets;
  // Verified client certificate common name -> role.
  std::map<std::string, wire::Role> tlsNames;

  bool anyCredential() const { return !secrets.empty() || !tlsNames.empty(); }
  // The role a verified certificate with common name `commonName` gets; nullopt if unmapped
  // (or empty: plain TCP).
  std::optional<wire::Role> roleForCommonName(const std::string& commonName) const;
};

// Reads rpc.auth, rpc.auth-secret.{admin,reader,worker}-file and rpc.auth-tls.*-names. Errors
// (fatal) name the option and the path: a secret file that cannot be read, is empty or shorter
// than kMinAuthSecretSize bytes; the same common name mapped to two roles; rpc.auth: required
// with no credential configured. Warns (once, here) when a secret file is readable by its group
// or by others.
Result<ServerAuthSettings> serverAuthFrom(const Config& config);

// The credential a client proves with the shared-secret challenge.
struct ClientCredential {
  wire::Role role = wire::Role::READER;
  std::string secret;
};

// Reads rpc.credential.role and rpc.credential.secret-file (also settable as
// REGENT_RPC_CREDENTIAL_ROLE / REGENT_RPC_CREDENTIAL_SECRET_FILE): nullopt when neither is set.
// Errors name the option: only one of the two set, an unknown role, a secret file as above.
Result<std::optional<ClientCredential>> clientCredentialFrom(const Config& config);

// The safe-by-default rule for the election data (docs/security.md, "Chain of trust"): a master
// that requires authentication and keeps its election in ZooKeeper (ha.mode zookeeper) must
// protect the cluster's nodes with an ACL (ha.zookeeper.auth). Fails (fatal) naming
// ha.zookeeper.auth and ha.zookeeper.read-auth otherwise.
Status checkElectionDataIsProtected(const Config& config, const ServerAuthSettings& settings);

// A client (worker, regentctl) holding an RPC credential (rpc.credential.*, or a client
// certificate rpc.tls.cert) that finds the leader in ZooKeeper (ha.mode zookeeper, and
// `readsLeaderNode`: false for a regentctl told its master with cli.master) without any
// ZooKeeper credential (ha.zookeeper.read-auth, ha.zookeeper.auth): the warning it logs at start,
// naming ha.zookeeper.read-auth; nullopt otherwise. The caller says whether it reads the leader
// node, so that an option only regentctl reads (cli.master, in a file shared with the workers)
// cannot silence a worker's warning.
std::optional<std::string> unprotectedLeaderNodeWarning(const Config& config,
                                                        bool readsLeaderNode);

// Whether `host` (no port, no brackets) only reaches this machine: 127.0.0.0/8, ::1 or
// "localhost". Wildcards (0.0.0.0, ::, empty) are not loopback.
bool isLoopbackHost(std::string_view host);

// The safe-by-default rule: a master whose rpc.bind is not loopback must require authentication
// unless rpc.auth is `none`. Fails (fatal) naming rpc.bind and the options to set otherwise.
Status checkRpcBindIsSafe(const std::string& bindAddress, const ServerAuthSettings& settings);

}  // namespace regent::rpc

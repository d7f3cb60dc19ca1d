// Roles on RPC as capabilities (docs/security.md): which role each gateway method needs, and a
// membrane that restricts a capability, and everything obtained through it, to the roles one
// connection holds. A call above them is answered with Failure.permissionDenied naming the role
// it needs (or Failure.unauthenticated when the connection holds none) before any handler runs.
#pragma once

#include <capnp/capability.h>
#include <capnp/schema.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "rpc/schema/common.capnp.h"

namespace regent::rpc {

// "reader", "admin", "worker".
const char* roleName(wire::Role role);
// The role with this name, or nullopt.
std::optional<wire::Role> roleNamed(std::string_view name);

// The roles one connection holds. `admin` includes `reader`.
class RoleSet final {
 public:
  static RoleSet none() { return RoleSet(0); }
  static RoleSet of(wire::Role role) { return RoleSet(bit(role)); }
  // Every role: what a connection holds when the master requires no authentication.
  static RoleSet all() {
    return RoleSet(bit(wire::Role::READER) | bit(wire::Role::ADMIN) | bit(wire::Role::WORKER));
  }

  bool empty() const { return bits_ == 0; }
  // Whether a call that needs `required` may run.
  bool allows(wire::Role required) const {
    if (required == wire::Role::READER) {
      return (bits_ & (bit(wire::Role::READER) | bit(wire::Role::ADMIN))) != 0;
    }
    return (bits_ & bit(required)) != 0;
  }
  // The role named in a permissionDenied's `held`: admin over worker over reader.
  wire::Role primary() const;
  // "admin", "reader+worker", "none".
  std::string describe() const;

 private:
  explicit RoleSet(uint8_t bits) : bits_(bits) {}
  static uint8_t bit(wire::Role role) { return uint8_t(1u << static_cast<unsigned>(role)); }
  uint8_t bits_;
};

// The role a call of `method` of `schema`'s interface needs; nullopt when anyone may call it
// (MasterBootstrap.leaderInfo, authChallenge, authenticate). Default deny: a method the table
// does not name needs `admin` on MasterBootstrap and DispatcherGateway (so a new Dispatcher method
// is admin-only until listed as reader) and ResourceManagerGateway (its worker methods are
// listed as worker), `worker` on JobMasterGateway, and `admin` on any other interface.
std::optional<wire::Role> requiredRole(capnp::InterfaceSchema schema, uint16_t methodId);
// Whether `admin` may also call a method whose requiredRole() is another role: only
// MasterBootstrap.resourceManager (the ResourceManager's gateway, whose JobMaster methods need
// admin; its worker methods still need worker).
bool adminMayCall(capnp::InterfaceSchema schema, uint16_t methodId);

// Authentication outcomes, for /metrics. Loop-thread only.
class AuthCounters final {
 public:
  // By mechanism: "secret" (HMAC challenge-response) or "tls" (client certificate).
  void succeeded(const std::string& mechanism) { ++successes_[mechanism]; }
  void failed(const std::string& mechanism) { ++failures_[mechanism]; }
  // A call refused because the connection has not authenticated.
  void refusedUnauthenticated() { ++unauthenticated_; }
  // A call refused because it needs `required`.
  void denied(wire::Role required) { ++denials_[roleName(required)]; }

  const std::map<std::string, uint64_t>& successes() const { return successes_; }
  const std::map<std::string, uint64_t>& failures() const { return failures_; }
  uint64_t unauthenticatedRefusals() const { return unauthenticated_; }
  // By required role name.
  const std::map<std::string, uint64_t>& denials() const { return denials_; }
  uint64_t deniedFor(wire::Role required) const;

 private:
  std::map<std::string, uint64_t> successes_;
  std::map<std::string, uint64_t> failures_;
  uint64_t unauthenticated_ = 0;
  std::map<std::string, uint64_t> denials_;
};

// `cap` behind a membrane that admits a call only when `held` allows the role the call needs
// (requiredRole() of the called interface and method); every capability obtained through it
// (the Dispatcher gateway a MasterBootstrap hands out) is restricted the same way, without
// copying it: the term's own membrane still revokes it when the term ends. A refused call
// completes with Failure.permissionDenied {required, held} ("DispatcherGateway.submitJob needs
// role admin; this connection holds reader"), or with Failure.unauthenticated when `held` is
// empty (the message names the options that configure a credential), counted in `counters`;
// a refused method without a `failure` result throws a kj FAILED exception with that message.
// Capabilities the caller passes in (a worker's TaskExecutorGateway) are not restricted.
// `counters` must outlive the membrane and every capability obtained through it.
capnp::Capability::Client restrictToRoles(capnp::Capability::Client cap, RoleSet held,
                                          AuthCounters& counters);

template <typename Client>
Client restrictToRoles(Client cap, RoleSet held, AuthCounters& counters) {
  return restrictToRoles(capnp::Capability::Client(kj::mv(cap)), held, counters)
      .template castAs<typename Client::Calls>();
}

}  // namespace regent::rpc

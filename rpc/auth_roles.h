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
#include <vector>

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
  bool contains(wire::Role role) const { return (bits_ & bit(role)) != 0; }
  // Whether the two sets share a role: a connection holding `this` may call a method that
  // accepts `accepted` (MethodAccess::accepted).
  bool intersects(RoleSet other) const { return (bits_ & other.bits_) != 0; }
  RoleSet operator|(RoleSet other) const { return RoleSet(uint8_t(bits_ | other.bits_)); }
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
  // The roles as alternatives, for a refusal: "worker or admin", "reader or admin".
  std::string describeAlternatives() const;
  // Every role in the set, reader, admin, worker in that order.
  std::vector<wire::Role> roles() const;

 private:
  explicit RoleSet(uint8_t bits) : bits_(bits) {}
  static uint8_t bit(wire::Role role) { return uint8_t(1u << static_cast<unsigned>(role)); }
  uint8_t bits_;
};

// Who may call one gateway method: the one role table (rpc/auth_roles.cc) answers it, and both
// the membrane and the auth_handshake fuzz model read it, so the two cannot drift.
struct MethodAccess {
  // Open to every connection, authenticated or not (MasterBootstrap.leaderInfo, authChallenge,
  // authenticate); `required` and `accepted` mean nothing then.
  bool open = false;
  // The role the method is for: a refusal's PermissionDenied.required, and the label it is
  // counted under (regent_rpc_permission_denials_total{required}).
  wire::Role required = wire::Role::ADMIN;
  // Every role that may call it: `required`, admin wherever reader may (admin includes reader),
  // and the roles the table adds (MasterBootstrap.resourceManager: worker or admin).
  RoleSet accepted = RoleSet::none();
};

// The access of `methodId` of `schema`'s interface. Default deny: a method the table does not
// name needs `admin` on MasterBootstrap, DispatcherGateway (so a new Dispatcher method is
// admin-only until listed as reader) and ResourceManagerGateway (its worker methods are listed
// as worker), `worker` on JobMasterGateway, and `admin` on any other interface; a method id past
// the interface's last method gets its interface's default.
MethodAccess methodAccess(capnp::InterfaceSchema schema, uint16_t methodId);

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

// `cap` behind a membrane that admits a call only when `held` shares a role with the roles the
// call accepts (methodAccess() of the called interface and method); every capability obtained through it
// (the Dispatcher gateway a MasterBootstrap hands out) is restricted the same way, without
// copying it: the term's own membrane still revokes it when the term ends. A refused call
// completes with Failure.permissionDenied {required, held, accepted} ("DispatcherGateway.submitJob
// needs role admin; this connection holds reader"; "MasterBootstrap.resourceManager needs role
// worker or admin; ..."), or with Failure.unauthenticated when `held` is
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

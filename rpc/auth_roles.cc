// The role table of the gateways and the membrane that enforces it (see auth_roles.h).
#include "rpc/auth_roles.h"

#include <capnp/dynamic.h>
#include <capnp/membrane.h>
#include <kj/debug.h>
#include <kj/refcount.h>

#include <set>
#include <vector>
#include <utility>

#include "rpc/failure.h"
#include "rpc/schema/gateways.capnp.h"

namespace regent::rpc {

const char* roleName(wire::Role role) {
  switch (role) {
    case wire::Role::READER:
      return "reader";
    case wire::Role::ADMIN:
      return "admin";
    case wire::Role::WORKER:
      return "worker";
  }
  return "unknown";
}

std::optional<wire::Role> roleNamed(std::string_view name) {
  for (wire::Role role : {wire::Role::READER, wire::Role::ADMIN, wire::Role::WORKER}) {
    if (name == roleName(role)) return role;
  }
  return std::nullopt;
}

wire::Role RoleSet::primary() const {
  for (wire::Role role : {wire::Role::ADMIN, wire::Role::WORKER, wire::Role::READER}) {
    if (bits_ & bit(role)) return role;
  }
  return wire::Role::READER;
}

std::string RoleSet::describe() const {
  std::string out;
  for (wire::Role role : {wire::Role::READER, wire::Role::ADMIN, wire::Role::WORKER}) {
    if (!(bits_ & bit(role))) continue;
    if (!out.empty()) out += "+";
    out += roleName(role);
  }
  return out.empty() ? "none" : out;
}

std::string RoleSet::describeAlternatives() const {
  // The role a method is for first, admin (which may call it too) last.
  std::string out;
  for (wire::Role role : {wire::Role::READER, wire::Role::WORKER, wire::Role::ADMIN}) {
    if (!contains(role)) continue;
    if (!out.empty()) out += " or ";
    out += roleName(role);
  }
  return out.empty() ? "none" : out;
}

std::vector<wire::Role> RoleSet::roles() const {
  std::vector<wire::Role> out;
  for (wire::Role role : {wire::Role::READER, wire::Role::ADMIN, wire::Role::WORKER}) {
    if (contains(role)) out.push_back(role);
  }
  return out;
}

uint64_t AuthCounters::deniedFor(wire::Role required) const {
  auto found = denials_.find(roleName(required));
  return found == denials_.end() ? 0 : found->second;
}

// ---- The role table -------------------------------------------------------------------------

namespace {

// "Interface.method" of methods open to every connection, authenticated or not.
const std::set<std::string_view> kOpenMethods = {
    "MasterBootstrap.leaderInfo", "MasterBootstrap.authChallenge", "MasterBootstrap.authenticate"};

// Methods whose access differs from their interface's default: the role each is for, then any
// other role that may call it too. Admin may call whatever reader may (RoleSet::allows).
struct Entry {
  wire::Role role;
  std::optional<wire::Role> alsoRole = std::nullopt;
};
const std::map<std::string_view, Entry> kMethodRoles = {
    {"MasterBootstrap.dispatcher", {wire::Role::READER}},
    // The ResourceManager's gateway: its worker methods still need worker and its JobMaster
    // methods admin (a JobMaster outside the leader, such as the slot benchmark's,
    // authenticates as admin), so both may obtain it.
    {"MasterBootstrap.resourceManager", {wire::Role::WORKER, wire::Role::ADMIN}},
    {"MasterBootstrap.jobMaster", {wire::Role::WORKER}},
    {"DispatcherGateway.listJobs", {wire::Role::READER}},
    {"DispatcherGateway.jobStatus", {wire::Role::READER}},
    {"DispatcherGateway.clusterOverview", {wire::Role::READER}},
    {"DispatcherGateway.listTaskExecutors", {wire::Role::READER}},
    {"DispatcherGateway.attemptOutputToken", {wire::Role::READER}},
    // A worker's calls. The JobMaster's (registerJobMaster, declareRequiredResources,
    // disconnectJobMaster) need admin: JobMasters run inside the leader, and a worker
    // credential must not free another job's slots.
    {"ResourceManagerGateway.registerTaskExecutor", {wire::Role::WORKER}},
    {"ResourceManagerGateway.sendSlotReport", {wire::Role::WORKER}},
    {"ResourceManagerGateway.heartbeat", {wire::Role::WORKER}},
    {"ResourceManagerGateway.disconnect", {wire::Role::WORKER}},
};

// What a method not named above needs, by interface.
wire::Role defaultRole(uint64_t interfaceId) {
  if (interfaceId == capnp::Schema::from<wire::JobMasterGateway>().getProto().getId()) {
    return wire::Role::WORKER;
  }
  return wire::Role::ADMIN;
}

// The roles that may call a method for `role`: admin may call whatever reader may.
RoleSet acceptorsOf(wire::Role role) {
  RoleSet out = RoleSet::of(role);
  if (role == wire::Role::READER) out = out | RoleSet::of(wire::Role::ADMIN);
  return out;
}

std::string methodName(capnp::InterfaceSchema schema, uint16_t methodId) {
  std::string name = schema.getShortDisplayName().cStr();
  auto methods = schema.getMethods();
  if (methodId < methods.size()) return name + "." + methods[methodId].getProto().getName().cStr();
  return name + ".@" + std::to_string(methodId);
}

}  // namespace

MethodAccess methodAccess(capnp::InterfaceSchema schema, uint16_t methodId) {
  const std::string name = methodName(schema, methodId);
  if (kOpenMethods.count(name)) return MethodAccess{.open = true};
  auto found = kMethodRoles.find(name);
  if (found == kMethodRoles.end()) {
    const wire::Role role = defaultRole(schema.getProto().getId());
    return MethodAccess{.required = role, .accepted = acceptorsOf(role)};
  }
  RoleSet accepted = acceptorsOf(found->second.role);
  if (found->second.alsoRole) accepted = accepted | acceptorsOf(*found->second.alsoRole);
  return MethodAccess{.required = found->second.role, .accepted = accepted};
}

// ---- The membrane -----------------------------------------------------------------------------

namespace {

// The interfaces a master serves, by id, for the role table and for building a refusal.
std::optional<capnp::InterfaceSchema> servedInterface(uint64_t interfaceId) {
  for (capnp::InterfaceSchema schema :
       {capnp::Schema::from<wire::MasterBootstrap>(), capnp::Schema::from<wire::DispatcherGateway>(),
        capnp::Schema::from<wire::ResourceManagerGateway>(),
        capnp::Schema::from<wire::JobMasterGateway>(),
        capnp::Schema::from<wire::TaskExecutorGateway>()}) {
    if (schema.getProto().getId() == interfaceId) return schema;
  }
  return std::nullopt;
}

// methodAccess() of every method of the served interfaces, computed once: the membrane looks a
// call up here instead of naming its method per call.
class RoleTable final {
 public:
  RoleTable() {
    for (capnp::InterfaceSchema schema :
         {capnp::Schema::from<wire::MasterBootstrap>(),
          capnp::Schema::from<wire::DispatcherGateway>(),
          capnp::Schema::from<wire::ResourceManagerGateway>(),
          capnp::Schema::from<wire::JobMasterGateway>(),
          capnp::Schema::from<wire::TaskExecutorGateway>()}) {
      std::vector<MethodAccess> access;
      for (auto method : schema.getMethods()) {
        access.push_back(methodAccess(schema, method.getIndex()));
      }
      byInterface_.emplace(schema.getProto().getId(), std::move(access));
    }
  }

  // Whether a call of (interfaceId, methodId) may run with `held`. A method or interface this
  // build does not know needs its interface's default role (admin for unknown interfaces).
  bool allows(uint64_t interfaceId, uint16_t methodId, RoleSet held) const {
    auto found = byInterface_.find(interfaceId);
    if (found == byInterface_.end()) return held.allows(wire::Role::ADMIN);
    if (methodId >= found->second.size()) return held.allows(defaultRole(interfaceId));
    const MethodAccess& access = found->second[methodId];
    return access.open || held.intersects(access.accepted);
  }

 private:
  std::map<uint64_t, std::vector<MethodAccess>> byInterface_;
};

const RoleTable& roleTable() {
  static const RoleTable table;
  return table;
}

// Answers every call redirected to it with the refusal of that call, and counts it.
class RoleRefusal final : public capnp::Capability::Server {
 public:
  RoleRefusal(RoleSet held, AuthCounters& counters) : held_(held), counters_(counters) {}

  DispatchCallResult dispatchCall(uint64_t interfaceId, uint16_t methodId,
                                  capnp::CallContext<capnp::AnyPointer, capnp::AnyPointer> context)
      override {
    context.releaseParams();
    auto schema = servedInterface(interfaceId);
    if (!schema) {
      // Not one of regent's interfaces: refused like any call above the role, and counted by
      // what the connection lacks (no authentication at all, or the admin role default deny asks).
      if (held_.empty()) {
        counters_.refusedUnauthenticated();
      } else {
        counters_.denied(wire::Role::ADMIN);
      }
      kj::throwFatalException(KJ_EXCEPTION(FAILED, "permission denied: unknown interface"));
    }
    const MethodAccess access = methodAccess(*schema, methodId);
    const std::string method = methodName(*schema, methodId);
    std::string message;
    if (held_.empty()) {
      counters_.refusedUnauthenticated();
      message = method + " needs an authenticated connection (role " +
                access.accepted.describeAlternatives() +
                "): configure a credential (rpc.credential.role and rpc.credential.secret-file, "
                "or a client certificate the master maps to a role) and authenticate first";
    } else {
      counters_.denied(access.required);
      message = method + " needs role " + access.accepted.describeAlternatives() +
                "; this connection holds " + held_.describe();
    }
    auto methods = schema->getMethods();
    if (methodId >= methods.size() ||
        methods[methodId].getResultType().findFieldByName("failure") == nullptr) {
      kj::throwFatalException(KJ_EXCEPTION(FAILED, message));
    }
    auto results =
        context.getResults().initAs<capnp::DynamicStruct>(methods[methodId].getResultType());
    auto failure = results.init("failure").as<capnp::DynamicStruct>().as<wire::Failure>();
    if (held_.empty()) {
      failures::unauthenticated(failure, message);
    } else {
      failures::permissionDenied(failure, access.required, held_.primary(), access.accepted.roles(),
                                 message);
    }
    return {kj::READY_NOW, false};
  }

 private:
  const RoleSet held_;
  AuthCounters& counters_;
};

class RolePolicy final : public capnp::MembranePolicy, public kj::Refcounted {
  const uint64_t kBootstrapId = capnp::Schema::from<wire::MasterBootstrap>().getProto().getId();
  const uint16_t kAuthenticateMethod = static_cast<uint16_t>(
      capnp::Schema::from<wire::MasterBootstrap>().getMethodByName("authenticate").getIndex());

 public:
  RolePolicy(RoleSet held, AuthCounters& counters)
      : held_(held), table_(roleTable()), refusal_(kj::heap<RoleRefusal>(held, counters)) {}

  kj::Maybe<capnp::Capability::Client> inboundCall(uint64_t interfaceId, uint16_t methodId,
                                                    capnp::Capability::Client target) override {
    // authenticate answers a bootstrap restricted to the proven role: it must leave this
    // membrane as it is, not wrapped in this connection's previous roles. Its parameters carry
    // no capabilities.
    if (interfaceId == kBootstrapId && methodId == kAuthenticateMethod) return target;
    if (table_.allows(interfaceId, methodId, held_)) return nullptr;
    return refusal_;
  }
  // Capabilities the caller passed in (a worker's TaskExecutorGateway) are called as they are.
  kj::Maybe<capnp::Capability::Client> outboundCall(uint64_t, uint16_t,
                                                     capnp::Capability::Client) override {
    return nullptr;
  }
  kj::Own<capnp::MembranePolicy> addRef() override { return kj::addRef(*this); }
  bool shouldResolveBeforeRedirecting() override { return false; }

 private:
  const RoleSet held_;
  const RoleTable& table_;
  capnp::Capability::Client refusal_;
};

}  // namespace

capnp::Capability::Client restrictToRoles(capnp::Capability::Client cap, RoleSet held,
                                          AuthCounters& counters) {
  return capnp::membrane(kj::mv(cap), kj::refcounted<RolePolicy>(held, counters));
}

}  // namespace regent::rpc

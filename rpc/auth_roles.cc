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

uint64_t AuthCounters::deniedFor(wire::Role required) const {
  auto found = denials_.find(roleName(required));
  return found == denials_.end() ? 0 : found->second;
}

// ---- The role table -------------------------------------------------------------------------

namespace {

// "Interface.method" of methods open to every connection, authenticated or not.
const std::set<std::string_view> kOpenMethods = {
    "MasterBootstrap.leaderInfo", "MasterBootstrap.authChallenge", "MasterBootstrap.authenticate"};

// Methods whose role differs from their interface's default.
const std::map<std::string_view, wire::Role> kMethodRoles = {
    {"MasterBootstrap.dispatcher", wire::Role::READER},
    {"MasterBootstrap.resourceManager", wire::Role::WORKER},
    {"MasterBootstrap.jobMaster", wire::Role::WORKER},
    {"DispatcherGateway.listJobs", wire::Role::READER},
    {"DispatcherGateway.jobStatus", wire::Role::READER},
    {"DispatcherGateway.clusterOverview", wire::Role::READER},
    {"DispatcherGateway.listTaskExecutors", wire::Role::READER},
    {"DispatcherGateway.attemptOutputToken", wire::Role::READER},
    // A worker's calls. The JobMaster's (registerJobMaster, declareRequiredResources,
    // disconnectJobMaster) need admin: JobMasters run inside the leader, and a worker
    // credential must not free another job's slots.
    {"ResourceManagerGateway.registerTaskExecutor", wire::Role::WORKER},
    {"ResourceManagerGateway.sendSlotReport", wire::Role::WORKER},
    {"ResourceManagerGateway.heartbeat", wire::Role::WORKER},
    {"ResourceManagerGateway.disconnect", wire::Role::WORKER},
};

// Methods that need `worker` but that `admin` may call too: the ResourceManager's gateway, whose
// worker methods still need `worker` and whose JobMaster methods need `admin` (a JobMaster
// outside the leader, such as the slot benchmark's, authenticates as admin).
const std::set<std::string_view> kAlsoAdmin = {"MasterBootstrap.resourceManager"};

// What a method not named above needs, by interface.
wire::Role defaultRole(uint64_t interfaceId) {
  if (interfaceId == capnp::Schema::from<wire::JobMasterGateway>().getProto().getId()) {
    return wire::Role::WORKER;
  }
  return wire::Role::ADMIN;
}

std::string methodName(capnp::InterfaceSchema schema, uint16_t methodId) {
  std::string name = schema.getShortDisplayName().cStr();
  auto methods = schema.getMethods();
  if (methodId < methods.size()) return name + "." + methods[methodId].getProto().getName().cStr();
  return name + ".@" + std::to_string(methodId);
}

}  // namespace

bool adminMayCall(capnp::InterfaceSchema schema, uint16_t methodId) {
  return kAlsoAdmin.count(methodName(schema, methodId)) != 0;
}

std::optional<wire::Role> requiredRole(capnp::InterfaceSchema schema, uint16_t methodId) {
  const std::string name = methodName(schema, methodId);
  if (kOpenMethods.count(name)) return std::nullopt;
  auto found = kMethodRoles.find(name);
  if (found != kMethodRoles.end()) return found->second;
  return defaultRole(schema.getProto().getId());
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

// requiredRole() of every method of the served interfaces, computed once: the membrane looks a
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
      std::vector<Need> needs;
      for (auto method : schema.getMethods()) {
        needs.push_back({requiredRole(schema, method.getIndex()),
                         adminMayCall(schema, method.getIndex())});
      }
      byInterface_.emplace(schema.getProto().getId(), std::move(needs));
    }
  }

  // Whether a call of (interfaceId, methodId) may run with `held`. A method or interface this
  // build does not know needs its interface's default role (admin for unknown interfaces).
  bool allows(uint64_t interfaceId, uint16_t methodId, RoleSet held) const {
    auto found = byInterface_.find(interfaceId);
    if (found == byInterface_.end()) return held.allows(wire::Role::ADMIN);
    if (methodId >= found->second.size()) return held.allows(defaultRole(interfaceId));
    const Need& need = found->second[methodId];
    return !need.role || held.allows(*need.role) ||
           (need.adminToo && held.allows(wire::Role::ADMIN));
  }

 private:
  struct Need {
    std::optional<wire::Role> role;
    bool adminToo = false;
  };
  std::map<uint64_t, std::vector<Need>> byInterface_;
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
    const wire::Role required = requiredRole(*schema, methodId).value_or(wire::Role::READER);
    const std::string method = methodName(*schema, methodId);
    std::string message;
    if (held_.empty()) {
      counters_.refusedUnauthenticated();
      message = method + " needs an authenticated connection (role " + roleName(required) +
                "): configure a credential (rpc.credential.role and rpc.credential.secret-file, "
                "or a client certificate the master maps to a role) and authenticate first";
    } else {
      counters_.denied(required);
      message = method + " needs role " + roleName(required) +
                (adminMayCall(*schema, methodId) ? " or admin" : "") +
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
      failures::permissionDenied(failure, required, held_.primary(), message);
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

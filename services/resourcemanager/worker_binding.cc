// The worker identity of a connection and the gate of worker calls (see worker_binding.h): the
// identity fields of each method's parameters found once by schema reflection, checked per call
// against the connection's binding.
#include "services/resourcemanager/worker_binding.h"

#include <capnp/dynamic.h>
#include <kj/debug.h>
#include <spdlog/spdlog.h>

#include <map>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "common/event_line.h"
#include "rpc/failure.h"

namespace regent::resourcemanager {

uint64_t WorkerIdentityRefusals::total() const {
  uint64_t sum = 0;
  for (const auto& [method, count] : refused_) sum += count;
  return sum;
}

void WorkerIdentityRefusals::refuse(const WorkerBinding& caller, const std::string& method,
                                    const std::string& named, const std::string& why,
                                    wire::Failure::Builder failure) {
  ++refused_[method];
  const auto& bound = caller.identity();
  EventLine line("worker identity refused");
  line.field("method", method)
      .field("peer", caller.peer())
      .field("resource_id", bound ? bound->resourceId.toHex() : std::string("none"))
      .field("registration_id", bound ? bound->registrationId.toHex() : std::string("none"))
      .field("named", named.empty() ? std::string("-") : named)
      .quotedField("reason", why);
  spdlog::warn("{}", line.str());
  rpc::failures::permissionDenied(failure, wire::Role::WORKER, wire::Role::WORKER,
                                  method + " refused: " + why);
}

namespace {

// Methods of the gated interfaces that are not a worker speaking for itself: registration
// (which binds) and the ResourceManager's JobMaster methods.
const std::set<std::string_view> kNotWorkerCalls = {
    "ResourceManagerGateway.registerTaskExecutor", "ResourceManagerGateway.registerJobMaster",
    "ResourceManagerGateway.declareRequiredResources",
    "ResourceManagerGateway.disconnectJobMaster"};

// How deep into struct parameters identity fields are looked for (a heartbeat's payload's slot
// report is two levels down). Lists are not entered.
constexpr int kMaxDepth = 3;

using FieldPath = std::vector<capnp::StructSchema::Field>;

// Every Id128 field named `name` in `type`, as paths from the parameters' root.
void findIdFields(capnp::StructSchema type, const char* name, FieldPath& prefix, int depth,
                  std::vector<FieldPath>& out) {
  const uint64_t id128 = capnp::Schema::from<wire::Id128>().getProto().getId();
  for (auto field : type.getFields()) {
    auto fieldType = field.getType();
    if (!fieldType.isStruct()) continue;
    auto structType = fieldType.asStruct();
    prefix.push_back(field);
    if (structType.getProto().getId() == id128) {
      if (field.getProto().getName() == name) out.push_back(prefix);
    } else if (depth + 1 < kMaxDepth) {
      findIdFields(structType, name, prefix, depth + 1, out);
    }
    prefix.pop_back();
  }
}

// The Id128 at `path` in `params`, or nullopt when a struct on the way or the id itself is unset
// (or zero: "absent" on the wire).
std::optional<std::pair<uint64_t, uint64_t>> idAt(capnp::DynamicStruct::Reader params,
                                                  const FieldPath& path) {
  capnp::DynamicStruct::Reader at = params;
  for (const auto& field : path) {
    if (!at.has(field)) return std::nullopt;
    at = at.get(field).as<capnp::DynamicStruct>();
  }
  auto id = at.as<wire::Id128>();
  if (id.getHi() == 0 && id.getLo() == 0) return std::nullopt;
  return std::make_pair(id.getHi(), id.getLo());
}

template <typename Tag>
bool sameId(const std::pair<uint64_t, uint64_t>& wire, const Id128<Tag>& id) {
  return wire.first == id.hi() && wire.second == id.lo();
}

// What the gate knows of one method, found once per interface by reflection.
struct GatedMethod {
  std::string name;  // "Interface.method".
  bool workerCall = true;
  capnp::StructSchema params;
  capnp::StructSchema results;
  std::vector<FieldPath> resourceIds;
  std::vector<FieldPath> registrationIds;
};

std::vector<GatedMethod> gatedMethods(capnp::InterfaceSchema schema) {
  std::vector<GatedMethod> methods;
  for (auto method : schema.getMethods()) {
    GatedMethod entry;
    entry.name = std::string(schema.getShortDisplayName().cStr()) + "." +
                 method.getProto().getName().cStr();
    entry.workerCall = kNotWorkerCalls.count(entry.name) == 0;
    entry.params = method.getParamType();
    entry.results = method.getResultType();
    FieldPath prefix;
    findIdFields(entry.params, "resourceId", prefix, 0, entry.resourceIds);
    findIdFields(entry.params, "registrationId", prefix, 0, entry.registrationIds);
    methods.push_back(std::move(entry));
  }
  return methods;
}

// The gated methods of `schema`'s interface, computed on first use and shared by every gate
// (one per connection) of that interface: immutable, derived from the compiled-in schema.
// Loop-thread only, like every gate.
const std::vector<GatedMethod>& methodsOf(capnp::InterfaceSchema schema) {
  static std::map<uint64_t, std::vector<GatedMethod>> byInterface;
  const uint64_t id = schema.getProto().getId();
  auto found = byInterface.find(id);
  if (found == byInterface.end()) found = byInterface.emplace(id, gatedMethods(schema)).first;
  return found->second;
}

class WorkerCallGate final : public capnp::Capability::Server {
 public:
  WorkerCallGate(capnp::InterfaceSchema schema, kj::Own<capnp::Capability::Server> inner,
                 kj::Own<WorkerBinding> caller, const WorkerRegistry& registry,
                 WorkerIdentityRefusals& refusals)
      : interfaceId_(schema.getProto().getId()),
        methods_(methodsOf(schema)),
        inner_(kj::mv(inner)),
        caller_(kj::mv(caller)),
        registry_(registry),
        refusals_(refusals) {}

  DispatchCallResult dispatchCall(uint64_t interfaceId, uint16_t methodId,
                                  capnp::CallContext<capnp::AnyPointer, capnp::AnyPointer> context)
      override {
    if (interfaceId == interfaceId_ && methodId < methods_.size() &&
        methods_[methodId].workerCall && !admit(methods_[methodId], context)) {
      return {kj::READY_NOW, false};
    }
    return inner_->dispatchCall(interfaceId, methodId, context);
  }

 private:
  using Method = GatedMethod;

  // Whether the call may reach its handler; when not, its results hold the refusal.
  bool admit(const Method& method,
             capnp::CallContext<capnp::AnyPointer, capnp::AnyPointer>& context) {
    auto params = context.getParams().getAs<capnp::DynamicStruct>(method.params);
    const auto& bound = caller_->identity();
    if (!bound) {
      std::string namedHex;  // The first resource id the call names, for the log line.
      for (const FieldPath& path : method.resourceIds) {
        if (auto id = idAt(params, path)) {
          namedHex = ResourceId(id->first, id->second).toHex();
          break;
        }
      }
      context.releaseParams();
      refusals_.refuse(*caller_, method.name, namedHex,
                       "this connection has registered no worker; a worker calls "
                       "ResourceManagerGateway.registerTaskExecutor first, on the connection it "
                       "then calls on",
                       initFailure(method, context));
      return false;
    }
    for (const FieldPath& path : method.resourceIds) {
      auto id = idAt(params, path);
      if (!id || sameId(*id, bound->resourceId)) continue;
      const std::string other = ResourceId(id->first, id->second).toHex();
      context.releaseParams();
      refusals_.refuse(*caller_, method.name, other,
                       "this connection speaks for worker " + bound->resourceId.toHex() +
                           ", not for " + other,
                       initFailure(method, context));
      return false;
    }
    std::string stale;
    for (const FieldPath& path : method.registrationIds) {
      auto id = idAt(params, path);
      if (!id || sameId(*id, bound->registrationId)) continue;
      stale = "the call names registration " + RegistrationId(id->first, id->second).toHex() +
              ", not this connection's registration " + bound->registrationId.toHex();
    }
    if (stale.empty() && !registry_.isCurrent(*bound)) {
      stale = "registration " + bound->registrationId.toHex() + " of resource id " +
              bound->resourceId.toHex() +
              " is not its current registration (a newer one replaced it, or it expired)";
    }
    if (stale.empty()) return true;
    context.releaseParams();
    rpc::failures::notRegistered(initFailure(method, context), bound->resourceId,
                                 method.name + " refused: " + stale + "; register again");
    return false;
  }

  wire::Failure::Builder initFailure(
      const Method& method, capnp::CallContext<capnp::AnyPointer, capnp::AnyPointer>& context) {
    KJ_REQUIRE(method.results.findFieldByName("failure") != nullptr, method.name);
    auto results = context.getResults().initAs<capnp::DynamicStruct>(method.results);
    return results.init("failure").as<capnp::DynamicStruct>().as<wire::Failure>();
  }

  const uint64_t interfaceId_;
  const std::vector<GatedMethod>& methods_;  // By method id.
  kj::Own<capnp::Capability::Server> inner_;
  kj::Own<WorkerBinding> caller_;
  const WorkerRegistry& registry_;
  WorkerIdentityRefusals& refusals_;
};

}  // namespace

kj::Own<capnp::Capability::Server> guardWorkerCalls(capnp::InterfaceSchema schema,
                                                    kj::Own<capnp::Capability::Server> inner,
                                                    kj::Own<WorkerBinding> caller,
                                                    const WorkerRegistry& registry,
                                                    WorkerIdentityRefusals& refusals) {
  return kj::heap<WorkerCallGate>(schema, kj::mv(inner), kj::mv(caller), registry, refusals);
}

}  // namespace regent::resourcemanager

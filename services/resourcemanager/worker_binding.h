// Who a worker connection speaks for (docs/security.md, "Worker identity"): the resource id and
// registration id one RPC connection registered (ResourceManagerGateway.registerTaskExecutor),
// held per connection, and the gate every worker call of the ResourceManager's and the
// JobMasters' gateways passes before a handler runs. A worker's calls take its identity from
// the connection, never from their parameters; a call that names another worker is refused.
#pragma once

#include <capnp/capability.h>
#include <capnp/schema.h>
#include <kj/debug.h>
#include <kj/refcount.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/ids.h"
#include "rpc/connection_gate.h"
#include "rpc/schema/common.capnp.h"

namespace regent::resourcemanager {

struct WorkerIdentity {
  ResourceId resourceId;
  RegistrationId registrationId;
};

// The worker identity of one RPC connection. MasterBootstrap creates one, unbound, per accepted
// connection (whatever roles it holds: with authentication off every connection holds every
// role), and every ResourceManager and JobMaster gateway handed out on that connection shares it.
// registerTaskExecutor binds it; a later registration of the same resource id on the same
// connection binds it again (a new registration id). Loop-thread only.
class WorkerBinding final : public kj::Refcounted {
 public:
  // `peer`: the connection's address, for log lines; `certificateName`: the common name of the
  // connection's verified client certificate (mutual TLS), empty without one; `gate`: the
  // connection's, to close it (none in process).
  explicit WorkerBinding(std::string peer, std::string certificateName = "")
      : peer_(std::move(peer)), certificateName_(std::move(certificateName)) {}
  WorkerBinding(std::string peer, std::string certificateName, kj::Own<rpc::ConnectionGate> gate)
      : peer_(std::move(peer)), certificateName_(std::move(certificateName)), gate_(kj::mv(gate)) {}
  const std::string& peer() const { return peer_; }
  const std::string& certificateName() const { return certificateName_; }
  const std::optional<WorkerIdentity>& identity() const { return identity_; }
  // The identity of a connection the gate admitted a worker call on (bound there; asserts it).
  const WorkerIdentity& bound() const {
    KJ_ASSERT(identity_.has_value(), "a worker call passed the gate on an unbound connection");
    return *identity_;
  }
  void bind(const WorkerIdentity& identity) { identity_ = identity; }
  // Closes the connection (the term it registered in is over), telling the worker `reason`.
  void closeConnection(const std::string& reason) {
    KJ_IF_MAYBE (gate, gate_) {
      (*gate)->close(reason);
    }
  }

 private:
  const std::string peer_;
  const std::string certificateName_;
  kj::Maybe<kj::Own<rpc::ConnectionGate>> gate_;
  std::optional<WorkerIdentity> identity_;
};

// Worker calls refused for speaking for another worker, by method ("JobMasterGateway.heartbeat"),
// for /metrics (regent_rpc_worker_identity_refusals_total). The master owns one across terms.
// Loop-thread only.
class WorkerIdentityRefusals final {
 public:
  // Completes `failure` with permissionDenied ("<method> refused: <why>"), counts the refusal
  // under `method`, and logs a `worker identity refused` warning line with the connection's
  // address and bound identity (resource_id, registration_id; "none" before registration) and
  // `named`, the identity the call named ("-" when it named none).
  void refuse(const WorkerBinding& caller, const std::string& method, const std::string& named,
              const std::string& why, wire::Failure::Builder failure);
  const std::map<std::string, uint64_t>& byMethod() const { return refused_; }
  uint64_t total() const;

 private:
  std::map<std::string, uint64_t> refused_;
};

// The registrations of the term: whether `identity` is still the current registration of its
// resource id (a newer registration over another connection replaced it, or it expired).
class WorkerRegistry {
 public:
  virtual ~WorkerRegistry() = default;
  virtual bool isCurrent(const WorkerIdentity& identity) const = 0;
};

// The gate, one mechanism for every worker call. `inner` is a server of `schema`'s interface
// (ResourceManagerGateway or JobMasterGateway) made for one connection, whose handlers read the
// caller's identity from `caller`. Every method of the interface is a worker call except
// registerTaskExecutor (which binds) and the ResourceManager's JobMaster methods
// (registerJobMaster, declareRequiredResources, disconnectJobMaster), which pass untouched. A
// worker call reaches its handler only when
//   - the connection registered (else permissionDenied: "... has registered no worker"),
//   - every `resourceId` its parameters carry, at the top level or inside a struct parameter
//     (a slot report, a heartbeat payload), is unset, zero or the bound one (else
//     permissionDenied naming both),
//   - its registration is still current in `registry` and every `registrationId` it carries is
//     unset, zero or the bound one (else notRegistered: register again).
// Refusals count and log in `refusals` (notRegistered is not counted: it is not an identity
// violation). `registry` and `refusals` must outlive the gate (the term drops its gateways'
// handlers before the services go).
kj::Own<capnp::Capability::Server> guardWorkerCalls(capnp::InterfaceSchema schema,
                                                    kj::Own<capnp::Capability::Server> inner,
                                                    kj::Own<WorkerBinding> caller,
                                                    const WorkerRegistry& registry,
                                                    WorkerIdentityRefusals& refusals);

namespace detail {
// Makes the gate usable where a typed server is expected (LeadershipTerm::serve).
template <typename Interface>
class TypedWorkerGate final : public Interface::Server {
 public:
  explicit TypedWorkerGate(kj::Own<capnp::Capability::Server> gate) : gate_(kj::mv(gate)) {}
  capnp::Capability::Server::DispatchCallResult dispatchCall(
      uint64_t interfaceId, uint16_t methodId,
      capnp::CallContext<capnp::AnyPointer, capnp::AnyPointer> context) override {
    return gate_->dispatchCall(interfaceId, methodId, context);
  }

 private:
  kj::Own<capnp::Capability::Server> gate_;
};
}  // namespace detail

template <typename Interface>
kj::Own<typename Interface::Server> guardWorkerCalls(kj::Own<typename Interface::Server> inner,
                                                     kj::Own<WorkerBinding> caller,
                                                     const WorkerRegistry& registry,
                                                     WorkerIdentityRefusals& refusals) {
  return kj::heap<detail::TypedWorkerGate<Interface>>(
      guardWorkerCalls(capnp::Schema::from<Interface>(), kj::mv(inner), kj::mv(caller), registry,
                       refusals));
}

}  // namespace regent::resourcemanager

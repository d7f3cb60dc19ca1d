// Fencing of the leader's gateways, in one place (DESIGN §5 layer 1, STYLE §4): a wrapper that
// refuses every call whose `epoch` is not the term's before any handler runs, and the term's
// membrane that revokes every capability handed out in it when leadership ends.
#pragma once

#include <capnp/capability.h>
#include <capnp/membrane.h>
#include <capnp/schema.h>
#include <kj/memory.h>

#include <cstdint>
#include <map>
#include <string>

namespace regent::rpc {

// Calls that reached a fenced endpoint, and those it refused for their epoch, by method
// ("DispatcherGateway.jobStatus"), for /metrics. Loop-thread only.
class FencingCounters final {
 public:
  void call(const std::string& method) { ++called_[method]; }
  void reject(const std::string& method) { ++rejected_[method]; }
  // The call counter of `method`, created at 0; the reference stays valid as long as this
  // object (an endpoint looks it up once, not per call).
  uint64_t& callSlot(const std::string& method) { return called_[method]; }
  uint64_t called(const std::string& method) const;
  uint64_t rejected(const std::string& method) const;
  const std::map<std::string, uint64_t>& calls() const { return called_; }
  const std::map<std::string, uint64_t>& all() const { return rejected_; }

 private:
  std::map<std::string, uint64_t> called_;
  std::map<std::string, uint64_t> rejected_;
};

class TermHandlers;

// One leadership term of a master: its epoch, and the revocation of every capability its
// gateways hand out. Loop-thread only.
class LeadershipTerm final {
 public:
  // `counters` (the master's, kept across terms) counts the calls refused after revocation; it
  // must outlive the term and every capability it guarded.
  LeadershipTerm(uint64_t epoch, FencingCounters& counters);
  // Revokes (reason "leadership term ended") if revoke() was not called.
  ~LeadershipTerm() noexcept;
  LeadershipTerm(const LeadershipTerm&) = delete;
  LeadershipTerm& operator=(const LeadershipTerm&) = delete;

  uint64_t epoch() const { return epoch_; }

  // `cap` behind the term's membrane. Once revoke() ran, calls in flight through it, and through
  // every capability obtained from it, are cancelled with a DISCONNECTED exception naming the
  // epoch and the reason. New calls of `Client`'s interface whose parameters carry an epoch then
  // complete with `failure.fencing {expected = 0, received}` (0: the gateway serves no epoch any
  // more), counted in `counters`, whatever epoch they send; other calls fail with that exception.
  // Callers that skip the epoch check, or hold an old gateway, cannot reach the new term's
  // services through it.
  template <typename Client>
  Client guard(Client cap) {
    fenceAfterRevocation(capnp::Schema::from<typename Client::Calls>());
    return capnp::membrane(kj::mv(cap), policy());
  }

  // A gateway of this term: `inner` behind fencedEndpoint() for the term's epoch, behind guard().
  // Also, revoke() drops every handler of `inner` still running (its promise is destroyed, so no
  // continuation of it runs afterwards): Cap'n Proto keeps a handler alive for pipelining until
  // its caller's Finish arrives, and the term's services (its stores) are gone by then.
  template <typename Interface>
  typename Interface::Client serve(kj::Own<typename Interface::Server> inner) {
    return guard(fencedForTerm(capnp::Schema::from<Interface>(), kj::mv(inner))
                     .template castAs<Interface>());
  }

  // Idempotent. Fires the revocation on the loop, and drops the handlers of serve()'s gateways
  // at once.
  void revoke(const std::string& reason);
  bool revoked() const;

 private:
  kj::Own<capnp::MembranePolicy> policy();
  void fenceAfterRevocation(capnp::InterfaceSchema schema);
  capnp::Capability::Client fencedForTerm(capnp::InterfaceSchema schema,
                                          kj::Own<capnp::Capability::Server> inner);

  class RevocationPolicy;
  const uint64_t epoch_;
  FencingCounters& counters_;
  kj::Own<RevocationPolicy> policy_;
  kj::Own<TermHandlers> handlers_;
};

// Wraps `inner`, a server of `schema`'s interface, so that every method of that interface whose
// parameters have an `epoch :UInt64` field is refused unless the epoch equals `epoch`: the call
// completes with `failure.fencing {expected = epoch, received}` (and a message naming both and
// the method) without reaching `inner`, and counts in `counters`. Every call of the interface,
// refused or not, counts in `counters.calls()`. Methods without an epoch
// field, and calls of other interfaces, pass through. `counters` must outlive the endpoint.
capnp::Capability::Client fencedEndpoint(capnp::InterfaceSchema schema,
                                         kj::Own<capnp::Capability::Server> inner, uint64_t epoch,
                                         FencingCounters& counters);

// Typed convenience: `fencedEndpoint<wire::DispatcherGateway>(kj::heap<DispatcherImpl>(...), ...)`.
template <typename Interface>
typename Interface::Client fencedEndpoint(kj::Own<typename Interface::Server> inner,
                                          uint64_t epoch, FencingCounters& counters) {
  return fencedEndpoint(capnp::Schema::from<Interface>(), kj::mv(inner), epoch, counters)
      .template castAs<Interface>();
}

}  // namespace regent::rpc

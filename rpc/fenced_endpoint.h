// Fencing in one place per side (docs/wire.md, "Epochs and fencing"): a wrapper that judges every
// call's `epoch` by a rule (exact on masters, "at least the highest seen" on workers) before any
// handler runs, and the leadership term's membrane that revokes every capability handed out in
// it when leadership ends.
#pragma once

#include <capnp/capability.h>
#include <capnp/membrane.h>
#include <capnp/schema.h>
#include <kj/memory.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "rpc/schema/common.capnp.h"

namespace regent::rpc {

// How a fenced endpoint judges the epoch a call carries. Loop-thread only; admit() runs before
// the call reaches its handler, once per call of a method with an `epoch` parameter.
class EpochRule {
 public:
  virtual ~EpochRule() = default;
  // Whether a call carrying `received` may reach its handler. Runs for every fenced call, so it
  // must be cheap; a rule with state (the worker's gate) updates it here.
  virtual bool admits(uint64_t received) = 0;
  // Called right after admits() returned false, in the same turn: fills `failure` (its message
  // and its union member, e.g. fencing) for the refused call of `method`
  // ("DispatcherGateway.jobStatus"); the endpoint then completes the call with it.
  virtual void refuse(const std::string& method, uint64_t received,
                      wire::Failure::Builder failure) = 0;
};

// The masters' rule: only the term's own epoch. Refuses with `fencing {expected = epoch,
// received}` and the message "<method> refused: called with epoch R, this master serves epoch E".
class ExactEpoch final : public EpochRule {
 public:
  explicit ExactEpoch(uint64_t epoch) : epoch_(epoch) {}
  uint64_t epoch() const { return epoch_; }
  bool admits(uint64_t received) override { return received == epoch_; }
  void refuse(const std::string& method, uint64_t received,
              wire::Failure::Builder failure) override;

 private:
  const uint64_t epoch_;
};

// The workers' epoch gate: an epoch at least the highest seen so far, which it then raises.
// Refuses a lower one with `fencing {expected = highest, received}` and the message "<method>
// refused: called with epoch R, this process has seen epoch H". One gate is meant to be shared
// by every endpoint of a process (pass kj::attachRef(gate)); it must outlive them.
class HighestSeenEpoch final : public EpochRule {
 public:
  // `onRaised(previous, raised)` runs inside admits() each time a call carries an epoch above
  // every one seen (not for `initial`), before that call reaches its handler: a worker re-resolves
  // the leader there. It must not destroy the gate or the endpoint.
  explicit HighestSeenEpoch(uint64_t initial = 0,
                            std::function<void(uint64_t previous, uint64_t raised)> onRaised = {})
      : highest_(initial), onRaised_(std::move(onRaised)) {}
  uint64_t highest() const { return highest_; }
  // Raises the highest epoch seen without a call (e.g. learned from the leader node); fires
  // onRaised when it rises.
  void observe(uint64_t epoch);
  bool admits(uint64_t received) override;
  void refuse(const std::string& method, uint64_t received,
              wire::Failure::Builder failure) override;

 private:
  uint64_t highest_;
  const std::function<void(uint64_t, uint64_t)> onRaised_;
};

// Calls that reached a fenced endpoint, and those it refused for their epoch, by method
// ("DispatcherGateway.jobStatus"), for /metrics. Loop-thread only.
class FencingCounters final {
 public:
  // What a fenced endpoint knows of each method of one interface (where its `epoch` sits, whether
  // its results carry a `failure`, its name, its call counter): made once per interface and
  // shared by every endpoint serving it with these counters (fenced_endpoint.cc).
  struct MethodTable;

  FencingCounters();
  ~FencingCounters() noexcept;
  FencingCounters(const FencingCounters&) = delete;
  FencingCounters& operator=(const FencingCounters&) = delete;

  // The table of `schema`'s interface, made on first use; valid as long as this object.
  const MethodTable& methodTable(capnp::InterfaceSchema schema);

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
  std::map<uint64_t, std::unique_ptr<const MethodTable>> methodTables_;  // By interface id.
};

class TermState;

// How long a caller of a term that is not ready yet is asked to wait (Failure.unavailable).
inline constexpr uint64_t kNotReadyRetryMs = 500;

// One leadership term of a master: its epoch, whether its services are ready, and the
// revocation of every capability its gateways hand out. Loop-thread only.
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

  // When serve()'s gateway lets calls through to its handlers.
  enum class Readiness {
    kAfterMarkReady,  // Once the term recovered (markReady()); `unavailable` before.
    kImmediately,     // At once: a service that needs no recovery (the ResourceManager, whose
                      // slot table rebuilds from worker reports while the Dispatcher recovers).
  };

  // A gateway of this term: `inner` behind fencedEndpoint() for the term's epoch (ExactEpoch),
  // behind guard(). With kAfterMarkReady (the default), until markReady() every call that passes
  // the epoch check and whose results have a `failure` field completes with
  // `failure.unavailable {retryAfterMs = kNotReadyRetryMs}` ("the leader of epoch E is still
  // recovering; retry shortly") without reaching `inner`: no handler checks readiness itself.
  // With kImmediately calls that pass the epoch check reach `inner` at once. Either way,
  // revoke() drops every handler of `inner` still running (its promise is destroyed, so no
  // continuation of it runs afterwards): Cap'n Proto keeps a handler alive for pipelining until
  // its caller's Finish arrives, and the term's services (its stores) are gone by then.
  template <typename Interface>
  typename Interface::Client serve(kj::Own<typename Interface::Server> inner,
                                   Readiness readiness = Readiness::kAfterMarkReady) {
    return guard(fencedForTerm(capnp::Schema::from<Interface>(), kj::mv(inner), readiness)
                     .template castAs<Interface>());
  }

  // Lets calls of serve()'s gateways through to their handlers from now on (the term recovered).
  // Idempotent.
  void markReady();
  bool ready() const;

  // Idempotent. Fires the revocation on the loop, and drops the handlers of serve()'s gateways
  // at once.
  void revoke(const std::string& reason);
  bool revoked() const;

 private:
  kj::Own<capnp::MembranePolicy> policy();
  void fenceAfterRevocation(capnp::InterfaceSchema schema);
  capnp::Capability::Client fencedForTerm(capnp::InterfaceSchema schema,
                                          kj::Own<capnp::Capability::Server> inner,
                                          Readiness readiness);

  class RevocationPolicy;
  const uint64_t epoch_;
  FencingCounters& counters_;
  kj::Own<RevocationPolicy> policy_;
  kj::Own<TermState> state_;
};

// Wraps `inner`, a server of `schema`'s interface, so that every method of that interface whose
// parameters have an `epoch :UInt64` field is judged by `rule` first: a refused call completes
// with the failure the rule filled in, without reaching `inner`, and counts in
// `counters.all()`. Every call of the interface, refused or not, counts in `counters.calls()`.
// A method `inner` does not implement (a kj UNIMPLEMENTED exception) completes with
// `failure.failedPrecondition` and the message "<method> is not implemented by this process"
// when its results have a `failure` field. Methods without an epoch field, and calls of other
// interfaces, pass through. `counters` must outlive the endpoint.
capnp::Capability::Client fencedEndpoint(capnp::InterfaceSchema schema,
                                         kj::Own<capnp::Capability::Server> inner,
                                         kj::Own<EpochRule> rule, FencingCounters& counters);

// Typed convenience:
// `fencedEndpoint<wire::DispatcherGateway>(kj::heap<Gateway>(...), kj::heap<ExactEpoch>(7), ...)`.
template <typename Interface>
typename Interface::Client fencedEndpoint(kj::Own<typename Interface::Server> inner,
                                          kj::Own<EpochRule> rule, FencingCounters& counters) {
  return fencedEndpoint(capnp::Schema::from<Interface>(), kj::mv(inner), kj::mv(rule), counters)
      .template castAs<Interface>();
}

// The masters' rule for one epoch: fencedEndpoint<I>(inner, kj::heap<ExactEpoch>(epoch), ...).
template <typename Interface>
typename Interface::Client fencedEndpoint(kj::Own<typename Interface::Server> inner,
                                          uint64_t epoch, FencingCounters& counters) {
  return fencedEndpoint<Interface>(kj::mv(inner), kj::heap<ExactEpoch>(epoch), counters);
}

}  // namespace regent::rpc

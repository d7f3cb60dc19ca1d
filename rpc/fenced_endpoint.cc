// The fenced-endpoint wrapper (epoch check by reflection over the gateway's schema) and the
// leadership term's revocation membrane.
#include "rpc/fenced_endpoint.h"

#include <capnp/any.h>
#include <capnp/dynamic.h>
#include <capnp/membrane.h>
#include <capnp/message.h>
#include <kj/async.h>
#include <kj/debug.h>
#include <kj/refcount.h>

#include <optional>
#include <utility>
#include <vector>

#include "rpc/failure.h"

namespace regent::rpc {

struct FencingCounters::MethodTable {
  struct Method {
    std::optional<uint32_t> epochOffset;  // Of `epoch` in the parameters' data, in 8 bytes.
    bool hasFailure = false;              // The results have `failure`.
    std::string name;                     // "Interface.method".
    uint64_t* calls = nullptr;            // Its counter in the FencingCounters.
  };
  std::vector<Method> methods;  // By method id.
};

FencingCounters::FencingCounters() = default;
FencingCounters::~FencingCounters() noexcept = default;

const FencingCounters::MethodTable& FencingCounters::methodTable(capnp::InterfaceSchema schema) {
  auto& table = methodTables_[schema.getProto().getId()];
  if (table) return *table;
  // Where each method's `epoch` sits in its parameters' data section, found once: a call then
  // reads 8 bytes instead of walking the schema.
  auto made = std::make_unique<MethodTable>();
  for (auto method : schema.getMethods()) {
    MethodTable::Method entry;
    KJ_IF_MAYBE (field, method.getParamType().findFieldByName("epoch")) {
      auto proto = field->getProto();
      if (proto.isSlot() && proto.getSlot().getType().isUint64()) {
        entry.epochOffset = proto.getSlot().getOffset();
      }
    }
    entry.hasFailure = method.getResultType().findFieldByName("failure") != nullptr;
    entry.name = std::string(schema.getShortDisplayName().cStr()) + "." +
                 method.getProto().getName().cStr();
    entry.calls = &callSlot(entry.name);
    made->methods.push_back(std::move(entry));
  }
  table = std::move(made);
  return *table;
}

uint64_t FencingCounters::called(const std::string& method) const {
  auto found = called_.find(method);
  return found == called_.end() ? 0 : found->second;
}

uint64_t FencingCounters::rejected(const std::string& method) const {
  auto found = rejected_.find(method);
  return found == rejected_.end() ? 0 : found->second;
}

// ---- Epoch rules ---------------------------------------------------------------------------

namespace {

void refuseWithFencing(wire::Failure::Builder failure, const std::string& method,
                       uint64_t received, uint64_t expected, const std::string& why) {
  failures::fencing(
      failure, expected, received,
      method + " refused: called with epoch " + std::to_string(received) + ", " + why);
}

}  // namespace

void ExactEpoch::refuse(const std::string& method, uint64_t received,
                        wire::Failure::Builder failure) {
  refuseWithFencing(failure, method, received, epoch_,
                    "this master serves epoch " + std::to_string(epoch_));
}

void HighestSeenEpoch::observe(uint64_t epoch) {
  if (epoch <= highest_) return;
  const uint64_t previous = highest_;
  highest_ = epoch;
  if (onRaised_) onRaised_(previous, epoch);
}

bool HighestSeenEpoch::admits(uint64_t received) {
  if (received < highest_) return false;
  observe(received);
  return true;
}

void HighestSeenEpoch::refuse(const std::string& method, uint64_t received,
                              wire::Failure::Builder failure) {
  refuseWithFencing(failure, method, received, highest_,
                    "this process has seen epoch " + std::to_string(highest_));
}

// ---- FencedEndpoint ------------------------------------------------------------------------

// What a term shares with the endpoints of its gateways (which outlive it): whether it is ready,
// and the handlers running in them, dropped together when the term is revoked.
class TermState final : public kj::Refcounted {
 public:
  explicit TermState(uint64_t epoch) : epoch(epoch) {}
  const uint64_t epoch;
  bool ready = false;
  kj::Canceler canceler;
};

namespace {

// Serves `schema`'s interface under an epoch rule. Without an `inner` server it stands for a term
// that is over (`ended` says which and why): every call with an epoch is refused with
// expected = 0, and every other call fails with `ended`.
class FencedEndpoint final : public capnp::Capability::Server {
 public:
  FencedEndpoint(capnp::InterfaceSchema schema, kj::Own<capnp::Capability::Server> inner,
                 kj::Own<EpochRule> rule, FencingCounters& counters,
                 kj::Maybe<kj::Exception> ended = nullptr,
                 kj::Maybe<kj::Own<TermState>> term = nullptr, bool waitsForReady = true)
      : schema_(schema),
        interfaceId_(schema.getProto().getId()),
        inner_(kj::mv(inner)),
        rule_(kj::mv(rule)),
        counters_(counters),
        methods_(counters.methodTable(schema).methods),
        ended_([&]() -> kj::Own<const kj::Exception> {
          KJ_IF_MAYBE (exception, ended) return kj::heap<const kj::Exception>(kj::mv(*exception));
          return kj::Own<const kj::Exception>();
        }()),
        term_(kj::mv(term)),
        waitsForReady_(waitsForReady) {}

  DispatchCallResult dispatchCall(uint64_t interfaceId, uint16_t methodId,
                                  capnp::CallContext<capnp::AnyPointer, capnp::AnyPointer> context)
      override {
    const bool ours = interfaceId == interfaceId_ && methodId < methods_.size();
    if (ours) {
      ++*methods_[methodId].calls;
      if (const auto& offset = methods_[methodId].epochOffset) {
        const uint64_t received = readEpoch(context, *offset);
        if (!admit(methodId, received, context)) {
          counters_.reject(methods_[methodId].name);
          return {kj::READY_NOW, false};
        }
      }
    }
    if (ended_) kj::throwFatalException(kj::cp(*ended_));
    if (ours && methods_[methodId].hasFailure && waitsForReady_) {
      KJ_IF_MAYBE (term, term_) {
        if (!(*term)->ready) {
          answerNotReady(methodId, (*term)->epoch, context);
          return {kj::READY_NOW, false};
        }
      }
    }
    DispatchCallResult dispatched{nullptr, false};
    KJ_IF_MAYBE (exception, kj::runCatchingExceptions([&]() {
                   dispatched = inner_->dispatchCall(interfaceId, methodId, context);
                 })) {
      dispatched = {kj::Promise<void>(kj::mv(*exception)), false};
    }
    if (ours && methods_[methodId].hasFailure) {
      dispatched.promise = dispatched.promise.catch_(
          [this, methodId, context](kj::Exception&& exception) mutable -> kj::Promise<void> {
            if (exception.getType() != kj::Exception::Type::UNIMPLEMENTED) return kj::mv(exception);
            failures::failedPrecondition(
                initFailure(methodId, context),
                methods_[methodId].name + " is not implemented by this process");
            return kj::READY_NOW;
          });
    }
    KJ_IF_MAYBE (term, term_) {
      dispatched.promise = (*term)->canceler.wrap(kj::mv(dispatched.promise));
    }
    return dispatched;
  }

 private:
  // The call's results, reset, with `failure` initialized.
  wire::Failure::Builder initFailure(
      uint16_t methodId, capnp::CallContext<capnp::AnyPointer, capnp::AnyPointer>& context) {
    auto method = schema_.getMethods()[methodId];
    auto results = context.getResults().initAs<capnp::DynamicStruct>(method.getResultType());
    return results.init("failure").as<capnp::DynamicStruct>().as<wire::Failure>();
  }

  bool admit(uint16_t methodId, uint64_t received,
             capnp::CallContext<capnp::AnyPointer, capnp::AnyPointer>& context) {
    const std::string& name = methods_[methodId].name;
    if (ended_) {
      context.releaseParams();
      refuseWithFencing(initFailure(methodId, context), name, received, 0,
                        std::string("but ") + ended_->getDescription().cStr());
      return false;
    }
    if (rule_->admits(received)) return true;
    context.releaseParams();
    rule_->refuse(name, received, initFailure(methodId, context));
    return false;
  }

  void answerNotReady(uint16_t methodId, uint64_t epoch,
                      capnp::CallContext<capnp::AnyPointer, capnp::AnyPointer>& context) {
    context.releaseParams();
    failures::unavailable(
        initFailure(methodId, context), kNotReadyRetryMs,
        "the leader of epoch " + std::to_string(epoch) + " is still recovering; retry shortly");
  }

  // A UInt64 field's value: little-endian in the data section; absent (an older, shorter
  // struct) reads as the default, 0.
  static uint64_t readEpoch(capnp::CallContext<capnp::AnyPointer, capnp::AnyPointer>& context,
                            uint32_t offset) {
    auto data = context.getParams().getAs<capnp::AnyStruct>().getDataSection();
    const size_t at = size_t{offset} * 8;
    if (data.size() < at + 8) return 0;
    uint64_t value = 0;
    for (size_t i = 0; i < 8; ++i) value |= uint64_t{data[at + i]} << (8 * i);
    return value;
  }

  capnp::InterfaceSchema schema_;
  const uint64_t interfaceId_;
  kj::Own<capnp::Capability::Server> inner_;
  kj::Own<EpochRule> rule_;
  FencingCounters& counters_;
  // By method id; shared by every endpoint of the interface (FencingCounters::methodTable).
  const std::vector<FencingCounters::MethodTable::Method>& methods_;
  // On the heap: null on every endpoint of a live term (thousands of them on a leader).
  const kj::Own<const kj::Exception> ended_;
  kj::Maybe<kj::Own<TermState>> term_;  // The term's, for serve()'s endpoints.
  const bool waitsForReady_;            // Readiness::kAfterMarkReady.
};

}  // namespace

// ---- LeadershipTerm ------------------------------------------------------------------------

// Lets every call through until revoked; then the membrane drops every capability crossing it
// and cancels calls in flight with the revocation exception, and new calls of the fenced
// interfaces go to a FencedEndpoint for the ended term (Cap'n Proto still asks inboundCall()
// after revocation; a redirect target sits outside the membrane).
class LeadershipTerm::RevocationPolicy final : public capnp::MembranePolicy, public kj::Refcounted {
 public:
  explicit RevocationPolicy(FencingCounters& counters) : counters_(counters) {
    auto paf = kj::newPromiseAndFulfiller<void>();
    revoked_ = paf.promise.fork();
    fulfiller_ = kj::mv(paf.fulfiller);
  }

  kj::Maybe<capnp::Capability::Client> inboundCall(uint64_t interfaceId, uint16_t,
                                                    capnp::Capability::Client) override {
    if (!isRevoked) return nullptr;
    auto found = fenced_.find(interfaceId);
    if (found == fenced_.end()) return nullptr;  // The target rethrows the revocation.
    auto& [schema, ended] = found->second;
    if (ended == nullptr) {
      ended = capnp::Capability::Client(kj::heap<FencedEndpoint>(
          schema, kj::Own<capnp::Capability::Server>(), kj::heap<ExactEpoch>(0), counters_,
          KJ_EXCEPTION(DISCONNECTED, message_)));
    }
    return KJ_ASSERT_NONNULL(ended);
  }
  // Calls out through the membrane (the ResourceManager calling the TaskExecutorGateway a worker
  // handed over in registerTaskExecutor) need no redirect; after revocation the target is broken
  // and they fail with the revocation exception: a term that is over calls no worker.
  kj::Maybe<capnp::Capability::Client> outboundCall(uint64_t, uint16_t,
                                                     capnp::Capability::Client) override {
    return nullptr;
  }
  kj::Own<capnp::MembranePolicy> addRef() override { return kj::addRef(*this); }
  kj::Maybe<kj::Promise<void>> onRevoked() override { return revoked_.addBranch(); }
  // Redirect at once: after revocation the target is a broken capability, and waiting for it to
  // resolve would fail the call with the revocation exception instead of redirecting it.
  bool shouldResolveBeforeRedirecting() override { return false; }

  void revoke(const std::string& message) {
    if (isRevoked) return;
    isRevoked = true;
    message_ = message;
    fulfiller_->reject(KJ_EXCEPTION(DISCONNECTED, message));
  }

  void fence(capnp::InterfaceSchema schema) {
    fenced_.try_emplace(schema.getProto().getId(), schema, nullptr);
  }

  bool isRevoked = false;

 private:
  FencingCounters& counters_;
  std::string message_;
  // By interface id: the schema, and the ended term's endpoint once a call needed it.
  std::map<uint64_t, std::pair<capnp::InterfaceSchema, kj::Maybe<capnp::Capability::Client>>>
      fenced_;
  kj::ForkedPromise<void> revoked_ = nullptr;
  kj::Own<kj::PromiseFulfiller<void>> fulfiller_;
};

LeadershipTerm::LeadershipTerm(uint64_t epoch, FencingCounters& counters)
    : epoch_(epoch),
      counters_(counters),
      policy_(kj::refcounted<RevocationPolicy>(counters)),
      state_(kj::refcounted<TermState>(epoch)) {}

LeadershipTerm::~LeadershipTerm() noexcept { revoke("leadership term ended"); }

void LeadershipTerm::revoke(const std::string& reason) {
  if (policy_->isRevoked) return;
  const std::string message = "the leadership term of epoch " + std::to_string(epoch_) +
                              " is over (" + reason + "); resolve the current leader and call again";
  policy_->revoke(message);
  state_->canceler.cancel(message);
}

bool LeadershipTerm::revoked() const { return policy_->isRevoked; }

void LeadershipTerm::markReady() { state_->ready = true; }

bool LeadershipTerm::ready() const { return state_->ready; }

kj::Own<capnp::MembranePolicy> LeadershipTerm::policy() { return policy_->addRef(); }

void LeadershipTerm::fenceAfterRevocation(capnp::InterfaceSchema schema) { policy_->fence(schema); }

capnp::Capability::Client LeadershipTerm::fencedForTerm(capnp::InterfaceSchema schema,
                                                        kj::Own<capnp::Capability::Server> inner,
                                                        Readiness readiness) {
  return capnp::Capability::Client(kj::heap<FencedEndpoint>(
      schema, kj::mv(inner), kj::heap<ExactEpoch>(epoch_), counters_, nullptr,
      kj::addRef(*state_), readiness == Readiness::kAfterMarkReady));
}

capnp::Capability::Client fencedEndpoint(capnp::InterfaceSchema schema,
                                         kj::Own<capnp::Capability::Server> inner,
                                         kj::Own<EpochRule> rule, FencingCounters& counters) {
  return capnp::Capability::Client(
      kj::heap<FencedEndpoint>(schema, kj::mv(inner), kj::mv(rule), counters));
}

}  // namespace regent::rpc

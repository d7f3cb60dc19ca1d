// The fenced-endpoint wrapper (epoch check by reflection over the gateway's schema) and the
// leadership term's revocation membrane.
#include "rpc/fenced_endpoint.h"

#include <capnp/any.h>
#include <capnp/dynamic.h>
#include <capnp/membrane.h>
#include <kj/async.h>
#include <kj/debug.h>
#include <kj/refcount.h>

#include <optional>
#include <utility>
#include <vector>

namespace regent::rpc {

uint64_t FencingCounters::called(const std::string& method) const {
  auto found = called_.find(method);
  return found == called_.end() ? 0 : found->second;
}

uint64_t FencingCounters::rejected(const std::string& method) const {
  auto found = rejected_.find(method);
  return found == rejected_.end() ? 0 : found->second;
}

// ---- FencedEndpoint ------------------------------------------------------------------------

// The handlers running in a term's gateways, dropped together when the term is revoked. Shared
// by the term and its endpoints (which outlive it).
class TermHandlers final : public kj::Refcounted {
 public:
  kj::Canceler canceler;
};

namespace {

// Serves `schema`'s interface for one epoch: calls with another epoch are refused. Without an
// `inner` server it stands for a term that is over (`ended` says which and why): every call with
// an epoch is refused with expected = 0, and every other call fails with `ended`.
class FencedEndpoint final : public capnp::Capability::Server {
 public:
  FencedEndpoint(capnp::InterfaceSchema schema, kj::Own<capnp::Capability::Server> inner,
                 uint64_t epoch, FencingCounters& counters,
                 kj::Maybe<kj::Exception> ended = nullptr,
                 kj::Maybe<kj::Own<TermHandlers>> handlers = nullptr)
      : schema_(schema),
        interfaceId_(schema.getProto().getId()),
        inner_(kj::mv(inner)),
        epoch_(epoch),
        counters_(counters),
        ended_(kj::mv(ended)),
        handlers_(kj::mv(handlers)) {
    // Where each method's `epoch` sits in its parameters' data section, found once: a call then
    // reads 8 bytes instead of walking the schema.
    for (auto method : schema.getMethods()) {
      std::optional<uint32_t> offset;
      KJ_IF_MAYBE (field, method.getParamType().findFieldByName("epoch")) {
        auto proto = field->getProto();
        if (proto.isSlot() && proto.getSlot().getType().isUint64()) {
          offset = proto.getSlot().getOffset();  // In units of 8 bytes.
        }
      }
      epochOffsets_.push_back(offset);
      methodNames_.push_back(std::string(schema.getShortDisplayName().cStr()) + "." +
                             method.getProto().getName().cStr());
      callCounts_.push_back(&counters_.callSlot(methodNames_.back()));
    }
  }

  DispatchCallResult dispatchCall(uint64_t interfaceId, uint16_t methodId,
                                  capnp::CallContext<capnp::AnyPointer, capnp::AnyPointer> context)
      override {
    if (interfaceId == interfaceId_ && methodId < epochOffsets_.size()) {
      ++*callCounts_[methodId];
      if (const auto& offset = epochOffsets_[methodId]) {
        const uint64_t received = readEpoch(context, *offset);
        if (ended_ != nullptr || received != epoch_) {
          refuse(methodId, received, context);
          return {kj::READY_NOW, false};
        }
      }
    }
    KJ_IF_MAYBE (ended, ended_) kj::throwFatalException(kj::cp(*ended));
    auto dispatched = inner_->dispatchCall(interfaceId, methodId, context);
    KJ_IF_MAYBE (handlers, handlers_) {
      dispatched.promise = (*handlers)->canceler.wrap(kj::mv(dispatched.promise));
    }
    return dispatched;
  }

 private:
  void refuse(uint16_t methodId, uint64_t received,
              capnp::CallContext<capnp::AnyPointer, capnp::AnyPointer>& context) {
    auto method = schema_.getMethods()[methodId];
    const std::string& name = methodNames_[methodId];
    counters_.reject(name);
    context.releaseParams();
    auto results = context.getResults().initAs<capnp::DynamicStruct>(method.getResultType());
    auto failure = results.init("failure").as<capnp::DynamicStruct>();
    std::string message = name + " refused: called with epoch " + std::to_string(received);
    KJ_IF_MAYBE (ended, ended_) {
      message += ", but " + std::string(ended->getDescription().cStr());
    } else {
      message += ", this master serves epoch " + std::to_string(epoch_);
    }
    failure.set("message", capnp::Text::Reader(message.c_str()));
    auto fencing = failure.init("fencing").as<capnp::DynamicStruct>();
    fencing.set("expected", ended_ == nullptr ? epoch_ : uint64_t{0});
    fencing.set("received", received);
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
  std::vector<std::optional<uint32_t>> epochOffsets_;  // By method id.
  std::vector<std::string> methodNames_;                // By method id: "Interface.method".
  std::vector<uint64_t*> callCounts_;                   // By method id, in counters_.
  kj::Own<capnp::Capability::Server> inner_;
  const uint64_t epoch_;
  FencingCounters& counters_;
  const kj::Maybe<kj::Exception> ended_;
  kj::Maybe<kj::Own<TermHandlers>> handlers_;  // The term's, for serve()'s endpoints.
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
          schema, kj::Own<capnp::Capability::Server>(), uint64_t{0}, counters_,
          KJ_EXCEPTION(DISCONNECTED, message_)));
    }
    return KJ_ASSERT_NONNULL(ended);
  }
  // Nothing inside a term's membrane calls out through it (gateways hand out capabilities, they
  // do not receive any), so outbound calls need no redirect; after revocation the target is
  // broken and they fail with the revocation exception.
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
      handlers_(kj::refcounted<TermHandlers>()) {}

LeadershipTerm::~LeadershipTerm() noexcept { revoke("leadership term ended"); }

void LeadershipTerm::revoke(const std::string& reason) {
  if (policy_->isRevoked) return;
  const std::string message = "the leadership term of epoch " + std::to_string(epoch_) +
                              " is over (" + reason + "); resolve the current leader and call again";
  policy_->revoke(message);
  handlers_->canceler.cancel(message);
}

bool LeadershipTerm::revoked() const { return policy_->isRevoked; }

kj::Own<capnp::MembranePolicy> LeadershipTerm::policy() { return policy_->addRef(); }

void LeadershipTerm::fenceAfterRevocation(capnp::InterfaceSchema schema) { policy_->fence(schema); }

capnp::Capability::Client LeadershipTerm::fencedForTerm(capnp::InterfaceSchema schema,
                                                        kj::Own<capnp::Capability::Server> inner) {
  return capnp::Capability::Client(kj::heap<FencedEndpoint>(
      schema, kj::mv(inner), epoch_, counters_, nullptr, kj::addRef(*handlers_)));
}


capnp::Capability::Client fencedEndpoint(capnp::InterfaceSchema schema,
                                         kj::Own<capnp::Capability::Server> inner, uint64_t epoch,
                                         FencingCounters& counters) {
  return capnp::Capability::Client(
      kj::heap<FencedEndpoint>(schema, kj::mv(inner), epoch, counters));
}

}  // namespace regent::rpc

// Internal to rpc/: the two-party VatNetwork of every RPC connection (RpcServer, RpcClient), in
// place of capnp::TwoPartyVatNetwork, over the connection's AbortWatchingMessageStream. It
// differs in what an outgoing message costs:
//   - a message whose caller gave no size hint starts with a first segment of
//     kFirstSegmentWords (512 bytes) and grows as it is built, where Cap'n Proto's starts every
//     such message at 8 KiB;
//   - send() hands the message to the stream at once (the stream copies it into its write queue)
//     and keeps nothing, where Cap'n Proto's keeps each message until the previous one's write
//     has completed, so that a burst of calls (a heartbeat round to thousands of workers) held
//     every message at once.
// Everything else is what the two-party protocol asks: one connection, accepted once by the
// server side; the peer's VatId is the other side; the owner hears once the RPC system dropped
// the connection; a failed write fails the reads too; shutdown() waits for the queue to be
// written and then shuts the write side.
//
// A connection that waits for nothing holds no promise of its own here: an idle leader keeps
// thousands of these, and each pending kj promise node costs about 450 bytes (its result slot
// has room for a whole kj::Exception).
#pragma once

#include <capnp/rpc-twoparty.h>
#include <kj/async.h>

#include "rpc/abort_watching_stream.h"

namespace regent::rpc {

class LeanVatNetwork final : public capnp::TwoPartyVatNetworkBase,
                             private capnp::TwoPartyVatNetworkBase::Connection,
                             private kj::TaskSet::ErrorHandler {
 public:
  static constexpr uint kFirstSegmentWords = 64;

  // Told once that the RPC system dropped the connection (the peer went, or it gave up on it).
  // Called from inside the RPC system, while it lets go of its last reference: it must not
  // throw, and must not destroy the RpcSystem or this network before returning (defer that).
  class DisconnectHandler {
   public:
    virtual void rpcSystemDisconnected() noexcept = 0;

   protected:
    ~DisconnectHandler() = default;
  };

  // `stream` must outlive the network and every message the RPC system keeps; `handler` must
  // outlive the network.
  LeanVatNetwork(AbortWatchingMessageStream& stream, capnp::rpc::twoparty::Side side,
                 capnp::ReaderOptions receiveOptions, DisconnectHandler& handler);
  ~LeanVatNetwork() noexcept;
  KJ_DISALLOW_COPY(LeanVatNetwork);

  // VatNetwork.
  kj::Maybe<kj::Own<capnp::TwoPartyVatNetworkBase::Connection>> connect(
      capnp::rpc::twoparty::VatId::Reader ref) override;
  kj::Promise<kj::Own<capnp::TwoPartyVatNetworkBase::Connection>> accept() override;

 private:
  class Outgoing;
  class Incoming;
  // Counts the connection's references the RPC system holds; the last one gone disconnects.
  class Disposer final : public kj::Disposer {
   public:
    explicit Disposer(DisconnectHandler& handler) : handler(handler) {}
    DisconnectHandler& handler;
    mutable uint references = 0;
    void disposeImpl(void*) const override;
  };

  kj::Own<capnp::TwoPartyVatNetworkBase::Connection> asConnection();
  // Hands `segments` to the stream; a failure fails the reads as well.
  void write(kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments);
  void taskFailed(kj::Exception&& exception) override;

  // Connection.
  capnp::rpc::twoparty::VatId::Reader getPeerVatId() override;
  kj::Own<capnp::OutgoingRpcMessage> newOutgoingMessage(uint firstSegmentWordSize) override;
  kj::Promise<kj::Maybe<kj::Own<capnp::IncomingRpcMessage>>> receiveIncomingMessage() override;
  kj::Promise<void> shutdown() override;

  AbortWatchingMessageStream& stream_;
  const capnp::rpc::twoparty::Side side_;
  const capnp::ReaderOptions receiveOptions_;
  capnp::MallocMessageBuilder peerVatId_{8};
  bool accepted_ = false;
  kj::Own<kj::Exception> writeError_;  // On the heap: null on every healthy connection.
  Disposer disposer_;
  kj::TaskSet writes_{*this};
};

}  // namespace regent::rpc

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
// server side; the peer's VatId is the other side; onDisconnect() resolves once the RPC system
// dropped the connection; a failed write fails the reads too; shutdown() waits for the queue to
// be written and then shuts the write side.
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

  // `stream` must outlive the network and every message the RPC system keeps.
  LeanVatNetwork(AbortWatchingMessageStream& stream, capnp::rpc::twoparty::Side side,
                 capnp::ReaderOptions receiveOptions);
  ~LeanVatNetwork() noexcept;
  KJ_DISALLOW_COPY(LeanVatNetwork);

  // Resolves once the RPC system dropped the connection (the peer went, or it gave up on it).
  kj::Promise<void> onDisconnect() { return disconnected_.addBranch(); }

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
    mutable kj::Own<kj::PromiseFulfiller<void>> fulfiller;
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
  kj::Maybe<kj::Exception> writeError_;
  kj::Canceler reads_;
  Disposer disposer_;
  kj::ForkedPromise<void> disconnected_ = nullptr;
  // A server's accept() after the first: never resolves (one connection only).
  kj::Own<kj::PromiseFulfiller<kj::Own<capnp::TwoPartyVatNetworkBase::Connection>>> neverAccepted_;
  kj::TaskSet writes_{*this};
};

}  // namespace regent::rpc

// LeanVatNetwork (see lean_vat_network.h).
#include "rpc/lean_vat_network.h"

#include <kj/debug.h>

#include "common/units.h"

namespace regent::rpc {

class LeanVatNetwork::Outgoing final : public capnp::OutgoingRpcMessage, public kj::Refcounted {
 public:
  Outgoing(LeanVatNetwork& network, uint firstSegmentWords)
      : network_(network), message_(firstSegmentWords) {}

  capnp::AnyPointer::Builder getBody() override { return message_.getRoot<capnp::AnyPointer>(); }

  void send() override {
    const size_t words = sizeInWords();
    // The peer's reader would refuse it and end the connection: the call fails here instead,
    // and the connection stays up.
    const uint64_t limit = network_.receiveOptions_.traversalLimitInWords;
    if (words >= limit) {
      kj::throwFatalException(KJ_EXCEPTION(
          FAILED, kj::str("message of ", formatSize(uint64_t{words} * 8).c_str(),
                          " larger than rpc.max-message-size (", formatSize(limit * 8).c_str(),
                          "): not sent")));
    }
    network_.write(message_.getSegmentsForOutput());
  }

  size_t sizeInWords() override { return message_.sizeInWords(); }

 private:
  LeanVatNetwork& network_;
  capnp::MallocMessageBuilder message_;
};

class LeanVatNetwork::Incoming final : public capnp::IncomingRpcMessage {
 public:
  explicit Incoming(kj::Own<capnp::MessageReader> reader) : reader_(kj::mv(reader)) {}
  capnp::AnyPointer::Reader getBody() override { return reader_->getRoot<capnp::AnyPointer>(); }
  size_t sizeInWords() override { return reader_->sizeInWords(); }

 private:
  kj::Own<capnp::MessageReader> reader_;
};

LeanVatNetwork::LeanVatNetwork(AbortWatchingMessageStream& stream,
                               capnp::rpc::twoparty::Side side,
                               capnp::ReaderOptions receiveOptions,
                               DisconnectHandler& handler)
    : stream_(stream), side_(side), receiveOptions_(receiveOptions), disposer_(handler) {
  peerVatId_.initRoot<capnp::rpc::twoparty::VatId>().setSide(
      side == capnp::rpc::twoparty::Side::CLIENT ? capnp::rpc::twoparty::Side::SERVER
                                                 : capnp::rpc::twoparty::Side::CLIENT);
}

LeanVatNetwork::~LeanVatNetwork() noexcept = default;

void LeanVatNetwork::Disposer::disposeImpl(void*) const {
  if (--references == 0) handler.rpcSystemDisconnected();
}

kj::Own<capnp::TwoPartyVatNetworkBase::Connection> LeanVatNetwork::asConnection() {
  ++disposer_.references;
  return kj::Own<capnp::TwoPartyVatNetworkBase::Connection>(this, disposer_);
}

kj::Maybe<kj::Own<capnp::TwoPartyVatNetworkBase::Connection>> LeanVatNetwork::connect(
    capnp::rpc::twoparty::VatId::Reader ref) {
  if (ref.getSide() == side_) return nullptr;  // This side itself.
  return asConnection();
}

kj::Promise<kj::Own<capnp::TwoPartyVatNetworkBase::Connection>> LeanVatNetwork::accept() {
  if (side_ == capnp::rpc::twoparty::Side::SERVER && !accepted_) {
    accepted_ = true;
    return asConnection();
  }
  return kj::NEVER_DONE;  // One connection only.
}

capnp::rpc::twoparty::VatId::Reader LeanVatNetwork::getPeerVatId() {
  return peerVatId_.getRoot<capnp::rpc::twoparty::VatId>().asReader();
}

kj::Own<capnp::OutgoingRpcMessage> LeanVatNetwork::newOutgoingMessage(uint firstSegmentWordSize) {
  return kj::refcounted<Outgoing>(
      *this, firstSegmentWordSize == 0 ? kFirstSegmentWords : firstSegmentWordSize);
}

void LeanVatNetwork::write(kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments) {
  // After a failed write nothing more goes out; the reads already ended with its error.
  if (writeError_) return;
  // The stream copies the message into its queue before it returns: nothing here outlives it.
  writes_.add(stream_.writeMessage(nullptr, segments));
}

void LeanVatNetwork::taskFailed(kj::Exception&& exception) {
  if (writeError_) return;
  // The reads end with the write's error: the RPC system learns the connection is gone even
  // while the peer sends nothing. Aborting the stream's reads wakes a read that waits (it ends
  // early); receiveIncomingMessage() turns that end into this error.
  writeError_ = kj::heap(kj::mv(exception));
  stream_.abortReads();
}

kj::Promise<kj::Maybe<kj::Own<capnp::IncomingRpcMessage>>> LeanVatNetwork::receiveIncomingMessage() {
  if (writeError_) return kj::cp(*writeError_);
  // A failed write aborts the stream's reads (taskFailed): whatever the read then returns, the
  // end it reports is the write's error.
  return stream_.tryReadMessage(nullptr, receiveOptions_, nullptr)
      .then(
          [this](kj::Maybe<capnp::MessageReaderAndFds>&& read)
              -> kj::Maybe<kj::Own<capnp::IncomingRpcMessage>> {
            if (writeError_) kj::throwFatalException(kj::cp(*writeError_));
            KJ_IF_MAYBE (message, read) {
              return kj::Own<capnp::IncomingRpcMessage>(kj::heap<Incoming>(kj::mv(message->reader)));
            }
            return nullptr;  // The peer ended the stream.
          },
          [this](kj::Exception&& exception) -> kj::Maybe<kj::Own<capnp::IncomingRpcMessage>> {
            kj::throwFatalException(writeError_ ? kj::cp(*writeError_) : kj::mv(exception));
          });
}

kj::Promise<void> LeanVatNetwork::shutdown() {
  if (writeError_) return kj::cp(*writeError_);
  return stream_.end();
}

}  // namespace regent::rpc

// Fuzz target: an RPC connection's message framing and size cap. The bytes a peer sends go
// through the connection's message stream (rpc/abort_watching_stream.h) over an in-memory pipe,
// read with a ReaderOptions traversal limit as the transport reads them (rpc.max-message-size),
// until the stream ends or refuses a frame; each message's root is traversed as an RPC Message,
// as the RPC system does.
//
// Input: one byte choosing the limit (2^(byte % 14) words: 8 bytes to 64 KiB, so small inputs
// reach the cap), then the bytes as the peer sends them.
#include <capnp/any.h>
#include <capnp/rpc.capnp.h>
#include <capnp/serialize-async.h>
#include <kj/async-io.h>
#include <kj/async.h>
#include <kj/exception.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "rpc/abort_watching_stream.h"

namespace {

// A read message never exceeds the limit it was read under.
void checkWithinLimit(capnp::MessageReader& reader, uint64_t limitWords) {
  uint64_t words = 0;
  for (unsigned segment = 0;; ++segment) {
    const auto bytes = reader.getSegment(segment);
    if (bytes.size() == 0) break;
    words += bytes.size();
  }
  if (words > limitWords) std::abort();
}

// What the RPC system reads of every message: its kind, and the content it carries.
void traverse(capnp::MessageReader& reader) {
  (void)kj::runCatchingExceptions([&] {
    (void)reader.getRoot<capnp::AnyPointer>().targetSize();
    auto message = reader.getRoot<capnp::rpc::Message>();
    switch (message.which()) {
      case capnp::rpc::Message::CALL:
        (void)message.getCall().getParams().getContent().targetSize();
        break;
      case capnp::rpc::Message::RETURN:
        if (message.getReturn().isResults()) {
          (void)message.getReturn().getResults().getContent().targetSize();
        }
        break;
      case capnp::rpc::Message::ABORT:
        (void)message.getAbort().getReason();
        break;
      default:
        break;
    }
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  capnp::ReaderOptions options;
  options.traversalLimitInWords = uint64_t{1} << (data[0] % 14);
  const kj::ArrayPtr<const kj::byte> sent(data + 1, size - 1);

  kj::EventLoop loop;
  kj::WaitScope waitScope(loop);
  auto pipe = kj::newTwoWayPipe();
  regent::rpc::AbortWatchingMessageStream stream(*pipe.ends[1]);
  kj::AsyncIoStream& peer = *pipe.ends[0];
  auto sending = peer.write(sent.begin(), sent.size())
                     .then([&peer] { peer.shutdownWrite(); })
                     .eagerlyEvaluate([](kj::Exception&&) {});

  for (;;) {
    kj::Maybe<capnp::MessageReaderAndFds> message;
    KJ_IF_MAYBE (failure, kj::runCatchingExceptions([&] {
                   message = stream.tryReadMessage(nullptr, options, nullptr).wait(waitScope);
                 })) {
      // The stream remembers why it ended, for the connection's log line.
      if (!stream.readError()) std::abort();
      (void)regent::rpc::explainAbort(*stream.readError(), options.traversalLimitInWords * 8);
      break;
    }
    KJ_IF_MAYBE (m, message) {
      checkWithinLimit(*m->reader, options.traversalLimitInWords);
      traverse(*m->reader);
    } else {
      break;  // The peer ended the stream between messages.
    }
  }
  if (stream.receivedAbort()) (void)regent::rpc::explainAbort(*stream.receivedAbort(), std::nullopt);
  return 0;
}

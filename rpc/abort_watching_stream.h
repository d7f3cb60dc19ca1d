// Internal to rpc/: a MessageStream over a socket that remembers why its connection ended, so
// the transport can log one line naming the reason (Cap'n Proto itself reports it only to the
// peer, in an Abort message).
#pragma once

#include <capnp/serialize-async.h>
#include <kj/async-io.h>
#include <kj/exception.h>

#include <cstdint>
#include <optional>
#include <string>

namespace regent::rpc {

struct AbortReason {
  kj::Exception::Type type = kj::Exception::Type::FAILED;
  std::string reason;
};

// Passes every message through unchanged and peeks at each one's root to spot Abort messages,
// sent (this side's RPC system gives up on the connection: malformed or oversized input, a
// protocol error, the peer gone) or received (the peer gave up on us). Loop-thread only;
// `stream` must outlive it.
class AbortWatchingMessageStream final : public capnp::MessageStream {
 public:
  explicit AbortWatchingMessageStream(kj::AsyncIoStream& stream);

  // The first Abort this side sent, if any.
  const std::optional<AbortReason>& sentAbort() const { return sent_; }
  // The first Abort the peer sent, if any.
  const std::optional<AbortReason>& receivedAbort() const { return received_; }
  // The first error reading the next message (oversized or malformed frame, reset, early EOF).
  const std::optional<AbortReason>& readError() const { return readError_; }

  kj::Promise<kj::Maybe<capnp::MessageReaderAndFds>> tryReadMessage(
      kj::ArrayPtr<kj::AutoCloseFd> fdSpace, capnp::ReaderOptions options,
      kj::ArrayPtr<capnp::word> scratchSpace) override;
  kj::Promise<void> writeMessage(
      kj::ArrayPtr<const int> fds,
      kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments) override;
  kj::Promise<void> writeMessages(
      kj::ArrayPtr<kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>>> messages) override;
  kj::Maybe<int> getSendBufferSize() override;
  kj::Promise<void> end() override;

 private:
  void noteOutgoing(kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments);

  capnp::AsyncIoMessageStream inner_;
  std::optional<AbortReason> sent_;
  std::optional<AbortReason> received_;
  std::optional<AbortReason> readError_;
};

// One human-readable reason, naming the option when it is about the size limit: "message larger
// than rpc.max-message-size (16MiB)" for this side's limit (`ownLimit`), "message larger than the
// peer's rpc.max-message-size" for an Abort received; else the first line of Cap'n Proto's
// description ("invalid message: Message has too many segments." for input it rejected).
std::string explainAbort(const AbortReason& abort, std::optional<uint64_t> ownLimit);

// "127.0.0.1:40312" / "[::1]:40312" for a socket's peer; "unknown peer" if it has none.
std::string peerAddressOf(kj::AsyncIoStream& stream);

}  // namespace regent::rpc

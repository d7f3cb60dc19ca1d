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

// Serves reads from one buffer refilled with whatever the socket holds (up to 64 KiB), so a
// burst of messages costs one read() rather than two per message (Cap'n Proto reads a frame's
// segment table and its body separately). Writes and socket options pass through. `inner` must
// outlive it.
class ReadBufferedStream final : public kj::AsyncIoStream {
 public:
  explicit ReadBufferedStream(kj::AsyncIoStream& inner);

  kj::Promise<size_t> tryRead(void* buffer, size_t minBytes, size_t maxBytes) override;
  kj::Promise<void> write(const void* buffer, size_t size) override;
  kj::Promise<void> write(kj::ArrayPtr<const kj::ArrayPtr<const kj::byte>> pieces) override;
  kj::Promise<void> whenWriteDisconnected() override;
  void shutdownWrite() override;
  void abortRead() override;
  void getsockopt(int level, int option, void* value, uint* length) override;
  void setsockopt(int level, int option, const void* value, uint length) override;
  void getsockname(struct sockaddr* addr, uint* length) override;
  void getpeername(struct sockaddr* addr, uint* length) override;

 private:
  // The buffer is empty: reads at least `minBytes` (unless the stream ends) into `out`.
  kj::Promise<size_t> refill(kj::byte* out, size_t minBytes, size_t maxBytes);

  kj::AsyncIoStream& inner_;
  kj::Array<kj::byte> buffer_;
  size_t begin_ = 0;
  size_t end_ = 0;
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

  ReadBufferedStream buffered_;
  capnp::AsyncIoMessageStream inner_;  // Over buffered_.
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

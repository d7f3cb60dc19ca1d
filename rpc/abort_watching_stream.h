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
#include <vector>

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

// The message stream of one RPC connection. Passes every message through unchanged and peeks at
// each one's root to spot Abort messages, sent (this side's RPC system gives up on the
// connection: malformed or oversized input, a protocol error, the peer gone) or received (the
// peer gave up on us).
//
// Writes are coalesced: writeMessage() frames the message into a queue and returns at once
// while fewer than 64 KiB wait; the queue goes to the socket in one write() once the loop has
// nothing else to run (kj::evalLast), so the answers to a burst of calls leave in one syscall,
// or at once when 8 KiB are waiting, so the peer works on one batch while this side makes the
// next. Past 64 KiB waiting, writeMessage() resolves only when its own message has been handed
// to the socket (backpressure for the RPC system). A failed write fails every later
// writeMessage() with the same error; the read side reports the connection's end. end() waits
// for the queue to drain, then shuts down the write side. Loop-thread only; `stream` must
// outlive it.
class AbortWatchingMessageStream final : public capnp::MessageStream {
 public:
  explicit AbortWatchingMessageStream(kj::AsyncIoStream& stream);
  ~AbortWatchingMessageStream() noexcept;

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
  // Frames `segments` (segment table, then the segments) at the end of pending_.
  void enqueue(kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments);
  // After enqueueing: schedules a flush, and says when the caller may write again.
  kj::Promise<void> afterEnqueue();
  void startFlushing();
  // Resolves once every byte enqueued so far was handed to the socket (or the writes failed).
  kj::Promise<void> whenWritten(uint64_t upTo);
  kj::Promise<void> flush();
  void settle();

  ReadBufferedStream buffered_;
  capnp::AsyncIoMessageStream inner_;  // Reads, over buffered_.
  std::vector<kj::byte> pending_;      // Framed messages not yet given to the socket.
  std::vector<kj::byte> writing_;      // The bytes of the write() in progress.
  uint64_t enqueued_ = 0;              // Bytes enqueued since the start.
  uint64_t written_ = 0;               // Of those, bytes the socket accepted.
  // kScheduled: a flush waits for the loop to be idle (kj::evalLast); kWriting: a write() runs.
  enum class FlushState { kIdle, kScheduled, kWriting };
  FlushState flush_ = FlushState::kIdle;
  kj::Maybe<kj::Exception> writeError_;
  struct Waiter {
    uint64_t upTo;
    kj::Own<kj::PromiseFulfiller<void>> fulfiller;
  };
  std::vector<Waiter> waiters_;
  kj::Promise<void> flusher_ = nullptr;
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

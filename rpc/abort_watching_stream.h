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

// Serves reads from one buffer refilled with whatever the socket holds, so a burst of messages
// costs one read() rather than two per message (Cap'n Proto reads a frame's segment table and its
// body separately). While the connection is quiet the buffer is kInlineBuffer bytes inside this
// object (a heartbeat is a few hundred bytes: thousands of idle connections hold no buffer of
// their own); a read that fills it doubles it, on the heap, up to kLargeBuffer (a burst gets what
// it needs, not the most), and after a refill that the inline buffer would have held it is the
// inline one again (a burst is over: the connection may now wait for minutes, and a leader holds
// thousands of them). Writes and socket options pass through. `inner` must outlive it.
class ReadBufferedStream final : public kj::AsyncIoStream {
 public:
  explicit ReadBufferedStream(kj::AsyncIoStream& inner);
  ReadBufferedStream(const ReadBufferedStream&) = delete;  // buffer_ may point into it.
  ReadBufferedStream& operator=(const ReadBufferedStream&) = delete;

  // Resolves once at least `bytes` (at most 64 KiB) are buffered, or the stream ended with
  // fewer: the bytes buffered, which later reads still return (nothing is consumed).
  kj::Promise<kj::ArrayPtr<const kj::byte>> peek(size_t bytes);
  // Bytes read from the socket so far, and of those, bytes buffered that no read took yet.
  uint64_t bytesReceived() const { return received_; }
  size_t bytesBuffered() const { return end_ - begin_; }
  // The buffer's size now: kInlineBuffer, or a power of two up to kLargeBuffer.
  size_t bufferCapacity() const { return buffer_.size(); }
  // Whether the buffer is the inline one (nothing of its own on the heap).
  bool bufferInline() const { return heap_ == nullptr; }

  static constexpr size_t kInlineBuffer = 512;
  static constexpr size_t kLargeBuffer = 64 * 1024;

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
  // Replaces the buffer by one of `size` bytes (the inline one when `size` is kInlineBuffer),
  // keeping what it holds (which must fit).
  void resize(size_t size);
  // After a read of `got` bytes into the buffer: doubles it when the read filled it, makes it the
  // inline one when the inline one would have held the read.
  void adapt(size_t got);

  kj::AsyncIoStream& inner_;
  kj::Array<kj::byte> heap_;   // The buffer while it is larger than the inline one.
  kj::ArrayPtr<kj::byte> buffer_;  // heap_, or inline_.
  kj::byte inline_[kInlineBuffer];
  size_t begin_ = 0;
  size_t end_ = 0;
  uint64_t received_ = 0;
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
//
// Reads can be held to a smaller limit than the ReaderOptions Cap'n Proto passes in (a
// connection that has not authenticated, see RpcServer): while setPreAuthenticationLimit() holds
// one, the stream reads each frame's segment table first and refuses a message whose segments
// add up to more than the limit before reading its body, so a peer that announces a large
// message and stalls pins at most the 64 KiB read buffer. The refusal fails the read with FAILED,
// "message larger than rpc.pre-auth-max-message-size (64KiB) before authentication", which Cap'n
// Proto sends the peer in its Abort. The limit in force when a frame's segment table arrives is
// the one applied, so lifting it while a read waits admits the next message.
class AbortWatchingMessageStream final : public capnp::MessageStream,
                                         private kj::TaskSet::ErrorHandler {
 public:
  explicit AbortWatchingMessageStream(kj::AsyncIoStream& stream);
  ~AbortWatchingMessageStream() noexcept;

  // The first Abort this side sent, if any.
  const std::optional<AbortReason>& sentAbort() const { return sent_; }
  // The first Abort the peer sent, if any.
  const std::optional<AbortReason>& receivedAbort() const { return received_; }
  // The first error reading the next message (oversized or malformed frame, reset, early EOF).
  const std::optional<AbortReason>& readError() const { return readError_; }

  // Queues an Abort message (type DISCONNECTED, `reason`) behind what is queued and starts
  // writing at once, for a connection this side is about to close without its RPC system
  // (which would otherwise tell the peer nothing). Best effort: kj writes to a socket at once,
  // so unless earlier writes are still pending, the Abort is in the kernel when this returns.
  void sendAbort(const std::string& reason);

  // Ends the reads early: a read waiting on the socket returns (the end of the stream, or an
  // error), and so do later ones. For a connection whose writes failed: the socket's read side
  // may stay open (a peer that stopped reading), and the RPC system learns of the end only
  // through a read.
  void abortReads();

  // Holds reads to `bytes` per message (see above), or lifts that limit (nullopt).
  void setPreAuthenticationLimit(std::optional<uint64_t> bytes) { preAuthLimit_ = bytes; }
  // Whether a read was refused for exceeding that limit.
  bool refusedBeforeAuthentication() const { return refusedBeforeAuthentication_; }

  // Bytes that crossed the socket so far, either way (what RpcServer's idle deadline watches).
  uint64_t bytesTransferred() const { return buffered_.bytesReceived() + written_; }
  // Messages read whole so far.
  uint64_t messagesRead() const { return messagesRead_; }
  // Bytes the write queue holds on the heap, used or not: none once it is written and quiet.
  size_t writeQueueCapacity() const { return pending_.capacity() + writing_.capacity(); }
  // Whether bytes of a message that has not arrived whole are held (RpcServer's message
  // deadline): some arrived since the last whole message.
  bool partialMessageHeld() const { return buffered_.bytesReceived() > consumedByMessages_; }

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
  // Resolves once the next frame's segment table is buffered and within the pre-authentication
  // limit (or the limit is lifted, or the stream ends first); fails when it is over the limit.
  kj::Promise<void> admitNextFrame();
  void noteOutgoing(kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments);
  // Frames `segments` (segment table, then the segments) at the end of pending_.
  void enqueue(kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments);
  // After enqueueing: schedules a flush, and says when the caller may write again.
  kj::Promise<void> afterEnqueue();
  // `now`: write at once rather than once the loop is idle.
  void startFlushing(bool now = false);
  // A flush once the loop is idle, unless one that writes at once supersedes it first.
  kj::Promise<void> scheduleFlush();
  // A flush failed: the writes have.
  void taskFailed(kj::Exception&& exception) override;
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
  uint64_t flushGeneration_ = 0;  // Bumped by each flush started at once.
  kj::Own<kj::Exception> writeError_;  // On the heap: null on every healthy connection.
  struct Waiter {
    uint64_t upTo;
    kj::Own<kj::PromiseFulfiller<void>> fulfiller;
  };
  std::vector<Waiter> waiters_;
  // The flushes running or scheduled; a finished one keeps nothing.
  kj::TaskSet flushes_;
  std::optional<AbortReason> sent_;
  std::optional<AbortReason> received_;
  std::optional<AbortReason> readError_;
  std::optional<uint64_t> preAuthLimit_;
  bool refusedBeforeAuthentication_ = false;
  uint64_t messagesRead_ = 0;
  uint64_t consumedByMessages_ = 0;  // Bytes received up to the end of the last whole message.
};

// One human-readable reason, naming the option when it is about a size limit: "message larger
// than rpc.max-message-size (16MiB)" for this side's limit (`ownLimit`), "message larger than the
// peer's rpc.max-message-size" for an Abort received, the pre-authentication refusal as it reads
// (either side); else the first line of Cap'n Proto's description ("invalid message: Message has
// too many segments." for input it rejected).
std::string explainAbort(const AbortReason& abort, std::optional<uint64_t> ownLimit);

// "127.0.0.1:40312" / "[::1]:40312" for a socket's peer; "unknown peer" if it has none.
std::string peerAddressOf(kj::AsyncIoStream& stream);

}  // namespace regent::rpc

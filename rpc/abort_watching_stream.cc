// Remembering why an RPC connection ended (see abort_watching_stream.h).
#include "rpc/abort_watching_stream.h"

#include <arpa/inet.h>
#include <capnp/message.h>
#include <capnp/rpc.capnp.h>
#include <capnp/serialize.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "common/units.h"

namespace regent::rpc {
namespace {

// Abort's reason and type, or nothing for other messages (and for bodies too broken to read:
// the RPC system will reject those itself). Reads through its own reader so that peeking at an
// incoming message does not spend the traversal budget the RPC system reads it with.
std::optional<AbortReason> abortIn(kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments) {
  std::optional<AbortReason> found;
  KJ_IF_MAYBE (problem, kj::runCatchingExceptions([&] {
                 capnp::SegmentArrayMessageReader reader(segments);
                 auto message = reader.getRoot<capnp::rpc::Message>();
                 if (!message.isAbort()) return;
                 auto abort = message.getAbort();
                 found = AbortReason{static_cast<kj::Exception::Type>(abort.getType()),
                                     abort.getReason().cStr()};
               })) {
    (void)problem;
    return std::nullopt;
  }
  return found;
}

}  // namespace

ReadBufferedStream::ReadBufferedStream(kj::AsyncIoStream& inner)
    : inner_(inner), buffer_(inline_, kInlineBuffer) {}

void ReadBufferedStream::resize(size_t size) {
  const size_t held = end_ - begin_;
  KJ_REQUIRE(held <= size);
  if (size <= kInlineBuffer) {
    // memmove: what is held may already be in the inline buffer.
    if (held > 0) memmove(inline_, buffer_.begin() + begin_, held);
    heap_ = nullptr;
    buffer_ = kj::arrayPtr(inline_, kInlineBuffer);
  } else {
    auto next = kj::heapArray<kj::byte>(size);
    if (held > 0) memcpy(next.begin(), buffer_.begin() + begin_, held);
    heap_ = kj::mv(next);
    buffer_ = heap_.asPtr();
  }
  begin_ = 0;
  end_ = held;
}

void ReadBufferedStream::adapt(size_t got) {
  if (got == buffer_.size() && buffer_.size() < kLargeBuffer) {
    resize(buffer_.size() * 2);
  } else if (got <= kInlineBuffer && heap_ != nullptr && end_ - begin_ <= kInlineBuffer) {
    resize(kInlineBuffer);
  }
}

kj::Promise<kj::ArrayPtr<const kj::byte>> ReadBufferedStream::peek(size_t bytes) {
  KJ_REQUIRE(bytes <= kLargeBuffer, "cannot peek past the read buffer", bytes);
  if (end_ - begin_ >= bytes) return buffer_.slice(begin_, end_).asConst();
  if (bytes > buffer_.size()) {
    size_t size = buffer_.size();
    while (size < bytes) size *= 2;
    resize(size);
  }
  // Move what is left to the front so the rest of `bytes` fits behind it.
  if (begin_ > 0) {
    memmove(buffer_.begin(), buffer_.begin() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  return inner_.tryRead(buffer_.begin() + end_, 1, buffer_.size() - end_)
      .then([this, bytes](size_t got) -> kj::Promise<kj::ArrayPtr<const kj::byte>> {
        if (got == 0) return buffer_.slice(begin_, end_).asConst();  // The end of the stream.
        received_ += got;
        end_ += got;
        return peek(bytes);
      });
}

kj::Promise<size_t> ReadBufferedStream::tryRead(void* buffer, size_t minBytes, size_t maxBytes) {
  auto* out = static_cast<kj::byte*>(buffer);
  const size_t n = kj::min(end_ - begin_, maxBytes);
  // Cap'n Proto reads an empty segment as zero bytes into a null buffer: memcpy(nullptr) is UB.
  if (n > 0) memcpy(out, buffer_.begin() + begin_, n);
  begin_ += n;
  if (n >= minBytes) return n;
  return refill(out + n, minBytes - n, maxBytes - n).then([n](size_t more) { return n + more; });
}

kj::Promise<size_t> ReadBufferedStream::refill(kj::byte* out, size_t minBytes, size_t maxBytes) {
  begin_ = end_ = 0;
  // A large read goes straight to the caller's memory: copying it would only cost.
  if (maxBytes >= buffer_.size()) {
    return inner_.tryRead(out, minBytes, maxBytes).then([this](size_t got) {
      received_ += got;
      return got;
    });
  }
  return inner_.tryRead(buffer_.begin(), 1, buffer_.size())
      .then([this, out, minBytes, maxBytes](size_t got) -> kj::Promise<size_t> {
        if (got == 0) return size_t{0};  // The end of the stream.
        received_ += got;
        end_ = got;
        const size_t n = kj::min(got, maxBytes);
        memcpy(out, buffer_.begin(), n);
        begin_ = n;
        adapt(got);  // After the copy: what is left moves with the buffer.
        if (n >= minBytes) return n;
        return refill(out + n, minBytes - n, maxBytes - n).then([n](size_t more) {
          return n + more;
        });
      });
}

kj::Promise<void> ReadBufferedStream::write(const void* buffer, size_t size) {
  return inner_.write(buffer, size);
}
kj::Promise<void> ReadBufferedStream::write(
    kj::ArrayPtr<const kj::ArrayPtr<const kj::byte>> pieces) {
  return inner_.write(pieces);
}
kj::Promise<void> ReadBufferedStream::whenWriteDisconnected() {
  return inner_.whenWriteDisconnected();
}
void ReadBufferedStream::shutdownWrite() { inner_.shutdownWrite(); }
void ReadBufferedStream::abortRead() { inner_.abortRead(); }
void ReadBufferedStream::getsockopt(int level, int option, void* value, uint* length) {
  inner_.getsockopt(level, option, value, length);
}
void ReadBufferedStream::setsockopt(int level, int option, const void* value, uint length) {
  inner_.setsockopt(level, option, value, length);
}
void ReadBufferedStream::getsockname(struct sockaddr* addr, uint* length) {
  inner_.getsockname(addr, length);
}
void ReadBufferedStream::getpeername(struct sockaddr* addr, uint* length) {
  inner_.getpeername(addr, length);
}

namespace {

// Writes wait for their own bytes once more than this waits in the queue.
constexpr size_t kQueueHighWater = 64 * 1024;
// A queue this full is written at once instead of when the loop is idle.
constexpr size_t kEagerFlushBytes = 8 * 1024;

// Cap'n Proto refuses frames of this many segments or more itself.
constexpr uint64_t kMaxSegments = 512;

constexpr const char* kPreAuthOption = "rpc.pre-auth-max-message-size";

uint32_t readLittleEndian32(const kj::byte* bytes) {
  return uint32_t(bytes[0]) | uint32_t(bytes[1]) << 8 | uint32_t(bytes[2]) << 16 |
         uint32_t(bytes[3]) << 24;
}

void appendLittleEndian32(std::vector<kj::byte>& out, uint32_t value) {
  for (int shift = 0; shift < 32; shift += 8) out.push_back(static_cast<kj::byte>(value >> shift));
}

}  // namespace

AbortWatchingMessageStream::AbortWatchingMessageStream(kj::AsyncIoStream& stream)
    : buffered_(stream), inner_(buffered_), flushes_(*this) {}

AbortWatchingMessageStream::~AbortWatchingMessageStream() noexcept = default;

kj::Promise<void> AbortWatchingMessageStream::admitNextFrame() {
  // The frame: (segment count - 1) and each segment's size in words, 32-bit little-endian,
  // padded to a whole word, then the segments.
  return buffered_.peek(8).then([this](kj::ArrayPtr<const kj::byte> head) -> kj::Promise<void> {
    if (head.size() < 8) return kj::READY_NOW;  // The stream ends; Cap'n Proto reports how.
    const uint64_t segments = uint64_t(readLittleEndian32(head.begin())) + 1;
    if (segments >= kMaxSegments) return kj::READY_NOW;  // Cap'n Proto refuses it.
    const size_t tableBytes = (4 * (segments + 1) + 7) / 8 * 8;
    return buffered_.peek(tableBytes)
        .then([this, segments, tableBytes](kj::ArrayPtr<const kj::byte> table) {
          // The limit may have been lifted while this side waited for the table.
          if (table.size() < tableBytes || !preAuthLimit_) return;
          const uint64_t limit = *preAuthLimit_;
          uint64_t words = 0;
          for (uint64_t i = 0; i < segments; ++i) {
            words += readLittleEndian32(table.begin() + 4 + 4 * i);
          }
          if (words * 8 > limit) {
            refusedBeforeAuthentication_ = true;
            kj::throwFatalException(KJ_EXCEPTION(
                FAILED, kj::str("message larger than ", kPreAuthOption, " (",
                                formatSize(limit).c_str(), ") before authentication")));
          }
        });
  });
}

kj::Promise<kj::Maybe<capnp::MessageReaderAndFds>> AbortWatchingMessageStream::tryReadMessage(
    kj::ArrayPtr<kj::AutoCloseFd> fdSpace, capnp::ReaderOptions options,
    kj::ArrayPtr<capnp::word> scratchSpace) {
  // Only a connection held to the pre-authentication limit pays for looking at the frame first.
  kj::Promise<void> admitted = preAuthLimit_ ? admitNextFrame() : kj::READY_NOW;
  return admitted
      .then([this, fdSpace, options, scratchSpace] {
        return inner_.tryReadMessage(fdSpace, options, scratchSpace);
      })
      .then(
          [this](kj::Maybe<capnp::MessageReaderAndFds>&& message) {
            KJ_IF_MAYBE (m, message) {
              ++messagesRead_;
              consumedByMessages_ = buffered_.bytesReceived() - buffered_.bytesBuffered();
              if (!received_) {
                // An Abort has few segments; one with more is looked at through its first ones.
                kj::ArrayPtr<const capnp::word> segments[4];
                size_t count = 0;
                while (count < kj::size(segments)) {
                  auto segment = m->reader->getSegment(count);
                  if (segment.size() == 0) break;
                  segments[count++] = segment;
                }
                received_ = abortIn(kj::arrayPtr(segments, count));
              }
            }
            return kj::mv(message);
          },
          [this](kj::Exception&& exception) -> kj::Maybe<capnp::MessageReaderAndFds> {
            if (!readError_) {
              readError_ = AbortReason{exception.getType(), exception.getDescription().cStr()};
            }
            kj::throwFatalException(kj::mv(exception));
          });
}

void AbortWatchingMessageStream::noteOutgoing(
    kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments) {
  if (!sent_) sent_ = abortIn(segments);
}

void AbortWatchingMessageStream::enqueue(
    kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments) {
  KJ_REQUIRE(segments.size() > 0, "a Cap'n Proto message has at least one segment");
  const size_t before = pending_.size();
  // The stream framing: (segment count - 1), each segment's size in words, padding to a word.
  size_t frame = (segments.size() / 2 + 1) * 8;
  for (auto segment : segments) frame += segment.asBytes().size();
  // Room for the whole frame at once; the queue still grows geometrically over a burst.
  if (before + frame > pending_.capacity()) {
    pending_.reserve(std::max(before + frame, 2 * pending_.capacity()));
  }
  appendLittleEndian32(pending_, static_cast<uint32_t>(segments.size() - 1));
  for (auto segment : segments) appendLittleEndian32(pending_, static_cast<uint32_t>(segment.size()));
  if (segments.size() % 2 == 0) appendLittleEndian32(pending_, 0);
  for (auto segment : segments) {
    const auto bytes = segment.asBytes();
    pending_.insert(pending_.end(), bytes.begin(), bytes.end());
  }
  enqueued_ += pending_.size() - before;
}

kj::Promise<void> AbortWatchingMessageStream::afterEnqueue() {
  if (flush_ == FlushState::kIdle ||
      (flush_ == FlushState::kScheduled && pending_.size() >= kEagerFlushBytes)) {
    startFlushing();
  }
  if (pending_.size() <= kQueueHighWater) return kj::READY_NOW;
  return whenWritten(enqueued_);
}

void AbortWatchingMessageStream::startFlushing(bool now) {
  // A full batch goes now, so the peer starts on it while this side produces the next one;
  // otherwise once the loop has nothing else to run, so that every message a burst produces (the
  // answers to all the calls read at once, their Finish messages) joins one write.
  if (now || pending_.size() >= kEagerFlushBytes) {
    ++flushGeneration_;  // A flush scheduled for later (not started: flush_ is not kWriting) won't.
    // evalNow: kj's socket write() may throw at once (EPIPE), which must become this flush's
    // failure rather than escape from writeMessage().
    flushes_.add(kj::evalNow([this] { return flush(); }));
  } else {
    flushes_.add(scheduleFlush());
  }
}

kj::Promise<void> AbortWatchingMessageStream::scheduleFlush() {
  flush_ = FlushState::kScheduled;
  return kj::evalLast([this, generation = flushGeneration_]() -> kj::Promise<void> {
    if (generation != flushGeneration_) return kj::READY_NOW;  // Superseded by a flush now.
    return flush();
  });
}

void AbortWatchingMessageStream::taskFailed(kj::Exception&& exception) {
  flush_ = FlushState::kIdle;
  if (!writeError_) writeError_ = kj::heap(kj::mv(exception));
  settle();
}

kj::Promise<void> AbortWatchingMessageStream::whenWritten(uint64_t upTo) {
  if (writeError_) return kj::cp(*writeError_);
  if (written_ >= upTo) return kj::READY_NOW;
  auto paf = kj::newPromiseAndFulfiller<void>();
  waiters_.push_back(Waiter{upTo, kj::mv(paf.fulfiller)});
  return kj::mv(paf.promise);
}

kj::Promise<void> AbortWatchingMessageStream::flush() {
  flush_ = FlushState::kWriting;
  writing_.clear();
  // One large message must not pin its size in memory for the connection's lifetime.
  if (writing_.capacity() > 4 * kQueueHighWater) writing_.shrink_to_fit();
  writing_.swap(pending_);
  const uint64_t upTo = enqueued_;
  return buffered_.write(writing_.data(), writing_.size()).then([this, upTo]() -> kj::Promise<void> {
    written_ = upTo;
    settle();
    if (pending_.empty()) {
      flush_ = FlushState::kIdle;
      // A quiet connection keeps no queue (thousands of them idle on a leader).
      std::vector<kj::byte>().swap(writing_);
      std::vector<kj::byte>().swap(pending_);
      return kj::READY_NOW;
    }
    if (pending_.size() >= kEagerFlushBytes) return flush();
    // What was enqueued meanwhile goes out once the loop is idle again (or sooner, see above).
    return scheduleFlush();
  });
}

void AbortWatchingMessageStream::settle() {
  auto waiter = waiters_.begin();
  while (waiter != waiters_.end()) {
    if (writeError_) {
      waiter->fulfiller->reject(kj::cp(*writeError_));
    } else if (written_ >= waiter->upTo) {
      waiter->fulfiller->fulfill();
    } else {
      ++waiter;
      continue;
    }
    waiter = waiters_.erase(waiter);
  }
}

kj::Promise<void> AbortWatchingMessageStream::writeMessage(
    kj::ArrayPtr<const int> fds, kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments) {
  KJ_REQUIRE(fds.size() == 0, "file descriptors cannot travel over an RPC connection");
  noteOutgoing(segments);
  if (writeError_) return kj::cp(*writeError_);
  enqueue(segments);
  return afterEnqueue();
}

kj::Promise<void> AbortWatchingMessageStream::writeMessages(
    kj::ArrayPtr<kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>>> messages) {
  for (auto segments : messages) noteOutgoing(segments);
  if (writeError_) return kj::cp(*writeError_);
  for (auto segments : messages) enqueue(segments);
  return afterEnqueue();
}

void AbortWatchingMessageStream::sendAbort(const std::string& reason) {
  capnp::MallocMessageBuilder message;
  auto abort = message.initRoot<capnp::rpc::Message>().initAbort();
  abort.setReason(reason);
  abort.setType(capnp::rpc::Exception::Type::DISCONNECTED);
  auto segments = message.getSegmentsForOutput();
  noteOutgoing(segments);
  if (writeError_) return;
  enqueue(segments);
  // Now rather than once the loop is idle: the connection is closed before that. Behind a write
  // still in progress it goes only if the connection is still open when that write ends.
  if (flush_ != FlushState::kWriting) startFlushing(/*now=*/true);
}

void AbortWatchingMessageStream::abortReads() {
  // A socket already reset refuses the shutdown (ENOTCONN); its reads fail by themselves.
  KJ_IF_MAYBE (problem, kj::runCatchingExceptions([&] { buffered_.abortRead(); })) {
    (void)problem;
  }
}

kj::Maybe<int> AbortWatchingMessageStream::getSendBufferSize() {
  return inner_.getSendBufferSize();
}

kj::Promise<void> AbortWatchingMessageStream::end() {
  return whenWritten(enqueued_).then([this] { buffered_.shutdownWrite(); });
}

std::string explainAbort(const AbortReason& abort, std::optional<uint64_t> ownLimit) {
  const std::string& reason = abort.reason;
  if (reason.starts_with(std::string("message larger than ") + kPreAuthOption)) {
    return reason.substr(0, reason.find('\n'));
  }
  if (reason.find("Message is too large") != std::string::npos) {
    return ownLimit ? "message larger than rpc.max-message-size (" + formatSize(*ownLimit) + ")"
                    : "message larger than the peer's rpc.max-message-size";
  }
  std::string line = reason.substr(0, reason.find('\n'));
  // kj's checks read "expected <condition> [<values>]; <message>": keep the message.
  if (line.starts_with("expected ")) {
    const size_t end = line.find("; ");
    if (end != std::string::npos) line.erase(0, end + 2);
  }
  if (line.size() > 300) line = line.substr(0, 300) + "...";
  return abort.type == kj::Exception::Type::FAILED ? "invalid message: " + line : line;
}

std::string peerAddressOf(kj::AsyncIoStream& stream) {
  sockaddr_storage address{};
  uint length = sizeof(address);
  KJ_IF_MAYBE (problem, kj::runCatchingExceptions([&] {
                 stream.getpeername(reinterpret_cast<sockaddr*>(&address), &length);
               })) {
    (void)problem;
    return "unknown peer";
  }
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
    inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
    return std::string(text) + ":" + std::to_string(ntohs(v4->sin_port));
  }
  if (address.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
    inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
    return "[" + std::string(text) + "]:" + std::to_string(ntohs(v6->sin6_port));
  }
  return "unknown peer";
}

}  // namespace regent::rpc

// Remembering why an RPC connection ended (see abort_watching_stream.h).
#include "rpc/abort_watching_stream.h"

#include <arpa/inet.h>
#include <capnp/rpc.capnp.h>
#include <capnp/serialize.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include "conf/values.h"

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
    : inner_(inner), buffer_(kj::heapArray<kj::byte>(64 * 1024)) {}

kj::Promise<size_t> ReadBufferedStream::tryRead(void* buffer, size_t minBytes, size_t maxBytes) {
  auto* out = static_cast<kj::byte*>(buffer);
  const size_t n = kj::min(end_ - begin_, maxBytes);
  memcpy(out, buffer_.begin() + begin_, n);
  begin_ += n;
  if (n >= minBytes) return n;
  return refill(out + n, minBytes - n, maxBytes - n).then([n](size_t more) { return n + more; });
}

kj::Promise<size_t> ReadBufferedStream::refill(kj::byte* out, size_t minBytes, size_t maxBytes) {
  begin_ = end_ = 0;
  // A large read goes straight to the caller's memory: copying it would only cost.
  if (maxBytes >= buffer_.size()) return inner_.tryRead(out, minBytes, maxBytes);
  return inner_.tryRead(buffer_.begin(), 1, buffer_.size())
      .then([this, out, minBytes, maxBytes](size_t got) -> kj::Promise<size_t> {
        if (got == 0) return size_t{0};  // The end of the stream.
        end_ = got;
        const size_t n = kj::min(got, maxBytes);
        memcpy(out, buffer_.begin(), n);
        begin_ = n;
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

AbortWatchingMessageStream::AbortWatchingMessageStream(kj::AsyncIoStream& stream)
    : buffered_(stream), inner_(buffered_) {}

kj::Promise<kj::Maybe<capnp::MessageReaderAndFds>> AbortWatchingMessageStream::tryReadMessage(
    kj::ArrayPtr<kj::AutoCloseFd> fdSpace, capnp::ReaderOptions options,
    kj::ArrayPtr<capnp::word> scratchSpace) {
  return inner_.tryReadMessage(fdSpace, options, scratchSpace)
      .then(
          [this](kj::Maybe<capnp::MessageReaderAndFds>&& message) {
            KJ_IF_MAYBE (m, message) {
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

kj::Promise<void> AbortWatchingMessageStream::writeMessage(
    kj::ArrayPtr<const int> fds, kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments) {
  noteOutgoing(segments);
  return inner_.writeMessage(fds, segments);
}

kj::Promise<void> AbortWatchingMessageStream::writeMessages(
    kj::ArrayPtr<kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>>> messages) {
  for (auto segments : messages) noteOutgoing(segments);
  return inner_.writeMessages(messages);
}

kj::Maybe<int> AbortWatchingMessageStream::getSendBufferSize() {
  return inner_.getSendBufferSize();
}

kj::Promise<void> AbortWatchingMessageStream::end() { return inner_.end(); }

std::string explainAbort(const AbortReason& abort, std::optional<uint64_t> ownLimit) {
  const std::string& reason = abort.reason;
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

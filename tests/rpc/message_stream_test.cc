// The RPC connection's message stream (rpc/abort_watching_stream.h) over an in-memory pipe:
// coalesced writes keep every message whole and in order, a full queue pushes back, a failed
// write fails the later ones, and end() drains the queue before shutting the write side; and
// the connection's VatNetwork over a socket pair: one connection, dropped once, reads ended by a
// failed write.
#include <capnp/message.h>
#include <capnp/rpc.capnp.h>
#include <capnp/serialize-async.h>
#include <gtest/gtest.h>
#include <kj/async-io.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "rpc/abort_watching_stream.h"
#include "rpc/lean_vat_network.h"

namespace regent::rpc {
namespace {

// A message of `segments` segments; word j of segment s holds (tag << 32 | s << 24 | j).
struct TestMessage {
  std::vector<std::vector<uint64_t>> segments;
  std::vector<kj::ArrayPtr<const capnp::word>> pointers;

  TestMessage(uint32_t tag, std::vector<size_t> sizes) {
    for (size_t s = 0; s < sizes.size(); ++s) {
      std::vector<uint64_t> words(sizes[s]);
      for (size_t j = 0; j < sizes[s]; ++j) words[j] = (uint64_t{tag} << 32) | (uint64_t{s} << 24) | j;
      segments.push_back(std::move(words));
    }
    for (auto& words : segments) {
      pointers.push_back(kj::arrayPtr(reinterpret_cast<const capnp::word*>(words.data()), words.size()));
    }
  }
  kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> view() const {
    return kj::arrayPtr(pointers.data(), pointers.size());
  }
};

// Whether `reader` holds exactly `expected`'s segments.
bool sameSegments(capnp::MessageReader& reader, const TestMessage& expected) {
  for (size_t s = 0; s < expected.segments.size(); ++s) {
    auto segment = reader.getSegment(static_cast<uint>(s));
    if (segment.size() != expected.segments[s].size()) return false;
    if (memcmp(segment.begin(), expected.segments[s].data(), segment.size() * 8) != 0) return false;
  }
  return reader.getSegment(static_cast<uint>(expected.segments.size())).size() == 0;
}

class MessageStreamTest : public ::testing::Test {
 protected:
  ~MessageStreamTest() noexcept override = default;

  kj::EventLoop loop_;
  kj::WaitScope waitScope_{loop_};
  kj::TwoWayPipe pipe_ = kj::newTwoWayPipe();
};

TEST_F(MessageStreamTest, CoalescedMessagesArriveWholeAndInOrder) {
  AbortWatchingMessageStream writer(*pipe_.ends[0]);
  capnp::AsyncIoMessageStream reader(*pipe_.ends[1]);
  std::vector<TestMessage> messages;
  for (uint32_t i = 0; i < 300; ++i) {
    // Mostly small, some with several segments, every 50th larger than the queue's high water.
    if (i % 50 == 7) {
      messages.emplace_back(i, std::vector<size_t>{20000});
    } else if (i % 3 == 0) {
      messages.emplace_back(i, std::vector<size_t>{3, 1 + i % 7, 2});
    } else {
      messages.emplace_back(i, std::vector<size_t>{1 + i % 11});
    }
  }
  kj::Vector<kj::Promise<void>> writes;
  for (auto& message : messages) writes.add(writer.writeMessage(nullptr, message.view()));
  auto written = kj::joinPromises(writes.releaseAsArray());

  for (size_t i = 0; i < messages.size(); ++i) {
    auto received = reader.readMessage(capnp::ReaderOptions{}).wait(waitScope_);
    ASSERT_TRUE(sameSegments(*received, messages[i])) << "message " << i;
  }
  written.wait(waitScope_);
}

TEST_F(MessageStreamTest, AWriterPastTheHighWaterWaitsForTheReader) {
  AbortWatchingMessageStream writer(*pipe_.ends[0]);
  capnp::AsyncIoMessageStream reader(*pipe_.ends[1]);
  // 1 KiB messages: the first 64 KiB are queued at once, the next waits for the socket.
  std::vector<TestMessage> messages;
  for (uint32_t i = 0; i < 80; ++i) messages.emplace_back(i, std::vector<size_t>{127});
  size_t acceptedAtOnce = 0;
  kj::Maybe<kj::Promise<void>> blocked;
  for (auto& message : messages) {
    auto write = writer.writeMessage(nullptr, message.view());
    if (!write.poll(waitScope_)) {
      blocked = kj::mv(write);
      break;
    }
    write.wait(waitScope_);
    ++acceptedAtOnce;
  }
  // The in-memory pipe completes a write only when it is read, and nothing is read yet: the
  // writer took a full queue without waiting, then pushed back.
  EXPECT_GE(acceptedAtOnce, 64u);
  auto& waiting = KJ_ASSERT_NONNULL(blocked, "the writer never pushed back");
  EXPECT_FALSE(waiting.poll(waitScope_));
  for (size_t i = 0; i <= acceptedAtOnce; ++i) {
    auto received = reader.readMessage(capnp::ReaderOptions{}).wait(waitScope_);
    ASSERT_TRUE(sameSegments(*received, messages[i])) << "message " << i;
  }
  waiting.wait(waitScope_);
}

// Keeps the loop busy for `turns` turns, counting them in `spun`.
kj::Promise<void> spin(int& spun, int turns) {
  if (spun >= turns) return kj::READY_NOW;
  return kj::evalLater([&spun, turns] {
    ++spun;
    return spin(spun, turns);
  });
}

TEST_F(MessageStreamTest, AFullBatchIsWrittenWithoutWaitingForTheLoopToBeIdle) {
  AbortWatchingMessageStream writer(*pipe_.ends[0]);
  capnp::AsyncIoMessageStream reader(*pipe_.ends[1]);
  int spun = 0;
  auto busy = spin(spun, 10000);
  // 16 KiB of 1 KiB messages while the loop is busy: the queue passes 8 KiB on the way.
  std::vector<TestMessage> messages;
  for (uint32_t i = 0; i < 16; ++i) messages.emplace_back(i, std::vector<size_t>{127});
  for (auto& message : messages) writer.writeMessage(nullptr, message.view()).wait(waitScope_);
  auto received = reader.readMessage(capnp::ReaderOptions{}).wait(waitScope_);
  EXPECT_TRUE(sameSegments(*received, messages[0]));
  EXPECT_LT(spun, 10000) << "the first message waited for the loop to be idle";
  busy.wait(waitScope_);
}

// Writes messages of `words` words to a peer that is gone until one fails; returns the failure.
// No write may throw at the call itself: failures come back through the returned promises.
kj::Maybe<kj::Exception> firstFailureWritingToAGonePeer(AbortWatchingMessageStream& writer,
                                                        kj::WaitScope& waitScope, size_t words) {
  TestMessage message(1, {words});
  for (int i = 0; i < 100; ++i) {
    kj::Promise<void> write = nullptr;
    EXPECT_NO_THROW(write = writer.writeMessage(nullptr, message.view())) << "write " << i;
    KJ_IF_MAYBE (problem, kj::runCatchingExceptions([&] {
                   waitScope.poll();  // Runs the queued flush.
                   write.wait(waitScope);
                 })) {
      return kj::mv(*problem);
    }
  }
  return nullptr;
}

TEST_F(MessageStreamTest, AWrittenQueueKeepsNoMemoryWhileTheConnectionIsQuiet) {
  AbortWatchingMessageStream writer(*pipe_.ends[0]);
  capnp::AsyncIoMessageStream reader(*pipe_.ends[1]);
  EXPECT_EQ(writer.writeQueueCapacity(), 0u);
  // A burst of 40 KiB, read by the peer as it goes.
  std::vector<TestMessage> messages;
  for (uint32_t i = 0; i < 40; ++i) messages.emplace_back(i, std::vector<size_t>{127});
  kj::Vector<kj::Promise<void>> writes;
  for (auto& message : messages) writes.add(writer.writeMessage(nullptr, message.view()));
  EXPECT_GT(writer.writeQueueCapacity(), 0u);
  for (auto& message : messages) {
    auto received = reader.readMessage(capnp::ReaderOptions{}).wait(waitScope_);
    ASSERT_TRUE(sameSegments(*received, message));
  }
  kj::joinPromises(writes.releaseAsArray()).wait(waitScope_);
  waitScope_.poll();  // The last write's completion runs.
  EXPECT_EQ(writer.writeQueueCapacity(), 0u);
  // The next message is queued and written as before.
  TestMessage next(99, {5});
  writer.writeMessage(nullptr, next.view()).wait(waitScope_);
  auto received = reader.readMessage(capnp::ReaderOptions{}).wait(waitScope_);
  EXPECT_TRUE(sameSegments(*received, next));
  waitScope_.poll();
  EXPECT_EQ(writer.writeQueueCapacity(), 0u);
}

TEST_F(MessageStreamTest, AFailedWriteFailsEveryLaterWrite) {
  // Small messages wait for the loop to be idle; a message past 8 KiB is written at once.
  for (size_t words : {size_t{4}, size_t{1300}}) {
    SCOPED_TRACE(words);
    pipe_ = kj::newTwoWayPipe();
    AbortWatchingMessageStream writer(*pipe_.ends[0]);
    pipe_.ends[1] = nullptr;  // The peer is gone.
    auto failure = firstFailureWritingToAGonePeer(writer, waitScope_, words);
    auto& error = KJ_ASSERT_NONNULL(failure, "no write failed");
    EXPECT_EQ(error.getType(), kj::Exception::Type::DISCONNECTED) << error.getDescription().cStr();
    // And it stays failed.
    TestMessage message(2, {words});
    EXPECT_ANY_THROW(writer.writeMessage(nullptr, message.view()).wait(waitScope_));
    EXPECT_ANY_THROW(writer.end().wait(waitScope_));
  }
}

TEST(MessageStreamOverASocket, AWriteToAClosedSocketFailsThroughThePromisesNeverAtTheCall) {
  // A real socket pair: kj's socket write() throws at once on EPIPE, unlike the in-memory pipe.
  EventLoop loop;
  for (size_t words : {size_t{4}, size_t{1300}}) {
    SCOPED_TRACE(words);
    auto pipe = loop.io().newTwoWayPipe();
    AbortWatchingMessageStream writer(*pipe.ends[0]);
    pipe.ends[1] = nullptr;
    auto failure = firstFailureWritingToAGonePeer(writer, loop.waitScope(), words);
    auto& error = KJ_ASSERT_NONNULL(failure, "no write failed");
    EXPECT_EQ(error.getType(), kj::Exception::Type::DISCONNECTED) << error.getDescription().cStr();
    TestMessage message(2, {words});
    EXPECT_ANY_THROW(writer.writeMessage(nullptr, message.view()).wait(loop.waitScope()));
  }
}

TEST_F(MessageStreamTest, EndDrainsTheQueueThenShutsTheWriteSide) {
  AbortWatchingMessageStream writer(*pipe_.ends[0]);
  capnp::AsyncIoMessageStream reader(*pipe_.ends[1]);
  std::vector<TestMessage> messages;
  for (uint32_t i = 0; i < 10; ++i) messages.emplace_back(i, std::vector<size_t>{2 + i});
  for (auto& message : messages) writer.writeMessage(nullptr, message.view()).wait(waitScope_);
  auto ended = writer.end();
  for (size_t i = 0; i < messages.size(); ++i) {
    auto received = reader.readMessage(capnp::ReaderOptions{}).wait(waitScope_);
    ASSERT_TRUE(sameSegments(*received, messages[i])) << "message " << i;
  }
  ended.wait(waitScope_);
  auto eof = static_cast<capnp::MessageStream&>(reader).tryReadMessage().wait(waitScope_);
  EXPECT_TRUE(eof == nullptr);
}

// ---- The pre-authentication limit on reads ----------------------------------------------------

// What reading one message through `stream` gave: "read" or the failure's description.
std::string readOutcome(AbortWatchingMessageStream& stream, kj::WaitScope& waitScope) {
  return stream.tryReadMessage(nullptr, capnp::ReaderOptions{}, nullptr)
      .then(
          [](kj::Maybe<capnp::MessageReaderAndFds>&& message) -> std::string {
            return message == nullptr ? "end" : "read";
          },
          [](kj::Exception&& e) -> std::string { return e.getDescription().cStr(); })
      .wait(waitScope);
}

TEST_F(MessageStreamTest, TheLimitCountsEverySegmentOfAFrame) {
  AbortWatchingMessageStream sender(*pipe_.ends[0]);
  AbortWatchingMessageStream receiver(*pipe_.ends[1]);
  receiver.setPreAuthenticationLimit(1024);
  // 128 words (1 KiB) in all passes; 129 in three segments, each well under, does not.
  const TestMessage atLimit(1, {100, 28});
  const TestMessage overLimit(2, {43, 43, 43});
  sender.writeMessage(nullptr, atLimit.view()).wait(waitScope_);
  sender.writeMessage(nullptr, overLimit.view()).wait(waitScope_);
  EXPECT_EQ(readOutcome(receiver, waitScope_), "read");
  EXPECT_FALSE(receiver.refusedBeforeAuthentication());
  EXPECT_EQ(readOutcome(receiver, waitScope_),
            "message larger than rpc.pre-auth-max-message-size (1KiB) before authentication");
  EXPECT_TRUE(receiver.refusedBeforeAuthentication());
}

TEST_F(MessageStreamTest, LiftingTheLimitWhileAReadWaitsAdmitsTheNextMessage) {
  AbortWatchingMessageStream sender(*pipe_.ends[0]);
  AbortWatchingMessageStream receiver(*pipe_.ends[1]);
  receiver.setPreAuthenticationLimit(1024);
  auto pending = receiver.tryReadMessage(nullptr, capnp::ReaderOptions{}, nullptr);
  waitScope_.poll();  // The read now waits for a frame.
  receiver.setPreAuthenticationLimit(std::nullopt);
  const TestMessage large(3, {4096});
  sender.writeMessage(nullptr, large.view()).wait(waitScope_);
  auto received = pending.wait(waitScope_);
  KJ_IF_MAYBE (message, received) {
    EXPECT_TRUE(sameSegments(*message->reader, large));
  } else {
    FAIL() << "the stream ended";
  }
  EXPECT_FALSE(receiver.refusedBeforeAuthentication());
}

// The read buffer: the inline one while quiet, doubled by each read that fills it during a burst
// (as far as the burst needs, at most kLargeBuffer), the inline one again at the first read it
// would have held; the bytes read through it are the bytes written, whatever the reads ask for.
TEST_F(MessageStreamTest, TheReadBufferGrowsForABurstAndShrinksWhenQuietKeepingEveryByte) {
  ReadBufferedStream reader(*pipe_.ends[1]);
  EXPECT_TRUE(reader.bufferInline());
  EXPECT_EQ(reader.bufferCapacity(), ReadBufferedStream::kInlineBuffer);
  std::string written;
  std::string read;
  // The in-memory pipe hands a write to the reader's reads: the writes wait until the end.
  std::vector<std::unique_ptr<std::string>> chunks;
  kj::Vector<kj::Promise<void>> writes;
  auto write = [&](size_t bytes) {
    auto chunk = std::make_unique<std::string>();
    for (size_t i = 0; i < bytes; ++i) chunk->push_back(char('a' + (written.size() + i) % 26));
    written += *chunk;
    writes.add(pipe_.ends[0]->write(chunk->data(), chunk->size()).eagerlyEvaluate(nullptr));
    chunks.push_back(std::move(chunk));
  };
  // Reads `bytes` in pieces of at most `piece`, as Cap'n Proto reads a frame.
  auto readBack = [&](size_t bytes, size_t piece) {
    std::vector<char> out(piece);
    size_t left = bytes;
    while (left > 0) {
      const size_t want = std::min(left, piece);
      const size_t got = reader.tryRead(out.data(), want, want).wait(waitScope_);
      ASSERT_EQ(got, want);
      read.append(out.data(), got);
      left -= got;
    }
  };
  // Quiet: small messages one at a time.
  for (int i = 0; i < 3; ++i) {
    write(200);
    readBack(200, 8);
  }
  EXPECT_TRUE(reader.bufferInline());
  // A short burst: one read fills the inline buffer, which doubles once.
  write(1000);
  readBack(8, 8);
  EXPECT_FALSE(reader.bufferInline());
  EXPECT_EQ(reader.bufferCapacity(), 2 * ReadBufferedStream::kInlineBuffer);
  readBack(1000 - 8, 8);
  EXPECT_LT(reader.bufferCapacity(), ReadBufferedStream::kLargeBuffer);
  // A long burst: the buffer doubles up to its largest size and no further.
  write(200 * 1024);
  readBack(200 * 1024, 8);
  EXPECT_EQ(reader.bufferCapacity(), ReadBufferedStream::kLargeBuffer);
  // A peek past the inline size, from quiet (one read the inline buffer holds ends a burst): the
  // buffer grows to hold it.
  write(100);
  readBack(100, 100);
  EXPECT_TRUE(reader.bufferInline());
  write(6000);
  auto peeked = reader.peek(6000).wait(waitScope_);
  EXPECT_EQ(peeked.size(), 6000u);
  EXPECT_GE(reader.bufferCapacity(), 6000u);
  readBack(6000, 16);
  // Quiet again: after one read the inline buffer would have held, it is the inline one again.
  write(100);
  readBack(100, 100);
  EXPECT_TRUE(reader.bufferInline());
  EXPECT_EQ(reader.bufferCapacity(), ReadBufferedStream::kInlineBuffer);
  // A large read goes straight to the caller, whatever the buffer's size.
  write(100 * 1024);
  readBack(100 * 1024, 100 * 1024);
  kj::joinPromises(writes.releaseAsArray()).wait(waitScope_);
  EXPECT_EQ(read, written);
  EXPECT_EQ(reader.bytesReceived(), written.size());
}

// The connection's VatNetwork (rpc/lean_vat_network.h) over a socket pair.
class LeanVatNetworkTest : public ::testing::Test,
                           protected LeanVatNetwork::DisconnectHandler {
 protected:
  ~LeanVatNetworkTest() noexcept = default;
  void rpcSystemDisconnected() noexcept override { ++disconnects_; }

  // Sends an Abort message through `connection` (any message does).
  static void sendOne(capnp::TwoPartyVatNetworkBase::Connection& connection) {
    auto message = connection.newOutgoingMessage(0);
    message->getBody().initAs<capnp::rpc::Message>().initAbort().setReason("test");
    message->send();
  }

  EventLoop loop_;
  kj::TwoWayPipe pipe_ = loop_.io().newTwoWayPipe();
  AbortWatchingMessageStream stream_{*pipe_.ends[0]};
  int disconnects_ = 0;
  LeanVatNetwork network_{stream_, capnp::rpc::twoparty::Side::SERVER, capnp::ReaderOptions{},
                          *this};
};

TEST_F(LeanVatNetworkTest, OneConnectionIsAcceptedAndItsHandlerHearsOnceThatItWasDropped) {
  auto connection = network_.accept().wait(loop_.waitScope());
  auto second = network_.accept();
  EXPECT_FALSE(second.poll(loop_.waitScope())) << "a second connection was accepted";
  // The RPC system's references to it: the accepted one and one more by connect().
  auto again = KJ_ASSERT_NONNULL(network_.connect(connection->getPeerVatId()));
  connection = nullptr;
  EXPECT_EQ(disconnects_, 0);
  again = nullptr;
  EXPECT_EQ(disconnects_, 1);
}

TEST_F(LeanVatNetworkTest, AFailedWriteEndsTheWaitingReadWithTheWritesError) {
  auto connection = network_.accept().wait(loop_.waitScope());
  // The peer sends nothing: the read waits.
  auto received = connection->receiveIncomingMessage();
  EXPECT_FALSE(received.poll(loop_.waitScope()));
  // The peer stops reading but keeps its socket open: this side's writes fail (EPIPE) while
  // nothing arrives to end the read. The write that fails first is only queued; the stream's
  // next write reports the failure to the network.
  pipe_.ends[1]->abortRead();
  for (int i = 0; i < 10 && !received.poll(loop_.waitScope()); ++i) sendOne(*connection);
  ASSERT_TRUE(received.poll(loop_.waitScope())) << "the read still waits after the writes failed";
  KJ_IF_MAYBE (problem, kj::runCatchingExceptions([&] { received.wait(loop_.waitScope()); })) {
    EXPECT_EQ(problem->getType(), kj::Exception::Type::DISCONNECTED)
        << problem->getDescription().cStr();
  } else {
    ADD_FAILURE() << "the read ended as if the peer had closed the connection";
  }
  // Later reads fail at once the same way.
  EXPECT_ANY_THROW(connection->receiveIncomingMessage().wait(loop_.waitScope()));
}

}  // namespace
}  // namespace regent::rpc

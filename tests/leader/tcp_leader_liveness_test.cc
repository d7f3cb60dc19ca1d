// TcpLeaderLiveness against real sockets on the loopback: a held connection that ends followed
// by a refused connect is "dead"; a connection closed by a listener still there, or a refusal
// before any connection was open, is not.
#include "leader/tcp_leader_liveness.h"

#include <gtest/gtest.h>
#include <kj/async-io.h>

#include <string>

#include "common/event_loop.h"
#include "tests/fixtures/loop_wait_test_util.h"

namespace regent::leader {
namespace {

using regent::testing::runLoopBounded;
using regent::testing::runLoopUntil;

constexpr Duration kTimeout{30000};

// Short waits so the tests do not wait for production backoffs.
TcpLeaderLivenessOptions fastOptions() {
  return TcpLeaderLivenessOptions{.connectTimeout = Duration(5000),
                                  .initialBackoff = Duration(10),
                                  .maxBackoff = Duration(50),
                                  .stableAfter = Duration(1000)};
}

class TcpLeaderLivenessTest : public ::testing::Test {
 protected:
  ~TcpLeaderLivenessTest() noexcept override {}

  // A listener on a free loopback port; its "host:port".
  std::string listen(uint16_t port = 0) {
    auto address = loop_.run(loop_.io().getNetwork().parseAddress("127.0.0.1", port));
    listener_ = address->listen();
    return "127.0.0.1:" + std::to_string(listener_->getPort());
  }
  kj::Own<kj::AsyncIoStream> accept() {
    return runLoopBounded(loop_, listener_->accept(), kTimeout, "the probe's connection");
  }
  // Starts watching `address`; dead_ turns true when the probe says the process is gone.
  void watch(const std::string& address) {
    watching_ = liveness_.whenDead(address, [this] { ++reanswered_; })
                    .then([this] { dead_ = true; })
                    .eagerlyEvaluate(nullptr);
  }

  EventLoop loop_;
  TcpLeaderLiveness liveness_{loop_, fastOptions()};
  kj::Own<kj::ConnectionReceiver> listener_;
  bool dead_ = false;
  int reanswered_ = 0;  // Held connections that ended and were followed by an answered connect.
  kj::Maybe<kj::Promise<void>> watching_;
};

TEST_F(TcpLeaderLivenessTest, ConnectionEndedAndAddressRefusingIsDead) {
  const std::string address = listen();
  watch(address);
  auto connection = accept();
  EXPECT_FALSE(dead_);
  // The process ends: its listener and its connections close together.
  listener_ = nullptr;
  connection = nullptr;
  EXPECT_TRUE(runLoopUntil(
      loop_, [&] { return dead_; }, kTimeout));
}

TEST_F(TcpLeaderLivenessTest, ConnectionClosedWhileTheAddressStillListensIsNotDead) {
  const std::string address = listen();
  watch(address);
  auto first = accept();
  // The server closes the connection (as rpc.auth-timeout does) but still listens: the probe
  // connects again, and that connection is held.
  first = nullptr;
  auto second = accept();
  EXPECT_FALSE(dead_);
  EXPECT_TRUE(runLoopUntil(loop_, [&] { return reanswered_ == 1; }, kTimeout))
      << "the answered reconnect is reported";
  listener_ = nullptr;
  second = nullptr;
  EXPECT_TRUE(runLoopUntil(
      loop_, [&] { return dead_; }, kTimeout));
}

TEST_F(TcpLeaderLivenessTest, RefusalBeforeAnyConnectionWasOpenProvesNothing) {
  // A port nothing listens on: every connect is refused.
  const std::string address = listen();
  const uint16_t port = static_cast<uint16_t>(listener_->getPort());
  listener_ = nullptr;
  watch(address);
  // Refused twice, then a process listens there again.
  ASSERT_TRUE(runLoopUntil(
      loop_, [&] { return liveness_.refusalsForTests() >= 2; }, kTimeout));
  EXPECT_FALSE(dead_);
  listen(port);
  auto connection = accept();
  EXPECT_FALSE(dead_);
  EXPECT_EQ(reanswered_, 0) << "a first connection is no reconnect";
  listener_ = nullptr;
  connection = nullptr;
  EXPECT_TRUE(runLoopUntil(
      loop_, [&] { return dead_; }, kTimeout));
}

TEST_F(TcpLeaderLivenessTest, AProcessRestartedOnTheAddressIsReportedAsAnsweredNotDead) {
  const std::string address = listen();
  const uint16_t port = static_cast<uint16_t>(listener_->getPort());
  watch(address);
  auto connection = accept();
  // The process dies and a new one listens on the same port before the probe reconnects: the
  // reconnect is answered, which the probe reports; only the election can tell who answered.
  listener_ = nullptr;
  listen(port);
  connection = nullptr;
  auto next = accept();
  EXPECT_TRUE(runLoopUntil(loop_, [&] { return reanswered_ == 1; }, kTimeout));
  EXPECT_FALSE(dead_);
}

TEST_F(TcpLeaderLivenessTest, DroppingTheWatchClosesItsConnection) {
  const std::string address = listen();
  watch(address);
  auto connection = accept();
  watching_ = nullptr;
  // The server side reads the end of the stream.
  char byte;
  const size_t read =
      runLoopBounded(loop_, connection->tryRead(&byte, 1, 1), kTimeout, "the end of the stream");
  EXPECT_EQ(read, 0u);
  EXPECT_FALSE(dead_);
}

}  // namespace
}  // namespace regent::leader

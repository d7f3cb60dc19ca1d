// The RPC transport over real loopback sockets: round trips, port 0, the message size limit,
// garbage input, call deadlines, reconnects with backoff, re-targeting, and server shutdown.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "rpc/call_deadline.h"
#include "rpc/rpc_client.h"
#include "rpc/rpc_server.h"
#include "rpc/wire_ids.h"
#include "tests/common/logging_test_util.h"
#include "tests/rpc/rpc_transport_test_util.h"

namespace regent::rpc {
namespace {

using ::testing::HasSubstr;
using testing::loopback;
using ::testing::Not;
using testing::runBounded;
using testing::runUntil;
using testing::startServer;
using testing::TestMasterRecord;

// Each test gets a loop and captures the log (the server reports dropped connections there).
class RpcTransportTest : public DefaultLoggerTest {
 protected:
  ~RpcTransportTest() noexcept override = default;

  void TearDown() override {
    if (HasFailure()) std::cerr << "---- log of the test\n" << log() << "----\n";
    DefaultLoggerTest::TearDown();
  }

  void SetUp() override {
    auto logger = std::make_shared<spdlog::logger>(
        "test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log_));
    logger->set_level(spdlog::level::debug);
    spdlog::set_default_logger(logger);
  }

  std::string log() const { return log_.str(); }

  std::string masterIdVia(RpcClient& client) {
    auto master = runBounded(loop_, client.bootstrapAs<wire::MasterBootstrap>());
    return masterIdOf(master);
  }

  std::string masterIdOf(wire::MasterBootstrap::Client master) {
    auto response = runBounded<capnp::Response<wire::MasterBootstrap::LeaderInfoResults>>(
        loop_, master.leaderInfoRequest().send());
    return response.getContender().getMasterId().cStr();
  }

  kj::Network& network() { return loop_.io().getNetwork(); }

  std::ostringstream log_;
  EventLoop loop_;
  std::shared_ptr<TestMasterRecord> alphaRecord_ = std::make_shared<TestMasterRecord>();
  std::shared_ptr<TestMasterRecord> betaRecord_ = std::make_shared<TestMasterRecord>();
};

// A submitJob request whose job name is `nameBytes` long.
capnp::Request<wire::DispatcherGateway::SubmitJobParams, wire::DispatcherGateway::SubmitJobResults>
submitWithName(wire::DispatcherGateway::Client& dispatcher, size_t nameBytes) {
  auto request = dispatcher.submitJobRequest();
  auto graph = request.initJobGraph();
  wire::setWireId(graph.initJobId(), JobId(7, 9));
  std::string name(nameBytes, 'x');
  graph.setName(name);
  return request;
}

wire::DispatcherGateway::Client dispatcherOf(EventLoop& loop, RpcClient& client) {
  auto master = runBounded(loop, client.bootstrapAs<wire::MasterBootstrap>());
  auto request = master.dispatcherRequest();
  return request.send().getDispatcher();
}

kj::Exception::Type failureTypeOf(EventLoop& loop, kj::Promise<void> promise) {
  KJ_IF_MAYBE (exception, kj::runCatchingExceptions([&] { runBounded(loop, kj::mv(promise)); })) {
    return exception->getType();
  }
  ADD_FAILURE() << "the promise resolved; expected it to fail";
  return kj::Exception::Type::FAILED;
}

// ---- Listening and round trips -----------------------------------------------------------

TEST_F(RpcTransportTest, CallRoundTripsOverLoopback) {
  auto server = startServer(loop_, "alpha", alphaRecord_);
  RpcClient client(network(), loop_.timer(), loopback(server->port()), {});

  EXPECT_EQ(masterIdVia(client), "alpha");
  EXPECT_EQ(client.state(), RpcClientState::kConnected);
  EXPECT_EQ(client.attempts(), 1u);
  EXPECT_EQ(client.connectionsEstablished(), 1u);
  EXPECT_EQ(server->connectionCount(), 1u);
  EXPECT_EQ(server->connectionsAccepted(), 1u);
  ASSERT_EQ(alphaRecord_->peers.size(), 1u);
  EXPECT_THAT(alphaRecord_->peers[0], ::testing::StartsWith("127.0.0.1:"));
  EXPECT_NE(alphaRecord_->peers[0], loopback(server->port()));

  // A capability obtained through the bootstrap works over the same connection.
  auto dispatcher = dispatcherOf(loop_, client);
  auto response = runBounded<capnp::Response<wire::DispatcherGateway::SubmitJobResults>>(
      loop_, submitWithName(dispatcher, 10).send());
  EXPECT_EQ(wire::idFromWire<JobId>(response.getJobId()), JobId(7, 9));
  EXPECT_EQ(server->connectionCount(), 1u);
}

TEST_F(RpcTransportTest, AReleasedBootstrapIsFreedOnTheServerAndAskedForAgainOnTheSameConnection) {
  auto server = startServer(loop_, "alpha", alphaRecord_);
  RpcClient client(network(), loop_.timer(), loopback(server->port()), {});
  EXPECT_EQ(masterIdVia(client), "alpha");
  EXPECT_EQ(masterIdVia(client), "alpha");
  EXPECT_EQ(alphaRecord_->peers.size(), 1u) << "the same bootstrap serves every call";
  // Nothing on the client holds the bootstrap any more: the server lets go of its object while
  // the connection stays up.
  client.releaseBootstrap();
  ASSERT_TRUE(runUntil(loop_, [&] { return alphaRecord_->destroyed == 1; }))
      << "the server still holds the connection's bootstrap";
  EXPECT_EQ(server->connectionCount(), 1u);
  // The next bootstrap() asks the server again, over the same connection.
  EXPECT_EQ(masterIdVia(client), "alpha");
  EXPECT_EQ(alphaRecord_->peers.size(), 2u);
  EXPECT_EQ(client.connectionsEstablished(), 1u);
  EXPECT_EQ(server->connectionsAccepted(), 1u);
}

TEST_F(RpcTransportTest, AConnectionThatKeepsAskingForItsBootstrapIsRefusedPastTheLimit) {
  auto server = startServer(loop_, "alpha", alphaRecord_);
  RpcClient client(network(), loop_.timer(), loopback(server->port()), {});
  EXPECT_EQ(masterIdVia(client), "alpha");
  // Seven more bootstraps on the same connection, each made anew.
  for (int i = 0; i < 7; ++i) {
    client.releaseBootstrap();
    EXPECT_EQ(masterIdVia(client), "alpha") << "bootstrap " << i + 2;
  }
  EXPECT_EQ(alphaRecord_->peers.size(), 8u);
  // The ninth is refused, naming the limit; the connection stays up.
  client.releaseBootstrap();
  auto master = runBounded(loop_, client.bootstrapAs<wire::MasterBootstrap>());
  KJ_IF_MAYBE (problem, kj::runCatchingExceptions([&] {
                 runBounded(loop_, master.leaderInfoRequest().send().ignoreResult());
               })) {
    EXPECT_THAT(problem->getDescription().cStr(),
                ::testing::HasSubstr("more than 8 Bootstrap requests on one connection"));
  } else {
    ADD_FAILURE() << "a ninth bootstrap was served";
  }
  EXPECT_EQ(alphaRecord_->peers.size(), 8u);
  EXPECT_EQ(server->connectionCount(), 1u);
  EXPECT_EQ(client.connectionsEstablished(), 1u);
}

TEST_F(RpcTransportTest, PortZeroPicksAFreePortAndATakenPortIsAnError) {
  auto first = startServer(loop_, "alpha", alphaRecord_);
  auto second = startServer(loop_, "beta", betaRecord_);
  EXPECT_NE(first->port(), 0);
  EXPECT_NE(second->port(), 0);
  EXPECT_NE(first->port(), second->port());
  EXPECT_EQ(first->listenAddress(), loopback(first->port()));

  auto taken =
      runBounded(loop_, RpcServer::listen(network(), loop_.timer(), loopback(first->port()), {},
                                          wire::MasterBootstrap::Client(nullptr)));
  ASSERT_FALSE(taken.ok());
  EXPECT_THAT(taken.error().message,
              HasSubstr("RPC server cannot listen on " + loopback(first->port()) + ": "));
  EXPECT_THAT(taken.error().message, HasSubstr("in use"));

  auto unparseable =
      runBounded(loop_, RpcServer::listen(network(), loop_.timer(), "127.0.0.1:notaport", {},
                                          wire::MasterBootstrap::Client(nullptr)));
  ASSERT_FALSE(unparseable.ok());
  EXPECT_THAT(unparseable.error().message,
              HasSubstr("RPC server cannot listen on 127.0.0.1:notaport: "));
}

TEST_F(RpcTransportTest, AcceptingSurvivesABootstrapFactoryThatThrows) {
  int calls = 0;
  auto started = runBounded(
      loop_, RpcServer::listen(network(), loop_.timer(), "127.0.0.1:0", {},
                               [&](const RpcPeer&) -> capnp::Capability::Client {
                                 if (++calls == 1) throw std::runtime_error("broken factory");
                                 return kj::heap<testing::TestMaster>("alpha", alphaRecord_);
                               }));
  ASSERT_TRUE(started.ok()) << started.error().message;
  auto server = kj::mv(started).value();
  RpcClient first(network(), loop_.timer(), loopback(server->port()), {});
  ASSERT_TRUE(runUntil(loop_, [&] { return calls == 1; }));
  RpcClient second(network(), loop_.timer(), loopback(server->port()), {});
  EXPECT_EQ(masterIdVia(second), "alpha");
  EXPECT_THAT(log(), HasSubstr("rpc: cannot serve connection 1 from 127.0.0.1:"));
}

// ---- Rogue input ---------------------------------------------------------------------------

TEST_F(RpcTransportTest, MessageAboveTheLimitClosesThatConnectionWhileOthersKeepWorking) {
  RpcOptions options;
  options.maxMessageSize = 64 * 1024;
  // Cap'n Proto refuses to send what its own limit would refuse to receive, so the rogue
  // client runs with a larger limit than the server's.
  RpcOptions rogueOptions;
  rogueOptions.maxMessageSize = 1024 * 1024;
  auto server = startServer(loop_, "alpha", alphaRecord_, options);
  RpcClient rogue(network(), loop_.timer(), loopback(server->port()), rogueOptions);
  RpcClient bystander(network(), loop_.timer(), loopback(server->port()), options);
  ASSERT_EQ(masterIdVia(bystander), "alpha");
  auto dispatcher = dispatcherOf(loop_, rogue);

  // Below the limit passes: the limit is not refusing everything.
  runBounded<capnp::Response<wire::DispatcherGateway::SubmitJobResults>>(
      loop_, submitWithName(dispatcher, 32 * 1024).send());
  EXPECT_EQ(server->connectionsAborted(), 0u);

  kj::Promise<void> oversized = submitWithName(dispatcher, 96 * 1024).send().ignoreResult();
  failureTypeOf(loop_, kj::mv(oversized));
  ASSERT_TRUE(runUntil(loop_, [&] { return server->connectionsAborted() == 1; }));

  EXPECT_THAT(log(), HasSubstr("rpc: dropped connection from 127.0.0.1:"));
  EXPECT_THAT(log(), HasSubstr(": message larger than rpc.max-message-size (64KiB)"));
  // The client learns why from the server's Abort message.
  ASSERT_TRUE(
      runUntil(loop_, [&] { return log().find("the server aborted it") != std::string::npos; }));
  EXPECT_THAT(log(), HasSubstr("(the server aborted it: message larger than the peer's "
                               "rpc.max-message-size); reconnecting in"));

  EXPECT_EQ(masterIdVia(bystander), "alpha");
  EXPECT_EQ(bystander.connectionsEstablished(), 1u);
}

TEST_F(RpcTransportTest, ClientRefusesToSendAMessageAboveItsOwnLimitAndStaysConnected) {
  RpcOptions options;
  options.maxMessageSize = 64 * 1024;
  auto server = startServer(loop_, "alpha", alphaRecord_, options);
  RpcClient client(network(), loop_.timer(), loopback(server->port()), options);
  auto dispatcher = dispatcherOf(loop_, client);

  KJ_IF_MAYBE (exception, kj::runCatchingExceptions([&] {
                 runBounded(loop_, submitWithName(dispatcher, 96 * 1024).send().ignoreResult());
               })) {
    EXPECT_EQ(exception->getType(), kj::Exception::Type::FAILED);
    EXPECT_THAT(exception->getDescription().cStr(),
                HasSubstr("larger than rpc.max-message-size (64KiB): not sent"));
  } else {
    FAIL() << "a message above the client's own limit was sent";
  }
  EXPECT_EQ(masterIdVia(client), "alpha");
  EXPECT_EQ(client.connectionsEstablished(), 1u);
  EXPECT_EQ(server->connectionsAborted(), 0u);
}

struct Garbage {
  const char* name;
  std::string bytes;
  const char* reason;  // Part of the server's log line.
};

std::string frameWithGarbageBody() {
  // A valid frame header (one segment of two words) around a root pointer of all ones.
  std::string frame(8, '\0');
  frame[4] = 2;
  frame += std::string(16, '\xff');
  return frame;
}

TEST_F(RpcTransportTest, GarbageBytesCloseThatConnectionWhileTheServerKeepsServing) {
  auto server = startServer(loop_, "alpha", alphaRecord_);
  RpcClient bystander(network(), loop_.timer(), loopback(server->port()), {});
  ASSERT_EQ(masterIdVia(bystander), "alpha");

  const std::vector<Garbage> cases = {
      {"an HTTP request", "GET / HTTP/1.1\r\nHost: master\r\n\r\n",
       "invalid message: Message has too many segments."},
      {"a frame with a garbage body", frameWithGarbageBody(),
       "invalid message: Message contains non-struct pointer where struct pointer was expected."},
  };
  uint64_t aborted = 0;
  for (const Garbage& garbage : cases) {
    SCOPED_TRACE(garbage.name);
    auto address = runBounded(loop_, network().parseAddress(loopback(server->port())));
    auto stream = runBounded(loop_, address->connect());
    sockaddr_in local{};
    uint length = sizeof(local);
    stream->getsockname(reinterpret_cast<sockaddr*>(&local), &length);
    const std::string peer = loopback(ntohs(local.sin_port));

    runBounded(loop_, stream->write(garbage.bytes.data(), garbage.bytes.size()));
    // The server answers with its Abort message, then closes (a reset when bytes were left
    // unread). Either way the stream ends.
    bool ended = false;
    char buffer[4096];
    while (!ended) {
      KJ_IF_MAYBE (problem, kj::runCatchingExceptions([&] {
                     ended = runBounded(loop_, stream->tryRead(buffer, 1, sizeof buffer)) == 0;
                   })) {
        ASSERT_EQ(problem->getType(), kj::Exception::Type::DISCONNECTED)
            << problem->getDescription().cStr();
        ended = true;
      }
    }
    ASSERT_TRUE(runUntil(loop_, [&] { return server->connectionsAborted() == aborted + 1; }));
    ++aborted;
    EXPECT_THAT(log(), HasSubstr("rpc: dropped connection from " + peer + ": " + garbage.reason));
    EXPECT_EQ(masterIdVia(bystander), "alpha");
  }
  EXPECT_EQ(bystander.connectionsEstablished(), 1u);
  EXPECT_TRUE(runUntil(loop_, [&] { return server->connectionCount() == 1; }));
}

// ---- Deadlines -----------------------------------------------------------------------------

TEST_F(RpcTransportTest, CallDeadlineFailsAHangingCallNamingTheMethodAndCancelsIt) {
  auto server = startServer(loop_, "alpha", alphaRecord_);
  RpcClient client(network(), loop_.timer(), loopback(server->port()), {});
  auto master = runBounded(loop_, client.bootstrapAs<wire::MasterBootstrap>());
  const CallDeadline deadline(loop_.timer(), Duration(100));

  auto call = deadline.send(master.handOverRequest());
  KJ_IF_MAYBE (exception, kj::runCatchingExceptions([&] { runBounded(loop_, kj::mv(call)); })) {
    EXPECT_EQ(exception->getType(), kj::Exception::Type::OVERLOADED);
    EXPECT_EQ(std::string(exception->getDescription().cStr()),
              "call MasterBootstrap.handOver timed out after 100ms");
  } else {
    FAIL() << "a call the server never answers completed";
  }
  EXPECT_EQ(alphaRecord_->hangingCalls, 1u);
  // Dropping the call told the server to cancel it.
  EXPECT_TRUE(runUntil(loop_, [&] { return alphaRecord_->cancelledCalls == 1; }));
  // The connection itself is fine.
  EXPECT_EQ(masterIdOf(master), "alpha");
  EXPECT_EQ(client.connectionsEstablished(), 1u);
}

// ---- Reconnecting and re-targeting ---------------------------------------------------------

TEST_F(RpcTransportTest, ClientReconnectsWithGrowingBackoffWhenTheServerRestartsOnTheSamePort) {
  RpcOptions options;
  options.reconnectInitial = Duration(20);
  options.reconnectMax = Duration(160);
  auto server = startServer(loop_, "alpha", alphaRecord_);
  const uint16_t port = server->port();
  // Jitter fixed at the top of the range: each delay is the ceiling, so growth is exact.
  RpcClient client(network(), loop_.timer(), loopback(port), options, [] { return 1.0; });
  ASSERT_EQ(masterIdVia(client), "alpha");
  ASSERT_EQ(client.consecutiveFailures(), 0u);

  server = nullptr;
  // Five attempts refused after the loss: delays 20, 40, 80, 160, 160 ms.
  ASSERT_TRUE(runUntil(loop_, [&] { return client.attempts() >= 1 + 5; }));
  EXPECT_NE(client.state(), RpcClientState::kConnected);
  auto reconnected = client.bootstrapAs<wire::MasterBootstrap>();  // Waits for the server.

  server = startServer(loop_, "beta", betaRecord_, {}, port);
  auto master = runBounded(loop_, kj::mv(reconnected));
  EXPECT_EQ(masterIdOf(master), "beta");
  EXPECT_EQ(client.state(), RpcClientState::kConnected);
  EXPECT_EQ(client.connectionsEstablished(), 2u);
  EXPECT_EQ(client.consecutiveFailures(), 0u);  // The answered bootstrap reset the backoff.

  const std::vector<Duration>& delays = client.backoffDelaysForTests();
  ASSERT_GE(delays.size(), 5u);
  EXPECT_EQ(std::vector<Duration>(delays.begin(), delays.begin() + 5),
            (std::vector<Duration>{Duration(20), Duration(40), Duration(80), Duration(160),
                                   Duration(160)}));
  for (const Duration delay : delays) EXPECT_LE(delay, Duration(160));
  EXPECT_EQ(client.attempts(), delays.size() + 1);
  EXPECT_THAT(log(), HasSubstr("rpc: connection to " + loopback(port) + " lost ("));
}

TEST_F(RpcTransportTest, SetAddressMovesTheClientToAnotherServer) {
  auto alpha = startServer(loop_, "alpha", alphaRecord_);
  auto beta = startServer(loop_, "beta", betaRecord_);
  RpcClient client(network(), loop_.timer(), loopback(alpha->port()), {});
  auto oldMaster = runBounded(loop_, client.bootstrapAs<wire::MasterBootstrap>());
  ASSERT_EQ(masterIdOf(oldMaster), "alpha");

  client.setAddress(loopback(alpha->port()));  // Already there: nothing happens.
  EXPECT_EQ(client.attempts(), 1u);
  EXPECT_EQ(client.state(), RpcClientState::kConnected);

  client.setAddress(loopback(beta->port()));
  EXPECT_EQ(client.address(), loopback(beta->port()));
  EXPECT_EQ(masterIdVia(client), "beta");
  EXPECT_EQ(client.attempts(), 2u);
  EXPECT_TRUE(runUntil(loop_, [&] { return alpha->connectionCount() == 0; }));
  EXPECT_EQ(beta->connectionCount(), 1u);

  // A capability of the old connection is dead.
  EXPECT_EQ(failureTypeOf(loop_, oldMaster.leaderInfoRequest().send().ignoreResult()),
            kj::Exception::Type::DISCONNECTED);
}

TEST_F(RpcTransportTest, SetAddressSkipsThePendingBackoffWait) {
  RpcOptions options;
  options.reconnectInitial = Duration(60000);  // A wait no test would sit through.
  options.reconnectMax = Duration(60000);
  auto server = startServer(loop_, "alpha", alphaRecord_);
  const uint16_t port = server->port();
  server = nullptr;
  RpcClient client(network(), loop_.timer(), loopback(port), options);
  ASSERT_TRUE(
      runUntil(loop_, [&] { return client.state() == RpcClientState::kWaitingToReconnect; }));

  server = startServer(loop_, "alpha", alphaRecord_, {}, port);
  client.setAddress(loopback(port));
  EXPECT_EQ(masterIdVia(client), "alpha");
  EXPECT_EQ(client.attempts(), 2u);
}

// ---- Shutdown ------------------------------------------------------------------------------

TEST_F(RpcTransportTest, DestroyingTheServerDisconnectsEveryClient) {
  RpcOptions options;
  options.reconnectInitial = Duration(60000);  // Keep the clients from reconnecting meanwhile.
  options.reconnectMax = Duration(60000);
  auto server = startServer(loop_, "alpha", alphaRecord_);
  RpcClient first(network(), loop_.timer(), loopback(server->port()), options);
  RpcClient second(network(), loop_.timer(), loopback(server->port()), options);
  auto firstMaster = runBounded(loop_, first.bootstrapAs<wire::MasterBootstrap>());
  auto secondMaster = runBounded(loop_, second.bootstrapAs<wire::MasterBootstrap>());
  ASSERT_EQ(masterIdOf(firstMaster), "alpha");
  ASSERT_EQ(masterIdOf(secondMaster), "alpha");
  ASSERT_EQ(server->connectionCount(), 2u);

  auto hanging = firstMaster.handOverRequest().send().ignoreResult().fork();
  auto firstLost = first.onDisconnect();
  ASSERT_TRUE(runUntil(loop_, [&] { return alphaRecord_->hangingCalls == 1; }));

  server = nullptr;
  // The server's side of the call is gone.
  EXPECT_TRUE(runUntil(loop_, [&] { return alphaRecord_->cancelledCalls == 1; }));
  EXPECT_EQ(failureTypeOf(loop_, hanging.addBranch()), kj::Exception::Type::DISCONNECTED);
  runBounded(loop_, kj::mv(firstLost));
  EXPECT_EQ(failureTypeOf(loop_, secondMaster.leaderInfoRequest().send().ignoreResult()),
            kj::Exception::Type::DISCONNECTED);
  EXPECT_TRUE(runUntil(loop_, [&] {
    return first.state() == RpcClientState::kWaitingToReconnect &&
           second.state() == RpcClientState::kWaitingToReconnect;
  }));
}

TEST_F(RpcTransportTest, ClosingTheClientRejectsAPendingBootstrap) {
  auto server = startServer(loop_, "alpha", alphaRecord_);
  const uint16_t port = server->port();
  server = nullptr;
  RpcClient client(network(), loop_.timer(), loopback(port), {});
  auto waiting = client.bootstrap().ignoreResult();
  client.close();
  EXPECT_EQ(client.state(), RpcClientState::kClosed);
  EXPECT_EQ(failureTypeOf(loop_, kj::mv(waiting)), kj::Exception::Type::DISCONNECTED);
  EXPECT_EQ(failureTypeOf(loop_, client.bootstrap().ignoreResult()),
            kj::Exception::Type::DISCONNECTED);
}

}  // namespace
}  // namespace regent::rpc

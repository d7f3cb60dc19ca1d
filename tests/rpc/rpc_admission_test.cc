// What the RPC server admits before a connection has authenticated: the pre-authentication
// message cap (checked from the frame's segment table), the authentication deadline, and the
// caps on open connections in total and per peer address. Real loopback sockets, one process.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <kj/io.h>
#include <netinet/in.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "rpc/rpc_client.h"
#include "rpc/rpc_server.h"
#include "rpc/wire_ids.h"
#include "tests/common/logging_test_util.h"
#include "tests/rpc/rpc_transport_test_util.h"

namespace regent::rpc {
namespace {

using ::testing::HasSubstr;
using testing::loopback;
using testing::runBounded;
using testing::runUntil;
using testing::TestMaster;
using testing::TestMasterRecord;

class RpcAdmission : public DefaultLoggerTest {
 protected:
  ~RpcAdmission() noexcept override = default;

  void SetUp() override {
    auto logger = std::make_shared<spdlog::logger>(
        "test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log_));
    logger->set_level(spdlog::level::debug);
    spdlog::set_default_logger(logger);
  }
  void TearDown() override {
    server_ = nullptr;  // Its last lines go to this test's log.
    if (HasFailure()) std::cerr << "---- log of the test\n" << log() << "----\n";
    DefaultLoggerTest::TearDown();
  }

  std::string log() const { return log_.str(); }
  size_t linesContaining(const std::string& text) const {
    size_t count = 0;
    std::istringstream lines(log());
    for (std::string line; std::getline(lines, line);) {
      if (line.find(text) != std::string::npos) ++count;
    }
    return count;
  }

  kj::Network& network() { return loop_.io().getNetwork(); }

  // Serves a TestMaster called "m1"; keeps each connection's gate so tests can mark it.
  void serve(RpcOptions options) {
    auto started = runBounded(
        loop_, RpcServer::listen(network(), loop_.timer(), "127.0.0.1:0", options,
                                 [this](const RpcPeer& peer) -> capnp::Capability::Client {
                                   record_->peers.push_back(peer.address);
                                   gates_.push_back(kj::addRef(*peer.gate));
                                   if (markAtBootstrap_) peer.gate->markAuthenticated();
                                   return kj::heap<TestMaster>("m1", record_);
                                 }));
    if (!started.ok()) throw std::runtime_error(started.error().message);
    server_ = kj::mv(started).value();
  }

  // A raw TCP connection to the server from the local address `source` (any of 127.0.0.0/8 on
  // Linux; the connect completes in the kernel's backlog, without the loop), and the address the
  // server sees it from.
  struct RawConnection {
    kj::AutoCloseFd fd;
    std::string peer;
  };
  RawConnection connectRaw(const std::string& source = "127.0.0.1") {
    kj::AutoCloseFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    KJ_SYSCALL(fd.get());
    sockaddr_in local{};
    local.sin_family = AF_INET;
    inet_pton(AF_INET, source.c_str(), &local.sin_addr);
    KJ_SYSCALL(::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local), source);
    sockaddr_in remote{};
    remote.sin_family = AF_INET;
    remote.sin_port = htons(server_->port());
    inet_pton(AF_INET, "127.0.0.1", &remote.sin_addr);
    KJ_SYSCALL(::connect(fd, reinterpret_cast<sockaddr*>(&remote), sizeof remote));
    socklen_t length = sizeof(local);
    KJ_SYSCALL(::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length));
    return {kj::mv(fd), source + ":" + std::to_string(ntohs(local.sin_port))};
  }

  void send(RawConnection& connection, const void* bytes, size_t size) {
    KJ_SYSCALL(::send(connection.fd, bytes, size, MSG_NOSIGNAL));
  }

  // Runs the loop until the server ends the connection (EOF or a reset; what it sends before
  // is read and dropped); false if it is still open after the tests' bound.
  bool endedByServer(RawConnection& connection) {
    return runUntil(loop_, [&] {
      char buffer[4096];
      for (;;) {
        const ssize_t got = ::recv(connection.fd, buffer, sizeof buffer, MSG_DONTWAIT);
        if (got > 0) continue;
        return got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
      }
    });
  }

  std::string masterIdVia(RpcClient& client) {
    auto master = runBounded(loop_, client.bootstrapAs<wire::MasterBootstrap>());
    auto response = runBounded<capnp::Response<wire::MasterBootstrap::LeaderInfoResults>>(
        loop_, master.leaderInfoRequest().send());
    return response.getContender().getMasterId().cStr();
  }

  wire::DispatcherGateway::Client dispatcherOf(RpcClient& client) {
    auto master = runBounded(loop_, client.bootstrapAs<wire::MasterBootstrap>());
    return master.dispatcherRequest().send().getDispatcher();
  }

  // Runs `promise`, which must fail; returns its type.
  kj::Exception::Type failureOf(kj::Promise<void> promise) {
    KJ_IF_MAYBE (exception,
                 kj::runCatchingExceptions([&] { runBounded(loop_, kj::mv(promise)); })) {
      return exception->getType();
    }
    ADD_FAILURE() << "the promise resolved; expected it to fail";
    return kj::Exception::Type::FAILED;
  }

  std::ostringstream log_;
  EventLoop loop_;
  std::shared_ptr<TestMasterRecord> record_ = std::make_shared<TestMasterRecord>();
  std::vector<kj::Own<ConnectionGate>> gates_;
  // Whether the bootstrap factory marks the next connections authenticated at once, as one that
  // trusts a verified TLS client certificate would.
  bool markAtBootstrap_ = false;
  kj::Own<RpcServer> server_;
};

RpcOptions requiringAuthentication() {
  RpcOptions options;
  options.requireAuthentication = true;
  return options;
}

RpcOptions options_without_authentication(RpcOptions options) {
  options.requireAuthentication = false;
  return options;
}

// A submitJob request whose job name is `nameBytes` long (a way to send a large message).
capnp::Request<wire::DispatcherGateway::SubmitJobParams, wire::DispatcherGateway::SubmitJobResults>
submitWithName(wire::DispatcherGateway::Client& dispatcher, size_t nameBytes) {
  auto request = dispatcher.submitJobRequest();
  auto graph = request.initJobGraph();
  wire::setWireId(graph.initJobId(), JobId(7, 9));
  graph.setName(std::string(nameBytes, 'x'));
  return request;
}

// ---- Idle connections and stalled messages (authenticated or not) ----------------------------

TEST_F(RpcAdmission, AnAuthenticatedConnectionOverWhichNothingCrossesIsClosedAfterTheIdleTimeout) {
  RpcOptions options = requiringAuthentication();
  // Long beside the calls' pace, so that a slow turn of a sanitized build cannot idle the busy
  // connection too.
  options.idleTimeout = Duration(600);
  markAtBootstrap_ = true;  // Authenticated from the start, as by a verified TLS certificate.
  serve(options);
  RpcClient busy(network(), loop_.timer(), loopback(server_->port()), {});
  ASSERT_EQ(masterIdVia(busy), "m1");

  RawConnection idle = connectRaw();
  // Calls every 50 ms keep the other connection from being idle meanwhile.
  ASSERT_TRUE(runUntil(loop_, [&] {
    EXPECT_EQ(masterIdVia(busy), "m1");
    return server_->connectionsIdleTimedOut() == 1;
  }));
  EXPECT_TRUE(endedByServer(idle));
  EXPECT_THAT(log(), HasSubstr("rpc: closed connection from " + idle.peer +
                               ": nothing sent or received for 600ms (rpc.idle-timeout)"));
  EXPECT_EQ(busy.connectionsEstablished(), 1u);
  EXPECT_EQ(server_->connectionCount(), 1u);
}

TEST_F(RpcAdmission, WithoutAuthenticationAnIdleConnectionIsClosedToo) {
  RpcOptions options;
  options.idleTimeout = Duration(200);
  serve(options);
  RawConnection idle = connectRaw();
  EXPECT_TRUE(endedByServer(idle));
  EXPECT_EQ(server_->connectionsIdleTimedOut(), 1u);
  EXPECT_EQ(server_->connectionsTimedOutBeforeAuthentication(), 0u);
}

TEST_F(RpcAdmission, AMessageNotReceivedWholeWithinTheMessageTimeoutIsClosedThoughBytesTrickleIn) {
  RpcOptions options;  // No authentication: the frame's 8 MiB are within rpc.max-message-size.
  options.idleTimeout = Duration(60000);
  options.messageTimeout = Duration(300);
  serve(options);
  RawConnection stalled = connectRaw();
  const uint32_t words = 8 * 1024 * 1024 / 8;
  const uint32_t frame[2] = {0, words};
  send(stalled, frame, sizeof frame);
  // A byte of the body now and then: the connection is never idle, the message never whole.
  bool ended = false;
  for (int i = 0; i < 200 && !ended; ++i) {
    if (::send(stalled.fd, "x", 1, MSG_NOSIGNAL) != 1) break;
    runBounded(loop_, loop_.timer().afterDelay(20 * kj::MILLISECONDS));
    ended = server_->connectionsMessageTimedOut() == 1;
  }
  EXPECT_TRUE(ended);
  EXPECT_TRUE(endedByServer(stalled));
  EXPECT_THAT(log(), HasSubstr("rpc: closed connection from " + stalled.peer +
                               ": a message not received whole within 300ms of its first bytes "
                               "(rpc.message-timeout)"));
  EXPECT_EQ(server_->connectionsIdleTimedOut(), 0u);
}

// ---- The pre-authentication message cap ---------------------------------------------------

TEST_F(RpcAdmission, AFrameAnnouncingTenMebibytesBeforeAuthenticationIsDroppedWithoutItsBody) {
  serve(requiringAuthentication());
  RawConnection rogue = connectRaw();
  // One segment of 10 MiB announced (segment count - 1 = 0, then the size in words); the body
  // never comes. Below rpc.max-message-size (16MiB), so only the pre-authentication cap refuses it.
  const uint32_t words = 10 * 1024 * 1024 / 8;
  const kj::byte header[8] = {0,
                              0,
                              0,
                              0,
                              kj::byte(words),
                              kj::byte(words >> 8),
                              kj::byte(words >> 16),
                              kj::byte(words >> 24)};
  send(rogue, header, sizeof header);

  EXPECT_TRUE(endedByServer(rogue));
  ASSERT_TRUE(runUntil(loop_, [&] { return server_->connectionCount() == 0; }));
  EXPECT_THAT(log(), HasSubstr("rpc: dropped connection from " + rogue.peer +
                               ": message larger than rpc.pre-auth-max-message-size (64KiB) "
                               "before authentication"));
}

TEST_F(RpcAdmission, AMessageOverThePreAuthenticationCapIsDroppedAndTheSameOneIsServedAfterward) {
  serve(requiringAuthentication());
  // Cap'n Proto refuses to send what its own limit would refuse to receive: the client's
  // rpc.max-message-size (16MiB) is the server's, so only the pre-authentication cap differs.
  RpcClient early(network(), loop_.timer(), loopback(server_->port()), {});
  ASSERT_EQ(masterIdVia(early), "m1");  // Small messages pass before authentication.
  auto earlyDispatcher = dispatcherOf(early);
  ASSERT_EQ(gates_.size(), 1u);
  EXPECT_FALSE(gates_[0]->authenticated());

  failureOf(submitWithName(earlyDispatcher, 96 * 1024).send().ignoreResult());
  ASSERT_TRUE(runUntil(loop_, [&] { return server_->connectionsAborted() == 1; }));
  EXPECT_EQ(server_->connectionsDroppedBeforeAuthentication(), 1u);
  EXPECT_EQ(linesContaining("message larger than rpc.pre-auth-max-message-size (64KiB) before "
                            "authentication"),
            1u);
  EXPECT_THAT(log(), HasSubstr("rpc: dropped connection from " + record_->peers[0] +
                               ": message larger than rpc.pre-auth-max-message-size (64KiB) "
                               "before authentication"));

  RpcClient later(network(), loop_.timer(), loopback(server_->port()), {});
  ASSERT_EQ(masterIdVia(later), "m1");
  auto laterDispatcher = dispatcherOf(later);
  ASSERT_EQ(gates_.size(), 2u);
  gates_[1]->markAuthenticated();
  auto response = runBounded<capnp::Response<wire::DispatcherGateway::SubmitJobResults>>(
      loop_, submitWithName(laterDispatcher, 96 * 1024).send());
  EXPECT_EQ(wire::idFromWire<JobId>(response.getJobId()), JobId(7, 9));
  EXPECT_EQ(server_->connectionsDroppedBeforeAuthentication(), 1u);
  EXPECT_EQ(later.connectionsEstablished(), 1u);
}

TEST_F(RpcAdmission, WithoutAuthenticationRequiredOnlyTheMessageSizeLimitApplies) {
  serve({});
  RpcClient client(network(), loop_.timer(), loopback(server_->port()), {});
  ASSERT_EQ(masterIdVia(client), "m1");
  auto dispatcher = dispatcherOf(client);
  ASSERT_EQ(gates_.size(), 1u);
  EXPECT_TRUE(gates_[0]->authenticated());
  auto response = runBounded<capnp::Response<wire::DispatcherGateway::SubmitJobResults>>(
      loop_, submitWithName(dispatcher, 96 * 1024).send());
  EXPECT_EQ(wire::idFromWire<JobId>(response.getJobId()), JobId(7, 9));
  EXPECT_EQ(server_->connectionsDroppedBeforeAuthentication(), 0u);
}

// ---- The authentication deadline -----------------------------------------------------------

TEST_F(RpcAdmission, AConnectionNotAuthenticatedInTimeIsClosedAndAnAuthenticatedOneIsNot) {
  RpcOptions options = requiringAuthentication();
  options.authTimeout = Duration(200);
  serve(options);
  // A second server that requires no authentication: its connections have no deadline.
  auto open = testing::startServer(loop_, "open", record_, options_without_authentication(options));

  RpcClient trusted(network(), loop_.timer(), loopback(server_->port()), {});
  ASSERT_EQ(masterIdVia(trusted), "m1");
  ASSERT_EQ(gates_.size(), 1u);
  gates_[0]->markAuthenticated();
  RpcClient unrelated(network(), loop_.timer(), loopback(open->port()), {});
  ASSERT_EQ(masterIdVia(unrelated), "open");

  // Connected after the others: once it is closed, their deadlines would have passed as well.
  RawConnection silent = connectRaw();
  EXPECT_TRUE(endedByServer(silent));
  ASSERT_TRUE(
      runUntil(loop_, [&] { return server_->connectionsTimedOutBeforeAuthentication() == 1; }));
  EXPECT_THAT(log(), HasSubstr("rpc: closed connection from " + silent.peer +
                               ": not authenticated within 200ms (rpc.auth-timeout)"));

  EXPECT_EQ(masterIdVia(trusted), "m1");
  EXPECT_EQ(trusted.connectionsEstablished(), 1u);
  EXPECT_EQ(masterIdVia(unrelated), "open");
  EXPECT_EQ(unrelated.connectionsEstablished(), 1u);
  EXPECT_EQ(open->connectionsTimedOutBeforeAuthentication(), 0u);
  EXPECT_EQ(server_->connectionCount(), 1u);
}

TEST_F(RpcAdmission, APeerClosedForNotAuthenticatingIsToldWhy) {
  RpcOptions options = requiringAuthentication();
  options.authTimeout = Duration(200);
  serve(options);
  RpcOptions clientOptions;
  clientOptions.reconnectInitial = Duration(60000);  // One connection is enough to look at.
  clientOptions.reconnectMax = Duration(60000);
  RpcClient lazy(network(), loop_.timer(), loopback(server_->port()), clientOptions);
  ASSERT_EQ(masterIdVia(lazy), "m1");
  ASSERT_TRUE(runUntil(loop_, [&] { return lazy.state() == RpcClientState::kWaitingToReconnect; }));
  EXPECT_THAT(log(), HasSubstr("(the server aborted it: not authenticated within 200ms "
                               "(rpc.auth-timeout))"));
  EXPECT_EQ(server_->connectionsTimedOutBeforeAuthentication(), 1u);
  EXPECT_EQ(server_->connectionsAborted(), 0u);
}

// Whoever served a connection may close it through its gate (a leader whose term ended closes
// its workers' connections): the peer is told why, the others keep serving.
TEST_F(RpcAdmission, AConnectionClosedThroughItsGateIsToldWhyAndTheOthersStay) {
  serve(RpcOptions{});
  RpcOptions clientOptions;
  clientOptions.reconnectInitial = Duration(60000);  // One connection is enough to look at.
  clientOptions.reconnectMax = Duration(60000);
  RpcClient closed(network(), loop_.timer(), loopback(server_->port()), clientOptions);
  ASSERT_EQ(masterIdVia(closed), "m1");
  RpcClient other(network(), loop_.timer(), loopback(server_->port()), clientOptions);
  ASSERT_EQ(masterIdVia(other), "m1");
  ASSERT_EQ(gates_.size(), 2u);
  gates_[0]->close("the leader's term of epoch 3 is over");
  ASSERT_TRUE(
      runUntil(loop_, [&] { return closed.state() == RpcClientState::kWaitingToReconnect; }));
  EXPECT_THAT(log(), HasSubstr("(the server aborted it: the leader's term of epoch 3 is over)"));
  EXPECT_EQ(server_->connectionsClosedByGate(), 1u);
  EXPECT_EQ(server_->connectionsAborted(), 0u);
  EXPECT_EQ(masterIdVia(other), "m1");
  EXPECT_EQ(server_->connectionCount(), 1u);
  gates_[0]->close("again, once gone: nothing happens");
  EXPECT_EQ(server_->connectionsClosedByGate(), 1u);
}

TEST_F(RpcAdmission, AConnectionTheBootstrapFactoryMarksAtOnceHasNeitherLimit) {
  RpcOptions options = requiringAuthentication();
  options.authTimeout = Duration(200);
  serve(options);
  markAtBootstrap_ = true;
  RpcClient trusted(network(), loop_.timer(), loopback(server_->port()), {});
  ASSERT_EQ(masterIdVia(trusted), "m1");
  markAtBootstrap_ = false;

  // Connected after the trusted one: once it is closed, the trusted one's deadline would have
  // passed as well.
  RawConnection silent = connectRaw();
  EXPECT_TRUE(endedByServer(silent));
  ASSERT_TRUE(
      runUntil(loop_, [&] { return server_->connectionsTimedOutBeforeAuthentication() == 1; }));

  auto dispatcher = dispatcherOf(trusted);
  auto response = runBounded<capnp::Response<wire::DispatcherGateway::SubmitJobResults>>(
      loop_, submitWithName(dispatcher, 96 * 1024).send());
  EXPECT_EQ(wire::idFromWire<JobId>(response.getJobId()), JobId(7, 9));
  EXPECT_EQ(trusted.connectionsEstablished(), 1u);
  EXPECT_EQ(server_->connectionsDroppedBeforeAuthentication(), 0u);
}

// ---- Connection caps -------------------------------------------------------------------------

TEST_F(RpcAdmission, ConnectionsOverEitherCapAreClosedAtOnceWhileTheOthersKeepServing) {
  RpcOptions options;
  options.maxConnections = 3;
  options.maxConnectionsPerPeer = 2;
  serve(options);
  RpcClient first(network(), loop_.timer(), loopback(server_->port()), {});
  RpcClient second(network(), loop_.timer(), loopback(server_->port()), {});
  ASSERT_EQ(masterIdVia(first), "m1");
  ASSERT_EQ(masterIdVia(second), "m1");

  // A third from 127.0.0.1 is over the per-peer cap.
  RawConnection overPeerCap = connectRaw("127.0.0.1");
  EXPECT_TRUE(endedByServer(overPeerCap));
  ASSERT_TRUE(runUntil(loop_, [&] { return server_->connectionsRefusedOverPeerCap() == 1; }));
  EXPECT_THAT(log(), HasSubstr("rpc: refused connection from " + overPeerCap.peer +
                               ": rpc.max-connections-per-peer (2) reached for 127.0.0.1"));

  // Another loopback address is another peer: served, which makes three in total.
  RawConnection otherPeer = connectRaw("127.0.0.2");
  ASSERT_TRUE(runUntil(loop_, [&] { return server_->connectionCount() == 3; }));
  RawConnection overTotalCap = connectRaw("127.0.0.3");
  EXPECT_TRUE(endedByServer(overTotalCap));
  ASSERT_TRUE(runUntil(loop_, [&] { return server_->connectionsRefusedOverTotalCap() == 1; }));
  EXPECT_THAT(log(), HasSubstr("rpc: refused connection from " + overTotalCap.peer +
                               ": rpc.max-connections (3) reached"));

  EXPECT_EQ(masterIdVia(first), "m1");
  EXPECT_EQ(masterIdVia(second), "m1");
  EXPECT_EQ(server_->connectionsAccepted(), 3u);
  EXPECT_EQ(gates_.size(), 3u);  // The refused never reached the bootstrap factory.

  // A slot freed is a slot to take.
  otherPeer.fd = nullptr;
  ASSERT_TRUE(runUntil(loop_, [&] { return server_->connectionCount() == 2; }));
  RawConnection again = connectRaw("127.0.0.3");
  ASSERT_TRUE(runUntil(loop_, [&] { return server_->connectionCount() == 3; }));
  EXPECT_EQ(server_->connectionsRefusedOverTotalCap(), 1u);
}

TEST_F(RpcAdmission, RefusalsDoNotFloodTheLog) {
  RpcOptions options;
  options.maxConnectionsPerPeer = 1;
  serve(options);
  RpcClient kept(network(), loop_.timer(), loopback(server_->port()), {});
  ASSERT_EQ(masterIdVia(kept), "m1");

  // Within one summary interval (10s), however many are refused, one warning.
  for (int i = 0; i < 20; ++i) {
    RawConnection refused = connectRaw("127.0.0.1");
    EXPECT_TRUE(endedByServer(refused));
  }
  ASSERT_TRUE(runUntil(loop_, [&] { return server_->connectionsRefusedOverPeerCap() == 20; }));
  EXPECT_EQ(linesContaining("rpc: refused connection from"), 1u);
  EXPECT_EQ(linesContaining("more connection(s)"), 0u);
  EXPECT_EQ(masterIdVia(kept), "m1");
}

TEST_F(RpcAdmission, RefusalsThatContinueAreSummedUpOncePerInterval) {
  RpcOptions options;
  options.maxConnectionsPerPeer = 1;
  serve(options);
  server_->setRefusalLogIntervalForTests(Duration(100));
  RpcClient kept(network(), loop_.timer(), loopback(server_->port()), {});
  ASSERT_EQ(masterIdVia(kept), "m1");

  for (int i = 0; i < 3; ++i) {
    RawConnection refused = connectRaw("127.0.0.1");
    EXPECT_TRUE(endedByServer(refused));
  }
  ASSERT_TRUE(runUntil(loop_, [&] { return server_->connectionsRefusedOverPeerCap() == 3; }));
  ASSERT_TRUE(runUntil(loop_, [&] { return linesContaining("more connection(s)") == 1; }));
  EXPECT_THAT(log(), HasSubstr("rpc: refused 2 more connection(s) in the last 100ms: "
                               "rpc.max-connections-per-peer (1) reached"));
  EXPECT_EQ(linesContaining("rpc: refused connection from"), 1u);
}

}  // namespace
}  // namespace regent::rpc

// What the RPC server admits before a connection has authenticated: the pre-authentication
// message cap (checked from the frame's segment table), the authentication deadline, and the
// caps on open connections in total and per peer address. Real loopback sockets, one process.
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
                                   return kj::heap<TestMaster>("m1", record_);
                                 }));
    if (!started.ok()) throw std::runtime_error(started.error().message);
    server_ = kj::mv(started).value();
  }

  // A raw TCP connection to the server, and the address the server sees it from.
  struct RawConnection {
    kj::Own<kj::AsyncIoStream> stream;
    std::string peer;
  };
  RawConnection connectRaw() {
    auto address = runBounded(loop_, network().parseAddress(loopback(server_->port())));
    auto stream = runBounded(loop_, address->connect());
    sockaddr_in local{};
    uint length = sizeof(local);
    stream->getsockname(reinterpret_cast<sockaddr*>(&local), &length);
    return {kj::mv(stream), loopback(ntohs(local.sin_port))};
  }

  // Reads until the server ends the stream (EOF or a reset); false if it is still open after the
  // tests' bound.
  bool endedByServer(kj::AsyncIoStream& stream) {
    char buffer[4096];
    for (;;) {
      bool ended = false;
      KJ_IF_MAYBE (problem, kj::runCatchingExceptions([&] {
                     ended = runBounded(loop_, stream.tryRead(buffer, 1, sizeof buffer)) == 0;
                   })) {
        return problem->getType() == kj::Exception::Type::DISCONNECTED;
      }
      if (ended) return true;
    }
  }

  std::ostringstream log_;
  EventLoop loop_;
  std::shared_ptr<TestMasterRecord> record_ = std::make_shared<TestMasterRecord>();
  std::vector<kj::Own<ConnectionGate>> gates_;
  kj::Own<RpcServer> server_;
};

RpcOptions requiringAuthentication() {
  RpcOptions options;
  options.requireAuthentication = true;
  return options;
}

// ---- The pre-authentication message cap ---------------------------------------------------

TEST_F(RpcAdmission, AFrameAnnouncingTenMebibytesBeforeAuthenticationIsDroppedWithoutItsBody) {
  serve(requiringAuthentication());
  RawConnection rogue = connectRaw();
  // One segment of 10 MiB announced (segment count - 1 = 0, then the size in words); the body
  // never comes. Below rpc.max-message-size (16MiB), so only the pre-authentication cap refuses it.
  const uint32_t words = 10 * 1024 * 1024 / 8;
  const kj::byte header[8] = {0, 0, 0, 0, kj::byte(words), kj::byte(words >> 8),
                              kj::byte(words >> 16), kj::byte(words >> 24)};
  runBounded(loop_, rogue.stream->write(header, sizeof header));

  EXPECT_TRUE(endedByServer(*rogue.stream));
  ASSERT_TRUE(runUntil(loop_, [&] { return server_->connectionCount() == 0; }));
  EXPECT_THAT(log(), HasSubstr("rpc: dropped connection from " + rogue.peer +
                               ": message larger than rpc.pre-auth-max-message-size (64KiB) "
                               "before authentication"));
}

}  // namespace
}  // namespace regent::rpc

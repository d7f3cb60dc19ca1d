// Helpers for the transport tests: a MasterBootstrap/DispatcherGateway pair that names its
// server and can hang, servers on loopback, and bounded runs of the loop.
#pragma once

#include <gtest/gtest.h>
#include <kj/async-io.h>
#include <kj/common.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "rpc/rpc_server.h"
#include "rpc/schema/gateways.capnp.h"
#include "tests/fixtures/loop_wait_test_util.h"

namespace regent::rpc::testing {

constexpr Duration kBound{10000};  // Longest any single wait in these tests may take.

// What a TestMaster has seen; shared so tests can read it after the server is gone.
struct TestMasterRecord {
  uint64_t hangingCalls = 0;       // handOver calls received (they never answer).
  uint64_t cancelledCalls = 0;     // Of those, cancelled by the caller or the connection's end.
  std::vector<std::string> peers;  // The peer address of each bootstrap the factory made.
  uint64_t destroyed = 0;          // TestMasters destroyed (the server let go of them).
};

// leaderInfo answers with contender.masterId = `name`; handOver never answers; dispatcher
// returns a DispatcherGateway whose submitJob echoes the graph's job id (a way to send large
// messages).
class TestMaster final : public wire::MasterBootstrap::Server {
 public:
  TestMaster(std::string name, std::shared_ptr<TestMasterRecord> record)
      : name_(std::move(name)), record_(std::move(record)) {}
  ~TestMaster() noexcept { ++record_->destroyed; }

  kj::Promise<void> leaderInfo(LeaderInfoContext context) override {
    auto results = context.getResults();
    results.initLeader().setUnknown();
    results.initContender().setMasterId(name_);
    return kj::READY_NOW;
  }

  kj::Promise<void> handOver(HandOverContext context) override {
    // Cap'n Proto 0.9 runs a call to completion even after the caller gave up unless the
    // server allows cancellation.
    context.allowCancellation();
    ++record_->hangingCalls;
    return kj::Promise<void>(kj::NEVER_DONE).attach(kj::defer([record = record_] {
      ++record->cancelledCalls;
    }));
  }

  kj::Promise<void> dispatcher(DispatcherContext context) override;

 private:
  std::string name_;
  std::shared_ptr<TestMasterRecord> record_;
};

class EchoDispatcher final : public wire::DispatcherGateway::Server {
 public:
  kj::Promise<void> submitJob(SubmitJobContext context) override {
    context.getResults().setJobId(context.getParams().getJobGraph().getJobId());
    return kj::READY_NOW;
  }
};

inline kj::Promise<void> TestMaster::dispatcher(DispatcherContext context) {
  context.getResults().setDispatcher(kj::heap<EchoDispatcher>());
  return kj::READY_NOW;
}

// runLoopBounded and runLoopUntil (loop_wait_test_util.h) with these tests' bound.
template <typename T>
T runBounded(EventLoop& loop, kj::Promise<T> promise) {
  return regent::testing::runLoopBounded(loop, kj::mv(promise), kBound, "the transport test's call");
}

inline bool runUntil(EventLoop& loop, const std::function<bool()>& condition) {
  return regent::testing::runLoopUntil(loop, condition, kBound);
}

// An RpcServer on loopback serving a TestMaster called `name`; port 0 picks a free port.
inline kj::Own<RpcServer> startServer(EventLoop& loop, const std::string& name,
                                      std::shared_ptr<TestMasterRecord> record,
                                      RpcOptions options = {}, uint16_t port = 0) {
  auto started = runBounded(
      loop,
      RpcServer::listen(loop.io().getNetwork(), loop.timer(), "127.0.0.1:" + std::to_string(port),
                        options, [name, record](const RpcPeer& peer) -> capnp::Capability::Client {
                          record->peers.push_back(peer.address);
                          return kj::heap<TestMaster>(name, record);
                        }));
  if (!started.ok()) throw std::runtime_error(started.error().message);
  return kj::mv(started).value();
}

inline std::string loopback(uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

}  // namespace regent::rpc::testing

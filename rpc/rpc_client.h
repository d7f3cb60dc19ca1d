// One logical Cap'n Proto RPC connection to a master (workers and clients dial out; masters never
// dial them, docs/architecture.md): connects, reconnects with backoff when the connection is
// lost, and moves to another address when told the leader changed.
#pragma once

#include <capnp/capability.h>
#include <kj/async-io.h>
#include <kj/timer.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/time.h"
#include "common/backoff.h"
#include "rpc/rpc_options.h"

namespace regent::rpc {

// The life of an RpcClient:
//   kConnecting -> kConnected -> kWaitingToReconnect -> kConnecting -> ... ; any -> kClosed.
// A failed attempt also goes kConnecting -> kWaitingToReconnect.
enum class RpcClientState { kConnecting, kConnected, kWaitingToReconnect, kClosed };

// A two-party RPC client (rpc/lean_vat_network.h, client side) that keeps one connection to
// `address` alive. Each attempt resolves "host:port" through the kj network and connects,
// bounded by RpcOptions::callTimeout. After a failed attempt or a lost connection it waits
// ExponentialBackoff(reconnectInitial, reconnectMax) on `timer` and tries again, forever, until
// closed; the backoff starts over once a server has answered the bootstrap request. Incoming
// messages are limited to RpcOptions::maxMessageSize. Lost connections and failed attempts are
// logged with the reason (the server's Abort reason when it sent one).
//
// Capabilities obtained through a connection break (calls throw DISCONNECTED) when that
// connection ends; callers then ask bootstrap() again, which waits for the next connection.
// The client's own capabilities passed in calls are served back over the same connection.
//
// Thread-safety: loop-thread only. Destroying the client closes it (see close()).
class RpcClient final {
 public:
  // Starts the first attempt at once. `network` (the loop's, loop.io().getNetwork(), or one
  // wrapped for TLS) and `timer` (the loop's, or a manual kj::TimerImpl in tests) must outlive
  // the client. `jitterForTests` replaces the backoff's random source (numbers in [0, 1]).
  RpcClient(kj::Network& network, kj::Timer& timer, std::string address, RpcOptions options,
            std::function<double()> jitterForTests = nullptr);
  ~RpcClient() noexcept;
  RpcClient(const RpcClient&) = delete;
  RpcClient& operator=(const RpcClient&) = delete;

  // The server's bootstrap capability on the current connection: at once when connected,
  // otherwise when the next connection is established (through any number of reconnects; it
  // has no deadline of its own, so bound it with CallDeadline::apply). Rejects with
  // DISCONNECTED if the client is closed first. Every call on one connection returns the same
  // capability, until releaseBootstrap().
  kj::Promise<capnp::Capability::Client> bootstrap();
  template <typename Interface>
  kj::Promise<typename Interface::Client> bootstrapAs() {
    return bootstrap().then([](capnp::Capability::Client cap) { return cap.castAs<Interface>(); });
  }

  // Drops this client's reference to the current connection's bootstrap, for a caller that has
  // done with it (authentication handed it another capability): once its holders let go too, the
  // server frees it (RpcServer serves a connection's first bootstrap only to its peer). The next
  // bootstrap() on the connection asks the server for a new one.
  void releaseBootstrap();

  // Resolves when the connection current at the call ends; at once when there is none. It does
  // not wait for the reconnect (bootstrap() does).
  kj::Promise<void> onDisconnect();

  // Re-targets the client (for example at a new leader): drops the current connection or
  // attempt, forgets the backoff and connects to `address` at once. Callers holding
  // capabilities of the old connection see DISCONNECTED. With the address already current it
  // only skips a pending backoff wait; while connected or connecting it does nothing.
  void setAddress(std::string address);
  const std::string& address() const { return address_; }

  // Drops the connection, stops reconnecting and rejects pending bootstrap() calls with
  // DISCONNECTED. Idempotent; the destructor calls it.
  void close();

  RpcClientState state() const { return state_; }
  // Connection attempts started so far (the first one included).
  uint64_t attempts() const { return attempts_; }
  // Connections established so far.
  uint64_t connectionsEstablished() const { return established_; }
  // Failed attempts and lost connections since the backoff last started over.
  uint32_t consecutiveFailures() const { return backoff_.failures(); }
  // Why the last attempt failed or the last connection ended ("" before any), as logged:
  // "cannot connect to 10.0.0.7:6123: connect(): Connection refused".
  const std::string& lastFailure() const { return lastFailure_; }
  // The backoff delays waited so far, in order (the latest 1000).
  const std::vector<Duration>& backoffDelaysForTests() const { return delays_; }

 private:
  struct Connection;

  void start(Duration delay);
  kj::Promise<void> run(Duration delay);
  kj::Promise<void> connectOnce();
  kj::Promise<void> connected(kj::Own<kj::AsyncIoStream> stream);
  kj::Promise<void> attemptFailed(const kj::Exception& exception);
  kj::Promise<void> connectionLost();

  kj::Network& network_;
  kj::Timer& timer_;
  std::string address_;
  const RpcOptions options_;
  ExponentialBackoff backoff_;
  RpcClientState state_ = RpcClientState::kConnecting;
  uint64_t attempts_ = 0;
  uint64_t established_ = 0;
  std::vector<Duration> delays_;
  std::string lastFailure_;
  std::vector<kj::Own<kj::PromiseFulfiller<capnp::Capability::Client>>> waiters_;
  kj::Own<Connection> connection_;
  // The attempt, backoff wait or connection watch in progress; replaced by setAddress().
  kj::Maybe<kj::Promise<void>> task_;
};

}  // namespace regent::rpc

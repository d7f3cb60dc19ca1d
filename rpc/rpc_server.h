// The Cap'n Proto RPC listener of a process (docs/wire.md): accepts TCP connections on the loop
// and serves each with its own two-party RPC system and a bootstrap capability.
#pragma once

#include <capnp/capability.h>
#include <kj/async-io.h>
#include <kj/function.h>
#include <kj/refcount.h>
#include <kj/timer.h>

#include <cstdint>
#include <string>

#include "common/result.h"
#include "common/task_errors.h"
#include "rpc/rpc_options.h"

namespace regent::rpc {

// The authentication state of one accepted connection, shared by the server and whatever the
// bootstrap factory built for that connection (keep a reference with kj::addRef). A connection
// starts unauthenticated unless the server was told that no authentication is required
// (RpcServer::listen's `requireAuthentication`); the bootstrap marks it authenticated once the
// peer has proven who it is. Loop-thread only.
class ConnectionGate final : public kj::Refcounted {
 public:
  explicit ConnectionGate(bool authenticated) : authenticated_(authenticated) {}

  bool authenticated() const { return authenticated_; }
  // Marks the connection authenticated and runs the server's hook (set by RpcServer), which
  // lifts the limits an unauthenticated connection is held to. Idempotent; harmless once the
  // connection has closed.
  void markAuthenticated() {
    if (authenticated_) return;
    authenticated_ = true;
    KJ_IF_MAYBE (hook, onAuthenticated_) {
      (*hook)();
    }
  }
  // Server side: what markAuthenticated() runs, or nothing (the connection is gone).
  void setOnAuthenticated(kj::Maybe<kj::Function<void()>> hook) { onAuthenticated_ = kj::mv(hook); }

 private:
  bool authenticated_;
  kj::Maybe<kj::Function<void()>> onAuthenticated_;
};

// The far end of one accepted connection, as the bootstrap factory sees it.
struct RpcPeer {
  uint64_t connectionId = 0;  // 1, 2, ... in accept order, unique per server.
  std::string address;        // "127.0.0.1:40312", "[::1]:40312", or "unknown peer".
  // The common name of the verified client certificate (mutual TLS), empty on plain TCP or when
  // the client presented none.
  std::string tlsCommonName;
  // This connection's authentication state; never null. Mutable so that the factory, which sees
  // a const RpcPeer, can keep a reference (kj::addRef(*peer.gate)) and mark it authenticated.
  mutable kj::Own<ConnectionGate> gate;
};

// Serves Cap'n Proto RPC (capnp::TwoPartyVatNetwork, server side) on every connection accepted
// from one listening socket. Incoming messages are read with ReaderOptions from
// RpcOptions::maxMessageSize: a peer that sends a larger message, or bytes that are not Cap'n
// Proto RPC, has its connection aborted by Cap'n Proto; the server then logs one warning naming
// the peer and the reason ("rpc: dropped connection from 127.0.0.1:40312: message larger than
// rpc.max-message-size (16MiB)"), counts it in connectionsAborted(), and keeps serving the
// others. Connections that end normally are logged at debug level.
//
// Thread-safety: loop-thread only. Destroying the server stops listening and closes every
// connection at once: calls in flight are cancelled, and peers see DISCONNECTED.
//
// WARNING: Cap'n Proto 0.9 cancels a handler whose caller is gone (its deadline passed, its
// connection dropped, this server destroyed) only if the handler called
// `context.allowCancellation()`; otherwise the handler runs to completion and its answer is
// discarded.
class RpcServer final {
 public:
  // Called once per accepted connection, on the loop, for the capability that connection's
  // bootstrap() returns. It must not throw (if it does, the error is logged and that
  // connection closed).
  using BootstrapFactory = kj::Function<capnp::Capability::Client(const RpcPeer& peer)>;

  // Resolves `bindAddress` ("host:port"; port 0 picks a free port) through `network` and
  // listens on it. Fails (fatal), naming the address and the reason, when the address does not
  // parse or resolve or the port cannot be bound. `network` (the loop's, loop.io().getNetwork(),
  // or one wrapped for TLS) and `timer` must outlive the server.
  static kj::Promise<Result<kj::Own<RpcServer>>> listen(kj::Network& network, kj::Timer& timer,
                                                        std::string bindAddress, RpcOptions options,
                                                        BootstrapFactory bootstrap);
  // Same, every connection bootstrapping the same capability.
  static kj::Promise<Result<kj::Own<RpcServer>>> listen(kj::Network& network, kj::Timer& timer,
                                                        std::string bindAddress, RpcOptions options,
                                                        capnp::Capability::Client bootstrap);

  struct Private;  // Construction goes through listen().
  RpcServer(const Private&, kj::Timer& timer, RpcOptions options, BootstrapFactory bootstrap,
            kj::Own<kj::ConnectionReceiver> receiver, std::string host);
  ~RpcServer() noexcept;
  RpcServer(const RpcServer&) = delete;
  RpcServer& operator=(const RpcServer&) = delete;

  // The port listened on (the chosen one when the bind address asked for port 0).
  uint16_t port() const { return port_; }
  // The bind address's host with the actual port: "127.0.0.1:40312", "0.0.0.0:6123".
  const std::string& listenAddress() const { return listenAddress_; }

  // Connections open now.
  size_t connectionCount() const { return open_; }
  // Connections accepted so far.
  uint64_t connectionsAccepted() const { return accepted_; }
  // Connections this side aborted because of what the peer sent (malformed or oversized
  // messages, protocol errors), so far.
  uint64_t connectionsAborted() const { return aborted_; }

 private:
  struct Connection;

  kj::Promise<void> acceptLoop();
  void adopt(kj::Own<kj::AsyncIoStream> stream);
  void connectionEnded(Connection& connection);

  kj::Timer& timer_;
  const RpcOptions options_;
  BootstrapFactory bootstrap_;
  kj::Own<kj::ConnectionReceiver> receiver_;
  uint16_t port_ = 0;
  std::string listenAddress_;
  size_t open_ = 0;
  uint64_t accepted_ = 0;
  uint64_t aborted_ = 0;
  // A connection task ends when its peer goes away: routine, logged at debug.
  TaskFailureLogger errorHandler_{"rpc: connection", spdlog::level::debug};
  // Declared after the counters: connections update them while being destroyed.
  kj::TaskSet connections_;
  kj::Promise<void> accepting_;
};

}  // namespace regent::rpc

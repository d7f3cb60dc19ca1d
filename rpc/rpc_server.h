// The Cap'n Proto RPC listener of a process (docs/wire.md): accepts TCP connections on the loop
// and serves each with its own two-party RPC system and a bootstrap capability.
#pragma once

#include <capnp/capability.h>
#include <kj/async-io.h>
#include <kj/function.h>
#include <kj/refcount.h>
#include <kj/timer.h>

#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>

#include "common/accept_loop.h"
#include "common/result.h"
#include "common/task_set_error_logger.h"
#include "common/time.h"
#include "rpc/connection_gate.h"
#include "rpc/rpc_options.h"

namespace regent::rpc {

// The identity RpcNetwork's TLS listener gives (kj::AuthenticatedStream::peerIdentity) to a
// connection whose client presented a certificate chaining to rpc.tls.ca; RpcServer copies its
// common name into RpcPeer::tlsCommonName. Every other accepted connection carries kj's own
// identities, which name no certificate.
class VerifiedClientCertificate final : public kj::PeerIdentity {
 public:
  explicit VerifiedClientCertificate(std::string commonName) : commonName_(std::move(commonName)) {}

  const std::string& commonName() const { return commonName_; }
  kj::String toString() override { return kj::str("TLS client CN=", commonName_.c_str()); }

 private:
  std::string commonName_;
};

// Internal to rpc/: the caps on connections held at once, in total and per peer IP address
// (rpc.max-connections, rpc.max-connections-per-peer), with their refusal counters and a log
// that cannot flood. The first refusal of a burst is a warning naming the peer, the option and
// its value; later ones are counted and summed up in one line per interval (10 s) while they
// continue; an interval with none ends the burst. RpcServer keeps one for the connections it
// serves, RpcNetwork's TLS listener one for those still in their handshake. Loop-thread only;
// `timer` must outlive it, and it must outlive every Slot it gave out.
class ConnectionCaps final {
 public:
  // A place held by one connection; destroying it frees the place.
  class Slot;

  // `holding` ends the first warning of a burst: "" or " (in TLS handshakes)".
  ConnectionCaps(kj::Timer& timer, uint64_t maxTotal, uint64_t maxPerPeer, std::string holding);
  ~ConnectionCaps() noexcept;
  ConnectionCaps(const ConnectionCaps&) = delete;
  ConnectionCaps& operator=(const ConnectionCaps&) = delete;

  // A place for one more connection from `address` ("10.0.0.7:40312"), or null when either cap
  // is reached: that refusal is counted and logged.
  kj::Maybe<kj::Own<Slot>> admit(const std::string& address);

  uint64_t held() const { return held_; }
  uint64_t refusedOverTotal() const { return refusedOverTotal_; }
  uint64_t refusedOverPeer() const { return refusedOverPeer_; }
  void setLogIntervalForTests(Duration interval);

 private:
  class RefusalLog;
  void release(const std::string& host);

  const uint64_t maxTotal_;
  const uint64_t maxPerPeer_;
  uint64_t held_ = 0;
  uint64_t refusedOverTotal_ = 0;
  uint64_t refusedOverPeer_ = 0;
  std::unordered_map<std::string, uint64_t> heldPerPeer_;  // No entry for none.
  kj::Own<RefusalLog> totalLog_;
  kj::Own<RefusalLog> peerLog_;
};

class ConnectionCaps::Slot final {
 public:
  Slot(ConnectionCaps& caps, std::string host) : caps_(caps), host_(std::move(host)) {}
  ~Slot() noexcept { caps_.release(host_); }
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;

 private:
  ConnectionCaps& caps_;
  const std::string host_;
};

// Internal to rpc/: a listener that holds accepted connections for a while before accept()
// hands them out (RpcNetwork's TLS listener, during handshakes). RpcServer::listen gives it the
// server's caps, which it applies to the connections it holds, counted apart from those served.
class HoldingConnectionReceiver : public kj::ConnectionReceiver {
 public:
  // Called once, before the loop runs again after listen().
  virtual void capHeldConnections(uint64_t maxTotal, uint64_t maxPerPeer) = 0;
  // The caps set by capHeldConnections(), or null before.
  virtual kj::Maybe<const ConnectionCaps&> heldConnectionCaps() const = 0;
  // The loop accepting from the listening socket itself (RpcServer::listener()).
  virtual AcceptLoop& socketAccepts() = 0;
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
  // What the bootstrap factory keeps for this connection across its calls (a connection that
  // asks for its bootstrap again gets a new one built around the same state): null until the
  // factory sets it; the server holds it as long as the connection.
  mutable kj::Own<kj::Refcounted> bootstrapState;
};

// Serves Cap'n Proto RPC (rpc/lean_vat_network.h, server side) on every connection accepted
// from one listening socket. Incoming messages are read with ReaderOptions from
// RpcOptions::maxMessageSize: a peer that sends a larger message, or bytes that are not Cap'n
// Proto RPC, has its connection aborted by Cap'n Proto; the server then logs one warning naming
// the peer and the reason ("rpc: dropped connection from 127.0.0.1:40312: message larger than
// rpc.max-message-size (16MiB)"), counts it in connectionsAborted(), and keeps serving the
// others. Connections that end normally are logged at debug level.
//
// Limits, all counted and logged naming the peer and the option (docs/wire.md, "Admission"):
//   - Caps on open connections (RpcOptions::maxConnections in total, maxConnectionsPerPeer from
//     one IP address): a connection over either is closed as soon as it is accepted, before
//     the bootstrap factory sees it. The first refusal of a burst is a warning; further ones
//     are summed up in one line per 10 s while they continue, so a flood cannot flood the log
//     (ConnectionCaps). A listener that holds connections before handing them out (TLS
//     handshakes, HoldingConnectionReceiver) applies the same caps to those it holds.
//   - While a connection's gate is not authenticated (RpcOptions::requireAuthentication):
//     a message larger than preAuthMaxMessageSize is refused from its frame's segment table,
//     before its body is read, and the connection aborted (a subset of connectionsAborted());
//     and a connection still not authenticated after authTimeout is closed by the server,
//     which sends it an Abort naming rpc.auth-timeout first (best effort).
//     ConnectionGate::markAuthenticated() lifts both at once (rpc.max-message-size applies
//     from the next message on). The check happens when a frame's segment table arrives, so a
//     client must wait for its authentication to be answered before sending a larger message.
//   - Authenticated or not: a connection over which no byte crossed, either way, for
//     RpcOptions::idleTimeout, and one holding part of a message that has not arrived whole
//     within messageTimeout of its first bytes, are closed with an Abort naming the option
//     (rpc.idle-timeout, rpc.message-timeout). Checked every quarter of the shorter one, so a
//     connection goes at most that much later.
//
// Accepting never stops for good (common/accept_loop.h): out of descriptors or memory, the
// listener counts, warns, closes what waits in the backlog and accepts again after a backoff;
// listener() says since when it fails.
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
  // connection closed). The connection's first Bootstrap request takes that capability, and the
  // server keeps no reference to it: it lives as long as the peer holds it. A later Bootstrap
  // request on the same connection calls the factory again (an exception then fails that
  // request only), at most 7 times per connection (each such bootstrap lives as long as the
  // peer holds it, so repeating the request must not pile them up); beyond that the request
  // fails, naming the limit.
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
  // Connections accepted and served so far (not those refused by a cap).
  uint64_t connectionsAccepted() const { return accepted_; }
  // Connections this side aborted because of what the peer sent (malformed or oversized
  // messages, protocol errors), so far.
  uint64_t connectionsAborted() const { return aborted_; }
  // Of those, connections dropped for a message over RpcOptions::preAuthMaxMessageSize sent
  // before authenticating.
  uint64_t connectionsDroppedBeforeAuthentication() const { return droppedBeforeAuthentication_; }
  // Connections closed because they had not authenticated within RpcOptions::authTimeout.
  uint64_t connectionsTimedOutBeforeAuthentication() const { return authTimeouts_; }
  // Connections closed at accept because RpcOptions::maxConnections were open (or held in TLS
  // handshakes).
  uint64_t connectionsRefusedOverTotalCap() const;
  // Connections closed at accept because RpcOptions::maxConnectionsPerPeer were open (or held in
  // TLS handshakes) from the same IP address.
  uint64_t connectionsRefusedOverPeerCap() const;

  // Connections closed for rpc.idle-timeout, and for rpc.message-timeout.
  uint64_t connectionsIdleTimedOut() const { return idleTimeouts_; }
  uint64_t connectionsMessageTimedOut() const { return messageTimeouts_; }
  // Connections closed through their gate (ConnectionGate::close).
  uint64_t connectionsClosedByGate() const { return gateCloses_; }

  // The loop accepting from the listening socket (the TLS listener's, with TLS): its failures by
  // reason, and since when it fails.
  AcceptLoop& listener();
  const AcceptLoop& listener() const { return const_cast<RpcServer*>(this)->listener(); }

  // How often refusals by a cap are summed up in the log (10 s).
  void setRefusalLogIntervalForTests(Duration interval);

 private:
  struct Connection;

  void adopt(kj::AuthenticatedStream accepted);
  // Schedules the end of `connection`: connectionEnded(), then its destruction.
  void endConnection(std::list<Connection>::iterator connection);
  void connectionEnded(Connection& connection);
  // Checks every connection's idle and message deadlines each `tick`.
  kj::Promise<void> sweep(Duration tick);

  kj::Timer& timer_;
  const RpcOptions options_;
  BootstrapFactory bootstrap_;
  kj::Own<kj::ConnectionReceiver> receiver_;
  uint16_t port_ = 0;
  std::string listenAddress_;
  size_t open_ = 0;
  uint64_t accepted_ = 0;
  uint64_t aborted_ = 0;
  uint64_t droppedBeforeAuthentication_ = 0;
  uint64_t authTimeouts_ = 0;
  uint64_t idleTimeouts_ = 0;
  uint64_t messageTimeouts_ = 0;
  uint64_t gateCloses_ = 0;
  // The caps on connections served; connections hold slots of it while being destroyed.
  ConnectionCaps caps_;
  // The receiver's own caps, when it holds connections before handing them out.
  kj::Maybe<HoldingConnectionReceiver&> holding_;
  TaskSetErrorLogger errorHandler_{"rpc: connection end", spdlog::level::warn};
  // Connections being ended (endConnection).
  kj::TaskSet ends_;
  // Declared after the counters: connections update them while being destroyed.
  std::list<Connection> connections_;
  kj::Promise<void> sweeper_ = nullptr;
  kj::Own<AcceptLoop> accepting_;
};

}  // namespace regent::rpc

// The RPC listener (see rpc_server.h).
#include "rpc/rpc_server.h"

#include <capnp/rpc-twoparty.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <iterator>

#include "common/host_port.h"
#include "common/units.h"
#include "rpc/abort_watching_stream.h"
#include "rpc/lean_vat_network.h"

namespace regent::rpc {
namespace {

kj::Duration toKj(Duration duration) { return duration.count() * kj::MILLISECONDS; }

constexpr Duration kRefusalLogInterval{10000};

}  // namespace

// The log of ConnectionCaps' refusals by one cap (see ConnectionCaps).
class ConnectionCaps::RefusalLog final {
 public:
  RefusalLog(kj::Timer& timer, std::string option, uint64_t cap, std::string holding)
      : timer_(timer), option_(std::move(option)), cap_(cap), holding_(std::move(holding)) {}

  void setInterval(Duration interval) { interval_ = interval; }

  // `peer` was refused; `detail` follows the option in the first warning of a burst (" for
  // 10.0.0.7").
  void refused(const std::string& peer, const std::string& detail) {
    if (inBurst_) {
      ++unreported_;
      return;
    }
    spdlog::warn(
        "rpc: refused connection from {}: {} ({}) reached{}{}; further refusals are "
        "summed up every {}",
        peer, option_, cap_, detail, holding_, formatDuration(interval_));
    inBurst_ = true;
    summaries_ = summarize().eagerlyEvaluate(nullptr);
  }

 private:
  kj::Promise<void> summarize() {
    return timer_.afterDelay(toKj(interval_)).then([this]() -> kj::Promise<void> {
      if (unreported_ == 0) {
        inBurst_ = false;
        return kj::READY_NOW;
      }
      spdlog::warn("rpc: refused {} more connection(s) in the last {}: {} ({}) reached{}",
                   unreported_, formatDuration(interval_), option_, cap_, holding_);
      unreported_ = 0;
      return summarize();
    });
  }

  kj::Timer& timer_;
  const std::string option_;
  const uint64_t cap_;
  const std::string holding_;
  Duration interval_ = kRefusalLogInterval;
  bool inBurst_ = false;
  uint64_t unreported_ = 0;
  kj::Promise<void> summaries_ = kj::READY_NOW;
};

ConnectionCaps::ConnectionCaps(kj::Timer& timer, uint64_t maxTotal, uint64_t maxPerPeer,
                               std::string holding)
    : maxTotal_(maxTotal),
      maxPerPeer_(maxPerPeer),
      totalLog_(kj::heap<RefusalLog>(timer, "rpc.max-connections", maxTotal, holding)),
      peerLog_(kj::heap<RefusalLog>(timer, "rpc.max-connections-per-peer", maxPerPeer, holding)) {}

ConnectionCaps::~ConnectionCaps() noexcept = default;

kj::Maybe<kj::Own<ConnectionCaps::Slot>> ConnectionCaps::admit(const std::string& address) {
  std::string host = hostOf(address);
  if (held_ >= maxTotal_) {
    ++refusedOverTotal_;
    totalLog_->refused(address, "");
    return nullptr;
  }
  uint64_t& fromPeer = heldPerPeer_[host];
  if (fromPeer >= maxPerPeer_) {
    ++refusedOverPeer_;
    peerLog_->refused(address, " for " + host);
    return nullptr;
  }
  ++fromPeer;
  ++held_;
  return kj::heap<Slot>(*this, std::move(host));
}

void ConnectionCaps::release(const std::string& host) {
  --held_;
  auto found = heldPerPeer_.find(host);
  if (found != heldPerPeer_.end() && --found->second == 0) heldPerPeer_.erase(found);
}

void ConnectionCaps::setLogIntervalForTests(Duration interval) {
  totalLog_->setInterval(interval);
  peerLog_->setInterval(interval);
}

// Why this side closed a connection.
enum class CloseCause { kNone, kAuthTimeout, kIdleTimeout, kMessageTimeout, kGate };

// One accepted connection. Member order is destruction order in reverse: the RPC system goes
// first, the socket last. It holds no promise of its own once authenticated (an idle leader
// keeps thousands of these): the server's sweep checks its deadlines, and its end is scheduled
// on the server (RpcServer::endConnection) by whichever comes first, the RPC system letting go
// of it or this side closing it.
struct RpcServer::Connection final : private LeanVatNetwork::DisconnectHandler,
                                      private capnp::BootstrapFactory<capnp::rpc::twoparty::VatId> {
  Connection(RpcServer& server, kj::Own<ConnectionCaps::Slot> slotParam,
             kj::Own<kj::AsyncIoStream> streamParam, RpcPeer&& peerParam)
      : server(server),
        slot(kj::mv(slotParam)),
        peer(kj::mv(peerParam)),
        stream(kj::mv(streamParam)),
        messages(*stream),
        network(messages, capnp::rpc::twoparty::Side::SERVER, readerOptionsFor(server.options_),
                *this),
        lastActive(server.timer_.now()) {
    // Limits first, so that they hold from the first byte; then the bootstrap, which may mark
    // the gate at once (a peer its TLS certificate identifies) and so lift them.
    if (!peer.gate->authenticated()) {
      messages.setPreAuthenticationLimit(server.options_.preAuthMaxMessageSize);
      authDeadline = server.timer_.afterDelay(toKj(server.options_.authTimeout))
                         .then([this] {
                           // Tells the peer why; the RPC system goes without a word.
                           close(CloseCause::kAuthTimeout,
                                 "not authenticated within " +
                                     formatDuration(this->server.options_.authTimeout) +
                                     " (rpc.auth-timeout)");
                         })
                         .eagerlyEvaluate(nullptr);
      peer.gate->setOnAuthenticated(kj::Function<void()>([this] {
        messages.setPreAuthenticationLimit(std::nullopt);
        authDeadline = nullptr;
      }));
    }
    peer.gate->setOnClose(kj::Function<void(const std::string&)>(
        [this](const std::string& reason) { close(CloseCause::kGate, reason); }));
    KJ_ON_SCOPE_FAILURE({
      peer.gate->setOnAuthenticated(nullptr);
      peer.gate->setOnClose(nullptr);
    });
    firstBootstrap = server.bootstrap_(peer);
    rpcSystem = capnp::makeRpcServer(network, static_cast<BootstrapFactory&>(*this));
    ++server.open_;
  }
  ~Connection() noexcept {
    ending = true;  // Destroying the RPC system below tells rpcSystemDisconnected(): nothing to do.
    peer.gate->setOnAuthenticated(nullptr);
    peer.gate->setOnClose(nullptr);
    --server.open_;
  }

  // Closes the connection for `cause`, telling the peer `reason` first (best effort).
  void close(CloseCause cause, const std::string& reason) {
    if (closedFor != CloseCause::kNone || ending) return;
    closedFor = cause;
    closedBecause = reason;
    messages.sendAbort(reason);
    end();
  }

  // The peer or the RPC system ended the connection.
  void rpcSystemDisconnected() noexcept override { end(); }

  // The peer's Bootstrap request: the first takes the capability made at accept, which then
  // lives only as long as the peer holds it (a pre-authentication bootstrap the peer let go of
  // after authenticating costs nothing more); each later one is made anew.
  // At most kMaxBootstraps per connection: each one made anew lives as long as the peer holds
  // it, so a peer repeating the request must not pile them up.
  capnp::Capability::Client createFor(capnp::rpc::twoparty::VatId::Reader) override {
    KJ_IF_MAYBE (first, firstBootstrap) {
      capnp::Capability::Client taken = kj::mv(*first);
      firstBootstrap = nullptr;
      return taken;
    }
    if (++bootstrapsMade > kMaxBootstraps) {
      kj::throwFatalException(KJ_EXCEPTION(
          FAILED, kj::str("more than ", kMaxBootstraps,
                          " Bootstrap requests on one connection; connect again for more")));
    }
    return server.bootstrap_(peer);
  }

  void end() {
    if (ending) return;
    ending = true;
    // Ended while the server was still adding it (its bootstrap factory closed it at once):
    // adopt() schedules the end once it is listed.
    if (listed) server.endConnection(self);
  }

  // rpc.idle-timeout and rpc.message-timeout at `now` (RpcServer::sweep).
  void checkDeadlines(kj::TimePoint now) {
    const RpcOptions& options = server.options_;
    if (messages.bytesTransferred() != transferred) {
      transferred = messages.bytesTransferred();
      lastActive = now;
    }
    if (!messages.partialMessageHeld()) {
      partialSince = nullptr;
    } else if (partialSince == nullptr || messages.messagesRead() != partialAfter) {
      partialSince = now;
      partialAfter = messages.messagesRead();
    }
    KJ_IF_MAYBE (since, partialSince) {
      if (options.messageTimeout > Duration::zero() &&
          now - *since >= toKj(options.messageTimeout)) {
        close(CloseCause::kMessageTimeout, "message not received whole within " +
                                               formatDuration(options.messageTimeout) +
                                               " of its first bytes (rpc.message-timeout)");
        return;
      }
    }
    if (options.idleTimeout > Duration::zero() && now - lastActive >= toKj(options.idleTimeout)) {
      close(CloseCause::kIdleTimeout, "nothing sent or received for " +
                                          formatDuration(options.idleTimeout) +
                                          " (rpc.idle-timeout)");
    }
  }

  RpcServer& server;
  static constexpr uint32_t kMaxBootstraps = 8;

  std::list<Connection>::iterator self;  // Its place in RpcServer::connections_, once listed.
  bool listed = false;
  // Its end is scheduled (or it is being destroyed). Declared before the RPC system, whose
  // destruction reads it (rpcSystemDisconnected).
  bool ending = false;
  uint32_t bootstrapsMade = 1;  // The one made at accept.
  kj::Own<ConnectionCaps::Slot> slot;    // Its place within the caps, freed last.
  const RpcPeer peer;
  kj::Own<kj::AsyncIoStream> stream;
  AbortWatchingMessageStream messages;
  LeanVatNetwork network;
  kj::Maybe<capnp::Capability::Client> firstBootstrap;  // Until the first Bootstrap request.
  kj::Maybe<capnp::RpcSystem<capnp::rpc::twoparty::VatId>> rpcSystem;  // Set by the constructor.
  CloseCause closedFor = CloseCause::kNone;
  std::string closedBecause;  // What the peer was told.
  // The idle and message deadlines' view: bytes seen at the last check, and when they changed;
  // since when (and after how many whole messages) part of a message is held.
  uint64_t transferred = 0;
  kj::TimePoint lastActive;
  kj::Maybe<kj::TimePoint> partialSince;
  uint64_t partialAfter = 0;
  // Pending while the connection has not authenticated; declared last, so it goes first.
  kj::Maybe<kj::Promise<void>> authDeadline;
};

struct RpcServer::Private {};

kj::Promise<Result<kj::Own<RpcServer>>> RpcServer::listen(kj::Network& network, kj::Timer& timer,
                                                          std::string bindAddress,
                                                          RpcOptions options,
                                                          BootstrapFactory bootstrap) {
  auto failed = [bindAddress](kj::Exception&& exception) -> Result<kj::Own<RpcServer>> {
    return Error::fatal("RPC server cannot listen on " + bindAddress + ": " +
                        exception.getDescription().cStr());
  };
  return network.parseAddress(bindAddress)
      .then([&timer, bindAddress, options, bootstrap = kj::mv(bootstrap)](
                kj::Own<kj::NetworkAddress> address) mutable -> Result<kj::Own<RpcServer>> {
        kj::Own<kj::ConnectionReceiver> receiver = address->listen();
        return kj::heap<RpcServer>(Private{}, timer, options, kj::mv(bootstrap), kj::mv(receiver),
                                   hostOf(bindAddress));
      })
      .catch_(kj::mv(failed));
}

kj::Promise<Result<kj::Own<RpcServer>>> RpcServer::listen(kj::Network& network, kj::Timer& timer,
                                                          std::string bindAddress,
                                                          RpcOptions options,
                                                          capnp::Capability::Client bootstrap) {
  return listen(network, timer, std::move(bindAddress), options,
                [bootstrap = kj::mv(bootstrap)](const RpcPeer&) mutable { return bootstrap; });
}

RpcServer::RpcServer(const Private&, kj::Timer& timer, RpcOptions options,
                     BootstrapFactory bootstrap, kj::Own<kj::ConnectionReceiver> receiver,
                     std::string host)
    : timer_(timer),
      options_(options),
      bootstrap_(kj::mv(bootstrap)),
      receiver_(kj::mv(receiver)),
      port_(static_cast<uint16_t>(receiver_->getPort())),
      listenAddress_(joinHostPort(host, port_)),
      caps_(timer, options_.maxConnections, options_.maxConnectionsPerPeer, ""),
      ends_(errorHandler_),
      accepting_(kj::heap<AcceptLoop>(
          timer, *receiver_, AcceptLoop::Options{.name = "rpc", .address = listenAddress_},
          [this](kj::AuthenticatedStream&& accepted) { adopt(kj::mv(accepted)); })) {
  // Before the loop runs again, so no connection is held uncapped.
  if (auto* holding = dynamic_cast<HoldingConnectionReceiver*>(receiver_.get())) {
    holding->capHeldConnections(options_.maxConnections, options_.maxConnectionsPerPeer);
    holding_ = *holding;
  }
  // rpc.idle-timeout and rpc.message-timeout, checked on every connection each quarter of the
  // shorter one.
  if (options_.idleTimeout > Duration::zero() || options_.messageTimeout > Duration::zero()) {
    Duration shortest = options_.idleTimeout;
    if (shortest == Duration::zero() ||
        (options_.messageTimeout > Duration::zero() && options_.messageTimeout < shortest)) {
      shortest = options_.messageTimeout;
    }
    sweeper_ = sweep(std::max(Duration(10), shortest / 4)).eagerlyEvaluate([](kj::Exception&& e) {
      spdlog::error("rpc: connection deadlines no longer checked: {}", e.getDescription().cStr());
    });
  }
  if (options_.requireAuthentication) {
    spdlog::info(
        "rpc: listening on {} (max message size {}, {} before authentication, which must "
        "happen within {}; at most {} connections, {} per peer address)",
        listenAddress_, formatSize(options_.maxMessageSize),
        formatSize(options_.preAuthMaxMessageSize), formatDuration(options_.authTimeout),
        options_.maxConnections, options_.maxConnectionsPerPeer);
  } else {
    spdlog::info(
        "rpc: listening on {} (max message size {}; at most {} connections, {} per peer "
        "address)",
        listenAddress_, formatSize(options_.maxMessageSize), options_.maxConnections,
        options_.maxConnectionsPerPeer);
  }
}

RpcServer::~RpcServer() noexcept {
  if (open_ > 0) {
    spdlog::info("rpc: server on {} closing {} connection(s)", listenAddress_, open_);
  }
}

void RpcServer::setRefusalLogIntervalForTests(Duration interval) {
  caps_.setLogIntervalForTests(interval);
}

uint64_t RpcServer::connectionsRefusedOverTotalCap() const {
  uint64_t refused = caps_.refusedOverTotal();
  KJ_IF_MAYBE (holding, holding_) {
    KJ_IF_MAYBE (caps, holding->heldConnectionCaps()) refused += caps->refusedOverTotal();
  }
  return refused;
}

uint64_t RpcServer::connectionsRefusedOverPeerCap() const {
  uint64_t refused = caps_.refusedOverPeer();
  KJ_IF_MAYBE (holding, holding_) {
    KJ_IF_MAYBE (caps, holding->heldConnectionCaps()) refused += caps->refusedOverPeer();
  }
  return refused;
}

AcceptLoop& RpcServer::listener() {
  KJ_IF_MAYBE (holding, holding_) return holding->socketAccepts();
  return *accepting_;
}

void RpcServer::adopt(kj::AuthenticatedStream accepted) {
  const std::string address = peerAddressOf(*accepted.stream);
  kj::Own<ConnectionCaps::Slot> slot;
  KJ_IF_MAYBE (admitted, caps_.admit(address)) {
    slot = kj::mv(*admitted);
  } else {
    return;  // Over a cap: dropping the stream closes the socket before anything is read.
  }

  ++accepted_;
  std::string commonName;
  if (auto* certificate = dynamic_cast<VerifiedClientCertificate*>(accepted.peerIdentity.get())) {
    commonName = certificate->commonName();
  }
  RpcPeer peer{accepted_, address, std::move(commonName),
               kj::refcounted<ConnectionGate>(!options_.requireAuthentication)};
  spdlog::debug("rpc: connection {} from {}{}", peer.connectionId, peer.address,
                peer.tlsCommonName.empty() ? "" : " (TLS client " + peer.tlsCommonName + ")");
  const uint64_t connectionId = peer.connectionId;
  KJ_IF_MAYBE (problem, kj::runCatchingExceptions([&] {
                 // A constructor that throws leaves the list as it was.
                 connections_.emplace_back(*this, kj::mv(slot), kj::mv(accepted.stream),
                                           kj::mv(peer));
               })) {
    // A bootstrap factory that throws breaks its contract; the accept loop must survive it.
    spdlog::error("rpc: cannot serve connection {} from {}: {}", connectionId, address,
                  problem->getDescription().cStr());
    return;
  }
  Connection& connection = connections_.back();
  connection.self = std::prev(connections_.end());
  connection.listed = true;
  if (connection.ending) endConnection(connection.self);
}

void RpcServer::endConnection(std::list<Connection>::iterator connection) {
  // Later, never inside the RPC system that let go of it, nor inside a sweep over the list.
  ends_.add(kj::evalLater([this, connection] {
    connectionEnded(*connection);
    connections_.erase(connection);
  }));
}

kj::Promise<void> RpcServer::sweep(Duration tick) {
  return timer_.afterDelay(toKj(tick)).then([this, tick] {
    const kj::TimePoint now = timer_.now();
    for (Connection& connection : connections_) {
      if (connection.ending) continue;
      // One connection's failure must not end the checks of all the others.
      KJ_IF_MAYBE (problem, kj::runCatchingExceptions([&] { connection.checkDeadlines(now); })) {
        spdlog::error("rpc: checking the deadlines of the connection from {} failed: {}",
                      connection.peer.address, problem->getDescription().cStr());
      }
    }
    return sweep(tick);
  });
}

void RpcServer::connectionEnded(Connection& connection) {
  switch (connection.closedFor) {
    case CloseCause::kAuthTimeout:
      ++authTimeouts_;
      spdlog::warn("rpc: closed connection from {}: not authenticated within {} (rpc.auth-timeout)",
                   connection.peer.address, formatDuration(options_.authTimeout));
      return;
    case CloseCause::kIdleTimeout:
      ++idleTimeouts_;
      spdlog::info(
          "rpc: closed connection from {}: nothing sent or received for {} "
          "(rpc.idle-timeout)",
          connection.peer.address, formatDuration(options_.idleTimeout));
      return;
    case CloseCause::kMessageTimeout:
      ++messageTimeouts_;
      spdlog::warn(
          "rpc: closed connection from {}: a message not received whole within {} of "
          "its first bytes (rpc.message-timeout)",
          connection.peer.address, formatDuration(options_.messageTimeout));
      return;
    case CloseCause::kGate:
      ++gateCloses_;
      spdlog::debug("rpc: closed connection from {}: {}", connection.peer.address,
                    connection.closedBecause);
      return;
    case CloseCause::kNone:
      break;
  }
  const auto& sent = connection.messages.sentAbort();
  if (sent && sent->type != kj::Exception::Type::DISCONNECTED) {
    ++aborted_;
    if (connection.messages.refusedBeforeAuthentication()) ++droppedBeforeAuthentication_;
    spdlog::warn("rpc: dropped connection from {}: {}", connection.peer.address,
                 explainAbort(*sent, options_.maxMessageSize));
    return;
  }
  spdlog::debug("rpc: connection {} from {} closed", connection.peer.connectionId,
                connection.peer.address);
}

}  // namespace regent::rpc

// The RPC listener (see rpc_server.h).
#include "rpc/rpc_server.h"

#include <capnp/rpc-twoparty.h>
#include <spdlog/spdlog.h>

#include "common/host_port.h"
#include "conf/values.h"
#include "rpc/abort_watching_stream.h"

namespace regent::rpc {

// One accepted connection. Member order is destruction order in reverse: the RPC system goes
// first, the socket last.
struct RpcServer::Connection {
  Connection(RpcServer& server, kj::Own<kj::AsyncIoStream> streamParam, RpcPeer&& peerParam)
      : server(server),
        peer(kj::mv(peerParam)),
        stream(kj::mv(streamParam)),
        messages(*stream),
        network(messages, capnp::rpc::twoparty::Side::SERVER, readerOptionsFor(server.options_)),
        rpcSystem(capnp::makeRpcServer(network, server.bootstrap_(peer))) {
    ++server.open_;
  }
  ~Connection() noexcept {
    peer.gate->setOnAuthenticated(nullptr);
    --server.open_;
  }

  RpcServer& server;
  const RpcPeer peer;
  kj::Own<kj::AsyncIoStream> stream;
  AbortWatchingMessageStream messages;
  capnp::TwoPartyVatNetwork network;
  capnp::RpcSystem<capnp::rpc::twoparty::VatId> rpcSystem;
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
      connections_(errorHandler_),
      accepting_(acceptLoop().eagerlyEvaluate(nullptr)) {
  spdlog::info("rpc: listening on {} (max message size {})", listenAddress_,
               formatSize(options_.maxMessageSize));
}

RpcServer::~RpcServer() noexcept {
  if (open_ > 0) {
    spdlog::info("rpc: server on {} closing {} connection(s)", listenAddress_, open_);
  }
}

kj::Promise<void> RpcServer::acceptLoop() {
  return receiver_->accept().then(
      [this](kj::Own<kj::AsyncIoStream>&& stream) {
        adopt(kj::mv(stream));
        return acceptLoop();
      },
      [this](kj::Exception&& exception) {
        // Out of file descriptors and the like: pause rather than spin, then accept again.
        spdlog::warn("rpc: accepting on {} failed: {}; retrying in 100ms", listenAddress_,
                     exception.getDescription().cStr());
        return timer_.afterDelay(100 * kj::MILLISECONDS).then([this] { return acceptLoop(); });
      });
}

void RpcServer::adopt(kj::Own<kj::AsyncIoStream> stream) {
  ++accepted_;
  RpcPeer peer{accepted_, peerAddressOf(*stream), {},
               kj::refcounted<ConnectionGate>(!options_.requireAuthentication)};
  spdlog::debug("rpc: connection {} from {}", peer.connectionId, peer.address);
  const uint64_t connectionId = peer.connectionId;
  const std::string address = peer.address;
  kj::Own<Connection> connection;
  KJ_IF_MAYBE (problem, kj::runCatchingExceptions([&] {
                 connection = kj::heap<Connection>(*this, kj::mv(stream), kj::mv(peer));
               })) {
    // A bootstrap factory that throws breaks its contract; the accept loop must survive it.
    spdlog::error("rpc: cannot serve connection {} from {}: {}", connectionId, address,
                  problem->getDescription().cStr());
    return;
  }
  Connection& ref = *connection;
  connections_.add(ref.network.onDisconnect()
                       .then([this, &ref] { connectionEnded(ref); })
                       .attach(kj::mv(connection)));
}

void RpcServer::connectionEnded(Connection& connection) {
  const auto& sent = connection.messages.sentAbort();
  if (sent && sent->type != kj::Exception::Type::DISCONNECTED) {
    ++aborted_;
    spdlog::warn("rpc: dropped connection from {}: {}", connection.peer.address,
                 explainAbort(*sent, options_.maxMessageSize));
    return;
  }
  spdlog::debug("rpc: connection {} from {} closed", connection.peer.connectionId,
                connection.peer.address);
}

}  // namespace regent::rpc

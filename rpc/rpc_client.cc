// The reconnecting RPC client (see rpc_client.h).
#include "rpc/rpc_client.h"

#include <capnp/message.h>
#include <capnp/rpc-twoparty.h>
#include <spdlog/spdlog.h>

#include "common/units.h"
#include "rpc/abort_watching_stream.h"
#include "rpc/lean_vat_network.h"

namespace regent::rpc {
namespace {

constexpr size_t kDelaysKept = 1000;

kj::Duration toKj(Duration duration) { return duration.count() * kj::MILLISECONDS; }

kj::Exception disconnected(const std::string& message) {
  return kj::Exception(kj::Exception::Type::DISCONNECTED, __FILE__, __LINE__,
                       kj::str(message.c_str()));
}

capnp::Capability::Client bootstrapOf(capnp::RpcSystem<capnp::rpc::twoparty::VatId>& rpc) {
  capnp::MallocMessageBuilder message(8);
  auto vatId = message.initRoot<capnp::rpc::twoparty::VatId>();
  vatId.setSide(capnp::rpc::twoparty::Side::SERVER);
  return rpc.bootstrap(vatId);
}

}  // namespace

// One established connection. Members are destroyed in reverse order: the watches first, the
// socket last.
struct RpcClient::Connection final : private LeanVatNetwork::DisconnectHandler {
  Connection(kj::Own<kj::AsyncIoStream> streamParam, capnp::ReaderOptions readerOptions)
      : stream(kj::mv(streamParam)),
        messages(*stream),
        network(messages, capnp::rpc::twoparty::Side::CLIENT, readerOptions, *this),
        rpcSystem(capnp::makeRpcClient(network)),
        bootstrap(bootstrapOf(rpcSystem)) {}

  void rpcSystemDisconnected() noexcept override { dropped->fulfill(); }

  kj::Own<kj::AsyncIoStream> stream;
  AbortWatchingMessageStream messages;
  // Fulfilled once the RPC system dropped the connection; declared before the network, which
  // fulfills it, so that it outlives it.
  kj::Own<kj::PromiseFulfiller<void>> dropped;
  kj::ForkedPromise<void> disconnected = [this] {
    auto paf = kj::newPromiseAndFulfiller<void>();
    dropped = kj::mv(paf.fulfiller);
    return paf.promise.fork();
  }();
  LeanVatNetwork network;
  capnp::RpcSystem<capnp::rpc::twoparty::VatId> rpcSystem;
  // Asked for when connected, again after releaseBootstrap(); null in between.
  kj::Maybe<capnp::Capability::Client> bootstrap;
  kj::Promise<void> bootstrapAnswered = nullptr;  // Starts the backoff over.

  capnp::Capability::Client currentBootstrap() {
    KJ_IF_MAYBE (held, bootstrap) return *held;
    capnp::Capability::Client asked = bootstrapOf(rpcSystem);
    bootstrap = asked;
    return asked;
  }
};

RpcClient::RpcClient(kj::Network& network, kj::Timer& timer, std::string address,
                     RpcOptions options, std::function<double()> jitterForTests)
    : network_(network),
      timer_(timer),
      address_(std::move(address)),
      options_(options),
      backoff_(options.reconnectInitial, options.reconnectMax, std::move(jitterForTests)) {
  start(Duration::zero());
}

RpcClient::~RpcClient() noexcept { close(); }

kj::Promise<capnp::Capability::Client> RpcClient::bootstrap() {
  if (state_ == RpcClientState::kClosed) {
    return disconnected("RPC client for " + address_ + " closed");
  }
  if (connection_) return connection_->currentBootstrap();
  auto paf = kj::newPromiseAndFulfiller<capnp::Capability::Client>();
  waiters_.push_back(kj::mv(paf.fulfiller));
  return kj::mv(paf.promise);
}

void RpcClient::releaseBootstrap() {
  if (connection_) connection_->bootstrap = nullptr;
}

kj::Promise<void> RpcClient::onDisconnect() {
  if (!connection_) return kj::READY_NOW;
  return connection_->disconnected.addBranch();
}

void RpcClient::setAddress(std::string address) {
  if (state_ == RpcClientState::kClosed) return;
  if (address == address_ && state_ != RpcClientState::kWaitingToReconnect) return;
  if (address != address_) {
    spdlog::info("rpc: client moving from {} to {}", address_, address);
  }
  address_ = std::move(address);
  task_ = nullptr;  // Its continuations use the connection: cancel it first.
  connection_ = nullptr;
  backoff_.reset();
  start(Duration::zero());
}

void RpcClient::close() {
  if (state_ == RpcClientState::kClosed) return;
  state_ = RpcClientState::kClosed;
  task_ = nullptr;
  connection_ = nullptr;
  for (auto& waiter : waiters_) {
    waiter->reject(disconnected("RPC client for " + address_ + " closed"));
  }
  waiters_.clear();
}

void RpcClient::start(Duration delay) {
  task_ = run(delay).eagerlyEvaluate([this](kj::Exception&& exception) {
    // Every step handles its own errors; reaching this is a bug.
    spdlog::error("rpc: client for {} stopped: {}", address_, exception.getDescription().cStr());
  });
}

kj::Promise<void> RpcClient::run(Duration delay) {
  if (delay <= Duration::zero()) return connectOnce();
  state_ = RpcClientState::kWaitingToReconnect;
  delays_.push_back(delay);
  if (delays_.size() > kDelaysKept) delays_.erase(delays_.begin());
  return timer_.afterDelay(toKj(delay)).then([this] { return connectOnce(); });
}

kj::Promise<void> RpcClient::connectOnce() {
  state_ = RpcClientState::kConnecting;
  ++attempts_;
  const std::string address = address_;
  const Duration timeout = options_.callTimeout;
  auto connecting = network_.parseAddress(address).then([](kj::Own<kj::NetworkAddress> resolved) {
    return resolved->connect().attach(kj::mv(resolved));
  });
  auto deadline =
      timer_.afterDelay(toKj(timeout)).then([timeout]() -> kj::Promise<kj::Own<kj::AsyncIoStream>> {
        return disconnected("no connection within " + formatDuration(timeout));
      });
  return connecting.exclusiveJoin(kj::mv(deadline))
      .then([this](kj::Own<kj::AsyncIoStream>&& stream) { return connected(kj::mv(stream)); },
            [this](kj::Exception&& exception) { return attemptFailed(exception); });
}

kj::Promise<void> RpcClient::connected(kj::Own<kj::AsyncIoStream> stream) {
  connection_ = kj::heap<Connection>(kj::mv(stream), readerOptionsFor(options_));
  ++established_;
  state_ = RpcClientState::kConnected;
  spdlog::info("rpc: connected to {}", address_);
  connection_->bootstrapAnswered = KJ_ASSERT_NONNULL(connection_->bootstrap)
                                       .whenResolved()
                                       .then([this] { backoff_.reset(); }, [](kj::Exception&&) {})
                                       .eagerlyEvaluate(nullptr);
  for (auto& waiter : waiters_) waiter->fulfill(connection_->currentBootstrap());
  waiters_.clear();
  return connection_->disconnected.addBranch().then([this] { return connectionLost(); });
}

kj::Promise<void> RpcClient::attemptFailed(const kj::Exception& exception) {
  const Duration delay = backoff_.next();
  const uint32_t failures = backoff_.failures();
  // The first failure in a row is worth a warning; repeats every tenth time.
  const auto level =
      failures == 1 || failures % 10 == 0 ? spdlog::level::warn : spdlog::level::debug;
  lastFailure_ = "cannot connect to " + address_ + ": " + exception.getDescription().cStr();
  spdlog::log(level, "rpc: cannot connect to {} (failure {} in a row): {}; retrying in {}",
              address_, failures, exception.getDescription().cStr(), formatDuration(delay));
  return run(delay);
}

kj::Promise<void> RpcClient::connectionLost() {
  std::string why = "closed by the server";
  if (const auto& abort = connection_->messages.receivedAbort()) {
    why = "the server aborted it: " + explainAbort(*abort, std::nullopt);
  } else if (const auto& sent = connection_->messages.sentAbort();
             sent && sent->type != kj::Exception::Type::DISCONNECTED) {
    why = explainAbort(*sent, options_.maxMessageSize);
  } else if (const auto& error = connection_->messages.readError()) {
    why = explainAbort(*error, options_.maxMessageSize);
  }
  // This runs in a continuation of the connection's disconnect promise, which does not own
  // this continuation, so the connection can go now.
  connection_ = nullptr;
  lastFailure_ = "connection to " + address_ + " lost (" + why + ")";
  const Duration delay = backoff_.next();
  spdlog::warn("rpc: connection to {} lost ({}); reconnecting in {}", address_, why,
               formatDuration(delay));
  return run(delay);
}

}  // namespace regent::rpc

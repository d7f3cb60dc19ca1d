// TcpLeaderLiveness: a held TCP connection to the leader's RPC address; its end followed by a
// refused reconnect is the leader's process gone (docs/leader-election.md, "Fast failover").
#include "leader/tcp_leader_liveness.h"

#include <kj/async-unix.h>
#include <kj/debug.h>
#include <netdb.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "common/backoff.h"
#include "common/errno_text.h"
#include "common/event_loop.h"
#include "common/host_port.h"

namespace regent::leader {
namespace {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
};

// What getaddrinfo gave for the address, or why it gave nothing.
struct Resolution {
  std::vector<SocketAddress> addresses;
  std::string error;
};

Resolution resolveBlocking(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  Resolution resolution;
  const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) {
    resolution.error = ::gai_strerror(rc);
    return resolution;
  }
  for (addrinfo* entry = found; entry != nullptr; entry = entry->ai_next) {
    if (entry->ai_addrlen > sizeof(sockaddr_storage)) continue;
    SocketAddress address;
    std::memcpy(&address.storage, entry->ai_addr, entry->ai_addrlen);
    address.length = entry->ai_addrlen;
    resolution.addresses.push_back(address);
  }
  ::freeaddrinfo(found);
  if (resolution.addresses.empty()) resolution.error = "no usable address";
  return resolution;
}

// A non-blocking socket and its observer on the loop's event port; the observer goes first.
struct Socket {
  int fd = -1;
  kj::Own<kj::UnixEventPort::FdObserver> observer;

  explicit Socket(int descriptor) : fd(descriptor) {}
  ~Socket() {
    observer = nullptr;
    if (fd >= 0) ::close(fd);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
};

enum class Outcome { kConnected, kRefused, kFailed };

}  // namespace

// One whenDead() call: owned by the promise it returned.
class TcpLeaderLiveness::Watch final {
 public:
  Watch(EventLoop& loop, const TcpLeaderLivenessOptions& options, std::string address,
        std::function<void()> reanswered, uint64_t& refusals)
      : loop_(loop),
        refusals_(refusals),
        options_(options),
        address_(std::move(address)),
        reanswered_(std::move(reanswered)),
        backoff_(options.initialBackoff, options.maxBackoff) {}

  kj::Promise<void> run() {
    auto hostPort = splitHostPort(address_);
    if (!hostPort.ok()) {
      spdlog::warn("leader liveness: cannot watch the leader at \"{}\": {}", address_,
                   hostPort.error().message);
      return kj::NEVER_DONE;
    }
    return resolve(hostPort.value().host, hostPort.value().port);
  }

 private:
  kj::Promise<void> resolve(std::string host, uint16_t port) {
    return loop_.runBlocking([host, port] { return resolveBlocking(host, port); })
        .then([this, host, port](Resolution&& resolution) -> kj::Promise<void> {
          if (resolution.addresses.empty()) {
            spdlog::info("leader liveness: cannot resolve {}: {}; trying again", address_,
                         resolution.error);
            return delay(backoff_.next()).then([this, host, port] { return resolve(host, port); });
          }
          addresses_ = std::move(resolution.addresses);
          backoff_.reset();
          return connectFirst();
        });
  }

  // Until a first connection is open: a refusal now proves nothing (see LeaderLiveness).
  kj::Promise<void> connectFirst() {
    return connectAny(0, true).then([this](Outcome outcome) -> kj::Promise<void> {
      if (outcome == Outcome::kConnected) {
        spdlog::info("leader liveness: connected to {}; watching the leader's process", address_);
        backoff_.reset();
        return hold().then([this] { return afterClose(); });
      }
      return delay(backoff_.next()).then([this] { return connectFirst(); });
    });
  }

  // The held connection ended: reconnect at once if it lived long enough to be the leader's
  // steady connection, otherwise after a backoff (a server that closes every connection at once
  // must not make this spin).
  kj::Promise<void> afterClose() {
    socket_ = nullptr;
    const bool stable = loop_.timer().now() - connectedAt_ >= toKj(options_.stableAfter);
    if (stable) {
      backoff_.reset();
      return reconnect();
    }
    return delay(backoff_.next()).then([this] { return reconnect(); });
  }

  kj::Promise<void> reconnect() {
    return connectAny(0, true).then([this](Outcome outcome) -> kj::Promise<void> {
      switch (outcome) {
        case Outcome::kRefused:
          spdlog::info(
              "leader liveness: the connection to {} ended and a new one was refused: the "
              "process is gone",
              address_);
          return kj::READY_NOW;
        case Outcome::kConnected:
          if (reanswered_) reanswered_();
          return hold().then([this] { return afterClose(); });
        case Outcome::kFailed:
          break;
      }
      return delay(backoff_.next()).then([this] { return reconnect(); });
    });
  }

  // Tries addresses_[index...] in turn: the first that connects wins; kRefused when every one
  // refused, kFailed when one failed otherwise and none connected.
  kj::Promise<Outcome> connectAny(size_t index, bool allRefused) {
    if (index == addresses_.size()) return allRefused ? Outcome::kRefused : Outcome::kFailed;
    return connectOne(addresses_[index])
        .then([this, index, allRefused](Outcome outcome) -> kj::Promise<Outcome> {
          if (outcome == Outcome::kConnected) return outcome;
          return connectAny(index + 1, allRefused && outcome == Outcome::kRefused);
        });
  }

  kj::Promise<Outcome> connectOne(const SocketAddress& address) {
    const int fd =
        ::socket(address.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      spdlog::info("leader liveness: no socket for {}: {}", address_, errnoText(errno));
      return Outcome::kFailed;
    }
    auto socket = kj::heap<Socket>(fd);
    socket->observer = kj::heap<kj::UnixEventPort::FdObserver>(
        loop_.eventPort(), fd,
        kj::UnixEventPort::FdObserver::OBSERVE_READ | kj::UnixEventPort::FdObserver::OBSERVE_WRITE);
    int rc;
    do {
      rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&address.storage), address.length);
    } while (rc < 0 && errno == EINTR);
    if (rc == 0) return connected(kj::mv(socket));
    if (errno != EINPROGRESS) return classify(errno);
    Socket& ref = *socket;
    kj::Promise<Outcome> answered =
        ref.observer->whenBecomesWritable().then([this, &ref]() mutable -> kj::Promise<Outcome> {
          int error = 0;
          socklen_t length = sizeof error;
          if (::getsockopt(ref.fd, SOL_SOCKET, SO_ERROR, &error, &length) < 0) error = errno;
          if (error != 0) return classify(error);
          return Outcome::kConnected;
        });
    kj::Promise<Outcome> timedOut =
        loop_.timer().afterDelay(toKj(options_.connectTimeout)).then([] {
          return Outcome::kFailed;
        });
    return answered.exclusiveJoin(kj::mv(timedOut))
        .then([this, socket = kj::mv(socket)](Outcome outcome) mutable {
          if (outcome == Outcome::kConnected) return connected(kj::mv(socket));
          return outcome;
        });
  }

  Outcome connected(kj::Own<Socket> socket) {
    socket_ = kj::mv(socket);
    connectedAt_ = loop_.timer().now();
    return Outcome::kConnected;
  }

  Outcome classify(int error) {
    if (error == ECONNREFUSED) {
      ++refusals_;
      return Outcome::kRefused;
    }
    spdlog::debug("leader liveness: connecting to {} failed: {}", address_, errnoText(error));
    return Outcome::kFailed;
  }

  // Resolves once the held connection ended (closed by the peer, reset, or failed); whatever
  // arrives on it is dropped.
  kj::Promise<void> hold() {
    char buffer[512];
    while (true) {
      const ssize_t received = ::recv(socket_->fd, buffer, sizeof buffer, 0);
      if (received > 0) continue;
      if (received == 0) return kj::READY_NOW;
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return socket_->observer->whenBecomesReadable().then([this] { return hold(); });
      }
      spdlog::debug("leader liveness: the connection to {} failed: {}", address_, errnoText(errno));
      return kj::READY_NOW;
    }
  }

  kj::Promise<void> delay(Duration by) { return loop_.timer().afterDelay(toKj(by)); }

  static kj::Duration toKj(Duration duration) { return duration.count() * kj::MILLISECONDS; }

  EventLoop& loop_;
  uint64_t& refusals_;
  const TcpLeaderLivenessOptions options_;
  const std::string address_;
  const std::function<void()> reanswered_;
  ExponentialBackoff backoff_;
  std::vector<SocketAddress> addresses_;
  kj::Own<Socket> socket_;  // The held connection.
  kj::TimePoint connectedAt_ = kj::origin<kj::TimePoint>();
};

TcpLeaderLiveness::TcpLeaderLiveness(EventLoop& loop, TcpLeaderLivenessOptions options)
    : loop_(loop), options_(options) {}

TcpLeaderLiveness::~TcpLeaderLiveness() noexcept = default;

kj::Promise<void> TcpLeaderLiveness::whenDead(const std::string& rpcAddress,
                                              std::function<void()> reanswered) {
  auto watch = kj::heap<Watch>(loop_, options_, rpcAddress, std::move(reanswered), refusals_);
  Watch& ref = *watch;
  return kj::evalLater([&ref] { return ref.run(); }).attach(kj::mv(watch));
}

}  // namespace regent::leader

// GET requests to a master's HTTP endpoints from an integration test's loop: one request, or
// repeated until the reply is the one expected (a master learns of the leader through a watch,
// so its answer may lag); and a request queued with a stopped process, read once it runs again.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <kj/compat/http.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/event_loop.h"
#include "common/host_port.h"
#include "common/result.h"
#include "common/time.h"
#include "tests/fixtures/loop_wait_test_util.h"

namespace regent::testing {

struct HttpReply {
  uint status = 0;
  std::string body;
  std::string location;  // The Location header, "" without one.
};

// One GET of `path` from the server at `address` ("127.0.0.1:8081"), run on `loop`. A refused
// or dropped connection throws the kj exception, and so does a reply not read whole within
// `timeout`. `table` must outlive the call. `extra`: request headers (name, value) to send.
inline HttpReply httpGet(EventLoop& loop, kj::HttpHeaderTable& table, const std::string& address,
                         const std::string& path,
                         const std::vector<std::pair<std::string, std::string>>& extra = {},
                         Duration timeout = Duration(30000)) {
  auto target = loop.run(loop.io().getNetwork().parseAddress(address));
  auto client = kj::newHttpClient(loop.timer(), table, *target);
  kj::HttpHeaders headers(table);
  for (const auto& [name, value] : extra) headers.add(name, value);
  auto response =
      client->request(kj::HttpMethod::GET, kj::StringPtr(path.c_str()), headers).response;
  auto read = response.then([](kj::HttpClient::Response got) {
    HttpReply reply;
    reply.status = got.statusCode;
    KJ_IF_MAYBE (location, got.headers->get(kj::HttpHeaderId::LOCATION)) {
      reply.location = location->cStr();
    }
    auto body = got.body->readAllText();
    return body.attach(kj::mv(got.body)).then([reply = std::move(reply)](kj::String text) mutable {
      reply.body = text.cStr();
      return std::move(reply);
    });
  });
  return runLoopBounded(loop, kj::mv(read), timeout, "the HTTP reply");
}

// GETs until `done` holds for the reply, with 50 ms on the loop's timer between attempts, for at
// most `timeout`; then records a test failure naming the last reply and returns it.
inline HttpReply httpGetUntil(EventLoop& loop, kj::HttpHeaderTable& table,
                              const std::string& address, const std::string& path,
                              const std::function<bool(const HttpReply&)>& done,
                              Duration timeout = Duration(30000)) {
  const kj::TimePoint deadline = loop.timer().now() + timeout.count() * kj::MILLISECONDS;
  HttpReply reply;
  while (true) {
    reply = httpGet(loop, table, address, path, {}, timeout);
    if (done(reply)) return reply;
    if (loop.timer().now() >= deadline) break;
    loop.run(loop.timer().afterDelay(50 * kj::MILLISECONDS));
  }
  ADD_FAILURE() << path << " on " << address << " last answered " << reply.status << ": "
                << reply.body << " (waited " << timeout.count() << " ms)";
  return reply;
}

// A GET written to `address` ("127.0.0.1:8081", IPv4) at once, before the server reads it: the
// kernel completes the connection and keeps the request for a stopped (SIGSTOP) process, so
// the request is the first thing the server finds when it runs again. reply() reads the whole
// answer (the request asks the server to close the connection).
class QueuedHttpGet final {
 public:
  static Result<std::unique_ptr<QueuedHttpGet>> send(const std::string& address,
                                                     const std::string& path) {
    auto parsed = splitHostPort(address);
    if (!parsed.ok()) return parsed.error();
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(parsed.value().port);
    if (::inet_pton(AF_INET, parsed.value().host.c_str(), &to.sin_addr) != 1) {
      return Error::fatal("not an IPv4 address: " + address);
    }
    std::unique_ptr<QueuedHttpGet> get(new QueuedHttpGet(path));
    get->fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (get->fd_ < 0 ||
        ::connect(get->fd_, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) {
      return Error::fatal("connect to " + address + ": " + std::strerror(errno));
    }
    const std::string request =
        "GET " + path + " HTTP/1.1\r\nHost: " + address + "\r\nConnection: close\r\n\r\n";
    if (::send(get->fd_, request.data(), request.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(request.size())) {
      return Error::fatal("send to " + address + ": " + std::strerror(errno));
    }
    return get;
  }
  ~QueuedHttpGet() {
    if (fd_ >= 0) ::close(fd_);
  }
  QueuedHttpGet(const QueuedHttpGet&) = delete;
  QueuedHttpGet& operator=(const QueuedHttpGet&) = delete;

  // The status and body, once the server closed the connection; fails when that takes longer
  // than `timeout` or the answer is not HTTP.
  Result<HttpReply> reply(Duration timeout) {
    const MonoTime deadline = std::chrono::steady_clock::now() + timeout;
    std::string raw;
    char buffer[4096];
    while (true) {
      const auto left =
          std::chrono::duration_cast<Duration>(deadline - std::chrono::steady_clock::now());
      if (left <= Duration(0)) return Error::fatal(path_ + ": no whole answer in time: " + raw);
      pollfd readable{fd_, POLLIN, 0};
      if (::poll(&readable, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) {
        return Error::fatal(path_ + ": poll: " + std::strerror(errno));
      }
      const ssize_t got = ::recv(fd_, buffer, sizeof buffer, MSG_DONTWAIT);
      if (got == 0) break;
      if (got < 0) {
        if (errno == EAGAIN || errno == EINTR) continue;
        return Error::fatal(path_ + ": recv: " + std::strerror(errno));
      }
      raw.append(buffer, static_cast<size_t>(got));
    }
    HttpReply reply;
    const size_t headersEnd = raw.find("\r\n\r\n");
    if (raw.rfind("HTTP/1.1 ", 0) != 0 || raw.size() < 12 || headersEnd == std::string::npos) {
      return Error::fatal(path_ + ": not an HTTP answer: " + raw);
    }
    reply.status = static_cast<uint>(std::stoul(raw.substr(9, 3)));
    reply.body = raw.substr(headersEnd + 4);
    return reply;
  }

 private:
  explicit QueuedHttpGet(std::string path) : path_(std::move(path)) {}
  std::string path_;
  int fd_ = -1;
};

}  // namespace regent::testing

// The HTTP listener every regent process serves its routes on (kj-http on the process's loop):
// a master's routes (services/master/master_http.h) on http.bind, a worker's
// (services/worker/worker_http.h) on worker.http.bind. It knows no service: the protocol policy
// (what a request the routes never see is answered), the connection cap, the accept loop that
// survives running out of descriptors, and the helpers every route set answers with.
#pragma once

#include <kj/async-io.h>
#include <kj/compat/http.h>
#include <kj/memory.h>
#include <kj/time.h>

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "common/accept_loop.h"
#include "common/result.h"
#include "common/task_set_error_logger.h"
#include "http/metrics_registry.h"

namespace regent::http {

// A set of routes the HttpServer serves: a kj::HttpService that also says whether the request it
// is answering asked to close its connection. Loop-thread only.
class HttpRouteSet : public kj::HttpService {
 public:
  // Whether the request being answered asked to close the connection after its response
  // ("Connection: close", or HTTP/1.0 without keep-alive). Valid while request() sends its
  // response headers, which is when kj asks HttpServerCallbacks::shouldClose().
  virtual bool closeRequested() const = 0;
};

// Helpers every route set answers with, so that masters and workers answer alike.

// The most bytes of a path a reply echoes.
inline constexpr size_t kMaxEchoedPath = 200;
// The header table every route set and the server use (it holds Allow).
kj::Own<kj::HttpHeaderTable> makeHeaderTable();
// Whether `headers` ask to close the connection after the response ("Connection: close").
bool asksToClose(const kj::HttpHeaders& headers);
// At most kMaxEchoedPath bytes of `path` for a reply, with control, non-ASCII and backslash
// bytes as \xNN, and "..." when cut.
std::string echoablePath(const std::string& path);
// How every route set answers a request: the query string is cut off the path; `closeRequested`
// holds asksToClose(headers) while `route` runs (routes send their response headers before they
// return, which is when kj asks the policy whether to close) and false after; a failure of the
// route other than a disconnect is logged and answered 500 "internal error" by the policy.
kj::Promise<void> serveRoute(kj::StringPtr url, const kj::HttpHeaders& headers,
                             bool& closeRequested,
                             kj::FunctionParam<kj::Promise<void>(const std::string& path)> route);
// Answers with `body` as the whole response: Content-Type `contentType`, "Allow: GET" with a
// 405, and the `extra` headers (name, value). `headerTable` must come from makeHeaderTable().
kj::Promise<void> reply(kj::HttpService::Response& response, const kj::HttpHeaderTable& headerTable,
                        uint status, kj::StringPtr statusText, kj::StringPtr contentType,
                        std::string body,
                        const std::vector<std::pair<std::string, std::string>>& extra = {});

// How every route set answers a request its GET routes do not take: 404 "no such endpoint:
// <path>" (echoablePath) when `known` is false, else 405 "<path> answers GET only, not <method>"
// (Allow: GET) when `method` is not GET; nullptr when a route answers.
kj::Maybe<kj::Promise<void>> refuseUnrouted(kj::HttpService::Response& response,
                                            const kj::HttpHeaderTable& headerTable,
                                            kj::HttpMethod method, const std::string& path,
                                            bool known);

// How the server answers what the routes never see, and closes what was asked to close: a
// request kj cannot read (bad framing such as a duplicate or invalid Content-Length, bad
// headers) gets 400 with a plain reason; a failure inside the routes gets 500 "internal error";
// kj's description (file, line, stack) goes to the debug log only, never to the client. A
// response to a request that asked for "Connection: close" closes the connection right after it.
// Loop-thread only; `routes` and `headerTable` must outlive it.
class HttpProtocolPolicy final : public kj::HttpServerErrorHandler, public kj::HttpServerCallbacks {
 public:
  HttpProtocolPolicy(const HttpRouteSet& routes, const kj::HttpHeaderTable& headerTable)
      : routes_(routes), headerTable_(headerTable) {}

  kj::Promise<void> handleClientProtocolError(kj::HttpHeaders::ProtocolError protocolError,
                                              kj::HttpService::Response& response) override;
  kj::Promise<void> handleApplicationError(kj::Exception exception,
                                           kj::Maybe<kj::HttpService::Response&> response) override;
  kj::Promise<void> handleNoResponse(kj::HttpService::Response& response) override;
  bool shouldClose() override { return routes_.closeRequested(); }

 private:
  const HttpRouteSet& routes_;
  const kj::HttpHeaderTable& headerTable_;
};

// The listener on http.bind (a master) or worker.http.bind (a worker), serving one route set.
// At most `maxConnections` (http.max-connections, fitted to the open-file limit) are open at
// once: one more is closed as soon as it is accepted, counted, and warned about once per burst
// (a burst ends when a connection is admitted again). Accepting never stops for good
// (common/accept_loop.h): out of descriptors or memory it counts, warns, closes what waits in
// the backlog and accepts again after a backoff. kj-http closes a connection that sends no
// complete request headers within 15 s, or no next request within 5 s of the last response.
// Thread-safety: loop-thread only. Destroying it closes the port and every connection, cancelling
// requests in flight; `timer` must outlive it.
class HttpServer final {
 public:
  struct Private {};
  // Makes the route set the server serves, given the header table made by makeHeaderTable()
  // (which the routes must use).
  using RouteSetFactory =
      std::function<kj::Own<HttpRouteSet>(const kj::HttpHeaderTable& headerTable)>;
  static constexpr uint64_t kDefaultMaxConnections = 256;

  // Resolves with the listening server, or a fatal error naming the address and `option` (such
  // as "worker.http.bind") when it cannot be parsed or bound. With port 0 the kernel chooses one
  // (see port()).
  static kj::Promise<Result<kj::Own<HttpServer>>> listen(
      kj::Network& network, kj::Timer& timer, std::string bindAddress, std::string option,
      RouteSetFactory makeRoutes, uint64_t maxConnections = kDefaultMaxConnections);

  HttpServer(const Private&, kj::Timer& timer, const RouteSetFactory& makeRoutes,
             kj::Own<kj::ConnectionReceiver> receiver, std::string hostName,
             uint64_t maxConnections);
  ~HttpServer() noexcept;
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const { return port_; }
  // The bind host with the chosen port ("127.0.0.1:40313").
  const std::string& listenAddress() const { return listenAddress_; }

  // Connections open now, and closed at accept because maxConnections were open.
  uint64_t connectionCount() const { return open_; }
  uint64_t connectionsRefusedOverCap() const { return refusedOverCap_; }
  // The accept loop: its failures by reason, and since when it fails.
  const AcceptLoop& listener() const { return *accepting_; }

 private:
  void serve(kj::Own<kj::AsyncIoStream> connection);

  kj::Own<kj::HttpHeaderTable> headerTable_;
  kj::Own<HttpRouteSet> routes_;
  HttpProtocolPolicy policy_;
  kj::Own<kj::ConnectionReceiver> receiver_;
  uint16_t port_;
  std::string listenAddress_;
  const uint64_t maxConnections_;
  uint64_t open_ = 0;
  uint64_t refusedOverCap_ = 0;
  bool refusing_ = false;  // In a burst of refusals (warned once).
  kj::HttpServer server_;
  TaskSetErrorLogger connectionErrors_{"http: connection", spdlog::level::debug};
  kj::TaskSet connections_{connectionErrors_};
  kj::Own<AcceptLoop> accepting_;  // Last: it hands connections to everything above.
};

// The accept-failure and connection-cap metrics of the server `server` returns (regent_http_*):
// the families always, the samples while there is a server (nullptr: not listening yet).
// Masters and workers register them alike.
void addHttpServerMetrics(MetricsRegistry& registry, std::function<const HttpServer*()> server);
// The same families of `server`, written once.
void writeHttpServerMetrics(std::ostream& out, const HttpServer* server);

}  // namespace regent::http

// The HTTP listener and the helpers every route set answers with (see http_server.h).
#include "http/http_server.h"

#include <kj/debug.h>
#include <spdlog/spdlog.h>

#include <cctype>
#include <utility>

#include "common/host_port.h"
#include "http/prometheus_text.h"

namespace regent::http {
namespace {

constexpr const char* kText = "text/plain; charset=utf-8";

// Marks an exception the routes themselves threw, so the error handler can tell it (500) from a
// request kj could not read (400).
constexpr const char* kRouteFailed = "regent http: the route failed";

// One connection's view of the routes. Once the response to a request that asked for
// "Connection: close" is written, it shuts the connection's read side, so kj sees the end of the
// input and closes the connection at once instead of waiting its pipeline timeout for another
// request (kj itself only adds the "Connection: close" header, through HttpProtocolPolicy).
class ConnectionRoutes final : public kj::HttpService {
 public:
  ConnectionRoutes(HttpRouteSet& routes, kj::AsyncIoStream& connection)
      : routes_(routes), connection_(connection) {}

  kj::Promise<void> request(kj::HttpMethod method, kj::StringPtr url,
                            const kj::HttpHeaders& headers, kj::AsyncInputStream& requestBody,
                            Response& response) override {
    const bool close = asksToClose(headers);
    auto answered = routes_.request(method, url, headers, requestBody, response);
    if (!close) return answered;
    return answered.then([this]() { connection_.abortRead(); });
  }

 private:
  HttpRouteSet& routes_;
  kj::AsyncIoStream& connection_;  // kj keeps it for as long as this service.
};

}  // namespace

kj::Own<kj::HttpHeaderTable> makeHeaderTable() {
  kj::HttpHeaderTable::Builder builder;
  builder.add("Allow");
  return builder.build();
}

std::string echoablePath(const std::string& path) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string shown;
  for (const char c : path) {
    if (shown.size() >= kMaxEchoedPath) {
      shown += "...";
      break;
    }
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte >= 0x7f || c == '\\') {
      shown += "\\x";
      shown += kHex[byte >> 4];
      shown += kHex[byte & 0xf];
    } else {
      shown += c;
    }
  }
  return shown;
}

bool asksToClose(const kj::HttpHeaders& headers) {
  KJ_IF_MAYBE (connection, headers.get(kj::HttpHeaderId::CONNECTION)) {
    std::string tokens(connection->cStr());
    for (char& c : tokens) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    size_t start = 0;
    while (start <= tokens.size()) {
      size_t end = tokens.find(',', start);
      if (end == std::string::npos) end = tokens.size();
      std::string token = tokens.substr(start, end - start);
      const size_t first = token.find_first_not_of(" \t");
      const size_t last = token.find_last_not_of(" \t");
      if (first != std::string::npos && token.substr(first, last - first + 1) == "close") {
        return true;
      }
      start = end + 1;
    }
  }
  return false;
}

kj::Promise<void> serveRoute(kj::StringPtr url, const kj::HttpHeaders& headers,
                             bool& closeRequested,
                             kj::FunctionParam<kj::Promise<void>(const std::string& path)> route) {
  std::string path(url.cStr());
  const size_t query = path.find('?');
  if (query != std::string::npos) path.resize(query);
  closeRequested = asksToClose(headers);
  auto routed = kj::evalNow([&]() { return route(path); });
  closeRequested = false;
  return routed.catch_([](kj::Exception&& exception) -> kj::Promise<void> {
    if (exception.getType() == kj::Exception::Type::DISCONNECTED) return kj::mv(exception);
    spdlog::error("http: a route failed: {}", exception.getDescription().cStr());
    return KJ_EXCEPTION(FAILED, kRouteFailed);
  });
}

kj::Promise<void> reply(kj::HttpService::Response& response, const kj::HttpHeaderTable& headerTable,
                        uint status, kj::StringPtr statusText, kj::StringPtr contentType,
                        std::string body,
                        const std::vector<std::pair<std::string, std::string>>& extra) {
  kj::HttpHeaders headers(headerTable);
  headers.set(kj::HttpHeaderId::CONTENT_TYPE, contentType);
  // Every answer is only ever the type it names: a browser never reads a task's output, a
  // job's name or an error as markup or script.
  headers.add("X-Content-Type-Options", "nosniff");
  if (status == 405) {
    const kj::Maybe<kj::HttpHeaderId> allow = headerTable.stringToId("Allow");
    headers.set(KJ_REQUIRE_NONNULL(allow, "the header table must come from makeHeaderTable()"),
                "GET");
  }
  // The names and values live in `extra` until send() has written the head.
  for (const auto& [name, value] : extra) headers.add(name, value);
  auto stream = response.send(status, statusText, headers, uint64_t(body.size()));
  auto text = kj::heap<std::string>(std::move(body));
  auto written = stream->write(text->data(), text->size());
  return written.attach(kj::mv(stream), kj::mv(text));
}

kj::Maybe<kj::Promise<void>> refuseUnrouted(kj::HttpService::Response& response,
                                            const kj::HttpHeaderTable& headerTable,
                                            kj::HttpMethod method, const std::string& path,
                                            bool known) {
  if (!known) {
    return reply(response, headerTable, 404, "Not Found", kText,
                 "no such endpoint: " + echoablePath(path) + "\n");
  }
  if (method != kj::HttpMethod::GET) {
    return reply(response, headerTable, 405, "Method Not Allowed", kText,
                 path + " answers GET only, not " + kj::str(method).cStr() + "\n");
  }
  return nullptr;
}

kj::Promise<void> HttpProtocolPolicy::handleClientProtocolError(
    kj::HttpHeaders::ProtocolError protocolError, kj::HttpService::Response& response) {
  spdlog::debug("http: refused a request that does not parse: {}",
                protocolError.description.cStr());
  // kj's description of a protocol error is meant for the client (no request data in it).
  return reply(response, headerTable_, protocolError.statusCode, protocolError.statusMessage, kText,
               std::string("bad request: ") + protocolError.description.cStr() + "\n");
}

kj::Promise<void> HttpProtocolPolicy::handleApplicationError(
    kj::Exception exception, kj::Maybe<kj::HttpService::Response&> response) {
  if (exception.getType() == kj::Exception::Type::DISCONNECTED) return kj::READY_NOW;
  const bool routeFailed = exception.getDescription() == kRouteFailed;
  if (!routeFailed) {
    spdlog::debug("http: refused a request that cannot be read: {}",
                  exception.getDescription().cStr());
  }
  KJ_IF_MAYBE (open, response) {
    if (routeFailed) {
      return reply(*open, headerTable_, 500, "Internal Server Error", kText, "internal error\n");
    }
    return reply(*open, headerTable_, 400, "Bad Request", kText,
                 "bad request: the request cannot be read (malformed message framing, such as a "
                 "duplicate or invalid Content-Length)\n");
  }
  return kj::READY_NOW;
}

kj::Promise<void> HttpProtocolPolicy::handleNoResponse(kj::HttpService::Response& response) {
  spdlog::error("http: a route returned without a response");
  return reply(response, headerTable_, 500, "Internal Server Error", kText, "internal error\n");
}

kj::Promise<Result<kj::Own<HttpServer>>> HttpServer::listen(kj::Network& network, kj::Timer& timer,
                                                            std::string bindAddress,
                                                            std::string option,
                                                            RouteSetFactory makeRoutes,
                                                            uint64_t maxConnections) {
  auto failed = [bindAddress, option](kj::Exception&& exception) -> Result<kj::Own<HttpServer>> {
    return Error::fatal("HTTP server cannot listen on " + bindAddress + " (" + option +
                        "): " + exception.getDescription().cStr());
  };
  return network.parseAddress(bindAddress)
      .then([&timer, makeRoutes = std::move(makeRoutes), bindAddress,
             maxConnections](kj::Own<kj::NetworkAddress> address) -> Result<kj::Own<HttpServer>> {
        return kj::heap<HttpServer>(Private{}, timer, makeRoutes, address->listen(),
                                    hostOf(bindAddress), maxConnections);
      })
      .catch_(kj::mv(failed));
}

HttpServer::HttpServer(const Private&, kj::Timer& timer, const RouteSetFactory& makeRoutes,
                       kj::Own<kj::ConnectionReceiver> receiver, std::string hostName,
                       uint64_t maxConnections)
    : headerTable_(makeHeaderTable()),
      routes_(makeRoutes(*headerTable_)),
      policy_(*routes_, *headerTable_),
      receiver_(kj::mv(receiver)),
      port_(static_cast<uint16_t>(receiver_->getPort())),
      listenAddress_(joinHostPort(hostName, port_)),
      maxConnections_(maxConnections),
      server_(
          timer, *headerTable_,
          [this](kj::AsyncIoStream& connection) -> kj::Own<kj::HttpService> {
            return kj::heap<ConnectionRoutes>(*routes_, connection);
          },
          kj::HttpServerSettings{.errorHandler = policy_, .callbacks = policy_}),
      accepting_(kj::heap<AcceptLoop>(
          timer, *receiver_, AcceptLoop::Options{.name = "http", .address = listenAddress_},
          [this](kj::AuthenticatedStream&& accepted) { serve(kj::mv(accepted.stream)); })) {}

HttpServer::~HttpServer() noexcept = default;

void HttpServer::serve(kj::Own<kj::AsyncIoStream> connection) {
  if (open_ >= maxConnections_) {
    ++refusedOverCap_;
    if (!refusing_) {
      refusing_ = true;
      spdlog::warn(
          "http: refused a connection on {}: http.max-connections ({}) open; further "
          "refusals are counted until one is admitted",
          listenAddress_, maxConnections_);
    }
    return;  // Dropping the stream closes it before anything is read.
  }
  refusing_ = false;
  ++open_;
  connections_.add(server_.listenHttp(kj::mv(connection)).attach(kj::defer([this] { --open_; })));
}

void addHttpServerMetrics(MetricsRegistry& registry, std::function<const HttpServer*()> server) {
  addAcceptLoopMetrics(registry, "http", [server]() -> const AcceptLoop* {
    const HttpServer* listening = server();
    return listening != nullptr ? &listening->listener() : nullptr;
  });
  registry.add("regent_http_connections_refused_total", MetricsRegistry::Type::kCounter,
               "HTTP connections closed at accept because http.max-connections were open.",
               [server] {
                 std::vector<MetricSample> samples;
                 if (const HttpServer* listening = server()) {
                   samples.push_back({.value = listening->connectionsRefusedOverCap()});
                 }
                 return samples;
               });
}

void writeHttpServerMetrics(std::ostream& out, const HttpServer* server) {
  MetricsRegistry registry;
  addHttpServerMetrics(registry, [server] { return server; });
  registry.write(out);
}

}  // namespace regent::http

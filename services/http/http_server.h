// The HTTP endpoints every master serves on http.bind (kj-http on the process's loop): health,
// readiness, the leader as this master believes, the leader's jobs and workers, and Prometheus
// metrics. The listener (HttpServer) and its protocol policy serve any HttpRouteSet: the
// master's HttpRoutes here, a worker's routes in services/worker/.
#pragma once

#include <kj/async-io.h>
#include <kj/compat/http.h>
#include <kj/memory.h>
#include <kj/time.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>

#include "common/accept_loop.h"
#include "common/result.h"
#include "common/task_errors.h"
#include "leader/leader_info.h"
#include "rpc/auth_roles.h"
#include "rpc/fenced_endpoint.h"
#include "rpc/schema/gateways.capnp.h"
#include "services/dispatcher/dispatcher.h"
#include "services/dispatcher/dispatcher_gateway.h"
#include "services/jobmaster/job_masters.h"

namespace regent::http {

class HttpServer;

// The RPC transport's admission counts since the process started (rpc/rpc_server.h,
// rpc/rpc_tls.h), read when /metrics is served.
struct RpcTransportCounts {
  uint64_t droppedBeforeAuthentication = 0;   // A message over the pre-authentication cap.
  uint64_t timedOutBeforeAuthentication = 0;  // Not authenticated within rpc.auth-timeout.
  uint64_t refusedOverTotalCap = 0;           // rpc.max-connections open at accept.
  uint64_t refusedOverPeerCap = 0;            // rpc.max-connections-per-peer open at accept.
  uint64_t tlsHandshakesFailed = 0;           // Refused or timed-out TLS handshakes.
  uint64_t idleTimedOut = 0;                  // Nothing crossed for rpc.idle-timeout.
  uint64_t messageTimedOut = 0;               // A message not whole within rpc.message-timeout.
};

// What the endpoints ask of their master. Loop-thread only; called while a request is served.
class HttpHost {
 public:
  virtual ~HttpHost() = default;
  virtual const leader::ContenderInfo& self() const = 0;
  // The leader as this master believes (its own term while it leads).
  virtual std::optional<leader::LeaderInfo> knownLeader() const = 0;
  // The epoch this master leads, 0 when it does not.
  virtual uint64_t leadingEpoch() const = 0;
  // Whether this master leads and its term is SERVING (recovery done, published).
  virtual bool serving() const = 0;
  // Whether the ZooKeeper session is up (false in standalone mode).
  virtual bool zooKeeperConnected() const = 0;
  // The current term's Dispatcher, for reading its jobs in-process; nullptr while not leading or
  // the term is not ready (still recovering).
  virtual kj::Maybe<const dispatcher::Dispatcher&> leaderDispatcher() const = 0;
  // The current term's registered workers (its ResourceManager), for reading them in process;
  // nullptr while not leading (or for a host without one, the default). Unlike the Dispatcher
  // they are there while the term still recovers.
  virtual kj::Maybe<const dispatcher::TaskExecutorView&> leaderTaskExecutors() const {
    return nullptr;
  }
  // Workers removed for heartbeat silence since the process started, over every term it led.
  virtual uint64_t workerHeartbeatTimeouts() const { return 0; }
  // Worker calls refused for speaking for another worker, by method, over every term it led
  // (services/resourcemanager/worker_binding.h); nullptr for a host that counts none.
  virtual const std::map<std::string, uint64_t>* workerIdentityRefusals() const {
    return nullptr;
  }
  // The JobMasters' attempt counts and submit-to-running histogram over every term the process
  // led, or nullptr for a host without JobMasters (the default: no samples).
  virtual const jobmaster::JobMasterCounters* jobMasterCounters() const { return nullptr; }
  virtual const rpc::FencingCounters& fencingCounters() const = 0;
  // Whether RPC requires authentication: then the routes leave out what is not public (attempt
  // ids and pids, worker addresses and hosts, failure messages; docs/security.md, "What the HTTP
  // endpoints reveal").
  virtual bool authenticationRequired() const = 0;
  // The RPC authentication outcomes (rpc/auth_roles.h), or nullptr when the host counts none.
  virtual const rpc::AuthCounters* authCounters() const { return nullptr; }
  // The RPC transport's admission counts, or nullopt when the host has no RPC server (yet).
  virtual std::optional<RpcTransportCounts> rpcTransportCounts() const { return std::nullopt; }
  // The RPC listener's and this HTTP server's accept loops, for their failure counts; nullptr
  // when there is none (yet).
  virtual const AcceptLoop* rpcListener() const { return nullptr; }
  virtual const HttpServer* httpServer() const { return nullptr; }
};

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
// Whether `headers` ask to close the connection after the response ("Connection: close").
bool asksToClose(const kj::HttpHeaders& headers);
// At most HttpRoutes::kMaxEchoedPath bytes of `path` for a reply, with control, non-ASCII and
// backslash bytes as \xNN, and "..." when cut.
std::string echoablePath(const std::string& path);
// How every route set answers a request: the query string is cut off the path; `closeRequested`
// holds asksToClose(headers) while `route` runs (routes send their response headers before they
// return, which is when kj asks the policy whether to close) and false after; a failure of the
// route other than a disconnect is logged and answered 500 "internal error" by the policy.
kj::Promise<void> serveRoute(kj::StringPtr url, const kj::HttpHeaders& headers,
                             bool& closeRequested,
                             kj::FunctionParam<kj::Promise<void>(const std::string& path)> route);
// The "# HELP" and "# TYPE" lines of one Prometheus metric family.
void writeMetricFamily(std::ostream& out, const char* name, const char* type, const char* help);

// The routes, as a kj::HttpService (usable without a socket, e.g. through kj::newHttpClient):
//   GET /healthz    200 "ok"
//   GET /readyz     200 when leading and SERVING, or a standby connected to ZooKeeper; else 503
//   GET /v1/leader  200 the leader's JSON (leader::toJson); 503 {"status":"NONE"} if none known
//   GET /v1/jobs    leader: 200 {"epoch":E,"jobs":[...]} read from the term's Dispatcher in
//                   process (no RPC, no store read); standby: 307 to the leader's http address;
//                   no leader known, or the leader not ready: 503 with a JSON reason
//   GET /v1/jobs/<id> leader: 200 {"epoch":E,"job":{...}} with its vertices and subtasks, as
//                   jobStatus describes them; 400 for a malformed id, 404 for an unknown job
//   With host.authenticationRequired(), /v1/jobs/<id> and /v1/workers leave out attempt ids,
//   pids, worker hosts and addresses, and failure messages, and say so in "redacted".
//   GET /v1/workers leader: 200 {"epoch":E,"workers":[...]} (every registered worker with its
//                   slots, read from the term's ResourceManager in process, also while the term
//                   recovers); standby: 307 to the leader; no leader known: 503 with a JSON reason
//   GET /metrics    Prometheus text format 0.0.4; job, worker and slot counts read in process
//                   like /v1/jobs and /v1/workers
// Other paths 404 (echoing at most kMaxEchoedPath bytes of the path, control and non-ASCII
// bytes escaped); other methods on these paths 405 (with Allow: GET). A query string is ignored.
// `host` and `headerTable` must outlive the service; `headerTable` must be the one made by
// makeHeaderTable().
class HttpRoutes final : public HttpRouteSet {
 public:
  HttpRoutes(HttpHost& host, const kj::HttpHeaderTable& headerTable);

  kj::Promise<void> request(kj::HttpMethod method, kj::StringPtr url,
                            const kj::HttpHeaders& headers, kj::AsyncInputStream& requestBody,
                            Response& response) override;

  // The header table the routes need (Allow), for the server and for tests.
  static kj::Own<kj::HttpHeaderTable> makeHeaderTable();

  // HttpRouteSet.
  bool closeRequested() const override { return closeRequested_; }

  static constexpr size_t kMaxEchoedPath = 200;

 private:
  kj::Promise<void> jobs(Response& response);
  // /v1/jobs/<id>: one job with its vertices and subtasks (`path` is the whole path).
  kj::Promise<void> job(Response& response, const std::string& path);
  kj::Promise<void> workers(Response& response);
  // The 307 to the leader's `path`, or the 503 when no other master is known to lead; nullptr
  // when this master leads.
  kj::Maybe<kj::Promise<void>> notLeading(Response& response, const std::string& path);
  kj::Promise<void> metrics(Response& response);
  kj::Promise<void> reply(Response& response, uint status, kj::StringPtr statusText,
                          kj::StringPtr contentType, std::string body,
                          kj::Maybe<kj::StringPtr> location = nullptr);

  kj::Promise<void> route(kj::HttpMethod method, const std::string& path, Response& response);

  HttpHost& host_;
  const kj::HttpHeaderTable& headerTable_;
  kj::HttpHeaderId allow_;
  bool closeRequested_ = false;
};

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
  kj::Promise<void> handleApplicationError(
      kj::Exception exception, kj::Maybe<kj::HttpService::Response&> response) override;
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
// requests in flight; `host` and `timer` must outlive it.
class HttpServer final {
 public:
  struct Private {};
  // Makes the route set the server serves, given the header table made by
  // HttpRoutes::makeHeaderTable() (which the routes must use).
  using RouteSetFactory =
      std::function<kj::Own<HttpRouteSet>(const kj::HttpHeaderTable& headerTable)>;
  static constexpr uint64_t kDefaultMaxConnections = 256;

  // Resolves with the listening server, or a fatal error naming the address when it cannot be
  // parsed or bound. With port 0 the kernel chooses one (see port()).
  static kj::Promise<Result<kj::Own<HttpServer>>> listen(
      kj::Network& network, kj::Timer& timer, std::string bindAddress, HttpHost& host,
      uint64_t maxConnections = kDefaultMaxConnections);
  // The same for any route set; errors name `option` (such as "worker.http.bind").
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
  TaskFailureLogger connectionErrors_{"http: connection", spdlog::level::debug};
  kj::TaskSet connections_{connectionErrors_};
  kj::Own<AcceptLoop> accepting_;  // Last: it hands connections to everything above.
};

// The accept-failure and connection-cap metrics of `server` (regent_http_*), and the accept
// failures of an RPC listener (regent_rpc_accept_failures_total,
// regent_rpc_connections_shed_total): the families always, the samples when there is a server or
// listener. Masters and workers write them alike.
void writeHttpServerMetrics(std::ostream& out, const HttpServer* server);
void writeRpcListenerMetrics(std::ostream& out, const AcceptLoop* listener);

// Prometheus label value escaping (backslash, double quote, newline).
std::string escapeLabelValue(const std::string& value);

}  // namespace regent::http

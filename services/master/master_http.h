// The HTTP endpoints every master serves on http.bind, on the listener of http/http_server.h:
// health, readiness, the leader as this master believes, the leader's jobs and workers read in
// process, and Prometheus metrics.
#pragma once

#include <kj/async-io.h>
#include <kj/compat/http.h>
#include <kj/memory.h>
#include <kj/time.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/accept_loop.h"
#include "common/result.h"
#include "http/http_server.h"
#include "leader/leader_info.h"
#include "rpc/auth_roles.h"
#include "rpc/fenced_endpoint.h"
#include "services/dispatcher/dispatcher.h"
#include "services/dispatcher/dispatcher_gateway.h"
#include "services/jobmaster/job_masters.h"

namespace regent::master {

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
class MasterHttpHost {
 public:
  virtual ~MasterHttpHost() = default;
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
  virtual const std::map<std::string, uint64_t>* workerIdentityRefusals() const { return nullptr; }
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
  virtual const http::HttpServer* httpServer() const { return nullptr; }
};

// The routes, as a kj::HttpService (usable without a socket, e.g. through kj::newHttpClient):
//   GET /healthz    200 "ok"
//   GET /readyz     200 when leading and SERVING, or a standby connected to ZooKeeper; else 503
//   GET /v1/leader  200 the leader's JSON (leader::toJson); 503 {"status":"NONE"} if none known
//   GET /v1/jobs    leader: 200 {"epoch":E,"jobs":[...]} read from the term's Dispatcher in
//                   process (no RPC, no store read); standby: 307 to the leader's http address;
//                   no leader known, or the leader not ready: 503 with a JSON reason
//   GET /v1/jobs/<id> leader: 200 {"epoch":E,"job":{...}} with its vertices and subtasks, as
//                   jobStatus describes them, written by wire::jobStatusJson (what regentctl
//                   jobs status --json prints); 400 for a malformed id, 404 for an unknown job
//   With host.authenticationRequired(), /v1/jobs/<id> and /v1/workers leave out attempt ids,
//   pids, worker hosts and addresses, and failure messages, and say so in "redacted".
//   GET /v1/workers leader: 200 {"epoch":E,"workers":[...]} (every registered worker with its
//                   slots, read from the term's ResourceManager in process, also while the term
//                   recovers); standby: 307 to the leader; no leader known: 503 with a JSON reason
//   GET /metrics    Prometheus text format 0.0.4; job, worker and slot counts read in process
//                   like /v1/jobs and /v1/workers
// Other paths 404 (echoing at most http::kMaxEchoedPath bytes of the path, control and non-ASCII
// bytes escaped); other methods on these paths 405 (with Allow: GET). A query string is ignored.
// `host` and `headerTable` must outlive the service; `headerTable` must be the one made by
// http::makeHeaderTable().
class MasterHttpRoutes final : public http::HttpRouteSet {
 public:
  MasterHttpRoutes(MasterHttpHost& host, const kj::HttpHeaderTable& headerTable);

  kj::Promise<void> request(kj::HttpMethod method, kj::StringPtr url,
                            const kj::HttpHeaders& headers, kj::AsyncInputStream& requestBody,
                            Response& response) override;

  // HttpRouteSet.
  bool closeRequested() const override { return closeRequested_; }

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
                          const std::vector<std::pair<std::string, std::string>>& extra = {});

  kj::Promise<void> route(kj::HttpMethod method, const std::string& path, Response& response);

  MasterHttpHost& host_;
  const kj::HttpHeaderTable& headerTable_;
  bool closeRequested_ = false;
};

// The master's HTTP server on `bindAddress` (http.bind), serving MasterHttpRoutes for `host`,
// which must outlive it (http::HttpServer::listen).
kj::Promise<Result<kj::Own<http::HttpServer>>> listenMasterHttp(
    kj::Network& network, kj::Timer& timer, std::string bindAddress, MasterHttpHost& host,
    uint64_t maxConnections = http::HttpServer::kDefaultMaxConnections);

}  // namespace regent::master

// The HTTP endpoints every master serves on http.bind, on the listener of http/http_server.h:
// health, readiness, the leader as this master believes, the leader's jobs and workers read in
// process from its cluster view (cluster_view.h), and the metrics of its registry.
#pragma once

#include <kj/async-io.h>
#include <kj/compat/http.h>
#include <kj/memory.h>
#include <kj/time.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"
#include "http/http_server.h"
#include "http/metrics_registry.h"
#include "services/master/cluster_view.h"

namespace regent::master {

// The routes, as a kj::HttpService (usable without a socket, e.g. through kj::newHttpClient):
//   GET /healthz    200 "ok"
//   GET /readyz     200 when leading and SERVING, or a standby connected to ZooKeeper; else 503
//   GET /v1/leader  200 the leader's JSON (leader::toJson); 503 {"status":"NONE"} if none known
//   GET /v1/jobs    leader: 200 {"epoch":E,"jobs":[...]} read from the term's Dispatcher in
//                   process (no RPC, no store read); standby: 307 to the leader's http address;
//                   no leader known, or the leader not ready: 503 with a JSON reason
//   GET /v1/jobs/<id> leader: 200 {"epoch":E,"job":{...}} with its vertices and subtasks, as
//                   jobStatus describes them (an ended job's read from the store when it is not
//                   in memory), written by wire::jobStatusJson (what regentctl jobs status
//                   --json prints); 400 for a malformed id, 404 for an unknown job
//   With `authenticationRequired` (RPC requires it), /v1/jobs/<id> and /v1/workers leave out
//   attempt ids, pids, worker hosts and addresses, and failure messages, and say so in
//   "redacted".
//   GET /v1/workers leader: 200 {"epoch":E,"workers":[...]} (every registered worker with its
//                   slots, read from the term's ResourceManager in process, also while the term
//                   recovers); standby: 307 to the leader; no leader known: 503 with a JSON reason
//   GET /metrics    Prometheus text format 0.0.4: every family of `metrics`, in its order (the
//                   master's: master_metrics.h)
//   GET /           the status page (status_page.h), 50 jobs per page (`?page=N`), each shown
//                   job with its subtasks; GET /jobs/<id> one job's page; GET /static/status.css
//                   and /static/status.js the page's stylesheet and script. Every HTML answer
//                   carries a Content-Security-Policy that allows the page's own files only.
// Other paths 404 (echoing at most http::kMaxEchoedPath bytes of the path, control and non-ASCII
// bytes escaped); other methods on these paths 405 (with Allow: GET). A query string is ignored.
// `view`, `metrics` and `headerTable` must outlive the service; `headerTable` must be the one made
// by http::makeHeaderTable().
class MasterHttpRoutes final : public http::HttpRouteSet {
 public:
  MasterHttpRoutes(ClusterView& view, const http::MetricsRegistry& metrics,
                   bool authenticationRequired, const kj::HttpHeaderTable& headerTable);

  kj::Promise<void> request(kj::HttpMethod method, kj::StringPtr url,
                            const kj::HttpHeaders& headers, kj::AsyncInputStream& requestBody,
                            Response& response) override;

  // HttpRouteSet.
  bool closeRequested() const override { return closeRequested_; }

 private:
  kj::Promise<void> jobs(Response& response);
  // / and /jobs/<id>: the status page (status_page.h), with its security headers.
  kj::Promise<void> statusPage(Response& response, uint32_t pageNumber);
  kj::Promise<void> jobPage(Response& response, const std::string& path);
  kj::Promise<void> page(Response& response, uint status, kj::StringPtr statusText,
                         std::string html);
  // /v1/jobs/<id>: one job with its vertices and subtasks (`path` is the whole path).
  kj::Promise<void> job(Response& response, const std::string& path);
  kj::Promise<void> workers(Response& response);
  // The 307 to the leader's `path`, or the 503 when no other master is known to lead; nullptr
  // when this master leads (`leadership`).
  kj::Maybe<kj::Promise<void>> notLeading(Response& response, const std::string& path,
                                          const LeadershipSnapshot& leadership);
  // What /v1/jobs and /v1/jobs/<id> answer while the term's jobs cannot be read: notLeading's
  // answer, or the 503 while the term recovers; nullptr when they can be read.
  kj::Maybe<kj::Promise<void>> jobsUnreadable(Response& response, const std::string& path,
                                              const LeadershipSnapshot& leadership);
  // The 503 of a leader of `epoch` whose term still recovers.
  kj::Promise<void> recovering(Response& response, uint64_t epoch);
  kj::Promise<void> reply(Response& response, uint status, kj::StringPtr statusText,
                          kj::StringPtr contentType, std::string body,
                          const std::vector<std::pair<std::string, std::string>>& extra = {});

  kj::Promise<void> route(kj::HttpMethod method, const std::string& path, Response& response,
                          uint32_t pageNumber);

  ClusterView& view_;
  const http::MetricsRegistry& metrics_;
  const bool authenticationRequired_;
  const kj::HttpHeaderTable& headerTable_;
  bool closeRequested_ = false;
};

// The master's HTTP server on `bindAddress` (http.bind), serving MasterHttpRoutes for `view` and
// `metrics`, which must outlive it (http::HttpServer::listen).
kj::Promise<Result<kj::Own<http::HttpServer>>> listenMasterHttp(
    kj::Network& network, kj::Timer& timer, std::string bindAddress, ClusterView& view,
    const http::MetricsRegistry& metrics, bool authenticationRequired,
    uint64_t maxConnections = http::HttpServer::kDefaultMaxConnections);

}  // namespace regent::master

// The HTTP endpoints a worker serves on worker.http.bind (docs/workers.md): health, readiness
// (registered with the current leader) and Prometheus metrics, on the listener of
// services/http/http_server.h.
#pragma once

#include <kj/compat/http.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rpc/fenced_endpoint.h"
#include "services/http/http_server.h"
#include "services/taskexecutor/task_executor.h"

namespace regent::worker {

// What the endpoints ask of their worker. Loop-thread only; called while a request is served.
class WorkerHttpHost {
 public:
  virtual ~WorkerHttpHost() = default;
  // nullopt when registered with the current leader (TaskExecutor::registered()); otherwise why
  // not, for /readyz: no leader known, registering, or the last registration attempt's failure.
  virtual std::optional<std::string> notReadyReason() const = 0;
  // The epoch registered with (0 while not registered) and the epoch gate's highest.
  virtual uint64_t registeredEpoch() const = 0;
  virtual uint64_t highestEpoch() const = 0;
  virtual const taskexecutor::TaskExecutorCounters& counters() const = 0;
  virtual const std::vector<taskexecutor::SlotState>& slots() const = 0;
  // The TaskExecutorGateway's calls and the epoch gate's refusals, by method.
  virtual const rpc::FencingCounters& fencingCounters() const = 0;
};

// The routes:
//   GET /healthz  200 "ok"
//   GET /readyz   200 "ok: registered with the leader of epoch E"; 503 "not ready: <reason>"
//   GET /metrics  Prometheus text format 0.0.4: regent_worker_registered,
//                 regent_worker_epoch_highest, regent_worker_registrations_total,
//                 regent_worker_registration_attempts_total,
//                 regent_worker_resource_manager_lost_total, regent_worker_slots{state},
//                 regent_worker_epoch_gate_refusals_total{method}
// Other paths 404 and other methods 405 (Allow: GET), as on a master. A query string is ignored.
// `host` and `headerTable` must outlive the routes; `headerTable` must come from
// http::HttpRoutes::makeHeaderTable().
class WorkerHttpRoutes final : public http::HttpRouteSet {
 public:
  WorkerHttpRoutes(WorkerHttpHost& host, const kj::HttpHeaderTable& headerTable);

  kj::Promise<void> request(kj::HttpMethod method, kj::StringPtr url,
                            const kj::HttpHeaders& headers, kj::AsyncInputStream& requestBody,
                            Response& response) override;
  bool closeRequested() const override { return closeRequested_; }

 private:
  kj::Promise<void> route(kj::HttpMethod method, const std::string& path, Response& response);
  std::string metrics() const;
  kj::Promise<void> reply(Response& response, uint status, kj::StringPtr statusText,
                          kj::StringPtr contentType, std::string body);

  WorkerHttpHost& host_;
  const kj::HttpHeaderTable& headerTable_;
  kj::HttpHeaderId allow_;
  bool closeRequested_ = false;
};

}  // namespace regent::worker

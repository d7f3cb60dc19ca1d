// WorkerHttpRoutes (see worker_http.h).
#include "services/worker/worker_http.h"

#include <kj/debug.h>

#include <sstream>
#include <utility>

namespace regent::worker {
namespace {

constexpr const char* kText = "text/plain; charset=utf-8";
constexpr const char* kPrometheus = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace

WorkerHttpRoutes::WorkerHttpRoutes(WorkerHttpHost& host, const kj::HttpHeaderTable& headerTable)
    : host_(host),
      headerTable_(headerTable),
      allow_(KJ_REQUIRE_NONNULL(headerTable.stringToId("Allow"),
                                "the header table must come from HttpRoutes::makeHeaderTable()")) {}

kj::Promise<void> WorkerHttpRoutes::request(kj::HttpMethod method, kj::StringPtr url,
                                            const kj::HttpHeaders& headers, kj::AsyncInputStream&,
                                            Response& response) {
  return http::serveRoute(url, headers, closeRequested_, [&](const std::string& path) {
    return route(method, path, response);
  });
}

kj::Promise<void> WorkerHttpRoutes::reply(Response& response, uint status,
                                          kj::StringPtr statusText, kj::StringPtr contentType,
                                          std::string body) {
  kj::HttpHeaders headers(headerTable_);
  headers.set(kj::HttpHeaderId::CONTENT_TYPE, contentType);
  if (status == 405) headers.set(allow_, "GET");
  auto stream = response.send(status, statusText, headers, uint64_t(body.size()));
  auto text = kj::heap<std::string>(std::move(body));
  auto written = stream->write(text->data(), text->size());
  return written.attach(kj::mv(stream), kj::mv(text));
}

kj::Promise<void> WorkerHttpRoutes::route(kj::HttpMethod method, const std::string& path,
                                          Response& response) {
  if (path != "/healthz" && path != "/readyz" && path != "/metrics") {
    return reply(response, 404, "Not Found", kText,
                 "no such endpoint: " + http::echoablePath(path) + "\n");
  }
  if (method != kj::HttpMethod::GET) {
    return reply(response, 405, "Method Not Allowed", kText,
                 path + " answers GET only, not " + kj::str(method).cStr() + "\n");
  }
  if (path == "/healthz") return reply(response, 200, "OK", kText, "ok\n");
  if (path == "/readyz") {
    if (auto reason = host_.notReadyReason()) {
      return reply(response, 503, "Service Unavailable", kText, "not ready: " + *reason + "\n");
    }
    return reply(response, 200, "OK", kText,
                 "ok: registered with the leader of epoch " +
                     std::to_string(host_.registeredEpoch()) + "\n");
  }
  return reply(response, 200, "OK", kPrometheus, metrics());
}

std::string WorkerHttpRoutes::metrics() const {
  const taskexecutor::TaskExecutorCounters& counters = host_.counters();
  uint64_t allocated = 0;
  for (const taskexecutor::SlotState& slot : host_.slots()) {
    if (slot.allocation) ++allocated;
  }
  std::ostringstream out;
  http::writeMetricFamily(out, "regent_worker_registered", "gauge",
                          "Whether this worker is registered with the current leader (1) or "
                          "not (0).");
  out << "regent_worker_registered " << (host_.notReadyReason() ? 0 : 1) << '\n';
  http::writeMetricFamily(out, "regent_worker_epoch_highest", "gauge",
                          "The highest epoch this worker has seen; its epoch gate refuses calls "
                          "below it.");
  out << "regent_worker_epoch_highest " << host_.highestEpoch() << '\n';
  http::writeMetricFamily(out, "regent_worker_registrations_total", "counter",
                          "Registrations with a ResourceManager whose slot report was accepted.");
  out << "regent_worker_registrations_total " << counters.registrations << '\n';
  http::writeMetricFamily(out, "regent_worker_registration_attempts_total", "counter",
                          "Registration attempts, failed ones included.");
  out << "regent_worker_registration_attempts_total " << counters.registrationAttempts << '\n';
  http::writeMetricFamily(out, "regent_worker_resource_manager_lost_total", "counter",
                          "Times the ResourceManager registered with was considered lost "
                          "(heartbeat silence, disconnect, a forgotten registration).");
  out << "regent_worker_resource_manager_lost_total " << counters.resourceManagerLost << '\n';
  http::writeMetricFamily(out, "regent_worker_slots", "gauge",
                          "This worker's slots by state (free, allocated).");
  out << "regent_worker_slots{state=\"free\"} " << host_.slots().size() - allocated << '\n';
  out << "regent_worker_slots{state=\"allocated\"} " << allocated << '\n';
  http::writeMetricFamily(out, "regent_worker_epoch_gate_refusals_total", "counter",
                          "Calls on this worker refused by its epoch gate (an epoch below the "
                          "highest seen), by method.");
  for (const auto& [method, count] : host_.fencingCounters().all()) {
    out << "regent_worker_epoch_gate_refusals_total{method=\""
        << http::escapeLabelValue(method) << "\"} " << count << '\n';
  }
  return out.str();
}

}  // namespace regent::worker

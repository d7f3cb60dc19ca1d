// The master's HTTP endpoints (see master_http.h).
#include "services/master/master_http.h"

#include <kj/debug.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "common/ids.h"
#include "common/utf8.h"
#include "http/prometheus_text.h"
#include "rpc/job_status_json.h"
#include "rpc/task_executor_json.h"
#include "rpc/wire_ids.h"
#include "services/master/status_page.h"

namespace regent::master {
namespace {

constexpr const char* kJson = "application/json";
constexpr const char* kText = "text/plain; charset=utf-8";
// Jobs per page of /: each shown with its subtasks.
constexpr uint32_t kStatusPageSize = 50;

std::string errorJson(const std::string& status, const std::string& message) {
  return nlohmann::json{{"status", status}, {"message", message}}.dump() + "\n";
}

// What /v1/workers says in place of what it left out (`authenticationRequired`).
constexpr const char* kRedacted =
    "RPC authentication is on: attempt ids, pids, worker hosts and addresses and failure messages "
    "are left out; regentctl (role reader) shows them";

// Text from jobs and workers is sanitized; "replace" guards whatever text is added later.
std::string dumpJson(const nlohmann::json& body) {
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace

MasterHttpRoutes::MasterHttpRoutes(ClusterView& view, const http::MetricsRegistry& metrics,
                                   bool authenticationRequired,
                                   const kj::HttpHeaderTable& headerTable)
    : view_(view),
      metrics_(metrics),
      authenticationRequired_(authenticationRequired),
      headerTable_(headerTable) {}

kj::Promise<void> MasterHttpRoutes::reply(
    Response& response, uint status, kj::StringPtr statusText, kj::StringPtr contentType,
    std::string body, const std::vector<std::pair<std::string, std::string>>& extra) {
  return http::reply(response, headerTable_, status, statusText, contentType, std::move(body),
                     extra);
}

kj::Promise<void> MasterHttpRoutes::request(kj::HttpMethod method, kj::StringPtr url,
                                            const kj::HttpHeaders& headers, kj::AsyncInputStream&,
                                            Response& response) {
  // The page number of / ("?page=N"); every other query is ignored.
  uint32_t pageNumber = 0;
  const std::string whole(url.cStr());
  const size_t query = whole.find("?page=");
  if (query != std::string::npos) {
    const std::string digits = whole.substr(query + 6, 6);
    uint32_t page = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') break;
      page = page * 10 + static_cast<uint32_t>(c - '0');
    }
    pageNumber = page;
  }
  return http::serveRoute(url, headers, closeRequested_, [&](const std::string& path) {
    return route(method, path, response, pageNumber);
  });
}

kj::Promise<void> MasterHttpRoutes::route(kj::HttpMethod method, const std::string& path,
                                          Response& response, uint32_t pageNumber) {
  static const char* const kRoutes[] = {"/healthz",    "/readyz",  "/v1/leader",
                                        "/v1/jobs",    "/v1/workers", "/metrics",
                                        "/",           "/static/status.css",
                                        "/static/status.js"};
  static const std::string kJobPrefix = "/v1/jobs/";
  static const std::string kJobPagePrefix = "/jobs/";
  auto oneBelow = [&](const std::string& prefix) {
    return path.rfind(prefix, 0) == 0 && path.size() > prefix.size() &&
           path.find('/', prefix.size()) == std::string::npos;
  };
  bool known = oneBelow(kJobPrefix) || oneBelow(kJobPagePrefix);  // /v1/jobs/<id>, /jobs/<id>
  for (const char* route : kRoutes) known = known || path == route;
  KJ_IF_MAYBE (refused, http::refuseUnrouted(response, headerTable_, method, path, known)) {
    return kj::mv(*refused);
  }

  if (path == "/healthz") return reply(response, 200, "OK", kText, "ok\n");

  if (path == "/readyz") {
    const LeadershipSnapshot leadership = view_.leadership();
    const uint64_t epoch = leadership.leadingEpoch;
    if (epoch != 0) {
      if (leadership.serving) {
        return reply(response, 200, "OK", kText,
                     "ok: leader of epoch " + std::to_string(epoch) + ", SERVING\n");
      }
      return reply(response, 503, "Service Unavailable", kText,
                   "not ready: leader of epoch " + std::to_string(epoch) + " still RECOVERING\n");
    }
    if (leadership.zooKeeperConnected) {
      return reply(response, 200, "OK", kText, "ok: standby connected to ZooKeeper\n");
    }
    return reply(response, 503, "Service Unavailable", kText,
                 "not ready: standby not connected to ZooKeeper\n");
  }

  if (path == "/v1/leader") {
    const std::optional<leader::LeaderInfo> leader = view_.leadership().leader;
    if (!leader) {
      return reply(response, 503, "Service Unavailable", kJson,
                   nlohmann::json{{"status", "NONE"}}.dump() + "\n");
    }
    return reply(response, 200, "OK", kJson, leader::toJson(*leader) + "\n");
  }

  if (path == "/") return statusPage(response, pageNumber);
  if (path.rfind(kJobPagePrefix, 0) == 0) return jobPage(response, path);
  if (path == "/static/status.css") {
    return reply(response, 200, "OK", "text/css; charset=utf-8", statusPageStylesheet());
  }
  if (path == "/static/status.js") {
    return reply(response, 200, "OK", "text/javascript; charset=utf-8", statusPageScript());
  }
  if (path == "/v1/jobs") return jobs(response);
  if (path.rfind(kJobPrefix, 0) == 0) return job(response, path);
  if (path == "/v1/workers") return workers(response);
  return reply(response, 200, "OK", http::kPrometheusContentType, metrics_.text());
}

kj::Promise<void> MasterHttpRoutes::page(Response& response, uint status,
                                         kj::StringPtr statusText, std::string html) {
  return reply(response, status, statusText, "text/html; charset=utf-8", std::move(html),
               {{"Content-Security-Policy", statusPagePolicy()}, {"Cache-Control", "no-store"}});
}

kj::Promise<void> MasterHttpRoutes::statusPage(Response& response, uint32_t pageNumber) {
  // The shown jobs' details first: an ended job's may be in the store only.
  // One snapshot of the jobs per request: the page lists it.
  std::vector<JobId> shown;
  const LeadershipSnapshot before = view_.leadership();
  std::optional<JobsSnapshot> jobs;
  if (before.leadingEpoch != 0 && before.recovered) jobs = view_.jobs();
  if (jobs) {
    const auto [first, last] = shownRange(jobs->jobs.size(), pageNumber, kStatusPageSize);
    for (uint32_t i = first; i < last; ++i) {
      shown.push_back(wire::idFromWire<JobId>(jobs->jobs[i].getJobId()));
    }
  }
  kj::Vector<kj::Promise<void>> loads;
  for (const JobId& id : shown) loads.add(view_.loadJobDetail(id));
  // The contenders are read meanwhile, not after.
  auto contending = view_.contenders().eagerlyEvaluate(nullptr);
  auto loaded = kj::joinPromises(loads.releaseAsArray());
  return loaded.then([contending = kj::mv(contending)]() mutable { return kj::mv(contending); })
      .then([this, &response, pageNumber, shown = std::move(shown), jobs = std::move(jobs),
             jobsEpoch = before.leadingEpoch](
                Result<std::vector<leader::ContenderEntry>> contenders) mutable {
        StatusPageInput input;
        input.pageSize = kStatusPageSize;
        if (view_.leadership().recovered) {
          for (const JobId& id : shown) {
            if (std::optional<JobDetailSnapshot> job = view_.job(id)) {
              input.shownJobs.push_back(std::move(*job));
            }
          }
        }
        input.leadership = view_.leadership();
        if (contenders.ok()) {
          input.contenders = std::move(contenders).value();
        } else {
          input.contendersError = "the masters cannot be read: " + contenders.error().message;
        }
        std::optional<WorkersSnapshot> workers;
        if (input.leadership.leadingEpoch != 0) workers = view_.workers();
        // The snapshot taken before the loads, unless the term changed meanwhile.
        if (!input.leadership.recovered || input.leadership.leadingEpoch != jobsEpoch) {
          jobs.reset();
        }
        if (input.leadership.recovered && !jobs) jobs = view_.jobs();
        if (workers) input.workers = &*workers;
        if (jobs) input.jobs = &*jobs;
        input.events = view_.recentEvents();
        if (input.leadership.leadingEpoch != 0) input.history = view_.history();
        input.nowMs = wallClockMillis();
        input.page = pageNumber;
        input.redacted = authenticationRequired_;
        return page(response, 200, "OK", renderStatusPage(input));
      });
}

kj::Promise<void> MasterHttpRoutes::jobPage(Response& response, const std::string& path) {
  const LeadershipSnapshot leadership = view_.leadership();
  KJ_IF_MAYBE (refused, jobsUnreadable(response, path, leadership)) return kj::mv(*refused);
  const std::string idText = path.substr(std::string("/jobs/").size());
  const std::optional<JobId> id = JobId::fromHex(idText);
  if (!id) {
    return page(response, 400, "Bad Request",
                "not a job id (32 hex digits): " + htmlEscaped(http::echoablePath(idText)) + "\n");
  }
  return view_.loadJobDetail(*id).then([this, &response, id = *id, path]() -> kj::Promise<void> {
    const LeadershipSnapshot leadership = view_.leadership();
    KJ_IF_MAYBE (refused, jobsUnreadable(response, path, leadership)) return kj::mv(*refused);
    const std::optional<JobDetailSnapshot> snapshot = view_.job(id);
    if (!snapshot) return page(response, 404, "Not Found", "no job " + id.toHex() + "\n");
    return page(response, 200, "OK",
                renderJobPage(leadership, snapshot->status, wallClockMillis(),
                              authenticationRequired_));
  });
}

kj::Maybe<kj::Promise<void>> MasterHttpRoutes::notLeading(Response& response,
                                                          const std::string& path,
                                                          const LeadershipSnapshot& leadership) {
  if (leadership.leadingEpoch != 0) return nullptr;
  const std::optional<leader::LeaderInfo>& leader = leadership.leader;
  if (!leader || leader->masterId == leadership.self.masterId || leader->httpAddress.empty()) {
    // No leader, or a record of this master's own ended term: redirecting would loop.
    return reply(response, 503, "Service Unavailable", kJson,
                 errorJson("NONE", "no leader known to this master"));
  }
  const std::string location = "http://" + leader->httpAddress + path;
  return reply(response, 307, "Temporary Redirect", kJson,
               nlohmann::json{{"status", "NOT_LEADER"}, {"leader", location}}.dump() + "\n",
               {{"Location", location}});
}

kj::Maybe<kj::Promise<void>> MasterHttpRoutes::jobsUnreadable(
    Response& response, const std::string& path, const LeadershipSnapshot& leadership) {
  KJ_IF_MAYBE (redirected, notLeading(response, path, leadership)) return kj::mv(*redirected);
  if (leadership.recovered) return nullptr;
  return recovering(response, leadership.leadingEpoch);
}

kj::Promise<void> MasterHttpRoutes::recovering(Response& response, uint64_t epoch) {
  return reply(
      response, 503, "Service Unavailable", kJson,
      errorJson("RECOVERING", "leader of epoch " + std::to_string(epoch) + " is still recovering"));
}

kj::Promise<void> MasterHttpRoutes::jobs(Response& response) {
  const LeadershipSnapshot leadership = view_.leadership();
  KJ_IF_MAYBE (refused, jobsUnreadable(response, "/v1/jobs", leadership)) return kj::mv(*refused);
  // Each job's status as the Dispatcher's own wire mapping describes it.
  const std::optional<JobsSnapshot> snapshot = view_.jobs();
  if (!snapshot) return recovering(response, leadership.leadingEpoch);
  nlohmann::json jobs = nlohmann::json::array();
  for (auto job : snapshot->jobs) {
    jobs.push_back(
        {{"job_id", wire::idFromWire<JobId>(job.getJobId()).toHex()},
         {"name", sanitizeUtf8(std::string_view(job.getName().begin(), job.getName().size()))},
         {"state", wire::enumNameUpper(job.getState())},
         {"submitted_at_ms", job.getSubmittedAtMs()},
         {"state_changed_at_ms", job.getStateChangedAtMs()},
         {"ended_at_ms", job.getEndedAtMs()},
         {"restarts", job.getRestarts()}});
    if (job.getState() == wire::JobState::CORRUPT) {
      jobs.back()["corrupt_reason"] = sanitizeUtf8(
          std::string_view(job.getCorruptReason().begin(), job.getCorruptReason().size()));
    }
  }
  return reply(response, 200, "OK", kJson,
               dumpJson({{"epoch", leadership.leadingEpoch}, {"jobs", jobs}}));
}

kj::Promise<void> MasterHttpRoutes::job(Response& response, const std::string& path) {
  const LeadershipSnapshot leadership = view_.leadership();
  KJ_IF_MAYBE (refused, jobsUnreadable(response, path, leadership)) return kj::mv(*refused);
  const std::string idText = path.substr(std::string("/v1/jobs/").size());
  const std::optional<JobId> id = JobId::fromHex(idText);
  if (!id) {
    return reply(response, 400, "Bad Request", kJson,
                 errorJson("INVALID_ARGUMENT",
                           "not a job id (32 hex digits): " + http::echoablePath(idText)));
  }
  // An ended job's detail may be in the store only (it ended under an earlier leader).
  return view_.loadJobDetail(*id).then([this, &response, id = *id, path]() -> kj::Promise<void> {
    const LeadershipSnapshot leadership = view_.leadership();
    KJ_IF_MAYBE (refused, jobsUnreadable(response, path, leadership)) return kj::mv(*refused);
    const std::optional<JobDetailSnapshot> snapshot = view_.job(id);
    if (!snapshot) {
      return reply(response, 404, "Not Found", kJson,
                   errorJson("NOT_FOUND", "no job " + id.toHex()));
    }
    const wire::JobStatusAudience audience = authenticationRequired_
                                                 ? wire::JobStatusAudience::kPublic
                                                 : wire::JobStatusAudience::kReader;
    return reply(response, 200, "OK", kJson,
                 dumpJson({{"epoch", leadership.leadingEpoch},
                           {"job", wire::jobStatusJson(snapshot->status, audience)}}));
  });
}

kj::Promise<void> MasterHttpRoutes::workers(Response& response) {
  const LeadershipSnapshot leadership = view_.leadership();
  KJ_IF_MAYBE (redirected, notLeading(response, "/v1/workers", leadership)) {
    return kj::mv(*redirected);
  }
  const std::optional<WorkersSnapshot> snapshot = view_.workers();
  if (!snapshot) {
    return reply(
        response, 503, "Service Unavailable", kJson,
        errorJson("RECOVERING", "leader of epoch " + std::to_string(leadership.leadingEpoch) +
                                    " has not started its resource manager yet"));
  }
  // The same wire mapping listTaskExecutors answers with, then one JSON shape for HTTP and
  // regentctl; PENDING is known in process only.
  nlohmann::json workers = nlohmann::json::array();
  for (auto info : snapshot->workers) {
    const auto id = wire::idFromWire<ResourceId>(info.getRegistration().getResourceId());
    workers.push_back(wire::taskExecutorJson(
        info, [&](uint32_t index) { return snapshot->slotPending(id, index); }));
    if (authenticationRequired_) {
      for (const char* key : {"host", "pid", "data_address", "http_address"}) {
        workers.back().erase(key);
      }
    }
  }
  nlohmann::json body{{"epoch", leadership.leadingEpoch}, {"workers", workers}};
  if (authenticationRequired_) body["redacted"] = kRedacted;
  return reply(response, 200, "OK", kJson, dumpJson(body));
}

kj::Promise<Result<kj::Own<http::HttpServer>>> listenMasterHttp(
    kj::Network& network, kj::Timer& timer, std::string bindAddress, ClusterView& view,
    const http::MetricsRegistry& metrics, bool authenticationRequired, uint64_t maxConnections) {
  return http::HttpServer::listen(
      network, timer, std::move(bindAddress), "http.bind",
      [&view, &metrics, authenticationRequired](
          const kj::HttpHeaderTable& headerTable) -> kj::Own<http::HttpRouteSet> {
        return kj::heap<MasterHttpRoutes>(view, metrics, authenticationRequired, headerTable);
      },
      maxConnections);
}

}  // namespace regent::master

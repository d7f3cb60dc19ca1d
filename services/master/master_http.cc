// The master's HTTP endpoints (see master_http.h).
#include "services/master/master_http.h"

#include <capnp/message.h>
#include <capnp/orphan.h>
#include <capnp/schema.h>
#include <kj/debug.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "common/ids.h"
#include "common/utf8.h"
#include "http/prometheus_text.h"
#include "rpc/job_status_json.h"
#include "rpc/task_executor_json.h"
#include "rpc/wire_ids.h"
#include "services/dispatcher/dispatcher_gateway.h"

namespace regent::master {
namespace {

constexpr const char* kJson = "application/json";
constexpr const char* kText = "text/plain; charset=utf-8";

std::string errorJson(const std::string& status, const std::string& message) {
  return nlohmann::json{{"status", status}, {"message", message}}.dump() + "\n";
}

// What /v1/workers says in place of what it left out (MasterHttpHost::authenticationRequired).
constexpr const char* kRedacted =
    "RPC authentication is on: attempt ids, pids, worker hosts and addresses and failure messages "
    "are left out; regentctl (role reader) shows them";

// One metric family's header.
void family(std::ostringstream& out, const char* name, const char* type, const char* help) {
  http::writeMetricFamily(out, name, type, help);
}

}  // namespace

MasterHttpRoutes::MasterHttpRoutes(MasterHttpHost& host, const kj::HttpHeaderTable& headerTable)
    : host_(host), headerTable_(headerTable) {}

kj::Promise<void> MasterHttpRoutes::reply(
    Response& response, uint status, kj::StringPtr statusText, kj::StringPtr contentType,
    std::string body, const std::vector<std::pair<std::string, std::string>>& extra) {
  return http::reply(response, headerTable_, status, statusText, contentType, std::move(body),
                     extra);
}

kj::Promise<void> MasterHttpRoutes::request(kj::HttpMethod method, kj::StringPtr url,
                                            const kj::HttpHeaders& headers, kj::AsyncInputStream&,
                                            Response& response) {
  return http::serveRoute(url, headers, closeRequested_,
                          [&](const std::string& path) { return route(method, path, response); });
}

kj::Promise<void> MasterHttpRoutes::route(kj::HttpMethod method, const std::string& path,
                                          Response& response) {
  static const char* const kRoutes[] = {"/healthz", "/readyz",     "/v1/leader",
                                        "/v1/jobs", "/v1/workers", "/metrics"};
  static const std::string kJobPrefix = "/v1/jobs/";
  bool known = path.rfind(kJobPrefix, 0) == 0 && path.size() > kJobPrefix.size() &&
               path.find('/', kJobPrefix.size()) == std::string::npos;  // /v1/jobs/<id>
  for (const char* route : kRoutes) known = known || path == route;
  if (!known) {
    return reply(response, 404, "Not Found", kText,
                 "no such endpoint: " + http::echoablePath(path) + "\n");
  }
  if (method != kj::HttpMethod::GET) {
    return reply(response, 405, "Method Not Allowed", kText,
                 path + " answers GET only, not " + kj::str(method).cStr() + "\n");
  }

  if (path == "/healthz") return reply(response, 200, "OK", kText, "ok\n");

  if (path == "/readyz") {
    const uint64_t epoch = host_.leadingEpoch();
    if (epoch != 0) {
      if (host_.serving()) {
        return reply(response, 200, "OK", kText,
                     "ok: leader of epoch " + std::to_string(epoch) + ", SERVING\n");
      }
      return reply(response, 503, "Service Unavailable", kText,
                   "not ready: leader of epoch " + std::to_string(epoch) + " still RECOVERING\n");
    }
    if (host_.zooKeeperConnected()) {
      return reply(response, 200, "OK", kText, "ok: standby connected to ZooKeeper\n");
    }
    return reply(response, 503, "Service Unavailable", kText,
                 "not ready: standby not connected to ZooKeeper\n");
  }

  if (path == "/v1/leader") {
    auto leader = host_.knownLeader();
    if (!leader) {
      return reply(response, 503, "Service Unavailable", kJson,
                   nlohmann::json{{"status", "NONE"}}.dump() + "\n");
    }
    return reply(response, 200, "OK", kJson, leader::toJson(*leader) + "\n");
  }

  if (path == "/v1/jobs") return jobs(response);
  if (path.rfind("/v1/jobs/", 0) == 0) return job(response, path);
  if (path == "/v1/workers") return workers(response);
  return metrics(response);
}

kj::Maybe<kj::Promise<void>> MasterHttpRoutes::notLeading(Response& response,
                                                          const std::string& path) {
  if (host_.leadingEpoch() != 0) return nullptr;
  auto leader = host_.knownLeader();
  if (!leader || leader->masterId == host_.self().masterId || leader->httpAddress.empty()) {
    // No leader, or a record of this master's own ended term: redirecting would loop.
    return reply(response, 503, "Service Unavailable", kJson,
                 errorJson("NONE", "no leader known to this master"));
  }
  const std::string location = "http://" + leader->httpAddress + path;
  return reply(response, 307, "Temporary Redirect", kJson,
               nlohmann::json{{"status", "NOT_LEADER"}, {"leader", location}}.dump() + "\n",
               {{"Location", location}});
}

kj::Promise<void> MasterHttpRoutes::jobs(Response& response) {
  KJ_IF_MAYBE (redirected, notLeading(response, "/v1/jobs")) return kj::mv(*redirected);
  const uint64_t epoch = host_.leadingEpoch();
  const dispatcher::Dispatcher* leading = nullptr;
  KJ_IF_MAYBE (found, host_.leaderDispatcher()) {
    leading = found;
  }
  if (leading == nullptr) {
    return reply(response, 503, "Service Unavailable", kJson,
                 errorJson("RECOVERING",
                           "leader of epoch " + std::to_string(epoch) + " is still recovering"));
  }
  // One message for every job's status, mapped by the Dispatcher's own wire mapping.
  capnp::MallocMessageBuilder scratch;
  auto statuses = scratch.getOrphanage().newOrphan<capnp::List<wire::JobStatus>>(
      static_cast<uint32_t>(leading->jobCount()));
  uint32_t i = 0;
  leading->forEachJob(
      [&](const dispatcher::JobView& job) { dispatcher::toWire(job, statuses.get()[i++]); });
  nlohmann::json jobs = nlohmann::json::array();
  for (auto job : statuses.getReader()) {
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
  // Names are sanitized above; "replace" guards whatever text is added to a job later.
  return reply(response, 200, "OK", kJson,
               nlohmann::json{{"epoch", epoch}, {"jobs", jobs}}.dump(
                   -1, ' ', false, nlohmann::json::error_handler_t::replace) +
                   "\n");
}

kj::Promise<void> MasterHttpRoutes::job(Response& response, const std::string& path) {
  KJ_IF_MAYBE (redirected, notLeading(response, path)) return kj::mv(*redirected);
  const uint64_t epoch = host_.leadingEpoch();
  const dispatcher::Dispatcher* leading = nullptr;
  KJ_IF_MAYBE (found, host_.leaderDispatcher()) {
    leading = found;
  }
  if (leading == nullptr) {
    return reply(response, 503, "Service Unavailable", kJson,
                 errorJson("RECOVERING",
                           "leader of epoch " + std::to_string(epoch) + " is still recovering"));
  }
  const std::string idText = path.substr(std::string("/v1/jobs/").size());
  const std::optional<JobId> id = JobId::fromHex(idText);
  if (!id) {
    return reply(response, 400, "Bad Request", kJson,
                 errorJson("INVALID_ARGUMENT",
                           "not a job id (32 hex digits): " + http::echoablePath(idText)));
  }
  capnp::MallocMessageBuilder scratch;
  auto status = scratch.initRoot<wire::JobStatus>();
  KJ_IF_MAYBE (view, leading->job(*id)) {
    dispatcher::toWire(*view, status, dispatcher::JobDetail::kSubtasks);
  } else {
    return reply(response, 404, "Not Found", kJson,
                 errorJson("NOT_FOUND", "no job " + id->toHex()));
  }
  const wire::JobStatusAudience audience = host_.authenticationRequired()
                                               ? wire::JobStatusAudience::kPublic
                                               : wire::JobStatusAudience::kReader;
  return reply(
      response, 200, "OK", kJson,
      nlohmann::json{{"epoch", epoch}, {"job", wire::jobStatusJson(status.asReader(), audience)}}
              .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
          "\n");
}

kj::Promise<void> MasterHttpRoutes::workers(Response& response) {
  KJ_IF_MAYBE (redirected, notLeading(response, "/v1/workers")) return kj::mv(*redirected);
  const uint64_t epoch = host_.leadingEpoch();
  const dispatcher::TaskExecutorView* view = nullptr;
  KJ_IF_MAYBE (found, host_.leaderTaskExecutors()) {
    view = found;
  }
  if (view == nullptr) {
    return reply(response, 503, "Service Unavailable", kJson,
                 errorJson("RECOVERING", "leader of epoch " + std::to_string(epoch) +
                                             " has not started its resource manager yet"));
  }
  // The same wire mapping listTaskExecutors answers with, then one JSON shape for HTTP and
  // regentctl; PENDING is known in process only.
  capnp::MallocMessageBuilder scratch;
  auto listed = view->list(scratch.getOrphanage());
  nlohmann::json workers = nlohmann::json::array();
  for (auto info : listed.getReader()) {
    const auto id = wire::idFromWire<ResourceId>(info.getRegistration().getResourceId());
    workers.push_back(
        wire::taskExecutorJson(info, [&](uint32_t index) { return view->slotPending(id, index); }));
    if (host_.authenticationRequired()) {
      for (const char* key : {"host", "pid", "data_address", "http_address"}) {
        workers.back().erase(key);
      }
    }
  }
  nlohmann::json body{{"epoch", epoch}, {"workers", workers}};
  if (host_.authenticationRequired()) body["redacted"] = kRedacted;
  return reply(response, 200, "OK", kJson,
               body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

namespace {

// The JobMasters' families, over every term this process led.
void writeJobMasterMetrics(std::ostringstream& out, const jobmaster::JobMasterCounters& counts) {
  family(out, "regent_attempts_started_total", "counter",
         "Subtask attempts deployed (submitTask accepted by a worker), over every term this "
         "process led.");
  out << "regent_attempts_started_total " << counts.attemptsStarted << '\n';
  family(out, "regent_attempts_failed_total", "counter",
         "Subtask attempts that reached FAILED, over every term this process led.");
  out << "regent_attempts_failed_total " << counts.attemptsFailed << '\n';
  family(out, "regent_attempts_restarted_total", "counter",
         "Subtask attempts deployed again after a failure (restart strategy), over every term "
         "this process led.");
  out << "regent_attempts_restarted_total " << counts.attemptsRestarted << '\n';
  family(out, "regent_attempts_adopted_total", "counter",
         "Attempts of an earlier term that a worker offered after a failover and this process's "
         "JobMaster adopted, over every term this process led.");
  out << "regent_attempts_adopted_total " << counts.attemptsAdopted << '\n';
  family(out, "regent_job_reconciliation_timeouts_total", "counter",
         "Recovered jobs that left RECONCILING by jobmaster.reconciliation-timeout, over every "
         "term this process led.");
  out << "regent_job_reconciliation_timeouts_total " << counts.reconciliationTimeouts << '\n';
  family(out, "regent_job_submit_to_running_seconds", "histogram",
         "Time from a job's submission to its first attempt RUNNING, per job and term.");
  for (size_t i = 0; i < counts.kSubmitToRunningBounds.size(); ++i) {
    out << "regent_job_submit_to_running_seconds_bucket{le=\"" << counts.kSubmitToRunningBounds[i]
        << "\"} " << counts.submitToRunningBuckets[i] << '\n';
  }
  out << "regent_job_submit_to_running_seconds_bucket{le=\"+Inf\"} " << counts.submitToRunningCount
      << '\n';
  out << "regent_job_submit_to_running_seconds_sum " << counts.submitToRunningSum << '\n';
  out << "regent_job_submit_to_running_seconds_count " << counts.submitToRunningCount << '\n';
}

// The RPC authentication families (docs/security.md).
void writeAuthMetrics(std::ostringstream& out, const rpc::AuthCounters& auth) {
  family(out, "regent_rpc_auth_successes_total", "counter",
         "RPC connections that proved a role, by mechanism (secret, tls).");
  for (const auto& [mechanism, count] : auth.successes()) {
    out << "regent_rpc_auth_successes_total{mechanism=\"" << mechanism << "\"} " << count << '\n';
  }
  family(out, "regent_rpc_auth_failures_total", "counter",
         "RPC authentication attempts refused, by mechanism (secret, tls).");
  for (const auto& [mechanism, count] : auth.failures()) {
    out << "regent_rpc_auth_failures_total{mechanism=\"" << mechanism << "\"} " << count << '\n';
  }
  family(out, "regent_rpc_unauthenticated_refusals_total", "counter",
         "RPC calls refused because their connection had not authenticated.");
  out << "regent_rpc_unauthenticated_refusals_total " << auth.unauthenticatedRefusals() << '\n';
  family(out, "regent_rpc_permission_denials_total", "counter",
         "RPC calls refused because they need a role the connection does not hold, by role.");
  for (const auto& [role, count] : auth.denials()) {
    out << "regent_rpc_permission_denials_total{required=\"" << role << "\"} " << count << '\n';
  }
}

// The RPC transport's admission families (docs/security.md).
void writeTransportMetrics(std::ostringstream& out, const RpcTransportCounts& counts) {
  family(out, "regent_rpc_connections_dropped_before_auth_total", "counter",
         "RPC connections closed for a message over the pre-authentication size cap.");
  out << "regent_rpc_connections_dropped_before_auth_total " << counts.droppedBeforeAuthentication
      << '\n';
  family(out, "regent_rpc_connections_auth_timeouts_total", "counter",
         "RPC connections closed because they had not authenticated within rpc.auth-timeout.");
  out << "regent_rpc_connections_auth_timeouts_total " << counts.timedOutBeforeAuthentication
      << '\n';
  family(out, "regent_rpc_connections_refused_total", "counter",
         "RPC connections closed at accept by a connection cap, by cap (total, peer).");
  out << "regent_rpc_connections_refused_total{cap=\"total\"} " << counts.refusedOverTotalCap
      << '\n';
  out << "regent_rpc_connections_refused_total{cap=\"peer\"} " << counts.refusedOverPeerCap << '\n';
  family(out, "regent_rpc_tls_handshake_failures_total", "counter",
         "TLS handshakes refused or timed out (plain TCP, untrusted or missing client "
         "certificate).");
  out << "regent_rpc_tls_handshake_failures_total " << counts.tlsHandshakesFailed << '\n';
  family(out, "regent_rpc_connections_idle_timeouts_total", "counter",
         "RPC connections closed because nothing crossed them for rpc.idle-timeout.");
  out << "regent_rpc_connections_idle_timeouts_total " << counts.idleTimedOut << '\n';
  family(out, "regent_rpc_connections_message_timeouts_total", "counter",
         "RPC connections closed because a message had not arrived whole within "
         "rpc.message-timeout of its first bytes.");
  out << "regent_rpc_connections_message_timeouts_total " << counts.messageTimedOut << '\n';
}

}  // namespace

kj::Promise<void> MasterHttpRoutes::metrics(Response& response) {
  // Job counts come from the leader's Dispatcher in process; a standby (or a leader still
  // recovering) reports the family without samples.
  std::optional<std::map<std::string, uint64_t>> jobs;
  const uint64_t epoch = host_.leadingEpoch();
  KJ_IF_MAYBE (leading, host_.leaderDispatcher()) {
    if (epoch != 0) {
      jobs.emplace();
      for (auto enumerant : capnp::Schema::from<wire::JobState>().getEnumerants()) {
        (*jobs)[enumerant.getProto().getName().cStr()] = 0;
      }
      leading->forEachJob(
          [&](const dispatcher::JobView& job) { ++(*jobs)[wire::enumName(job.state)]; });
    }
  }
  std::ostringstream out;
  family(out, "regent_leader", "gauge", "Whether this master leads (1) or not (0).");
  out << "regent_leader " << (epoch != 0 ? 1 : 0) << '\n';
  family(out, "regent_leader_serving", "gauge",
         "Whether this master leads and its term is SERVING (1) or not (0).");
  out << "regent_leader_serving " << (epoch != 0 && host_.serving() ? 1 : 0) << '\n';
  auto leader = host_.knownLeader();
  family(out, "regent_epoch", "gauge",
         "Epoch of the leader as this master believes (its own while leading), 0 if none.");
  out << "regent_epoch " << (epoch != 0 ? epoch : (leader ? leader->epoch : 0)) << '\n';
  family(out, "regent_zookeeper_connected", "gauge",
         "Whether the ZooKeeper session is connected (1) or not (0).");
  out << "regent_zookeeper_connected " << (host_.zooKeeperConnected() ? 1 : 0) << '\n';
  family(out, "regent_jobs", "gauge",
         "Jobs by state in the leader's Dispatcher (no samples unless this master serves).");
  if (jobs) {
    for (const auto& [state, count] : *jobs) {
      out << "regent_jobs{state=\"" << http::escapeLabelValue(state) << "\"} " << count << '\n';
    }
  }
  family(out, "regent_workers_registered", "gauge",
         "Workers registered with the leader's ResourceManager (0 unless this master leads).");
  std::optional<dispatcher::TaskExecutorView::Counts> slots;
  if (epoch != 0) {
    KJ_IF_MAYBE (view, host_.leaderTaskExecutors()) {
      slots = view->counts();
    }
  }
  out << "regent_workers_registered " << (slots ? slots->taskExecutors : 0) << '\n';
  family(out, "regent_slots", "gauge",
         "Slots of the workers that reported to the leader, by state (no samples unless this "
         "master leads).");
  if (slots) {
    out << "regent_slots{state=\"free\"} " << slots->slotsFree << '\n';
    out << "regent_slots{state=\"allocated\"} " << slots->slotsAllocated << '\n';
    out << "regent_slots{state=\"pending\"} " << slots->slotsPending << '\n';
  }
  family(out, "regent_worker_heartbeat_timeouts_total", "counter",
         "Workers the leader removed after heartbeat.timeout of silence, over every term this "
         "process led.");
  out << "regent_worker_heartbeat_timeouts_total " << host_.workerHeartbeatTimeouts() << '\n';
  if (const auto* refused = host_.workerIdentityRefusals()) {
    family(out, "regent_rpc_worker_identity_refusals_total", "counter",
           "Worker calls refused because they spoke for a worker other than the one their "
           "connection registered (or before it registered one), by method.");
    for (const auto& [method, count] : *refused) {
      out << "regent_rpc_worker_identity_refusals_total{method=\"" << http::escapeLabelValue(method)
          << "\"} " << count << '\n';
    }
  }
  if (const jobmaster::JobMasterCounters* jobMasters = host_.jobMasterCounters()) {
    writeJobMasterMetrics(out, *jobMasters);
  }
  family(out, "regent_rpc_calls_total", "counter",
         "RPC calls that reached the leader's fenced gateways, by method.");
  for (const auto& [method, count] : host_.fencingCounters().calls()) {
    out << "regent_rpc_calls_total{method=\"" << http::escapeLabelValue(method) << "\"} " << count
        << '\n';
  }
  family(out, "regent_rpc_fencing_rejections_total", "counter",
         "RPC calls refused because their epoch was not the term's, by method.");
  for (const auto& [method, count] : host_.fencingCounters().all()) {
    out << "regent_rpc_fencing_rejections_total{method=\"" << http::escapeLabelValue(method)
        << "\"} " << count << '\n';
  }
  if (const rpc::AuthCounters* auth = host_.authCounters()) writeAuthMetrics(out, *auth);
  if (auto transport = host_.rpcTransportCounts()) writeTransportMetrics(out, *transport);
  http::writeAcceptLoopMetrics(out, "rpc", host_.rpcListener());
  http::writeHttpServerMetrics(out, host_.httpServer());
  return reply(response, 200, "OK", http::kPrometheusContentType, out.str());
}

kj::Promise<Result<kj::Own<http::HttpServer>>> listenMasterHttp(kj::Network& network,
                                                                kj::Timer& timer,
                                                                std::string bindAddress,
                                                                MasterHttpHost& host,
                                                                uint64_t maxConnections) {
  return http::HttpServer::listen(
      network, timer, std::move(bindAddress), "http.bind",
      [&host](const kj::HttpHeaderTable& headerTable) -> kj::Own<http::HttpRouteSet> {
        return kj::heap<MasterHttpRoutes>(host, headerTable);
      },
      maxConnections);
}

}  // namespace regent::master

// The HTTP endpoints (see http_server.h).
#include "services/http/http_server.h"

#include <capnp/message.h>
#include <capnp/orphan.h>
#include <capnp/schema.h>
#include <kj/debug.h>
#include <spdlog/spdlog.h>

#include <cctype>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "common/host_port.h"
#include "common/ids.h"
#include "common/utf8.h"
#include "rpc/wire_ids.h"
#include "services/dispatcher/dispatcher_gateway.h"
#include "services/dispatcher/task_executor_json.h"

namespace regent::http {
namespace {

constexpr const char* kJson = "application/json";
constexpr const char* kText = "text/plain; charset=utf-8";
constexpr const char* kPrometheus = "text/plain; version=0.0.4; charset=utf-8";

std::string errorJson(const std::string& status, const std::string& message) {
  return nlohmann::json{{"status", status}, {"message", message}}.dump() + "\n";
}

// Marks an exception the routes themselves threw, so the error handler can tell it (500) from a
// request kj could not read (400).
constexpr const char* kRouteFailed = "regent http: the route failed";

}  // namespace

std::string echoablePath(const std::string& path) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string shown;
  for (const char c : path) {
    if (shown.size() >= HttpRoutes::kMaxEchoedPath) {
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

void writeMetricFamily(std::ostream& out, const char* name, const char* type, const char* help) {
  out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}

namespace {

kj::Promise<void> plainReply(kj::HttpService::Response& response, const kj::HttpHeaderTable& table,
                             uint status, kj::StringPtr statusText, std::string body) {
  kj::HttpHeaders headers(table);
  headers.set(kj::HttpHeaderId::CONTENT_TYPE, kText);
  auto stream = response.send(status, statusText, headers, uint64_t(body.size()));
  auto text = kj::heap<std::string>(std::move(body));
  auto written = stream->write(text->data(), text->size());
  return written.attach(kj::mv(stream), kj::mv(text));
}

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

// One metric family's header.
void family(std::ostringstream& out, const char* name, const char* type, const char* help) {
  writeMetricFamily(out, name, type, help);
}

}  // namespace

std::string escapeLabelValue(const std::string& value) {
  std::string escaped;
  for (char c : value) {
    if (c == '\\') {
      escaped += "\\\\";
    } else if (c == '"') {
      escaped += "\\\"";
    } else if (c == '\n') {
      escaped += "\\n";
    } else {
      escaped += c;
    }
  }
  return escaped;
}

kj::Own<kj::HttpHeaderTable> HttpRoutes::makeHeaderTable() {
  kj::HttpHeaderTable::Builder builder;
  builder.add("Allow");
  return builder.build();
}

HttpRoutes::HttpRoutes(HttpHost& host, const kj::HttpHeaderTable& headerTable)
    : host_(host),
      headerTable_(headerTable),
      allow_(KJ_REQUIRE_NONNULL(headerTable.stringToId("Allow"),
                                "the header table must come from makeHeaderTable()")) {}

kj::Promise<void> HttpRoutes::reply(Response& response, uint status, kj::StringPtr statusText,
                                    kj::StringPtr contentType, std::string body,
                                    kj::Maybe<kj::StringPtr> location) {
  kj::HttpHeaders headers(headerTable_);
  headers.set(kj::HttpHeaderId::CONTENT_TYPE, contentType);
  KJ_IF_MAYBE (target, location) {
    headers.set(kj::HttpHeaderId::LOCATION, *target);
  }
  if (status == 405) headers.set(allow_, "GET");
  auto stream = response.send(status, statusText, headers, uint64_t(body.size()));
  auto text = kj::heap<std::string>(std::move(body));
  auto written = stream->write(text->data(), text->size());
  return written.attach(kj::mv(stream), kj::mv(text));
}

kj::Promise<void> HttpRoutes::request(kj::HttpMethod method, kj::StringPtr url,
                                      const kj::HttpHeaders& headers, kj::AsyncInputStream&,
                                      Response& response) {
  return serveRoute(url, headers, closeRequested_, [&](const std::string& path) {
    return route(method, path, response);
  });
}

kj::Promise<void> HttpRoutes::route(kj::HttpMethod method, const std::string& path,
                                    Response& response) {
  static const char* const kRoutes[] = {"/healthz", "/readyz", "/v1/leader", "/v1/jobs",
                                        "/v1/workers", "/metrics"};
  static const std::string kJobPrefix = "/v1/jobs/";
  bool known = path.rfind(kJobPrefix, 0) == 0 && path.size() > kJobPrefix.size() &&
               path.find('/', kJobPrefix.size()) == std::string::npos;  // /v1/jobs/<id>
  for (const char* route : kRoutes) known = known || path == route;
  if (!known) {
    return reply(response, 404, "Not Found", kText,
                 "no such endpoint: " + echoablePath(path) + "\n");
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

kj::Maybe<kj::Promise<void>> HttpRoutes::notLeading(Response& response, const std::string& path) {
  if (host_.leadingEpoch() != 0) return nullptr;
  auto leader = host_.knownLeader();
  if (!leader || leader->masterId == host_.self().masterId || leader->httpAddress.empty()) {
    // No leader, or a record of this master's own ended term: redirecting would loop.
    return reply(response, 503, "Service Unavailable", kJson,
                 errorJson("NONE", "no leader known to this master"));
  }
  std::string location = "http://" + leader->httpAddress + path;
  return reply(response, 307, "Temporary Redirect", kJson,
               nlohmann::json{{"status", "NOT_LEADER"}, {"leader", location}}.dump() + "\n",
               kj::StringPtr(location.c_str()))
      .attach(kj::mv(location));
}

kj::Promise<void> HttpRoutes::jobs(Response& response) {
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
  leading->forEachJob([&](const dispatcher::JobView& job) {
    dispatcher::toWire(job, statuses.get()[i++]);
  });
  nlohmann::json jobs = nlohmann::json::array();
  for (auto job : statuses.getReader()) {
    jobs.push_back({{"job_id", wire::idFromWire<JobId>(job.getJobId()).toHex()},
                    {"name", sanitizeUtf8(std::string_view(job.getName().begin(),
                                                           job.getName().size()))},
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

namespace {

std::string textOf(capnp::Text::Reader text) {
  return sanitizeUtf8(std::string_view(text.begin(), text.size()));
}

nlohmann::json taskCountsJson(wire::TaskCounts::Reader tasks) {
  return {{"total", tasks.getTotal()},         {"pending", tasks.getPending()},
          {"running", tasks.getRunning()},     {"finished", tasks.getFinished()},
          {"canceling", tasks.getCanceling()}, {"canceled", tasks.getCanceled()},
          {"failed", tasks.getFailed()},       {"reconciling", tasks.getReconciling()}};
}

// What a route says in place of what it left out (HttpHost::authenticationRequired).
constexpr const char* kRedacted =
    "RPC authentication is on: attempt ids, pids, worker hosts and addresses and failure messages "
    "are left out; regentctl (role reader) shows them";

// Leaves out of a subtaskJson what is not public.
void redactSubtask(nlohmann::json& json) {
  for (const char* key : {"host", "http_address", "last_failure"}) json.erase(key);
  if (json["attempt"].is_object()) {
    for (const char* key : {"attempt_id", "pid", "failure_message"}) json["attempt"].erase(key);
  }
}

nlohmann::json subtaskJson(wire::SubtaskStatus::Reader subtask) {
  nlohmann::json json{{"index", subtask.getIndex()},
                      {"attempts", subtask.getAttempts()},
                      {"host", textOf(subtask.getHost())},
                      {"http_address", textOf(subtask.getHttpAddress())},
                      {"last_failure", textOf(subtask.getLastFailure())},
                      {"waiting_reason", textOf(subtask.getWaitingReason())},
                      {"resource_id", nullptr},
                      {"attempt", nullptr}};
  if (subtask.hasResourceId()) {
    json["resource_id"] = wire::idFromWire<ResourceId>(subtask.getResourceId()).toHex();
  }
  if (subtask.hasAttempt()) {
    auto attempt = subtask.getAttempt();
    json["attempt"] = {{"attempt_id", wire::idFromWire<AttemptId>(attempt.getAttemptId()).toHex()},
                       {"attempt_number", attempt.getAttemptNumber()},
                       {"state", wire::enumNameUpper(attempt.getState())},
                       {"pid", attempt.getPid()},
                       {"exit_code", attempt.getExitCode()},
                       {"signal", attempt.getTermSignal()},
                       {"failure_message", textOf(attempt.getFailureMessage())},
                       {"started_at_ms", attempt.getStartedAtMs()},
                       {"ended_at_ms", attempt.getEndedAtMs()}};
  }
  return json;
}

// One job in full: what jobStatus answers, as JSON; `redacted`: without what is not public.
nlohmann::json jobDetailJson(wire::JobStatus::Reader job, bool redacted) {
  nlohmann::json json{{"job_id", wire::idFromWire<JobId>(job.getJobId()).toHex()},
                      {"name", textOf(job.getName())},
                      {"state", wire::enumNameUpper(job.getState())},
                      {"submitted_at_ms", job.getSubmittedAtMs()},
                      {"state_changed_at_ms", job.getStateChangedAtMs()},
                      {"ended_at_ms", job.getEndedAtMs()},
                      {"restarts", job.getRestarts()},
                      {"tasks", taskCountsJson(job.getTasks())},
                      {"waiting_reason", textOf(job.getWaitingReason())},
                      {"failure", nullptr}};
  nlohmann::json vertices = nlohmann::json::array();
  for (auto vertex : job.getVertices()) {
    nlohmann::json subtasks = nlohmann::json::array();
    for (auto subtask : vertex.getSubtasks()) {
      subtasks.push_back(subtaskJson(subtask));
      if (redacted) redactSubtask(subtasks.back());
    }
    vertices.push_back({{"name", textOf(vertex.getName())},
                        {"parallelism", vertex.getParallelism()},
                        {"tasks", taskCountsJson(vertex.getTasks())},
                        {"subtasks", subtasks}});
  }
  json["vertices"] = vertices;
  if (job.hasFailure()) {
    auto failure = job.getFailure();
    json["failure"] = {{"message", textOf(failure.getMessage())},
                       {"vertex", textOf(failure.getVertexName())},
                       {"subtask_index", failure.getSubtaskIndex()},
                       {"exit_code", failure.getExitCode()},
                       {"at_ms", failure.getAtMs()}};
    if (redacted) json["failure"].erase("message");
  }
  if (redacted) json["redacted"] = kRedacted;
  if (job.getState() == wire::JobState::CORRUPT) {
    json["corrupt_reason"] = textOf(job.getCorruptReason());
  }
  return json;
}

}  // namespace

kj::Promise<void> HttpRoutes::job(Response& response, const std::string& path) {
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
                 errorJson("INVALID_ARGUMENT", "not a job id (32 hex digits): " +
                                                   echoablePath(idText)));
  }
  capnp::MallocMessageBuilder scratch;
  auto status = scratch.initRoot<wire::JobStatus>();
  KJ_IF_MAYBE (view, leading->job(*id)) {
    dispatcher::toWire(*view, status, dispatcher::JobDetail::kSubtasks);
  } else {
    return reply(response, 404, "Not Found", kJson,
                 errorJson("NOT_FOUND", "no job " + id->toHex()));
  }
  return reply(response, 200, "OK", kJson,
               nlohmann::json{{"epoch", epoch},
                              {"job", jobDetailJson(status.asReader(),
                                                    host_.authenticationRequired())}}
                       .dump(
                   -1, ' ', false, nlohmann::json::error_handler_t::replace) +
                   "\n");
}

kj::Promise<void> HttpRoutes::workers(Response& response) {
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
    workers.push_back(dispatcher::taskExecutorJson(
        info, [&](uint32_t index) { return view->slotPending(id, index); }));
    if (host_.authenticationRequired()) {
      for (const char* key : {"host", "pid", "data_address", "http_address"}) {
        workers.back().erase(key);
      }
    }
  }
  nlohmann::json body{{"epoch", epoch}, {"workers", workers}};
  if (host_.authenticationRequired()) body["redacted"] = kRedacted;
  return reply(response, 200, "OK", kJson,
               body.dump(
                   -1, ' ', false, nlohmann::json::error_handler_t::replace) +
                   "\n");
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
    out << "regent_job_submit_to_running_seconds_bucket{le=\""
        << counts.kSubmitToRunningBounds[i] << "\"} " << counts.submitToRunningBuckets[i]
        << '\n';
  }
  out << "regent_job_submit_to_running_seconds_bucket{le=\"+Inf\"} "
      << counts.submitToRunningCount << '\n';
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
  out << "regent_rpc_connections_refused_total{cap=\"peer\"} " << counts.refusedOverPeerCap
      << '\n';
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

kj::Promise<void> HttpRoutes::metrics(Response& response) {
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
      out << "regent_jobs{state=\"" << escapeLabelValue(state) << "\"} " << count << '\n';
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
      out << "regent_rpc_worker_identity_refusals_total{method=\"" << escapeLabelValue(method)
          << "\"} " << count << '\n';
    }
  }
  if (const jobmaster::JobMasterCounters* jobMasters = host_.jobMasterCounters()) {
    writeJobMasterMetrics(out, *jobMasters);
  }
  family(out, "regent_rpc_calls_total", "counter",
         "RPC calls that reached the leader's fenced gateways, by method.");
  for (const auto& [method, count] : host_.fencingCounters().calls()) {
    out << "regent_rpc_calls_total{method=\"" << escapeLabelValue(method) << "\"} " << count
        << '\n';
  }
  family(out, "regent_rpc_fencing_rejections_total", "counter",
         "RPC calls refused because their epoch was not the term's, by method.");
  for (const auto& [method, count] : host_.fencingCounters().all()) {
    out << "regent_rpc_fencing_rejections_total{method=\"" << escapeLabelValue(method)
        << "\"} " << count << '\n';
  }
  if (const rpc::AuthCounters* auth = host_.authCounters()) writeAuthMetrics(out, *auth);
  if (auto transport = host_.rpcTransportCounts()) writeTransportMetrics(out, *transport);
  writeRpcListenerMetrics(out, host_.rpcListener());
  writeHttpServerMetrics(out, host_.httpServer());
  return reply(response, 200, "OK", kPrometheus, out.str());
}

kj::Promise<void> HttpProtocolPolicy::handleClientProtocolError(
    kj::HttpHeaders::ProtocolError protocolError, kj::HttpService::Response& response) {
  spdlog::debug("http: refused a request that does not parse: {}",
                protocolError.description.cStr());
  // kj's description of a protocol error is meant for the client (no request data in it).
  return plainReply(response, headerTable_, protocolError.statusCode,
                    protocolError.statusMessage,
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
      return plainReply(*open, headerTable_, 500, "Internal Server Error",
                        "internal error\n");
    }
    return plainReply(*open, headerTable_, 400, "Bad Request",
                      "bad request: the request cannot be read (malformed message framing, such "
                      "as a duplicate or invalid Content-Length)\n");
  }
  return kj::READY_NOW;
}

kj::Promise<void> HttpProtocolPolicy::handleNoResponse(kj::HttpService::Response& response) {
  spdlog::error("http: a route returned without a response");
  return plainReply(response, headerTable_, 500, "Internal Server Error",
                    "internal error\n");
}

kj::Promise<Result<kj::Own<HttpServer>>> HttpServer::listen(kj::Network& network, kj::Timer& timer,
                                                            std::string bindAddress, HttpHost& host,
                                                            uint64_t maxConnections) {
  return listen(
      network, timer, std::move(bindAddress), "http.bind",
      [&host](const kj::HttpHeaderTable& headerTable) -> kj::Own<HttpRouteSet> {
        return kj::heap<HttpRoutes>(host, headerTable);
      },
      maxConnections);
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
    : headerTable_(HttpRoutes::makeHeaderTable()),
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

void writeHttpServerMetrics(std::ostream& out, const HttpServer* server) {
  writeMetricFamily(out, "regent_http_accept_failures_total", "counter",
                    "Failed accepts on the HTTP port, by reason (emfile, enfile: out of file "
                    "descriptors; memory; other); the server backs off and accepts again.");
  if (server != nullptr) {
    for (AcceptFailure reason : kAcceptFailures) {
      out << "regent_http_accept_failures_total{reason=\"" << acceptFailureLabel(reason) << "\"} "
          << server->listener().failures(reason) << '\n';
    }
  }
  writeMetricFamily(out, "regent_http_connections_shed_total", "counter",
                    "HTTP connections closed unserved while out of file descriptors.");
  if (server != nullptr) {
    out << "regent_http_connections_shed_total " << server->listener().shed() << '\n';
  }
  writeMetricFamily(out, "regent_http_connections_refused_total", "counter",
                    "HTTP connections closed at accept because http.max-connections were open.");
  if (server != nullptr) {
    out << "regent_http_connections_refused_total " << server->connectionsRefusedOverCap() << '\n';
  }
}

void writeRpcListenerMetrics(std::ostream& out, const AcceptLoop* listener) {
  writeMetricFamily(out, "regent_rpc_accept_failures_total", "counter",
                    "Failed accepts on the RPC port, by reason (emfile, enfile: out of file "
                    "descriptors; memory; other); the server backs off and accepts again.");
  if (listener != nullptr) {
    for (AcceptFailure reason : kAcceptFailures) {
      out << "regent_rpc_accept_failures_total{reason=\"" << acceptFailureLabel(reason) << "\"} "
          << listener->failures(reason) << '\n';
    }
  }
  writeMetricFamily(out, "regent_rpc_connections_shed_total", "counter",
                    "RPC connections closed unserved while out of file descriptors.");
  if (listener != nullptr) {
    out << "regent_rpc_connections_shed_total " << listener->shed() << '\n';
  }
}

}  // namespace regent::http

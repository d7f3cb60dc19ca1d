// The master's metric families (see master_metrics.h).
#include "services/master/master_metrics.h"

#include <capnp/schema.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "rpc/wire_ids.h"

namespace regent::master {
namespace {

using http::MetricSample;
using http::MetricsRegistry;
using http::samplesByLabel;
using Samples = std::vector<MetricSample>;

constexpr MetricsRegistry::Type kCounter = MetricsRegistry::Type::kCounter;
constexpr MetricsRegistry::Type kGauge = MetricsRegistry::Type::kGauge;

}  // namespace

void addClusterViewMetrics(MetricsRegistry& registry, const ClusterView& view) {
  registry.gauge("regent_leader", "Whether this master leads (1) or not (0).",
                 [&view] { return uint64_t{view.leadership().leadingEpoch != 0}; });
  registry.gauge("regent_leader_serving",
                 "Whether this master leads and its term is SERVING (1) or not (0).", [&view] {
                   const LeadershipSnapshot leadership = view.leadership();
                   return uint64_t{leadership.leadingEpoch != 0 && leadership.serving};
                 });
  registry.gauge("regent_epoch",
                 "Epoch of the leader as this master believes (its own while leading), 0 if none.",
                 [&view] {
                   const LeadershipSnapshot leadership = view.leadership();
                   if (leadership.leadingEpoch != 0) return leadership.leadingEpoch;
                   return leadership.leader ? leadership.leader->epoch : uint64_t{0};
                 });
  registry.gauge("regent_zookeeper_connected",
                 "Whether the ZooKeeper session is connected (1) or not (0).",
                 [&view] { return uint64_t{view.leadership().zooKeeperConnected}; });
  // Counted in process from the term's Dispatcher; a standby (or a leader still recovering)
  // reports the family without samples.
  registry.add("regent_jobs", kGauge,
               "Jobs by state in the leader's Dispatcher (no samples unless this master serves).",
               [&view] {
                 std::optional<dispatcher::JobCounts> counts = view.jobCounts();
                 if (!counts) return Samples{};
                 std::map<std::string, uint64_t> byState;
                 for (auto enumerant : capnp::Schema::from<wire::JobState>().getEnumerants()) {
                   byState[enumerant.getProto().getName().cStr()] =
                       counts->of(static_cast<wire::JobState>(enumerant.getOrdinal()));
                 }
                 return samplesByLabel("state", byState);
               });
  registry.gauge(
      "regent_workers_registered",
      "Workers registered with the leader's ResourceManager (0 unless this master leads).",
      [&view] {
        std::optional<dispatcher::TaskExecutorView::Counts> counts = view.workerCounts();
        return uint64_t{counts ? counts->taskExecutors : 0};
      });
  registry.add("regent_slots", kGauge,
               "Slots of the workers that reported to the leader, by state (no samples unless "
               "this master leads).",
               [&view] {
                 std::optional<dispatcher::TaskExecutorView::Counts> counts = view.workerCounts();
                 if (!counts) return Samples{};
                 return Samples{{{{"state", "free"}}, uint64_t{counts->slotsFree}},
                                {{{"state", "allocated"}}, uint64_t{counts->slotsAllocated}},
                                {{{"state", "pending"}}, uint64_t{counts->slotsPending}}};
               });
}

void addResourceManagerMetrics(MetricsRegistry& registry,
                               const resourcemanager::ResourceManagerCounters& counters) {
  registry.counter("regent_worker_heartbeat_timeouts_total",
                   "Workers the leader removed after heartbeat.timeout of silence, over every "
                   "term this process led.",
                   [&counters] { return counters.heartbeatTimeouts; });
  registry.add(
      "regent_rpc_worker_identity_refusals_total", kCounter,
      "Worker calls refused because they spoke for a worker other than the one their "
      "connection registered (or before it registered one), by method.",
      [&counters] { return samplesByLabel("method", counters.identityRefusals.byMethod()); });
  registry.gauge("regent_workers_requested",
                 "Workers the leader's resource provider is starting (resourcemanager.provider); "
                 "0 on a standby.",
                 [&counters] { return counters.workersRequested; });
  registry.gauge("regent_workers_pending",
                 "Workers the resource provider started that have not registered yet.",
                 [&counters] { return counters.workersPending; });
  registry.gauge("regent_workers_started",
                 "Workers the resource provider started that the leader counts as its own, in "
                 "every phase (requested, pending registration, registered, releasing).",
                 [&counters] { return counters.workersStarted; });
  registry.counter("regent_workers_start_failures_total",
                   "Worker starts that failed (the provider's error, an exit before registering, "
                   "or resourcemanager.workers.start-timeout), over every term this process led.",
                   [&counters] { return counters.workerStartFailures; });
  registry.counter("regent_workers_released_total",
                   "Started workers released (idle, or never registered), over every term this "
                   "process led.",
                   [&counters] { return counters.workersReleased; });
}

void addJobMasterMetrics(MetricsRegistry& registry, const jobmaster::JobMasterCounters& counters) {
  registry.counter("regent_attempts_started_total",
                   "Subtask attempts deployed (submitTask accepted by a worker), over every term "
                   "this process led.",
                   [&counters] { return counters.attemptsStarted; });
  registry.counter("regent_attempts_failed_total",
                   "Subtask attempts that reached FAILED, over every term this process led.",
                   [&counters] { return counters.attemptsFailed; });
  registry.counter("regent_attempts_restarted_total",
                   "Subtask attempts deployed again after a failure (restart strategy), over every "
                   "term this process led.",
                   [&counters] { return counters.attemptsRestarted; });
  registry.counter("regent_attempts_adopted_total",
                   "Attempts of an earlier term that a worker offered after a failover and this "
                   "process's JobMaster adopted, over every term this process led.",
                   [&counters] { return counters.attemptsAdopted; });
  registry.counter("regent_job_reconciliation_timeouts_total",
                   "Recovered jobs that left RECONCILING by jobmaster.reconciliation-timeout, over "
                   "every term this process led.",
                   [&counters] { return counters.reconciliationTimeouts; });
  registry.histogram("regent_job_submit_to_running_seconds",
                     "Time from a job's submission to its first attempt RUNNING, per job and term.",
                     [&counters] {
                       http::HistogramSnapshot histogram{.count = counters.submitToRunningCount,
                                                         .sum = counters.submitToRunningSum};
                       for (size_t i = 0; i < counters.kSubmitToRunningBounds.size(); ++i) {
                         histogram.buckets.emplace_back(counters.kSubmitToRunningBounds[i],
                                                        counters.submitToRunningBuckets[i]);
                       }
                       return histogram;
                     });
}

void addFencingMetrics(MetricsRegistry& registry, const rpc::FencingCounters& counters) {
  registry.add("regent_rpc_calls_total", kCounter,
               "RPC calls that reached the leader's fenced gateways, by method.",
               [&counters] { return samplesByLabel("method", counters.calls()); });
  registry.add("regent_rpc_fencing_rejections_total", kCounter,
               "RPC calls refused because their epoch was not the term's, by method.",
               [&counters] { return samplesByLabel("method", counters.all()); });
}

void addAuthMetrics(MetricsRegistry& registry, const rpc::AuthCounters& counters) {
  registry.add("regent_rpc_auth_successes_total", kCounter,
               "RPC connections that proved a role, by mechanism (secret, tls).",
               [&counters] { return samplesByLabel("mechanism", counters.successes()); });
  registry.add("regent_rpc_auth_failures_total", kCounter,
               "RPC authentication attempts refused, by mechanism (secret, tls).",
               [&counters] { return samplesByLabel("mechanism", counters.failures()); });
  registry.counter("regent_rpc_unauthenticated_refusals_total",
                   "RPC calls refused because their connection had not authenticated.",
                   [&counters] { return counters.unauthenticatedRefusals(); });
  registry.add("regent_rpc_permission_denials_total", kCounter,
               "RPC calls refused because they need a role the connection does not hold, by role.",
               [&counters] { return samplesByLabel("required", counters.denials()); });
}

void addRpcTransportMetrics(MetricsRegistry& registry,
                            std::function<std::optional<RpcTransportCounts>()> counts) {
  // One family of the counts `pick` chooses, left out while there are none.
  auto family = [&registry, &counts](const char* name, const char* help, auto pick) {
    registry.add(name, kCounter, help, [counts, pick]() -> std::optional<Samples> {
      std::optional<RpcTransportCounts> now = counts();
      if (!now) return std::nullopt;
      return pick(*now);
    });
  };
  family("regent_rpc_connections_dropped_before_auth_total",
         "RPC connections closed for a message over the pre-authentication size cap.",
         [](const RpcTransportCounts& c) {
           return Samples{{{}, c.droppedBeforeAuthentication}};
         });
  family("regent_rpc_connections_auth_timeouts_total",
         "RPC connections closed because they had not authenticated within rpc.auth-timeout.",
         [](const RpcTransportCounts& c) {
           return Samples{{{}, c.timedOutBeforeAuthentication}};
         });
  family("regent_rpc_connections_refused_total",
         "RPC connections closed at accept by a connection cap, by cap (total, peer).",
         [](const RpcTransportCounts& c) {
           return Samples{{{{"cap", "total"}}, c.refusedOverTotalCap},
                          {{{"cap", "peer"}}, c.refusedOverPeerCap}};
         });
  family("regent_rpc_tls_handshake_failures_total",
         "TLS handshakes refused or timed out (plain TCP, untrusted or missing client "
         "certificate).",
         [](const RpcTransportCounts& c) {
           return Samples{{{}, c.tlsHandshakesFailed}};
         });
  family("regent_rpc_connections_idle_timeouts_total",
         "RPC connections closed because nothing crossed them for rpc.idle-timeout.",
         [](const RpcTransportCounts& c) {
           return Samples{{{}, c.idleTimedOut}};
         });
  family("regent_rpc_connections_message_timeouts_total",
         "RPC connections closed because a message had not arrived whole within "
         "rpc.message-timeout of its first bytes.",
         [](const RpcTransportCounts& c) {
           return Samples{{{}, c.messageTimedOut}};
         });
}

}  // namespace regent::master

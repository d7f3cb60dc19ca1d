// The metric families of a master (/metrics, docs/operations.md), each registered where its
// values live: MasterProcess registers them once, in the order /metrics writes them.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "http/metrics_registry.h"
#include "rpc/auth_roles.h"
#include "rpc/fenced_endpoint.h"
#include "services/jobmaster/job_masters.h"
#include "services/master/cluster_view.h"
#include "services/resourcemanager/resource_manager.h"

namespace regent::master {

// The RPC transport's admission counts since the process started (rpc/rpc_server.h,
// rpc/rpc_tls.h).
struct RpcTransportCounts {
  uint64_t droppedBeforeAuthentication = 0;   // A message over the pre-authentication cap.
  uint64_t timedOutBeforeAuthentication = 0;  // Not authenticated within rpc.auth-timeout.
  uint64_t refusedOverTotalCap = 0;           // rpc.max-connections open at accept.
  uint64_t refusedOverPeerCap = 0;            // rpc.max-connections-per-peer open at accept.
  uint64_t tlsHandshakesFailed = 0;           // Refused or timed-out TLS handshakes.
  uint64_t idleTimedOut = 0;                  // Nothing crossed for rpc.idle-timeout.
  uint64_t messageTimedOut = 0;               // A message not whole within rpc.message-timeout.
};

// What every registration below reads must outlive `registry`.

// The leadership, jobs, workers and slots as `view` shows them: regent_leader,
// regent_leader_serving, regent_epoch, regent_zookeeper_connected, regent_jobs{state} (samples
// only while the term recovered), regent_workers_registered, regent_slots{state} (samples only
// while leading).
void addClusterViewMetrics(http::MetricsRegistry& registry, const ClusterView& view);
// Over every term the process led: regent_worker_heartbeat_timeouts_total and
// regent_rpc_worker_identity_refusals_total{method}.
void addResourceManagerMetrics(http::MetricsRegistry& registry,
                               const resourcemanager::ResourceManagerCounters& counters);
// Over every term the process led: the attempt counters and
// regent_job_submit_to_running_seconds.
void addJobMasterMetrics(http::MetricsRegistry& registry,
                         const jobmaster::JobMasterCounters& counters);
// regent_rpc_calls_total{method} and regent_rpc_fencing_rejections_total{method}.
void addFencingMetrics(http::MetricsRegistry& registry, const rpc::FencingCounters& counters);
// The RPC authentication outcomes (docs/security.md).
void addAuthMetrics(http::MetricsRegistry& registry, const rpc::AuthCounters& counters);
// The RPC transport's admission counts (docs/security.md); the families are left out while
// `counts` returns nullopt (no RPC server yet).
void addRpcTransportMetrics(http::MetricsRegistry& registry,
                            std::function<std::optional<RpcTransportCounts>()> counts);

}  // namespace regent::master

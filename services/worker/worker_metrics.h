// The metric families of a worker (/metrics, docs/workers.md), read from the worker the routes
// serve: WorkerProcess registers them once, in the order /metrics writes them, then the HTTP
// listener's (http::addHttpServerMetrics) and the events file's (http::addEventsFileMetrics).
#pragma once

#include "http/metrics_registry.h"
#include "services/worker/worker_http.h"

namespace regent::worker {

// regent_worker_registered, regent_worker_epoch_highest, regent_worker_registrations_total,
// regent_worker_registration_attempts_total, regent_worker_resource_manager_lost_total,
// regent_worker_slots{state}, regent_worker_epoch_gate_refusals_total{method},
// regent_rpc_master_auth_refusals_total{reason}, regent_worker_tasks_running,
// regent_worker_tasks_started_total, regent_worker_tasks_ended_total{state},
// regent_worker_updates_dropped_total and regent_worker_task_containment{mode,description}
// (always 1), each read from `worker` (which must outlive `registry`) when /metrics is served.
void addWorkerMetrics(http::MetricsRegistry& registry, const WorkerHttpHost& worker);

}  // namespace regent::worker

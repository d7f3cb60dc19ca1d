// The worker's metric families (see worker_metrics.h).
#include "services/worker/worker_metrics.h"

#include <vector>

namespace regent::worker {
namespace {

using http::MetricSample;
using http::MetricsRegistry;
using Samples = std::vector<MetricSample>;

constexpr MetricsRegistry::Type kCounter = MetricsRegistry::Type::kCounter;
constexpr MetricsRegistry::Type kGauge = MetricsRegistry::Type::kGauge;

}  // namespace

void addWorkerMetrics(MetricsRegistry& registry, const WorkerHttpHost& worker) {
  registry.gauge("regent_worker_registered",
                 "Whether this worker is registered with the current leader (1) or not (0).",
                 [&worker] { return uint64_t{!worker.notReadyReason()}; });
  registry.gauge("regent_worker_epoch_highest",
                 "The highest epoch this worker has seen; its epoch gate refuses calls below it.",
                 [&worker] { return worker.highestEpoch(); });
  registry.counter("regent_worker_registrations_total",
                   "Registrations with a ResourceManager whose slot report was accepted.",
                   [&worker] { return worker.counters().registrations; });
  registry.counter("regent_worker_registration_attempts_total",
                   "Registration attempts, failed ones included.",
                   [&worker] { return worker.counters().registrationAttempts; });
  registry.counter("regent_worker_resource_manager_lost_total",
                   "Times the ResourceManager registered with was considered lost (heartbeat "
                   "silence, disconnect, a forgotten registration).",
                   [&worker] { return worker.counters().resourceManagerLost; });
  registry.add("regent_worker_slots", kGauge, "This worker's slots by state (free, allocated).",
               [&worker] {
                 uint64_t allocated = 0;
                 for (const taskexecutor::SlotState& slot : worker.slots()) {
                   if (slot.allocation) ++allocated;
                 }
                 return Samples{{{{"state", "free"}}, worker.slots().size() - allocated},
                                {{{"state", "allocated"}}, allocated}};
               });
  registry.add(
      "regent_worker_epoch_gate_refusals_total", kCounter,
      "Calls on this worker refused by its epoch gate (an epoch below the highest seen), "
      "by method.",
      [&worker] { return http::samplesByLabel("method", worker.fencingCounters().all()); });
  registry.add("regent_rpc_master_auth_refusals_total", kCounter,
               "Masters this worker refused because they did not prove themselves "
               "(docs/security.md, \"Chain of trust\"), by reason: not_challenged (asked for no "
               "credential), wrong_proof (a server proof that does not verify).",
               [&worker] {
                 Samples samples;
                 for (rpc::MasterRefusal reason :
                      {rpc::MasterRefusal::kNotChallenged, rpc::MasterRefusal::kWrongProof}) {
                   samples.push_back({{{"reason", rpc::masterRefusalName(reason)}},
                                      worker.mastersRefused(reason)});
                 }
                 return samples;
               });
  registry.gauge("regent_worker_tasks_running",
                 "Subtask attempts accepted by this worker and not ended.",
                 [&worker] { return uint64_t{worker.tasksRunning()}; });
  registry.counter("regent_worker_tasks_started_total",
                   "Subtask attempts whose process this worker started.",
                   [&worker] { return worker.counters().tasksStarted; });
  registry.add("regent_worker_tasks_ended_total", kCounter,
               "Subtask attempts ended on this worker, by state (finished, failed, canceled).",
               [&worker] {
                 const taskexecutor::TaskExecutorCounters& counters = worker.counters();
                 return Samples{{{{"state", "finished"}}, counters.tasksFinished},
                                {{{"state", "failed"}}, counters.tasksFailed},
                                {{{"state", "canceled"}}, counters.tasksCanceled}};
               });
  registry.counter("regent_worker_updates_dropped_total",
                   "Attempt updates this worker dropped because worker.update-buffer.max updates "
                   "were waiting for their JobMasters.",
                   [&worker] { return worker.counters().updatesDropped; });
  registry.add("regent_worker_task_containment", kGauge,
               "How this worker contains its task attempts (worker.containment): mode cgroup or "
               "subreaper, and its description; always 1.",
               [&worker] {
                 const taskexecutor::TaskContainment& containment = worker.containment();
                 return Samples{{{{"mode", taskexecutor::containmentKindName(containment.kind())},
                                  {"description", containment.description()}},
                                 uint64_t{1}}};
               });
}

}  // namespace regent::worker

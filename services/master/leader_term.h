// The leader term: the one component that owns everything living for one leadership term of a
// master (docs/architecture.md): the term's capabilities (rpc::LeadershipTerm), its stores, the
// Dispatcher and its gateway, the ResourceManager (with its SlotManager) and its gateway, the
// JobMasters (one per running job, each gateway made by the term's serve()), and the work that
// recovers them. A new leader-side service becomes a member here; the process only creates and
// destroys terms.
#pragma once

#include <kj/async.h>
#include <kj/timer.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/backoff.h"
#include "common/event_sink.h"
#include "common/time.h"
#include "jobgraph/job_graph_validation.h"
#include "rpc/fenced_endpoint.h"
#include "rpc/output_token.h"
#include "rpc/schema/gateways.capnp.h"
#include "services/dispatcher/dispatcher.h"
#include "services/dispatcher/dispatcher_gateway.h"
#include "services/jobmaster/job_masters.h"
#include "services/master/cluster_view.h"
#include "services/resourcemanager/resource_manager.h"
#include "store/store_services.h"

namespace regent::master {

struct LeaderTermOptions {
  jobgraph::JobGraphLimits limits;
  size_t retainCleanResults = 1000;  // store.job-results.retain
  // Between attempts to open the stores and recover: `initial`, doubling (with jitter) to `max`.
  Duration retryInitial = Duration(1000);
  Duration retryMax = Duration(30000);
  std::function<double()> jitter;  // ExponentialBackoff's uniform01; null: random.
  std::function<int64_t()> nowMs;  // Unix milliseconds, for the Dispatcher.
  // heartbeat.interval, heartbeat.timeout, rpc.call-timeout.
  resourcemanager::ResourceManagerOptions resourceManager;
  // The same three, for the JobMasters' calls to workers.
  jobmaster::JobMasterOptions jobMaster;
  // Fills clusterOverview's `leader` (the master's record of this term); null: left unset.
  dispatcher::DispatcherGatewayServer::DescribeLeader describeLeader;
  // rpc.output-token-ttl, in whole seconds: how long the term's output-read tokens live.
  int64_t outputTokenTtlSeconds = rpc::kOutputTokenTtlSeconds;
};

// One leadership term. Loop-thread only.
//
// Lifecycle: construct when leadership is granted, call start() once, destroy when it is
// revoked. start() first creates the ResourceManager, whose gateway serves at once (workers
// register and report while the Dispatcher recovers, so the slot table rebuilds in parallel with
// recovery), then opens the stores, creates the JobMasters and the Dispatcher that runs its jobs
// on them, and recovers the Dispatcher (which starts a JobMaster for every recovered job without
// a result). While the term is not ready the Dispatcher's gateway answers `unavailable` (the
// term's serve() guard) and jobMaster() says not ready; start() makes it ready once the
// Dispatcher recovered.
//
// Destruction ends everything of the term in a fixed order: the capabilities are revoked (every
// gateway handler still running is dropped, later calls are fenced, calls to workers through
// capabilities they handed over fail), then the term's own work is cancelled (start() rejects),
// then the gateways and services go (the Dispatcher's gateway, the JobMasters with their timers
// and calls to workers, the Dispatcher, then the ResourceManager with its heartbeat loop and
// calls to workers), and the stores are closed last. `timer`, `events` (the services' event
// lines), `storeServices`, `counters`, `resourceManagerCounters` and `jobMasterCounters` must
// outlive the term.
class LeaderTerm final {
 public:
  LeaderTerm(kj::Timer& timer, EventSink& events, uint64_t epoch, rpc::FencingCounters& counters,
             resourcemanager::ResourceManagerCounters& resourceManagerCounters,
             jobmaster::JobMasterCounters& jobMasterCounters, store::StoreServices& storeServices,
             store::StoreTerm storeTerm, LeaderTermOptions options);
  ~LeaderTerm() noexcept;
  LeaderTerm(const LeaderTerm&) = delete;
  LeaderTerm& operator=(const LeaderTerm&) = delete;

  // Creates and starts the ResourceManager and serves its gateway (not waiting for readiness).
  // Then opens the term's stores, creates the Dispatcher and its gateway, and recovers; a failure
  // to open or to read the stores is logged ("recovery of epoch=E failed: ...; retrying in ...")
  // and retried with the backoff of the options. Resolves once the term is ready to serve (its
  // gateways then reach their services). Rejects only when the term is destroyed first (a
  // cancellation) or on a bug (an exception from the services). Call once.
  kj::Promise<void> start();

  uint64_t epoch() const { return epoch_; }
  // start() resolved: recovery done, the gateways serve.
  bool ready() const { return capabilities_.ready(); }
  // Resolves once ready() (on the next turn when it is); rejects when the term is destroyed
  // first. A caller that drops the promise leaves nothing behind.
  kj::Promise<void> whenReady();

  // SERVING was published for this term (the process publishes it once start() resolved).
  bool serving() const { return serving_; }
  void markServing() { serving_ = true; }

  // Revokes the term's capabilities now (the term stays until destroyed). Idempotent.
  void revoke(const std::string& reason) { capabilities_.revoke(reason); }

  // The term's Dispatcher gateway, fenced for the epoch; null until the stores are open.
  kj::Maybe<wire::DispatcherGateway::Client> dispatcherGateway();
  // The Dispatcher for in-process reads (/v1/jobs, /metrics); null until the term is ready.
  kj::Maybe<const dispatcher::Dispatcher&> dispatcher() const;

  // A ResourceManager gateway of the term for the connection whose worker identity is `caller`
  // (its worker calls speak for that worker only), fenced for the epoch and serving before the
  // term is ready; null until start().
  kj::Maybe<wire::ResourceManagerGateway::Client> resourceManagerGateway(
      kj::Own<resourcemanager::WorkerBinding> caller);
  // The registered workers for in-process reads (/v1/workers, /metrics); null until start().
  kj::Maybe<const dispatcher::TaskExecutorView&> taskExecutors() const;

  // The term's part of the cluster view (cluster_view.h), filled from its services now: its jobs,
  // their counts by state and one job (nullopt until the term is ready; for job(), also when it
  // has no job `id`), and
  // its workers and their counts (nullopt until start()).
  std::optional<JobsSnapshot> jobs() const;
  std::optional<dispatcher::JobCounts> jobCounts() const;
  std::optional<JobDetailSnapshot> job(const JobId& id) const;
  // Dispatcher::loadDetail once the term is ready; nothing before.
  kj::Promise<void> loadJobDetail(const JobId& id);
  std::optional<WorkersSnapshot> workers() const;
  std::optional<dispatcher::TaskExecutorView::Counts> workerCounts() const;

  // MasterBootstrap.jobMaster: how this term answers for `job`, to the connection whose worker
  // identity is `caller`.
  struct JobMasterLookup {
    bool ready = false;  // False while the term recovers: no answer for any job yet.
    kj::Maybe<wire::JobMasterGateway::Client> gateway;  // Null: this term runs no such job.
  };
  JobMasterLookup jobMaster(const JobId& job, kj::Own<resourcemanager::WorkerBinding> caller);

 private:
  kj::Promise<void> openStores();
  kj::Promise<void> recover();
  // Logs the failure and waits the next backoff delay.
  kj::Promise<void> afterFailure(const std::string& what);

  kj::Timer& timer_;
  EventSink& events_;
  const uint64_t epoch_;
  rpc::LeadershipTerm capabilities_;  // Revoked first (destructor), destroyed last.
  resourcemanager::ResourceManagerCounters& resourceManagerCounters_;
  jobmaster::JobMasterCounters& jobMasterCounters_;
  store::StoreServices& storeServices_;
  const store::StoreTerm storeTerm_;
  const LeaderTermOptions options_;
  ExponentialBackoff backoff_;
  // Signs this term's output-read tokens; its key goes to each worker at registration.
  const rpc::OutputTokenSigner outputTokens_;
  const dispatcher::OutputTokenIssuer outputTokenIssuer_;
  bool serving_ = false;
  // Members below are destroyed in reverse order: the gateways, the services, then the stores.
  kj::Own<store::LeaderStores> stores_;
  kj::Own<resourcemanager::ResourceManager> resourceManager_;
  kj::Own<dispatcher::TaskExecutorView> taskExecutors_;  // Reads resourceManager_.
  kj::Own<dispatcher::Dispatcher> dispatcher_;
  // Destroyed before the Dispatcher it reports to (its releases in flight are cancelled first).
  kj::Own<jobmaster::JobMasters> jobMasters_;
  kj::Maybe<wire::DispatcherGateway::Client> dispatcherGateway_;
  // Fulfilled when start() resolves; whenReady() branches off ready_, which is built with it
  // (so declared after it). Dropped with the term before that, which rejects the branches still
  // waiting.
  kj::Own<kj::PromiseFulfiller<void>> markReady_;
  kj::ForkedPromise<void> ready_;
  kj::Canceler canceler_;  // The term's own work (start()); cancelled first.
};

// How long MasterBootstrap.jobMaster waits for a recovering term (LeaderTerm::whenReady) before
// answering `unavailable`: half of `callTimeout` (rpc.call-timeout, the same on the workers that
// ask), so that they get the answer before their call times out, and at most 1 s.
Duration jobMasterReadyWait(Duration callTimeout);

}  // namespace regent::master

// The regent-master process, its composition root (docs/architecture.md): it joins the leader
// election, creates a LeaderTerm for every granted term and destroys it at revocation, logs every
// grant, revoke and hand-over as the event lines of docs/operations.md, and hands over on SIGTERM
// (and SIGINT, SIGQUIT).
// It serves MasterBootstrap over RPC on rpc.bind and the HTTP endpoints on http.bind, which read
// its cluster view (cluster_view.h) and its metrics registry (master_metrics.h).
#pragma once

#include <kj/async.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/descriptor_limit.h"
#include "common/event_loop.h"
#include "common/event_sink.h"
#include "common/factory_key.h"
#include "common/result.h"
#include "common/ring_event_sink.h"
#include "common/stop_signals.h"
#include "common/task_set_error_logger.h"
#include "ha/ha_services.h"
#include "http/metrics_registry.h"
#include "leader/leader_election.h"
#include "leader/leader_info.h"
#include "leader/leader_retrieval.h"
#include "rpc/auth_config.h"
#include "rpc/auth_roles.h"
#include "rpc/fenced_endpoint.h"
#include "rpc/rpc_server.h"
#include "rpc/rpc_tls.h"
#include "services/master/cluster_view.h"
#include "services/master/leader_term.h"
#include "services/master/master_bootstrap.h"
#include "services/master/master_http.h"
#include "services/master/master_metrics.h"
#include "store/store_services.h"

namespace regent {
class Config;
}

namespace regent::master {

// What this master publishes in its latch node: rpc.advertised-address (or rpc.bind) and
// http.bind, each by advertisedAddress() of common/host_port.h (a wildcard host replaced by
// `hostName`). run() replaces the ports with the ones bound once it listens.
leader::ContenderInfo contenderInfoFor(const Config& config, const std::string& masterId,
                                       const std::string& hostName);

// The local host name (gethostname), or "localhost" if it cannot be read.
std::string localHostName();

// The RPC authentication of a master (rpc.auth*, docs/security.md), checked against rpc.bind and
// ha.zookeeper.auth: fails (fatal; regent-master exits kExitUsage) when a secret file is unusable,
// when rpc.bind is not loopback and no authentication is configured unless rpc.auth is none, or
// when authentication is required with ha.mode zookeeper and no ZooKeeper ACL credential
// (rpc::checkElectionDataIsProtected), naming the options to set. Logs a warning when rpc.auth is
// none and rpc.bind is not loopback.
Result<rpc::ServerAuthSettings> rpcAuthenticationFor(const Config& config);

// Exit codes of regent-master (docs/operations.md).
inline constexpr int kExitHandedOver = 0;    // Stopped by a stop signal after the hand-over.
inline constexpr int kExitFailure = 1;       // Could not start (HA services, stores, election),
                                             // or the hand-over did not apply.
inline constexpr int kExitUsage = 2;         // Bad command line or configuration.
inline constexpr int kExitSignalBase = 128;  // + signal number: a second stop signal.

// One master: the HA services, the stores, the election, and the signal watchers (SIGTERM,
// SIGINT and SIGQUIT hand over; SIGHUP is logged and ignored).
//
// Thread-safety: loop-thread only. Lifetime: `loop` and `config` must outlive it. Destroying it
// destroys the election first (its pending ZooKeeper work is cancelled; the session's end
// removes this master's nodes) and then the HA services.
class MasterProcess final : public leader::LeaderContender,
                            public leader::LeaderRetrievalListener,
                            public MasterBootstrapHost,
                            public ClusterView {
 public:
  // Logs "master starting", builds the HA services (writer identity), the store services and
  // the retrieval. Fails only on what retrying cannot fix (options the ZooKeeper client
  // rejects); an unreachable ZooKeeper is not a failure. What shows only once the master runs
  // (a store another process holds, an unusable standalone epoch file) ends run() instead.
  // `auth` is rpcAuthenticationFor(config)'s; `descriptors` the open-file limit raised at start
  // (ProcessMain), which run() fits the connection caps into. `events` (must outlive it) gets
  // the master's event lines and those of every term's services; the master keeps its own
  // (grants, revocations, hand-overs) and its terms' workers lost, workers ended or not started
  // and jobs ended for recentEvents() as well.
  static Result<kj::Own<MasterProcess>> create(EventLoop& loop, const Config& config,
                                               EventSink& events, rpc::ServerAuthSettings auth,
                                               DescriptorLimit descriptors);
  ~MasterProcess() noexcept override;
  MasterProcess(const MasterProcess&) = delete;
  MasterProcess& operator=(const MasterProcess&) = delete;

  // Watches the signals, fits rpc.max-connections and http.max-connections into the open-file
  // limit (logging the limit and the caps), listens on rpc.bind (serving MasterBootstrap) and
  // then on http.bind (the HTTP endpoints); with port 0 the chosen ports are what the latch node
  // advertises. Then
  // opens the stores (StoreServices::open: RocksDB waits up to store.rocksdb.lock-timeout for
  // another holder), checks the ACLs of the cluster's ZooKeeper nodes (with ha.zookeeper.auth;
  // resolves with kExitUsage, naming the node, when one is open to others) and starts
  // contending. Resolves with kExitFailure if either server cannot
  // listen, the stores cannot be opened, the election cannot be set up, or it fails for good
  // (electionFailed: a standalone epoch file that cannot be used), each logged as an error.
  // SIGTERM, SIGINT and SIGQUIT hand over: resolves with 0 once the first one's hand-over is
  // done, or with kExitFailure if the hand-over did not apply (its ZooKeeper
  // transaction failed, the session ended) or threw. A second one while the hand-over runs
  // ends the process at once with 128 + the signal number (after logging "master exiting").
  // SIGHUP is logged and ignored. A leader whose RPC listener has failed to accept for
  // rpc.listener-failure-handover hands leadership over (logged with the reason) and contends
  // again at the back of the queue; it stays up. Call once.
  kj::Promise<int> run();

  // After run(): ends a term still held (its capabilities revoked, its stores destroyed) and
  // closes the store backend off the loop thread (RocksDB's close blocks). Call once, before
  // destroying the process.
  kj::Promise<void> close();

  const std::string& masterId() const { return self_.masterId; }

  // leader::LeaderContender. Each logs its event line. A grant creates and starts the term
  // (services/master/leader_term.h: its ResourceManager, its stores, fenced by the granted epoch
  // and latch node, its Dispatcher, recovery with backoff), and then publishes SERVING and logs "leader serving".
  // A revoke destroys the term (its capabilities revoked, its services stopped, its stores closed)
  // before it returns.
  void grantLeadership(const ha::WriterFence& fence) override;
  void revokeLeadership(uint64_t epoch, const std::string& reason) override;
  // Logs the "contending" event line with the new latch node (or "standalone").
  void contending(const std::string& latchNode) override;
  // Logs the error and ends run() with kExitFailure.
  void electionFailed(const Error& error) override;

  // leader::LeaderRetrievalListener: the leader as this master believes, for leaderInfo.
  void leaderChanged(const std::optional<leader::LeaderInfo>& leader) override;

  // MasterBootstrapHost.
  const leader::ContenderInfo& self() const override { return self_; }
  std::optional<leader::LeaderInfo> knownLeader() const override;
  uint64_t leadingEpoch() const override;
  kj::Maybe<wire::DispatcherGateway::Client> dispatcherGateway() override;
  kj::Maybe<wire::ResourceManagerGateway::Client> resourceManagerGateway(
      kj::Own<resourcemanager::WorkerBinding> caller) override;
  LeaderTerm::JobMasterLookup jobMaster(const JobId& job,
                                        kj::Own<resourcemanager::WorkerBinding> caller) override;
  // The current term's whenReady(), at most jobMasterReadyWait_; at once without a term.
  kj::Promise<void> whenTermReady() override;
  kj::Promise<Status> handOverForCaller() override;
  // ClusterView: the leadership as this master sees it, the current term's snapshots
  // (LeaderTerm::jobs, jobCounts, job, workers, workerCounts; nullopt without a term), its last
  // kRecentEvents events (kRecentEventNames), the history sampled every
  // http.status-history-interval while it serves a term, and the retrieval's contenders.
  static constexpr size_t kRecentEvents = 100;
  LeadershipSnapshot leadership() const override;
  std::optional<JobsSnapshot> jobs() const override;
  std::optional<dispatcher::JobCounts> jobCounts() const override;
  std::optional<JobDetailSnapshot> job(const JobId& id) const override;
  kj::Promise<void> loadJobDetail(const JobId& id) override;
  std::optional<WorkersSnapshot> workers() const override;
  std::optional<dispatcher::TaskExecutorView::Counts> workerCounts() const override;
  std::vector<Event> recentEvents() const override;
  std::vector<ClusterSample> history() const override;
  kj::Promise<Result<std::vector<leader::ContenderEntry>>> contenders() override;

  // What /metrics writes: the families of master_metrics.h over this process's parts; main()
  // adds those of what it owns (http::addEventsFileMetrics).
  const http::MetricsRegistry& metrics() const { return metrics_; }
  http::MetricsRegistry& metrics() { return metrics_; }

  // Built by its factory only (FactoryKey).
  MasterProcess(FactoryKey<MasterProcess>, EventLoop& loop, const Config& config, EventSink& events,
                leader::ContenderInfo self, kj::Own<ha::HaServices> ha);

 private:
  void onStopSignal(int signum);
  bool zooKeeperConnected() const;
  // Whether term_ holds: set, and the election still leads its epoch by this process's clock.
  // Every read of the term and every gateway asks this, not term_ alone.
  bool termLive() const;
  // nullopt until the RPC server listens.
  std::optional<RpcTransportCounts> rpcTransportCounts() const;
  void warnIfNotConnected();
  // Listens on http.bind, then calls openStores().
  kj::Promise<void> listenHttp();
  // Opens the stores, then calls verifyZooKeeperAcl(); exits 1 if they cannot be opened.
  kj::Promise<void> openStores();
  // With ha.zookeeper.auth: checks the ACL of every node of the cluster that exists
  // (ha::verifyClusterAcl), creates the latch folder and checks the root again, then calls
  // startContending(); exits kExitUsage, naming the node, when one grants more than read to
  // anyone but the masters' identity. Tried again every second while ZooKeeper does not answer.
  // Without ha.zookeeper.auth (open nodes by design) or in standalone mode: startContending().
  kj::Promise<void> verifyZooKeeperAcl();
  // Once both servers listen: creates the election and starts contending.
  void startContending();
  // (Re)arms or cancels the hand-over for a failing RPC listener (rpc.listener-failure-handover)
  // after the listener started or stopped failing, or leadership came or went.
  void watchListener();
  void handOverForFailingListener();
  // Records one sample of the served term into history_ (nothing without a recovered term).
  void sampleHistory();
  // sampleHistory() every `interval`, for as long as the process runs.
  kj::Promise<void> sampleHistoryEvery(Duration interval);

  EventLoop& loop_;
  const Config& config_;
  EventSink& events_;
  RingEventSink recentEvents_{kRecentEvents};
  FanOutEventSink leadershipEvents_;   // The master's own: events_ and the ring.
  SelectedEventSink recentTermEvents_{recentEvents_,
                                      {"worker removed", "worker ended", "worker start failed",
                                       "job ended"}};
  FanOutEventSink termEvents_;         // Every term's: events_ and the ring's selection.
  ClusterHistory history_;
  const Duration jobMasterReadyWait_;  // From rpc.call-timeout (jobMasterReadyWait).
  DescriptorLimit descriptors_;
  uint64_t httpMaxConnections_ = http::HttpServer::kDefaultMaxConnections;  // Fitted by run().
  leader::ContenderInfo self_;
  kj::Own<ha::HaServices> ha_;
  kj::Own<store::StoreServices> stores_;
  // resourcemanager.provider (null: standalone); outlives every term, which drives it.
  kj::Own<resourcemanager::WorkerProvider> provider_;
  rpc::FencingCounters fencingCounters_;
  resourcemanager::ResourceManagerCounters resourceManagerCounters_;  // Across terms.
  jobmaster::JobMasterCounters jobMasterCounters_;                    // Across terms.
  rpc::ServerAuthSettings authSettings_;  // Read by every connection's bootstrap.
  rpc::AuthCounters authCounters_;
  // Reads the counters above, the term, the servers below: destroyed after the servers.
  http::MetricsRegistry metrics_;
  kj::Own<leader::LeaderRetrieval> retrieval_;
  std::optional<leader::LeaderInfo> knownLeader_;
  kj::Own<leader::LeaderElection> election_;  // Created by run() once the RPC port is known.
  kj::Own<LeaderTerm> term_;                  // While leading. Destroyed before the election.
  kj::Own<rpc::RpcNetwork> rpcNetwork_;       // rpc.tls.*; outlives the RPC server.
  kj::Own<rpc::RpcServer> rpcServer_;         // Destroyed before the term: connections go first.
  kj::Own<http::HttpServer> httpServer_;      // Destroyed before the RPC server and the term.
  kj::Own<kj::PromiseFulfiller<int>> exit_;
  std::unique_ptr<StopSignals> stopSignals_;
  bool stopping_ = false;
  TaskSetErrorLogger errorLogger_{"master"};
  // Pending while leading with a failing RPC listener: the hand-over at the bound.
  kj::Promise<void> listenerWatch_ = nullptr;
  // markServing, the connect warning and the hand-over; declared last so it is destroyed
  // first, before the election whose promises it holds.
  kj::TaskSet tasks_{errorLogger_};
};

}  // namespace regent::master

// MasterProcess (see master_process.h): the election wired to the event lines and the signals.
#include "services/master/master_process.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <utility>

#include "common/event_sink.h"
#include "common/host_port.h"
#include "common/ids.h"
#include "common/time.h"
#include "common/units.h"
#include "conf/config.h"
#include "ha/zookeeper_acl.h"
#include "ha/zookeeper_client.h"
#include "leader/latch_group.h"
#include "leader/leader_services.h"
#include "rpc/rpc_options.h"
#include "services/master/worker_providers.h"

namespace regent::master {
namespace {

using MasterId = Id128<struct MasterIdTag>;

// How soon the start-up check of the ZooKeeper ACLs is tried again when ZooKeeper did not answer.
constexpr Duration kAclCheckRetry{1000};

// "handover done", or "handover failed ... reason=..." when the hand-over did not apply: with
// "handover requested", the events the cluster harness and the benchmarks time failover with
// (docs/operations.md).
void reportHandOverOutcome(EventSink& events, const Status& handedOver,
                           const std::string& masterId) {
  if (handedOver.ok()) {
    events.emit(Event("handover done").field("master_id", masterId));
    return;
  }
  events.emit(Event("handover failed", EventLevel::kError)
                  .field("master_id", masterId)
                  .quotedField("reason", handedOver.error().message));
}

// "authentication required (shared secret: admin reader; certificates: 2 names)" or
// "authentication off" (docs/security.md).
std::string describeAuthentication(const rpc::ServerAuthSettings& settings) {
  if (!settings.required) return "authentication off";
  std::string out = "authentication required (";
  if (!settings.secrets.empty()) {
    out += "shared secret:";
    for (const auto& [role, secret] : settings.secrets) out += std::string(" ") + rpc::roleName(role);
  }
  if (!settings.tlsNames.empty()) {
    if (!settings.secrets.empty()) out += "; ";
    out += "certificates: " + std::to_string(settings.tlsNames.size()) + " names";
  }
  return out + ")";
}

}  // namespace

std::string localHostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

leader::ContenderInfo contenderInfoFor(const Config& config, const std::string& masterId,
                                       const std::string& hostName) {
  leader::ContenderInfo info;
  info.masterId = masterId;
  info.rpcAddress = advertisedAddress(config.getString("rpc.bind"),
                                     config.getString("rpc.advertised-address"), hostName, 0);
  info.httpAddress = advertisedAddress(config.getString("http.bind"), "", hostName, 0);
  info.host = hostName;
  info.pid = static_cast<int64_t>(::getpid());
  info.version = REGENT_VERSION;
  info.startedAtMs = wallClockMillis();
  return info;
}

Result<rpc::ServerAuthSettings> rpcAuthenticationFor(const Config& config) {
  auto settings = rpc::serverAuthFrom(config);
  if (!settings.ok()) return settings.error();
  const std::string& bind = config.getString("rpc.bind");
  if (auto safe = rpc::checkRpcBindIsSafe(bind, settings.value()); !safe.ok()) return safe.error();
  if (auto protectedData = rpc::checkElectionDataIsProtected(config, settings.value());
      !protectedData.ok()) {
    return protectedData.error();
  }
  if (settings.value().explicitlyOff && !rpc::isLoopbackHost(hostOf(bind))) {
    spdlog::warn("rpc.auth is none and rpc.bind {} is reachable beyond this machine: every peer "
                 "that reaches the port may submit and cancel jobs and force a hand-over "
                 "(docs/security.md)",
                 bind);
  }
  return settings;
}

Result<kj::Own<MasterProcess>> MasterProcess::create(EventLoop& loop, const Config& config,
                                                     EventSink& events,
                                                     rpc::ServerAuthSettings auth,
                                                     DescriptorLimit descriptors) {
  // TLS first: a misconfigured rpc.tls.* fails before anything connects to ZooKeeper.
  auto rpcNetwork =
      rpc::RpcNetwork::create(loop.io().getNetwork(), loop.timer(), rpc::rpcTlsOptionsFrom(config),
                              rpc::RpcTlsRole::kServer, config.getDuration("rpc.call-timeout"));
  if (!rpcNetwork.ok()) return Error::fatal("cannot set up RPC: " + rpcNetwork.error().message);
  leader::ContenderInfo self =
      contenderInfoFor(config, MasterId::random().toHex(), localHostName());
  spdlog::info("master starting master_id={} pid={} ha_mode={}", self.masterId, self.pid,
               config.getString("ha.mode"));

  auto ha = ha::HaServices::create(loop, config, ha::HaServices::Identity::kWriter);
  if (!ha.ok()) return Error::fatal("cannot set up the HA services: " + ha.error().message);
  auto master = kj::heap<MasterProcess>(FactoryKey<MasterProcess>(), loop, config, events,
                                        std::move(self), std::move(ha).value());
  master->rpcNetwork_ = kj::mv(rpcNetwork).value();
  master->authSettings_ = std::move(auth);
  master->descriptors_ = std::move(descriptors);
  auto stores = store::StoreServices::create(loop, config, master->ha_->zooKeeper());
  if (!stores.ok()) return Error::fatal("cannot set up the stores: " + stores.error().message);
  master->stores_ = std::move(stores).value();
  auto retrieval = leader::createLeaderRetrieval(loop, config, *master->ha_);
  if (!retrieval.ok()) {
    return Error::fatal("cannot set up the leader retrieval: " + retrieval.error().message);
  }
  master->retrieval_ = std::move(retrieval).value();
  auto provider = createWorkerProvider(loop, config, events);
  if (!provider.ok()) {
    return Error::fatal("cannot set up the resource provider: " + provider.error().message);
  }
  master->provider_ = kj::mv(provider).value();
  return master;
}

MasterProcess::MasterProcess(FactoryKey<MasterProcess>, EventLoop& loop, const Config& config,
                             EventSink& events, leader::ContenderInfo self,
                             kj::Own<ha::HaServices> ha)
    : loop_(loop),
      config_(config),
      events_(events),
      jobMasterReadyWait_(jobMasterReadyWait(config.getDuration("rpc.call-timeout"))),
      self_(std::move(self)),
      ha_(std::move(ha)) {
  leadershipEvents_.add(events_);
  leadershipEvents_.add(recentEvents_);
  termEvents_.add(events_);
  termEvents_.add(recentTermEvents_);
  // In the order /metrics has always written them.
  addClusterViewMetrics(metrics_, *this);
  addResourceManagerMetrics(metrics_, resourceManagerCounters_);
  addJobMasterMetrics(metrics_, jobMasterCounters_);
  addFencingMetrics(metrics_, fencingCounters_);
  addAuthMetrics(metrics_, authCounters_);
  metrics_.counter("regent_store_zookeeper_transactions_total",
                   "Write transactions the ZooKeeper store sent (each attempt; writes queued "
                   "while one was in flight share the next) over every term this process led; 0 "
                   "with the RocksDB store.",
                   [this] { return stores_ ? stores_->zooKeeperTransactions() : uint64_t{0}; });
  metrics_.counter("regent_store_zookeeper_writes_total",
                   "Writes the ZooKeeper store was asked for (each put, multi-record commit and "
                   "removal once) over every term this process led; 0 with the RocksDB store.",
                   [this] { return stores_ ? stores_->zooKeeperWrites() : uint64_t{0}; });
  addRpcTransportMetrics(metrics_, [this] { return rpcTransportCounts(); });
  http::addAcceptLoopMetrics(metrics_, "rpc", [this]() -> const AcceptLoop* {
    return rpcServer_ ? &rpcServer_->listener() : nullptr;
  });
  http::addHttpServerMetrics(metrics_, [this] { return httpServer_.get(); });
}

// Members go in reverse order: the term (its stores) before the election and the store services.
MasterProcess::~MasterProcess() noexcept = default;

kj::Promise<int> MasterProcess::run() {
  auto exit = kj::newPromiseAndFulfiller<int>();
  exit_ = kj::mv(exit.fulfiller);
  // SIGHUP is not a stop: a closed terminal or a habitual `kill -HUP` must not move leadership
  // (docs/operations.md, "Stopping a master").
  stopSignals_ = std::make_unique<StopSignals>(
      loop_, [this](int signum) { onStopSignal(signum); },
      "SIGHUP ignored: regent-master does not reload its configuration; restart it "
      "to apply changes (SIGTERM hands over first)");
  warnIfNotConnected();
  tasks_.add(sampleHistoryEvery(config_.getDuration("http.status-history-interval")));
  rpc::RpcOptions rpcOptions = rpc::rpcOptionsFrom(config_);
  rpcOptions.requireAuthentication = authSettings_.required;
  // Connections alone must not exhaust the descriptors ZooKeeper and the stores need.
  std::vector<ConnectionCap> caps{
      {.option = "rpc.max-connections",
       .configured = rpcOptions.maxConnections,
       .weight = rpcNetwork_->tls() ? 2u : 1u},
      {.option = "http.max-connections",
       .configured = static_cast<uint64_t>(config_.getInt("http.max-connections"))}};
  if (fitConnectionCaps(descriptors_.soft, caps)) {
    spdlog::warn("{}", describeDescriptorBudget(descriptors_, caps));
  } else {
    spdlog::info("{}", describeDescriptorBudget(descriptors_, caps));
  }
  rpcOptions.maxConnections = caps[0].fitted;
  rpcOptions.maxConnectionsPerPeer = std::min(rpcOptions.maxConnectionsPerPeer, caps[0].fitted);
  httpMaxConnections_ = caps[1].fitted;
  tasks_.add(
      rpc::RpcServer::listen(rpcNetwork_->network(), loop_.timer(), config_.getString("rpc.bind"),
                             rpcOptions,
                             [this](const rpc::RpcPeer& peer) {
                               return capnp::Capability::Client(serveMasterBootstrapFor(
                                   *this, fencingCounters_, authSettings_, authCounters_, peer));
                             })
          .then([this](Result<kj::Own<rpc::RpcServer>>&& listening) -> kj::Promise<void> {
            if (!listening.ok()) {
              spdlog::error("{}", listening.error().message);
              exit_->fulfill(int(kExitFailure));
              return kj::READY_NOW;
            }
            rpcServer_ = kj::mv(listening).value();
            rpcServer_->listener().onFailingChanged([this](bool) { watchListener(); });
            self_.rpcAddress = advertisedAddress(config_.getString("rpc.bind"),
                                                 config_.getString("rpc.advertised-address"),
                                                 self_.host, rpcServer_->port());
            spdlog::info("rpc listening on {} advertised as {} ({})", rpcServer_->listenAddress(),
                         self_.rpcAddress, rpcNetwork_->describe());
            spdlog::info("rpc {}", describeAuthentication(authSettings_));
            return listenHttp();
          }));
  return kj::mv(exit.promise);
}

kj::Promise<void> MasterProcess::listenHttp() {
  return listenMasterHttp(loop_.io().getNetwork(), loop_.timer(), config_.getString("http.bind"),
                          *this, metrics_, authSettings_.required, httpMaxConnections_)
      .then([this](Result<kj::Own<http::HttpServer>>&& listening) -> kj::Promise<void> {
        if (!listening.ok()) {
          spdlog::error("{}", listening.error().message);
          exit_->fulfill(int(kExitFailure));
          return kj::READY_NOW;
        }
        httpServer_ = kj::mv(listening).value();
        // http.bind has no advertised form: its host (a wildcard replaced by the host name)
        // with the port actually bound.
        self_.httpAddress =
            advertisedAddress(config_.getString("http.bind"), "", self_.host, httpServer_->port());
        spdlog::info("http listening on {} advertised as {}", httpServer_->listenAddress(),
                     self_.httpAddress);
        return openStores();
      });
}

kj::Promise<void> MasterProcess::openStores() {
  return stores_->open().then([this](store::StoreResult<void>&& opened) -> kj::Promise<void> {
    if (!opened.ok()) {
      spdlog::error("cannot open the stores: {}", opened.error().message);
      exit_->fulfill(int(kExitFailure));
      return kj::Promise<void>(kj::READY_NOW);
    }
    return verifyZooKeeperAcl();
  });
}

kj::Promise<void> MasterProcess::verifyZooKeeperAcl() {
  ha::ZooKeeperClient* zooKeeper = ha_->zooKeeper();
  const std::string auth = config_.getString("ha.zookeeper.auth");
  if (zooKeeper == nullptr || auth.empty()) {
    startContending();
    return kj::READY_NOW;
  }
  const std::string readAuth = config_.getString("ha.zookeeper.read-auth");
  // Every node that exists first, before this master creates anything: then the latch folder,
  // so that the root holds a node of the masters' and no one else can remove it (and recreate it
  // open) while it is empty; then everything once more, as the root may have been replaced
  // between the two.
  return ha::verifyClusterAcl(*zooKeeper, auth, readAuth)
      .then([zooKeeper](Status verified) -> kj::Promise<Status> {
        if (!verified.ok()) return kj::mv(verified);
        return zooKeeper->ensurePath(leader::kLatchFolder).then([](ha::ZkReply<bool> ensured) {
          if (ensured.ok()) return Status();
          const std::string message = std::string("cannot create the latch folder: ") +
                                      ha::zkCodeName(ensured.code);
          return Status(ha::isTransient(ensured.code) || ha::endsSession(ensured.code)
                            ? Error::retryable(message)
                            : Error::fatal("refusing to start: " + message));
        });
      })
      .then([zooKeeper, auth, readAuth](Status ensured) -> kj::Promise<Status> {
        if (!ensured.ok()) return kj::mv(ensured);
        return ha::verifyClusterAcl(*zooKeeper, auth, readAuth);
      })
      .then([this](Status verified) -> kj::Promise<void> {
        if (verified.ok()) {
          startContending();
          return kj::READY_NOW;
        }
        if (!verified.error().isRetryable()) {
          spdlog::error("{}", verified.error().message);
          exit_->fulfill(int(kExitUsage));
          return kj::READY_NOW;
        }
        // ZooKeeper not reachable yet (warnIfNotConnected says so): check again.
        spdlog::debug("checking the ZooKeeper ACLs again: {}", verified.error().message);
        return loop_.timer()
            .afterDelay(kAclCheckRetry.count() * kj::MILLISECONDS)
            .then([this] { return verifyZooKeeperAcl(); });
      });
}

void MasterProcess::startContending() {
  auto election = leader::createLeaderElection(loop_, config_, *ha_, self_);
  if (!election.ok()) {
    spdlog::error("cannot set up the leader election: {}", election.error().message);
    exit_->fulfill(int(kExitFailure));
    return;
  }
  election_ = std::move(election).value();
  retrieval_->start(*this);
  if (!stopping_) election_->start(*this);
}

void MasterProcess::leaderChanged(const std::optional<leader::LeaderInfo>& leader) {
  knownLeader_ = leader;
}

bool MasterProcess::termLive() const {
  // From the moment the session's deadline passes until the election revokes the term, the term
  // is neither reported nor reached (leader/leader_election.h, currentEpoch): a leader paused
  // past its session claims nothing when it runs again.
  return term_.get() != nullptr && election_ && election_->currentEpoch() == term_->epoch();
}

std::optional<leader::LeaderInfo> MasterProcess::knownLeader() const {
  // While leading, this master's own term is the truth, even before the watch reports it.
  if (termLive()) {
    // Only the election time comes from the published record (ZooKeeper stamps it); the rest
    // is this master's own view, whatever the retrieval reports (a standalone master's record
    // is built from its configuration and always says SERVING).
    const bool published = knownLeader_ && knownLeader_->epoch == term_->epoch() &&
                           knownLeader_->masterId == self_.masterId;
    leader::LeaderInfo own =
        leader::leaderInfoFor(self_, term_->epoch(), published ? knownLeader_->electedAtMs : 0);
    own.status =
        term_->serving() ? leader::LeaderStatus::kServing : leader::LeaderStatus::kRecovering;
    return own;
  }
  // A record naming this master while it holds no term is one of its ended terms (the retrieval
  // has not seen the next one yet): not a leader to report.
  if (knownLeader_ && knownLeader_->masterId == self_.masterId) return std::nullopt;
  return knownLeader_;
}

uint64_t MasterProcess::leadingEpoch() const { return termLive() ? term_->epoch() : 0; }

kj::Maybe<wire::DispatcherGateway::Client> MasterProcess::dispatcherGateway() {
  if (!termLive()) return nullptr;
  return term_->dispatcherGateway();
}

kj::Maybe<wire::ResourceManagerGateway::Client> MasterProcess::resourceManagerGateway(
    kj::Own<resourcemanager::WorkerBinding> caller) {
  if (!termLive()) return nullptr;
  return term_->resourceManagerGateway(kj::mv(caller));
}

kj::Promise<void> MasterProcess::whenTermReady() {
  if (term_.get() == nullptr) return kj::READY_NOW;
  return term_->whenReady()
      .catch_([](kj::Exception&&) {})  // The term ended first.
      .exclusiveJoin(loop_.timer().afterDelay(jobMasterReadyWait_.count() * kj::MILLISECONDS));
}

LeaderTerm::JobMasterLookup MasterProcess::jobMaster(
    const JobId& job, kj::Own<resourcemanager::WorkerBinding> caller) {
  if (!termLive()) return {};
  return term_->jobMaster(job, kj::mv(caller));
}

LeadershipSnapshot MasterProcess::leadership() const {
  const bool live = termLive();
  return {.clusterId = config_.getString("cluster-id"),
          .self = self_,
          .leader = knownLeader(),
          .leadingEpoch = leadingEpoch(),
          .recovered = live && term_->dispatcher() != nullptr,
          .serving = live && term_->serving(),
          .zooKeeperConnected = zooKeeperConnected()};
}

std::optional<JobsSnapshot> MasterProcess::jobs() const {
  if (!termLive()) return std::nullopt;
  return term_->jobs();
}

std::optional<dispatcher::JobCounts> MasterProcess::jobCounts() const {
  if (!termLive()) return std::nullopt;
  return term_->jobCounts();
}

std::optional<JobDetailSnapshot> MasterProcess::job(const JobId& id) const {
  if (!termLive()) return std::nullopt;
  return term_->job(id);
}

kj::Promise<void> MasterProcess::loadJobDetail(const JobId& id) {
  if (!termLive()) return kj::READY_NOW;
  // A term that ends meanwhile cancels the read: job(id) then answers as it will.
  return term_->loadJobDetail(id).catch_([](kj::Exception&&) {});
}

std::optional<WorkersSnapshot> MasterProcess::workers() const {
  if (!termLive()) return std::nullopt;
  return term_->workers();
}

std::optional<dispatcher::TaskExecutorView::Counts> MasterProcess::workerCounts() const {
  if (!termLive()) return std::nullopt;
  return term_->workerCounts();
}

std::vector<Event> MasterProcess::recentEvents() const { return recentEvents_.recent(); }

std::vector<ClusterSample> MasterProcess::history() const { return history_.samples(); }

void MasterProcess::sampleHistory() {
  const std::optional<dispatcher::JobCounts> jobs = jobCounts();
  if (!jobs) return;  // Not serving a recovered term.
  const dispatcher::TaskExecutorView::Counts slots = workerCounts().value_or(
      dispatcher::TaskExecutorView::Counts{});
  history_.record({.wallMs = wallClockMillis(),
                   .jobs = *jobs,
                   .workers = slots.taskExecutors,
                   .slotsTotal = slots.slotsTotal,
                   .slotsFree = slots.slotsFree,
                   .attemptsRestarted = jobMasterCounters_.attemptsRestarted,
                   .attemptsAdopted = jobMasterCounters_.attemptsAdopted});
}

kj::Promise<void> MasterProcess::sampleHistoryEvery(Duration interval) {
  return loop_.timer().afterDelay(interval.count() * kj::MILLISECONDS).then([this, interval]() {
    sampleHistory();
    return sampleHistoryEvery(interval);
  });
}

kj::Promise<Result<std::vector<leader::ContenderEntry>>> MasterProcess::contenders() {
  return retrieval_->contenders();
}

kj::Promise<Status> MasterProcess::handOverForCaller() {
  leadershipEvents_.emit(Event("handover requested").field("master_id", self_.masterId));
  return election_->handOver(true).then([this](Status handedOver) {
    reportHandOverOutcome(leadershipEvents_, handedOver, self_.masterId);
    return handedOver;
  });
}

bool MasterProcess::zooKeeperConnected() const {
  const ha::ZooKeeperClient* zooKeeper = ha_->zooKeeper();
  if (zooKeeper == nullptr) return false;
  const ha::SessionState state = zooKeeper->sessionState();
  return state == ha::SessionState::kConnected || state == ha::SessionState::kReconnected;
}

std::optional<RpcTransportCounts> MasterProcess::rpcTransportCounts() const {
  if (!rpcServer_) return std::nullopt;
  return RpcTransportCounts{
      .droppedBeforeAuthentication = rpcServer_->connectionsDroppedBeforeAuthentication(),
      .timedOutBeforeAuthentication = rpcServer_->connectionsTimedOutBeforeAuthentication(),
      .refusedOverTotalCap = rpcServer_->connectionsRefusedOverTotalCap(),
      .refusedOverPeerCap = rpcServer_->connectionsRefusedOverPeerCap(),
      .tlsHandshakesFailed = rpcNetwork_->handshakesFailed(),
      .idleTimedOut = rpcServer_->connectionsIdleTimedOut(),
      .messageTimedOut = rpcServer_->connectionsMessageTimedOut()};
}

void MasterProcess::watchListener() {
  listenerWatch_ = nullptr;
  const Duration bound = config_.getDuration("rpc.listener-failure-handover");
  // Standalone, no one else could lead: handing over would only grant this master again.
  if (bound == Duration::zero() || config_.getString("ha.mode") != "zookeeper" || !rpcServer_ ||
      !term_ || !election_ || stopping_) {
    return;
  }
  const std::optional<kj::TimePoint> since = rpcServer_->listener().failingSince();
  if (!since) return;
  const kj::Duration elapsed = loop_.timer().now() - *since;
  const kj::Duration limit = bound.count() * kj::MILLISECONDS;
  listenerWatch_ = loop_.timer()
                       .afterDelay(elapsed >= limit ? 0 * kj::MILLISECONDS : limit - elapsed)
                       .then([this] { handOverForFailingListener(); })
                       .eagerlyEvaluate(nullptr);
}

void MasterProcess::handOverForFailingListener() {
  const Duration bound = config_.getDuration("rpc.listener-failure-handover");
  spdlog::error(
      "the RPC listener on {} has failed to accept connections for {} "
      "(rpc.listener-failure-handover): clients cannot reach this leader, so it hands leadership "
      "over and contends again at the back of the queue",
      rpcServer_->listenAddress(), formatDuration(bound));
  leadershipEvents_.emit(Event("handover requested")
                             .field("master_id", self_.masterId)
                             .quotedField("reason", "rpc listener failing"));
  tasks_.add(election_->handOver(true).then([this](Status handedOver) {
    reportHandOverOutcome(leadershipEvents_, handedOver, self_.masterId);
  }));
}

void MasterProcess::warnIfNotConnected() {
  ha::ZooKeeperClient* zooKeeper = ha_->zooKeeper();
  if (zooKeeper == nullptr) return;
  const Duration timeout = config_.getDuration("ha.zookeeper.connect-timeout");
  tasks_.add(zooKeeper->waitConnected(timeout).then([this](Status connected) {
    if (connected.ok()) return;
    spdlog::warn("ZooKeeper at {} is unreachable: {}; still trying",
                 config_.getString("ha.zookeeper.quorum"), connected.error().message);
  }));
}

void MasterProcess::grantLeadership(const ha::WriterFence& fence) {
  const uint64_t epoch = fence.epoch;
  leadershipEvents_.emit(
      Event("leadership granted").field("epoch", epoch).field("master_id", self_.masterId));
  LeaderTermOptions options;
  options.retainCleanResults = static_cast<size_t>(config_.getInt("store.job-results.retain"));
  options.nowMs = [] { return wallClockMillis(); };
  options.outputTokenTtlSeconds = config_.getDuration("rpc.output-token-ttl").count() / 1000;
  options.resourceManager.heartbeatInterval = config_.getDuration("heartbeat.interval");
  options.resourceManager.heartbeatTimeout = config_.getDuration("heartbeat.timeout");
  options.resourceManager.callTimeout = config_.getDuration("rpc.call-timeout");
  options.resourceManager.requireCertificateResourceId =
      config_.getBool("rpc.auth-tls.worker-name-is-resource-id");
  options.resourceManager.provider = provider_.get();
  options.resourceManager.pool = workerPoolOptionsFrom(config_);
  options.jobMaster.heartbeatInterval = options.resourceManager.heartbeatInterval;
  options.jobMaster.heartbeatTimeout = options.resourceManager.heartbeatTimeout;
  options.jobMaster.callTimeout = options.resourceManager.callTimeout;
  options.jobMaster.reconciliationTimeout = config_.getDuration("jobmaster.reconciliation-timeout");
  options.jobMaster.finishedPutDelay = config_.getDuration("jobmaster.finished-put-delay");
  options.jobMaster.firstDeployWait = config_.getDuration("jobmaster.first-deploy-wait");
  options.limits.maxTotalSubtasks = static_cast<uint32_t>(config_.getInt("jobmaster.max-subtasks"));
  options.describeLeader = [this](wire::LeaderInfo::Builder out) {
    if (auto leader = knownLeader()) toWire(*leader, out);
  };
  // The stores check the fence with every write: the epoch and, with ZooKeeper, the latch node.
  history_.clear();
  term_ = kj::heap<LeaderTerm>(loop_.timer(), termEvents_, epoch, fencingCounters_,
                               resourceManagerCounters_, jobMasterCounters_, *stores_, fence,
                               kj::mv(options));
  watchListener();  // A listener already failing counts from when it started to.
  tasks_.add(term_->start()
                 .then([this, epoch]() { return election_->markServing(epoch); })
                 .then(
                     [this, epoch](Status published) {
                       if (published.ok()) {
                         if (term_ && term_->epoch() == epoch) {
                           term_->markServing();
                           sampleHistory();  // The history starts with the term.
                         }
                         spdlog::info("leader serving epoch={} master_id={}", epoch,
                                      self_.masterId);
                       } else {
                         spdlog::warn("could not publish SERVING for epoch={}: {}", epoch,
                                      published.error().message);
                       }
                     },
                     [this, epoch](kj::Exception&& exception) {
                       // The term ended first (its work was cancelled): nothing to report.
                       if (!term_ || term_->epoch() != epoch) return;
                       spdlog::error("the leadership term of epoch={} failed: {}", epoch,
                                     exception.getDescription().cStr());
                     }));
}

kj::Promise<void> MasterProcess::close() {
  term_ = nullptr;
  return stores_.get() != nullptr ? stores_->close() : kj::Promise<void>(kj::READY_NOW);
}

void MasterProcess::revokeLeadership(uint64_t epoch, const std::string& reason) {
  leadershipEvents_.emit(Event("leadership revoked")
                             .field("epoch", epoch)
                             .field("master_id", self_.masterId)
                             .quotedField("reason", reason));
  if (term_) term_->revoke(reason);
  term_ = nullptr;  // Every leader service stops before this returns.
  listenerWatch_ = nullptr;
}

void MasterProcess::contending(const std::string& latchNode) {
  spdlog::info("contending master_id={} latch={}", self_.masterId, latchNode);
}

void MasterProcess::electionFailed(const Error& error) {
  spdlog::error("the leader election failed for good: {}", error.message);
  exit_->fulfill(int(kExitFailure));
}

void MasterProcess::onStopSignal(int signum) {
  if (stopping_) {
    // The hand-over is still running (ZooKeeper may be unreachable): leave now. The session's
    // end removes this master's nodes.
    const int code = kExitSignalBase + signum;
    spdlog::warn("second stop signal ({}) during the hand-over: exiting at once",
                 stopSignalName(signum));
    spdlog::info("master exiting master_id={} code={}", self_.masterId, code);
    spdlog::default_logger()->flush();
    std::_Exit(code);
  }
  stopping_ = true;
  if (!election_) {  // Not contending yet: nothing to hand over.
    exit_->fulfill(int(kExitHandedOver));
    return;
  }
  leadershipEvents_.emit(Event("handover requested").field("master_id", self_.masterId));
  tasks_.add(election_->handOver(false).then(
      [this](Status handedOver) {
        reportHandOverOutcome(leadershipEvents_, handedOver, self_.masterId);
        // Not applied: no standby takes over before this master's session ends.
        exit_->fulfill(int(handedOver.ok() ? kExitHandedOver : kExitFailure));
      },
      [this](kj::Exception&& exception) {
        spdlog::error("hand-over failed: {}", exception.getDescription().cStr());
        exit_->fulfill(int(kExitFailure));
      }));
}

}  // namespace regent::master

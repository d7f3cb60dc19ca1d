// WorkerProcess (see worker_process.h): the TaskExecutor wired to the leader client, the HTTP
// endpoints and the signals.
#include "services/worker/worker_process.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <utility>

#include "common/event_sink.h"
#include "common/host_port.h"
#include "common/time.h"
#include "conf/config.h"
#include "ha/zookeeper_acl.h"
#include "leader/leader_services.h"
#include "rpc/auth_config.h"
#include "rpc/rpc_options.h"

namespace regent::worker {

Result<taskexecutor::SlotProfile> slotProfileFrom(const Config& config) {
  const double cores = config.getDouble("worker.slot-cpu");
  const double millis = std::round(cores * 1000.0);
  if (!(millis >= 1.0) || millis > double(std::numeric_limits<uint32_t>::max())) {
    return Error::fatal("bad value for worker.slot-cpu: " + std::to_string(cores) +
                        " cores is not a slot profile (expected 0.001 to 4294967 cores)");
  }
  return taskexecutor::SlotProfile{.cpuMillis = static_cast<uint32_t>(millis),
                                   .memoryBytes = config.getSize("worker.slot-memory")};
}

Result<std::optional<rpc::ClientCredential>> workerCredentialFrom(const Config& config) {
  auto credential = rpc::clientCredentialFrom(config);
  if (!credential.ok()) return credential.error();
  if (credential.value() && credential.value()->role != wire::Role::WORKER) {
    return Error::fatal("rpc.credential.role is " + config.getString("rpc.credential.role") +
                        ", but a worker registers only with the role worker (docs/security.md)");
  }
  return credential;
}

std::string workerHostName(const Config& config) {
  const std::string& advertised = config.getString("worker.advertised-host");
  return advertised.empty() ? localHostName() : advertised;
}

Result<taskexecutor::TaskUser> taskUserFrom(const Config& config) {
  return taskexecutor::resolveTaskUser(config.getString("worker.task-user"),
                                       config.getBool("worker.task-allow-root"), ::geteuid());
}

std::optional<std::string> untraversableAbove(const std::string& dataDir, uid_t uid, gid_t gid) {
  std::error_code error;
  const std::filesystem::path dir = std::filesystem::weakly_canonical(dataDir, error);
  if (error) return std::nullopt;
  for (std::filesystem::path above = dir.parent_path(); !above.empty();
       above = above.parent_path()) {
    struct stat info {};
    if (::stat(above.c_str(), &info) != 0) return std::nullopt;
    const mode_t bit = info.st_uid == uid ? S_IXUSR : info.st_gid == gid ? S_IXGRP : S_IXOTH;
    if ((info.st_mode & bit) == 0) return above.string();
    if (above == above.root_path()) break;
  }
  return std::nullopt;
}

Result<std::unique_ptr<taskexecutor::TaskContainment>> taskContainmentFrom(
    const Config& config, const ResourceId& resourceId) {
  auto profile = slotProfileFrom(config);
  if (!profile.ok()) return profile.error();
  taskexecutor::ContainmentOptions options;
  options.mode = config.getString("worker.containment");
  options.subtree = "regent-worker-" + resourceId.toHex();
  options.limits = {.cpuMillis = profile.value().cpuMillis,
                    .memoryBytes = profile.value().memoryBytes,
                    .pidsMax = static_cast<uint64_t>(config.getInt("worker.task-pids-max"))};
  // The shim's own SIGKILL comes before the runner's at worker.task-cancel-timeout.
  options.killAfterMs =
      static_cast<uint32_t>(config.getDuration("worker.task-cancel-timeout").count() * 4 / 5);
  return taskexecutor::createTaskContainment(options);
}

taskexecutor::ProcessTaskRunnerOptions taskRunnerOptionsFrom(const Config& config,
                                                      const taskexecutor::TaskUser& user) {
  taskexecutor::ProcessTaskRunnerOptions options;
  options.attemptsDir = (std::filesystem::path(config.getString("worker.data-dir")) / "attempts")
                            .string();
  options.uid = user.uid;
  options.gid = user.gid;
  options.cancelTimeout = config.getDuration("worker.task-cancel-timeout");
  options.retainAttempts = static_cast<size_t>(config.getInt("worker.attempts.retain"));
  options.baseEnv = taskexecutor::taskEnvironment(user, config.getString("worker.task-path"));
  options.outputMax = config.getSize("worker.attempt-output.max");
  return options;
}

Result<kj::Own<WorkerProcess>> WorkerProcess::create(
    EventLoop& loop, const Config& config, EventSink& events, kj::Own<WorkerDataDir> dataDir,
    const taskexecutor::TaskUser& taskUser,
    std::unique_ptr<taskexecutor::TaskContainment> containment, DescriptorLimit descriptors) {
  auto credential = workerCredentialFrom(config);
  if (!credential.ok()) return credential.error();
  if (auto warning = rpc::unprotectedLeaderNodeWarning(config, /*readsLeaderNode=*/true)) spdlog::warn("{}", *warning);
  auto profile = slotProfileFrom(config);
  if (!profile.ok()) return profile.error();
  if (!credential.value() && config.getString("rpc.tls.cert").empty()) {
    spdlog::warn(
        "RPC authentication is off for this worker (no rpc.credential.* and no client "
        "certificate): it works for whichever master the leader record names, and a master "
        "without authentication lets every task this worker runs call it as admin (submit, "
        "cancel, fail over); configure role secrets on any cluster shared with code you do not "
        "trust (docs/security.md, \"Without authentication\")");
  }
  // TLS first: a misconfigured rpc.tls.* fails before anything connects to ZooKeeper.
  auto rpcNetwork =
      rpc::RpcNetwork::create(loop.io().getNetwork(), loop.timer(), rpc::rpcTlsOptionsFrom(config),
                              rpc::RpcTlsRole::kClient, config.getDuration("rpc.call-timeout"));
  if (!rpcNetwork.ok()) return Error::fatal("cannot set up RPC: " + rpcNetwork.error().message);
  auto ha = ha::HaServices::create(loop, config, ha::HaServices::Identity::kReader);
  if (!ha.ok()) return Error::fatal("cannot set up the HA services: " + ha.error().message);
  auto worker = kj::heap<WorkerProcess>(FactoryKey<WorkerProcess>(), loop, config, events,
                                        std::move(dataDir));
  worker->outputTokenRequired_ =
      credential.value().has_value() || !config.getString("rpc.tls.cert").empty();
  worker->ha_ = std::move(ha).value();
  worker->rpcNetwork_ = kj::mv(rpcNetwork).value();
  worker->descriptors_ = std::move(descriptors);
  auto retrieval = leader::createLeaderRetrieval(loop, config, *worker->ha_);
  if (!retrieval.ok()) {
    return Error::fatal("cannot set up the leader retrieval: " + retrieval.error().message);
  }
  client::LeaderClientOptions options{
      .rpc = rpc::rpcOptionsFrom(config),
      .backoffInitial = config.getDuration("cluster.registration.initial-timeout"),
      .backoffMax = config.getDuration("cluster.registration.max-timeout"),
      .clusterName = "cluster \"" + config.getString("cluster-id") + "\"",
      .credential = std::move(credential).value(),
      // A deposed leader's late calls reach the epoch gate and are refused with the new epoch.
      .previousLeaderLinger = taskexecutor::TaskExecutorOptions{}.previousLeaderLinger};
  worker->leaders_ =
      kj::heap<client::LeaderClient>(worker->rpcNetwork_->network(), loop.timer(),
                                     std::move(retrieval).value(), std::move(options));
  worker->containment_ = std::move(containment);
  auto runnerOptions = taskRunnerOptionsFrom(config, taskUser);
  runnerOptions.attemptsFd = worker->dataDir_->attemptsFd();
  runnerOptions.containment = worker->containment_;
  worker->stalls_ = kj::heap<taskexecutor::LoopStallWatch>(
      loop.timer(), config.getDuration("rpc.call-timeout") / 2);
  runnerOptions.stalls = worker->stalls_.get();
  worker->taskRunner_ =
      kj::heap<taskexecutor::ProcessTaskRunner>(loop, loop.timer(), std::move(runnerOptions));
  return worker;
}

WorkerProcess::WorkerProcess(FactoryKey<WorkerProcess>, EventLoop& loop, const Config& config,
                             EventSink& events, kj::Own<WorkerDataDir> dataDir)
    : loop_(loop),
      config_(config),
      events_(events),
      dataDir_(std::move(dataDir)),
      host_(workerHostName(config)),
      startedAtMs_(wallClockMillis()),
      slotProfile_(slotProfileFrom(config).value()) {
  // In the order /metrics has always written them.
  addWorkerMetrics(metrics_, *this);
  http::addHttpServerMetrics(metrics_, [this] { return httpServer_.get(); });
}

WorkerProcess::~WorkerProcess() noexcept = default;

kj::Promise<int> WorkerProcess::run() {
  auto exit = kj::newPromiseAndFulfiller<int>();
  exit_ = kj::mv(exit.fulfiller);
  stopSignals_ = std::make_unique<StopSignals>(
      loop_, [this](int signum) { onStopSignal(signum); },
      "SIGHUP ignored: regent-worker does not reload its configuration; restart it "
      "to apply changes (its slots are reported again when it registers)");
  warnIfNotConnected();
  // HTTP connections alone must not exhaust the descriptors tasks and ZooKeeper need.
  std::vector<ConnectionCap> caps{
      {.option = "http.max-connections",
       .configured = static_cast<uint64_t>(config_.getInt("http.max-connections"))}};
  if (fitConnectionCaps(descriptors_.soft, caps)) {
    spdlog::warn("{}", describeDescriptorBudget(descriptors_, caps));
  } else {
    spdlog::info("{}", describeDescriptorBudget(descriptors_, caps));
  }
  tasks_.add(
      http::HttpServer::listen(
          loop_.io().getNetwork(), loop_.timer(), config_.getString("worker.http.bind"),
          "worker.http.bind",
          [this](const kj::HttpHeaderTable& headerTable) -> kj::Own<http::HttpRouteSet> {
            return kj::heap<WorkerHttpRoutes>(*this, metrics_, loop_, headerTable);
          },
          caps[0].fitted)
          .then([this](Result<kj::Own<http::HttpServer>>&& listening) {
            if (!listening.ok()) {
              spdlog::error("{}", listening.error().message);
              exit_->fulfill(int(kExitFailure));
              return;
            }
            httpServer_ = kj::mv(listening).value();
            const std::string advertised = advertisedAddress(
                config_.getString("worker.http.bind"), "", host_, httpServer_->port());
            spdlog::info("http listening on {} advertised as {}", httpServer_->listenAddress(),
                         advertised);
            // A stop signal that came first already ended the run.
            if (!stopping_) startTaskExecutor(advertised);
          }));
  return kj::mv(exit.promise);
}

void WorkerProcess::startTaskExecutor(const std::string& httpAddress) {
  taskexecutor::TaskExecutorOptions options;
  options.resourceId = dataDir_->resourceId();
  options.host = host_;
  options.dataAddress = httpAddress;
  options.httpAddress = httpAddress;
  options.version = REGENT_VERSION;
  options.pid = static_cast<uint32_t>(::getpid());
  options.startedAtMs = startedAtMs_;
  options.slots = static_cast<uint32_t>(config_.getInt("worker.slots"));
  options.slotProfile = slotProfile_;
  options.containment = containment_->description();
  options.registrationInitial = config_.getDuration("cluster.registration.initial-timeout");
  options.registrationMax = config_.getDuration("cluster.registration.max-timeout");
  options.updateBufferMax = static_cast<size_t>(config_.getInt("worker.update-buffer.max"));
  options.stalls = stalls_.get();
  options.providerWorkerId = config_.getString("worker.provider-id");
  options.onStopRequested = [this](const std::string& cause) {
    // A later turn: the stop call's answer goes out first.
    tasks_.add(kj::evalLater([this, cause]() { stop("released by the leader: " + cause); }));
  };
  stalls_->start();
  taskExecutor_ = kj::heap<taskexecutor::TaskExecutor>(loop_.timer(), *leaders_, *taskRunner_,
                                                       events_, kj::mv(options));
  taskExecutor_->start();
}

void WorkerProcess::warnIfNotConnected() {
  ha::ZooKeeperClient* zooKeeper = ha_->zooKeeper();
  if (zooKeeper == nullptr) return;
  const Duration timeout = config_.getDuration("ha.zookeeper.connect-timeout");
  tasks_.add(zooKeeper->waitConnected(timeout).then([this, zooKeeper](Status connected) {
    if (connected.ok()) {
      // Only where the cluster is meant to have ACLs (this worker holds a ZooKeeper credential);
      // the worker does not know the masters' identity: it can only tell an open cluster.
      if (config_.getString("ha.zookeeper.read-auth").empty() &&
          config_.getString("ha.zookeeper.auth").empty()) {
        return;
      }
      tasks_.add(ha::openClusterWarning(*zooKeeper).then([](std::optional<std::string> open) {
        if (open) spdlog::warn("{}", *open);
      }));
      return;
    }
    spdlog::warn("ZooKeeper at {} is unreachable: {}; still trying (the worker keeps its slots "
                 "and registers once it finds the leader)",
                 config_.getString("ha.zookeeper.quorum"), connected.error().message);
  }));
}

void WorkerProcess::onStopSignal(int signum) {
  if (stopping_) {
    // The disconnect is still running (the leader may be unreachable): leave now.
    const int code = kExitSignalBase + signum;
    spdlog::warn("second stop signal ({}) while disconnecting: exiting at once",
                 stopSignalName(signum));
    events_.emit(
        Event("worker exiting").field("resource_id", resourceId().toHex()).field("code", code));
    spdlog::default_logger()->flush();
    std::_Exit(code);
  }
  stop(std::string(stopSignalName(signum)) + " received");
}

void WorkerProcess::stop(const std::string& why) {
  if (stopping_) return;
  stopping_ = true;
  spdlog::info("{}: killing the running tasks, disconnecting from the ResourceManager, then "
               "exiting",
               why);
  const size_t running = taskRunner_->runningCount();
  tasks_.add(taskRunner_->killAll()
                 .then([this, running]() -> kj::Promise<void> {
                   events_.emit(Event("tasks killed")
                                    .field("resource_id", resourceId().toHex())
                                    .field("count", uint64_t{running}));
                   // Not registering yet: nothing to disconnect.
                   if (!taskExecutor_) return kj::READY_NOW;
                   // The JobMasters learn how the tasks ended before the worker leaves.
                   return taskExecutor_->flushUpdates(config_.getDuration("rpc.call-timeout"))
                       .then([this]() { return taskExecutor_->disconnect("worker stopping"); });
                 })
                 .then([this]() { exit_->fulfill(int(kExitStopped)); }));
}

std::optional<std::string> WorkerProcess::notReadyReason() const {
  if (!taskExecutor_) return std::string("starting");
  if (stopping_) return std::string("stopping");
  if (const auto& unusable = taskRunner_->unusableReason()) {
    return "cannot run tasks: " + *unusable;
  }
  if (taskExecutor_->registered()) return std::nullopt;
  if (leaders_->lastObstacleWasNoLeader()) return "no leader known: " + leaders_->lastObstacle();
  const std::string& failed = taskExecutor_->lastRegistrationError();
  if (!failed.empty()) return "registering (last attempt: " + failed + ")";
  if (const ha::ZooKeeperClient* zooKeeper = ha_->zooKeeper()) {
    const ha::SessionState state = zooKeeper->sessionState();
    if (state != ha::SessionState::kConnected && state != ha::SessionState::kReconnected) {
      return std::string("no leader known: not connected to ZooKeeper");
    }
  }
  return std::string("registering");
}

uint64_t WorkerProcess::registeredEpoch() const {
  return taskExecutor_ ? taskExecutor_->registeredEpoch() : 0;
}

uint64_t WorkerProcess::highestEpoch() const {
  return taskExecutor_ ? taskExecutor_->highestEpoch() : 0;
}

const taskexecutor::TaskExecutorCounters& WorkerProcess::counters() const {
  return taskExecutor_ ? taskExecutor_->counters() : noCounters_;
}

const std::vector<taskexecutor::SlotState>& WorkerProcess::slots() const {
  return taskExecutor_ ? taskExecutor_->slots() : noSlots_;
}

const rpc::FencingCounters& WorkerProcess::fencingCounters() const {
  return taskExecutor_ ? taskExecutor_->fencingCounters() : noFencing_;
}

size_t WorkerProcess::tasksRunning() const {
  return taskExecutor_ ? taskExecutor_->tasksRunning() : 0;
}

const std::optional<rpc::OutputReadKey>& WorkerProcess::outputReadKey() const {
  return taskExecutor_ ? taskExecutor_->outputReadKey() : noOutputReadKey_;
}

uint64_t WorkerProcess::mastersRefused(rpc::MasterRefusal reason) const {
  return leaders_->mastersRefused(reason);
}

std::optional<AttemptOutput> WorkerProcess::attemptOutput(const AttemptId& attempt,
                                                          OutputStream stream) const {
  auto latest = taskRunner_->latest(attempt);
  auto path = stream == OutputStream::kStdout ? taskRunner_->stdoutPath(attempt)
                                              : taskRunner_->stderrPath(attempt);
  if (!latest || !path) return std::nullopt;
  return AttemptOutput{.path = *path,
                       .attemptsFd = dataDir_->attemptsFd(),
                       .state = taskexecutor::phaseName(latest->phase),
                       .problem = stream == OutputStream::kStdout ? latest->stdoutProblem
                                                                  : latest->stderrProblem};
}

}  // namespace regent::worker

// The slot-rebuild benchmark (scripts/bench.sh slots): how long a new leader takes, from its grant,
// until its SlotManager holds the slot report of every worker, after a crash (SIGKILL) and after
// a hand-over (regentctl failover), with N workers of S slots each, half of the slots allocated;
// and the memory of the leader with N workers and of one idle regent-worker. docs/benchmarks.md
// explains each number.
//
// One binary, two roles. The driver (the default) starts ZooKeeper, three regent-master
// processes and the load generator, fails the leader over and reads the masters' event lines.
// The load generator (--generate, started by the driver) runs the N workers in one process:
// each is a real taskexecutor::TaskExecutor with its own LeaderClient (its own RPC connection),
// all following one ZooKeeper watch through a SharedLeaderRetrieval; a JobMaster of its own
// registers with every new leader's ResourceManager and declares N*S/2 slots, which the
// SlotManager allocates through requestSlot on the workers.
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "client/leader_client.h"
#include "common/event_line.h"
#include "common/event_loop.h"
#include "common/event_sink.h"
#include "common/ids.h"
#include "common/result.h"
#include "common/task_set_error_logger.h"
#include "common/time.h"
#include "conf/config.h"
#include "ha/ha_services.h"
#include "leader/leader_services.h"
#include "leader/shared_leader_retrieval.h"
#include "rpc/auth_config.h"
#include "rpc/failure.h"
#include "rpc/rpc_options.h"
#include "rpc/rpc_tls.h"
#include "rpc/wire_ids.h"
#include "services/taskexecutor/task_executor.h"
#include "services/taskexecutor/task_runner.h"
#include "tests/fixtures/process_harness.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/fixtures/wait_test_util.h"
#include "tests/fixtures/zookeeper_server.h"

namespace regent::bench {
namespace {

using testing::ProcessHarness;
using testing::ProcessOptions;
using testing::TempDir;
using testing::waitUntil;
using testing::ZooKeeperServer;
using testing::ZooKeeperServerOptions;

// The line the load generator prints once every worker is registered with the leader of `epoch`
// and the declared half of the slots is allocated on the workers.
constexpr const char* kGeneratorReady = "generator ready";
// The cluster's ZooKeeper credentials: the masters write, workers and the generator read.
constexpr const char* kZooKeeperWriter = "regent:bench-master-secret";
constexpr const char* kZooKeeperReader = "viewer:bench-viewer-secret";

// =============================================================================================
// The load generator.

struct GeneratorOptions {
  int workers = 100;
  int slots = 16;
  std::vector<std::string> sets;  // The workers' configuration (--set key=value).
  // The admin secret the test JobMaster authenticates with: registering a JobMaster and
  // declaring its requirements need the admin role (JobMasters run inside the leader).
  std::string jobMasterSecretFile;
};

// The test-side JobMaster's gateway. Workers reach a JobMaster only to offer slots, which comes
// with the JobMaster itself (the next step); until then no call reaches it, and a call that
// did would be answered UNIMPLEMENTED.
class IdleJobMaster final : public wire::JobMasterGateway::Server {};

// N TaskExecutors and one JobMaster on one loop. Loop-thread only.
class LoadGenerator final {
 public:
  LoadGenerator(EventLoop& loop, const Config& config, kj::Network& network,
                leader::SharedLeaderRetrieval& leaders, GeneratorOptions options)
      : loop_(loop),
        config_(config),
        network_(network),
        leaders_(leaders),
        options_(std::move(options)),
        target_(static_cast<uint64_t>(options_.workers) * options_.slots / 2) {}

  Status start() {
    auto credential = rpc::clientCredentialFrom(config_);
    if (!credential.ok()) return credential.error();
    // As regent-worker sets up its client (services/worker/worker_process.cc).
    const taskexecutor::TaskExecutorOptions defaults;
    clientOptions_ = client::LeaderClientOptions{
        .rpc = rpc::rpcOptionsFrom(config_),
        .backoffInitial = config_.getDuration("cluster.registration.initial-timeout"),
        .backoffMax = config_.getDuration("cluster.registration.max-timeout"),
        .clusterName = "cluster \"" + config_.getString("cluster-id") + "\"",
        .credential = std::move(credential).value(),
        .previousLeaderLinger = defaults.previousLeaderLinger,
    };
    const int64_t startedAtMs = wallClockMillis();
    const double slotCpu = config_.getDouble("worker.slot-cpu");
    for (int i = 0; i < options_.workers; ++i) {
      taskexecutor::TaskExecutorOptions worker;
      worker.resourceId = ResourceId::random();
      worker.host = "sim-" + std::to_string(i);
      worker.dataAddress = worker.host + ":8082";
      worker.httpAddress = worker.dataAddress;
      worker.version = "bench";
      worker.pid = static_cast<uint32_t>(::getpid());
      worker.startedAtMs = startedAtMs;
      worker.slots = static_cast<uint32_t>(options_.slots);
      worker.slotProfile = {static_cast<uint32_t>(slotCpu * 1000),
                            config_.getSize("worker.slot-memory")};
      worker.registrationInitial = config_.getDuration("cluster.registration.initial-timeout");
      worker.registrationMax = config_.getDuration("cluster.registration.max-timeout");
      profile_ = worker.slotProfile;
      auto& client = clients_.emplace_back(kj::heap<client::LeaderClient>(
          network_, loop_.timer(), leaders_.view(), clientOptions_));
      executors_.emplace_back(kj::heap<taskexecutor::TaskExecutor>(
          loop_.timer(), *client, noTasks_, noEvents_, std::move(worker)));
    }
    for (auto& executor : executors_) executor->start();
    client::LeaderClientOptions jobMasterOptions = clientOptions_;
    if (!options_.jobMasterSecretFile.empty()) {
      ConfigSources admin;
      admin.set = options_.sets;
      admin.set.push_back("rpc.credential.role=admin");
      admin.set.push_back("rpc.credential.secret-file=" + options_.jobMasterSecretFile);
      auto adminConfig = loadConfig(admin);
      if (!adminConfig.ok()) return adminConfig.error();
      auto adminCredential = rpc::clientCredentialFrom(adminConfig.value());
      if (!adminCredential.ok()) return adminCredential.error();
      jobMasterOptions.credential = std::move(adminCredential).value();
    }
    jobMasterClient_ = kj::heap<client::LeaderClient>(network_, loop_.timer(), leaders_.view(),
                                                      std::move(jobMasterOptions));
    tasks_.add(watch());
    return {};
  }

 private:
  // Checks the workers every 50 ms (their own state, in this process: 5,000 workers of 16 slots
  // are 80,000 slots to count, which competes with the master for the same cores) and declares
  // the job's slots to each new leader once every worker is registered with it.
  kj::Promise<void> watch() {
    return loop_.timer().afterDelay(50 * kj::MILLISECONDS).then([this] {
      check();
      return watch();
    });
  }

  void check() {
    const uint64_t epoch = executors_.front()->registeredEpoch();
    size_t registered = 0;
    uint64_t allocated = 0;
    for (const auto& executor : executors_) {
      if (executor->registered() && executor->registeredEpoch() == epoch) ++registered;
      for (const auto& slot : executor->slots()) {
        if (slot.allocation) ++allocated;
      }
    }
    const bool allRegistered = epoch != 0 && registered == executors_.size();
    if (allRegistered && declaredEpoch_ != epoch && !declaring_) {
      declaring_ = true;
      tasks_.add(declare(epoch));
    }
    if (allRegistered && declaredEpoch_ == epoch && allocated == target_ && readyEpoch_ != epoch) {
      readyEpoch_ = epoch;
      std::printf("%s\n", EventLine(kGeneratorReady)
                              .field("epoch", epoch)
                              .field("workers", registered)
                              .field("allocated", allocated)
                              .field("mono_us", monotonicMicros())
                              .str()
                              .c_str());
      std::fflush(stdout);
    }
    // Progress while not ready, for the driver's log.
    const int64_t now = monotonicMicros();
    const bool ready = allRegistered && readyEpoch_ == epoch;
    if (!ready && now - lastProgressUs_ > 2'000'000) {
      lastProgressUs_ = now;
      std::printf("%s\n", EventLine("generator waiting")
                              .field("epoch", epoch)
                              .field("registered", registered)
                              .field("allocated", allocated)
                              .field("declared_epoch", declaredEpoch_)
                              .str()
                              .c_str());
      std::fflush(stdout);
    }
  }

  // The JobMaster registers with the leader's ResourceManager and declares half of all slots.
  kj::Promise<void> declare(uint64_t epoch) {
    const uint32_t count = static_cast<uint32_t>(target_);
    const taskexecutor::SlotProfile profile = profile_;
    const JobId job = job_;
    auto attempt = [count, profile, job](wire::MasterBootstrap::Client bootstrap,
                                         const leader::LeaderInfo& leader)
        -> kj::Promise<rpc::Attempt<uint64_t>> {
      const uint64_t leaderEpoch = leader.epoch;
      auto request = bootstrap.resourceManagerRequest();
      request.setEpoch(leaderEpoch);
      return request.send().then(
          [=](capnp::Response<wire::MasterBootstrap::ResourceManagerResults> response)
              -> kj::Promise<rpc::Attempt<uint64_t>> {
            if (response.hasFailure()) {
              return rpc::Attempt<uint64_t>(rpc::CallFailure::from(response.getFailure()));
            }
            auto resourceManager = response.getResourceManager();
            auto registration = resourceManager.registerJobMasterRequest();
            registration.setEpoch(leaderEpoch);
            wire::setWireId(registration.initJobId(), job);
            registration.setJobMaster(kj::heap<IdleJobMaster>());
            return registration.send().then(
                [=](capnp::Response<wire::ResourceManagerGateway::RegisterJobMasterResults>
                        registered) mutable -> kj::Promise<rpc::Attempt<uint64_t>> {
                  if (registered.hasFailure()) {
                    return rpc::Attempt<uint64_t>(
                        rpc::CallFailure::from(registered.getFailure()));
                  }
                  auto declaration = resourceManager.declareRequiredResourcesRequest();
                  declaration.setEpoch(leaderEpoch);
                  wire::setWireId(declaration.initJobId(), job);
                  auto requirement = declaration.initRequirements(1)[0];
                  requirement.initProfile().setCpuMillis(profile.cpuMillis);
                  requirement.getProfile().setMemoryBytes(profile.memoryBytes);
                  requirement.setNumberOfRequiredSlots(count);
                  return declaration.send().then(
                      [leaderEpoch](
                          capnp::Response<wire::ResourceManagerGateway::DeclareRequiredResourcesResults>
                              declared) -> rpc::Attempt<uint64_t> {
                        if (declared.hasFailure()) {
                          return rpc::CallFailure::from(declared.getFailure());
                        }
                        return leaderEpoch;
                      });
                });
          });
    };
    return jobMasterClient_->call<uint64_t>(attempt, Duration(60000))
        .then([this, epoch](Result<uint64_t> declared) {
          declaring_ = false;
          if (!declared.ok()) {
            std::fprintf(stderr, "generator: declaring the job's slots at epoch %llu failed: %s\n",
                         static_cast<unsigned long long>(epoch), declared.error().message.c_str());
            return;
          }
          declaredEpoch_ = declared.value();
        });
  }

  EventLoop& loop_;
  const Config& config_;
  kj::Network& network_;
  leader::SharedLeaderRetrieval& leaders_;
  const GeneratorOptions options_;
  const uint64_t target_;  // Slots the job declares: half of all.
  const JobId job_ = JobId::random();
  client::LeaderClientOptions clientOptions_;
  taskexecutor::SlotProfile profile_;
  uint64_t declaredEpoch_ = 0;  // The leader the job's slots were last declared to.
  bool declaring_ = false;
  uint64_t readyEpoch_ = 0;  // The leader "generator ready" was printed for.
  int64_t lastProgressUs_ = 0;
  NullEventSink noEvents_;  // The simulated workers' events: thousands of them, none logged.
  taskexecutor::NoTaskRunner noTasks_;  // The simulated workers run no tasks.
  // Declared in this order so that the executors go before the clients they use, and the tasks
  // before everything they touch.
  std::vector<kj::Own<client::LeaderClient>> clients_;
  std::vector<kj::Own<taskexecutor::TaskExecutor>> executors_;
  kj::Own<client::LeaderClient> jobMasterClient_;
  TaskSetErrorLogger errorLogger_{"load generator"};
  kj::TaskSet tasks_{errorLogger_};
};

int generate(const GeneratorOptions& options) {
  spdlog::set_level(spdlog::level::warn);
  ConfigSources sources;
  sources.set = options.sets;
  sources.environment = processEnvironment();  // The credential (REGENT_RPC_CREDENTIAL_*).
  auto config = loadConfig(sources);
  if (!config.ok()) {
    std::fprintf(stderr, "generator: %s\n", config.error().message.c_str());
    return 2;
  }
  EventLoop loop;
  auto network = rpc::RpcNetwork::create(loop.io().getNetwork(), loop.timer(),
                                         rpc::rpcTlsOptionsFrom(config.value()),
                                         rpc::RpcTlsRole::kClient,
                                         config.value().getDuration("rpc.call-timeout"));
  if (!network.ok()) {
    std::fprintf(stderr, "generator: %s\n", network.error().message.c_str());
    return 2;
  }
  auto ha = ha::HaServices::create(loop, config.value(), ha::HaServices::Identity::kReader);
  if (!ha.ok()) {
    std::fprintf(stderr, "generator: %s\n", ha.error().message.c_str());
    return 2;
  }
  auto retrieval = leader::createLeaderRetrieval(loop, config.value(), *ha.value());
  if (!retrieval.ok()) {
    std::fprintf(stderr, "generator: %s\n", retrieval.error().message.c_str());
    return 2;
  }
  {
    leader::SharedLeaderRetrieval leaders(kj::mv(retrieval).value());
    LoadGenerator generator(loop, config.value(), network.value()->network(), leaders, options);
    if (Status started = generator.start(); !started.ok()) {
      std::fprintf(stderr, "generator: %s\n", started.error().message.c_str());
      return 2;
    }
    // Runs until the driver stops the process.
    loop.run(kj::Promise<void>(kj::NEVER_DONE));
  }
  return 0;
}

// =============================================================================================
// The driver.

// Generous bounds: exceeding one means something failed, not that something was slow.
constexpr Duration kStartTimeout{30000};
constexpr Duration kGrantTimeout{30000};
constexpr Duration kPollInterval{20};

struct BenchOptions {
  std::vector<int> workers = {100, 1000, 5000};
  int slots = 16;
  int runs = 3;
  // The masters' default (ha.zookeeper.session-timeout): with thousands of workers registering at
  // once on two shared cores, the bench's usual 2 s leaves a loop stall of 666 ms (a third) before
  // the leader suspends its term.
  Duration sessionTimeout{6000};
  std::vector<std::string> masterSets;
  std::string binDir = thisExecutableDir();  // --bin-dir; by default next to this binary.
};

// One master: its process (restarted after a crash) and what its log said so far.
struct Master {
  std::string label;
  std::vector<std::string> argv;
  std::string logPath;
  std::unique_ptr<ProcessHarness> process;
  std::unique_ptr<LogTail> tail;  // This run's lines (a new run starts a new tail).
  int runs = 0;
  // This run's grants (epoch, mono_us) and revocations, in order.
  std::vector<std::pair<uint64_t, int64_t>> grants;
  bool holdsGrant = false;
  // mono_us of the first `slot report` line of the run's current term with
  // workers_reported >= the target, and of the first one at all.
  std::optional<int64_t> wholeAtUs, firstReportUs;
  uint64_t wholeTarget = 0;

  Status start() {
    auto started = ProcessHarness::start(
        ProcessOptions{.argv = argv, .outputPath = logPath, .appendOutput = runs > 0});
    if (!started.ok()) return Error::fatal(label + ": " + started.error().message);
    process = std::move(started).value();
    ++runs;
    grants.clear();
    holdsGrant = false;
    wholeAtUs.reset();
    firstReportUs.reset();
    // The new run's lines start at the end of the file as it is now.
    tail = std::make_unique<LogTail>(logPath);
    (void)tail->next();
    auto contending = process->waitForLine(std::regex("contending master_id="), kStartTimeout);
    if (!contending.ok()) {
      return Error::fatal(label + " did not start contending: " + contending.error().message);
    }
    return {};
  }

  bool running() { return process && process->running(); }

  // Reads the new lines.
  void poll() {
    for (const std::string& line : tail->next()) {
      if (auto granted = parseEventLine(line, "leadership granted")) {
        grants.emplace_back(granted->getUint("epoch").value_or(0),
                            granted->getInt("mono_us").value_or(0));
        holdsGrant = true;
        wholeAtUs.reset();
        firstReportUs.reset();
      } else if (parseEventLine(line, "leadership revoked")) {
        holdsGrant = false;
      } else if (auto report = parseEventLine(line, "slot report")) {
        if (grants.empty() || report->getUint("epoch") != grants.back().first) continue;
        const int64_t at = report->getInt("mono_us").value_or(0);
        if (!firstReportUs) firstReportUs = at;
        if (!wholeAtUs && report->getUint("workers_reported").value_or(0) >= wholeTarget) {
          wholeAtUs = at;
        }
      }
    }
  }
};

struct Cluster {
  std::vector<Master> masters;

  void pollAll() {
    for (auto& master : masters) master.poll();
  }

  Result<size_t> waitForLeader() {
    std::optional<size_t> leader;
    waitUntil(
        [&] {
          pollAll();
          size_t holders = 0;
          for (size_t i = 0; i < masters.size(); ++i) {
            if (masters[i].running() && masters[i].holdsGrant) {
              leader = i;
              ++holders;
            }
          }
          return holders == 1;
        },
        kGrantTimeout, kPollInterval);
    if (!leader) return Error::fatal("no master was granted leadership");
    return *leader;
  }
};

// A process started by the driver with its output in `logPath`, authenticating as `role` with
// the secret in `secretFile` and reading ZooKeeper with the read credential (clients read both
// from the environment).
Result<std::unique_ptr<ProcessHarness>> startProcess(std::vector<std::string> argv,
                                                     const std::string& logPath,
                                                     const std::string& role,
                                                     const std::string& secretFile) {
  return ProcessHarness::start(
      ProcessOptions{.argv = std::move(argv),
                     // The cluster's nodes are readable with the read credential only.
                     .env = {"REGENT_RPC_CREDENTIAL_ROLE=" + role,
                             "REGENT_RPC_CREDENTIAL_SECRET_FILE=" + secretFile,
                             std::string("REGENT_HA_ZOOKEEPER_READ_AUTH=") + kZooKeeperReader},
                     .outputPath = logPath});
}

// Writes a fresh random secret (32 hex digits, owner-only) to `path`.
Status writeSecret(const std::string& path) {
  std::ofstream out(path, std::ios::trunc);
  out << JobId::random().toHex() << "\n";
  out.close();
  if (!out) return Error::fatal("cannot write the secret file " + path);
  std::filesystem::permissions(path, std::filesystem::perms::owner_read |
                                         std::filesystem::perms::owner_write);
  return {};
}

struct CaseResult {
  std::vector<double> rebuildMs;
};

class SlotsBench final {
 public:
  SlotsBench(const BenchOptions& options, std::string quorum, std::string logDir)
      : options_(options), quorum_(std::move(quorum)), logDir_(std::move(logDir)) {}

  // One cluster with `workers` simulated workers: both cases, then the leader's memory.
  Status runWorkers(int workers) {
    const std::string clusterId =
        "bench-slots-" + std::to_string(::getpid()) + "-" + std::to_string(workers);
    // Every simulated worker holds a connection to the leader, and for a while (the worker's
    // linger) one to the leader it left; regentctl and one real worker add a few.
    const int64_t connections = std::max<int64_t>(1024, 2 * int64_t{workers} + 256);
    note("workers=" + std::to_string(workers) + " slots=" + std::to_string(options_.slots) +
         ": masters get rpc.max-connections=" + std::to_string(connections) +
         " rpc.max-connections-per-peer=" + std::to_string(connections) + ", open-file limit " +
         std::to_string(openFileLimit()));
    // Workers authenticate as they do in production (role worker, a shared secret: one HMAC
    // challenge per connection), regentctl failover as admin.
    workerSecret_ = logDir_ + "/" + std::to_string(workers) + "-worker.secret";
    adminSecret_ = logDir_ + "/" + std::to_string(workers) + "-admin.secret";
    for (const std::string& path : {workerSecret_, adminSecret_}) {
      if (Status written = writeSecret(path); !written.ok()) return written;
    }
    Cluster cluster;
    for (int i = 0; i < 3; ++i) {
      Master master;
      master.label = "master-" + std::to_string(i);
      master.logPath = logDir_ + "/" + std::to_string(workers) + "-master-" + std::to_string(i) + ".log";
      master.wholeTarget = static_cast<uint64_t>(workers);
      std::vector<std::string> sets = {
          "ha.zookeeper.quorum=" + quorum_,
          "cluster-id=" + clusterId,
          "ha.zookeeper.session-timeout=" + std::to_string(options_.sessionTimeout.count()) + "ms",
          "rpc.bind=127.0.0.1:0",
          "http.bind=127.0.0.1:0",
          "rpc.max-connections=" + std::to_string(connections),
          "rpc.max-connections-per-peer=" + std::to_string(connections),
          "rpc.auth-secret.worker-file=" + workerSecret_,
          "rpc.auth-secret.admin-file=" + adminSecret_,
          // RPC authentication needs the ZooKeeper ACL (docs/security.md, "Safe by default").
          std::string("ha.zookeeper.auth=") + kZooKeeperWriter,
          std::string("ha.zookeeper.read-auth=") + kZooKeeperReader,
          "log.level=info",
      };
      sets.insert(sets.end(), options_.masterSets.begin(), options_.masterSets.end());
      master.argv = withSets(options_.binDir + "/regent-master", sets);
      cluster.masters.push_back(std::move(master));
    }
    for (auto& master : cluster.masters) {
      if (Status started = master.start(); !started.ok()) return started;
    }
    auto leader = cluster.waitForLeader();
    if (!leader.ok()) return leader.error();

    const std::vector<std::string> workerSets = {
        "ha.zookeeper.quorum=" + quorum_,
        "cluster-id=" + clusterId,
        std::string("ha.zookeeper.read-auth=") + kZooKeeperReader,
        "worker.slots=" + std::to_string(options_.slots),
    };
    std::vector<std::string> generatorArgv = {options_.binDir + "/bench_slots", "--generate",
                                              "--workers", std::to_string(workers), "--slots",
                                              std::to_string(options_.slots)};
    for (const auto& set : workerSets) {
      generatorArgv.push_back("--worker-set");
      generatorArgv.push_back(set);
    }
    generatorArgv.push_back("--job-master-secret-file");
    generatorArgv.push_back(adminSecret_);
    auto generator = startProcess(generatorArgv,
                                  logDir_ + "/" + std::to_string(workers) + "-generator.log",
                                  "worker", workerSecret_);
    if (!generator.ok()) return Error::fatal("load generator: " + generator.error().message);
    generator_ = std::move(generator).value();
    generatorTail_ = std::make_unique<LogTail>(generator_->outputPath());
    readyEpochs_.clear();
    if (auto steady = waitForSteady(cluster, workers); !steady.ok()) return steady.error();

    for (const char* which : {"crash", "handover"}) {
      CaseResult result;
      for (int run = 1; run <= options_.runs; ++run) {
        auto ms = failOver(cluster, which, run, workers);
        if (!ms.ok()) {
          return Error::fatal(std::string(which) + " run " + std::to_string(run) + ": " +
                              ms.error().message);
        }
        if (ms.value()) result.rebuildMs.push_back(*ms.value());
      }
      std::printf("slots rebuild_ms workers=%d slots=%d case=%s %s\n", workers,
                  workers * options_.slots, which, describe(summarize(result.rebuildMs)).c_str());
      std::fflush(stdout);
    }
    std::printf("master_rss_kb=%lld\n", static_cast<long long>(masterRssKb_));
    if (!workerRssKb_) {
      auto rss = idleWorkerRssKb(clusterId, workers);
      if (!rss.ok()) return rss.error();
      workerRssKb_ = rss.value();
    }
    std::printf("worker_rss_kb=%lld\n", static_cast<long long>(*workerRssKb_));
    std::fflush(stdout);

    (void)generator_->stop(Duration(5000));
    generator_.reset();
    for (auto& master : cluster.masters) {
      if (master.running()) (void)master.process->stop(Duration(10000));
    }
    return {};
  }

 private:
  static int64_t openFileLimit() {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
    return static_cast<int64_t>(limit.rlim_cur);
  }

  // Waits until the generator reports every worker registered with the current leader and the
  // job's slots allocated, and returns that leader. The leader is read again on every poll: a
  // leader whose loop stalls past its ZooKeeper session's tolerance under the load loses its term
  // by itself (noted), and the cluster is steady again once the workers are with the next one.
  Result<size_t> waitForSteady(Cluster& cluster, int workers) {
    const Duration timeout(60000 + int64_t{workers} * 20);
    std::optional<uint64_t> lastEpoch;
    std::optional<size_t> steady;
    waitUntil(
        [&] {
          for (const std::string& line : generatorTail_->next()) {
            if (auto ready = parseEventLine(line, kGeneratorReady)) {
              readyEpochs_.insert(ready->getUint("epoch").value_or(0));
            }
          }
          cluster.pollAll();
          std::optional<size_t> holder;
          size_t holders = 0;
          for (size_t i = 0; i < cluster.masters.size(); ++i) {
            if (cluster.masters[i].holdsGrant && cluster.masters[i].running()) {
              holder = i;
              ++holders;
            }
          }
          if (holders != 1) return false;
          const uint64_t epoch = cluster.masters[*holder].grants.back().first;
          if (lastEpoch && *lastEpoch != epoch) {
            note("the leadership moved by itself to epoch " + std::to_string(epoch) + " (" +
                 cluster.masters[*holder].label + ") while the workers settled");
          }
          lastEpoch = epoch;
          if (readyEpochs_.count(epoch) == 0) return false;
          steady = holder;
          return true;
        },
        timeout, Duration(100));
    if (!steady) {
      return Error::fatal("the load generator was not ready with the current leader (epoch " +
                          std::to_string(lastEpoch.value_or(0)) + ") within " +
                          std::to_string(timeout.count()) + " ms; its output ends with:\n" +
                          generator_->outputTail(2000));
    }
    return *steady;
  }

  // One failover: the leader leaves (SIGKILL, or regentctl failover), and the sample is the new
  // leader's grant -> its SlotManager holding every worker's report, both from its own log.
  // nullopt when the new leader lost its term by itself before every worker reported (noted; the
  // run is not counted).
  Result<std::optional<double>> failOver(Cluster& cluster, const std::string& which, int run,
                                         int workers) {
    auto leader = cluster.waitForLeader();
    if (!leader.ok()) return leader.error();
    Master& old = cluster.masters[leader.value()];
    std::vector<size_t> before;
    for (auto& master : cluster.masters) before.push_back(master.grants.size());

    std::unique_ptr<ProcessHarness> ctl;
    if (which == "crash") {
      if (Status killed = old.process->kill(); !killed.ok()) return killed.error();
      (void)old.process->waitForExit(Duration(10000));
    } else {
      auto started = startProcess(
          {options_.binDir + "/regentctl", "failover", "--zk", quorum_, "--cluster-id",
           "bench-slots-" + std::to_string(::getpid()) + "-" + std::to_string(workers)},
          logDir_ + "/" + std::to_string(workers) + "-regentctl-" + std::to_string(run) + ".log",
          "admin", adminSecret_);
      if (!started.ok()) return Error::fatal("regentctl failover: " + started.error().message);
      ctl = std::move(started).value();
    }

    std::optional<size_t> next;
    waitUntil(
        [&] {
          cluster.pollAll();
          for (size_t i = 0; i < cluster.masters.size(); ++i) {
            if (i != leader.value() && cluster.masters[i].grants.size() > before[i]) next = i;
          }
          return next.has_value();
        },
        kGrantTimeout, kPollInterval);
    if (!next) return Error::fatal("no other master was granted after " + old.label + " left");
    Master& now = cluster.masters[*next];
    const auto [epoch, grantUs] = now.grants.back();
    // Where the rebuild's time goes: the CPU the new leader and the load generator use meanwhile
    // (from when the grant is seen to when the last report is), against the time it takes.
    const auto leaderCpuBefore = procCpuMs(now.process->pid());
    const auto generatorCpuBefore = procCpuMs(generator_->pid());
    const int64_t seenGrantUs = monotonicMicros();
    const Duration wholeTimeout(60000 + int64_t{workers} * 20);
    waitUntil(
        [&] {
          now.poll();
          return now.wholeAtUs.has_value() || !now.holdsGrant;
        },
        wholeTimeout, kPollInterval);
    if (!now.wholeAtUs && !now.holdsGrant) {
      note(which + " run " + std::to_string(run) + ": " + now.label + " lost epoch " +
           std::to_string(epoch) + " by itself before every worker reported; run not counted");
    } else if (!now.wholeAtUs) {
      return Error::fatal(now.label + " (epoch " + std::to_string(epoch) +
                          ") logged no slot report with workers_reported=" +
                          std::to_string(workers) + " within " +
                          std::to_string(wholeTimeout.count()) + " ms");
    }
    const auto leaderCpuAfter = procCpuMs(now.process->pid());
    const auto generatorCpuAfter = procCpuMs(generator_->pid());
    const double seenMs = static_cast<double>(monotonicMicros() - seenGrantUs) / 1000.0;
    std::string cpu;
    if (leaderCpuBefore && leaderCpuAfter && generatorCpuBefore && generatorCpuAfter) {
      cpu = "; meanwhile (" + formatFixed(seenMs, 0) + " ms) the leader used " +
            formatFixed(*leaderCpuAfter - *leaderCpuBefore, 0) + " ms of CPU, the generator " +
            formatFixed(*generatorCpuAfter - *generatorCpuBefore, 0) + " ms";
    }
    std::optional<double> ms;
    if (now.wholeAtUs) {
      ms = static_cast<double>(*now.wholeAtUs - grantUs) / 1000.0;
      note(which + " run " + std::to_string(run) + ": " + old.label + " -> " + now.label +
         " epoch " + std::to_string(epoch) + ": first report after " +
         formatFixed(static_cast<double>(now.firstReportUs.value_or(grantUs) - grantUs) / 1000.0, 2) +
           " ms, every worker's after " + formatFixed(*ms, 2) + " ms" + cpu);
    }

    // The next run starts from a steady cluster: every worker registered with the new leader and
    // the job's slots allocated again; then the leader's memory with N workers is read.
    auto steady = waitForSteady(cluster, workers);
    if (!steady.ok()) return steady.error();
    Master& leading = cluster.masters[steady.value()];
    if (auto rss = settledRssKb(leading.process->pid())) {
      masterRssKb_ = rss->kb;
      note(leading.label + " with " + std::to_string(workers) + " workers: VmRSS " +
           std::to_string(rss->kb) + " kB, VmHWM " +
           std::to_string(procStatusKb(leading.process->pid(), "VmHWM").value_or(-1)) + " kB");
    }
    if (ctl) {
      auto exit = ctl->waitForExit(Duration(30000));
      if (!exit || !exit->exited() || exit->exitCode != 0) {
        return Error::fatal("regentctl failover did not succeed: " + ctl->outputTail(1000));
      }
    }
    if (!old.running()) {
      if (Status restarted = old.start(); !restarted.ok()) return restarted.error();
    }
    return ms;
  }

  // The resident set of one real regent-worker registered with the cluster and idle.
  Result<int64_t> idleWorkerRssKb(const std::string& clusterId, int workers) {
    TempDir data("regent-bench-worker");
    std::vector<std::string> settings =
        workerSettings(quorum_, clusterId, data.path(), options_.slots);
    settings.push_back(std::string("ha.zookeeper.read-auth=") + kZooKeeperReader);
    std::vector<std::string> argv = withSets(options_.binDir + "/regent-worker", settings);
    auto worker = startProcess(argv,
                               logDir_ + "/" + std::to_string(workers) + "-regent-worker.log",
                               "worker", workerSecret_);
    if (!worker.ok()) return Error::fatal("regent-worker: " + worker.error().message);
    auto registered = worker.value()->waitForLine(std::regex("worker registered "), kStartTimeout);
    if (!registered.ok()) {
      return Error::fatal("regent-worker did not register: " + worker.value()->outputTail(2000));
    }
    auto rss = settledRssKb(worker.value()->pid());
    note("idle regent-worker (pid " + std::to_string(worker.value()->pid()) + "): VmRSS " +
         std::to_string(rss ? rss->kb : -1) + " kB, VmHWM " +
         std::to_string(procStatusKb(worker.value()->pid(), "VmHWM").value_or(-1)) + " kB");
    (void)worker.value()->stop(Duration(10000));
    if (!rss) return Error::fatal("cannot read the VmRSS of regent-worker");
    return rss->kb;
  }

  const BenchOptions& options_;
  const std::string quorum_;
  const std::string logDir_;
  std::string workerSecret_, adminSecret_;  // The current cluster's secret files.
  std::unique_ptr<ProcessHarness> generator_;
  std::unique_ptr<LogTail> generatorTail_;
  std::set<uint64_t> readyEpochs_;  // The leaders the generator was ready with.
  int64_t masterRssKb_ = -1;
  std::optional<int64_t> workerRssKb_;
};

int run(const BenchOptions& options) {
  auto fail = [](const std::string& what) { return reportFailure("bench_slots", what); };
  if (Status present = requireBinaries(
          options.binDir, {"regent-master", "regentctl", "regent-worker", "bench_slots"});
      !present.ok()) {
    return fail(present.error().message);
  }
  ZooKeeperServerOptions zkOptions;
  zkOptions.tickTime = Duration(500);
  zkOptions.minSessionTimeout = Duration(1000);
  auto server = ZooKeeperServer::start(zkOptions);
  if (!server.ok()) return fail("ZooKeeper did not start: " + server.error().message);
  TempDir logs("regent-bench-slots");
  note("ZooKeeper " + server.value()->connectString() + ", session timeout " +
       std::to_string(options.sessionTimeout.count()) + " ms, " + std::to_string(options.runs) +
       " runs per case; process logs in " + logs.path() + " (kept with KEEP_TEST_TMP=1)");
  SlotsBench bench(options, server.value()->connectString(), logs.path());
  for (int workers : options.workers) {
    if (Status done = bench.runWorkers(workers); !done.ok()) {
      return fail("workers=" + std::to_string(workers) + ": " + done.error().message);
    }
  }
  return 0;
}

}  // namespace
}  // namespace regent::bench

int main(int argc, char** argv) {
  regent::bench::BenchOptions options;
  regent::bench::GeneratorOptions generator;
  bool generate = false;
  std::string workersText = "100,1000,5000";
  int64_t sessionTimeoutMs = options.sessionTimeout.count();
  CLI::App app{
      "Slot-rebuild benchmark: the time from a new leader's grant until its SlotManager holds "
      "every worker's slot report, after a crash and after a hand-over, with N simulated workers "
      "of S slots each (half allocated), and the memory of the leader and of an idle "
      "regent-worker. Prints result lines; never asserts timings. See docs/benchmarks.md."};
  app.add_option("--workers", workersText, "worker counts, comma-separated")->capture_default_str();
  app.add_option("--slots", options.slots, "slots per worker")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--runs", options.runs, "failovers per case")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--session-timeout-ms", sessionTimeoutMs, "the masters' ZooKeeper session timeout")
      ->check(CLI::Range(1000, 60000))
      ->capture_default_str();
  app.add_option("--set", options.masterSets, "extra key=value for every master (repeatable)");
  app.add_option("--bin-dir", options.binDir, "where regent-master, regentctl and regent-worker are")
      ->capture_default_str();
  // The load generator's own role, started by the driver.
  app.add_flag("--generate", generate, "run as the load generator (started by the benchmark)")
      ->group("");
  app.add_option("--worker-set", generator.sets, "the load generator's workers' key=value")
      ->group("");
  app.add_option("--job-master-secret-file", generator.jobMasterSecretFile,
                 "the admin secret of the load generator's JobMaster")
      ->group("");
  CLI11_PARSE(app, argc, argv);
  options.sessionTimeout = regent::Duration(sessionTimeoutMs);

  std::vector<int> workers;
  std::stringstream list(workersText);
  for (std::string item; std::getline(list, item, ',');) {
    try {
      const int count = std::stoi(item);
      if (count < 1 || count > 100000) throw std::out_of_range(item);
      workers.push_back(count);
    } catch (const std::exception&) {
      std::fprintf(stderr, "bench_slots: --workers \"%s\": \"%s\" is not a count of 1 to 100000\n",
                   workersText.c_str(), item.c_str());
      return 2;
    }
  }
  options.workers = workers;
  if (generate) {
    generator.workers = workers.front();
    generator.slots = options.slots;
    return regent::bench::generate(generator);
  }
  return regent::bench::run(options);
}

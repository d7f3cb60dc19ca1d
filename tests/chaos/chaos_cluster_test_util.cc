#include "tests/chaos/chaos_cluster_test_util.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "common/time.h"
#include "tests/fixtures/tcp_fault_proxy.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/fixtures/zookeeper_server.h"
#include "tests/integration/http_get_test_util.h"
#include "tests/integration/job_cluster_test_util.h"
#include "tests/integration/master_cluster_test_util.h"
#include "tests/integration/worker_cluster_test_util.h"

namespace regent::testing::chaos {
namespace {

constexpr size_t kMasters = 3;
constexpr size_t kWorkers = 3;
constexpr uint32_t kSlotsPerWorker = 3;
constexpr size_t kZooKeeperMembers = 3;
// Bounds of the harness's waits; none is a claim about speed.
constexpr Duration kStartTimeout{90000};
constexpr Duration kSettleTimeout{60000};
constexpr Duration kFaultTimeout{30000};
constexpr Duration kHttpTimeout{2000};
constexpr Duration kEndTimeout{120000};
// How long a paused worker stays paused: past the masters' heartbeat.timeout (2 s), so the leader
// gives its attempts up while their processes run on.
constexpr Duration kWorkerPause{3000};
// How many jobs hold their tasks at once (waiting for a go file); the oldest is released beyond.
constexpr size_t kMaxHeldJobs = 3;

// The task every job runs: marks its start, waits for the job's go file (bounded: ten minutes),
// fails when its attempt number's fail file exists, and marks its end with its exit code.
constexpr const char* kTaskScript =
    "m=\"$DIR/$REGENT_TASK_VERTEX-$REGENT_TASK_SUBTASK_INDEX\"\n"
    "echo \"start $$ $REGENT_TASK_ATTEMPT_ID $REGENT_TASK_ATTEMPT_NUMBER $(date +%s%3N)\" >> \"$m\"\n"
    "w=0\n"
    "while [ ! -e \"$DIR/go\" ] && [ $w -lt 6000 ]; do sleep 0.1; w=$((w+1)); done\n"
    "rc=0\n"
    "[ -e \"$m.fail-$REGENT_TASK_ATTEMPT_NUMBER\" ] && rc=1\n"
    "echo \"end $$ $REGENT_TASK_ATTEMPT_ID $REGENT_TASK_ATTEMPT_NUMBER $(date +%s%3N) $rc\" >> \"$m\"\n"
    "exit $rc\n";

struct ShapeVertex {
  std::string name;
  uint32_t parallelism = 1;
  std::vector<std::string> upstream;
  // "<subtask>.<attempt number>": that attempt fails.
  std::vector<std::pair<uint32_t, uint32_t>> failing;
};

struct Shape {
  std::string name;
  std::vector<ShapeVertex> vertices;
  std::string restartStrategy;  // YAML lines under restart_strategy:, "" for none.
  bool held = false;            // Its tasks wait for a go file the run creates later.
  bool cancel = false;          // The run cancels it instead of releasing it.
};

// The job shapes, in the order the generator numbers them.
const std::vector<Shape>& shapes() {
  static const std::vector<Shape> kShapes = {
      {"dag", {{"a", 2, {}, {}}, {"b", 1, {"a"}, {}}}, "  type: fixed-delay\n  attempts: 3\n  delay: 200ms\n"},
      {"long", {{"l", 2, {}, {}}}, "", true},
      {"fail-fixed", {{"f", 1, {}, {{0, 0}}}}, "  type: fixed-delay\n  attempts: 2\n  delay: 200ms\n"},
      {"fail-none", {{"n", 1, {}, {{0, 0}}}}, ""},
      {"fail-exponential",
       {{"e", 1, {}, {{0, 0}, {0, 1}}}},
       "  type: exponential-delay\n  initial_delay: 100ms\n  max_delay: 1s\n",
       true},
      {"fail-rate",
       {{"r", 2, {}, {{0, 0}}}},
       "  type: failure-rate\n  max_failures: 2\n  interval: 1m\n  delay: 200ms\n"},
      {"cancel", {{"c", 2, {}, {}}}, "", true, true},
      // More subtasks than the slots, and than one part of a progress record holds (32): its
      // record is split into parts (docs/stores.md), rewritten part by part through the faults.
      {"wide", {{"w", 34, {}, {{33, 0}}}}, "  type: fixed-delay\n  attempts: 3\n  delay: 200ms\n"},
  };
  return kShapes;
}

std::string jobYaml(const Shape& shape, const std::string& name, const std::string& dir) {
  std::string yaml = "name: " + name + "\nvertices:\n";
  for (const ShapeVertex& vertex : shape.vertices) {
    yaml += "  - name: " + vertex.name + "\n    parallelism: " +
            std::to_string(vertex.parallelism) +
            "\n    command:\n      argv:\n        - /bin/sh\n        - -c\n        - |\n";
    std::istringstream lines(kTaskScript);
    std::string line;
    while (std::getline(lines, line)) yaml += "          " + line + "\n";
    yaml += "      env:\n        DIR: " + dir + "\n";
    if (!vertex.upstream.empty()) {
      yaml += "    upstream: [";
      for (size_t i = 0; i < vertex.upstream.size(); ++i) {
        yaml += (i == 0 ? "" : ", ") + vertex.upstream[i];
      }
      yaml += "]\n";
    }
  }
  if (!shape.restartStrategy.empty()) yaml += "restart_strategy:\n" + shape.restartStrategy;
  return yaml;
}

void touch(const std::string& path) { std::ofstream(path) << ""; }

// A value of a Prometheus text line "name value" of `text`; nullopt without it.
std::optional<double> metric(const std::string& text, const std::string& name) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(name + " ", 0) == 0) {
      try {
        return std::stod(line.substr(name.size() + 1));
      } catch (...) {
        return std::nullopt;
      }
    }
  }
  return std::nullopt;
}

// One GET of `path` from `address`; nullopt when it fails or takes longer than kHttpTimeout.
std::optional<HttpReply> get(const std::string& address, const std::string& path) {
  auto request = QueuedHttpGet::send(address, path);
  if (!request.ok()) return std::nullopt;
  auto reply = request.value()->reply(kHttpTimeout);
  if (!reply.ok()) return std::nullopt;
  return reply.value();
}

struct HeldJob {
  size_t job = 0;     // Index into the history's jobs.
  int releaseRound = 0;
};

class ChaosRun {
 public:
  explicit ChaosRun(const ChaosOptions& options)
      : options_(options), rng_(options.seed), taskDir_("regent-chaos-tasks") {
    ::chmod(taskDir_.path().c_str(), 01777);
  }

  Result<ChaosReport> run() {
    log("chaos seed=" + std::to_string(options_.seed) +
        " rounds=" + std::to_string(options_.rounds));
    if (auto started = start(); !started.ok()) return started.error();
    for (int round = 0; round < options_.rounds; ++round) {
      if (auto done = runRound(round); !done.ok()) {
        return Error::fatal("seed " + std::to_string(options_.seed) + ", round " +
                            std::to_string(round) + ": " + done.error().message + "\n" +
                            describeCluster());
      }
    }
    if (auto finished = finish(); !finished.ok()) {
      return Error::fatal("seed " + std::to_string(options_.seed) + ", after the last round: " +
                          finished.error().message + "\n" + describeCluster());
    }
    gather();
    ChaosReport report;
    report.violations = checkHistory(history_);
    if (!report.violations.empty()) keepFilesForPostMortem();
    report.history = std::move(history_);
    return report;
  }

 private:
  void log(const std::string& line) {
    if (options_.log) *options_.log << line << std::endl;
  }

  std::string describeCluster() {
    keepFilesForPostMortem();
    return masters_->describe() + workers_->describe();
  }

  // A run that failed keeps its files (every process's log and events, the tasks' marks, the
  // ZooKeeper data), as KEEP_TEST_TMP=1 would: the fixtures name each directory as they go.
  void keepFilesForPostMortem() {
    if (keepTestTmp()) return;
    log("keeping the run's files for a post-mortem (as with KEEP_TEST_TMP=1)");
    ::setenv("KEEP_TEST_TMP", "1", 1);
  }

  std::string quorumOfMaster(size_t slot) const {
    std::string quorum;
    for (const auto& proxy : proxies_[slot]) {
      quorum += (quorum.empty() ? "" : ",") + proxy->address();
    }
    return quorum;
  }

  // ---- Set-up ----------------------------------------------------------------------------------

  Status start() {
    ZooKeeperServerOptions zkOptions;
    auto ensemble = ZooKeeperServer::startEnsemble(kZooKeeperMembers, zkOptions);
    if (!ensemble.ok()) return ensemble.error();
    zk_ = std::move(ensemble).value();
    const std::string clusterId = uniqueClusterId("chaos");
    for (size_t m = 0; m < kMasters; ++m) {
      proxies_.emplace_back();
      for (size_t z = 0; z < kZooKeeperMembers; ++z) {
        auto proxy = ThreadedTcpFaultProxy::start("127.0.0.1", zk_->clientPort(z));
        if (!proxy.ok()) return proxy.error();
        proxies_[m].push_back(std::move(proxy).value());
      }
    }
    masters_ = std::make_unique<MasterCluster>(workerTestMasters(zk_->connectString(), clusterId));
    WorkerClusterOptions workers = workerTestWorkers(zk_->connectString(), clusterId);
    workers.slots = kSlotsPerWorker;
    workers.extraSet.push_back(kTestTaskCancelTimeout);
    workers_ = std::make_unique<WorkerCluster>(std::move(workers));
    ctl_ = std::make_unique<Regentctl>(zk_->connectString(), clusterId);

    for (size_t m = 0; m < kMasters; ++m) {
      // The master's RPC address, as workers, standbys and regentctl reach it, is a proxy in
      // front of the port it binds: the leader-rpc faults cut or stall it there.
      auto port = pickFreeLoopbackPort();
      if (!port.ok()) return port.error();
      auto rpcProxy = ThreadedTcpFaultProxy::start("127.0.0.1", port.value());
      if (!rpcProxy.ok()) return rpcProxy.error();
      rpcProxies_.push_back(std::move(rpcProxy).value());
      const std::vector<std::string> rpc = {
          "rpc.bind=127.0.0.1:" + std::to_string(port.value()),
          "rpc.advertised-address=" + rpcProxies_.back()->address()};
      auto slot = masters_->startMaster(rpc, quorumOfMaster(m));
      if (!slot.ok()) return slot.error();
      noteMasterRun(m);
      auto contending = masters_->waitForEvent(
          m, [](const MasterEvent& e) { return e.kind == MasterEvent::Kind::kContending; },
          kStartTimeout);
      if (!contending.ok()) return contending.error();
    }
    auto leader = masters_->waitForGrant(1, kStartTimeout);
    if (!leader.ok()) return leader.error();
    auto epoch = waitForServing(*masters_, leader.value(), kStartTimeout);
    if (!epoch.ok()) return epoch.error();
    leader_ = leader.value();
    for (size_t w = 0; w < kWorkers; ++w) {
      auto slot = workers_->startWorker();
      if (!slot.ok()) return slot.error();
      const std::string& dataDir = workers_->dataDir(w);
      ::chmod(dataDir.substr(0, dataDir.rfind('/')).c_str(), 0711);
      noteWorkerRun(w);
      auto registered = workers_->waitForRegistered(w, epoch.value(), kStartTimeout);
      if (!registered.ok()) return registered.error();
      resourceIds_.push_back(workers_->resourceId(w));
    }
    return {};
  }

  void noteMasterRun(size_t slot) {
    const int run = masterRuns_[slot]++;
    masterEvents_.emplace_back("m" + std::to_string(slot) + "/" + std::to_string(run),
                               masters_->eventsPath(slot));
    masterHttp_.erase(slot);
  }

  void noteWorkerRun(size_t slot) {
    const int run = workerRuns_[slot]++;
    workerEvents_.emplace_back("w" + std::to_string(slot) + "/" + std::to_string(run),
                               workers_->eventsPath(slot));
  }

  std::string masterName(size_t slot) {
    return "m" + std::to_string(slot) + "/" + std::to_string(masterRuns_[slot] - 1);
  }

  // The master's HTTP address of its current run; "" before it logged it.
  std::string masterHttp(size_t slot) {
    auto cached = masterHttp_.find(slot);
    if (cached != masterHttp_.end()) return cached->second;
    static const std::regex pattern("http listening on (\\S+)");
    std::smatch found;
    const std::string output = masters_->process(slot).output();
    if (!std::regex_search(output, found, pattern)) return "";
    masterHttp_[slot] = found[1];
    return found[1];
  }

  bool masterAnswers(size_t slot) {
    return masters_->process(slot).running() && !pausedMasters_.count(slot);
  }

  // ---- Observing -------------------------------------------------------------------------------

  // Asks every running master that is not paused whether it serves; records the claims; returns
  // the slots claiming SERVING.
  std::vector<size_t> sampleClaims() {
    std::vector<size_t> serving;
    for (size_t m = 0; m < kMasters; ++m) {
      if (!masterAnswers(m)) continue;
      const std::string address = masterHttp(m);
      if (address.empty()) continue;
      const int64_t sent = monotonicMicros();
      auto reply = get(address, "/metrics");
      const int64_t received = monotonicMicros();
      if (!reply || reply->status != 200) continue;
      if (metric(reply->body, "regent_leader_serving") != 1.0) continue;
      const auto epoch = metric(reply->body, "regent_epoch");
      history_.claims.push_back(ServingClaim{masterName(m),
                                             static_cast<uint64_t>(epoch.value_or(0)), sent,
                                             received});
      serving.push_back(m);
    }
    return serving;
  }

  // The workers that run and are not paused, by resource id.
  std::set<std::string> liveWorkers() {
    std::set<std::string> live;
    for (size_t w = 0; w < kWorkers; ++w) {
      if (workers_->process(w).running() && !pausedWorkers_.count(w)) {
        live.insert(resourceIds_[w]);
      }
    }
    return live;
  }

  struct LeaderView {
    std::set<std::string> registered;
    std::vector<AllocatedSlot> allocated;
    std::map<std::string, std::string> jobs;
  };

  std::optional<LeaderView> readLeader(size_t slot) {
    const std::string address = masterHttp(slot);
    auto workers = get(address, "/v1/workers");
    auto jobs = get(address, "/v1/jobs");
    if (!workers || !jobs || workers->status != 200 || jobs->status != 200) return std::nullopt;
    LeaderView view;
    try {
      const nlohmann::json workersJson = nlohmann::json::parse(workers->body);
      const nlohmann::json jobsJson = nlohmann::json::parse(jobs->body);
      for (const auto& worker : workersJson.at("workers")) {
        const std::string id = worker.at("resource_id").get<std::string>();
        view.registered.insert(id);
        for (const auto& s : worker.at("slots")) {
          if (s.at("job_id").is_string()) {
            view.allocated.push_back(
                AllocatedSlot{id, s.at("index").get<uint32_t>(), s.at("job_id").get<std::string>()});
          }
        }
      }
      for (const auto& job : jobsJson.at("jobs")) {
        view.jobs[job.at("job_id").get<std::string>()] = job.at("state").get<std::string>();
      }
    } catch (const std::exception&) {
      return std::nullopt;
    }
    return view;
  }

  bool holdsEveryLiveWorker(const LeaderView& view) {
    const std::set<std::string> live = liveWorkers();
    return std::includes(view.registered.begin(), view.registered.end(), live.begin(), live.end());
  }

  // Whether one master claims SERVING and every live worker is registered with it.
  bool workersFollowed() {
    const std::vector<size_t> serving = sampleClaims();
    if (serving.size() != 1) return false;
    auto view = readLeader(serving[0]);
    return view && holdsEveryLiveWorker(*view);
  }

  // Waits until one master serves, every live worker is registered with it and no job
  // reconciles; records the leader. Returns how long it took, or nullopt after kSettleTimeout.
  std::optional<int64_t> settle(std::string* why) {
    const MonoTime began = std::chrono::steady_clock::now();
    const MonoTime deadline = began + kSettleTimeout;
    while (true) {
      const std::vector<size_t> serving = sampleClaims();
      if (serving.size() == 1) {
        if (auto view = readLeader(serving[0])) {
          const bool registered = holdsEveryLiveWorker(*view);
          bool reconciling = false;
          for (const auto& [job, state] : view->jobs) reconciling |= state == "RECONCILING";
          if (registered && !reconciling) {
            leader_ = serving[0];
            return std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - began)
                .count();
          }
          *why = std::string(registered ? "" : "a live worker is not registered; ") +
                 (reconciling ? "a job reconciles" : "");
        } else {
          *why = "the leader's /v1/workers or /v1/jobs did not answer";
        }
      } else {
        *why = std::to_string(serving.size()) + " masters claim SERVING";
      }
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // Polling interval.
    }
  }

  // ---- Workload --------------------------------------------------------------------------------

  void submitJob(int round) {
    const Shape& shape = shapes()[rng_() % shapes().size()];
    const size_t index = history_.jobs.size();
    const std::string name = "chaos-" + std::to_string(index) + "-" + shape.name;
    const std::string dir = taskDir_.path() + "/" + name;
    std::filesystem::create_directory(dir);
    ::chmod(dir.c_str(), 01777);
    for (const ShapeVertex& vertex : shape.vertices) {
      for (const auto& [subtask, attempt] : vertex.failing) {
        touch(dir + "/" + vertex.name + "-" + std::to_string(subtask) + ".fail-" +
              std::to_string(attempt));
      }
    }
    if (!shape.held) touch(dir + "/go");
    const std::string file = dir + ".yaml";
    std::ofstream(file) << jobYaml(shape, name, dir);
    SubmittedJob job{.name = name, .shape = shape.name};
    auto submitted = ctl_->run({"jobs", "submit", file});
    if (submitted.ok() && submitted.value().exit.exited() && submitted.value().exit.exitCode == 0) {
      static const std::regex id("[0-9a-f]{32}");
      std::smatch found;
      if (std::regex_search(submitted.value().output, found, id)) {
        job.id = found[0];
        job.acknowledged = true;
      }
    }
    log("  submitted " + name + (job.acknowledged ? " as " + job.id : " (not acknowledged)"));
    jobDirs_.push_back(dir);
    history_.jobs.push_back(job);
    if (shape.held && job.acknowledged) {
      held_.push_back(HeldJob{index, round + 1 + static_cast<int>(rng_() % 3)});
    }
    // Let its first task start, so that the fault finds it running (bounded; a job waiting for
    // a slot just goes on waiting).
    if (job.acknowledged) {
      waitUntil([&] { return hasStartMark(dir); },
                Duration(5000), Duration(20));
    }
  }

  static bool hasStartMark(const std::string& dir) {
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      const std::string name = entry.path().filename();
      if (name == "go" || name.find(".fail-") != std::string::npos) continue;
      return true;
    }
    return false;
  }

  void releaseOrCancel(const HeldJob& held) {
    SubmittedJob& job = history_.jobs[held.job];
    const Shape* shape = nullptr;
    for (const Shape& s : shapes()) {
      if (s.name == job.shape) shape = &s;
    }
    if (shape && shape->cancel) {
      auto cancelled = ctl_->run({"jobs", "cancel", job.id});
      job.cancelled = cancelled.ok() && cancelled.value().exit.exited() &&
                      cancelled.value().exit.exitCode == 0;
      std::string why;
      if (!job.cancelled) {
        why = cancelled.ok() ? cancelled.value().output : cancelled.error().message;
        while (!why.empty() && why.back() == '\n') why.pop_back();
        why = " (refused: " + why.substr(why.rfind('\n') + 1) + ")";
      }
      log("  cancel " + job.name + why);
    } else {
      log("  release " + job.name);
    }
    touch(jobDirs_[held.job] + "/go");  // A cancel that did not go through ends it too.
  }

  void workload(int round) {
    std::vector<HeldJob> keep;
    for (const HeldJob& held : held_) {
      if (held.releaseRound <= round) {
        releaseOrCancel(held);
      } else {
        keep.push_back(held);
      }
    }
    held_ = keep;
    submitJob(round);
    while (held_.size() > kMaxHeldJobs) {
      releaseOrCancel(held_.front());
      held_.erase(held_.begin());
    }
  }

  // ---- Faults ----------------------------------------------------------------------------------

  size_t pickOther(size_t avoid, size_t count) {
    const size_t pick = rng_() % (count - 1);
    return pick >= avoid ? pick + 1 : pick;
  }

  // Waits until some master was granted the epoch after `epoch`.
  Status waitForNewGrant(uint64_t epoch) {
    auto granted = masters_->waitForGrant(epoch + 1, kFaultTimeout);
    if (!granted.ok()) return granted.error();
    return {};
  }

  // SIGKILL of a master. Its RPC proxy then refuses, as the address of a process that is gone
  // does (the proxy would accept, find nothing upstream and close), until it is started again.
  Status killMaster(size_t slot) {
    if (auto killed = masters_->kill(slot); !killed.ok()) return killed;
    rpcProxies_[slot]->refuse();
    return {};
  }

  // Every worker was cut from the leader from `from` to `to`.
  void cutAllWorkers(WallMs from, WallMs to) {
    for (const std::string& resourceId : resourceIds_) {
      history_.workerFaults.push_back(WorkerFault{resourceId, WorkerFault::Kind::kCut, from, to});
    }
  }

  Status restartMaster(size_t slot) {
    rpcProxies_[slot]->resume();
    if (auto restarted = masters_->restart(slot); !restarted.ok()) return restarted;
    noteMasterRun(slot);
    auto contending = masters_->waitForEvent(
        slot, [](const MasterEvent& e) { return e.kind == MasterEvent::Kind::kContending; },
        kStartTimeout);
    if (!contending.ok()) return contending.error();
    return {};
  }

  // Injects `fault` and heals it; sets round.target and round.healed. `afterSettle` gets what
  // must follow the settle (a killed master started again).
  Status inject(const std::string& fault, Round& round, std::function<Status()>& afterSettle) {
    const size_t leader = leader_;
    const uint64_t epoch = masters_->highestEpoch();
    round.target = "m" + std::to_string(leader);
    if (fault == "leader-kill") {
      if (auto killed = killMaster(leader); !killed.ok()) return killed;
      round.healed = wallClockMillis();
      afterSettle = [this, leader] { return restartMaster(leader); };
    } else if (fault == "leader-restart") {
      if (auto killed = killMaster(leader); !killed.ok()) return killed;
      if (auto restarted = restartMaster(leader); !restarted.ok()) return restarted;
      round.healed = wallClockMillis();
    } else if (fault == "leader-pause") {
      // Paused until another master was granted the next epoch: past its session.
      if (auto paused = masters_->process(leader).pause(); !paused.ok()) return paused;
      pausedMasters_.insert(leader);
      if (auto granted = waitForNewGrant(epoch); !granted.ok()) return granted;
      // The new leader seen serving, and every live worker registered with it: their epoch
      // gates are raised, so what the paused leader sends when it wakes (its heartbeats, over
      // the workers' connections to it, which linger, before its term ends) meets them. Then a
      // request queued for the paused one, which it reads first thing when it runs again: its
      // answer must not claim SERVING.
      waitUntil([&] { return workersFollowed(); }, kFaultTimeout, Duration(20));
      auto queued = QueuedHttpGet::send(masterHttp(leader), "/metrics");
      if (auto resumed = masters_->process(leader).resume(); !resumed.ok()) return resumed;
      const int64_t resumedUs = monotonicMicros();
      pausedMasters_.erase(leader);
      round.healed = wallClockMillis();
      if (queued.ok()) {
        auto reply = queued.value()->reply(kFaultTimeout);
        if (reply.ok() && metric(reply.value().body, "regent_leader_serving") == 1.0) {
          history_.claims.push_back(ServingClaim{
              masterName(leader),
              static_cast<uint64_t>(metric(reply.value().body, "regent_epoch").value_or(0)),
              resumedUs, monotonicMicros()});
        }
      }
    } else if (fault == "leader-term") {
      if (auto terminated = masters_->terminate(leader); !terminated.ok()) return terminated;
      if (!masters_->process(leader).waitForExit(kFaultTimeout)) {
        return Error::fatal("the leader m" + std::to_string(leader) + " did not exit on SIGTERM");
      }
      rpcProxies_[leader]->refuse();
      round.healed = wallClockMillis();
      afterSettle = [this, leader] { return restartMaster(leader); };
    } else if (fault == "ctl-failover") {
      auto failover = ctl_->run({"failover"});
      if (!failover.ok()) return failover.error();
      round.healed = wallClockMillis();
    } else if (fault == "standby-kill") {
      const size_t standby = pickOther(leader, kMasters);
      round.target = "m" + std::to_string(standby);
      if (auto killed = killMaster(standby); !killed.ok()) return killed;
      round.healed = wallClockMillis();
      afterSettle = [this, standby] { return restartMaster(standby); };
    } else if (fault == "leader-zk-cut") {
      // Cut from every ZooKeeper member until another master was granted the next epoch.
      for (auto& proxy : proxies_[leader]) proxy->cut();
      const Status granted = waitForNewGrant(epoch);
      for (auto& proxy : proxies_[leader]) proxy->resume();
      if (!granted.ok()) return granted;
      round.healed = wallClockMillis();
    } else if (fault == "leader-rpc-refuse") {
      // The leader's RPC address refuses, its connections closed, while it runs and keeps its
      // session: to a standby's fast failover it looks dead (a false positive the latch's owner
      // check and the term's end must make safe), to the workers it is gone.
      const WallMs from = wallClockMillis();
      rpcProxies_[leader]->refuse();
      waitUntil([&] { return masters_->highestEpoch() > epoch; }, kWorkerPause, Duration(20));
      rpcProxies_[leader]->resume();
      round.healed = wallClockMillis();
      cutAllWorkers(from, round.healed);
    } else if (fault == "leader-rpc-stall") {
      // A partition between the leader and every client: bytes held both ways, no reset, so no
      // fast failover; past heartbeat.timeout the leader loses its workers.
      const WallMs from = wallClockMillis();
      rpcProxies_[leader]->stall();
      std::this_thread::sleep_for(kWorkerPause);  // The fault itself: a partition this long.
      rpcProxies_[leader]->resume();
      round.healed = wallClockMillis();
      cutAllWorkers(from, round.healed);
    } else if (fault == "leader-isolated") {
      // A zombie: a partition that takes the leader's clients first and ZooKeeper next. Its
      // RPC is stalled past heartbeat.timeout, so it finds every worker silent and disconnects
      // them and its jobs from them (calls the stall holds); then it is cut from ZooKeeper too,
      // until another master was granted the next epoch and every live worker registered with
      // it. Then both heal, and what the zombie sent arrives late, over the workers' lingering
      // connections to it, at raised epoch gates.
      const WallMs from = wallClockMillis();
      rpcProxies_[leader]->stall();
      std::this_thread::sleep_for(kWorkerPause);  // The fault itself: past heartbeat.timeout.
      for (auto& proxy : proxies_[leader]) proxy->cut();
      Status granted = waitForNewGrant(epoch);
      if (granted.ok() && !waitUntil([&] { return workersFollowed(); }, kFaultTimeout,
                                     Duration(20))) {
        granted = Error::fatal("the workers did not register with the next leader");
      }
      rpcProxies_[leader]->resume();
      for (auto& proxy : proxies_[leader]) proxy->resume();
      round.healed = wallClockMillis();
      cutAllWorkers(from, round.healed);
      if (!granted.ok()) return granted;
    } else if (fault == "worker-kill") {
      const size_t worker = rng_() % kWorkers;
      round.target = "w" + std::to_string(worker);
      const WallMs at = wallClockMillis();
      if (auto killed = workers_->kill(worker); !killed.ok()) return killed;
      history_.workerFaults.push_back(
          WorkerFault{resourceIds_[worker], WorkerFault::Kind::kKill, at, at});
      if (auto restarted = workers_->restart(worker); !restarted.ok()) return restarted;
      noteWorkerRun(worker);
      round.healed = wallClockMillis();
    } else if (fault == "worker-cut") {
      // One worker partitioned from the leader (and only from it: its ZooKeeper session and
      // the other workers are untouched): its connections to the leader's RPC proxy, and those
      // it opens meanwhile, stall past heartbeat.timeout; the leader loses it and runs its
      // subtasks elsewhere while its tasks run on.
      const size_t worker = rng_() % kWorkers;
      round.target = "w" + std::to_string(worker);
      WorkerFault cut{resourceIds_[worker], WorkerFault::Kind::kCut, wallClockMillis(), 0};
      rpcProxies_[leader]->stallClients(
          clientsOf(workers_->process(worker).pid(), rpcProxies_[leader]->port()));
      std::this_thread::sleep_for(kWorkerPause);  // The fault itself: a partition this long.
      rpcProxies_[leader]->resume();
      cut.to = wallClockMillis();
      history_.workerFaults.push_back(cut);
      round.healed = cut.to;
    } else if (fault == "worker-pause") {
      const size_t worker = rng_() % kWorkers;
      round.target = "w" + std::to_string(worker);
      WorkerFault pause{resourceIds_[worker], WorkerFault::Kind::kPause, wallClockMillis(), 0};
      if (auto paused = workers_->process(worker).pause(); !paused.ok()) return paused;
      pausedWorkers_.insert(worker);
      std::this_thread::sleep_for(kWorkerPause);  // The fault itself: a pause this long.
      if (auto resumed = workers_->process(worker).resume(); !resumed.ok()) return resumed;
      pausedWorkers_.erase(worker);
      pause.to = wallClockMillis();
      history_.workerFaults.push_back(pause);
      round.healed = pause.to;
    } else if (fault == "zk-member") {
      const size_t member = rng_() % kZooKeeperMembers;
      round.target = "zk" + std::to_string(member);
      if (auto stopped = zk_->stopMember(member); !stopped.ok()) return stopped;
      std::this_thread::sleep_for(kTestSessionTimeout);  // The fault itself: a member down.
      if (auto started = zk_->startMember(member); !started.ok()) return started;
      round.healed = wallClockMillis();
    } else if (fault == "zk-quorum") {
      const size_t first = rng_() % kZooKeeperMembers;
      const size_t second = pickOther(first, kZooKeeperMembers);
      round.target = "zk" + std::to_string(first) + "+zk" + std::to_string(second);
      if (auto stopped = zk_->stopMember(first); !stopped.ok()) return stopped;
      if (auto stopped = zk_->stopMember(second); !stopped.ok()) return stopped;
      // The fault itself: no quorum for longer than a session.
      std::this_thread::sleep_for(kTestSessionTimeout + Duration(1000));
      if (auto started = zk_->startMember(first); !started.ok()) return started;
      if (auto started = zk_->startMember(second); !started.ok()) return started;
      round.healed = wallClockMillis();
    } else {
      return Error::fatal("unknown fault " + fault);
    }
    return {};
  }

  Status runRound(int round) {
    const std::vector<std::string>& kinds =
        options_.faults.empty() ? faultKinds() : options_.faults;
    const std::string fault = kinds[rng_() % kinds.size()];
    workload(round);
    Round record{.number = round, .fault = fault, .from = wallClockMillis()};
    std::function<Status()> afterSettle;
    if (auto injected = inject(fault, record, afterSettle); !injected.ok()) return injected;
    std::string why;
    const auto settled = settle(&why);
    record.to = wallClockMillis();
    record.settleMs = settled ? record.to - record.healed : -1;
    log("round " + std::to_string(round) + " fault=" + fault + " target=" + record.target +
        (settled ? " settled in " + std::to_string(record.settleMs) + " ms"
                 : " did not settle within " + std::to_string(kSettleTimeout.count()) +
                       " ms: " + why));
    history_.rounds.push_back(record);
    if (afterSettle) {
      if (auto after = afterSettle(); !after.ok()) return after;
    }
    return {};
  }

  // ---- The end ---------------------------------------------------------------------------------

  Status finish() {
    for (const HeldJob& held : held_) releaseOrCancel(held);
    held_.clear();
    for (const std::string& dir : jobDirs_) touch(dir + "/go");
    std::string why;
    if (!settle(&why)) log("the cluster did not settle after the last round: " + why);
    // Every acknowledged job ends, and its slots are freed.
    std::optional<LeaderView> view;
    waitUntil(
        [&] {
          const std::vector<size_t> serving = sampleClaims();
          if (serving.size() != 1) return false;
          leader_ = serving[0];
          view = readLeader(leader_);
          if (!view) return false;
          for (const SubmittedJob& job : history_.jobs) {
            if (!job.acknowledged) continue;
            auto state = view->jobs.find(job.id);
            if (state != view->jobs.end() && !isTerminalJobState(state->second)) return false;
          }
          for (const AllocatedSlot& slot : view->allocated) {
            auto state = view->jobs.find(slot.job);
            if (state == view->jobs.end() || isTerminalJobState(state->second)) return false;
          }
          return true;
        },
        kEndTimeout, Duration(100));
    FinalState& f = history_.final;
    for (size_t m : sampleClaims()) f.servingMasters.push_back(masterName(m));
    f.liveWorkers = liveWorkers();
    if (view) {
      f.registeredWorkers = view->registered;
      f.allocatedSlots = view->allocated;
      f.jobStates = view->jobs;
    }
    std::vector<pid_t> pids;
    for (const TaskMark& mark : readMarks()) {
      if (mark.start) pids.push_back(mark.pid);
    }
    f.leftoverPids = waitForProcessesGone(pids, Duration(30000));
    auto leader = ctl_->run({"--json", "leader"});
    if (leader.ok()) {
      try {
        for (const std::string& line : jsonLines(leader.value().output)) {
          auto parsed = nlohmann::json::parse(line);
          if (parsed.contains("epoch")) f.zookeeperEpoch = parsed["epoch"].get<uint64_t>();
        }
      } catch (const std::exception&) {
      }
    }
    return {};
  }

  // ---- Reading what was recorded ---------------------------------------------------------------

  std::vector<TaskMark> readMarks() const {
    std::vector<TaskMark> marks;
    static const std::regex fileName("(.+)-([0-9]+)");
    for (size_t j = 0; j < jobDirs_.size(); ++j) {
      const SubmittedJob& job = history_.jobs[j];
      if (job.id.empty()) continue;
      for (const auto& entry : std::filesystem::directory_iterator(jobDirs_[j])) {
        const std::string name = entry.path().filename();
        std::smatch parts;
        if (!std::regex_match(name, parts, fileName)) continue;
        std::ifstream in(entry.path());
        std::string line;
        while (std::getline(in, line)) {
          std::istringstream fields(line);
          std::string kind;
          long pid = 0;
          TaskMark mark{.job = job.id, .vertex = parts[1],
                        .subtask = static_cast<uint32_t>(std::stoul(parts[2]))};
          if (!(fields >> kind >> pid >> mark.attempt >> mark.attemptNumber >> mark.at)) continue;
          mark.pid = static_cast<pid_t>(pid);
          mark.start = kind == "start";
          if (!mark.start && !(fields >> mark.exitCode)) continue;
          marks.push_back(mark);
        }
      }
    }
    return marks;
  }

  void gather() {
    for (const auto& [master, path] : masterEvents_) {
      for (const regent::Event& event : readEventsFile(path)) {
        const EventFields fields = textFieldsOf(event);
        auto text = [&](const char* key) { return fields.get(key).value_or(""); };
        if (event.name() == "leadership granted") {
          history_.grants.push_back(Grant{master, fields.getUint("epoch").value_or(0),
                                          event.wallMs()});
        } else if (event.name() == "attempt deployed") {
          // Where the attempt was sent: its worker, even if that worker never reported it (killed
          // before its "task started", or it forgot the attempt).
          history_.workerTasks.push_back(WorkerTask{text("resource_id"), text("job"),
                                                    text("attempt"), false, "", event.wallMs()});
        } else if (event.name() == "job ended") {
          history_.jobEnds.push_back(JobEnd{text("job"), text("state"), master, event.wallMs()});
        } else if (event.name() == "attempt state" && text("state") == "FINISHED") {
          history_.finished.push_back(AttemptFinished{
              text("job"), text("vertex"),
              static_cast<uint32_t>(fields.getUint("subtask").value_or(0)), text("attempt"),
              master, event.wallMs()});
        }
      }
    }
    for (const auto& [run, path] : workerEvents_) {
      for (const regent::Event& event : readEventsFile(path)) {
        const EventFields fields = textFieldsOf(event);
        auto text = [&](const char* key) { return fields.get(key).value_or(""); };
        if (event.name() == "epoch gate refused") ++history_.epochGateRefusals;
        if (event.name() == "worker registered" || event.name() == "call admitted") {
          history_.workerEpochs.push_back(WorkerEpoch{run, text("resource_id"), text("method"),
                                                      fields.getUint("epoch").value_or(0),
                                                      event.wallMs()});
        }
        if (event.name() == "task started" || event.name() == "task ended") {
          history_.workerTasks.push_back(WorkerTask{text("resource_id"), text("job"),
                                                    text("attempt"), event.name() == "task ended",
                                                    text("state"), event.wallMs()});
        }
      }
    }
    history_.marks = readMarks();
  }

  const ChaosOptions options_;
  std::mt19937_64 rng_;
  TempDir taskDir_;
  std::unique_ptr<ZooKeeperServer> zk_;
  std::vector<std::vector<std::unique_ptr<ThreadedTcpFaultProxy>>> proxies_;  // [master][member]
  std::vector<std::unique_ptr<ThreadedTcpFaultProxy>> rpcProxies_;             // [master]
  std::unique_ptr<MasterCluster> masters_;
  std::unique_ptr<WorkerCluster> workers_;
  std::unique_ptr<Regentctl> ctl_;
  size_t leader_ = 0;
  std::map<size_t, int> masterRuns_;
  std::map<size_t, std::string> masterHttp_;
  std::vector<std::pair<std::string, std::string>> masterEvents_;  // (master run, events file)
  std::map<size_t, int> workerRuns_;
  std::vector<std::pair<std::string, std::string>> workerEvents_;  // (worker run, events file)
  std::vector<std::string> resourceIds_;  // By worker slot.
  std::set<size_t> pausedMasters_;
  std::set<size_t> pausedWorkers_;
  std::vector<std::string> jobDirs_;  // By job index.
  std::vector<HeldJob> held_;
  History history_;
};

}  // namespace

const std::vector<std::string>& faultKinds() {
  static const std::vector<std::string> kKinds = {
      "leader-kill",  "leader-restart", "leader-pause", "leader-term", "ctl-failover",
      "standby-kill", "leader-zk-cut",  "leader-rpc-refuse", "leader-rpc-stall", "leader-isolated",
      "worker-kill",  "worker-cut",   "worker-pause", "zk-member", "zk-quorum"};
  return kKinds;
}

Result<ChaosReport> runChaos(const ChaosOptions& options) {
  for (const std::string& fault : options.faults) {
    if (std::find(faultKinds().begin(), faultKinds().end(), fault) == faultKinds().end()) {
      std::string known;
      for (const std::string& kind : faultKinds()) known += " " + kind;
      return Error::fatal("unknown fault \"" + fault + "\"; known:" + known);
    }
  }
  return ChaosRun(options).run();
}

std::string summarize(const History& history) {
  struct Times {
    std::vector<int64_t> fromHeal, fromFault;
    int unsettled = 0;
  };
  std::map<std::string, Times> byKind;
  for (const Round& round : history.rounds) {
    Times& times = byKind[round.fault];
    if (round.settleMs >= 0) {
      times.fromHeal.push_back(round.settleMs);
      times.fromFault.push_back(round.to - round.from);
    } else {
      ++times.unsettled;
    }
  }
  auto medianAndMax = [](std::vector<int64_t>& values) -> std::string {
    if (values.empty()) return "-";
    std::sort(values.begin(), values.end());
    return std::to_string(values[values.size() / 2]) + " / " + std::to_string(values.back());
  };
  std::ostringstream out;
  out << "settle times in ms (median / max): from the heal, and from the fault\n";
  out << "fault              rounds  from heal        from fault       unsettled\n";
  for (const std::string& kind : faultKinds()) {
    auto found = byKind.find(kind);
    if (found == byKind.end()) continue;
    Times& times = found->second;
    char line[160];
    std::snprintf(line, sizeof line, "%-18s %6zu  %-15s  %-15s  %9d\n", kind.c_str(),
                  times.fromHeal.size() + static_cast<size_t>(times.unsettled),
                  medianAndMax(times.fromHeal).c_str(), medianAndMax(times.fromFault).c_str(),
                  times.unsettled);
    out << line;
  }
  size_t starts = 0;
  for (const TaskMark& mark : history.marks) starts += mark.start ? 1 : 0;
  out << "checked: " << history.jobs.size() << " jobs, " << starts << " task starts, "
      << history.marks.size() - starts << " task ends, " << history.workerTasks.size()
      << " worker task events, " << history.workerEpochs.size()
      << " worker registrations and admitted calls, " << history.grants.size() << " grants, "
      << history.claims.size() << " SERVING claims, " << history.jobEnds.size()
      << " job ends, " << history.finished.size() << " finished attempts, "
      << history.workerFaults.size() << " worker faults; " << history.epochGateRefusals
      << " stale calls refused by the workers' epoch gate\n";
  return out.str();
}

}  // namespace regent::testing::chaos

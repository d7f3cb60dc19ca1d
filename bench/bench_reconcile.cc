// The reconciliation benchmark (scripts/bench.sh reconcile): how long after a failover the new
// leader's JobMasters take to adopt the attempts that kept running on the workers, over a real
// ZooKeeper server, three real regent-master processes (ZooKeeper store) and real regent-worker
// processes. It submits --jobs jobs of one vertex whose --parallelism subtasks run `sleep 600`,
// waits until every attempt runs, then per case:
//   kill      SIGKILL the leader (a standby wins once its session expired), then start it again
//             as a standby;
//   handover  `regentctl failover` (the leader hands over and stays a standby);
// and reads from the new leader's log its "leadership granted" line and one "job reconciled" line
// per job (docs/operations.md). Per case it prints
//   reconcile case=<kill|handover> adopted=<n> restarted=<n> ms_after_grant min= median= max= n=
// where ms_after_grant is each job's "job reconciled" mono_us minus the grant's, adopted the sum of
// their adopted= counts, and restarted the "attempt deployed" lines the new leader logged after
// its grant (plus "task started" lines of the workers after the failover began, which would show a
// restart the master's log missed). It exits non-zero when adopted is not every attempt or
// restarted is not 0: the benchmark checks what it measures; it never asserts timings.
// With --jobs N,M,... it measures each count in turn on the same cluster, submitting the jobs
// each step adds. docs/benchmarks.md explains each number.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "common/event_line.h"
#include "common/ids.h"
#include "common/result.h"
#include "common/time.h"
#include "tests/fixtures/process_harness.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/fixtures/wait_test_util.h"
#include "tests/fixtures/zookeeper_server.h"

namespace regent::bench {
namespace {

using testing::ProcessHarness;
using testing::ProcessOptions;
using testing::TempDir;
using testing::ZooKeeperServer;
using testing::ZooKeeperServerOptions;

// Generous bounds: exceeding one means something failed, not that something was slow.
constexpr Duration kStartTimeout{60000};    // A process serves, registers or contends.
constexpr Duration kCommandTimeout{60000};  // One regentctl command, its retries included.
constexpr Duration kGrantTimeout{60000};    // The next leader is granted (SIGKILL: expiry first).
constexpr Duration kStopTimeout{30000};     // A worker's SIGTERM: it cancels its tasks first.
constexpr Duration kPoll{20};               // Log reads; every time comes from the logs.
constexpr int kSubmitsAtOnce = 8;           // regentctl jobs submit processes at a time.

struct BenchOptions {
  std::vector<int> jobs = {250};
  int parallelism = 2;  // Subtasks per job (one vertex), each a `sleep 600`.
  int workers = 8;
  int slots = 64;  // Per worker.
  std::vector<std::string> cases = {"kill", "handover"};
  // Past jobmaster.reconciliation-timeout (30 s by default): a run that ends by the timeout
  // still reports its numbers.
  Duration reconcileTimeout{120000};
  std::vector<std::string> masterSets, workerSets;
  std::string binDir = thisExecutableDir();  // --bin-dir; by default next to this binary.
};

// The signal (SIGINT, SIGTERM, SIGHUP) that asked the benchmark to stop, 0 if none: every wait
// then ends at once, and the run fails through its usual path, which stops what it started.
volatile sig_atomic_t gStopSignal = 0;

void onStopSignal(int signum) { gStopSignal = signum; }

void installStopHandlers() {
  struct sigaction action {};
  action.sa_handler = onStopSignal;
  sigemptyset(&action.sa_mask);
  for (const int signum : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(signum, &action, nullptr);
}

// testing::waitUntil, ended early (false) by a stop signal.
bool waitUntil(const std::function<bool()>& condition, Duration timeout, Duration interval) {
  return testing::waitUntil([&] { return gStopSignal != 0 || condition(); }, timeout, interval) &&
         gStopSignal == 0;
}

// One started process and every complete line of its current run's log read so far.
struct LoggedProcess {
  std::unique_ptr<ProcessHarness> process;
  std::unique_ptr<LogTail> tail;
  std::vector<std::string> lines;

  // Reads the lines written since the last call; returns how many there are in all.
  size_t read() {
    for (std::string& line : tail->next()) lines.push_back(std::move(line));
    return lines.size();
  }
};

Result<LoggedProcess> startLogged(std::vector<std::string> argv, const std::string& logPath) {
  auto process =
      ProcessHarness::start(ProcessOptions{.argv = std::move(argv), .outputPath = logPath});
  if (!process.ok()) return process.error();
  return LoggedProcess{.process = std::move(process).value(),
                       .tail = std::make_unique<LogTail>(logPath),
                       .lines = {}};
}

// The job of this benchmark: one vertex of `parallelism` subtasks, each sleeping ten minutes.
std::string jobSpec(JobId job, int index, int parallelism) {
  return "job_id: " + job.toHex() + "\nname: reconcile-" + std::to_string(index) +
         "\nvertices:\n  - name: hold\n    parallelism: " + std::to_string(parallelism) +
         "\n    command:\n      argv: [/bin/sleep, \"600\"]\n";
}

// What the new leader logged for one case.
struct CaseResult {
  int64_t grantUs = 0;
  int64_t leftUs = 0;  // The old leader was killed, or regentctl failover was started.
  uint64_t adopted = 0, ended = 0, unreported = 0, timedOut = 0;
  uint64_t deployed = 0;      // "attempt deployed" of the new leader after its grant.
  uint64_t tasksStarted = 0;  // "task started" of the workers after the failover began.
  uint64_t expected = 0;      // The sum of expected= of the new leader's "job reconciling".
  std::vector<double> msAfterGrant;
  std::vector<double> adoptedMsAfterGrant;  // Each "attempt adopted" of the new leader.
  // From the old leader's departure to the last "job reconciled": CPU used and time waited for a
  // CPU by the new leader and by all workers together; the load average at the end.
  SchedTimes leaderCpu, workersCpu;
  std::string loadAverage;
};

class ReconcileBench final {
 public:
  ReconcileBench(const BenchOptions& options, std::string quorum, std::string dir)
      : options_(options),
        quorum_(std::move(quorum)),
        dir_(std::move(dir)),
        clusterId_("bench-reconcile-" + std::to_string(::getpid())) {}

  // Stops the workers first (SIGTERM: each cancels its tasks), then kills what a task may have
  // left; the masters die with their harnesses.
  ~ReconcileBench() { stopWorkersAndTasks(); }

  Status run() {
    if (Status started = startCluster(); !started.ok()) return started;
    bool allChecked = true;
    for (const int jobs : options_.jobs) {
      if (Status submitted = submitUpTo(jobs); !submitted.ok()) return submitted;
      for (const std::string& name : options_.cases) {
        if (gStopSignal != 0) return Error::fatal("stopped");
        auto result = runCase(name);
        if (!result.ok()) return result.error();
        if (!report(name, result.value())) allChecked = false;
      }
    }
    if (!allChecked) {
      return Error::fatal(
          "not every attempt was adopted without a restart (see the lines above); "
          "logs in " +
          dir_ + " (kept with KEEP_TEST_TMP=1)");
    }
    return {};
  }

 private:
  Status startCluster() {
    for (int i = 0; i < 3; ++i) {
      if (Status started = startMaster(i); !started.ok()) return started;
    }
    if (!waitUntil([&] { return findLeader(0).has_value(); }, kGrantTimeout, kPoll)) {
      return Error::fatal("no regent-master was granted leadership within " +
                          std::to_string(kGrantTimeout.count()) + " ms");
    }
    leader_ = *findLeader(0);
    for (int i = 0; i < options_.workers; ++i) {
      std::vector<std::string> sets =
          workerSettings(quorum_, clusterId_, makeWorkerDataDir(dir_, i), options_.slots);
      sets.push_back("worker.task-cancel-timeout=1s");
      sets.insert(sets.end(), options_.workerSets.begin(), options_.workerSets.end());
      auto worker = startLogged(withSets(options_.binDir + "/regent-worker", sets),
                                dir_ + "/worker-" + std::to_string(i) + ".log");
      if (!worker.ok()) return Error::fatal("regent-worker: " + worker.error().message);
      workers_.push_back(std::move(worker).value());
    }
    for (size_t i = 0; i < workers_.size(); ++i) {
      Status registered = waitForWorkerRegistered(*workers_[i].process, i, kStartTimeout);
      if (!registered.ok()) return registered;
    }
    note("3 regent-master (ZooKeeper store), " + std::to_string(options_.workers) +
         " regent-worker x " + std::to_string(options_.slots) + " slots; logs in " + dir_ +
         " (kept with KEEP_TEST_TMP=1)");
    return {};
  }

  // Starts master `index` (again: a new log file per run, so its lines are this run's).
  Status startMaster(int index) {
    std::vector<std::string> sets = {
        "ha.zookeeper.quorum=" + quorum_, "cluster-id=" + clusterId_, "store.backend=zookeeper",
        "rpc.bind=127.0.0.1:0",           "http.bind=127.0.0.1:0",    "log.level=info",
    };
    sets.insert(sets.end(), options_.masterSets.begin(), options_.masterSets.end());
    const std::string log = dir_ + "/master-" + std::to_string(index) + "-run-" +
                            std::to_string(++masterRuns_) + ".log";
    auto master = startLogged(withSets(options_.binDir + "/regent-master", sets), log);
    if (!master.ok()) return Error::fatal("regent-master: " + master.error().message);
    if (masters_.size() <= static_cast<size_t>(index)) masters_.resize(index + 1);
    masters_[index] = std::move(master).value();
    auto contending =
        masters_[index].process->waitForLine(std::regex("contending "), kStartTimeout);
    if (!contending.ok()) {
      return Error::fatal("regent-master " + std::to_string(index) +
                          " did not contend: " + contending.error().message);
    }
    return {};
  }

  // The master that logged a "leadership granted" of an epoch above `aboveEpoch` (the highest
  // such epoch), with that grant; nullopt if none did yet.
  struct Leader {
    size_t index = 0;
    uint64_t epoch = 0;
    int64_t grantUs = 0;
    size_t grantLine = 0;  // Index of the grant in the master's lines.
  };
  std::optional<Leader> findLeader(uint64_t aboveEpoch) {
    std::optional<Leader> found;
    for (size_t i = 0; i < masters_.size(); ++i) {
      LoggedProcess& master = masters_[i];
      if (!master.process || !master.process->running()) continue;
      master.read();
      for (size_t line = 0; line < master.lines.size(); ++line) {
        auto granted = parseEventLine(master.lines[line], "leadership granted");
        if (!granted) continue;
        const auto epoch = granted->getInt("epoch");
        if (!epoch || static_cast<uint64_t>(*epoch) <= aboveEpoch) continue;
        if (found && found->epoch >= static_cast<uint64_t>(*epoch)) continue;
        found = Leader{.index = i,
                       .epoch = static_cast<uint64_t>(*epoch),
                       .grantUs = granted->getInt("mono_us").value_or(0),
                       .grantLine = line};
      }
    }
    return found;
  }

  // regentctl for this cluster with `args`; fails naming the command and its output unless it
  // exits 0 within kCommandTimeout.
  Result<std::unique_ptr<ProcessHarness>> startCtl(const std::vector<std::string>& args,
                                                   const std::string& logPath) {
    std::vector<std::string> argv = {options_.binDir + "/regentctl", "--zk", quorum_,
                                     "--cluster-id", clusterId_};
    argv.insert(argv.end(), args.begin(), args.end());
    return ProcessHarness::start(ProcessOptions{.argv = std::move(argv), .outputPath = logPath});
  }

  static Status waitForCtl(ProcessHarness& ctl, const std::string& what) {
    auto exit = ctl.waitForExit(kCommandTimeout);
    if (!exit) {
      return Error::fatal("regentctl " + what + " did not end within " +
                          std::to_string(kCommandTimeout.count()) + " ms");
    }
    if (!exit->exited() || exit->exitCode != 0) {
      return Error::fatal("regentctl " + what + " failed (" + exit->describe() +
                          "): " + ctl.outputTail(2000));
    }
    return {};
  }

  // Submits jobs (regentctl jobs submit, kSubmitsAtOnce at a time) until `total` were, then waits
  // until every attempt of every job runs ("task started" on the workers).
  Status submitUpTo(int total) {
    const int64_t startUs = monotonicMicros();
    std::vector<std::pair<std::unique_ptr<ProcessHarness>, std::string>> running;
    auto drain = [&]() -> Status {
      for (auto& [ctl, job] : running) {
        if (Status done = waitForCtl(*ctl, "jobs submit of job " + job); !done.ok()) return done;
      }
      running.clear();
      return {};
    };
    for (int index = submitted_; index < total; ++index) {
      if (gStopSignal != 0) return Error::fatal("stopped");
      const JobId job = JobId::random();
      const std::string file = dir_ + "/job-" + std::to_string(index) + ".yaml";
      std::ofstream(file) << jobSpec(job, index, options_.parallelism);
      auto ctl =
          startCtl({"jobs", "submit", file}, dir_ + "/submit-" + std::to_string(index) + ".log");
      if (!ctl.ok()) return Error::fatal("regentctl: " + ctl.error().message);
      running.emplace_back(std::move(ctl).value(), job.toHex());
      jobs_.insert(job.toHex());
      if (running.size() >= static_cast<size_t>(kSubmitsAtOnce)) {
        if (Status done = drain(); !done.ok()) return done;
      }
    }
    if (Status done = drain(); !done.ok()) return done;
    submitted_ = total;
    const int64_t acceptedUs = monotonicMicros();

    const size_t attempts = static_cast<size_t>(total) * options_.parallelism;
    const Duration bound(kStartTimeout.count() + int64_t{total} * 200);
    const bool allRunning =
        waitUntil([&] { return runningAttempts().size() >= attempts; }, bound, Duration(200));
    if (!allRunning) {
      return Error::fatal(std::to_string(runningAttempts().size()) + " of " +
                          std::to_string(attempts) + " attempts run after " +
                          std::to_string(bound.count()) + " ms; the leader's log ends with:\n" +
                          masters_[leader_.index].process->outputTail(3000));
    }
    note(std::to_string(total) + " jobs x " + std::to_string(options_.parallelism) +
         " subtasks: submitted in " + formatFixed(ms(acceptedUs - startUs), 0) + " ms, all " +
         std::to_string(attempts) + " attempts running after " +
         formatFixed(ms(monotonicMicros() - startUs), 0) + " ms");
    return {};
  }

  // Attempt ids with a "task started" line on some worker and no "task ended" after it.
  std::set<std::string> runningAttempts() {
    std::set<std::string> attempts;
    for (LoggedProcess& worker : workers_) {
      worker.read();
      for (const std::string& line : worker.lines) {
        if (auto started = parseEventLine(line, "task started")) {
          attempts.insert(started->get("attempt").value_or(""));
        } else if (auto ended = parseEventLine(line, "task ended")) {
          attempts.erase(ended->get("attempt").value_or(""));
        }
      }
    }
    return attempts;
  }

  size_t workerTaskStartsSince(const std::vector<size_t>& from) {
    size_t starts = 0;
    for (size_t i = 0; i < workers_.size(); ++i) {
      workers_[i].read();
      for (size_t line = from[i]; line < workers_[i].lines.size(); ++line) {
        if (parseEventLine(workers_[i].lines[line], "task started")) ++starts;
      }
    }
    return starts;
  }

  // CPU used and waited for, summed over the workers (not their tasks).
  SchedTimes workersSchedTimes() {
    SchedTimes sum;
    for (LoggedProcess& worker : workers_) {
      const SchedTimes times = procSchedTimes(worker.process->pid()).value_or(SchedTimes{});
      sum.cpuMs += times.cpuMs;
      sum.waitMs += times.waitMs;
    }
    return sum;
  }

  // One failover (`name` kill or handover) and what the new leader logged until every job was
  // reconciled.
  Result<CaseResult> runCase(const std::string& name) {
    CaseResult result;
    const Leader old = leader_;
    std::vector<size_t> workerLines;
    for (LoggedProcess& worker : workers_) workerLines.push_back(worker.read());
    std::vector<SchedTimes> mastersBefore;
    for (LoggedProcess& master : masters_) {
      mastersBefore.push_back(procSchedTimes(master.process->pid()).value_or(SchedTimes{}));
    }
    const SchedTimes workersBefore = workersSchedTimes();
    result.leftUs = monotonicMicros();
    if (name == "kill") {
      if (Status killed = masters_[old.index].process->kill(); !killed.ok()) return killed.error();
      if (!masters_[old.index].process->waitForExit(kStopTimeout)) {
        return Error::fatal("the killed leader did not exit");
      }
    } else {
      auto ctl =
          startCtl({"failover"}, dir_ + "/failover-" + std::to_string(++failovers_) + ".log");
      if (!ctl.ok()) return Error::fatal("regentctl: " + ctl.error().message);
      if (Status done = waitForCtl(*ctl.value(), "failover"); !done.ok()) return done.error();
    }
    if (!waitUntil([&] { return findLeader(old.epoch).has_value(); }, kGrantTimeout, kPoll)) {
      return Error::fatal("no master was granted leadership within " +
                          std::to_string(kGrantTimeout.count()) + " ms of the " + name);
    }
    leader_ = *findLeader(old.epoch);
    result.grantUs = leader_.grantUs;
    LoggedProcess& master = masters_[leader_.index];

    // One "job reconciled" per job of the benchmark, the first after the grant.
    std::map<std::string, EventFields> reconciled;
    size_t scanned = leader_.grantLine + 1;
    auto scan = [&] {
      master.read();
      for (; scanned < master.lines.size(); ++scanned) {
        const std::string& line = master.lines[scanned];
        if (parseEventLine(line, "attempt deployed")) ++result.deployed;
        if (auto adopted = parseEventLine(line, "attempt adopted")) {
          result.adoptedMsAfterGrant.push_back(
              ms(adopted->getInt("mono_us").value_or(result.grantUs) - result.grantUs));
        }
        if (auto reconciling = parseEventLine(line, "job reconciling")) {
          result.expected += static_cast<uint64_t>(reconciling->getInt("expected").value_or(0));
        }
        auto fields = parseEventLine(line, "job reconciled");
        if (!fields) continue;
        const std::string job = fields->get("job").value_or("");
        if (jobs_.count(job) != 0) reconciled.emplace(job, *fields);
      }
      return reconciled.size() == jobs_.size();
    };
    if (!waitUntil(scan, options_.reconcileTimeout, kPoll)) {
      return Error::fatal("the new leader logged \"job reconciled\" for " +
                          std::to_string(reconciled.size()) + " of " +
                          std::to_string(jobs_.size()) + " jobs within " +
                          std::to_string(options_.reconcileTimeout.count()) + " ms of its grant (" +
                          name + "), and " + std::to_string(result.deployed) +
                          " \"attempt deployed\" lines after it; its log ends with:\n" +
                          master.process->outputTail(3000));
    }
    for (const auto& [job, fields] : reconciled) {
      const auto monoUs = fields.getInt("mono_us");
      if (!monoUs) return Error::fatal("\"job reconciled\" of job " + job + " has no mono_us");
      result.msAfterGrant.push_back(ms(*monoUs - result.grantUs));
      result.adopted += static_cast<uint64_t>(fields.getInt("adopted").value_or(0));
      result.ended += static_cast<uint64_t>(fields.getInt("ended").value_or(0));
      result.unreported += static_cast<uint64_t>(fields.getInt("unreported").value_or(0));
      if (fields.get("timed_out") == "true") ++result.timedOut;
    }
    result.tasksStarted = workerTaskStartsSince(workerLines);
    const SchedTimes leaderNow =
        procSchedTimes(master.process->pid()).value_or(mastersBefore[leader_.index]);
    result.leaderCpu = {.cpuMs = leaderNow.cpuMs - mastersBefore[leader_.index].cpuMs,
                        .waitMs = leaderNow.waitMs - mastersBefore[leader_.index].waitMs};
    const SchedTimes workersNow = workersSchedTimes();
    result.workersCpu = {.cpuMs = workersNow.cpuMs - workersBefore.cpuMs,
                         .waitMs = workersNow.waitMs - workersBefore.waitMs};
    result.loadAverage = loadAverage();

    if (name == "kill") {
      // Three masters again for the next case: the killed one comes back as a standby.
      if (Status started = startMaster(static_cast<int>(old.index)); !started.ok())
        return started.error();
    }
    return result;
  }

  // Prints the case's line and notes; false when not every attempt was adopted without restart.
  bool report(const std::string& name, const CaseResult& result) {
    const uint64_t attempts = static_cast<uint64_t>(submitted_) * options_.parallelism;
    const uint64_t restarted = std::max(result.deployed, result.tasksStarted);
    const Summary adopted = summarize(result.adoptedMsAfterGrant);
    note(name + " with " + std::to_string(submitted_) + " jobs: old leader gone -> grant " +
         formatFixed(ms(result.grantUs - result.leftUs), 0) + " ms (" +
         (name == "kill" ? "session expiry first" : "regentctl failover") + "); expected=" +
         std::to_string(result.expected) + " ended=" + std::to_string(result.ended) +
         " unreported=" + std::to_string(result.unreported) +
         " jobs_timed_out=" + std::to_string(result.timedOut) + "; " + std::to_string(adopted.n) +
         " \"attempt adopted\" lines, the first " + formatFixed(adopted.min, 1) +
         " ms and the last " + formatFixed(adopted.max, 1) + " ms after the grant; " +
         std::to_string(result.deployed) + " \"attempt deployed\" after the grant, " +
         std::to_string(result.tasksStarted) + " \"task started\" on the workers since the " +
         name);
    note(name +
         ": from the old leader's departure to the last \"job reconciled\" the new leader "
         "used " +
         formatFixed(result.leaderCpu.cpuMs, 0) + " ms of CPU (waited " +
         formatFixed(result.leaderCpu.waitMs, 0) + " ms for one), the workers " +
         formatFixed(result.workersCpu.cpuMs, 0) + " ms (waited " +
         formatFixed(result.workersCpu.waitMs, 0) + " ms); load average " + result.loadAverage);
    std::printf("reconcile case=%s adopted=%llu restarted=%llu ms_after_grant %s\n", name.c_str(),
                static_cast<unsigned long long>(result.adopted),
                static_cast<unsigned long long>(restarted),
                describe(summarize(result.msAfterGrant), 1).c_str());
    std::fflush(stdout);
    return result.adopted == attempts && restarted == 0;
  }

  // The workers get SIGTERM (each cancels its tasks, SIGKILL after worker.task-cancel-timeout)
  // and are waited for; then every task process a worker logged as started and that still runs
  // (sleep or the shim, as it started) is killed with its group.
  void stopWorkersAndTasks() {
    std::vector<int64_t> taskPids;
    for (LoggedProcess& worker : workers_) {
      worker.read();
      for (const std::string& line : worker.lines) {
        if (auto started = parseEventLine(line, "task started")) {
          if (auto pid = started->getInt("pid")) taskPids.push_back(*pid);
        }
      }
      (void)worker.process->terminate();
    }
    for (LoggedProcess& worker : workers_) (void)worker.process->waitForExit(kStopTimeout);
    workers_.clear();
    for (const int64_t pid : taskPids) {
      const std::string commandLine = procCommandLine(static_cast<pid_t>(pid));
      if (commandLine.find("sleep") == std::string::npos &&
          commandLine.find("regent-task-shim") == std::string::npos) {
        continue;  // Gone (or the pid is another process's by now).
      }
      ::kill(-static_cast<pid_t>(pid), SIGKILL);
      ::kill(static_cast<pid_t>(pid), SIGKILL);
    }
  }

  const BenchOptions& options_;
  const std::string quorum_;
  const std::string dir_;
  const std::string clusterId_;
  std::vector<LoggedProcess> masters_;
  std::vector<LoggedProcess> workers_;
  Leader leader_;
  std::set<std::string> jobs_;  // Hex ids of the jobs submitted.
  int submitted_ = 0;
  int masterRuns_ = 0;
  int failovers_ = 0;
};

int run(const BenchOptions& options) {
  auto fail = [](const std::string& what) { return reportFailure("bench_reconcile", what); };
  if (Status present = requireBinaries(
          options.binDir, {"regent-master", "regent-worker", "regentctl", "regent-task-shim"});
      !present.ok()) {
    return fail(present.error().message);
  }
  spdlog::set_level(spdlog::level::warn);
  installStopHandlers();
  auto server = ZooKeeperServer::start(ZooKeeperServerOptions{.tickTime = Duration(500)});
  if (!server.ok()) return fail("ZooKeeper did not start: " + server.error().message);
  TempDir dir("regent-bench-reconcile");
  // The workers' data directories live here; their tasks run as an unprivileged user.
  ::chmod(dir.path().c_str(), 0755);
  ReconcileBench bench(options, server.value()->connectString(), dir.path());
  if (Status done = bench.run(); !done.ok()) {
    if (gStopSignal != 0) {
      return fail("stopped by signal " + std::to_string(gStopSignal) +
                  "; stopping the workers, their tasks, the masters and ZooKeeper");
    }
    return fail(done.error().message);
  }
  return 0;
}

}  // namespace
}  // namespace regent::bench

int main(int argc, char** argv) {
  regent::bench::BenchOptions options;
  int64_t reconcileTimeoutMs = options.reconcileTimeout.count();
  CLI::App app{
      "Reconciliation benchmark: a real ZooKeeper server, three regent-master processes and real "
      "regent-worker processes; jobs of `sleep 600` subtasks run, then the leader is killed "
      "(case kill) or hands over (case handover) and the new leader's JobMasters adopt the "
      "running attempts. Prints per case the attempts adopted and restarted and each job's time "
      "from the grant to its \"job reconciled\" line. Exits non-zero if an attempt was not "
      "adopted or one was restarted; never asserts timings. See docs/benchmarks.md."};
  app.add_option("--jobs", options.jobs,
                 "running jobs, or a growing list (250,500): each step adds jobs on the same "
                 "cluster and measures every case again")
      ->delimiter(',')
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--parallelism", options.parallelism, "subtasks per job")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  app.add_option("--workers", options.workers, "regent-worker processes")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--slots", options.slots, "slots per worker (worker.slots)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--case", options.cases, "kill, handover, or both in the order given")
      ->delimiter(',')
      ->check(CLI::IsMember({"kill", "handover"}))
      ->capture_default_str();
  app.add_option("--reconcile-timeout-ms", reconcileTimeoutMs,
                 "how long after its grant the new leader may take to log every \"job "
                 "reconciled\" before the run fails")
      ->check(CLI::Range(int64_t{1000}, int64_t{3600000}))
      ->capture_default_str();
  app.add_option("--set", options.masterSets, "extra key=value for every master (repeatable)");
  app.add_option("--worker-set", options.workerSets,
                 "extra key=value for every worker (repeatable)");
  app.add_option("--bin-dir", options.binDir,
                 "where regent-master, regent-worker, regentctl and regent-task-shim are")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  options.reconcileTimeout = regent::Duration(reconcileTimeoutMs);
  if (!std::is_sorted(options.jobs.begin(), options.jobs.end())) {
    std::fprintf(stderr, "bench_reconcile: --jobs must not decrease (each step adds jobs)\n");
    return 2;
  }
  const int64_t attempts = int64_t{options.jobs.back()} * options.parallelism;
  if (attempts > int64_t{options.workers} * options.slots) {
    std::fprintf(stderr,
                 "bench_reconcile: --jobs %d x --parallelism %d = %lld attempts do not fit in "
                 "--workers %d x --slots %d\n",
                 options.jobs.back(), options.parallelism, static_cast<long long>(attempts),
                 options.workers, options.slots);
    return 2;
  }
  return regent::bench::run(options);
}

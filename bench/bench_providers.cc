// The providers benchmark (scripts/bench.sh providers): workers started on demand by the process
// provider (resourcemanager.provider: process), one regent-master over a real ZooKeeper server
// and no worker started by hand. Two cases:
//   first-running  --runs times: submit a one-subtask job while no worker runs, and time submit
//                  -> worker requested -> worker started -> worker registered -> the attempt
//                  RUNNING; then wait until the idle worker was released (each run starts from
//                  no worker).
//   scale          one job of --workers subtasks on one-slot workers (so --workers workers):
//                  submit -> every worker registered, and -> every attempt RUNNING; then the job
//                  is cancelled and the time until every worker was released is printed.
// Submit times are taken with monotonicMicros() just before regentctl starts (its own start-up
// is included); every other time is the master's event line (mono_us, the same CLOCK_MONOTONIC).
// docs/benchmarks.md explains each number. Prints numbers; never asserts timings.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "common/event_line.h"
#include "common/result.h"
#include "common/time.h"
#include "tests/fixtures/process_harness.h"
#include "tests/fixtures/started_workers.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/fixtures/zookeeper_server.h"

namespace regent::bench {
namespace {

namespace fs = std::filesystem;
using testing::ProcessHarness;
using testing::ProcessOptions;
using testing::TempDir;
using testing::ZooKeeperServer;
using testing::ZooKeeperServerOptions;

constexpr Duration kBound{120000};  // Exceeding it means something failed, not that it was slow.
constexpr Duration kPoll{5};

struct BenchOptions {
  int runs = 5;
  int workers = 50;
  std::string binDir = thisExecutableDir();
};

// One event line of the master: its name and fields.
struct Line {
  std::string name;
  EventFields fields;
  int64_t monoUs = 0;
};

class ProvidersBench final {
 public:
  ProvidersBench(const BenchOptions& options, std::string quorum, std::string dir)
      : options_(options), quorum_(std::move(quorum)), dir_(std::move(dir)) {}

  ~ProvidersBench() {
    // The started workers run in sessions of their own: stop what is left.
    testing::killStartedWorkers(dir_ + "/workers");
  }

  Status run() {
    if (Status started = startMaster(); !started.ok()) return started;
    std::printf("# first RUNNING with no worker running (one-subtask job, %d runs)\n",
                options_.runs);
    std::vector<double> requested, started, registered, running;
    for (int run = 0; run < options_.runs; ++run) {
      auto times = firstRunning(run);
      if (!times.ok()) return times.error();
      const auto& t = times.value();
      std::printf("run=%d requested_ms=%s started_ms=%s registered_ms=%s running_ms=%s\n", run,
                  formatFixed(t[0], 1).c_str(), formatFixed(t[1], 1).c_str(),
                  formatFixed(t[2], 1).c_str(), formatFixed(t[3], 1).c_str());
      requested.push_back(t[0]);
      started.push_back(t[1]);
      registered.push_back(t[2]);
      running.push_back(t[3]);
    }
    std::printf("submit_to_worker_requested_ms %s\n", describe(summarize(requested), 1).c_str());
    std::printf("submit_to_worker_started_ms %s\n", describe(summarize(started), 1).c_str());
    std::printf("submit_to_worker_registered_ms %s\n", describe(summarize(registered), 1).c_str());
    std::printf("submit_to_first_running_ms %s\n", describe(summarize(running), 1).c_str());
    std::fflush(stdout);
    return scale();
  }

 private:
  Status startMaster() {
    const std::string config = dir_ + "/master.yaml";
    std::ofstream(config) << "worker.slots: 1\nworker.slot-cpu: 0.1\nworker.slot-memory: 64MiB\n"
                             "cluster.registration.initial-timeout: 20ms\n";
    std::vector<std::string> argv =
        withSets(options_.binDir + "/regent-master",
                 {"ha.zookeeper.quorum=" + quorum_, "cluster-id=bench", "rpc.bind=127.0.0.1:0",
                  "http.bind=127.0.0.1:0", "rpc.advertised-address=", "log.level=info",
                  "resourcemanager.provider=process",
                  "resourcemanager.process.data-root=" + dir_ + "/workers",
                  "resourcemanager.workers.max=" + std::to_string(options_.workers),
                  "resourcemanager.workers.idle-timeout=1s", "heartbeat.interval=500ms",
                  "heartbeat.timeout=3s"});
    argv.insert(argv.begin() + 1, {"--config", config});
    masterLog_ = dir_ + "/master.log";
    auto master = ProcessHarness::start(ProcessOptions{.argv = argv, .outputPath = masterLog_});
    if (!master.ok()) return master.error();
    master_ = std::move(master).value();
    auto serving = master_->waitForLine(std::regex("leader serving "), kBound);
    if (!serving.ok()) return Error::fatal("the master did not serve: " + serving.error().message);
    tail_ = std::make_unique<LogTail>(masterLog_);
    return {};
  }

  // Reads the master's new event lines.
  void readLines() {
    for (const std::string& text : tail_->next()) {
      for (const char* name : {"worker requested", "worker started", "worker registered",
                               "attempt state", "worker released"}) {
        // The event itself, not the provider's line that ends with the same words.
        if (text.find(std::string("] ") + name + " ") == std::string::npos) continue;
        if (auto fields = parseEventLine(text, name)) {
          lines_.push_back(Line{name, *fields, fields->getInt("mono_us").value_or(0)});
          break;
        }
      }
    }
  }

  // The lines named `name` logged after `sinceUs` for which `match` holds.
  std::vector<const Line*> linesAfter(const std::string& name, int64_t sinceUs,
                                      const std::function<bool(const Line&)>& match = nullptr) {
    std::vector<const Line*> found;
    for (const Line& line : lines_) {
      if (line.name == name && line.monoUs >= sinceUs && (!match || match(line))) {
        found.push_back(&line);
      }
    }
    return found;
  }

  // Polls the master's lines until `count` lines named `name` after `sinceUs` match.
  Result<std::vector<const Line*>> waitFor(const std::string& name, size_t count, int64_t sinceUs,
                                           const std::function<bool(const Line&)>& match = nullptr) {
    const bool done = testing::waitUntil(
        [&] {
          readLines();
          return linesAfter(name, sinceUs, match).size() >= count;
        },
        kBound, kPoll);
    if (!done) {
      return Error::fatal("the master logged " +
                          std::to_string(linesAfter(name, sinceUs, match).size()) + " \"" + name +
                          "\" lines, not " + std::to_string(count) + ", within the bound");
    }
    return linesAfter(name, sinceUs, match);
  }

  Result<std::string> submit(const std::string& name, int parallelism, const std::string& command) {
    const std::string file = dir_ + "/" + name + ".yaml";
    std::ofstream(file) << "name: " << name << "\nvertices:\n  - name: v\n    parallelism: "
                        << parallelism << "\n    command:\n      argv: [/bin/sh, -c, '" << command
                        << "']\n    resources: {cpu: 0.1, memory: 32MiB}\n";
    return ctl({"jobs", "submit", file});
  }

  Result<std::string> ctl(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {options_.binDir + "/regentctl", "--zk", quorum_,
                                     "--cluster-id", "bench"};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string out = dir_ + "/ctl-" + std::to_string(++ctlRuns_) + ".out";
    auto process = ProcessHarness::start(ProcessOptions{.argv = argv, .outputPath = out});
    if (!process.ok()) return process.error();
    const auto exit = process.value()->waitForExit(kBound);
    std::ifstream in(out);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!exit || !exit->exited() || exit->exitCode != 0) {
      return Error::fatal("regentctl failed: " + text);
    }
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    return text;
  }

  // One run of first-running: ms from submit to requested, started, registered, RUNNING.
  Result<std::vector<double>> firstRunning(int run) {
    const int64_t t0 = monotonicMicros();
    auto job = submit("first-" + std::to_string(run), 1, "sleep 0.2");
    if (!job.ok()) return job.error();
    const std::string id = job.value();
    std::vector<double> times;
    auto requested = waitFor("worker requested", 1, t0);
    if (!requested.ok()) return requested.error();
    times.push_back(ms(requested.value().front()->monoUs - t0));
    const std::string worker = requested.value().front()->fields.get("worker").value_or("");
    auto sameWorker = [worker](const Line& line) { return line.fields.get("worker") == worker; };
    auto started = waitFor("worker started", 1, t0, sameWorker);
    if (!started.ok()) return started.error();
    times.push_back(ms(started.value().front()->monoUs - t0));
    auto registered = waitFor("worker registered", 1, t0, [worker](const Line& line) {
      return line.fields.get("provider_id") == "process:" + worker;
    });
    if (!registered.ok()) return registered.error();
    times.push_back(ms(registered.value().front()->monoUs - t0));
    auto running = waitFor("attempt state", 1, t0, [&id](const Line& line) {
      return line.fields.get("job") == id && line.fields.get("state") == "RUNNING";
    });
    if (!running.ok()) return running.error();
    times.push_back(ms(running.value().front()->monoUs - t0));
    // The worker idles out: the next run starts from none again.
    auto released = waitFor("worker released", 1, t0, sameWorker);
    if (!released.ok()) return released.error();
    return times;
  }

  Status scale() {
    const int n = options_.workers;
    std::printf("# %d one-slot workers started for one job of %d subtasks\n", n, n);
    const int64_t t0 = monotonicMicros();
    auto job = submit("scale", n, "sleep 600");
    if (!job.ok()) return job.error();
    const std::string id = job.value();
    auto registered = waitFor("worker registered", static_cast<size_t>(n), t0);
    if (!registered.ok()) return registered.error();
    auto running = waitFor("attempt state", static_cast<size_t>(n), t0, [&id](const Line& line) {
      return line.fields.get("job") == id && line.fields.get("state") == "RUNNING";
    });
    if (!running.ok()) return running.error();
    const double allRegistered = ms(registered.value().back()->monoUs - t0);
    const double firstRegistered = ms(registered.value().front()->monoUs - t0);
    const double allRunning = ms(running.value().back()->monoUs - t0);
    std::printf("workers=%d submit_to_first_registered_ms=%s submit_to_all_registered_ms=%s "
                "submit_to_all_running_ms=%s\n",
                n, formatFixed(firstRegistered, 1).c_str(), formatFixed(allRegistered, 1).c_str(),
                formatFixed(allRunning, 1).c_str());
    std::fflush(stdout);
    const int64_t t1 = monotonicMicros();
    if (auto cancelled = ctl({"jobs", "cancel", id}); !cancelled.ok()) return cancelled.error();
    auto released = waitFor("worker released", static_cast<size_t>(n), t1);
    if (!released.ok()) return released.error();
    std::printf("cancel_to_all_released_ms=%s (resourcemanager.workers.idle-timeout=1s)\n",
                formatFixed(ms(released.value().back()->monoUs - t1), 1).c_str());
    std::printf("# load average %s\n", loadAverage().c_str());
    std::fflush(stdout);
    return {};
  }

  const BenchOptions& options_;
  const std::string quorum_;
  const std::string dir_;
  std::string masterLog_;
  std::unique_ptr<ProcessHarness> master_;
  std::unique_ptr<LogTail> tail_;
  std::vector<Line> lines_;
  int ctlRuns_ = 0;
};

int run(const BenchOptions& options) {
  auto fail = [](const std::string& what) { return reportFailure("bench_providers", what); };
  if (Status present =
          requireBinaries(options.binDir, {"regent-master", "regent-worker", "regentctl"});
      !present.ok()) {
    return fail(present.error().message);
  }
  spdlog::set_level(spdlog::level::warn);
  auto server = ZooKeeperServer::start(ZooKeeperServerOptions{.tickTime = Duration(500)});
  if (!server.ok()) return fail("ZooKeeper did not start: " + server.error().message);
  TempDir dir("regent-bench-providers");
  // Started workers run their tasks as an unprivileged user in directories under this one.
  ::chmod(dir.path().c_str(), 0711);
  ProvidersBench bench(options, server.value()->connectString(), dir.path());
  if (Status done = bench.run(); !done.ok()) return fail(done.error().message);
  return 0;
}

}  // namespace
}  // namespace regent::bench

int main(int argc, char** argv) {
  regent::bench::BenchOptions options;
  CLI::App app{
      "Providers benchmark: one regent-master with the process provider over a real ZooKeeper "
      "server and no worker started by hand; times submit -> first RUNNING from no worker, and "
      "how long N workers started on demand take to register. Prints result lines; never "
      "asserts timings. See docs/benchmarks.md."};
  app.add_option("--runs", options.runs, "runs of the first-RUNNING case")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--workers", options.workers, "workers started for the scale case")
      ->check(CLI::Range(1, 500))
      ->capture_default_str();
  app.add_option("--bin-dir", options.binDir, "where regent-master, regent-worker, regentctl are")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return regent::bench::run(options);
}

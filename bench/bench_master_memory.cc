// The master memory benchmark (scripts/bench.sh master_memory): the resident memory of a
// regent-master that leads with N stored jobs (standalone, RocksDB store) once it is SERVING,
// next to the same master with none. Each job is a JobGraph of about 200 bytes, one vertex of
// --subtasks subtasks; no worker registers, so every job waits for slots, as a queued job does.
// Prints its numbers; never asserts them.
#include <kj/debug.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "common/event_loop.h"
#include "common/ids.h"
#include "common/time.h"
#include "conf/config.h"
#include "jobgraph/job_graph_spec.h"
#include "rpc/schema/jobs.capnp.h"
#include "store/store_services.h"
#include "tests/fixtures/process_harness.h"
#include "tests/fixtures/temp_dir_test_util.h"

namespace regent::bench {
namespace {

// Generous bounds: exceeding one means something failed, not that something was slow.
constexpr Duration kStartTimeout{300000};
constexpr Duration kStopGrace{30000};
constexpr size_t kInFlight = 64;

struct BenchOptions {
  size_t jobs = 10000;
  uint32_t subtasks = 1;  // The parallelism of each job's one vertex.
  std::string master;     // The regent-master binary.
};

// Writes `count` JobGraphs of about 200 bytes into a RocksDB store at `path`, as a leader of
// epoch 1 would.
void fillStore(const std::string& path, size_t count, uint32_t subtasks) {
  EventLoop loop;
  ConfigSources sources;
  sources.set = {"ha.mode=standalone", "store.rocksdb.path=" + path};
  auto config = loadConfig(sources);
  KJ_REQUIRE(config.ok(), config.error().message);
  auto services = store::StoreServices::create(loop, config.value(), nullptr);
  KJ_REQUIRE(services.ok(), services.error().message);
  {
    auto stores = loop.run(services.value()->openTerm(store::StoreTerm{1, ""}));
    KJ_REQUIRE(stores.ok(), stores.error().message);
    size_t written = 0;
    while (written < count) {
      kj::Vector<kj::Promise<store::StoreResult<void>>> batch;
      std::vector<kj::Own<capnp::MallocMessageBuilder>> graphs;
      for (size_t i = 0; i < kInFlight && written < count; ++i, ++written) {
        auto parsed = jobgraph::parseJobGraphSpec(
            "job_id: " + JobId::random().toHex() + "\nname: bench-job-" + std::to_string(written) +
                "\nvertices:\n  - name: work\n    parallelism: " + std::to_string(subtasks) +
                "\n    command:\n"
                "      argv: [/bin/true]\n",
            jobgraph::JobGraphSpecFormat::kYaml);
        KJ_REQUIRE(parsed.ok(), parsed.error().message);
        graphs.push_back(kj::mv(parsed).value());
        batch.add(stores.value()->jobGraphs().put(graphs.back()->getRoot<wire::JobGraph>()));
      }
      for (auto& result : loop.run(kj::joinPromises(batch.releaseAsArray()))) {
        KJ_REQUIRE(result.ok(), result.error().message);
      }
    }
  }
  loop.run(services.value()->close());
}

// What a serving master holds, in KiB: all of it, and its anonymous part (heap and stacks; the
// rest is file pages, mostly the code of the libraries as far as it ran).
struct Resident {
  uint64_t totalKb = 0;  // VmRSS.
  uint64_t anonKb = 0;   // RssAnon.
};

// Starts a standalone master on `dir`'s store, waits until it serves, and returns what it holds.
Resident servingMaster(const BenchOptions& options, const std::string& dir) {
  const std::vector<std::string> argv =
      withSets(options.master, {"ha.mode=standalone", "store.rocksdb.path=" + dir + "/store",
                                "ha.standalone.epoch-file=" + dir + "/epoch",
                                "rpc.bind=127.0.0.1:0", "http.bind=127.0.0.1:0"});
  auto master = testing::ProcessHarness::start(
      testing::ProcessOptions{.argv = argv, .outputPath = dir + "/master.log"});
  KJ_REQUIRE(master.ok(), master.error().message);
  auto serving = master.value()->waitForLine(std::regex("leader serving"), kStartTimeout);
  KJ_REQUIRE(serving.ok(), serving.error().message, master.value()->outputTail());
  const pid_t pid = master.value()->pid();
  const Resident resident{static_cast<uint64_t>(procStatusKb(pid, "VmRSS").value_or(0)),
                          static_cast<uint64_t>(procStatusKb(pid, "RssAnon").value_or(0))};
  auto stopped = master.value()->stop(kStopGrace);
  KJ_REQUIRE(stopped.ok(), stopped.error().message);
  return resident;
}

// (full - idle) KiB per job, in bytes.
double perJob(uint64_t fullKb, uint64_t idleKb, size_t jobs) {
  return jobs == 0 ? 0.0 : double(fullKb > idleKb ? fullKb - idleKb : 0) * 1024 / double(jobs);
}

int run(const BenchOptions& options) {
  testing::TempDir idle("regent-bench-memory-idle");
  const Resident idleMaster = servingMaster(options, idle.path());

  testing::TempDir full("regent-bench-memory");
  fillStore(full.path() + "/store", options.jobs, options.subtasks);
  const Resident fullMaster = servingMaster(options, full.path());

  std::printf("# jobs of about 200 bytes waiting for slots (no worker), standalone master on "
              "RocksDB, VmRSS once SERVING; anon_bytes_per_job counts RssAnon only (the heap, "
              "without the code pages recovery runs)\n");
  std::printf("master_memory jobs=%zu subtasks=%u master_rss_kb=%llu master_idle_rss_kb=%llu "
              "bytes_per_job=%.0f anon_bytes_per_job=%.0f\n",
              options.jobs, options.subtasks, static_cast<unsigned long long>(fullMaster.totalKb),
              static_cast<unsigned long long>(idleMaster.totalKb),
              perJob(fullMaster.totalKb, idleMaster.totalKb, options.jobs),
              perJob(fullMaster.anonKb, idleMaster.anonKb, options.jobs));
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace regent::bench

int main(int argc, char** argv) {
  regent::bench::BenchOptions options;
  options.master = regent::bench::thisExecutableDir() + "/regent-master";
  CLI::App app("Master memory benchmark: VmRSS of a serving regent-master with N stored jobs.");
  app.add_option("--jobs", options.jobs, "stored jobs (default 10000)");
  app.add_option("--subtasks", options.subtasks, "subtasks of each job (default 1)")
      ->check(CLI::PositiveNumber);
  app.add_option("--master", options.master, "the regent-master binary to measure");
  CLI11_PARSE(app, argc, argv);
  try {
    return regent::bench::run(options);
  } catch (const kj::Exception& e) {
    std::fprintf(stderr, "bench_master_memory: %s\n", e.getDescription().cStr());
    return 1;
  }
}

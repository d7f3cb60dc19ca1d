// The spawn benchmark (scripts/bench.sh spawn; docs/benchmarks.md): what starting a child costs
// the process that starts it, the way a worker starts the shim of every attempt
// (ChildProcess::spawn, common/event_loop.h), by how much memory that process has in use. Each
// case holds a parent of --parent-mb MiB (allocated and touched), then starts /bin/true
// --spawns times one after another, both ways ChildProcess has: clone (CLONE_VM | CLONE_VFORK,
// the default) and fork (libuv's, the fallback). Prints per case the loop thread's time inside
// spawn() (median and 99th percentile) and the children started and reaped per second; asserts
// nothing.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "common/event_loop.h"

namespace regent::bench {
namespace {

void runCase(EventLoop& loop, size_t parentMb, bool fork, int spawns) {
  ChildProcess::useForkForTesting(fork);
  std::vector<double> callMicros;
  callMicros.reserve(static_cast<size_t>(spawns));
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < spawns; ++i) {
    const auto before = std::chrono::steady_clock::now();
    auto child = ChildProcess::spawn(loop, {.argv = {"/bin/true"}, .captureOutput = false});
    const auto after = std::chrono::steady_clock::now();
    if (!child.ok()) {
      std::fprintf(stderr, "spawn failed: %s\n", child.error().message.c_str());
      std::exit(1);
    }
    callMicros.push_back(std::chrono::duration<double, std::micro>(after - before).count());
    loop.run(child.value()->onExit());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ChildProcess::useForkForTesting(false);
  std::printf("spawn parent_mb=%zu way=%s spawn_call_p50_us=%s p99=%s spawns_per_s=%s\n",
              parentMb, fork ? "fork" : "clone", formatFixed(percentile(callMicros, 50), 1).c_str(),
              formatFixed(percentile(callMicros, 99), 1).c_str(),
              formatFixed(spawns / seconds, 1).c_str());
}

}  // namespace
}  // namespace regent::bench

int main(int argc, char** argv) {
  CLI::App app("spawn benchmark");
  int spawns = 500;
  std::vector<size_t> parentMb{16, 256};
  app.add_option("--spawns", spawns, "children started per case")->check(CLI::PositiveNumber);
  app.add_option("--parent-mb", parentMb, "the parent's memory in use, MiB, per case")
      ->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  regent::bench::note("load average " + regent::bench::loadAverage());
  regent::EventLoop loop;
  std::vector<std::unique_ptr<char[]>> held;
  size_t holding = 0;
  for (size_t mb : parentMb) {
    // Grown to the case's size and touched, so every page is mapped in the page tables.
    while (holding < mb) {
      held.push_back(std::make_unique<char[]>(1 << 20));
      std::memset(held.back().get(), 1, 1 << 20);
      ++holding;
    }
    regent::bench::runCase(loop, mb, false, spawns);
    regent::bench::runCase(loop, mb, true, spawns);
  }
  return 0;
}

// What every benchmark prints its numbers with: one percentile definition (the median is its
// 50th), a min/median/max summary, fixed-decimal formatting, "# " notes, /proc readings of a
// process (its settled resident set, its CPU time, its time waiting for a CPU) and of the
// machine's load average, and the new lines of a growing log file; and what every benchmark
// that starts regent processes shares: its binaries' check, their `--set` command lines, the
// worker settings, the wait for a worker's registration and the failure line.
// Header-only; benchmarks print numbers and never assert timings.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/time.h"
#include "tests/fixtures/process_harness.h"
#include "tests/fixtures/wait_test_util.h"

namespace regent::bench {

// The `p`-th percentile (0..100) of `samples`, linearly interpolated between the two nearest
// ranks (so the 50th of an even count is the mean of the middle two); 0 for no samples.
inline double percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(samples.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(rank));
  const size_t above = std::min(below + 1, samples.size() - 1);
  const double weight = rank - static_cast<double>(below);
  return samples[below] + (samples[above] - samples[below]) * weight;
}

inline double median(std::vector<double> samples) { return percentile(std::move(samples), 50); }

struct Summary {
  double min = 0;
  double median = 0;
  double max = 0;
  size_t n = 0;
};

// All zero for no samples.
inline Summary summarize(const std::vector<double>& samples) {
  Summary s;
  s.n = samples.size();
  if (samples.empty()) return s;
  s.min = *std::min_element(samples.begin(), samples.end());
  s.max = *std::max_element(samples.begin(), samples.end());
  s.median = median(samples);
  return s;
}

// `value` with `decimals` digits after the point.
inline std::string formatFixed(double value, int decimals) {
  char text[48];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

// "min=1.00 median=2.00 max=3.00 n=3".
inline std::string describe(const Summary& s, int decimals = 2) {
  return "min=" + formatFixed(s.min, decimals) + " median=" + formatFixed(s.median, decimals) +
         " max=" + formatFixed(s.max, decimals) + " n=" + std::to_string(s.n);
}

// A comment line of the benchmark's output ("# text"), flushed at once.
inline void note(const std::string& text) {
  std::printf("# %s\n", text.c_str());
  std::fflush(stdout);
}

// The number after "<key>:" in /proc/<pid>/<file> ("status": VmRSS, VmHWM in kB, ...; "io":
// rchar, the bytes the process read from files and sockets alike, wchar, ...); nullopt if the
// process or the key is gone.
inline std::optional<int64_t> procValue(pid_t pid, const std::string& file,
                                        const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/" + file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1));
  }
  return std::nullopt;
}

// A "<key>: <n> kB" value of /proc/<pid>/status (VmRSS, VmHWM, ...).
inline std::optional<int64_t> procStatusKb(pid_t pid, const std::string& key) {
  return procValue(pid, "status", key);
}

// The VmRSS of a process once it has stopped changing: `kb` is the last value read, `settled`
// whether it held for 10 samples 100 ms apart before the 15 s bound.
struct SettledRss {
  int64_t kb = 0;
  bool settled = false;
};

// Samples /proc/<pid>/status until VmRSS settles (see SettledRss); nullopt if it could not be
// read at all (the process is gone).
inline std::optional<SettledRss> settledRssKb(pid_t pid) {
  std::vector<int64_t> samples;
  const bool settled = testing::waitUntil(
      [&] {
        auto rss = procStatusKb(pid, "VmRSS");
        if (!rss) return false;
        samples.push_back(*rss);
        constexpr size_t kStable = 10;  // 10 samples 100 ms apart.
        return samples.size() >= kStable &&
               std::all_of(samples.end() - kStable, samples.end(),
                           [&](int64_t v) { return v == samples.back(); });
      },
      Duration(15000), Duration(100));
  if (samples.empty()) return std::nullopt;
  return SettledRss{.kb = samples.back(), .settled = settled};
}

// The new complete lines of a growing log file, read from where the last call stopped.
// Not thread-safe: one reader at a time.
class LogTail final {
 public:
  explicit LogTail(std::string path) : path_(std::move(path)) {}

  std::vector<std::string> next() {
    std::vector<std::string> lines;
    std::ifstream in(path_, std::ios::binary);
    if (!in) return lines;
    in.seekg(offset_);
    std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t start = 0;
    for (size_t end; (end = chunk.find('\n', start)) != std::string::npos; start = end + 1) {
      lines.push_back(chunk.substr(start, end - start));
    }
    offset_ += static_cast<std::streamoff>(start);
    return lines;
  }

 private:
  std::string path_;
  std::streamoff offset_ = 0;
};

// CPU time (user + system) `pid` has used so far, in ms, from /proc/<pid>/stat; nullopt if gone.
inline std::optional<double> procCpuMs(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The command name (field 2) is in parentheses and may hold spaces: count from after it.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  long long utime = 0, stime = 0;
  for (int number = 3; number <= 15 && fields >> field; ++number) {
    if (number == 14) utime = std::stoll(field);
    if (number == 15) stime = std::stoll(field);
  }
  return static_cast<double>(utime + stime) * 1000.0 / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// Time a process's threads ran, and waited runnable for a CPU (what a machine shared with other
// work costs in latency), summed over its threads from /proc/<pid>/task/*/schedstat, in ms.
// Threads that ended meanwhile are not counted. nullopt if the process is gone.
struct SchedTimes {
  double cpuMs = 0;
  double waitMs = 0;
};

inline std::optional<SchedTimes> procSchedTimes(pid_t pid) {
  std::error_code error;
  std::filesystem::directory_iterator tasks("/proc/" + std::to_string(pid) + "/task", error);
  if (error) return std::nullopt;
  SchedTimes times;
  for (const auto& task : tasks) {
    std::ifstream in(task.path() / "schedstat");
    uint64_t cpuNs = 0, waitNs = 0;
    if (in >> cpuNs >> waitNs) {
      times.cpuMs += static_cast<double>(cpuNs) / 1e6;
      times.waitMs += static_cast<double>(waitNs) / 1e6;
    }
  }
  return times;
}

// The machine's load average over the last minute, as /proc/loadavg prints it ("?" unreadable).
inline std::string loadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one;
  in >> one;
  return in ? one : "?";
}

// The command line of process `pid` as /proc/<pid>/cmdline holds it (arguments NUL-separated);
// empty if the process is gone.
inline std::string procCommandLine(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The directory of the running benchmark binary (where the build puts regent-master too), or
// "." if /proc/self/exe cannot be read.
inline std::string thisExecutableDir() {
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::string(".") : self.parent_path().string();
}

// Microseconds as fractional milliseconds.
inline double ms(int64_t us) { return static_cast<double>(us) / 1000.0; }

// Ok if each of `names` is an executable file in `binDir`; else an error naming the first one
// that is not ("<binDir>/<name> is missing; build it first").
inline Status requireBinaries(const std::string& binDir, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const std::string binary = binDir + "/" + name;
    if (::access(binary.c_str(), X_OK) != 0) {
      return Error::fatal(binary + " is missing; build it first");
    }
  }
  return {};
}

// The command line of `binary` with `--set <key=value>` for each of `sets`, in order.
inline std::vector<std::string> withSets(std::string binary, const std::vector<std::string>& sets) {
  std::vector<std::string> argv = {std::move(binary)};
  for (const auto& set : sets) {
    argv.push_back("--set");
    argv.push_back(set);
  }
  return argv;
}

// Creates `<dir>/worker-<index>`, the data directory of worker `index`, and returns its path. It
// is mode 0755: run as root, a worker runs its tasks as worker.task-user (nobody by default) in
// directories under it.
inline std::string makeWorkerDataDir(const std::string& dir, int index) {
  const std::string data = dir + "/worker-" + std::to_string(index);
  std::filesystem::create_directories(data);
  ::chmod(data.c_str(), 0755);
  return data;
}

// The settings of a benchmark's regent-worker: ZooKeeper `quorum`, `clusterId`, its data
// directory `dataDir`, `slots` slots, an HTTP port of its own, log.level=info. Callers append
// their own (later settings of the same key win).
inline std::vector<std::string> workerSettings(const std::string& quorum,
                                               const std::string& clusterId,
                                               const std::string& dataDir, int slots) {
  return {
      "ha.zookeeper.quorum=" + quorum,
      "cluster-id=" + clusterId,
      "worker.data-dir=" + dataDir,
      "worker.http.bind=127.0.0.1:0",
      "worker.slots=" + std::to_string(slots),
      "log.level=info",
  };
}

// Waits until worker number `index` (as the error names it) logs that it registered with the
// leader; fails after `timeout`.
inline Status waitForWorkerRegistered(testing::ProcessHarness& worker, size_t index,
                                      Duration timeout) {
  auto registered = worker.waitForLine(std::regex("worker registered "), timeout);
  if (!registered.ok()) {
    return Error::fatal("regent-worker " + std::to_string(index) +
                        " did not register: " + registered.error().message);
  }
  return {};
}

// Prints "<bench>: <what>" to stderr after flushing the numbers printed so far; returns 1, the
// exit status of a failed run.
inline int reportFailure(const char* bench, const std::string& what) {
  std::fflush(stdout);
  std::fprintf(stderr, "%s: %s\n", bench, what.c_str());
  return 1;
}

}  // namespace regent::bench

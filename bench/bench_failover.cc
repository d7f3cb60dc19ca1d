// The failover benchmark (scripts/bench.sh failover): how long leadership is vacant when the
// leading regent-master hands over (SIGTERM) or dies (SIGKILL), the same crash measured on a bare
// ZooKeeper election recipe, and an idle standby's memory. docs/benchmarks.md explains each number.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "common/event_line.h"
#include "common/result.h"
#include "common/time.h"
#include "tests/fixtures/process_harness.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/fixtures/wait_test_util.h"
#include "tests/fixtures/zookeeper_server.h"

namespace regent::bench {
namespace {

using testing::ProcessExit;
using testing::ProcessHarness;
using testing::ProcessOptions;
using testing::TempDir;
using testing::waitUntil;
using testing::ZooKeeperServer;
using testing::ZooKeeperServerOptions;

// Generous bounds: exceeding one means something failed, not that something was slow.
constexpr Duration kStartTimeout{30000};  // A started contender prints its "contending" line.
constexpr Duration kGrantTimeout{30000};  // Someone is granted (crash: session expiry first).
constexpr Duration kLineTimeout{15000};   // A line that follows at once (handover, serving).
constexpr Duration kExitTimeout{15000};   // A terminated or killed process is gone.
constexpr Duration kPollInterval{5};      // Timestamps come from the logs, not from polling.
// The fast crash case's session timeout: long enough that a grant before it is fast failover's.
constexpr Duration kFastSessionTimeout{6000};

struct BenchOptions {
  int trials = 10;
  Duration killJitter{2000};
  uint32_t seed = 0;
  Duration sessionTimeout{2000};
  std::string logLevel = "info";
  std::vector<std::string> masterSets;  // Extra --set key=value for every master.
  std::string binDir = thisExecutableDir();  // --bin-dir; by default next to this binary.
};

// The whole-number field `key` of the event line `event` in `line`, if both are there.
std::optional<int64_t> eventField(const std::string& line, std::string_view event,
                                  std::string_view key) {
  auto fields = parseEventLine(line, event);
  if (!fields) return std::nullopt;
  return fields->getInt(key);
}

// A grant as its contender logged it.
struct Grant {
  int64_t monoUs = 0;
  int64_t wallMs = 0;
  int64_t epoch = 0;  // 0 for the baseline, which has no epochs.
};

// What one kind of contender prints (regent-master's event lines, or the baseline's).
// Events are read with parseEventLine (common/event_line.h); the regexes are what the process
// harness waits for.
struct ContenderKind {
  std::regex contending;
  std::string granted;                // Event with mono_us, wall_ms and (masters) epoch.
  std::optional<std::string> revoked;
  // The event a leader logs when SIGTERM starts its hand-over, with mono_us. Without one (the
  // baseline just closes its session), a graceful trial starts when the signal is sent.
  std::optional<std::string> handoverRequested;
};

const ContenderKind& masterKind() {
  static const ContenderKind kind{std::regex("contending master_id=\\S+ latch="),
                                  "leadership granted", "leadership revoked", "handover requested"};
  return kind;
}

const ContenderKind& baselineKind() {
  static const ContenderKind kind{std::regex("^contending node="), "granted", std::nullopt,
                                  std::nullopt};
  return kind;
}

// One contender slot: a process that can be stopped and started again (a new run appends to the
// same log, and only the current run's lines count).
class Contender final {
 public:
  Contender(std::string label, std::vector<std::string> argv, std::string logPath,
            const ContenderKind& kind)
      : label_(std::move(label)),
        argv_(std::move(argv)),
        logPath_(std::move(logPath)),
        kind_(kind) {}

  // Starts a new run and waits until it contends.
  Status start() {
    auto process = ProcessHarness::start(
        ProcessOptions{.argv = argv_, .outputPath = logPath_, .appendOutput = runs_ > 0});
    if (!process.ok()) return Error::fatal(label_ + ": " + process.error().message);
    process_ = std::move(process).value();
    ++runs_;
    startedAt_ = std::chrono::steady_clock::now();
    auto line = process_->waitForLine(kind_.contending, kStartTimeout);
    if (!line.ok()) {
      return Error::fatal(label_ + " did not start contending: " + line.error().message);
    }
    return {};
  }

  const std::string& label() const { return label_; }
  const ContenderKind& kind() const { return kind_; }
  ProcessHarness& process() { return *process_; }
  bool running() { return process_ && process_->running(); }
  MonoTime startedAt() const { return startedAt_; }

  std::vector<Grant> grants() const {
    std::vector<Grant> result;
    for (const std::string& line : lines()) {
      auto granted = parseEventLine(line, kind_.granted);
      if (!granted || !granted->getInt("mono_us")) continue;
      result.push_back(Grant{*granted->getInt("mono_us"), granted->getInt("wall_ms").value_or(0),
                             granted->getInt("epoch").value_or(0)});
    }
    return result;
  }

  // True when the current run's last grant has not been followed by a revocation.
  bool holdsGrant() const {
    bool holds = false;
    for (const std::string& line : lines()) {
      if (parseEventLine(line, kind_.granted)) holds = true;
      if (kind_.revoked && parseEventLine(line, *kind_.revoked)) holds = false;
    }
    return holds;
  }

 private:
  // The current run's complete lines.
  std::vector<std::string> lines() const {
    std::vector<std::string> result;
    if (!process_) return result;
    const std::string text = process_->output();
    size_t start = 0;
    for (size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
      result.push_back(text.substr(start, end - start));
    }
    return result;
  }

  std::string label_;
  std::vector<std::string> argv_;
  std::string logPath_;
  const ContenderKind& kind_;
  std::unique_ptr<ProcessHarness> process_;
  int runs_ = 0;
  MonoTime startedAt_{};
};

using Group = std::vector<std::unique_ptr<Contender>>;

Status startAll(Group& group) {
  for (auto& contender : group) {
    if (Status started = contender->start(); !started.ok()) return started;
  }
  return {};
}

// Waits until exactly one running contender holds a grant and returns its index.
Result<size_t> waitForLeader(Group& group) {
  std::optional<size_t> leader;
  size_t holders = 0;
  waitUntil(
      [&] {
        leader.reset();
        holders = 0;
        for (size_t i = 0; i < group.size(); ++i) {
          if (group[i]->running() && group[i]->holdsGrant()) {
            leader = i;
            ++holders;
          }
        }
        return holders == 1;
      },
      kGrantTimeout, kPollInterval);
  if (holders == 1) return *leader;
  if (holders == 0) {
    return Error::fatal("no contender was granted within " + std::to_string(kGrantTimeout.count()) +
                        " ms");
  }
  return Error::fatal(std::to_string(holders) + " contenders hold a grant at once");
}

// Waits for a grant newer than `before` (grant counts per contender) at anyone but `except`.
Result<std::pair<size_t, Grant>> waitForNextGrant(Group& group, size_t except,
                                                  const std::vector<size_t>& before) {
  std::optional<std::pair<size_t, Grant>> next;
  waitUntil(
      [&] {
        for (size_t i = 0; i < group.size(); ++i) {
          if (i == except) continue;
          const auto grants = group[i]->grants();
          if (grants.size() > before[i]) {
            next = {i, grants[before[i]]};
            return true;
          }
        }
        return false;
      },
      kGrantTimeout, kPollInterval);
  if (!next) {
    return Error::fatal("no other contender was granted within " +
                        std::to_string(kGrantTimeout.count()) + " ms after " +
                        group[except]->label() + " left");
  }
  return *next;
}

// When the ZooKeeper server expired sessions (wall clock, ms), from the "Expiring session" lines
// of its log (the server is started with slf4j-simple printing ISO-8601 times with milliseconds).
std::vector<int64_t> sessionExpiries(const std::string& serverLog) {
  static const std::regex pattern(
      "^(\\d{4})-(\\d\\d)-(\\d\\d)T(\\d\\d):(\\d\\d):(\\d\\d)\\.(\\d{3})([+-])(\\d\\d)(\\d\\d) "
      ".*Expiring session 0x[0-9a-f]+");
  std::vector<int64_t> result;
  std::ifstream in(serverLog);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (!std::regex_search(line, m, pattern)) continue;
    auto number = [&](int group) { return std::stoi(m[group].str()); };
    std::tm utc{};
    utc.tm_year = number(1) - 1900;
    utc.tm_mon = number(2) - 1;
    utc.tm_mday = number(3);
    utc.tm_hour = number(4);
    utc.tm_min = number(5);
    utc.tm_sec = number(6);
    const int64_t offsetMin = (number(9) * 60 + number(10)) * (m[8].str() == "-" ? -1 : 1);
    result.push_back((static_cast<int64_t>(timegm(&utc)) - offsetMin * 60) * 1000 + number(7));
  }
  return result;
}

enum class Exit { kGraceful, kCrash };

// The contenders of one case and where to look for the server's session expiries.
struct TrialSet {
  std::string name;  // "graceful", "crash", "baseline graceful", "baseline crash".
  Exit how;
  Group& group;
  std::string serverLog;
  Duration killJitter;
  std::mt19937& random;
  // Crash only: whether the next grant waits for the dead leader's session (its expiry is then
  // looked up in the server's log); false for fast failover, which does not wait for it.
  bool waitsForSession = true;
};

struct TrialResult {
  double vacancyMs = 0;  // Leader gone (hand-over requested, or SIGKILL) -> next grant.
  // Crash only, when the server's log shows it: SIGKILL -> session expired -> next grant.
  std::optional<double> expiryMs, grantAfterExpiryMs;
  // Leader gone -> the benchmark saw the next leader's `leader serving` line (its polling's
  // clock: an upper bound, that line carries no mono_us).
  double servingSeenMs = 0;
};

// One trial: the leader leaves (SIGTERM or SIGKILL), the next grant is awaited, the leaver is
// started again so that three always contend.
Result<TrialResult> runTrial(const TrialSet& set, int trial) {
  Group& group = set.group;
  auto leaderIndex = waitForLeader(group);
  if (!leaderIndex.ok()) return leaderIndex.error();
  Contender& leader = *group[leaderIndex.value()];
  const auto leaderGrants = leader.grants();
  const int64_t oldEpoch = leaderGrants.empty() ? 0 : leaderGrants.back().epoch;
  std::vector<size_t> before;
  for (auto& contender : group) before.push_back(contender->grants().size());
  const size_t expiriesBefore = sessionExpiries(set.serverLog).size();

  int64_t leftAtUs = 0;
  int64_t leftAtWallMs = 0;
  std::string extra;
  if (set.how == Exit::kGraceful) {
    leftAtUs = monotonicMicros();
    if (Status sent = leader.process().terminate(); !sent.ok()) return sent.error();
    if (const auto& handover = leader.kind().handoverRequested) {
      auto requested = leader.process().waitForLine(std::regex(*handover + " "), kLineTimeout);
      if (!requested.ok()) {
        return Error::fatal(leader.label() + " logged no hand-over request after SIGTERM: " +
                            requested.error().message);
      }
      leftAtUs = eventField(requested.value(), *handover, "mono_us").value_or(0);
    }
  } else {
    // A crash's vacancy depends on where the SIGKILL falls between the leader's last ping and the
    // server's expiry ticks (tickTime); both repeat every 2 s here (3 pings of 2000/3 ms, 4
    // ticks of 500 ms). Trials follow each other at a steady pace, so without a random delay
    // every trial would hit about the same phase and the two cases could differ only by where
    // their pace happens to land. This delay waits for nothing.
    if (set.killJitter.count() > 0) {
      std::uniform_int_distribution<int64_t> delayMs(0, set.killJitter.count() - 1);
      std::this_thread::sleep_for(Duration(delayMs(set.random)));
    }
    leftAtWallMs = wallClockMillis();
    leftAtUs = monotonicMicros();
    if (Status sent = leader.process().kill(); !sent.ok()) return sent.error();
  }

  auto next = waitForNextGrant(group, leaderIndex.value(), before);
  if (!next.ok()) return next.error();
  const auto& [nextIndex, grant] = next.value();
  TrialResult result;
  result.vacancyMs = static_cast<double>(grant.monoUs - leftAtUs) / 1000.0;

  const std::optional<ProcessExit> exit = leader.process().waitForExit(kExitTimeout);
  if (!exit) return Error::fatal(leader.label() + " did not exit after its signal");
  if (set.how == Exit::kGraceful) {
    auto done = leader.process().waitForLine(
        std::regex("handover done "), Duration(0));
    if (done.ok()) {
      const int64_t doneUs = eventField(done.value(), "handover done", "mono_us").value_or(0);
      extra += ", hand-over transaction " +
               formatFixed(static_cast<double>(doneUs - leftAtUs) / 1000.0, 2) + " ms";
    }
    if (!exit->exited() || exit->exitCode != 0) extra += ", WARNING leaver " + exit->describe();
  } else if (set.waitsForSession) {
    // The expiry is logged before the server deletes the session's nodes, so it is there by now
    // unless the log lags; a short bounded wait covers that.
    std::vector<int64_t> expiries;
    waitUntil(
        [&] {
          expiries = sessionExpiries(set.serverLog);
          return expiries.size() > expiriesBefore;
        },
        Duration(2000), kPollInterval);
    if (expiries.size() > expiriesBefore) {
      const int64_t expiredAtMs = expiries[expiriesBefore];
      result.expiryMs = static_cast<double>(expiredAtMs - leftAtWallMs);
      result.grantAfterExpiryMs = static_cast<double>(grant.wallMs - expiredAtMs);
      extra += ", session expired after " + formatFixed(*result.expiryMs, 2) + " ms, granted " +
               formatFixed(*result.grantAfterExpiryMs, 2) + " ms later (wall clock, ms resolution)";
    }
  }
  if (grant.epoch != 0) {
    extra += ", epoch " + std::to_string(oldEpoch) + " -> " + std::to_string(grant.epoch);
    if (grant.epoch != oldEpoch + 1) extra += " (WARNING: not +1)";
    // Let the new leader finish its term's start before the next trial disturbs it.
    auto serving = group[nextIndex]->process().waitForLine(
        std::regex("leader serving epoch=" + std::to_string(grant.epoch) + " "), kLineTimeout);
    if (!serving.ok()) {
      return Error::fatal(group[nextIndex]->label() +
                          " never logged serving: " + serving.error().message);
    }
    result.servingSeenMs = static_cast<double>(monotonicMicros() - leftAtUs) / 1000.0;
  }
  note(set.name + " trial " + std::to_string(trial) + ": " + formatFixed(result.vacancyMs, 2) + " ms, " +
       leader.label() + " -> " + group[nextIndex]->label() + extra);

  if (Status restarted = leader.start(); !restarted.ok()) return restarted.error();
  return result;
}

// The samples of one case. Crash trials also split around the session expiry (when the server
// log shows it).
struct CaseSamples {
  std::vector<double> vacancies, expiries, afterExpiries, servingSeen;
};

Result<CaseSamples> runTrials(const TrialSet& set, int trials) {
  CaseSamples samples;
  for (int trial = 1; trial <= trials; ++trial) {
    auto result = runTrial(set, trial);
    if (!result.ok()) return Error::fatal(set.name + ": " + result.error().message);
    samples.vacancies.push_back(result.value().vacancyMs);
    samples.servingSeen.push_back(result.value().servingSeenMs);
    if (result.value().expiryMs) {
      samples.expiries.push_back(*result.value().expiryMs);
      samples.afterExpiries.push_back(*result.value().grantAfterExpiryMs);
    }
  }
  if (!samples.expiries.empty()) {
    note(set.name + ": SIGKILL -> session expired ms " + describe(summarize(samples.expiries)));
    note(set.name + ": session expired -> granted ms " +
         describe(summarize(samples.afterExpiries)));
  }
  return samples;
}

// The resident set of an idle standby once it has stopped changing (the same value for a
// second), or the last value read if it never settles within the bound.
Result<int64_t> idleStandbyRssKb(Group& masters, size_t leader) {
  Contender* standby = nullptr;
  for (size_t i = 0; i < masters.size(); ++i) {
    if (i == leader || !masters[i]->running()) continue;
    if (!standby || masters[i]->startedAt() < standby->startedAt()) standby = masters[i].get();
  }
  if (!standby) return Error::fatal("no running standby master to measure");
  const pid_t pid = standby->process().pid();
  auto rss = settledRssKb(pid);
  if (!rss) return Error::fatal("cannot read VmRSS of " + standby->label());
  const auto age = std::chrono::duration_cast<std::chrono::seconds>(
      std::chrono::steady_clock::now() - standby->startedAt());
  note("idle standby " + standby->label() + " (pid " + std::to_string(pid) + ", up " +
       std::to_string(age.count()) + " s): VmRSS " + std::to_string(rss->kb) +
       " kB, VmHWM " + std::to_string(procStatusKb(pid, "VmHWM").value_or(-1)) + " kB" +
       (rss->settled ? "" : " (still changing)"));
  return rss->kb;
}

int run(const BenchOptions& options) {
  auto fail = [](const std::string& what) { return reportFailure("bench_failover", what); };
  const std::string masterBinary = options.binDir + "/regent-master";
  const std::string baselineBinary = options.binDir + "/zk-election-baseline";
  if (Status present = requireBinaries(options.binDir, {"regent-master", "zk-election-baseline"});
      !present.ok()) {
    return fail(present.error().message);
  }

  ZooKeeperServerOptions zkOptions;
  zkOptions.tickTime = Duration(500);
  zkOptions.minSessionTimeout = Duration(1000);  // Two ticks: the 2 s sessions are not clamped.
  // Wall-clock times on the server's log lines, to place each session expiry between a SIGKILL
  // and the next grant.
  zkOptions.jvmFlags.push_back("-Dorg.slf4j.simpleLogger.showDateTime=true");
  zkOptions.jvmFlags.push_back(
      "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSSZ");
  auto server = ZooKeeperServer::start(zkOptions);
  if (!server.ok()) return fail("ZooKeeper did not start: " + server.error().message);
  const std::string quorum = server.value()->connectString();
  const std::string sessionMs = std::to_string(options.sessionTimeout.count());
  note("ZooKeeper " + quorum + ", tickTime 500 ms, session timeout " + sessionMs + " ms, " +
       std::to_string(options.trials) + " trials per case, kill jitter " +
       std::to_string(options.killJitter.count()) + " ms, seed " + std::to_string(options.seed));

  TempDir logs("regent-bench-failover");
  note("process logs in " + logs.path() + " (kept with KEEP_TEST_TMP=1)");
  const std::string id = std::to_string(::getpid());

  Group masters;
  for (int i = 0; i < 3; ++i) {
    std::vector<std::string> sets = {
        "ha.zookeeper.quorum=" + quorum,
        "cluster-id=bench-failover-" + id,
        "ha.zookeeper.session-timeout=" + sessionMs + "ms",
        // crash_ms compares the session path with the baseline: fast failover is its own case.
        "ha.fast-failover=false",
        "rpc.bind=127.0.0.1:0",
        "http.bind=127.0.0.1:0",
        "log.level=" + options.logLevel,
    };
    sets.insert(sets.end(), options.masterSets.begin(), options.masterSets.end());
    masters.push_back(std::make_unique<Contender>(
        "master-" + std::to_string(i), withSets(masterBinary, sets),
        logs.path() + "/master-" + std::to_string(i) + ".log", masterKind()));
  }
  if (Status started = startAll(masters); !started.ok()) return fail(started.error().message);

  const std::string serverLog = server.value()->logPath();
  std::mt19937 random(options.seed);
  auto graceful =
      runTrials({"graceful", Exit::kGraceful, masters, serverLog, options.killJitter, random},
                options.trials);
  if (!graceful.ok()) return fail(graceful.error().message);
  auto crash = runTrials({"crash", Exit::kCrash, masters, serverLog, options.killJitter, random},
                         options.trials);
  if (!crash.ok()) return fail(crash.error().message);

  auto leader = waitForLeader(masters);
  if (!leader.ok()) return fail(leader.error().message);
  auto rssKb = idleStandbyRssKb(masters, leader.value());
  if (!rssKb.ok()) return fail(rssKb.error().message);
  if (auto leaderRss = procStatusKb(masters[leader.value()]->process().pid(), "VmRSS")) {
    note("leader " + masters[leader.value()]->label() + ": VmRSS " + std::to_string(*leaderRss) +
         " kB");
  }
  for (auto& master : masters) {
    if (master->running()) (void)master->process().stop(Duration(10000));
  }

  // Fast failover: the same crash, the host staying up, with a 6 s session the next leader does
  // not wait for.
  Group fastMasters;
  for (int i = 0; i < 3; ++i) {
    std::vector<std::string> sets = {
        "ha.zookeeper.quorum=" + quorum,
        "cluster-id=bench-failover-fast-" + id,
        "ha.zookeeper.session-timeout=" + std::to_string(kFastSessionTimeout.count()) + "ms",
        "ha.fast-failover=true",
        "rpc.bind=127.0.0.1:0",
        "http.bind=127.0.0.1:0",
        "log.level=" + options.logLevel,
    };
    sets.insert(sets.end(), options.masterSets.begin(), options.masterSets.end());
    fastMasters.push_back(std::make_unique<Contender>(
        "fast-master-" + std::to_string(i), withSets(masterBinary, sets),
        logs.path() + "/fast-master-" + std::to_string(i) + ".log", masterKind()));
  }
  if (Status started = startAll(fastMasters); !started.ok()) return fail(started.error().message);
  auto fastCrash = runTrials({"fast crash", Exit::kCrash, fastMasters, serverLog,
                              options.killJitter, random, /*waitsForSession=*/false},
                             options.trials);
  if (!fastCrash.ok()) return fail(fastCrash.error().message);
  for (auto& master : fastMasters) {
    if (master->running()) (void)master->process().stop(Duration(10000));
  }

  Group baseline;
  for (int i = 0; i < 3; ++i) {
    baseline.push_back(std::make_unique<Contender>(
        "baseline-" + std::to_string(i),
        std::vector<std::string>{baselineBinary, "--zk", quorum, "--path",
                                 "/bench-failover-" + id + "/baseline", "--session-timeout-ms",
                                 sessionMs},
        logs.path() + "/baseline-" + std::to_string(i) + ".log", baselineKind()));
  }
  if (Status started = startAll(baseline); !started.ok()) return fail(started.error().message);
  // Context only: the bare recipe's hand-over is closing the session (one delete, one
  // notification, one read), timed from the bench's clock before SIGTERM.
  auto baselineGraceful = runTrials(
      {"baseline graceful", Exit::kGraceful, baseline, serverLog, options.killJitter, random},
      options.trials);
  if (!baselineGraceful.ok()) return fail(baselineGraceful.error().message);
  note("baseline graceful_ms " + describe(summarize(baselineGraceful.value().vacancies)));
  auto baselineCrash =
      runTrials({"baseline crash", Exit::kCrash, baseline, serverLog, options.killJitter, random},
                options.trials);
  if (!baselineCrash.ok()) return fail(baselineCrash.error().message);

  const Summary gracefulSummary = summarize(graceful.value().vacancies);
  const Summary crashSummary = summarize(crash.value().vacancies);
  const Summary baselineSummary = summarize(baselineCrash.value().vacancies);
  const double overheadPct =
      (crashSummary.median - baselineSummary.median) / baselineSummary.median * 100.0;
  // Both medians carry the expiry's phase noise (about +-7% apart at 10 trials with identical
  // contenders); what the contender itself adds after the expiry is compared without it.
  if (!crash.value().afterExpiries.empty() && !baselineCrash.value().afterExpiries.empty()) {
    const double addedMs = summarize(crash.value().afterExpiries).median -
                           summarize(baselineCrash.value().afterExpiries).median;
    note("crash overhead after the session expiry: " + formatFixed(addedMs, 2) +
         " ms median over the baseline = " + formatFixed(addedMs / baselineSummary.median * 100.0, 2) +
         "% of baseline_crash_ms median");
  }
  std::printf("failover graceful_ms %s\n", describe(gracefulSummary).c_str());
  std::printf("failover crash_ms %s\n", describe(crashSummary).c_str());
  std::printf("failover baseline_crash_ms %s\n", describe(baselineSummary).c_str());
  std::printf("failover fast_crash_ms %s\n",
              describe(summarize(fastCrash.value().vacancies)).c_str());
  std::printf("failover fast_crash_serving_ms %s\n",
              describe(summarize(fastCrash.value().servingSeen)).c_str());
  std::printf("failover crash_overhead_pct=%s\n", formatFixed(overheadPct, 2).c_str());
  std::printf("master_rss_kb=%lld\n", static_cast<long long>(rssKb.value()));
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace regent::bench

int main(int argc, char** argv) {
  regent::bench::BenchOptions options;
  int64_t sessionTimeoutMs = options.sessionTimeout.count();
  int64_t killJitterMs = options.killJitter.count();
  options.seed = std::random_device{}();
  CLI::App app{
      "Failover benchmark: graceful and crash hand-over between three regent-master processes, "
      "the same crash on a bare ZooKeeper election recipe, and an idle standby's memory. "
      "Prints result lines; never asserts timings. See docs/benchmarks.md."};
  app.add_option("--trials", options.trials, "trials per case")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--session-timeout-ms", sessionTimeoutMs,
                 "ZooKeeper session timeout of masters and baseline contenders")
      ->check(CLI::Range(1000, 60000))
      ->capture_default_str();
  app.add_option("--kill-jitter-ms", killJitterMs,
                 "random delay before each SIGKILL, uniform in [0, this); 0 disables")
      ->check(CLI::Range(0, 60000))
      ->capture_default_str();
  app.add_option("--seed", options.seed, "seed of the kill jitter (default: random, printed)");
  app.add_option("--log-level", options.logLevel,
                 "the masters' log.level (debug to see where "
                 "the time goes)")
      ->capture_default_str();
  app.add_option("--set", options.masterSets, "extra key=value for every master (repeatable)");
  app.add_option("--bin-dir", options.binDir, "where regent-master and zk-election-baseline are")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  options.sessionTimeout = regent::Duration(sessionTimeoutMs);
  options.killJitter = regent::Duration(killJitterMs);
  return regent::bench::run(options);
}

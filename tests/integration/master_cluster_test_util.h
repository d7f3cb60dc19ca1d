// Multi-process test helpers: a cluster of real regent-master processes on one ZooKeeper, their
// event lines (docs/operations.md) parsed into per-process events and leadership terms, the
// checks the election must pass (at most one leader at a time, dense epochs), and a runner for
// regentctl.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/event_line.h"
#include "common/event_sink.h"
#include "common/result.h"
#include "common/time.h"
#include "tests/fixtures/process_harness.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/fixtures/wait_test_util.h"
#include "tests/fixtures/zookeeper_server.h"

// Asserts (gtest) that a Result or Status is ok, printing its error otherwise.
#define ASSERT_OK(expr)                                                 \
  do {                                                                  \
    const auto& assertOkResult = (expr);                                \
    ASSERT_TRUE(assertOkResult.ok()) << assertOkResult.error().message; \
  } while (false)

namespace regent::testing {

// A cluster id no other test (or earlier run) uses: "<prefix>-<pid>-<counter>".
std::string uniqueClusterId(const std::string& prefix);

// One event line of a master.
struct MasterEvent {
  enum class Kind {
    kStarting,           // master starting master_id=.. pid=.. ha_mode=..
    kContending,         // contending master_id=.. latch=..
    kGranted,            // leadership granted epoch=.. master_id=.. mono_us=.. wall_ms=..
    kServing,            // leader serving epoch=.. master_id=..
    kRevoked,            // leadership revoked epoch=.. master_id=.. reason=".." mono_us=.. wall_ms=..
    kHandoverRequested,  // handover requested master_id=.. mono_us=.. wall_ms=..
    kHandoverDone,       // handover done master_id=.. mono_us=.. wall_ms=..
    kExiting,            // master exiting master_id=.. code=..
  };
  Kind kind = Kind::kStarting;
  std::string masterId;
  uint64_t epoch = 0;     // kGranted, kServing, kRevoked.
  int64_t monoUs = 0;     // kGranted, kRevoked, kHandover*.
  int64_t wallMs = 0;
  std::string reason;     // kRevoked.
  std::string latch;      // kContending.
  std::string haMode;     // kStarting.
  int64_t pid = 0;        // kStarting.
  int code = 0;           // kExiting.
};

const char* masterEventKindName(MasterEvent::Kind kind);

// The event line a log line carries: the line itself in text format, the "msg" field of a JSON
// log line; nullopt for a JSON line without a string "msg".
std::optional<std::string> eventMessageOf(const std::string& line);

// One kind of event and the event name its lines start with (common/event_line.h).
template <typename Event>
struct EventKindName {
  typename Event::Kind kind;
  const char* event;
};

// The event `line` (text or JSON, see eventMessageOf) carries: the first of `kinds` whose name
// it starts with and whose fields `fill(Event&, const EventFields&)` accepts (returns true for);
// nullopt if none does.
template <typename Event, size_t N, typename Fill>
std::optional<Event> parseKindEventLine(const std::string& line,
                                        const EventKindName<Event> (&kinds)[N], Fill fill) {
  auto message = eventMessageOf(line);
  if (!message) return std::nullopt;
  for (const EventKindName<Event>& kind : kinds) {
    auto fields = parseEventLine(*message, kind.event);
    if (!fields) continue;
    Event event;
    event.kind = kind.kind;
    if (fill(event, *fields)) return event;
  }
  return std::nullopt;
}

// The events of an events file (events.file, common/json_lines_event_sink.h) as `text` holds
// them: complete lines only (a line being written is not read yet), in order; a line that is not
// an event is skipped.
std::vector<regent::Event> parseEventsFile(const std::string& text);
// The events of the events file at `path` (none when it cannot be read).
std::vector<regent::Event> readEventsFile(const std::string& path);

// An events file followed as its process appends to it (events.file: each run writes a file of
// its own and only appends): each read() reads only what was appended since the previous one, up
// to its last complete line (a line being written is read once it is whole), and returns every
// event read so far, in order. A file that does not exist yet holds no events.
class EventsFileReader final {
 public:
  explicit EventsFileReader(std::string path) : path_(std::move(path)) {}
  const std::vector<regent::Event>& read();

 private:
  std::string path_;
  off_t offset_ = 0;  // Where the first line not read yet starts.
  std::vector<regent::Event> events_;
};
// The fields of `event` as an event line carries them (numbers in decimal), for the fill
// functions parseKindEventLine takes.
EventFields textFieldsOf(const regent::Event& event);

// The same as parseKindEventLine, for an event of an events file: the first of `kinds` named as
// `event` is whose fields `fill` accepts.
template <typename Parsed, size_t N, typename Fill>
std::optional<Parsed> parseKindEvent(const regent::Event& event,
                                     const EventKindName<Parsed> (&kinds)[N], Fill fill) {
  for (const EventKindName<Parsed>& kind : kinds) {
    if (event.name() != kind.event) continue;
    Parsed parsed;
    parsed.kind = kind.kind;
    if (fill(parsed, textFieldsOf(event))) return parsed;
  }
  return std::nullopt;
}

// Every event `parse` finds in the complete lines of `output`, in order.
template <typename Event, typename Parse>
std::vector<Event> parseEventLines(const std::string& output, Parse parse) {
  std::vector<Event> events;
  size_t start = 0;
  while (true) {
    const size_t newline = output.find('\n', start);
    if (newline == std::string::npos) break;
    if (auto event = parse(output.substr(start, newline - start))) {
      events.push_back(std::move(*event));
    }
    start = newline + 1;
  }
  return events;
}

// Reads `events` every `interval` until one of them matches `match`; returns the first match, or
// nullopt once `timeout` passed without one.
template <typename Event>
std::optional<Event> pollForEvent(const std::function<std::vector<Event>()>& events,
                                  const std::function<bool(const Event&)>& match,
                                  Duration timeout, Duration interval) {
  std::optional<Event> found;
  waitUntil(
      [&] {
        for (const Event& event : events()) {
          if (match(event)) {
            found = event;
            return true;
          }
        }
        return false;
      },
      timeout, interval);
  return found;
}

// Parses one output line, in text or JSON log format (then the "msg" field); nullopt if it is
// not an event line.
std::optional<MasterEvent> parseMasterEventLine(const std::string& line);
// Every event line of `output`, in order (complete lines only).
std::vector<MasterEvent> parseMasterEvents(const std::string& output);
// The ZooKeeper server the binary's tests share (tests/fixtures/zookeeper_server.h); throws when
// it cannot be started.
ZooKeeperServer& sharedServer();
// How many of `events` are of `kind`.
size_t countEvents(const std::vector<MasterEvent>& events, MasterEvent::Kind kind);

// One leadership term as the processes logged it: from the grant to the revoke, or to the
// moment the test killed the process; open (nullopt) while the holder still leads.
struct LeadershipTerm {
  size_t slot = 0;
  int run = 0;
  uint64_t epoch = 0;
  int64_t startUs = 0;
  std::optional<int64_t> endUs;
  std::string describe() const;
};

// Empty if no two terms overlap in time and epochs go up by exactly one per term in grant
// order; otherwise what is wrong, with the terms listed.
std::string checkTermsExclusiveAndDense(std::vector<LeadershipTerm> terms);

struct MasterClusterOptions {
  std::string quorum;  // Each master's ha.zookeeper.quorum unless startMaster overrides it.
  std::string clusterId;
  Duration sessionTimeout{2000};
  std::vector<std::string> extraSet;  // "key=value" for every master.
  std::string logFormat = "text";     // --log-format.
  // Every master's RLIMIT_NOFILE (soft, hard); nullopt: the test's.
  std::optional<std::pair<uint64_t, uint64_t>> openFileLimit;
  // The regent-master executable; "": the one in REGENT_BIN_DIR.
  std::string binary;
  // A configuration file every master loads (--config), under the --set entries; "": none. Where
  // options other programs read go (worker.* for the workers a resource provider starts).
  std::string configFile;
};

// regent-master processes in numbered slots; a slot can be restarted once its process ended,
// and keeps every run's output. Not thread-safe; use from the test's main thread (the harness
// ties each child's death signal to it).
class MasterCluster final {
 public:
  explicit MasterCluster(MasterClusterOptions options);
  ~MasterCluster();

  // Starts a master in a new slot and returns the slot. `quorum` overrides the cluster's
  // (e.g. a fault proxy's address); `extraSet` adds --set entries after the cluster's.
  Result<size_t> startMaster(std::vector<std::string> extraSet = {},
                             std::optional<std::string> quorum = std::nullopt);
  // Starts `count` masters, each once the previous one logged "contending", so latch order
  // follows slot order. Returns the first new slot.
  Result<size_t> startMasters(size_t count);
  // Starts a fresh process in `slot` (whose previous process has ended), with its settings.
  Status restart(size_t slot);

  size_t size() const { return slots_.size(); }
  ProcessHarness& process(size_t slot);
  const std::vector<std::string>& argv(size_t slot) const;
  // The master id the slot's first run logged in "master starting" ("" before it did).
  std::string masterId(size_t slot);

  // SIGKILL, then waits for the exit; the term the process held ends at the kill (recorded).
  Status kill(size_t slot);
  // SIGTERM (the graceful hand-over) without waiting.
  Status terminate(size_t slot);

  // The events file (events.file) of the slot's current run; every run writes its own.
  const std::string& eventsPath(size_t slot) const;
  // The events of the slot's current run, or of every run.
  std::vector<MasterEvent> events(size_t slot) const;
  std::vector<MasterEvent> allRunsEvents(size_t slot) const;
  // Every term of every run of every slot.
  std::vector<LeadershipTerm> terms() const;

  // Waits until some master logs a grant for `epoch`; returns its slot.
  Result<size_t> waitForGrant(uint64_t epoch, Duration timeout);
  // Waits until the slot's current run logged an event matching `match`; returns it.
  Result<MasterEvent> waitForEvent(size_t slot, const std::function<bool(const MasterEvent&)>& match,
                                   Duration timeout);
  // The slot whose current run holds a grant without a revoke after it, if any.
  std::optional<size_t> currentLeader() const;
  // The highest epoch any run was granted (0 if none).
  uint64_t highestEpoch() const;

  // Every slot's current output tail, for failure messages.
  std::string describe() const;

 private:
  struct Run {
    std::unique_ptr<ProcessHarness> process;
    std::string outputPath;
    std::string eventsPath;
    std::optional<int64_t> killedAtUs;
    // Incremental parse of the output file.
    mutable off_t parsedBytes = 0;
    mutable std::vector<MasterEvent> events;
  };
  struct Slot {
    std::vector<std::string> argv;
    std::vector<Run> runs;
  };

  Status launch(size_t slot);
  const std::vector<MasterEvent>& eventsOf(const Run& run) const;

  MasterClusterOptions options_;
  TempDir dir_;
  std::vector<Slot> slots_;
};

// The address the master's RPC server listens on, from its "rpc listening on" line (waits for
// it at most `timeout`).
Result<std::string> masterRpcAddress(MasterCluster& cluster, size_t slot,
                                     Duration timeout = Duration(60000));

// A finished regentctl run.
struct CtlResult {
  ProcessExit exit;
  std::string output;  // stdout and stderr, interleaved.
};

// Runs regentctl with `args` and waits at most `timeout` for it to end (then kills it and
// fails). Output goes to a file under `dir`.
Result<CtlResult> runRegentctl(const std::string& dir, std::vector<std::string> args,
                               Duration timeout = Duration(30000));

// runRegentctl with `common` (the test's --zk, --cluster-id, --timeout...) and then `args`,
// bounded by 90 s. A run that cannot be started or does not end is a test failure (gtest), and
// gives an empty result. Each itest fixture's ctl() is this with its own arguments.
CtlResult regentctlChecked(const std::string& dir, const std::vector<std::string>& common,
                           const std::vector<std::string>& args);

// Starts regentctl (for --watch) with its output in a file under `dir`.
Result<std::unique_ptr<ProcessHarness>> startRegentctl(const std::string& dir,
                                                       std::vector<std::string> args);

// Lines of `text` that parse as JSON objects.
std::vector<std::string> jsonLines(const std::string& text);

}  // namespace regent::testing

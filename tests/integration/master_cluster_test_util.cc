// MasterCluster, the event-line parser, the term checks and the regentctl runner (see
// master_cluster_test_util.h).
#include "tests/integration/master_cluster_test_util.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "common/event_line.h"
#include "common/json_lines_event_sink.h"
#include "tests/fixtures/wait_test_util.h"

namespace regent::testing {
namespace {

constexpr Duration kPollInterval{20};

// The event each kind is logged as (common/event_line.h reads the fields).
constexpr EventKindName<MasterEvent> kKindEvents[] = {
    {MasterEvent::Kind::kStarting, "master starting"},
    {MasterEvent::Kind::kContending, "contending"},
    {MasterEvent::Kind::kGranted, "leadership granted"},
    {MasterEvent::Kind::kServing, "leader serving"},
    {MasterEvent::Kind::kRevoked, "leadership revoked"},
    {MasterEvent::Kind::kHandoverRequested, "handover requested"},
    {MasterEvent::Kind::kHandoverDone, "handover done"},
    {MasterEvent::Kind::kExiting, "master exiting"},
};

// Fills `event` from the fields its kind carries; false if one is missing or malformed.
bool fill(MasterEvent& event, const EventFields& fields) {
  using Kind = MasterEvent::Kind;
  auto masterId = fields.get("master_id");
  if (!masterId) return false;
  event.masterId = *masterId;
  auto readEpoch = [&] {
    auto epoch = fields.getUint("epoch");
    if (epoch) event.epoch = *epoch;
    return epoch.has_value();
  };
  auto readTimes = [&] {
    auto mono = fields.getInt("mono_us");
    auto wall = fields.getInt("wall_ms");
    if (!mono || !wall) return false;
    event.monoUs = *mono;
    event.wallMs = *wall;
    return true;
  };
  switch (event.kind) {
    case Kind::kStarting: {
      auto pid = fields.getInt("pid");
      auto haMode = fields.get("ha_mode");
      if (!pid || !haMode) return false;
      event.pid = *pid;
      event.haMode = *haMode;
      return true;
    }
    case Kind::kContending: {
      auto latch = fields.get("latch");
      if (!latch) return false;
      event.latch = *latch;
      return true;
    }
    case Kind::kGranted:
      return readEpoch() && readTimes();
    case Kind::kServing:
      return readEpoch();
    case Kind::kRevoked: {
      auto reason = fields.get("reason");
      if (!reason) return false;
      event.reason = *reason;
      return readEpoch() && readTimes();
    }
    case Kind::kHandoverRequested:
    case Kind::kHandoverDone:
      return readTimes();
    case Kind::kExiting: {
      auto code = fields.getInt("code");
      if (!code) return false;
      event.code = static_cast<int>(*code);
      return true;
    }
  }
  return false;
}

std::string readFrom(const std::string& path, off_t offset) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string out;
  char buffer[65536];
  while (true) {
    const ssize_t n = ::pread(fd, buffer, sizeof buffer, offset);
    if (n <= 0) break;
    out.append(buffer, static_cast<size_t>(n));
    offset += n;
  }
  ::close(fd);
  return out;
}

}  // namespace

std::string uniqueClusterId(const std::string& prefix) {
  static std::atomic<int> counter{0};
  return prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

const char* masterEventKindName(MasterEvent::Kind kind) {
  switch (kind) {
    case MasterEvent::Kind::kStarting: return "starting";
    case MasterEvent::Kind::kContending: return "contending";
    case MasterEvent::Kind::kGranted: return "granted";
    case MasterEvent::Kind::kServing: return "serving";
    case MasterEvent::Kind::kRevoked: return "revoked";
    case MasterEvent::Kind::kHandoverRequested: return "handover requested";
    case MasterEvent::Kind::kHandoverDone: return "handover done";
    case MasterEvent::Kind::kExiting: return "exiting";
  }
  return "?";
}

std::optional<std::string> eventMessageOf(const std::string& line) {
  if (line.empty() || line.front() != '{') return line;
  auto parsed = nlohmann::json::parse(line, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object() || !parsed.contains("msg") ||
      !parsed["msg"].is_string()) {
    return std::nullopt;
  }
  return parsed["msg"].get<std::string>();
}

std::vector<Event> parseEventsFile(const std::string& text) {
  std::vector<Event> events;
  size_t start = 0;
  while (true) {
    const size_t newline = text.find('\n', start);
    if (newline == std::string::npos) break;
    if (auto event = parseJsonLine(std::string_view(text).substr(start, newline - start))) {
      events.push_back(std::move(*event));
    }
    start = newline + 1;
  }
  return events;
}

std::vector<Event> readEventsFile(const std::string& path) {
  return parseEventsFile(readFrom(path, 0));
}

const std::vector<Event>& EventsFileReader::read() {
  const std::string appended = readFrom(path_, offset_);
  const size_t end = appended.rfind('\n');
  if (end == std::string::npos) return events_;  // Nothing, or a line not whole yet.
  for (Event& event : parseEventsFile(appended.substr(0, end + 1))) {
    events_.push_back(std::move(event));
  }
  offset_ += static_cast<off_t>(end + 1);
  return events_;
}

EventFields textFieldsOf(const Event& event) {
  EventFields fields;
  for (const Event::Field& field : event.fields()) {
    std::string value;
    if (const auto* text = std::get_if<std::string>(&field.value)) {
      value = *text;
    } else if (const auto* number = std::get_if<int64_t>(&field.value)) {
      value = std::to_string(*number);
    } else {
      value = std::to_string(std::get<uint64_t>(field.value));
    }
    fields.fields.emplace_back(field.key, std::move(value));
  }
  return fields;
}

std::optional<MasterEvent> parseMasterEventLine(const std::string& line) {
  return parseKindEventLine(line, kKindEvents, fill);
}

std::vector<MasterEvent> parseMasterEvents(const std::string& output) {
  return parseEventLines<MasterEvent>(output, parseMasterEventLine);
}

ZooKeeperServer& sharedServer() {
  auto server = sharedZooKeeperServer();
  if (!server.ok()) throw std::runtime_error(server.error().message);
  return *server.value();
}

size_t countEvents(const std::vector<MasterEvent>& events, MasterEvent::Kind kind) {
  return static_cast<size_t>(std::count_if(events.begin(), events.end(),
                                           [kind](const MasterEvent& e) { return e.kind == kind; }));
}

std::string LeadershipTerm::describe() const {
  return "slot " + std::to_string(slot) + " run " + std::to_string(run) + " epoch " +
         std::to_string(epoch) + " [" + std::to_string(startUs) + ", " +
         (endUs ? std::to_string(*endUs) : std::string("open")) + ")";
}

std::string checkTermsExclusiveAndDense(std::vector<LeadershipTerm> terms) {
  std::sort(terms.begin(), terms.end(),
            [](const LeadershipTerm& a, const LeadershipTerm& b) { return a.startUs < b.startUs; });
  std::string problems;
  for (size_t i = 1; i < terms.size(); ++i) {
    const LeadershipTerm& previous = terms[i - 1];
    const LeadershipTerm& current = terms[i];
    if (!previous.endUs || *previous.endUs > current.startUs) {
      problems += "overlap: " + previous.describe() + " and " + current.describe() + "\n";
    }
    if (current.epoch != previous.epoch + 1) {
      problems += "epoch gap: " + previous.describe() + " then " + current.describe() + "\n";
    }
  }
  if (problems.empty()) return {};
  std::string all;
  for (const auto& term : terms) all += "  " + term.describe() + "\n";
  return problems + "terms in grant order:\n" + all;
}

MasterCluster::MasterCluster(MasterClusterOptions options)
    : options_(std::move(options)), dir_("regent-masters") {}

MasterCluster::~MasterCluster() = default;

Result<size_t> MasterCluster::startMaster(std::vector<std::string> extraSet,
                                          std::optional<std::string> quorum) {
  const size_t slot = slots_.size();
  std::vector<std::string> argv = {
      options_.binary.empty() ? std::string(REGENT_BIN_DIR "/regent-master") : options_.binary,
      "--log-format", options_.logFormat};
  if (!options_.configFile.empty()) {
    argv.push_back("--config");
    argv.push_back(options_.configFile);
  }
  std::vector<std::string> sets = {
      "cluster-id=" + options_.clusterId,
      "ha.zookeeper.quorum=" + quorum.value_or(options_.quorum),
      "ha.zookeeper.session-timeout=" + std::to_string(options_.sessionTimeout.count()) + "ms",
      // Distinct addresses, so regentctl's output tells the masters apart.
      "rpc.advertised-address=127.0.0.1:" + std::to_string(17000 + slot),
      "rpc.bind=127.0.0.1:0",  // Many masters on one machine.
      "http.bind=127.0.0.1:0",  // The bound port is what the master advertises.
  };
  sets.insert(sets.end(), options_.extraSet.begin(), options_.extraSet.end());
  sets.insert(sets.end(), extraSet.begin(), extraSet.end());
  for (const auto& set : sets) {
    argv.push_back("--set");
    argv.push_back(set);
  }
  slots_.push_back(Slot{std::move(argv), {}});
  if (auto launched = launch(slot); !launched.ok()) return launched.error();
  return slot;
}

Result<size_t> MasterCluster::startMasters(size_t count) {
  const size_t first = slots_.size();
  for (size_t i = 0; i < count; ++i) {
    auto slot = startMaster();
    if (!slot.ok()) return slot.error();
    auto contending = waitForEvent(
        slot.value(),
        [](const MasterEvent& e) { return e.kind == MasterEvent::Kind::kContending; },
        Duration(30000));
    if (!contending.ok()) return contending.error();
  }
  return first;
}

Status MasterCluster::restart(size_t slot) {
  Run& current = slots_.at(slot).runs.back();
  if (current.process->running()) {
    return Error::fatal("slot " + std::to_string(slot) + " still runs");
  }
  return launch(slot);
}

Status MasterCluster::launch(size_t slot) {
  Slot& s = slots_.at(slot);
  Run run;
  const std::string name =
      dir_.path() + "/master-" + std::to_string(slot) + "-run" + std::to_string(s.runs.size());
  run.outputPath = name + ".log";
  run.eventsPath = name + ".events.jsonl";
  ProcessOptions options;
  options.argv = s.argv;
  options.argv.insert(options.argv.end(), {"--set", "events.file=" + run.eventsPath});
  options.outputPath = run.outputPath;
  options.openFileLimit = options_.openFileLimit;
  auto process = ProcessHarness::start(options);
  if (!process.ok()) return process.error();
  run.process = std::move(process).value();
  s.runs.push_back(std::move(run));
  return {};
}

ProcessHarness& MasterCluster::process(size_t slot) { return *slots_.at(slot).runs.back().process; }

const std::string& MasterCluster::eventsPath(size_t slot) const {
  return slots_.at(slot).runs.back().eventsPath;
}

std::string MasterCluster::masterId(size_t slot) {
  for (const auto& event : events(slot)) {
    if (event.kind == MasterEvent::Kind::kStarting) return event.masterId;
  }
  return "";
}

const std::vector<std::string>& MasterCluster::argv(size_t slot) const {
  return slots_.at(slot).argv;
}

Status MasterCluster::kill(size_t slot) {
  Run& run = slots_.at(slot).runs.back();
  if (auto killed = run.process->kill(); !killed.ok()) return killed;
  run.killedAtUs = monotonicMicros();
  if (!run.process->waitForExit(Duration(10000))) {
    return Error::fatal("slot " + std::to_string(slot) + " survived SIGKILL");
  }
  return {};
}

Status MasterCluster::terminate(size_t slot) { return process(slot).terminate(); }

const std::vector<MasterEvent>& MasterCluster::eventsOf(const Run& run) const {
  std::string fresh = readFrom(run.outputPath, run.parsedBytes);
  const size_t lastNewline = fresh.rfind('\n');
  if (lastNewline == std::string::npos) return run.events;
  fresh.resize(lastNewline + 1);
  run.parsedBytes += static_cast<off_t>(fresh.size());
  for (auto& event : parseMasterEvents(fresh)) run.events.push_back(std::move(event));
  return run.events;
}

std::vector<MasterEvent> MasterCluster::events(size_t slot) const {
  return eventsOf(slots_.at(slot).runs.back());
}

std::vector<MasterEvent> MasterCluster::allRunsEvents(size_t slot) const {
  std::vector<MasterEvent> all;
  for (const Run& run : slots_.at(slot).runs) {
    const auto& events = eventsOf(run);
    all.insert(all.end(), events.begin(), events.end());
  }
  return all;
}

std::vector<LeadershipTerm> MasterCluster::terms() const {
  std::vector<LeadershipTerm> terms;
  for (size_t slot = 0; slot < slots_.size(); ++slot) {
    const auto& runs = slots_[slot].runs;
    for (size_t r = 0; r < runs.size(); ++r) {
      std::optional<size_t> open;  // Index in `terms` of this run's open term.
      for (const MasterEvent& event : eventsOf(runs[r])) {
        if (event.kind == MasterEvent::Kind::kGranted) {
          terms.push_back({slot, static_cast<int>(r), event.epoch, event.monoUs, std::nullopt});
          open = terms.size() - 1;  // A second grant without a revoke leaves the first open.
        } else if (event.kind == MasterEvent::Kind::kRevoked && open &&
                   terms[*open].epoch == event.epoch) {
          terms[*open].endUs = event.monoUs;
          open.reset();
        }
      }
      if (open && runs[r].killedAtUs) terms[*open].endUs = runs[r].killedAtUs;
    }
  }
  return terms;
}

Result<size_t> MasterCluster::waitForGrant(uint64_t epoch, Duration timeout) {
  std::optional<size_t> granted;
  waitUntil(
      [&]() {
        for (size_t slot = 0; slot < slots_.size(); ++slot) {
          for (const MasterEvent& event : allRunsEvents(slot)) {
            if (event.kind == MasterEvent::Kind::kGranted && event.epoch == epoch) {
              granted = slot;
              return true;
            }
          }
        }
        return false;
      },
      timeout, kPollInterval);
  if (!granted) {
    return Error::fatal("no master was granted epoch " + std::to_string(epoch) + " within " +
                        std::to_string(timeout.count()) + " ms\n" + describe());
  }
  return *granted;
}

Result<MasterEvent> MasterCluster::waitForEvent(
    size_t slot, const std::function<bool(const MasterEvent&)>& match, Duration timeout) {
  auto found = pollForEvent<MasterEvent>([&] { return events(slot); }, match, timeout,
                                         kPollInterval);
  if (!found) {
    return Error::fatal("slot " + std::to_string(slot) + " logged no matching event within " +
                        std::to_string(timeout.count()) + " ms\n" + describe());
  }
  return *found;
}

std::optional<size_t> MasterCluster::currentLeader() const {
  for (size_t slot = 0; slot < slots_.size(); ++slot) {
    const Run& run = slots_[slot].runs.back();
    if (!run.process->running()) continue;
    std::optional<uint64_t> leading;
    for (const MasterEvent& event : eventsOf(run)) {
      if (event.kind == MasterEvent::Kind::kGranted) leading = event.epoch;
      if (event.kind == MasterEvent::Kind::kRevoked) leading.reset();
    }
    if (leading) return slot;
  }
  return std::nullopt;
}

uint64_t MasterCluster::highestEpoch() const {
  uint64_t highest = 0;
  for (size_t slot = 0; slot < slots_.size(); ++slot) {
    for (const MasterEvent& event : allRunsEvents(slot)) {
      if (event.kind == MasterEvent::Kind::kGranted) highest = std::max(highest, event.epoch);
    }
  }
  return highest;
}

std::string MasterCluster::describe() const {
  std::ostringstream out;
  for (size_t slot = 0; slot < slots_.size(); ++slot) {
    const Run& run = slots_[slot].runs.back();
    out << "--- slot " << slot << " run " << slots_[slot].runs.size() - 1 << " ("
        << run.outputPath << ") tail:\n"
        << run.process->outputTail(1500) << "\n";
  }
  return out.str();
}

Result<std::unique_ptr<ProcessHarness>> startRegentctl(const std::string& dir,
                                                       std::vector<std::string> args) {
  static std::atomic<int> counter{0};
  ProcessOptions options;
  options.argv = {REGENT_BIN_DIR "/regentctl"};
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.outputPath = dir + "/regentctl-" + std::to_string(counter++) + ".log";
  return ProcessHarness::start(options);
}

Result<std::string> masterRpcAddress(MasterCluster& cluster, size_t slot, Duration timeout) {
  const std::regex pattern("rpc listening on (\\S+)");
  auto line = cluster.process(slot).waitForLine(pattern, timeout);
  if (!line.ok()) return line.error();
  std::smatch match;
  if (!std::regex_search(line.value(), match, pattern)) {
    return Error::fatal("no address in: " + line.value());
  }
  return std::string(match[1]);
}

CtlResult regentctlChecked(const std::string& dir, const std::vector<std::string>& common,
                           const std::vector<std::string>& args) {
  std::vector<std::string> all = common;
  all.insert(all.end(), args.begin(), args.end());
  auto run = runRegentctl(dir, all, Duration(90000));
  EXPECT_TRUE(run.ok()) << run.error().message;
  return run.ok() ? run.value() : CtlResult{};
}

Result<CtlResult> runRegentctl(const std::string& dir, std::vector<std::string> args,
                               Duration timeout) {
  auto process = startRegentctl(dir, std::move(args));
  if (!process.ok()) return process.error();
  ProcessHarness& ctl = *process.value();
  auto exit = ctl.waitForExit(timeout);
  if (!exit) {
    (void)ctl.kill();
    return Error::fatal("regentctl did not end within " + std::to_string(timeout.count()) +
                        " ms; output:\n" + ctl.output());
  }
  return CtlResult{*exit, ctl.output()};
}

std::vector<std::string> jsonLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line.front() != '{') continue;
    auto parsed = nlohmann::json::parse(line, nullptr, false);
    if (!parsed.is_discarded() && parsed.is_object()) lines.push_back(line);
  }
  return lines;
}

}  // namespace regent::testing

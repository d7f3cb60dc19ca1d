// WorkerCluster, the worker event-line parsers, the regentctl slot table, metrics and the
// ResourceManager caller (see worker_cluster_test_util.h).
#include "tests/integration/worker_cluster_test_util.h"

#include <kj/compat/http.h>
#include <kj/debug.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "common/event_line.h"
#include "rpc/rpc_options.h"
#include "rpc/wire_ids.h"
#include "tests/fixtures/wait_test_util.h"
#include "tests/fixtures/zookeeper_server.h"
#include "tests/integration/http_get_test_util.h"

namespace regent::testing {
namespace {

constexpr Duration kPollInterval{50};

std::string jsonText(const nlohmann::json& object, const char* key) {
  if (!object.contains(key) || !object[key].is_string()) return "";
  return object[key].get<std::string>();
}

}  // namespace

// ---- Event lines ------------------------------------------------------------------------------

std::optional<WorkerEvent> parseWorkerEventLine(const std::string& line) {
  using Kind = WorkerEvent::Kind;
  static constexpr EventKindName<WorkerEvent> kEvents[] = {
      {Kind::kStarting, "worker starting"},
      {Kind::kRegistered, "worker registered"},
      {Kind::kResourceManagerLost, "resource manager lost"},
      {Kind::kEpochGateRefused, "epoch gate refused"},
      {Kind::kDisconnected, "worker disconnected"},
      {Kind::kExiting, "worker exiting"},
  };
  auto fill = [](WorkerEvent& event, const EventFields& fields) {
    auto resourceId = fields.get("resource_id");
    if (!resourceId) return false;
    event.resourceId = *resourceId;
    event.epoch = fields.getUint("epoch").value_or(0);
    switch (event.kind) {
      case Kind::kStarting:
        event.host = fields.get("host").value_or("");
        event.pid = fields.getInt("pid").value_or(0);
        event.slots = fields.getUint("slots").value_or(0);
        event.dataDir = fields.get("data_dir").value_or("");
        break;
      case Kind::kRegistered:
        // A master's "worker registered" line starts with epoch=, a worker's with resource_id=;
        // only the worker's carries leader=.
        if (!fields.get("leader")) return false;
        event.registrationId = fields.get("registration_id").value_or("");
        event.leader = *fields.get("leader");
        event.attempts = fields.getUint("attempts").value_or(0);
        break;
      case Kind::kResourceManagerLost:
        event.reason = fields.get("reason").value_or("");
        break;
      case Kind::kEpochGateRefused:
        event.method = fields.get("method").value_or("");
        event.received = fields.getUint("received").value_or(0);
        event.highest = fields.getUint("highest").value_or(0);
        break;
      case Kind::kDisconnected:
        event.reason = fields.get("cause").value_or("");
        break;
      case Kind::kExiting:
        event.code = static_cast<int>(fields.getInt("code").value_or(-1));
        break;
    }
    return true;
  };
  return parseKindEventLine(line, kEvents, fill);
}

std::optional<MasterWorkerEvent> parseMasterWorkerEventLine(const std::string& line) {
  using Kind = MasterWorkerEvent::Kind;
  static constexpr EventKindName<MasterWorkerEvent> kEvents[] = {
      {Kind::kRegistered, "worker registered"},
      {Kind::kSlotReport, "slot report"},
      {Kind::kRemoved, "worker removed"},
      {Kind::kRefused, "worker refused"},
  };
  auto fill = [](MasterWorkerEvent& event, const EventFields& fields) {
    auto resourceId = fields.get("resource_id");
    auto epoch = fields.getUint("epoch");
    if (!resourceId || !epoch) return false;
    event.epoch = *epoch;
    event.resourceId = *resourceId;
    switch (event.kind) {
      case Kind::kRegistered:
        if (fields.get("leader")) return false;  // A worker's line.
        event.registrationId = fields.get("registration_id").value_or("");
        event.host = fields.get("host").value_or("");
        event.pid = fields.getInt("pid").value_or(0);
        event.slots = fields.getUint("slots").value_or(0);
        event.replaced = fields.get("replaced").value_or("") == "true";
        break;
      case Kind::kSlotReport:
        event.slots = fields.getUint("slots").value_or(0);
        event.allocated = fields.getUint("allocated").value_or(0);
        event.workersReported = fields.getUint("workers_reported").value_or(0);
        event.slotsTotal = fields.getUint("slots_total").value_or(0);
        break;
      case Kind::kRemoved:
      case Kind::kRefused:
        event.reason = fields.get("reason").value_or("");
        break;
    }
    return true;
  };
  return parseKindEventLine(line, kEvents, fill);
}

std::vector<WorkerEvent> parseWorkerEvents(const std::string& output) {
  return parseEventLines<WorkerEvent>(output, parseWorkerEventLine);
}

std::vector<MasterWorkerEvent> parseMasterWorkerEvents(const std::string& output) {
  return parseEventLines<MasterWorkerEvent>(output, parseMasterWorkerEventLine);
}

// ---- Masters ----------------------------------------------------------------------------------

std::vector<MasterWorkerEvent> masterWorkerEvents(MasterCluster& cluster, size_t slot) {
  return parseMasterWorkerEvents(cluster.process(slot).output());
}

Result<MasterWorkerEvent> waitForMasterWorkerEvent(
    MasterCluster& cluster, size_t slot,
    const std::function<bool(const MasterWorkerEvent&)>& match, Duration timeout) {
  auto found = pollForEvent<MasterWorkerEvent>([&] { return masterWorkerEvents(cluster, slot); },
                                               match, timeout, kPollInterval);
  if (!found) {
    return Error::fatal("master slot " + std::to_string(slot) +
                        " logged no matching worker event within " +
                        std::to_string(timeout.count()) + " ms\n" + cluster.describe());
  }
  return *found;
}

Result<uint64_t> waitForServing(MasterCluster& cluster, size_t slot, Duration timeout) {
  auto serving = cluster.waitForEvent(
      slot, [](const MasterEvent& e) { return e.kind == MasterEvent::Kind::kServing; }, timeout);
  if (!serving.ok()) return serving.error();
  return serving.value().epoch;
}

MasterClusterOptions workerTestMasters(const std::string& quorum, const std::string& clusterId) {
  return MasterClusterOptions{
      .quorum = quorum,
      .clusterId = clusterId,
      .sessionTimeout = kTestSessionTimeout,
      .extraSet = {"rpc.advertised-address=", kTestHeartbeatInterval, kTestHeartbeatTimeout,
                   "rpc.call-timeout=3s"}};
}

WorkerClusterOptions workerTestWorkers(const std::string& quorum, const std::string& clusterId) {
  return WorkerClusterOptions{
      .quorum = quorum,
      .clusterId = clusterId,
      .sessionTimeout = kTestSessionTimeout,
      .extraSet = {"rpc.call-timeout=3s", "cluster.registration.initial-timeout=50ms",
                   "cluster.registration.max-timeout=1s"}};
}

// ---- Workers ----------------------------------------------------------------------------------

WorkerCluster::WorkerCluster(WorkerClusterOptions options)
    : options_(std::move(options)), dir_("regent-workers") {
  // Tasks run as worker.task-user (nobody) when the tests run as root: let it through this
  // private directory to its attempt's directory inside a worker's data directory.
  ::chmod(dir_.path().c_str(), 0711);
}

WorkerCluster::~WorkerCluster() = default;

Result<size_t> WorkerCluster::startWorker(std::vector<std::string> extraSet,
                                          std::optional<std::string> quorum,
                                          std::optional<std::string> dataDir) {
  const size_t slot = slots_.size();
  auto port = pickFreeLoopbackPort();
  if (!port.ok()) return port.error();
  Slot s;
  s.dataDir = dataDir.value_or(dir_.path() + "/worker-" + std::to_string(slot));
  s.httpAddress = "127.0.0.1:" + std::to_string(port.value());
  s.argv = {REGENT_BIN_DIR "/regent-worker", "--log-format", options_.logFormat};
  std::vector<std::string> sets = {
      "cluster-id=" + options_.clusterId,
      "ha.zookeeper.quorum=" + quorum.value_or(options_.quorum),
      "ha.zookeeper.session-timeout=" + std::to_string(options_.sessionTimeout.count()) + "ms",
      "worker.data-dir=" + s.dataDir,
      "worker.http.bind=" + s.httpAddress,
      "worker.slots=" + std::to_string(options_.slots),
      "worker.slot-cpu=" + options_.slotCpu,
      "worker.slot-memory=" + options_.slotMemory,
  };
  sets.insert(sets.end(), options_.extraSet.begin(), options_.extraSet.end());
  sets.insert(sets.end(), extraSet.begin(), extraSet.end());
  for (const auto& set : sets) {
    s.argv.push_back("--set");
    s.argv.push_back(set);
  }
  slots_.push_back(std::move(s));
  if (auto launched = launch(slot); !launched.ok()) return launched.error();
  return slot;
}

Result<size_t> WorkerCluster::startWorkers(size_t count) {
  const size_t first = slots_.size();
  for (size_t i = 0; i < count; ++i) {
    auto slot = startWorker();
    if (!slot.ok()) return slot.error();
  }
  return first;
}

Status WorkerCluster::restart(size_t slot) {
  if (slots_.at(slot).process->running()) {
    return Error::fatal("worker slot " + std::to_string(slot) + " still runs");
  }
  return launch(slot);
}

Status WorkerCluster::launch(size_t slot) {
  Slot& s = slots_.at(slot);
  const std::string name =
      dir_.path() + "/worker-" + std::to_string(slot) + "-run" + std::to_string(s.runs);
  s.eventsPath = name + ".events.jsonl";
  ProcessOptions options;
  options.argv = s.argv;
  options.argv.insert(options.argv.end(), {"--set", "events.file=" + s.eventsPath});
  options.env = options_.env;
  options.outputPath = name + ".log";
  auto process = ProcessHarness::start(options);
  if (!process.ok()) return process.error();
  s.process = std::move(process).value();
  ++s.runs;
  return {};
}

ProcessHarness& WorkerCluster::process(size_t slot) { return *slots_.at(slot).process; }

const std::string& WorkerCluster::dataDir(size_t slot) const { return slots_.at(slot).dataDir; }

const std::string& WorkerCluster::eventsPath(size_t slot) const {
  return slots_.at(slot).eventsPath;
}

const std::string& WorkerCluster::httpAddress(size_t slot) const {
  return slots_.at(slot).httpAddress;
}

std::string WorkerCluster::resourceId(size_t slot) {
  for (const auto& event : events(slot)) {
    if (event.kind == WorkerEvent::Kind::kStarting) return event.resourceId;
  }
  return "";
}

Status WorkerCluster::kill(size_t slot) {
  ProcessHarness& worker = process(slot);
  if (auto killed = worker.kill(); !killed.ok()) return killed;
  if (!worker.waitForExit(Duration(10000))) {
    return Error::fatal("worker slot " + std::to_string(slot) + " survived SIGKILL");
  }
  return {};
}

std::vector<WorkerEvent> WorkerCluster::events(size_t slot) {
  return parseWorkerEvents(process(slot).output());
}

Result<WorkerEvent> WorkerCluster::waitForEvent(
    size_t slot, const std::function<bool(const WorkerEvent&)>& match, Duration timeout) {
  auto found =
      pollForEvent<WorkerEvent>([&] { return events(slot); }, match, timeout, kPollInterval);
  if (!found) {
    return Error::fatal("worker slot " + std::to_string(slot) + " logged no matching event within " +
                        std::to_string(timeout.count()) + " ms\n" + describe());
  }
  return *found;
}

Result<WorkerEvent> WorkerCluster::waitForRegistered(size_t slot, uint64_t epoch,
                                                     Duration timeout, size_t count) {
  std::optional<WorkerEvent> last;
  waitUntil(
      [&] {
        size_t seen = 0;
        for (const auto& event : events(slot)) {
          if (event.kind == WorkerEvent::Kind::kRegistered &&
              (epoch == 0 || event.epoch == epoch)) {
            ++seen;
            last = event;
          }
        }
        return seen >= count;
      },
      timeout, kPollInterval);
  size_t seen = 0;
  for (const auto& event : events(slot)) {
    if (event.kind == WorkerEvent::Kind::kRegistered && (epoch == 0 || event.epoch == epoch)) {
      ++seen;
    }
  }
  if (seen < count) {
    return Error::fatal("worker slot " + std::to_string(slot) + " registered " +
                        std::to_string(seen) + " time(s) with epoch " + std::to_string(epoch) +
                        " within " + std::to_string(timeout.count()) + " ms, not " +
                        std::to_string(count) + "\n" + describe());
  }
  return *last;
}

size_t WorkerCluster::count(size_t slot, WorkerEvent::Kind kind) {
  const auto all = events(slot);
  return static_cast<size_t>(
      std::count_if(all.begin(), all.end(), [kind](const WorkerEvent& e) { return e.kind == kind; }));
}

std::string WorkerCluster::describe() const {
  std::ostringstream out;
  for (size_t slot = 0; slot < slots_.size(); ++slot) {
    const Slot& s = slots_[slot];
    out << "--- worker " << slot << " run " << s.runs - 1 << " (" << s.process->outputPath()
        << ") tail:\n"
        << s.process->outputTail(2000) << "\n";
  }
  return out.str();
}

// ---- The leader's view ------------------------------------------------------------------------

std::string SlotRow::describe() const {
  return resourceId + " #" + std::to_string(index) + " " + state + " job=" + jobId +
         " allocation=" + allocationId;
}

std::string describeTable(const SlotTable& table) {
  std::string out;
  for (const SlotRow& row : table) out += "  " + row.describe() + "\n";
  return out.empty() ? "  (no slots)\n" : out;
}

Regentctl::Regentctl(std::string quorum, std::string clusterId)
    : base_{"--zk", std::move(quorum), "--cluster-id", std::move(clusterId), "--timeout", "20s"},
      dir_("regentctl-workers") {}

Result<CtlResult> Regentctl::run(std::vector<std::string> args, Duration timeout) {
  std::vector<std::string> all = base_;
  all.insert(all.end(), args.begin(), args.end());
  return runRegentctl(dir_.path(), std::move(all), timeout);
}

Result<std::vector<WorkerRow>> Regentctl::workers() {
  auto ran = run({"workers", "--json"});
  if (!ran.ok()) return ran.error();
  if (!ran.value().exit.exited() || ran.value().exit.exitCode != 0) {
    return Error::fatal("regentctl workers --json: " + ran.value().exit.describe() + "\n" +
                        ran.value().output);
  }
  std::vector<WorkerRow> rows;
  for (const std::string& line : jsonLines(ran.value().output)) {
    const auto object = nlohmann::json::parse(line);
    WorkerRow row;
    row.resourceId = jsonText(object, "resource_id");
    row.host = jsonText(object, "host");
    if (object.contains("pid") && object["pid"].is_number_integer()) {
      row.pid = object["pid"].get<int64_t>();
    }
    if (row.resourceId.empty() || !object.contains("slots") || !object["slots"].is_array()) {
      return Error::fatal("regentctl workers --json: a line without resource_id or slots: " +
                          line);
    }
    for (const auto& slot : object["slots"]) {
      SlotRow slotRow;
      slotRow.resourceId = row.resourceId;
      if (!slot.contains("index") || !slot["index"].is_number_unsigned()) {
        return Error::fatal("regentctl workers --json: a slot without index: " + line);
      }
      slotRow.index = slot["index"].get<uint32_t>();
      slotRow.state = jsonText(slot, "state");
      slotRow.jobId = jsonText(slot, "job_id");
      slotRow.allocationId = jsonText(slot, "allocation_id");
      row.slots.push_back(std::move(slotRow));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

Result<size_t> Regentctl::slotLines() {
  auto ran = run({"slots", "--json"});
  if (!ran.ok()) return ran.error();
  if (!ran.value().exit.exited() || ran.value().exit.exitCode != 0) {
    return Error::fatal("regentctl slots --json: " + ran.value().exit.describe() + "\n" +
                        ran.value().output);
  }
  return jsonLines(ran.value().output).size();
}

Result<SlotTable> Regentctl::slotTable() {
  auto rows = workers();
  if (!rows.ok()) return rows.error();
  SlotTable table;
  std::set<std::string> seen;
  for (const WorkerRow& row : rows.value()) {
    if (!seen.insert(row.resourceId).second) {
      return Error::fatal("regentctl workers lists resource id " + row.resourceId + " twice");
    }
    for (const SlotRow& slot : row.slots) {
      if (!table.insert(slot).second) {
        return Error::fatal("regentctl workers lists slot " + slot.describe() + " twice");
      }
    }
  }
  return table;
}

Result<SlotTable> Regentctl::waitForTable(const std::function<bool(const SlotTable&)>& done,
                                    Duration timeout) {
  std::optional<SlotTable> last;
  std::string lastError;
  const bool held = waitUntil(
      [&] {
        auto table = slotTable();
        if (!table.ok()) {
          lastError = table.error().message;
          return false;
        }
        last = std::move(table).value();
        return done(*last);
      },
      timeout, Duration(200));
  if (held) return *last;
  return Error::fatal("the slot table did not become the one expected within " +
                      std::to_string(timeout.count()) + " ms; last table:\n" +
                      (last ? describeTable(*last) : std::string("  (none)\n")) +
                      "last regentctl error: " + lastError);
}

Result<JobId> submitSlotHoldingJob(Regentctl& regentctl, uint32_t parallelism,
                                   const std::string& cpu, const std::string& memory) {
  const JobId job = JobId::random();
  const std::string file = regentctl.dir() + "/job-" + job.toHex() + ".yaml";
  std::ofstream(file) << "job_id: " << job.toHex() << "\nname: hold-slots\nvertices:\n"
                      << "  - name: hold\n    parallelism: " << parallelism << "\n"
                      << "    command:\n      argv: [sleep, \"600\"]\n"
                      << "    resources:\n      cpu: " << cpu << "\n      memory: " << memory
                      << "\n";
  auto submitted = regentctl.run({"jobs", "submit", file});
  if (!submitted.ok()) return submitted.error();
  if (!submitted.value().exit.exited() || submitted.value().exit.exitCode != 0) {
    return Error::fatal("regentctl jobs submit: " + submitted.value().exit.describe() + "\n" +
                        submitted.value().output);
  }
  return job;
}

size_t countState(const SlotTable& table, const std::string& state) {
  return static_cast<size_t>(std::count_if(
      table.begin(), table.end(), [&](const SlotRow& row) { return row.state == state; }));
}

std::set<std::string> resourceIds(const SlotTable& table) {
  std::set<std::string> ids;
  for (const SlotRow& row : table) ids.insert(row.resourceId);
  return ids;
}

// ---- A worker's HTTP ----------------------------------------------------------------------------

Result<std::pair<uint, std::string>> httpGetText(EventLoop& loop, const std::string& address,
                                                 const std::string& path) {
  kj::HttpHeaderTable table;
  HttpReply reply;
  auto failure = kj::runCatchingExceptions([&] { reply = httpGet(loop, table, address, path); });
  KJ_IF_MAYBE (exception, failure) {
    return Error::retryable("GET " + path + " from " + address + ": " +
                            exception->getDescription().cStr());
  }
  return std::make_pair(reply.status, reply.body);
}

namespace {

// Each sample "name{labels} value" or "name value" of `metric`: labels -> value.
std::vector<std::pair<std::string, double>> samples(const std::string& text,
                                                    const std::string& metric) {
  std::vector<std::pair<std::string, double>> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line.front() == '#') continue;
    if (line.compare(0, metric.size(), metric) != 0) continue;
    std::string rest = line.substr(metric.size());
    std::string labels;
    if (!rest.empty() && rest.front() == '{') {
      const size_t close = rest.find('}');
      if (close == std::string::npos) continue;
      labels = rest.substr(1, close - 1);
      rest = rest.substr(close + 1);
    }
    if (rest.empty() || rest.front() != ' ') continue;  // Another metric with this prefix.
    try {
      out.emplace_back(labels, std::stod(rest.substr(1)));
    } catch (const std::exception&) {
    }
  }
  return out;
}

}  // namespace

std::optional<double> metricSum(const std::string& text, const std::string& metric) {
  const auto all = samples(text, metric);
  if (all.empty()) return std::nullopt;
  double sum = 0;
  for (const auto& [labels, value] : all) sum += value;
  return sum;
}

std::optional<double> metricValue(const std::string& text, const std::string& metric,
                                  const std::string& labels) {
  for (const auto& [sampleLabels, value] : samples(text, metric)) {
    if (sampleLabels == labels) return value;
  }
  return std::nullopt;
}

// ---- Calls to the leader's ResourceManager ----------------------------------------------------

namespace {

// A stand-in worker's gateway: answers nothing (the master's calls to it fail).
class SilentTaskExecutor final : public wire::TaskExecutorGateway::Server {};

// The test's JobMaster: registered so that declareRequiredResources is accepted. It implements
// no method (the endpoint's defaults answer UNIMPLEMENTED): offering slots to a JobMaster and
// its heartbeats come with the JobMaster itself.
class SilentJobMaster final : public wire::JobMasterGateway::Server {};

std::optional<CallFailure> failureOf(bool has, wire::Failure::Reader failure) {
  if (!has) return std::nullopt;
  return CallFailure{failure.which(), failure.getMessage().cStr()};
}

}  // namespace

ResourceManagerCaller::ResourceManagerCaller(EventLoop& loop, kj::Own<rpc::RpcClient> client,
                                             uint64_t epoch)
    : loop_(loop), client_(kj::mv(client)), epoch_(epoch), gateway_(nullptr) {}

ResourceManagerCaller::~ResourceManagerCaller() = default;

Result<std::unique_ptr<ResourceManagerCaller>> ResourceManagerCaller::connect(
    EventLoop& loop, const std::string& rpcAddress, uint64_t epoch) {
  rpc::RpcOptions options;
  options.callTimeout = Duration(20000);
  std::unique_ptr<ResourceManagerCaller> caller(new ResourceManagerCaller(
      loop, kj::heap<rpc::RpcClient>(loop.io().getNetwork(), loop.timer(), rpcAddress, options),
      epoch));
  std::optional<std::string> problem;
  auto failure = kj::runCatchingExceptions([&] {
    auto bootstrap = loop.run(
        caller->client_->bootstrapAs<wire::MasterBootstrap>().exclusiveJoin(
            loop.timer().afterDelay(20 * kj::SECONDS).then(
                []() -> wire::MasterBootstrap::Client {
                  KJ_FAIL_REQUIRE("no connection within 20 s");
                })));
    auto request = bootstrap.resourceManagerRequest();
    request.setEpoch(epoch);
    auto response = loop.run(request.send());
    if (response.hasFailure()) {
      problem = std::string("MasterBootstrap.resourceManager: ") +
                response.getFailure().getMessage().cStr();
      return;
    }
    caller->gateway_ = response.getResourceManager();
  });
  KJ_IF_MAYBE (exception, failure) {
    return Error::retryable("ResourceManager of " + rpcAddress + ": " +
                            exception->getDescription().cStr());
  }
  if (problem) return Error::fatal(*problem);
  return caller;
}

std::optional<CallFailure> ResourceManagerCaller::registerJobMaster(const JobId& job) {
  auto request = gateway_.registerJobMasterRequest();
  request.setEpoch(epoch_);
  wire::setWireId(request.initJobId(), job);
  request.setJobMaster(kj::heap<SilentJobMaster>());
  auto response = loop_.run(request.send());
  return failureOf(response.hasFailure(), response.getFailure());
}

std::optional<CallFailure> ResourceManagerCaller::declare(const JobId& job, uint32_t cpuMillis,
                                                          uint64_t memoryBytes, uint32_t count) {
  auto request = gateway_.declareRequiredResourcesRequest();
  request.setEpoch(epoch_);
  wire::setWireId(request.initJobId(), job);
  auto requirement = request.initRequirements(1)[0];
  requirement.initProfile().setCpuMillis(cpuMillis);
  requirement.getProfile().setMemoryBytes(memoryBytes);
  requirement.setNumberOfRequiredSlots(count);
  auto response = loop_.run(request.send());
  return failureOf(response.hasFailure(), response.getFailure());
}

Result<RegistrationId> ResourceManagerCaller::registerWorker(const ResourceId& resource,
                                                             uint32_t slots) {
  auto request = gateway_.registerTaskExecutorRequest();
  request.setEpoch(epoch_);
  auto registration = request.initRegistration();
  wire::setWireId(registration.initResourceId(), resource);
  registration.setHost("itest-stand-in");
  registration.setPid(4242);
  registration.setNumberOfSlots(slots);
  registration.initSlotProfile().setCpuMillis(1000);
  registration.getSlotProfile().setMemoryBytes(uint64_t{256} << 20);
  registration.initTotalProfile().setCpuMillis(1000 * slots);
  registration.getTotalProfile().setMemoryBytes((uint64_t{256} << 20) * slots);
  request.setTaskExecutor(kj::heap<SilentTaskExecutor>());
  auto response = loop_.run(request.send());
  if (auto failure = failureOf(response.hasFailure(), response.getFailure())) {
    return Error::fatal("registerTaskExecutor: " + failure->message);
  }
  return wire::idFromWire<RegistrationId>(response.getSuccess().getRegistrationId());
}

std::optional<CallFailure> ResourceManagerCaller::sendSlotReport(
    const ResourceId& resource, const RegistrationId& registration, uint32_t slots) {
  auto request = gateway_.sendSlotReportRequest();
  request.setEpoch(epoch_);
  wire::setWireId(request.initResourceId(), resource);
  wire::setWireId(request.initRegistrationId(), registration);
  auto report = request.initSlotReport();
  wire::setWireId(report.initResourceId(), resource);
  auto list = report.initSlots(slots);
  for (uint32_t i = 0; i < slots; ++i) {
    wire::setWireId(list[i].initSlotId().initResourceId(), resource);
    list[i].getSlotId().setSlotIndex(i);
    list[i].initProfile().setCpuMillis(1000);
    list[i].getProfile().setMemoryBytes(uint64_t{256} << 20);
  }
  auto response = loop_.run(request.send());
  return failureOf(response.hasFailure(), response.getFailure());
}

}  // namespace regent::testing

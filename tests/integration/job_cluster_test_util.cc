// JobCluster, the job / attempt / task event readers and the checks of a task's leftover
// processes (see job_cluster_test_util.h).
#include "tests/integration/job_cluster_test_util.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <fstream>
#include <regex>
#include <sstream>

#include "common/event_line.h"
#include "tests/fixtures/wait_test_util.h"
#include "tests/fixtures/zookeeper_server.h"
#include "tests/fixtures/zookeeper_test_client.h"

namespace regent::testing {
namespace {

constexpr Duration kPollInterval{50};
constexpr Duration kStartTimeout{60000};

std::string quoted(const std::string& text) { return "\"" + text + "\""; }

}  // namespace

// ---- Events -----------------------------------------------------------------------------------

std::string JobEvent::describe() const {
  static constexpr const char* kNames[] = {"attempt deployed", "attempt state", "job state",
                                           "job ended",        "job clean",     "job reconciling",
                                           "attempt adopted",  "job reconciled"};
  std::string out = std::string(kNames[static_cast<int>(kind)]) + " job=" + job;
  if (!vertex.empty()) {
    out += " vertex=" + vertex + " subtask=" + std::to_string(subtask) + " attempt=" + attempt;
  }
  if (kind == Kind::kAttemptDeployed) {
    out += " attempt_number=" + std::to_string(attemptNumber) + " resource_id=" + resourceId;
  }
  if (kind == Kind::kAttemptAdopted) {
    out += " attempt_number=" + std::to_string(attemptNumber) + " worker=" + resourceId +
           " pid=" + std::to_string(pid);
  }
  if (kind == Kind::kJobReconciling) out += " expected=" + std::to_string(expected);
  if (kind == Kind::kJobReconciled) {
    out += " adopted=" + std::to_string(adopted) + " ended=" + std::to_string(ended) +
           " unreported=" + std::to_string(unreported) +
           " timed_out=" + (timedOut ? "true" : "false");
  }
  if (!state.empty()) out += " state=" + state;
  if (kind == Kind::kAttemptState) {
    out += " exit_code=" + std::to_string(exitCode) + " signal=" + std::to_string(signal);
  }
  if (kind == Kind::kJobState || kind == Kind::kJobEnded) {
    out += " restarts=" + std::to_string(restarts);
  }
  if (!message.empty()) out += " message=" + quoted(message);
  return out;
}

std::string TaskEvent::describe() const {
  std::string out = std::string(kind == Kind::kStarted ? "task started" : "task ended") +
                    " resource_id=" + resourceId + " job=" + job + " attempt=" + attempt;
  if (kind == Kind::kStarted) return out + " pid=" + std::to_string(pid);
  out += " state=" + state + " exit_code=" + std::to_string(exitCode) +
         " signal=" + std::to_string(signal);
  if (!message.empty()) out += " message=" + quoted(message);
  return out;
}

namespace {

using JobKind = JobEvent::Kind;
constexpr EventKindName<JobEvent> kJobEvents[] = {
    {JobKind::kAttemptDeployed, "attempt deployed"},
    {JobKind::kAttemptState, "attempt state"},
    {JobKind::kJobState, "job state"},
    {JobKind::kJobEnded, "job ended"},
    {JobKind::kJobClean, "job clean"},
    {JobKind::kJobReconciling, "job reconciling"},
    {JobKind::kAttemptAdopted, "attempt adopted"},
    {JobKind::kJobReconciled, "job reconciled"},
};

// Fills `event` from the fields its kind carries; false if one is missing or malformed.
bool fillJobEvent(JobEvent& event, const EventFields& fields) {
  using Kind = JobEvent::Kind;
  const bool epochOptional = event.kind == Kind::kJobReconciling ||
                             event.kind == Kind::kAttemptAdopted ||
                             event.kind == Kind::kJobReconciled;
  auto epoch = fields.getUint("epoch");
  auto job = fields.get("job");
  if ((!epoch && !epochOptional) || !job) return false;
  event.epoch = epoch.value_or(0);
  event.job = *job;
  event.state = fields.get("state").value_or("");
  // Every attempt event names its attempt the same way.
  if (event.kind == Kind::kAttemptDeployed || event.kind == Kind::kAttemptState ||
      event.kind == Kind::kAttemptAdopted) {
    auto vertex = fields.get("vertex");
    auto subtask = fields.getUint("subtask");
    auto attempt = fields.get("attempt");
    if (!vertex || !subtask || !attempt) return false;
    event.vertex = *vertex;
    event.subtask = static_cast<uint32_t>(*subtask);
    event.attempt = *attempt;
  }
  switch (event.kind) {
    case Kind::kAttemptDeployed:
    case Kind::kAttemptState: {
      if (event.kind == Kind::kAttemptDeployed) {
        event.attemptNumber = static_cast<uint32_t>(fields.getUint("attempt_number").value_or(0));
        event.resourceId = fields.get("resource_id").value_or("");
      } else {
        if (event.state.empty()) return false;
        event.exitCode = static_cast<int>(fields.getInt("exit_code").value_or(0));
        event.signal = static_cast<int>(fields.getInt("signal").value_or(0));
        event.message = fields.get("message").value_or("");
      }
      return true;
    }
    case Kind::kJobState:
    case Kind::kJobEnded:
      event.restarts = static_cast<uint32_t>(fields.getUint("restarts").value_or(0));
      return !event.state.empty();
    case Kind::kJobClean:
      return !event.state.empty();
    case Kind::kJobReconciling: {
      auto expected = fields.getUint("expected");
      if (!expected) return false;
      event.expected = static_cast<uint32_t>(*expected);
      return true;
    }
    case Kind::kAttemptAdopted: {
      auto pid = fields.getInt("pid");
      if (!pid) return false;
      event.attemptNumber = static_cast<uint32_t>(fields.getUint("attempt_number").value_or(0));
      event.resourceId = fields.get("worker").value_or("");
      event.pid = *pid;
      return true;
    }
    case Kind::kJobReconciled: {
      auto adopted = fields.getUint("adopted");
      auto ended = fields.getUint("ended");
      auto unreported = fields.getUint("unreported");
      auto timedOut = fields.get("timed_out");
      if (!adopted || !ended || !unreported || !timedOut ||
          (*timedOut != "true" && *timedOut != "false")) {
        return false;
      }
      event.adopted = static_cast<uint32_t>(*adopted);
      event.ended = static_cast<uint32_t>(*ended);
      event.unreported = static_cast<uint32_t>(*unreported);
      event.timedOut = *timedOut == "true";
      return true;
    }
  }
  return false;
}

constexpr EventKindName<TaskEvent> kTaskEvents[] = {
    {TaskEvent::Kind::kStarted, "task started"},
    {TaskEvent::Kind::kEnded, "task ended"},
};

bool fillTaskEvent(TaskEvent& event, const EventFields& fields) {
  using Kind = TaskEvent::Kind;
  auto resourceId = fields.get("resource_id");
  auto job = fields.get("job");
  auto attempt = fields.get("attempt");
  if (!resourceId || !job || !attempt) return false;
  event.resourceId = *resourceId;
  event.job = *job;
  event.attempt = *attempt;
  if (event.kind == Kind::kStarted) {
    auto pid = fields.getInt("pid");
    if (!pid) return false;
    event.pid = *pid;
    return true;
  }
  auto state = fields.get("state");
  if (!state) return false;
  event.state = *state;
  event.exitCode = static_cast<int>(fields.getInt("exit_code").value_or(0));
  event.signal = static_cast<int>(fields.getInt("signal").value_or(0));
  event.message = fields.get("message").value_or("");
  return true;
}

}  // namespace

std::optional<JobEvent> parseJobEvent(const Event& event) {
  return parseKindEvent(event, kJobEvents, fillJobEvent);
}

std::optional<TaskEvent> parseTaskEvent(const Event& event) {
  return parseKindEvent(event, kTaskEvents, fillTaskEvent);
}

std::vector<JobEvent> parseJobEvents(const std::vector<Event>& events) {
  std::vector<JobEvent> parsed;
  for (const Event& event : events) {
    if (auto job = parseJobEvent(event)) parsed.push_back(std::move(*job));
  }
  return parsed;
}

std::vector<TaskEvent> parseTaskEvents(const std::vector<Event>& events) {
  std::vector<TaskEvent> parsed;
  for (const Event& event : events) {
    if (auto task = parseTaskEvent(event)) parsed.push_back(std::move(*task));
  }
  return parsed;
}

// ---- Processes a task left ----------------------------------------------------------------------

bool processGone(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  // It exists: gone all the same if only its zombie is left ("pid (comm) Z ...").
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  const size_t close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'Z';
}

std::vector<pid_t> waitForProcessesGone(const std::vector<pid_t>& pids, Duration timeout) {
  std::vector<pid_t> alive;
  waitUntil(
      [&] {
        alive.clear();
        for (pid_t pid : pids) {
          if (!processGone(pid)) alive.push_back(pid);
        }
        return alive.empty();
      },
      timeout, kPollInterval);
  return alive;
}

std::vector<pid_t> readPids(const std::string& path) {
  std::vector<pid_t> pids;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    char* end = nullptr;
    const long pid = std::strtol(line.c_str(), &end, 10);
    if (end != nullptr && *end == '\0' && pid > 0) pids.push_back(static_cast<pid_t>(pid));
  }
  return pids;
}

// ---- Marked tasks -------------------------------------------------------------------------------

std::string markedJob(const std::string& name, const std::string& dir,
                      const std::vector<MarkedVertex>& vertices,
                      const std::string& restartStrategy) {
  std::string yaml = "name: " + name + "\nvertices:\n";
  for (const MarkedVertex& vertex : vertices) {
    yaml +=
        "  - name: " + vertex.name + "\n    parallelism: " + std::to_string(vertex.parallelism) +
        "\n    command:\n      argv:\n"
        "        - /bin/sh\n        - -c\n        - |\n"
        "          m=\"$DIR/$REGENT_TASK_VERTEX-$REGENT_TASK_SUBTASK_INDEX\"\n"
        "          echo \"$$ $REGENT_TASK_ATTEMPT_ID $REGENT_TASK_ATTEMPT_NUMBER\" >> \"$m\"\n"
        "          w=0\n"
        "          while [ ! -e \"$m.go\" ] && [ $w -lt 6000 ]; do sleep 0.1; w=$((w+1)); done\n"
        "          [ ! -e \"$m.fail-$REGENT_TASK_ATTEMPT_NUMBER\" ]\n"
        "      env:\n        DIR: " +
        dir + "\n";
    if (!vertex.upstream.empty()) {
      yaml += "    upstream: [";
      for (size_t i = 0; i < vertex.upstream.size(); ++i) {
        yaml += (i == 0 ? "" : ", ") + vertex.upstream[i];
      }
      yaml += "]\n";
    }
  }
  if (!restartStrategy.empty()) yaml += "restart_strategy:\n" + restartStrategy;
  return yaml;
}

std::string TaskMarker::describe() const {
  return "pid=" + std::to_string(pid) + " attempt=" + attempt +
         " attempt_number=" + std::to_string(attemptNumber);
}

std::string markerPath(const std::string& dir, const std::string& vertex, uint32_t subtask) {
  return dir + "/" + vertex + "-" + std::to_string(subtask);
}

std::vector<TaskMarker> readMarkers(const std::string& dir, const std::string& vertex,
                                    uint32_t subtask) {
  std::vector<TaskMarker> markers;
  std::ifstream in(markerPath(dir, vertex, subtask));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    TaskMarker marker;
    long pid = 0;
    if (fields >> pid >> marker.attempt >> marker.attemptNumber && pid > 0) {
      marker.pid = static_cast<pid_t>(pid);
      markers.push_back(std::move(marker));
    }
  }
  return markers;
}

Result<std::vector<TaskMarker>> waitForMarkers(const std::string& dir, const std::string& vertex,
                                               uint32_t subtask, size_t count, Duration timeout) {
  std::vector<TaskMarker> markers;
  const bool held = waitUntil(
      [&] {
        markers = readMarkers(dir, vertex, subtask);
        return markers.size() >= count;
      },
      timeout, kPollInterval);
  if (held) return markers;
  std::string text;
  for (const TaskMarker& marker : markers) text += "\n  " + marker.describe();
  return Error::fatal(markerPath(dir, vertex, subtask) + " holds " +
                      std::to_string(markers.size()) + " starts, not " + std::to_string(count) +
                      ", after " + std::to_string(timeout.count()) + " ms:" + text);
}

Result<std::vector<TaskMarker>> waitForFirstStarts(const std::string& dir,
                                                   const std::string& vertex, uint32_t parallelism,
                                                   Duration timeout) {
  std::vector<TaskMarker> firsts;
  for (uint32_t i = 0; i < parallelism; ++i) {
    auto markers = waitForMarkers(dir, vertex, i, 1, timeout);
    if (!markers.ok()) return markers.error();
    firsts.push_back(markers.value()[0]);
  }
  return firsts;
}

void letSubtaskEnd(const std::string& dir, const std::string& vertex, uint32_t subtask) {
  std::ofstream(markerPath(dir, vertex, subtask) + ".go") << "go\n";
}

void failAttemptNumber(const std::string& dir, const std::string& vertex, uint32_t subtask,
                       uint32_t attemptNumber) {
  std::ofstream(markerPath(dir, vertex, subtask) + ".fail-" + std::to_string(attemptNumber))
      << "fail\n";
}

// ---- A cluster that runs jobs -------------------------------------------------------------------

JobCluster::JobCluster(std::string clusterId, std::string quorum, JobClusterOptions options)
    : clusterId_(std::move(clusterId)), quorum_(std::move(quorum)), options_(std::move(options)) {
  // Tasks run as worker.task-user (nobody) when the tests run as root: let them write here.
  ::chmod(taskDir_.path().c_str(), 01777);
}

JobCluster::~JobCluster() = default;

Result<std::unique_ptr<JobCluster>> JobCluster::start(const std::string& name,
                                                      JobClusterOptions options) {
  auto server = sharedZooKeeperServer();
  if (!server.ok()) return server.error();
  std::unique_ptr<JobCluster> cluster(
      new JobCluster(uniqueClusterId(name), server.value()->connectString(), std::move(options)));
  JobCluster& c = *cluster;

  MasterClusterOptions masters = workerTestMasters(c.quorum_, c.clusterId_);
  if (!c.options_.masterConfig.empty()) {
    masters.configFile = c.writeFile("master.yaml", c.options_.masterConfig);
  }
  masters.extraSet.insert(masters.extraSet.end(), c.options_.masterSet.begin(),
                          c.options_.masterSet.end());
  WorkerClusterOptions workers = workerTestWorkers(c.quorum_, c.clusterId_);
  workers.slots = c.options_.slotsPerWorker;
  workers.extraSet.push_back(kTestTaskCancelTimeout);
  workers.extraSet.insert(workers.extraSet.end(), c.options_.workerSet.begin(),
                          c.options_.workerSet.end());
  workers.env = c.options_.workerEnv;
  c.masters_ = std::make_unique<MasterCluster>(std::move(masters));
  c.workers_ = std::make_unique<WorkerCluster>(std::move(workers));
  c.regentctl_ = std::make_unique<Regentctl>(c.quorum_, c.clusterId_);

  auto first = c.masters_->startMasters(c.options_.masters);
  if (!first.ok()) return first.error();
  auto leader = c.masters_->waitForGrant(1, kStartTimeout);
  if (!leader.ok()) return leader.error();
  c.leader_ = leader.value();
  auto epoch = waitForServing(*c.masters_, c.leader_, kStartTimeout);
  if (!epoch.ok()) return epoch.error();
  c.epoch_ = epoch.value();
  for (size_t w = 0; w < c.options_.workers; ++w) {
    auto added = c.addWorker();
    if (!added.ok()) return added.error();
  }
  return cluster;
}

Status JobCluster::followLeader(uint64_t epoch, const std::vector<size_t>& notWaitingFor) {
  auto leader = masters_->waitForGrant(epoch, kStartTimeout);
  if (!leader.ok()) return leader.error();
  auto serving = masters_->waitForEvent(
      leader.value(),
      [&](const MasterEvent& e) { return e.kind == MasterEvent::Kind::kServing && e.epoch == epoch; },
      kStartTimeout);
  if (!serving.ok()) return serving.error();
  leader_ = leader.value();
  epoch_ = epoch;
  for (size_t w = 0; w < workers_->size(); ++w) {
    if (!workers_->process(w).running()) continue;
    if (std::find(notWaitingFor.begin(), notWaitingFor.end(), w) != notWaitingFor.end()) continue;
    auto registered = workers_->waitForRegistered(w, epoch, kStartTimeout);
    if (!registered.ok()) return registered.error();
  }
  return {};
}

Result<size_t> JobCluster::addWorker() {
  auto slot = workers_->startWorker();
  if (!slot.ok()) return slot.error();
  // The directory holding the workers' data directories was made private (mkdtemp, 0700); as
  // /var/lib would, let the task user through it to its attempt's directory (the worker makes
  // its own data directory traversable, not what lies above it).
  const std::string& dataDir = workers_->dataDir(slot.value());
  ::chmod(dataDir.substr(0, dataDir.rfind('/')).c_str(), 0711);
  auto registered = workers_->waitForRegistered(slot.value(), epoch_, kStartTimeout);
  if (!registered.ok()) return registered.error();
  return slot.value();
}

std::optional<size_t> JobCluster::workerSlotOf(const std::string& resourceId) {
  for (size_t w = 0; w < workers_->size(); ++w) {
    if (workers_->resourceId(w) == resourceId) return w;
  }
  return std::nullopt;
}

std::string JobCluster::writeFile(const std::string& name, const std::string& text) {
  const std::string path = dir_.path() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

CtlResult JobCluster::ctl(const std::vector<std::string>& args) {
  return ctlWith(options_.ctlSet, args);
}

CtlResult JobCluster::ctlWith(const std::vector<std::string>& set,
                              const std::vector<std::string>& args) {
  std::vector<std::string> common{"--zk",  quorum_, "--cluster-id", clusterId_, "--timeout",
                                  "30s",   "--set", "rpc.call-timeout=3s"};
  for (const std::string& entry : set) common.insert(common.end(), {"--set", entry});
  return regentctlChecked(dir_.path(), common, args);
}

Result<std::string> JobCluster::submit(const std::string& yaml) {
  const std::string path = writeFile("job-" + std::to_string(files_++) + ".yaml", yaml);
  CtlResult submitted = ctl({"jobs", "submit", path});
  std::smatch id;
  static const std::regex kJobId("^([0-9a-f]{32})$", std::regex::multiline);
  if (submitted.exit.exitCode != 0 || !std::regex_search(submitted.output, id, kJobId)) {
    return Error::fatal("regentctl jobs submit " + path + ": " + submitted.exit.describe() +
                        "\n" + submitted.output);
  }
  return std::string(id[1]);
}

Result<nlohmann::json> JobCluster::status(const std::string& job) {
  CtlResult status = ctl({"--json", "jobs", "status", job});
  const auto lines = jsonLines(status.output);
  if (status.exit.exitCode != 0 || lines.size() != 1) {
    return Error::retryable("regentctl --json jobs status " + job + ": " +
                            status.exit.describe() + "\n" + status.output);
  }
  return nlohmann::json::parse(lines[0]);
}

Result<nlohmann::json> JobCluster::waitForStatus(
    const std::string& job, const std::function<bool(const nlohmann::json&)>& done,
    Duration timeout) {
  std::optional<nlohmann::json> last;
  std::string lastError;
  const bool held = waitUntil(
      [&] {
        auto current = status(job);
        if (!current.ok()) {
          lastError = current.error().message;
          return false;
        }
        last = std::move(current).value();
        return done(*last);
      },
      timeout, Duration(200));
  if (held) return *last;
  return Error::fatal("the status of job " + job + " did not become the one expected within " +
                      std::to_string(timeout.count()) + " ms; last status: " +
                      (last ? last->dump() : std::string("(none)")) + "\nlast error: " +
                      lastError + "\n" + describe());
}

Result<std::map<std::string, std::string>> JobCluster::listJobs() {
  CtlResult list = ctl({"--json", "jobs", "list"});
  if (list.exit.exitCode != 0) {
    return Error::fatal("regentctl --json jobs list: " + list.exit.describe() + "\n" +
                        list.output);
  }
  std::map<std::string, std::string> jobs;
  for (const auto& line : jsonLines(list.output)) {
    auto job = nlohmann::json::parse(line);
    jobs[textField(job, "job_id")] = textField(job, "state");
  }
  return jobs;
}

const std::vector<Event>& JobCluster::eventsIn(const std::string& path) {
  return eventsFiles_.try_emplace(path, path).first->second.read();
}

Result<nlohmann::json> JobCluster::endedStatus(const std::string& job, const std::string& state) {
  auto read = status(job);
  if (!read.ok()) return read.error();
  const nlohmann::json& json = read.value();
  const bool clean =
      json.contains("result") && json["result"].is_object() && json["result"].value("clean", false);
  if (textField(json, "state") != state || !clean) {
    return Error::fatal("job " + job + " should have ended " + state +
                        " with its result clean: " + json.dump());
  }
  return read;
}

std::vector<JobEvent> JobCluster::jobEvents() {
  return parseJobEvents(eventsIn(masters_->eventsPath(leader_)));
}

Result<JobEvent> JobCluster::waitForJobEvent(const std::function<bool(const JobEvent&)>& match,
                                             Duration timeout) {
  auto found = pollForEvent<JobEvent>([&] { return jobEvents(); }, match, timeout, kPollInterval);
  if (!found) {
    return Error::fatal("the leader logged no matching job event within " +
                        std::to_string(timeout.count()) + " ms\n" + describe());
  }
  return *found;
}

Result<JobEvent> JobCluster::waitForJobClean(const std::string& job, Duration timeout) {
  return waitForJobEvent(
      [&](const JobEvent& e) { return e.kind == JobEvent::Kind::kJobClean && e.job == job; },
      timeout);
}

Result<JobEvent> JobCluster::waitForJobEnd(const std::string& job, const std::string& state,
                                           uint32_t restarts, Duration timeout) {
  auto clean = waitForJobClean(job, timeout);
  if (!clean.ok()) return clean.error();
  const std::vector<JobEvent> ended = jobEventsOf(job, JobEvent::Kind::kJobEnded);
  std::string differs;
  if (clean.value().state != state) {
    differs = "it is clean in state " + clean.value().state;
  } else if (ended.size() != 1) {
    differs = "it ended " + std::to_string(ended.size()) + " times";
  } else if (ended[0].state != state || ended[0].restarts != restarts) {
    differs = "it ended: " + ended[0].describe();
  }
  if (!differs.empty()) {
    return Error::fatal("job " + job + " should have ended once, " + state + " after " +
                        std::to_string(restarts) + " restarts; " + differs + "\n" + describe());
  }
  return ended[0];
}

Result<JobEvent> JobCluster::waitForJobReconciled(const std::string& job, Duration timeout) {
  return waitForJobEvent(
      [&](const JobEvent& e) { return e.kind == JobEvent::Kind::kJobReconciled && e.job == job; },
      timeout);
}

std::vector<JobEvent> JobCluster::jobEventsOf(const std::string& job, JobEvent::Kind kind) {
  std::vector<JobEvent> matching;
  for (JobEvent& event : jobEvents()) {
    if (event.job == job && event.kind == kind) matching.push_back(std::move(event));
  }
  return matching;
}

std::vector<TaskEvent> JobCluster::taskEvents(size_t worker) {
  return parseTaskEvents(eventsIn(workers_->eventsPath(worker)));
}

Result<TaskEvent> JobCluster::waitForTaskEvent(const std::function<bool(const TaskEvent&)>& match,
                                               Duration timeout) {
  auto found = pollForEvent<TaskEvent>(
      [&] {
        std::vector<TaskEvent> all;
        for (size_t w = 0; w < workers_->size(); ++w) {
          for (TaskEvent& event : taskEvents(w)) all.push_back(std::move(event));
        }
        return all;
      },
      match, timeout, kPollInterval);
  if (!found) {
    return Error::fatal("no worker logged a matching task event within " +
                        std::to_string(timeout.count()) + " ms\n" + describe());
  }
  return *found;
}

std::vector<TaskEvent> JobCluster::taskEventsOf(const std::string& job, TaskEvent::Kind kind) {
  std::vector<TaskEvent> matching;
  for (size_t w = 0; w < workers_->size(); ++w) {
    for (TaskEvent& event : taskEvents(w)) {
      if (event.job == job && event.kind == kind) matching.push_back(std::move(event));
    }
  }
  return matching;
}

Result<bool> JobCluster::nodeExists(const std::string& relativePath) {
  auto client = ZooKeeperTestClient::connect(quorum_);
  if (!client.ok()) return client.error();
  // ha.zookeeper.root (default /regent) + "/" + cluster-id (docs/zookeeper.md).
  return client.value()->exists("/regent/" + clusterId_ + "/" + relativePath);
}

Result<bool> JobCluster::jobGraphStored(const std::string& job) {
  return nodeExists("jobgraphs/" + job);
}

Result<bool> JobCluster::jobResultStored(const std::string& job) {
  return nodeExists("job-results/" + job);
}

Result<SlotTable> JobCluster::waitForAllSlotsFree(Duration timeout) {
  size_t expected = 0;
  for (size_t w = 0; w < workers_->size(); ++w) {
    if (workers_->process(w).running()) expected += options_.slotsPerWorker;
  }
  return regentctl_->waitForTable(
      [&](const SlotTable& table) {
        return table.size() == expected && countState(table, "FREE") == expected;
      },
      timeout);
}

Result<double> JobCluster::tasksRunning(size_t worker) {
  auto metrics = workerMetrics(worker);
  if (!metrics.ok()) return metrics.error();
  auto running = metricValue(metrics.value(), "regent_worker_tasks_running", "");
  if (!running) {
    return Error::fatal("worker " + std::to_string(worker) +
                        " /metrics has no regent_worker_tasks_running:\n" + metrics.value());
  }
  return *running;
}

namespace {

Result<std::string> metricsText(EventLoop& loop, const std::string& address) {
  auto metrics = httpGetText(loop, address, "/metrics");
  if (!metrics.ok()) return metrics.error();
  if (metrics.value().first != 200) {
    return Error::fatal("GET /metrics from " + address + ": status " +
                        std::to_string(metrics.value().first));
  }
  return metrics.value().second;
}

}  // namespace

Result<std::string> JobCluster::masterHttpAddress() { return masterHttpAddressOf(leader_); }

Result<std::string> JobCluster::masterHttpAddressOf(size_t index) {
  const std::regex pattern("http listening on (\\S+)");
  auto line = masters_->process(index).waitForLine(pattern, kStartTimeout);
  if (!line.ok()) return line.error();
  std::smatch address;
  if (!std::regex_search(line.value(), address, pattern)) {
    return Error::fatal("no address in: " + line.value());
  }
  return std::string(address[1]);
}

Result<std::string> JobCluster::masterMetrics() {
  auto address = masterHttpAddress();
  if (!address.ok()) return address.error();
  return metricsText(loop_, address.value());
}

Result<std::string> JobCluster::workerMetrics(size_t worker) {
  return metricsText(loop_, workers_->httpAddress(worker));
}

std::string JobCluster::describe() { return masters_->describe() + workers_->describe(); }

const nlohmann::json* vertexStatus(const nlohmann::json& status, const std::string& vertex) {
  if (!status.contains("vertices") || !status["vertices"].is_array()) return nullptr;
  for (const auto& v : status["vertices"]) {
    if (textField(v, "name") == vertex) return &v;
  }
  return nullptr;
}

const nlohmann::json* subtaskStatus(const nlohmann::json& status, const std::string& vertex,
                                    uint32_t index) {
  const nlohmann::json* v = vertexStatus(status, vertex);
  if (v == nullptr || !v->contains("subtasks") || !(*v)["subtasks"].is_array()) return nullptr;
  for (const auto& subtask : (*v)["subtasks"]) {
    if (subtask.contains("index") && subtask["index"].is_number_unsigned() &&
        subtask["index"].get<uint32_t>() == index) {
      return &subtask;
    }
  }
  return nullptr;
}

Result<std::vector<nlohmann::json>> waitForSubtaskAttempts(
    JobCluster& cluster, const std::string& job, const std::string& vertex, uint32_t parallelism,
    const std::string& state, Duration timeout) {
  auto attemptOf = [&](const nlohmann::json& status, uint32_t index) -> const nlohmann::json* {
    const nlohmann::json* subtask = subtaskStatus(status, vertex, index);
    if (subtask == nullptr || !subtask->contains("attempt")) return nullptr;
    const nlohmann::json& attempt = (*subtask)["attempt"];
    return attempt.is_object() ? &attempt : nullptr;
  };
  auto status = cluster.waitForStatus(
      job,
      [&](const nlohmann::json& s) {
        for (uint32_t i = 0; i < parallelism; ++i) {
          const nlohmann::json* attempt = attemptOf(s, i);
          if (attempt == nullptr || textField(*attempt, "state") != state) return false;
        }
        return true;
      },
      timeout);
  if (!status.ok()) return status.error();
  std::vector<nlohmann::json> attempts;
  for (uint32_t i = 0; i < parallelism; ++i) attempts.push_back(*attemptOf(status.value(), i));
  return attempts;
}

std::string textField(const nlohmann::json& object, const char* key) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_string()) return "";
  return object[key].get<std::string>();
}

Result<RunningJob> submitAndWaitRunning(JobCluster& cluster, const std::string& jobFile,
                                        const std::string& vertex, uint32_t parallelism,
                                        Duration timeout) {
  auto submitted = cluster.submit(jobFile);
  if (!submitted.ok()) return submitted.error();
  RunningJob running{.id = submitted.value()};
  auto markers = waitForFirstStarts(cluster.taskDir(), vertex, parallelism, timeout);
  if (!markers.ok()) return markers.error();
  running.markers = std::move(markers.value());
  auto attempts =
      waitForSubtaskAttempts(cluster, running.id, vertex, parallelism, "RUNNING", timeout);
  if (!attempts.ok()) return attempts.error();
  running.attempts = std::move(attempts.value());
  return running;
}

std::string reconciliationMismatch(const JobEvent& reconciled,
                                   const ExpectedReconciliation& expected) {
  const bool matches = (!expected.adopted || reconciled.adopted == *expected.adopted) &&
                       (!expected.adoptedOrEnded ||
                        reconciled.adopted + reconciled.ended == *expected.adoptedOrEnded) &&
                       reconciled.unreported == expected.unreported &&
                       reconciled.timedOut == expected.timedOut;
  if (matches) return "";
  std::string wanted;
  if (expected.adopted) wanted += "adopted=" + std::to_string(*expected.adopted) + " ";
  if (expected.adoptedOrEnded) {
    wanted += "adopted+ended=" + std::to_string(*expected.adoptedOrEnded) + " ";
  }
  wanted += "unreported=" + std::to_string(expected.unreported) +
            " timed_out=" + (expected.timedOut ? "true" : "false");
  return "expected " + wanted + ", got: " + reconciled.describe();
}

Result<JobEvent> waitForReconciliation(JobCluster& cluster, const std::string& job,
                                       const ExpectedReconciliation& expected, Duration timeout) {
  auto reconciled = cluster.waitForJobReconciled(job, timeout);
  if (!reconciled.ok()) return reconciled.error();
  const std::string mismatch = reconciliationMismatch(reconciled.value(), expected);
  if (!mismatch.empty()) return Error::fatal("job " + job + " reconciled otherwise: " + mismatch);
  return reconciled.value();
}

}  // namespace regent::testing

// Text and JSON rendering of leaders, contenders, workers and slots for regentctl (see
// regentctl_output.h).
#include "cli/regentctl_output.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string_view>

#include "common/ids.h"
#include "common/units.h"
#include "common/utf8.h"
#include "rpc/task_executor_json.h"
#include "rpc/wire_ids.h"

namespace regent::cli {
namespace {

const char* roleOf(const leader::ContenderEntry& contender) {
  return contender.leader ? "LEADER" : "STANDBY";
}

}  // namespace

std::string alignColumns(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string jsonText(capnp::Text::Reader text) {
  return sanitizeUtf8(std::string_view(text.begin(), text.size()));
}

std::string shownText(capnp::Text::Reader text) {
  return printableUtf8(std::string_view(text.begin(), text.size()));
}

std::string jsonLine(const nlohmann::json& json) {
  return json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string leaderText(const leader::LeaderInfo& leader) {
  return alignColumns({
      {"epoch:", std::to_string(leader.epoch)},
      {"master id:", leader.masterId},
      {"rpc address:", leader.rpcAddress},
      {"http address:", leader.httpAddress},
      {"host:", leader.host},
      {"pid:", std::to_string(leader.pid)},
      {"elected at:", formatUtcMillis(leader.electedAtMs)},
      {"status:", leader::leaderStatusName(leader.status)},
  });
}

std::string leaderWatchLine(const std::optional<leader::LeaderInfo>& leader, int64_t nowMillis) {
  std::string line = formatUtcMillis(nowMillis);
  if (!leader) return line + " no leader";
  return line + " leader epoch=" + std::to_string(leader->epoch) +
         " master_id=" + leader->masterId + " rpc=" + leader->rpcAddress +
         " http=" + leader->httpAddress + " host=" + leader->host +
         " pid=" + std::to_string(leader->pid) +
         " elected_at=" + formatUtcMillis(leader->electedAtMs) +
         " status=" + leader::leaderStatusName(leader->status);
}

std::string leaderJson(const std::optional<leader::LeaderInfo>& leader,
                       std::optional<int64_t> observedAtMillis, const std::string& staleReason) {
  nlohmann::ordered_json object;
  if (leader) {
    object["epoch"] = leader->epoch;
    object["master_id"] = leader->masterId;
    object["rpc_address"] = leader->rpcAddress;
    object["http_address"] = leader->httpAddress;
    object["host"] = leader->host;
    object["pid"] = leader->pid;
    object["elected_at"] = formatUtcMillis(leader->electedAtMs);
    object["elected_at_ms"] = leader->electedAtMs;
    object["status"] = leader::leaderStatusName(leader->status);
  } else {
    object["status"] = "NONE";
  }
  if (observedAtMillis) object["observed_at"] = formatUtcMillis(*observedAtMillis);
  if (leader && !staleReason.empty()) object["stale"] = staleReason;
  return object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string mastersTable(const std::vector<leader::ContenderEntry>& contenders) {
  std::vector<std::vector<std::string>> rows = {{"LATCH", "ROLE", "MASTER ID", "RPC ADDRESS",
                                                 "HTTP ADDRESS", "HOST", "PID", "STARTED AT"}};
  for (const auto& contender : contenders) {
    const auto& info = contender.info;
    rows.push_back({contender.latchNode, roleOf(contender), info.masterId, info.rpcAddress,
                    info.httpAddress, info.host, std::to_string(info.pid),
                    formatUtcMillis(info.startedAtMs)});
  }
  return alignColumns(rows);
}

std::string contenderJson(const leader::ContenderEntry& contender) {
  const auto& info = contender.info;
  nlohmann::ordered_json object;
  object["latch"] = contender.latchNode;
  object["role"] = roleOf(contender);
  object["master_id"] = info.masterId;
  object["rpc_address"] = info.rpcAddress;
  object["http_address"] = info.httpAddress;
  object["host"] = info.host;
  object["pid"] = info.pid;
  object["version"] = info.version;
  object["started_at"] = formatUtcMillis(info.startedAtMs);
  object["started_at_ms"] = info.startedAtMs;
  return object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

std::string ageText(int64_t thenMillis, int64_t nowMillis) {
  if (thenMillis == 0) return "-";
  const int64_t age = std::max<int64_t>(0, nowMillis - thenMillis);
  char text[32];
  std::snprintf(text, sizeof text, "%lld.%llds ago", static_cast<long long>(age / 1000),
                static_cast<long long>((age % 1000) / 100));
  return text;
}

std::string cpuText(uint32_t cpuMillis) {
  char text[32];
  std::snprintf(text, sizeof text, "%u.%03u", cpuMillis / 1000, cpuMillis % 1000);
  return text;
}

std::string idOrDash(const nlohmann::json& id) {
  return id.is_null() ? "-" : id.get<std::string>();
}

}  // namespace

std::string workersTable(capnp::List<wire::TaskExecutorInfo>::Reader workers, int64_t nowMillis) {
  std::vector<std::vector<std::string>> rows{
      {"RESOURCE ID", "HOST", "ADDRESS", "SLOTS", "FREE", "CONTAINMENT", "STARTED BY",
       "REGISTERED", "LAST HEARTBEAT"}};
  for (auto worker : workers) {
    auto registration = worker.getRegistration();
    std::string free = "-";
    if (worker.getSlots().size() > 0) {
      size_t count = 0;
      for (auto slot : worker.getSlots()) count += wire::slotState(slot, false) == "FREE";
      free = std::to_string(count);
    }
    // "cgroup v2", "subreaper": the description up to its parenthesis (the JSON has it whole).
    std::string containment = shownText(registration.getContainment());
    containment = containment.substr(0, containment.find(" ("));
    rows.push_back({wire::idFromWire<ResourceId>(registration.getResourceId()).toHex(),
                    shownText(registration.getHost()), shownText(registration.getHttpAddress()),
                    std::to_string(registration.getNumberOfSlots()), free,
                    containment.empty() ? "-" : containment,
                    registration.getProviderWorkerId().size() == 0
                        ? "-"
                        : shownText(registration.getProviderWorkerId()),
                    worker.getRegisteredAtMs() == 0 ? "-"
                                                    : formatUtcMillis(worker.getRegisteredAtMs()),
                    ageText(worker.getLastHeartbeatAtMs(), nowMillis)});
  }
  return alignColumns(rows);
}

std::string startedWorkersTable(capnp::List<wire::StartedWorker>::Reader started,
                                int64_t nowMillis) {
  std::vector<std::vector<std::string>> rows{{"STARTED WORKER", "PHASE", "SINCE", "FROM"}};
  for (auto worker : started) {
    if (std::string_view(worker.getPhase().cStr()) == "registered") continue;
    rows.push_back({shownText(worker.getProviderWorkerId()), shownText(worker.getPhase()),
                    ageText(worker.getSinceMs(), nowMillis),
                    worker.getRecovered() ? "an earlier leader" : "this leader"});
  }
  if (rows.size() == 1) return "";
  return "started by the resource provider, not registered yet or being released:\n" +
         alignColumns(rows);
}

std::string slotsTable(capnp::List<wire::TaskExecutorInfo>::Reader workers) {
  std::vector<std::vector<std::string>> rows{
      {"WORKER", "INDEX", "CPU", "MEMORY", "STATE", "JOB", "ALLOCATION"}};
  for (auto worker : workers) {
    const std::string id =
        wire::idFromWire<ResourceId>(worker.getRegistration().getResourceId()).toHex();
    for (auto slot : worker.getSlots()) {
      const nlohmann::json json = wire::slotJson(slot, false);
      rows.push_back({id, std::to_string(slot.getSlotId().getSlotIndex()),
                      cpuText(slot.getProfile().getCpuMillis()),
                      formatSize(slot.getProfile().getMemoryBytes()),
                      json["state"].get<std::string>(),
                      idOrDash(json["job_id"]), idOrDash(json["allocation_id"])});
    }
  }
  return alignColumns(rows);
}

std::string workersJsonLines(capnp::List<wire::TaskExecutorInfo>::Reader workers) {
  std::string out;
  for (auto worker : workers) out += jsonLine(wire::taskExecutorJson(worker));
  return out;
}

std::string slotsJsonLines(capnp::List<wire::TaskExecutorInfo>::Reader workers) {
  std::string out;
  for (auto worker : workers) {
    const nlohmann::json owner = wire::taskExecutorJson(worker);
    for (auto slot : worker.getSlots()) {
      nlohmann::json json = wire::slotJson(slot, false);
      json["resource_id"] = owner["resource_id"];
      json["host"] = owner["host"];
      out += jsonLine(json);
    }
  }
  return out;
}

}  // namespace regent::cli

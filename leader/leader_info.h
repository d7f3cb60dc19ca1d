// What ZooKeeper holds about masters (docs/zookeeper.md): a contender's latch node
// (ContenderInfo) and the `leader` node (LeaderInfo), both JSON so people and other tools can
// read them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace regent::leader {

struct ContenderInfo {
  std::string masterId;     // Unique per process start (a random hex id).
  std::string rpcAddress;   // host:port
  std::string httpAddress;  // host:port
  std::string host;
  int64_t pid = 0;
  std::string version;
  int64_t startedAtMs = 0;  // Wall clock, ms since the epoch.

  bool operator==(const ContenderInfo&) const = default;
};

enum class LeaderStatus { kRecovering, kServing };

const char* leaderStatusName(LeaderStatus status);  // "RECOVERING", "SERVING"

struct LeaderInfo {
  uint64_t epoch = 0;
  std::string masterId;
  std::string rpcAddress;
  std::string httpAddress;
  std::string host;
  int64_t pid = 0;
  int64_t electedAtMs = 0;  // Wall clock, ms since the epoch.
  LeaderStatus status = LeaderStatus::kRecovering;

  bool operator==(const LeaderInfo&) const = default;
};

// The leader's record for a term of `contender`.
LeaderInfo leaderInfoFor(const ContenderInfo& contender, uint64_t epoch, int64_t electedAtMs);

// One JSON object; field names are snake_case ("master_id", "rpc_address", ...).
std::string toJson(const ContenderInfo& info);
std::string toJson(const LeaderInfo& info);
// Fail, naming the field, on malformed JSON, a missing field or a wrong type. Unknown fields
// are ignored (a newer master may add some).
Result<ContenderInfo> contenderInfoFromJson(std::string_view json);
Result<LeaderInfo> leaderInfoFromJson(std::string_view json);

}  // namespace regent::leader

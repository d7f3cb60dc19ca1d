// How regentctl prints leaders and contenders: aligned text for people, one JSON object per line
// for machines (the shapes are documented in docs/operations.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "leader/leader_info.h"
#include "leader/leader_retrieval.h"

namespace regent::cli {

// "2026-11-21T10:47:49.123Z" (ISO-8601, UTC, milliseconds).
std::string formatUtcMillis(int64_t unixMillis);

// `regentctl leader`: one "name: value" line per field, values aligned.
std::string leaderText(const leader::LeaderInfo& leader);
// One line (no newline) for `leader --watch`: "<now> leader epoch=7 master_id=... status=..." or
// "<now> no leader".
std::string leaderWatchLine(const std::optional<leader::LeaderInfo>& leader, int64_t nowMillis);
// One JSON object (no newline). A leader: epoch, master_id, rpc_address, http_address, host,
// pid, elected_at (ISO), elected_at_ms, status. No leader: {"status":"NONE"}. With
// `observedAtMillis`, an "observed_at" field (ISO) is added (--watch). A non-empty
// `staleReason` adds "stale" with it: the record is left over and no term is live.
std::string leaderJson(const std::optional<leader::LeaderInfo>& leader,
                       std::optional<int64_t> observedAtMillis = std::nullopt,
                       const std::string& staleReason = "");

// `regentctl masters`: a header and one row per contender, columns aligned.
std::string mastersTable(const std::vector<leader::ContenderEntry>& contenders);
// One JSON object (no newline): latch, role (LEADER or STANDBY), master_id, rpc_address,
// http_address, host, pid, version, started_at (ISO), started_at_ms.
std::string contenderJson(const leader::ContenderEntry& contender);

}  // namespace regent::cli

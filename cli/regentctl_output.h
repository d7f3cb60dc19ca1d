// How regentctl prints leaders, contenders, workers and slots: aligned text for people, one JSON
// object per line for machines (the shapes are documented in docs/operations.md), and the text
// helpers every regentctl output uses.
#pragma once

#include <capnp/common.h>
#include <capnp/blob.h>

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/time.h"  // formatUtcMillis, timeOrDash: every regentctl time.
#include "leader/leader_info.h"
#include "leader/leader_retrieval.h"
#include "rpc/schema/cluster.capnp.h"

namespace regent::cli {

// Text a master sent (a job's name, a failure message) for a JSON value: invalid UTF-8 replaced
// by U+FFFD, so that one bad record stored before validation existed cannot break a listing.
std::string jsonText(capnp::Text::Reader text);
// The same for a terminal: also control and bidirectional override characters escaped.
std::string shownText(capnp::Text::Reader text);
// One JSON object as one line with its newline; text is sanitized already, invalid UTF-8 that
// slipped through is replaced as the last guard.
std::string jsonLine(const nlohmann::json& json);
// Rows of cells as lines of columns padded to their widest cell, two spaces apart.
std::string alignColumns(const std::vector<std::vector<std::string>>& rows);

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

// `regentctl workers`: a header and one row per worker (in the order given): RESOURCE ID, HOST,
// ADDRESS (its http address), SLOTS (its number of slots), FREE (free slots of its latest
// report, "-" before its first), CONTAINMENT, STARTED BY (the provider id of a worker a resource
// provider started, "-" for one started by hand), REGISTERED (ISO time), LAST HEARTBEAT (age at
// `nowMillis`, "2.5s ago", or "-"). Host and addresses are shown with control characters escaped.
std::string workersTable(capnp::List<wire::TaskExecutorInfo>::Reader workers, int64_t nowMillis);
// The started workers that are not registered (requested, pending registration, releasing):
// a title line, a header and one row each (STARTED WORKER, PHASE, SINCE as an age at
// `nowMillis`, FROM: "this leader" or "an earlier leader"); "" when there is none.
std::string startedWorkersTable(capnp::List<wire::StartedWorker>::Reader started,
                                int64_t nowMillis);
// `regentctl slots`: a header and one row per reported slot, workers in the order given, slots
// by index: WORKER (resource id), INDEX, CPU (cores, "0.500"), MEMORY ("1GiB"), STATE (FREE or
// ALLOCATED: the wire does not tell pending allocations apart), JOB, ALLOCATION ("-" if free).
std::string slotsTable(capnp::List<wire::TaskExecutorInfo>::Reader workers);
// `workers --json`: one JSON object per worker and line, the shape of an element of
// /v1/workers' "workers".
std::string workersJsonLines(capnp::List<wire::TaskExecutorInfo>::Reader workers);
// `slots --json`: one JSON object per slot and line, a slot of /v1/workers with the worker's
// "resource_id" and "host" added.
std::string slotsJsonLines(capnp::List<wire::TaskExecutorInfo>::Reader workers);

}  // namespace regent::cli

// JSON codecs of the latch node (ContenderInfo) and the `leader` node (LeaderInfo): snake_case
// fields, every field required, errors naming the field.
#include "leader/leader_info.h"

#include <limits>
#include <nlohmann/json.hpp>

namespace regent::leader {
namespace {

using nlohmann::json;

// Reads the fields of one JSON object; the first problem is kept and names the field.
class FieldReader final {
 public:
  FieldReader(const json& object, const char* what) : object_(object), what_(what) {}

  void string(const char* field, std::string& out) {
    const json* value = find(field);
    if (value == nullptr) return;
    if (!value->is_string()) return fail(field, "must be a string");
    out = value->get<std::string>();
  }

  void integer(const char* field, int64_t& out) {
    const json* value = find(field);
    if (value == nullptr) return;
    if (value->is_number_unsigned()) {
      if (value->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return fail(field, "is out of range");
      }
      out = static_cast<int64_t>(value->get<uint64_t>());
      return;
    }
    if (!value->is_number_integer()) return fail(field, "must be an integer");
    out = value->get<int64_t>();
  }

  void unsignedInteger(const char* field, uint64_t& out) {
    const json* value = find(field);
    if (value == nullptr) return;
    if (!value->is_number_unsigned()) return fail(field, "must be a non-negative integer");
    out = value->get<uint64_t>();
  }

  void status(const char* field, LeaderStatus& out) {
    std::string text;
    string(field, text);
    if (!error_.empty()) return;
    if (text == "RECOVERING") {
      out = LeaderStatus::kRecovering;
    } else if (text == "SERVING") {
      out = LeaderStatus::kServing;
    } else {
      fail(field, "must be \"RECOVERING\" or \"SERVING\", not \"" + text + "\"");
    }
  }

  const std::string& error() const { return error_; }

 private:
  const json* find(const char* field) {
    if (!error_.empty()) return nullptr;
    auto it = object_.find(field);
    if (it == object_.end()) {
      fail(field, "is missing");
      return nullptr;
    }
    return &*it;
  }

  void fail(const char* field, const std::string& problem) {
    if (error_.empty()) error_ = std::string(what_) + ": field \"" + field + "\" " + problem;
  }

  const json& object_;
  const char* what_;
  std::string error_;
};

Result<json> parseObject(std::string_view text, const char* what) {
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return Error::fatal(std::string(what) + ": malformed JSON");
  if (!parsed.is_object()) return Error::fatal(std::string(what) + ": not a JSON object");
  return parsed;
}

}  // namespace

const char* leaderStatusName(LeaderStatus status) {
  switch (status) {
    case LeaderStatus::kRecovering:
      return "RECOVERING";
    case LeaderStatus::kServing:
      return "SERVING";
  }
  return "UNKNOWN";
}

LeaderInfo leaderInfoFor(const ContenderInfo& contender, uint64_t epoch, int64_t electedAtMs) {
  return LeaderInfo{
      .epoch = epoch,
      .masterId = contender.masterId,
      .rpcAddress = contender.rpcAddress,
      .httpAddress = contender.httpAddress,
      .host = contender.host,
      .pid = contender.pid,
      .electedAtMs = electedAtMs,
      .status = LeaderStatus::kRecovering,
  };
}

std::string toJson(const ContenderInfo& info) {
  json object = {
      {"master_id", info.masterId},
      {"rpc_address", info.rpcAddress},
      {"http_address", info.httpAddress},
      {"host", info.host},
      {"pid", info.pid},
      {"version", info.version},
      {"started_at_ms", info.startedAtMs},
  };
  return object.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string toJson(const LeaderInfo& info) {
  json object = {
      {"epoch", info.epoch},
      {"master_id", info.masterId},
      {"rpc_address", info.rpcAddress},
      {"http_address", info.httpAddress},
      {"host", info.host},
      {"pid", info.pid},
      {"elected_at_ms", info.electedAtMs},
      {"status", leaderStatusName(info.status)},
  };
  return object.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<ContenderInfo> contenderInfoFromJson(std::string_view text) {
  constexpr const char* kWhat = "contender info";
  auto parsed = parseObject(text, kWhat);
  if (!parsed) return parsed.error();
  ContenderInfo info;
  FieldReader reader(parsed.value(), kWhat);
  reader.string("master_id", info.masterId);
  reader.string("rpc_address", info.rpcAddress);
  reader.string("http_address", info.httpAddress);
  reader.string("host", info.host);
  reader.integer("pid", info.pid);
  reader.string("version", info.version);
  reader.integer("started_at_ms", info.startedAtMs);
  if (!reader.error().empty()) return Error::fatal(reader.error());
  return info;
}

Result<LeaderInfo> leaderInfoFromJson(std::string_view text) {
  constexpr const char* kWhat = "leader info";
  auto parsed = parseObject(text, kWhat);
  if (!parsed) return parsed.error();
  LeaderInfo info;
  FieldReader reader(parsed.value(), kWhat);
  reader.unsignedInteger("epoch", info.epoch);
  reader.string("master_id", info.masterId);
  reader.string("rpc_address", info.rpcAddress);
  reader.string("http_address", info.httpAddress);
  reader.string("host", info.host);
  reader.integer("pid", info.pid);
  reader.integer("elected_at_ms", info.electedAtMs);
  reader.status("status", info.status);
  if (!reader.error().empty()) return Error::fatal(reader.error());
  return info;
}

}  // namespace regent::leader

// The registry of every configuration option: key, type, default, one line of doc, and what a
// valid value looks like. Adding an option is one entry in options.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/result.h"
#include "common/time.h"

namespace regent {

class Config;

enum class OptionType { kString, kEnum, kInt, kDouble, kBool, kDuration, kSize };

// A parsed value; the alternative is fixed by the type: kString and kEnum hold std::string,
// kInt int64_t, kDouble double, kBool bool, kDuration Duration, kSize uint64_t (bytes).
using OptionValue = std::variant<std::string, int64_t, double, bool, Duration, uint64_t>;

// What a value must satisfy beyond parsing as its type.
struct OptionConstraint {
  std::string summary;   // For docs, after the type name: "> 0", "1..1024", "host:port".
  std::string expected;  // Completes "expected ...": "a whole number from 1 to 1024".
  std::function<bool(const OptionValue&)> holds;
};

struct OptionSpec {
  std::string key;  // Dotted, lower case: "ha.zookeeper.quorum".
  OptionType type = OptionType::kString;
  std::string defaultText;           // In the syntax users write; always valid (tested).
  std::string doc;                   // One line.
  std::vector<std::string> choices;  // kEnum only.
  std::optional<OptionConstraint> constraint;
  bool secret = false;  // Rendered as "user:****" and never echoed in errors.
};

// A rule between options, checked once all sources are merged.
struct OptionRule {
  std::vector<std::string> keys;  // The errors name each with its value and source.
  std::string requirement;        // "heartbeat.timeout must exceed heartbeat.interval".
  std::function<bool(const Config&)> holds;
};

// Every option, in the order the example file and the docs list them. Immutable.
const std::vector<OptionSpec>& allOptions();

// Every cross-option rule. Immutable.
const std::vector<OptionRule>& allOptionRules();

// The option with this key, or nullptr.
const OptionSpec* findOption(std::string_view key);

// "REGENT_" + key upper-cased, with '.' and '-' replaced by '_'.
std::string environmentVariableFor(std::string_view key);

// The prefix of the variables a worker sets for its tasks (REGENT_TASK_ATTEMPT_ID, ...;
// docs/workers.md, "Environment"). Configuration never reads them, so a program a task runs may
// load regent's configuration (regentctl); no option's variable starts with it.
inline constexpr std::string_view kTaskVariablePrefix = "REGENT_TASK_";

// Parses text (surrounding whitespace ignored) as the option's type and checks its constraint.
// The error message starts with "expected ..." and never contains the text.
Result<OptionValue> parseOptionValue(const OptionSpec& spec, std::string_view text);

// The canonical text of a value, accepted back by parseOptionValue: "6s", "1GiB", "1.0".
// Secrets are not masked here.
std::string formatOptionValue(const OptionSpec& spec, const OptionValue& value);

// The type as the docs show it: "duration, > 0", "one of zookeeper, standalone".
std::string describeOptionType(const OptionSpec& spec);

}  // namespace regent

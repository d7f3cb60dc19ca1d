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

// The programs an option applies to, one bit each; OptionSpec::readBy holds a set of them.
// A program refuses an option that does not apply to it when the option is given on its command
// line (docs/configuration.md, "Which program reads an option").
enum class Program : uint8_t { kMaster = 1, kWorker = 2, kRegentctl = 4 };
using Programs = uint8_t;
inline constexpr Programs kEveryProgram = 7;
constexpr Programs operator|(Program a, Program b) { return Programs(a) | Programs(b); }
constexpr bool readsOption(Programs readBy, Program program) {
  return (readBy & Programs(program)) != 0;
}

// "master", "worker", "regentctl".
std::string_view programRole(Program program);
// "master, worker"; the programs of `readBy` in the order master, worker, regentctl.
std::string describePrograms(Programs readBy);

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
  // The programs whose code reads the option for themselves (not every program that loads a
  // shared file holding it).
  Programs readBy = kEveryProgram;
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

// The effective configuration of a process: every option's value and where it came from,
// merged from defaults, a YAML file, REGENT_* environment variables and --set key=value.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/time.h"
#include "conf/options.h"

namespace regent {

// Where an option's value came from.
struct ValueSource {
  enum class Kind { kDefault, kFile, kEnvironment, kCommandLine };

  Kind kind = Kind::kDefault;
  // kFile: the path as given; kEnvironment: the variable; kCommandLine: the binary's shortcut
  // option ("--zk") or empty for --set; kDefault: empty.
  std::string name;
  int line = 0;  // kFile: 1-based line of the key.

  // "default", "file /etc/regent.yaml", "env REGENT_HA_MODE", "--set" or the shortcut ("--zk").
  std::string describe() const;
};

// The inputs of loadConfig, each optional. Later sources win: defaults < file < environment
// < set < shortcuts, and within `set` and `shortcuts` a later entry wins. Only the value that
// wins is checked: a bad value a later source overrides is no error (an unknown key is).
struct ConfigSources {
  // A binary's own option for one key (regentctl's --zk, the processes' --log-format).
  struct Shortcut {
    std::string key;     // "ha.zookeeper.quorum"
    std::string value;
    std::string option;  // "--zk": the source --print-config and errors name.
  };

  std::optional<std::string> file;                 // YAML file (--config FILE).
  std::map<std::string, std::string> environment;  // NAME -> value; only REGENT_* are read.
  std::vector<std::string> set;                    // "key=value" (--set), in order.
  std::vector<Shortcut> shortcuts;                 // Applied after every --set, in order.
  // The program loading it. When set, an option on its command line (`set`, `shortcuts`) that
  // it does not read (OptionSpec::readBy) is an error naming the programs that do, and the
  // program's own counterpart ("worker.http.bind" for a worker's http.bind) if there is one. The
  // file and the environment may hold every program's options: they are often shared.
  std::optional<Program> program;
};

// Thread-safety: immutable once loaded; safe to read from any thread.
class Config final {
 public:
  // WARNING: a key that is not in the registry, or a getter that does not match the option's
  // type, is a programming error and throws std::logic_error.
  const std::string& getString(std::string_view key) const;  // kString and kEnum options.
  int64_t getInt(std::string_view key) const;
  double getDouble(std::string_view key) const;
  bool getBool(std::string_view key) const;
  Duration getDuration(std::string_view key) const;
  uint64_t getSize(std::string_view key) const;  // Bytes.

  const ValueSource& source(std::string_view key) const;

  // The canonical text of the value ("6s", "1GiB"); secrets are NOT masked.
  std::string text(std::string_view key) const;

 private:
  struct Entry {
    const OptionSpec* spec;
    OptionValue value;
    ValueSource source;
  };

  friend Result<Config> loadConfig(const ConfigSources& sources);

  Config() = default;
  const Entry& entry(std::string_view key) const;
  const OptionValue& value(std::string_view key, OptionType expected) const;

  std::vector<Entry> entries_;  // In allOptions() order.
};

// Merges the sources over the defaults and checks every option and rule. An unknown key, a
// bad value, a file that cannot be read or parsed, or a broken rule is an error naming the
// key, the value (unless secret), the source and what was expected; all such errors are
// reported, one per line. Reads the file, if any; touches no other global state.
Result<Config> loadConfig(const ConfigSources& sources);

// A copy of this process's environment (environ) for ConfigSources::environment.
std::map<std::string, std::string> processEnvironment();

// One line per option: key, value and source ("default", "file PATH", "env NAME", "--set", or
// the shortcut option such as "--log-format"),
// aligned in columns; secrets masked as "user:****". What --print-config shows.
std::string renderEffectiveConfig(const Config& config);

}  // namespace regent

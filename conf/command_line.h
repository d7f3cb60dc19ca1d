// The configuration part of every regent binary's command line, written once: `--config FILE`
// and `--set key=value` (every binary), `--print-config` and `--log-format text|json` (the
// processes). Registered on the binary's CLI11 app; after app.parse(), load() reads the sources
// in their order (docs/configuration.md) and setUpLogging() applies log.*. docs/operations.md
// lists each binary's options and exit codes.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <ostream>
#include <string>
#include <variant>
#include <vector>

#include "conf/config.h"

namespace regent {

class ConfigCommandLine final {
 public:
  struct Flags {
    bool printConfig = false;  // --print-config: print the effective configuration, exit 0.
    bool logFormat = false;    // --log-format text|json: log.format, winning over --set.
    // The binary, when it refuses command-line options it does not read
    // (ConfigSources::program).
    std::optional<Program> program;
  };

  // Registers the options on `app`; CLI11 writes the parsed values into this object, so it must
  // outlive app.parse(). `program` ("regent-master") starts every message load() reports.
  ConfigCommandLine(CLI::App& app, std::string program, Flags flags);
  ConfigCommandLine(const ConfigCommandLine&) = delete;
  ConfigCommandLine& operator=(const ConfigCommandLine&) = delete;

  // A binary's own shortcut `option` for one key (regentctl's --zk for ha.zookeeper.quorum):
  // applied after every --set, so it wins, and named as the value's source ("--zk") by
  // --print-config and errors. Call after app.parse(), before load().
  void override(const std::string& option, const std::string& key, const std::string& value);

  // After app.parse(): the configuration from the file, the REGENT_* environment and the --set
  // values; or the code main() returns now: 0 once --print-config printed the configuration on
  // `out`, `usageExitCode` once a bad file, option or value was reported on `err` as
  // "<program>: <reason>".
  std::variant<Config, int> load(std::ostream& out, std::ostream& err, int usageExitCode) const;

  // Makes the logger `process` ("master") from log.* the default one. With `levelUnlessSet`,
  // that level replaces log.level while log.level has its default (regentctl logs only errors
  // unless asked). On failure reports "<program>: <reason>" on `err` and returns false.
  bool setUpLogging(const Config& config, const std::string& process, std::ostream& err,
                    const std::optional<std::string>& levelUnlessSet = std::nullopt) const;

 private:
  const std::string program_;
  std::string file_;
  std::vector<std::string> set_;
  std::vector<ConfigSources::Shortcut> overrides_;
  const std::optional<Program> reader_;
  bool printConfig_ = false;
  std::string logFormat_;
};

}  // namespace regent

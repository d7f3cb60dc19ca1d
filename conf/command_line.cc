// The configuration options of every binary's command line (see command_line.h).
#include "conf/command_line.h"

#include <utility>

#include "common/logging.h"
#include "conf/logging_config.h"

namespace regent {

ConfigCommandLine::ConfigCommandLine(CLI::App& app, std::string program, Flags flags)
    : program_(std::move(program)), reader_(flags.program) {
  app.add_option("--config", file_, "YAML configuration file");
  app.add_option("--set", set_, "set an option, key=value (repeatable; later wins)")
      ->allow_extra_args(false);
  if (flags.printConfig) {
    app.add_flag("--print-config", printConfig_,
                 "print the effective configuration (value and source of every option) and exit");
  }
  if (flags.logFormat) {
    app.add_option("--log-format", logFormat_, "text or json (log.format; wins over --set)")
        ->check(CLI::IsMember({"text", "json"}));
  }
}

void ConfigCommandLine::override(const std::string& option, const std::string& key,
                                 const std::string& value) {
  overrides_.push_back(ConfigSources::Shortcut{key, value, option});
}

std::variant<Config, int> ConfigCommandLine::load(std::ostream& out, std::ostream& err,
                                                  int usageExitCode) const {
  ConfigSources sources;
  if (!file_.empty()) sources.file = file_;
  sources.environment = processEnvironment();
  sources.set = set_;
  sources.shortcuts = overrides_;
  sources.program = reader_;
  if (!logFormat_.empty()) {
    sources.shortcuts.push_back(ConfigSources::Shortcut{"log.format", logFormat_, "--log-format"});
  }
  auto config = loadConfig(sources);
  if (!config.ok()) {
    err << program_ << ": " << config.error().message << "\n";
    return usageExitCode;
  }
  if (printConfig_) {
    out << renderEffectiveConfig(config.value());
    return 0;
  }
  return std::move(config).value();
}

bool ConfigCommandLine::setUpLogging(const Config& config, const std::string& process,
                                     std::ostream& err,
                                     const std::optional<std::string>& levelUnlessSet) const {
  LogOptions options = logOptionsFrom(config, process);
  if (levelUnlessSet && config.source("log.level").kind == ValueSource::Kind::kDefault) {
    options.level = *levelUnlessSet;
  }
  if (auto logging = setupLogging(options); !logging.ok()) {
    err << program_ << ": " << logging.error().message << "\n";
    return false;
  }
  return true;
}

}  // namespace regent

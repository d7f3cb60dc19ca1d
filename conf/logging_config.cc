// log.level and log.format to LogOptions; the registry already validated both values.
#include "conf/logging_config.h"

namespace regent {

LogOptions logOptionsFrom(const Config& config, std::string process) {
  LogOptions options;
  options.level = config.getString("log.level");
  options.format = config.getString("log.format") == "json" ? LogFormat::kJson : LogFormat::kText;
  options.process = std::move(process);
  return options;
}

}  // namespace regent

// Process logging on spdlog: human text by default, or one JSON object per line for machines
// (`log.format: json`). Configured once by main() from the loaded configuration.
#pragma once

#include <memory>
#include <string>

#include "common/result.h"

namespace spdlog::sinks {
class sink;
}

namespace regent {

enum class LogFormat { kText, kJson };

struct LogOptions {
  std::string level = "info";  // trace, debug, info, warn, error, critical or off.
  LogFormat format = LogFormat::kText;
  std::string process = "regent";  // The logger name, shown on every line.
};

// Makes a logger named `options.process` the default spdlog logger, writing to `sink`
// (stderr when null). Fails, naming the value, on an unknown level.
Status setupLogging(const LogOptions& options,
                    std::shared_ptr<spdlog::sinks::sink> sink = nullptr);

}  // namespace regent

// Maps the log.* options of a loaded configuration to the logging set-up of common/.
#pragma once

#include <string>

#include "common/logging.h"
#include "conf/config.h"

namespace regent {

// `process` names the logger ("master", "worker", "regentctl").
LogOptions logOptionsFrom(const Config& config, std::string process);

}  // namespace regent

// The HA mode (`ha.mode`) as a type: parsed once from the configuration, so code that depends on
// it branches on an enum rather than on strings.
#pragma once

#include <optional>
#include <string_view>

namespace regent {
class Config;
}

namespace regent::ha {

enum class HaMode {
  kZooKeeper,   // "zookeeper": masters on many hosts coordinate through ZooKeeper.
  kStandalone,  // "standalone": one master, nothing shared; state in local files.
};

// "zookeeper", "standalone": the values `ha.mode` accepts.
const char* haModeName(HaMode mode);

// The mode `text` names (exactly as `ha.mode` spells it), or nullopt.
std::optional<HaMode> parseHaMode(std::string_view text);

// `ha.mode` of a loaded configuration. The configuration checked the value when it was loaded,
// so this cannot fail.
HaMode haModeFrom(const Config& config);

}  // namespace regent::ha

// HaMode: the names `ha.mode` accepts.
#include "ha/ha_mode.h"

#include <kj/debug.h>

#include <string>

#include "conf/config.h"

namespace regent::ha {

const char* haModeName(HaMode mode) {
  switch (mode) {
    case HaMode::kZooKeeper: return "zookeeper";
    case HaMode::kStandalone: return "standalone";
  }
  return "?";
}

std::optional<HaMode> parseHaMode(std::string_view text) {
  for (HaMode mode : {HaMode::kZooKeeper, HaMode::kStandalone}) {
    if (text == haModeName(mode)) return mode;
  }
  return std::nullopt;
}

HaMode haModeFrom(const Config& config) {
  const std::string& text = config.getString("ha.mode");
  auto mode = parseHaMode(text);
  // The configuration accepts only the names above; anything else is a bug in conf/.
  KJ_REQUIRE(mode != std::nullopt, "ha.mode holds a value the configuration should have refused",
             text);
  return *mode;
}

}  // namespace regent::ha

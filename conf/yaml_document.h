// Reading a YAML text that must hold one document: every YAML file regent reads (the
// configuration file, JobGraph files) holds one, and a second document would otherwise be
// silently ignored.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"

namespace regent {

// Why a text is not one YAML document. Positions are 0-based; -1 when unknown.
struct YamlProblem {
  enum class Kind {
    kSyntax,          // The text does not parse; `reason` is the parser's message.
    kSecondDocument,  // Something follows the first document ("---" or "..." and more text).
  };

  Kind kind = Kind::kSyntax;
  std::string reason;
  int line = -1;
  int column = -1;
};

// The document `text` holds, or nullopt when it holds none (empty, or only comments). A
// trailing "---" or "..." with nothing after it is allowed; any further document that holds
// something is a kSecondDocument problem positioned at its start. Callers phrase the problem
// for their file. Touches no global state; any thread.
Result<std::optional<YAML::Node>, YamlProblem> loadSingleYamlDocument(std::string_view text);

}  // namespace regent

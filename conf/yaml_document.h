// Reading a file that must hold one YAML document (a configuration file, a JobGraph file).
// yaml-cpp's YAML::LoadAll never returns on some malformed input ("{a: 1}," — its parser then
// yields empty documents forever, growing memory), so files are read through this instead.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"

namespace regent {

struct YamlDocumentError {
  enum class Kind {
    kSyntax,          // `message` is the parser's; the position is where it stopped, if known
    kSecondDocument,  // the position is where the second document's content starts
  };
  Kind kind = Kind::kSyntax;
  std::string message;
  int line = -1;  // 0-based; -1 = unknown
  int column = -1;
};

// The first document of `text`, or nullopt when the text holds none (empty, or only comments).
// Fails on a syntax error anywhere in the text, and on a second document that holds anything but
// a null (a trailing "---" or "..." is fine). Every step is bounded by the text's length. Pure;
// safe on any thread.
Result<std::optional<YAML::Node>, YamlDocumentError> readSingleYamlDocument(std::string_view text);

}  // namespace regent

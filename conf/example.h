// Documentation generated from the option registry: the annotated example conf/regent.yaml
// and the option table of docs/configuration.md. Tests keep the committed files in sync.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

namespace regent {

// Markers around the generated table in docs/configuration.md.
inline constexpr std::string_view kOptionsTableBegin =
    "<!-- BEGIN GENERATED OPTIONS TABLE: do not edit, run regent-config-example --update -->";
inline constexpr std::string_view kOptionsTableEnd = "<!-- END GENERATED OPTIONS TABLE -->";

// conf/regent.yaml: nested YAML with every option at its default, each preceded by a comment
// with its doc, type and default. Loading it yields the defaults.
std::string renderExampleYaml();

// A markdown table of every option: key, type, default, doc.
std::string renderOptionsTable();

// `markdown` with the text between kOptionsTableBegin and kOptionsTableEnd replaced by
// renderOptionsTable(). Error if either marker is missing or out of order.
Result<std::string> replaceOptionsTable(std::string_view markdown);

}  // namespace regent

// Renders the annotated example YAML and the markdown option table from the registry.
#include "conf/example.h"

#include <cctype>
#include <memory>
#include <utility>
#include <vector>

#include "conf/options.h"

namespace regent {
namespace {

// One level of the nested key tree, children in first-appearance (registry) order.
struct KeyTree {
  std::string name;
  const OptionSpec* spec = nullptr;  // Set on leaves.
  std::vector<std::unique_ptr<KeyTree>> children;

  KeyTree& child(const std::string& childName) {
    for (auto& existing : children) {
      if (existing->name == childName) return *existing;
    }
    children.push_back(std::make_unique<KeyTree>());
    children.back()->name = childName;
    return *children.back();
  }
};

KeyTree buildKeyTree() {
  KeyTree root;
  for (const OptionSpec& spec : allOptions()) {
    KeyTree* node = &root;
    size_t start = 0;
    while (true) {
      const size_t dot = spec.key.find('.', start);
      node = &node->child(spec.key.substr(start, dot == std::string::npos ? dot : dot - start));
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    node->spec = &spec;
  }
  return root;
}

std::string defaultText(const OptionSpec& spec) {
  auto value = parseOptionValue(spec, spec.defaultText);
  // A bad default is reported by loadConfig and the registry tests; show it as written.
  return value ? formatOptionValue(spec, value.value()) : spec.defaultText;
}

// Plain YAML scalar when it cannot be misread, double-quoted otherwise.
std::string yamlScalar(const std::string& text) {
  bool plain = !text.empty() &&
               (std::isalnum(static_cast<unsigned char>(text.front())) || text.front() == '/');
  for (const char c : text) {
    const bool safe = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' ||
                      c == '-' || c == '/' || c == ':' || c == ',';
    plain = plain && safe;
  }
  if (plain) return text;
  std::string quoted = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + "\"";
}

// "# " + text, wrapped at word boundaries to stay within kColumns.
void appendComment(const std::string& indent, const std::string& text, std::string& out) {
  constexpr size_t kColumns = 100;
  const size_t width = kColumns - indent.size() - 2;
  std::string line;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += indent + "# " + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    start = end + 1;
  }
  if (!line.empty()) out += indent + "# " + line + "\n";
}

void renderYamlLevel(const KeyTree& level, size_t depth, std::string& out) {
  const std::string indent(depth * 2, ' ');
  bool first = true;
  for (const auto& node : level.children) {
    if (!first) out += "\n";
    first = false;
    if (node->spec != nullptr) {
      const OptionSpec& spec = *node->spec;
      const std::string shownDefault = defaultText(spec);
      appendComment(indent, spec.doc, out);
      appendComment(indent,
                    "Type: " + describeOptionType(spec) +
                        ". Default: " + (shownDefault.empty() ? "\"\"" : shownDefault) +
                        ". Read by: " + describePrograms(spec.readBy) + ".",
                    out);
      out += indent + node->name + ": " + yamlScalar(shownDefault) + "\n";
    } else {
      out += indent + node->name + ":\n";
      renderYamlLevel(*node, depth + 1, out);
    }
  }
}

std::string markdownCell(const std::string& text) {
  std::string escaped;
  for (const char c : text) {
    if (c == '|') {
      escaped += "\\|";
    } else if (c == '<') {
      escaped += "&lt;";
    } else {
      escaped += c;
    }
  }
  return escaped;
}

}  // namespace

std::string renderExampleYaml() {
  std::string out =
      "# regent configuration: every option at its default, with its doc and type.\n"
      "# GENERATED from the option registry (conf/options.cc); do not edit by hand. Regenerate:\n"
      "#   cmake --build BUILD_DIR --target regent-update-config-docs\n"
      "#\n"
      "# Load with --config FILE. REGENT_* environment variables (REGENT_HA_ZOOKEEPER_QUORUM for\n"
      "# ha.zookeeper.quorum) override the file, and --set key=value overrides both.\n"
      "# Keys may be nested as below or dotted (ha.zookeeper.quorum: ...) at any level.\n"
      "# Durations: 500ms, 6s, 2m, 1h (a bare 0 is allowed). Sizes: 4096, 64KiB, 64MiB, 1GiB.\n"
      "\n";
  renderYamlLevel(buildKeyTree(), 0, out);
  return out;
}

std::string renderOptionsTable() {
  std::string out =
      "| key | type | default | read by | description |\n"
      "| --- | --- | --- | --- | --- |\n";
  for (const OptionSpec& spec : allOptions()) {
    const std::string shownDefault = defaultText(spec);
    out += "| `" + spec.key + "` | " + markdownCell(describeOptionType(spec)) + " | `" +
           (shownDefault.empty() ? "\"\"" : shownDefault) + "` | " + describePrograms(spec.readBy) +
           " | " + markdownCell(spec.doc) + " |\n";
  }
  return out;
}

Result<std::string> replaceOptionsTable(std::string_view markdown) {
  const size_t begin = markdown.find(kOptionsTableBegin);
  const size_t end = markdown.find(kOptionsTableEnd);
  if (begin == std::string_view::npos || end == std::string_view::npos || end < begin) {
    return Error::fatal("expected the markers " + std::string(kOptionsTableBegin) + " and " +
                        std::string(kOptionsTableEnd) + ", in that order");
  }
  const size_t tableStart = begin + kOptionsTableBegin.size();
  return std::string(markdown.substr(0, tableStart)) + "\n" + renderOptionsTable() +
         std::string(markdown.substr(end));
}

}  // namespace regent

// Reading the JobGraph file format (job_graph_spec.h, docs/jobgraph.md). Both syntaxes are read
// into one small document tree, and one reader turns that tree into the wire JobGraph.
#include "jobgraph/job_graph_spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/ids.h"
#include "common/units.h"
#include "conf/yaml_document.h"
#include "jobgraph/job_graph_messages.h"
#include "rpc/schema/jobs.capnp.h"
#include "rpc/wire_ids.h"

namespace regent::jobgraph {
namespace {

// ---- The document tree ----------------------------------------------------------------------

// Deeper than any JobGraph needs (root > vertices > [i] > command > env > [j] > value is 7);
// the cap keeps recursion over hostile input short.
constexpr int kMaxDepth = 32;

struct SpecEntry;

// One node of a parsed document, from either syntax. Positions are 0-based; -1 = unknown
// (JSON, whose parser reports positions for syntax errors only).
struct SpecNode {
  enum class Kind {
    kNull,
    kScalar,  // untyped text: a YAML plain scalar, a JSON number or boolean
    kString,  // text that is a string and nothing else: YAML quoted or !!str, a JSON string
    kList,
    kMap,
  };

  Kind kind = Kind::kNull;
  std::string text;
  std::vector<SpecNode> items;     // kList
  std::vector<SpecEntry> entries;  // kMap, in document order, duplicates kept
  int line = -1;
  int column = -1;
};

struct SpecEntry {
  std::string key;
  int line = -1;
  int column = -1;
  SpecNode value;
};

std::string positionSuffix(int line, int column) {
  if (line < 0) return "";
  return " (line " + std::to_string(line + 1) + ", column " + std::to_string(column + 1) + ")";
}

// ---- YAML into the tree ---------------------------------------------------------------------

class YamlTreeBuilder final {
 public:
  // `maxNodes` bounds the tree: aliases may not expand a document beyond what its text could
  // spell out, which stops "billion laughs" documents.
  explicit YamlTreeBuilder(size_t maxNodes) : remainingNodes_(maxNodes) {}

  Result<SpecNode> build(const YAML::Node& node, int depth) {
    const YAML::Mark mark = node.Mark();
    SpecNode out;
    out.line = mark.is_null() ? -1 : mark.line;
    out.column = mark.is_null() ? -1 : mark.column;
    if (remainingNodes_ == 0) {
      return Error::fatal("the document expands (through aliases) beyond its own size" +
                          positionSuffix(out.line, out.column));
    }
    --remainingNodes_;
    if (depth > kMaxDepth) {
      return Error::fatal("the document nests deeper than " + std::to_string(kMaxDepth) +
                          " levels" + positionSuffix(out.line, out.column));
    }
    switch (node.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        out.kind = SpecNode::Kind::kNull;
        return out;
      case YAML::NodeType::Scalar: {
        const std::string& tag = node.Tag();
        if (tag == "tag:yaml.org,2002:null") {
          out.kind = SpecNode::Kind::kNull;
        } else if (tag == "!" || tag == "tag:yaml.org,2002:str") {
          out.kind = SpecNode::Kind::kString;
        } else {
          out.kind = SpecNode::Kind::kScalar;
        }
        out.text = node.Scalar();
        return out;
      }
      case YAML::NodeType::Sequence:
        out.kind = SpecNode::Kind::kList;
        for (const YAML::Node& item : node) {
          auto child = build(item, depth + 1);
          if (!child) return child.error();
          out.items.push_back(std::move(child).value());
        }
        return out;
      case YAML::NodeType::Map:
        out.kind = SpecNode::Kind::kMap;
        // Copies, not references: the iterator hands out a temporary pair of node handles.
        for (const auto& pair : node) {
          const YAML::Node keyNode = pair.first;
          const YAML::Node valueNode = pair.second;
          const YAML::Mark keyMark = keyNode.Mark();
          SpecEntry entry;
          entry.line = keyMark.is_null() ? -1 : keyMark.line;
          entry.column = keyMark.is_null() ? -1 : keyMark.column;
          if (!keyNode.IsScalar()) {
            return Error::fatal("a key must be a plain name, not " +
                                std::string(keyNode.IsMap()    ? "a map"
                                            : keyNode.IsNull() ? "null"
                                                               : "a list") +
                                positionSuffix(entry.line, entry.column));
          }
          entry.key = keyNode.Scalar();
          auto value = build(valueNode, depth + 1);
          if (!value) return value.error();
          entry.value = std::move(value).value();
          out.entries.push_back(std::move(entry));
        }
        return out;
    }
    return out;
  }

 private:
  size_t remainingNodes_;
};

Result<SpecNode> readYaml(std::string_view text) {
  auto document = loadSingleYamlDocument(text);
  if (!document.ok()) {
    const YamlProblem& problem = document.error();
    if (problem.kind == YamlProblem::Kind::kSecondDocument) {
      return Error::fatal("the file holds more than one YAML document; a JobGraph file holds one" +
                          positionSuffix(problem.line, problem.column));
    }
    return Error::fatal("YAML syntax error" + positionSuffix(problem.line, problem.column) + ": " +
                        problem.reason);
  }
  if (!document.value()) return SpecNode{};
  try {
    return YamlTreeBuilder(text.size() + 16).build(*document.value(), 0);
  } catch (const YAML::Exception& e) {
    return Error::fatal("YAML error: " + e.msg);
  }
}

// ---- JSON into the tree ---------------------------------------------------------------------

// Builds the tree from nlohmann's SAX events, keeping every key (duplicates included) in order.
class JsonTreeBuilder final : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool null() override { return add(SpecNode{}); }
  bool boolean(bool value) override { return add(scalar(value ? "true" : "false")); }
  bool number_integer(number_integer_t value) override {
    return add(scalar(std::to_string(value)));
  }
  bool number_unsigned(number_unsigned_t value) override {
    return add(scalar(std::to_string(value)));
  }
  bool number_float(number_float_t, const string_t& raw) override { return add(scalar(raw)); }
  bool string(string_t& value) override {
    SpecNode node;
    node.kind = SpecNode::Kind::kString;
    node.text = std::move(value);
    return add(std::move(node));
  }
  bool binary(binary_t&) override { return fail("binary values are not JSON"); }
  bool start_object(std::size_t) override { return open(SpecNode::Kind::kMap); }
  bool key(string_t& key) override {
    pendingKey_ = std::move(key);
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(SpecNode::Kind::kList); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    // what() reads "[json.exception.parse_error.101] parse error at line 3, column 1: syntax
    // error while parsing ..."; keep the position and the reason.
    std::string what = e.what();
    const size_t at = what.find("at line ");
    const size_t colon = at == std::string::npos ? at : what.find(": ", at);
    if (colon != std::string::npos) {
      error_ = "JSON syntax error (" + what.substr(at + 3, colon - at - 3) +
               "): " + what.substr(colon + 2);
    } else {
      error_ = "JSON syntax error: " + what;
    }
    return false;
  }

  Result<SpecNode> finish(bool parsed) {
    if (!error_.empty()) return Error::fatal(error_);
    if (!parsed || !root_) return Error::fatal("JSON syntax error: no value");
    return std::move(*root_);
  }

 private:
  static SpecNode scalar(std::string text) {
    SpecNode node;
    node.kind = SpecNode::Kind::kScalar;
    node.text = std::move(text);
    return node;
  }

  bool fail(std::string message) {
    error_ = std::move(message);
    return false;
  }

  // Places a finished node in its parent (or as the root). Returns the placed node.
  SpecNode* place(SpecNode node) {
    if (open_.empty()) {
      root_ = std::move(node);
      return &*root_;
    }
    SpecNode& parent = *open_.back();
    if (parent.kind == SpecNode::Kind::kList) {
      parent.items.push_back(std::move(node));
      return &parent.items.back();
    }
    SpecEntry entry;
    entry.key = std::move(pendingKey_);
    entry.value = std::move(node);
    parent.entries.push_back(std::move(entry));
    return &parent.entries.back().value;
  }

  bool add(SpecNode node) {
    place(std::move(node));
    return true;
  }

  // The open containers are only ever appended to at the back of the innermost one, so the
  // pointers to the enclosing ones stay valid while it fills.
  bool open(SpecNode::Kind kind) {
    if (static_cast<int>(open_.size()) >= kMaxDepth) {
      return fail("the document nests deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    SpecNode node;
    node.kind = kind;
    open_.push_back(place(std::move(node)));
    return true;
  }

  bool close() {
    open_.pop_back();
    return true;
  }

  std::optional<SpecNode> root_;
  std::vector<SpecNode*> open_;
  std::string pendingKey_;
  std::string error_;
};

Result<SpecNode> readJson(std::string_view text) {
  JsonTreeBuilder builder;
  const bool parsed = nlohmann::json::sax_parse(text, &builder);
  return builder.finish(parsed);
}

// ---- The tree into a wire::JobGraph ---------------------------------------------------------

std::string childPath(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

std::string indexPath(const std::string& path, size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

std::string describe(const SpecNode& node) {
  switch (node.kind) {
    case SpecNode::Kind::kNull:
      return "null";
    case SpecNode::Kind::kScalar:
      return quotedForMessage(node.text);
    case SpecNode::Kind::kString:
      return "the string " + quotedForMessage(node.text);
    case SpecNode::Kind::kList:
      return "a list";
    case SpecNode::Kind::kMap:
      return "a map";
  }
  return "?";
}

std::string joinKeys(const std::vector<std::string_view>& keys) {
  std::string out;
  for (const std::string_view key : keys) {
    if (!out.empty()) out += ", ";
    out += key;
  }
  return out;
}

// The entries of one map, checked against the keys its place in the format allows.
class SpecMap final {
 public:
  const SpecNode* find(std::string_view key) const {
    for (const SpecEntry* entry : entries_) {
      if (entry->key == key) return &entry->value;
    }
    return nullptr;
  }
  const SpecNode& node() const { return *node_; }

 private:
  friend class JobGraphReader;
  const SpecNode* node_ = nullptr;
  std::vector<const SpecEntry*> entries_;  // null values left out: null means "not given"
};

// Reads a document tree into a JobGraph builder. Every read* method returns false after
// recording the first error, which the caller passes up unchanged.
class JobGraphReader final {
 public:
  bool readJobGraph(const SpecNode& root, wire::JobGraph::Builder graph) {
    if (root.kind == SpecNode::Kind::kNull) {
      error_ = "the document is empty: expected a map with name and vertices";
      return false;
    }
    if (root.kind != SpecNode::Kind::kMap) {
      error_ = "expected the JobGraph as a map with name and vertices, got " + describe(root) +
               positionSuffix(root.line, root.column);
      return false;
    }
    SpecMap map;
    if (!readMap(root, "", {"job_id", "name", "vertices", "restart_strategy"}, "", map)) {
      return false;
    }

    if (const SpecNode* jobId = map.find("job_id")) {
      if (!readJobId(*jobId, "job_id", graph.initJobId())) return false;
    } else {
      wire::setWireId(graph.initJobId(), JobId::random());
    }

    std::string name;
    if (!readRequiredText(map, "name", "", name)) return false;
    graph.setName(textOf(name));

    const SpecNode* vertices = map.find("vertices");
    if (vertices == nullptr) return fail(root, "vertices", "required key is missing");
    if (!expectList(*vertices, "vertices")) return false;
    auto vertexList = graph.initVertices(static_cast<capnp::uint>(vertices->items.size()));
    for (size_t i = 0; i < vertices->items.size(); ++i) {
      if (!readVertex(vertices->items[i], indexPath("vertices", i), vertexList[i])) return false;
    }

    if (const SpecNode* strategy = map.find("restart_strategy")) {
      if (!readRestartStrategy(*strategy, "restart_strategy", graph)) return false;
    }
    return true;
  }

  const std::string& error() const { return error_; }

 private:
  static capnp::Text::Reader textOf(const std::string& text) {
    return capnp::Text::Reader(text.c_str(), text.size());
  }

  bool fail(const SpecNode& node, const std::string& path, const std::string& problem) {
    error_ = path + ": " + problem + positionSuffix(node.line, node.column);
    return false;
  }

  // Checks `node` is a map whose keys are all in `keys` (or, if `forType` is not empty,
  // allowed for that restart strategy type), each at most once.
  bool readMap(const SpecNode& node, const std::string& path,
               const std::vector<std::string_view>& keys, std::string_view forType, SpecMap& out) {
    if (node.kind != SpecNode::Kind::kMap) {
      return fail(node, path.empty() ? "(document)" : path,
                  "expected a map, got " + describe(node));
    }
    out.node_ = &node;
    out.entries_.clear();
    std::unordered_map<std::string_view, size_t> seen;  // key -> index of its first entry
    for (size_t i = 0; i < node.entries.size(); ++i) {
      const SpecEntry& entry = node.entries[i];
      const std::string keyPath = childPath(path, entry.key);
      if (std::find(keys.begin(), keys.end(), entry.key) == keys.end()) {
        error_ = keyPath + ": unknown key" +
                 (forType.empty() ? std::string() : " for type " + std::string(forType)) +
                 " (expected one of " + joinKeys(keys) + ")" +
                 positionSuffix(entry.line, entry.column);
        return false;
      }
      if (const auto [first, added] = seen.emplace(entry.key, i); !added) {
        return duplicateKey(keyPath, entry, node.entries[first->second]);
      }
      if (entry.value.kind != SpecNode::Kind::kNull) out.entries_.push_back(&entry);
    }
    return true;
  }

  bool duplicateKey(const std::string& path, const SpecEntry& entry, const SpecEntry& first) {
    error_ = path + ": duplicate key" + positionSuffix(entry.line, entry.column);
    if (first.line >= 0) error_ += "; first given on line " + std::to_string(first.line + 1);
    return false;
  }

  bool expectList(const SpecNode& node, const std::string& path) {
    if (node.kind == SpecNode::Kind::kList) return true;
    return fail(node, path, "expected a list, got " + describe(node));
  }

  bool readText(const SpecNode& node, const std::string& path, std::string& out) {
    if (node.kind != SpecNode::Kind::kScalar && node.kind != SpecNode::Kind::kString) {
      return fail(node, path, "expected a string, got " + describe(node));
    }
    out = node.text;
    return true;
  }

  bool readRequiredText(const SpecMap& map, std::string_view key, const std::string& parent,
                        std::string& out) {
    const SpecNode* node = map.find(key);
    if (node == nullptr) {
      return fail(map.node(), childPath(parent, key), "required key is missing");
    }
    return readText(*node, childPath(parent, key), out);
  }

  bool readUnsigned(const SpecNode& node, const std::string& path, uint64_t max, uint64_t& out) {
    const std::string expected = "expected a whole number from 0 to " + std::to_string(max);
    if (node.kind != SpecNode::Kind::kScalar) {
      return fail(node, path, expected + ", got " + describe(node));
    }
    const std::string& text = node.text;
    uint64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    const bool allDigits = end == text.data() + text.size() && !text.empty();
    if (ec == std::errc::result_out_of_range || (ec == std::errc() && allDigits && value > max)) {
      return fail(node, path, expected + ", got " + text + " (too large)");
    }
    if (ec != std::errc() || !allDigits) {
      return fail(node, path, expected + ", got " + describe(node));
    }
    out = value;
    return true;
  }

  bool readUInt32(const SpecNode& node, const std::string& path, uint32_t& out) {
    uint64_t value = 0;
    if (!readUnsigned(node, path, std::numeric_limits<uint32_t>::max(), value)) return false;
    out = static_cast<uint32_t>(value);
    return true;
  }

  bool readNumber(const SpecNode& node, const std::string& path, double& out) {
    constexpr std::string_view kExpected = "expected a number such as 2 or 1.5";
    if (node.kind != SpecNode::Kind::kScalar) {
      return fail(node, path, std::string(kExpected) + ", got " + describe(node));
    }
    const std::string& text = node.text;
    double value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty() ||
        !std::isfinite(value)) {
      return fail(node, path, std::string(kExpected) + ", got " + describe(node));
    }
    out = value;
    return true;
  }

  bool readDurationMs(const SpecNode& node, const std::string& path, uint64_t& out) {
    std::string text;
    if (!readText(node, path, text)) return false;
    auto duration = parseDuration(text);
    if (!duration) {
      return fail(node, path, duration.error().message + ", got " + quotedForMessage(text));
    }
    out = static_cast<uint64_t>(duration.value().count());
    return true;
  }

  bool readJobId(const SpecNode& node, const std::string& path, wire::Id128::Builder out) {
    std::string text;
    if (!readText(node, path, text)) return false;
    const auto id = JobId::fromHex(text);
    if (!id) return fail(node, path, "expected 32 hex digits, got " + quotedForMessage(text));
    wire::setWireId(out, *id);
    return true;
  }

  // Cores as a decimal with at most three places (0.5, 2, 1.25), or thousandths of a core as
  // "<n>m" ("500m").
  bool readCpuMillis(const SpecNode& node, const std::string& path, uint32_t& out) {
    std::string text;
    if (!readText(node, path, text)) return false;
    const std::string expected =
        "expected a CPU amount in cores such as 0.5 or 2, or in thousandths of a core such as "
        "\"500m\", got " +
        quotedForMessage(text);
    constexpr uint64_t kMax = std::numeric_limits<uint32_t>::max();
    const char* begin = text.data();
    const char* end = text.data() + text.size();
    uint64_t millis = 0;
    if (!text.empty() && text.back() == 'm') {
      const auto [rest, ec] = std::from_chars(begin, end - 1, millis);
      if (ec != std::errc() || rest != end - 1 || millis > kMax) {
        return fail(
            node, path,
            expected +
                (ec == std::errc::result_out_of_range || millis > kMax ? " (too large)" : ""));
      }
      out = static_cast<uint32_t>(millis);
      return true;
    }
    uint64_t cores = 0;
    const auto [rest, ec] = std::from_chars(begin, end, cores);
    if (ec == std::errc::result_out_of_range) return fail(node, path, expected + " (too large)");
    if (ec != std::errc()) return fail(node, path, expected);
    uint64_t fraction = 0;
    const char* at = rest;
    if (at != end && *at == '.') {
      ++at;
      if (at == end) return fail(node, path, expected);
      int places = 0;
      for (; at != end && *at >= '0' && *at <= '9'; ++at, ++places) {
        if (places < 3) {
          fraction = fraction * 10 + static_cast<uint64_t>(*at - '0');
        } else if (*at != '0') {
          return fail(node, path, expected + " (finer than a thousandth of a core)");
        }
      }
      for (; places < 3; ++places) fraction *= 10;
    }
    if (at != end) return fail(node, path, expected);
    if (cores > (kMax - fraction) / 1000) return fail(node, path, expected + " (too large)");
    out = static_cast<uint32_t>(cores * 1000 + fraction);
    return true;
  }

  bool readSizeBytes(const SpecNode& node, const std::string& path, uint64_t& out) {
    std::string text;
    if (!readText(node, path, text)) return false;
    auto size = parseSize(text);
    if (!size) return fail(node, path, size.error().message + ", got " + quotedForMessage(text));
    out = size.value();
    return true;
  }

  bool readVertex(const SpecNode& node, const std::string& path, wire::JobVertex::Builder vertex) {
    SpecMap map;
    if (!readMap(node, path, {"name", "parallelism", "command", "resources", "upstream"}, "",
                 map)) {
      return false;
    }
    std::string name;
    if (!readRequiredText(map, "name", path, name)) return false;
    vertex.setName(textOf(name));

    uint32_t parallelism = 1;
    if (const SpecNode* given = map.find("parallelism")) {
      if (!readUInt32(*given, childPath(path, "parallelism"), parallelism)) return false;
    }
    vertex.setParallelism(parallelism);

    const SpecNode* command = map.find("command");
    if (command == nullptr) {
      return fail(map.node(), childPath(path, "command"), "required key is missing");
    }
    if (!readCommand(*command, childPath(path, "command"), vertex.initCommand())) return false;

    auto resources = vertex.initResources();
    if (const SpecNode* given = map.find("resources")) {
      if (!readResources(*given, childPath(path, "resources"), resources)) return false;
    }

    if (const SpecNode* upstream = map.find("upstream")) {
      const std::string upstreamPath = childPath(path, "upstream");
      std::vector<std::string> names;
      if (!readStrings(*upstream, upstreamPath, names)) return false;
      auto list = vertex.initUpstream(static_cast<capnp::uint>(names.size()));
      for (size_t i = 0; i < names.size(); ++i) {
        list.set(static_cast<capnp::uint>(i), textOf(names[i]));
      }
    }
    return true;
  }

  bool readStrings(const SpecNode& node, const std::string& path, std::vector<std::string>& out) {
    if (!expectList(node, path)) return false;
    out.resize(node.items.size());
    for (size_t i = 0; i < node.items.size(); ++i) {
      if (!readText(node.items[i], indexPath(path, i), out[i])) return false;
    }
    return true;
  }

  bool readCommand(const SpecNode& node, const std::string& path, wire::Command::Builder command) {
    SpecMap map;
    if (!readMap(node, path, {"argv", "env", "working_dir"}, "", map)) return false;

    const SpecNode* argvNode = map.find("argv");
    if (argvNode == nullptr) {
      return fail(map.node(), childPath(path, "argv"), "required key is missing");
    }
    std::vector<std::string> argv;
    if (!readStrings(*argvNode, childPath(path, "argv"), argv)) return false;
    auto argvList = command.initArgv(static_cast<capnp::uint>(argv.size()));
    for (size_t i = 0; i < argv.size(); ++i) {
      argvList.set(static_cast<capnp::uint>(i), textOf(argv[i]));
    }

    if (const SpecNode* envNode = map.find("env")) {
      std::vector<std::pair<std::string, std::string>> env;
      if (!readEnv(*envNode, childPath(path, "env"), env)) return false;
      auto envList = command.initEnv(static_cast<capnp::uint>(env.size()));
      for (size_t i = 0; i < env.size(); ++i) {
        envList[static_cast<capnp::uint>(i)].setName(textOf(env[i].first));
        envList[static_cast<capnp::uint>(i)].setValue(textOf(env[i].second));
      }
    }

    if (const SpecNode* dir = map.find("working_dir")) {
      std::string workingDir;
      if (!readText(*dir, childPath(path, "working_dir"), workingDir)) return false;
      command.setWorkingDir(textOf(workingDir));
    }
    return true;
  }

  // Either a map {NAME: value} or a list of {name, value} maps (which may repeat a name: later
  // entries win on the worker).
  bool readEnv(const SpecNode& node, const std::string& path,
               std::vector<std::pair<std::string, std::string>>& out) {
    if (node.kind == SpecNode::Kind::kMap) {
      std::unordered_map<std::string_view, size_t> seen;  // name -> index of its first entry
      for (size_t i = 0; i < node.entries.size(); ++i) {
        const SpecEntry& entry = node.entries[i];
        const std::string entryPath = childPath(path, entry.key);
        if (const auto [first, added] = seen.emplace(entry.key, i); !added) {
          return duplicateKey(entryPath, entry, node.entries[first->second]);
        }
        if (entry.value.kind == SpecNode::Kind::kNull) {
          return fail(entry.value, entryPath,
                      "expected a string, got null (write \"\" for an empty value)");
        }
        std::string value;
        if (!readText(entry.value, entryPath, value)) return false;
        out.emplace_back(entry.key, std::move(value));
      }
      return true;
    }
    if (node.kind != SpecNode::Kind::kList) {
      return fail(
          node, path,
          "expected a map of NAME: value, or a list of {name, value} maps, got " + describe(node));
    }
    for (size_t i = 0; i < node.items.size(); ++i) {
      const std::string itemPath = indexPath(path, i);
      SpecMap map;
      if (!readMap(node.items[i], itemPath, {"name", "value"}, "", map)) return false;
      std::string name;
      std::string value;
      if (!readRequiredText(map, "name", itemPath, name)) return false;
      if (!readRequiredText(map, "value", itemPath, value)) return false;
      out.emplace_back(std::move(name), std::move(value));
    }
    return true;
  }

  bool readResources(const SpecNode& node, const std::string& path,
                     wire::ResourceProfile::Builder resources) {
    SpecMap map;
    if (!readMap(node, path, {"cpu", "memory"}, "", map)) return false;
    if (const SpecNode* cpu = map.find("cpu")) {
      uint32_t millis = 0;
      if (!readCpuMillis(*cpu, childPath(path, "cpu"), millis)) return false;
      resources.setCpuMillis(millis);
    }
    if (const SpecNode* memory = map.find("memory")) {
      uint64_t bytes = 0;
      if (!readSizeBytes(*memory, childPath(path, "memory"), bytes)) return false;
      resources.setMemoryBytes(bytes);
    }
    return true;
  }

  bool readRestartStrategy(const SpecNode& node, const std::string& path,
                           wire::JobGraph::Builder graph) {
    if (node.kind != SpecNode::Kind::kMap) {
      return fail(node, path, "expected a map with a type, got " + describe(node));
    }
    // The type decides which other keys are allowed, so it is read first wherever it stands.
    const SpecNode* typeNode = nullptr;
    for (const SpecEntry& entry : node.entries) {
      if (entry.key == "type" && entry.value.kind != SpecNode::Kind::kNull) typeNode = &entry.value;
    }
    const std::string typePath = childPath(path, "type");
    if (typeNode == nullptr) return fail(node, typePath, "required key is missing");
    std::string type;
    if (!readText(*typeNode, typePath, type)) return false;

    SpecMap map;
    if (type == "none") {
      if (!readMap(node, path, {"type"}, type, map)) return false;
      graph.initRestartStrategy().setNone();
      return true;
    }
    if (type == "fixed-delay") {
      if (!readMap(node, path, {"type", "attempts", "delay"}, type, map)) return false;
      auto fixed = graph.initRestartStrategy().initFixedDelay();
      uint32_t attempts = 1;
      uint64_t delayMs = 1'000;
      if (!optionalUInt32(map, path, "attempts", attempts)) return false;
      if (!optionalDuration(map, path, "delay", delayMs)) return false;
      fixed.setAttempts(attempts);
      fixed.setDelayMs(delayMs);
      return true;
    }
    if (type == "exponential-delay") {
      if (!readMap(node, path,
                   {"type", "initial_delay", "max_delay", "multiplier", "reset_after", "attempts"},
                   type, map)) {
        return false;
      }
      auto exponential = graph.initRestartStrategy().initExponentialDelay();
      uint64_t initialMs = 1'000;
      uint64_t maxMs = 300'000;
      double multiplier = 2.0;
      uint64_t resetAfterMs = 3'600'000;
      uint32_t attempts = 0;
      if (!optionalDuration(map, path, "initial_delay", initialMs)) return false;
      if (!optionalDuration(map, path, "max_delay", maxMs)) return false;
      if (const SpecNode* given = map.find("multiplier")) {
        if (!readNumber(*given, childPath(path, "multiplier"), multiplier)) return false;
      }
      if (!optionalDuration(map, path, "reset_after", resetAfterMs)) return false;
      if (!optionalUInt32(map, path, "attempts", attempts)) return false;
      exponential.setInitialDelayMs(initialMs);
      exponential.setMaxDelayMs(maxMs);
      exponential.setMultiplier(multiplier);
      exponential.setResetAfterMs(resetAfterMs);
      exponential.setAttempts(attempts);
      return true;
    }
    if (type == "failure-rate") {
      if (!readMap(node, path, {"type", "max_failures", "interval", "delay"}, type, map)) {
        return false;
      }
      auto rate = graph.initRestartStrategy().initFailureRate();
      uint32_t maxFailures = 1;
      uint64_t intervalMs = 60'000;
      uint64_t delayMs = 1'000;
      if (!optionalUInt32(map, path, "max_failures", maxFailures)) return false;
      if (!optionalDuration(map, path, "interval", intervalMs)) return false;
      if (!optionalDuration(map, path, "delay", delayMs)) return false;
      rate.setMaxFailures(maxFailures);
      rate.setIntervalMs(intervalMs);
      rate.setDelayMs(delayMs);
      return true;
    }
    return fail(*typeNode, typePath,
                "unknown type " + quotedForMessage(type) +
                    " (expected none, fixed-delay, exponential-delay or failure-rate)");
  }

  bool optionalUInt32(const SpecMap& map, const std::string& path, std::string_view key,
                      uint32_t& out) {
    const SpecNode* given = map.find(key);
    return given == nullptr || readUInt32(*given, childPath(path, key), out);
  }

  bool optionalDuration(const SpecMap& map, const std::string& path, std::string_view key,
                        uint64_t& out) {
    const SpecNode* given = map.find(key);
    return given == nullptr || readDurationMs(*given, childPath(path, key), out);
  }

  std::string error_;
};

}  // namespace

JobGraphSpecFormat jobGraphSpecFormatForPath(std::string_view path) {
  auto endsWith = [path](std::string_view suffix) {
    if (path.size() < suffix.size()) return false;
    const std::string_view tail = path.substr(path.size() - suffix.size());
    return std::equal(tail.begin(), tail.end(), suffix.begin(), [](char a, char b) {
      return std::tolower(static_cast<unsigned char>(a)) == b;
    });
  };
  if (endsWith(".json")) return JobGraphSpecFormat::kJson;
  if (endsWith(".yaml") || endsWith(".yml")) return JobGraphSpecFormat::kYaml;
  return JobGraphSpecFormat::kDetect;
}

Result<kj::Own<capnp::MallocMessageBuilder>> parseJobGraphSpec(std::string_view text,
                                                               JobGraphSpecFormat format) {
  if (format == JobGraphSpecFormat::kDetect) {
    std::string_view rest = text;
    if (rest.starts_with("\xEF\xBB\xBF")) rest.remove_prefix(3);
    const size_t first = rest.find_first_not_of(" \t\r\n");
    format = first != std::string_view::npos && rest[first] == '{' ? JobGraphSpecFormat::kJson
                                                                   : JobGraphSpecFormat::kYaml;
  }
  auto tree = format == JobGraphSpecFormat::kJson ? readJson(text) : readYaml(text);
  if (!tree) return tree.error();

  auto message = kj::heap<capnp::MallocMessageBuilder>();
  JobGraphReader reader;
  if (!reader.readJobGraph(tree.value(), message->initRoot<wire::JobGraph>())) {
    return Error::fatal(reader.error());
  }
  return kj::mv(message);
}

}  // namespace regent::jobgraph

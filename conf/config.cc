// Loading, reading and rendering the effective configuration (see config.h).
#include "conf/config.h"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <utility>

#include "conf/yaml_document.h"

namespace regent {
namespace {

constexpr size_t kMaxYamlDepth = 32;

// "in file /x/regent.yaml (line 3)", "from env REGENT_HA_MODE", "from --set", "by default":
// ValueSource::describe() phrased for the middle of an error message.
std::string where(const ValueSource& source) {
  switch (source.kind) {
    case ValueSource::Kind::kDefault:
      return "by default";
    case ValueSource::Kind::kFile:
      return "in " + source.describe() +
             (source.line > 0 ? " (line " + std::to_string(source.line) + ")" : "");
    case ValueSource::Kind::kEnvironment:
    case ValueSource::Kind::kCommandLine:
      return "from " + source.describe();
  }
  return {};
}

std::string maskSecret(std::string_view secret) {
  const size_t colon = secret.find(':');
  if (colon == std::string_view::npos) return "****";
  return std::string(secret.substr(0, colon)) + ":****";
}

size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The known option whose key (or env variable, if `byVariable`) is closest to `name`, if any
// is close enough to be a likely typo.
const OptionSpec* closestOption(std::string_view name, bool byVariable) {
  const OptionSpec* best = nullptr;
  size_t bestDistance = std::numeric_limits<size_t>::max();
  for (const OptionSpec& spec : allOptions()) {
    const std::string candidate = byVariable ? environmentVariableFor(spec.key) : spec.key;
    const size_t distance = editDistance(name, candidate);
    if (distance < bestDistance) {
      best = &spec;
      bestDistance = distance;
    }
  }
  return bestDistance <= std::max<size_t>(2, name.size() / 4) ? best : nullptr;
}

std::string unknownKeyError(std::string_view key, const ValueSource& source) {
  std::string message = "unknown key \"" + std::string(key) + "\" " + where(source);
  if (const OptionSpec* suggestion = closestOption(key, false)) {
    message += "; did you mean \"" + suggestion->key + "\"?";
  }
  return message;
}

std::string unknownVariableError(std::string_view variable) {
  std::string message =
      "unknown key from env " + std::string(variable) + ": no option maps to this variable";
  if (const OptionSpec* suggestion = closestOption(variable, true)) {
    message +=
        "; did you mean " + environmentVariableFor(suggestion->key) + " (" + suggestion->key + ")?";
  }
  return message;
}

// "the master", "the worker and regentctl": the programs of `readBy`, for the middle of a
// sentence.
std::string programsPhrase(Programs readBy) {
  std::vector<std::string> names;
  for (const Program program : {Program::kMaster, Program::kWorker, Program::kRegentctl}) {
    if (!readsOption(readBy, program)) continue;
    names.push_back(program == Program::kRegentctl ? "regentctl"
                                                   : "the " + std::string(programRole(program)));
  }
  std::string phrase;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) phrase += i + 1 == names.size() ? " and " : ", ";
    phrase += names[i];
  }
  return phrase;
}

// The error for `spec`, given on the command line of `program`, which does not read it:
// "http.bind from --set applies to the master, not the worker; the worker's own is
// worker.http.bind".
std::string notReadError(const OptionSpec& spec, const ValueSource& source, Program program) {
  const std::string role(programRole(program));
  std::string message = spec.key + " " + where(source) + " applies to " +
                        programsPhrase(spec.readBy) + ", not " + programsPhrase(Programs(program));
  const OptionSpec* own = findOption(role + "." + spec.key);
  if (own != nullptr && readsOption(own->readBy, program)) {
    message += "; the " + role + "'s own is " + own->key;
  }
  return message;
}

// A scalar from the YAML file, keyed by its flattened dotted key.
struct FileValue {
  std::string key;
  std::string text;
  int line = 0;
};

int lineOf(const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  return mark.line >= 0 ? mark.line + 1 : 0;
}

ValueSource fileSource(const std::string& path, int line) {
  return ValueSource{ValueSource::Kind::kFile, path, line};
}

// The rest of the first option key under the group `key` ("mode" for "ha"); empty if `key` is
// not a group of options.
std::string firstOptionUnder(std::string_view key) {
  for (const OptionSpec& spec : allOptions()) {
    if (spec.key.size() > key.size() && spec.key.starts_with(key) && spec.key[key.size()] == '.') {
      return spec.key.substr(key.size() + 1);
    }
  }
  return {};
}

// Flattens nested maps and dotted keys into `values`; problems go to `errors`. A known option
// key must hold a scalar; any other key recurses into its map.
class YamlFlattener final {
 public:
  YamlFlattener(const std::string& path, std::vector<FileValue>& values,
                std::vector<std::string>& errors)
      : path_(path), values_(values), errors_(errors) {}

  void flattenMap(const YAML::Node& map, const std::string& prefix, size_t depth) {
    if (depth > kMaxYamlDepth) {
      errors_.push_back("config file " + path_ + " nests maps deeper than " +
                        std::to_string(kMaxYamlDepth) + " levels " +
                        where(fileSource(path_, lineOf(map))));
      return;
    }
    // Copies, not references: yaml-cpp's iterator hands out a temporary pair (Nodes are
    // handles, cheap to copy).
    for (const auto& pair : map) {
      const YAML::Node keyNode = pair.first;
      const YAML::Node valueNode = pair.second;
      const int line = lineOf(keyNode);
      if (!keyNode.IsScalar()) {
        errors_.push_back("a key must be a plain name " + where(fileSource(path_, line)));
        continue;
      }
      const std::string key = prefix.empty() ? keyNode.Scalar() : prefix + "." + keyNode.Scalar();
      flattenValue(key, valueNode, line, depth);
    }
  }

 private:
  void flattenValue(const std::string& key, const YAML::Node& value, int line, size_t depth) {
    const ValueSource source = fileSource(path_, line);
    const bool known = findOption(key) != nullptr;
    if (value.IsMap() && !known) {
      flattenMap(value, key, depth + 1);
      return;
    }
    if (const std::string member = firstOptionUnder(key); !known && !member.empty()) {
      errors_.push_back("bad value for " + key + " " + where(source) +
                        ": expected a map of the options under " + key + ", such as " + key + "." +
                        member);
      return;
    }
    if (!known) {
      errors_.push_back(unknownKeyError(key, source));
      return;
    }
    if (value.IsNull()) {
      errors_.push_back("no value for " + key + " " + where(source) +
                        ": expected a value (write \"\" for an empty string)");
      return;
    }
    if (!value.IsScalar()) {
      errors_.push_back("bad value for " + key + " " + where(source) +
                        ": expected a single value, got a " + (value.IsMap() ? "map" : "list"));
      return;
    }
    values_.push_back(FileValue{key, value.Scalar(), line});
  }

  const std::string& path_;
  std::vector<FileValue>& values_;
  std::vector<std::string>& errors_;
};

// Reads the whole file; the error names the path and the system's reason.
Result<std::string> readFile(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return Error::fatal("cannot read config file " + path + ": " + std::strerror(errno));
  }
  std::string contents;
  char buffer[4096];
  size_t count = 0;
  while ((count = std::fread(buffer, 1, sizeof buffer, file)) > 0) contents.append(buffer, count);
  const bool failed = std::ferror(file) != 0;
  const int savedErrno = errno;
  std::fclose(file);
  if (failed) {
    return Error::fatal("cannot read config file " + path + ": " + std::strerror(savedErrno));
  }
  return contents;
}

// The scalars of the file, flattened, in file order; every problem is appended to `errors`.
std::vector<FileValue> readYamlFile(const std::string& path, std::vector<std::string>& errors) {
  std::vector<FileValue> values;
  auto contents = readFile(path);
  if (!contents) {
    errors.push_back(contents.error().message);
    return values;
  }
  auto document = loadSingleYamlDocument(contents.value());
  if (!document.ok()) {
    const YamlProblem& problem = document.error();
    if (problem.kind == YamlProblem::Kind::kSecondDocument) {
      errors.push_back("config file " + path + " holds more than one YAML document (the second " +
                       "starts at line " + std::to_string(problem.line + 1) +
                       "); a config file holds one");
    } else if (problem.line >= 0) {
      errors.push_back("config file " + path + " does not parse (line " +
                       std::to_string(problem.line + 1) + ", column " +
                       std::to_string(problem.column + 1) + "): " + problem.reason);
    } else {
      errors.push_back("config file " + path + " does not parse: " + problem.reason);
    }
    return values;
  }
  if (!document.value()) return values;  // Empty, or only comments: all defaults.
  const YAML::Node root = *document.value();
  if (root.IsNull()) return values;  // Empty, or only comments: all defaults.
  if (!root.IsMap()) {
    errors.push_back("config file " + path + " must hold a map of options " +
                     "(key: value lines), " + where(fileSource(path, lineOf(root))));
    return values;
  }
  YamlFlattener(path, values, errors).flattenMap(root, "", 0);

  // The same key twice, whether spelled nested or dotted, is ambiguous.
  std::vector<std::string> duplicateErrors;
  for (size_t i = 0; i < values.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (values[j].key != values[i].key) continue;
      duplicateErrors.push_back("duplicate key \"" + values[i].key + "\" in file " + path +
                                " (lines " + std::to_string(values[j].line) + " and " +
                                std::to_string(values[i].line) + ")");
      break;
    }
  }
  errors.insert(errors.end(), duplicateErrors.begin(), duplicateErrors.end());
  return values;
}

std::string_view trimKey(std::string_view text) {
  constexpr std::string_view kSpace = " \t";
  const auto first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(kSpace) - first + 1);
}

std::string displayValue(const OptionSpec& spec, const std::string& text) {
  if (text.empty()) return "\"\"";
  return spec.secret ? maskSecret(text) : text;
}

}  // namespace

std::string ValueSource::describe() const {
  switch (kind) {
    case Kind::kDefault:
      return "default";
    case Kind::kFile:
      return "file " + name;
    case Kind::kEnvironment:
      return "env " + name;
    case Kind::kCommandLine:
      return name.empty() ? "--set" : name;
  }
  return {};
}

const Config::Entry& Config::entry(std::string_view key) const {
  for (const Entry& candidate : entries_) {
    if (candidate.spec->key == key) return candidate;
  }
  throw std::logic_error("no configuration option \"" + std::string(key) + "\"");
}

const OptionValue& Config::value(std::string_view key, OptionType expected) const {
  const Entry& found = entry(key);
  const OptionType actual = found.spec->type;
  const bool matches =
      actual == expected || (expected == OptionType::kString && actual == OptionType::kEnum);
  if (!matches) {
    throw std::logic_error("configuration option \"" + std::string(key) + "\" is a " +
                           describeOptionType(*found.spec) + ", read with the wrong getter");
  }
  return found.value;
}

const std::string& Config::getString(std::string_view key) const {
  return std::get<std::string>(value(key, OptionType::kString));
}

int64_t Config::getInt(std::string_view key) const {
  return std::get<int64_t>(value(key, OptionType::kInt));
}

double Config::getDouble(std::string_view key) const {
  return std::get<double>(value(key, OptionType::kDouble));
}

bool Config::getBool(std::string_view key) const {
  return std::get<bool>(value(key, OptionType::kBool));
}

Duration Config::getDuration(std::string_view key) const {
  return std::get<Duration>(value(key, OptionType::kDuration));
}

uint64_t Config::getSize(std::string_view key) const {
  return std::get<uint64_t>(value(key, OptionType::kSize));
}

const ValueSource& Config::source(std::string_view key) const { return entry(key).source; }

std::string Config::text(std::string_view key) const {
  const Entry& found = entry(key);
  return formatOptionValue(*found.spec, found.value);
}

Result<Config> loadConfig(const ConfigSources& sources) {
  Config config;
  std::vector<std::string> errors;

  for (const OptionSpec& spec : allOptions()) {
    auto value = parseOptionValue(spec, spec.defaultText);
    if (!value) {
      // A broken registry entry; the registry tests catch this before anyone runs it.
      errors.push_back("bad default for " + spec.key + ": " + value.error().message);
      config.entries_.push_back(Config::Entry{&spec, OptionValue(std::string()), {}});
      continue;
    }
    config.entries_.push_back(Config::Entry{&spec, std::move(value.value()), {}});
  }

  // Every source's assignments (and problems), in the order of the sources. Values are parsed
  // only once every source is read, and only the one that wins for its key: a bad value that a
  // later source overrides is no error, the effective value is what counts. Unknown keys are
  // errors in every source.
  struct Assignment {
    Config::Entry* target = nullptr;  // Null: `problem` instead.
    std::string text;
    ValueSource source;
    std::string problem;
  };
  std::vector<Assignment> assignments;
  auto assign = [&](std::string_view key, std::string_view text, const ValueSource& source) {
    for (Config::Entry& candidate : config.entries_) {
      if (candidate.spec->key != key) continue;
      if (source.kind == ValueSource::Kind::kCommandLine && sources.program &&
          !readsOption(candidate.spec->readBy, *sources.program)) {
        assignments.push_back(
            Assignment{nullptr, {}, {}, notReadError(*candidate.spec, source, *sources.program)});
        return;
      }
      assignments.push_back(Assignment{&candidate, std::string(text), source, {}});
      return;
    }
    assignments.push_back(Assignment{nullptr, {}, {}, unknownKeyError(key, source)});
  };
  auto problem = [&](std::string message) {
    assignments.push_back(Assignment{nullptr, {}, {}, std::move(message)});
  };

  if (sources.file) {
    std::vector<std::string> fileErrors;
    for (const FileValue& fileValue : readYamlFile(*sources.file, fileErrors)) {
      assign(fileValue.key, fileValue.text, fileSource(*sources.file, fileValue.line));
    }
    for (std::string& fileError : fileErrors) problem(std::move(fileError));
  }

  constexpr std::string_view kPrefix = "REGENT_";
  for (const auto& [variable, text] : sources.environment) {
    if (!std::string_view(variable).starts_with(kPrefix)) continue;
    // A task's own variables, set by its worker: not configuration.
    if (std::string_view(variable).starts_with(kTaskVariablePrefix)) continue;
    const OptionSpec* match = nullptr;
    for (const OptionSpec& spec : allOptions()) {
      if (environmentVariableFor(spec.key) == variable) match = &spec;
    }
    if (match == nullptr) {
      problem(unknownVariableError(variable));
      continue;
    }
    assign(match->key, text, ValueSource{ValueSource::Kind::kEnvironment, variable, 0});
  }

  for (const std::string& assignment : sources.set) {
    const size_t equals = assignment.find('=');
    if (equals == std::string::npos) {
      problem("bad --set \"" + assignment + "\": expected key=value");
      continue;
    }
    assign(trimKey(std::string_view(assignment).substr(0, equals)),
           std::string_view(assignment).substr(equals + 1),
           ValueSource{ValueSource::Kind::kCommandLine, "", 0});
  }

  for (const ConfigSources::Shortcut& shortcut : sources.shortcuts) {
    assign(shortcut.key, shortcut.value,
           ValueSource{ValueSource::Kind::kCommandLine, shortcut.option, 0});
  }

  for (size_t i = 0; i < assignments.size(); ++i) {
    const Assignment& assignment = assignments[i];
    if (assignment.target == nullptr) {
      errors.push_back(assignment.problem);
      continue;
    }
    const bool overridden =
        std::any_of(assignments.begin() + static_cast<std::ptrdiff_t>(i) + 1, assignments.end(),
                    [&](const Assignment& later) { return later.target == assignment.target; });
    if (overridden) continue;
    Config::Entry& target = *assignment.target;
    auto value = parseOptionValue(*target.spec, assignment.text);
    if (!value) {
      const std::string shown = target.spec->secret ? "" : " \"" + assignment.text + "\"";
      errors.push_back("bad value" + shown + " for " + target.spec->key + " " +
                       where(assignment.source) +
                       (target.spec->secret ? " (not shown: secret)" : "") + ": " +
                       value.error().message);
      continue;
    }
    target.value = std::move(value.value());
    target.source = assignment.source;
  }

  // Rules read typed values, so they run only once every option holds a valid one.
  if (errors.empty()) {
    for (const OptionRule& rule : allOptionRules()) {
      if (rule.holds(config)) continue;
      std::string message = rule.requirement + " (";
      for (size_t i = 0; i < rule.keys.size(); ++i) {
        const Config::Entry& ruleEntry = config.entry(rule.keys[i]);
        if (i > 0) message += "; ";
        message += rule.keys[i] + " is " +
                   displayValue(*ruleEntry.spec, config.text(rule.keys[i])) + " " +
                   where(ruleEntry.source);
      }
      errors.push_back(message + ")");
    }
  }

  if (!errors.empty()) {
    std::string message;
    for (const std::string& error : errors) {
      if (!message.empty()) message += "\n";
      message += error;
    }
    return Error::fatal(std::move(message));
  }
  return config;
}

std::map<std::string, std::string> processEnvironment() {
  std::map<std::string, std::string> environment;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const size_t equals = text.find('=');
    if (equals == std::string_view::npos) continue;
    environment.emplace(std::string(text.substr(0, equals)), std::string(text.substr(equals + 1)));
  }
  return environment;
}

std::string renderEffectiveConfig(const Config& config) {
  struct Line {
    std::string key;
    std::string value;
    std::string source;
  };
  std::vector<Line> lines;
  size_t keyWidth = 0;
  size_t valueWidth = 0;
  for (const OptionSpec& spec : allOptions()) {
    Line line{spec.key, displayValue(spec, config.text(spec.key)),
              config.source(spec.key).describe()};
    keyWidth = std::max(keyWidth, line.key.size());
    valueWidth = std::max(valueWidth, line.value.size());
    lines.push_back(std::move(line));
  }
  std::string out;
  for (const Line& line : lines) {
    out += line.key + std::string(keyWidth - line.key.size() + 2, ' ') + line.value +
           std::string(valueWidth - line.value.size() + 2, ' ') + line.source + "\n";
  }
  return out;
}

}  // namespace regent

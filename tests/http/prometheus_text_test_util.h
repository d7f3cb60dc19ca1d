// A strict parser of the Prometheus text exposition format (0.0.4), so tests check /metrics by
// machine: metric and label name syntax, escaped label values, float values, HELP/TYPE lines;
// and the one matcher the /metrics tests of http/, masters and workers check a text with
// (metricsMatch).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace regent::testing {

struct PrometheusText {
  std::map<std::string, std::string> types;  // family -> counter/gauge/...
  std::map<std::string, std::string> helps;  // family -> help text
  // "name{label=\"value\",...}" (labels as written) -> value.
  std::map<std::string, double> samples;
  std::string error;  // Empty when the text parsed; otherwise names the line and the problem.
};

inline bool parsePrometheusFloat(const std::string& text, double& value) {
  if (text == "NaN" || text == "+Inf" || text == "-Inf") {
    value = text == "NaN" ? std::numeric_limits<double>::quiet_NaN()
                          : (text[0] == '+' ? 1 : -1) * std::numeric_limits<double>::infinity();
    return true;
  }
  static const std::regex kFloat(R"([-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?)");
  if (!std::regex_match(text, kFloat)) return false;
  value = std::strtod(text.c_str(), nullptr);
  return true;
}

inline PrometheusText parsePrometheusText(const std::string& text) {
  static const std::regex kMetricName("[a-zA-Z_:][a-zA-Z0-9_:]*");
  static const std::regex kLabelName("[a-zA-Z_][a-zA-Z0-9_]*");
  static const std::regex kType("counter|gauge|histogram|summary|untyped");
  PrometheusText parsed;
  if (text.empty() || text.back() != '\n') {
    parsed.error = "the text does not end with a newline";
    return parsed;
  }
  std::set<std::string> familiesWithSamples;
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  auto fail = [&](const std::string& why) {
    parsed.error = "line " + std::to_string(number) + " (" + line + "): " + why;
    return parsed;
  };
  while (std::getline(lines, line)) {
    ++number;
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::istringstream words(line.substr(1));
      std::string keyword, name;
      words >> keyword >> name;
      if (keyword != "HELP" && keyword != "TYPE") continue;  // A plain comment.
      if (!std::regex_match(name, kMetricName)) return fail("bad metric name in " + keyword);
      std::string rest;
      std::getline(words, rest);
      if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
      if (keyword == "HELP") {
        if (parsed.helps.count(name)) return fail("second HELP for " + name);
        parsed.helps[name] = rest;
      } else {
        if (parsed.types.count(name)) return fail("second TYPE for " + name);
        if (familiesWithSamples.count(name)) return fail("TYPE after samples of " + name);
        if (!std::regex_match(rest, kType)) return fail("unknown type '" + rest + "'");
        parsed.types[name] = rest;
      }
      continue;
    }
    size_t pos = 0;
    while (pos < line.size() && line[pos] != '{' && line[pos] != ' ') ++pos;
    const std::string name = line.substr(0, pos);
    if (!std::regex_match(name, kMetricName)) return fail("bad metric name '" + name + "'");
    std::string labels;
    if (pos < line.size() && line[pos] == '{') {
      const size_t start = pos++;
      std::set<std::string> seen;
      while (true) {
        if (pos < line.size() && line[pos] == '}') break;
        size_t eq = line.find('=', pos);
        if (eq == std::string::npos) return fail("label without '='");
        const std::string label = line.substr(pos, eq - pos);
        if (!std::regex_match(label, kLabelName)) return fail("bad label name '" + label + "'");
        if (!seen.insert(label).second) return fail("label " + label + " twice");
        pos = eq + 1;
        if (pos >= line.size() || line[pos] != '"') return fail("label value not quoted");
        ++pos;
        bool closed = false;
        while (pos < line.size()) {
          if (line[pos] == '\\') {
            if (pos + 1 >= line.size()) return fail("escape at end of line");
            const char escaped = line[pos + 1];
            if (escaped != '\\' && escaped != '"' && escaped != 'n') {
              return fail(std::string("bad escape \\") + escaped);
            }
            pos += 2;
          } else if (line[pos] == '"') {
            closed = true;
            ++pos;
            break;
          } else {
            ++pos;
          }
        }
        if (!closed) return fail("unterminated label value");
        if (pos < line.size() && line[pos] == ',') {
          ++pos;
          continue;
        }
        if (pos < line.size() && line[pos] == '}') break;
        return fail("expected ',' or '}' after a label");
      }
      ++pos;  // '}'
      labels = line.substr(start, pos - start);
    }
    if (pos >= line.size() || line[pos] != ' ') return fail("no space before the value");
    std::istringstream values(line.substr(pos + 1));
    std::string valueText, timestamp, extra;
    values >> valueText >> timestamp >> extra;
    double value = 0;
    if (!parsePrometheusFloat(valueText, value))
      return fail("value '" + valueText + "' is not a float");
    if (!timestamp.empty() && !std::regex_match(timestamp, std::regex("-?[0-9]+"))) {
      return fail("timestamp '" + timestamp + "' is not an integer");
    }
    if (!extra.empty()) return fail("trailing text '" + extra + "'");
    // A histogram's samples carry the family's name with a suffix.
    std::string familyName = name;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string ending(suffix);
      if (parsed.types.count(name) == 0 && name.size() > ending.size() &&
          name.compare(name.size() - ending.size(), ending.size(), ending) == 0) {
        const std::string stripped = name.substr(0, name.size() - ending.size());
        if (parsed.types.count(stripped) && parsed.types.at(stripped) == "histogram") {
          familyName = stripped;
        }
      }
    }
    if (!parsed.types.count(familyName)) {
      return fail("sample of " + name + " before its TYPE line");
    }
    familiesWithSamples.insert(familyName);
    if (!parsed.samples.emplace(name + labels, value).second) {
      return fail("series " + name + labels + " twice");
    }
  }
  return parsed;
}

// What a test expects of a /metrics text. Series are written as the text writes them:
// "name{label=\"value\",...}".
struct ExpectedMetrics {
  std::map<std::string, double> samples;     // Series -> value.
  std::map<std::string, std::string> types;  // Family -> counter, gauge, histogram.
  std::vector<std::string> withoutSamples;   // Families (name prefixes) with no series at all.
};

// Success when `text` parses strictly, every family has a HELP text, and it holds what `expected`
// says; otherwise a failure naming each difference, with the text.
inline ::testing::AssertionResult metricsMatch(const std::string& text,
                                               const ExpectedMetrics& expected) {
  const PrometheusText parsed = parsePrometheusText(text);
  if (!parsed.error.empty()) {
    return ::testing::AssertionFailure() << "not Prometheus text: " << parsed.error << "\n" << text;
  }
  std::ostringstream problems;
  for (const auto& [family, type] : parsed.types) {
    auto help = parsed.helps.find(family);
    if (help == parsed.helps.end() || help->second.empty()) problems << family << ": no HELP\n";
  }
  for (const auto& [series, value] : expected.samples) {
    auto found = parsed.samples.find(series);
    if (found == parsed.samples.end()) {
      problems << series << ": missing (expected " << value << ")\n";
    } else if (!(found->second == value || (std::isnan(value) && std::isnan(found->second)))) {
      problems << series << ": " << found->second << ", expected " << value << "\n";
    }
  }
  for (const auto& [family, type] : expected.types) {
    auto found = parsed.types.find(family);
    if (found == parsed.types.end()) {
      problems << family << ": no TYPE (expected " << type << ")\n";
    } else if (found->second != type) {
      problems << family << ": TYPE " << found->second << ", expected " << type << "\n";
    }
  }
  for (const std::string& prefix : expected.withoutSamples) {
    for (const auto& [series, value] : parsed.samples) {
      if (series.rfind(prefix, 0) == 0) problems << series << ": there, expected none\n";
    }
  }
  if (problems.str().empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << problems.str() << "in:\n" << text;
}

// The lines of family `name` in `text` as written: its HELP and TYPE lines and its samples
// (a histogram's _bucket, _sum and _count too); empty when it is not there.
inline std::string familyText(const std::string& text, const std::string& name) {
  std::istringstream lines(text);
  std::string line, family;
  bool inside = false;
  while (std::getline(lines, line)) {
    if (line.rfind("# HELP ", 0) == 0) {
      inside = line.compare(7, name.size() + 1, name + " ") == 0;
    }
    if (inside) family += line + "\n";
  }
  return family;
}

}  // namespace regent::testing

// Reading docs/architecture.md's dependency table and checking includes against it
// (include_rules_test_util.h).
#include "tests/docs/include_rules_test_util.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <regex>
#include <sstream>

namespace regent::docs {
namespace {

constexpr std::string_view kHeading = "## Folders and what each may depend on";

std::string trim(std::string text) {
  const auto notSpace = [](unsigned char c) { return !std::isspace(c); };
  text.erase(text.begin(), std::find_if(text.begin(), text.end(), notSpace));
  text.erase(std::find_if(text.rbegin(), text.rend(), notSpace).base(), text.end());
  return text;
}

bool startsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// The text between backticks, in order.
std::vector<std::string> backticked(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  while (true) {
    const size_t open = text.find('`', at);
    if (open == std::string::npos) break;
    const size_t close = text.find('`', open + 1);
    if (close == std::string::npos) break;
    out.push_back(text.substr(open + 1, close - open - 1));
    at = close + 1;
  }
  return out;
}

// The cells of a table line "| a | b | c |".
std::vector<std::string> cellsOf(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  for (size_t i = 1; i < line.size(); ++i) {
    if (line[i] == '|') {
      cells.push_back(trim(cell));
      cell.clear();
    } else {
      cell += line[i];
    }
  }
  return cells;
}

// Splits "a, b (x, y), c" at the commas outside parentheses.
std::vector<std::string> items(const std::string& cell) {
  std::vector<std::string> out;
  std::string item;
  int depth = 0;
  for (char c : cell) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(trim(item));
      item.clear();
    } else {
      item += c;
    }
  }
  if (!trim(item).empty()) out.push_back(trim(item));
  return out;
}

int rowOfFolder(const DependencyTable& table, const std::string& folder) {
  for (size_t row = 0; row < table.rows.size(); ++row) {
    const auto& folders = table.rows[row].folders;
    if (std::find(folders.begin(), folders.end(), folder) != folders.end()) {
      return static_cast<int>(row);
    }
  }
  return -1;
}

// Reads row `index`'s cell into its rule; table.rows holds every row's folders already.
void readDependsOn(DependencyTable& table, size_t index) {
  DependencyRule& rule = table.rows[index];
  const std::string cell = rule.dependsOnText;
  if (cell == "—" || cell == "-" || cell.empty()) return;
  if (cell == "everything") {
    rule.everything = true;
    return;
  }
  if (startsWith(cell, "everything above")) {
    rule.everythingAbove = true;
    const size_t but = cell.find(" but ");
    if (but != std::string::npos) {
      for (const std::string& folder : backticked(cell.substr(but))) {
        if (rowOfFolder(table, folder) < 0) {
          rule.problems.push_back("`" + folder + "` after \"but\" is no folder of the table");
        }
        rule.exceptFolders.push_back(folder);
      }
    }
    return;
  }
  for (std::string item : items(cell)) {
    if (startsWith(item, "and ")) item = trim(item.substr(4));
    std::string name = item;
    std::vector<std::string> only;
    const size_t paren = item.find('(');
    if (paren != std::string::npos) {
      name = trim(item.substr(0, paren));
      only = backticked(item.substr(paren));
    }
    name.erase(std::remove(name.begin(), name.end(), '`'), name.end());
    int row = -1;
    if (!name.empty() && name.back() == '/') {
      row = rowOfFolder(table, name);
    } else {
      row = rowOfFolder(table, name + "/");
      if (row < 0) row = rowOfFolder(table, "services/" + name + "/");
    }
    if (row < 0) {
      rule.problems.push_back("\"" + item + "\" names no folder of the table");
      continue;
    }
    if (static_cast<size_t>(row) >= index) {
      rule.problems.push_back("\"" + item +
                              "\" is not above this row: arrows point down the table");
      continue;
    }
    rule.allowed.push_back({static_cast<size_t>(row), std::move(only)});
  }
}

bool pathMatches(const std::string& path, const std::string& pattern) {
  if (!pattern.empty() && pattern.back() == '/') return startsWith(path, pattern);
  return path == pattern;
}

std::string describeAllowed(const DependencyRule& rule) {
  return rule.dependsOnText.empty() ? "nothing" : rule.dependsOnText;
}

}  // namespace

int DependencyTable::rowOf(const std::string& path) const {
  int best = -1;
  size_t bestLength = 0;
  for (size_t row = 0; row < rows.size(); ++row) {
    for (const std::string& folder : rows[row].folders) {
      if (startsWith(path, folder) && folder.size() > bestLength) {
        best = static_cast<int>(row);
        bestLength = folder.size();
      }
    }
  }
  return best;
}

Result<DependencyTable> parseDependencyTable(const std::string& markdown) {
  std::istringstream in(markdown);
  std::string line;
  bool inSection = false;
  std::vector<std::vector<std::string>> lines;
  while (std::getline(in, line)) {
    if (!inSection) {
      inSection = line == kHeading;
      continue;
    }
    if (startsWith(line, "|")) {
      lines.push_back(cellsOf(line));
    } else if (!lines.empty() || startsWith(line, "#")) {
      break;
    }
  }
  if (!inSection) {
    return Error::fatal("no heading \"" + std::string(kHeading) + "\"");
  }
  // The header and the separator line first.
  if (lines.size() < 3 || lines[0].size() < 3 || lines[0][0] != "folder" ||
      lines[0][2] != "may depend on") {
    return Error::fatal("no table | folder | holds | may depend on | under \"" +
                        std::string(kHeading) + "\"");
  }
  DependencyTable table;
  for (size_t i = 2; i < lines.size(); ++i) {
    if (lines[i].size() < 3) {
      return Error::fatal("a row of the table with fewer than 3 cells: " + lines[i][0]);
    }
    DependencyRule rule;
    for (const std::string& name : backticked(lines[i][0])) {
      if (!name.empty() && name.back() == '/') rule.folders.push_back(name);
    }
    rule.dependsOnText = lines[i][2];
    table.rows.push_back(std::move(rule));
  }
  for (size_t row = 0; row < table.rows.size(); ++row) readDependsOn(table, row);
  return table;
}

std::string IncludeViolation::describe() const {
  if (include.empty()) return file + ": " + why;
  return file + ":" + std::to_string(line) + ": #include \"" + include + "\": " + why;
}

std::vector<IncludeViolation> checkIncludes(const DependencyTable& table, const std::string& file,
                                            const std::string& text,
                                            const std::string& sourceRoot) {
  std::vector<IncludeViolation> out;
  const int own = table.rowOf(file);
  if (own < 0) {
    out.push_back({file, 0, "", "the file is in no folder of the table"});
    return out;
  }
  const DependencyRule& rule = table.rows[static_cast<size_t>(own)];
  const std::string ownFolder = rule.folders.front();
  static const std::regex kInclude(R"re(^\s*#\s*include\s*"([^"]+)")re");
  std::istringstream in(text);
  std::string line;
  int number = 0;
  const auto exists = [&](const std::string& relative) {
    return !sourceRoot.empty() && std::filesystem::exists(sourceRoot + "/" + relative);
  };
  while (std::getline(in, line)) {
    ++number;
    std::smatch match;
    if (line.find("include") == std::string::npos) continue;  // Most lines: no regex needed.
    if (!std::regex_search(line, match, kInclude)) continue;
    const std::string include = match[1];
    const int target = table.rowOf(include);
    if (target < 0) {
      // Next to the including file ("x.h"), or not the project's (a system header in quotes, a
      // file generated into the build tree): nothing to judge, unless it is a project file
      // outside every folder of the table.
      const std::string sibling = std::filesystem::path(file).parent_path() / include;
      if (exists(include) && !exists(sibling)) {
        out.push_back({file, number, include, "the included file is in no folder of the table"});
      }
      continue;
    }
    if (target == own || rule.everything) continue;
    const DependencyRule& to = table.rows[static_cast<size_t>(target)];
    bool allowed = false;
    if (rule.everythingAbove) {
      allowed = target < own && std::none_of(rule.exceptFolders.begin(), rule.exceptFolders.end(),
                                             [&](const std::string& folder) {
                                               return table.rowOf(folder) == target;
                                             });
    }
    for (const auto& entry : rule.allowed) {
      if (entry.row != static_cast<size_t>(target)) continue;
      allowed = entry.onlyPaths.empty() ||
                std::any_of(entry.onlyPaths.begin(), entry.onlyPaths.end(),
                            [&](const std::string& path) { return pathMatches(include, path); });
    }
    if (!allowed) {
      out.push_back({file, number, include,
                     ownFolder + " may not depend on " + to.folders.front() +
                         " (docs/architecture.md allows: " + describeAllowed(rule) + ")"});
    }
  }
  return out;
}

}  // namespace regent::docs

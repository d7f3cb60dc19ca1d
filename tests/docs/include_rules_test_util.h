// The dependency rules of docs/architecture.md ("Folders and what each may depend on") read from
// the table itself, and the check of a source file's project includes against them, so that the
// table and the code cannot drift apart (architecture_test.cc).
//
// How a row's "may depend on" cell reads (the table's own words, nothing else):
//   `—`                         nothing outside the folder itself;
//   `everything`                anything;
//   `everything above`          every folder of a row above this one, optionally followed by
//                               `but` and the folders left out, in backticks;
//   `common, conf, rpc (...)`   the folders named: a bare name is a top-level folder (`conf`) or
//                               one of `services/` (`resourcemanager`); a parenthesis holding
//                               paths in backticks allows only those (a path ending in `/` is a
//                               folder, any other a file).
// A folder may name only folders of rows above its own: arrows point down the table. A file
// belongs to the row of the longest folder of the table its path starts with, and may always
// include files of its own row.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"

namespace regent::docs {

struct DependencyRule {
  std::vector<std::string> folders;  // `services/jobmaster/`; a row may name several.
  std::string dependsOnText;         // The cell as written, for messages.
  bool everything = false;
  bool everythingAbove = false;
  std::vector<std::string> exceptFolders;  // After "everything above but".
  struct Allowed {
    size_t row = 0;
    std::vector<std::string> onlyPaths;  // Empty: the whole folder.
  };
  std::vector<Allowed> allowed;
  // What in the cell could not be read, or names a folder below this row.
  std::vector<std::string> problems;
};

struct DependencyTable {
  std::vector<DependencyRule> rows;  // In the table's order.

  // The row of the longest folder `path` starts with, or -1.
  int rowOf(const std::string& path) const;
};

// Reads the table under the heading "## Folders and what each may depend on" of `markdown`.
// Fails when the heading or the table is missing.
Result<DependencyTable> parseDependencyTable(const std::string& markdown);

// One include the table does not allow, or one it cannot judge.
struct IncludeViolation {
  std::string file;  // Relative to the source root.
  int line = 0;
  std::string include;
  std::string why;

  // "<file>:<line>: #include \"<include>\": <why>", or "<file>: <why>" for the file itself.
  std::string describe() const;
};

// Checks the `#include "..."` lines of `text`, the contents of `file` (relative to the source
// root). An include is a project header when it names a folder of the table, or a file that
// exists under `sourceRoot` (empty: none exists); anything else (a generated or system header in
// quotes) is not judged. A file in no folder of the table is itself a violation.
std::vector<IncludeViolation> checkIncludes(const DependencyTable& table, const std::string& file,
                                            const std::string& text, const std::string& sourceRoot);

}  // namespace regent::docs

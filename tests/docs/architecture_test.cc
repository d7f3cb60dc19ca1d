// docs/architecture.md's table of folders and what each may depend on is checked against every
// project include of every source file, read from the table itself (include_rules_test_util.h);
// and the checker is shown to refuse what the table does not allow.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/docs/include_rules_test_util.h"

namespace regent::docs {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kSourceDir = REGENT_SOURCE_DIR;

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool isSource(const std::filesystem::path& path) {
  const std::string extension = path.extension().string();
  return extension == ".h" || extension == ".cc" || extension == ".hpp" || extension == ".cpp";
}

// Every C++ source of the repository, relative to its root: build trees (top-level `build*`) and
// hidden folders are not the repository's sources.
std::vector<std::string> sourceFiles() {
  std::vector<std::string> files;
  const std::filesystem::path root(kSourceDir);
  for (const auto& top : std::filesystem::directory_iterator(root)) {
    const std::string name = top.path().filename().string();
    if (name.starts_with("build") || name.starts_with(".")) continue;
    if (top.is_regular_file() && isSource(top.path())) {
      files.push_back(name);
      continue;
    }
    if (!top.is_directory()) continue;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(top.path())) {
      if (entry.is_regular_file() && isSource(entry.path())) {
        files.push_back(std::filesystem::relative(entry.path(), root).string());
      }
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

DependencyTable realTable() {
  auto table = parseDependencyTable(readFile(kSourceDir + "/docs/architecture.md"));
  EXPECT_TRUE(table.ok()) << table.error().message;
  return table.ok() ? std::move(table).value() : DependencyTable{};
}

TEST(ArchitectureTable, EveryProjectIncludeIsOneTheTableAllows) {
  const DependencyTable table = realTable();
  ASSERT_FALSE(table.rows.empty());
  const std::vector<std::string> files = sourceFiles();
  ASSERT_GT(files.size(), 100u) << "the sources were not found under " << kSourceDir;
  std::vector<std::string> violations;
  std::vector<bool> rowUsed(table.rows.size(), false);
  for (const std::string& file : files) {
    const int row = table.rowOf(file);
    if (row >= 0) rowUsed[static_cast<size_t>(row)] = true;
    for (const auto& violation :
         checkIncludes(table, file, readFile(kSourceDir + "/" + file), kSourceDir)) {
      violations.push_back(violation.describe());
    }
  }
  std::string listed;
  for (const std::string& violation : violations) listed += "\n  " + violation;
  EXPECT_TRUE(violations.empty())
      << "docs/architecture.md, \"Folders and what each may depend on\", does not allow "
      << violations.size() << " include(s):" << listed;
  // A row whose cell cannot be read checks nothing; the rows of folders holding sources at least
  // must read as rules.
  std::vector<std::string> problems;
  for (size_t row = 0; row < table.rows.size(); ++row) {
    if (!rowUsed[row]) continue;
    for (const std::string& problem : table.rows[row].problems) {
      problems.push_back(table.rows[row].folders.front() + ": " + problem);
    }
  }
  std::string problemList;
  for (const std::string& problem : problems) problemList += "\n  " + problem;
  EXPECT_TRUE(problems.empty()) << "rows of docs/architecture.md that check nothing:"
                                << problemList;
}

TEST(ArchitectureTable, NamesTheFoldersTheSourcesLiveIn) {
  const DependencyTable table = realTable();
  for (const char* folder :
       {"common/", "conf/", "rpc/", "ha/", "leader/", "store/", "client/", "http/", "jobgraph/",
        "services/", "services/dispatcher/", "services/jobmaster/", "services/master/",
        "services/worker/", "cli/", "tests/", "bench/"}) {
    EXPECT_GE(table.rowOf(std::string(folder) + "x.h"), 0) << folder;
  }
}

// A small table in the real one's words, for the checker's own tests.
constexpr const char* kTable = R"md(# Architecture

## Folders and what each may depend on

| folder | holds | may depend on |
| --- | --- | --- |
| `common/` | basics | — |
| `rpc/` | the wire | common |
| `store/` | stores | common, rpc (the schema only: `rpc/schema/`, `rpc/wire_ids.h`) |
| `services/` | services | everything above |
| `services/dispatcher/` | the Dispatcher | common, rpc, store |
| `services/jobmaster/` | JobMasters | common, dispatcher (its port: `services/dispatcher/job_runner.h`) |
| `services/worker/` | the worker | everything above but `services/dispatcher/` |
| `tests/` | tests | everything |

Arrows point down this table only.

## Next section
)md";

DependencyTable smallTable() {
  auto table = parseDependencyTable(kTable);
  EXPECT_TRUE(table.ok()) << table.error().message;
  return table.ok() ? std::move(table).value() : DependencyTable{};
}

std::vector<std::string> check(const std::string& file, const std::string& text) {
  std::vector<std::string> out;
  for (const auto& violation : checkIncludes(smallTable(), file, text, "")) {
    out.push_back(violation.describe());
  }
  return out;
}

TEST(IncludeRules, AnIncludeTheTableDoesNotAllowIsNamedWithItsFileLineAndInclude) {
  EXPECT_THAT(check("rpc/server.cc",
                    "// the server\n#include \"rpc/server.h\"\n"
                    "#include <string>\n#include \"store/store.h\"\n"),
              ElementsAre("rpc/server.cc:4: #include \"store/store.h\": rpc/ may not depend on "
                          "store/ (docs/architecture.md allows: common)"));
  EXPECT_THAT(check("common/a.h", "#include \"rpc/b.h\"\n"),
              ElementsAre(HasSubstr("common/ may not depend on rpc/ (docs/architecture.md "
                                    "allows: —)")));
}

TEST(IncludeRules, WhatTheTableNamesIsAllowedAndTheOwnFolderAlways) {
  EXPECT_THAT(check("services/dispatcher/d.cc",
                    "#include \"services/dispatcher/d.h\"\n"
                    "#include \"common/ids.h\"\n"
                    "  #  include \"rpc/failure.h\"\n"
                    "#include \"store/job_graph_store.h\"\n"),
              ElementsAre());
  EXPECT_THAT(check("tests/x_test.cc", "#include \"services/worker/w.h\"\n"), ElementsAre());
}

TEST(IncludeRules, APathInParenthesesAllowsOnlyThatPath) {
  EXPECT_THAT(check("store/s.cc",
                    "#include \"rpc/schema/jobs.capnp.h\"\n"
                    "#include \"rpc/wire_ids.h\"\n"),
              ElementsAre());
  EXPECT_THAT(check("store/s.cc", "#include \"rpc/rpc_server.h\"\n"),
              ElementsAre(HasSubstr("store/ may not depend on rpc/")));
  EXPECT_THAT(check("services/jobmaster/j.h", "#include \"services/dispatcher/job_runner.h\"\n"),
              ElementsAre());
  EXPECT_THAT(check("services/jobmaster/j.h", "#include \"services/dispatcher/dispatcher.h\"\n"),
              ElementsAre(HasSubstr("services/jobmaster/ may not depend on "
                                    "services/dispatcher/")));
}

TEST(IncludeRules, EverythingAboveButLeavesOutWhatItNamesAndWhatIsBelow) {
  EXPECT_THAT(check("services/worker/w.cc",
                    "#include \"services/jobmaster/j.h\"\n"
                    "#include \"store/s.h\"\n"),
              ElementsAre());
  EXPECT_THAT(check("services/worker/w.cc",
                    "#include \"services/dispatcher/d.h\"\n"
                    "#include \"tests/t.h\"\n"),
              ElementsAre(HasSubstr("services/worker/ may not depend on services/dispatcher/"),
                          HasSubstr("services/worker/ may not depend on tests/")));
}

TEST(IncludeRules, AFileInNoFolderOfTheTableIsNamed) {
  EXPECT_THAT(check("tools/t.cc", "#include \"common/a.h\"\n"),
              ElementsAre("tools/t.cc: the file is in no folder of the table"));
}

TEST(IncludeRules, AnArrowUpTheTableIsARowProblem) {
  auto table = parseDependencyTable(
      "## Folders and what each may depend on\n\n"
      "| folder | holds | may depend on |\n| --- | --- | --- |\n"
      "| `common/` | basics | rpc |\n| `rpc/` | the wire | common, nowhere |\n");
  ASSERT_TRUE(table.ok()) << table.error().message;
  EXPECT_THAT(table.value().rows[0].problems,
              ElementsAre("\"rpc\" is not above this row: arrows point down the table"));
  EXPECT_THAT(table.value().rows[1].problems,
              ElementsAre("\"nowhere\" names no folder of the table"));
}

TEST(IncludeRules, AMissingTableIsAnError) {
  auto table = parseDependencyTable("# Architecture\n\nNo table here.\n");
  ASSERT_FALSE(table.ok());
  EXPECT_THAT(table.error().message, HasSubstr("Folders and what each may depend on"));
}

}  // namespace
}  // namespace regent::docs

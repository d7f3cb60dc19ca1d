// The generated docs: conf/regent.yaml and the table of docs/configuration.md match the
// registry, and loading the example yields every default.
#include "conf/example.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "conf/config.h"
#include "tests/conf/config_test_util.h"

namespace regent {
namespace {

using ::testing::HasSubstr;

constexpr const char* kRegenerate =
    "regenerate with: cmake --build <build-dir> --target regent-update-config-docs "
    "(or <build-dir>/bin/regent-config-example --update <source-dir>)";

std::string sourcePath(const std::string& relative) {
  return std::string(REGENT_SOURCE_DIR) + "/" + relative;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

TEST(ExampleConfig, CommittedFileMatchesTheRegistry) {
  EXPECT_EQ(readFile(sourcePath("conf/regent.yaml")), renderExampleYaml())
      << "conf/regent.yaml is out of date; " << kRegenerate;
}

TEST(ExampleConfig, LoadingTheCommittedFileYieldsTheDefaults) {
  const std::string path = sourcePath("conf/regent.yaml");
  auto fromFile = loadConfig(ConfigSources{.file = path});
  ASSERT_TRUE(fromFile.ok()) << fromFile.error().message;
  auto defaults = loadConfig({});
  ASSERT_TRUE(defaults.ok()) << defaults.error().message;
  for (const OptionSpec& option : allOptions()) {
    EXPECT_EQ(fromFile.value().text(option.key), defaults.value().text(option.key)) << option.key;
    // Every option is spelled out in the file, so each value comes from it.
    EXPECT_EQ(fromFile.value().source(option.key).describe(), "file " + path) << option.key;
  }
}

TEST(ExampleConfig, DocumentsEveryOptionWithDocTypeDefaultAndReaders) {
  const std::string yaml = renderExampleYaml();
  for (const OptionSpec& option : allOptions()) {
    const std::string leaf = option.key.substr(option.key.rfind('.') + 1);
    EXPECT_THAT(yaml, HasSubstr("Type: " + describeOptionType(option) + ". Default: "))
        << option.key;
    EXPECT_THAT(yaml, HasSubstr(leaf + ": ")) << option.key;
  }
  EXPECT_THAT(yaml, HasSubstr("ha:\n  # zookeeper: masters elect a leader"));
  EXPECT_THAT(yaml, HasSubstr("  zookeeper:\n    # ZooKeeper servers to connect to"));
  EXPECT_THAT(yaml, HasSubstr("    # Type: duration, > 0. Default: 6s. Read by: master, worker, "
                              "regentctl.\n"
                              "    session-timeout: 6s\n"));
  EXPECT_THAT(yaml, HasSubstr("    # Type: duration, > 0. Default: 10s. Read by: master.\n"
                              "    lock-timeout: 10s\n"));
  EXPECT_THAT(yaml, HasSubstr("    auth: \"\"\n"));
}

TEST(ExampleConfig, LinesFitInOneHundredColumns) {
  std::istringstream in(renderExampleYaml());
  for (std::string line; std::getline(in, line);) EXPECT_LE(line.size(), 100u) << line;
}

TEST(ExampleConfig, GeneratedTextLoadsAfterChangingAValue) {
  // The renderer's quoting must survive a round trip for values a user edits in place.
  ScratchDirForTests dir;
  std::string yaml = renderExampleYaml();
  const std::string from = "    auth: \"\"\n";
  yaml.replace(yaml.find(from), from.size(), "    auth: \"alice:s3cret\"\n");
  auto config = loadConfig(ConfigSources{.file = dir.write("regent.yaml", yaml)});
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config.value().getString("ha.zookeeper.auth"), "alice:s3cret");
}

TEST(OptionsTable, CommittedDocsTableMatchesTheRegistry) {
  const std::string docs = readFile(sourcePath("docs/configuration.md"));
  auto updated = replaceOptionsTable(docs);
  ASSERT_TRUE(updated.ok()) << "docs/configuration.md: " << updated.error().message;
  EXPECT_EQ(updated.value(), docs)
      << "the option table in docs/configuration.md is out of date; " << kRegenerate;
}

TEST(OptionsTable, HasOneRowPerOption) {
  const std::string table = renderOptionsTable();
  EXPECT_THAT(table, HasSubstr("| `worker.slots` | integer, 1..1024 | `4` | master, worker | "
                               "Number of task slots a worker offers. |\n"));
  EXPECT_THAT(table,
              HasSubstr("| `ha.zookeeper.auth` | user:password or empty, secret | `\"\"` |"));
  size_t rows = 0;
  for (const char c : table) rows += c == '\n' ? 1 : 0;
  EXPECT_EQ(rows, allOptions().size() + 2);  // Plus the header and its separator.
}

TEST(OptionsTable, ReplacingKeepsTheTextAroundTheMarkers) {
  const std::string markdown = "intro\n" + std::string(kOptionsTableBegin) + "\nstale\n" +
                               std::string(kOptionsTableEnd) + "\noutro\n";
  auto updated = replaceOptionsTable(markdown);
  ASSERT_TRUE(updated.ok());
  EXPECT_EQ(updated.value(), "intro\n" + std::string(kOptionsTableBegin) + "\n" +
                                 renderOptionsTable() + std::string(kOptionsTableEnd) +
                                 "\noutro\n");
}

TEST(OptionsTable, ReplacingWithoutMarkersIsAnError) {
  EXPECT_FALSE(replaceOptionsTable("no markers here").ok());
  const std::string reversed = std::string(kOptionsTableEnd) + std::string(kOptionsTableBegin);
  auto result = replaceOptionsTable(reversed);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.error().message, HasSubstr("in that order"));
}

}  // namespace
}  // namespace regent

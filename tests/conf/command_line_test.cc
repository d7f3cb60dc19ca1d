// ConfigCommandLine: the --config/--set/--print-config/--log-format options every binary shares,
// their order against a binary's own shortcuts, and the exit codes load() hands back.
#include "conf/command_line.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "tests/conf/config_test_util.h"

namespace regent {
namespace {

constexpr int kUsage = 2;

// Parses `args` (after the program name) on an app that has the shared options.
void parse(CLI::App& app, std::vector<std::string> args) {
  std::vector<const char*> argv = {"prog"};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
}

TEST(ConfigCommandLine, LoadsFileThenSetThenTheBinarysOverrides) {
  ScratchDirForTests dir;
  const std::string file =
      dir.write("regent.yaml", "cluster-id: from-file\nha:\n  mode: standalone\n");
  CLI::App app;
  ConfigCommandLine commandLine(app, "prog", {});
  parse(app, {"--config", file, "--set", "cluster-id=from-set", "--set", "log.level=debug"});
  commandLine.override("--cluster", "cluster-id", "from-override");

  std::ostringstream out, err;
  auto loaded = commandLine.load(out, err, kUsage);
  ASSERT_TRUE(std::holds_alternative<Config>(loaded)) << err.str();
  const Config& config = std::get<Config>(loaded);
  EXPECT_EQ(config.getString("cluster-id"), "from-override");
  EXPECT_EQ(config.source("cluster-id").describe(), "--cluster");
  EXPECT_EQ(config.getString("ha.mode"), "standalone");
  EXPECT_EQ(config.getString("log.level"), "debug");
  EXPECT_EQ(out.str(), "");
}

TEST(ConfigCommandLine, LogFormatIsTheSameAsSettingLogFormat) {
  CLI::App app;
  ConfigCommandLine commandLine(app, "prog", {.logFormat = true});
  parse(app, {"--set", "log.format=text", "--log-format", "json"});
  std::ostringstream out, err;
  auto loaded = commandLine.load(out, err, kUsage);
  ASSERT_TRUE(std::holds_alternative<Config>(loaded)) << err.str();
  EXPECT_EQ(std::get<Config>(loaded).getString("log.format"), "json");
}

TEST(ConfigCommandLine, LogFormatWinsOverSetWhereverItStandsAndIsNamedAsTheSource) {
  CLI::App app;
  ConfigCommandLine commandLine(app, "prog", {.printConfig = true, .logFormat = true});
  parse(app, {"--log-format", "json", "--set", "log.format=text", "--print-config"});
  std::ostringstream out, err;
  auto loaded = commandLine.load(out, err, kUsage);
  ASSERT_TRUE(std::holds_alternative<int>(loaded)) << err.str();
  EXPECT_THAT(out.str(), ::testing::ContainsRegex("\nlog\\.format +json +--log-format\n"));
}

TEST(ConfigCommandLine, BadShortcutValueNamesTheShortcut) {
  CLI::App app;
  ConfigCommandLine commandLine(app, "prog", {});
  parse(app, {});
  commandLine.override("--zk", "ha.zookeeper.quorum", "nohostport");
  std::ostringstream out, err;
  auto loaded = commandLine.load(out, err, kUsage);
  ASSERT_TRUE(std::holds_alternative<int>(loaded));
  EXPECT_THAT(err.str(), ::testing::HasSubstr(
                             "bad value \"nohostport\" for ha.zookeeper.quorum from --zk: "));
}

TEST(ConfigCommandLine, LogFormatAcceptsOnlyTextOrJson) {
  CLI::App app;
  ConfigCommandLine commandLine(app, "prog", {.logFormat = true});
  EXPECT_THROW(parse(app, {"--log-format", "xml"}), CLI::ValidationError);
}

TEST(ConfigCommandLine, OptionsNotAskedForAreNotRegistered) {
  CLI::App app;
  ConfigCommandLine commandLine(app, "prog", {});
  EXPECT_THROW(parse(app, {"--print-config"}), CLI::ExtrasError);
  CLI::App other;
  ConfigCommandLine otherLine(other, "prog", {});
  EXPECT_THROW(parse(other, {"--log-format", "json"}), CLI::ExtrasError);
}

TEST(ConfigCommandLine, PrintConfigPrintsTheEffectiveConfigurationAndExitsZero) {
  CLI::App app;
  ConfigCommandLine commandLine(app, "prog", {.printConfig = true});
  parse(app, {"--set", "cluster-id=printed", "--print-config"});
  std::ostringstream out, err;
  auto loaded = commandLine.load(out, err, kUsage);
  ASSERT_TRUE(std::holds_alternative<int>(loaded));
  EXPECT_EQ(std::get<int>(loaded), 0);
  EXPECT_NE(out.str().find("printed"), std::string::npos) << out.str();
  EXPECT_EQ(err.str(), "");
}

TEST(ConfigCommandLine, ABadValueIsReportedWithTheProgramAndTheUsageCode) {
  CLI::App app;
  ConfigCommandLine commandLine(app, "prog", {.printConfig = true});
  parse(app, {"--set", "no.such.option=1", "--print-config"});
  std::ostringstream out, err;
  auto loaded = commandLine.load(out, err, kUsage);
  ASSERT_TRUE(std::holds_alternative<int>(loaded));
  EXPECT_EQ(std::get<int>(loaded), kUsage);
  EXPECT_EQ(err.str().rfind("prog: ", 0), 0u) << err.str();
  EXPECT_NE(err.str().find("no.such.option"), std::string::npos) << err.str();
  EXPECT_EQ(out.str(), "");
}

TEST(ConfigCommandLine, QuietLevelAppliesOnlyWhileLogLevelHasItsDefault) {
  for (const bool setLevel : {false, true}) {
    CLI::App app;
    ConfigCommandLine commandLine(app, "prog", {});
    parse(app, setLevel ? std::vector<std::string>{"--set", "log.level=debug"}
                        : std::vector<std::string>{});
    std::ostringstream out, err;
    auto loaded = commandLine.load(out, err, kUsage);
    ASSERT_TRUE(std::holds_alternative<Config>(loaded)) << err.str();
    ASSERT_TRUE(commandLine.setUpLogging(std::get<Config>(loaded), "prog", err, "error"))
        << err.str();
    EXPECT_EQ(spdlog::default_logger()->level(),
              setLevel ? spdlog::level::debug : spdlog::level::err);
  }
}

}  // namespace
}  // namespace regent

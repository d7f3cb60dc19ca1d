// The config loader: precedence of sources, YAML flattening, every error and the rendering of
// the effective configuration.
#include "conf/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>

#include "tests/conf/config_test_util.h"

namespace regent {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;

Config load(const ConfigSources& sources) {
  auto config = loadConfig(sources);
  if (!config) throw std::runtime_error("unexpected config error: " + config.error().message);
  return std::move(config).value();
}

std::string loadError(const ConfigSources& sources) {
  auto config = loadConfig(sources);
  return config ? "<loaded>" : config.error().message;
}

std::string setError(std::vector<std::string> set) {
  return loadError(ConfigSources{.set = std::move(set)});
}

std::string envError(std::map<std::string, std::string> environment) {
  return loadError(ConfigSources{.environment = std::move(environment)});
}

// Tests that write their config to path_, a file in a scratch directory.
class ConfigFile : public ::testing::Test {
 protected:
  std::string fileError(const std::string& yaml) {
    dir_.write("regent.yaml", yaml);
    return loadError(ConfigSources{.file = path_});
  }
  Config loadFile(const std::string& yaml) {
    dir_.write("regent.yaml", yaml);
    return load(ConfigSources{.file = path_});
  }

  ScratchDirForTests dir_;
  const std::string path_ = dir_.path() + "/regent.yaml";
};

// ---- Options of another program ------------------------------------------------------------

TEST(ConfigPrograms, AWorkerRefusesAMastersOptionOnItsCommandLineNamingItsOwn) {
  EXPECT_EQ(
      loadError(ConfigSources{.set = {"http.bind=127.0.0.1:8091"}, .program = Program::kWorker}),
      "http.bind from --set applies to the master, not the worker; the worker's own is "
      "worker.http.bind");
}

TEST(ConfigPrograms, EachProgramRefusesTheOthersOptionsOnItsCommandLine) {
  EXPECT_EQ(loadError(ConfigSources{.set = {"worker.data-dir=w"}, .program = Program::kMaster}),
            "worker.data-dir from --set applies to the worker, not the master");
  // The slot profile of the workers a resource provider starts is the master's too.
  EXPECT_TRUE(
      loadConfig(ConfigSources{.set = {"worker.slots=2"}, .program = Program::kMaster}).ok());
  EXPECT_EQ(
      loadError(ConfigSources{.set = {"rpc.credential.role=admin"}, .program = Program::kMaster}),
      "rpc.credential.role from --set applies to the worker and regentctl, not the master");
  EXPECT_EQ(
      loadError(ConfigSources{.set = {"cli.master=10.0.0.7:6123"}, .program = Program::kWorker}),
      "cli.master from --set applies to regentctl, not the worker");
  EXPECT_EQ(loadError(ConfigSources{.shortcuts = {{"http.max-connections", "5", "--conns"}},
                                    .program = Program::kRegentctl}),
            "http.max-connections from --conns applies to the master and the worker, not "
            "regentctl");
}

TEST(ConfigPrograms, EveryErrorOfTheCommandLineIsReported) {
  EXPECT_EQ(loadError(ConfigSources{.set = {"http.bind=127.0.0.1:0", "heartbeat.interval=1s"},
                                    .program = Program::kWorker}),
            "http.bind from --set applies to the master, not the worker; the worker's own is "
            "worker.http.bind\n"
            "heartbeat.interval from --set applies to the master, not the worker");
}

TEST(ConfigPrograms, AProgramTakesItsOwnAndSharedOptionsFromTheCommandLine) {
  const Config worker = load(ConfigSources{
      .set = {"worker.http.bind=127.0.0.1:8091", "cluster-id=dev", "rpc.call-timeout=3s"},
      .program = Program::kWorker});
  EXPECT_EQ(worker.getString("worker.http.bind"), "127.0.0.1:8091");
  EXPECT_EQ(worker.getString("cluster-id"), "dev");
  const Config master =
      load(ConfigSources{.set = {"http.bind=127.0.0.1:8081"}, .program = Program::kMaster});
  EXPECT_EQ(master.getString("http.bind"), "127.0.0.1:8081");
}

// A file and the environment are often shared by every program of a host or cluster (one
// regent.yaml, a compose file's common environment): each takes them whole.
TEST_F(ConfigFile, AProgramTakesAnotherProgramsOptionsFromASharedFileOrTheEnvironment) {
  dir_.write("regent.yaml", "http.bind: 127.0.0.1:8081\nworker:\n  slots: 2\n");
  for (const Program program : {Program::kMaster, Program::kWorker, Program::kRegentctl}) {
    const Config config =
        load(ConfigSources{.file = path_,
                           .environment = {{"REGENT_HEARTBEAT_INTERVAL", "1s"},
                                           {"REGENT_CLI_MASTER", "10.0.0.7:6123"}},
                           .program = program});
    EXPECT_EQ(config.getString("http.bind"), "127.0.0.1:8081");
    EXPECT_EQ(config.getInt("worker.slots"), 2);
    EXPECT_EQ(config.getDuration("heartbeat.interval"), Duration(1000));
  }
}

TEST(ConfigPrograms, WithoutAProgramEveryOptionIsTaken) {
  const Config config = load(ConfigSources{.set = {"http.bind=127.0.0.1:0", "worker.slots=2"}});
  EXPECT_EQ(config.getInt("worker.slots"), 2);
}

// ---- Precedence ----------------------------------------------------------------------------

TEST(ConfigLoader, NoSourcesGivesEveryDefault) {
  const Config config = load({});
  EXPECT_EQ(config.getString("cluster-id"), "default");
  EXPECT_EQ(config.getString("ha.mode"), "zookeeper");
  EXPECT_EQ(config.getString("ha.zookeeper.quorum"), "127.0.0.1:2181");
  EXPECT_EQ(config.getString("ha.zookeeper.root"), "/regent");
  EXPECT_EQ(config.getDuration("ha.zookeeper.session-timeout"), seconds(6));
  EXPECT_EQ(config.getString("ha.zookeeper.suspend-tolerance"), "auto");
  EXPECT_EQ(config.getString("ha.zookeeper.auth"), "");
  EXPECT_EQ(config.getString("store.backend"), "auto");
  EXPECT_EQ(config.getString("store.rocksdb.path"), "regent-store");
  EXPECT_EQ(config.getString("rpc.bind"), "0.0.0.0:6123");
  EXPECT_EQ(config.getString("rpc.advertised-address"), "");
  EXPECT_EQ(config.getString("http.bind"), "0.0.0.0:8081");
  EXPECT_EQ(config.getDuration("heartbeat.interval"), seconds(2));
  EXPECT_EQ(config.getDuration("heartbeat.timeout"), seconds(10));
  EXPECT_EQ(config.getDuration("jobmaster.reconciliation-timeout"), seconds(30));
  EXPECT_EQ(config.getInt("worker.slots"), 4);
  EXPECT_EQ(config.getDouble("worker.slot-cpu"), 1.0);
  EXPECT_EQ(config.getSize("worker.slot-memory"), uint64_t{1} << 30);
  EXPECT_EQ(config.getString("log.level"), "info");
  EXPECT_EQ(config.getString("log.format"), "text");
  for (const OptionSpec& option : allOptions()) {
    EXPECT_EQ(config.source(option.key).kind, ValueSource::Kind::kDefault) << option.key;
    EXPECT_EQ(config.source(option.key).describe(), "default");
  }
}

TEST_F(ConfigFile, FileOverridesDefaults) {
  const Config config = loadFile("log:\n  level: debug\nworker.slots: 8\n");
  EXPECT_EQ(config.getString("log.level"), "debug");
  EXPECT_EQ(config.getInt("worker.slots"), 8);
  EXPECT_EQ(config.source("log.level").kind, ValueSource::Kind::kFile);
  EXPECT_EQ(config.source("log.level").name, path_);
  EXPECT_EQ(config.source("log.level").line, 2);
  EXPECT_EQ(config.source("worker.slots").line, 3);
  EXPECT_EQ(config.source("log.level").describe(), "file " + path_);
  EXPECT_EQ(config.source("log.format").kind, ValueSource::Kind::kDefault);
}

TEST_F(ConfigFile, EnvironmentOverridesFile) {
  dir_.write("regent.yaml", "ha.zookeeper.quorum: zk1:2181\nlog.level: debug\n");
  const Config config = load(ConfigSources{
      .file = path_, .environment = {{"REGENT_HA_ZOOKEEPER_QUORUM", "zk2:2181,zk3:2181"}}});
  EXPECT_EQ(config.getString("ha.zookeeper.quorum"), "zk2:2181,zk3:2181");
  EXPECT_EQ(config.source("ha.zookeeper.quorum").describe(), "env REGENT_HA_ZOOKEEPER_QUORUM");
  EXPECT_EQ(config.getString("log.level"), "debug");
  EXPECT_EQ(config.source("log.level").describe(), "file " + path_);
}

TEST_F(ConfigFile, SetOverridesEnvironmentAndFile) {
  dir_.write("regent.yaml", "heartbeat.interval: 1s\n");
  const Config config = load(ConfigSources{.file = path_,
                                           .environment = {{"REGENT_HEARTBEAT_INTERVAL", "3s"}},
                                           .set = {"heartbeat.interval=500ms"}});
  EXPECT_EQ(config.getDuration("heartbeat.interval"), milliseconds(500));
  EXPECT_EQ(config.source("heartbeat.interval").kind, ValueSource::Kind::kCommandLine);
  EXPECT_EQ(config.source("heartbeat.interval").describe(), "--set");
}

TEST(ConfigLoader, LaterSetOfTheSameKeyWins) {
  const Config config = load(ConfigSources{.set = {"log.level=warn", "log.level=error"}});
  EXPECT_EQ(config.getString("log.level"), "error");
}

TEST(ConfigLoader, EnvironmentOverridesDefaults) {
  const Config config = load(ConfigSources{
      .environment = {{"REGENT_WORKER_SLOT_MEMORY", "2GiB"}, {"REGENT_CLUSTER_ID", "prod"}}});
  EXPECT_EQ(config.getSize("worker.slot-memory"), uint64_t{2} << 30);
  EXPECT_EQ(config.getString("cluster-id"), "prod");
  EXPECT_EQ(config.source("cluster-id").name, "REGENT_CLUSTER_ID");
}

TEST(ConfigLoader, IgnoresVariablesOutsideTheRegentPrefix) {
  const Config config = load(ConfigSources{.environment = {{"PATH", "/usr/bin"},
                                                           {"REGENT", "x"},
                                                           {"REGENTX_LOG_LEVEL", "debug"},
                                                           {"regent_log_level", "debug"}}});
  EXPECT_EQ(config.getString("log.level"), "info");
}

TEST(ConfigLoader, SetTrimsKeyAndValueAndKeepsEverythingAfterTheFirstEquals) {
  const Config config = load(ConfigSources{
      .set = {" ha.mode = standalone ", "ha.zookeeper.auth=alice:pa=ss", "store.rocksdb.path="}});
  EXPECT_EQ(config.getString("ha.mode"), "standalone");
  EXPECT_EQ(config.getString("ha.zookeeper.auth"), "alice:pa=ss");
  EXPECT_EQ(config.getString("store.rocksdb.path"), "");
}

TEST(ConfigLoader, EmptyValueIsAcceptedWhereTheOptionAllowsIt) {
  const Config config = load(ConfigSources{.environment = {{"REGENT_RPC_ADVERTISED_ADDRESS", ""}}});
  EXPECT_EQ(config.getString("rpc.advertised-address"), "");
  EXPECT_EQ(config.source("rpc.advertised-address").kind, ValueSource::Kind::kEnvironment);
}

// ---- YAML shapes ---------------------------------------------------------------------------

TEST_F(ConfigFile, NestedAndDottedKeysFlattenAtAnyLevel) {
  const Config config = loadFile(
      "ha:\n"
      "  zookeeper.quorum: zk1:2181\n"
      "  zookeeper:\n"
      "    root: /prod\n"
      "ha.zookeeper.session-timeout: 9s\n"
      "worker: {slots: 16, slot-cpu: 0.5}\n");
  EXPECT_EQ(config.getString("ha.zookeeper.quorum"), "zk1:2181");
  EXPECT_EQ(config.getString("ha.zookeeper.root"), "/prod");
  EXPECT_EQ(config.getDuration("ha.zookeeper.session-timeout"), seconds(9));
  EXPECT_EQ(config.getInt("worker.slots"), 16);
  EXPECT_EQ(config.getDouble("worker.slot-cpu"), 0.5);
}

TEST_F(ConfigFile, QuotedScalarsAreTakenAsText) {
  const Config config = loadFile("worker.slots: \"12\"\nha.zookeeper.auth: 'alice:s3cret'\n");
  EXPECT_EQ(config.getInt("worker.slots"), 12);
  EXPECT_EQ(config.getString("ha.zookeeper.auth"), "alice:s3cret");
}

TEST_F(ConfigFile, EmptyFileGivesDefaults) {
  const Config config = loadFile("");
  EXPECT_EQ(config.getString("ha.mode"), "zookeeper");
  EXPECT_EQ(config.source("ha.mode").kind, ValueSource::Kind::kDefault);
}

TEST_F(ConfigFile, FileOfOnlyCommentsGivesDefaults) {
  const Config config = loadFile("# nothing here\n\n# still nothing\n");
  EXPECT_EQ(config.getInt("worker.slots"), 4);
}

// ---- Errors --------------------------------------------------------------------------------

TEST_F(ConfigFile, UnknownKeyNamesFileLineAndClosestKey) {
  EXPECT_EQ(fileError("ha:\n  mode: zookeeper\n  zookeeper.qorum: zk1:2181\n"),
            "unknown key \"ha.zookeeper.qorum\" in file " + path_ +
                " (line 3); did you mean \"ha.zookeeper.quorum\"?");
}

TEST_F(ConfigFile, UnknownKeyFarFromAnyOptionHasNoSuggestion) {
  EXPECT_EQ(fileError("banana: 1\n"), "unknown key \"banana\" in file " + path_ + " (line 1)");
}

TEST(ConfigLoader, UnknownKeyFromSetIsNamed) {
  EXPECT_EQ(setError({"heartbeat.intervall=1s"}),
            "unknown key \"heartbeat.intervall\" from --set; did you mean \"heartbeat.interval\"?");
  EXPECT_EQ(setError({"ha=zookeeper"}), "unknown key \"ha\" from --set");
}

TEST(ConfigLoader, UnknownRegentVariableIsNamed) {
  EXPECT_EQ(envError({{"REGENT_HA_ZOOKEEPER_QUORM", "zk1:2181"}}),
            "unknown key from env REGENT_HA_ZOOKEEPER_QUORM: no option maps to this variable; did "
            "you mean REGENT_HA_ZOOKEEPER_QUORUM (ha.zookeeper.quorum)?");
  EXPECT_EQ(envError({{"REGENT_CONFIG", "/etc/regent.yaml"}}),
            "unknown key from env REGENT_CONFIG: no option maps to this variable");
}

TEST(ConfigLoader, TaskVariablesAreNotConfigurationButOtherUnknownRegentVariablesStillAre) {
  // What a worker sets for its tasks: a program a task runs loads its configuration regardless.
  const Config config = load(ConfigSources{.environment = {{"REGENT_TASK_PARALLELISM", "2"},
                                                           {"REGENT_TASK_ATTEMPT_ID", "00ff"},
                                                           {"REGENT_LOG_LEVEL", "debug"}}});
  EXPECT_EQ(config.getString("log.level"), "debug");
  EXPECT_EQ(envError({{"REGENT_TASK_JOB_ID", "00ff"}, {"REGENT_PARALLELISM", "2"}}),
            "unknown key from env REGENT_PARALLELISM: no option maps to this variable");
}

TEST(ConfigLoader, BadValueFromSetNamesKeyValueSourceAndExpectation) {
  EXPECT_EQ(setError({"heartbeat.interval=5x"}),
            "bad value \"5x\" for heartbeat.interval from --set: expected a duration such as "
            "500ms, 6s or 2m (unknown unit \"x\")");
}

TEST(ConfigLoader, BadValueOfEveryTypeIsReported) {
  EXPECT_EQ(setError({"cluster-id=a b"}),
            "bad value \"a b\" for cluster-id from --set: expected a name of letters, digits, "
            "'.', '_' and '-' such as \"default\"");
  EXPECT_EQ(setError({"log.format=xml"}),
            "bad value \"xml\" for log.format from --set: expected one of text, json");
  EXPECT_EQ(setError({"worker.slots=2000"}),
            "bad value \"2000\" for worker.slots from --set: expected a whole number from 1 to "
            "1024");
  EXPECT_EQ(setError({"worker.slot-cpu=lots"}),
            "bad value \"lots\" for worker.slot-cpu from --set: expected a number such as 0.5 "
            "or 2");
  EXPECT_EQ(setError({"ha.zookeeper.session-timeout=6"}),
            "bad value \"6\" for ha.zookeeper.session-timeout from --set: expected a duration "
            "such as 500ms, 6s or 2m (a number needs a unit: ms, s, m or h)");
  EXPECT_EQ(setError({"worker.slot-memory=1GB"}),
            "bad value \"1GB\" for worker.slot-memory from --set: expected a size such as 4096, "
            "64MiB or 1GiB (units B, KiB, MiB, GiB, TiB) (unknown unit \"GB\")");
  EXPECT_EQ(setError({"rpc.bind=localhost"}),
            "bad value \"localhost\" for rpc.bind from --set: expected a host:port such as "
            "0.0.0.0:6123");
}

TEST(ConfigLoader, BadValueFromEnvironmentNamesTheVariable) {
  EXPECT_EQ(envError({{"REGENT_HA_ZOOKEEPER_QUORUM", "zk1"}}),
            "bad value \"zk1\" for ha.zookeeper.quorum from env REGENT_HA_ZOOKEEPER_QUORUM: "
            "expected a comma-separated list of host:port such as zk1:2181,zk2:2181");
}

TEST_F(ConfigFile, BadValueInFileNamesTheLine) {
  EXPECT_EQ(fileError("# comment\nha:\n  zookeeper:\n    root: regent\n"),
            "bad value \"regent\" for ha.zookeeper.root in file " + path_ +
                " (line 4): expected a ZooKeeper path such as /regent (starting with \"/\", "
                "without a trailing \"/\" or empty, \".\" or \"..\" parts)");
}

TEST(ConfigLoader, BadSecretIsNeverEchoed) {
  const std::string error = setError({"ha.zookeeper.auth=alices3cret"});
  EXPECT_EQ(error,
            "bad value for ha.zookeeper.auth from --set (not shown: secret): expected "
            "user:password, or empty for no authentication");
  EXPECT_THAT(error, Not(HasSubstr("alices3cret")));
}

TEST(ConfigLoader, BadEnvironmentValueThatSetOverridesIsNotAnError) {
  const Config config = load(ConfigSources{.environment = {{"REGENT_LOG_LEVEL", "loud"}},
                                           .set = {"log.level=debug"}});
  EXPECT_EQ(config.getString("log.level"), "debug");
  EXPECT_EQ(config.source("log.level").describe(), "--set");
}

TEST_F(ConfigFile, BadFileValueThatTheEnvironmentOverridesIsNotAnError) {
  dir_.write("regent.yaml", "heartbeat:\n  interval: 5x\n");
  const Config config =
      load(ConfigSources{.file = path_, .environment = {{"REGENT_HEARTBEAT_INTERVAL", "2s"}}});
  EXPECT_EQ(config.getDuration("heartbeat.interval"), seconds(2));
}

TEST(ConfigLoader, BadEffectiveValueIsReportedOnceNamingItsSource) {
  EXPECT_EQ(loadError(ConfigSources{.environment = {{"REGENT_LOG_LEVEL", "debug"}},
                                    .set = {"log.level=loud"}}),
            "bad value \"loud\" for log.level from --set: expected one of trace, debug, info, "
            "warn, error, off");
}

TEST(ConfigLoader, UnknownKeyIsAnErrorEvenWhenALaterSourceSetsAKnownOne) {
  EXPECT_THAT(loadError(ConfigSources{.set = {"log.levle=debug", "log.level=info"}}),
              HasSubstr("unknown key \"log.levle\" from --set"));
}

TEST(ConfigLoader, SetWithoutEqualsIsAnError) {
  EXPECT_EQ(setError({"ha.mode"}), "bad --set \"ha.mode\": expected key=value");
}

TEST(ConfigLoader, EveryErrorIsReportedOnItsOwnLine) {
  EXPECT_EQ(loadError(ConfigSources{.environment = {{"REGENT_LOG_LEVEL", "loud"}},
                                    .set = {"worker.slots=0", "nope"}}),
            "bad value \"loud\" for log.level from env REGENT_LOG_LEVEL: expected one of trace, "
            "debug, info, warn, error, off\n"
            "bad value \"0\" for worker.slots from --set: expected a whole number from 1 to 1024\n"
            "bad --set \"nope\": expected key=value");
}

TEST_F(ConfigFile, FileThatDoesNotParseNamesLineAndColumn) {
  const std::string error = fileError("ha:\n  mode: zookeeper\n  quorum: [zk1:2181\n");
  EXPECT_THAT(error, HasSubstr("config file " + path_ + " does not parse (line "));
  EXPECT_THAT(error, HasSubstr("end of sequence flow not found"));
  const std::string tabs = fileError("ha:\n\tmode: zookeeper\n");
  EXPECT_THAT(tabs, HasSubstr("config file " + path_ + " does not parse (line 2, column "));
}

TEST_F(ConfigFile, SecondDocumentIsRefusedNamingTheFileAndLine) {
  EXPECT_EQ(fileError("cluster-id: first\n---\ncluster-id: second\n"),
            "config file " + path_ +
                " holds more than one YAML document (the second starts at line 3); a config "
                "file holds one");
}

TEST_F(ConfigFile, TextAfterTheDocumentEndMarkerIsRefused) {
  EXPECT_EQ(fileError("cluster-id: first\n...\nha.mode: standalone\n"),
            "config file " + path_ +
                " holds more than one YAML document (the second starts at line 3); a config "
                "file holds one");
}

TEST_F(ConfigFile, TrailingDocumentMarkersWithNothingAfterThemAreAccepted) {
  EXPECT_EQ(loadFile("---\ncluster-id: one\n...\n").getString("cluster-id"), "one");
  EXPECT_EQ(loadFile("cluster-id: two\n---\n# nothing more\n").getString("cluster-id"), "two");
}

TEST(ConfigLoader, MissingFileIsAnError) {
  EXPECT_EQ(loadError(ConfigSources{.file = "/nonexistent/regent.yaml"}),
            "cannot read config file /nonexistent/regent.yaml: No such file or directory");
}

TEST(ConfigLoader, DirectoryInsteadOfFileIsAnError) {
  ScratchDirForTests dir;
  EXPECT_EQ(loadError(ConfigSources{.file = dir.path()}),
            "cannot read config file " + dir.path() + ": Is a directory");
}

TEST_F(ConfigFile, SameKeyNestedAndDottedIsADuplicate) {
  EXPECT_EQ(fileError("ha:\n  mode: standalone\nha.mode: zookeeper\n"),
            "duplicate key \"ha.mode\" in file " + path_ + " (lines 2 and 3)");
}

TEST_F(ConfigFile, SameKeyTwiceInOneMapIsADuplicate) {
  EXPECT_EQ(fileError("log:\n  level: info\n  format: text\n  level: debug\n"),
            "duplicate key \"log.level\" in file " + path_ + " (lines 2 and 4)");
}

TEST_F(ConfigFile, NullValueIsAnErrorNamingTheKey) {
  EXPECT_EQ(fileError("rpc:\n  advertised-address:\n"),
            "no value for rpc.advertised-address in file " + path_ +
                " (line 2): expected a value (write \"\" for an empty string)");
  EXPECT_EQ(fileError("log.level: null\n"),
            "no value for log.level in file " + path_ +
                " (line 1): expected a value (write \"\" for an empty string)");
}

TEST_F(ConfigFile, SequenceWhereAValueIsExpectedIsAnError) {
  EXPECT_EQ(fileError("ha:\n  zookeeper:\n    quorum: [zk1:2181, zk2:2181]\n"),
            "bad value for ha.zookeeper.quorum in file " + path_ +
                " (line 3): expected a single value, got a list");
  EXPECT_EQ(fileError("log.level:\n  - info\n"),
            "bad value for log.level in file " + path_ +
                " (line 1): expected a single value, got a list");
}

TEST_F(ConfigFile, MapWhereAValueIsExpectedIsAnError) {
  EXPECT_EQ(fileError("heartbeat:\n  interval:\n    ms: 500\n"),
            "bad value for heartbeat.interval in file " + path_ +
                " (line 2): expected a single value, got a map");
}

TEST_F(ConfigFile, ValueWhereAGroupOfOptionsIsExpectedIsAnError) {
  EXPECT_EQ(fileError("ha: zookeeper\n"),
            "bad value for ha in file " + path_ +
                " (line 1): expected a map of the options under ha, such as ha.mode");
  EXPECT_EQ(fileError("ha:\n  zookeeper:\n"),
            "bad value for ha.zookeeper in file " + path_ +
                " (line 2): expected a map of the options under ha.zookeeper, such as "
                "ha.zookeeper.quorum");
}

TEST_F(ConfigFile, TopLevelThatIsNotAMapIsAnError) {
  EXPECT_EQ(fileError("- ha.mode: zookeeper\n"),
            "config file " + path_ + " must hold a map of options (key: value lines), in file " +
                path_ + " (line 1)");
}

TEST_F(ConfigFile, NonScalarKeyIsAnError) {
  EXPECT_EQ(fileError("? [a, b]\n: 1\n"),
            "a key must be a plain name in file " + path_ + " (line 1)");
}

TEST_F(ConfigFile, DeeplyNestedMapsAreRefused) {
  std::string yaml;
  for (int i = 0; i < 40; ++i) yaml += std::string(i * 2, ' ') + "k" + std::to_string(i) + ":\n";
  yaml += std::string(80, ' ') + "leaf: 1\n";
  EXPECT_THAT(fileError(yaml), HasSubstr("nests maps deeper than 32 levels"));
}

// ---- Cross-option rules --------------------------------------------------------------------

TEST(ConfigRules, SuspendToleranceAboveAThirdOfSessionTimeoutNamesBothKeys) {
  EXPECT_EQ(setError({"ha.zookeeper.suspend-tolerance=2001ms"}),
            "ha.zookeeper.suspend-tolerance must be at most a third of "
            "ha.zookeeper.session-timeout (ha.zookeeper.suspend-tolerance is 2001ms from --set; "
            "ha.zookeeper.session-timeout is 6s by default)");
  EXPECT_TRUE(loadConfig(ConfigSources{.set = {"ha.zookeeper.suspend-tolerance=2s"}}).ok());
  EXPECT_THAT(setError({"ha.zookeeper.suspend-tolerance=9223372036854775807ms"}),
              HasSubstr("ha.zookeeper.suspend-tolerance is 9223372036854775807ms from --set"));
}

TEST(ConfigRules, AWorkersSlotsTogetherFitTheTotalASlotReportCarries) {
  // 2^32-1 thousandths of a core in all: 1024 slots of 4194 cores fit, of 4195 do not.
  EXPECT_TRUE(
      loadConfig(ConfigSources{.set = {"worker.slots=1024", "worker.slot-cpu=4194"}}).ok());
  EXPECT_EQ(loadError(ConfigSources{.set = {"worker.slots=1024", "worker.slot-cpu=4195"}}),
            "worker.slots x worker.slot-cpu must be at most 4294967 cores, what a worker's "
            "total carries (worker.slots is 1024 from --set; worker.slot-cpu is 4195.0 from --set)");
}

TEST(ConfigRules, HeartbeatTimeoutMustExceedInterval) {
  EXPECT_EQ(loadError(ConfigSources{.environment = {{"REGENT_HEARTBEAT_TIMEOUT", "2s"}}}),
            "heartbeat.timeout must exceed heartbeat.interval (heartbeat.timeout is 2s from env "
            "REGENT_HEARTBEAT_TIMEOUT; heartbeat.interval is 2s by default)");
  EXPECT_TRUE(loadConfig(ConfigSources{.set = {"heartbeat.timeout=2001ms"}}).ok());
}

TEST(ConfigRules, StartedWorkersFloorMayNotExceedTheirCap) {
  EXPECT_EQ(setError({"resourcemanager.workers.min=3", "resourcemanager.workers.max=2"}),
            "resourcemanager.workers.min must be at most resourcemanager.workers.max "
            "(resourcemanager.workers.min is 3 from --set; resourcemanager.workers.max is 2 from "
            "--set)");
  EXPECT_TRUE(loadConfig(ConfigSources{.set = {"resourcemanager.workers.min=2",
                                               "resourcemanager.workers.max=2"}})
                  .ok());
}

TEST(ConfigRules, TheProcessProviderCannotServePerWorkerCertificates) {
  EXPECT_THAT(setError({"resourcemanager.provider=process",
                        "rpc.auth-tls.worker-name-is-resource-id=true"}),
              HasSubstr("resourcemanager.provider process or docker cannot start workers that "
                        "each need a client certificate"));
}

TEST(ConfigRules, TheDockerProviderNeedsAnImageAndCannotServePerWorkerCertificates) {
  EXPECT_THAT(setError({"resourcemanager.provider=docker"}),
              HasSubstr("resourcemanager.provider docker needs resourcemanager.docker.image"));
  EXPECT_THAT(setError({"resourcemanager.provider=docker", "resourcemanager.docker.image=r:1",
                        "rpc.auth-tls.worker-name-is-resource-id=true"}),
              HasSubstr("resourcemanager.provider process or docker cannot start workers"));
  EXPECT_TRUE(loadConfig(ConfigSources{.set = {"resourcemanager.provider=docker",
                                               "resourcemanager.docker.image=regent:compose"}})
                  .ok());
}

TEST(ConfigRules, AnUnknownProviderOrAMalformedProviderIdIsRefusedNamingTheOption) {
  EXPECT_THAT(setError({"resourcemanager.provider=kubernetes"}),
              HasSubstr("resourcemanager.provider"));
  EXPECT_THAT(setError({"resourcemanager.provider=kubernetes"}),
              HasSubstr("one of standalone, process, docker"));
  EXPECT_THAT(setError({"worker.provider-id=no-colon"}), HasSubstr("worker.provider-id"));
  EXPECT_THAT(setError({"worker.provider-id=process:a b"}), HasSubstr("worker.provider-id"));
  EXPECT_TRUE(loadConfig(ConfigSources{.set = {"worker.provider-id=process:e3-1"}}).ok());
}

TEST(ConfigRules, ZooKeeperStoreNeedsZooKeeperMode) {
  EXPECT_EQ(setError({"store.backend=zookeeper", "ha.mode=standalone"}),
            "store.backend zookeeper needs ha.mode zookeeper (standalone mode has no ZooKeeper) "
            "(store.backend is zookeeper from --set; ha.mode is standalone from --set)");
  EXPECT_TRUE(
      loadConfig(ConfigSources{.set = {"store.backend=rocksdb", "ha.mode=zookeeper"}}).ok());
}

TEST(ConfigRules, RulesAreCheckedOnlyWhenEveryValueIsValid) {
  EXPECT_EQ(setError({"heartbeat.timeout=1s", "worker.slots=0"}),
            "bad value \"0\" for worker.slots from --set: expected a whole number from 1 to 1024");
}

// ---- Getters -------------------------------------------------------------------------------

TEST(ConfigGetters, WrongTypeOrUnknownKeyIsAProgrammingError) {
  const Config config = load({});
  EXPECT_THROW(config.getInt("heartbeat.interval"), std::logic_error);
  EXPECT_THROW(config.getDuration("worker.slots"), std::logic_error);
  EXPECT_THROW(config.getString("nope"), std::logic_error);
  EXPECT_THROW(config.source("nope"), std::logic_error);
  EXPECT_THROW(config.getBool("log.level"), std::logic_error);
}

TEST(ConfigGetters, EnumsReadAsStringsAndTextIsCanonical) {
  const Config config =
      load(ConfigSources{.set = {"heartbeat.interval=1500ms", "heartbeat.timeout=120s",
                                 "worker.slot-memory=2048MiB"}});
  EXPECT_EQ(config.getString("log.format"), "text");
  EXPECT_EQ(config.text("heartbeat.interval"), "1500ms");
  EXPECT_EQ(config.text("heartbeat.timeout"), "2m");
  EXPECT_EQ(config.text("worker.slot-memory"), "2GiB");
  EXPECT_EQ(config.text("ha.zookeeper.suspend-tolerance"), "auto");
}

TEST(ProcessEnvironment, CapturesTheVariablesOfThisProcess) {
  ASSERT_EQ(setenv("REGENT_TEST_PROBE_FOR_CONF", "a=b", 1), 0);
  const auto environment = processEnvironment();
  unsetenv("REGENT_TEST_PROBE_FOR_CONF");
  ASSERT_EQ(environment.count("REGENT_TEST_PROBE_FOR_CONF"), 1u);
  EXPECT_EQ(environment.at("REGENT_TEST_PROBE_FOR_CONF"), "a=b");
}

// ---- Effective configuration ---------------------------------------------------------------

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> result;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) result.push_back(line);
  return result;
}

// The line of `key`, with runs of spaces collapsed to one.
std::string lineFor(const std::string& rendered, const std::string& key) {
  for (const std::string& line : lines(rendered)) {
    if (!line.starts_with(key + " ")) continue;
    std::string collapsed;
    for (const char c : line) {
      if (c == ' ' && !collapsed.empty() && collapsed.back() == ' ') continue;
      collapsed += c;
    }
    return collapsed;
  }
  return "<no line for " + key + ">";
}

TEST_F(ConfigFile, EffectiveConfigShowsEveryOptionWithValueAndSource) {
  dir_.write("regent.yaml", "ha.zookeeper.quorum: zk1:2181,zk2:2181\n");
  const Config config = load(ConfigSources{.file = path_,
                                           .environment = {{"REGENT_LOG_LEVEL", "debug"}},
                                           .set = {"ha.mode=standalone"}});
  const std::string rendered = renderEffectiveConfig(config);
  EXPECT_EQ(lines(rendered).size(), allOptions().size());
  EXPECT_EQ(lineFor(rendered, "cluster-id"), "cluster-id default default");
  EXPECT_EQ(lineFor(rendered, "ha.mode"), "ha.mode standalone --set");
  EXPECT_EQ(lineFor(rendered, "ha.zookeeper.quorum"),
            "ha.zookeeper.quorum zk1:2181,zk2:2181 file " + path_);
  EXPECT_EQ(lineFor(rendered, "log.level"), "log.level debug env REGENT_LOG_LEVEL");
  EXPECT_EQ(lineFor(rendered, "rpc.advertised-address"), "rpc.advertised-address \"\" default");
  EXPECT_EQ(lineFor(rendered, "worker.slot-memory"), "worker.slot-memory 1GiB default");
}

TEST(EffectiveConfig, ColumnsAreAligned) {
  const std::string rendered = renderEffectiveConfig(load({}));
  const auto all = lines(rendered);
  const size_t valueColumn = all.front().find("default");
  ASSERT_NE(valueColumn, std::string::npos);
  for (const std::string& line : all) {
    EXPECT_NE(line[valueColumn], ' ') << line;
    EXPECT_EQ(line[valueColumn - 1], ' ') << line;
  }
}

TEST(EffectiveConfig, MasksTheSecretButKeepsTheUser) {
  const std::string rendered = renderEffectiveConfig(
      load(ConfigSources{.environment = {{"REGENT_HA_ZOOKEEPER_AUTH", "alice:s3cret"}}}));
  EXPECT_EQ(lineFor(rendered, "ha.zookeeper.auth"),
            "ha.zookeeper.auth alice:**** env REGENT_HA_ZOOKEEPER_AUTH");
  EXPECT_THAT(rendered, Not(HasSubstr("s3cret")));
}

}  // namespace
}  // namespace regent

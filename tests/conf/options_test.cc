// The option registry: its invariants, and what each option accepts and rejects.
#include "conf/options.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace regent {
namespace {

const OptionSpec& spec(std::string_view key) {
  const OptionSpec* found = findOption(key);
  if (found == nullptr) throw std::logic_error("test names an unknown option");
  return *found;
}

bool accepts(std::string_view key, std::string_view text) {
  return parseOptionValue(spec(key), text).ok();
}

std::string rejection(std::string_view key, std::string_view text) {
  auto result = parseOptionValue(spec(key), text);
  return result ? "<accepted>" : result.error().message;
}

TEST(OptionRegistry, HasEveryOptionInOrder) {
  std::vector<std::string> keys;
  for (const OptionSpec& option : allOptions()) keys.push_back(option.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"cluster-id",
                                            "ha.mode",
                                            "ha.zookeeper.quorum",
                                            "ha.zookeeper.root",
                                            "ha.zookeeper.session-timeout",
                                            "ha.zookeeper.suspend-tolerance",
                                            "ha.zookeeper.auth",
                                            "ha.zookeeper.read-auth",
                                            "ha.zookeeper.connect-timeout",
                                            "ha.fast-failover",
                                            "ha.standalone.epoch-file",
                                            "store.backend",
                                            "store.zookeeper.max-payload",
                                            "store.rocksdb.path",
                                            "store.rocksdb.max-payload",
                                            "store.rocksdb.lock-timeout",
                                            "store.job-details.max-size",
                                            "store.job-results.retain",
                                            "rpc.bind",
                                            "rpc.advertised-address",
                                            "rpc.max-message-size",
                                            "rpc.pre-auth-max-message-size",
                                            "rpc.auth-timeout",
                                            "rpc.max-connections",
                                            "rpc.max-connections-per-peer",
                                            "rpc.idle-timeout",
                                            "rpc.message-timeout",
                                            "rpc.listener-failure-handover",
                                            "rpc.call-timeout",
                                            "rpc.output-token-ttl",
                                            "rpc.reconnect.initial",
                                            "rpc.reconnect.max",
                                            "rpc.tls.cert",
                                            "rpc.tls.key",
                                            "rpc.tls.ca",
                                            "rpc.tls.verify-clients",
                                            "rpc.auth",
                                            "rpc.auth-secret.admin-file",
                                            "rpc.auth-secret.reader-file",
                                            "rpc.auth-secret.worker-file",
                                            "rpc.auth-secret.allow-shared-files",
                                            "rpc.auth-tls.admin-names",
                                            "rpc.auth-tls.reader-names",
                                            "rpc.auth-tls.worker-names",
                                            "rpc.auth-tls.worker-name-is-resource-id",
                                            "rpc.credential.role",
                                            "rpc.credential.secret-file",
                                            "http.bind",
                                            "http.max-connections",
                                            "http.status-history-interval",
                                            "cli.master",
                                            "heartbeat.interval",
                                            "heartbeat.timeout",
                                            "jobmaster.reconciliation-timeout",
                                            "jobmaster.finished-put-delay",
                                            "jobmaster.first-deploy-wait",
                                            "jobmaster.max-subtasks",
                                            "resourcemanager.provider",
                                            "resourcemanager.workers.max",
                                            "resourcemanager.workers.min",
                                            "resourcemanager.workers.start-timeout",
                                            "resourcemanager.workers.idle-timeout",
                                            "resourcemanager.workers.max-failure-rate",
                                            "resourcemanager.process.data-root",
                                            "resourcemanager.process.worker-binary",
                                            "resourcemanager.docker.socket",
                                            "resourcemanager.docker.image",
                                            "resourcemanager.docker.network",
                                            "resourcemanager.docker.worker-binary",
                                            "worker.slots",
                                            "worker.slot-cpu",
                                            "worker.slot-memory",
                                            "worker.data-dir",
                                            "worker.provider-id",
                                            "worker.advertised-host",
                                            "worker.http.bind",
                                            "worker.task-user",
                                            "worker.task-allow-root",
                                            "worker.task-path",
                                            "worker.attempt-output.max",
                                            "worker.task-cancel-timeout",
                                            "worker.containment",
                                            "worker.task-pids-max",
                                            "worker.attempts.retain",
                                            "worker.update-buffer.max",
                                            "cluster.registration.initial-timeout",
                                            "cluster.registration.max-timeout",
                                            "events.file",
                                            "log.level",
                                            "log.format"}));
}

TEST(OptionRegistry, EveryDefaultIsAValidValue) {
  for (const OptionSpec& option : allOptions()) {
    auto value = parseOptionValue(option, option.defaultText);
    EXPECT_TRUE(value.ok()) << option.key << ": " << value.error().message;
  }
}

TEST(OptionRegistry, KeysAndEnvironmentVariablesAreUnique) {
  std::set<std::string> keys;
  std::set<std::string> variables;
  for (const OptionSpec& option : allOptions()) {
    EXPECT_TRUE(keys.insert(option.key).second) << "duplicate key " << option.key;
    EXPECT_TRUE(variables.insert(environmentVariableFor(option.key)).second)
        << "two keys map to " << environmentVariableFor(option.key);
  }
}

TEST(OptionRegistry, NoOptionsVariableFallsUnderTheTaskVariablePrefix) {
  for (const OptionSpec& option : allOptions()) {
    EXPECT_FALSE(environmentVariableFor(option.key).starts_with(kTaskVariablePrefix))
        << option.key << " maps to " << environmentVariableFor(option.key)
        << ", which configuration skips as a task's variable";
  }
}

TEST(OptionRegistry, NoKeyIsAlsoAGroupOfOtherKeys) {
  // A key that is both a value and a map ("a: 1" and "a.b: 2") cannot be written as YAML.
  for (const OptionSpec& option : allOptions()) {
    EXPECT_EQ(findOption(option.key + ".x"), nullptr);
    for (const OptionSpec& other : allOptions()) {
      EXPECT_FALSE(other.key.starts_with(option.key + ".")) << option.key << " / " << other.key;
    }
  }
}

TEST(OptionRegistry, EveryOptionHasOneLineOfDocAndALowerCaseKey) {
  for (const OptionSpec& option : allOptions()) {
    EXPECT_FALSE(option.doc.empty()) << option.key;
    EXPECT_EQ(option.doc.find('\n'), std::string::npos) << option.key;
    for (const char c : option.key) {
      EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-')
          << option.key;
    }
    EXPECT_EQ(option.type == OptionType::kEnum, !option.choices.empty()) << option.key;
  }
}

TEST(OptionRegistry, OnlyTheZooKeeperCredentialsAreSecret) {
  for (const OptionSpec& option : allOptions()) {
    EXPECT_EQ(option.secret,
              option.key == "ha.zookeeper.auth" || option.key == "ha.zookeeper.read-auth")
        << option.key;
  }
}

TEST(OptionRegistry, RulesNameOnlyKnownKeys) {
  ASSERT_FALSE(allOptionRules().empty());
  for (const OptionRule& rule : allOptionRules()) {
    for (const std::string& key : rule.keys) EXPECT_NE(findOption(key), nullptr) << key;
  }
}

TEST(OptionRegistry, EveryOptionIsReadBySomeProgramAndEachNamespaceByItsOwn) {
  for (const OptionSpec& option : allOptions()) {
    EXPECT_NE(option.readBy, 0) << option.key;
    EXPECT_EQ(option.readBy & ~kEveryProgram, 0) << option.key;
    // The slot profile of the workers a resource provider starts is read by the master too.
    const bool startedWorkersProfile = option.key == "worker.slots" ||
                                       option.key == "worker.slot-cpu" ||
                                       option.key == "worker.slot-memory";
    const Programs expected =
        startedWorkersProfile ? (Program::kMaster | Program::kWorker)
        : option.key.starts_with("worker.") || option.key.starts_with("cluster.registration.")
            ? Programs(Program::kWorker)
        : option.key.starts_with("cli.") ? Programs(Program::kRegentctl)
        : option.key.starts_with("store.") || option.key.starts_with("jobmaster.") ||
                option.key.starts_with("heartbeat.") || option.key.starts_with("resourcemanager.")
            ? Programs(Program::kMaster)
            : option.readBy;
    EXPECT_EQ(option.readBy, expected) << option.key;
  }
  // The processes' listeners and what finds the leader.
  EXPECT_EQ(findOption("http.bind")->readBy, Programs(Program::kMaster));
  EXPECT_EQ(findOption("rpc.bind")->readBy, Programs(Program::kMaster));
  EXPECT_EQ(findOption("http.max-connections")->readBy, Program::kMaster | Program::kWorker);
  EXPECT_EQ(findOption("rpc.credential.role")->readBy, Program::kWorker | Program::kRegentctl);
  EXPECT_EQ(findOption("ha.zookeeper.quorum")->readBy, kEveryProgram);
  EXPECT_EQ(describePrograms(kEveryProgram), "master, worker, regentctl");
}

// The options each program's own code reads, found in its folders' sources as
// config.getString("key") and the other getters. Shared code (rpc/, ha/, leader/, conf/) reads
// for whichever program calls it, so only the programs' own folders are checked; a folder that
// does not exist (moved) is skipped, but each program must have reads to check.
TEST(OptionRegistry, EachProgramsOwnCodeReadsOnlyOptionsMarkedForIt) {
  const std::map<std::string, Program> folders = {{"services/master", Program::kMaster},
                                                  {"services/dispatcher", Program::kMaster},
                                                  {"services/resourcemanager", Program::kMaster},
                                                  {"services/jobmaster", Program::kMaster},
                                                  {"store", Program::kMaster},
                                                  {"services/worker", Program::kWorker},
                                                  {"services/taskexecutor", Program::kWorker},
                                                  {"cli", Program::kRegentctl}};
  const std::regex read(R"re(\.get(String|Int|Double|Bool|Duration|Size)\("([^"]+)"\))re");
  std::map<Program, int> reads;
  for (const auto& [folder, program] : folders) {
    const std::filesystem::path root = std::filesystem::path(REGENT_SOURCE_DIR) / folder;
    if (!std::filesystem::exists(root)) continue;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
      const std::string extension = entry.path().extension().string();
      if (extension != ".cc" && extension != ".h") continue;
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      const std::string source = text.str();
      for (std::sregex_iterator it(source.begin(), source.end(), read), end; it != end; ++it) {
        const std::string key = (*it)[2];
        const OptionSpec* option = findOption(key);
        ASSERT_NE(option, nullptr) << entry.path() << " reads unknown option " << key;
        EXPECT_TRUE(readsOption(option->readBy, program))
            << entry.path() << " reads " << key << ", which conf/options.cc does not mark as read "
            << "by the " << programRole(program)
            << " (read by: " << describePrograms(option->readBy) << ")";
        ++reads[program];
      }
    }
  }
  for (const Program program : {Program::kMaster, Program::kWorker, Program::kRegentctl}) {
    EXPECT_GT(reads[program], 0) << programRole(program);
  }
}

TEST(OptionRegistry, FindsOptionsByExactKeyOnly) {
  EXPECT_EQ(findOption("ha.mode")->key, "ha.mode");
  EXPECT_EQ(findOption("ha"), nullptr);
  EXPECT_EQ(findOption("HA.MODE"), nullptr);
  EXPECT_EQ(findOption(""), nullptr);
}

TEST(EnvironmentVariableNaming, UpperCasesAndReplacesDotsAndDashes) {
  EXPECT_EQ(environmentVariableFor("ha.zookeeper.quorum"), "REGENT_HA_ZOOKEEPER_QUORUM");
  EXPECT_EQ(environmentVariableFor("ha.zookeeper.session-timeout"),
            "REGENT_HA_ZOOKEEPER_SESSION_TIMEOUT");
  EXPECT_EQ(environmentVariableFor("cluster-id"), "REGENT_CLUSTER_ID");
}

TEST(OptionValues, ClusterIdIsANonEmptyNameOfSafeCharacters) {
  EXPECT_TRUE(accepts("cluster-id", "prod-eu_1.a"));
  EXPECT_EQ(rejection("cluster-id", ""),
            "expected a name of letters, digits, '.', '_' and '-' such as \"default\"");
  EXPECT_FALSE(accepts("cluster-id", "a b"));
  EXPECT_FALSE(accepts("cluster-id", "a/b"));
  EXPECT_FALSE(accepts("cluster-id", "."));
  EXPECT_FALSE(accepts("cluster-id", ".."));
  EXPECT_FALSE(accepts("cluster-id", "caf\xc3\xa9"));
}

TEST(OptionValues, ModeIsOneOfTheListedWords) {
  EXPECT_TRUE(accepts("ha.mode", "standalone"));
  EXPECT_EQ(rejection("ha.mode", "ZooKeeper"), "expected one of zookeeper, standalone");
  EXPECT_EQ(rejection("ha.mode", ""), "expected one of zookeeper, standalone");
  EXPECT_EQ(rejection("log.level", "verbose"),
            "expected one of trace, debug, info, warn, error, off");
}

TEST(OptionValues, QuorumIsACommaSeparatedListOfHostPorts) {
  EXPECT_TRUE(accepts("ha.zookeeper.quorum", "zk1:2181"));
  EXPECT_TRUE(accepts("ha.zookeeper.quorum", "zk1.example.com:2181,10.0.0.2:2181,[::1]:2181"));
  const std::string expected =
      "expected a comma-separated list of host:port such as zk1:2181,zk2:2181";
  EXPECT_EQ(rejection("ha.zookeeper.quorum", "zk1"), expected);
  for (const char* bad :
       {"", "zk1:", ":2181", "zk1:0", "zk1:65536", "zk1:21a", "zk1:2181,", "zk1:2181, zk2:2181",
        "zk1:2181/chroot", "zk..1:2181", "[::1:2181", "[zz]:2181"}) {
    EXPECT_EQ(rejection("ha.zookeeper.quorum", bad), expected) << bad;
  }
}

TEST(OptionValues, RootIsAnAbsolutePathWithoutTrailingSlash) {
  EXPECT_TRUE(accepts("ha.zookeeper.root", "/regent"));
  EXPECT_TRUE(accepts("ha.zookeeper.root", "/a/b-c/d"));
  const std::string expected =
      "expected a ZooKeeper path such as /regent (starting with \"/\", without a trailing \"/\" "
      "or empty, \".\" or \"..\" parts)";
  for (const char* bad :
       {"regent", "/regent/", "/", "", "//regent", "/a//b", "/a/./b", "/a/..", "/a b"}) {
    EXPECT_EQ(rejection("ha.zookeeper.root", bad), expected) << bad;
  }
}

TEST(OptionValues, AuthIsUserColonPasswordOrEmpty) {
  EXPECT_TRUE(accepts("ha.zookeeper.auth", ""));
  EXPECT_TRUE(accepts("ha.zookeeper.auth", "alice:s3cret"));
  EXPECT_TRUE(accepts("ha.zookeeper.auth", "alice:pass:with:colons"));
  const std::string expected = "expected user:password, or empty for no authentication";
  for (const char* bad : {"alice", ":s3cret", "alice:", "alice:pa\nss"}) {
    EXPECT_EQ(rejection("ha.zookeeper.auth", bad), expected) << bad;
  }
}

TEST(OptionValues, BindAddressesAllowPortZeroAdvertisedAddressAllowsEmpty) {
  EXPECT_TRUE(accepts("rpc.bind", "0.0.0.0:0"));
  EXPECT_TRUE(accepts("http.bind", "[::]:8081"));
  EXPECT_EQ(rejection("rpc.bind", ""), "expected a host:port such as 0.0.0.0:6123");
  EXPECT_EQ(rejection("http.bind", "8081"), "expected a host:port such as 0.0.0.0:6123");
  EXPECT_TRUE(accepts("rpc.advertised-address", ""));
  EXPECT_TRUE(accepts("rpc.advertised-address", "master-1.internal:6123"));
  EXPECT_EQ(rejection("rpc.advertised-address", "master-1:0"),
            "expected a host:port such as 10.0.0.5:6123, or empty");
}

TEST(OptionValues, RegentctlsMasterIsAHostPortOrEmpty) {
  EXPECT_TRUE(accepts("cli.master", ""));
  EXPECT_TRUE(accepts("cli.master", "master-1.internal:6123"));
  EXPECT_EQ(rejection("cli.master", "master-1"),
            "expected a host:port such as 10.0.0.5:6123, or empty");
  EXPECT_EQ(rejection("cli.master", "master-1:0"),
            "expected a host:port such as 10.0.0.5:6123, or empty");
}

TEST(OptionValues, RpcMessageLimitIsASizeAndRpcTimingsArePositive) {
  EXPECT_TRUE(accepts("rpc.max-message-size", "64KiB"));
  EXPECT_TRUE(accepts("rpc.max-message-size", "1GiB"));
  EXPECT_EQ(rejection("rpc.max-message-size", "512"),
            "expected a size from 1KiB to 1GiB, such as 512KiB");
  EXPECT_EQ(rejection("rpc.max-message-size", "2GiB"),
            "expected a size from 1KiB to 1GiB, such as 512KiB");
  for (const char* key : {"rpc.call-timeout", "rpc.reconnect.initial", "rpc.reconnect.max"}) {
    EXPECT_TRUE(accepts(key, "50ms")) << key;
    EXPECT_EQ(rejection(key, "0"), "expected a duration greater than 0, such as 500ms, 6s or 2m")
        << key;
  }
}

TEST(OptionValues, StorePayloadLimitsAreSizesWithinBounds) {
  EXPECT_TRUE(accepts("store.zookeeper.max-payload", "512KiB"));
  EXPECT_TRUE(accepts("store.rocksdb.max-payload", "64MiB"));
  EXPECT_EQ(rejection("store.zookeeper.max-payload", "100"),
            "expected a size from 1KiB to 64MiB, such as 512KiB");
  EXPECT_EQ(rejection("store.rocksdb.max-payload", "65MiB"),
            "expected a size from 1KiB to 64MiB, such as 512KiB");
  EXPECT_TRUE(accepts("store.job-results.retain", "0"));
  EXPECT_EQ(rejection("store.job-results.retain", "-1"),
            "expected a whole number from 0 to 10000000");
}

TEST(OptionValues, DurationsMustBePositiveWhereZeroMakesNoSense) {
  EXPECT_TRUE(accepts("ha.zookeeper.suspend-tolerance", "0"));
  // "auto" follows the negotiated session timeout; anything else must be a duration.
  EXPECT_TRUE(accepts("ha.zookeeper.suspend-tolerance", "auto"));
  EXPECT_TRUE(accepts("ha.zookeeper.suspend-tolerance", "2s"));
  EXPECT_EQ(rejection("ha.zookeeper.suspend-tolerance", "soon"),
            "expected auto, or a duration such as 0, 500ms or 2s");
  EXPECT_EQ(rejection("ha.zookeeper.session-timeout", "0"),
            "expected a duration greater than 0, such as 500ms, 6s or 2m");
  EXPECT_EQ(rejection("heartbeat.interval", "0ms"),
            "expected a duration greater than 0, such as 500ms, 6s or 2m");
  EXPECT_EQ(rejection("heartbeat.interval", "2"),
            "expected a duration such as 500ms, 6s or 2m (a number needs a unit: ms, s, m or h)");
}

TEST(OptionValues, SlotsIsAWholeNumberFromOneTo1024) {
  EXPECT_EQ(std::get<int64_t>(parseOptionValue(spec("worker.slots"), "1").value()), 1);
  EXPECT_EQ(std::get<int64_t>(parseOptionValue(spec("worker.slots"), " 1024 ").value()), 1024);
  EXPECT_EQ(rejection("worker.slots", "0"), "expected a whole number from 1 to 1024");
  EXPECT_EQ(rejection("worker.slots", "1025"), "expected a whole number from 1 to 1024");
  EXPECT_EQ(rejection("worker.slots", "-3"), "expected a whole number from 1 to 1024");
  EXPECT_EQ(rejection("worker.slots", "4.0"), "expected a whole number");
  EXPECT_EQ(rejection("worker.slots", "four"), "expected a whole number");
  EXPECT_EQ(rejection("worker.slots", ""), "expected a whole number");
  EXPECT_EQ(rejection("worker.slots", "99999999999999999999"),
            "expected a whole number (the number is too large)");
}

TEST(OptionValues, SlotCpuIsANumberOfCoresASlotProfileCarries) {
  EXPECT_EQ(std::get<double>(parseOptionValue(spec("worker.slot-cpu"), "0.5").value()), 0.5);
  EXPECT_EQ(std::get<double>(parseOptionValue(spec("worker.slot-cpu"), "2").value()), 2.0);
  // Thousandths of a core as 32 bits: 1 to 4294967000 of them.
  EXPECT_TRUE(parseOptionValue(spec("worker.slot-cpu"), "0.001").ok());
  EXPECT_TRUE(parseOptionValue(spec("worker.slot-cpu"), "4294967").ok());
  for (const char* outside : {"0", "-1", "0.0009", "4294968"}) {
    EXPECT_EQ(rejection("worker.slot-cpu", outside),
              "expected a number from 0.001 to 4294967, such as 0.5 or 2")
        << outside;
  }
  for (const char* bad : {"nan", "inf", "1e999", "1,5", "one", ""}) {
    EXPECT_EQ(rejection("worker.slot-cpu", bad), "expected a number such as 0.5 or 2") << bad;
  }
}

TEST(OptionValues, WorkerAdvertisedHostIsAHostOrEmpty) {
  for (const char* good : {"", "worker-1", "10.0.0.7", "node_3.example.org", "[fd00::7]"}) {
    EXPECT_EQ(rejection("worker.advertised-host", good), "<accepted>") << good;
  }
  for (const char* bad : {"two words", "host:8082", "a..b", "a/b"}) {
    EXPECT_EQ(rejection("worker.advertised-host", bad),
              "expected a host name or address such as worker-1 or 10.0.0.7, or empty")
        << bad;
  }
}

TEST(OptionValues, SlotMemoryIsASize) {
  EXPECT_EQ(std::get<uint64_t>(parseOptionValue(spec("worker.slot-memory"), "512MiB").value()),
            uint64_t{512} << 20);
  EXPECT_EQ(rejection("worker.slot-memory", "1GB"),
            "expected a size such as 4096, 64MiB or 1GiB (units B, KiB, MiB, GiB, TiB) "
            "(unknown unit \"GB\")");
}

TEST(OptionValues, FormattingGivesCanonicalText) {
  auto format = [](std::string_view key, std::string_view text) {
    return formatOptionValue(spec(key), parseOptionValue(spec(key), text).value());
  };
  EXPECT_EQ(format("worker.slot-cpu", "1"), "1.0");
  EXPECT_EQ(format("worker.slot-cpu", "0.25"), "0.25");
  EXPECT_EQ(format("worker.slot-memory", "1073741824"), "1GiB");
  EXPECT_EQ(format("heartbeat.interval", "120000ms"), "2m");
  EXPECT_EQ(format("worker.slots", "0016"), "16");
  EXPECT_EQ(format("ha.zookeeper.auth", "alice:s3cret"), "alice:s3cret");
}

TEST(OptionValues, TypeDescriptionsNameTheConstraint) {
  EXPECT_EQ(describeOptionType(spec("worker.slots")), "integer, 1..1024");
  EXPECT_EQ(describeOptionType(spec("ha.mode")), "one of zookeeper, standalone");
  EXPECT_EQ(describeOptionType(spec("ha.zookeeper.auth")), "user:password or empty, secret");
  EXPECT_EQ(describeOptionType(spec("store.rocksdb.path")), "string");
  EXPECT_EQ(describeOptionType(spec("worker.slot-memory")), "size, 1MiB..1PiB");
  EXPECT_EQ(describeOptionType(spec("heartbeat.interval")), "duration, > 0");
}

}  // namespace
}  // namespace regent

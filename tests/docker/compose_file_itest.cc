// docker-compose.yml and the images it builds, checked without a Docker daemon: the compose tool
// normalizes the file (`docker-compose config`), each test runs one check of compose_checks.h on
// the result, and the mutation tests feed the same checks broken copies to prove that they object,
// naming the service and the field.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <regex>
#include <sstream>

#include "tests/docker/compose_checks.h"
#include "tests/fixtures/temp_dir_test_util.h"

namespace regent::testing {
namespace {

const std::string kSourceDir = REGENT_SOURCE_DIR;
const std::string kBinDir = REGENT_BIN_DIR;
constexpr Duration kScriptTimeout{60000};

// The repository file at `relative` (see readWhole).
std::string readSource(const std::string& relative) {
  return readWhole(kSourceDir + "/" + relative);
}

// The repository's docker-compose.yml as `docker-compose config` prints it, loaded once.
const Result<YAML::Node>& repositoryProject() {
  static const Result<YAML::Node> project =
      normalizedComposeProject(kSourceDir + "/docker-compose.yml");
  return project;
}

// What docker/make-secrets.sh wrote: it runs on a copy of itself in a temporary directory, kept
// for the whole run, so the checks read the very files it makes (the ZooKeeper credentials as
// config files among them) without touching the repository's docker/secrets/.
struct MadeSecrets {
  std::unique_ptr<TempDir> dir;
  std::string secretsDir;          // dir/docker/secrets.
  std::vector<std::string> names;  // The files there.
};

MadeSecrets runMakeSecrets() {
  MadeSecrets made{std::make_unique<TempDir>("compose-file-test-secrets"), "", {}};
  const std::string root = made.dir->path();
  std::filesystem::create_directory(root + "/docker");
  const std::string script = root + "/docker/make-secrets.sh";
  std::filesystem::copy_file(kSourceDir + "/docker/make-secrets.sh", script);
  auto bash = findOnPath("bash");
  if (!bash.ok()) throw std::runtime_error(bash.error().message);
  const char* path = std::getenv("PATH");
  auto run =
      runWithEnvironment({bash.value(), script},
                         {std::string("PATH=") + (path != nullptr ? path : "")}, kScriptTimeout);
  if (!run.ok()) throw std::runtime_error(run.error().message);
  if (!run.value().exit.exited() || run.value().exit.exitCode != 0) {
    throw std::runtime_error("docker/make-secrets.sh ended with " + run.value().exit.describe() +
                             ": " + run.value().err);
  }
  made.secretsDir = root + "/docker/secrets";
  for (const auto& entry : std::filesystem::directory_iterator(made.secretsDir)) {
    made.names.push_back(entry.path().filename().string());
  }
  std::sort(made.names.begin(), made.names.end());
  return made;
}

const MadeSecrets& madeSecrets() {
  static const MadeSecrets made = runMakeSecrets();
  return made;
}

Problems checkRepositorySecrets(const YAML::Node& project) {
  return checkSecrets(project, kSourceDir + "/docker/secrets", madeSecrets().names);
}

Problems checkCredentialsIn(const YAML::Node& project, const std::string& secretsDir) {
  return checkZooKeeperCredentials(project, secretHostFiles(project, secretsDir));
}

Problems checkMadeCredentials(const YAML::Node& project) {
  return checkCredentialsIn(project, madeSecrets().secretsDir);
}

Problems checkEnvironmentIn(const YAML::Node& project, const std::string& secretsDir) {
  return checkRegentEnvironment(project, kBinDir, secretHostFiles(project, secretsDir));
}

Problems checkEnvironmentWithBuiltBinaries(const YAML::Node& project) {
  return checkEnvironmentIn(project, madeSecrets().secretsDir);
}

// docker/Dockerfile and docker/*.Dockerfile, by path relative to the repository.
std::map<std::string, std::string> repositoryDockerfiles() {
  std::map<std::string, std::string> dockerfiles;
  for (const auto& entry : std::filesystem::directory_iterator(kSourceDir + "/docker")) {
    const std::string name = entry.path().filename().string();
    if (name == "Dockerfile" || name.ends_with(".Dockerfile")) {
      dockerfiles["docker/" + name] = readSource("docker/" + name);
    }
  }
  return dockerfiles;
}

Problems checkImages(const std::map<std::string, std::string>& dockerfiles,
                     const std::string& dockerignore) {
  Problems problems;
  for (const auto& [name, text] : dockerfiles) {
    for (auto& problem : checkDockerfile(name, text)) problems.push_back(std::move(problem));
  }
  for (auto& problem : checkDockerignore(dockerfiles, dockerignore)) {
    problems.push_back(std::move(problem));
  }
  return problems;
}

// Expects one of `problems` to hold every text of `expected`.
void expectProblemHolding(const Problems& problems, const std::vector<std::string>& expected) {
  const bool found = std::any_of(problems.begin(), problems.end(), [&](const std::string& p) {
    return std::all_of(expected.begin(), expected.end(),
                       [&](const std::string& text) { return p.find(text) != std::string::npos; });
  });
  EXPECT_TRUE(found) << "no problem holds all of:\n"
                     << describeProblems(expected) << "\nthe problems:\n"
                     << describeProblems(problems);
}

#define ASSERT_PROJECT(project)                            \
  const Result<YAML::Node>& project = repositoryProject(); \
  ASSERT_TRUE(project.ok()) << project.error().message

TEST(ComposeFile, ConfigPrintsTheProject) {
  ASSERT_PROJECT(project);
  EXPECT_GT(project.value()["services"].size(), 0u);
}

// The variables the file interpolates, and compose's own, set in the caller's environment: the
// normalized project still has the file's defaults, and regentctl stays out of `up`.
TEST(ComposeFile, CallerEnvironmentDoesNotLeakIn) {
  const std::vector<std::pair<std::string, std::string>> leaked{
      {"BASE_IMAGE", "leaked:base"},
      {"ZOOKEEPER_BASE_IMAGE", "leaked:zookeeper"},
      {"USER_ID", "0"},
      {"COMPOSE_PROFILES", "tools"},
      {"COMPOSE_PROJECT_NAME", "leaked"},
      {"COMPOSE_FILE", "/nonexistent.yml"}};
  for (const auto& [name, value] : leaked) ::setenv(name.c_str(), value.c_str(), 1);
  const auto project = normalizedComposeProject(kSourceDir + "/docker-compose.yml");
  for (const auto& [name, value] : leaked) ::unsetenv(name.c_str());
  ASSERT_TRUE(project.ok()) << project.error().message;
  const YAML::Node services = project.value()["services"];
  EXPECT_EQ(services["master-1"]["build"]["args"]["BASE"].as<std::string>(),
            "debian:bookworm-slim");
  EXPECT_EQ(services["master-1"]["build"]["args"]["USER_ID"].as<std::string>(), "10001");
  EXPECT_EQ(services["zk-1"]["build"]["args"]["BASE"].as<std::string>(), "debian:bookworm-slim");
}

TEST(ComposeFile, TopologyIsThreeZooKeepersThreeMastersTwoWorkersAndAToolOnOneNetwork) {
  ASSERT_PROJECT(project);
  EXPECT_EQ(describeProblems(checkTopology(project.value())), "");
}

TEST(ComposeFile, ZooKeeperServersAgreeOnTheEnsembleAndRegentUsesIt) {
  ASSERT_PROJECT(project);
  EXPECT_EQ(describeProblems(checkZooKeeperEnsemble(project.value())), "");
}

TEST(ComposeFile, MastersWaitForHealthyZooKeeperAndTheWorkerForHealthyMasters) {
  ASSERT_PROJECT(project);
  EXPECT_EQ(describeProblems(checkDependencies(project.value())), "");
}

TEST(ComposeFile, OnlyMasterOnePublishesAPortOnLoopback) {
  ASSERT_PROJECT(project);
  EXPECT_EQ(describeProblems(checkPorts(project.value())), "");
}

TEST(ComposeFile, RpcRequiresAuthenticationWithSecretsTheServicesMount) {
  ASSERT_PROJECT(project);
  EXPECT_EQ(describeProblems(checkRepositorySecrets(project.value())), "");
}

TEST(ComposeFile, SecretFilesAreIgnoredByGit) {
  std::istringstream in(readSource(".gitignore"));
  bool ignored = false;
  for (std::string line; std::getline(in, line);) {
    ignored = ignored || line == "/docker/secrets/" || line == "docker/secrets/" ||
              line == "/docker/secrets" || line == "docker/secrets";
  }
  EXPECT_TRUE(ignored) << ".gitignore: no line /docker/secrets/; docker/make-secrets.sh writes "
                          "the RPC secrets there";
}

TEST(ComposeFile, EveryServiceDropsItsCapabilitiesAndOnlyTheWorkerRunsAsRootWithSix) {
  ASSERT_PROJECT(project);
  EXPECT_EQ(describeProblems(checkPrivileges(project.value())), "");
}

TEST(ComposeFile, ZooKeeperCredentialsComeFromConfigFilesMountedAsSecrets) {
  ASSERT_PROJECT(project);
  EXPECT_EQ(describeProblems(checkMadeCredentials(project.value())), "");
}

// Each service's command line, its secret config file loaded, and environment, through the
// binary's --print-config.
TEST(ComposeFile, EveryCommandLineAndEnvironmentIsAcceptedByTheBinaryItsServiceRuns) {
  ASSERT_PROJECT(project);
  EXPECT_EQ(describeProblems(checkEnvironmentWithBuiltBinaries(project.value())), "");
}

// The password check of checkRegentEnvironment, which the real binaries always pass (they mask
// secrets): stand-ins for regent-master and regent-worker that print the credentials of their
// --config file as they are.
TEST(ComposeFile, PrintConfigShowingAPasswordIsAProblem) {
  ASSERT_PROJECT(project);
  auto sed = findOnPath("sed");
  ASSERT_TRUE(sed.ok()) << sed.error().message;
  TempDir binDir("compose-file-test-bin");
  for (const char* binary : {"regent-master", "regent-worker"}) {
    const std::string path = binDir.path() + "/" + binary;
    std::ofstream(path) << "#!/bin/sh\nsed=" << sed.value() << "\n"
                        << R"(while [ $# -gt 0 ]; do [ "$1" = --config ] && config=$2; shift; done
for key in ha.zookeeper.auth ha.zookeeper.read-auth; do
  echo "$key $("$sed" -n "s/^$key: \"\(.*\)\"\$/\1/p" "$config") file $config"
done
)";
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  }
  const YAML::Node& p = project.value();
  const Problems problems =
      checkRegentEnvironment(p, binDir.path(), secretHostFiles(p, madeSecrets().secretsDir));
  expectProblemHolding(problems, {"service master-1: regent-master --config",
                                  "printed the password of ha.zookeeper.auth of secret "
                                  "regent-zookeeper-writer"});
  expectProblemHolding(problems, {"service worker: regent-worker --config",
                                  "printed the password of ha.zookeeper.read-auth"});
}

// docker-compose.provider.yml over the base file: the masters start the workers as containers
// (resourcemanager.provider docker) through the daemon's socket, which they reach through its
// group as the image's unprivileged user; no worker service starts with `up`; and what the
// masters are given is accepted by regent-master.
TEST(ComposeProviderFile, MastersStartWorkersThroughTheSocketAsTheirOwnUserAndNoWorkerRuns) {
  const std::vector<std::string> files{kSourceDir + "/docker-compose.yml",
                                       kSourceDir + "/docker-compose.provider.yml"};
  // Without the socket's group the file refuses to make a project (no default: not root's).
  const auto noGroup = normalizedComposeProject(files);
  ASSERT_FALSE(noGroup.ok());
  EXPECT_NE(noGroup.error().message.find("DOCKER_GID"), std::string::npos)
      << noGroup.error().message;
  const auto project = normalizedComposeProject(files, {"DOCKER_GID=998"});
  ASSERT_TRUE(project.ok()) << project.error().message;
  const YAML::Node services = project.value()["services"];
  for (const char* name : {"master-1", "master-2", "master-3"}) {
    SCOPED_TRACE(name);
    const YAML::Node master = services[name];
    const YAML::Node env = master["environment"];
    EXPECT_EQ(env["REGENT_RESOURCEMANAGER_PROVIDER"].as<std::string>(""), "docker");
    EXPECT_EQ(env["REGENT_RESOURCEMANAGER_DOCKER_IMAGE"].as<std::string>(""), "regent:compose");
    EXPECT_EQ(env["REGENT_RESOURCEMANAGER_DOCKER_NETWORK"].as<std::string>(""),
              "regent-demo_regent");
    // The base file's settings are kept: authentication, the worker secret the masters copy.
    EXPECT_EQ(env["REGENT_RPC_AUTH"].as<std::string>(""), "required");
    EXPECT_EQ(env["REGENT_RPC_AUTH_SECRET_WORKER_FILE"].as<std::string>(""),
              "/run/secrets/regent-worker");
    EXPECT_FALSE(master["user"]) << "a master runs as the image's user, not root";
    ASSERT_TRUE(master["group_add"] && master["group_add"].IsSequence());
    EXPECT_EQ(master["group_add"][0].as<std::string>(""), "998");
    bool socket = false;
    for (const YAML::Node& volume : master["volumes"]) {
      const std::string target =
          volume.IsMap() ? volume["target"].as<std::string>("") : volume.as<std::string>("");
      socket = socket || target.find("/var/run/docker.sock") != std::string::npos;
    }
    EXPECT_TRUE(socket) << "no volume mounts the Docker socket at /var/run/docker.sock";
  }
  const YAML::Node profiles = services["worker"]["profiles"];
  ASSERT_TRUE(profiles && profiles.IsSequence()) << "the worker service would start with up";
  EXPECT_EQ(profiles[0].as<std::string>(""), "workers-by-hand");
  EXPECT_EQ(describeProblems(checkEnvironmentWithBuiltBinaries(project.value())), "");
}

TEST(ComposeImages, DockerfilesHaveAHealthcheckAndAnUnprivilegedUser) {
  const auto dockerfiles = repositoryDockerfiles();
  ASSERT_TRUE(dockerfiles.contains("docker/Dockerfile"));
  ASSERT_TRUE(dockerfiles.contains("docker/zookeeper.Dockerfile"));
  for (const auto& [name, text] : dockerfiles) {
    EXPECT_EQ(describeProblems(checkDockerfile(name, text)), "");
  }
}

TEST(ComposeImages, DockerignoreIncludesEveryFileTheImagesCopy) {
  const auto dockerfiles = repositoryDockerfiles();
  for (const auto& [name, text] : dockerfiles) {
    EXPECT_FALSE(contextSources(text).empty()) << name << " copies nothing from the context";
  }
  EXPECT_EQ(describeProblems(checkDockerignore(dockerfiles, readSource(".dockerignore"))), "");
}

TEST(ComposeImages, ScriptsPassBashSyntaxCheck) {
  std::vector<std::string> scripts{kSourceDir + "/scripts/compose-demo.sh"};
  for (const auto& entry : std::filesystem::directory_iterator(kSourceDir + "/docker")) {
    std::ifstream in(entry.path());
    std::string first;
    std::getline(in, first);
    if (first.starts_with("#!")) scripts.push_back(entry.path().string());
  }
  ASSERT_GE(scripts.size(), 4u) << "expected compose-demo.sh and docker/'s three scripts";
  for (const auto& script : scripts) EXPECT_EQ(describeProblems(checkShellSyntax(script)), "");
}

TEST(ComposeImages, ShellSyntaxCheckNamesTheFileAndTheError) {
  TempDir dir("compose-file-test-script");
  const std::string script = dir.path() + "/broken.sh";
  std::ofstream(script) << "#!/bin/bash\nif true; then\n  echo unterminated\n";
  const std::string problems = describeProblems(checkShellSyntax(script));
  EXPECT_NE(problems.find(script + ": bash -n ended with exit code 2"), std::string::npos)
      << problems;
  EXPECT_NE(problems.find("syntax error"), std::string::npos) << problems;
}

// Mutations of the normalized project: each goes through `docker-compose config` again, so the
// tool accepts it, and the check must report a problem holding every `expected` text.
struct ComposeMutation {
  std::string name;
  std::function<void(YAML::Node&)> mutate;
  std::function<Problems(const YAML::Node&)> check;
  std::vector<std::string> expected;
};

YAML::Node environmentOfService(YAML::Node& project, const std::string& service) {
  return project["services"][service]["environment"];
}

const std::vector<ComposeMutation> kComposeMutations{
    {"MasterWithoutAuthentication",
     [](YAML::Node& p) { environmentOfService(p, "master-2")["REGENT_RPC_AUTH"] = "none"; },
     checkRepositorySecrets,
     {"service master-2: environment REGENT_RPC_AUTH is none"}},
    {"MisspeltMasterVariable",
     [](YAML::Node& p) {
       auto environment = environmentOfService(p, "master-3");
       environment["REGENT_HA_ZOOKEEPER_QUORM"] = environment["REGENT_HA_ZOOKEEPER_QUORUM"];
       environment.remove("REGENT_HA_ZOOKEEPER_QUORUM");
     },
     checkEnvironmentWithBuiltBinaries,
     {"service master-3: regent-master --config ", "zookeeper-writer.yaml --print-config",
      "exit code 2", "unknown key from env REGENT_HA_ZOOKEEPER_QUORM"}},
    {"BadWorkerValue",
     [](YAML::Node& p) { environmentOfService(p, "worker")["REGENT_WORKER_SLOTS"] = "four"; },
     checkEnvironmentWithBuiltBinaries,
     {"service worker: regent-worker --config ", "zookeeper-reader.yaml --print-config",
      "bad value \"four\" for worker.slots"}},
    {"MisspeltToolVariable",
     [](YAML::Node& p) {
       environmentOfService(p, "regentctl")["REGENT_RPC_CREDENTIAL_ROLL"] = "x";
     },
     checkEnvironmentWithBuiltBinaries,
     {"service regentctl:", "REGENT_RPC_CREDENTIAL_ROLL"}},
    {"MasterNotWaitingForZk2",
     [](YAML::Node& p) { p["services"]["master-2"]["depends_on"].remove("zk-2"); },
     checkDependencies,
     {"service master-2: depends_on lacks zk-2"}},
    {"WorkerWaitingForAStartedMaster",
     [](YAML::Node& p) {
       p["services"]["worker"]["depends_on"]["master-3"]["condition"] = "service_started";
     },
     checkDependencies,
     {"service worker: depends_on master-3 has condition service_started"}},
    {"SecondPublishedPort",
     [](YAML::Node& p) { p["services"]["master-2"]["ports"].push_back("127.0.0.1:8082:8081"); },
     checkPorts,
     {"service master-2: ports 127.0.0.1:8082:8081"}},
    {"PortOnEveryInterface",
     [](YAML::Node& p) { p["services"]["master-1"]["ports"][0] = "8081:8081"; },
     checkPorts,
     {"service master-1: port", "bound to every interface"}},
    {"DuplicateZooKeeperId",
     [](YAML::Node& p) { environmentOfService(p, "zk-3")["ZOO_MY_ID"] = "2"; },
     checkZooKeeperEnsemble,
     {"service zk-3: environment ZOO_MY_ID 2 is also zk-2's"}},
    {"ZooKeeperServersWithSwappedIds",
     [](YAML::Node& p) {
       for (const char* zk : {"zk-1", "zk-2", "zk-3"}) {
         environmentOfService(p, zk)["ZOO_SERVERS"] = "1=zk-1 2=zk-3 3=zk-2";
       }
     },
     checkZooKeeperEnsemble,
     {"ZOO_SERVERS", "gives zk-3 the id 2, but zk-3's ZOO_MY_ID is 3"}},
    {"QuorumMissingAServer",
     [](YAML::Node& p) {
       environmentOfService(p, "worker")["REGENT_HA_ZOOKEEPER_QUORUM"] = "zk-1:2181,zk-2:2181";
     },
     checkZooKeeperEnsemble,
     {"service worker: environment REGENT_HA_ZOOKEEPER_QUORUM is \"zk-1:2181,zk-2:2181\""}},
    {"ToolStartedByUp",
     [](YAML::Node& p) { p["services"]["regentctl"].remove("profiles"); },
     checkTopology,
     {"service regentctl: profiles is empty"}},
    {"OneWorker",
     [](YAML::Node& p) { p["services"]["worker"]["scale"] = 1; },
     checkTopology,
     {"service worker: scale is \"1\", expected 2"}},
    {"SecondNetwork",
     [](YAML::Node& p) {
       p["networks"]["outside"] = YAML::Node(YAML::NodeType::Map);
       p["services"]["zk-1"]["networks"]["outside"] = YAML::Node(YAML::NodeType::Null);
     },
     checkTopology,
     {"networks: 2 declared (outside, regent)"}},
    {"WorkerSecretNotMounted",
     [](YAML::Node& p) { p["services"]["worker"].remove("secrets"); },
     checkRepositorySecrets,
     {"service worker: environment REGENT_RPC_CREDENTIAL_SECRET_FILE is "
      "\"/run/secrets/regent-worker\", but the service mounts no secret there"}},
    {"SecretFromOutsideDockerSecrets",
     [](YAML::Node& p) { p["secrets"]["regent-reader"]["file"] = "/etc/hostname"; },
     checkRepositorySecrets,
     {"secrets.regent-reader: file is \"/etc/hostname\""}},
    {"MasterWithoutCapDrop",
     [](YAML::Node& p) { p["services"]["master-2"].remove("cap_drop"); },
     checkPrivileges,
     {"service master-2: cap_drop is none, expected ALL"}},
    {"WorkerWithSysAdmin",
     [](YAML::Node& p) { p["services"]["worker"]["cap_add"].push_back("SYS_ADMIN"); },
     checkPrivileges,
     {"service worker: cap_add is", "SYS_ADMIN", "expected exactly CHOWN"}},
    {"WorkerAsItsImageUser",
     [](YAML::Node& p) { p["services"]["worker"].remove("user"); },
     checkPrivileges,
     {"service worker: user is not set, expected root"}},
    {"MasterAsRoot",
     [](YAML::Node& p) { p["services"]["master-1"]["user"] = "root"; },
     checkPrivileges,
     {"service master-1: user is \"root\"; only worker sets user"}},
    {"ToolWithACapability",
     [](YAML::Node& p) { p["services"]["regentctl"]["cap_add"].push_back("NET_RAW"); },
     checkPrivileges,
     {"service regentctl: cap_add is NET_RAW; only worker adds capabilities"}},
    {"ZooKeeperWithoutNoNewPrivileges",
     [](YAML::Node& p) { p["services"]["zk-3"].remove("security_opt"); },
     checkPrivileges,
     {"service zk-3: security_opt is none, expected no-new-privileges:true"}},
    {"MasterWithoutConfig",
     [](YAML::Node& p) { p["services"]["master-3"]["command"] = YAML::Load("[regent-master]"); },
     checkMadeCredentials,
     {"service master-3: entrypoint/command has no --config, expected one --config "
      "/run/secrets/<secret> setting ha.zookeeper.auth and ha.zookeeper.read-auth"}},
    {"MasterWithoutConfigPrintsDefaults",
     [](YAML::Node& p) { p["services"]["master-3"]["command"] = YAML::Load("[regent-master]"); },
     checkEnvironmentWithBuiltBinaries,
     {"service master-3: regent-master --print-config", "no --config"}},
    {"WorkerWithTheWriterFile",
     [](YAML::Node& p) {
       auto worker = p["services"]["worker"];
       worker["command"] =
           YAML::Load("[regent-worker, --config, /run/secrets/regent-zookeeper-writer]");
       worker["secrets"].push_back("regent-zookeeper-writer");
     },
     checkMadeCredentials,
     {"service worker: --config /run/secrets/regent-zookeeper-writer (secret "
      "regent-zookeeper-writer) sets ha.zookeeper.auth, the masters' write credential"}},
    {"ToolMountingTheWriterFile",
     [](YAML::Node& p) {
       p["services"]["regentctl"]["secrets"].push_back("regent-zookeeper-writer");
     },
     checkMadeCredentials,
     {"service regentctl: secrets mounts regent-zookeeper-writer, whose file sets "
      "ha.zookeeper.auth"}},
    {"WorkerConfigNotMounted",
     [](YAML::Node& p) { p["services"]["worker"]["secrets"] = YAML::Load("[regent-worker]"); },
     checkMadeCredentials,
     {"service worker: --config is \"/run/secrets/regent-zookeeper-reader\", but the service "
      "mounts no secret there"}},
    {"WorkerConfigNotMountedIsNotRun",
     [](YAML::Node& p) { p["services"]["worker"]["secrets"] = YAML::Load("[regent-worker]"); },
     checkEnvironmentWithBuiltBinaries,
     {"service worker: entrypoint/command names /run/secrets/regent-zookeeper-reader, which is "
      "no secret the service mounts"}},
    {"CredentialInEnvironment",
     [](YAML::Node& p) {
       environmentOfService(p, "regentctl")["REGENT_HA_ZOOKEEPER_READ_AUTH"] = "reader:x";
     },
     checkMadeCredentials,
     {"service regentctl: environment REGENT_HA_ZOOKEEPER_READ_AUTH sets a ZooKeeper credential"}},
    {"CredentialWithSet",
     [](YAML::Node& p) {
       p["services"]["master-2"]["command"].push_back("--set");
       p["services"]["master-2"]["command"].push_back("ha.zookeeper.auth=regent:x");
     },
     checkMadeCredentials,
     {"service master-2: entrypoint/command sets ha.zookeeper.auth with --set"}},
    // The environment wins over the file: the printed source gives it away.
    {"CredentialInEnvironmentOverridesTheFile",
     [](YAML::Node& p) {
       environmentOfService(p, "master-1")["REGENT_HA_ZOOKEEPER_AUTH"] = "regent:x";
     },
     checkEnvironmentWithBuiltBinaries,
     {"service master-1: regent-master --config",
      "shows ha.zookeeper.auth with source env "
      "REGENT_HA_ZOOKEEPER_AUTH, expected file"}},
};

void PrintTo(const ComposeMutation& mutation, std::ostream* out) { *out << mutation.name; }

class ComposeMutationTest : public ::testing::TestWithParam<ComposeMutation> {};

TEST_P(ComposeMutationTest, CheckNamesTheServiceAndTheField) {
  ASSERT_PROJECT(project);
  YAML::Node mutated = YAML::Clone(project.value());
  GetParam().mutate(mutated);
  TempDir dir("compose-file-test-mutation");
  const std::string file = dir.path() + "/docker-compose.yml";
  // yaml-cpp writes the version 3.9 unquoted, a number, which compose refuses: quote it.
  std::ofstream(file) << std::regex_replace(YAML::Dump(mutated),
                                            std::regex("\nversion: ([0-9.]+)\n"),
                                            "\nversion: '$1'\n")
                      << "\n";
  const auto normalized = normalizedComposeProject(file);
  ASSERT_TRUE(normalized.ok()) << normalized.error().message;

  expectProblemHolding(GetParam().check(normalized.value()), GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(ComposeFileMutations, ComposeMutationTest,
                         ::testing::ValuesIn(kComposeMutations),
                         [](const auto& info) { return info.param.name; });

// Mutations of what docker/make-secrets.sh wrote (a regular expression replaced in one file of a
// copy): the check, reading the copy, must report a problem holding every `expected` text.
struct SecretFileMutation {
  std::string name;
  std::string file;  // In docker/secrets/.
  std::string pattern;
  std::string replacement;
  std::function<Problems(const YAML::Node&, const std::string& secretsDir)> check;
  std::vector<std::string> expected;
};

const std::vector<SecretFileMutation> kSecretFileMutations{
    {"MisspeltReaderKey",
     "zookeeper-reader.yaml",
     "ha.zookeeper.read-auth:",
     "ha.zookeeper.read-auht:",
     checkEnvironmentIn,
     {"service worker: regent-worker --config", "exit code 2",
      "unknown key \"ha.zookeeper.read-auht\" in file"}},
    {"MisspeltWriterKey",
     "zookeeper-writer.yaml",
     "ha.zookeeper.auth:",
     "ha.zookeeper.auht:",
     checkEnvironmentIn,
     {"service master-2: regent-master --config", "unknown key \"ha.zookeeper.auht\""}},
    {"ReaderWithAnotherCredential",
     "zookeeper-reader.yaml",
     "\"reader:[^\"]*\"",
     "\"reader:another\"",
     checkCredentialsIn,
     {"service regentctl: ha.zookeeper.read-auth in secret regent-zookeeper-reader differs from "
      "the masters'"}},
    {"WriterWithoutTheWriteCredential",
     "zookeeper-writer.yaml",
     "ha.zookeeper.auth:[^\n]*\n",
     "",
     checkCredentialsIn,
     {"service master-1: --config /run/secrets/regent-zookeeper-writer (secret "
      "regent-zookeeper-writer) does not set ha.zookeeper.auth"}},
    {"ReaderWithTheWriteCredential",
     "zookeeper-reader.yaml",
     "\n$",
     "\nha.zookeeper.auth: \"regent:x\"\n",
     checkCredentialsIn,
     {"service worker: --config /run/secrets/regent-zookeeper-reader (secret "
      "regent-zookeeper-reader) sets ha.zookeeper.auth"}},
};

void PrintTo(const SecretFileMutation& mutation, std::ostream* out) { *out << mutation.name; }

class SecretFileMutationTest : public ::testing::TestWithParam<SecretFileMutation> {};

TEST_P(SecretFileMutationTest, CheckNamesTheServiceAndTheKey) {
  ASSERT_PROJECT(project);
  TempDir dir("compose-file-test-secret-mutation");
  std::filesystem::copy(madeSecrets().secretsDir, dir.path());
  const std::string file = dir.path() + "/" + GetParam().file;
  ASSERT_TRUE(std::filesystem::is_regular_file(file))
      << "docker/make-secrets.sh wrote no " << GetParam().file;
  const std::string original = readWhole(file);
  const std::string text =
      std::regex_replace(original, std::regex(GetParam().pattern), GetParam().replacement);
  ASSERT_NE(text, original) << GetParam().pattern << " no longer matches " << GetParam().file;
  std::ofstream(file, std::ios::binary | std::ios::trunc) << text;

  expectProblemHolding(GetParam().check(project.value(), dir.path()), GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(ComposeSecretFileMutations, SecretFileMutationTest,
                         ::testing::ValuesIn(kSecretFileMutations),
                         [](const auto& info) { return info.param.name; });

// Mutations of the images' files (a regular expression replaced in one file): checkImages must
// report a problem holding every `expected` text.
struct ImageMutation {
  std::string name;
  std::string file;  // Relative to the repository: a Dockerfile or .dockerignore.
  std::string pattern;
  std::string replacement;
  std::vector<std::string> expected;
};

const std::vector<ImageMutation> kImageMutations{
    {"NoHealthcheck",
     "docker/Dockerfile",
     "HEALTHCHECK[^\n]*\n",
     "",
     {"docker/Dockerfile: no HEALTHCHECK"}},
    {"HealthcheckNone",
     "docker/zookeeper.Dockerfile",
     "HEALTHCHECK[^\n]*\n",
     "HEALTHCHECK NONE\n",
     {"docker/zookeeper.Dockerfile: no HEALTHCHECK"}},
    {"RootUser",
     "docker/zookeeper.Dockerfile",
     "USER zookeeper",
     "USER root",
     {"docker/zookeeper.Dockerfile: USER root is root"}},
    {"NoUser", "docker/Dockerfile", "USER regent\n", "", {"docker/Dockerfile: no USER"}},
    {"CopiedScriptLeftOut",
     ".dockerignore",
     "!docker/regent-healthcheck\n",
     "",
     {".dockerignore: leaves out docker/regent-healthcheck, which docker/Dockerfile copies"}},
    {"NewCopiedFileLeftOut",
     "docker/zookeeper.Dockerfile",
     "COPY docker/zookeeper-server",
     "COPY docker/zookeeper-server docker/zoo.cfg",
     {".dockerignore: leaves out docker/zoo.cfg, which docker/zookeeper.Dockerfile copies"}},
    {"NotExcludingEverything",
     ".dockerignore",
     "\n\\*\n",
     "\n",
     {".dockerignore: the first pattern is \"!build-release/bin/regent-master\""}},
};

void PrintTo(const ImageMutation& mutation, std::ostream* out) { *out << mutation.name; }

class ImageMutationTest : public ::testing::TestWithParam<ImageMutation> {};

TEST_P(ImageMutationTest, CheckNamesTheFileAndTheField) {
  auto dockerfiles = repositoryDockerfiles();
  std::string dockerignore = readSource(".dockerignore");
  std::string& text =
      GetParam().file == ".dockerignore" ? dockerignore : dockerfiles.at(GetParam().file);
  const std::string original = text;
  text = std::regex_replace(text, std::regex(GetParam().pattern), GetParam().replacement);
  ASSERT_NE(text, original) << GetParam().pattern << " no longer matches " << GetParam().file;

  expectProblemHolding(checkImages(dockerfiles, dockerignore), GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(ComposeImageMutations, ImageMutationTest,
                         ::testing::ValuesIn(kImageMutations),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace regent::testing

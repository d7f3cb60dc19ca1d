// The checks of docker-compose.yml and the images (see compose_checks.h).
#include "tests/docker/compose_checks.h"

#include <fnmatch.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "tests/fixtures/temp_dir_test_util.h"

namespace regent::testing {
namespace {

const std::vector<std::string> kZooKeepers{"zk-1", "zk-2", "zk-3"};
const std::vector<std::string> kMasters{"master-1", "master-2", "master-3"};
constexpr const char* kWorker = "worker";
constexpr const char* kRegentctl = "regentctl";
constexpr const char* kQuorum = "zk-1:2181,zk-2:2181,zk-3:2181";
constexpr const char* kSecretsMount = "/run/secrets/";
constexpr const char* kWriteAuthKey = "ha.zookeeper.auth";
constexpr const char* kReadAuthKey = "ha.zookeeper.read-auth";
const std::vector<std::string> kCredentialVariables{"REGENT_HA_ZOOKEEPER_AUTH",
                                                    "REGENT_HA_ZOOKEEPER_READ_AUTH"};
// What the worker needs to run its tasks as nobody: change the owner of their directories, read
// and write them, signal the tasks and switch user and group.
const std::vector<std::string> kWorkerCapabilities{"CHOWN", "DAC_OVERRIDE", "FOWNER",
                                                   "KILL",  "SETGID",       "SETUID"};
constexpr Duration kCommandTimeout{60000};

std::string trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return "";
  const auto last = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(first, last - first + 1));
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::istringstream in(text);
  for (std::string part; std::getline(in, part, separator);) parts.push_back(trim(part));
  return parts;
}

std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> result;
  for (std::string word; in >> word;) result.push_back(word);
  return result;
}

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "" : separator) + item;
  return text;
}

std::string upper(std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

std::string scalar(const YAML::Node& node) {
  return node && node.IsScalar() ? node.Scalar() : std::string();
}

// The names a service lists under `key` (networks, depends_on, secrets; mapping or sequence
// form, sequence entries as names or as mappings with `source`).
std::vector<std::string> namesUnder(const YAML::Node& service, const std::string& key) {
  std::vector<std::string> names;
  const YAML::Node node = service[key];
  if (!node) return names;
  if (node.IsMap()) {
    for (const auto& entry : node) names.push_back(entry.first.Scalar());
  } else if (node.IsSequence()) {
    for (const auto& entry : node) {
      names.push_back(entry.IsMap() ? scalar(entry["source"]) : scalar(entry));
    }
  }
  return names;
}

// A service's environment (mapping or NAME=value sequence form); a variable without a value
// (taken from the caller's environment by compose) maps to "".
std::map<std::string, std::string> environmentOf(const YAML::Node& service) {
  std::map<std::string, std::string> environment;
  const YAML::Node node = service["environment"];
  if (!node) return environment;
  if (node.IsMap()) {
    for (const auto& entry : node) environment[entry.first.Scalar()] = scalar(entry.second);
  } else if (node.IsSequence()) {
    for (const auto& entry : node) {
      const std::string text = scalar(entry);
      const auto equals = text.find('=');
      environment[text.substr(0, equals)] =
          equals == std::string::npos ? "" : text.substr(equals + 1);
    }
  }
  return environment;
}

bool setsRegentVariables(const std::map<std::string, std::string>& environment) {
  return std::any_of(environment.begin(), environment.end(),
                     [](const auto& entry) { return entry.first.starts_with("REGENT_"); });
}

bool contains(const std::vector<std::string>& items, const std::string& item) {
  return std::find(items.begin(), items.end(), item) != items.end();
}

// The service or a null node.
YAML::Node serviceNamed(const YAML::Node& project, const std::string& name) {
  return project["services"][name];
}

// "zk-1, zk-2" for the list `names`.
std::string listed(const std::vector<std::string>& names) {
  return names.empty() ? "none" : join(names, ", ");
}

// The host address of a published port ("" = every interface).
std::string portHostAddress(const YAML::Node& port) {
  if (port.IsMap()) return scalar(port["host_ip"]);
  std::string text = scalar(port);
  text = text.substr(0, text.find('/'));
  if (text.starts_with("[")) return text.substr(1, text.find(']') - 1);
  const auto parts = split(text, ':');
  return parts.size() == 3 ? parts[0] : "";
}

// The Dockerfile's instructions (continuation lines joined, comments dropped): upper-case name
// and arguments.
std::vector<std::pair<std::string, std::string>> instructions(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> result;
  std::istringstream in(text);
  std::string logical;
  for (std::string line; std::getline(in, line);) {
    const std::string trimmed = trim(line);
    if (trimmed.starts_with("#")) continue;
    if (trimmed.ends_with("\\")) {
      logical += trimmed.substr(0, trimmed.size() - 1) + " ";
      continue;
    }
    logical += trimmed;
    const std::string whole = trim(logical);
    logical.clear();
    if (whole.empty()) continue;
    const auto space = whole.find_first_of(" \t");
    result.emplace_back(upper(whole.substr(0, space)),
                        space == std::string::npos ? "" : trim(whole.substr(space)));
  }
  return result;
}

// Whether `.dockerignore` rules (in order, the last match wins) leave `path` in the context.
bool includedByDockerignore(const std::vector<std::string>& rules, const std::string& path) {
  bool excluded = false;
  for (const auto& rule : rules) {
    const bool negated = rule.starts_with("!");
    std::string pattern = trim(negated ? rule.substr(1) : rule);
    while (pattern.starts_with("/")) pattern.erase(0, 1);
    // A pattern matching a directory matches everything under it.
    bool matches = fnmatch(pattern.c_str(), path.c_str(), FNM_PATHNAME) == 0;
    for (auto slash = path.find('/'); !matches && slash != std::string::npos;
         slash = path.find('/', slash + 1)) {
      matches = fnmatch(pattern.c_str(), path.substr(0, slash).c_str(), FNM_PATHNAME) == 0;
    }
    if (matches) excluded = !negated;
  }
  return !excluded;
}

// A service's secret mounts: path in the container -> secret.
std::map<std::string, std::string> mountedSecrets(const YAML::Node& service) {
  std::map<std::string, std::string> mounted;
  const YAML::Node secrets = service["secrets"];
  for (size_t i = 0; secrets && secrets.IsSequence() && i < secrets.size(); ++i) {
    const YAML::Node mount = secrets[i];
    const std::string source = mount.IsMap() ? scalar(mount["source"]) : scalar(mount);
    const std::string target = mount.IsMap() ? scalar(mount["target"]) : "";
    mounted[target.starts_with("/") ? target : kSecretsMount + (target.empty() ? source : target)] =
        source;
  }
  return mounted;
}

// The values of `option` in `args`, written "--option value" or "--option=value".
std::vector<std::string> optionValues(const std::vector<std::string>& args,
                                      const std::string& option) {
  std::vector<std::string> values;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == option && i + 1 < args.size()) {
      values.push_back(args[++i]);
    } else if (args[i].starts_with(option + "=")) {
      values.push_back(args[i].substr(option.size() + 1));
    }
  }
  return values;
}

// A regent config file's keys (nested mappings joined with dots, as the binaries read them) and
// scalar values; an error naming the file when it cannot be read or is no mapping.
Result<std::map<std::string, std::string>> configFileValues(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& error) {
    return Error::fatal(path + ": " + error.what());
  }
  std::map<std::string, std::string> values;
  if (root.IsNull()) return values;
  if (!root.IsMap()) return Error::fatal(path + ": not a YAML mapping of options");
  std::function<void(const YAML::Node&, const std::string&)> flatten =
      [&](const YAML::Node& node, const std::string& prefix) {
        for (const auto& entry : node) {
          const std::string key = (prefix.empty() ? "" : prefix + ".") + entry.first.Scalar();
          if (entry.second.IsMap()) {
            flatten(entry.second, key);
          } else {
            values[key] = scalar(entry.second);
          }
        }
      };
  flatten(root, "");
  return values;
}

// The password of a "user:password" credential (all of it without a colon).
std::string passwordOf(const std::string& credential) {
  const auto colon = credential.find(':');
  return colon == std::string::npos ? credential : credential.substr(colon + 1);
}

// An upper-case capability without the CAP_ prefix docker also accepts.
std::string capabilityName(const std::string& written) {
  std::string name = upper(written);
  return name.starts_with("CAP_") ? name.substr(4) : name;
}

// --print-config's lines: key -> value and source.
std::map<std::string, std::pair<std::string, std::string>> printedConfig(const std::string& out) {
  std::map<std::string, std::pair<std::string, std::string>> printed;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string key;
    std::string value;
    std::string source;
    fields >> key >> value;
    std::getline(fields, source);
    if (!key.empty()) printed[key] = {value, trim(source)};
  }
  return printed;
}

}  // namespace

std::string describeProblems(const Problems& problems) { return join(problems, "\n"); }

std::string readWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Result<std::string> findOnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  const std::string searched = path != nullptr ? path : "";
  for (const auto& dir : split(searched, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0 && !std::filesystem::is_directory(candidate)) {
      return candidate;
    }
  }
  return Error::fatal(program + " is not on PATH (" + searched + ")");
}

Result<CommandOutput> runWithEnvironment(const std::vector<std::string>& argv,
                                         const std::vector<std::string>& environment,
                                         Duration timeout) {
  TempDir dir("compose-file-test-run");
  const std::string outPath = dir.path() + "/stdout";
  const std::string errPath = dir.path() + "/stderr";
  // env -i gives the command exactly `environment`; the shell only sends stderr to its own file
  // (the harness captures stdout).
  ProcessOptions options{.cwd = dir.path(), .outputPath = outPath};
  options.argv = {"/usr/bin/env", "-i"};
  options.argv.insert(options.argv.end(), environment.begin(), environment.end());
  options.argv.insert(options.argv.end(), {"/bin/sh", "-c", "exec \"$@\" 2>\"$0\"", errPath});
  options.argv.insert(options.argv.end(), argv.begin(), argv.end());
  auto process = ProcessHarness::start(std::move(options));
  if (!process.ok()) return process.error();
  const auto exit = process.value()->waitForExit(timeout);
  if (!exit) {
    (void)process.value()->stop(Duration(1000));
    return Error::fatal(argv.front() + " did not end within " + std::to_string(timeout.count()) +
                        " ms; its stderr: " + readWhole(errPath));
  }
  return CommandOutput{*exit, readWhole(outPath), readWhole(errPath)};
}

Result<YAML::Node> normalizedComposeProject(const std::string& composeFile) {
  return normalizedComposeProject(std::vector<std::string>{composeFile});
}

Result<YAML::Node> normalizedComposeProject(const std::vector<std::string>& composeFiles,
                                            const std::vector<std::string>& environment) {
  auto compose = findOnPath("docker-compose");
  if (!compose.ok()) {
    return Error::fatal(compose.error().message +
                        ": install Debian's package docker-compose (the compose tool alone, no "
                        "daemon; scripts/install-deps.sh installs it)");
  }
  TempDir home("compose-file-test-home");
  const std::string emptyEnvFile = home.path() + "/empty.env";
  std::ofstream(emptyEnvFile).close();
  const char* path = std::getenv("PATH");
  std::vector<std::string> argv{compose.value()};
  std::string command = "docker-compose";
  for (const std::string& file : composeFiles) {
    argv.insert(argv.end(), {"-f", file});
    command += " -f " + file;
  }
  argv.insert(argv.end(), {"--env-file", emptyEnvFile, "config"});
  command += " config";
  std::vector<std::string> env{std::string("PATH=") + (path != nullptr ? path : ""),
                               "HOME=" + home.path()};
  env.insert(env.end(), environment.begin(), environment.end());
  auto run = runWithEnvironment(argv, env, kCommandTimeout);
  if (!run.ok()) return run.error();
  if (!run.value().exit.exited() || run.value().exit.exitCode != 0) {
    return Error::fatal(command + " ended with " + run.value().exit.describe() + ": " +
                        trim(run.value().err));
  }
  if (!trim(run.value().err).empty()) {
    return Error::fatal(command + " warned: " + trim(run.value().err));
  }
  YAML::Node project;
  try {
    project = YAML::Load(run.value().out);
  } catch (const YAML::Exception& error) {
    return Error::fatal(command + " printed no YAML document: " + error.what());
  }
  if (!project.IsMap() || !project["services"] || !project["services"].IsMap()) {
    return Error::fatal(command + " printed no project with services: " + run.value().out);
  }
  return project;
}

std::string serviceProgram(const YAML::Node& service) {
  for (const char* key : {"entrypoint", "command"}) {
    const YAML::Node node = service[key];
    if (!node) continue;
    if (node.IsSequence() && node.size() > 0) return scalar(node[0]);
    if (node.IsScalar()) {
      const auto first = words(node.Scalar());
      if (!first.empty()) return first.front();
    }
  }
  return "";
}

std::vector<std::string> serviceCommandLine(const YAML::Node& service) {
  std::vector<std::string> line;
  for (const char* key : {"entrypoint", "command"}) {
    const YAML::Node node = service[key];
    if (node && node.IsSequence()) {
      for (const auto& word : node) line.push_back(scalar(word));
    } else if (node && node.IsScalar()) {
      for (auto& word : words(node.Scalar())) line.push_back(std::move(word));
    }
  }
  return line;
}

SecretFiles secretHostFiles(const YAML::Node& project, const std::string& secretsDir) {
  SecretFiles files;
  const YAML::Node declared = project["secrets"];
  if (!declared || !declared.IsMap()) return files;
  for (const auto& entry : declared) {
    const std::string file = scalar(entry.second["file"]);
    if (file.empty()) continue;
    files[entry.first.Scalar()] =
        (std::filesystem::path(secretsDir) / std::filesystem::path(file).filename()).string();
  }
  return files;
}

Problems checkTopology(const YAML::Node& project) {
  Problems problems;
  std::vector<std::string> expected = kZooKeepers;
  expected.insert(expected.end(), kMasters.begin(), kMasters.end());
  expected.insert(expected.end(), {kWorker, kRegentctl});
  const YAML::Node services = project["services"];
  std::vector<std::string> present;
  for (const auto& entry : services) present.push_back(entry.first.Scalar());
  for (const auto& name : expected) {
    if (!contains(present, name)) problems.push_back("service " + name + ": missing");
  }
  for (const auto& name : present) {
    if (!contains(expected, name)) {
      problems.push_back("service " + name + ": not part of the topology (" + listed(expected) +
                         ")");
    }
  }

  std::map<std::string, std::string> programs{{kWorker, "regent-worker"},
                                              {kRegentctl, "regentctl"}};
  for (const auto& master : kMasters) programs[master] = "regent-master";
  for (const auto& [name, program] : programs) {
    const YAML::Node service = services[name];
    if (service && serviceProgram(service) != program) {
      problems.push_back("service " + name + ": entrypoint/command runs \"" +
                         serviceProgram(service) + "\", expected " + program);
    }
  }

  if (const YAML::Node worker = services[kWorker]) {
    const YAML::Node scale = worker["scale"] ? worker["scale"] : worker["deploy"]["replicas"];
    if (scalar(scale) != "2") {
      problems.push_back("service worker: scale is " +
                         (scale ? "\"" + scalar(scale) + "\"" : std::string("not set")) +
                         ", expected 2 (two workers)");
    }
  }
  for (const auto& name : present) {
    const auto profiles = namesUnder(services[name], "profiles");
    if (name == kRegentctl && profiles.empty()) {
      problems.push_back(
          "service regentctl: profiles is empty; it must be in a profile (such as tools) so "
          "that `docker-compose up` does not start it");
    } else if (name != kRegentctl && !profiles.empty()) {
      problems.push_back("service " + name + ": profiles " + listed(profiles) +
                         ": `docker-compose up` would not start it");
    }
  }

  const YAML::Node networks = project["networks"];
  std::vector<std::string> declared;
  if (networks && networks.IsMap()) {
    for (const auto& entry : networks) declared.push_back(entry.first.Scalar());
  }
  if (declared.size() != 1) {
    problems.push_back("networks: " + std::to_string(declared.size()) + " declared (" +
                       listed(declared) + "), expected exactly one that every service is on");
    return problems;
  }
  const std::string network = declared.front();
  const YAML::Node external = networks[network]["external"];
  if (external && !(external.IsScalar() && external.Scalar() == "false")) {
    problems.push_back("networks." + network + ": external, expected one this file defines");
  }
  for (const auto& name : present) {
    const YAML::Node service = services[name];
    if (service["network_mode"]) {
      problems.push_back("service " + name + ": network_mode is " +
                         scalar(service["network_mode"]) + ", expected the network " + network);
    }
    const auto on = namesUnder(service, "networks");
    if (on != std::vector<std::string>{network}) {
      problems.push_back("service " + name + ": networks " + listed(on) + ", expected only " +
                         network);
    }
  }
  return problems;
}

Problems checkZooKeeperEnsemble(const YAML::Node& project) {
  Problems problems;
  std::map<std::string, int> ids;  // Service -> its ZOO_MY_ID.
  std::map<int, std::string> owners;
  std::string servers;
  std::string serversFrom;
  for (const auto& name : kZooKeepers) {
    const YAML::Node service = serviceNamed(project, name);
    if (!service) continue;  // checkTopology reports it.
    auto environment = environmentOf(service);
    const std::string id = environment["ZOO_MY_ID"];
    const bool number = !id.empty() && id.size() <= 3 &&
                        std::all_of(id.begin(), id.end(), [](char c) { return std::isdigit(c); });
    if (!number || std::stoi(id) < 1 || std::stoi(id) > 255) {
      problems.push_back("service " + name + ": environment ZOO_MY_ID is \"" + id +
                         "\", expected a number from 1 to 255");
    } else if (owners.contains(std::stoi(id))) {
      problems.push_back("service " + name + ": environment ZOO_MY_ID " + id + " is also " +
                         owners[std::stoi(id)] + "'s; every server needs its own");
    } else {
      ids[name] = std::stoi(id);
      owners[std::stoi(id)] = name;
    }
    const std::string ensemble = environment["ZOO_SERVERS"];
    if (serversFrom.empty()) {
      servers = ensemble;
      serversFrom = name;
    } else if (words(ensemble) != words(servers)) {
      problems.push_back("service " + name + ": environment ZOO_SERVERS \"" + ensemble +
                         "\" differs from " + serversFrom + "'s \"" + servers + "\"");
    }
  }
  if (!serversFrom.empty()) {
    const std::string field =
        "service " + serversFrom + ": environment ZOO_SERVERS \"" + servers + "\"";
    std::map<std::string, std::string> named;  // Host -> id as written.
    for (const auto& server : words(servers)) {
      const auto equals = server.find('=');
      std::string host = equals == std::string::npos ? "" : server.substr(equals + 1);
      host = host.substr(0, host.find(':'));
      if (host.empty() || !contains(kZooKeepers, host)) {
        problems.push_back(field + " names \"" + server +
                           "\", expected id=host of a ZooKeeper service (" + listed(kZooKeepers) +
                           ")");
        continue;
      }
      named[host] = server.substr(0, equals);
    }
    for (const auto& name : kZooKeepers) {
      if (!named.contains(name)) {
        problems.push_back(field + " does not name " + name);
      } else if (ids.contains(name) && named[name] != std::to_string(ids[name])) {
        problems.push_back(field + " gives " + name + " the id " + named[name] + ", but " + name +
                           "'s ZOO_MY_ID is " + std::to_string(ids[name]));
      }
    }
  }

  auto expected = split(kQuorum, ',');
  std::sort(expected.begin(), expected.end());
  for (const auto& entry : project["services"]) {
    const std::string name = entry.first.Scalar();
    auto environment = environmentOf(entry.second);
    if (!setsRegentVariables(environment)) continue;
    if (!environment.contains("REGENT_HA_ZOOKEEPER_QUORUM")) {
      problems.push_back("service " + name +
                         ": environment REGENT_HA_ZOOKEEPER_QUORUM is not set, expected " +
                         kQuorum);
      continue;
    }
    auto quorum = split(environment["REGENT_HA_ZOOKEEPER_QUORUM"], ',');
    std::sort(quorum.begin(), quorum.end());
    if (quorum != expected) {
      problems.push_back("service " + name + ": environment REGENT_HA_ZOOKEEPER_QUORUM is \"" +
                         environment["REGENT_HA_ZOOKEEPER_QUORUM"] + "\", expected " + kQuorum +
                         " (every ZooKeeper service once, on port 2181)");
    }
  }
  return problems;
}

Problems checkDependencies(const YAML::Node& project) {
  Problems problems;
  auto requireHealthy = [&](const std::string& name, const std::vector<std::string>& needed) {
    const YAML::Node service = serviceNamed(project, name);
    if (!service) return;  // checkTopology reports it.
    const YAML::Node dependsOn = service["depends_on"];
    const auto listedDependencies = namesUnder(service, "depends_on");
    for (const auto& dependency : needed) {
      if (!contains(listedDependencies, dependency)) {
        problems.push_back("service " + name + ": depends_on lacks " + dependency +
                           " (condition service_healthy)");
        continue;
      }
      // The sequence form means condition service_started.
      const std::string condition =
          dependsOn.IsMap() ? scalar(dependsOn[dependency]["condition"]) : "service_started";
      if (condition != "service_healthy") {
        problems.push_back("service " + name + ": depends_on " + dependency + " has condition " +
                           (condition.empty() ? "none" : condition) + ", expected service_healthy");
      }
    }
  };
  for (const auto& master : kMasters) requireHealthy(master, kZooKeepers);
  requireHealthy(kWorker, kMasters);
  return problems;
}

Problems checkPorts(const YAML::Node& project) {
  Problems problems;
  const std::string published = kMasters.front();
  for (const auto& entry : project["services"]) {
    const std::string name = entry.first.Scalar();
    const YAML::Node ports = entry.second["ports"];
    const size_t count = ports && ports.IsSequence() ? ports.size() : 0;
    std::vector<std::string> written;
    for (size_t i = 0; i < count; ++i) {
      written.push_back(ports[i].IsMap() ? YAML::Dump(ports[i]) : scalar(ports[i]));
    }
    if (name != published) {
      if (count > 0) {
        problems.push_back("service " + name + ": ports " + listed(written) + "; only " +
                           published + " publishes a port");
      }
      continue;
    }
    if (count != 1) {
      problems.push_back("service " + name + ": ports " + listed(written) +
                         ", expected exactly one (its HTTP port, on 127.0.0.1)");
    }
    for (size_t i = 0; i < count; ++i) {
      const std::string host = portHostAddress(ports[i]);
      if (host != "127.0.0.1") {
        problems.push_back("service " + name + ": port \"" + written[i] + "\" is bound to " +
                           (host.empty() ? "every interface" : host) + ", expected 127.0.0.1");
      }
    }
  }
  return problems;
}

Problems checkSecrets(const YAML::Node& project, const std::string& secretsDir,
                      const std::vector<std::string>& secretNames) {
  Problems problems;
  const YAML::Node declared = project["secrets"];
  const std::filesystem::path dir = std::filesystem::path(secretsDir).lexically_normal();
  std::vector<std::string> expectedFiles;
  for (const auto& secret : secretNames) expectedFiles.push_back((dir / secret).string());
  if (declared && declared.IsMap()) {
    for (const auto& entry : declared) {
      const std::string name = entry.first.Scalar();
      const std::string file = scalar(entry.second["file"]);
      const std::string normal = std::filesystem::path(file).lexically_normal().string();
      if (file.empty() || !contains(expectedFiles, normal)) {
        problems.push_back("secrets." + name + ": file is " +
                           (file.empty() ? std::string("not set") : "\"" + file + "\"") +
                           ", expected one docker/make-secrets.sh writes (" +
                           listed(expectedFiles) + ")");
      }
    }
  }

  // Where the secret file variable of a service must point: a secret it mounts and the file
  // declares.
  auto requireMountedSecret = [&](const std::string& name, const YAML::Node& service,
                                  std::map<std::string, std::string>& environment,
                                  const std::string& variable) {
    if (!environment.contains(variable)) {
      problems.push_back("service " + name + ": environment " + variable + " is not set");
      return;
    }
    const std::string path = environment[variable];
    auto mounted = mountedSecrets(service);
    if (!path.starts_with(kSecretsMount)) {
      problems.push_back("service " + name + ": environment " + variable + " is \"" + path +
                         "\", expected " + kSecretsMount + "<secret>");
    } else if (!mounted.contains(path)) {
      problems.push_back("service " + name + ": environment " + variable + " is \"" + path +
                         "\", but the service mounts no secret there (secrets: " +
                         listed(namesUnder(service, "secrets")) + ")");
    } else if (!declared || !declared[mounted[path]]) {
      problems.push_back("service " + name + ": secret " + mounted[path] +
                         " is not declared under the file's secrets");
    }
  };

  for (const auto& entry : project["services"]) {
    const std::string name = entry.first.Scalar();
    auto environment = environmentOf(entry.second);
    if (environment.contains("REGENT_RPC_AUTH") && environment["REGENT_RPC_AUTH"] == "none") {
      problems.push_back("service " + name +
                         ": environment REGENT_RPC_AUTH is none: RPC without authentication");
    }
    if (contains(kMasters, name)) {
      if (environment["REGENT_RPC_AUTH"] != "required") {
        problems.push_back("service " + name + ": environment REGENT_RPC_AUTH is \"" +
                           environment["REGENT_RPC_AUTH"] + "\", expected required");
      }
      for (const char* role : {"ADMIN", "READER", "WORKER"}) {
        requireMountedSecret(name, entry.second, environment,
                             std::string("REGENT_RPC_AUTH_SECRET_") + role + "_FILE");
      }
    } else if (name == kWorker || name == kRegentctl) {
      const std::string role = name == kWorker ? "worker" : "admin";
      if (environment["REGENT_RPC_CREDENTIAL_ROLE"] != role) {
        problems.push_back("service " + name + ": environment REGENT_RPC_CREDENTIAL_ROLE is \"" +
                           environment["REGENT_RPC_CREDENTIAL_ROLE"] + "\", expected " + role);
      }
      requireMountedSecret(name, entry.second, environment, "REGENT_RPC_CREDENTIAL_SECRET_FILE");
    }
  }
  return problems;
}

Problems checkPrivileges(const YAML::Node& project) {
  Problems problems;
  std::vector<std::string> workerCapabilities = kWorkerCapabilities;
  std::sort(workerCapabilities.begin(), workerCapabilities.end());
  for (const auto& entry : project["services"]) {
    const std::string name = entry.first.Scalar();
    const YAML::Node service = entry.second;
    auto capabilities = [&](const std::string& key) {
      std::vector<std::string> names;
      for (const auto& written : namesUnder(service, key)) names.push_back(capabilityName(written));
      std::sort(names.begin(), names.end());
      return names;
    };
    const auto dropped = capabilities("cap_drop");
    if (!contains(dropped, "ALL")) {
      problems.push_back("service " + name + ": cap_drop is " + listed(dropped) +
                         ", expected ALL (every capability dropped)");
    }
    const auto options = namesUnder(service, "security_opt");
    const bool noNewPrivileges = std::any_of(options.begin(), options.end(), [](const auto& o) {
      return o == "no-new-privileges" || o == "no-new-privileges:true" ||
             o == "no-new-privileges=true";
    });
    if (!noNewPrivileges) {
      problems.push_back("service " + name + ": security_opt is " + listed(options) +
                         ", expected no-new-privileges:true (no setuid program regains "
                         "privileges)");
    }
    if (scalar(service["privileged"]) == "true") {
      problems.push_back("service " + name + ": privileged is true");
    }
    const auto added = capabilities("cap_add");
    const std::string user = scalar(service["user"]);
    if (name == kWorker) {
      if (added != workerCapabilities) {
        problems.push_back("service worker: cap_add is " + listed(added) + ", expected exactly " +
                           listed(workerCapabilities) +
                           " (what it needs to run its tasks as nobody)");
      }
      const std::string account = user.substr(0, user.find(':'));
      if (account != "root" && account != "0") {
        problems.push_back("service worker: user is " +
                           (user.empty() ? std::string("not set") : "\"" + user + "\"") +
                           ", expected root (so that its tasks run as another user, nobody)");
      }
      continue;
    }
    if (!added.empty()) {
      problems.push_back("service " + name + ": cap_add is " + listed(added) +
                         "; only worker adds capabilities");
    }
    if (!user.empty()) {
      problems.push_back("service " + name + ": user is \"" + user +
                         "\"; only worker sets user (the others run as their image's user)");
    }
  }
  return problems;
}

Problems checkZooKeeperCredentials(const YAML::Node& project, const SecretFiles& secretFiles) {
  Problems problems;
  // The secret file's options, or a problem naming the service, the secret and the file.
  auto secretValues =
      [&](const std::string& name,
          const std::string& secret) -> std::optional<std::map<std::string, std::string>> {
    const auto file = secretFiles.find(secret);
    if (file == secretFiles.end()) {
      problems.push_back("service " + name + ": secret " + secret +
                         " is not declared under the file's secrets");
      return std::nullopt;
    }
    auto values = configFileValues(file->second);
    if (!values.ok()) {
      problems.push_back("service " + name + ": secret " + secret + ": " + values.error().message);
      return std::nullopt;
    }
    return std::move(values).value();
  };

  struct Credentials {
    std::string secret;
    std::string write;
    std::string read;
  };
  std::map<std::string, Credentials> masters;  // Service -> what its --config sets.
  std::map<std::string, Credentials> clients;  // worker and regentctl.
  for (const auto& entry : project["services"]) {
    const std::string name = entry.first.Scalar();
    const YAML::Node service = entry.second;
    auto environment = environmentOf(service);
    for (const auto& variable : kCredentialVariables) {
      if (environment.contains(variable)) {
        problems.push_back("service " + name + ": environment " + variable +
                           " sets a ZooKeeper credential, which `docker inspect` shows; it "
                           "belongs in a config file mounted as a secret");
      }
    }
    auto commandLine = serviceCommandLine(service);
    const std::vector<std::string> args(commandLine.begin() + (commandLine.empty() ? 0 : 1),
                                        commandLine.end());
    for (const auto& assignment : optionValues(args, "--set")) {
      const std::string key = trim(assignment.substr(0, assignment.find('=')));
      if (key == kWriteAuthKey || key == kReadAuthKey) {
        problems.push_back("service " + name + ": entrypoint/command sets " + key +
                           " with --set, which `docker inspect` shows; it belongs in a config "
                           "file mounted as a secret");
      }
    }

    const bool master = contains(kMasters, name);
    if (!master && name != kWorker && name != kRegentctl) continue;
    const auto mounted = mountedSecrets(service);
    if (!master) {
      // Whatever a client mounts, it can read: the write credential must not be among it.
      for (const auto& [path, secret] : mounted) {
        if (!secretFiles.contains(secret)) continue;  // checkSecrets reports it.
        auto values = configFileValues(secretFiles.at(secret));
        if (values.ok() && !values.value()[kWriteAuthKey].empty()) {
          problems.push_back("service " + name + ": secrets mounts " + secret +
                             ", whose file sets ha.zookeeper.auth, the masters' write credential");
        }
      }
    }
    const auto configs = optionValues(args, "--config");
    const std::string expected = std::string(master ? "ha.zookeeper.auth and " : "") + kReadAuthKey;
    if (configs.size() != 1) {
      problems.push_back("service " + name + ": entrypoint/command has " +
                         (configs.empty() ? std::string("no --config")
                                          : std::to_string(configs.size()) + " --config options") +
                         ", expected one --config " + kSecretsMount + "<secret> setting " +
                         expected);
      continue;
    }
    const std::string& path = configs.front();
    if (!path.starts_with(kSecretsMount)) {
      problems.push_back("service " + name + ": --config is \"" + path + "\", expected " +
                         kSecretsMount + "<secret> setting " + expected);
      continue;
    }
    if (!mounted.contains(path)) {
      problems.push_back("service " + name + ": --config is \"" + path +
                         "\", but the service mounts no secret there (secrets: " +
                         listed(namesUnder(service, "secrets")) + ")");
      continue;
    }
    const std::string secret = mounted.at(path);
    auto values = secretValues(name, secret);
    if (!values) continue;
    const std::string what = "service " + name + ": --config " + path + " (secret " + secret + ")";
    Credentials credentials{secret, (*values)[kWriteAuthKey], (*values)[kReadAuthKey]};
    if (credentials.read.empty()) {
      problems.push_back(what + " does not set " + kReadAuthKey);
    }
    if (master && credentials.write.empty()) {
      problems.push_back(what + " does not set " + kWriteAuthKey);
    }
    if (!master && !credentials.write.empty()) {
      problems.push_back(what + " sets " + kWriteAuthKey +
                         ", the masters' write credential; expected " + kReadAuthKey + " alone");
    }
    (master ? masters : clients)[name] = std::move(credentials);
  }

  // Every master the same identity, and every client the read credential the masters grant.
  if (masters.empty()) return problems;
  const auto& [first, reference] = *masters.begin();
  for (const auto& [name, credentials] : masters) {
    if (!credentials.write.empty() && !reference.write.empty() &&
        credentials.write != reference.write) {
      problems.push_back("service " + name + ": " + kWriteAuthKey + " in secret " +
                         credentials.secret + " differs from " + first + "'s (secret " +
                         reference.secret + ")");
    }
    if (!credentials.read.empty() && !reference.read.empty() &&
        credentials.read != reference.read) {
      problems.push_back("service " + name + ": " + kReadAuthKey + " in secret " +
                         credentials.secret + " differs from " + first + "'s (secret " +
                         reference.secret + ")");
    }
  }
  for (const auto& [name, credentials] : clients) {
    if (!credentials.read.empty() && !reference.read.empty() &&
        credentials.read != reference.read) {
      problems.push_back("service " + name + ": " + kReadAuthKey + " in secret " +
                         credentials.secret + " differs from the masters' (" + first +
                         "'s secret " + reference.secret + "): ZooKeeper would refuse it reads");
    }
  }
  return problems;
}

Problems checkRegentEnvironment(const YAML::Node& project, const std::string& binDir,
                                const SecretFiles& secretFiles) {
  Problems problems;
  const std::map<std::string, std::string> checker{{"regent-master", "regent-master"},
                                                   {"regent-worker", "regent-worker"},
                                                   {"regentctl", "regent-worker"}};
  // The passwords of every ZooKeeper credential in the secret files: --print-config must mask
  // them.
  std::map<std::string, std::string> passwords;  // Password -> "<key> of secret <name>".
  for (const auto& [secret, file] : secretFiles) {
    auto values = configFileValues(file);
    if (!values.ok()) continue;  // Not a config file (an RPC secret).
    for (const char* key : {kWriteAuthKey, kReadAuthKey}) {
      const std::string password = passwordOf(values.value()[key]);
      if (!password.empty()) passwords[password] = std::string(key) + " of secret " + secret;
    }
  }

  for (const auto& entry : project["services"]) {
    const std::string name = entry.first.Scalar();
    const auto environment = environmentOf(entry.second);
    if (!setsRegentVariables(environment)) continue;
    const std::string program = serviceProgram(entry.second);
    const auto found = checker.find(program);
    if (found == checker.end()) {
      problems.push_back("service " + name + ": sets REGENT_* variables but runs \"" + program +
                         "\", not regent-master, regent-worker or regentctl");
      continue;
    }
    const auto commandLine = serviceCommandLine(entry.second);
    std::vector<std::string> args(commandLine.begin() + 1, commandLine.end());
    if (program == "regentctl") {
      std::vector<std::string> configuring;
      for (const char* option : {"--config", "--set"}) {
        for (const auto& value : optionValues(args, option)) {
          configuring.insert(configuring.end(), {option, value});
        }
      }
      args = std::move(configuring);
    }
    // Secret paths become the secret's file on this host.
    const auto mounted = mountedSecrets(entry.second);
    std::string unmounted;
    for (std::string& arg : args) {
      const auto at = arg.find(kSecretsMount);
      if (at != 0 && !(arg.starts_with("--") && at != std::string::npos && arg[at - 1] == '=')) {
        continue;
      }
      const std::string path = arg.substr(at);
      const auto secret = mounted.find(path);
      if (secret == mounted.end() || !secretFiles.contains(secret->second)) {
        unmounted = path;
        break;
      }
      arg = arg.substr(0, at) + secretFiles.at(secret->second);
    }
    const auto configs = optionValues(args, "--config");
    const std::string configFile = configs.empty() ? "" : configs.back();
    const std::string what = "service " + name + ": " + found->second +
                             (args.empty() ? "" : " " + join(args, " ")) +
                             " --print-config with the service's environment";
    if (!unmounted.empty()) {
      problems.push_back("service " + name + ": entrypoint/command names " + unmounted +
                         ", which is no secret the service mounts");
      continue;
    }
    std::vector<std::string> variables;
    for (const auto& [variable, value] : environment) variables.push_back(variable + "=" + value);
    std::vector<std::string> argv{binDir + "/" + found->second};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--print-config");
    auto run = runWithEnvironment(argv, variables, kCommandTimeout);
    if (!run.ok()) {
      problems.push_back(what + " did not run: " + run.error().message);
      continue;
    }
    if (!run.value().exit.exited() || run.value().exit.exitCode != 0) {
      problems.push_back(what + " ended with " + run.value().exit.describe() + ": " +
                         trim(run.value().err));
      continue;
    }
    for (const auto& [password, whose] : passwords) {
      if (run.value().out.find(password) != std::string::npos ||
          run.value().err.find(password) != std::string::npos) {
        problems.push_back(what + " printed the password of " + whose);
      }
    }
    const auto printed = printedConfig(run.value().out);
    if (configFile.empty()) {
      problems.push_back(what +
                         ": no --config, so the ZooKeeper credentials come from no config "
                         "file");
      continue;
    }
    const std::string fromFile = "file " + configFile;
    auto expectSource = [&](const std::string& key, const std::string& source) {
      const auto line = printed.find(key);
      if (line == printed.end()) {
        problems.push_back(what + " printed no " + key);
      } else if (line->second.second != source) {
        problems.push_back(what + " shows " + key + " with source " + line->second.second +
                           ", expected " + source);
      } else if (source != "default" && !line->second.first.ends_with(":****")) {
        problems.push_back(what + " shows " + key + " as \"" + line->second.first +
                           "\", expected it masked as user:****");
      }
    };
    const bool master = program == "regent-master";
    expectSource(kWriteAuthKey, master ? fromFile : "default");
    expectSource(kReadAuthKey, fromFile);
  }
  return problems;
}

Problems checkDockerfile(const std::string& name, const std::string& text) {
  Problems problems;
  auto all = instructions(text);
  // The final stage: what follows the last FROM.
  auto stage = all.begin();
  for (auto it = all.begin(); it != all.end(); ++it) {
    if (it->first == "FROM") stage = it;
  }
  bool healthcheck = false;
  std::string user;
  for (auto it = stage; it != all.end(); ++it) {
    if (it->first == "HEALTHCHECK") healthcheck = upper(it->second) != "NONE";
    if (it->first == "USER") user = it->second;
  }
  if (!healthcheck) problems.push_back(name + ": no HEALTHCHECK in its final stage");
  const std::string account = user.substr(0, user.find(':'));
  if (account.empty()) {
    problems.push_back(name + ": no USER in its final stage: the image runs as root");
  } else if (account == "root" || account == "0") {
    problems.push_back(name + ": USER " + user + " is root");
  }
  return problems;
}

std::vector<std::string> contextSources(const std::string& dockerfileText) {
  std::vector<std::string> sources;
  for (const auto& [instruction, arguments] : instructions(dockerfileText)) {
    if (instruction != "COPY" && instruction != "ADD") continue;
    std::vector<std::string> parts;
    std::string rest = arguments;
    // Flags come first, in either form.
    bool fromStage = false;
    while (rest.starts_with("--")) {
      const auto end = rest.find_first_of(" \t");
      fromStage = fromStage || rest.starts_with("--from");
      rest = end == std::string::npos ? "" : trim(rest.substr(end));
    }
    if (fromStage) continue;
    if (rest.starts_with("[")) {
      for (const auto& part : YAML::Load(rest)) parts.push_back(part.Scalar());
    } else {
      parts = words(rest);
    }
    if (!parts.empty()) parts.pop_back();  // The destination.
    for (const auto& part : parts) {
      if (part.find("://") == std::string::npos) sources.push_back(part);
    }
  }
  return sources;
}

Problems checkDockerignore(const std::map<std::string, std::string>& dockerfiles,
                           const std::string& dockerignore) {
  Problems problems;
  std::vector<std::string> rules;
  std::istringstream in(dockerignore);
  for (std::string line; std::getline(in, line);) {
    const std::string rule = trim(line);
    if (!rule.empty() && !rule.starts_with("#")) rules.push_back(rule);
  }
  if (rules.empty() || rules.front() != "*") {
    problems.push_back(".dockerignore: the first pattern is \"" +
                       (rules.empty() ? std::string() : rules.front()) +
                       "\", expected * (exclude everything, then include what the images copy)");
  }
  for (const auto& [name, text] : dockerfiles) {
    for (std::string source : contextSources(text)) {
      while (source.starts_with("./")) source.erase(0, 2);
      while (source.starts_with("/")) source.erase(0, 1);
      if (!includedByDockerignore(rules, source)) {
        problems.push_back(".dockerignore: leaves out " + source + ", which " + name +
                           " copies (add !" + source + ")");
      }
    }
  }
  return problems;
}

Problems checkShellSyntax(const std::string& path) {
  auto bash = findOnPath("bash");
  if (!bash.ok()) return {path + ": cannot check: " + bash.error().message};
  const char* searchPath = std::getenv("PATH");
  auto run =
      runWithEnvironment({bash.value(), "-n", path},
                         {std::string("PATH=") + (searchPath ? searchPath : "")}, kCommandTimeout);
  if (!run.ok()) return {path + ": bash -n did not run: " + run.error().message};
  if (!run.value().exit.exited() || run.value().exit.exitCode != 0) {
    return {path + ": bash -n ended with " + run.value().exit.describe() + ": " +
            trim(run.value().err)};
  }
  return {};
}

}  // namespace regent::testing

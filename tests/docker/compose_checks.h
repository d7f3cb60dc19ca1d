// The checks compose_file_itest runs on docker-compose.yml (as `docker-compose config` normalizes
// it) and on the images' build files, without a Docker daemon. Each check takes its input as a
// value, so the tests can feed it mutated copies and see that it objects. A check returns its
// problems, one sentence each naming the service (or file) and the field; none means it passed.
#pragma once

#include <yaml-cpp/yaml.h>

#include <map>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/time.h"
#include "tests/fixtures/process_harness.h"

namespace regent::testing {

using Problems = std::vector<std::string>;

// The problems one per line, or "" when there are none: what a test compares with "".
std::string describeProblems(const Problems& problems);

// The whole content of the file at `path`, byte for byte. Throws std::runtime_error naming the
// path when it cannot be opened.
std::string readWhole(const std::string& path);

// How a command run by runWithEnvironment ended, and what it printed.
struct CommandOutput {
  ProcessExit exit;
  std::string out;
  std::string err;
};

// The full path of `program` in the caller's PATH; an error naming the program and the PATH when
// it is not there.
Result<std::string> findOnPath(const std::string& program);

// Runs `argv` (argv[0] a full path) in a fresh temporary directory with exactly `environment`
// ("NAME=value"; nothing of the caller's environment), capturing stdout and stderr apart. Fails if
// it cannot start or has not ended after `timeout` (then it is killed).
Result<CommandOutput> runWithEnvironment(const std::vector<std::string>& argv,
                                         const std::vector<std::string>& environment,
                                         Duration timeout);

// `docker-compose -f composeFile config` with a controlled environment (the caller's PATH, an
// empty HOME and an empty --env-file; no COMPOSE_*, BASE_IMAGE, USER_ID or .env from outside),
// parsed. Fails naming the cause: docker-compose not on PATH, a non-zero exit with its message,
// a warning on stderr, or output that is not a YAML mapping with services.
Result<YAML::Node> normalizedComposeProject(const std::string& composeFile);
// The same for a file and the overrides after it (`-f base -f override ...`), with `environment`
// ("NAME=value") added to the compose tool's.
Result<YAML::Node> normalizedComposeProject(const std::vector<std::string>& composeFiles,
                                            const std::vector<std::string>& environment = {});

// The program a service runs: its entrypoint's first word, else its command's; "" when neither
// is set (the image's own).
std::string serviceProgram(const YAML::Node& service);

// The command line a service runs: its entrypoint's words, then its command's (each in sequence
// form, or a string split at whitespace); empty when neither is set.
std::vector<std::string> serviceCommandLine(const YAML::Node& service);

// Secret name -> the file on this host that holds it: `secretsDir`/<file name of the secret's
// `file`>, for every secret the project declares. The tests point `secretsDir` at what
// docker/make-secrets.sh wrote in a temporary directory, so the checks read real secret files
// without touching the repository's docker/secrets/.
using SecretFiles = std::map<std::string, std::string>;
SecretFiles secretHostFiles(const YAML::Node& project, const std::string& secretsDir);

// Services zk-1..3, master-1..3 (regent-master), worker (regent-worker, scale 2) and regentctl
// (entrypoint regentctl, in a profile, so `up` does not start it; every other service in none);
// exactly one network declared in the file, not external, and every service on it alone.
Problems checkTopology(const YAML::Node& project);

// zk-N: distinct ZOO_MY_IDs, one ZOO_SERVERS naming the three services with their ids; every
// service setting REGENT_* variables has REGENT_HA_ZOOKEEPER_QUORUM of exactly zk-1..3 on 2181.
Problems checkZooKeeperEnsemble(const YAML::Node& project);

// Every master depends on zk-1..3 and the worker on every master, each with condition
// service_healthy.
Problems checkDependencies(const YAML::Node& project);

// Only master-1 publishes a port, exactly one, bound to 127.0.0.1.
Problems checkPorts(const YAML::Node& project);

// No service has REGENT_RPC_AUTH=none; masters require authentication with the three
// REGENT_RPC_AUTH_SECRET_*_FILE variables, the worker and regentctl carry a credential (roles
// worker and admin); every secret file variable points at /run/secrets/<name> of a secret the
// service mounts; every secret the file declares comes from a file in `secretsDir` named in
// `secretNames` (what docker/make-secrets.sh writes).
Problems checkSecrets(const YAML::Node& project, const std::string& secretsDir,
                      const std::vector<std::string>& secretNames);

// Every service drops ALL capabilities (cap_drop), has security_opt no-new-privileges:true and
// is not privileged; only worker adds capabilities, exactly CHOWN, DAC_OVERRIDE, FOWNER, KILL,
// SETGID and SETUID (to run its tasks as another user), and only worker sets user, to root.
Problems checkPrivileges(const YAML::Node& project);

// The ZooKeeper credentials come from config files mounted as secrets: every master runs with
// `--config /run/secrets/<secret>` of a secret it mounts whose file (`secretFiles`) sets
// ha.zookeeper.auth and ha.zookeeper.read-auth, the same for every master; worker and regentctl
// run with the --config of a mounted secret whose file sets ha.zookeeper.read-auth, equal to the
// masters', and no ha.zookeeper.auth, and mount no secret whose file sets it. No service sets
// REGENT_HA_ZOOKEEPER_AUTH or REGENT_HA_ZOOKEEPER_READ_AUTH in its environment (`docker inspect`
// shows it) or either key with --set. A problem never quotes a credential.
Problems checkZooKeeperCredentials(const YAML::Node& project, const SecretFiles& secretFiles);

// Every service that sets REGENT_* variables runs its real command line through the binary:
// `<binDir>/<binary> ARGS --print-config`, ARGS its entrypoint's and command's arguments after
// the program, each /run/secrets/<path> the service mounts replaced by the host file of that
// secret (`secretFiles`; a path no mounted secret is at is a problem, and nothing runs), with
// exactly its environment. The binary must accept it (exit 0; a problem carries its message),
// show ha.zookeeper.auth (masters) and ha.zookeeper.read-auth (every regent service) with the
// source "file <its --config>" and masked ("user:****"), leave ha.zookeeper.auth at its default
// in worker and regentctl, and print no password of a credential in `secretFiles`.
// regent-master and regent-worker check their own services; regentctl has no --print-config
// and, once its configuration loads, goes on to reach ZooKeeper, so the regentctl service is
// checked by regent-worker, which loads the same option registry (conf/options.cc) the same
// way: of its arguments only --config and --set (with their values) are passed, as its own
// options and its subcommand are not regent-worker's.
Problems checkRegentEnvironment(const YAML::Node& project, const std::string& binDir,
                                const SecretFiles& secretFiles);

// A Dockerfile's final stage has a HEALTHCHECK (not NONE) and runs as a USER that is not root.
Problems checkDockerfile(const std::string& name, const std::string& text);

// The sources a Dockerfile copies from the build context (COPY and ADD without --from; URLs
// skipped), as written.
std::vector<std::string> contextSources(const std::string& dockerfileText);

// `.dockerignore` starts by excluding everything (`*`), and every file a Dockerfile in
// `dockerfiles` (name -> text) copies from the context is included again by a later `!` rule
// (the last matching rule wins, as docker applies them).
Problems checkDockerignore(const std::map<std::string, std::string>& dockerfiles,
                           const std::string& dockerignore);

// `bash -n` accepts the script at `path`.
Problems checkShellSyntax(const std::string& path);

}  // namespace regent::testing

// regentctl, the admin CLI: reads the same configuration sources as the processes and shows who
// leads a cluster (`leader`, `leader --watch`) and who contends (`masters`).
#include <CLI/CLI.hpp>
#include <kj/exception.h>
#include <spdlog/spdlog.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/cluster_inspector.h"
#include "common/event_loop.h"
#include "common/logging.h"
#include "conf/config.h"
#include "conf/logging_config.h"

namespace {

constexpr const char* kDescription =
    "regentctl: inspects a regent cluster through ZooKeeper.\n"
    "Exit codes: 0 done, 1 ZooKeeper unreachable or a read failed, 2 bad usage or "
    "configuration, 3 (leader) no master leads.";

}  // namespace

int main(int argc, char** argv) {
  using namespace regent;

  CLI::App app{kDescription, "regentctl"};
  ConfigSources sources;
  std::string configFile;
  std::string quorum;
  std::string clusterId;
  bool json = false;
  bool watch = false;
  app.add_option("--zk", quorum,
                 "ZooKeeper quorum host:port,... (ha.zookeeper.quorum; wins over --set)");
  app.add_option("--cluster-id", clusterId, "cluster to inspect (cluster-id; wins over --set)");
  app.add_option("--config", configFile, "YAML configuration file");
  app.add_option("--set", sources.set, "set an option, key=value (repeatable; later wins)")
      ->allow_extra_args(false);
  app.add_flag("--json", json, "print one JSON object per line");
  app.require_subcommand(1);
  app.fallthrough();  // Global options may also follow the command.
  CLI::App* leaderCommand = app.add_subcommand(
      "leader", "show the current leader (exit 3 if there is none)");
  leaderCommand->add_flag("--watch", watch,
                          "print one line per leader change, until SIGINT or SIGTERM");
  CLI::App* mastersCommand =
      app.add_subcommand("masters", "list every contending master in latch order, with its role");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? cli::kExitOk : cli::kExitUsage;
  }

  if (!configFile.empty()) sources.file = configFile;
  sources.environment = processEnvironment();
  if (!quorum.empty()) sources.set.push_back("ha.zookeeper.quorum=" + quorum);
  if (!clusterId.empty()) sources.set.push_back("cluster-id=" + clusterId);
  auto config = loadConfig(sources);
  if (!config.ok()) {
    std::cerr << "regentctl: " << config.error().message << "\n";
    return cli::kExitUsage;
  }
  // regentctl reports what matters on stdout/stderr itself (an unreachable quorum, a lost
  // connection, a failed read); the log only carries errors unless log.level is set.
  LogOptions logOptions = logOptionsFrom(config.value(), "regentctl");
  if (config.value().source("log.level").kind == ValueSource::Kind::kDefault) {
    logOptions.level = "error";
  }
  if (auto logging = setupLogging(logOptions); !logging.ok()) {
    std::cerr << "regentctl: " << logging.error().message << "\n";
    return cli::kExitUsage;
  }

  try {
    EventLoop loop;
    auto inspector =
        cli::ClusterInspector::create(loop, config.value(), {std::cout, std::cerr, json});
    if (!inspector.ok()) {
      std::cerr << "regentctl: " << inspector.error().message << "\n";
      return cli::kExitUsage;
    }
    cli::ClusterInspector& commands = *inspector.value();
    if (leaderCommand->parsed()) {
      return loop.run(watch ? commands.watchLeader() : commands.leader());
    }
    if (mastersCommand->parsed()) return loop.run(commands.masters());
  } catch (const kj::Exception& exception) {
    std::cerr << "regentctl: " << exception.getDescription().cStr() << "\n";
    return cli::kExitError;
  }
  return cli::kExitUsage;
}

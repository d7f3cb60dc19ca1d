// regent-master: reads the configuration, sets up logging and the event loop, and runs one
// MasterProcess until SIGTERM or SIGINT has handed leadership over.
#include <CLI/CLI.hpp>
#include <kj/exception.h>
#include <spdlog/spdlog.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "common/logging.h"
#include "conf/config.h"
#include "conf/logging_config.h"
#include "services/master/master_process.h"

namespace {

constexpr const char* kDescription =
    "regent-master: a regent master process.\n"
    "It takes part in leader election through ZooKeeper (or leads alone with "
    "ha.mode=standalone), and as leader recovers and serves the jobs (Dispatcher). It serves "
    "Cap'n Proto RPC on rpc.bind and HTTP (/healthz, /readyz, /v1/leader, /v1/jobs, /metrics) "
    "on http.bind, logs every leadership grant, revoke and hand-over with its epoch, and hands "
    "leadership over on SIGTERM or SIGINT (a second signal exits at once).";

}  // namespace

int main(int argc, char** argv) {
  using namespace regent;

  CLI::App app{kDescription, "regent-master"};
  ConfigSources sources;
  std::string configFile;
  bool printConfig = false;
  std::string logFormat;
  app.add_option("--config", configFile, "YAML configuration file");
  app.add_option("--set", sources.set, "set an option, key=value (repeatable; later wins)")
      ->allow_extra_args(false);
  app.add_flag("--print-config", printConfig,
               "print the effective configuration (value and source of every option) and exit");
  app.add_option("--log-format", logFormat, "text or json (overrides log.format)")
      ->check(CLI::IsMember({"text", "json"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : master::kExitUsage;
  }

  if (!configFile.empty()) sources.file = configFile;
  sources.environment = processEnvironment();
  if (!logFormat.empty()) sources.set.push_back("log.format=" + logFormat);
  auto config = loadConfig(sources);
  if (!config.ok()) {
    std::cerr << "regent-master: " << config.error().message << "\n";
    return master::kExitUsage;
  }
  if (printConfig) {
    std::cout << renderEffectiveConfig(config.value());
    return 0;
  }
  if (auto logging = setupLogging(logOptionsFrom(config.value(), "master")); !logging.ok()) {
    std::cerr << "regent-master: " << logging.error().message << "\n";
    return master::kExitUsage;
  }

  int code = master::kExitFailure;
  std::string masterId;
  try {
    EventLoop loop;
    auto process = master::MasterProcess::create(loop, config.value());
    if (!process.ok()) {
      spdlog::error("{}", process.error().message);
    } else {
      masterId = process.value()->masterId();
      code = loop.run(process.value()->run());
      loop.run(process.value()->close());
    }
  } catch (const kj::Exception& exception) {
    spdlog::error("master failed: {}", exception.getDescription().cStr());
    code = master::kExitFailure;
  }
  spdlog::info("master exiting master_id={} code={}", masterId.empty() ? "?" : masterId, code);
  spdlog::default_logger()->flush();
  return code;
}

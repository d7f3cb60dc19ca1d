// regent-master: reads the configuration, sets up logging and the event loop, and runs one
// MasterProcess until SIGTERM or SIGINT has handed leadership over.
#include <CLI/CLI.hpp>
#include <kj/exception.h>
#include <spdlog/spdlog.h>

#include <iostream>
#include <memory>
#include <string>
#include <variant>

#include "common/event_loop.h"
#include "conf/command_line.h"
#include "conf/config.h"
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
  ConfigCommandLine commandLine(app, "regent-master", {.printConfig = true, .logFormat = true});
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : master::kExitUsage;
  }

  auto loaded = commandLine.load(std::cout, std::cerr, master::kExitUsage);
  if (const int* exitCode = std::get_if<int>(&loaded)) return *exitCode;
  const Config& config = std::get<Config>(loaded);
  if (!commandLine.setUpLogging(config, "master", std::cerr)) return master::kExitUsage;

  int code = master::kExitFailure;
  std::string masterId;
  try {
    EventLoop loop;
    // Authentication is configuration: an unusable secret file, or an unsafe rpc.bind, is bad
    // configuration (exit 2) found before anything connects.
    auto auth = master::rpcAuthenticationFor(config);
    auto process = auth.ok() ? master::MasterProcess::create(loop, config, std::move(auth).value())
                             : Result<std::unique_ptr<master::MasterProcess>>(auth.error());
    if (!auth.ok()) {
      spdlog::error("{}", auth.error().message);
      code = master::kExitUsage;
    } else if (!process.ok()) {
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

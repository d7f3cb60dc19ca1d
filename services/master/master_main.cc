// regent-master: reads the configuration, sets up logging and the event loop, and runs one
// MasterProcess until a stop signal (SIGTERM, SIGINT, SIGQUIT) has handed leadership over. Every
// run that is not --help or --print-config ends with the "master exiting" line.
#include <CLI/CLI.hpp>
#include <kj/exception.h>
#include <spdlog/spdlog.h>

#include <iostream>
#include <memory>
#include <string>
#include <variant>

#include "common/event_line.h"
#include "common/event_loop.h"
#include "common/logging.h"
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
    "leadership over on SIGTERM, SIGINT or SIGQUIT (a second one exits at once); SIGHUP is "
    "ignored (no configuration reload).";

// The last line of every run: "master exiting master_id=<hex or ?> code=<code>".
int logExit(const std::string& masterId, int code) {
  spdlog::info("{}", regent::EventLine("master exiting")
                         .field("master_id", masterId.empty() ? "?" : masterId)
                         .field("code", code)
                         .str());
  spdlog::default_logger()->flush();
  return code;
}

// Ends a run refused before its logging was set up from the configuration (bad options): the
// error is on stderr already; the exiting line follows it in the format --log-format asked for
// (text when it was not given or did not parse).
int exitBeforeStart(const CLI::App& app, int code) {
  regent::LogOptions options;
  options.process = "master";
  const CLI::Option* format = app.get_option_no_throw("--log-format");
  if (format != nullptr && format->count() > 0 && format->results().back() == "json") {
    options.format = regent::LogFormat::kJson;
  }
  if (!regent::setupLogging(options).ok()) return code;
  return logExit("", code);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace regent;

  CLI::App app{kDescription, "regent-master"};
  ConfigCommandLine commandLine(app, "regent-master", {.printConfig = true, .logFormat = true});
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    // --help starts nothing, so it ends without an exiting line.
    if (app.exit(error) == 0) return 0;
    return exitBeforeStart(app, master::kExitUsage);
  }

  auto loaded = commandLine.load(std::cout, std::cerr, master::kExitUsage);
  if (const int* exitCode = std::get_if<int>(&loaded)) {
    // --print-config (0) starts nothing either.
    return *exitCode == 0 ? 0 : exitBeforeStart(app, *exitCode);
  }
  const Config& config = std::get<Config>(loaded);
  if (!commandLine.setUpLogging(config, "master", std::cerr)) {
    return exitBeforeStart(app, master::kExitUsage);
  }

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
  return logExit(masterId, code);
}

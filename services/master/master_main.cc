// regent-master: reads the configuration, sets up logging and the event loop, and runs one
// MasterProcess until a stop signal (SIGTERM, SIGINT, SIGQUIT) has handed leadership over. Every
// run that is not --help or --print-config ends with the "master exiting" line.
#include <kj/exception.h>
#include <spdlog/spdlog.h>

#include <iostream>
#include <memory>
#include <string>
#include <variant>

#include "common/event_loop.h"
#include "common/stop_signals.h"
#include "conf/config.h"
#include "services/master/master_process.h"
#include "services/process/process_main.h"

namespace {

constexpr const char* kDescription =
    "regent-master: a regent master process.\n"
    "It takes part in leader election through ZooKeeper (or leads alone with "
    "ha.mode=standalone), and as leader recovers and serves the jobs (Dispatcher). It serves "
    "Cap'n Proto RPC on rpc.bind and HTTP (/healthz, /readyz, /v1/leader, /v1/jobs, /metrics) "
    "on http.bind, logs every leadership grant, revoke and hand-over with its epoch, and hands "
    "leadership over on SIGTERM, SIGINT or SIGQUIT (a second one exits at once); SIGHUP is "
    "ignored (no configuration reload).";

}  // namespace

int main(int argc, char** argv) {
  using namespace regent;
  // Until MasterProcess watches them, a stop signal waits rather than killing the master.
  holdStopSignals();

  ProcessMain processMain(
      kDescription, Program::kMaster,
      {.program = "regent-master", .idField = "master_id", .usageExitCode = master::kExitUsage});
  auto started = processMain.start(argc, argv);
  if (const int* exitCode = std::get_if<int>(&started)) return *exitCode;
  const Config& config = std::get<Config>(started);

  int code = master::kExitFailure;
  std::string masterId;
  try {
    EventLoop loop;
    // Authentication is configuration: an unusable secret file, or an unsafe rpc.bind, is bad
    // configuration (exit 2) found before anything connects.
    auto auth = master::rpcAuthenticationFor(config);
    auto process = auth.ok() ? master::MasterProcess::create(loop, config, processMain.events(),
                                                             std::move(auth).value(),
                                                             processMain.descriptorLimit())
                             : Result<kj::Own<master::MasterProcess>>(auth.error());
    if (!auth.ok()) {
      spdlog::error("{}", auth.error().message);
      code = master::kExitUsage;
    } else if (!process.ok()) {
      spdlog::error("{}", process.error().message);
    } else {
      masterId = process.value()->masterId();
      http::addEventsFileMetrics(process.value()->metrics(), processMain.eventsFile());
      code = loop.run(process.value()->run());
      loop.run(process.value()->close());
    }
  } catch (const kj::Exception& exception) {
    spdlog::error("master failed: {}", exception.getDescription().cStr());
    code = master::kExitFailure;
  }
  return processMain.exit(masterId, code);
}

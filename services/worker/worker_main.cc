// regent-worker: reads the configuration, sets up logging, opens the data directory (its resource
// id and lock) before the event loop runs, and runs one WorkerProcess until a stop signal (SIGTERM,
// SIGINT, SIGQUIT) has disconnected it. Every run that is not --help or --print-config ends with
// the "worker exiting" line.
#include <kj/exception.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <iostream>
#include <memory>
#include <string>
#include <variant>

#include "common/event_loop.h"
#include "common/event_sink.h"
#include "common/stop_signals.h"
#include "common/time.h"
#include "conf/config.h"
#include "services/process/process_main.h"
#include "services/worker/worker_data_dir.h"
#include "services/worker/worker_process.h"

namespace {

constexpr const char* kDescription =
    "regent-worker: a regent worker (TaskExecutor).\n"
    "It offers worker.slots slots of worker.slot-cpu cores and worker.slot-memory each, finds the "
    "leading master through ZooKeeper (or the one master of ha.mode=standalone), registers with "
    "its ResourceManager, reports its slots and answers heartbeats, and registers again with "
    "every new leader. It offers the slots allocated to a job to the job's JobMaster and runs the "
    "subtask attempts it is given as child processes (as worker.task-user when root), their "
    "output under worker.data-dir. Its resource id lives in worker.data-dir. It serves HTTP "
    "(/healthz, /readyz, /metrics, /v1/attempts/<id>/stdout|stderr) on worker.http.bind, and "
    "kills its tasks, disconnects and exits on SIGTERM, SIGINT or SIGQUIT (a second one exits at "
    "once); SIGHUP is ignored (no configuration reload).";

}  // namespace

int main(int argc, char** argv) {
  using namespace regent;
  // Until WorkerProcess watches them, a stop signal waits rather than killing the worker.
  holdStopSignals();

  ProcessMain processMain(kDescription, Program::kWorker,
                          {.program = "regent-worker",
                           .idField = "resource_id",
                           .clockFields = true,
                           .usageExitCode = worker::kExitUsage});
  auto started = processMain.start(argc, argv);
  if (const int* exitCode = std::get_if<int>(&started)) return *exitCode;
  const Config& config = std::get<Config>(started);

  // Configuration the worker alone checks, before anything is created: exit 2 naming the option.
  auto profile = worker::slotProfileFrom(config);
  auto credential = worker::workerCredentialFrom(config);
  // The task user reads the user database: here, before the loop runs.
  auto taskUser = worker::taskUserFrom(config);
  if (!profile.ok() || !credential.ok() || !taskUser.ok()) {
    spdlog::error("{}", !profile.ok()      ? profile.error().message
                        : !credential.ok() ? credential.error().message
                                           : taskUser.error().message);
    return processMain.exit("", worker::kExitUsage);
  }
  if (taskUser.value().uid) {
    spdlog::info("tasks run as user {} (uid {}, gid {})", taskUser.value().name,
                 *taskUser.value().uid, taskUser.value().gid.value_or(0));
  } else {
    spdlog::info("tasks run as the worker's own user (worker.task-user applies to a worker "
                 "running as root only)");
  }

  // The data directory's file work blocks: it runs here, before the loop does.
  const std::string host = worker::workerHostName(config);
  const std::string& dataDirPath = config.getString("worker.data-dir");
  auto dataDir = worker::WorkerDataDir::open(
      dataDirPath, {.host = host, .pid = ::getpid(), .startedAtMs = wallClockMillis()},
      taskUser.value().uid);
  if (!dataDir.ok()) {
    spdlog::error("{}", dataDir.error().message);
    // In use by a live worker: a start-up failure; anything else: an unusable directory.
    return processMain.exit(
        "", dataDir.error().isRetryable() ? worker::kExitFailure : worker::kExitUsage);
  }
  if (taskUser.value().uid) {
    const auto blocked =
        worker::untraversableAbove(dataDirPath, *taskUser.value().uid, *taskUser.value().gid);
    if (blocked) {
      spdlog::warn("worker.task-user {} cannot traverse {} above worker.data-dir {}: every task "
                   "will fail to enter its working directory (give the directory o+x, or move "
                   "the data directory)",
                   taskUser.value().name, *blocked, dataDirPath);
    }
  }
  const std::string resourceId = dataDir.value()->resourceId().toHex();
  // The cgroup file system blocks, and what an earlier run left is killed: before the loop.
  auto containment = worker::taskContainmentFrom(config, dataDir.value()->resourceId());
  if (!containment.ok()) {
    spdlog::error("{}", containment.error().message);
    return processMain.exit(resourceId, worker::kExitFailure);
  }
  spdlog::info("task containment: {}", containment.value()->description());
  processMain.events().emit(Event("worker starting")
                                .field("resource_id", resourceId)
                                .field("host", host)
                                .field("pid", int64_t{::getpid()})
                                .field("slots", config.getInt("worker.slots"))
                                .field("data_dir", dataDirPath)
                                .field("created", dataDir.value()->created() ? "true" : "false"));

  int code = worker::kExitFailure;
  try {
    EventLoop loop;
    auto process = worker::WorkerProcess::create(
        loop, config, processMain.events(), std::move(dataDir).value(), taskUser.value(),
        std::move(containment).value(), processMain.descriptorLimit());
    if (!process.ok()) {
      spdlog::error("{}", process.error().message);
    } else {
      http::addEventsFileMetrics(process.value()->metrics(), processMain.eventsFile());
      code = loop.run(process.value()->run());
    }
  } catch (const kj::Exception& exception) {
    spdlog::error("worker failed: {}", exception.getDescription().cStr());
    code = worker::kExitFailure;
  }
  return processMain.exit(resourceId, code);
}

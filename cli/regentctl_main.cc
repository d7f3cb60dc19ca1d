// regentctl, the admin CLI: reads the same configuration sources as the processes, shows who
// leads a cluster (`leader`, `leader --watch`) and who contends (`masters`), submits and manages
// jobs through the leader's Dispatcher (`jobs ...`), lists the leader's workers and slots
// (`workers`, `slots`) and asks the leader to hand over (`failover`).
#include <CLI/CLI.hpp>
#include <kj/exception.h>
#include <spdlog/spdlog.h>

#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "cli/cluster_inspector.h"
#include "cli/job_commands.h"
#include "common/event_loop.h"
#include "common/units.h"
#include "conf/command_line.h"
#include "conf/config.h"

namespace {

constexpr const char* kDescription =
    "regentctl: inspects a regent cluster through ZooKeeper and manages its jobs through the "
    "leader (found in ZooKeeper, or through the master given with --master).\n"
    "Exit codes: 0 done, 1 ZooKeeper, the leader or (jobs logs) the worker unreachable, a read "
    "failed, or --timeout passed, 2 bad usage, configuration or FILE, or no way to reach a master (jobs, workers, "
    "slots, failover), 3 no master leads (leader; jobs, workers, slots and failover when "
    "--timeout passed without a leader), 4 invalid JobGraph or request refused (jobs: "
    "unknown job, job id taken, job already ended or corrupt, graph or FILE too large; logs: "
    "no such vertex or subtask, no attempt yet, output pruned; failover: no other master took over).";

// "leader, masters, jobs, failover": the commands `parent` offers.
std::string commandNames(const CLI::App& parent) {
  std::string names;
  for (const CLI::App* command : parent.get_subcommands([](const CLI::App*) { return true; })) {
    if (!names.empty()) names += ", ";
    names += command->get_name();
  }
  return names;
}

// What is wrong with the command words after parsing, if anything: a missing or unknown command
// (at the top or under `jobs`), or an argument no command takes.
std::optional<std::string> commandProblem(const CLI::App& app, const CLI::App& jobs) {
  const std::vector<std::string> extra = app.remaining(true);
  const bool wordFirst = !extra.empty() && !extra.front().starts_with("-");
  if (app.get_subcommands().empty()) {
    if (wordFirst) {
      return "unknown subcommand \"" + extra.front() + "\"; the subcommands are " +
             commandNames(app);
    }
    if (extra.empty()) return "a subcommand is required: " + commandNames(app);
  } else if (jobs.parsed() && jobs.get_subcommands().empty()) {
    if (wordFirst) {
      return "unknown jobs subcommand \"" + extra.front() + "\"; the jobs subcommands are " +
             commandNames(jobs);
    }
    if (extra.empty()) return "a jobs subcommand is required: " + commandNames(jobs);
  }
  if (!extra.empty()) return "unexpected argument \"" + extra.front() + "\"";
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace regent;

  CLI::App app{kDescription, "regentctl"};
  std::string quorum;
  std::string clusterId;
  std::string master;
  bool json = false;
  bool watch = false;
  app.add_option("--zk", quorum,
                 "ZooKeeper quorum host:port,... (ha.zookeeper.quorum; wins over --set)");
  app.add_option("--master", master,
                 "jobs, workers, slots, failover: talk to the master at HOST:PORT (its rpc "
                 "address) instead of "
                 "finding the leader in ZooKeeper; needed with ha.mode standalone (cli.master; "
                 "wins over --set)");
  app.add_option("--cluster-id", clusterId, "cluster to inspect (cluster-id; wins over --set)");
  // --config, --set.
  ConfigCommandLine commandLine(app, "regentctl", {.program = Program::kRegentctl});
  app.add_flag("--json", json, "print one JSON object per line");
  app.footer(
      "Authentication (docs/security.md): against a master that requires it, jobs, workers, "
      "slots and failover "
      "authenticate with rpc.credential.role and rpc.credential.secret-file from --config or the "
      "environment (REGENT_RPC_CREDENTIAL_ROLE, REGENT_RPC_CREDENTIAL_SECRET_FILE), or with a "
      "client certificate (rpc.tls.*); never put a secret on the command line.");
  // At most one command at each level; a missing or unknown one is reported after parsing, by
  // name (CLI11 would say "A subcommand is required" for both).
  app.require_subcommand(0, 1);
  app.allow_extras();
  app.fallthrough();  // Global options may also follow the command.
  CLI::App* leaderCommand = app.add_subcommand(
      "leader", "show the current leader (exit 3 if there is none)");
  leaderCommand->add_flag("--watch", watch,
                          "print one line per leader change, until SIGINT or SIGTERM");
  CLI::App* mastersCommand =
      app.add_subcommand("masters", "list every contending master in latch order, with its role");
  std::string timeoutText = "30s";
  app.add_option("--timeout", timeoutText,
                 "jobs, workers, slots, failover: how long to keep finding the leader and "
                 "retrying (default 30s)");
  CLI::App* jobsCommand = app.add_subcommand("jobs", "submit and manage jobs (through the leader)");
  jobsCommand->require_subcommand(0, 1);
  std::string jobFile;
  std::string jobId;
  CLI::App* submitCommand = jobsCommand->add_subcommand(
      "submit",
      "submit the JobGraph in FILE (a regular file of YAML or JSON, - = stdin; at most "
      "rpc.max-message-size bytes); prints the job id");
  submitCommand->add_option("FILE", jobFile, "JobGraph file (docs/jobgraph.md)")->required();
  CLI::App* listCommand = jobsCommand->add_subcommand("list", "list every job with its state");
  CLI::App* statusCommand = jobsCommand->add_subcommand("status", "show one job's status");
  statusCommand->add_option("ID", jobId, "job id (32 hex digits)")->required();
  CLI::App* cancelCommand = jobsCommand->add_subcommand("cancel", "cancel one job");
  cancelCommand->add_option("ID", jobId, "job id (32 hex digits)")->required();
  CLI::App* removeCorruptCommand = jobsCommand->add_subcommand(
      "remove-corrupt",
      "remove the stored JobGraph record of a CORRUPT job (one that does not decode); a healthy "
      "job's record is refused");
  removeCorruptCommand->add_option("ID", jobId, "job id (32 hex digits)")->required();
  // After the others: the jobs subcommand list in messages extends the earlier one.
  CLI::App* logsCommand = jobsCommand->add_subcommand(
      "logs",
      "print the stdout (or stderr) of a subtask's latest attempt, read from its worker");
  logsCommand->add_option("ID", jobId, "job id (32 hex digits)")->required();
  cli::LogsRequest logs;
  logsCommand->add_option("--vertex", logs.vertex, "the vertex's name")->required();
  logsCommand->add_option("--subtask", logs.subtask, "the subtask's index (default 0)");
  logsCommand->add_flag("--stderr", logs.stderrStream, "print stderr instead of stdout");
  logsCommand->add_flag("--follow", logs.follow,
                        "keep printing new output until the attempt has ended");
  logsCommand->add_flag("--print-token", logs.printToken,
                        "print the output's URL and a short-lived token to read it with "
                        "(Authorization: Bearer), as one JSON line, instead of reading it");
  CLI::App* failoverCommand = app.add_subcommand(
      "failover", "ask the leader to hand over and wait until another term begins");
  // Listed after failover: the subcommand list in messages and --help extends the earlier one
  // ("leader, masters, jobs, failover") instead of reordering it.
  CLI::App* workersCommand = app.add_subcommand(
      "workers",
      "list the workers registered with the leader: resource id, host, address, slots, free "
      "slots, registered at, last heartbeat");
  CLI::App* slotsCommand = app.add_subcommand(
      "slots",
      "list every slot of the leader's workers: worker, index, cpu, memory, state, job, "
      "allocation");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? cli::kExitOk : cli::kExitUsage;
  }
  if (auto problem = commandProblem(app, *jobsCommand)) {
    std::cerr << "regentctl: " << *problem << "; see regentctl --help\n";
    return cli::kExitUsage;
  }

  // Given means set, even to "": `--zk ""` is a bad quorum, not "no --zk".
  if (app.count("--zk") > 0) commandLine.override("--zk", "ha.zookeeper.quorum", quorum);
  if (app.count("--cluster-id") > 0) commandLine.override("--cluster-id", "cluster-id", clusterId);
  if (app.count("--master") > 0) commandLine.override("--master", "cli.master", master);
  auto timeout = parseDuration(timeoutText);
  if (!timeout.ok() || timeout.value().count() == 0) {
    std::cerr << "regentctl: --timeout \"" << timeoutText << "\": "
              << (timeout.ok() ? "must be above 0" : timeout.error().message) << "\n";
    return cli::kExitUsage;
  }
  auto loaded = commandLine.load(std::cout, std::cerr, cli::kExitUsage);
  if (const int* exitCode = std::get_if<int>(&loaded)) return *exitCode;
  const Config& config = std::get<Config>(loaded);
  // regentctl reports what matters on stdout/stderr itself (an unreachable quorum, a lost
  // connection, a failed read); the log only carries errors unless log.level is set.
  if (!commandLine.setUpLogging(config, "regentctl", std::cerr, "error")) return cli::kExitUsage;

  try {
    EventLoop loop;
    if (jobsCommand->parsed() || failoverCommand->parsed() || workersCommand->parsed() ||
        slotsCommand->parsed()) {
      auto jobs = cli::JobCommands::create(loop, config, {std::cout, std::cerr, json},
                                           timeout.value());
      if (!jobs.ok()) {
        std::cerr << "regentctl: " << jobs.error().message << "\n";
        return cli::kExitUsage;
      }
      cli::JobCommands& commands = *jobs.value();
      if (submitCommand->parsed()) return loop.run(commands.submit(jobFile));
      if (listCommand->parsed()) return loop.run(commands.list());
      if (statusCommand->parsed()) return loop.run(commands.status(jobId));
      if (logsCommand->parsed()) return loop.run(commands.logs(jobId, logs));
      if (cancelCommand->parsed()) return loop.run(commands.cancel(jobId));
      if (removeCorruptCommand->parsed()) return loop.run(commands.removeCorrupt(jobId));
      if (failoverCommand->parsed()) return loop.run(commands.failover());
      if (workersCommand->parsed()) return loop.run(commands.workers());
      if (slotsCommand->parsed()) return loop.run(commands.slots());
      return cli::kExitUsage;
    }
    auto inspector =
        cli::ClusterInspector::create(loop, config, {std::cout, std::cerr, json});
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

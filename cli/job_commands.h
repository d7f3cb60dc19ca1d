// What regentctl's jobs commands (submit, list, status, logs, cancel, remove-corrupt), workers,
// slots and failover do, on the event loop: find the leader (in ZooKeeper, or by asking the
// master given with --master), call its Dispatcher over Cap'n Proto RPC with the leader's epoch,
// and follow the leadership (fencing, notLeader, unavailable, lost connections) until --timeout;
// `jobs logs` then reads from the worker that ran the attempt.
#pragma once

#include <kj/async.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "cli/attempt_output.h"
#include "cli/cluster_inspector.h"
#include "client/leader_client.h"
#include "common/event_loop.h"
#include "common/factory_key.h"
#include "common/ids.h"
#include "common/result.h"
#include "common/time.h"
#include "ha/ha_services.h"
#include "leader/leader_info.h"
#include "rpc/rpc_tls.h"
#include "rpc/schema/gateways.capnp.h"

namespace regent {
class Config;
}

namespace regent::cli {

// What `jobs logs` reads: which subtask's output, which stream, and whether to follow it.
struct LogsRequest {
  std::string vertex;
  uint32_t subtask = 0;
  bool stderrStream = false;
  bool follow = false;
  // Print the read's URL and a token for it as one JSON line instead of reading (for curl).
  bool printToken = false;
};

// regentctl's message when it has no way to reach a master (ha.mode standalone and no
// cli.master); create() fails with it before anything connects.
extern const char* const kNoMasterToReach;

// Runs one jobs command, workers, slots or failover against the current leader, through a
// client::LeaderClient (client/leader_client.h) that finds the leader in ZooKeeper, or asks the
// master at cli.master (--master) when that is set (the way to reach a standalone master).
//
// With ZooKeeper, every command first connects as a reader within
// ha.zookeeper.connect-timeout (kExitError if it cannot). Then the client finds the leader, asks
// its MasterBootstrap for the Dispatcher of the leader's epoch and makes the call with that
// epoch, each RPC bounded by rpc.call-timeout, retrying (fencing, notLeader, unavailable, lost
// connections, timed-out calls, no leader, a failed ZooKeeper read) after a short backoff until
// `timeout` has passed since the command began. Then it prints the last obstacle and resolves
// kExitNoLeader if that was "no leader", else kExitError. A refusal retrying cannot help
// (invalidArgument, notFound, alreadyExists, failedPrecondition, tooLarge) prints its message and
// resolves kExitRefused.
//
// Thread-safety: loop-thread only. `loop` and `config` must outlive it; the streams too.
// Destroying it cancels what is in flight, closes the RPC connection and the ZooKeeper session.
class JobCommands final {
 public:
  // Fails on options the ZooKeeper client or the TLS setup rejects, and with kNoMasterToReach.
  static Result<kj::Own<JobCommands>> create(EventLoop& loop, const Config& config,
                                             InspectorOutput output, Duration timeout);
  ~JobCommands() noexcept;
  JobCommands(const JobCommands&) = delete;
  JobCommands& operator=(const JobCommands&) = delete;

  // Each resolves with the exit code once its output is written. Call one of them, once.
  //
  // `jobs submit PATH`: reads PATH ("-" = standard input), parses it (YAML or JSON by the
  // extension, else detected) and validates it with the default JobGraphLimits before any
  // network traffic; a parse or validation error prints "regentctl: PATH: <field>: <message>"
  // and resolves kExitRefused. Only a regular file (or "-") is read, and at most
  // rpc.max-message-size bytes of it: a directory, device, FIFO or socket, or a file that
  // cannot be opened, is kExitUsage; a longer file or a graph whose submitJob call would exceed
  // rpc.max-message-size is "too large" and kExitRefused, before anything is sent. A master
  // that refuses the call as over its own limit is not asked again (kExitRefused). Prints the job id ({"job_id":...} with --json). Retries send the
  // same graph (same job id), which the Dispatcher accepts idempotently.
  kj::Promise<int> submit(std::string path);
  // `jobs list`: a table JOB ID, NAME, STATE, SUBMITTED (or one JSON object per job).
  kj::Promise<int> list();
  // `jobs status ID`: the job's fields, each vertex with a table of its subtasks' latest
  // attempts, and its result once it ended (cli/job_status_output.h); a job whose stored record
  // is corrupt shows state CORRUPT and why (exit kExitOk). A malformed id is kExitUsage; an
  // unknown one kExitRefused.
  kj::Promise<int> status(std::string jobId);
  // `jobs logs ID --vertex V [--subtask N] [--stderr] [--follow]`: asks the leader for the job's
  // status (jobStatus, following the leadership like the other jobs commands), finds the
  // subtask's latest attempt and its worker's HTTP address (cli/attempt_output.h,
  // findAttemptOutput; what it refuses prints its message and resolves kExitRefused), then reads
  // the attempt's stdout (or stderr) from that worker with an AttemptOutputReader, each HTTP
  // exchange bounded by rpc.call-timeout, and writes the bytes as they are to the output stream
  // (--json changes nothing). The output is read once the leader answered: --timeout does not
  // bound it, so --follow runs until the attempt ended and its output is read to the end. Each
  // read carries a token of DispatcherGateway.attemptOutputToken for the attempt and stream
  // (obtained like the status, again when half spent). --print-token prints
  // {"attempt_id","url","token","valid_for_ms"} as one line instead of reading.
  kj::Promise<int> logs(std::string jobId, LogsRequest request);
  // `jobs remove-corrupt ID`: removes the JobGraph record of a CORRUPT job
  // (DispatcherGateway.removeCorruptJob); prints "removed the corrupt JobGraph record of <id>"
  // ({"job_id":...,"removed":true}). A healthy job's record is refused (kExitRefused).
  kj::Promise<int> removeCorrupt(std::string jobId);
  // `jobs cancel ID`: prints "canceled <id>" ({"job_id":...,"canceled":true}).
  kj::Promise<int> cancel(std::string jobId);
  // `workers`: the leader's registered workers (DispatcherGateway.listTaskExecutors) as a table
  // (cli/regentctl_output.h, workersTable) or one JSON object per worker; "no workers registered
  // in <cluster>" when there is none. Below the table, the workers the leader's resource provider
  // started that are not registered (requested, pending registration, releasing).
  kj::Promise<int> workers();
  // `slots`: every slot of those workers as a table (slotsTable) or one JSON object per slot;
  // "no slots reported in <cluster>" when there is none.
  kj::Promise<int> slots();
  // `failover`: asks the leader of epoch E to hand over (MasterBootstrap.handOver(E)), then
  // waits until a leader with an epoch above E shows (ZooKeeper's watch, or asking the master
  // at cli.master) and prints "leader <old master id> (epoch E) -> <new master id> (epoch E2)"
  // (or a JSON object). When the same master leads the new term (no other master took over:
  // it is the only contender, or a standalone master), prints that line too, then says so on
  // stderr and resolves kExitRefused.
  kj::Promise<int> failover();

 private:
  // One attempt's work once the Dispatcher of `epoch` is at hand.
  using DispatcherCall = std::function<kj::Promise<rpc::Attempt<int>>(
      wire::DispatcherGateway::Client, uint64_t epoch)>;

 public:
  // Built by its factory only (FactoryKey).
  JobCommands(FactoryKey<JobCommands>, EventLoop& loop, const Config& config,
              InspectorOutput output, Duration timeout);

 private:
  // The JobId in `text` (32 hex digits); otherwise says so on stderr and returns nothing.
  std::optional<JobId> jobIdArgument(const std::string& text);
  kj::Promise<bool> connectZooKeeper();
  // Connects to ZooKeeper (when following it), then runs `call` through the client until it
  // gives an exit code or --timeout passes. A refusal prints "regentctl: [subject: ]message".
  kj::Promise<int> run(client::LeaderClient::Fn<int> call, std::string subject = "");
  kj::Promise<int> withDispatcher(DispatcherCall call, std::string subject = "");
  // listTaskExecutors, then `print` on the workers (workers(), slots()).
  kj::Promise<int> withTaskExecutors(
      std::function<void(wire::DispatcherGateway::ListTaskExecutorsResults::Reader)> print);
  // Prints "gave up after <--timeout>: <reason>"; the exit code for a call that ran out of time.
  int gaveUp(const std::string& reason);
  // A token to read `stream` of `attempt` of `job` (DispatcherGateway.attemptOutputToken,
  // following the leadership like the other calls).
  kj::Promise<OutputReadGrant> outputToken(JobId job, AttemptId attempt, bool stderrStream);
  // Resolves once a leader with an epoch above old's shows, after printing the change.
  kj::Promise<rpc::Attempt<int>> waitForNewLeader(leader::LeaderInfo old);
  std::string clusterName() const;

  EventLoop& loop_;
  const Config& config_;
  InspectorOutput output_;
  const Duration timeout_;
  // Destroyed bottom-up: the client (with its retrieval), the TLS network, the HA services.
  kj::Own<ha::HaServices> ha_;           // Null with cli.master.
  kj::Own<rpc::RpcNetwork> rpcNetwork_;  // rpc.tls.*; outlives the client.
  kj::Own<client::LeaderClient> client_;
  kj::Own<AttemptOutputReader> outputReader_;  // `jobs logs`, once the attempt is found.
};

}  // namespace regent::cli

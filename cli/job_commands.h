// What regentctl's jobs commands (submit, list, status, cancel) and failover do, on the event
// loop: find the leader in ZooKeeper, call its Dispatcher over Cap'n Proto RPC with the leader's
// epoch, and follow the leadership (fencing, notLeader, unavailable, lost connections) until
// --timeout.
#pragma once

#include <kj/async.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "cli/cluster_inspector.h"
#include "common/event_loop.h"
#include "common/ids.h"
#include "common/result.h"
#include "common/time.h"
#include "ha/ha_services.h"
#include "leader/leader_retrieval.h"
#include "rpc/call_deadline.h"
#include "rpc/rpc_client.h"
#include "rpc/rpc_options.h"
#include "rpc/rpc_tls.h"
#include "rpc/schema/gateways.capnp.h"

namespace regent {
class Config;
}

namespace regent::cli {

// `jobs ...`: the request was refused or is invalid (an invalid JobGraph, an unknown job, a job
// id taken by another graph, a job already ended, a graph too large). docs/operations.md.
inline constexpr int kExitRefused = 4;

// Runs one jobs command or failover against the current leader.
//
// Every command first connects to ZooKeeper as a reader within ha.zookeeper.connect-timeout
// (kExitError if it cannot), then repeats, until `timeout` has passed since the command began:
// read the leader record, connect an RpcClient to its rpc address, ask its MasterBootstrap for
// the Dispatcher of the leader's epoch and make the call with that epoch, each RPC bounded by
// rpc.call-timeout. A Failure fencing, notLeader or unavailable, a lost connection
// (DISCONNECTED), a timed-out call (OVERLOADED), no leader or a failed ZooKeeper read makes it
// wait a short backoff and start over from the leader record. When `timeout` passes it prints
// the last obstacle and resolves kExitNoLeader if that was "no leader", else kExitError. Any
// other Failure prints its message and resolves kExitRefused.
//
// Thread-safety: loop-thread only. `loop` and `config` must outlive it; the streams too.
// Destroying it cancels what is in flight, closes the RPC connection and the ZooKeeper session.
class JobCommands final : private leader::LeaderRetrievalListener {
 public:
  // Fails only on options the ZooKeeper client rejects.
  static Result<std::unique_ptr<JobCommands>> create(EventLoop& loop, const Config& config,
                                                     InspectorOutput output, Duration timeout);
  ~JobCommands() noexcept override;
  JobCommands(const JobCommands&) = delete;
  JobCommands& operator=(const JobCommands&) = delete;

  // Each resolves with the exit code once its output is written. Call one of them, once.
  //
  // `jobs submit PATH`: reads PATH ("-" = standard input), parses it (YAML or JSON by the
  // extension, else detected) and validates it with the default JobGraphLimits before any
  // network traffic; a parse or validation error prints "regentctl: PATH: <field>: <message>"
  // and resolves kExitRefused. Prints the job id ({"job_id":...} with --json). Retries send the
  // same graph (same job id), which the Dispatcher accepts idempotently.
  kj::Promise<int> submit(std::string path);
  // `jobs list`: a table JOB ID, NAME, STATE, SUBMITTED (or one JSON object per job).
  kj::Promise<int> list();
  // `jobs status ID`: the job's fields, and its result once it ended. A malformed id is
  // kExitUsage; an unknown one kExitRefused.
  kj::Promise<int> status(std::string jobId);
  // `jobs cancel ID`: prints "canceled <id>" ({"job_id":...,"canceled":true}).
  kj::Promise<int> cancel(std::string jobId);
  // `failover`: asks the leader of epoch E to hand over (MasterBootstrap.handOver(E)), then
  // waits until ZooKeeper shows a leader with an epoch above E and prints
  // "leader <old master id> (epoch E) -> <new master id> (epoch E2)" (or a JSON object).
  kj::Promise<int> failover();

 private:
  // The JobId in `text` (32 hex digits); otherwise says so on stderr and returns nothing.
  std::optional<JobId> jobIdArgument(const std::string& text);
  // What one attempt of a command came to: an exit code (done, output written), or nullopt
  // and a sentence in lastError_ (retry).
  using Outcome = std::optional<int>;
  // One attempt's work once the gateway of `epoch` is at hand.
  using DispatcherCall =
      std::function<kj::Promise<Outcome>(wire::DispatcherGateway::Client, uint64_t epoch)>;
  // The leader's bootstrap capability and its record.
  using BootstrapCall = std::function<kj::Promise<Outcome>(wire::MasterBootstrap::Client,
                                                          const leader::LeaderInfo& leader)>;

  JobCommands(EventLoop& loop, const Config& config, InspectorOutput output, Duration timeout,
              std::unique_ptr<ha::HaServices> ha, kj::Own<leader::LeaderRetrieval> retrieval);

  kj::Promise<bool> connectZooKeeper();
  // Connect to ZooKeeper, then attempt `call` on the leader's bootstrap until it gives an exit
  // code or the --timeout passes (then gaveUp()).
  kj::Promise<int> run(BootstrapCall call);
  kj::Promise<int> withDispatcher(DispatcherCall call);
  kj::Promise<int> attemptLoop();
  kj::Promise<Outcome> attemptOnce();
  int gaveUp();
  // nullopt (retry) for fencing, notLeader and unavailable (noting retryAfterMs), else prints
  // the message and returns kExitRefused. `subject` prefixes an invalidArgument
  // ("PATH: field: message").
  Outcome refused(wire::Failure::Reader failure, const std::string& subject = "");
  // Resolves once ZooKeeper shows a leader with an epoch above old's (a watch), after printing
  // the change.
  kj::Promise<int> waitForNewLeader(leader::LeaderInfo old);
  // leader::LeaderRetrievalListener (failover's wait).
  void leaderChanged(const std::optional<leader::LeaderInfo>& leader) override;
  void connectionChanged(bool connected) override;
  std::string clusterName() const;

  EventLoop& loop_;
  const Config& config_;
  InspectorOutput output_;
  const Duration timeout_;
  const rpc::RpcOptions rpcOptions_;
  const rpc::CallDeadline deadline_;
  BootstrapCall call_;  // The command's attempt (run()).
  std::string lastError_;
  bool lastWasNoLeader_ = false;
  Duration retryAfter_{0};
  ExponentialBackoff backoff_;
  // Destroyed bottom-up: the RPC client, then the retrieval, then the HA services.
  std::unique_ptr<ha::HaServices> ha_;
  kj::Own<leader::LeaderRetrieval> retrieval_;
  kj::Own<rpc::RpcNetwork> rpcNetwork_;  // rpc.tls.*; outlives the client.
  kj::Own<rpc::RpcClient> client_;
  // failover: the leader handed over, and who waits for its successor.
  std::optional<leader::LeaderInfo> replaced_;
  kj::Own<kj::PromiseFulfiller<leader::LeaderInfo>> successor_;
};

}  // namespace regent::cli

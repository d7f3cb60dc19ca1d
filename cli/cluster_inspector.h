// What regentctl's leader and masters commands do, on the event loop: connect to ZooKeeper as a
// reader within ha.zookeeper.connect-timeout, then read (or watch) the leader and the latch.
#pragma once

#include <kj/async.h>

#include <iosfwd>
#include <memory>
#include <optional>
#include <string>

#include "common/event_loop.h"
#include "common/factory_key.h"
#include "common/result.h"
#include "common/time.h"
#include "ha/ha_services.h"
#include "leader/leader_retrieval.h"

namespace regent {
class Config;
}

namespace regent::cli {

// regentctl's exit codes (docs/operations.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;     // ZooKeeper unreachable, a read failed (e.g. no auth).
inline constexpr int kExitUsage = 2;     // Bad command line or configuration.
inline constexpr int kExitNoLeader = 3;  // `leader`: no master leads.
// `jobs ...`: the request was refused or is invalid (an invalid JobGraph, an unknown job, a job
// id taken by another graph, a job already ended or corrupt, a graph too large; `jobs logs`: no
// such vertex or subtask, no attempt yet, output pruned); `failover`: no other master took over.
inline constexpr int kExitRefused = 4;

struct InspectorOutput {
  std::ostream& out;  // Answers: the leader, the table, JSON lines.
  std::ostream& err;  // Errors and notes ("no leader", connection lost).
  bool json = false;
};

// Waits up to `wait` for the reader session; on failure writes one line to `err` naming the
// quorum, the library's last problem (such as a refused connection) and the option that set the
// wait (`waitOption`: "ha.zookeeper.connect-timeout", or "--timeout" for commands that retry),
// and resolves false. True at once without ZooKeeper.
kj::Promise<bool> connectToZooKeeper(ha::HaServices& ha, const Config& config, std::ostream& err,
                                     Duration wait, std::string waitOption);

// `cluster "<cluster-id>"`, for messages.
std::string clusterNameOf(const Config& config);

// Reads the cluster through a LeaderRetrieval over the reader identity
// (ha.zookeeper.read-auth if set, else ha.zookeeper.auth).
//
// Thread-safety: loop-thread only. `loop` and `config` must outlive it; the streams too.
// Destroying it cancels what is in flight and closes the ZooKeeper session.
class ClusterInspector final : public leader::LeaderRetrievalListener {
 public:
  // Fails only on options the ZooKeeper client rejects; an unreachable ZooKeeper is reported by
  // the commands.
  static Result<kj::Own<ClusterInspector>> create(EventLoop& loop, const Config& config,
                                                  InspectorOutput output);
  ~ClusterInspector() noexcept override;
  ClusterInspector(const ClusterInspector&) = delete;
  ClusterInspector& operator=(const ClusterInspector&) = delete;

  // Each resolves with the exit code once its output is written. Call one of them, once.
  // `leader`: the leader's fields, or a sentence on stderr (and {"status":"NONE"} with --json)
  // and kExitNoLeader. A record no live contender holds (its owner session left the latch, or
  // its master contends from a new session) is printed (with "stale" in --json), followed by a
  // sentence on stderr saying why no master leads, and kExitNoLeader.
  kj::Promise<int> leader();
  // `leader --watch`: one line per change, including "no leader", until SIGINT or SIGTERM
  // (then kExitOk).
  kj::Promise<int> watchLeader();
  // `masters`: every contender in latch order with its role.
  kj::Promise<int> masters();

  // leader::LeaderRetrievalListener (--watch).
  void leaderChanged(const std::optional<leader::LeaderInfo>& leader) override;
  void connectionChanged(bool connected) override;

  // Built by its factory only (FactoryKey).
  ClusterInspector(FactoryKey<ClusterInspector>, EventLoop& loop, const Config& config,
                   InspectorOutput output, kj::Own<ha::HaServices> ha,
                   kj::Own<leader::LeaderRetrieval> retrieval);

 private:
  // Resolves true once a session is up (at once in standalone mode); false, after printing
  // the error naming the quorum, if none came within ha.zookeeper.connect-timeout.
  kj::Promise<bool> connect();
  std::string clusterName() const;
  void stopWatching();

  EventLoop& loop_;
  const Config& config_;
  InspectorOutput output_;
  // Destroyed bottom-up: the signal watchers, then the retrieval (it holds watches through the
  // client), then the HA services.
  kj::Own<ha::HaServices> ha_;
  kj::Own<leader::LeaderRetrieval> retrieval_;
  kj::Own<kj::PromiseFulfiller<int>> watchDone_;
  std::unique_ptr<SignalWatcher> sigint_;
  std::unique_ptr<SignalWatcher> sigterm_;
};

}  // namespace regent::cli

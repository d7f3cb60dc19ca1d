// Leader election over ZooKeeper (DESIGN §5): a latch of ephemeral sequential nodes where the
// lowest leads and every other contender watches only its predecessor, and a win that issues the
// next epoch in one transaction with the `leader` record.
#pragma once

#include <kj/async.h>
#include <kj/timer.h>

#include <cstdint>
#include <optional>
#include <string>

#include "common/result.h"
#include "common/time.h"
#include "ha/zookeeper_client.h"
#include "leader/leader_election.h"
#include "leader/leader_info.h"

namespace regent::leader {

struct ZooKeeperLeaderElectionOptions {
  // How long a leader keeps its term while the connection is lost (kSuspended) before it revokes
  // "connection lost"; 0 revokes at once. Capped at a third of the negotiated session timeout.
  Duration suspendTolerance{0};
  // Retries after unexpected failures back off from `initialBackoff`, doubling up to `maxBackoff`.
  Duration initialBackoff{100};
  Duration maxBackoff{5000};
};

// Nodes, relative to the cluster root (DESIGN §4): `latch/m-<seq>` (ephemeral sequential,
// ContenderInfo JSON), `leader` (ephemeral, LeaderInfo JSON), `epoch` (persistent, decimal).
//
// The cycle: create a latch node, list the latch, lead when ours is the lowest, else watch only
// the predecessor and list again when it goes. Winning is one transaction: check our latch node,
// create `leader` (status RECOVERING, epoch+1), compare-and-set `epoch` to epoch+1; then
// grantLeadership(epoch+1) and a watch on our own latch node.
//
// Leadership ends (revokeLeadership, then re-contention with a new latch node at the back):
// "latch node deleted"; "session expired" (re-contends once a new session is connected);
// "session closed" (the client was closed; no re-contention);
// "connection lost" (kSuspended: at once, or after the suspend tolerance unless kReconnected
// comes first; once reconnected, `leader` and the old latch node are deleted in one transaction
// before contending again); "handed over" (handOver()); "error: ..." (an unexpected ZooKeeper
// code while leading; retried with backoff).
//
// Thread-safety: loop-thread only. Every callback runs from a continuation on the loop, never
// inside one of this class's methods. Stale continuations of abandoned attempts never act: each
// attempt has a generation, and the in-flight work lives in a TaskSet, so destroying the election
// cancels it (the contender is not called from the destructor; ZooKeeper removes the nodes when
// the session ends).
// WARNING: the contender must not destroy the election from inside grantLeadership or
// revokeLeadership.
class ZooKeeperLeaderElection final : public LeaderElection {
 public:
  // `zk` and `timer` (the loop's timer, or a manually advanced one in tests) must outlive the
  // election.
  ZooKeeperLeaderElection(ha::Coordination& zk, kj::Timer& timer, ContenderInfo self,
                          ZooKeeperLeaderElectionOptions options = {});
  ~ZooKeeperLeaderElection() noexcept override;
  ZooKeeperLeaderElection(const ZooKeeperLeaderElection&) = delete;
  ZooKeeperLeaderElection& operator=(const ZooKeeperLeaderElection&) = delete;

  void start(LeaderContender& contender) override;
  kj::Promise<Status> markServing(uint64_t epoch) override;
  kj::Promise<void> handOver(bool recontend) override;
  uint64_t currentEpoch() const override { return epoch_; }

  // This contender's latch node name ("m-0000000007"), or nullopt while it has none.
  std::optional<std::string> latchNode() const { return latch_; }

 private:
  // Whether the `leader` node belongs to this contender's session.
  enum class LeaderNode { kNotOurs, kOurs, kMaybeOurs };
  class ErrorHandler;

  // Runs `then` with the promise's value unless the attempt `generation` was abandoned meanwhile.
  template <typename T, typename Func>
  void track(uint64_t generation, kj::Promise<T>&& promise, Func&& then);

  // The steps of one attempt, each carrying the attempt's generation.
  void contend();
  void resume();
  void createLatch(uint64_t generation);
  void findOwnLatch(uint64_t generation);
  void joined(uint64_t generation);  // Our latch node is known: tell the contender, go on.
  void checkLeadership(uint64_t generation);
  void tryWin(uint64_t generation);
  void onWinReply(uint64_t generation, int64_t sessionId, const LeaderInfo& info,
                  ha::ZkReply<std::vector<ha::ZkOpResult>>&& reply);
  void awaitLeaderGone(uint64_t generation);
  void grant(uint64_t generation, const LeaderInfo& info);
  void watchOwnLatch(uint64_t generation);
  void fail(uint64_t generation, const std::string& what, ha::ZkCode code);
  void retryLater(uint64_t generation);

  void onSessionState(ha::SessionState state);
  void onSuspendedWhileLeading();
  void cancelTolerance();
  // Revokes (if leading) while the session may still be alive: `leader` and the old latch node
  // are removed before the next attempt, which starts now or once the session is back.
  void loseLeadership(const std::string& reason);
  void revoke(const std::string& reason);
  // Deletes `leader` (if ours) and our latch node in one transaction; falls back to step by step
  // when the transaction fails on a node that is already gone. Resolves with the outcome.
  kj::Promise<ha::ZkCode> removeOwnNodes();
  kj::Promise<ha::ZkCode> removeOwnNodesStepByStep();
  bool sessionUsable() const;
  std::string latchPath() const;

  ha::Coordination& zk_;
  kj::Timer& timer_;
  ContenderInfo self_;
  ZooKeeperLeaderElectionOptions options_;
  LeaderContender* contender_ = nullptr;

  bool started_ = false;
  bool stopped_ = false;        // Handed over for good.
  bool handingOver_ = false;    // A hand-over transaction is in flight.
  uint64_t generation_ = 0;     // The current attempt; bumped whenever one is abandoned.
  int64_t attemptSession_ = 0;  // The session the current attempt runs in.

  std::optional<std::string> latch_;  // Our latch node's name, once created.
  bool latchMaybeCreated_ = false;    // A create's reply was lost: look for our node first.
  LeaderNode leaderNode_ = LeaderNode::kNotOurs;
  int32_t leaderVersion_ = 0;       // Data version of `leader` when kOurs.
  bool relinquishPending_ = false;  // Remove `leader` and the old latch before contending.

  bool leading_ = false;
  uint64_t epoch_ = 0;
  LeaderInfo leaderInfo_;

  uint64_t toleranceGeneration_ = 0;
  bool toleranceRunning_ = false;
  Duration backoff_;

  kj::Own<ErrorHandler> errorHandler_;
  kj::Own<void> sessionListener_;
  kj::TaskSet tasks_;  // Declared last: destroyed first, cancelling all in-flight work.
};

}  // namespace regent::leader

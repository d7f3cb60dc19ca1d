// Leader election over ZooKeeper (docs/leader-election.md): a latch of ephemeral sequential nodes
// where the lowest leads and every other contender watches only its predecessor, and a win that
// issues the next epoch in one transaction with the `leader` record.
#pragma once

#include <kj/async.h>
#include <kj/timer.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/backoff.h"
#include "common/result.h"
#include "common/task_set_error_logger.h"
#include "common/time.h"
#include "ha/coordination.h"
#include "leader/latch_group.h"
#include "leader/leader_election.h"
#include "leader/leader_info.h"
#include "leader/leader_liveness.h"

namespace regent::leader {

struct ZooKeeperLeaderElectionOptions {
  // How long a leader keeps its term while the connection is lost (kSuspended) before it revokes
  // "connection lost"; 0 revokes at once. Capped at a third of the negotiated session timeout,
  // which nullopt ("auto", the configuration's default) always takes, read when the connection
  // is lost (docs/leader-election.md says why that much is safe).
  std::optional<Duration> suspendTolerance = Duration(0);
  // The cluster's root ("/regent/default"), only to name nodes in messages; empty: relative.
  std::string clusterRoot;
  // Retries after unexpected failures back off from `initialBackoff`, doubling up to `maxBackoff`
  // (see ExponentialBackoff: the first retry waits `initialBackoff`, later ones are spread).
  Duration initialBackoff{100};
  Duration maxBackoff{5000};
  // Draws the backoff's spread in [0, 1]; null: random. Tests fix it (1: plain doubling).
  std::function<double()> backoffJitter;
  // Fast failover (ha.fast-failover, docs/leader-election.md): the standby whose predecessor is
  // the leader's latch node asks it whether the leader's process is gone, and then removes that
  // process's latch node and `leader` at once. Null: off; standbys wait for the leader's session
  // to end. Must outlive the election.
  LeaderLiveness* liveness = nullptr;
};

// Nodes, relative to the cluster root (docs/zookeeper.md): `latch/m-<seq>` (ephemeral sequential,
// ContenderInfo JSON), `leader` (ephemeral, LeaderInfo JSON), `epoch` (persistent, decimal).
//
// The cycle: create a latch node, list the latch, lead when ours is the lowest, else watch only
// the predecessor and list again when it goes. Winning is one transaction: check our latch node,
// create `leader` (status RECOVERING, epoch+1), compare-and-set `epoch` to epoch+1; then
// grantLeadership({epoch+1, our latch node}) and a watch on our own latch node.
//
// Nodes our session left behind never block others. A win transaction whose reply was lost (or
// that landed after its attempt was abandoned) leaves `leader` held by our session for a term
// nobody was told about: when our latch node is the lowest and the record carries our master id
// and the epoch in `epoch` (and is not a term granted before), the term is adopted (granted) after
// one transaction checks all three, so no epoch is skipped; otherwise the record is deleted before
// we wait in the queue. An epoch is still skipped when the session ends before that, or when a
// hand-over races the win (see handOver). A removal of `leader` whose outcome is unknown is never
// repeated blindly: by then the node may be another contender's at the same version, so the next
// try looks at its owner. Latch nodes of our session that no attempt uses (from an abandoned
// attempt or a lost create reply) are deleted, each retried until it is gone or the session ends;
// a standby deletes every such node ahead of its own. Hence: one election per ZooKeeper session.
// After a session expired on our side, the first attempt in the next session deletes what that
// session may still hold (a server restarted on its data restores its sessions, and a `leader`
// saying SERVING would stay for a whole session timeout while nobody leads): `leader` when its
// owner is that session, in one transaction with a check of the `epoch` node's version read
// before, so a term won by anyone since is never touched; then that session's latch nodes.
//
// Fast failover (options.liveness set): the standby right behind the leader's latch node (its
// predecessor is the lowest and owned by the session that owns `leader`) also watches `leader`
// and asks the liveness whether the leader's process is gone. When it is, one transaction checks
// the `epoch` node's version and removes `leader` and that latch node at the versions read
// (`epoch` read first: every win changes it, so a term won since is never touched; a latch node
// name is never reused); the predecessor watch then makes this contender the lowest. A change of
// `leader` (a new term, marked SERVING) makes every standby look again.
//
// Leadership ends (revokeLeadership, then re-contention with a new latch node at the back):
// "latch node deleted"; "session expired" (re-contends once a new session is connected);
// "session closed" (the client was closed; no re-contention);
// "connection lost" (kSuspended: at once, or after the suspend tolerance unless kReconnected
// comes first; once reconnected, `leader` and the old latch node are deleted in one transaction
// before contending again); "handed over" (handOver()); "error: ..." (an unexpected ZooKeeper
// code while leading; retried with backoff).
//
// Nothing is sent while the session is not usable (kSuspended, kConnecting, ...): the attempt
// stops and the session's events (kReconnected, or kConnected of a new session) start it again.
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
  // Where the election stands. Informational (logs, tests): the contender learns about leadership
  // only through its two signals.
  enum class Phase {
    kIdle,                  // start() not called yet.
    kJoining,               // Getting a latch node: removing the old nodes first, creating one,
                            // or finding one whose create reply was lost; also while waiting for
                            // a usable session.
    kContending,            // Listing the latch, removing our orphans ahead of us, or removing
                            // a `leader` our session holds for no term.
    kWatchingPredecessor,   // A standby parked on the watch of the latch node just ahead.
    kWinning,               // The lowest: reading the epoch, sending the win transaction,
                            // waiting for a `leader` of another session to go, or adopting a
                            // term our session won without hearing the reply.
    kLeading,               // Granted; watching our own latch node.
    kHandingOver,           // handOver(): revoking, then deleting `leader` and our latch node.
    kStopped,               // Handed over without re-contention: nothing more happens.
  };
  static const char* phaseName(Phase phase);

  // `zk` and `timer` (the loop's timer, or a manually advanced one in tests) must outlive the
  // election.
  ZooKeeperLeaderElection(ha::Coordination& zk, kj::Timer& timer, ContenderInfo self,
                          ZooKeeperLeaderElectionOptions options = {});
  ~ZooKeeperLeaderElection() noexcept override;
  ZooKeeperLeaderElection(const ZooKeeperLeaderElection&) = delete;
  ZooKeeperLeaderElection& operator=(const ZooKeeperLeaderElection&) = delete;

  void start(LeaderContender& contender) override;
  // WARNING: the returned promise refers to the election; the caller must not keep it past the
  // election's destruction.
  kj::Promise<Status> markServing(uint64_t epoch) override;
  // A win transaction still in flight is waited for: if it landed, its `leader` goes in the
  // hand-over transaction and is never granted (that epoch is then skipped). A call while a
  // hand-over is in flight resolves when that one does; handOver(false) then also stops
  // re-contention asked for by the first call.
  // WARNING: the returned promise refers to the election; the caller must not keep it past the
  // election's destruction.
  kj::Promise<Status> handOver(bool recontend) override;
  uint64_t currentEpoch() const override;

  // This contender's latch node name ("m-0000000007"), or nullopt while it has none.
  std::optional<std::string> latchNode() const { return latch_; }
  Phase phase() const { return phase_; }

 private:
  // Whether the `leader` node belongs to this contender's session.
  enum class LeaderNode { kNotOurs, kOurs, kMaybeOurs };

  // Whether the election acts on its own: started, and neither handing over nor stopped.
  bool active() const;
  void setPhase(Phase phase);

  // Runs `then` with the promise's value unless the attempt `generation` was abandoned meanwhile.
  template <typename T, typename Func>
  void track(uint64_t generation, kj::Promise<T>&& promise, Func&& then);
  // Abandons the current attempt (its continuations never act again); returns the new generation.
  uint64_t nextGeneration();

  // The steps of one attempt, each carrying the attempt's generation.
  void contend();
  void resume();
  void createLatch(uint64_t generation);
  void findOwnLatch(uint64_t generation);
  void joined(uint64_t generation);  // Our latch node is known: tell the contender, go on.
  void checkLeadership(uint64_t generation);
  // Standby: deletes the latch nodes of our own session among `ahead`, then watches the last one.
  void removeOwnNodesAhead(uint64_t generation, std::vector<std::string> ahead);
  void watchPredecessor(uint64_t generation, const std::string& predecessor,
                        bool predecessorIsLowest);
  // Fast failover: follows `leader` (a change looks again), and when `predecessor` is the
  // leader's latch node, the leader's process through options_.liveness.
  void followLeader(uint64_t generation, const std::string& predecessor, bool predecessorIsLowest);
  void onLeaderRecordChanged(uint64_t generation, const ha::WatchEvent& event);
  // The leader's nodes at the versions read, and where its process serves RPC.
  struct GoneLeader {
    int32_t epochVersion = 0;
    int32_t leaderVersion = 0;
    std::string latch;  // Its latch node's name.
    int32_t latchVersion = 0;
    int64_t session = 0;
    uint64_t epoch = 0;
    LeaderStatus status = LeaderStatus::kRecovering;
    std::string rpcAddress;
    std::string masterId;  // Of the leader's process (unique per process start).
    std::string host;
    int64_t electedAtMs = 0;  // Wall clock of the win, on the leader's host.
  };
  void followLeaderRecord(uint64_t generation, const std::string& predecessor,
                          bool predecessorIsLowest, int32_t epochVersion,
                          ha::Watched<ha::NodeData>&& leader);
  void followLeaderProcess(uint64_t generation, const GoneLeader& leader);
  // The connection to the leader's address ended and the address answered again: looks (and
  // watches the latch folder) for a contender that started since on the leader's host and
  // advertises its RPC address, which proves the leader's process replaced by a new one.
  void lookForLeaderReplacement(uint64_t generation, uint64_t follow, const GoneLeader& leader);
  // `why` ends "the leader of epoch=E at A is gone (...)" in the log.
  void removeGoneLeader(uint64_t generation, const GoneLeader& gone, const std::string& why);
  // Drops the liveness watch and whatever looks for a replacement of the leader followed.
  void stopFollowingLeaderProcess();
  // Standby while `leader` may be ours: deletes it (if ours) before waiting in the queue.
  void releaseStaleLeader(uint64_t generation);
  // In a new session, before joining: deletes `leader` if a session of ours that ended on our
  // side (endedSessions_) still owns it, then that session's latch nodes; then contends.
  void removePreviousSessionLeader(uint64_t generation);
  void removePreviousSessionLatches(uint64_t generation);
  bool isPreviousSession(int64_t owner) const;
  void tryWin(uint64_t generation);
  void onWinReply(uint64_t generation, int64_t sessionId, const LeaderInfo& info,
                  ha::ZkReply<std::vector<ha::ZkOpResult>>&& reply);
  void awaitLeaderGone(uint64_t generation);
  // `leader` is held by our own session: adopt its term if it is one nobody was told about, else
  // delete it.
  void claimOwnLeaderNode(uint64_t generation, const ha::NodeData& node);
  void removeStaleLeader(uint64_t generation, int32_t version, bool lowest);
  void grant(uint64_t generation, const LeaderInfo& info);
  void watchOwnLatch(uint64_t generation);
  // Our latch node is gone while we lead: revoke "latch node deleted" and contend again.
  void onOwnLatchDeleted();
  // Failures of the election's own, kept out of ha::ZkCode (which is always ZooKeeper's word):
  // ZooKeeper answered ok, but not with something the election can use. Neither passes with
  // the session, so both are handled like a node-level ZooKeeper error.
  enum class OwnFailure {
    kNoWatchSet,       // An exists() that found the node set no watch on it.
    kEpochNotANumber,  // The epoch node holds something else than a decimal number.
    kEpochExhausted,   // The epoch node holds 2^64-1: the next epoch would wrap to 0.
  };
  static const char* ownFailureName(OwnFailure failure);
  // A step of attempt `generation` failed (ignored if the attempt was abandoned meanwhile).
  // Transient codes and those of an ended session wait for the session (or retry with backoff
  // while it is usable); anything else revokes a running term, then retries with backoff.
  void fail(uint64_t generation, const std::string& what, ha::ZkCode code);
  void fail(uint64_t generation, const std::string& what, OwnFailure failure);
  void failForGood(const std::string& what, const char* cause);
  void retryLater(uint64_t generation);

  // Win transactions in flight; winsSettled() resolves once there are none.
  void winSettled();
  kj::Promise<void> winsSettled();

  void onSessionState(ha::SessionState state);
  void onSuspendedWhileLeading();
  void cancelTolerance();
  // Revokes (if leading) while the session may still be alive: `leader` and the old latch node
  // are removed before the next attempt, which starts now or once the session is back.
  void loseLeadership(const std::string& reason);
  void revoke(const std::string& reason);
  // What removing our own nodes came to: ZooKeeper's code (kOk: done), or nullopt when the
  // attempt was abandoned half-way (nothing more was sent and nothing changed here).
  using Removal = std::optional<ha::ZkCode>;
  // Deletes `leader` (if ours) and our latch node in one transaction; falls back to step by step
  // when the transaction fails on a node that is already gone. Stops (nullopt) once the attempt
  // `generation` is abandoned.
  kj::Promise<Removal> removeOwnNodes(uint64_t generation);
  kj::Promise<Removal> removeOwnNodesStepByStep(uint64_t generation);
  bool sessionUsable() const;
  std::string latchPath() const;
  // `relative` under options_.clusterRoot, for messages.
  std::string nodeName(const std::string& relative) const;

  ha::Coordination& zk_;
  kj::Timer& timer_;
  ContenderInfo self_;
  ZooKeeperLeaderElectionOptions options_;
  LeaderContender* contender_ = nullptr;

  LatchGroup latchGroup_;  // The latch's operations and the removal of our orphan nodes.
  Phase phase_ = Phase::kIdle;
  // While kHandingOver: whether to contend again afterwards (handOver(false) clears it).
  bool recontendAfterHandOver_ = false;
  uint64_t generation_ = 0;     // The current attempt; bumped whenever one is abandoned.
  int64_t attemptSession_ = 0;  // The session the current attempt runs in.

  std::optional<std::string> latch_;  // Our latch node's name, once created.
  bool latchMaybeCreated_ = false;    // A create's reply was lost: look for our node first.
  LeaderNode leaderNode_ = LeaderNode::kNotOurs;
  int32_t leaderVersion_ = 0;       // Data version of `leader` when kOurs.
  bool relinquishPending_ = false;  // Remove `leader` and the old latch before contending.
  // Sessions of ours that ended on our side (kExpired: the server said so, or the local timer ran
  // out while cut off) whose nodes the server may still hold: a server restarted on its data
  // restores its sessions with a fresh timeout. Oldest first, a few at most.
  std::vector<int64_t> endedSessions_;

  // A term is open: granted and not yet revoked. Not the same as kLeading: a hand-over enters
  // kHandingOver at once and revokes on the next turn.
  bool leading_ = false;
  uint64_t epoch_ = 0;
  uint64_t lastGrantedEpoch_ = 0;  // Never adopted again.
  LeaderInfo leaderInfo_;
  bool ownLatchWatchArmed_ = false;  // A watch on our latch node is set or being set.
  // Fast failover: the liveness watch on the leader this standby follows; dropped (closing its
  // connection) whenever the attempt moves on.
  kj::Maybe<kj::Promise<void>> livenessWatch_;
  // Counts the leader processes followed: the replacement lookups of an earlier one stop.
  uint64_t follow_ = 0;
  uint64_t replacementLookFollow_ = 0;  // The follow whose latch folder watch is set.

  int winsInFlight_ = 0;
  std::vector<kj::Own<kj::PromiseFulfiller<void>>> winWaiters_;

  uint64_t toleranceGeneration_ = 0;
  bool toleranceRunning_ = false;
  // Retries after failures; reset once a predecessor watch is set or a term is granted.
  ExponentialBackoff backoff_;

  TaskSetErrorLogger errorHandler_;
  kj::Own<void> sessionListener_;
  kj::Maybe<kj::ForkedPromise<Status>> handOverDone_;  // The hand-over in flight (or the last one).
  kj::TaskSet tasks_;  // Declared last: destroyed first, cancelling all in-flight work.
};

}  // namespace regent::leader

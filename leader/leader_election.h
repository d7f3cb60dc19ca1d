// The contender side of leader election (docs/leader-election.md): one per master. Implementations:
// ZooKeeperLeaderElection (latch nodes, epochs issued in ZooKeeper transactions) and
// StandaloneLeaderElection (one master, always leader, epoch in a local file).
#pragma once

#include <kj/async.h>

#include <cstdint>
#include <string>

#include "common/result.h"
#include "ha/fence.h"

namespace regent::leader {

// Receives the two leadership signals. Loop-thread only; the election calls these from the
// loop, never reentrantly from inside one of its own methods.
class LeaderContender {
 public:
  virtual ~LeaderContender() = default;
  // This process leads for `fence.epoch` from now on: ZooKeeper holds `leader` (status
  // RECOVERING) and `epoch` == `fence.epoch`. `fence` is what the term's writes carry (the stores
  // take it as is): ZooKeeper election, the latch node that won ("latch/m-0000000007");
  // standalone, no latch path. Fires at most once per term; never twice without a revoke between.
  virtual void grantLeadership(const ha::WriterFence& fence) = 0;
  // The term `epoch` is over; `reason` says why (session expired, latch node deleted,
  // connection lost, handed over, error). Every leader service must stop before this returns.
  // Fires exactly once per granted term, before any later grant.
  virtual void revokeLeadership(uint64_t epoch, const std::string& reason) = 0;
  // The election joined the queue with a new latch node ("m-0000000007"; "standalone" for the
  // standalone election): once per latch node, before any grant it leads to. Optional.
  virtual void contending(const std::string& latchNode) { (void)latchNode; }
  // The election gave up for good: it will never grant again, and `error` names what a person
  // must fix (the standalone election's epoch file that cannot be read, parsed or written). A
  // term still held was revoked before. At most once, and nothing fires after it. A master
  // exits on it (docs/operations.md).
  virtual void electionFailed(const Error& error) = 0;
};

class LeaderElection {
 public:
  virtual ~LeaderElection() = default;

  // Starts contending; `contender` must outlive the election. After any loss of leadership the
  // election contends again on its own (a new latch node), until handOver() or destruction.
  // Errors that retrying cannot fix are reported through revokeLeadership (if leading) and the
  // log, and the election keeps retrying with backoff; an implementation that cannot go on at
  // all (standalone: its epoch file) says so once through electionFailed and stops.
  virtual void start(LeaderContender& contender) = 0;

  // Publishes status SERVING in `leader` for `epoch` (a versioned update guarded by the latch
  // check). Fails (without touching `leader`) if `epoch` is not the current term.
  virtual kj::Promise<Status> markServing(uint64_t epoch) = 0;

  // Graceful hand-over: deletes `leader` and this contender's latch node in one transaction, so
  // the next contender is granted at once; revokes (reason "handed over") first if leading.
  // With recontend, joins the election again at the back of the queue; otherwise stops
  // contending for good. Resolves ok once ZooKeeper applied the transaction (or there was
  // nothing to delete). Resolves with an error saying what happened when it did not apply (the
  // transaction failed, ZooKeeper frozen or unreachable; the session ended meanwhile): the term
  // is revoked all the same, but no standby can take over before the server ends the session
  // (or, with recontend, before this contender removes its nodes once connected again).
  virtual kj::Promise<Status> handOver(bool recontend) = 0;

  // The epoch of the current term, or 0 when not leading. With ZooKeeper also 0 from the moment
  // the session's deadline passes by this process's clock (ha::Coordination::sessionDeadline),
  // before the expiry reaches the election and revokes the term: a paused leader that runs
  // again reads 0 here first.
  virtual uint64_t currentEpoch() const = 0;
};

}  // namespace regent::leader

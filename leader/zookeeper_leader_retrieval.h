// Leader retrieval over ZooKeeper (docs/leader-election.md): watches the `leader` node and tells
// its listener every change; one-shot reads of the leader and of the latch for inspection tools.
#pragma once

#include <kj/async.h>
#include <kj/timer.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "common/backoff.h"
#include "common/result.h"
#include "common/task_set_error_logger.h"
#include "common/time.h"
#include "ha/coordination.h"
#include "leader/latch_group.h"
#include "leader/leader_retrieval.h"

namespace regent::leader {

// Keeps one watch on `leader` (getAndWatch, or existsAndWatch while it does not exist) and sets
// it again after every event. While the connection is lost (or the session is gone) the listener
// hears connectionChanged(false) and keeps the last view; after kReconnected, or the kConnected
// of a new session after an expiry, the watch is set again, connectionChanged(true) follows and
// any change is reported. connectionChanged is called only when the value changes. A `leader`
// node whose JSON is malformed is logged and reported as "no leader".
//
// Thread-safety: loop-thread only; the listener is called from continuations on the loop, never
// from inside start(). Destroying the retrieval cancels its in-flight reads and watches. Promises
// returned by leader() and contenders() must not outlive it.
class ZooKeeperLeaderRetrieval final : public LeaderRetrieval {
 public:
  // `zk` and `timer` must outlive the retrieval. Failures other than connection loss are retried
  // after a backoff that doubles from `initialBackoff` up to `maxBackoff` (ExponentialBackoff:
  // later retries are spread below the doubled delay).
  ZooKeeperLeaderRetrieval(ha::Coordination& zk, kj::Timer& timer,
                           Duration initialBackoff = Duration(100),
                           Duration maxBackoff = Duration(5000));
  ~ZooKeeperLeaderRetrieval() noexcept override;
  ZooKeeperLeaderRetrieval(const ZooKeeperLeaderRetrieval&) = delete;
  ZooKeeperLeaderRetrieval& operator=(const ZooKeeperLeaderRetrieval&) = delete;

  void start(LeaderRetrievalListener& listener) override;
  kj::Promise<Result<std::optional<LeaderInfo>>> leader() override;
  kj::Promise<Result<std::vector<ContenderEntry>>> contenders() override;
  // The record is stale when its owner session holds no latch node (a term only lives while the
  // latch node that won it does), or when the master it names contends from another session
  // (its client gave that session up; the server still holds it, as after a ZooKeeper restart).
  kj::Promise<Result<LeaderRecordView>> leaderRecord() override;

 private:

  template <typename T, typename Func>
  void track(uint64_t generation, kj::Promise<T>&& promise, Func&& then);
  void arm();
  void watchAbsentLeader(uint64_t generation);
  void notify(const std::optional<LeaderInfo>& leader);
  void fail(uint64_t generation, const char* what, ha::ZkCode code);
  void onSessionState(ha::SessionState state);
  void setConnected(bool connected);  // Tells the listener about a change only.

  ha::Coordination& zk_;
  kj::Timer& timer_;
  ExponentialBackoff backoff_;
  LatchGroup latch_;  // Lists the contenders.
  LeaderRetrievalListener* listener_ = nullptr;
  uint64_t generation_ = 0;   // The current watch; bumped when it is set again.
  int64_t armedSession_ = 0;  // The session the current watch was set in.
  bool connected_ = false;    // As last told to the listener.
  // The last view reported; unset until the first report.
  std::optional<std::optional<LeaderInfo>> reported_;
  TaskSetErrorLogger errorHandler_;
  kj::Own<void> sessionListener_;
  kj::TaskSet tasks_;  // Declared last: destroyed first.
};

}  // namespace regent::leader

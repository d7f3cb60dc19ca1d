// The detector side (docs/leader-election.md): tells a listener who leads, and every change.
// Implementations: ZooKeeperLeaderRetrieval (watches `leader`) and StandaloneLeaderRetrieval (a
// fixed leader from the configuration).
#pragma once

#include <kj/async.h>

#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "leader/leader_info.h"

namespace regent::leader {

class LeaderRetrievalListener {
 public:
  virtual ~LeaderRetrievalListener() = default;
  // The leader changed: a new record (another epoch, or the same epoch's status changed), or
  // nullopt when no leader exists. Called once with the current view after start(), then once
  // per change; consecutive calls never repeat the same value. Loop thread.
  virtual void leaderChanged(const std::optional<LeaderInfo>& leader) = 0;
  // The view may be stale: the connection to ZooKeeper is lost (connected=false) or back.
  virtual void connectionChanged(bool connected) { (void)connected; }
};

// A contender as listed by masters(): its latch node name and what it published.
struct ContenderEntry {
  std::string latchNode;   // "m-0000000007"
  ContenderInfo info;
  bool leader = false;     // Its master id is the one in `leader`.
};

// The leader record as an inspection tool reads it: the record, and whether a live contender
// holds it.
struct LeaderRecordView {
  std::optional<LeaderInfo> leader;  // nullopt: no leader record.
  // Empty when the record belongs to a live contender (or none exists, or the implementation
  // cannot tell); else one sentence saying why it is left over from a session that no longer
  // contends, for example after a ZooKeeper restart restored that session.
  std::string staleReason;
};

class LeaderRetrieval {
 public:
  virtual ~LeaderRetrieval() = default;

  // Starts watching; `listener` must outlive the retrieval.
  virtual void start(LeaderRetrievalListener& listener) = 0;

  // One-shot reads, no watch needed. leader(): nullopt when there is none. A latch node whose
  // JSON is malformed is listed with the master id "?" and logged, not an error.
  virtual kj::Promise<Result<std::optional<LeaderInfo>>> leader() = 0;
  // Every contender in latch order (lowest sequence first).
  virtual kj::Promise<Result<std::vector<ContenderEntry>>> contenders() = 0;
  // leader(), and whether the record's owner is a live contender. The default cannot tell.
  virtual kj::Promise<Result<LeaderRecordView>> leaderRecord() {
    return leader().then([](Result<std::optional<LeaderInfo>> read) -> Result<LeaderRecordView> {
      if (!read.ok()) return read.error();
      return LeaderRecordView{read.value(), ""};
    });
  }
};

}  // namespace regent::leader

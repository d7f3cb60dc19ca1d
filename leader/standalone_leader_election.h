// ha.mode=standalone (DESIGN §5): one master, always the leader; its epoch lives in a local file
// so it still grows across restarts. StandaloneLeaderRetrieval reports that master.
#pragma once

#include <kj/async.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "common/result.h"
#include "leader/leader_election.h"
#include "leader/leader_info.h"
#include "leader/leader_retrieval.h"

namespace regent::leader {

// start() reads the epoch file, writes the next epoch (through EventLoop::runBlocking, replaced
// atomically) and then grants it. A file that cannot be read or written, or holds anything but
// one decimal number, is logged as an error and nothing is granted (the master stays a
// standby; the file is left as it was for a person to look at).
//
// handOver() revokes ("handed over"); with recontend it takes the next epoch from the file and
// grants again. markServing() only checks the epoch: there is no shared record to update.
//
// Thread-safety: loop-thread only; callbacks run from continuations on the loop. Destroying the
// election cancels the pending grant (file work already running finishes).
class StandaloneLeaderElection final : public LeaderElection {
 public:
  // `loop` must outlive the election.
  StandaloneLeaderElection(EventLoop& loop, std::string epochFile);
  ~StandaloneLeaderElection() noexcept override;

  void start(LeaderContender& contender) override;
  kj::Promise<Status> markServing(uint64_t epoch) override;
  kj::Promise<void> handOver(bool recontend) override;
  uint64_t currentEpoch() const override { return leading_ ? epoch_ : 0; }

 private:
  class ErrorHandler;
  void takeNextEpoch();

  EventLoop& loop_;
  std::string epochFile_;
  LeaderContender* contender_ = nullptr;
  uint64_t generation_ = 0;  // Bumped by handOver(): a grant still on its way is dropped.
  bool leading_ = false;
  uint64_t epoch_ = 0;
  kj::Own<ErrorHandler> errorHandler_;
  kj::TaskSet tasks_;  // Declared last: destroyed first.
};

// Reports one fixed leader: `leader` (from the configuration), with the epoch read from the
// epoch file when it is readable (0 otherwise). leaderChanged() fires once after start(); nothing
// changes afterwards. contenders() lists that one master with the latch node "standalone".
class StandaloneLeaderRetrieval final : public LeaderRetrieval {
 public:
  // `loop` must outlive the retrieval.
  StandaloneLeaderRetrieval(EventLoop& loop, LeaderInfo leader, std::string epochFile);
  ~StandaloneLeaderRetrieval() noexcept override;

  void start(LeaderRetrievalListener& listener) override;
  kj::Promise<Result<std::optional<LeaderInfo>>> leader() override;
  kj::Promise<Result<std::vector<ContenderEntry>>> contenders() override;

 private:
  class ErrorHandler;
  kj::Promise<LeaderInfo> current();

  EventLoop& loop_;
  LeaderInfo leader_;
  std::string epochFile_;
  kj::Own<ErrorHandler> errorHandler_;
  kj::TaskSet tasks_;  // Declared last: destroyed first.
};

}  // namespace regent::leader

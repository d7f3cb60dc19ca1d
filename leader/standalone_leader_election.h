// ha.mode=standalone (docs/leader-election.md): one master, always the leader; its epoch lives in a local file
// so it still grows across restarts, and the record of its current term (the standalone
// counterpart of the `leader` node) in a file next to it. StandaloneLeaderRetrieval reports that
// master.
#pragma once

#include <kj/async.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "common/result.h"
#include "common/task_set_error_logger.h"
#include "leader/leader_election.h"
#include "leader/leader_info.h"
#include "leader/leader_retrieval.h"

namespace regent::leader {

// The leader record file of the epoch file `epochFile`: "<epochFile>.leader", one LeaderInfo as
// JSON (leader/leader_info.h), replaced atomically.
std::string leaderRecordPathFor(const std::string& epochFile);

// start() reads the epoch file, writes the next epoch (through EventLoop::runBlocking, replaced
// atomically), writes the term's leader record (`self` with that epoch, the time of the grant as
// electedAtMs, RECOVERING) and then grants the epoch. A file that cannot be read or written, or
// holds anything but one decimal number, ends the election: nothing is granted, the contender's
// electionFailed() gets the error naming the file, and the election does nothing more (retrying
// cannot fix the file; the file is left as it was for a person to look at). A leader record that
// cannot be written is logged as a warning: the epoch file alone decides the term.
//
// handOver() revokes ("handed over"); with recontend it takes the next epoch from the file and
// grants again (or fails as start() does). markServing() checks the epoch, then rewrites the
// record with SERVING (a failed write is a warning; the result is the epoch check's).
//
// Thread-safety: loop-thread only; callbacks run from continuations on the loop. Destroying the
// election cancels the pending grant (file work already running finishes).
class StandaloneLeaderElection final : public LeaderElection {
 public:
  // `loop` must outlive the election. `self` is what the leader record says about this master.
  StandaloneLeaderElection(EventLoop& loop, std::string epochFile, ContenderInfo self = {});
  ~StandaloneLeaderElection() noexcept override;

  void start(LeaderContender& contender) override;
  kj::Promise<Status> markServing(uint64_t epoch) override;
  kj::Promise<Status> handOver(bool recontend) override;
  uint64_t currentEpoch() const override { return leading_ ? epoch_ : 0; }

 private:
  void takeNextEpoch();

  EventLoop& loop_;
  std::string epochFile_;
  ContenderInfo self_;
  LeaderInfo record_;  // The current term's leader record, as last written.
  LeaderContender* contender_ = nullptr;
  uint64_t generation_ = 0;  // Bumped by handOver(): a grant still on its way is dropped.
  bool leading_ = false;
  bool failed_ = false;  // electionFailed() fired: nothing more happens.
  uint64_t epoch_ = 0;
  TaskSetErrorLogger errorHandler_;
  kj::TaskSet tasks_;  // Declared last: destroyed first.
};

// Reports one leader: the leader record (leaderRecordPathFor) when it is readable and names the
// epoch in the epoch file; otherwise `leader` (from the configuration) with the epoch read from
// the epoch file when it is readable (0 otherwise). leaderChanged() fires after start() with the
// current view, then once per change of the leader record, which start() watches through the
// directory of the epoch file (inotify via libuv; if the directory cannot be watched, a warning
// is logged and only the first view is reported). contenders() lists that one master with the
// latch node "standalone".
//
// Thread-safety: loop-thread only. Destroying the retrieval stops the watch and drops pending
// reads.
class StandaloneLeaderRetrieval final : public LeaderRetrieval {
 public:
  // `loop` must outlive the retrieval.
  StandaloneLeaderRetrieval(EventLoop& loop, LeaderInfo leader, std::string epochFile);
  ~StandaloneLeaderRetrieval() noexcept override;

  void start(LeaderRetrievalListener& listener) override;
  kj::Promise<Result<std::optional<LeaderInfo>>> leader() override;
  kj::Promise<Result<std::vector<ContenderEntry>>> contenders() override;

 private:
  class RecordWatch;
  kj::Promise<LeaderInfo> current();
  // Reads the view and tells the listener if it changed (the latest read wins).
  void refresh();

  EventLoop& loop_;
  LeaderInfo leader_;
  std::string epochFile_;
  LeaderRetrievalListener* listener_ = nullptr;
  uint64_t reads_ = 0;  // Bumped per refresh(); an older read's answer is dropped.
  std::optional<LeaderInfo> reported_;
  TaskSetErrorLogger errorHandler_;
  kj::Own<RecordWatch> watch_;
  kj::TaskSet tasks_;  // Declared last: destroyed first.
};

}  // namespace regent::leader

// The latch as a membership group: one ephemeral sequential node per contender under `latch/`,
// ordered by the sequence ZooKeeper appends. The election joins it and watches its predecessor;
// the retrieval lists it. Modelled on Apache Mesos' zookeeper::Group (join, cancel, memberships).
#pragma once

#include <kj/async.h>
#include <kj/timer.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/backoff.h"
#include "common/task_set_error_logger.h"
#include "common/time.h"
#include "ha/coordination.h"

namespace regent::leader {

// The folder of the latch, relative to the cluster root (see docs/zookeeper.md).
inline constexpr const char* kLatchFolder = "latch";

// The operations on the latch every layer above needs, and the clean-up of members this process
// created but no longer uses ("orphans").
//
// Thread-safety: loop-thread only. Promises returned here refer only to the coordination, not
// to the group; they resolve on the loop. Destroying the group cancels the orphan removals in
// flight (the nodes then go with the session).
class LatchGroup final {
 public:
  // One member as read by readMembers(): kNoNode when it went between the listing and the read.
  struct MemberRead {
    std::string name;  // "m-0000000007"
    ha::ZkReply<ha::NodeData> node;
  };

  // `zk` and `timer` must outlive the group. Orphan removals that fail are retried after a
  // backoff from `initialBackoff` doubling up to `maxBackoff`; `jitter` draws the backoff's
  // spread in [0, 1] (null: random; tests fix it).
  LatchGroup(ha::Coordination& zk, kj::Timer& timer, Duration initialBackoff, Duration maxBackoff,
             std::function<double()> jitter = nullptr);
  ~LatchGroup() noexcept;
  LatchGroup(const LatchGroup&) = delete;
  LatchGroup& operator=(const LatchGroup&) = delete;

  // "latch/m-0000000007" for "m-0000000007".
  static std::string pathOf(const std::string& name);

  // Creates the latch folder (and its ancestors) unless it exists; ok also when it did.
  kj::Promise<ha::ZkReply<bool>> ensureFolder();
  // Creates a member node holding `data`, ephemeral to the current session; value: its name.
  // WARNING: a retryable failure (a lost reply) leaves open whether the node exists: look for it
  // with readMembers() before joining again, or it stays ahead of the new one.
  kj::Promise<ha::ZkReply<std::string>> join(std::string data);
  // Removes the member `name`; kNoNode when it is already gone.
  kj::Promise<ha::ZkReply<bool>> cancel(const std::string& name);

  // The members' names, lowest sequence first; no latch folder yet is no members (ok).
  kj::Promise<ha::ZkReply<std::vector<std::string>>> memberNames();
  // The members with what they published, lowest sequence first. code is the listing's; each
  // member's read has its own code.
  kj::Promise<ha::ZkReply<std::vector<MemberRead>>> readMembers();
  // Those of `names` whose node belongs to the current session, in the given order; fails with
  // the first code a lookup failed with.
  kj::Promise<ha::ZkReply<std::vector<std::string>>> ownedBySession(std::vector<std::string> names);
  // Removes every member in `names`; ok when all are gone (kNoNode counts as gone), else the
  // first other code.
  kj::Promise<ha::ZkCode> cancelAll(std::vector<std::string> names);
  // Whether the member exists, and a one-shot watch on it (see ha::Coordination::existsAndWatch).
  kj::Promise<ha::Watched<std::optional<ha::NodeStat>>> watch(const std::string& name);

  // Orphans: members of the current session that nobody uses (a join whose reply came after its
  // attempt was abandoned, a duplicate found after a lost reply). Each is removed, one at a time,
  // and retried with backoff until it is gone or the session ends. A removal that fails while
  // the session is not usable waits for resumeOrphanRemoval().
  void removeOrphan(const std::string& name);
  // Call when the session is usable again (kReconnected).
  void resumeOrphanRemoval();
  // Call when the session ended (kExpired, kClosed): its nodes went with it.
  void forgetOrphans();
  // Orphans still to remove.
  size_t orphanCount() const { return orphans_.size(); }

 private:
  void removeNextOrphan();
  bool sessionUsable() const;

  ha::Coordination& zk_;
  kj::Timer& timer_;
  std::set<std::string> orphans_;
  int64_t orphanSession_ = 0;  // The session the orphans belong to.
  bool orphanRemovalRunning_ = false;
  ExponentialBackoff orphanBackoff_;
  TaskSetErrorLogger errorLogger_{"latch", spdlog::level::warn};
  kj::TaskSet tasks_;  // Declared last: destroyed first.
};

}  // namespace regent::leader

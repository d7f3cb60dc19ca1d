// ZooKeeperLeaderElection: the latch, the winning transaction, revocation on every kind of loss
// and re-contention (docs/leader-election.md). The header's class comment states the contract.
#include "leader/zookeeper_leader_election.h"

#include <kj/debug.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <vector>

namespace regent::leader {

using ha::CreateMode;
using ha::SessionState;
using ha::WatchEvent;
using ha::ZkCode;
using ha::zkCodeName;
using ha::ZkOp;
using ha::ZkReply;

namespace {

constexpr const char* kLeaderPath = "leader";
constexpr const char* kEpochPath = "epoch";

std::optional<uint64_t> parseEpoch(const std::string& text) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || text.empty()) return std::nullopt;
  return value;
}

}  // namespace

ZooKeeperLeaderElection::ZooKeeperLeaderElection(ha::Coordination& zk, kj::Timer& timer,
                                                 ContenderInfo self,
                                                 ZooKeeperLeaderElectionOptions options)
    : zk_(zk),
      timer_(timer),
      self_(std::move(self)),
      options_(options),
      latchGroup_(zk, timer, options.initialBackoff, options.maxBackoff, options.backoffJitter),
      backoff_(options.initialBackoff, options.maxBackoff, options.backoffJitter),
      errorHandler_("leader election", spdlog::level::warn),
      tasks_(errorHandler_) {}

ZooKeeperLeaderElection::~ZooKeeperLeaderElection() noexcept = default;

const char* ZooKeeperLeaderElection::phaseName(Phase phase) {
  switch (phase) {
    case Phase::kIdle: return "idle";
    case Phase::kJoining: return "joining";
    case Phase::kContending: return "contending";
    case Phase::kWatchingPredecessor: return "watching-predecessor";
    case Phase::kWinning: return "winning";
    case Phase::kLeading: return "leading";
    case Phase::kHandingOver: return "handing-over";
    case Phase::kStopped: return "stopped";
  }
  return "?";
}

bool ZooKeeperLeaderElection::active() const {
  return phase_ != Phase::kIdle && phase_ != Phase::kHandingOver && phase_ != Phase::kStopped;
}

void ZooKeeperLeaderElection::setPhase(Phase phase) {
  if (phase == phase_) return;
  spdlog::debug("leader election: {} -> {} (latch {})", phaseName(phase_), phaseName(phase),
                latch_.value_or("none"));
  phase_ = phase;
}

template <typename T, typename Func>
void ZooKeeperLeaderElection::track(uint64_t generation, kj::Promise<T>&& promise, Func&& then) {
  tasks_.add(promise.then([this, generation, then = kj::fwd<Func>(then)](T&& value) mutable {
    if (generation != generation_) return;
    then(kj::mv(value));
  }));
}

uint64_t ZooKeeperLeaderElection::nextGeneration() {
  // The continuations of the old generation never run, so a watch they held is no longer ours.
  ownLatchWatchArmed_ = false;
  stopFollowingLeaderProcess();
  return ++generation_;
}

std::string ZooKeeperLeaderElection::nodeName(const std::string& relative) const {
  return options_.clusterRoot.empty() ? relative : options_.clusterRoot + "/" + relative;
}

std::string ZooKeeperLeaderElection::latchPath() const {
  return LatchGroup::pathOf(latch_.value_or(""));
}

bool ZooKeeperLeaderElection::sessionUsable() const {
  SessionState state = zk_.sessionState();
  return state == SessionState::kConnected || state == SessionState::kReconnected;
}

// ---------------------------------------------------------------------------------------------
// Contending

void ZooKeeperLeaderElection::start(LeaderContender& contender) {
  KJ_REQUIRE(contender_ == nullptr, "ZooKeeperLeaderElection::start called twice");
  contender_ = &contender;
  // A hand-over before start() may have stopped the election already.
  if (phase_ == Phase::kIdle) setPhase(Phase::kJoining);
  sessionListener_ = zk_.onSessionState([this](SessionState state) { onSessionState(state); });
  spdlog::info("leader election: joining master_id={}", self_.masterId);
  if (sessionUsable()) {
    contend();
  } else {
    spdlog::debug("leader election: waiting for a ZooKeeper session (state {})",
                  ha::sessionStateName(zk_.sessionState()));
  }
}

void ZooKeeperLeaderElection::contend() {
  if (!active()) return;
  // Operations sent now would wait on a suspended handle, or land in whatever session comes next.
  // kReconnected, or kConnected of a new session, starts the attempt again.
  if (!sessionUsable()) return;
  KJ_ASSERT(!leading_);
  uint64_t generation = nextGeneration();
  attemptSession_ = zk_.sessionId();
  if (relinquishPending_) {
    setPhase(Phase::kJoining);
    spdlog::info(
        "leader election: removing leader (if ours) and old latch {} before contending "
        "again",
        latch_.value_or("(none)"));
    tasks_.add(removeOwnNodes(generation).then([this, generation](Removal removal) {
      if (!removal || generation != generation_) return;
      if (*removal != ZkCode::kOk) {
        return fail(generation, "remove leader and old latch node", *removal);
      }
      relinquishPending_ = false;
      latch_.reset();
      createLatch(generation);
    }));
  } else if (!endedSessions_.empty()) {
    removePreviousSessionLeader(generation);
  } else if (latch_) {
    checkLeadership(generation);
  } else if (latchMaybeCreated_) {
    findOwnLatch(generation);
  } else {
    createLatch(generation);
  }
}

// Continues after the session came back or a backoff elapsed.
void ZooKeeperLeaderElection::resume() {
  if (!active()) return;
  if (!sessionUsable()) return;  // The session's events resume later.
  if (leading_) {
    // The watch on our latch node outlives a lost connection; only a lost request is sent again.
    if (!ownLatchWatchArmed_) watchOwnLatch(nextGeneration());
  } else {
    contend();
  }
}

void ZooKeeperLeaderElection::createLatch(uint64_t generation) {
  setPhase(Phase::kJoining);
  track(generation, latchGroup_.ensureFolder(), [this, generation](ZkReply<bool>&& reply) {
    if (!reply.ok() && reply.code != ZkCode::kNodeExists) {
      return fail(generation, "create the latch path", reply.code);
    }
    // A create queued on a handle that is not connected could land in the next session.
    if (!sessionUsable()) return;
    latchMaybeCreated_ = true;  // Until the reply says otherwise.
    // Not tracked: a node created for an abandoned attempt must still be cleaned up.
    tasks_.add(
        latchGroup_.join(toJson(self_)).then([this, generation](ZkReply<std::string>&& reply) {
          std::string name = reply.ok() ? reply.value : "";
          if (generation != generation_) {
            // Created in the session current now (or in one that ended and took it along).
            // A lost reply of an abandoned attempt leaves a node ahead of any later one of
            // ours, where checkLeadership finds it.
            if (reply.ok() && name != latch_) latchGroup_.removeOrphan(name);
            return;
          }
          if (!reply.ok()) {
            // Only a lost reply leaves the outcome open.
            if (!ha::isTransient(reply.code)) latchMaybeCreated_ = false;
            return fail(generation, "create a latch node", reply.code);
          }
          latchMaybeCreated_ = false;
          latch_ = name;
          spdlog::info("leader election: created latch {} master_id={}", name, self_.masterId);
          joined(generation);
        }));
  });
}

// After a create whose reply was lost: a node with our master id, owned by our session, is ours.
// With several (more than one reply lost), the lowest is kept and the others are removed.
void ZooKeeperLeaderElection::findOwnLatch(uint64_t generation) {
  setPhase(Phase::kJoining);
  track(generation, latchGroup_.readMembers(),
        [this, generation](ZkReply<std::vector<LatchGroup::MemberRead>>&& reply) {
          if (!reply.ok()) return fail(generation, "list the latch", reply.code);
          ZkCode failure = ZkCode::kOk;
          std::vector<std::string> own;  // Lowest first.
          for (auto& [name, node] : reply.value) {
            if (!node.ok()) {
              if (node.code != ZkCode::kNoNode) failure = node.code;
              continue;
            }
            if (node.value.stat.ephemeralOwner != zk_.sessionId()) continue;
            auto info = contenderInfoFromJson(node.value.data);
            if (!info || info.value().masterId != self_.masterId) continue;
            own.push_back(name);
          }
          // A node of ours that could not be read and sits ahead of the one kept is found by
          // checkLeadership.
          if (own.empty()) {
            if (failure != ZkCode::kOk) return fail(generation, "read latch nodes", failure);
            latchMaybeCreated_ = false;
            return createLatch(generation);
          }
          latchMaybeCreated_ = false;
          latch_ = own.front();
          spdlog::info(
              "leader election: found latch {} created before the connection loss master_id={}",
              own.front(), self_.masterId);
          for (size_t i = 1; i < own.size(); ++i) latchGroup_.removeOrphan(own[i]);
          joined(generation);
        });
}

void ZooKeeperLeaderElection::joined(uint64_t generation) {
  contender_->contending(*latch_);
  // The contender may have handed over from inside the callback.
  if (generation != generation_) return;
  checkLeadership(generation);
}

void ZooKeeperLeaderElection::checkLeadership(uint64_t generation) {
  stopFollowingLeaderProcess();  // The leader followed so far may not be ours to follow now.
  if (!latch_) return contend();
  setPhase(Phase::kContending);
  track(generation, latchGroup_.memberNames(),
        [this, generation](ZkReply<std::vector<std::string>>&& reply) {
          if (!reply.ok()) return fail(generation, "list the latch", reply.code);
          if (!latch_) return contend();
          const std::string latch = *latch_;
          const std::vector<std::string>& names = reply.value;
          auto own = std::find(names.begin(), names.end(), latch);
          if (own == names.end()) {
            spdlog::info("leader election: latch {} is gone; contending with a new one", latch);
            latch_.reset();
            return contend();
          }
          if (own == names.begin()) {
            spdlog::debug("leader election: latch {} is the lowest; trying to win", latch);
            return tryWin(generation);
          }
          // A `leader` our session holds for no term would keep the lowest contender waiting.
          if (leaderNode_ != LeaderNode::kNotOurs) return releaseStaleLeader(generation);
          removeOwnNodesAhead(generation, std::vector<std::string>(names.begin(), own));
        });
}

void ZooKeeperLeaderElection::removeOwnNodesAhead(uint64_t generation,
                                                  std::vector<std::string> ahead) {
  std::string predecessor = ahead.back();
  const bool predecessorIsLowest = ahead.size() == 1;
  track(generation, latchGroup_.ownedBySession(kj::mv(ahead)),
        [this, generation, predecessor,
         predecessorIsLowest](ZkReply<std::vector<std::string>>&& owned) {
          if (!owned.ok()) return fail(generation, "look at the latch nodes ahead", owned.code);
          if (owned.value.empty()) {
            return watchPredecessor(generation, predecessor, predecessorIsLowest);
          }
          for (const std::string& name : owned.value) {
            spdlog::warn(
                "leader election: latch {} ahead of latch {} belongs to our own session but "
                "to no attempt; removing it",
                name, latch_.value_or("?"));
          }
          track(generation, latchGroup_.cancelAll(kj::mv(owned.value)),
                [this, generation](ZkCode code) {
                  if (code != ZkCode::kOk) {
                    return fail(generation, "remove an orphan latch node", code);
                  }
                  checkLeadership(generation);
                });
        });
}

void ZooKeeperLeaderElection::watchPredecessor(uint64_t generation, const std::string& predecessor,
                                               bool predecessorIsLowest) {
  spdlog::debug("leader election: standby with latch {}; watching {}", latch_.value_or("?"),
                predecessor);
  track(generation, latchGroup_.watch(predecessor),
        [this, generation, predecessor,
         predecessorIsLowest](ha::Watched<std::optional<ha::NodeStat>>&& watched) {
          if (!watched.reply.ok()) {
            return fail(generation, "watch latch predecessor", watched.reply.code);
          }
          if (!watched.reply.value) return checkLeadership(generation);
          backoff_.reset();
          KJ_IF_MAYBE (watch, watched.watch) {
            setPhase(Phase::kWatchingPredecessor);
            track(generation, kj::mv(*watch), [this, generation, predecessor](WatchEvent&& event) {
              if (event.type == WatchEvent::Type::kSessionLost) return;
              spdlog::debug("leader election: predecessor {} changed; latch {} checks again",
                            predecessor, latch_.value_or("?"));
              checkLeadership(generation);
            });
            if (options_.liveness != nullptr) {
              followLeader(generation, predecessor, predecessorIsLowest);
            }
          } else {
            fail(generation, "watch latch predecessor", OwnFailure::kNoWatchSet);
          }
        });
}

// ---------------------------------------------------------------------------------------------
// Fast failover
//
// Everything here is an addition to the recipe, never a step of it: a failure only means the
// standby waits for the leader's session, as without fast failover, so none of it retries.

void ZooKeeperLeaderElection::followLeader(uint64_t generation, const std::string& predecessor,
                                           bool predecessorIsLowest) {
  // The epoch node's version first (see removePreviousSessionLeader): a `leader` read after it
  // and removed in a transaction that checks it is the one read.
  track(generation, zk_.exists(kEpochPath),
        [this, generation, predecessor,
         predecessorIsLowest](ZkReply<std::optional<ha::NodeStat>>&& epoch) {
          if (!epoch.ok()) return;
          const int32_t epochVersion = epoch.value ? epoch.value->version : -1;
          track(generation, zk_.getAndWatch(kLeaderPath),
                [this, generation, predecessor, predecessorIsLowest,
                 epochVersion](ha::Watched<ha::NodeData>&& leader) {
                  followLeaderRecord(generation, predecessor, predecessorIsLowest, epochVersion,
                                     kj::mv(leader));
                });
        });
}

void ZooKeeperLeaderElection::followLeaderRecord(uint64_t generation,
                                                 const std::string& predecessor,
                                                 bool predecessorIsLowest, int32_t epochVersion,
                                                 ha::Watched<ha::NodeData>&& leader) {
  if (leader.reply.code == ZkCode::kNoNode) {
    // No term now: look again once one is won.
    track(generation, zk_.existsAndWatch(kLeaderPath),
          [this, generation](ha::Watched<std::optional<ha::NodeStat>>&& created) {
            if (!created.reply.ok()) return;
            if (created.reply.value) {
              return onLeaderRecordChanged(generation,
                                           WatchEvent{WatchEvent::Type::kCreated, kLeaderPath});
            }
            KJ_IF_MAYBE (watch, created.watch) {
              track(generation, kj::mv(*watch), [this, generation](WatchEvent&& event) {
                onLeaderRecordChanged(generation, event);
              });
            }
          });
    return;
  }
  if (!leader.reply.ok()) return;
  KJ_IF_MAYBE (watch, leader.watch) {
    track(generation, kj::mv(*watch),
          [this, generation](WatchEvent&& event) { onLeaderRecordChanged(generation, event); });
  }
  const ha::NodeData& record = leader.reply.value;
  const int64_t owner = record.stat.ephemeralOwner;
  // Only the next in line acts, and never on a `leader` of our own session.
  if (!predecessorIsLowest || epochVersion < 0 || owner == 0 || owner == zk_.sessionId()) return;
  auto info = leaderInfoFromJson(record.data);
  if (!info.ok()) {
    spdlog::warn("leader election: cannot follow the leader: {} holds no leader record: {}",
                 nodeName(kLeaderPath), info.error().message);
    return;
  }
  GoneLeader gone{.epochVersion = epochVersion,
                  .leaderVersion = record.stat.version,
                  .latch = predecessor,
                  .session = owner,
                  .epoch = info.value().epoch,
                  .status = info.value().status,
                  .rpcAddress = info.value().rpcAddress,
                  .masterId = info.value().masterId,
                  .host = info.value().host,
                  .electedAtMs = info.value().electedAtMs};
  track(generation, zk_.exists(LatchGroup::pathOf(predecessor)),
        [this, generation, gone](ZkReply<std::optional<ha::NodeStat>>&& latch) mutable {
          // Gone already: the predecessor watch acts. Another session's: not the leader's latch
          // node. Another phase: the attempt moved on.
          if (!latch.ok() || !latch.value || latch.value->ephemeralOwner != gone.session ||
              phase_ != Phase::kWatchingPredecessor) {
            return;
          }
          gone.latchVersion = latch.value->version;
          followLeaderProcess(generation, gone);
        });
}

void ZooKeeperLeaderElection::followLeaderProcess(uint64_t generation, const GoneLeader& leader) {
  spdlog::info(
      "leader election: latch {} follows the leader of epoch={} ({}) at {} (latch {}, session "
      "0x{:x}) for fast failover",
      latch_.value_or("?"), leader.epoch, leaderStatusName(leader.status), leader.rpcAddress,
      leader.latch, leader.session);
  stopFollowingLeaderProcess();
  const uint64_t follow = ++follow_;
  auto reanswered = [this, generation, follow, leader] {
    // Not from inside the liveness watch, which a removal drops.
    tasks_.add(kj::evalLater([this, generation, follow, leader] {
      lookForLeaderReplacement(generation, follow, leader);
    }));
  };
  livenessWatch_ = options_.liveness->whenDead(leader.rpcAddress, reanswered)
                       .then([this, generation, follow, leader] {
                         // Not from inside this promise: the removal drops it.
                         tasks_.add(kj::evalLater([this, generation, follow, leader] {
                           if (generation == generation_ && follow == follow_) {
                             removeGoneLeader(generation, leader,
                                              "its connection ended and its address refuses "
                                              "connections");
                           }
                         }));
                       })
                       .eagerlyEvaluate([](kj::Exception&& exception) {
                         spdlog::warn("leader election: following the leader failed: {}",
                                      exception.getDescription().cStr());
                       });
}

void ZooKeeperLeaderElection::onLeaderRecordChanged(uint64_t generation,
                                                    const ha::WatchEvent& event) {
  if (event.type == WatchEvent::Type::kSessionLost) return;
  // Only a standby parked on its predecessor looks again; any other phase is busy already.
  if (generation != generation_ || phase_ != Phase::kWatchingPredecessor) return;
  spdlog::debug("leader election: the leader node changed; latch {} checks again",
                latch_.value_or("?"));
  checkLeadership(nextGeneration());
}

void ZooKeeperLeaderElection::stopFollowingLeaderProcess() {
  livenessWatch_ = nullptr;
  ++follow_;
}

void ZooKeeperLeaderElection::lookForLeaderReplacement(uint64_t generation, uint64_t follow,
                                                       const GoneLeader& leader) {
  if (generation != generation_ || follow != follow_) return;
  // The latch folder is watched once per leader followed; a change looks again.
  if (replacementLookFollow_ != follow) {
    replacementLookFollow_ = follow;
    track(generation, zk_.childrenAndWatch(kLatchFolder),
          [this, generation, follow,
           leader](ha::Watched<std::vector<std::string>>&& listed) mutable {
            if (!listed.reply.ok()) return;
            KJ_IF_MAYBE (watch, listed.watch) {
              track(generation, kj::mv(*watch),
                    [this, generation, follow, leader](WatchEvent&& event) {
                      if (event.type == WatchEvent::Type::kSessionLost) return;
                      if (generation != generation_ || follow != follow_) return;
                      replacementLookFollow_ = 0;  // Watch again, and look.
                      lookForLeaderReplacement(generation, follow, leader);
                    });
            }
          });
  }
  track(generation, latchGroup_.readMembers(),
        [this, generation, follow,
         leader](ZkReply<std::vector<LatchGroup::MemberRead>>&& members) {
          if (!members.ok() || follow != follow_) return;
          for (const LatchGroup::MemberRead& member : members.value) {
            if (member.name == leader.latch || member.name == latch_ || !member.node.ok()) {
              continue;
            }
            auto contender = contenderInfoFromJson(member.node.value.data);
            if (!contender.ok()) continue;
            const ContenderInfo& info = contender.value();
            // Two live processes cannot both serve one address on one host: one that started on
            // the leader's host and address, under another id, after the leader won its term, is
            // the leader's successor there. (One that started before is no proof: masters that
            // advertise one address by mistake would otherwise depose each other.)
            if (info.rpcAddress != leader.rpcAddress || info.host != leader.host ||
                info.masterId == leader.masterId || info.startedAtMs <= leader.electedAtMs) {
              continue;
            }
            return removeGoneLeader(generation, leader,
                                    "its connection ended, and its address on host " +
                                        leader.host + " is served by a new process, master " +
                                        info.masterId + " of latch " + member.name);
          }
        });
}

void ZooKeeperLeaderElection::removeGoneLeader(uint64_t generation, const GoneLeader& gone,
                                               const std::string& why) {
  stopFollowingLeaderProcess();
  spdlog::info(
      "leader election: the leader of epoch={} at {} is gone ({}); latch {} removes its latch {} "
      "and the leader node",
      gone.epoch, gone.rpcAddress, why, latch_.value_or("?"), gone.latch);
  std::vector<ZkOp> ops = {
      ZkOp::check(kEpochPath, gone.epochVersion),
      ZkOp::remove(kLeaderPath, gone.leaderVersion),
      ZkOp::remove(LatchGroup::pathOf(gone.latch), gone.latchVersion),
  };
  track(generation, zk_.multi(kj::mv(ops)), [gone](ZkReply<std::vector<ha::ZkOpResult>>&& reply) {
    if (reply.ok()) {
      // The predecessor watch fires: this contender checks again and is the lowest.
      spdlog::info(
          "leader election: removed the latch {} and the leader node of session "
          "0x{:x}",
          gone.latch, gone.session);
      return;
    }
    // kBadVersion or kNoNode: a term was won, the record changed or a node went since they
    // were read; the watches look again. Anything else: the session ends it as before.
    spdlog::info(
        "leader election: removing the nodes of the gone leader of epoch={} failed with {}; "
        "looking again or waiting for its session",
        gone.epoch, zkCodeName(reply.code));
  });
}

void ZooKeeperLeaderElection::releaseStaleLeader(uint64_t generation) {
  track(generation, zk_.exists(kLeaderPath),
        [this, generation](ZkReply<std::optional<ha::NodeStat>>&& reply) {
          if (!reply.ok()) return fail(generation, "look at the leader node", reply.code);
          if (!reply.value || reply.value->ephemeralOwner != zk_.sessionId()) {
            leaderNode_ = LeaderNode::kNotOurs;
            return checkLeadership(generation);
          }
          spdlog::info(
              "leader election: latch {} is not the lowest; removing the leader node our "
              "session holds for no term",
              latch_.value_or("?"));
          leaderNode_ = LeaderNode::kOurs;
          leaderVersion_ = reply.value->version;
          removeStaleLeader(generation, reply.value->version, /*lowest=*/false);
        });
}

bool ZooKeeperLeaderElection::isPreviousSession(int64_t owner) const {
  return owner != 0 && owner != zk_.sessionId() &&
         std::find(endedSessions_.begin(), endedSessions_.end(), owner) != endedSessions_.end();
}

void ZooKeeperLeaderElection::removePreviousSessionLeader(uint64_t generation) {
  setPhase(Phase::kJoining);
  // The epoch node's version first: every win changes it, so a check of it in the removal's
  // transaction keeps a record won after this read (possibly at the same data version) safe.
  track(generation, zk_.exists(kEpochPath),
        [this, generation](ZkReply<std::optional<ha::NodeStat>>&& epoch) {
          if (!epoch.ok()) return fail(generation, "read the epoch node", epoch.code);
          // Without an epoch node no term was ever won: a `leader` then is not one of ours.
          if (!epoch.value) return removePreviousSessionLatches(generation);
          const int32_t epochVersion = epoch.value->version;
          track(generation, zk_.exists(kLeaderPath),
                [this, generation, epochVersion](ZkReply<std::optional<ha::NodeStat>>&& leader) {
                  if (!leader.ok()) return fail(generation, "look at the leader node", leader.code);
                  if (!leader.value || !isPreviousSession(leader.value->ephemeralOwner)) {
                    return removePreviousSessionLatches(generation);
                  }
                  const int64_t owner = leader.value->ephemeralOwner;
                  spdlog::info(
                      "leader election: the leader node is still held by our previous session "
                      "0x{:x}; removing it",
                      owner);
                  std::vector<ZkOp> ops = {
                      ZkOp::check(kEpochPath, epochVersion),
                      ZkOp::remove(kLeaderPath, leader.value->version),
                  };
                  track(generation, zk_.multi(kj::mv(ops)),
                        [this, generation, owner](ZkReply<std::vector<ha::ZkOpResult>>&& reply) {
                          if (reply.ok()) {
                            spdlog::info(
                                "leader election: removed the leader node of our previous "
                                "session 0x{:x}",
                                owner);
                            return removePreviousSessionLatches(generation);
                          }
                          // A term was won, or the node went or changed: look again.
                          if (reply.code == ZkCode::kBadVersion || reply.code == ZkCode::kNoNode) {
                            return removePreviousSessionLeader(generation);
                          }
                          fail(generation, "remove the leader node of our previous session",
                               reply.code);
                        });
                });
        });
}

void ZooKeeperLeaderElection::removePreviousSessionLatches(uint64_t generation) {
  track(generation, latchGroup_.readMembers(),
        [this, generation](ZkReply<std::vector<LatchGroup::MemberRead>>&& members) {
          if (!members.ok()) return fail(generation, "list the latch", members.code);
          std::vector<std::string> previous;
          for (auto& [name, node] : members.value) {
            if (node.code == ZkCode::kNoNode) continue;  // Gone since the listing.
            if (!node.ok()) return fail(generation, "read latch node " + name, node.code);
            if (!isPreviousSession(node.value.stat.ephemeralOwner)) continue;
            spdlog::info("leader election: removing latch {} of our previous session 0x{:x}",
                         name, node.value.stat.ephemeralOwner);
            previous.push_back(name);
          }
          auto done = [this]() {
            endedSessions_.clear();
            contend();
          };
          if (previous.empty()) return done();
          track(generation, latchGroup_.cancelAll(kj::mv(previous)),
                [this, generation, done](ZkCode code) {
                  if (code != ZkCode::kOk) {
                    return fail(generation, "remove a latch node of our previous session", code);
                  }
                  done();
                });
        });
}

void ZooKeeperLeaderElection::tryWin(uint64_t generation) {
  if (!latch_) return contend();
  setPhase(Phase::kWinning);
  track(generation, zk_.get(kEpochPath), [this, generation](ZkReply<ha::NodeData>&& reply) {
    if (reply.code == ZkCode::kNoNode) {
      spdlog::info("leader election: creating the epoch node");
      track(generation, zk_.create(kEpochPath, "0", CreateMode::kPersistent),
            [this, generation](ZkReply<std::string>&& created) {
              if (!created.ok() && created.code != ZkCode::kNodeExists) {
                return fail(generation, "create the epoch node", created.code);
              }
              tryWin(generation);
            });
      return;
    }
    if (!reply.ok()) return fail(generation, "read the epoch", reply.code);
    if (!latch_) return contend();
    auto last = parseEpoch(reply.value.data);
    if (!last) {
      spdlog::error("leader election: the epoch node {} holds \"{}\", not a decimal number",
                    nodeName(kEpochPath), reply.value.data);
      return fail(generation, "read the epoch", OwnFailure::kEpochNotANumber);
    }
    if (*last == std::numeric_limits<uint64_t>::max()) {
      // Epoch 0 means "no term" everywhere, and workers accept only rising epochs: a wrap would
      // leave the cluster without a usable term for good.
      spdlog::error(
          "leader election: the epoch node {} holds {}, the largest epoch; the next term would "
          "wrap to 0, so none is taken (a fresh cluster-id starts the epochs again)",
          nodeName(kEpochPath), *last);
      return fail(generation, "take the next epoch", OwnFailure::kEpochExhausted);
    }
    LeaderInfo info = leaderInfoFor(self_, *last + 1, wallClockMillis());
    std::vector<ZkOp> ops = {
        ZkOp::check(latchPath()),
        ZkOp::create(kLeaderPath, toJson(info), CreateMode::kEphemeral),
        ZkOp::setData(kEpochPath, std::to_string(info.epoch), reply.value.stat.version),
    };
    spdlog::debug("leader election: latch {} sends the win transaction for epoch={}", *latch_,
                  info.epoch);
    int64_t sessionId = zk_.sessionId();
    ++winsInFlight_;
    // Not tracked: a win that lands after its attempt was abandoned must still be dealt with.
    tasks_.add(
        zk_.multi(kj::mv(ops))
            .then(
                [this, generation, sessionId, info](ZkReply<std::vector<ha::ZkOpResult>>&& reply) {
                  KJ_DEFER(winSettled());
                  onWinReply(generation, sessionId, info, kj::mv(reply));
                },
                [this](kj::Exception&& exception) {
                  winSettled();
                  kj::throwFatalException(kj::mv(exception));
                }));
  });
}

void ZooKeeperLeaderElection::onWinReply(uint64_t generation, int64_t sessionId,
                                         const LeaderInfo& info,
                                         ZkReply<std::vector<ha::ZkOpResult>>&& reply) {
  if (generation != generation_) {
    // A `leader` of another session went with it; while leading, the node is the term's own.
    if (leading_ || zk_.sessionId() != sessionId) return;
    if (reply.ok()) {
      leaderNode_ = LeaderNode::kOurs;
      leaderVersion_ = 0;
    } else if (ha::isTransient(reply.code)) {
      if (leaderNode_ == LeaderNode::kNotOurs) leaderNode_ = LeaderNode::kMaybeOurs;
    } else {
      return;
    }
    spdlog::warn(
        "leader election: the win transaction for epoch={} of an abandoned attempt {}; "
        "the leader node is adopted or removed",
        info.epoch, reply.ok() ? "was applied" : "may have been applied");
    // A hand-over removes it in its own transaction. Otherwise the current attempt, which may be
    // parked behind a predecessor, starts again: the lowest latch adopts the term, any other one
    // removes the node.
    if (phase_ != Phase::kHandingOver) contend();
    return;
  }
  if (reply.ok()) {
    leaderNode_ = LeaderNode::kOurs;
    leaderVersion_ = 0;
    return grant(generation, info);
  }
  const std::optional<size_t> failed = ha::failedOperation(reply);
  if (failed == 0u && reply.code == ZkCode::kNoNode) {
    spdlog::info("leader election: latch {} vanished before the win; contending again",
                 latch_.value_or("?"));
    latch_.reset();
    return contend();
  }
  if (failed == 1u && reply.code == ZkCode::kNodeExists) return awaitLeaderGone(generation);
  if (failed == 2u && (reply.code == ZkCode::kBadVersion || reply.code == ZkCode::kNoNode)) {
    spdlog::debug("leader election: the epoch moved under latch {}; reading it again",
                  latch_.value_or("?"));
    return tryWin(generation);
  }
  // A lost reply: the transaction may have been applied; the next try finds out.
  if (ha::isTransient(reply.code) && leaderNode_ == LeaderNode::kNotOurs) {
    leaderNode_ = LeaderNode::kMaybeOurs;
  }
  fail(generation, "send the win transaction", reply.code);
}

// `leader` exists although our latch node is the lowest: held by our own session (a term nobody
// was told about is adopted, anything else deleted) or by the previous leader's session that has
// not ended yet (wait for it).
void ZooKeeperLeaderElection::awaitLeaderGone(uint64_t generation) {
  track(generation, zk_.get(kLeaderPath), [this, generation](ZkReply<ha::NodeData>&& reply) {
    if (reply.code == ZkCode::kNoNode) return tryWin(generation);
    if (!reply.ok()) return fail(generation, "read the leader node", reply.code);
    if (reply.value.stat.ephemeralOwner == zk_.sessionId()) {
      return claimOwnLeaderNode(generation, reply.value);
    }
    spdlog::info(
        "leader election: latch {} is the lowest but the leader node is still held "
        "by session 0x{:x}; waiting for it to go",
        latch_.value_or("?"), reply.value.stat.ephemeralOwner);
    track(generation, zk_.existsAndWatch(kLeaderPath),
          [this, generation](ha::Watched<std::optional<ha::NodeStat>>&& watched) {
            if (!watched.reply.ok()) {
              return fail(generation, "watch the leader node", watched.reply.code);
            }
            if (!watched.reply.value) return tryWin(generation);
            KJ_IF_MAYBE (watch, watched.watch) {
              track(generation, kj::mv(*watch), [this, generation](WatchEvent&& event) {
                if (event.type == WatchEvent::Type::kSessionLost) return;
                awaitLeaderGone(generation);
              });
            } else {
              fail(generation, "watch the leader node", OwnFailure::kNoWatchSet);
            }
          });
  });
}

void ZooKeeperLeaderElection::claimOwnLeaderNode(uint64_t generation, const ha::NodeData& node) {
  const int32_t version = node.stat.version;
  leaderNode_ = LeaderNode::kOurs;
  leaderVersion_ = version;
  auto record = leaderInfoFromJson(node.data);
  if (!record.ok() || record.value().masterId != self_.masterId ||
      record.value().epoch <= lastGrantedEpoch_) {
    spdlog::info("leader election: leader node is left from our own session; removing it");
    return removeStaleLeader(generation, version, /*lowest=*/true);
  }
  LeaderInfo info = record.value();
  track(generation, zk_.get(kEpochPath),
        [this, generation, info, version](ZkReply<ha::NodeData>&& epochNode) {
          if (!epochNode.ok() && epochNode.code != ZkCode::kNoNode) {
            return fail(generation, "read the epoch", epochNode.code);
          }
          auto last = epochNode.ok() ? parseEpoch(epochNode.value.data) : std::nullopt;
          if (!last || *last != info.epoch) {
            spdlog::info(
                "leader election: leader node of our own session holds epoch={} but the epoch "
                "node does not; removing it",
                info.epoch);
            return removeStaleLeader(generation, version, /*lowest=*/true);
          }
          // Our latch node (hence still the lowest), the record and the epoch, all unchanged.
          std::vector<ZkOp> ops = {
              ZkOp::check(latchPath()),
              ZkOp::check(kLeaderPath, version),
              ZkOp::check(kEpochPath, epochNode.value.stat.version),
          };
          track(generation, zk_.multi(kj::mv(ops)),
                [this, generation, info, version](ZkReply<std::vector<ha::ZkOpResult>>&& reply) {
                  if (reply.ok()) {
                    spdlog::info(
                        "leader election: latch {} adopts epoch={}, won by a transaction "
                        "whose reply never came",
                        latch_.value_or("?"), info.epoch);
                    leaderNode_ = LeaderNode::kOurs;
                    leaderVersion_ = version;
                    return grant(generation, info);
                  }
                  if (ha::failedOperation(reply) == 0u && reply.code == ZkCode::kNoNode) {
                    spdlog::info("leader election: latch {} vanished; contending again",
                                 latch_.value_or("?"));
                    latch_.reset();
                    return contend();
                  }
                  if (reply.code == ZkCode::kNoNode || reply.code == ZkCode::kBadVersion) {
                    return checkLeadership(generation);  // Something moved: look again.
                  }
                  fail(generation, "check our own leader node", reply.code);
                });
        });
}

void ZooKeeperLeaderElection::removeStaleLeader(uint64_t generation, int32_t version, bool lowest) {
  leaderNode_ = LeaderNode::kMaybeOurs;  // Until the reply comes (see removeOwnNodes).
  track(generation, zk_.remove(kLeaderPath, version),
        [this, generation, lowest](ZkReply<bool>&& removed) {
          if (removed.ok() || removed.code == ZkCode::kNoNode) {
            leaderNode_ = LeaderNode::kNotOurs;
            return lowest ? tryWin(generation) : checkLeadership(generation);
          }
          if (removed.code == ZkCode::kBadVersion) return checkLeadership(generation);
          // Still ours: tried again by the retry, or removed with our nodes later.
          fail(generation, "remove our stale leader node", removed.code);
        });
}

void ZooKeeperLeaderElection::grant(uint64_t generation, const LeaderInfo& info) {
  KJ_ASSERT(!leading_, "granting while a term is still open");
  leading_ = true;
  epoch_ = info.epoch;
  lastGrantedEpoch_ = std::max(lastGrantedEpoch_, info.epoch);
  leaderInfo_ = info;
  backoff_.reset();
  setPhase(Phase::kLeading);
  spdlog::info("leader election: latch {} won the term epoch={} master_id={}", latch_.value_or("?"),
               epoch_, self_.masterId);
  contender_->grantLeadership(ha::WriterFence{info.epoch, latchPath()});
  // The contender may have handed over from inside the callback.
  if (generation != generation_ || !leading_) return;
  if (zk_.sessionState() == SessionState::kSuspended) onSuspendedWhileLeading();
  if (generation != generation_ || !leading_) return;
  watchOwnLatch(generation);
}

void ZooKeeperLeaderElection::watchOwnLatch(uint64_t generation) {
  ownLatchWatchArmed_ = true;
  track(generation, latchGroup_.watch(latch_.value_or("")),
        [this, generation](ha::Watched<std::optional<ha::NodeStat>>&& watched) {
          if (!watched.reply.ok()) {
            ownLatchWatchArmed_ = false;
            return fail(generation, "watch own latch", watched.reply.code);
          }
          if (!watched.reply.value) {
            ownLatchWatchArmed_ = false;
            return onOwnLatchDeleted();
          }
          KJ_IF_MAYBE (watch, watched.watch) {
            track(generation, kj::mv(*watch), [this, generation](WatchEvent&& event) {
              ownLatchWatchArmed_ = false;
              if (event.type == WatchEvent::Type::kSessionLost) return;
              if (event.type == WatchEvent::Type::kDeleted) return onOwnLatchDeleted();
              watchOwnLatch(generation);
            });
          } else {
            ownLatchWatchArmed_ = false;
            fail(generation, "watch own latch", OwnFailure::kNoWatchSet);
          }
        });
}

void ZooKeeperLeaderElection::onOwnLatchDeleted() {
  latch_.reset();
  // Removed by an administrator, or with `leader` by the next standby that took our process for
  // gone (fast failover), which may have won a term since with a new `leader` at the version ours
  // had: `leader` is removed only after a look at its owner.
  if (leaderNode_ == LeaderNode::kOurs) leaderNode_ = LeaderNode::kMaybeOurs;
  loseLeadership("latch node deleted");
}

// ---------------------------------------------------------------------------------------------
// Failures and retries

const char* ZooKeeperLeaderElection::ownFailureName(OwnFailure failure) {
  switch (failure) {
    case OwnFailure::kNoWatchSet: return "no watch set";
    case OwnFailure::kEpochNotANumber: return "the epoch node is not a number";
    case OwnFailure::kEpochExhausted:
      return "the epoch node holds the largest epoch; the next would wrap to 0";
  }
  return "?";
}

void ZooKeeperLeaderElection::fail(uint64_t generation, const std::string& what, ZkCode code) {
  if (generation != generation_) return;
  if (ha::isTransient(code) || ha::endsSession(code)) {
    spdlog::info("leader election: {} failed with {} (latch {}); retrying", what, zkCodeName(code),
                 latch_.value_or("none"));
    // The session's own events decide what happens while it is not usable.
    if (!sessionUsable()) return;
    return retryLater(generation);
  }
  failForGood(what, zkCodeName(code));
}

void ZooKeeperLeaderElection::fail(uint64_t generation, const std::string& what,
                                   OwnFailure failure) {
  if (generation != generation_) return;
  failForGood(what, ownFailureName(failure));
}

void ZooKeeperLeaderElection::failForGood(const std::string& what, const char* cause) {
  spdlog::error("leader election: {} failed: {} (latch {}, epoch={}); retrying with backoff", what,
                cause, latch_.value_or("none"), epoch_);
  if (leading_) {
    revoke(std::string("error: ") + what + " failed: " + cause);
    relinquishPending_ = true;
  }
  // The attempt ends here: the retry is a new one.
  retryLater(nextGeneration());
}

void ZooKeeperLeaderElection::retryLater(uint64_t generation) {
  const Duration delay = backoff_.next();
  spdlog::debug("leader election: next try in {} ms", delay.count());
  tasks_.add(timer_.afterDelay(delay.count() * kj::MILLISECONDS).then([this, generation] {
    if (generation != generation_) return;
    resume();
  }));
}

void ZooKeeperLeaderElection::winSettled() {
  if (--winsInFlight_ > 0) return;
  auto waiters = kj::mv(winWaiters_);
  winWaiters_.clear();
  for (auto& waiter : waiters) waiter->fulfill();
}

kj::Promise<void> ZooKeeperLeaderElection::winsSettled() {
  if (winsInFlight_ == 0) return kj::READY_NOW;
  auto paf = kj::newPromiseAndFulfiller<void>();
  winWaiters_.push_back(kj::mv(paf.fulfiller));
  return kj::mv(paf.promise);
}

// ---------------------------------------------------------------------------------------------
// Session

void ZooKeeperLeaderElection::onSessionState(SessionState state) {
  spdlog::debug("leader election: session {} (latch {}, epoch={})", ha::sessionStateName(state),
                latch_.value_or("none"), epoch_);
  switch (state) {
    case SessionState::kConnecting:
      break;
    case SessionState::kConnected:
      // A new session: the first one, or the one after an expiry. A listener registered just
      // after the connect may still hear that connect: the attempt already runs in it.
      if (!leading_ && zk_.sessionId() != attemptSession_) contend();
      break;
    case SessionState::kSuspended:
      if (leading_) onSuspendedWhileLeading();
      break;
    case SessionState::kReconnected:
      if (toleranceRunning_) {
        spdlog::info(
            "leader election: connection back within the suspend tolerance; still "
            "leading epoch={}",
            epoch_);
      }
      cancelTolerance();
      resume();
      latchGroup_.resumeOrphanRemoval();
      break;
    case SessionState::kExpired:
    case SessionState::kClosed:
      cancelTolerance();
      nextGeneration();
      revoke(state == SessionState::kExpired ? "session expired" : "session closed");
      // The server may still hold that session's nodes; a closed one ends at the server too.
      if (state == SessionState::kExpired && attemptSession_ != 0 &&
          std::find(endedSessions_.begin(), endedSessions_.end(), attemptSession_) ==
              endedSessions_.end()) {
        constexpr size_t kMaxEndedSessions = 8;
        if (endedSessions_.size() == kMaxEndedSessions) endedSessions_.erase(endedSessions_.begin());
        endedSessions_.push_back(attemptSession_);
      }
      // Every ephemeral node of the session is gone with it.
      latch_.reset();
      latchMaybeCreated_ = false;
      leaderNode_ = LeaderNode::kNotOurs;
      relinquishPending_ = false;
      attemptSession_ = 0;
      latchGroup_.forgetOrphans();
      if (active()) setPhase(Phase::kJoining);
      break;
  }
}

uint64_t ZooKeeperLeaderElection::currentEpoch() const {
  if (!leading_ || !ha::withinSessionDeadline(zk_, std::chrono::steady_clock::now())) return 0;
  return epoch_;
}

void ZooKeeperLeaderElection::onSuspendedWhileLeading() {
  // Never more than a third of the negotiated session timeout, and that much when unset
  // (docs/leader-election.md); never past the session's deadline, which counts from the last
  // answer heard, not from now.
  const Duration third = zk_.negotiatedSessionTimeout() / 3;
  Duration tolerance = std::min(options_.suspendTolerance.value_or(third), third);
  if (const std::optional<MonoTime> deadline = zk_.sessionDeadline()) {
    tolerance = std::min(tolerance, std::chrono::duration_cast<Duration>(
                                        *deadline - std::chrono::steady_clock::now()));
  } else {
    tolerance = Duration(0);
  }
  if (tolerance <= Duration(0)) return loseLeadership("connection lost");
  if (toleranceRunning_) return;
  spdlog::info("leader election: connection lost; keeping epoch={} for up to {} ms", epoch_,
               tolerance.count());
  uint64_t toleranceGeneration = ++toleranceGeneration_;
  toleranceRunning_ = true;
  tasks_.add(
      timer_.afterDelay(tolerance.count() * kj::MILLISECONDS).then([this, toleranceGeneration] {
        if (toleranceGeneration != toleranceGeneration_) return;
        toleranceRunning_ = false;
        if (leading_ && zk_.sessionState() == SessionState::kSuspended) {
          loseLeadership("connection lost");
        }
      }));
}

void ZooKeeperLeaderElection::cancelTolerance() {
  ++toleranceGeneration_;
  toleranceRunning_ = false;
}

void ZooKeeperLeaderElection::loseLeadership(const std::string& reason) {
  revoke(reason);
  relinquishPending_ = true;
  if (sessionUsable()) {
    contend();
  } else {
    nextGeneration();  // Continues on kReconnected, or anew on kConnected after an expiry.
  }
}

void ZooKeeperLeaderElection::revoke(const std::string& reason) {
  if (!leading_) return;
  uint64_t epoch = epoch_;
  leading_ = false;
  epoch_ = 0;
  if (phase_ == Phase::kLeading) setPhase(Phase::kJoining);  // Re-contention follows.
  cancelTolerance();
  spdlog::info("leader election: the term epoch={} of latch {} ended: {}", epoch,
               latch_.value_or("none"), reason);
  contender_->revokeLeadership(epoch, reason);
}

// ---------------------------------------------------------------------------------------------
// Serving and hand-over

kj::Promise<Status> ZooKeeperLeaderElection::markServing(uint64_t epoch) {
  if (!leading_ || epoch != epoch_ || !latch_) {
    return Status(Error::fatal(
        "epoch " + std::to_string(epoch) + " is not the current term (" +
        (leading_ ? "current epoch " + std::to_string(epoch_) : std::string("not leading")) + ")"));
  }
  LeaderInfo info = leaderInfo_;
  info.status = LeaderStatus::kServing;
  std::vector<ZkOp> ops = {
      ZkOp::check(latchPath()),
      ZkOp::setData(kLeaderPath, toJson(info), leaderVersion_),
  };
  return zk_.multi(kj::mv(ops))
      .then([this, epoch, info](ZkReply<std::vector<ha::ZkOpResult>>&& reply) -> Status {
        if (!reply.ok()) {
          std::string message = "marking epoch " + std::to_string(epoch) + " serving failed with " +
                                zkCodeName(reply.code);
          spdlog::warn("leader election: {}", message);
          // A term whose session ended cannot be marked any more.
          return ha::isTransient(reply.code) ? Error::retryable(message) : Error::fatal(message);
        }
        // The term may have ended while the update was in flight: nothing of it is kept then.
        if (leading_ && epoch_ == epoch) {
          leaderInfo_ = info;
          if (leaderNode_ == LeaderNode::kOurs && reply.value.size() == 2) {
            leaderVersion_ = reply.value[1].stat.version;
          }
        }
        spdlog::info("leader election: epoch={} is SERVING latch={}", epoch,
                     latch_.value_or("none"));
        return Status();
      });
}

kj::Promise<Status> ZooKeeperLeaderElection::handOver(bool recontend) {
  if (phase_ == Phase::kHandingOver) {
    if (!recontend) recontendAfterHandOver_ = false;
    return KJ_ASSERT_NONNULL(handOverDone_).addBranch();
  }
  if (phase_ == Phase::kStopped) return Status();
  recontendAfterHandOver_ = recontend;
  setPhase(Phase::kHandingOver);
  // Nothing of the current attempt acts from now on; within the hand-over the generation moves
  // again only when the session ends.
  uint64_t generation = nextGeneration();
  cancelTolerance();
  // Deferred: the contender is never called from inside one of our own methods.
  kj::Promise<Status> done =
      kj::evalLater([this] {
        revoke("handed over");
        // A win in flight may still create `leader`: it goes in the same transaction.
        return winsSettled();
      })
          .then([this, generation]() -> kj::Promise<Removal> {
            if (generation != generation_) return Removal();
            spdlog::info("leader election: handing over; removing leader (if ours) and latch {}",
                         latch_.value_or("none"));
            return removeOwnNodes(generation);
          })
          .then([this, generation](Removal removal) -> Status {
            Status outcome;
            const std::string timeout =
                std::to_string(zk_.negotiatedSessionTimeout().count()) + " ms";
            if (!removal || generation != generation_) {
              outcome = Error::retryable(
                  "the ZooKeeper session ended during the hand-over; leader and latch nodes of "
                  "that session stay until the server expires it (session timeout " +
                  timeout + ")");
            } else if (*removal != ZkCode::kOk) {
              outcome = Error::retryable(
                  std::string("the hand-over transaction failed with ") + zkCodeName(*removal) +
                  "; the leader node stays until this master removes it or its session ends "
                  "(session timeout " + timeout + ")");
              if (recontendAfterHandOver_) relinquishPending_ = true;
            }
            if (outcome.ok()) {
              spdlog::info("leader election: handed over");
            } else {
              spdlog::warn("leader election: the hand-over did not apply: {}",
                           outcome.error().message);
            }
            if (!recontendAfterHandOver_) {
              setPhase(Phase::kStopped);
            } else if (contender_ == nullptr) {
              setPhase(Phase::kIdle);
            } else {
              setPhase(Phase::kJoining);
              contend();
            }
            return outcome;
          });
  handOverDone_ = done.fork();
  return KJ_ASSERT_NONNULL(handOverDone_).addBranch();
}

kj::Promise<ZooKeeperLeaderElection::Removal> ZooKeeperLeaderElection::removeOwnNodes(
    uint64_t generation) {
  if (leaderNode_ == LeaderNode::kMaybeOurs) return removeOwnNodesStepByStep(generation);
  std::vector<ZkOp> ops;
  if (leaderNode_ == LeaderNode::kOurs) {
    ops.push_back(ZkOp::remove(kLeaderPath, leaderVersion_));
    // Until a reply says how it went: once removed, `leader` may become another contender's at
    // the same version, so a later try must look at its owner first.
    leaderNode_ = LeaderNode::kMaybeOurs;
  }
  if (latch_) ops.push_back(ZkOp::remove(latchPath()));
  if (ops.empty()) return Removal(ZkCode::kOk);
  return zk_.multi(kj::mv(ops))
      .then(
          [this, generation](ZkReply<std::vector<ha::ZkOpResult>>&& reply) -> kj::Promise<Removal> {
            if (generation != generation_) return Removal();
            if (reply.ok()) {
              leaderNode_ = LeaderNode::kNotOurs;
              latch_.reset();
              return Removal(ZkCode::kOk);
            }
            if (reply.code == ZkCode::kNoNode || reply.code == ZkCode::kBadVersion) {
              return removeOwnNodesStepByStep(generation);
            }
            return Removal(reply.code);
          });
}

kj::Promise<ZooKeeperLeaderElection::Removal> ZooKeeperLeaderElection::removeOwnNodesStepByStep(
    uint64_t generation) {
  // The nodes of this attempt: a later attempt (another session even) may have new ones.
  const int64_t session = zk_.sessionId();
  const std::optional<std::string> latch = latch_;
  // nullopt between the steps: the attempt was abandoned.
  using Step = std::optional<ZkReply<bool>>;
  return zk_.exists(kLeaderPath)
      .then([this, generation,
             session](ZkReply<std::optional<ha::NodeStat>>&& leader) -> kj::Promise<Step> {
        if (generation != generation_) return Step();
        if (!leader.ok()) return Step(ZkReply<bool>{leader.code, false});
        if (!leader.value || leader.value->ephemeralOwner != session) {
          leaderNode_ = LeaderNode::kNotOurs;
          return Step(ZkReply<bool>{ZkCode::kOk, false});
        }
        leaderNode_ = LeaderNode::kMaybeOurs;  // Until the reply comes.
        return zk_.remove(kLeaderPath, leader.value->version).then([](ZkReply<bool>&& removed) {
          return Step(kj::mv(removed));
        });
      })
      .then([this, generation, latch](Step&& removed) -> kj::Promise<Step> {
        if (!removed || generation != generation_) return Step();
        if (!removed->ok() && removed->code != ZkCode::kNoNode) return kj::mv(removed);
        leaderNode_ = LeaderNode::kNotOurs;
        if (!latch) return Step(ZkReply<bool>{ZkCode::kOk, false});
        return latchGroup_.cancel(*latch).then(
            [](ZkReply<bool>&& cancelled) { return Step(kj::mv(cancelled)); });
      })
      .then([this, generation, latch](Step&& removed) -> Removal {
        if (!removed || generation != generation_) return Removal();
        if (!removed->ok() && removed->code != ZkCode::kNoNode) return Removal(removed->code);
        if (latch_ == latch) latch_.reset();
        return Removal(ZkCode::kOk);
      });
}

}  // namespace regent::leader

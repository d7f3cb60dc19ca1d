// ZooKeeperLeaderElection: the latch, the winning transaction, revocation on every kind of loss
// and re-contention (DESIGN §5). The class comment in the header states the contract.
#include "leader/zookeeper_leader_election.h"

#include <kj/debug.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <vector>

#include "leader/latch_names.h"

namespace regent::leader {

using ha::CreateMode;
using ha::SessionState;
using ha::WatchEvent;
using ha::ZkCode;
using ha::zkCodeName;
using ha::ZkOp;
using ha::ZkReply;

namespace {

constexpr const char* kLatchDir = "latch";
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

class ZooKeeperLeaderElection::ErrorHandler final : public kj::TaskSet::ErrorHandler {
 public:
  void taskFailed(kj::Exception&& exception) override {
    // The client rejects in-flight operations when it is destroyed; nothing else should throw.
    spdlog::warn("leader election: an operation failed: {}", exception.getDescription().cStr());
  }
};

ZooKeeperLeaderElection::ZooKeeperLeaderElection(ha::Coordination& zk, kj::Timer& timer,
                                                 ContenderInfo self,
                                                 ZooKeeperLeaderElectionOptions options)
    : zk_(zk),
      timer_(timer),
      self_(std::move(self)),
      options_(options),
      backoff_(options.initialBackoff),
      errorHandler_(kj::heap<ErrorHandler>()),
      tasks_(*errorHandler_) {}

ZooKeeperLeaderElection::~ZooKeeperLeaderElection() noexcept = default;

template <typename T, typename Func>
void ZooKeeperLeaderElection::track(uint64_t generation, kj::Promise<T>&& promise, Func&& then) {
  tasks_.add(promise.then([this, generation, then = kj::fwd<Func>(then)](T&& value) mutable {
    if (generation != generation_) return;
    then(kj::mv(value));
  }));
}

std::string ZooKeeperLeaderElection::latchPath() const {
  return std::string(kLatchDir) + "/" + latch_.value_or("");
}

bool ZooKeeperLeaderElection::sessionUsable() const {
  SessionState state = zk_.sessionState();
  return state == SessionState::kConnected || state == SessionState::kReconnected;
}

// ---------------------------------------------------------------------------------------------
// Contending

void ZooKeeperLeaderElection::start(LeaderContender& contender) {
  KJ_REQUIRE(!started_, "ZooKeeperLeaderElection::start called twice");
  contender_ = &contender;
  started_ = true;
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
  if (!started_ || stopped_ || handingOver_) return;
  KJ_ASSERT(!leading_);
  uint64_t generation = ++generation_;
  attemptSession_ = zk_.sessionId();
  if (relinquishPending_) {
    spdlog::info(
        "leader election: removing leader (if ours) and old latch {} before contending "
        "again",
        latch_.value_or("(none)"));
    tasks_.add(removeOwnNodes().then([this, generation](ZkCode code) {
      if (generation != generation_) return;
      if (code != ZkCode::kOk) return fail(generation, "remove leader and old latch node", code);
      relinquishPending_ = false;
      latch_.reset();
      createLatch(generation);
    }));
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
  if (!started_ || stopped_ || handingOver_) return;
  if (leading_) {
    watchOwnLatch(++generation_);
  } else {
    contend();
  }
}

void ZooKeeperLeaderElection::createLatch(uint64_t generation) {
  track(generation, zk_.ensurePath(kLatchDir), [this, generation](ZkReply<bool>&& reply) {
    if (!reply.ok() && reply.code != ZkCode::kNodeExists) {
      return fail(generation, "create the latch path", reply.code);
    }
    latchMaybeCreated_ = true;  // Until the reply says otherwise.
    int64_t sessionId = zk_.sessionId();
    // Not tracked: a node created for an abandoned attempt must still be cleaned up.
    tasks_.add(
        zk_.create(std::string(kLatchDir) + "/m-", toJson(self_), CreateMode::kEphemeralSequential)
            .then([this, generation, sessionId](ZkReply<std::string>&& reply) {
              std::string name = reply.ok() ? latchNodeName(reply.value) : "";
              if (generation != generation_) {
                if (reply.ok() && zk_.sessionId() == sessionId && name != latch_) {
                  spdlog::info("leader election: removing latch {} of an abandoned attempt", name);
                  tasks_.add(
                      zk_.remove(std::string(kLatchDir) + "/" + name).then([](ZkReply<bool>&&) {}));
                }
                return;
              }
              if (!reply.ok()) {
                // Only a lost reply leaves the outcome open.
                if (!ha::isRetryable(reply.code)) latchMaybeCreated_ = false;
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
void ZooKeeperLeaderElection::findOwnLatch(uint64_t generation) {
  track(generation, zk_.children(kLatchDir),
        [this, generation](ZkReply<std::vector<std::string>>&& reply) {
          if (reply.code == ZkCode::kNoNode) {
            latchMaybeCreated_ = false;
            return createLatch(generation);
          }
          if (!reply.ok()) return fail(generation, "list the latch", reply.code);
          auto names = sortedLatchNodes(reply.value);
          auto reads =
              kj::heapArrayBuilder<kj::Promise<std::pair<std::string, ZkReply<ha::NodeData>>>>(
                  names.size());
          for (const std::string& name : names) {
            reads.add(zk_.get(std::string(kLatchDir) + "/" + name)
                          .then([name](ZkReply<ha::NodeData>&& node) {
                            return std::make_pair(name, kj::mv(node));
                          }));
          }
          track(
              generation, kj::joinPromises(reads.finish()),
              [this, generation](kj::Array<std::pair<std::string, ZkReply<ha::NodeData>>>&& nodes) {
                ZkCode failure = ZkCode::kOk;
                for (auto& [name, node] : nodes) {
                  if (!node.ok()) {
                    if (node.code != ZkCode::kNoNode) failure = node.code;
                    continue;
                  }
                  if (node.value.stat.ephemeralOwner != zk_.sessionId()) continue;
                  auto info = contenderInfoFromJson(node.value.data);
                  if (!info || info.value().masterId != self_.masterId) continue;
                  latchMaybeCreated_ = false;
                  latch_ = name;
                  spdlog::info(
                      "leader election: found latch {} created before the connection "
                      "loss master_id={}",
                      name, self_.masterId);
                  return joined(generation);
                }
                if (failure != ZkCode::kOk) return fail(generation, "read latch nodes", failure);
                latchMaybeCreated_ = false;
                createLatch(generation);
              });
        });
}

void ZooKeeperLeaderElection::joined(uint64_t generation) {
  contender_->contending(*latch_);
  // The contender may have handed over from inside the callback.
  if (generation != generation_) return;
  checkLeadership(generation);
}

void ZooKeeperLeaderElection::checkLeadership(uint64_t generation) {
  track(generation, zk_.children(kLatchDir),
        [this, generation](ZkReply<std::vector<std::string>>&& reply) {
          if (!reply.ok() && reply.code != ZkCode::kNoNode) {
            return fail(generation, "list the latch", reply.code);
          }
          auto names = sortedLatchNodes(reply.value);
          auto own = std::find(names.begin(), names.end(), *latch_);
          if (own == names.end()) {
            spdlog::info("leader election: latch {} is gone; contending with a new one", *latch_);
            latch_.reset();
            return contend();
          }
          if (own == names.begin()) {
            spdlog::debug("leader election: latch {} is the lowest; trying to win", *latch_);
            return tryWin(generation);
          }
          std::string predecessor = *(own - 1);
          spdlog::debug("leader election: standby with latch {} ({} ahead); watching {}", *latch_,
                        own - names.begin(), predecessor);
          track(
              generation, zk_.existsAndWatch(std::string(kLatchDir) + "/" + predecessor),
              [this, generation, predecessor](ha::Watched<std::optional<ha::NodeStat>>&& watched) {
                if (!watched.reply.ok()) {
                  return fail(generation, "watch latch predecessor", watched.reply.code);
                }
                if (!watched.reply.value) return checkLeadership(generation);
                backoff_ = options_.initialBackoff;
                KJ_IF_MAYBE (watch, watched.watch) {
                  track(generation, kj::mv(*watch),
                        [this, generation, predecessor](WatchEvent&& event) {
                          if (event.type == WatchEvent::Type::kSessionLost) return;
                          spdlog::debug(
                              "leader election: predecessor {} changed; latch {} "
                              "checks again",
                              predecessor, latch_.value_or("?"));
                          checkLeadership(generation);
                        });
                } else {
                  fail(generation, "watch latch predecessor (no watch set)", ZkCode::kApiError);
                }
              });
        });
}

void ZooKeeperLeaderElection::tryWin(uint64_t generation) {
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
    auto last = parseEpoch(reply.value.data);
    if (!last) {
      spdlog::error("leader election: the epoch node holds \"{}\", not a decimal number",
                    reply.value.data);
      return fail(generation, "parse the epoch node", ZkCode::kMarshallingError);
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
    // Not tracked: a win that lands after its attempt was abandoned must still be undone.
    tasks_.add(zk_.multi(kj::mv(ops))
                   .then([this, generation, sessionId,
                          info](ZkReply<std::vector<ha::ZkOpResult>>&& reply) {
                     onWinReply(generation, sessionId, info, kj::mv(reply));
                   }));
  });
}

void ZooKeeperLeaderElection::onWinReply(uint64_t generation, int64_t sessionId,
                                         const LeaderInfo& info,
                                         ZkReply<std::vector<ha::ZkOpResult>>&& reply) {
  if (generation != generation_) {
    if (reply.ok() && zk_.sessionId() == sessionId && !leading_) {
      // Our session holds `leader` for a term nobody was told about: give it up.
      spdlog::warn("leader election: epoch={} was won by an abandoned attempt; removing leader",
                   info.epoch);
      leaderNode_ = LeaderNode::kNotOurs;
      tasks_.add(zk_.remove(kLeaderPath, 0).then([](ZkReply<bool>&&) {}));
    } else if (!reply.ok() && ha::isRetryable(reply.code) && zk_.sessionId() == sessionId) {
      leaderNode_ = LeaderNode::kMaybeOurs;
    }
    return;
  }
  if (reply.ok()) {
    leaderNode_ = LeaderNode::kOurs;
    leaderVersion_ = 0;
    return grant(generation, info);
  }
  // The first operation that failed; those after it report a runtime inconsistency.
  size_t failed = reply.value.size();
  for (size_t i = 0; i < reply.value.size(); ++i) {
    ZkCode code = reply.value[i].code;
    if (code != ZkCode::kOk && static_cast<int>(code) != -2 /* ZRUNTIMEINCONSISTENCY */) {
      failed = i;
      break;
    }
  }
  if (failed == 0 && reply.code == ZkCode::kNoNode) {
    spdlog::info("leader election: latch {} vanished before the win; contending again", *latch_);
    latch_.reset();
    return contend();
  }
  if (failed == 1 && reply.code == ZkCode::kNodeExists) return awaitLeaderGone(generation);
  if (failed == 2 && (reply.code == ZkCode::kBadVersion || reply.code == ZkCode::kNoNode)) {
    spdlog::debug("leader election: the epoch moved under latch {}; reading it again", *latch_);
    return tryWin(generation);
  }
  if (ha::isRetryable(reply.code)) leaderNode_ = LeaderNode::kMaybeOurs;
  fail(generation, "send the win transaction", reply.code);
}

// `leader` exists although our latch node is the lowest: left by our own session (delete it and
// try again) or by the previous leader's session that has not ended yet (wait for it).
void ZooKeeperLeaderElection::awaitLeaderGone(uint64_t generation) {
  track(generation, zk_.exists(kLeaderPath),
        [this, generation](ZkReply<std::optional<ha::NodeStat>>&& reply) {
          if (!reply.ok()) return fail(generation, "look at the leader node", reply.code);
          if (!reply.value) return tryWin(generation);
          if (reply.value->ephemeralOwner == zk_.sessionId()) {
            spdlog::info("leader election: leader node is left from our own session; removing it");
            track(generation, zk_.remove(kLeaderPath, reply.value->version),
                  [this, generation](ZkReply<bool>&& removed) {
                    if (!removed.ok() && removed.code != ZkCode::kNoNode &&
                        removed.code != ZkCode::kBadVersion) {
                      return fail(generation, "remove our stale leader node", removed.code);
                    }
                    leaderNode_ = LeaderNode::kNotOurs;
                    tryWin(generation);
                  });
            return;
          }
          spdlog::info(
              "leader election: latch {} is the lowest but the leader node is still held "
              "by session 0x{:x}; waiting for it to go",
              *latch_, reply.value->ephemeralOwner);
          track(generation, zk_.existsAndWatch(kLeaderPath),
                [this, generation](ha::Watched<std::optional<ha::NodeStat>>&& watched) {
                  if (!watched.reply.ok()) {
                    return fail(generation, "watch the leader node", watched.reply.code);
                  }
                  if (!watched.reply.value) return tryWin(generation);
                  KJ_IF_MAYBE (watch, watched.watch) {
                    track(generation, kj::mv(*watch), [this, generation](WatchEvent&& event) {
                      if (event.type == WatchEvent::Type::kSessionLost) return;
                      tryWin(generation);
                    });
                  } else {
                    fail(generation, "watch the leader node (no watch set)", ZkCode::kApiError);
                  }
                });
        });
}

void ZooKeeperLeaderElection::grant(uint64_t generation, const LeaderInfo& info) {
  KJ_ASSERT(!leading_, "granting while a term is still open");
  leading_ = true;
  epoch_ = info.epoch;
  leaderInfo_ = info;
  backoff_ = options_.initialBackoff;
  spdlog::info("leader election: latch {} won the term epoch={} master_id={}", *latch_, epoch_,
               self_.masterId);
  contender_->grantLeadership(info.epoch);
  // The contender may have handed over from inside the callback.
  if (generation != generation_ || !leading_) return;
  if (zk_.sessionState() == SessionState::kSuspended) onSuspendedWhileLeading();
  if (generation != generation_ || !leading_) return;
  watchOwnLatch(generation);
}

void ZooKeeperLeaderElection::watchOwnLatch(uint64_t generation) {
  track(generation, zk_.existsAndWatch(latchPath()),
        [this, generation](ha::Watched<std::optional<ha::NodeStat>>&& watched) {
          if (!watched.reply.ok()) return fail(generation, "watch own latch", watched.reply.code);
          if (!watched.reply.value) {
            latch_.reset();
            return loseLeadership("latch node deleted");
          }
          KJ_IF_MAYBE (watch, watched.watch) {
            track(generation, kj::mv(*watch), [this, generation](WatchEvent&& event) {
              if (event.type == WatchEvent::Type::kSessionLost) return;
              if (event.type == WatchEvent::Type::kDeleted) {
                latch_.reset();
                return loseLeadership("latch node deleted");
              }
              watchOwnLatch(generation);
            });
          } else {
            fail(generation, "watch own latch (no watch set)", ZkCode::kApiError);
          }
        });
}

// ---------------------------------------------------------------------------------------------
// Failures and retries

void ZooKeeperLeaderElection::fail(uint64_t generation, const std::string& what, ZkCode code) {
  if (generation != generation_) return;
  bool transient = ha::isRetryable(code) || code == ZkCode::kSessionExpired ||
                   code == ZkCode::kClosing || code == ZkCode::kInvalidState;
  if (transient) {
    spdlog::info("leader election: {} failed with {} (latch {}); retrying", what, zkCodeName(code),
                 latch_.value_or("none"));
    // The session's own events decide what happens while it is not usable.
    if (!sessionUsable()) return;
    return retryLater(generation);
  }
  spdlog::error("leader election: {} failed with {} (latch {}, epoch={}); retrying with backoff",
                what, zkCodeName(code), latch_.value_or("none"), epoch_);
  if (leading_) {
    revoke(std::string("error: ") + what + " failed with " + zkCodeName(code));
    relinquishPending_ = true;
  }
  retryLater(++generation_);
}

void ZooKeeperLeaderElection::retryLater(uint64_t generation) {
  Duration delay = backoff_;
  backoff_ = std::min(backoff_ * 2, options_.maxBackoff);
  spdlog::debug("leader election: next try in {} ms", delay.count());
  tasks_.add(timer_.afterDelay(delay.count() * kj::MILLISECONDS).then([this, generation] {
    if (generation != generation_) return;
    resume();
  }));
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
      break;
    case SessionState::kExpired:
    case SessionState::kClosed:
      cancelTolerance();
      ++generation_;
      revoke(state == SessionState::kExpired ? "session expired" : "session closed");
      // Every ephemeral node of the session is gone with it.
      latch_.reset();
      latchMaybeCreated_ = false;
      leaderNode_ = LeaderNode::kNotOurs;
      relinquishPending_ = false;
      attemptSession_ = 0;
      break;
  }
}

void ZooKeeperLeaderElection::onSuspendedWhileLeading() {
  Duration tolerance = std::min(options_.suspendTolerance, zk_.negotiatedSessionTimeout() / 3);
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
    ++generation_;  // Continues on kReconnected, or anew on kConnected after an expiry.
  }
}

void ZooKeeperLeaderElection::revoke(const std::string& reason) {
  if (!leading_) return;
  uint64_t epoch = epoch_;
  leading_ = false;
  epoch_ = 0;
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
          return ha::isRetryable(reply.code) ? Error::retryable(message) : Error::fatal(message);
        }
        if (leaderNode_ == LeaderNode::kOurs && reply.value.size() == 2) {
          leaderVersion_ = reply.value[1].stat.version;
        }
        if (leading_ && epoch_ == epoch) leaderInfo_ = info;
        spdlog::info("leader election: epoch={} is SERVING latch={}", epoch,
                     latch_.value_or("none"));
        return Status();
      });
}

kj::Promise<void> ZooKeeperLeaderElection::handOver(bool recontend) {
  if (stopped_ || handingOver_) return kj::READY_NOW;
  stopped_ = !recontend;
  handingOver_ = true;
  ++generation_;  // Nothing of the current attempt acts from now on.
  cancelTolerance();
  // Deferred: the contender is never called from inside one of our own methods.
  return kj::evalLater([this] {
           revoke("handed over");
           spdlog::info("leader election: handing over; removing leader (if ours) and latch {}",
                        latch_.value_or("none"));
           return removeOwnNodes();
         })
      .then([this, recontend](ZkCode code) {
        handingOver_ = false;
        if (code != ZkCode::kOk) {
          spdlog::warn(
              "leader election: hand-over transaction failed with {}; the session's "
              "end removes the nodes",
              zkCodeName(code));
          if (recontend) relinquishPending_ = true;
        } else {
          spdlog::info("leader election: handed over");
        }
        if (!recontend || !started_) return;
        if (sessionUsable()) contend();
      });
}

kj::Promise<ZkCode> ZooKeeperLeaderElection::removeOwnNodes() {
  if (leaderNode_ == LeaderNode::kMaybeOurs) return removeOwnNodesStepByStep();
  std::vector<ZkOp> ops;
  if (leaderNode_ == LeaderNode::kOurs) ops.push_back(ZkOp::remove(kLeaderPath, leaderVersion_));
  if (latch_) ops.push_back(ZkOp::remove(latchPath()));
  if (ops.empty()) return ZkCode::kOk;
  return zk_.multi(kj::mv(ops))
      .then([this](ZkReply<std::vector<ha::ZkOpResult>>&& reply) -> kj::Promise<ZkCode> {
        if (reply.ok()) {
          leaderNode_ = LeaderNode::kNotOurs;
          latch_.reset();
          return ZkCode::kOk;
        }
        if (reply.code == ZkCode::kNoNode || reply.code == ZkCode::kBadVersion) {
          return removeOwnNodesStepByStep();
        }
        return reply.code;
      });
}

kj::Promise<ZkCode> ZooKeeperLeaderElection::removeOwnNodesStepByStep() {
  return zk_.exists(kLeaderPath)
      .then([this](ZkReply<std::optional<ha::NodeStat>>&& leader) -> kj::Promise<ZkReply<bool>> {
        if (!leader.ok()) return ZkReply<bool>{leader.code, false};
        if (!leader.value || leader.value->ephemeralOwner != zk_.sessionId()) {
          leaderNode_ = LeaderNode::kNotOurs;
          return ZkReply<bool>{ZkCode::kOk, false};
        }
        return zk_.remove(kLeaderPath, leader.value->version);
      })
      .then([this](ZkReply<bool>&& removed) -> kj::Promise<ZkReply<bool>> {
        if (!removed.ok() && removed.code != ZkCode::kNoNode) return kj::mv(removed);
        leaderNode_ = LeaderNode::kNotOurs;
        if (!latch_) return ZkReply<bool>{ZkCode::kOk, false};
        return zk_.remove(latchPath());
      })
      .then([this](ZkReply<bool>&& removed) -> ZkCode {
        if (!removed.ok() && removed.code != ZkCode::kNoNode) return removed.code;
        latch_.reset();
        return ZkCode::kOk;
      });
}

}  // namespace regent::leader

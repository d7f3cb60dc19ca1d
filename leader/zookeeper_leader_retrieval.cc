// ZooKeeperLeaderRetrieval: one re-armed watch on `leader`, and one-shot reads of the leader and
// the latch.
#include "leader/zookeeper_leader_retrieval.h"

#include <kj/debug.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <string>
#include <utility>


namespace regent::leader {

using ha::SessionState;
using ha::WatchEvent;
using ha::ZkCode;
using ha::zkCodeName;
using ha::ZkReply;

namespace {

constexpr const char* kLeaderPath = "leader";

Error zkError(const std::string& what, ZkCode code) {
  std::string message = what + " failed with " + zkCodeName(code);
  return ha::isTransient(code) || ha::endsSession(code) ? Error::retryable(message)
                                                        : Error::fatal(message);
}

}  // namespace

ZooKeeperLeaderRetrieval::ZooKeeperLeaderRetrieval(ha::Coordination& zk, kj::Timer& timer,
                                                   Duration initialBackoff, Duration maxBackoff)
    : zk_(zk),
      timer_(timer),
      backoff_(initialBackoff, maxBackoff),
      latch_(zk, timer, initialBackoff, maxBackoff),
      errorHandler_("leader retrieval", spdlog::level::warn),
      tasks_(errorHandler_) {}

ZooKeeperLeaderRetrieval::~ZooKeeperLeaderRetrieval() noexcept = default;

template <typename T, typename Func>
void ZooKeeperLeaderRetrieval::track(uint64_t generation, kj::Promise<T>&& promise, Func&& then) {
  tasks_.add(promise.then([this, generation, then = kj::fwd<Func>(then)](T&& value) mutable {
    if (generation != generation_) return;
    then(kj::mv(value));
  }));
}

void ZooKeeperLeaderRetrieval::start(LeaderRetrievalListener& listener) {
  KJ_REQUIRE(listener_ == nullptr, "ZooKeeperLeaderRetrieval::start called twice");
  listener_ = &listener;
  sessionListener_ = zk_.onSessionState([this](SessionState state) { onSessionState(state); });
  SessionState state = zk_.sessionState();
  connected_ = state == SessionState::kConnected || state == SessionState::kReconnected;
  if (connected_) arm();
}

void ZooKeeperLeaderRetrieval::arm() {
  uint64_t generation = ++generation_;
  armedSession_ = zk_.sessionId();
  track(generation, zk_.getAndWatch(kLeaderPath),
        [this, generation](ha::Watched<ha::NodeData>&& watched) {
          if (watched.reply.code == ZkCode::kNoNode) return watchAbsentLeader(generation);
          if (!watched.reply.ok()) return fail(generation, "read the leader", watched.reply.code);
          backoff_.reset();
          auto info = leaderInfoFromJson(watched.reply.value.data);
          if (info) {
            notify(info.value());
          } else {
            spdlog::warn(
                "leader retrieval: the leader node is unreadable ({}); reporting no "
                "leader",
                info.error().message);
            notify(std::nullopt);
          }
          KJ_IF_MAYBE (watch, watched.watch) {
            track(generation, kj::mv(*watch), [this](WatchEvent&& event) {
              if (event.type == WatchEvent::Type::kSessionLost) return;
              arm();
            });
          }
        });
}

void ZooKeeperLeaderRetrieval::watchAbsentLeader(uint64_t generation) {
  track(generation, zk_.existsAndWatch(kLeaderPath),
        [this, generation](ha::Watched<std::optional<ha::NodeStat>>&& watched) {
          if (!watched.reply.ok()) return fail(generation, "watch the leader", watched.reply.code);
          backoff_.reset();
          if (watched.reply.value) return arm();  // Created meanwhile: read it.
          notify(std::nullopt);
          KJ_IF_MAYBE (watch, watched.watch) {
            track(generation, kj::mv(*watch), [this](WatchEvent&& event) {
              if (event.type == WatchEvent::Type::kSessionLost) return;
              arm();
            });
          }
        });
}

void ZooKeeperLeaderRetrieval::notify(const std::optional<LeaderInfo>& leader) {
  if (reported_ && *reported_ == leader) return;
  reported_ = leader;
  if (leader) {
    spdlog::debug("leader retrieval: leader epoch={} master_id={} status={}", leader->epoch,
                  leader->masterId, leaderStatusName(leader->status));
  } else {
    spdlog::debug("leader retrieval: no leader");
  }
  listener_->leaderChanged(leader);
}

void ZooKeeperLeaderRetrieval::fail(uint64_t generation, const char* what, ZkCode code) {
  if (generation != generation_) return;
  SessionState state = zk_.sessionState();
  bool usable = state == SessionState::kConnected || state == SessionState::kReconnected;
  if (!usable && (ha::isTransient(code) || ha::endsSession(code))) {
    // The next kReconnected or kConnected sets the watch again.
    spdlog::debug("leader retrieval: {} failed with {}; waiting for the session", what,
                  zkCodeName(code));
    return;
  }
  const Duration delay = backoff_.next();
  spdlog::warn("leader retrieval: {} failed with {}; trying again in {} ms", what, zkCodeName(code),
               delay.count());
  tasks_.add(timer_.afterDelay(delay.count() * kj::MILLISECONDS).then([this, generation] {
    if (generation == generation_) arm();
  }));
}

void ZooKeeperLeaderRetrieval::setConnected(bool connected) {
  if (connected == connected_) return;
  connected_ = connected;
  listener_->connectionChanged(connected);
}

void ZooKeeperLeaderRetrieval::onSessionState(SessionState state) {
  switch (state) {
    case SessionState::kConnecting:
      break;
    case SessionState::kSuspended:
      setConnected(false);
      break;
    case SessionState::kConnected:
      // A listener registered just after the connect may still hear that connect: the watch is
      // already set in that session.
      if (zk_.sessionId() != armedSession_) arm();
      setConnected(true);
      break;
    case SessionState::kReconnected:
      // Operations that failed while disconnected left the watch unset: set it again.
      arm();
      setConnected(true);
      break;
    case SessionState::kExpired:
    case SessionState::kClosed:
      ++generation_;  // Its watches are gone with the session; kConnected sets new ones.
      armedSession_ = 0;
      setConnected(false);
      break;
  }
}

kj::Promise<Result<std::optional<LeaderInfo>>> ZooKeeperLeaderRetrieval::leader() {
  return zk_.get(kLeaderPath)
      .then([](ZkReply<ha::NodeData>&& reply) -> Result<std::optional<LeaderInfo>> {
        if (reply.code == ZkCode::kNoNode) return std::optional<LeaderInfo>();
        if (!reply.ok()) return zkError("reading the leader node", reply.code);
        auto info = leaderInfoFromJson(reply.value.data);
        if (!info) return Error::fatal("the leader node is unreadable: " + info.error().message);
        return std::optional<LeaderInfo>(kj::mv(info.value()));
      });
}

kj::Promise<Result<LeaderRecordView>> ZooKeeperLeaderRetrieval::leaderRecord() {
  using View = Result<LeaderRecordView>;
  // The record first, then the latch: a record replaced in between is judged by a latch that
  // has moved on, which still says the truth about the record read.
  return zk_.get(kLeaderPath).then([this](ZkReply<ha::NodeData>&& reply) -> kj::Promise<View> {
    if (reply.code == ZkCode::kNoNode) return View(LeaderRecordView{});
    if (!reply.ok()) return View(zkError("reading the leader node", reply.code));
    auto info = leaderInfoFromJson(reply.value.data);
    if (!info) return View(Error::fatal("the leader node is unreadable: " + info.error().message));
    const int64_t owner = reply.value.stat.ephemeralOwner;
    return latch_.readMembers().then(
        [record = kj::mv(info.value()),
         owner](ZkReply<std::vector<LatchGroup::MemberRead>>&& members) -> View {
          if (!members.ok()) return zkError("listing the latch", members.code);
          bool ownerContends = false;
          std::optional<std::string> sameMasterElsewhere;  // Its latch node in another session.
          for (auto& [name, node] : members.value) {
            if (node.code == ZkCode::kNoNode) continue;  // Gone since the listing.
            if (!node.ok()) return zkError("reading latch node " + name, node.code);
            if (node.value.stat.ephemeralOwner == owner) {
              ownerContends = true;
              continue;
            }
            auto contender = contenderInfoFromJson(node.value.data);
            if (contender && contender.value().masterId == record.masterId) {
              sameMasterElsewhere = name;
            }
          }
          char session[32];
          std::snprintf(session, sizeof session, "0x%llx", static_cast<unsigned long long>(owner));
          LeaderRecordView view{record, ""};
          if (sameMasterElsewhere) {
            view.staleReason = "master " + record.masterId + " contends from a new session (latch " +
                               *sameMasterElsewhere + "); the record is left from its session " +
                               session +
                               ", which ZooKeeper still holds (after a ZooKeeper restart, for up "
                               "to a session timeout), and no term is live";
          } else if (!ownerContends) {
            view.staleReason = std::string("the record's owner session ") + session +
                               " holds no latch node, so its term is over; ZooKeeper removes the "
                               "record when that session ends";
          }
          return view;
        });
  });
}

kj::Promise<Result<std::vector<ContenderEntry>>> ZooKeeperLeaderRetrieval::contenders() {
  using Entries = Result<std::vector<ContenderEntry>>;
  // The leader first, then the latch: each entry is flagged by the leader's master id.
  return zk_.get(kLeaderPath)
      .then([this](ZkReply<ha::NodeData>&& leaderReply) -> kj::Promise<Entries> {
        std::string leaderId;
        if (leaderReply.ok()) {
          auto info = leaderInfoFromJson(leaderReply.value.data);
          if (info) leaderId = info.value().masterId;
        } else if (leaderReply.code != ZkCode::kNoNode) {
          return Entries(zkError("reading the leader node", leaderReply.code));
        }
        return latch_.readMembers().then(
            [leaderId](ZkReply<std::vector<LatchGroup::MemberRead>>&& members) -> Entries {
              if (!members.ok()) return zkError("listing the latch", members.code);
              std::vector<ContenderEntry> entries;
              for (auto& [name, node] : members.value) {
                if (node.code == ZkCode::kNoNode) continue;  // Gone since the listing.
                if (!node.ok()) return zkError("reading latch node " + name, node.code);
                ContenderEntry entry;
                entry.latchNode = name;
                auto info = contenderInfoFromJson(node.value.data);
                if (info) {
                  entry.info = kj::mv(info.value());
                  entry.leader = !leaderId.empty() && entry.info.masterId == leaderId;
                } else {
                  spdlog::warn("leader retrieval: latch node {} is unreadable: {}", name,
                               info.error().message);
                  entry.info.masterId = "?";
                }
                entries.push_back(kj::mv(entry));
              }
              return entries;
            });
      });
}

}  // namespace regent::leader

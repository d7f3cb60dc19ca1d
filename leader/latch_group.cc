// LatchGroup: the latch's membership operations and the removal of orphan members.
#include "leader/latch_group.h"

#include <kj/debug.h>
#include <spdlog/spdlog.h>

#include <utility>

#include "leader/latch_names.h"

namespace regent::leader {

using ha::ZkCode;
using ha::ZkReply;

LatchGroup::LatchGroup(ha::Coordination& zk, kj::Timer& timer, Duration initialBackoff,
                       Duration maxBackoff, std::function<double()> jitter)
    : zk_(zk),
      timer_(timer),
      orphanBackoff_(initialBackoff, maxBackoff, std::move(jitter)),
      tasks_(errorLogger_) {}

LatchGroup::~LatchGroup() noexcept = default;

std::string LatchGroup::pathOf(const std::string& name) {
  return std::string(kLatchFolder) + "/" + name;
}

bool LatchGroup::sessionUsable() const {
  const ha::SessionState state = zk_.sessionState();
  return state == ha::SessionState::kConnected || state == ha::SessionState::kReconnected;
}

kj::Promise<ZkReply<bool>> LatchGroup::ensureFolder() { return zk_.ensurePath(kLatchFolder); }

kj::Promise<ZkReply<std::string>> LatchGroup::join(std::string data) {
  return zk_
      .create(std::string(kLatchFolder) + "/m-", std::move(data),
              ha::CreateMode::kEphemeralSequential)
      .then([](ZkReply<std::string>&& reply) {
        if (reply.ok()) reply.value = latchNodeName(reply.value);
        return kj::mv(reply);
      });
}

kj::Promise<ZkReply<bool>> LatchGroup::cancel(const std::string& name) {
  return zk_.remove(pathOf(name));
}

kj::Promise<ZkReply<std::vector<std::string>>> LatchGroup::memberNames() {
  return zk_.children(kLatchFolder).then([](ZkReply<std::vector<std::string>>&& reply) {
    if (reply.code == ZkCode::kNoNode) return ZkReply<std::vector<std::string>>{ZkCode::kOk, {}};
    if (reply.ok()) reply.value = sortedLatchNodes(reply.value);
    return kj::mv(reply);
  });
}

kj::Promise<ZkReply<std::vector<LatchGroup::MemberRead>>> LatchGroup::readMembers() {
  using Reply = ZkReply<std::vector<MemberRead>>;
  ha::Coordination& zk = zk_;
  return memberNames().then([&zk](ZkReply<std::vector<std::string>>&& names) -> kj::Promise<Reply> {
    if (!names.ok()) return Reply{names.code, {}};
    auto reads = kj::heapArrayBuilder<kj::Promise<MemberRead>>(names.value.size());
    for (const std::string& name : names.value) {
      reads.add(zk.get(pathOf(name)).then([name](ZkReply<ha::NodeData>&& node) {
        return MemberRead{name, kj::mv(node)};
      }));
    }
    return kj::joinPromises(reads.finish()).then([](kj::Array<MemberRead>&& members) {
      Reply reply;
      reply.value.reserve(members.size());
      for (auto& member : members) reply.value.push_back(kj::mv(member));
      return reply;
    });
  });
}

kj::Promise<ZkReply<std::vector<std::string>>> LatchGroup::ownedBySession(
    std::vector<std::string> names) {
  using Stat = std::pair<std::string, ZkReply<std::optional<ha::NodeStat>>>;
  auto stats = kj::heapArrayBuilder<kj::Promise<Stat>>(names.size());
  for (const std::string& name : names) {
    stats.add(zk_.exists(pathOf(name)).then([name](ZkReply<std::optional<ha::NodeStat>>&& stat) {
      return std::make_pair(name, kj::mv(stat));
    }));
  }
  ha::Coordination& zk = zk_;
  return kj::joinPromises(stats.finish()).then([&zk](kj::Array<Stat>&& stats) {
    ZkReply<std::vector<std::string>> owned;
    for (auto& [name, stat] : stats) {
      if (!stat.ok()) return ZkReply<std::vector<std::string>>{stat.code, {}};
      if (stat.value && stat.value->ephemeralOwner == zk.sessionId()) owned.value.push_back(name);
    }
    return owned;
  });
}

kj::Promise<ZkCode> LatchGroup::cancelAll(std::vector<std::string> names) {
  auto removals = kj::heapArrayBuilder<kj::Promise<ZkReply<bool>>>(names.size());
  for (const std::string& name : names) removals.add(cancel(name));
  return kj::joinPromises(removals.finish()).then([](kj::Array<ZkReply<bool>>&& removed) {
    for (auto& reply : removed) {
      if (!reply.ok() && reply.code != ZkCode::kNoNode) return reply.code;
    }
    return ZkCode::kOk;
  });
}

kj::Promise<ha::Watched<std::optional<ha::NodeStat>>> LatchGroup::watch(const std::string& name) {
  return zk_.existsAndWatch(pathOf(name));
}

// ---------------------------------------------------------------------------------------------
// Orphans

void LatchGroup::removeOrphan(const std::string& name) {
  const int64_t session = zk_.sessionId();
  if (session != orphanSession_) {
    orphans_.clear();  // Those of an earlier session went with it.
    orphanSession_ = session;
  }
  spdlog::info("leader election: removing latch {}, which no attempt uses", name);
  orphans_.insert(name);
  removeNextOrphan();
}

void LatchGroup::resumeOrphanRemoval() { removeNextOrphan(); }

void LatchGroup::forgetOrphans() { orphans_.clear(); }

void LatchGroup::removeNextOrphan() {
  if (orphanRemovalRunning_ || orphans_.empty()) return;
  if (zk_.sessionId() != orphanSession_) {
    orphans_.clear();
    return;
  }
  if (!sessionUsable()) return;  // Again on resumeOrphanRemoval().
  orphanRemovalRunning_ = true;
  std::string name = *orphans_.begin();
  tasks_.add(cancel(name).then([this, name](ZkReply<bool>&& reply) {
    orphanRemovalRunning_ = false;
    if (reply.ok() || reply.code == ZkCode::kNoNode) {
      orphans_.erase(name);
      orphanBackoff_.reset();
      return removeNextOrphan();
    }
    spdlog::info("leader election: removing latch {} failed with {}; retrying", name,
                 ha::zkCodeName(reply.code));
    if (!sessionUsable()) return;  // Again on resumeOrphanRemoval(), or gone with the session.
    const Duration delay = orphanBackoff_.next();
    orphanRemovalRunning_ = true;
    tasks_.add(timer_.afterDelay(delay.count() * kj::MILLISECONDS).then([this] {
      orphanRemovalRunning_ = false;
      removeNextOrphan();
    }));
  }));
}

}  // namespace regent::leader

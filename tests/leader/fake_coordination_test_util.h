// An in-memory ha::Coordination for fast unit tests of leader/: znodes with versions, ephemeral
// owners, sequential names, one-shot watches, multi with check ops, and a session state the test
// drives. Several FakeCoordination clients share one FakeZooKeeper, as processes share a server.
// Not a ZooKeeper emulator: integration tests run against the real server.
#pragma once

#include <kj/async.h>
#include <kj/debug.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ha/zookeeper_client.h"

namespace regent::leader::testing {

class FakeCoordination;

// The shared "server": the node tree and the watches set on it. Loop-thread only.
class FakeZooKeeper final {
 public:
  struct Node {
    std::string data;
    ha::NodeStat stat;
    int64_t nextSequence = 0;  // For sequential children.
  };

  FakeZooKeeper() { nodes_[""] = Node{}; }

  // Direct access for tests (no watches fire for reads; writes below fire them).
  const std::map<std::string, Node>& nodes() const { return nodes_; }
  bool exists(const std::string& path) const { return nodes_.count(path) != 0; }
  std::string data(const std::string& path) const {
    auto it = nodes_.find(path);
    return it == nodes_.end() ? std::string() : it->second.data;
  }
  std::vector<std::string> children(const std::string& path) const {
    std::vector<std::string> names;
    for (const auto& [p, node] : nodes_) {
      if (parentOf(p) == path && p != path && !p.empty()) names.push_back(baseName(p));
    }
    return names;
  }
  // What an administrator (or a test) does outside any session.
  ha::ZkCode removeForTests(const std::string& path) {
    std::vector<Change> changes;
    auto code = applyRemove(nodes_, path, -1, changes);
    if (code == ha::ZkCode::kOk) fire(changes);
    return code;
  }
  // Creates `path` as an ephemeral node of `session` (another contender's, say), firing watches.
  ha::ZkCode createEphemeralForTests(const std::string& path, const std::string& data,
                                     int64_t session) {
    std::vector<Change> changes;
    std::string created;
    auto code = applyCreate(nodes_, path, data, ha::CreateMode::kEphemeral, session, changes,
                            created);
    if (code == ha::ZkCode::kOk) fire(changes);
    return code;
  }
  // The server ends `session` (its timeout passed): its ephemeral nodes go.
  void endSessionForTests(int64_t session) { endSession(session); }
  ha::ZkCode setForTests(const std::string& path, const std::string& data) {
    std::vector<Change> changes;
    ha::NodeStat stat;
    auto code = applySet(nodes_, path, data, -1, changes, stat);
    if (code == ha::ZkCode::kOk) fire(changes);
    return code;
  }

  static std::string parentOf(const std::string& path) {
    auto slash = path.rfind('/');
    return slash == std::string::npos ? std::string() : path.substr(0, slash);
  }
  static std::string baseName(const std::string& path) {
    auto slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
  }

 private:
  friend class FakeCoordination;

  enum class WatchKind { kData, kExists, kChildren };
  struct Watch {
    FakeCoordination* client;
    std::string path;
    WatchKind kind;
    kj::Own<kj::PromiseFulfiller<ha::WatchEvent>> fulfiller;
  };
  struct Change {
    std::string path;
    ha::WatchEvent::Type type;
  };

  static ha::ZkCode applyCreate(std::map<std::string, Node>& nodes, const std::string& path,
                                const std::string& data, ha::CreateMode mode, int64_t session,
                                std::vector<Change>& changes, std::string& created) {
    std::string parent = parentOf(path);
    auto parentIt = nodes.find(parent);
    if (parentIt == nodes.end()) return ha::ZkCode::kNoNode;
    if (parentIt->second.stat.ephemeralOwner != 0) return ha::ZkCode::kNoChildrenForEphemerals;
    created = path;
    bool sequential = mode == ha::CreateMode::kEphemeralSequential ||
                      mode == ha::CreateMode::kPersistentSequential;
    if (sequential) {
      char suffix[16];
      std::snprintf(suffix, sizeof suffix, "%010lld",
                    static_cast<long long>(parentIt->second.nextSequence));
      created += suffix;
    }
    if (nodes.count(created)) return ha::ZkCode::kNodeExists;
    ++parentIt->second.nextSequence;
    ++parentIt->second.stat.cversion;
    ++parentIt->second.stat.numChildren;
    Node node;
    node.data = data;
    bool ephemeral =
        mode == ha::CreateMode::kEphemeral || mode == ha::CreateMode::kEphemeralSequential;
    node.stat.ephemeralOwner = ephemeral ? session : 0;
    node.stat.dataLength = static_cast<int32_t>(data.size());
    nodes[created] = node;
    changes.push_back({created, ha::WatchEvent::Type::kCreated});
    return ha::ZkCode::kOk;
  }

  static ha::ZkCode applyRemove(std::map<std::string, Node>& nodes, const std::string& path,
                                int32_t version, std::vector<Change>& changes) {
    auto it = nodes.find(path);
    if (it == nodes.end() || path.empty()) return ha::ZkCode::kNoNode;
    if (version != -1 && it->second.stat.version != version) return ha::ZkCode::kBadVersion;
    if (it->second.stat.numChildren != 0) return ha::ZkCode::kNotEmpty;
    nodes.erase(it);
    auto parentIt = nodes.find(parentOf(path));
    if (parentIt != nodes.end()) {
      ++parentIt->second.stat.cversion;
      --parentIt->second.stat.numChildren;
    }
    changes.push_back({path, ha::WatchEvent::Type::kDeleted});
    return ha::ZkCode::kOk;
  }

  static ha::ZkCode applySet(std::map<std::string, Node>& nodes, const std::string& path,
                             const std::string& data, int32_t version, std::vector<Change>& changes,
                             ha::NodeStat& stat) {
    auto it = nodes.find(path);
    if (it == nodes.end()) return ha::ZkCode::kNoNode;
    if (version != -1 && it->second.stat.version != version) return ha::ZkCode::kBadVersion;
    it->second.data = data;
    ++it->second.stat.version;
    it->second.stat.dataLength = static_cast<int32_t>(data.size());
    stat = it->second.stat;
    changes.push_back({path, ha::WatchEvent::Type::kDataChanged});
    return ha::ZkCode::kOk;
  }

  // Fires (and removes) the watches a committed change triggers.
  void fire(const std::vector<Change>& changes);
  // Ephemeral nodes of an ended session go, as the server removes them.
  void endSession(int64_t session) {
    std::vector<Change> changes;
    std::vector<std::string> owned;
    for (const auto& [path, node] : nodes_) {
      if (node.stat.ephemeralOwner == session) owned.push_back(path);
    }
    for (const auto& path : owned) applyRemove(nodes_, path, -1, changes);
    fire(changes);
  }
  void dropWatchesOf(FakeCoordination* client) {
    for (auto it = watches_.begin(); it != watches_.end();) {
      if (it->client == client) {
        it->fulfiller->fulfill(ha::WatchEvent{ha::WatchEvent::Type::kSessionLost, it->path});
        it = watches_.erase(it);
      } else {
        ++it;
      }
    }
  }

  std::map<std::string, Node> nodes_;
  std::list<Watch> watches_;
  int64_t nextSession_ = 0x1000;
};

// One client ("process") of the fake server. Replies arrive on a later turn of the kj event
// loop, never inside the call. Session events reach listeners synchronously from the control
// methods below (call them from the test body, not from inside a continuation of the code under
// test).
class FakeCoordination final : public ha::Coordination {
 public:
  // What a fault hook may do with an operation.
  enum class Fault {
    kNone,
    kFailBefore,           // Not applied; the reply carries `faultCode`.
    kLoseReplyAfterApply,  // Applied; the reply says kConnectionLoss.
    kHoldReply,            // Applied; the reply is held until releaseReplies().
  };
  struct OpInfo {
    std::string kind;  // "create", "get", "set", "remove", "exists", "children", "multi", ...
    std::string path;  // For multi: the first operation's path.
  };

  explicit FakeCoordination(FakeZooKeeper& server, bool connected = true) : server_(server) {
    if (connected) connectNewSession();
  }
  ~FakeCoordination() override {
    if (sessionId_ != 0 && state_ != ha::SessionState::kClosed) server_.endSession(sessionId_);
    server_.dropWatchesOf(this);
  }

  // ---- control -------------------------------------------------------------------------------

  // kConnecting -> kConnected with a new session id (first connect, or after expire()).
  void connectNewSession() {
    sessionId_ = server_.nextSession_++;
    setState(ha::SessionState::kConnected);
  }
  // The connection is lost; the session lives on at the server. Operations fail with
  // kConnectionLoss until reconnect().
  void suspend() { setState(ha::SessionState::kSuspended); }
  void reconnect() { setState(ha::SessionState::kReconnected); }
  // The session ends at the server: its ephemeral nodes go, its watches resolve kSessionLost;
  // the client reports kExpired then kConnecting. Call connectNewSession() to go on.
  void expire() {
    int64_t old = sessionId_;
    server_.dropWatchesOf(this);
    server_.endSession(old);
    setState(ha::SessionState::kExpired);
    setState(ha::SessionState::kConnecting);
  }
  // The client gives up on its session (its local timer ran out while it was cut off) but the
  // server still holds it, as a server restarted on its data restores its sessions: the
  // session's ephemeral nodes stay until FakeZooKeeper::endSessionForTests(). The client's
  // watches resolve kSessionLost; it reports kExpired then kConnecting. Call connectNewSession()
  // to go on.
  void expireLocally() {
    server_.dropWatchesOf(this);
    setState(ha::SessionState::kExpired);
    setState(ha::SessionState::kConnecting);
  }
  // Tells the listeners `state` again without changing anything, as a client whose listener
  // calls are deferred may do for a listener registered just after the change.
  void replayStateForTests(ha::SessionState state) {
    auto copy = listeners_;
    for (auto& listener : copy) (*listener)(state);
  }
  // Ends the session and moves to kClosed.
  void close() {
    server_.dropWatchesOf(this);
    server_.endSession(sessionId_);
    setState(ha::SessionState::kClosed);
  }
  // Every operation passes through `hook` (if set) before it is applied.
  void setFaultHook(std::function<Fault(const OpInfo&)> hook,
                    ha::ZkCode faultCode = ha::ZkCode::kConnectionLoss) {
    hook_ = std::move(hook);
    faultCode_ = faultCode;
  }
  // Holds every reply until releaseReplies(): lets a test act while operations are in flight.
  // (Fault::kHoldReply holds a single operation's reply the same way.)
  void holdReplies() { holding_ = true; }
  void releaseReplies() {
    holding_ = false;
    for (auto& fulfiller : held_) fulfiller->fulfill();
    held_.clear();
  }

  uint64_t watchesFired() const { return watchesFired_; }
  size_t pendingWatches() const {
    size_t count = 0;
    for (const auto& watch : server_.watches_) count += watch.client == this ? 1 : 0;
    return count;
  }
  // Paths this client currently watches.
  std::vector<std::string> watchedPaths() const {
    std::vector<std::string> paths;
    for (const auto& watch : server_.watches_) {
      if (watch.client == this) paths.push_back(watch.path);
    }
    return paths;
  }
  const std::vector<std::string>& opLog() const { return opLog_; }

  // ---- ha::Coordination ------------------------------------------------------------------------

  kj::Promise<ha::ZkReply<std::string>> create(std::string path, std::string data,
                                               ha::CreateMode mode) override {
    return run<std::string>({"create", path}, [=, this](ha::ZkReply<std::string>& reply) {
      std::vector<FakeZooKeeper::Change> changes;
      reply.code = FakeZooKeeper::applyCreate(server_.nodes_, path, data, mode, sessionId_, changes,
                                              reply.value);
      if (reply.ok()) server_.fire(changes);
    });
  }

  kj::Promise<ha::ZkReply<ha::NodeData>> get(std::string path) override {
    return run<ha::NodeData>({"get", path},
                             [=, this](ha::ZkReply<ha::NodeData>& reply) { read(path, reply); });
  }

  kj::Promise<ha::Watched<ha::NodeData>> getAndWatch(std::string path) override {
    return runWatched<ha::NodeData>(
        {"getAndWatch", path}, path,
        [=, this](ha::ZkReply<ha::NodeData>& reply) {
          read(path, reply);
          return reply.ok();
        },
        FakeZooKeeper::WatchKind::kData);
  }

  kj::Promise<ha::ZkReply<ha::NodeStat>> set(std::string path, std::string data,
                                             int32_t version) override {
    return run<ha::NodeStat>({"set", path}, [=, this](ha::ZkReply<ha::NodeStat>& reply) {
      std::vector<FakeZooKeeper::Change> changes;
      reply.code =
          FakeZooKeeper::applySet(server_.nodes_, path, data, version, changes, reply.value);
      if (reply.ok()) server_.fire(changes);
    });
  }

  kj::Promise<ha::ZkReply<bool>> remove(std::string path, int32_t version) override {
    return run<bool>({"remove", path}, [=, this](ha::ZkReply<bool>& reply) {
      std::vector<FakeZooKeeper::Change> changes;
      reply.code = FakeZooKeeper::applyRemove(server_.nodes_, path, version, changes);
      reply.value = reply.ok();
      if (reply.ok()) server_.fire(changes);
    });
  }

  kj::Promise<ha::ZkReply<std::optional<ha::NodeStat>>> exists(std::string path) override {
    return run<std::optional<ha::NodeStat>>(
        {"exists", path},
        [=, this](ha::ZkReply<std::optional<ha::NodeStat>>& reply) { statOf(path, reply); });
  }

  kj::Promise<ha::Watched<std::optional<ha::NodeStat>>> existsAndWatch(std::string path) override {
    return runWatched<std::optional<ha::NodeStat>>(
        {"existsAndWatch", path}, path,
        [=, this](ha::ZkReply<std::optional<ha::NodeStat>>& reply) {
          statOf(path, reply);
          return reply.ok();
        },
        FakeZooKeeper::WatchKind::kExists);
  }

  kj::Promise<ha::ZkReply<std::vector<std::string>>> children(std::string path) override {
    return run<std::vector<std::string>>({"children", path},
                                         [=, this](ha::ZkReply<std::vector<std::string>>& reply) {
                                           if (!server_.exists(path)) {
                                             reply.code = ha::ZkCode::kNoNode;
                                             return;
                                           }
                                           reply.value = server_.children(path);
                                           // ZooKeeper's order is not sorted; reverse so nobody
                                           // relies on it.
                                           std::reverse(reply.value.begin(), reply.value.end());
                                         });
  }

  kj::Promise<ha::Watched<std::vector<std::string>>> childrenAndWatch(std::string path) override {
    return runWatched<std::vector<std::string>>(
        {"childrenAndWatch", path}, path,
        [=, this](ha::ZkReply<std::vector<std::string>>& reply) {
          if (!server_.exists(path)) {
            reply.code = ha::ZkCode::kNoNode;
            return false;
          }
          reply.value = server_.children(path);
          std::reverse(reply.value.begin(), reply.value.end());
          return true;
        },
        FakeZooKeeper::WatchKind::kChildren);
  }

  kj::Promise<ha::ZkReply<std::vector<ha::ZkOpResult>>> multi(std::vector<ha::ZkOp> ops) override {
    std::string first = ops.empty() ? "" : ops.front().path;
    return run<std::vector<ha::ZkOpResult>>(
        {"multi", first},
        [ops = std::move(ops), this](ha::ZkReply<std::vector<ha::ZkOpResult>>& reply) {
          auto scratch = server_.nodes_;
          std::vector<FakeZooKeeper::Change> changes;
          reply.code = ha::ZkCode::kOk;
          for (const ha::ZkOp& op : ops) {
            ha::ZkOpResult result;
            if (reply.code != ha::ZkCode::kOk) {
              result.code = static_cast<ha::ZkCode>(-2);  // ZRUNTIMEINCONSISTENCY
              reply.value.push_back(result);
              continue;
            }
            switch (op.kind) {
              case ha::ZkOp::Kind::kCreate:
                result.code = FakeZooKeeper::applyCreate(scratch, op.path, op.data, op.mode,
                                                         sessionId_, changes, result.createdPath);
                break;
              case ha::ZkOp::Kind::kRemove:
                result.code = FakeZooKeeper::applyRemove(scratch, op.path, op.version, changes);
                break;
              case ha::ZkOp::Kind::kSetData:
                result.code = FakeZooKeeper::applySet(scratch, op.path, op.data, op.version,
                                                      changes, result.stat);
                break;
              case ha::ZkOp::Kind::kCheck: {
                auto it = scratch.find(op.path);
                if (it == scratch.end()) {
                  result.code = ha::ZkCode::kNoNode;
                } else if (op.version != -1 && it->second.stat.version != op.version) {
                  result.code = ha::ZkCode::kBadVersion;
                }
                break;
              }
            }
            if (result.code != ha::ZkCode::kOk) reply.code = result.code;
            reply.value.push_back(result);
          }
          if (reply.ok()) {
            server_.nodes_ = std::move(scratch);
            server_.fire(changes);
          } else {
            // Operations before the failing one report ZOK, as the server does.
            for (auto& result : reply.value) {
              if (result.code == ha::ZkCode::kOk) result.createdPath.clear();
            }
          }
        });
  }

  kj::Promise<ha::ZkReply<bool>> ensurePath(std::string path) override {
    return run<bool>({"ensurePath", path}, [=, this](ha::ZkReply<bool>& reply) {
      std::string prefix;
      size_t start = 0;
      while (true) {
        size_t slash = path.find('/', start);
        prefix = path.substr(0, slash);
        if (!server_.exists(prefix)) {
          std::vector<FakeZooKeeper::Change> changes;
          std::string created;
          auto code =
              FakeZooKeeper::applyCreate(server_.nodes_, prefix, "", ha::CreateMode::kPersistent,
                                         sessionId_, changes, created);
          if (code != ha::ZkCode::kOk) {
            reply.code = code;
            return;
          }
          server_.fire(changes);
        }
        if (slash == std::string::npos) break;
        start = slash + 1;
      }
      reply.value = true;
    });
  }

  ha::SessionState sessionState() const override { return state_; }
  int64_t sessionId() const override { return sessionId_; }
  Duration negotiatedSessionTimeout() const override { return sessionTimeout_; }
  void setNegotiatedSessionTimeout(Duration timeout) { sessionTimeout_ = timeout; }
  // An established session's deadline: never, unless a test sets one (setSessionDeadline).
  std::optional<MonoTime> sessionDeadline() const override {
    if (state_ != ha::SessionState::kConnected && state_ != ha::SessionState::kReconnected &&
        state_ != ha::SessionState::kSuspended) {
      return std::nullopt;
    }
    return sessionDeadline_;
  }
  void setSessionDeadline(MonoTime deadline) { sessionDeadline_ = deadline; }

  kj::Own<void> onSessionState(kj::Function<void(ha::SessionState)> listener) override {
    auto entry = std::make_shared<kj::Function<void(ha::SessionState)>>(kj::mv(listener));
    listeners_.push_back(entry);
    using Entry = std::shared_ptr<kj::Function<void(ha::SessionState)>>;
    struct Registration {
      Registration(const Entry& entry, std::vector<Entry>* listeners, std::shared_ptr<bool> alive)
          : entry(entry), listeners(listeners), alive(std::move(alive)) {}
      KJ_DISALLOW_COPY(Registration);
      std::weak_ptr<kj::Function<void(ha::SessionState)>> entry;
      std::vector<Entry>* listeners;
      std::shared_ptr<bool> alive;
      ~Registration() {
        if (!*alive) return;
        auto locked = entry.lock();
        std::erase(*listeners, locked);
      }
    };
    return kj::heap<Registration>(entry, &listeners_, alive_);
  }

 private:
  friend class FakeZooKeeper;

  bool usable() const {
    return state_ == ha::SessionState::kConnected || state_ == ha::SessionState::kReconnected;
  }

  void setState(ha::SessionState state) {
    state_ = state;
    auto copy = listeners_;
    for (auto& listener : copy) (*listener)(state);
  }

  void read(const std::string& path, ha::ZkReply<ha::NodeData>& reply) {
    auto it = server_.nodes_.find(path);
    if (it == server_.nodes_.end()) {
      reply.code = ha::ZkCode::kNoNode;
      return;
    }
    reply.value.data = it->second.data;
    reply.value.stat = it->second.stat;
  }

  void statOf(const std::string& path, ha::ZkReply<std::optional<ha::NodeStat>>& reply) {
    auto it = server_.nodes_.find(path);
    if (it != server_.nodes_.end()) reply.value = it->second.stat;
  }

  // The reply travels: it is delivered on a later turn (or when released).
  kj::Promise<void> transit(bool hold = false) {
    if (!holding_ && !hold) return kj::evalLater([] {});
    auto paf = kj::newPromiseAndFulfiller<void>();
    held_.push_back(kj::mv(paf.fulfiller));
    return kj::mv(paf.promise);
  }

  // Applies `apply` (at once, as the server would on receipt) unless the session is not usable or
  // the fault hook says otherwise; the reply arrives later.
  template <typename T, typename Apply>
  kj::Promise<ha::ZkReply<T>> run(OpInfo info, Apply&& apply) {
    opLog_.push_back(info.kind + " " + info.path);
    ha::ZkReply<T> reply;
    Fault fault = hook_ ? hook_(info) : Fault::kNone;
    if (!usable()) {
      reply.code = ha::ZkCode::kConnectionLoss;
    } else if (fault == Fault::kFailBefore) {
      reply.code = faultCode_;
    } else {
      apply(reply);
      if (fault == Fault::kLoseReplyAfterApply)
        reply = ha::ZkReply<T>{ha::ZkCode::kConnectionLoss, {}};
    }
    return transit(fault == Fault::kHoldReply).then([reply = std::move(reply)]() mutable {
      return std::move(reply);
    });
  }

  // As run(), and sets a watch when `apply` says the read succeeded (exists: also on a missing
  // node, as ZooKeeper does).
  template <typename T, typename Apply>
  kj::Promise<ha::Watched<T>> runWatched(OpInfo info, const std::string& path, Apply&& apply,
                                         FakeZooKeeper::WatchKind kind) {
    opLog_.push_back(info.kind + " " + info.path);
    ha::Watched<T> watched;
    Fault fault = hook_ ? hook_(info) : Fault::kNone;
    if (!usable()) {
      watched.reply.code = ha::ZkCode::kConnectionLoss;
    } else if (fault == Fault::kFailBefore) {
      watched.reply.code = faultCode_;
    } else if (apply(watched.reply)) {
      auto paf = kj::newPromiseAndFulfiller<ha::WatchEvent>();
      server_.watches_.push_back({this, path, kind, kj::mv(paf.fulfiller)});
      watched.watch = kj::mv(paf.promise);
    }
    return transit(fault == Fault::kHoldReply).then([watched = kj::mv(watched)]() mutable {
      return kj::mv(watched);
    });
  }

  FakeZooKeeper& server_;
  ha::SessionState state_ = ha::SessionState::kConnecting;
  int64_t sessionId_ = 0;
  Duration sessionTimeout_{6000};
  MonoTime sessionDeadline_ = MonoTime::max();
  std::vector<std::shared_ptr<kj::Function<void(ha::SessionState)>>> listeners_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  std::function<Fault(const OpInfo&)> hook_;
  ha::ZkCode faultCode_ = ha::ZkCode::kConnectionLoss;
  bool holding_ = false;
  std::vector<kj::Own<kj::PromiseFulfiller<void>>> held_;
  uint64_t watchesFired_ = 0;
  std::vector<std::string> opLog_;

 public:
  // Declared last so registrations see the listener list gone when the client is.
  struct AliveGuard {
    std::shared_ptr<bool> alive;
    ~AliveGuard() { *alive = false; }
  } aliveGuard_{alive_};
};

inline void FakeZooKeeper::fire(const std::vector<Change>& changes) {
  for (const Change& change : changes) {
    for (auto it = watches_.begin(); it != watches_.end();) {
      // A child watch fires when a child is created or deleted (ZooKeeper's NodeChildrenChanged).
      const bool childChanged = it->kind == WatchKind::kChildren &&
                                it->path == FakeZooKeeper::parentOf(change.path) &&
                                change.type != ha::WatchEvent::Type::kDataChanged;
      bool triggered = childChanged ||
                       (it->kind != WatchKind::kChildren && it->path == change.path &&
                        (it->kind == WatchKind::kExists ||
                         change.type != ha::WatchEvent::Type::kCreated));
      if (!triggered) {
        ++it;
        continue;
      }
      ++it->client->watchesFired_;
      it->fulfiller->fulfill(ha::WatchEvent{
          childChanged ? ha::WatchEvent::Type::kChildrenChanged : change.type, it->path});
      it = watches_.erase(it);
    }
  }
}

}  // namespace regent::leader::testing

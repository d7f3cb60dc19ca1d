// ZooKeeperClient's operations: each one a call record the C library completes on the loop
// (driven by ZooKeeperSession), paths mapped to and from the cluster root, nodes created with the
// cluster's ACL.
#include "ha/zookeeper_client.h"

#include <kj/debug.h>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "common/event_loop.h"
#include "conf/config.h"
#include "ha/zookeeper_acl.h"
#include "ha/zookeeper_session.h"

namespace regent::ha {

ZooKeeperClientOptions zooKeeperClientOptionsFrom(const Config& config) {
  ZooKeeperClientOptions options;
  options.quorum = config.getString("ha.zookeeper.quorum");
  options.root = config.getString("ha.zookeeper.root") + "/" + config.getString("cluster-id");
  options.sessionTimeout = config.getDuration("ha.zookeeper.session-timeout");
  options.auth = config.getString("ha.zookeeper.auth");
  options.readAuth = config.getString("ha.zookeeper.read-auth");
  return options;
}

namespace {

constexpr size_t kMaxPathLength = 1024;
NodeStat toNodeStat(const Stat* stat) {
  NodeStat out;
  if (stat == nullptr) return out;
  out.czxid = stat->czxid;
  out.mzxid = stat->mzxid;
  out.version = stat->version;
  out.cversion = stat->cversion;
  out.ephemeralOwner = stat->ephemeralOwner;
  out.dataLength = stat->dataLength;
  out.numChildren = stat->numChildren;
  return out;
}

int createFlags(CreateMode mode) {
  switch (mode) {
    case CreateMode::kPersistent: return ZOO_PERSISTENT;
    case CreateMode::kEphemeral: return ZOO_EPHEMERAL;
    case CreateMode::kPersistentSequential: return ZOO_PERSISTENT_SEQUENTIAL;
    case CreateMode::kEphemeralSequential: return ZOO_EPHEMERAL_SEQUENTIAL;
  }
  return ZOO_PERSISTENT;
}

}  // namespace

// What the client owns: the session driver, the cluster root every path is relative to, and the
// ACL of the cluster's nodes. Call records point here; it outlives them (the session completes
// them when it closes).
struct ZooKeeperClient::State {
  State(EventLoop& loop, const ZooKeeperClientOptions& options)
      : session(loop, sessionOptionsFrom(options)), root(options.root) {}

  static ZooKeeperSession::Options sessionOptionsFrom(const ZooKeeperClientOptions& options) {
    const std::string& credential =
        options.readOnlyIdentity && !options.readAuth.empty() ? options.readAuth : options.auth;
    return ZooKeeperSession::Options{options.quorum, options.sessionTimeout, credential,
                                     options.resolveQuorum};
  }

  ZooKeeperSession session;
  std::string root;
  // ACL for nodes at and below the cluster root (open when there is no credential).
  std::vector<std::string> aclIds;
  std::vector<ACL> aclEntries;
  ACL_vector acl{};
  // Wraps promises whose continuations use this state (ensurePath): destroying the client
  // cancels them instead of letting them run on freed memory.
  kj::Canceler canceler;

  // ---- paths -----------------------------------------------------------------------------------

  std::string absolute(const std::string& path) const {
    return path.empty() ? root : root + "/" + path;
  }

  std::string relative(const char* path) const {
    const std::string_view p(path);
    if (p == root) return "";
    if (p.size() > root.size() && p.substr(0, root.size()) == root &&
        p[root.size()] == '/') {
      return std::string(p.substr(root.size() + 1));
    }
    return std::string(p);
  }

  static bool validRelative(const std::string& path) {
    return path.empty() || (path.front() != '/' && path.back() != '/' &&
                            path.find("//") == std::string::npos);
  }

  template <typename Call, typename Issue>
  void submit(std::unique_ptr<Call> call, Issue&& issue) {
    session.submit(std::move(call), std::forward<Issue>(issue));
  }
  ZkCode translate(ZkCode code) const { return session.translate(code); }
  void finish(PendingCall* call) { session.finish(call); }

  template <typename T>
  struct ReplyCall final : PendingCall {
    ReplyCall(State* state, kj::Own<kj::PromiseFulfiller<ZkReply<T>>> fulfiller)
        : state(state), fulfiller(kj::mv(fulfiller)) {}
    void fail(ZkCode code) override { fulfiller->fulfill(ZkReply<T>{code, T{}}); }
    void complete(ZkCode code, T value) {
      fulfiller->fulfill(ZkReply<T>{state->translate(code), std::move(value)});
    }
    // The completion shared with WatchedCall; there is no watch to keep.
    void complete(ZkCode code, T value, bool /*watchSet*/) { complete(code, std::move(value)); }
    State* state;
    kj::Own<kj::PromiseFulfiller<ZkReply<T>>> fulfiller;
  };

  struct WatchCall final : PendingCall {
    WatchCall(State* state, std::string path, kj::Own<kj::PromiseFulfiller<WatchEvent>> fulfiller)
        : state(state), path(std::move(path)), fulfiller(kj::mv(fulfiller)) {}
    void fail(ZkCode) override {
      fulfiller->fulfill(WatchEvent{WatchEvent::Type::kSessionLost, path});
    }
    State* state;
    std::string path;
    kj::Own<kj::PromiseFulfiller<WatchEvent>> fulfiller;
  };

  // A read that may set a watch: its completion decides whether ZooKeeper registered the watch
  // and hands out the watch's promise only then.
  template <typename T>
  struct WatchedCall final : PendingCall {
    WatchedCall(State* state, kj::Own<kj::PromiseFulfiller<Watched<T>>> fulfiller,
                WatchCall* watch, kj::Promise<WatchEvent> watchPromise)
        : state(state), fulfiller(kj::mv(fulfiller)), watch(watch),
          watchPromise(kj::mv(watchPromise)) {}
    void fail(ZkCode code) override {
      state->finish(watch);  // Not issued, or never answered: the watch cannot fire.
      fulfiller->fulfill(Watched<T>{ZkReply<T>{code, T{}}, nullptr});
    }
    void complete(ZkCode code, T value, bool watchSet) {
      kj::Maybe<kj::Promise<WatchEvent>> handed;
      if (watchSet) {
        handed = kj::mv(watchPromise);
      } else {
        state->finish(watch);  // ZooKeeper will never call it.
      }
      fulfiller->fulfill(
          Watched<T>{ZkReply<T>{state->translate(code), std::move(value)}, kj::mv(handed)});
    }
    State* state;
    kj::Own<kj::PromiseFulfiller<Watched<T>>> fulfiller;
    WatchCall* watch;
    kj::Promise<WatchEvent> watchPromise;
  };

  static void onWatch(zhandle_t*, int type, int, const char* path, void* context) {
    if (type == ZOO_SESSION_EVENT) return;  // Session changes reach the listeners instead.
    auto* watch = static_cast<WatchCall*>(const_cast<void*>(context));
    WatchEvent event{WatchEvent::Type::kSessionLost, watch->path};
    if (type == ZOO_CREATED_EVENT) {
      event.type = WatchEvent::Type::kCreated;
    } else if (type == ZOO_DELETED_EVENT) {
      event.type = WatchEvent::Type::kDeleted;
    } else if (type == ZOO_CHANGED_EVENT) {
      event.type = WatchEvent::Type::kDataChanged;
    } else if (type == ZOO_CHILD_EVENT) {
      event.type = WatchEvent::Type::kChildrenChanged;
    }
    (void)path;
    State* state = watch->state;
    if (event.type != WatchEvent::Type::kSessionLost) state->session.countWatchFired();
    watch->fulfiller->fulfill(kj::mv(event));
    state->finish(watch);
  }

  // What every single-node operation does first: check the path, make its call record and
  // promise, and issue it; `issue(zh, absolutePath, call)` starts the library's operation.
  template <typename T, typename Issue>
  kj::Promise<ZkReply<T>> request(const std::string& path, Issue&& issue) {
    if (!validRelative(path)) return ZkReply<T>{ZkCode::kBadArguments, T{}};
    using Call = ReplyCall<T>;
    auto paf = kj::newPromiseAndFulfiller<ZkReply<T>>();
    const std::string full = absolute(path);
    submit(std::make_unique<Call>(this, kj::mv(paf.fulfiller)),
           [&](zhandle_t* zh, Call* c) { return issue(zh, full.c_str(), c); });
    return kj::mv(paf.promise);
  }

  // The same for a read that sets a watch.
  template <typename T, typename Issue>
  kj::Promise<Watched<T>> watchedRequest(const std::string& path, Issue&& issue) {
    if (!validRelative(path)) return Watched<T>{ZkReply<T>{ZkCode::kBadArguments, T{}}, nullptr};
    using Call = WatchedCall<T>;
    auto paf = kj::newPromiseAndFulfiller<Watched<T>>();
    auto [watch, watchPromise] = newWatch(path);
    const std::string full = absolute(path);
    submit(std::make_unique<Call>(this, kj::mv(paf.fulfiller), watch, kj::mv(watchPromise)),
           [&](zhandle_t* zh, Call* c) { return issue(zh, full.c_str(), c); });
    return kj::mv(paf.promise);
  }

  // Creates the watch record and its promise for a watched read.
  std::pair<WatchCall*, kj::Promise<WatchEvent>> newWatch(const std::string& path) {
    auto paf = kj::newPromiseAndFulfiller<WatchEvent>();
    auto watch = std::make_unique<WatchCall>(this, path, kj::mv(paf.fulfiller));
    WatchCall* raw = watch.get();
    session.adoptWatch(std::move(watch));
    return {raw, kj::mv(paf.promise)};
  }

  // ---- ensurePath ---------------------------------------------------------------------------

  // Nodes at or below the cluster root carry its ACL; ancestors of the root (shared by every
  // cluster, for example "/regent") are open so other clusters can live beside this one.
  const ACL_vector* aclFor(const std::string& absolutePath) const {
    const bool inCluster = absolutePath == root ||
                           absolutePath.rfind(root + "/", 0) == 0;
    return inCluster ? &acl : &ZOO_OPEN_ACL_UNSAFE;
  }

  kj::Promise<ZkReply<std::string>> createAbsolute(std::string path, std::string data,
                                                   CreateMode mode) {
    auto paf = kj::newPromiseAndFulfiller<ZkReply<std::string>>();
    struct CreateCall final : PendingCall {
      CreateCall(State* state, kj::Own<kj::PromiseFulfiller<ZkReply<std::string>>> f,
                 std::string path, std::string data)
          : reply(state, kj::mv(f)), path(std::move(path)), data(std::move(data)) {}
      void fail(ZkCode code) override { reply.fail(code); }
      ReplyCall<std::string> reply;
      std::string path;
      std::string data;
    };
    auto call = std::make_unique<CreateCall>(this, kj::mv(paf.fulfiller), path, std::move(data));
    const ACL_vector* nodeAcl = aclFor(path);
    const int flags = createFlags(mode);
    submit(std::move(call), [nodeAcl, flags](zhandle_t* zh, CreateCall* c) {
      return zoo_acreate(
          zh, c->path.c_str(), c->data.data(), static_cast<int>(c->data.size()), nodeAcl, flags,
          [](int rc, const char* created, const void* context) {
            auto* c = static_cast<CreateCall*>(const_cast<void*>(context));
            State* state = c->reply.state;
            c->reply.complete(static_cast<ZkCode>(rc),
                              rc == ZOK && created != nullptr ? state->relative(created) : "");
            state->finish(c);
          },
          c);
    });
    return kj::mv(paf.promise);
  }
};

// ---- ZooKeeperClient -----------------------------------------------------------------------

Result<kj::Own<ZooKeeperClient>> ZooKeeperClient::start(EventLoop& loop,
                                                        ZooKeeperClientOptions options) {
  if (options.quorum.empty()) return Error::fatal("ZooKeeper quorum is empty");
  if (Status quorum = checkQuorum(options.quorum); !quorum.ok()) return quorum.error();
  if (options.root.empty() || options.root.front() != '/' || options.root.back() == '/') {
    return Error::fatal("ZooKeeper root '" + options.root +
                        "' must be an absolute path without a trailing '/'");
  }
  for (const std::string* credential : {&options.auth, &options.readAuth}) {
    if (!credential->empty() && credential->find(':') == std::string::npos) {
      return Error::fatal("ZooKeeper credential must be user:password");
    }
  }
  static const bool logLevelSet = [] {
    // INFO lines become spdlog debug lines (logFromZooKeeper); below that is noise.
    zoo_set_debug_level(ZOO_LOG_LEVEL_INFO);
    return true;
  }();
  (void)logLevelSet;

  auto state = kj::heap<State>(loop, options);
  State& s = *state;
  if (options.auth.empty()) {
    s.acl = ZOO_OPEN_ACL_UNSAFE;
  } else {
    s.aclIds.push_back(digestId(options.auth));
    if (!options.readAuth.empty()) s.aclIds.push_back(digestId(options.readAuth));
    for (size_t i = 0; i < s.aclIds.size(); ++i) {
      ACL entry{};
      entry.perms = i == 0 ? ZOO_PERM_ALL : ZOO_PERM_READ;
      entry.id.scheme = const_cast<char*>("digest");
      entry.id.id = s.aclIds[i].data();
      s.aclEntries.push_back(entry);
    }
    s.acl.count = static_cast<int32_t>(s.aclEntries.size());
    s.acl.data = s.aclEntries.data();
  }
  s.session.open();  // A quorum that does not resolve yet is retried from the loop.
  return kj::heap<ZooKeeperClient>(FactoryKey<ZooKeeperClient>(), kj::mv(state));
}

namespace {

// Library completions shared by the plain and the watched read of each kind; `Call` is a
// State::ReplyCall or a State::WatchedCall.
template <typename Call>
Call* callOf(const void* context) {
  return static_cast<Call*>(const_cast<void*>(context));
}

template <typename Call>
void onData(int rc, const char* value, int length, const Stat* stat, const void* context) {
  Call* c = callOf<Call>(context);
  NodeData data;
  if (rc == ZOK) {
    if (value != nullptr && length > 0) data.data.assign(value, length);
    data.stat = toNodeStat(stat);
  }
  c->complete(static_cast<ZkCode>(rc), std::move(data), rc == ZOK);
  c->state->finish(c);
}

template <typename Call>
void onExists(int rc, const Stat* stat, const void* context) {
  Call* c = callOf<Call>(context);
  // A missing node is an answer (nullopt), and a watch on it is set too: it fires on creation.
  if (rc == ZNONODE) {
    c->complete(ZkCode::kOk, std::nullopt, true);
  } else if (rc == ZOK) {
    c->complete(ZkCode::kOk, toNodeStat(stat), true);
  } else {
    c->complete(static_cast<ZkCode>(rc), std::nullopt, false);
  }
  c->state->finish(c);
}

std::vector<std::string> toNames(const String_vector* strings) {
  std::vector<std::string> names;
  if (strings == nullptr) return names;
  names.reserve(static_cast<size_t>(strings->count));
  for (int32_t i = 0; i < strings->count; ++i) names.emplace_back(strings->data[i]);
  return names;
}

template <typename Call>
void onChildren(int rc, const String_vector* strings, const void* context) {
  Call* c = callOf<Call>(context);
  c->complete(static_cast<ZkCode>(rc), rc == ZOK ? toNames(strings) : std::vector<std::string>{},
              rc == ZOK);
  c->state->finish(c);
}

}  // namespace

ZooKeeperClient::ZooKeeperClient(FactoryKey<ZooKeeperClient>, kj::Own<State> state)
    : state_(kj::mv(state)) {}

ZooKeeperClient::~ZooKeeperClient() noexcept {
  state_->session.close();
}

kj::Promise<Status> ZooKeeperClient::waitConnected(Duration timeout) {
  return state_->session.waitConnected(timeout);
}

void ZooKeeperClient::close() { state_->session.close(); }

kj::Promise<ZkReply<std::string>> ZooKeeperClient::create(std::string path, std::string data,
                                                          CreateMode mode) {
  if (!State::validRelative(path)) return ZkReply<std::string>{ZkCode::kBadArguments, {}};
  return state_->createAbsolute(state_->absolute(path), std::move(data), mode);
}

kj::Promise<ZkReply<NodeData>> ZooKeeperClient::get(std::string path) {
  using Call = State::ReplyCall<NodeData>;
  return state_->request<NodeData>(path, [](zhandle_t* zh, const char* full, Call* c) {
    return zoo_aget(zh, full, 0, &onData<Call>, c);
  });
}

kj::Promise<Watched<NodeData>> ZooKeeperClient::getAndWatch(std::string path) {
  using Call = State::WatchedCall<NodeData>;
  return state_->watchedRequest<NodeData>(path, [](zhandle_t* zh, const char* full, Call* c) {
    return zoo_awget(zh, full, &State::onWatch, c->watch, &onData<Call>, c);
  });
}

kj::Promise<ZkReply<NodeStat>> ZooKeeperClient::set(std::string path, std::string data,
                                                    int32_t version) {
  if (!State::validRelative(path)) return ZkReply<NodeStat>{ZkCode::kBadArguments, {}};
  struct Call final : PendingCall {
    Call(State* state, kj::Own<kj::PromiseFulfiller<ZkReply<NodeStat>>> f, std::string data)
        : reply(state, kj::mv(f)), data(std::move(data)) {}
    void fail(ZkCode code) override { reply.fail(code); }
    State::ReplyCall<NodeStat> reply;
    std::string data;
  };
  auto paf = kj::newPromiseAndFulfiller<ZkReply<NodeStat>>();
  const std::string absolute = state_->absolute(path);
  state_->submit(std::make_unique<Call>(state_.get(), kj::mv(paf.fulfiller), std::move(data)),
                 [&absolute, version](zhandle_t* zh, Call* c) {
                   return zoo_aset(
                       zh, absolute.c_str(), c->data.data(), static_cast<int>(c->data.size()),
                       version,
                       [](int rc, const Stat* stat, const void* context) {
                         auto* c = static_cast<Call*>(const_cast<void*>(context));
                         State* state = c->reply.state;
                         c->reply.complete(static_cast<ZkCode>(rc),
                                           rc == ZOK ? toNodeStat(stat) : NodeStat{});
                         state->finish(c);
                       },
                       c);
                 });
  return kj::mv(paf.promise);
}

kj::Promise<ZkReply<bool>> ZooKeeperClient::remove(std::string path, int32_t version) {
  using Call = State::ReplyCall<bool>;
  return state_->request<bool>(path, [version](zhandle_t* zh, const char* full, Call* c) {
    return zoo_adelete(
        zh, full, version,
        [](int rc, const void* context) {
          Call* c = callOf<Call>(context);
          c->complete(static_cast<ZkCode>(rc), rc == ZOK);
          c->state->finish(c);
        },
        c);
  });
}

kj::Promise<ZkReply<std::optional<NodeStat>>> ZooKeeperClient::exists(std::string path) {
  using Call = State::ReplyCall<std::optional<NodeStat>>;
  return state_->request<std::optional<NodeStat>>(
      path, [](zhandle_t* zh, const char* full, Call* c) {
        return zoo_aexists(zh, full, 0, &onExists<Call>, c);
      });
}

kj::Promise<Watched<std::optional<NodeStat>>> ZooKeeperClient::existsAndWatch(std::string path) {
  using Call = State::WatchedCall<std::optional<NodeStat>>;
  return state_->watchedRequest<std::optional<NodeStat>>(
      path, [](zhandle_t* zh, const char* full, Call* c) {
        return zoo_awexists(zh, full, &State::onWatch, c->watch, &onExists<Call>, c);
      });
}

kj::Promise<ZkReply<std::vector<std::string>>> ZooKeeperClient::children(std::string path) {
  using Call = State::ReplyCall<std::vector<std::string>>;
  return state_->request<std::vector<std::string>>(
      path, [](zhandle_t* zh, const char* full, Call* c) {
        return zoo_aget_children(zh, full, 0, &onChildren<Call>, c);
      });
}

kj::Promise<Watched<std::vector<std::string>>> ZooKeeperClient::childrenAndWatch(std::string path) {
  using Call = State::WatchedCall<std::vector<std::string>>;
  return state_->watchedRequest<std::vector<std::string>>(
      path, [](zhandle_t* zh, const char* full, Call* c) {
        return zoo_awget_children(zh, full, &State::onWatch, c->watch, &onChildren<Call>, c);
      });
}

kj::Promise<ZkReply<std::vector<AclEntry>>> ZooKeeperClient::getAcl(std::string path) {
  using Call = State::ReplyCall<std::vector<AclEntry>>;
  return state_->request<std::vector<AclEntry>>(
      path, [](zhandle_t* zh, const char* full, Call* c) {
        return zoo_aget_acl(
            zh, full,
            [](int rc, ACL_vector* acl, Stat*, const void* context) {
              Call* c = callOf<Call>(context);
              std::vector<AclEntry> entries;
              if (rc == ZOK && acl != nullptr) {
                for (int32_t i = 0; i < acl->count; ++i) {
                  const ACL& entry = acl->data[i];
                  entries.push_back(AclEntry{entry.id.scheme ? entry.id.scheme : "",
                                             entry.id.id ? entry.id.id : "", entry.perms});
                }
              }
              c->complete(static_cast<ZkCode>(rc), std::move(entries));
              c->state->finish(c);
            },
            c);
      });
}

kj::Promise<ZkReply<std::vector<ZkOpResult>>> ZooKeeperClient::multi(std::vector<ZkOp> ops) {
  using Value = std::vector<ZkOpResult>;
  if (ops.empty()) return ZkReply<Value>{ZkCode::kOk, {}};
  for (const ZkOp& op : ops) {
    if (!State::validRelative(op.path)) return ZkReply<Value>{ZkCode::kBadArguments, {}};
  }
  // The library reads ops, writes results, path buffers and stats until the completion runs:
  // all of it lives in the call record.
  struct Call final : PendingCall {
    Call(State* state, kj::Own<kj::PromiseFulfiller<ZkReply<Value>>> f, std::vector<ZkOp> ops)
        : reply(state, kj::mv(f)), ops(std::move(ops)) {}
    void fail(ZkCode code) override { reply.fail(code); }
    State::ReplyCall<Value> reply;
    std::vector<ZkOp> ops;  // Paths made absolute.
    std::vector<zoo_op_t> zops;
    std::vector<zoo_op_result_t> results;
    std::vector<std::array<char, kMaxPathLength>> pathBuffers;
    std::vector<Stat> stats;
  };
  for (ZkOp& op : ops) op.path = state_->absolute(op.path);
  auto paf = kj::newPromiseAndFulfiller<ZkReply<Value>>();
  auto call = std::make_unique<Call>(state_.get(), kj::mv(paf.fulfiller), std::move(ops));
  const size_t n = call->ops.size();
  call->zops.resize(n);
  call->results.resize(n);
  call->pathBuffers.resize(n);
  call->stats.resize(n);
  for (size_t i = 0; i < n; ++i) {
    ZkOp& op = call->ops[i];
    switch (op.kind) {
      case ZkOp::Kind::kCreate:
        zoo_create_op_init(&call->zops[i], op.path.c_str(), op.data.data(),
                           static_cast<int>(op.data.size()), state_->aclFor(op.path),
                           createFlags(op.mode), call->pathBuffers[i].data(),
                           static_cast<int>(kMaxPathLength));
        break;
      case ZkOp::Kind::kRemove:
        zoo_delete_op_init(&call->zops[i], op.path.c_str(), op.version);
        break;
      case ZkOp::Kind::kSetData:
        zoo_set_op_init(&call->zops[i], op.path.c_str(), op.data.data(),
                        static_cast<int>(op.data.size()), op.version, &call->stats[i]);
        break;
      case ZkOp::Kind::kCheck:
        zoo_check_op_init(&call->zops[i], op.path.c_str(), op.version);
        break;
    }
  }
  state_->submit(std::move(call), [](zhandle_t* zh, Call* c) {
    return zoo_amulti(
        zh, static_cast<int>(c->zops.size()), c->zops.data(), c->results.data(),
        [](int rc, const void* context) {
          auto* c = static_cast<Call*>(const_cast<void*>(context));
          State* state = c->reply.state;
          Value results;
          results.reserve(c->ops.size());
          for (size_t i = 0; i < c->ops.size(); ++i) {
            ZkOpResult result;
            result.code = static_cast<ZkCode>(c->results[i].err);
            if (c->ops[i].kind == ZkOp::Kind::kCreate && result.code == ZkCode::kOk) {
              result.createdPath = state->relative(c->pathBuffers[i].data());
            }
            if (c->ops[i].kind == ZkOp::Kind::kSetData && result.code == ZkCode::kOk) {
              result.stat = toNodeStat(&c->stats[i]);
            }
            results.push_back(std::move(result));
          }
          c->reply.complete(static_cast<ZkCode>(rc), std::move(results));
          state->finish(c);
        },
        c);
  });
  return kj::mv(paf.promise);
}

namespace {

ZkReply<bool> existsNow(const ZkReply<std::string>& created) {
  if (created.ok() || created.code == ZkCode::kNodeExists) return ZkReply<bool>{ZkCode::kOk, true};
  return ZkReply<bool>{created.code, false};
}

// Creates `path` (absolute); only when its parent is missing does it make the parent first, so
// the usual call, on a path that mostly exists, is one round trip.
kj::Promise<ZkReply<bool>> ensureAbsolute(ZooKeeperClient::State* state, std::string path) {
  return state->createAbsolute(path, "", CreateMode::kPersistent)
      .then([state, path](ZkReply<std::string> created) -> kj::Promise<ZkReply<bool>> {
        const size_t slash = path.rfind('/');
        if (created.code != ZkCode::kNoNode || slash == 0 || slash == std::string::npos) {
          return existsNow(created);
        }
        return ensureAbsolute(state, path.substr(0, slash))
            .then([state, path](ZkReply<bool> parent) -> kj::Promise<ZkReply<bool>> {
              if (!parent.ok()) return parent;
              return state->createAbsolute(path, "", CreateMode::kPersistent)
                  .then([](ZkReply<std::string> created) { return existsNow(created); });
            });
      });
}

}  // namespace

kj::Promise<ZkReply<bool>> ZooKeeperClient::ensurePath(std::string path) {
  if (!State::validRelative(path)) return ZkReply<bool>{ZkCode::kBadArguments, false};
  return state_->canceler.wrap(ensureAbsolute(state_.get(), state_->absolute(path)));
}

const std::string& ZooKeeperClient::root() const { return state_->root; }

SessionState ZooKeeperClient::sessionState() const { return state_->session.state(); }
int64_t ZooKeeperClient::sessionId() const { return state_->session.id(); }
std::optional<MonoTime> ZooKeeperClient::sessionDeadline() const {
  return state_->session.deadline();
}
Duration ZooKeeperClient::negotiatedSessionTimeout() const {
  return state_->session.negotiatedTimeout();
}

kj::Own<void> ZooKeeperClient::onSessionState(kj::Function<void(SessionState)> listener) {
  return state_->session.onStateChange(kj::mv(listener));
}

std::string ZooKeeperClient::sessionPasswordForTests() const { return state_->session.password(); }
uint64_t ZooKeeperClient::watchesFiredForTests() const { return state_->session.watchesFired(); }

}  // namespace regent::ha

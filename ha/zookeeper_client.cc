// ZooKeeperClient over the single-threaded C library: a uv poll on the library's socket and a uv
// timer for its deadlines drive zookeeper_process() on the loop thread; completions fulfil kj
// promises; raw session events are turned into SessionState transitions outside the library.
#include "ha/zookeeper_client.h"

#include <fcntl.h>
#include <kj/debug.h>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <uv.h>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <list>
#include <map>

#include "common/event_loop.h"
#include "conf/config.h"

namespace regent::ha {

static_assert(static_cast<int>(ZkCode::kConnectionLoss) == ZCONNECTIONLOSS);
static_assert(static_cast<int>(ZkCode::kOperationTimeout) == ZOPERATIONTIMEOUT);
static_assert(static_cast<int>(ZkCode::kNoNode) == ZNONODE);
static_assert(static_cast<int>(ZkCode::kNoAuth) == ZNOAUTH);
static_assert(static_cast<int>(ZkCode::kBadVersion) == ZBADVERSION);
static_assert(static_cast<int>(ZkCode::kNodeExists) == ZNODEEXISTS);
static_assert(static_cast<int>(ZkCode::kNotEmpty) == ZNOTEMPTY);
static_assert(static_cast<int>(ZkCode::kSessionExpired) == ZSESSIONEXPIRED);
static_assert(static_cast<int>(ZkCode::kClosing) == ZCLOSING);
static_assert(static_cast<int>(ZkCode::kSessionMoved) == ZSESSIONMOVED);
static_assert(static_cast<int>(ZkCode::kInvalidState) == ZINVALIDSTATE);
static_assert(static_cast<int>(ZkCode::kNoChildrenForEphemerals) == ZNOCHILDRENFOREPHEMERALS);

const char* zkCodeName(ZkCode code) {
  switch (code) {
    case ZkCode::kOk: return "ZOK";
    case ZkCode::kRuntimeInconsistency: return "ZRUNTIMEINCONSISTENCY";
    case ZkCode::kConnectionLoss: return "ZCONNECTIONLOSS";
    case ZkCode::kMarshallingError: return "ZMARSHALLINGERROR";
    case ZkCode::kOperationTimeout: return "ZOPERATIONTIMEOUT";
    case ZkCode::kBadArguments: return "ZBADARGUMENTS";
    case ZkCode::kInvalidState: return "ZINVALIDSTATE";
    case ZkCode::kApiError: return "ZAPIERROR";
    case ZkCode::kNoNode: return "ZNONODE";
    case ZkCode::kNoAuth: return "ZNOAUTH";
    case ZkCode::kBadVersion: return "ZBADVERSION";
    case ZkCode::kNoChildrenForEphemerals: return "ZNOCHILDRENFOREPHEMERALS";
    case ZkCode::kNodeExists: return "ZNODEEXISTS";
    case ZkCode::kNotEmpty: return "ZNOTEMPTY";
    case ZkCode::kSessionExpired: return "ZSESSIONEXPIRED";
    case ZkCode::kInvalidAcl: return "ZINVALIDACL";
    case ZkCode::kClosing: return "ZCLOSING";
    case ZkCode::kSessionMoved: return "ZSESSIONMOVED";
  }
  // zerror() names the codes this enum does not list (ZRUNTIMEINCONSISTENCY, ...).
  return zerror(static_cast<int>(code));
}

bool isRetryable(ZkCode code) {
  return code == ZkCode::kConnectionLoss || code == ZkCode::kOperationTimeout ||
         code == ZkCode::kSessionMoved;
}

const char* sessionStateName(SessionState state) {
  switch (state) {
    case SessionState::kConnecting: return "CONNECTING";
    case SessionState::kConnected: return "CONNECTED";
    case SessionState::kSuspended: return "SUSPENDED";
    case SessionState::kReconnected: return "RECONNECTED";
    case SessionState::kExpired: return "EXPIRED";
    case SessionState::kClosed: return "CLOSED";
  }
  return "?";
}

ZkOp ZkOp::create(std::string path, std::string data, CreateMode mode) {
  return ZkOp{Kind::kCreate, std::move(path), std::move(data), mode, -1};
}
ZkOp ZkOp::remove(std::string path, int32_t version) {
  return ZkOp{Kind::kRemove, std::move(path), {}, CreateMode::kPersistent, version};
}
ZkOp ZkOp::setData(std::string path, std::string data, int32_t version) {
  return ZkOp{Kind::kSetData, std::move(path), std::move(data), CreateMode::kPersistent, version};
}
ZkOp ZkOp::check(std::string path, int32_t version) {
  return ZkOp{Kind::kCheck, std::move(path), {}, CreateMode::kPersistent, version};
}

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
constexpr Duration kUnreachableWarningInterval{10000};
constexpr Duration kReopenDelay{1000};
// Floor of the retry timer when zookeeper_interest() fails (it then reports no deadline).
constexpr Duration kInterestRetryDelay{100};
// Least time between two connection attempts while there is no session. A refused connection on
// loopback fails at once, and with several hosts the library moves to the next one without
// pausing, which would spin the loop.
constexpr Duration kMinAttemptInterval{100};

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

// ZooKeeper's digest ACL id: "user:" + base64(sha1("user:password")).
std::string digestId(const std::string& credential) {
  unsigned char sha[EVP_MAX_MD_SIZE];
  unsigned int shaLength = 0;
  EVP_Digest(credential.data(), credential.size(), sha, &shaLength, EVP_sha1(), nullptr);
  std::string encoded(4 * ((shaLength + 2) / 3) + 1, '\0');
  const int written = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(encoded.data()), sha,
                                      static_cast<int>(shaLength));
  encoded.resize(static_cast<size_t>(written));
  return credential.substr(0, credential.find(':')) + ":" + encoded;
}

// The library's last warning or error, for the periodic "unreachable" warning. Loop threads
// only, and the library logs from the thread that drives it.
thread_local std::string lastLibraryProblem;

// Routes the library's log lines ("time:pid(tid):ZOO_INFO@function@line: text") to spdlog at
// debug level. While ZooKeeper is unreachable the library retries every few milliseconds and
// logs each failure; the client's own state lines, and a throttled warning naming the last
// problem, are what operators see. The library gives the callback no context, so it logs to the
// default logger.
void logFromZooKeeper(const char* message) {
  const std::string_view text(message);
  const size_t at = text.find('@');
  const std::string_view body = at == std::string_view::npos ? text : text.substr(at + 1);
  if (text.find("ZOO_ERROR@") != std::string_view::npos ||
      text.find("ZOO_WARN@") != std::string_view::npos) {
    lastLibraryProblem.assign(body);
  }
  spdlog::debug("zookeeper: {}", body);
}

}  // namespace

// One asynchronous call (or one watch) the C library holds a context pointer to.
struct PendingCall {
  virtual ~PendingCall() noexcept(false) = default;
  // Completes the call with `code` without a result from the server (handle closed).
  virtual void fail(ZkCode code) = 0;
};

struct ZooKeeperClient::State {
  struct ListenerHandle;
  struct Listener {
    kj::Function<void(SessionState)> fn;
    ListenerHandle* handle = nullptr;  // Cleared when the handle goes first.
    bool removed = false;
  };

  // The registration handed out by onSessionState(); whichever of it and the state goes first
  // unlinks the other.
  struct ListenerHandle {
    ListenerHandle(State* state, std::list<Listener>::iterator it) : state(state), it(it) {
      it->handle = this;
    }
    ~ListenerHandle() {
      if (state != nullptr) {
        it->removed = true;
        it->handle = nullptr;
      }
    }
    KJ_DISALLOW_COPY(ListenerHandle);
    State* state;
    std::list<Listener>::iterator it;
  };

  // Everything that belongs to one zhandle_t: it is replaced after a session expires.
  struct Handle {
    zhandle_t* zh = nullptr;
    std::map<PendingCall*, std::unique_ptr<PendingCall>> calls;
  };

  class ErrorHandler final : public kj::TaskSet::ErrorHandler {
   public:
    void taskFailed(kj::Exception&& exception) override {
      spdlog::error("zookeeper client: internal task failed: {}", exception.getDescription().cStr());
    }
  };

  State(EventLoop& loop, ZooKeeperClientOptions options)
      : loop(loop), options(std::move(options)), ioTimer(loop), expiryTimer(loop),
        unreachableTimer(loop), tasks(errorHandler) {}
  ~State() {
    for (Listener& listener : listeners) {
      if (listener.handle != nullptr) listener.handle->state = nullptr;
    }
  }

  EventLoop& loop;
  ZooKeeperClientOptions options;
  std::unique_ptr<Handle> handle;
  SessionState state = SessionState::kConnecting;
  int64_t sessionId = 0;
  std::string sessionPassword;
  Duration negotiated{0};
  bool everConnected = false;
  uint64_t watchesFired = 0;

  // ACL for nodes at and below the cluster root (open when there is no credential).
  std::vector<std::string> aclIds;
  std::vector<ACL> aclEntries;
  ACL_vector acl{};

  uv_poll_t* poll = nullptr;
  int pollFd = -1;
  ino_t pollInode = 0;
  int pollEvents = 0;
  UvTimer ioTimer;
  UvTimer expiryTimer;
  UvTimer unreachableTimer;  // Repeats a warning while there is no connection.
  MonoTime disconnectedSince{};
  MonoTime lastAttemptStart{};
  bool processing = false;          // Inside zookeeper_process(): no close, no reopen.
  // What calls completed by zookeeper_close() report instead of ZCLOSING (kSessionExpired when
  // the handle is closed because its session expired).
  ZkCode closingAs = ZkCode::kClosing;
  std::vector<int> rawStates;       // Session events seen inside the library, handled after.

  std::list<Listener> listeners;
  std::vector<kj::Own<kj::PromiseFulfiller<void>>> connectedWaiters;
  ErrorHandler errorHandler;
  kj::TaskSet tasks;
  // Wraps promises whose continuations use this state (ensurePath): destroying the client
  // cancels them instead of letting them run on freed memory.
  kj::Canceler canceler;

  // ---- handle life -------------------------------------------------------------------------

  void open() {
    handle = std::make_unique<Handle>();
    // ZOO_NO_LOG_CLIENTENV: the environment dump looks up the user (getpwuid), which can block.
    handle->zh = zookeeper_init2(options.quorum.c_str(), &State::onSessionEvent,
                                 static_cast<int>(options.sessionTimeout.count()), nullptr, this,
                                 ZOO_NO_LOG_CLIENTENV, &logFromZooKeeper);
    if (handle->zh == nullptr) {
      // No quorum host resolves (DNS down) or resources ran out: try again later, on the loop.
      lastLibraryProblem = std::string("cannot create a handle: ") + std::strerror(errno);
      spdlog::debug("zookeeper: {} for {}; retrying in {} ms", lastLibraryProblem,
                    options.quorum, kReopenDelay.count());
      ioTimer.start(kReopenDelay, Duration(0), [this] {
        if (state != SessionState::kClosed) open();
      });
      if (!unreachableTimer.isActive()) startUnreachableWarnings();
      return;
    }
    // By default the library resolves the quorum's host names on every zookeeper_interest()
    // call, blocking the loop thread; resolve only when a connection is (re)made.
    zoo_set_servers_resolution_delay(handle->zh, -1);
    const std::string& credential =
        options.readOnlyIdentity && !options.readAuth.empty() ? options.readAuth : options.auth;
    if (!credential.empty()) {
      // A wrong password is accepted here; it shows later as ZNOAUTH (DESIGN §3).
      zoo_add_auth(handle->zh, "digest", credential.data(), static_cast<int>(credential.size()),
                   nullptr, nullptr);
    }
    updateInterest();
    if (!unreachableTimer.isActive()) startUnreachableWarnings();
  }

  void startUnreachableWarnings() {
    disconnectedSince = std::chrono::steady_clock::now();
    unreachableTimer.start(kUnreachableWarningInterval, kUnreachableWarningInterval, [this] {
      const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
          std::chrono::steady_clock::now() - disconnectedSince);
      spdlog::warn("zookeeper: no connection to {} for {} s{}{}", options.quorum, seconds.count(),
                   lastLibraryProblem.empty() ? "" : "; last problem: ", lastLibraryProblem);
    });
  }

  // Closes the current handle and completes everything it still holds.
  void closeHandle(ZkCode callCode) {
    if (!handle) return;
    stopPoll();
    ioTimer.stop();
    std::unique_ptr<Handle> old = std::move(handle);
    closingAs = callCode;
    if (old->zh != nullptr) zookeeper_close(old->zh);
    closingAs = ZkCode::kClosing;
    // Calls the library did not complete while closing, and watches that can never fire now.
    for (auto& [raw, call] : old->calls) call->fail(callCode);
    old->calls.clear();
  }

  bool isConnectedState() const {
    return state == SessionState::kConnected || state == SessionState::kReconnected;
  }

  void stopPoll() {
    if (poll == nullptr) return;
    uv_poll_stop(poll);
    uv_close(reinterpret_cast<uv_handle_t*>(poll),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_poll_t*>(h); });
    poll = nullptr;
    pollFd = -1;
    pollInode = 0;
    pollEvents = 0;
  }

  // Asks the library what it waits for and arms the poll and the timer accordingly. Called after
  // every zookeeper_process() and every request, since the socket changes on reconnect.
  void updateInterest() {
    if (!handle || handle->zh == nullptr) return;
    int fd = -1;
    int interest = 0;
    timeval tv{};
    const int rc = zookeeper_interest(handle->zh, &fd, &interest, &tv);
    if (rc != ZOK && rc != ZCONNECTIONLOSS) {
      spdlog::debug("zookeeper: interest returned {}", zerror(rc));
    }
    // A failed send inside a request closes the socket without a session event: notice it here
    // so a leader learns it is cut off.
    if ((state == SessionState::kConnected || state == SessionState::kReconnected) &&
        zoo_state(handle->zh) != ZOO_CONNECTED_STATE) {
      onDisconnected();
    }
    int events = 0;
    if (interest & ZOOKEEPER_READ) events |= UV_READABLE;
    if (interest & ZOOKEEPER_WRITE) events |= UV_WRITABLE;
    ino_t inode = 0;
    if (fd >= 0) {
      struct stat st {};
      if (::fstat(fd, &st) == 0) inode = st.st_ino;
    }
    // A new socket may reuse the old descriptor number: compare the inode too.
    const bool newSocket = fd >= 0 && (poll == nullptr || fd != pollFd || inode != pollInode);
    // The library's socket is not close-on-exec; child processes must not inherit it.
    if (newSocket) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    if (poll != nullptr && (fd != pollFd || inode != pollInode || events == 0)) stopPoll();
    if (newSocket && !isConnectedState()) {
      // A new connection attempt: let it proceed only after kMinAttemptInterval since the last.
      const MonoTime now = std::chrono::steady_clock::now();
      const auto since = std::chrono::duration_cast<Duration>(now - lastAttemptStart);
      if (since < kMinAttemptInterval) {
        ioTimer.start(kMinAttemptInterval - since, Duration(0), [this] { updateInterest(); });
        loop.kick();
        return;
      }
      lastAttemptStart = now;
    }
    if (fd >= 0 && events != 0 && poll == nullptr) {
      auto* fresh = new uv_poll_t;
      const int initRc = uv_poll_init(loop.uv(), fresh, fd);
      if (initRc == 0) {
        fresh->data = this;
        poll = fresh;
        pollFd = fd;
        pollInode = inode;
        pollEvents = 0;
      } else {
        // Not expected for a socket; without a poll the timer below still drives the library.
        spdlog::error("zookeeper: cannot poll fd {}: {}", fd, uv_strerror(initRc));
        delete fresh;
      }
    }
    if (poll != nullptr && events != pollEvents) {
      uv_poll_start(poll, events, &State::onPoll);
      pollEvents = events;
    }
    int64_t timeoutMs = int64_t{tv.tv_sec} * 1000 + (tv.tv_usec + 999) / 1000;
    if (rc != ZOK && rc != ZCONNECTIONLOSS && fd < 0) {
      // The library reports no deadline after a failure (for example a failed resolution):
      // retry at a modest pace instead of spinning.
      timeoutMs = std::max<int64_t>(timeoutMs, kInterestRetryDelay.count());
    }
    ioTimer.start(Duration(std::max<int64_t>(timeoutMs, 0)), Duration(0), [this] { process(0); });
    loop.kick();
  }

  void process(int events) {
    if (!handle || handle->zh == nullptr) return;
    processing = true;
    zookeeper_process(handle->zh, events);
    processing = false;
    handleRawStates();
    updateInterest();
  }

  static void onPoll(uv_poll_t* poll, int status, int events) {
    auto* self = static_cast<State*>(poll->data);
    int zkEvents = 0;
    if (status < 0) {
      zkEvents = ZOOKEEPER_READ | ZOOKEEPER_WRITE;  // Let the library find the error.
    } else {
      if (events & UV_READABLE) zkEvents |= ZOOKEEPER_READ;
      if (events & UV_WRITABLE) zkEvents |= ZOOKEEPER_WRITE;
    }
    try {
      self->process(zkEvents);
    } catch (const std::exception& e) {
      // Never unwind through libuv.
      spdlog::error("zookeeper: processing failed: {}", e.what());
    } catch (const kj::Exception& e) {
      spdlog::error("zookeeper: processing failed: {}", e.getDescription().cStr());
    }
  }

  // ---- session state -----------------------------------------------------------------------

  static void onSessionEvent(zhandle_t*, int type, int state, const char*, void* context) {
    if (type != ZOO_SESSION_EVENT) return;  // Path watches carry their own watcher.
    static_cast<State*>(context)->rawStates.push_back(state);
  }

  void handleRawStates() {
    std::vector<int> states;
    states.swap(rawStates);
    for (int raw : states) {
      if (raw == ZOO_CONNECTED_STATE) {
        onConnected();
      } else if (raw == ZOO_CONNECTING_STATE || raw == ZOO_ASSOCIATING_STATE) {
        onDisconnected();
      } else if (raw == ZOO_EXPIRED_SESSION_STATE) {
        expire("the server reports the session expired");
        return;  // The handle is gone; later raw states belonged to it.
      } else if (raw == ZOO_AUTH_FAILED_STATE) {
        spdlog::error("zookeeper: authentication failed at {}", options.quorum);
        expire("authentication failed");
        return;
      }
    }
  }

  void onConnected() {
    const clientid_t* id = zoo_client_id(handle->zh);
    negotiated = Duration(zoo_recv_timeout(handle->zh));
    expiryTimer.stop();
    unreachableTimer.stop();
    lastLibraryProblem.clear();
    if (state == SessionState::kSuspended && id->client_id == sessionId) {
      setState(SessionState::kReconnected);
    } else if (state == SessionState::kConnecting) {
      sessionId = id->client_id;
      sessionPassword.assign(id->passwd, sizeof(id->passwd));
      everConnected = true;
      spdlog::info("zookeeper: session 0x{:x} established with {} (timeout {} ms)", sessionId,
                   options.quorum, negotiated.count());
      setState(SessionState::kConnected);
      for (auto& waiter : connectedWaiters) waiter->fulfill();
      connectedWaiters.clear();
    }
  }

  void onDisconnected() {
    if (state != SessionState::kConnected && state != SessionState::kReconnected) return;
    spdlog::warn("zookeeper: connection to {} lost; session 0x{:x} expires in {} ms unless it "
                 "reconnects", options.quorum, sessionId, negotiated.count());
    setState(SessionState::kSuspended);
    startUnreachableWarnings();
    // While cut off the library only reports CONNECTING; the session must be considered gone
    // once the server would have expired it (DESIGN §3).
    expiryTimer.start(negotiated, Duration(0),
                      [this] { expire("no contact with ZooKeeper for the session timeout"); });
  }

  void expire(const char* why) {
    if (state == SessionState::kClosed) return;
    if (processing) {
      // Never close the handle from inside the library; handled right after.
      rawStates.push_back(ZOO_EXPIRED_SESSION_STATE);
      return;
    }
    spdlog::warn("zookeeper: session 0x{:x} expired ({}); opening a new session", sessionId, why);
    expiryTimer.stop();
    closeHandle(ZkCode::kSessionExpired);
    setState(SessionState::kExpired);
    setState(SessionState::kConnecting);
    open();
  }

  void setState(SessionState next) {
    state = next;
    // Listeners run from the loop, never inside the library or an operation's callback.
    tasks.add(kj::evalLater([this, next] {
      for (auto it = listeners.begin(); it != listeners.end();) {
        if (!it->removed) it->fn(next);
        if (it->removed) {
          if (it->handle != nullptr) it->handle->state = nullptr;
          it = listeners.erase(it);
        } else {
          ++it;
        }
      }
    }));
  }

  void close() {
    if (state == SessionState::kClosed) return;
    expiryTimer.stop();
    unreachableTimer.stop();
    closeHandle(ZkCode::kClosing);
    for (auto& waiter : connectedWaiters) {
      waiter->reject(KJ_EXCEPTION(DISCONNECTED, "ZooKeeper client closed"));
    }
    connectedWaiters.clear();
    setState(SessionState::kClosed);
  }

  // ---- requests ----------------------------------------------------------------------------

  std::string absolute(const std::string& path) const {
    return path.empty() ? options.root : options.root + "/" + path;
  }

  std::string relative(const char* path) const {
    const std::string_view p(path);
    if (p == options.root) return "";
    if (p.size() > options.root.size() && p.substr(0, options.root.size()) == options.root &&
        p[options.root.size()] == '/') {
      return std::string(p.substr(options.root.size() + 1));
    }
    return std::string(p);
  }

  static bool validRelative(const std::string& path) {
    return path.empty() || (path.front() != '/' && path.back() != '/' &&
                            path.find("//") == std::string::npos);
  }

  // Registers `call` with the current handle and issues it; `issue` returns the library's
  // immediate code. A call that could not be issued completes at once with that code.
  template <typename Call, typename Issue>
  void submit(std::unique_ptr<Call> call, Issue&& issue) {
    if (!handle || handle->zh == nullptr) {
      call->fail(state == SessionState::kClosed ? ZkCode::kClosing : ZkCode::kConnectionLoss);
      return;
    }
    Call* raw = call.get();
    handle->calls.emplace(raw, std::move(call));
    const int rc = issue(handle->zh, raw);
    if (rc != ZOK) {
      raw->fail(static_cast<ZkCode>(rc));
      handle->calls.erase(raw);
      return;
    }
    updateInterest();
  }

  ZkCode translate(ZkCode code) const { return code == ZkCode::kClosing ? closingAs : code; }

  void finish(PendingCall* call) {
    if (handle) handle->calls.erase(call);
  }

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
    void fail(ZkCode) override { fulfiller->fulfill(WatchEvent{WatchEvent::Type::kSessionLost, path}); }
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
    if (event.type != WatchEvent::Type::kSessionLost) ++state->watchesFired;
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
    if (handle) {
      handle->calls.emplace(raw, std::move(watch));
    } else {
      watch->fail(ZkCode::kClosing);
    }
    return {raw, kj::mv(paf.promise)};
  }

  // ---- ensurePath ---------------------------------------------------------------------------

  // Nodes at or below the cluster root carry its ACL; ancestors of the root (shared by every
  // cluster, for example "/regent") are open so other clusters can live beside this one.
  const ACL_vector* aclFor(const std::string& absolutePath) const {
    const bool inCluster = absolutePath == options.root ||
                           absolutePath.rfind(options.root + "/", 0) == 0;
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

Result<std::unique_ptr<ZooKeeperClient>> ZooKeeperClient::start(EventLoop& loop,
                                                                ZooKeeperClientOptions options) {
  if (options.quorum.empty()) return Error::fatal("ZooKeeper quorum is empty");
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

  auto state = kj::heap<State>(loop, std::move(options));
  State& s = *state;
  if (s.options.auth.empty()) {
    s.acl = ZOO_OPEN_ACL_UNSAFE;
  } else {
    s.aclIds.push_back(digestId(s.options.auth));
    if (!s.options.readAuth.empty()) s.aclIds.push_back(digestId(s.options.readAuth));
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
  s.negotiated = s.options.sessionTimeout;
  s.open();  // A quorum that does not resolve yet is retried from the loop.
  return std::unique_ptr<ZooKeeperClient>(new ZooKeeperClient(kj::mv(state)));
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

std::optional<size_t> failedOperation(const ZkReply<std::vector<ZkOpResult>>& reply) {
  for (size_t i = 0; i < reply.value.size(); ++i) {
    const ZkCode code = reply.value[i].code;
    if (code != ZkCode::kOk && code != ZkCode::kRuntimeInconsistency) return i;
  }
  return std::nullopt;
}

ZooKeeperClient::ZooKeeperClient(kj::Own<State> state) : state_(kj::mv(state)) {}

ZooKeeperClient::~ZooKeeperClient() noexcept {
  state_->close();
}

kj::Promise<Status> ZooKeeperClient::waitConnected(Duration timeout) {
  if (state_->everConnected) return Status();
  if (state_->state == SessionState::kClosed) {
    return Status(Error::fatal("the ZooKeeper client is closed"));
  }
  auto paf = kj::newPromiseAndFulfiller<void>();
  state_->connectedWaiters.push_back(kj::mv(paf.fulfiller));
  const std::string quorum = state_->options.quorum;
  return paf.promise.then([]() { return Status(); })
      .exclusiveJoin(state_->loop.timer()
                         .afterDelay(timeout.count() * kj::MILLISECONDS)
                         .then([quorum, timeout]() {
                           return Status(Error::retryable(
                               "no ZooKeeper session with " + quorum + " within " +
                               std::to_string(timeout.count()) + " ms (is ZooKeeper running?)"));
                         }));
}

void ZooKeeperClient::close() { state_->close(); }

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

kj::Promise<ZkReply<std::vector<ZkOpResult>>> ZooKeeperClient::multi(std::vector<ZkOp> ops) {
  using Value = std::vector<ZkOpResult>;
  if (ops.empty()) return ZkReply<Value>{ZkCode::kOk, {}};
  for (const ZkOp& op : ops) {
    if (!State::validRelative(op.path)) return ZkReply<Value>{ZkCode::kBadArguments, {}};
  }
  // The library reads ops, writes results, path buffers and stats until the completion runs:
  // all of it lives in the call record (DESIGN §3).
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

SessionState ZooKeeperClient::sessionState() const { return state_->state; }
int64_t ZooKeeperClient::sessionId() const { return state_->sessionId; }
Duration ZooKeeperClient::negotiatedSessionTimeout() const { return state_->negotiated; }

kj::Own<void> ZooKeeperClient::onSessionState(kj::Function<void(SessionState)> listener) {
  state_->listeners.push_back(State::Listener{kj::mv(listener), nullptr, false});
  return kj::heap<State::ListenerHandle>(state_.get(), std::prev(state_->listeners.end()));
}

std::string ZooKeeperClient::sessionPasswordForTests() const { return state_->sessionPassword; }
uint64_t ZooKeeperClient::watchesFiredForTests() const { return state_->watchesFired; }

}  // namespace regent::ha

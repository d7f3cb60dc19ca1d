// ZooKeeperSession: the C library's handle driven from the loop, and the session state machine
// built from its raw events (see zookeeper_session.h).
#include "ha/zookeeper_session.h"

#include <fcntl.h>
#include <kj/debug.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace regent::ha {
namespace {

constexpr Duration kUnreachableWarningInterval{10000};
constexpr Duration kReopenDelay{1000};
// Floor of the retry timer when zookeeper_interest() fails (it then reports no deadline).
constexpr Duration kInterestRetryDelay{100};
// Least time between two connection attempts while there is no session. A refused connection on
// loopback fails at once, and with several hosts the library moves to the next one without
// pausing, which would spin the loop.
constexpr Duration kMinAttemptInterval{100};

// The library's last warning or error, for the periodic "unreachable" warning. Loop threads
// only, and the library logs from the thread that drives it.
thread_local std::string lastLibraryProblem;
thread_local bool lastLibraryProblemIsError = false;

// Routes the library's log lines ("time:pid(tid):ZOO_INFO@function@line: text") to spdlog at
// debug level. While ZooKeeper is unreachable the library retries every few milliseconds and
// logs each failure; the client's own state lines, and a throttled warning naming the last
// problem, are what operators see. The library gives the callback no context, so it logs to the
// default logger.
void logFromZooKeeper(const char* message) {
  const std::string_view text(message);
  const size_t at = text.find('@');
  const std::string_view body = at == std::string_view::npos ? text : text.substr(at + 1);
  // An error (a refused connection) is the cause; the warnings that follow it ("Delaying
  // connection after exhaustively trying all servers") only say what the library does next.
  if (text.find("ZOO_ERROR@") != std::string_view::npos) {
    lastLibraryProblem.assign(body);
    lastLibraryProblemIsError = true;
  } else if (text.find("ZOO_WARN@") != std::string_view::npos && !lastLibraryProblemIsError) {
    lastLibraryProblem.assign(body);
  }
  spdlog::debug("zookeeper: {}", body);
}

}  // namespace

// The registration handed out by onStateChange(); whichever of it and the session goes first
// unlinks the other.
struct ZooKeeperSession::ListenerHandle {
  ListenerHandle(ZooKeeperSession* session, std::list<Listener>::iterator it)
      : session(session), it(it) {
    it->handle = this;
  }
  ~ListenerHandle() {
    if (session != nullptr) {
      it->removed = true;
      it->handle = nullptr;
    }
  }
  KJ_DISALLOW_COPY(ListenerHandle);
  ZooKeeperSession* session;
  std::list<Listener>::iterator it;
};

ZooKeeperSession::ZooKeeperSession(EventLoop& loop, Options options)
    : loop_(loop),
      options_(std::move(options)),
      negotiated_(options_.sessionTimeout),
      ioTimer_(loop),
      expiryTimer_(loop),
      probeTimer_(loop),
      unreachableTimer_(loop),
      tasks_(errorHandler_) {}

ZooKeeperSession::~ZooKeeperSession() noexcept(false) {
  close();
  for (Listener& listener : listeners_) {
    if (listener.handle != nullptr) listener.handle->session = nullptr;
  }
}

// ---- handle life -------------------------------------------------------------------------------

void ZooKeeperSession::open() {
  // No library handle until the lookup answers: calls fail with kConnectionLoss meanwhile.
  handle_ = std::make_unique<Handle>();
  if (!unreachableTimer_.isActive()) startUnreachableWarnings();
  // What the 10 s warning names while the lookup has not answered.
  lastLibraryProblem = "looking up the quorum's host names";
  QuorumResolver resolve = options_.resolve ? options_.resolve : QuorumResolver(resolveQuorumHosts);
  const uint64_t lookup = ++lookup_;
  tasks_.add(loop_.runBlocking([resolve = std::move(resolve), quorum = options_.quorum]() {
                   return resolve(quorum);
                 })
                 .then(
                     [this, lookup](Result<std::string> resolved) {
                       if (lookup == lookup_) connect(std::move(resolved));
                     },
                     [this, lookup](kj::Exception&& exception) {
                       if (lookup != lookup_) return;
                       connect(Error::retryable(std::string("the quorum lookup failed: ") +
                                                exception.getDescription().cStr()));
                     }));
}

void ZooKeeperSession::connect(Result<std::string> resolved) {
  if (state_ == SessionState::kClosed || !handle_) return;
  if (resolved.ok()) {
    lastLibraryProblem.clear();
    // ZOO_NO_LOG_CLIENTENV: the environment dump looks up the user (getpwuid), which can block.
    // The addresses are numeric: the library's own lookup of them answers without a resolver.
    handle_->zh = zookeeper_init2(resolved.value().c_str(), &ZooKeeperSession::onSessionEvent,
                                  static_cast<int>(options_.sessionTimeout.count()), nullptr, this,
                                  ZOO_NO_LOG_CLIENTENV, &logFromZooKeeper);
    if (handle_->zh == nullptr) {
      lastLibraryProblem = std::string("cannot create a handle: ") + std::strerror(errno);
    }
  } else {
    lastLibraryProblem = resolved.error().message;
  }
  if (handle_->zh == nullptr) {
    // No quorum host resolves (DNS down) or resources ran out: try again later, on the loop.
    spdlog::debug("zookeeper: {} for {}; retrying in {} ms", lastLibraryProblem,
                  options_.quorum, kReopenDelay.count());
    ioTimer_.start(kReopenDelay, Duration(0), [this] {
      if (state_ != SessionState::kClosed) open();
    });
    return;
  }
  // By default the library resolves the quorum's host names on every zookeeper_interest()
  // call, blocking the loop thread; resolve only when a connection is (re)made.
  zoo_set_servers_resolution_delay(handle_->zh, -1);
  const std::string& credential = options_.credential;
  if (!credential.empty()) {
    // A wrong password is accepted here; it shows later as ZNOAUTH (docs/zookeeper.md).
    zoo_add_auth(handle_->zh, "digest", credential.data(), static_cast<int>(credential.size()),
                 nullptr, nullptr);
  }
  updateInterest();
}

void ZooKeeperSession::startUnreachableWarnings() {
  disconnectedSince_ = std::chrono::steady_clock::now();
  unreachableTimer_.start(kUnreachableWarningInterval, kUnreachableWarningInterval, [this] {
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
        std::chrono::steady_clock::now() - disconnectedSince_);
    spdlog::warn("zookeeper: no connection to {} for {} s{}{}", options_.quorum, seconds.count(),
                 lastLibraryProblem.empty() ? "" : "; last problem: ", lastLibraryProblem);
  });
}

// Closes the current handle and completes everything it still holds.
void ZooKeeperSession::closeHandle(ZkCode callCode) {
  ++lookup_;  // A lookup still running was for this handle.
  if (!handle_) return;
  stopPoll();
  ioTimer_.stop();
  std::unique_ptr<Handle> old = std::move(handle_);
  closingAs_ = callCode;
  if (old->zh != nullptr) zookeeper_close(old->zh);
  closingAs_ = ZkCode::kClosing;
  // Calls the library did not complete while closing, and watches that can never fire now.
  for (auto& [raw, call] : old->calls) call->fail(callCode);
  old->calls.clear();
}

bool ZooKeeperSession::isConnectedState() const {
  return state_ == SessionState::kConnected || state_ == SessionState::kReconnected;
}

void ZooKeeperSession::stopPoll() {
  if (poll_ == nullptr) return;
  uv_poll_stop(poll_);
  uv_close(reinterpret_cast<uv_handle_t*>(poll_),
           [](uv_handle_t* h) { delete reinterpret_cast<uv_poll_t*>(h); });
  poll_ = nullptr;
  pollFd_ = -1;
  pollInode_ = 0;
  pollEvents_ = 0;
}

// Asks the library what it waits for and arms the poll and the timer accordingly. Called after
// every zookeeper_process() and every request, since the socket changes on reconnect.
void ZooKeeperSession::updateInterest() {
  if (!handle_ || handle_->zh == nullptr) return;
  int fd = -1;
  int interest = 0;
  timeval tv{};
  const int rc = zookeeper_interest(handle_->zh, &fd, &interest, &tv);
  if (rc != ZOK && rc != ZCONNECTIONLOSS) {
    spdlog::debug("zookeeper: interest returned {}", zerror(rc));
  }
  // A failed send inside a request closes the socket without a session event: notice it here
  // so a leader learns it is cut off.
  if ((state_ == SessionState::kConnected || state_ == SessionState::kReconnected) &&
      zoo_state(handle_->zh) != ZOO_CONNECTED_STATE) {
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
  const bool newSocket = fd >= 0 && (poll_ == nullptr || fd != pollFd_ || inode != pollInode_);
  // The library's socket is not close-on-exec; child processes must not inherit it.
  if (newSocket) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  if (poll_ != nullptr && (fd != pollFd_ || inode != pollInode_ || events == 0)) stopPoll();
  if (newSocket && !isConnectedState()) {
    // A new connection attempt: let it proceed only after kMinAttemptInterval since the last.
    const MonoTime now = std::chrono::steady_clock::now();
    const auto since = std::chrono::duration_cast<Duration>(now - lastAttemptStart_);
    if (since < kMinAttemptInterval) {
      ioTimer_.start(kMinAttemptInterval - since, Duration(0), [this] { updateInterest(); });
      loop_.kick();
      return;
    }
    lastAttemptStart_ = now;
  }
  if (fd >= 0 && events != 0 && poll_ == nullptr) {
    auto* fresh = new uv_poll_t;
    const int initRc = uv_poll_init(loop_.uv(), fresh, fd);
    if (initRc == 0) {
      fresh->data = this;
      poll_ = fresh;
      pollFd_ = fd;
      pollInode_ = inode;
      pollEvents_ = 0;
    } else {
      // Not expected for a socket; without a poll the timer below still drives the library.
      spdlog::error("zookeeper: cannot poll fd {}: {}", fd, uv_strerror(initRc));
      delete fresh;
    }
  }
  if (poll_ != nullptr && events != pollEvents_) {
    uv_poll_start(poll_, events, &ZooKeeperSession::onPoll);
    pollEvents_ = events;
  }
  int64_t timeoutMs = int64_t{tv.tv_sec} * 1000 + (tv.tv_usec + 999) / 1000;
  if (rc != ZOK && rc != ZCONNECTIONLOSS && fd < 0) {
    // The library reports no deadline after a failure (for example a failed resolution):
    // retry at a modest pace instead of spinning.
    timeoutMs = std::max<int64_t>(timeoutMs, kInterestRetryDelay.count());
  }
  ioTimer_.start(Duration(std::max<int64_t>(timeoutMs, 0)), Duration(0), [this] { process(0); });
  loop_.kick();
}

void ZooKeeperSession::process(int events) {
  if (!handle_ || handle_->zh == nullptr) return;
  processing_ = true;
  zookeeper_process(handle_->zh, events);
  processing_ = false;
  handleRawStates();
  updateInterest();
}

void ZooKeeperSession::onPoll(uv_poll_t* poll, int status, int events) {
  auto* self = static_cast<ZooKeeperSession*>(poll->data);
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

// ---- session state -----------------------------------------------------------------------------

void ZooKeeperSession::onSessionEvent(zhandle_t*, int type, int state, const char*,
                                      void* context) {
  if (type != ZOO_SESSION_EVENT) return;  // Path watches carry their own watcher.
  static_cast<ZooKeeperSession*>(context)->rawStates_.push_back(state);
}

void ZooKeeperSession::handleRawStates() {
  std::vector<int> states;
  states.swap(rawStates_);
  for (int raw : states) {
    if (raw == ZOO_CONNECTED_STATE) {
      onConnected();
    } else if (raw == ZOO_CONNECTING_STATE || raw == ZOO_ASSOCIATING_STATE) {
      onDisconnected();
    } else if (raw == ZOO_EXPIRED_SESSION_STATE) {
      expire("the server reports the session expired");
      return;  // The handle is gone; later raw states belonged to it.
    } else if (raw == ZOO_AUTH_FAILED_STATE) {
      spdlog::error("zookeeper: authentication failed at {}", options_.quorum);
      expire("authentication failed");
      return;
    }
  }
}

void ZooKeeperSession::onConnected() {
  const clientid_t* id = zoo_client_id(handle_->zh);
  negotiated_ = Duration(zoo_recv_timeout(handle_->zh));
  unreachableTimer_.stop();
  lastLibraryProblem.clear();
  lastLibraryProblemIsError = false;
  if (state_ == SessionState::kSuspended && id->client_id == sessionId_) {
    setState(SessionState::kReconnected);
    startProbing();
  } else if (state_ == SessionState::kConnecting) {
    sessionId_ = id->client_id;
    sessionPassword_.assign(id->passwd, sizeof(id->passwd));
    everConnected_ = true;
    spdlog::info("zookeeper: session 0x{:x} established with {} (timeout {} ms)", sessionId_,
                 options_.quorum, negotiated_.count());
    setState(SessionState::kConnected);
    startProbing();
    for (auto& waiter : connectedWaiters_) waiter->fulfill();
    connectedWaiters_.clear();
  }
}

void ZooKeeperSession::onDisconnected() {
  if (state_ != SessionState::kConnected && state_ != SessionState::kReconnected) return;
  // While cut off the library only reports CONNECTING; the session is gone once the server
  // would have expired it, at the deadline expiryTimer_ keeps (docs/zookeeper.md).
  // Rounded up, plus the millisecond uv's clock may lag behind (it counts whole milliseconds):
  // the session is expired locally no earlier than its deadline.
  const auto left = std::chrono::ceil<Duration>(lastHeard_ + negotiated_ -
                                                std::chrono::steady_clock::now()) +
                    Duration(1);
  spdlog::warn(
      "zookeeper: connection to {} lost; session 0x{:x} expires in {} ms unless it "
      "reconnects",
      options_.quorum, sessionId_, std::max<int64_t>(left.count(), 0));
  probeTimer_.stop();
  setState(SessionState::kSuspended);
  startUnreachableWarnings();
}

// ---- the session's deadline ----------------------------------------------------------------

// A probe's record: it holds no result, only when it was sent.
struct ZooKeeperSession::Probe final : PendingCall {
  Probe(ZooKeeperSession* session, MonoTime sentAt) : session(session), sentAt(sentAt) {}
  void fail(ZkCode) override {}  // No answer: it proves nothing.
  ZooKeeperSession* session;
  const MonoTime sentAt;
};

std::optional<MonoTime> ZooKeeperSession::deadline() const {
  if (state_ != SessionState::kConnected && state_ != SessionState::kReconnected &&
      state_ != SessionState::kSuspended) {
    return std::nullopt;
  }
  return lastHeard_ + negotiated_;
}

void ZooKeeperSession::startProbing() {
  // The server accepted a connection attempt begun at lastAttemptStart_, so it held the session
  // then; not when its answer was read, which a paused process reads late.
  heard(lastAttemptStart_);
  const Duration interval = std::max(negotiated_ / 3, Duration(1));
  probeTimer_.start(interval, interval, [this] { sendProbe(); });
}

void ZooKeeperSession::sendProbe() {
  if (!isConnectedState()) return;
  // The root's stat: any answer will do (with a chroot the root may not exist: kNoNode). The
  // library's own pings prove as much but are invisible to its user.
  submit(std::make_unique<Probe>(this, std::chrono::steady_clock::now()),
         [](zhandle_t* zh, Probe* probe) {
           return zoo_aexists(zh, "/", 0, &ZooKeeperSession::onProbeAnswer, probe);
         });
}

void ZooKeeperSession::onProbeAnswer(int rc, const struct Stat*, const void* context) {
  auto* probe = static_cast<Probe*>(const_cast<void*>(context));
  ZooKeeperSession* session = probe->session;
  // An answer from the server, whatever it says about the node; not one the library made up
  // (connection loss, a closing handle, an expired session).
  if (rc == ZOK || rc == ZNONODE || rc == ZNOAUTH) session->heard(probe->sentAt);
  session->finish(probe);  // Frees the probe.
}

void ZooKeeperSession::heard(MonoTime sentAt) {
  if (sentAt <= lastHeard_) return;
  lastHeard_ = sentAt;
  // Rounded up, plus the millisecond uv's clock may lag behind (it counts whole milliseconds):
  // the session is expired locally no earlier than its deadline.
  const auto left = std::chrono::ceil<Duration>(lastHeard_ + negotiated_ -
                                                std::chrono::steady_clock::now()) +
                    Duration(1);
  expiryTimer_.start(std::max(left, Duration(0)), Duration(0),
                     [this] { expire("no answer from ZooKeeper within the session timeout"); });
}

void ZooKeeperSession::expire(const char* why) {
  if (state_ == SessionState::kClosed) return;
  if (processing_) {
    // Never close the handle from inside the library; handled right after.
    rawStates_.push_back(ZOO_EXPIRED_SESSION_STATE);
    return;
  }
  spdlog::warn("zookeeper: session 0x{:x} expired ({}); opening a new session", sessionId_, why);
  expiryTimer_.stop();
  probeTimer_.stop();
  closeHandle(ZkCode::kSessionExpired);
  setState(SessionState::kExpired);
  setState(SessionState::kConnecting);
  open();
}

void ZooKeeperSession::setState(SessionState next) {
  state_ = next;
  // Listeners run from the loop, never inside the library or an operation's callback.
  tasks_.add(kj::evalLater([this, next] {
    for (auto it = listeners_.begin(); it != listeners_.end();) {
      if (!it->removed) it->fn(next);
      if (it->removed) {
        if (it->handle != nullptr) it->handle->session = nullptr;
        it = listeners_.erase(it);
      } else {
        ++it;
      }
    }
  }));
}

void ZooKeeperSession::close() {
  if (state_ == SessionState::kClosed) return;
  expiryTimer_.stop();
  probeTimer_.stop();
  unreachableTimer_.stop();
  closeHandle(ZkCode::kClosing);
  for (auto& waiter : connectedWaiters_) {
    waiter->reject(KJ_EXCEPTION(DISCONNECTED, "ZooKeeper client closed"));
  }
  connectedWaiters_.clear();
  setState(SessionState::kClosed);
}

// ---- calls -------------------------------------------------------------------------------------

void ZooKeeperSession::submitCall(std::unique_ptr<PendingCall> call,
                                  kj::FunctionParam<int(zhandle_t*)> issue) {
  if (!handle_ || handle_->zh == nullptr) {
    // What the library itself says: ZCLOSING for a call on a handle being closed, and
    // ZCONNECTIONLOSS for requests it could not send (here: no handle yet, the quorum does not
    // resolve). Callers then treat the call like any other that did not reach the server.
    call->fail(state_ == SessionState::kClosed ? ZkCode::kClosing : ZkCode::kConnectionLoss);
    return;
  }
  PendingCall* raw = call.get();
  handle_->calls.emplace(raw, std::move(call));
  const int rc = issue(handle_->zh);
  if (rc != ZOK) {
    raw->fail(static_cast<ZkCode>(rc));
    handle_->calls.erase(raw);
    return;
  }
  updateInterest();
}

void ZooKeeperSession::adoptWatch(std::unique_ptr<PendingCall> watch) {
  if (handle_) {
    PendingCall* raw = watch.get();
    handle_->calls.emplace(raw, std::move(watch));
  } else {
    watch->fail(ZkCode::kClosing);
  }
}

void ZooKeeperSession::finish(PendingCall* call) {
  if (handle_) handle_->calls.erase(call);
}

kj::Promise<Status> ZooKeeperSession::waitConnected(Duration timeout) {
  if (everConnected_) return Status();
  if (state_ == SessionState::kClosed) {
    return Status(Error::fatal("the ZooKeeper client is closed"));
  }
  auto paf = kj::newPromiseAndFulfiller<void>();
  connectedWaiters_.push_back(kj::mv(paf.fulfiller));
  const std::string quorum = options_.quorum;
  return paf.promise.then([]() { return Status(); })
      .exclusiveJoin(loop_.timer()
                         .afterDelay(timeout.count() * kj::MILLISECONDS)
                         .then([quorum, timeout]() {
                           return Status(Error::retryable(
                               "no ZooKeeper session with " + quorum + " within " +
                               std::to_string(timeout.count()) + " ms (is ZooKeeper running?)" +
                               (lastLibraryProblem.empty() ? "" : "; last problem: ") +
                               lastLibraryProblem));
                         }));
}

kj::Own<void> ZooKeeperSession::onStateChange(kj::Function<void(SessionState)> listener) {
  listeners_.push_back(Listener{kj::mv(listener), nullptr, false});
  return kj::heap<ListenerHandle>(this, std::prev(listeners_.end()));
}

}  // namespace regent::ha

// The session driver under ZooKeeperClient: owns the C library's handle, drives it from the loop
// (a uv poll on its socket, a uv timer for its deadlines), turns its raw session events into
// SessionState transitions, keeps the local expiry timer, and holds every call the library has a
// context pointer to. Internal to ha/: the operations (ha/zookeeper_client.cc) submit calls here.
#pragma once

#include <kj/async.h>
#include <kj/function.h>
#include <sys/types.h>
#include <uv.h>
#include <zookeeper/zookeeper.h>

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "common/result.h"
#include "common/task_set_error_logger.h"
#include "common/time.h"
#include "ha/coordination.h"
#include "ha/quorum_resolution.h"

namespace regent::ha {

// One asynchronous call (or one watch) the C library holds a context pointer to.
struct PendingCall {
  virtual ~PendingCall() noexcept(false) = default;
  // Completes the call with `code` without a result from the server (handle closed).
  virtual void fail(ZkCode code) = 0;
};

// The session state machine of docs/zookeeper.md. After a session expires the session driver
// closes the handle, completes its calls with kSessionExpired and opens a new session on its own.
//
// Thread-safety: loop-thread only. Listeners run from the loop, never inside the library.
// Destroying the session closes it (see close()) and calls no listener.
class ZooKeeperSession final {
 public:
  struct Options {
    std::string quorum;        // "host:port,host:port".
    Duration sessionTimeout;   // Requested; the server may negotiate it.
    std::string credential;    // "user:password" for digest auth, or empty.
    // Resolves the quorum's host names on the loop's thread pool before each handle is made;
    // empty: resolveQuorumHosts.
    QuorumResolver resolve;
  };

  // `loop` must outlive the session. Nothing happens before open().
  ZooKeeperSession(EventLoop& loop, Options options);
  ~ZooKeeperSession() noexcept(false);
  ZooKeeperSession(const ZooKeeperSession&) = delete;
  ZooKeeperSession& operator=(const ZooKeeperSession&) = delete;

  // Starts connecting: resolves the quorum's host names off the loop (Options::resolve), then
  // makes the library's handle with the addresses. A quorum none of whose hosts resolves yet is
  // resolved again every second; every new handle (a session that expired) resolves again.
  void open();
  // Ends the session and moves to kClosed; calls in flight complete with kClosing, waiters of
  // waitConnected() fail. Idempotent.
  // WARNING: blocks the loop thread for a bounded time while connected (see
  // ZooKeeperClient::close()).
  void close();

  SessionState state() const { return state_; }
  int64_t id() const { return sessionId_; }
  const std::string& password() const { return sessionPassword_; }
  Duration negotiatedTimeout() const { return negotiated_; }
  // See Coordination::sessionDeadline: nullopt unless kConnected, kReconnected or kSuspended.
  std::optional<MonoTime> deadline() const;
  const std::string& quorum() const { return options_.quorum; }

  // Resolves once the first session is established, or with a retryable error after `timeout`.
  kj::Promise<Status> waitConnected(Duration timeout);
  // See Coordination::onSessionState.
  kj::Own<void> onStateChange(kj::Function<void(SessionState)> listener);

  // Registers `call` with the current handle and issues it; `issue` returns the library's
  // immediate code. A call that could not be issued (no handle, or an immediate error) completes
  // at once with its code.
  template <typename Call, typename Issue>
  void submit(std::unique_ptr<Call> call, Issue&& issue) {
    Call* raw = call.get();
    submitCall(std::move(call), [&](zhandle_t* zh) { return issue(zh, raw); });
  }
  // Registers a watch record with the current handle (it completes when the watch fires or the
  // handle closes); without a handle it fails at once with kClosing.
  void adoptWatch(std::unique_ptr<PendingCall> watch);
  // Drops a call the library completed (or will never call).
  void finish(PendingCall* call);
  // What a completion's code means: kClosing from a handle closed because its session expired
  // reads kSessionExpired.
  ZkCode translate(ZkCode code) const { return code == ZkCode::kClosing ? closingAs_ : code; }

  void countWatchFired() { ++watchesFired_; }
  uint64_t watchesFired() const { return watchesFired_; }

 private:
  struct ListenerHandle;
  struct Probe;
  struct Listener {
    kj::Function<void(SessionState)> fn;
    ListenerHandle* handle = nullptr;  // Cleared when the handle goes first.
    bool removed = false;
  };
  // Everything that belongs to one zhandle_t: it is replaced after a session expires.
  struct Handle {
    zhandle_t* zh = nullptr;
    std::map<PendingCall*, std::unique_ptr<PendingCall>> calls;
  };

  // open()'s second half: makes the handle for the resolved quorum, or retries open() later.
  void connect(Result<std::string> resolved);
  void submitCall(std::unique_ptr<PendingCall> call, kj::FunctionParam<int(zhandle_t*)> issue);
  void startUnreachableWarnings();
  void closeHandle(ZkCode callCode);
  bool isConnectedState() const;
  void stopPoll();
  void updateInterest();
  void process(int events);
  static void onPoll(uv_poll_t* poll, int status, int events);
  static void onSessionEvent(zhandle_t*, int type, int state, const char*, void* context);
  void handleRawStates();
  void onConnected();
  void onDisconnected();
  // On (re)connect: the deadline counts from the accepted connection attempt, and the probes
  // start. A probe asks the server for the root's stat only to learn that it still answers,
  // every third of the session timeout while connected; each answer moves the deadline (heard).
  void startProbing();
  void sendProbe();
  static void onProbeAnswer(int rc, const struct Stat* stat, const void* context);
  void heard(MonoTime sentAt);
  void expire(const char* why);
  void setState(SessionState next);

  EventLoop& loop_;
  Options options_;
  std::unique_ptr<Handle> handle_;
  SessionState state_ = SessionState::kConnecting;
  int64_t sessionId_ = 0;
  std::string sessionPassword_;
  Duration negotiated_{0};
  bool everConnected_ = false;
  uint64_t watchesFired_ = 0;

  uv_poll_t* poll_ = nullptr;
  int pollFd_ = -1;
  ino_t pollInode_ = 0;
  int pollEvents_ = 0;
  UvTimer ioTimer_;
  // Fires at the session's deadline (lastHeard_ + negotiated_) while a session is established:
  // the session is expired locally then, connected or not (docs/zookeeper.md).
  UvTimer expiryTimer_;
  UvTimer probeTimer_;
  // When the last request the server answered was sent (a probe, or the connection attempt the
  // server accepted): the server had the session then, and keeps it for negotiated_ after.
  MonoTime lastHeard_{};
  UvTimer unreachableTimer_;  // Repeats a warning while there is no connection.
  MonoTime disconnectedSince_{};
  MonoTime lastAttemptStart_{};
  bool processing_ = false;  // Inside zookeeper_process(): no close, no reopen.
  // What calls completed by zookeeper_close() report instead of ZCLOSING (kSessionExpired when
  // the handle is closed because its session expired).
  ZkCode closingAs_ = ZkCode::kClosing;
  std::vector<int> rawStates_;  // Session events seen inside the library, handled after.

  std::list<Listener> listeners_;
  std::vector<kj::Own<kj::PromiseFulfiller<void>>> connectedWaiters_;
  TaskSetErrorLogger errorHandler_{"zookeeper client"};
  kj::TaskSet tasks_;
  // Which lookup of open() the current handle waits for: closing the handle moves it on, and a
  // lookup that answers for an earlier one is discarded.
  uint64_t lookup_ = 0;
};

}  // namespace regent::ha

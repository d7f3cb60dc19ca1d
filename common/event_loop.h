// The process's one event loop (docs/event-loop.md): kj owns the thread and drives; libuv is
// embedded and pumped from it, so kj promises, Cap'n Proto RPC, uv timers, signals, child
// processes and the uv thread pool all run on the same thread. Every class here is
// loop-thread-only unless its comment says otherwise.
#pragma once

#include <kj/async-io.h>
#include <kj/function.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/factory_key.h"
#include "common/result.h"
#include "common/time.h"

struct uv_loop_s;
typedef struct uv_loop_s uv_loop_t;

namespace kj {
class UnixEventPort;  // kj/async-unix.h
}  // namespace kj

namespace regent {

class EventLoop final {
 public:
  // Sets up kj async I/O on the calling thread, which becomes the loop thread, and embeds a
  // fresh uv loop. At most one EventLoop per thread (a kj rule).
  EventLoop();
  // Closes every uv handle still open, waits for thread-pool work still running, then closes
  // the uv loop. Objects built on this loop (timers, watchers, children) must be destroyed first.
  ~EventLoop() noexcept;
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  kj::AsyncIoProvider& io();
  kj::WaitScope& waitScope();
  kj::Timer& timer();
  // The kj event port under io(), for code that owns a raw socket and must see the exact errno
  // of its connect (kj's connect() folds ECONNREFUSED and ETIMEDOUT into one DISCONNECTED).
  kj::UnixEventPort& eventPort();
  uv_loop_t* uv();

  // Runs the loop until `promise` resolves and returns its value (rethrows its exception).
  template <typename T>
  T run(kj::Promise<T>&& promise) {
    return promise.wait(waitScope());
  }

  // Schedules a uv pump. Call after any uv_* call made from kj code (outside a uv callback),
  // since libuv registers file descriptors only during its next run. The wrappers below call it.
  void kick();

  // Thread-safe: runs `fn` on the loop thread soon. May be called from any thread, including
  // the loop thread, until the EventLoop is destroyed (callers on other threads must stop
  // posting before that). Functions still queued at destruction are dropped, not run.
  void post(kj::Function<void()> fn) const;

  // Runs `work` on the uv thread pool and fulfills the promise on the loop thread with its
  // result, or rejects it with the exception `work` threw. Dropping the promise cancels work
  // that has not started; work already running finishes and its result is discarded.
  template <typename Func>
  auto runBlocking(Func&& work) -> kj::Promise<decltype(work())>;

  // Number of uv pumps so far; lets tests prove an idle loop does not spin.
  uint64_t pumpCountForTests() const;

  struct State;

 private:
  kj::Promise<void> runOnThreadPool(kj::Function<void()> work);

  kj::Own<State> state_;
};

// A libuv timer. The callback runs on the loop thread; destroying the timer stops it.
class UvTimer final {
 public:
  explicit UvTimer(EventLoop& loop);  // `loop` must outlive the timer.
  ~UvTimer();
  UvTimer(const UvTimer&) = delete;
  UvTimer& operator=(const UvTimer&) = delete;

  // Fires `callback` after `timeout` (measured from now, not from the loop's cached time),
  // then every `repeat` if it is non-zero. Restarting replaces the previous schedule.
  void start(Duration timeout, Duration repeat, kj::Function<void()> callback);
  void stop();
  bool isActive() const;

 private:
  struct Handle;
  EventLoop& loop_;
  Handle* handle_;  // Owned; freed by uv's close callback after the timer is destroyed.
};

// Watches a POSIX signal (for example SIGTERM) through libuv for as long as it exists. The
// callback runs on the loop thread, once per delivery (deliveries may coalesce).
class SignalWatcher final {
 public:
  SignalWatcher(EventLoop& loop, int signum, kj::Function<void()> callback);
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

 private:
  struct Handle;
  EventLoop& loop_;
  Handle* handle_;
};

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH.
  // Extra "NAME=value" entries added to the parent's environment (later entries win); an entry
  // that is not NAME=value fails the spawn.
  std::vector<std::string> env;
  // False: the child's environment is `env` alone, nothing of the parent's (a child that must not
  // see the parent's configuration or secrets).
  bool inheritEnvironment = true;
  std::string cwd;                // Empty: the parent's working directory.
  // Capture stdout and stderr in memory (returned in ChildExit); otherwise they go to the files
  // named below, or are inherited when those are empty. The files are created by the spawn and
  // must not exist yet (O_EXCL), and a symbolic link in their place is refused (O_NOFOLLOW): the
  // directory may belong to the less trusted user the child runs as.
  bool captureOutput = true;
  std::string stdoutPath;
  std::string stderrPath;
  mode_t outputMode = 0644;  // The mode of the files above.
  // Or descriptors the child gets as its stdout / stderr (without captureOutput; they win over
  // the paths). The caller keeps them, as extraFds.
  int stdoutFd = -1;
  int stderrFd = -1;
  // The child calls setsid(): it leads a new session and process group whose id is its pid, so
  // kill(-pid, ...) reaches it and whatever it starts, and it has no controlling terminal.
  bool newSession = false;
  // Run the child as this user and group (the parent must be root); supplementary groups are
  // dropped when either is set. Unset: the parent's.
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
  // Descriptors the child gets as fd 3, 4, ... in this order. The caller keeps them (and closes
  // them once spawn returned); every other descriptor of the parent that is close-on-exec stays
  // out of the child. stdin is always /dev/null.
  std::vector<int> extraFds;
};

struct ChildExit {
  int64_t exitStatus = 0;  // Meaningful when termSignal == 0.
  int termSignal = 0;      // The signal that killed the child, or 0.
  std::string out;         // Captured stdout (captureOutput only).
  std::string err;         // Captured stderr (captureOutput only).
};

// A child process. Started with clone(CLONE_VM | CLONE_VFORK | CLONE_PIDFD) (common/child_spawn.h:
// the cost does not grow with the parent's memory, and its exit is watched and it is signalled
// through a pidfd), or with libuv's uv_spawn (fork) where the kernel refuses that clone.
// Destroying it while the child runs sends SIGKILL; the child is still reaped by the loop.
class ChildProcess final {
 public:
  // Starts the child. Fails, naming the program and the reason, if it cannot be started:
  // retryable when this process ran out of file descriptors, processes or memory (EMFILE,
  // ENFILE, EAGAIN, ENOMEM), fatal otherwise (no such program, not executable, ...).
  static Result<kj::Own<ChildProcess>> spawn(EventLoop& loop, SpawnOptions options);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Every later spawn of this process uses fork (libuv), as where the kernel refuses the clone;
  // false: clone again. For the tests of both ways.
  static void useForkForTesting(bool fork);

  int pid() const;
  // From now on, destroying this object leaves the child running instead of killing it: a
  // process meant to outlive its parent (a worker the master started). Once this object is gone
  // the child is no longer watched: one that exits while this process lives stays unreaped until
  // this process exits.
  void leaveRunning();
  // Sends `signum`; fails if the child has already exited.
  Status signal(int signum);
  // Resolves once the child has exited and its captured output is complete (EOF on both pipes:
  // a grandchild that inherited them delays it until it exits too). Call at most once.
  kj::Promise<ChildExit> onExit();

  struct State;

  // Built by its factory only (FactoryKey).
  ChildProcess(FactoryKey<ChildProcess>, State* state);

 private:
  State* state_;  // Owned; freed once this object is gone and every uv handle of it is closed.
};

// ---------------------------------------------------------------------------------------------
// Implementation of the template.

template <typename Func>
auto EventLoop::runBlocking(Func&& work) -> kj::Promise<decltype(work())> {
  using T = decltype(work());
  if constexpr (std::is_void_v<T>) {
    return runOnThreadPool(kj::fwd<Func>(work));
  } else {
    // The slot is shared by the pool thread (writes before completion) and the continuation
    // (reads after), which the pool's completion ordering keeps apart.
    auto slot = std::make_shared<std::optional<T>>();
    return runOnThreadPool([slot, work = kj::fwd<Func>(work)]() mutable { slot->emplace(work()); })
        .then([slot]() -> T { return std::move(**slot); });
  }
}

}  // namespace regent

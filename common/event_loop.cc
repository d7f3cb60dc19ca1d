// EventLoop: kj drives the thread; libuv's backend fd is watched by a kj FdObserver and the uv
// loop is pumped with UV_RUN_NOWAIT whenever it is readable, a uv timer is due, or a wrapper
// kicked it. docs/event-loop.md lists the pitfalls handled here.
#include "common/event_loop.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <kj/async-unix.h>
#include <kj/debug.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <uv.h>

#include <sys/syscall.h>
#include <sys/wait.h>

#include <atomic>
#include <cstring>
#include <mutex>

#include "common/child_spawn.h"

extern char** environ;

namespace regent {
namespace {

// Runs a user callback from inside uv_run. An exception must not unwind through libuv's C
// frames, so it is logged and dropped: the callback's owner keeps serving.
template <typename Func>
void runUserCallback(const char* what, Func&& func) {
  KJ_IF_MAYBE(exception, kj::runCatchingExceptions(kj::fwd<Func>(func))) {
    spdlog::error("uncaught exception in {} callback: {}", what, kj::str(*exception).cStr());
  }
}

// Whether `handle` watches a child's exit (a ChildProcess's); if so, the child is sent SIGKILL.
bool killWatchedChild(uv_handle_t* handle);

bool readableNow(int fd) {
  struct pollfd pfd = {fd, POLLIN, 0};
  return ::poll(&pfd, 1, 0) > 0;
}

}  // namespace

struct EventLoop::State {
  kj::AsyncIoContext io = kj::setupAsyncIo();
  uv_loop_t uv;
  mutable uv_async_t postAsync;  // uv_async_send() is the one thread-safe uv call.
  kj::Own<kj::UnixEventPort::FdObserver> observer;
  kj::Promise<void> pumpTask = nullptr;
  kj::Maybe<kj::Own<kj::PromiseFulfiller<void>>> kickFulfiller;
  bool kickPending = false;
  uint64_t pumps = 0;

  mutable std::mutex postMutex;
  mutable std::vector<kj::Function<void()>> posted;  // Guarded by postMutex.

  kj::Promise<void> pumpLoop() {
    kickPending = false;
    ++pumps;
    uv_run(&uv, UV_RUN_NOWAIT);
    // kj observes the backend fd edge-triggered while libuv is level-triggered: events left
    // after this pump would never produce a new edge, so look before sleeping.
    if (kickPending || readableNow(uv_backend_fd(&uv))) {
      return kj::evalLater([this] { return pumpLoop(); });
    }
    // postAsync is referenced, so the loop is always alive and uv_backend_timeout() means what
    // it says: -1 no timer, 0 work pending, otherwise ms until the next uv timer.
    uv_update_time(&uv);
    int timeout = uv_backend_timeout(&uv);
    if (timeout == 0) return kj::evalLater([this] { return pumpLoop(); });

    auto kick = kj::newPromiseAndFulfiller<void>();
    kickFulfiller = kj::mv(kick.fulfiller);
    kj::Promise<void> wake = observer->whenBecomesReadable().exclusiveJoin(kj::mv(kick.promise));
    if (timeout > 0) {
      wake = wake.exclusiveJoin(io.provider->getTimer().afterDelay(timeout * kj::MILLISECONDS));
    }
    return wake.then([this] { return pumpLoop(); });
  }

  void kick() {
    kickPending = true;
    KJ_IF_MAYBE(fulfiller, kickFulfiller) {
      (*fulfiller)->fulfill();
      kickFulfiller = nullptr;
    }
  }

  void drainPosted() {
    std::vector<kj::Function<void()>> batch;
    {
      std::lock_guard<std::mutex> lock(postMutex);
      batch.swap(posted);
    }
    for (auto& fn : batch) runUserCallback("posted", fn);
  }
};

EventLoop::EventLoop() : state_(kj::heap<State>()) {
  // A peer closing a pipe or socket must surface as an error on the write, not kill the process.
  ::signal(SIGPIPE, SIG_IGN);
  KJ_REQUIRE(uv_loop_init(&state_->uv) == 0, "uv_loop_init failed");
  state_->uv.data = state_.get();
  KJ_REQUIRE(uv_async_init(&state_->uv, &state_->postAsync, [](uv_async_t* handle) {
               static_cast<State*>(handle->loop->data)->drainPosted();
             }) == 0);
  state_->observer = kj::heap<kj::UnixEventPort::FdObserver>(
      state_->io.unixEventPort, uv_backend_fd(&state_->uv),
      kj::UnixEventPort::FdObserver::OBSERVE_READ);
  state_->pumpTask = state_->pumpLoop().eagerlyEvaluate([](kj::Exception&& exception) {
    spdlog::critical("event loop pump failed: {}", kj::str(exception).cStr());
  });
}

EventLoop::~EventLoop() noexcept {
  State& s = *state_;
  s.pumpTask = nullptr;
  s.kickFulfiller = nullptr;
  {
    std::lock_guard<std::mutex> lock(s.postMutex);
    s.posted.clear();
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&s.postAsync), nullptr);
  uv_walk(
      &s.uv,
      [](uv_handle_t* handle, void*) {
        if (uv_is_closing(handle)) return;
        if (killWatchedChild(handle)) {
          // A child whose ChildProcess is gone, SIGKILLed but not yet reaped: made sure it dies;
          // its exit callback closes the handle and frees its state below.
          return;
        }
        // Anything else still open was leaked by its owner; close it so the loop can close.
        spdlog::warn("event loop destroyed with an open uv handle ({})",
                     uv_handle_type_name(handle->type));
        uv_close(handle, nullptr);
      },
      nullptr);
  // Reaps those children, runs close callbacks and waits for thread-pool work in flight.
  uv_run(&s.uv, UV_RUN_DEFAULT);
  s.observer = nullptr;  // Before the backend fd goes away with the loop.
  int rc = uv_loop_close(&s.uv);
  if (rc != 0) spdlog::error("uv_loop_close: {}", uv_strerror(rc));
}

kj::AsyncIoProvider& EventLoop::io() { return *state_->io.provider; }
kj::WaitScope& EventLoop::waitScope() { return state_->io.waitScope; }
kj::Timer& EventLoop::timer() { return state_->io.provider->getTimer(); }
kj::UnixEventPort& EventLoop::eventPort() { return state_->io.unixEventPort; }
uv_loop_t* EventLoop::uv() { return &state_->uv; }
void EventLoop::kick() { state_->kick(); }
uint64_t EventLoop::pumpCountForTests() const { return state_->pumps; }

void EventLoop::post(kj::Function<void()> fn) const {
  {
    std::lock_guard<std::mutex> lock(state_->postMutex);
    state_->posted.push_back(kj::mv(fn));
  }
  uv_async_send(&state_->postAsync);
}

// ---------------------------------------------------------------------------------------------
// Thread pool

namespace {

struct WorkRequest {
  uv_work_t req;
  kj::Function<void()> work;
  kj::Maybe<kj::Exception> exception;  // Written on the pool thread, read after completion.
  kj::Own<kj::PromiseFulfiller<void>> fulfiller;
  bool done = false;
  bool promiseDropped = false;
  int refs = 2;  // The after-work callback and the promise; loop-thread only.

  void unref() {
    if (--refs == 0) delete this;
  }
};

}  // namespace

kj::Promise<void> EventLoop::runOnThreadPool(kj::Function<void()> work) {
  auto paf = kj::newPromiseAndFulfiller<void>();
  // Freed once both the after-work callback (always on the loop thread) and the promise are done.
  auto* request = new WorkRequest{};
  request->req.data = request;
  request->work = kj::mv(work);
  request->fulfiller = kj::mv(paf.fulfiller);
  int rc = uv_queue_work(
      &state_->uv, &request->req,
      [](uv_work_t* req) {
        auto* r = static_cast<WorkRequest*>(req->data);
        r->exception = kj::runCatchingExceptions([r] { r->work(); });
      },
      [](uv_work_t* req, int status) {
        auto* r = static_cast<WorkRequest*>(req->data);
        r->done = true;
        if (!r->promiseDropped) {
          if (status == UV_ECANCELED) {
            r->fulfiller->reject(KJ_EXCEPTION(DISCONNECTED, "thread-pool work cancelled"));
          } else KJ_IF_MAYBE(exception, r->exception) {
            r->fulfiller->reject(kj::mv(*exception));
          } else {
            r->fulfiller->fulfill();
          }
        }
        r->unref();
      });
  if (rc != 0) {
    delete request;
    return KJ_EXCEPTION(FAILED, "uv_queue_work failed", uv_strerror(rc));
  }
  kick();
  return paf.promise.attach(kj::defer([request] {
    // Runs when the promise is consumed or dropped.
    if (!request->done) {
      request->promiseDropped = true;
      uv_cancel(reinterpret_cast<uv_req_t*>(&request->req));
    }
    request->unref();
  }));
}

// ---------------------------------------------------------------------------------------------
// UvTimer

struct UvTimer::Handle {
  uv_timer_t timer;
  kj::Maybe<kj::Function<void()>> callback;
  uint64_t generation = 0;  // Bumped by start() and stop(), so a running callback can tell.
};

UvTimer::UvTimer(EventLoop& loop) : loop_(loop), handle_(new Handle{}) {
  uv_timer_init(loop.uv(), &handle_->timer);
  handle_->timer.data = handle_;
}

UvTimer::~UvTimer() {
  uv_close(reinterpret_cast<uv_handle_t*>(&handle_->timer),
           [](uv_handle_t* h) { delete static_cast<Handle*>(h->data); });
  loop_.kick();
}

void UvTimer::start(Duration timeout, Duration repeat, kj::Function<void()> callback) {
  ++handle_->generation;
  handle_->callback = kj::mv(callback);
  // uv measures from its cached loop time, which is stale if kj ran for a while since the last
  // pump: refresh it or the timer fires early.
  uv_update_time(loop_.uv());
  uv_timer_start(
      &handle_->timer,
      [](uv_timer_t* t) {
        auto* h = static_cast<Handle*>(t->data);
        // Move the callback out while it runs: it may restart (replace) or destroy this timer.
        KJ_IF_MAYBE(cb, h->callback) {
          kj::Function<void()> running = kj::mv(*cb);
          h->callback = nullptr;
          uint64_t generation = h->generation;
          bool repeating = uv_timer_get_repeat(t) != 0;
          runUserCallback("timer", running);
          // Put it back only if the callback neither restarted, stopped nor destroyed the timer.
          bool untouched = h->generation == generation &&
                           !uv_is_closing(reinterpret_cast<uv_handle_t*>(t));
          if (repeating && untouched) h->callback = kj::mv(running);
        }
      },
      static_cast<uint64_t>(timeout.count()), static_cast<uint64_t>(repeat.count()));
  loop_.kick();
}

void UvTimer::stop() {
  ++handle_->generation;
  uv_timer_stop(&handle_->timer);
  handle_->callback = nullptr;
  loop_.kick();
}

bool UvTimer::isActive() const {
  return uv_is_active(reinterpret_cast<const uv_handle_t*>(&handle_->timer)) != 0;
}

// ---------------------------------------------------------------------------------------------
// SignalWatcher

struct SignalWatcher::Handle {
  uv_signal_t signal;
  kj::Function<void()> callback;
};

SignalWatcher::SignalWatcher(EventLoop& loop, int signum, kj::Function<void()> callback)
    : loop_(loop), handle_(new Handle{}) {
  handle_->callback = kj::mv(callback);
  uv_signal_init(loop.uv(), &handle_->signal);
  handle_->signal.data = handle_;
  int rc = uv_signal_start(
      &handle_->signal,
      [](uv_signal_t* s, int) {
        auto* h = static_cast<Handle*>(s->data);
        runUserCallback("signal", h->callback);
      },
      signum);
  if (rc != 0) {
    uv_close(reinterpret_cast<uv_handle_t*>(&handle_->signal),
             [](uv_handle_t* h) { delete static_cast<Handle*>(h->data); });
    loop.kick();
    KJ_FAIL_REQUIRE("uv_signal_start failed", signum, uv_strerror(rc));
  }
  loop.kick();
}

SignalWatcher::~SignalWatcher() {
  uv_close(reinterpret_cast<uv_handle_t*>(&handle_->signal),
           [](uv_handle_t* h) { delete static_cast<Handle*>(h->data); });
  loop_.kick();
}

// ---------------------------------------------------------------------------------------------
// ChildProcess

struct ChildProcess::State {
  EventLoop* loop;
  // How the child's exit is watched: a pidfd polled for readability (spawned with clone,
  // common/child_spawn.h), or libuv's process handle (the fallback where the kernel refuses
  // CLONE_PIDFD).
  bool cloned = false;
  int pid = 0;
  int pidfd = -1;
  uv_poll_t exitPoll;
  uv_process_t process;
  uv_pipe_t pipes[2];  // stdout, stderr (captureOutput only).
  std::string* sinks[2];
  ChildExit exit;
  int openHandles = 0;   // uv handles not yet closed; the state is freed when 0 and no owner.
  int openStreams = 0;   // Capture pipes not yet at EOF.
  bool pipeReading[2] = {false, false};
  bool exited = false;
  bool ownerGone = false;
  bool leaveRunning = false;  // ChildProcess::leaveRunning().
  bool fulfilled = false;
  kj::Maybe<kj::Own<kj::PromiseFulfiller<ChildExit>>> fulfiller;
  kj::Maybe<kj::Promise<ChildExit>> promise;

  void closeHandle(uv_handle_t* handle) {
    uv_close(handle, [](uv_handle_t* h) {
      auto* s = static_cast<State*>(h->data);
      if (--s->openHandles == 0 && s->ownerGone) delete s;
    });
  }

  // The child exited (or is left running): its exit is not watched any more.
  void stopWatching() {
    if (cloned) {
      // uv_close takes the descriptor out of the poll set at once: it may be closed now.
      closeHandle(reinterpret_cast<uv_handle_t*>(&exitPoll));
      ::close(pidfd);
      pidfd = -1;
    } else {
      closeHandle(reinterpret_cast<uv_handle_t*>(&process));
    }
  }

  // 0, or a negated errno.
  int kill(int signum) {
    if (!cloned) return uv_process_kill(&process, signum);
    if (::syscall(SYS_pidfd_send_signal, pidfd, signum, nullptr, 0) == 0) return 0;
    // A filter that allows the clone but not this call: the pid is safe to signal, only this
    // state reaps the child, so it cannot have been reused.
    if ((errno == ENOSYS || errno == EPERM) && ::kill(pid, signum) == 0) return 0;
    return -errno;
  }

  // A capture pipe is complete (EOF, error, or nobody wants its output any more).
  void finishStream(int index) {
    if (!pipeReading[index]) return;
    pipeReading[index] = false;
    --openStreams;
    closeHandle(reinterpret_cast<uv_handle_t*>(&pipes[index]));
  }

  void maybeFinish() {
    if (!exited || openStreams > 0 || fulfilled) return;
    fulfilled = true;
    KJ_IF_MAYBE(f, fulfiller) { (*f)->fulfill(kj::mv(exit)); }
  }
};

namespace {

// A libuv error code (a negated errno) that says the parent ran out of something, not that the
// program cannot run.
bool outOfResources(int rc) {
  return rc == UV_EMFILE || rc == UV_ENFILE || rc == UV_EAGAIN || rc == UV_ENOMEM;
}

// Set once clone with CLONE_PIDFD was refused (an old kernel, a seccomp filter): every later
// spawn of the process goes through libuv's fork. Or by a test, to cover that path.
std::atomic<bool> cloneRefused{false};

void readCapturedOutput(ChildProcess::State* state) {
  for (int i = 0; i < 2; ++i) {
    ++state->openStreams;
    state->pipeReading[i] = true;
    uv_read_start(
        reinterpret_cast<uv_stream_t*>(&state->pipes[i]),
        [](uv_handle_t*, size_t suggested, uv_buf_t* buf) {
          buf->base = new char[suggested];
          buf->len = suggested;
        },
        [](uv_stream_t* stream, ssize_t n, const uv_buf_t* buf) {
          auto* s = static_cast<ChildProcess::State*>(stream->data);
          int index = stream == reinterpret_cast<uv_stream_t*>(&s->pipes[0]) ? 0 : 1;
          if (n > 0) s->sinks[index]->append(buf->base, static_cast<size_t>(n));
          delete[] buf->base;
          if (n < 0) {  // EOF or error: this stream is complete.
            s->finishStream(index);
            s->maybeFinish();
          }
        });
  }
}

// The child's exit, once its pidfd is readable: reaped here.
void onPidfdReadable(uv_poll_t* poll, int, int) {
  auto* s = static_cast<ChildProcess::State*>(poll->data);
  siginfo_t info;
  std::memset(&info, 0, sizeof info);
  int rc = ::waitid(P_PIDFD, static_cast<id_t>(s->pidfd), &info, WEXITED | WNOHANG);
  if (rc < 0 && errno == EINVAL) {
    // A kernel with CLONE_PIDFD but without waitid(P_PIDFD) (5.2, 5.3): by pid, which only
    // this state reaps.
    rc = ::waitid(P_PID, static_cast<id_t>(s->pid), &info, WEXITED | WNOHANG);
  }
  if (rc == 0 && info.si_pid == 0) return;  // Not exited yet.
  if (rc < 0 && errno == EINTR) return;     // Level-triggered: asked again.
  if (rc == 0) {
    if (info.si_code == CLD_EXITED) {
      s->exit.exitStatus = info.si_status;
    } else {
      s->exit.termSignal = info.si_status;
    }
  }
  // rc < 0 (ECHILD): reaped by someone else; how it ended is not known.
  s->exited = true;
  s->stopWatching();
  s->maybeFinish();
}

// The child through clone (common/child_spawn.h). `fds` are the child's 0, 1, 2, 3...; with
// captureOutput, 1 and 2 are made here. Returns 0, a negated errno (the message in `failure`),
// or 1 when the kernel refused the clone (nothing started; the caller falls back).
int spawnCloned(ChildProcess::State* state, const SpawnOptions& options,
                std::vector<std::string> env, std::vector<int> fds, std::string& failure) {
  int captureFds[2][2] = {{-1, -1}, {-1, -1}};
  auto closeCaptureFds = [&captureFds] {
    for (auto& pair : captureFds) {
      for (int& fd : pair) {
        if (fd >= 0) ::close(fd);
        fd = -1;
      }
    }
  };
  if (options.captureOutput) {
    for (int i = 0; i < 2; ++i) {
      if (::pipe2(captureFds[i], O_CLOEXEC) != 0) {
        const int error = errno;
        closeCaptureFds();
        failure = std::string("pipe: ") + uv_strerror(-error);
        return -error;
      }
      fds[1 + i] = captureFds[i][1];
    }
  }
  const char* path = nullptr;
  for (const auto& entry : env) {
    if (entry.compare(0, 5, "PATH=") == 0) path = entry.c_str() + 5;
  }
  ExecPlan plan;
  plan.candidates = execCandidates(options.argv[0], path);
  plan.argv = options.argv;
  plan.envp = std::move(env);
  plan.fds = std::move(fds);
  plan.cwd = options.cwd;
  plan.newSession = options.newSession;
  plan.uid = options.uid;
  plan.gid = options.gid;
  auto started = cloneAndExec(std::move(plan));
  if (auto* failed = std::get_if<SpawnFailure>(&started)) {
    closeCaptureFds();
    const bool refused = std::strcmp(failed->step, "clone") == 0 &&
                         (failed->error == EINVAL || failed->error == ENOSYS ||
                          failed->error == EPERM);
    if (refused) return 1;
    failure = uv_strerror(-failed->error);
    if (std::strcmp(failed->step, "exec") != 0) {
      failure = std::string(failed->step) + (failed->step == std::string("chdir")
                                                 ? " " + options.cwd : std::string()) +
                ": " + failure;
    }
    return -failed->error;
  }
  const ClonedChild child = std::get<ClonedChild>(started);
  // The loop cannot watch it (a handle libuv refuses): killed and reaped here, nothing kept. By
  // pid: only this call reaps it, so the pid cannot have been reused.
  auto abandon = [&](int rc, const char* what) {
    ::kill(child.pid, SIGKILL);
    while (::waitpid(child.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    ::close(child.pidfd);
    failure = std::string(what) + ": " + uv_strerror(rc);
    return rc;
  };
  if (options.captureOutput) {
    for (int i = 0; i < 2; ++i) {
      ::close(captureFds[i][1]);
      captureFds[i][1] = -1;
      uv_pipe_init(state->loop->uv(), &state->pipes[i], 0);
      state->pipes[i].data = state;
      ++state->openHandles;
      const int rc = uv_pipe_open(&state->pipes[i], captureFds[i][0]);
      if (rc != 0) {
        for (int j = 0; j <= i; ++j) {
          state->closeHandle(reinterpret_cast<uv_handle_t*>(&state->pipes[j]));
        }
        // The handles own the read ends they opened; the rest are closed here.
        for (int j = i; j < 2; ++j) {
          for (int fd : captureFds[j]) {
            if (fd >= 0) ::close(fd);
          }
        }
        return abandon(rc, "watch its output");
      }
    }
  }
  const int polled = uv_poll_init(state->loop->uv(), &state->exitPoll, child.pidfd);
  if (polled != 0) {
    if (options.captureOutput) {
      for (auto& pipe : state->pipes) state->closeHandle(reinterpret_cast<uv_handle_t*>(&pipe));
    }
    return abandon(polled, "watch its exit");
  }
  state->cloned = true;
  state->pid = child.pid;
  state->pidfd = child.pidfd;
  state->exitPoll.data = state;
  ++state->openHandles;
  uv_poll_start(&state->exitPoll, UV_READABLE, onPidfdReadable);
  if (options.captureOutput) readCapturedOutput(state);
  return 0;
}

// The child through libuv's uv_spawn (fork). Returns 0 or a libuv error code.
int spawnWithLibuv(ChildProcess::State* state, SpawnOptions& options, std::vector<std::string>& env,
                   const std::vector<int>& fds) {
  EventLoop& loop = *state->loop;
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  for (auto& a : options.argv) argv.push_back(a.data());
  argv.push_back(nullptr);

  std::vector<uv_stdio_container_t> stdio(fds.size());
  stdio[0].flags = UV_IGNORE;  // libuv gives an ignored stdin /dev/null.
  for (size_t i = 1; i < fds.size(); ++i) {
    if ((i == 1 || i == 2) && options.captureOutput) {
      auto& pipe = state->pipes[i - 1];
      uv_pipe_init(loop.uv(), &pipe, 0);
      pipe.data = state;
      ++state->openHandles;
      stdio[i].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
      stdio[i].data.stream = reinterpret_cast<uv_stream_t*>(&pipe);
    } else {
      stdio[i].flags = UV_INHERIT_FD;
      stdio[i].data.fd = fds[i];
    }
  }
  uv_process_options_t uvOptions{};
  uvOptions.file = argv[0];
  uvOptions.args = argv.data();
  uvOptions.env = envp.data();
  uvOptions.cwd = options.cwd.empty() ? nullptr : options.cwd.c_str();
  uvOptions.stdio_count = static_cast<int>(stdio.size());
  uvOptions.stdio = stdio.data();
  if (options.newSession) uvOptions.flags |= UV_PROCESS_DETACHED;
  if (options.uid) {
    uvOptions.flags |= UV_PROCESS_SETUID;
    uvOptions.uid = *options.uid;
  }
  if (options.gid) {
    uvOptions.flags |= UV_PROCESS_SETGID;
    uvOptions.gid = *options.gid;
  }
  uvOptions.exit_cb = [](uv_process_t* process, int64_t status, int termSignal) {
    auto* s = static_cast<ChildProcess::State*>(process->data);
    s->exited = true;
    s->exit.exitStatus = status;
    s->exit.termSignal = termSignal;
    s->stopWatching();
    s->maybeFinish();
  };
  state->process.data = state;
  const int rc = uv_spawn(loop.uv(), &state->process, &uvOptions);
  ++state->openHandles;  // uv_spawn initialises the process handle even when it fails.
  if (rc != 0) {
    state->closeHandle(reinterpret_cast<uv_handle_t*>(&state->process));
    if (options.captureOutput) {
      for (auto& pipe : state->pipes) state->closeHandle(reinterpret_cast<uv_handle_t*>(&pipe));
    }
    return rc;
  }
  state->pid = state->process.pid;
  if (options.captureOutput) readCapturedOutput(state);
  return 0;
}

bool killWatchedChild(uv_handle_t* handle) {
  const bool watch =
      handle->type == UV_PROCESS ||
      (handle->type == UV_POLL &&
       reinterpret_cast<uv_poll_t*>(handle)->poll_cb == onPidfdReadable);
  if (watch) static_cast<ChildProcess::State*>(handle->data)->kill(SIGKILL);
  return watch;
}

}  // namespace

void ChildProcess::useForkForTesting(bool fork) { cloneRefused = fork; }

Result<kj::Own<ChildProcess>> ChildProcess::spawn(EventLoop& loop, SpawnOptions options) {
  if (options.argv.empty()) return Error::fatal("spawn: empty argv");
  for (const auto& extra : options.env) {
    if (extra.find('=') == std::string::npos || extra.front() == '=') {
      return Error::fatal("spawn " + options.argv[0] + ": environment entry \"" + extra +
                          "\" is not NAME=value");
    }
  }
  // Environment: the parent's (unless not inherited), with the extra entries replacing
  // same-named ones.
  std::vector<std::string> env;
  if (options.inheritEnvironment) {
    for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  }
  for (const auto& extra : options.env) {
    auto name = extra.substr(0, extra.find('=') + 1);
    std::erase_if(env, [&](const std::string& e) { return e.compare(0, name.size(), name) == 0; });
    env.push_back(extra);
  }

  // The child's descriptors: stdin /dev/null (-1), stdout and stderr (set below), the extras.
  std::vector<int> fds(3 + options.extraFds.size(), -1);
  std::copy(options.extraFds.begin(), options.extraFds.end(), fds.begin() + 3);
  int fileFds[2] = {-1, -1};
  auto closeFiles = [&fileFds] {
    for (int fd : fileFds) {
      if (fd >= 0) ::close(fd);
    }
  };
  const std::string* paths[2] = {&options.stdoutPath, &options.stderrPath};
  const int givenFds[2] = {options.stdoutFd, options.stderrFd};
  for (int i = 0; i < 2; ++i) {
    if (options.captureOutput) continue;  // Pipes, made by the spawn.
    if (givenFds[i] >= 0) {
      fds[1 + i] = givenFds[i];
    } else if (!paths[i]->empty()) {
      // Created new, never through a link: the directory may belong to another user (a task
      // user), who must not point the parent's open at a file of its choosing.
      fileFds[i] = ::open(paths[i]->c_str(),
                          O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND | O_CLOEXEC,
                          options.outputMode);
      if (fileFds[i] < 0) {
        const int error = errno;
        std::string message = "cannot open " + *paths[i] + ": " + std::strerror(error);
        closeFiles();
        return outOfResources(-error) ? Error::retryable(message) : Error::fatal(message);
      }
      fds[1 + i] = fileFds[i];
    } else {
      fds[1 + i] = i + 1;
    }
  }

  auto* state = new State{};
  state->loop = &loop;
  state->sinks[0] = &state->exit.out;
  state->sinks[1] = &state->exit.err;
  auto paf = kj::newPromiseAndFulfiller<ChildExit>();
  state->fulfiller = kj::mv(paf.fulfiller);
  state->promise = kj::mv(paf.promise);

  std::string failure;
  int rc = 1;
  if (!cloneRefused) {
    rc = spawnCloned(state, options, env, fds, failure);
    if (rc == 1) {
      cloneRefused = true;
      spdlog::warn("the kernel refuses clone(CLONE_VM | CLONE_VFORK | CLONE_PIDFD); children "
                   "are started with fork from now on");
    }
  }
  if (rc == 1) {
    rc = spawnWithLibuv(state, options, env, fds);
    if (rc != 0) failure = uv_strerror(rc);
  }
  closeFiles();
  if (rc != 0) {
    state->ownerGone = true;
    state->fulfilled = true;
    loop.kick();
    if (state->openHandles == 0) delete state;
    std::string message = "cannot start " + options.argv[0] + ": " + failure;
    return outOfResources(rc) ? Error::retryable(message) : Error::fatal(message);
  }
  loop.kick();
  return kj::heap<ChildProcess>(FactoryKey<ChildProcess>(), state);
}

ChildProcess::ChildProcess(FactoryKey<ChildProcess>, State* state) : state_(state) {}

ChildProcess::~ChildProcess() {
  if (!state_->exited) {
    if (state_->leaveRunning) {
      // Not watched any more: the loop neither kills nor reaps it.
      state_->exited = true;
      state_->stopWatching();
    } else {
      state_->kill(SIGKILL);
    }
  }
  // Nobody reads the output any more; a grandchild could hold the pipes open indefinitely.
  for (int i = 0; i < 2; ++i) state_->finishStream(i);
  state_->fulfiller = nullptr;
  state_->promise = nullptr;
  state_->ownerGone = true;
  if (state_->openHandles == 0) delete state_;
  else state_->loop->kick();
}

int ChildProcess::pid() const { return state_->pid; }

void ChildProcess::leaveRunning() { state_->leaveRunning = true; }

Status ChildProcess::signal(int signum) {
  if (state_->exited) return Error::fatal("process " + std::to_string(pid()) + " has exited");
  int rc = state_->kill(signum);
  if (rc != 0) return Error::fatal(std::string("kill failed: ") + uv_strerror(rc));
  return {};
}

kj::Promise<ChildExit> ChildProcess::onExit() {
  KJ_IF_MAYBE(p, state_->promise) {
    auto promise = kj::mv(*p);
    state_->promise = nullptr;
    return promise;
  }
  return KJ_EXCEPTION(FAILED, "ChildProcess::onExit() may be called only once");
}

}  // namespace regent

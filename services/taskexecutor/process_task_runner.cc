// ProcessTaskRunner (see process_task_runner.h): each attempt is one regent-task-shim child in a
// session of its own, watched through two things: the shim's status socket (end of file without a
// word: the command runs; a line: what could not be done) and the shim's exit. Once the shim
// exited, the attempt ends when its process group is empty (or got SIGKILL).
#include "services/taskexecutor/process_task_runner.h"

#include <fcntl.h>
#include <kj/debug.h>
#include <kj/io.h>
#include <pwd.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <filesystem>
#include <map>
#include <system_error>

#include "common/errno_text.h"
#include "common/event_loop.h"
#include "common/task_set_error_logger.h"
#include "common/utf8.h"
#include "services/taskexecutor/attempt_dirs.h"
#include "services/taskexecutor/task_containment.h"

namespace regent::taskexecutor {
namespace {

namespace fs = std::filesystem;

// How often a process group that outlived its shim is looked at until it is empty or gets SIGKILL.
constexpr auto kGroupPollInterval = 20 * kj::MILLISECONDS;
// The status socket carries one line; anything longer is not the shim talking.
constexpr uint64_t kStatusLimit = 8192;
// How long a group that got SIGKILL may take to vanish before its attempt ends anyway. Nothing
// of it runs any more; what is left are zombies that their new parent (init) has not reaped yet.
constexpr auto kKillSettle = 500 * kj::MILLISECONDS;
// killAll() gives up waiting this long after the cancel timeout.
constexpr auto kKillAllGrace = 1 * kj::SECONDS;

std::string defaultShimPath() {
  std::error_code error;
  fs::path self = fs::read_symlink("/proc/self/exe", error);
  if (error) return "regent-task-shim";
  return (self.parent_path() / "regent-task-shim").string();
}

// Anything of the group left? EPERM: a member we may not signal (a set-user-ID program) is one.
bool groupAlive(pid_t pgid) { return ::kill(-pgid, 0) == 0 || errno == EPERM; }

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// How often an unusable runner looks again, and a usable one checks that the directory at the
// attempts path is still the one it holds.
constexpr auto kAttemptsCheckInterval = 1 * kj::SECONDS;

using SharedFd = std::shared_ptr<const kj::AutoCloseFd>;

// The shim's output report (task_shim.cc, step 4), one line per incomplete stream: "stdout
// truncated at N bytes", "stderr capture failed after N bytes: ...". Other lines are dropped.
void applyOutputReport(std::string_view text, TaskUpdate& update) {
  while (!text.empty()) {
    const size_t end = std::min(text.find('\n'), text.size());
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    const size_t space = line.find(' ');
    if (space == std::string_view::npos) continue;
    const std::string_view stream = line.substr(0, space);
    std::string problem = printableUtf8(line.substr(space + 1));
    if (problem.starts_with("truncated")) problem += " (worker.attempt-output.max)";
    if (stream == "stdout") update.stdoutProblem = std::move(problem);
    if (stream == "stderr") update.stderrProblem = std::move(problem);
  }
}

}  // namespace

Result<TaskUser> resolveTaskUser(const std::string& user, bool allowRoot, uid_t euid) {
  long size = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buffer(size > 0 ? static_cast<size_t>(size) : 16384);
  struct passwd entry {};
  struct passwd* found = nullptr;
  if (euid != 0) {
    // Tasks run as the worker's own user; the name is for the log line only.
    int rc;
    while ((rc = ::getpwuid_r(euid, &entry, buffer.data(), buffer.size(), &found)) == ERANGE) {
      buffer.resize(buffer.size() * 2);
    }
    if (found == nullptr) return TaskUser{.name = "uid " + std::to_string(euid)};
    return TaskUser{.name = found->pw_name, .home = found->pw_dir};
  }
  if (user.empty()) {
    return Error::fatal(
        "worker.task-user is empty: the worker runs as root and needs an unprivileged user to run "
        "tasks as");
  }
  int rc;
  while ((rc = ::getpwnam_r(user.c_str(), &entry, buffer.data(), buffer.size(), &found)) ==
         ERANGE) {
    buffer.resize(buffer.size() * 2);
  }
  if (rc != 0) {
    return Error::fatal("worker.task-user \"" + user +
                        "\": cannot read the user database: " + errnoText(rc));
  }
  if (found == nullptr) return Error::fatal("worker.task-user \"" + user + "\": no such user");
  if (found->pw_uid == 0 && !allowRoot) {
    return Error::fatal("worker.task-user \"" + user +
                        "\" is root (uid 0): tasks would run as root; set worker.task-allow-root "
                        "to true to allow it");
  }
  return TaskUser{.uid = found->pw_uid, .gid = found->pw_gid, .name = user, .home = found->pw_dir};
}

std::vector<std::string> taskEnvironment(const TaskUser& user, const std::string& path) {
  std::vector<std::string> env{"PATH=" + path};
  if (!user.home.empty()) env.push_back("HOME=" + user.home);
  // A name made up for an unknown uid ("uid 1000") is no user name.
  if (!user.name.empty() && user.name.find(' ') == std::string::npos) {
    env.push_back("USER=" + user.name);
    env.push_back("LOGNAME=" + user.name);
  }
  for (const char* name : {"LANG", "TZ"}) {
    if (const char* value = ::getenv(name)) env.push_back(std::string(name) + "=" + value);
  }
  return env;
}

struct ProcessTaskRunner::Attempt {
  AttemptId id;
  std::string dir;  // <attemptsDir>/<id hex>, for the shim and messages.
  std::string workingDir;
  std::vector<std::string> argv;
  std::vector<std::string> env;
  OnUpdate onUpdate;
  TaskUpdate latest;  // Phase kRunning until the terminal update.

  bool ended = false;
  bool cancelRequested = false;
  std::string startFailure;                // What kept the command from starting, if anything.
  kj::Own<ChildProcess> shim;              // Set from spawn until the shim's exit is seen.
  pid_t pgid = 0;                          // The shim's pid, 0 before spawn.
  bool groupGone = false;                  // Never signal the group again once true.
  kj::Maybe<kj::TimePoint> termSentAt;     // SIGTERM went to the group.
  kj::Maybe<kj::TimePoint> killSentAt;     // SIGKILL went to the group.
  kj::Maybe<kj::Promise<void>> killTimer;  // SIGKILL after the cancel timeout.
  ChildExit exit;
  int64_t endedAtMs = 0;  // When the shim's exit was seen.
  kj::AutoCloseFd stdoutFd, stderrFd;  // From preparation until the spawn.
  std::string outputReport;  // What the shim said about the output at its end.
  bool workerFault = false;  // The worker could not start it for want of its own resources.
  MonoTime acceptedAt{};  // When start() took it.
  // Its cgroup (or subreaper setup) from prepare until released; shared with the pool thread.
  std::shared_ptr<AttemptContainment> cell;
  std::string oomKilled;  // What the cell said when its memory limit killed something.

  std::string stdoutPath() const { return dir + "/stdout"; }
  std::string stderrPath() const { return dir + "/stderr"; }
};

struct ProcessTaskRunner::State {
  State(EventLoop& loop, kj::Timer& timer, ProcessTaskRunnerOptions options)
      : loop(loop), timer(timer), options(std::move(options)) {
    if (this->options.shimPath.empty()) this->options.shimPath = defaultShimPath();
    // The shim changes into the attempt's directory from the worker's working directory, which
    // the task user may not be allowed to enter: give it the whole path.
    std::error_code error;
    fs::path absolute = fs::absolute(this->options.attemptsDir, error);
    if (!error) this->options.attemptsDir = absolute.lexically_normal().string();
    while (this->options.attemptsDir.size() > 1 && this->options.attemptsDir.back() == '/') {
      this->options.attemptsDir.pop_back();
    }
    if (!this->options.nowMs) this->options.nowMs = [] { return wallClockMillis(); };
    KJ_REQUIRE(this->options.attemptsFd >= 0,
               "the ProcessTaskRunner needs the attempts directory open");
    const int fd = ::fcntl(this->options.attemptsFd, F_DUPFD_CLOEXEC, 0);
    KJ_REQUIRE(fd >= 0, "cannot duplicate the attempts directory's descriptor", errno);
    attemptsFd = std::make_shared<const kj::AutoCloseFd>(fd);
  }

  EventLoop& loop;
  kj::Timer& timer;
  ProcessTaskRunnerOptions options;
  SharedFd attemptsFd;  // Shared with the work on the thread pool, which may outlive the runner.
  TaskSetErrorLogger errorLogger{"task runner"};
  std::map<AttemptId, std::unique_ptr<Attempt>> attempts;
  std::deque<AttemptId> ended;     // Ended attempts still on disk, oldest first.
  std::deque<std::string> strays;  // Attempt directories (names) of earlier runs, oldest first.
  std::optional<std::string> unusable;  // Why attempt directories cannot be created.
  size_t running = 0;
  std::vector<kj::Own<kj::PromiseFulfiller<void>>> idleWaiters;
  bool stopping = false;  // killAll() was called: no attempt starts any more.
  kj::TaskSet tasks{errorLogger};  // Declared last: cancelled first.

  kj::Duration cancelTimeout() const { return options.cancelTimeout.count() * kj::MILLISECONDS; }

  void signalGroup(Attempt& a, int signum) {
    if (a.pgid <= 0 || a.groupGone) return;
    if (::kill(-a.pgid, signum) != 0 && errno == ESRCH) a.groupGone = true;
  }

  void launch(Attempt& a) {
    tasks.add(loop.runBlocking([fd = attemptsFd, attemptsDir = options.attemptsDir,
                                name = a.id.toHex(), uid = options.uid, gid = options.gid] {
                return prepareAttemptDir(fd->get(), attemptsDir, name, uid, gid);
              })
                  .then([this, &a](PreparedAttempt prepared) -> kj::Promise<void> {
                    if (!prepared.problem.empty()) {
                      a.startFailure = "the worker cannot run tasks: " + prepared.problem;
                      // Its attempt directory is the worker's to make: never the task's fault
                      // (out of descriptors, a broken data directory).
                      a.workerFault = true;
                      becomeUnusable(prepared.problem);
                    }
                    a.stdoutFd = kj::mv(prepared.stdoutFd);
                    a.stderrFd = kj::mv(prepared.stderrFd);
                    if (!a.startFailure.empty() || a.cancelRequested) {
                      finish(a);
                      return kj::READY_NOW;
                    }
                    return containThenSpawn(a);
                  })
                  .catch_([this, &a](kj::Exception&& exception) {
                    // A bug or a resource failure (no socket, thread pool gone): the attempt must
                    // still end, and nothing of it may keep running.
                    if (a.ended) return;
                    spdlog::error("task runner: attempt {} failed in the worker: {}", a.id.toHex(),
                                  exception.getDescription().cStr());
                    signalGroup(a, SIGKILL);
                    a.groupGone = true;
                    if (a.startFailure.empty()) {
                      a.startFailure =
                          std::string("the worker failed: ") + exception.getDescription().cStr();
                    }
                    // kj reports EMFILE, ENFILE, ENOMEM and the like as OVERLOADED: the worker is
                    // out of a resource, which says nothing about the task.
                    a.workerFault = exception.getType() == kj::Exception::Type::OVERLOADED;
                    finish(a);
                  }));
  }

  // Whether a stall of the loop overtook the attempt's start; if so it fails as a worker fault.
  bool overtakenByStall(Attempt& a) {
    if (options.stalls == nullptr) return false;
    const std::optional<Duration> stood = options.stalls->stallSince(a.acceptedAt);
    if (!stood) return false;
    a.startFailure = "the worker did not run for " + std::to_string(stood->count()) +
                     " ms (paused or starved) between accepting the attempt and starting it; "
                     "its JobMaster may have run it elsewhere meanwhile";
    a.workerFault = true;
    return true;
  }

  kj::Promise<void> spawn(Attempt& a) {
    if (overtakenByStall(a)) {
      finish(a);
      return kj::READY_NOW;
    }
    auto status = loop.io().newTwoWayPipe();
    auto reportPipe = loop.io().newTwoWayPipe();
    int shimEnd = -1, reportEnd = -1;
    KJ_IF_MAYBE (fd, status.ends[1]->getFd()) {
      shimEnd = *fd;
    }
    KJ_IF_MAYBE (fd, reportPipe.ends[1]->getFd()) {
      reportEnd = *fd;
    }
    KJ_REQUIRE(shimEnd >= 0 && reportEnd >= 0, "the shim's sockets have no file descriptor");
    // Put at fd 3 and 4 in the shim: the status socket and the output report.
    std::vector<std::string> argv = {options.shimPath,
                                     "--parent-pid",
                                     std::to_string(::getpid()),
                                     "--status-fd",
                                     "3",
                                     "--report-fd",
                                     "4",
                                     "--output-max",
                                     std::to_string(options.outputMax)};
    std::vector<int> extraFds = {shimEnd, reportEnd};
    if (a.cell != nullptr) {
      // The cell's descriptors follow the status socket (3) and the output report (4).
      for (auto& arg : a.cell->shimArgs(5)) argv.push_back(std::move(arg));
      for (int fd : a.cell->shimFds()) extraFds.push_back(fd);
    }
    argv.push_back("--cwd");
    // A relative working directory is below the attempt's own, never the worker's.
    argv.push_back(a.workingDir.empty()         ? a.dir
                   : a.workingDir.front() == '/' ? a.workingDir
                                                 : a.dir + "/" + a.workingDir);
    argv.push_back("--");
    argv.insert(argv.end(), a.argv.begin(), a.argv.end());
    std::vector<std::string> env = options.baseEnv;
    env.insert(env.end(), a.env.begin(), a.env.end());
    auto child = ChildProcess::spawn(loop, {.argv = std::move(argv),
                                            .env = std::move(env),
                                            .inheritEnvironment = false,
                                            .captureOutput = false,
                                            .stdoutFd = a.stdoutFd.get(),
                                            .stderrFd = a.stderrFd.get(),
                                            .newSession = true,
                                            .uid = options.uid,
                                            .gid = options.gid,
                                            .extraFds = std::move(extraFds)});
    // The shim holds the only other ends now, and its output files.
    status.ends[1] = nullptr;
    reportPipe.ends[1] = nullptr;
    a.stdoutFd = nullptr;
    a.stderrFd = nullptr;
    if (a.cell != nullptr) a.cell->closeShimFds();
    // Kept for as long as the attempt is retained: only what the accessors need.
    a.argv = {};
    a.env = {};
    if (!child.ok()) {
      a.startFailure = child.error().message;
      // Retryable: the worker ran out of descriptors, processes or memory (event_loop.h).
      a.workerFault = child.error().isRetryable();
      finish(a);
      return kj::READY_NOW;
    }
    a.shim = std::move(child).value();
    a.pgid = a.shim->pid();
    a.latest.pid = static_cast<uint32_t>(a.pgid);
    a.latest.startedAtMs = options.nowMs();
    // The report comes at the shim's end (end of file with it); read alongside.
    auto reportReader = kj::mv(reportPipe.ends[0]);
    auto reportText = reportReader->readAllText(kStatusLimit)
                          .attach(kj::mv(reportReader))
                          .then([](kj::String text) { return std::string(text.cStr()); },
                                [](kj::Exception&&) { return std::string(); });
    auto reader = kj::mv(status.ends[0]);
    kj::AsyncIoStream& stream = *reader;
    kj::Promise<void> released = kj::READY_NOW;
    if (a.cell != nullptr && a.cell->holdsShim()) released = releaseIntoCell(a, stream);
    auto words = released.then([&stream] { return stream.readAllText(kStatusLimit); });
    return words.attach(kj::mv(reader))
        .then([](kj::String text) { return std::string(text.cStr()); },
              [](kj::Exception&& e) {
                return std::string("cannot read regent-task-shim's status: ") +
                       e.getDescription().cStr();
              })
        .then([this, &a](std::string text) {
          // The shim's own words first: a move into the cell fails when the shim already gave up.
          std::string said = trimmed(std::move(text));
          if (!said.empty()) a.startFailure = std::move(said);
          if (a.startFailure.empty()) report(a, a.latest);  // kRunning
          return a.shim->onExit();
        })
        .then([this, &a, reportText = kj::mv(reportText)](ChildExit exit) mutable {
          a.exit = std::move(exit);
          a.endedAtMs = options.nowMs();
          a.shim = nullptr;
          return reportText.then([this, &a](std::string text) {
            a.outputReport = std::move(text);
            return awaitGroupGone(a);
          });
        })
        .then([this, &a] { return releaseCell(a); })
        .then([this, &a] { finish(a); });
  }

  // The attempt's containment (task_containment.h) prepared off the loop, then the spawn.
  kj::Promise<void> containThenSpawn(Attempt& a) {
    if (options.containment == nullptr) return spawn(a);
    return loop
        .runBlocking([containment = options.containment, id = a.id] {
          auto prepared = containment->prepare(id);
          if (!prepared.ok()) return std::make_pair(prepared.error().message,
                                                    std::shared_ptr<AttemptContainment>());
          return std::make_pair(std::string(),
                                std::shared_ptr<AttemptContainment>(std::move(prepared).value()));
        })
        .then([this, &a](std::pair<std::string, std::shared_ptr<AttemptContainment>> prepared)
                  -> kj::Promise<void> {
          a.cell = std::move(prepared.second);
          if (!prepared.first.empty()) a.startFailure = prepared.first;
          if (!a.startFailure.empty() || a.cancelRequested) {
            finish(a);
            return kj::READY_NOW;
          }
          return spawn(a);
        });
  }

  // The held shim moved into its cell, then told to run the command (one byte on its status
  // socket). A failed move or a cancel meanwhile kills the shim before it runs anything.
  kj::Promise<void> releaseIntoCell(Attempt& a, kj::AsyncIoStream& status) {
    return loop.runBlocking([cell = a.cell, pid = a.pgid] { return cell->enter(pid); })
        .then([this, &a, &status](Status entered) -> kj::Promise<void> {
          if (entered.ok() && !a.cancelRequested && !overtakenByStall(a)) {
            return status.write("g", 1);
          }
          if (!entered.ok()) a.startFailure = entered.error().message;
          signalGroup(a, SIGKILL);
          return kj::READY_NOW;
        });
  }

  // Whatever is left in the attempt's cell is killed and the cell removed, off the loop.
  kj::Promise<void> releaseCell(Attempt& a) {
    if (a.cell == nullptr) return kj::READY_NOW;
    auto cell = std::move(a.cell);
    return loop.runBlocking([cell] { return cell->release(); }).then([&a](std::string oom) {
      a.oomKilled = std::move(oom);
    });
  }

  // SIGKILL to the group, once.
  void killGroup(Attempt& a) {
    if (a.killSentAt != nullptr) return;
    spdlog::debug("attempt {}: group {} outlived the cancel timeout; SIGKILL", a.id.toHex(),
                  a.pgid);
    signalGroup(a, SIGKILL);
    a.killSentAt = timer.now();
  }

  // What the command left in its group gets SIGTERM, then SIGKILL once the cancel timeout has
  // passed since the first SIGTERM (the cancel's or this one). Resolves when the group is empty,
  // or kKillSettle after SIGKILL.
  kj::Promise<void> awaitGroupGone(Attempt& a) {
    if (a.groupGone) return kj::READY_NOW;
    if (!groupAlive(a.pgid)) {
      a.groupGone = true;
      return kj::READY_NOW;
    }
    const kj::TimePoint now = timer.now();
    kj::TimePoint next = now + kGroupPollInterval;
    KJ_IF_MAYBE (killedAt, a.killSentAt) {
      if (now >= *killedAt + kKillSettle) {
        // Never signal this id again: it may be reused once the zombies are reaped.
        a.groupGone = true;
        return kj::READY_NOW;
      }
      next = std::min(next, *killedAt + kKillSettle);
    } else {
      kj::TimePoint termSentAt = now;
      KJ_IF_MAYBE (at, a.termSentAt) {
        termSentAt = *at;
      } else {
        spdlog::debug("attempt {}: the command left processes in group {}; SIGTERM", a.id.toHex(),
                      a.pgid);
        signalGroup(a, SIGTERM);
        a.termSentAt = now;
      }
      const kj::TimePoint deadline = termSentAt + cancelTimeout();
      if (now >= deadline) {
        killGroup(a);
      } else {
        next = std::min(next, deadline);
      }
    }
    return timer.atTime(next).then([this, &a] { return awaitGroupGone(a); });
  }

  void report(Attempt& a, const TaskUpdate& update) {
    a.latest = update;
    // A copy: the callback may start or cancel attempts.
    OnUpdate onUpdate = a.onUpdate;
    if (!onUpdate) return;
    KJ_IF_MAYBE (exception, kj::runCatchingExceptions([&] { onUpdate(update); })) {
      spdlog::error("attempt {}: the update callback failed: {}", a.id.toHex(),
                    exception->getDescription().cStr());
    }
  }

  void finish(Attempt& a) {
    TaskUpdate update = a.latest;
    update.endedAtMs = a.endedAtMs != 0 ? a.endedAtMs : options.nowMs();
    update.exitCode = a.exit.termSignal == 0 ? static_cast<int32_t>(a.exit.exitStatus) : 0;
    update.termSignal = a.exit.termSignal;
    applyOutputReport(a.outputReport, update);
    if (!a.startFailure.empty()) {
      update.phase = TaskPhase::kFailed;
      update.message = a.startFailure;
      update.workerFault = a.workerFault;
    } else if (a.cancelRequested) {
      update.phase = TaskPhase::kCanceled;
    } else if (a.exit.termSignal != 0) {
      update.phase = TaskPhase::kFailed;
      const char* description = ::sigdescr_np(a.exit.termSignal);
      update.message = "killed by signal " + std::to_string(a.exit.termSignal) + " (" +
                       (description != nullptr ? description : "unknown signal") + ")";
    } else if (a.exit.exitStatus != 0) {
      update.phase = TaskPhase::kFailed;
      update.message = "exited with code " + std::to_string(a.exit.exitStatus);
    } else {
      update.phase = TaskPhase::kFinished;
    }
    if (update.phase == TaskPhase::kFailed && !a.oomKilled.empty()) {
      update.message = a.oomKilled + ": " + update.message;
    }
    if (a.cell != nullptr) {
      // Ended before its shim ran (or in the worker's failure): its cell goes too.
      tasks.add(loop.runBlocking([cell = std::move(a.cell)] { cell->release(); }));
    }
    a.ended = true;
    a.killTimer = nullptr;
    a.shim = nullptr;
    --running;
    ended.push_back(a.id);
    report(a, update);
    if (running == 0) {
      for (auto& waiter : idleWaiters) waiter->fulfill();
      idleWaiters.clear();
    }
    prune();
  }

  // Removes the oldest ended attempts' directories beyond the retention, off the loop.
  void prune() {
    std::vector<std::string> doomed;
    while (ended.size() + strays.size() > options.retainAttempts) {
      if (!strays.empty()) {
        doomed.push_back(std::move(strays.front()));
        strays.pop_front();
        continue;
      }
      auto it = attempts.find(ended.front());
      ended.pop_front();
      if (it == attempts.end()) continue;
      doomed.push_back(it->second->id.toHex());
      attempts.erase(it);
    }
    if (doomed.empty()) return;
    tasks.add(loop.runBlocking(
        [fd = attemptsFd, attemptsDir = options.attemptsDir, doomed = std::move(doomed)] {
          for (const auto& name : doomed) {
            std::string problem = removeTreeAt(fd->get(), name, attemptsDir + "/" + name);
            if (!problem.empty()) spdlog::warn("cannot remove an attempt directory: {}", problem);
          }
        }));
  }

  // Once: logs why, and starts looking again every kAttemptsCheckInterval.
  void becomeUnusable(const std::string& why) {
    if (unusable) return;
    unusable = why;
    spdlog::error("task runner: {}; this worker takes no more tasks (not ready) until it can "
                  "create attempt directories again",
                  why);
  }

  // Every kAttemptsCheckInterval: a usable runner checks that the directory at the attempts path
  // is still the one it holds; an unusable one also tries to create a directory in it, and is
  // usable again when both work.
  void watchAttemptsDir() {
    tasks.add(timer.afterDelay(kAttemptsCheckInterval)
                  .then([this] {
                    return loop.runBlocking([fd = attemptsFd, attemptsDir = options.attemptsDir,
                                             probe = unusable.has_value()] {
                      return checkAttemptsDir(fd->get(), attemptsDir, probe);
                    });
                  })
                  .then([this](std::string problem) {
                    if (!problem.empty()) {
                      becomeUnusable(problem);
                    } else if (unusable) {
                      spdlog::info("task runner: attempt directories can be created again in {}; "
                                   "this worker takes tasks again",
                                   options.attemptsDir);
                      unusable = std::nullopt;
                    }
                    watchAttemptsDir();
                  }));
  }

  // Attempt directories left by an earlier run of the worker count as ended, older than any of
  // this run's.
  void adoptStrayDirectories() {
    tasks.add(loop.runBlocking([fd = attemptsFd] { return listAttemptDirs(fd->get()); })
                  .then([this](std::vector<std::string> found) {
                    for (std::string& name : found) {
                      auto id = AttemptId::fromHex(name);
                      if (attempts.count(*id) == 0) strays.push_back(std::move(name));
                    }
                    prune();
                  }));
  }
};

ProcessTaskRunner::ProcessTaskRunner(EventLoop& loop, kj::Timer& timer,
                                     ProcessTaskRunnerOptions options)
    : state_(kj::heap<State>(loop, timer, std::move(options))) {
  state_->adoptStrayDirectories();
  state_->watchAttemptsDir();
}

ProcessTaskRunner::~ProcessTaskRunner() noexcept {
  for (auto& [id, attempt] : state_->attempts) {
    if (!attempt->ended) state_->signalGroup(*attempt, SIGKILL);
  }
}

Status ProcessTaskRunner::start(const TaskSpec& spec, OnUpdate onUpdate) {
  State& s = *state_;
  if (s.stopping) {
    return Error::fatal("the worker is stopping: its tasks are being killed, attempt " +
                        spec.attempt.toHex() + " is not started");
  }
  if (s.attempts.count(spec.attempt) != 0) {
    return Error::fatal("attempt " + spec.attempt.toHex() + " is already known to this worker");
  }
  if (s.unusable) {
    return Error::fatal("the worker cannot run tasks: " + *s.unusable + "; attempt " +
                        spec.attempt.toHex() + " is not started");
  }
  auto attempt = std::make_unique<Attempt>();
  Attempt& a = *attempt;
  a.id = spec.attempt;
  a.dir = s.options.attemptsDir + "/" + spec.attempt.toHex();
  a.workingDir = spec.workingDir;
  a.argv = spec.argv;
  a.env = spec.env;
  a.onUpdate = std::move(onUpdate);
  a.latest.attempt = spec.attempt;
  a.latest.phase = TaskPhase::kRunning;
  a.acceptedAt = std::chrono::steady_clock::now();
  if (a.argv.empty()) a.startFailure = "no command to run (argv is empty)";
  s.attempts.emplace(spec.attempt, std::move(attempt));
  ++s.running;
  s.launch(a);
  return {};
}

void ProcessTaskRunner::cancel(const AttemptId& attempt) {
  State& s = *state_;
  auto it = s.attempts.find(attempt);
  if (it == s.attempts.end()) return;
  Attempt& a = *it->second;
  if (a.ended || a.cancelRequested) return;
  if (a.pgid == 0) {
    // Still preparing its directory: it will not be spawned.
    a.cancelRequested = true;
    return;
  }
  // A shim already gone ended on its own: the attempt keeps the phase it reached.
  if (a.shim.get() == nullptr || !a.shim->signal(0).ok()) return;
  a.cancelRequested = true;
  s.signalGroup(a, SIGTERM);
  a.termSentAt = s.timer.now();
  a.killTimer =
      s.timer.afterDelay(s.cancelTimeout())
          .then([&s, &a] {
            if (!a.groupGone && groupAlive(a.pgid)) s.killGroup(a);
          })
          .eagerlyEvaluate([](kj::Exception&& e) {
            spdlog::error("task runner: cancel timer failed: {}", e.getDescription().cStr());
          });
}

kj::Promise<void> ProcessTaskRunner::killAll() {
  State& s = *state_;
  s.stopping = true;
  for (auto& [id, attempt] : s.attempts) cancel(id);
  if (s.running == 0) return kj::READY_NOW;
  auto idle = kj::newPromiseAndFulfiller<void>();
  s.idleWaiters.push_back(kj::mv(idle.fulfiller));
  return idle.promise.exclusiveJoin(s.timer.afterDelay(s.cancelTimeout() + kKillAllGrace));
}

bool ProcessTaskRunner::running(const AttemptId& attempt) const {
  auto it = state_->attempts.find(attempt);
  return it != state_->attempts.end() && !it->second->ended;
}

size_t ProcessTaskRunner::runningCount() const { return state_->running; }

bool ProcessTaskRunner::stopping() const { return state_->stopping; }

std::optional<std::string> ProcessTaskRunner::stdoutPath(const AttemptId& attempt) const {
  auto it = state_->attempts.find(attempt);
  if (it == state_->attempts.end()) return std::nullopt;
  return it->second->stdoutPath();
}

std::optional<std::string> ProcessTaskRunner::stderrPath(const AttemptId& attempt) const {
  auto it = state_->attempts.find(attempt);
  if (it == state_->attempts.end()) return std::nullopt;
  return it->second->stderrPath();
}

const std::optional<std::string>& ProcessTaskRunner::unusableReason() const {
  return state_->unusable;
}

std::optional<TaskUpdate> ProcessTaskRunner::latest(const AttemptId& attempt) const {
  auto it = state_->attempts.find(attempt);
  if (it == state_->attempts.end()) return std::nullopt;
  return it->second->latest;
}

}  // namespace regent::taskexecutor

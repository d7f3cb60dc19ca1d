// A TaskRunner without processes for unit tests of the TaskExecutor: every attempt started
// reports RUNNING, then runs until the test ends it (finish) or the TaskExecutor cancels it. As
// the ProcessTaskRunner, it reports later (in a later turn of the loop), never from inside
// start() or cancel(), and each attempt's updates in order: RUNNING, then one terminal phase.
#pragma once

#include <kj/async.h>
#include <kj/debug.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/task_set_error_logger.h"
#include "services/taskexecutor/task_runner.h"

namespace regent::testing {

// Loop-thread only; the test's EventLoop must outlive it.
class FakeTaskRunner final : public taskexecutor::TaskRunner {
 public:
  using TaskPhase = taskexecutor::TaskPhase;
  using TaskSpec = taskexecutor::TaskSpec;
  using TaskUpdate = taskexecutor::TaskUpdate;

  // The pid the RUNNING update of the n-th attempt started (from 0) carries.
  static uint32_t pidOf(size_t n) { return static_cast<uint32_t>(40000 + n); }
  // The time the updates carry (Unix ms): fixed, so the updates are the same in every run.
  static constexpr int64_t kStartedAtMs = 1'700'000'000'000;
  static constexpr int64_t kEndedAtMs = kStartedAtMs + 1000;

  ~FakeTaskRunner() noexcept override = default;

  Status start(const TaskSpec& spec, OnUpdate onUpdate) override {
    if (stopping_) {
      return Error::fatal("the worker is stopping: attempt " + spec.attempt.toHex() +
                          " is not started");
    }
    if (attempts_.count(spec.attempt) != 0) {
      return Error::fatal("attempt " + spec.attempt.toHex() + " is already known");
    }
    Attempt& attempt = attempts_[spec.attempt];
    attempt.spec = spec;
    attempt.onUpdate = std::move(onUpdate);
    attempt.latest.attempt = spec.attempt;
    started_.push_back(spec.attempt);
    TaskUpdate running = attempt.latest;
    running.pid = pidOf(started_.size() - 1);
    running.startedAtMs = kStartedAtMs;
    attempt.runningUpdate = running;
    later(spec.attempt, running);
    return {};
  }

  void cancel(const AttemptId& id) override {
    auto found = attempts_.find(id);
    if (found == attempts_.end() || found->second.ending) return;
    cancelled_.push_back(id);
    TaskUpdate canceled = found->second.runningUpdate;
    canceled.phase = TaskPhase::kCanceled;
    canceled.termSignal = 15;
    end(found->second, canceled);
  }

  bool stopping() const override { return stopping_; }

  std::optional<TaskUpdate> latest(const AttemptId& id) const override {
    auto found = attempts_.find(id);
    if (found == attempts_.end()) return std::nullopt;
    return found->second.latest;
  }

  const std::optional<std::string>& unusableReason() const override { return unusable_; }

  // The attempt's command exits with `exitCode`: FINISHED for 0, else FAILED ("exited with code
  // N"). No-op for an attempt already ending.
  void finish(const AttemptId& id, int32_t exitCode = 0) {
    auto found = attempts_.find(id);
    KJ_REQUIRE(found != attempts_.end(), "finish() of an attempt never started", id.toHex());
    if (found->second.ending) return;
    TaskUpdate ended = found->second.runningUpdate;
    ended.exitCode = exitCode;
    if (exitCode == 0) {
      ended.phase = TaskPhase::kFinished;
    } else {
      ended.phase = TaskPhase::kFailed;
      ended.message = "exited with code " + std::to_string(exitCode);
    }
    end(found->second, ended);
  }

  // As the worker's stop: every running attempt cancelled, start() refused from now on.
  // Resolves once their updates were reported.
  kj::Promise<void> killAll() {
    stopping_ = true;
    for (auto& [id, attempt] : attempts_) cancel(id);
    return kj::evalLast([] {});
  }

  // What start() was given for `attempt`, or nullptr when it was never started.
  const TaskSpec* spec(const AttemptId& id) const {
    auto found = attempts_.find(id);
    return found == attempts_.end() ? nullptr : &found->second.spec;
  }
  // Every attempt start() accepted, in order.
  const std::vector<AttemptId>& started() const { return started_; }
  // The attempts cancel() ended, in order.
  const std::vector<AttemptId>& cancelled() const { return cancelled_; }

 private:
  struct Attempt {
    TaskSpec spec;
    OnUpdate onUpdate;
    TaskUpdate runningUpdate;
    TaskUpdate latest;    // What was last reported (kRunning before anything was).
    bool ending = false;  // Its terminal update is reported or on its way.
  };

  void end(Attempt& attempt, TaskUpdate update) {
    attempt.ending = true;
    update.endedAtMs = kEndedAtMs;
    later(attempt.spec.attempt, update);
  }

  // Reports `update` in a later turn (in the order of the calls).
  void later(const AttemptId& id, TaskUpdate update) {
    tasks_.add(kj::evalLater([this, id, update]() {
      Attempt& attempt = attempts_.at(id);
      attempt.latest = update;
      OnUpdate onUpdate = attempt.onUpdate;  // A copy: the callback may start or cancel.
      if (onUpdate) onUpdate(update);
    }));
  }

  std::map<AttemptId, Attempt> attempts_;
  std::vector<AttemptId> started_;
  std::vector<AttemptId> cancelled_;
  std::optional<std::string> unusable_;
  bool stopping_ = false;
  TaskSetErrorLogger errorLogger_{"fake task runner"};
  kj::TaskSet tasks_{errorLogger_};  // Declared last: cancelled first.
};

}  // namespace regent::testing

// JobLinks (see job_links.h), its update queue: the attempt updates of each job, kept in order
// while they cannot be delivered (bounded by worker.update-buffer.max), and delivered to the
// job's JobMaster one at a time once the job's offer in the registration was answered.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <iterator>
#include <utility>

#include "client/leader_client.h"
#include "common/event_sink.h"
#include "rpc/wire_ids.h"
#include "services/taskexecutor/job_links.h"
#include "services/taskexecutor/registration.h"
#include "services/taskexecutor/task_executor.h"

namespace regent::taskexecutor {

void JobLinks::onTaskUpdate(const AttemptRecord& record) {
  const JobId job = record.job;
  const JobLink& held = link(job);
  if (held.unknownRound == registration_.round()) {
    // The leader does not know the job: nobody to tell (its attempts are being cancelled).
    spdlog::debug(
        "task executor {}: not delivering the {} update of attempt {}: job {} is "
        "unknown to the leader",
        options_.resourceId.toHex(), phaseName(record.latest.phase), record.attempt.toHex(),
        job.toHex());
    forgetIfIdle(job);
    return;
  }
  queueUpdate(job, record);
  kickDelivery(job);
}

size_t JobLinks::updatesQueued() const {
  size_t queued = 0;
  for (const auto& [job, held] : jobs_) queued += held->updates.size();
  return queued;
}

void JobLinks::queueUpdate(const JobId& job, const AttemptRecord& record) {
  const size_t max = std::max<size_t>(options_.updateBufferMax, 1);
  std::optional<JobId> dropped;
  if (updatesQueued() >= max) {
    // A terminal update supersedes its attempt's queued RUNNING update, which changes nothing
    // once the terminal state is known: that one goes first, silently.
    bool superseded = false;
    if (record.latest.phase != TaskPhase::kRunning) {
      std::deque<PendingUpdate>& updates = link(job).updates;
      for (auto it = updates.rbegin(); it != updates.rend(); ++it) {
        if (it->record.attempt == record.attempt &&
            it->record.latest.phase == TaskPhase::kRunning) {
          updates.erase(std::next(it).base());
          superseded = true;
          break;
        }
      }
    }
    if (!superseded) dropped = dropOldestUpdate();
  }
  link(job).updates.push_back(PendingUpdate{++updateSeq_, record});
  if (dropped && *dropped != job) forgetIfIdle(*dropped);
}

std::optional<JobId> JobLinks::dropOldestUpdate() {
  JobLink* oldest = nullptr;
  for (auto& [job, held] : jobs_) {
    if (held->updates.empty()) continue;
    if (oldest == nullptr || held->updates.front().seq < oldest->updates.front().seq) {
      oldest = held.get();
    }
  }
  if (oldest == nullptr) return std::nullopt;
  // An update in flight may still arrive; its answer no longer pops anything (deliverLoop
  // matches the front by seq).
  const AttemptRecord dropped = oldest->updates.front().record;
  oldest->updates.pop_front();
  const uint64_t n = ++counters_.updatesDropped;
  if (n <= 10 || n % 100 == 0) {
    events_.emit(Event("updates dropped", EventLevel::kWarn)
                     .field("resource_id", options_.resourceId.toHex())
                     .field("job", dropped.job.toHex())
                     .field("attempt", dropped.attempt.toHex())
                     .field("vertex", dropped.vertex)
                     .field("subtask", uint64_t{dropped.subtask})
                     .field("state", phaseName(dropped.latest.phase))
                     .field("dropped", n)
                     .quotedField("reason", "worker.update-buffer.max (" +
                                                std::to_string(options_.updateBufferMax) +
                                                ") attempt updates wait for their JobMaster; the "
                                                "oldest is dropped"));
  }
  return dropped.job;
}

void JobLinks::notifyIfFlushed() {
  if (flushed_.empty() || updatesQueued() != 0) return;
  for (auto& waiter : flushed_) waiter->fulfill();
  flushed_.clear();
}

void JobLinks::markOffered(const JobId& job) {
  JobLink& held = link(job);
  held.offeredRound = registration_.round();
  if (!held.updates.empty()) kickDelivery(job);
}

void JobLinks::kickDelivery(const JobId& job) {
  JobLink& held = link(job);
  if (held.delivering) return;
  held.delivering = true;
  tasks_.add(deliverLoop(job));
}

kj::Promise<void> JobLinks::deliverLoop(JobId job) {
  JobLink& held = link(job);
  const uint64_t epoch = registration_.epoch();
  if (held.updates.empty() || !registration_.epochStands(epoch) ||
      held.offeredRound != registration_.round()) {
    // Nothing left, or waiting: for a registration (onRegistered), or for the answer to the
    // job's offer in this one (markOffered).
    held.delivering = false;
    forgetIfIdle(job);
    notifyIfFlushed();
    return kj::READY_NOW;
  }
  const uint64_t seq = held.updates.front().seq;
  auto retry = [this, job](Duration retryAfter, const std::string& why) -> kj::Promise<void> {
    JobLink& held = link(job);
    held.gateway = nullptr;
    const Duration wait = waitBefore(held.updateBackoff, retryAfter, options_.registrationMax);
    spdlog::debug("task executor {}: an attempt update of job {} failed: {} (again in {} ms)",
                  options_.resourceId.toHex(), job.toHex(), why, wait.count());
    return backoffWait(job, wait).then([this, job]() { return deliverLoop(job); });
  };
  // The update numbered `sent` is settled: the next one. (It is no longer the front when the
  // bound dropped it meanwhile.)
  auto settled = [this, job](uint64_t sent) -> kj::Promise<void> {
    JobLink& held = link(job);
    if (!held.updates.empty() && held.updates.front().seq == sent) held.updates.pop_front();
    return deliverLoop(job);
  };
  return jobMaster(job, epoch)
      .then([this, job, epoch, seq, retry,
             settled](rpc::Attempt<wire::JobMasterGateway::Client> reached) -> kj::Promise<void> {
        if (auto* failure = std::get_if<rpc::CallFailure>(&reached)) {
          const Reaction reaction = reactionTo(*failure);
          if (reaction == Reaction::kUnknown) {
            jobUnknown(job, failure->describe());
            return deliverLoop(job);
          }
          if (reaction == Reaction::kGiveUp) {
            spdlog::error("task executor {}: cannot reach the JobMaster of job {}: {}",
                          options_.resourceId.toHex(), job.toHex(), failure->describe());
            return settled(seq);
          }
          return retry(failure->retryAfter, failure->describe());
        }
        JobLink& held = link(job);
        if (held.updates.empty()) return deliverLoop(job);  // Dropped meanwhile.
        // What is sent is the front now (the bound may have dropped the one `seq` names).
        const PendingUpdate& front = held.updates.front();
        const AttemptId attempt = front.record.attempt;
        const uint64_t sent = front.seq;
        auto request =
            std::get<wire::JobMasterGateway::Client>(reached).updateTaskExecutionStateRequest();
        request.setEpoch(epoch);
        slots_.fillAttempt(request.initState(), front.record);
        return leaders_.deadline()
            .send(kj::mv(request))
            .then(
                [this, job, attempt, sent, retry,
                 settled](capnp::Response<wire::JobMasterGateway::UpdateTaskExecutionStateResults>
                              response) -> kj::Promise<void> {
                  if (!response.hasFailure()) {
                    link(job).updateBackoff.reset();
                    return settled(sent);
                  }
                  auto failure = rpc::CallFailure::from(response.getFailure());
                  switch (reactionTo(failure)) {
                    case Reaction::kUnknown:
                      spdlog::warn(
                          "task executor {}: the JobMaster of job {} does not know "
                          "attempt {}: cancelling it ({})",
                          options_.resourceId.toHex(), job.toHex(), attempt.toHex(),
                          failure.describe());
                      if (slots_.attempts().count(attempt) != 0) runner_.cancel(attempt);
                      return settled(sent);
                    case Reaction::kGiveUp:
                      spdlog::error(
                          "task executor {}: the JobMaster of job {} refused the "
                          "update of attempt {}: {}",
                          options_.resourceId.toHex(), job.toHex(), attempt.toHex(),
                          failure.describe());
                      return settled(sent);
                    case Reaction::kRetry:
                    case Reaction::kNotRegistered:
                      break;
                  }
                  return retry(failure.retryAfter, failure.describe());
                },
                [this, job, sent, retry, settled](kj::Exception&& exception) -> kj::Promise<void> {
                  if (reactionTo(exception) == Reaction::kGiveUp) {
                    spdlog::error("task executor {}: an attempt update of job {} failed: {}",
                                  options_.resourceId.toHex(), job.toHex(),
                                  std::string(exception.getDescription().cStr()));
                    return settled(sent);
                  }
                  return retry(Duration(0), std::string(exception.getDescription().cStr()));
                });
      });
}

kj::Promise<void> JobLinks::flushUpdates(Duration bound) {
  const bool pending = std::any_of(
      jobs_.begin(), jobs_.end(), [](const auto& entry) { return !entry.second->updates.empty(); });
  if (!pending) return kj::READY_NOW;
  auto paf = kj::newPromiseAndFulfiller<void>();
  flushed_.push_back(kj::mv(paf.fulfiller));
  return kj::mv(paf.promise).exclusiveJoin(timer_.afterDelay(bound.count() * kj::MILLISECONDS));
}

}  // namespace regent::taskexecutor

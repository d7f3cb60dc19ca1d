// ProgressLog (progress_log.h): one put of the job's record at a time, the deployments and
// acknowledgements that wait for it, and the retries.
#include "services/jobmaster/progress_log.h"

#include <capnp/message.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "common/units.h"

namespace regent::jobmaster {

namespace {

// The first delay before a failed put is tried again; later ones grow (with jitter,
// common/backoff.h) up to the longest retry delay (heartbeat.interval).
constexpr Duration kFirstRetryDelay{100};

}  // namespace

ProgressLog::ProgressLog(JobId job, const ExecutionGraph& graph, JobMasterTerm& term,
                         Listener& listener)
    : job_(job),
      graph_(graph),
      term_(term),
      listener_(listener) {}

void ProgressLog::writeNow() {
  nowWanted_ = true;
  write();
}

void ProgressLog::write() {
  if (inFlight_ || retryArmed_ || fenced_ || closed_ || tooLarge_) return;
  const uint64_t version = graph_.version();
  if (version <= storedVersion_ || endStoredByResult()) {
    nowWanted_ = false;  // Nothing to put.
    return;
  }
  if (!putWantedNow()) {
    armLazyPut();
    return;
  }
  nowWanted_ = false;  // This put holds everything so far.
  capnp::MallocMessageBuilder message;
  auto progress = message.initRoot<wire::JobProgress>();
  graph_.fillProgress(progress, term_.epoch, term_.wallNow());
  inFlight_ = true;
  // put() encodes the record before it returns: the message may go with this scope.
  tasks_.add(
      term_.progress.put(progress.asReader())
          .then([this, version](store::StoreResult<void> result) { settled(version, result); },
                [this, version](kj::Exception&& exception) {
                  settled(version,
                          store::StoreError::unavailable(std::string("put failed: ") +
                                                         exception.getDescription().cStr()));
                }));
}

void ProgressLog::settled(uint64_t version, const store::StoreResult<void>& result) {
  inFlight_ = false;
  if (result.ok()) {
    storedVersion_ = std::max(storedVersion_, version);
    retry_.reset();  // Back to the first delay.
  } else if (result.error().code == store::StoreErrorCode::kFenced) {
    if (!fenced_) {
      spdlog::warn(
          "job {}: its progress record is fenced ({}); the term is over, nothing more "
          "is deployed",
          job_.toHex(), result.error().message);
    }
    fenced_ = true;
    waitingDeployments_.clear();
  } else if (result.error().code == store::StoreErrorCode::kTooLarge) {
    // No put of this record can ever succeed (the store's limit shrank below what the job was
    // admitted with): the job fails now instead of waiting for a put forever.
    if (!tooLarge_) {
      spdlog::error("job {}: its progress record cannot be stored: {}; the job fails", job_.toHex(),
                    result.error().message);
    }
    tooLarge_ = true;
    waitingDeployments_.clear();
    listener_.recordTooLarge("its progress record cannot be stored: " + result.error().message);
  } else if (!closed_) {
    // kUnavailable is expected to pass; anything else is logged as an error, and tried again
    // the same way: the job deploys and acknowledges nothing until a put succeeds.
    const auto level = result.error().retryable() ? spdlog::level::warn : spdlog::level::err;
    if (!retry_) {
      retry_ = std::make_unique<ExponentialBackoff>(kFirstRetryDelay,
                                                    term_.options.heartbeatInterval);
    }
    const Duration delay = retry_->next();
    spdlog::log(level, "job {}: storing its progress record failed: {}; trying again in {}",
                job_.toHex(), result.error().message, formatDuration(delay));
    retryArmed_ = true;
    tasks_.add(term_.timer.afterDelay(delay.count() * kj::MILLISECONDS).then([this] {
      retryArmed_ = false;
      writeNow();  // The delayed put: not delayed again.
    }));
  }
  // Acknowledgements the settled put decided: stored, or failed (the worker delivers again).
  const bool stored = result.ok();
  for (auto it = waitingAcks_.begin(); it != waitingAcks_.end();) {
    if (fenced_ || tooLarge_ || it->version <= version) {
      it->fulfiller->fulfill(stored && it->version <= storedVersion_);
      it = waitingAcks_.erase(it);
    } else {
      ++it;
    }
  }
  KJ_IF_MAYBE (fulfiller, closing_) {
    (*fulfiller)->fulfill();
    closing_ = nullptr;
    return;
  }
  deployStoredOnes();
  write();
  listener_.putSettled();
}

void ProgressLog::deployWhenStored(const Deployment& deployment) {
  waitingDeployments_.push_back(WaitingDeployment{deployment, graph_.version()});
}

kj::Promise<bool> ProgressLog::stored() { return waitForPut(true); }

kj::Promise<bool> ProgressLog::storedSoon() { return waitForPut(false); }

kj::Promise<bool> ProgressLog::waitForPut(bool now) {
  if (closed_) return true;
  if (fenced_ || tooLarge_) return false;
  const uint64_t version = graph_.version();
  if (version <= storedVersion_) return true;
  // Callers that gave up (a delivery that timed out and comes again) leave nothing behind.
  std::erase_if(waitingAcks_, [](WaitingAck& ack) { return !ack.fulfiller->isWaiting(); });
  auto paf = kj::newPromiseAndFulfiller<bool>();
  waitingAcks_.push_back(WaitingAck{version, kj::mv(paf.fulfiller), now});
  write();
  return kj::mv(paf.promise);
}

bool ProgressLog::putWantedNow() {
  return nowWanted_ || lazyPutDelay().count() == 0 || !waitingDeployments_.empty() ||
         std::any_of(waitingAcks_.begin(), waitingAcks_.end(), [](WaitingAck& ack) {
           return ack.now && ack.fulfiller->isWaiting();
         });
}

void ProgressLog::armLazyPut() {
  if (lazyArmed_) return;
  lazyArmed_ = true;
  tasks_.add(term_.timer.afterDelay(lazyPutDelay().count() * kj::MILLISECONDS).then([this] {
    lazyArmed_ = false;
    writeNow();
  }));
}

std::vector<Deployment> ProgressLog::takeWaitingDeployments() {
  std::vector<Deployment> taken;
  taken.reserve(waitingDeployments_.size());
  for (const WaitingDeployment& waiting : waitingDeployments_) taken.push_back(waiting.deployment);
  waitingDeployments_.clear();
  return taken;
}

kj::Promise<void> ProgressLog::close() {
  closed_ = true;
  waitingDeployments_.clear();
  for (WaitingAck& ack : waitingAcks_) ack.fulfiller->fulfill(true);
  waitingAcks_.clear();
  if (!inFlight_) return kj::READY_NOW;
  auto paf = kj::newPromiseAndFulfiller<void>();
  closing_ = kj::mv(paf.fulfiller);
  return kj::mv(paf.promise);
}

bool ProgressLog::endStoredByResult() const {
  return graph_.ended() && graph_.end()->state == wire::JobState::FINISHED;
}

bool ProgressLog::behind() const {
  return !fenced_ && !tooLarge_ && graph_.version() > storedVersion_;
}

void ProgressLog::deployStoredOnes() {
  std::vector<Deployment> ready;
  for (auto it = waitingDeployments_.begin(); it != waitingDeployments_.end();) {
    if (it->version <= storedVersion_) {
      ready.push_back(it->deployment);
      it = waitingDeployments_.erase(it);
    } else {
      ++it;
    }
  }
  for (const Deployment& deployment : ready) listener_.deployStored(deployment);
}

}  // namespace regent::jobmaster

// The accept loop that survives running out of descriptors (see accept_loop.h).
#include "common/accept_loop.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace regent {
namespace {

kj::Duration toKj(Duration duration) { return duration.count() * kj::MILLISECONDS; }

// Connections accepted and closed with the reserve descriptor during one delay, at most.
constexpr uint kMaxShedPerDelay = 64;

bool mentions(const kj::Exception& exception, int error) {
  return strstr(exception.getDescription().cStr(), std::strerror(error)) != nullptr;
}

bool outOfDescriptors(AcceptFailure failure) {
  return failure == AcceptFailure::kProcessDescriptors ||
         failure == AcceptFailure::kSystemDescriptors;
}

const char* explainFailure(AcceptFailure failure) {
  switch (failure) {
    case AcceptFailure::kProcessDescriptors:
      return "out of file descriptors (the process's RLIMIT_NOFILE)";
    case AcceptFailure::kSystemDescriptors:
      return "out of file descriptors (the system's fs.file-max)";
    case AcceptFailure::kMemory:
      return "out of kernel memory";
    case AcceptFailure::kOther:
      break;
  }
  return "unexpected error";
}

}  // namespace

const char* acceptFailureLabel(AcceptFailure failure) {
  switch (failure) {
    case AcceptFailure::kProcessDescriptors:
      return "emfile";
    case AcceptFailure::kSystemDescriptors:
      return "enfile";
    case AcceptFailure::kMemory:
      return "memory";
    case AcceptFailure::kOther:
      break;
  }
  return "other";
}

AcceptFailure classifyAcceptFailure(const kj::Exception& exception) {
  // strerror(ENFILE), "Too many open files in system", contains strerror(EMFILE): test it first.
  if (mentions(exception, ENFILE)) return AcceptFailure::kSystemDescriptors;
  if (mentions(exception, EMFILE)) return AcceptFailure::kProcessDescriptors;
  if (mentions(exception, ENOBUFS) || mentions(exception, ENOMEM)) return AcceptFailure::kMemory;
  return AcceptFailure::kOther;
}

AcceptLoop::AcceptLoop(kj::Timer& timer, kj::ConnectionReceiver& receiver, Options options,
                       Handler handler)
    : timer_(timer), receiver_(receiver), options_(std::move(options)), handler_(kj::mv(handler)) {
  openReserve();
  accepting_ = accept().eagerlyEvaluate([this](kj::Exception&& exception) {
    // Not reached: every failure is caught below. Say so loudly if it ever is.
    spdlog::error("{}: the accept loop on {} ended: {}", options_.name, options_.address,
                  exception.getDescription().cStr());
  });
}

AcceptLoop::~AcceptLoop() noexcept {
  if (reserve_ >= 0) ::close(reserve_);
}

kj::Promise<void> AcceptLoop::accept() {
  // kj's accept() calls accept4 at once and throws when it fails: catch that here, as a failure
  // like the asynchronous ones.
  kj::Promise<kj::AuthenticatedStream> next = nullptr;
  KJ_IF_MAYBE (problem,
               kj::runCatchingExceptions([&] { next = receiver_.acceptAuthenticated(); })) {
    return failed(kj::mv(*problem));
  }
  // accept4 did not fail: it found a connection, or an empty backlog to wait on. Either way
  // descriptors were there.
  succeeded();
  return next.then(
      [this](kj::AuthenticatedStream&& accepted) -> kj::Promise<void> {
        KJ_IF_MAYBE (problem, kj::runCatchingExceptions([&] { handler_(kj::mv(accepted)); })) {
          spdlog::error("{}: serving a connection accepted on {} failed: {}", options_.name,
                        options_.address, problem->getDescription().cStr());
        }
        return accept();
      },
      [this](kj::Exception&& exception) { return failed(kj::mv(exception)); });
}

kj::Promise<void> AcceptLoop::failed(kj::Exception&& exception) {
  const AcceptFailure reason = classifyAcceptFailure(exception);
  ++failures_[static_cast<int>(reason)];
  lastError_ = exception.getDescription().cStr();
  ++consecutive_;
  const Duration delay =
      std::min(options_.maxBackoff,
               options_.initialBackoff * (int64_t{1} << std::min<uint32_t>(consecutive_ - 1, 20)));
  if (!failingSince_) {
    failingSince_ = timer_.now();
    spdlog::warn(
        "{}: cannot accept connections on {}: {} ({}); still listening: retrying with a "
        "backoff of up to {}ms{}; further failures are summed up every {}ms",
        options_.name, options_.address, lastError_, explainFailure(reason),
        options_.maxBackoff.count(),
        outOfDescriptors(reason) ? ", closing waiting connections meanwhile" : "",
        options_.warnInterval.count());
    summaries_ = summarize().eagerlyEvaluate(nullptr);
    KJ_IF_MAYBE (hook, onFailingChanged_) (*hook)(true);
  } else {
    ++unreported_;
  }

  kj::Promise<void> wait = timer_.afterDelay(toKj(delay));
  if (outOfDescriptors(reason) && reserve_ >= 0) {
    // Lend the reserve descriptor to accept() for the delay: connections waiting in the backlog
    // are closed at once rather than left hanging until their clients give up.
    ::close(reserve_);
    reserve_ = -1;
    if (!shedding_) {
      shedding_ = true;
      shedder_ = shedWaiting(kMaxShedPerDelay)
                     .then([this] { shedding_ = false; })
                     .eagerlyEvaluate(nullptr);
    }
    // Ends the delay early once descriptors are back (shedWaiting served a connection).
    auto back = kj::newPromiseAndFulfiller<void>();
    backEarly_ = kj::mv(back.fulfiller);
    wait = back.promise.exclusiveJoin(kj::mv(wait));
  }
  return wait.then([this] {
    openReserve();
    return accept();
  });
}

void AcceptLoop::succeeded() {
  consecutive_ = 0;
  if (!failingSince_) return;
  const auto failingFor = (timer_.now() - *failingSince_) / kj::MILLISECONDS;
  uint64_t total = 0;
  for (uint64_t count : failures_) total += count;
  spdlog::info(
      "{}: accepting connections on {} again after {}ms of failures ({} failed accept(s) "
      "and {} connection(s) closed unserved since start)",
      options_.name, options_.address, failingFor, total, shed_);
  failingSince_ = std::nullopt;
  unreported_ = 0;
  summaries_ = kj::READY_NOW;
  KJ_IF_MAYBE (hook, onFailingChanged_) (*hook)(false);
}

kj::Promise<void> AcceptLoop::shedWaiting(uint remaining) {
  if (remaining == 0) return kj::READY_NOW;
  kj::Promise<kj::AuthenticatedStream> next = nullptr;
  KJ_IF_MAYBE (problem,
               kj::runCatchingExceptions([&] { next = receiver_.acceptAuthenticated(); })) {
    return kj::READY_NOW;  // Still none to spare (another part of the process took it).
  }
  return next.then(
      [this, remaining](kj::AuthenticatedStream&& accepted) -> kj::Promise<void> {
        // Another descriptor free besides the one this connection took: they are back, so it is
        // served rather than shed, and accepting goes on at once.
        openReserve();
        if (reserve_ >= 0) {
          KJ_IF_MAYBE (problem, kj::runCatchingExceptions([&] { handler_(kj::mv(accepted)); })) {
            spdlog::error("{}: serving a connection accepted on {} failed: {}", options_.name,
                          options_.address, problem->getDescription().cStr());
          }
          if (backEarly_ && backEarly_->isWaiting()) backEarly_->fulfill();
          return kj::READY_NOW;
        }
        accepted.stream = nullptr;  // Closed unserved: its client sees the connection end.
        ++shed_;
        return shedWaiting(remaining - 1);
      },
      [](kj::Exception&&) -> kj::Promise<void> { return kj::READY_NOW; });
}

void AcceptLoop::openReserve() {
  if (reserve_ >= 0) return;
  reserve_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // -1 while none is free: tried again.
}

kj::Promise<void> AcceptLoop::summarize() {
  return timer_.afterDelay(toKj(options_.warnInterval)).then([this]() -> kj::Promise<void> {
    if (!failingSince_) return kj::READY_NOW;
    if (unreported_ > 0) {
      spdlog::warn(
          "{}: {} more failed accept(s) on {} in the last {}ms ({} connection(s) closed "
          "unserved since start): {}",
          options_.name, unreported_, options_.address, options_.warnInterval.count(), shed_,
          lastError_);
      unreported_ = 0;
    }
    return summarize();
  });
}

}  // namespace regent

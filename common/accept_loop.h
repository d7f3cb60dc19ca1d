// Accepting connections on a listening socket for as long as it lives, whatever accept() says:
// out of descriptors (EMFILE, ENFILE) or memory (ENOBUFS, ENOMEM), the loop counts, warns, backs
// off on the loop's timer and accepts again. Shared by the RPC listener and the HTTP servers.
#pragma once

#include <kj/async-io.h>
#include <kj/function.h>
#include <kj/timer.h>

#include <cstdint>
#include <optional>
#include <string>

#include "common/time.h"

namespace regent {

// Why accept() failed, as counted and logged ("reason" label of the accept-failure metrics).
enum class AcceptFailure { kProcessDescriptors, kSystemDescriptors, kMemory, kOther };
inline constexpr AcceptFailure kAcceptFailures[] = {AcceptFailure::kProcessDescriptors,
                                                    AcceptFailure::kSystemDescriptors,
                                                    AcceptFailure::kMemory, AcceptFailure::kOther};
// "emfile", "enfile", "memory" (ENOBUFS, ENOMEM), "other".
const char* acceptFailureLabel(AcceptFailure failure);
// What kj's exception from accept() says: KJ_FAIL_SYSCALL("accept", errno) describes the error
// with strerror().
AcceptFailure classifyAcceptFailure(const kj::Exception& exception);

// Accepts from `receiver` and hands every connection to `handler`, until destroyed.
//
// kj's ConnectionReceiver::accept() throws (synchronously, from accept4) when the process is out
// of descriptors; a loop that calls it from a continuation without catching that dies silently.
// This one treats every failure alike: it counts it by reason, logs a warning (the first of a
// run of failures at once, then one summary per `warnInterval` while they go on) and tries again
// after a delay that starts at `initialBackoff` and doubles up to `maxBackoff`. Out of
// descriptors, it closes its reserve descriptor (/dev/null, opened at construction) during the
// delay and accepts-and-closes what waits in the backlog with it (at most 64 connections per
// delay), so that clients queued behind the exhaustion are told at once instead of hanging, then
// reopens it; a connection accepted so while another descriptor is free again is served, and
// ends the delay. The first accept that succeeds, or that finds the backlog empty, ends the run of
// failures: logged, with how many there were and for how long.
//
// Thread-safety: loop-thread only. `timer` and `receiver` must outlive it; destroying it stops
// accepting (the handler is not called again).
class AcceptLoop final {
 public:
  using Handler = kj::Function<void(kj::AuthenticatedStream&&)>;

  struct Options {
    std::string name;     // "rpc" or "http": starts every log line.
    std::string address;  // The listen address, for the log.
    Duration initialBackoff{10};
    Duration maxBackoff{1000};
    Duration warnInterval{10000};
  };

  AcceptLoop(kj::Timer& timer, kj::ConnectionReceiver& receiver, Options options, Handler handler);
  ~AcceptLoop() noexcept;
  AcceptLoop(const AcceptLoop&) = delete;
  AcceptLoop& operator=(const AcceptLoop&) = delete;

  // Failed accepts since construction, by reason.
  uint64_t failures(AcceptFailure reason) const { return failures_[static_cast<int>(reason)]; }
  // Connections accepted and closed at once with the reserve descriptor, since construction.
  uint64_t shed() const { return shed_; }
  // Since when accepting has failed without a success in between; nullopt while it works.
  std::optional<kj::TimePoint> failingSince() const { return failingSince_; }
  // Called (on the loop) when a run of failures starts (true) and when it ends (false). Replaces
  // the previous hook.
  void onFailingChanged(kj::Function<void(bool failing)> hook) { onFailingChanged_ = kj::mv(hook); }

 private:
  kj::Promise<void> accept();
  kj::Promise<void> failed(kj::Exception&& exception);
  void succeeded();
  // With the reserve descriptor lent to accept(): accepts and closes up to `remaining` waiting
  // connections, each as it comes; the first that finds descriptors free again is served and
  // ends the delay early (backEarly_). It runs as shedder_, apart from the delay, and is never
  // cancelled while it waits for a connection: a connection the kernel has handed over is always
  // served or shed, never dropped with a cancelled promise.
  kj::Promise<void> shedWaiting(uint remaining);
  void openReserve();
  kj::Promise<void> summarize();

  kj::Timer& timer_;
  kj::ConnectionReceiver& receiver_;
  const Options options_;
  Handler handler_;
  int reserve_ = -1;
  uint64_t failures_[4] = {};
  uint64_t shed_ = 0;
  uint32_t consecutive_ = 0;  // Failures in the current run.
  uint64_t unreported_ = 0;   // Of those, not yet in a log line.
  std::string lastError_;
  std::optional<kj::TimePoint> failingSince_;
  kj::Maybe<kj::Function<void(bool)>> onFailingChanged_;
  kj::Promise<void> summaries_ = kj::READY_NOW;
  kj::Own<kj::PromiseFulfiller<void>> backEarly_;  // Ends the current delay; may be stale.
  bool shedding_ = false;                          // shedder_ waits for a connection.
  kj::Promise<void> shedder_ = kj::READY_NOW;
  kj::Promise<void> accepting_ = nullptr;  // Last: it uses everything above.
};

}  // namespace regent

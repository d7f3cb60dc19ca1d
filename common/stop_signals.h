// The signals a regent process answers, watched once for every process: SIGTERM, SIGINT and
// SIGQUIT stop it, SIGHUP is logged and ignored (no process reloads its configuration).
#pragma once

#include <kj/function.h>

#include <string>

#include "common/event_loop.h"

namespace regent {

// "SIGTERM", "SIGINT", "SIGQUIT", or "signal" for any other number: for log lines.
const char* stopSignalName(int signum);

// Blocks SIGTERM, SIGINT, SIGQUIT and SIGHUP in the calling thread and the threads it starts
// later. A process calls it first thing in main: a stop signal that comes before its StopSignals
// exists then waits for it (and is handled as any other), instead of killing the process by the
// default action. StopSignals unblocks them once it watches them.
void holdStopSignals();

// Watches the four signals for as long as it exists; destroy it to stop watching. `onStop` runs
// on the loop thread with the signal's number once per delivery of a stop signal (deliveries may
// coalesce), so a second stop signal calls it again. A SIGHUP logs `sighupMessage` at info level.
// `loop` must outlive this object.
class StopSignals final {
 public:
  StopSignals(EventLoop& loop, kj::Function<void(int signum)> onStop, std::string sighupMessage);
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  kj::Function<void(int signum)> onStop_;  // Declared first: the watchers call it.
  const std::string sighupMessage_;
  SignalWatcher sigterm_;
  SignalWatcher sigint_;
  SignalWatcher sigquit_;
  SignalWatcher sighup_;
};

}  // namespace regent

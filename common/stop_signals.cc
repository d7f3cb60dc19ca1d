// The stop signals every regent process watches (see stop_signals.h).
#include "common/stop_signals.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <utility>

namespace regent {

namespace {

sigset_t watchedSignals() {
  sigset_t set;
  ::sigemptyset(&set);
  for (int signum : {SIGTERM, SIGINT, SIGQUIT, SIGHUP}) ::sigaddset(&set, signum);
  return set;
}

}  // namespace

void holdStopSignals() {
  const sigset_t set = watchedSignals();
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

const char* stopSignalName(int signum) {
  switch (signum) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    default: return "signal";
  }
}

StopSignals::StopSignals(EventLoop& loop, kj::Function<void(int signum)> onStop,
                         std::string sighupMessage)
    : onStop_(kj::mv(onStop)),
      sighupMessage_(std::move(sighupMessage)),
      sigterm_(loop, SIGTERM, [this]() { onStop_(SIGTERM); }),
      sigint_(loop, SIGINT, [this]() { onStop_(SIGINT); }),
      sigquit_(loop, SIGQUIT, [this]() { onStop_(SIGQUIT); }),
      sighup_(loop, SIGHUP, [this]() { spdlog::info("{}", sighupMessage_); }) {
  // Watched now: one held since holdStopSignals() is delivered to the watchers.
  const sigset_t set = watchedSignals();
  ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

}  // namespace regent

// Clock readings (see time.h).
#include "common/time.h"

#include <kj/timer.h>

#include <cstdio>
#include <ctime>

namespace regent {

int64_t wallClockMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string formatUtcMillis(int64_t unixMillis) {
  int64_t seconds = unixMillis / 1000;
  int64_t millis = unixMillis % 1000;
  if (millis < 0) {
    millis += 1000;
    seconds -= 1;
  }
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char text[40];
  const size_t n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(text + n, sizeof text - n, ".%03dZ", static_cast<int>(millis));
  return text;
}

std::string timeOrDash(int64_t unixMillis) {
  return unixMillis == 0 ? "-" : formatUtcMillis(unixMillis);
}

int64_t monotonicMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

MonoTime monoNow(const kj::Timer& timer) {
  const int64_t nanos = (timer.now() - kj::origin<kj::TimePoint>()) / kj::NANOSECONDS;
  return MonoTime(std::chrono::duration_cast<MonoTime::duration>(std::chrono::nanoseconds(nanos)));
}

}  // namespace regent

// A process's events as a JSON-lines file, one object per line, for tests and tools to read
// instead of parsing logs (events.file, docs/operations.md):
//   {"event":"job state","fields":{"epoch":3,"job":"ab..","state":"RUNNING","restarts":0},
//    "mono_us":123,"wall_ms":456}
// (on one line). Fields keep their order and type: whole numbers are JSON numbers, everything else
// a JSON string (invalid UTF-8 replaced by U+FFFD). The file is appended to, never truncated.
#pragma once

#include <kj/memory.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/event_sink.h"
#include "common/result.h"

namespace regent {

class JsonLinesFileEventSink final : public EventSink {
 public:
  // Opens (creating it, mode 0640) `path` for appending; an error names the path and why.
  // Blocking: call before the loop runs.
  static Result<kj::Own<JsonLinesFileEventSink>> open(const std::string& path);
  ~JsonLinesFileEventSink() noexcept override;

  // Appends the event's line with one write(2) of the whole line, unbuffered. That write lands in
  // the page cache and does not wait for the disk, as the log sink's line to the same process's
  // stdout does, so the loop thread pays what it already pays per log line; and a reader, or a
  // process killed right after, sees every event emitted before. A failed write is logged once
  // (warn) and counted; the event still reaches the other sinks.
  void emit(const Event& event) override;

  const std::string& path() const { return path_; }
  uint64_t writeFailures() const { return writeFailures_; }

  JsonLinesFileEventSink(int fd, std::string path);  // Use open().

 private:
  const int fd_;
  const std::string path_;
  uint64_t writeFailures_ = 0;
};

// The JSON line of `event`, without the newline.
std::string jsonLine(const Event& event);
// Reads one line of such a file back (level: kInfo); nullopt when it is not one: not JSON, a
// partial line, a field neither a string nor a whole number.
std::optional<Event> parseJsonLine(std::string_view line);

}  // namespace regent

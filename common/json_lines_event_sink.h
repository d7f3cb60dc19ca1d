// A process's events as a JSON-lines file, one object per line, for tests and tools to read
// instead of parsing logs (events.file, docs/operations.md):
//   {"process":"master","pid":4242,"event":"job state",
//    "fields":{"epoch":3,"job":"ab..","state":"RUNNING","restarts":0},"mono_us":123,"wall_ms":456}
// (on one line; "process" and "pid" tell apart the processes that share one file). Fields keep their order and type: whole numbers are JSON numbers, everything else
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

// Who wrote an event line: "master" or "worker", and its process id.
struct EventOrigin {
  std::string process;  // Empty: the line says nothing of its writer.
  int64_t pid = 0;
};

class JsonLinesFileEventSink final : public EventSink {
 public:
  // Opens (creating it, mode 0640) `path` for appending, each line saying `origin`. The path must
  // name a regular file, not a symbolic link, a FIFO or a device (a FIFO would block the opening,
  // and later the loop thread's writes); an error names the path and why. Opening never waits
  // for a reader. Blocking on the file system: call before the loop runs.
  static Result<kj::Own<JsonLinesFileEventSink>> open(const std::string& path,
                                                      EventOrigin origin);
  ~JsonLinesFileEventSink() noexcept override;

  // Appends the event's line with one write(2) of the whole line, unbuffered. That write lands in
  // the page cache and does not wait for the disk, as the log sink's line to the same process's
  // stdout does, so the loop thread pays what it already pays per log line; and a reader, or a
  // process killed right after, sees every event emitted before. A failed write is counted and
  // the event still reaches the other sinks; the first failure of a run of them is a warning and
  // the first success after it says how many events the file misses. A line cut short by a
  // failure is ended before the next one, so it cannot swallow the next event.
  void emit(const Event& event) override;

  const std::string& path() const { return path_; }
  uint64_t writeFailures() const { return writeFailures_; }

  // Use open(); tests hand it a descriptor open() refuses (/dev/full).
  JsonLinesFileEventSink(int fd, std::string path, EventOrigin origin);

 private:
  // Writes all of `text`; false (errno set) when a write fails or writes nothing.
  bool writeAll(const std::string& text);

  const int fd_;
  const std::string path_;
  const EventOrigin origin_;
  uint64_t writeFailures_ = 0;
  uint64_t failedInARow_ = 0;  // Since the last write that succeeded.
  bool midLine_ = false;       // A failed write left a line without its newline.
};

// The JSON line of `event`, without the newline; with "process" and "pid" first when `origin`
// names a process.
std::string jsonLine(const Event& event, const EventOrigin& origin = {});
// Reads one line of such a file back (level: kInfo); nullopt when it is not one: not JSON, a
// partial line, a field neither a string nor a whole number.
std::optional<Event> parseJsonLine(std::string_view line);

}  // namespace regent

// JsonLinesFileEventSink and its line format (see json_lines_event_sink.h).
#include "common/json_lines_event_sink.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/errno_text.h"

namespace regent {

Result<kj::Own<JsonLinesFileEventSink>> JsonLinesFileEventSink::open(const std::string& path,
                                                                     EventOrigin origin) {
  // O_NONBLOCK: opening a FIFO for writing would wait for a reader, before the stop signals are
  // watched. O_NOFOLLOW: a link planted where the file should be is not followed.
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
             0640);
  if (fd < 0) {
    const int error = errno;
    if (error == ELOOP) {
      return Error::fatal("cannot use the events file " + path +
                          ": it is a symbolic link; name the file itself");
    }
    if (error == ENXIO) {  // A FIFO with no reader, or a device with nothing behind it.
      return Error::fatal("cannot use the events file " + path +
                          ": it is not a regular file (a FIFO or a device); name a regular file");
    }
    return Error::fatal("cannot open the events file " + path + ": " + errnoText(error));
  }
  struct stat status {};
  if (::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) {
    ::close(fd);
    return Error::fatal("cannot use the events file " + path +
                        ": it is not a regular file (a FIFO or a device); name a regular file");
  }
  // Back to blocking writes: a regular file's writes never wait for a reader.
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    const int error = errno;
    ::close(fd);
    return Error::fatal("cannot use the events file " + path + ": " + errnoText(error));
  }
  return kj::heap<JsonLinesFileEventSink>(fd, path, std::move(origin));
}

JsonLinesFileEventSink::JsonLinesFileEventSink(int fd, std::string path, EventOrigin origin)
    : fd_(fd), path_(std::move(path)), origin_(std::move(origin)) {}

JsonLinesFileEventSink::~JsonLinesFileEventSink() noexcept { ::close(fd_); }

bool JsonLinesFileEventSink::writeAll(const std::string& text) {
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd_, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      midLine_ = midLine_ || written > 0;
      return false;
    }
    written += static_cast<size_t>(n);
  }
  return true;
}

void JsonLinesFileEventSink::emit(const Event& event) {
  // After a line cut short, a newline first: the cut line stays unreadable, this one does not.
  const std::string line = (midLine_ ? "\n" : "") + jsonLine(event, origin_) + "\n";
  const bool wasMidLine = midLine_;
  midLine_ = false;
  if (!writeAll(line)) {
    midLine_ = midLine_ || wasMidLine;
    ++writeFailures_;
    if (failedInARow_++ == 0) {
      spdlog::warn(
          "cannot write to the events file {}: {}; the event is missing from it (the log has "
          "it), and so is every event until a write succeeds again",
          path_, errnoText(errno));
    }
    return;
  }
  if (failedInARow_ > 0) {
    spdlog::warn("the events file {} is written again; it misses the {} events before this one",
                 path_, failedInARow_);
    failedInARow_ = 0;
  }
}

std::string jsonLine(const Event& event, const EventOrigin& origin) {
  nlohmann::ordered_json fields = nlohmann::ordered_json::object();
  for (const Event::Field& field : event.fields()) {
    std::visit([&](const auto& value) { fields[field.key] = value; }, field.value);
  }
  nlohmann::ordered_json object;
  if (!origin.process.empty()) {
    object["process"] = origin.process;
    object["pid"] = origin.pid;
  }
  object["event"] = event.name();
  object["fields"] = std::move(fields);
  object["mono_us"] = event.monoUs();
  object["wall_ms"] = event.wallMs();
  return object.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::optional<Event> parseJsonLine(std::string_view line) {
  auto object = nlohmann::ordered_json::parse(line, nullptr, false);
  if (object.is_discarded() || !object.is_object()) return std::nullopt;
  const auto name = object.find("event");
  const auto fields = object.find("fields");
  const auto mono = object.find("mono_us");
  const auto wall = object.find("wall_ms");
  if (name == object.end() || !name->is_string() || fields == object.end() ||
      !fields->is_object() || mono == object.end() || !mono->is_number_integer() ||
      wall == object.end() || !wall->is_number_integer()) {
    return std::nullopt;
  }
  Event event(name->get<std::string>());
  event.at(mono->get<int64_t>(), wall->get<int64_t>());
  for (const auto& [key, value] : fields->items()) {
    if (value.is_string()) {
      event.field(key, value.get<std::string>());
    } else if (value.is_number_unsigned()) {
      event.field(key, value.get<uint64_t>());
    } else if (value.is_number_integer()) {
      event.field(key, value.get<int64_t>());
    } else {
      return std::nullopt;
    }
  }
  return event;
}

}  // namespace regent

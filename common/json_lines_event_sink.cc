// JsonLinesFileEventSink and its line format (see json_lines_event_sink.h).
#include "common/json_lines_event_sink.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/errno_text.h"

namespace regent {

Result<kj::Own<JsonLinesFileEventSink>> JsonLinesFileEventSink::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) {
    return Error::fatal("cannot open the events file " + path + ": " + errnoText(errno));
  }
  return kj::heap<JsonLinesFileEventSink>(fd, path);
}

JsonLinesFileEventSink::JsonLinesFileEventSink(int fd, std::string path)
    : fd_(fd), path_(std::move(path)) {}

JsonLinesFileEventSink::~JsonLinesFileEventSink() noexcept { ::close(fd_); }

void JsonLinesFileEventSink::emit(const Event& event) {
  const std::string line = jsonLine(event) + "\n";
  size_t written = 0;
  while (written < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + written, line.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (writeFailures_++ == 0) {
        spdlog::warn(
            "cannot write to the events file {}: {}; its events are missing from it "
            "from now on (the log still has them)",
            path_, n < 0 ? errnoText(errno) : std::string("nothing written"));
      }
      return;
    }
    written += static_cast<size_t>(n);
  }
}

std::string jsonLine(const Event& event) {
  nlohmann::ordered_json fields = nlohmann::ordered_json::object();
  for (const Event::Field& field : event.fields()) {
    std::visit([&](const auto& value) { fields[field.key] = value; }, field.value);
  }
  nlohmann::ordered_json object;
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

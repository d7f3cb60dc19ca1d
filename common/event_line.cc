// Event lines: formatting and parsing (see event_line.h).
#include "common/event_line.h"

#include <algorithm>
#include <charconv>

namespace regent {
namespace {

bool needsQuotes(std::string_view value) {
  return value.empty() || value.find_first_of(" =\"\n\r\t") != std::string_view::npos;
}

template <typename Int>
std::optional<Int> parseDecimal(const std::optional<std::string>& text) {
  if (!text || text->empty()) return std::nullopt;
  Int value{};
  const char* end = text->data() + text->size();
  auto [ptr, error] = std::from_chars(text->data(), end, value);
  if (error != std::errc() || ptr != end) return std::nullopt;
  return value;
}

}  // namespace

std::string quotable(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c == '"') c = '\'';
    if (c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

EventLine& EventLine::field(std::string_view key, std::string_view value) {
  if (needsQuotes(value)) return quotedField(key, value);
  line_.append(" ").append(key).append("=").append(value);
  return *this;
}

EventLine& EventLine::field(std::string_view key, int64_t value) {
  line_.append(" ").append(key).append("=").append(std::to_string(value));
  return *this;
}

EventLine& EventLine::field(std::string_view key, uint64_t value) {
  line_.append(" ").append(key).append("=").append(std::to_string(value));
  return *this;
}

EventLine& EventLine::quotedField(std::string_view key, std::string_view value) {
  line_.append(" ").append(key).append("=\"").append(quotable(value)).append("\"");
  return *this;
}

std::optional<std::string> EventFields::get(std::string_view key) const {
  for (const auto& [name, value] : fields) {
    if (name == key) return value;
  }
  return std::nullopt;
}

std::optional<int64_t> EventFields::getInt(std::string_view key) const {
  return parseDecimal<int64_t>(get(key));
}

std::optional<uint64_t> EventFields::getUint(std::string_view key) const {
  return parseDecimal<uint64_t>(get(key));
}

std::optional<EventFields> parseEventLine(std::string_view line, std::string_view event) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  if (event.empty()) return std::nullopt;
  size_t at = 0;
  while (true) {
    at = line.find(event, at);
    if (at == std::string_view::npos) return std::nullopt;
    const size_t after = at + event.size();
    const bool startsWord = at == 0 || line[at - 1] == ' ';
    const bool endsWord = after == line.size() || line[after] == ' ';
    if (startsWord && endsWord) break;
    ++at;
  }
  EventFields parsed;
  size_t pos = at + event.size();
  while (pos < line.size()) {
    if (line[pos] == ' ') {
      ++pos;
      continue;
    }
    const size_t equals = line.find('=', pos);
    const size_t space = line.find(' ', pos);
    if (equals == std::string_view::npos || (space != std::string_view::npos && space < equals)) {
      return std::nullopt;
    }
    std::string key(line.substr(pos, equals - pos));
    pos = equals + 1;
    std::string value;
    if (pos < line.size() && line[pos] == '"') {
      const size_t close = line.find('"', pos + 1);
      if (close == std::string_view::npos) return std::nullopt;
      value = std::string(line.substr(pos + 1, close - pos - 1));
      pos = close + 1;
      if (pos < line.size() && line[pos] != ' ') return std::nullopt;
    } else {
      const size_t end = std::min(line.find(' ', pos), line.size());
      value = std::string(line.substr(pos, end - pos));
      pos = end;
    }
    parsed.fields.emplace_back(std::move(key), std::move(value));
  }
  return parsed;
}

}  // namespace regent

// Parsing and formatting of duration and size values (see units.h).
#include "common/units.h"

#include <array>
#include <charconv>
#include <limits>
#include <system_error>

namespace regent {
namespace {

constexpr std::string_view kDurationExpected = "expected a duration such as 500ms, 6s or 2m";
constexpr std::string_view kSizeExpected =
    "expected a size such as 4096, 64MiB or 1GiB (units B, KiB, MiB, GiB, TiB)";

struct Unit {
  std::string_view suffix;
  uint64_t factor;
};

// Largest first, so formatting picks the largest exact unit.
constexpr std::array<Unit, 4> kDurationUnits = {{
    {"h", 3'600'000},
    {"m", 60'000},
    {"s", 1'000},
    {"ms", 1},
}};

constexpr std::array<Unit, 5> kSizeUnits = {{
    {"TiB", uint64_t{1} << 40},
    {"GiB", uint64_t{1} << 30},
    {"MiB", uint64_t{1} << 20},
    {"KiB", uint64_t{1} << 10},
    {"B", 1},
}};

std::string_view trim(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n";
  const auto first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(kSpace) - first + 1);
}

struct NumberAndUnit {
  uint64_t number = 0;
  std::string_view unit;
};

// Splits "<digits><unit>". Fails with a message completing "expected ..." .
Result<NumberAndUnit> splitNumberAndUnit(std::string_view text, std::string_view expected,
                                         std::string_view what) {
  text = trim(text);
  if (text.empty()) return Error::fatal(std::string(expected) + ", got an empty value");
  if (text.front() == '-') {
    return Error::fatal(std::string(expected) + " (a " + std::string(what) +
                        " cannot be negative)");
  }
  NumberAndUnit result;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  const auto [rest, ec] = std::from_chars(begin, end, result.number);
  if (ec == std::errc::result_out_of_range) {
    return Error::fatal(std::string(expected) + " (the number is too large)");
  }
  if (ec != std::errc() || rest == begin) return Error::fatal(std::string(expected));
  result.unit = std::string_view(rest, static_cast<size_t>(end - rest));
  return result;
}

template <size_t N>
Result<uint64_t> applyUnit(const NumberAndUnit& parsed, const std::array<Unit, N>& units,
                           std::string_view expected) {
  for (const Unit& unit : units) {
    if (unit.suffix != parsed.unit) continue;
    if (parsed.number > std::numeric_limits<uint64_t>::max() / unit.factor) {
      return Error::fatal(std::string(expected) + " (the value is too large)");
    }
    return parsed.number * unit.factor;
  }
  return Error::fatal(std::string(expected) + " (unknown unit \"" + std::string(parsed.unit) +
                      "\")");
}

template <size_t N>
std::string formatWithUnits(uint64_t value, const std::array<Unit, N>& units) {
  for (const Unit& unit : units) {
    if (value % unit.factor == 0) {
      return std::to_string(value / unit.factor) + std::string(unit.suffix);
    }
  }
  return std::to_string(value);  // unreachable: the last unit has factor 1
}

}  // namespace

Result<Duration> parseDuration(std::string_view text) {
  auto parsed = splitNumberAndUnit(text, kDurationExpected, "duration");
  if (!parsed) return parsed.error();
  if (parsed.value().unit.empty()) {
    if (parsed.value().number == 0) return Duration::zero();
    return Error::fatal(std::string(kDurationExpected) + " (a number needs a unit: ms, s, m or h)");
  }
  auto millis = applyUnit(parsed.value(), kDurationUnits, kDurationExpected);
  if (!millis) return millis.error();
  if (millis.value() > static_cast<uint64_t>(std::numeric_limits<Duration::rep>::max())) {
    return Error::fatal(std::string(kDurationExpected) + " (the value is too large)");
  }
  return Duration(static_cast<Duration::rep>(millis.value()));
}

Result<uint64_t> parseSize(std::string_view text) {
  auto parsed = splitNumberAndUnit(text, kSizeExpected, "size");
  if (!parsed) return parsed.error();
  if (parsed.value().unit.empty()) return parsed.value().number;
  return applyUnit(parsed.value(), kSizeUnits, kSizeExpected);
}

std::string formatDuration(Duration duration) {
  const Duration::rep count = duration.count();
  if (count == 0) return "0s";
  // Unsigned negation keeps the most negative value defined.
  const uint64_t magnitude =
      count < 0 ? uint64_t{0} - static_cast<uint64_t>(count) : static_cast<uint64_t>(count);
  std::string text = formatWithUnits(magnitude, kDurationUnits);
  if (count < 0) text.insert(text.begin(), '-');
  return text;
}

std::string formatSize(uint64_t bytes) {
  if (bytes == 0) return "0B";
  return formatWithUnits(bytes, kSizeUnits);
}

}  // namespace regent

// UTF-8 checks and repairs (see utf8.h).
#include "common/utf8.h"

#include <cctype>
#include <cstdint>

namespace regent {
namespace {

constexpr std::string_view kReplacement = "\xef\xbf\xbd";  // U+FFFD
constexpr char kHex[] = "0123456789abcdef";

}  // namespace

Utf8Step decodeUtf8At(std::string_view text, size_t offset) {
  const auto lead = static_cast<uint8_t>(text[offset]);
  if (lead < 0x80) return {true, 1, lead};
  size_t length = 0;
  uint8_t secondLow = 0x80;
  uint8_t secondHigh = 0xbf;
  char32_t codePoint = 0;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
    codePoint = lead & 0x1f;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    codePoint = lead & 0x0f;
    if (lead == 0xe0) secondLow = 0xa0;   // overlong
    if (lead == 0xed) secondHigh = 0x9f;  // surrogates
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    codePoint = lead & 0x07;
    if (lead == 0xf0) secondLow = 0x90;   // overlong
    if (lead == 0xf4) secondHigh = 0x8f;  // above U+10FFFF
  } else {
    return {};  // a continuation byte, C0, C1 or F5..FF
  }
  for (size_t k = 1; k < length; ++k) {
    if (offset + k >= text.size()) return {false, k, 0};
    const auto byte = static_cast<uint8_t>(text[offset + k]);
    const uint8_t low = k == 1 ? secondLow : 0x80;
    const uint8_t high = k == 1 ? secondHigh : 0xbf;
    if (byte < low || byte > high) return {false, k, 0};
    codePoint = (codePoint << 6) | (byte & 0x3f);
  }
  return {true, length, codePoint};
}

std::optional<size_t> firstInvalidUtf8(std::string_view text) {
  for (size_t offset = 0; offset < text.size();) {
    const Utf8Step step = decodeUtf8At(text, offset);
    if (!step.valid) return offset;
    offset += step.length;
  }
  return std::nullopt;
}

std::string truncateUtf8(std::string_view text, size_t maxBytes) {
  if (text.size() <= maxBytes) return std::string(text);
  static constexpr std::string_view kEllipsis = "\u2026";
  const size_t budget = maxBytes > kEllipsis.size() ? maxBytes - kEllipsis.size() : 0;
  size_t end = 0;
  while (end < text.size()) {
    const Utf8Step step = decodeUtf8At(text, end);
    const size_t length = step.valid ? step.length : 1;
    if (end + length > budget) break;
    end += length;
  }
  std::string out(text.substr(0, end));
  if (maxBytes >= kEllipsis.size()) out += kEllipsis;
  return out;
}

std::string sanitizeUtf8(std::string_view text) {
  if (isValidUtf8(text)) return std::string(text);
  std::string out;
  out.reserve(text.size() + 8);
  for (size_t offset = 0; offset < text.size();) {
    const Utf8Step step = decodeUtf8At(text, offset);
    if (step.valid) {
      out.append(text.substr(offset, step.length));
    } else {
      out.append(kReplacement);
    }
    offset += step.length;
  }
  return out;
}

bool isUnsafeInName(char32_t codePoint) {
  return codePoint < 0x20 || (codePoint >= 0x7f && codePoint <= 0x9f) ||
         (codePoint >= 0x202a && codePoint <= 0x202e) ||
         (codePoint >= 0x2066 && codePoint <= 0x2069);
}

std::optional<CodePointAt> firstUnsafeInName(std::string_view text) {
  for (size_t offset = 0; offset < text.size();) {
    const Utf8Step step = decodeUtf8At(text, offset);
    if (step.valid && isUnsafeInName(step.codePoint)) {
      return CodePointAt{offset, step.codePoint};
    }
    offset += step.length;
  }
  return std::nullopt;
}

std::string formatCodePoint(char32_t codePoint) {
  std::string digits;
  for (char32_t rest = codePoint; rest != 0 || digits.size() < 4; rest >>= 4) {
    digits.insert(digits.begin(), static_cast<char>(std::toupper(kHex[rest & 0xf])));
  }
  return "U+" + digits;
}

std::string printableUtf8(std::string_view text) {
  bool clean = true;
  for (size_t offset = 0; offset < text.size() && clean;) {
    const Utf8Step step = decodeUtf8At(text, offset);
    clean = step.valid && !isUnsafeInName(step.codePoint);
    offset += step.length;
  }
  if (clean) return std::string(text);
  std::string out;
  out.reserve(text.size() + 16);
  for (size_t offset = 0; offset < text.size();) {
    const Utf8Step step = decodeUtf8At(text, offset);
    if (!step.valid) {
      out.append(kReplacement);
    } else if (!isUnsafeInName(step.codePoint)) {
      out.append(text.substr(offset, step.length));
    } else if (step.codePoint < 0x100) {
      out += "\\x";
      out += kHex[step.codePoint >> 4];
      out += kHex[step.codePoint & 0xf];
    } else {
      std::string hex = formatCodePoint(step.codePoint).substr(2);
      out += "\\u{" + hex + "}";
    }
    offset += step.length;
  }
  return out;
}

}  // namespace regent

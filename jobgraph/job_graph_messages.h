// How the JobGraph format's error messages show text a user supplied (names, values): shared by
// the parser and the validator so both quote alike.
#pragma once

#include <string>
#include <string_view>

#include "common/utf8.h"

namespace regent::jobgraph {

// `text` in double quotes, with quotes and backslashes escaped, control characters (C0, DEL,
// C1) and bytes that are not valid UTF-8 as \xNN, bidirectional overrides and isolates as
// \u{NNNN}, and anything past the first 60 bytes replaced by "...", so a message stays one
// readable line of valid UTF-8 that shows text in its stored order.
inline std::string quotedForMessage(std::string_view text) {
  constexpr size_t kShown = 60;
  constexpr char kHex[] = "0123456789abcdef";
  auto hexByte = [&](std::string& out, unsigned value) {
    out += "\\x";
    out += kHex[(value >> 4) & 0xf];
    out += kHex[value & 0xf];
  };
  std::string out = "\"";
  size_t offset = 0;
  while (offset < text.size() && offset < kShown) {
    const Utf8Step step = decodeUtf8At(text, offset);
    if (!step.valid) {
      for (size_t k = 0; k < step.length; ++k) {
        hexByte(out, static_cast<unsigned char>(text[offset + k]));
      }
    } else if (step.codePoint == '"' || step.codePoint == '\\') {
      out += '\\';
      out += static_cast<char>(step.codePoint);
    } else if (isUnsafeInName(step.codePoint)) {
      if (step.codePoint < 0x100) {
        hexByte(out, static_cast<unsigned>(step.codePoint));
      } else {
        out += "\\u{" + formatCodePoint(step.codePoint).substr(2) + "}";
      }
    } else {
      out.append(text.substr(offset, step.length));
    }
    offset += step.length;
  }
  if (offset < text.size()) out += "...";
  return out + "\"";
}

}  // namespace regent::jobgraph

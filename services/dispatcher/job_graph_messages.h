// How the JobGraph format's error messages show text a user supplied (names, values): shared by
// the parser and the validator so both quote alike.
#pragma once

#include <string>
#include <string_view>

namespace regent::dispatcher {

// `text` in double quotes, with quotes and backslashes escaped, control characters as \xNN and
// anything past the first 60 bytes replaced by "...", so a message stays one readable line.
inline std::string quotedForMessage(std::string_view text) {
  constexpr size_t kShown = 60;
  constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (size_t i = 0; i < text.size() && i < kShown; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > kShown) out += "...";
  return out + "\"";
}

}  // namespace regent::dispatcher

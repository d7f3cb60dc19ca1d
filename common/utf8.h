// UTF-8 checks and repairs for text that crosses a trust boundary: the JobGraph validator refuses
// what these find, and every writer of JSON or terminal text passes stored text through them, so
// one bad record already stored cannot break a listing.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace regent {

// Where the first invalid UTF-8 sequence of `text` starts (a byte offset), or nullopt when all
// of `text` is valid UTF-8. Strict (RFC 3629): no overlong forms, no surrogates (U+D800..DFFF),
// nothing above U+10FFFF, no truncated sequence at the end.
std::optional<size_t> firstInvalidUtf8(std::string_view text);
inline bool isValidUtf8(std::string_view text) { return !firstInvalidUtf8(text).has_value(); }

// `text` with each maximal invalid subsequence (as the Unicode standard counts them, the way
// browsers and nlohmann::json's "replace" do) replaced by U+FFFD; valid text is returned as is.
std::string sanitizeUtf8(std::string_view text);

// At most `maxBytes` bytes of `text`, cut at a code point boundary (a multi-byte character is
// never split), with "…" (3 bytes, counted in maxBytes) appended when something was cut.
// Invalid bytes count as one byte each and are kept as they are. For messages from outside that
// must stay bounded (a worker's failure message).
std::string truncateUtf8(std::string_view text, size_t maxBytes);

// One step of decoding `text` at byte `offset` (< text.size()): when `valid`, the code point
// there and its length in bytes; otherwise `length` is the length of the maximal invalid
// subpart there (at least 1) and `codePoint` is 0.
struct Utf8Step {
  bool valid = false;
  size_t length = 1;
  char32_t codePoint = 0;
};
Utf8Step decodeUtf8At(std::string_view text, size_t offset);

// A code point found in text, and the byte offset where it starts.
struct CodePointAt {
  size_t offset = 0;
  char32_t codePoint = 0;
};

// Whether `codePoint` may not appear in a name that people read (a job or vertex name): C0
// controls (below U+0020), DEL (U+007F), C1 controls (U+0080..U+009F), and the bidirectional
// embedding, override and isolate characters (U+202A..U+202E, U+2066..U+2069) that make a
// terminal show text in another order than it is stored.
bool isUnsafeInName(char32_t codePoint);

// The first code point of `text` that isUnsafeInName, or nullopt. `text` must be valid UTF-8
// (check with firstInvalidUtf8 first); invalid bytes are skipped.
std::optional<CodePointAt> firstUnsafeInName(std::string_view text);

// "U+202E" (at least four hex digits, upper case).
std::string formatCodePoint(char32_t codePoint);

// `text` made safe to print on a terminal in one line: invalid UTF-8 replaced as by
// sanitizeUtf8, and every code point isUnsafeInName (tabs and newlines included) shown as an
// escape: "\xNN" below U+0100, "\u{NNNN}" above. Valid text without such characters is
// returned as is.
std::string printableUtf8(std::string_view text);

}  // namespace regent

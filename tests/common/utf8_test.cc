// The UTF-8 checks and repairs: what counts as valid (strict RFC 3629), how invalid bytes are
// replaced, which code points a name may not hold, and how text is made printable.
#include "common/utf8.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace regent {
namespace {

TEST(Utf8, ValidTextPassesAndTheFirstInvalidByteIsFound) {
  EXPECT_TRUE(isValidUtf8(""));
  EXPECT_TRUE(isValidUtf8("wordcount"));
  EXPECT_TRUE(isValidUtf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));  // é € 😀
  EXPECT_TRUE(isValidUtf8("\xf4\x8f\xbf\xbf"));                            // U+10FFFF

  EXPECT_EQ(firstInvalidUtf8("ab\xff"), 2u);
  EXPECT_EQ(firstInvalidUtf8("a\x80"), 1u);                 // a lone continuation byte
  EXPECT_EQ(firstInvalidUtf8("ab\xc3"), 2u);                // truncated at the end
  EXPECT_EQ(firstInvalidUtf8("\xc0\xaf"), 0u);              // overlong '/'
  EXPECT_EQ(firstInvalidUtf8("\xe0\x80\xaf"), 0u);          // overlong, three bytes
  EXPECT_EQ(firstInvalidUtf8("x\xed\xa0\x80"), 1u);         // a surrogate
  EXPECT_EQ(firstInvalidUtf8("\xf4\x90\x80\x80"), 0u);      // above U+10FFFF
  EXPECT_EQ(firstInvalidUtf8("\xf5\x80\x80\x80"), 0u);
}

TEST(Utf8, SanitizeReplacesEachMaximalInvalidSubpartAndNlohmannAgrees) {
  EXPECT_EQ(sanitizeUtf8("ok"), "ok");
  EXPECT_EQ(sanitizeUtf8("a\xff" "b"), "a\xef\xbf\xbd" "b");
  // A truncated three-byte sequence is one subpart; the byte after it starts anew.
  EXPECT_EQ(sanitizeUtf8("\xe2\x82" "A"), "\xef\xbf\xbd" "A");
  EXPECT_EQ(sanitizeUtf8("\xed\xa0\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
  for (const std::string bad : {"a\xff" "b", "\xe2\x82" "A", "\xc0\xaf", "x\xf0\x9f\x98"}) {
    const std::string sanitized = sanitizeUtf8(bad);
    EXPECT_TRUE(isValidUtf8(sanitized));
    EXPECT_EQ(nlohmann::json(sanitized).dump(),
              nlohmann::json(bad).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
}

TEST(Utf8, NamesMayNotHoldControlsOrBidiOverrides) {
  EXPECT_FALSE(firstUnsafeInName("nightly wordcount \xc3\xa9").has_value());
  for (char32_t unsafe : {0x00, 0x09, 0x1b, 0x7f, 0x80, 0x9f, 0x202a, 0x202e, 0x2066, 0x2069}) {
    EXPECT_TRUE(isUnsafeInName(unsafe)) << formatCodePoint(unsafe);
  }
  for (char32_t fine : {0x20, 0x7e, 0xa0, 0x2029, 0x202f, 0x2065, 0x206a, 0xfffd}) {
    EXPECT_FALSE(isUnsafeInName(fine)) << formatCodePoint(fine);
  }
  auto found = firstUnsafeInName("ab\xe2\x80\xae" "cd");  // U+202E RIGHT-TO-LEFT OVERRIDE
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->offset, 2u);
  EXPECT_EQ(found->codePoint, U'\u202e');
  found = firstUnsafeInName("x\xc2\x85");  // U+0085 NEXT LINE, a C1 control
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->codePoint, 0x85u);
  EXPECT_EQ(formatCodePoint(0x85), "U+0085");
  EXPECT_EQ(formatCodePoint(0x1f600), "U+1F600");
}

TEST(Utf8, PrintableEscapesControlsAndBidiAndReplacesInvalidBytes) {
  EXPECT_EQ(printableUtf8("plain caf\xc3\xa9"), "plain caf\xc3\xa9");
  EXPECT_EQ(printableUtf8("a\tb\x1b[31m"), "a\\x09b\\x1b[31m");
  EXPECT_EQ(printableUtf8("x\xe2\x80\xaey"), "x\\u{202E}y");
  EXPECT_EQ(printableUtf8("bad\xff"), "bad\xef\xbf\xbd");
}

TEST(Utf8, TruncateKeepsShortTextAndCutsLongTextAtACodePointWithAnEllipsis) {
  EXPECT_EQ(truncateUtf8("short", 16), "short");
  EXPECT_EQ(truncateUtf8("abcdefghij", 8), "abcde\u2026");
  // "é" is two bytes: with room for 4 bytes of text, "aé" + "é" would need 5, so 3 are kept.
  EXPECT_EQ(truncateUtf8("a\u00e9\u00e9\u00e9\u00e9", 7), "a\u00e9\u2026");
  EXPECT_LE(truncateUtf8(std::string(10000, 'x'), 4096).size(), 4096u);
  EXPECT_TRUE(isValidUtf8(truncateUtf8("\u00e9\u00e9\u00e9\u00e9\u00e9", 8)));
}

}  // namespace
}  // namespace regent

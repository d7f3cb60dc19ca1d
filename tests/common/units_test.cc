// Duration and size syntax: every unit, the bare-number rules, overflow and formatting
// (common/units.h).
#include "common/units.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>

namespace regent {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

std::string durationError(std::string_view text) {
  auto result = parseDuration(text);
  return result ? "<parsed>" : result.error().message;
}

std::string sizeError(std::string_view text) {
  auto result = parseSize(text);
  return result ? "<parsed>" : result.error().message;
}

TEST(DurationSyntax, AcceptsEveryUnit) {
  EXPECT_EQ(parseDuration("500ms").value(), milliseconds(500));
  EXPECT_EQ(parseDuration("6s").value(), seconds(6));
  EXPECT_EQ(parseDuration("2m").value(), minutes(2));
  EXPECT_EQ(parseDuration("1h").value(), hours(1));
  EXPECT_EQ(parseDuration("90s").value(), milliseconds(90'000));
}

TEST(DurationSyntax, AcceptsZeroBareOrWithAUnit) {
  EXPECT_EQ(parseDuration("0").value(), Duration::zero());
  EXPECT_EQ(parseDuration("0ms").value(), Duration::zero());
  EXPECT_EQ(parseDuration("0h").value(), Duration::zero());
}

TEST(DurationSyntax, IgnoresSurroundingWhitespace) {
  EXPECT_EQ(parseDuration("  6s\t").value(), seconds(6));
}

TEST(DurationSyntax, BareNonZeroNumberAsksForAUnit) {
  EXPECT_EQ(durationError("5"),
            "expected a duration such as 500ms, 6s or 2m (a number needs a unit: ms, s, m or h)");
}

TEST(DurationSyntax, UnknownUnitIsNamed) {
  EXPECT_EQ(durationError("5x"),
            "expected a duration such as 500ms, 6s or 2m (unknown unit \"x\")");
  EXPECT_EQ(durationError("1d"),
            "expected a duration such as 500ms, 6s or 2m (unknown unit \"d\")");
  EXPECT_EQ(durationError("6S"),
            "expected a duration such as 500ms, 6s or 2m (unknown unit \"S\")");
  EXPECT_EQ(durationError("6 s"),
            "expected a duration such as 500ms, 6s or 2m (unknown unit \" s\")");
}

TEST(DurationSyntax, RejectsNegativeEmptyAndFractionalValues) {
  EXPECT_EQ(durationError("-1s"),
            "expected a duration such as 500ms, 6s or 2m (a duration cannot be negative)");
  EXPECT_EQ(durationError(""), "expected a duration such as 500ms, 6s or 2m, got an empty value");
  EXPECT_EQ(durationError("   "),
            "expected a duration such as 500ms, 6s or 2m, got an empty value");
  EXPECT_EQ(durationError("1.5s"),
            "expected a duration such as 500ms, 6s or 2m (unknown unit \".5s\")");
  EXPECT_EQ(durationError("s"), "expected a duration such as 500ms, 6s or 2m");
  EXPECT_EQ(durationError("+5s"), "expected a duration such as 500ms, 6s or 2m");
}

TEST(DurationSyntax, RejectsValuesThatOverflow) {
  const std::string tooLarge =
      "expected a duration such as 500ms, 6s or 2m (the value is too large)";
  // Fits in 64 bits as a number, overflows when multiplied by the unit.
  EXPECT_EQ(durationError("9223372036854775807h"), tooLarge);
  // Fits in uint64 milliseconds but not in the signed Duration.
  EXPECT_EQ(durationError("9223372036854775808ms"), tooLarge);
  EXPECT_EQ(durationError("99999999999999999999s"),
            "expected a duration such as 500ms, 6s or 2m (the number is too large)");
  EXPECT_EQ(parseDuration("9223372036854775807ms").value(), Duration::max());
}

TEST(DurationSyntax, FormatsWithTheLargestExactUnit) {
  EXPECT_EQ(formatDuration(Duration::zero()), "0s");
  EXPECT_EQ(formatDuration(milliseconds(1500)), "1500ms");
  EXPECT_EQ(formatDuration(seconds(90)), "90s");
  EXPECT_EQ(formatDuration(minutes(2)), "2m");
  EXPECT_EQ(formatDuration(hours(3)), "3h");
  EXPECT_EQ(formatDuration(milliseconds(-2000)), "-2s");
  EXPECT_EQ(formatDuration(Duration::min()), "-9223372036854775808ms");
}

TEST(DurationSyntax, FormattedTextParsesBack) {
  for (const Duration d :
       {Duration(1), Duration(1500), Duration(seconds(61)), Duration(hours(25))}) {
    EXPECT_EQ(parseDuration(formatDuration(d)).value(), d);
  }
}

TEST(SizeSyntax, AcceptsEveryUnitAndBareBytes) {
  EXPECT_EQ(parseSize("4096").value(), 4096u);
  EXPECT_EQ(parseSize("0").value(), 0u);
  EXPECT_EQ(parseSize("7B").value(), 7u);
  EXPECT_EQ(parseSize("2KiB").value(), 2048u);
  EXPECT_EQ(parseSize("64MiB").value(), 64u << 20);
  EXPECT_EQ(parseSize("1GiB").value(), uint64_t{1} << 30);
  EXPECT_EQ(parseSize("3TiB").value(), uint64_t{3} << 40);
  EXPECT_EQ(parseSize(" 1GiB ").value(), uint64_t{1} << 30);
}

TEST(SizeSyntax, RejectsDecimalUnitsAndUnknownUnits) {
  const std::string expected =
      "expected a size such as 4096, 64MiB or 1GiB (units B, KiB, MiB, GiB, TiB)";
  EXPECT_EQ(sizeError("64MB"), expected + " (unknown unit \"MB\")");
  EXPECT_EQ(sizeError("1gib"), expected + " (unknown unit \"gib\")");
  EXPECT_EQ(sizeError("1.5GiB"), expected + " (unknown unit \".5GiB\")");
  EXPECT_EQ(sizeError("GiB"), expected);
  EXPECT_EQ(sizeError(""), expected + ", got an empty value");
}

TEST(SizeSyntax, RejectsNegativeAndOverflowingValues) {
  const std::string expected =
      "expected a size such as 4096, 64MiB or 1GiB (units B, KiB, MiB, GiB, TiB)";
  EXPECT_EQ(sizeError("-1KiB"), expected + " (a size cannot be negative)");
  EXPECT_EQ(sizeError("16777216TiB"), expected + " (the value is too large)");  // 2^64 bytes
  EXPECT_EQ(parseSize("16777215TiB").value(), uint64_t{16777215} << 40);
  EXPECT_EQ(sizeError("18446744073709551616"), expected + " (the number is too large)");
  EXPECT_EQ(parseSize("18446744073709551615").value(), std::numeric_limits<uint64_t>::max());
}

TEST(SizeSyntax, FormatsWithTheLargestExactUnit) {
  EXPECT_EQ(formatSize(0), "0B");
  EXPECT_EQ(formatSize(1000), "1000B");
  EXPECT_EQ(formatSize(1536 * 1024), "1536KiB");
  EXPECT_EQ(formatSize(uint64_t{1} << 30), "1GiB");
  EXPECT_EQ(formatSize(uint64_t{5} << 40), "5TiB");
  EXPECT_EQ(parseSize(formatSize(std::numeric_limits<uint64_t>::max())).value(),
            std::numeric_limits<uint64_t>::max());
}

}  // namespace
}  // namespace regent

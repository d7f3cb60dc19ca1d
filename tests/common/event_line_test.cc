// Event lines: what EventLine writes, parseEventLine reads back, including the master's lines.
#include "common/event_line.h"

#include <gtest/gtest.h>

namespace regent {
namespace {

TEST(EventLine, WritesBareValuesAndQuotesFreeText) {
  const std::string line = EventLine("leadership revoked")
                               .field("epoch", uint64_t{7})
                               .field("master_id", "4f2a")
                               .quotedField("reason", "the \"latch\" node\nwas deleted")
                               .field("mono_us", int64_t{-3})
                               .str();
  EXPECT_EQ(line,
            "leadership revoked epoch=7 master_id=4f2a reason=\"the 'latch' node was deleted\" "
            "mono_us=-3");
}

TEST(EventLine, AValueThatWouldSplitIsQuoted) {
  EXPECT_EQ(EventLine("e").field("a", "two words").field("b", "").field("c", "x=y").str(),
            "e a=\"two words\" b=\"\" c=\"x=y\"");
}

TEST(EventLine, WhatIsWrittenParsesBack) {
  const std::string line = EventLine("handover done")
                               .field("master_id", "m 1")
                               .quotedField("reason", "said \"bye\"")
                               .field("wall_ms", int64_t{1700000000000})
                               .str();
  auto parsed = parseEventLine("2026-11-21T10:58:01.923+00:00 info  [master] " + line, "handover done");
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->get("master_id"), "m 1");
  EXPECT_EQ(parsed->get("reason"), "said 'bye'");
  EXPECT_EQ(parsed->getInt("wall_ms"), 1700000000000);
  EXPECT_EQ(parsed->fields.size(), 3u);
}

TEST(EventLine, ParsesTheMastersGrantLine) {
  auto parsed = parseEventLine(
      "2026-11-21T10:58:01.919+00:00 info  [master] leadership granted epoch=7 master_id=aa "
      "mono_us=100 wall_ms=200\n",
      "leadership granted");
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->getUint("epoch"), 7u);
  EXPECT_EQ(parsed->get("master_id"), "aa");
  EXPECT_EQ(parsed->getInt("mono_us"), 100);
  EXPECT_EQ(parsed->getInt("wall_ms"), 200);
  EXPECT_FALSE(parsed->get("reason"));
}

TEST(EventLine, TheEventMustBeAWholePhrase) {
  EXPECT_FALSE(parseEventLine("misleadership granted epoch=1", "leadership granted"));
  EXPECT_FALSE(parseEventLine("leadership grantedly epoch=1", "leadership granted"));
  EXPECT_FALSE(parseEventLine("leader serving", "leadership granted"));
  auto bare = parseEventLine("[master] leader serving", "leader serving");
  ASSERT_TRUE(bare);
  EXPECT_TRUE(bare->fields.empty());
  // The first occurrence that is a whole phrase counts.
  auto later = parseEventLine("x-granted y granted mono_us=5", "granted");
  ASSERT_TRUE(later);
  EXPECT_EQ(later->getInt("mono_us"), 5);
}

TEST(EventLine, MalformedFieldsAreRefused) {
  EXPECT_FALSE(parseEventLine("granted mono_us", "granted"));
  EXPECT_FALSE(parseEventLine("granted reason=\"unterminated", "granted"));
  EXPECT_FALSE(parseEventLine("granted reason=\"a\"b", "granted"));
}

TEST(EventLine, NumbersAreWholeDecimalsInRange) {
  auto parsed = parseEventLine("e a=12x b=-1 c=18446744073709551615 d=", "e");
  ASSERT_TRUE(parsed);
  EXPECT_FALSE(parsed->getInt("a"));
  EXPECT_EQ(parsed->getInt("b"), -1);
  EXPECT_FALSE(parsed->getUint("b"));
  EXPECT_EQ(parsed->getUint("c"), UINT64_MAX);
  EXPECT_FALSE(parsed->getInt("c"));
  EXPECT_FALSE(parsed->getInt("d"));
  EXPECT_FALSE(parsed->getInt("missing"));
}

TEST(EventLine, QuotableKeepsTextOnOneLineWithoutQuotes) {
  EXPECT_EQ(quotable("a \"b\"\r\nc"), "a 'b'  c");
}

}  // namespace
}  // namespace regent

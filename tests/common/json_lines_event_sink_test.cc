// The JSON-lines events file: one object per event, its fields typed and escaped, appended;
// what is written reads back.
#include "common/json_lines_event_sink.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/fixtures/temp_dir_test_util.h"

namespace regent {
namespace {

std::vector<std::string> fileLines(const std::string& path) {
  std::ifstream file(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(file, line);) lines.push_back(line);
  return lines;
}

TEST(JsonLinesEvent, IsOneObjectWithNameFieldsAndClocks) {
  const Event event = Event("job state")
                          .field("epoch", uint64_t{3})
                          .field("job", "ab")
                          .field("delta", -2)
                          .quotedField("message", "exited with code 1")
                          .at(123, 456);
  EXPECT_EQ(jsonLine(event), R"({"event":"job state","fields":{"epoch":3,"job":"ab","delta":-2,)"
                             R"("message":"exited with code 1"},"mono_us":123,"wall_ms":456})");
}

TEST(JsonLinesEvent, EscapesWhatWouldBreakTheLineOrTheString) {
  const std::string nasty = "say \"hi\"\\ there\nnext\tline\r\x01\x1f end";
  const std::string line = jsonLine(Event("e").field("text", nasty).quotedField("reason", nasty));
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_NE(line.find(R"(say \"hi\"\\ there\nnext\tline\r\u0001\u001f end)"), std::string::npos)
      << line;
  auto parsed = nlohmann::json::parse(line);
  EXPECT_EQ(parsed["fields"]["text"], nasty);
  EXPECT_EQ(parsed["fields"]["reason"], nasty);
}

TEST(JsonLinesEvent, ReplacesInvalidUtf8SoTheLineStaysJson) {
  const std::string line = jsonLine(Event("e").field("text", std::string("a\xff"
                                                                         "b")));
  auto parsed = nlohmann::json::parse(line, nullptr, false);
  ASSERT_FALSE(parsed.is_discarded()) << line;
  EXPECT_EQ(parsed["fields"]["text"],
            "a\xEF\xBF\xBD"
            "b");
}

TEST(JsonLinesEvent, WhatIsWrittenReadsBack) {
  const Event event = Event("attempt state")
                          .field("epoch", uint64_t{18446744073709551615u})
                          .field("exit_code", -1)
                          .field("state", "FAILED")
                          .quotedField("message", "a \"b\"\nc")
                          .at(-5, 1700000000000);
  auto back = parseJsonLine(jsonLine(event));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->name(), "attempt state");
  EXPECT_EQ(back->monoUs(), -5);
  EXPECT_EQ(back->wallMs(), 1700000000000);
  ASSERT_EQ(back->fields().size(), 4u);
  EXPECT_EQ(std::get<uint64_t>(back->fields()[0].value), 18446744073709551615u);
  EXPECT_EQ(std::get<int64_t>(back->fields()[1].value), -1);
  EXPECT_EQ(back->fields()[2].key, "state");
  EXPECT_EQ(std::get<std::string>(back->fields()[3].value), "a \"b\"\nc");
}

TEST(JsonLinesEvent, WhatIsNotAnEventLineIsRefused) {
  EXPECT_FALSE(parseJsonLine(""));
  EXPECT_FALSE(parseJsonLine(R"({"event":"e","fields":{},"mono_us":1)"));  // Cut short.
  EXPECT_FALSE(parseJsonLine(R"({"event":"e","fields":{},"wall_ms":2})"));
  EXPECT_FALSE(parseJsonLine(R"({"event":"e","fields":{"a":1.5},"mono_us":1,"wall_ms":2})"));
  EXPECT_FALSE(parseJsonLine(R"({"event":"e","fields":[],"mono_us":1,"wall_ms":2})"));
  EXPECT_TRUE(parseJsonLine(R"({"event":"e","fields":{},"mono_us":1,"wall_ms":2})"));
}

TEST(JsonLinesFileEventSink, AppendsOneLinePerEvent) {
  testing::TempDir dir("regent-events");
  const std::string path = dir.path() + "/events.jsonl";
  std::ofstream(path) << "earlier\n";  // Appended to, never truncated.
  {
    auto sink = JsonLinesFileEventSink::open(path);
    ASSERT_TRUE(sink.ok()) << sink.error().message;
    sink.value()->emit(Event("a").field("n", 1).at(1, 2));
    sink.value()->emit(Event("b").at(3, 4));
    // Each event is in the file when emit() returns.
    const auto lines = fileLines(path);
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_EQ(lines[1], R"({"event":"a","fields":{"n":1},"mono_us":1,"wall_ms":2})");
    EXPECT_EQ(lines[2], R"({"event":"b","fields":{},"mono_us":3,"wall_ms":4})");
    EXPECT_EQ(sink.value()->writeFailures(), 0u);
  }
  EXPECT_EQ(fileLines(path).front(), "earlier");
}

TEST(JsonLinesFileEventSink, AWriteThatFailsIsCountedAndTheNextEventsStillTried) {
  auto sink = JsonLinesFileEventSink::open("/dev/full");  // Every write: ENOSPC.
  ASSERT_TRUE(sink.ok()) << sink.error().message;
  sink.value()->emit(Event("a"));
  sink.value()->emit(Event("b"));
  EXPECT_EQ(sink.value()->writeFailures(), 2u);
}

TEST(JsonLinesFileEventSink, AFileThatCannotBeOpenedIsAnErrorNamingIt) {
  testing::TempDir dir("regent-events");
  const std::string path = dir.path() + "/missing/events.jsonl";
  auto sink = JsonLinesFileEventSink::open(path);
  ASSERT_FALSE(sink.ok());
  EXPECT_NE(sink.error().message.find(path), std::string::npos) << sink.error().message;
  EXPECT_NE(sink.error().message.find("No such file or directory"), std::string::npos)
      << sink.error().message;
}

}  // namespace
}  // namespace regent

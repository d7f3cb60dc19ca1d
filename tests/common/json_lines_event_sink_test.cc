// The JSON-lines events file: one object per event, its fields typed and escaped, appended;
// what is written reads back.
#include "common/json_lines_event_sink.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

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

TEST(JsonLinesEvent, NamesItsWriterFirstWhenGivenOne) {
  const Event event = Event("worker starting").field("slots", 2).at(5, 6);
  EXPECT_EQ(jsonLine(event, EventOrigin{.process = "worker", .pid = 4242}),
            R"({"process":"worker","pid":4242,"event":"worker starting","fields":{"slots":2},)"
            R"("mono_us":5,"wall_ms":6})");
  const auto back = parseJsonLine(jsonLine(event, EventOrigin{.process = "worker", .pid = 4242}));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->name(), "worker starting");
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
    auto sink = JsonLinesFileEventSink::open(path, EventOrigin{.process = "master", .pid = 7});
    ASSERT_TRUE(sink.ok()) << sink.error().message;
    sink.value()->emit(Event("a").field("n", 1).at(1, 2));
    sink.value()->emit(Event("b").at(3, 4));
    // Each event is in the file when emit() returns.
    const auto lines = fileLines(path);
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_EQ(lines[1],
              R"({"process":"master","pid":7,"event":"a","fields":{"n":1},"mono_us":1,"wall_ms":2})");
    EXPECT_EQ(lines[2],
              R"({"process":"master","pid":7,"event":"b","fields":{},"mono_us":3,"wall_ms":4})");
    EXPECT_EQ(sink.value()->writeFailures(), 0u);
  }
  EXPECT_EQ(fileLines(path).front(), "earlier");
}

TEST(JsonLinesFileEventSink, AWriteThatFailsIsCountedAndTheNextEventsStillTried) {
  const int full = ::open("/dev/full", O_WRONLY | O_CLOEXEC);  // Every write: ENOSPC.
  ASSERT_GE(full, 0);
  JsonLinesFileEventSink sink(full, "/dev/full", EventOrigin{});
  sink.emit(Event("a"));
  sink.emit(Event("b"));
  EXPECT_EQ(sink.writeFailures(), 2u);
}

// A file that takes the first bytes of a line and then no more (a full disk) leaves that line
// without its newline: the next event that is written must not be glued to it.
TEST(JsonLinesFileEventSink, ALineCutShortDoesNotSwallowTheNextEvent) {
  testing::TempDir dir("regent-events");
  const std::string path = dir.path() + "/events.jsonl";
  int pipeFds[2];
  ASSERT_EQ(::pipe2(pipeFds, O_CLOEXEC | O_NONBLOCK), 0);
  // A non-blocking pipe with room for fewer bytes than one line: the write of a line longer than
  // PIPE_BUF is partial, the next fails with EAGAIN; then the reader drains the pipe and writes
  // succeed again.
  // Two pages; the first filled: the line's write fills the second page and stops there.
  ASSERT_GT(::fcntl(pipeFds[1], F_SETPIPE_SZ, 8192), 0);
  const std::string filler(4096, 'x');
  ASSERT_EQ(::write(pipeFds[1], filler.data(), filler.size()), static_cast<ssize_t>(filler.size()));
  JsonLinesFileEventSink sink(pipeFds[1], "pipe", EventOrigin{});
  sink.emit(Event("cut").field("padding", std::string(5000, 'p')).at(1, 1));
  EXPECT_EQ(sink.writeFailures(), 1u);
  std::string drained(8192, '\0');
  const ssize_t got = ::read(pipeFds[0], drained.data(), drained.size());
  ASSERT_GT(got, 0);
  drained.resize(static_cast<size_t>(got));
  sink.emit(Event("whole").at(2, 2));
  EXPECT_EQ(sink.writeFailures(), 1u);
  std::string rest(8192, '\0');
  const ssize_t more = ::read(pipeFds[0], rest.data(), rest.size());
  ASSERT_GT(more, 0);
  rest.resize(static_cast<size_t>(more));
  ::close(pipeFds[0]);
  // The cut line is ended first; the next line is whole and reads back.
  ASSERT_EQ(rest.front(), '\n') << rest;
  const std::string next = rest.substr(1, rest.size() - 2);
  const auto back = parseJsonLine(next);
  ASSERT_TRUE(back) << next;
  EXPECT_EQ(back->name(), "whole");
  EXPECT_EQ(drained.substr(0, filler.size()), filler);
  EXPECT_NE(drained.find(R"({"event":"cut")"), std::string::npos);
}

TEST(JsonLinesFileEventSink, OnlyARegularFileIsTaken) {
  testing::TempDir dir("regent-events");
  const std::string fifo = dir.path() + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // With no reader, a blocking open would wait here for ever.
  auto fromFifo = JsonLinesFileEventSink::open(fifo, EventOrigin{});
  ASSERT_FALSE(fromFifo.ok());
  EXPECT_NE(fromFifo.error().message.find(fifo), std::string::npos) << fromFifo.error().message;
  EXPECT_NE(fromFifo.error().message.find("not a regular file"), std::string::npos)
      << fromFifo.error().message;

  auto device = JsonLinesFileEventSink::open("/dev/null", EventOrigin{});
  ASSERT_FALSE(device.ok());
  EXPECT_NE(device.error().message.find("not a regular file"), std::string::npos)
      << device.error().message;

  const std::string target = dir.path() + "/target";
  std::ofstream(target) << "keep\n";
  const std::string link = dir.path() + "/events.jsonl";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  auto viaLink = JsonLinesFileEventSink::open(link, EventOrigin{});
  ASSERT_FALSE(viaLink.ok());
  EXPECT_NE(viaLink.error().message.find("symbolic link"), std::string::npos)
      << viaLink.error().message;
  EXPECT_EQ(fileLines(target), std::vector<std::string>{"keep"});
}

TEST(JsonLinesFileEventSink, AFileThatCannotBeOpenedIsAnErrorNamingIt) {
  testing::TempDir dir("regent-events");
  const std::string path = dir.path() + "/missing/events.jsonl";
  auto sink = JsonLinesFileEventSink::open(path, EventOrigin{});
  ASSERT_FALSE(sink.ok());
  EXPECT_NE(sink.error().message.find(path), std::string::npos) << sink.error().message;
  EXPECT_NE(sink.error().message.find("No such file or directory"), std::string::npos)
      << sink.error().message;
}

}  // namespace
}  // namespace regent

// `regentctl jobs logs`: which attempt a subtask's output comes from (and every way there is
// none), and the reader of that output against a fake worker that serves the HTTP contract of
// GET /v1/attempts/<attempt>/stdout|stderr on a loopback port: ranges, 416, follow until the
// attempt ended, 404, an unreachable worker, a broken answer.
#include "cli/attempt_output.h"

#include <capnp/message.h>
#include <gtest/gtest.h>
#include <kj/compat/http.h>

#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cluster_inspector.h"
#include "common/event_loop.h"
#include "common/ids.h"
#include "rpc/schema/gateways.capnp.h"
#include "rpc/wire_ids.h"

namespace regent::cli {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
const AttemptId kAttempt(0xa77e, 0x1);

// ---- findAttemptOutput ---------------------------------------------------------------------

// Job 0x10:1, RUNNING, with vertex "a" (parallelism 2: subtask 0 running attempt kAttempt on
// worker w1 at 10.0.0.5:8082; subtask 1 waiting for a slot) and vertex "b" (parallelism 1, no
// subtask detail yet).
class FindAttemptOutputTest : public ::testing::Test {
 protected:
  FindAttemptOutputTest() {
    auto status = message_.initRoot<wire::JobStatus>();
    wire::setWireId(status.initJobId(), JobId(0x10, 1));
    status.setState(wire::JobState::RUNNING);
    auto vertices = status.initVertices(2);
    vertices[0].setName("a");
    vertices[0].setParallelism(2);
    auto subtasks = vertices[0].initSubtasks(2);
    subtasks[0].setIndex(0);
    auto attempt = subtasks[0].initAttempt();
    wire::setWireId(attempt.initAttemptId(), kAttempt);
    attempt.setState(wire::ExecutionState::RUNNING);
    subtasks[0].setHost("w1");
    subtasks[0].setHttpAddress("10.0.0.5:8082");
    subtasks[1].setIndex(1);
    subtasks[1].setWaitingReason("waiting for a slot (cpu=1.000 memory=1GiB): 0 of 8 slots free");
    vertices[1].setName("b");
    vertices[1].setParallelism(1);
  }

  ~FindAttemptOutputTest() noexcept override = default;

  wire::JobStatus::Reader status() { return message_.getRoot<wire::JobStatus>().asReader(); }

  capnp::MallocMessageBuilder message_;
};

TEST_F(FindAttemptOutputTest, FindsTheLatestAttemptOfTheSubtaskAndItsWorker) {
  auto found = findAttemptOutput(status(), "a", 0);
  ASSERT_TRUE(found.ok()) << found.error().message;
  EXPECT_EQ(found.value().attempt, kAttempt);
  EXPECT_EQ(found.value().httpAddress, "10.0.0.5:8082");
  EXPECT_EQ(found.value().vertex, "a");
  EXPECT_EQ(found.value().subtask, 0u);
}

TEST_F(FindAttemptOutputTest, AnUnknownVertexIsRefusedNamingTheJobsVertices) {
  auto found = findAttemptOutput(status(), "c", 0);
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.error().message,
            "job 00000000000000100000000000000001 has no vertex \"c\"; its vertices are a, b");
}

TEST_F(FindAttemptOutputTest, ASubtaskIndexOutOfRangeIsRefusedNamingTheValidOnes) {
  auto found = findAttemptOutput(status(), "a", 2);
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.error().message,
            "vertex a has parallelism 2, so its subtasks are 0..1; there is no subtask 2");
  auto single = findAttemptOutput(status(), "b", 1);
  ASSERT_FALSE(single.ok());
  EXPECT_EQ(single.error().message,
            "vertex b has parallelism 1, so its subtasks are just 0; there is no subtask 1");
}

TEST_F(FindAttemptOutputTest, ASubtaskWithoutAnAttemptHasNotStartedAndSaysWhyItWaits) {
  auto waiting = findAttemptOutput(status(), "a", 1);
  ASSERT_FALSE(waiting.ok());
  EXPECT_EQ(waiting.error().message,
            "subtask 1 of vertex a has not started: waiting for a slot (cpu=1.000 memory=1GiB): 0 "
            "of 8 slots free");
  auto noDetail = findAttemptOutput(status(), "b", 0);
  ASSERT_FALSE(noDetail.ok());
  EXPECT_EQ(noDetail.error().message, "subtask 0 of vertex b has not started");
}

TEST_F(FindAttemptOutputTest, AnAttemptWhoseWorkerIsNotKnownIsRefused) {
  message_.getRoot<wire::JobStatus>().getVertices()[0].getSubtasks()[0].setHttpAddress("");
  auto found = findAttemptOutput(status(), "a", 0);
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.error().message,
            "the worker of attempt " + kAttempt.toHex() +
                " (subtask 0 of vertex a) on host w1 is not registered with the leader, so its "
                "output cannot be reached");
}

TEST_F(FindAttemptOutputTest, AnEndedJobHasNoSubtaskDetailToFindOutputIn) {
  auto status = message_.getRoot<wire::JobStatus>();
  status.setState(wire::JobState::FINISHED);
  status.initVertices(0);
  auto found = findAttemptOutput(status.asReader(), "a", 0);
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.error().message,
            "job 00000000000000100000000000000001 has ended (FINISHED): the leader has no subtask "
            "rows of it (its result no longer keeps them), so the output of its attempts cannot "
            "be located");
  // The leader's reason, when it gave one.
  status.setSubtasksOmitted("subtask rows not kept: the detail's 300000 bytes are over "
                            "store.job-details.max-size (262144 bytes)");
  auto omitted = findAttemptOutput(status.asReader(), "a", 0);
  ASSERT_FALSE(omitted.ok());
  EXPECT_NE(omitted.error().message.find("(subtask rows not kept: the detail's 300000 bytes"),
            std::string::npos)
      << omitted.error().message;
}

// ---- AttemptOutputReader against a fake worker ---------------------------------------------

// A worker's attempt output endpoint as the contract defines it: one attempt (kAttempt) with a
// stdout and a stderr file and a state; Range "bytes=N-" or "bytes=N-M" gives 206 with at most
// 1 MiB, N at or past the end gives 416 "bytes */SIZE", no Range gives 200 (or the first MiB);
// another attempt gives 404. `beforeAnswer` runs before each answer with its number (from 1):
// the test's script of how the attempt goes on (output written, state changed).
class FakeWorkerOutput final : public kj::HttpService {
 public:
  explicit FakeWorkerOutput(kj::HttpHeaderTable::Builder& builder)
      : range_(builder.add("Range")),
        contentRange_(builder.add("Content-Range")),
        attemptState_(builder.add("X-Regent-Attempt-State")) {}

  void setTable(const kj::HttpHeaderTable& table) { table_ = &table; }

  kj::Promise<void> request(kj::HttpMethod method, kj::StringPtr url,
                            const kj::HttpHeaders& headers, kj::AsyncInputStream&,
                            Response& response) override {
    EXPECT_EQ(method, kj::HttpMethod::GET);
    ++answers;
    if (beforeAnswer) beforeAnswer(answers);
    if (hang) return kj::NEVER_DONE;
    std::string range;
    KJ_IF_MAYBE (value, headers.get(range_)) { range = value->cStr(); }
    ranges.push_back(range);
    paths.push_back(url.cStr());
    const std::string prefix = "/v1/attempts/" + kAttempt.toHex() + "/";
    const std::string path = url.cStr();
    kj::HttpHeaders reply(*table_);
    if (!sendState.empty()) reply.set(attemptState_, kj::str(sendState));
    if (path != prefix + "stdout" && path != prefix + "stderr") {
      return send(response, 404, "Not Found", reply, "unknown attempt\n");
    }
    const std::string& file = path.ends_with("stderr") ? stderrText : stdoutText;
    const uint64_t size = file.size();
    uint64_t first = 0;
    uint64_t last = size == 0 ? 0 : size - 1;
    uint status = 200;
    if (!range.empty()) {
      const size_t dash = range.find('-');
      first = std::stoull(range.substr(6, dash - 6));
      if (dash + 1 < range.size()) last = std::min<uint64_t>(last, std::stoull(range.substr(dash + 1)));
      if (first >= size) {
        reply.set(contentRange_, kj::str("bytes */", size));
        return send(response, 416, "Range Not Satisfiable", reply, "");
      }
      status = 206;
    }
    if (last - first + 1 > kMiB) {
      last = first + kMiB - 1;
      status = 206;
    }
    if (status == 206) reply.set(contentRange_, kj::str("bytes ", first, "-", last, "/", size));
    return send(response, status, status == 206 ? "Partial Content" : "OK", reply,
                size == 0 ? "" : file.substr(first, last - first + 1));
  }

  std::string stdoutText;
  std::string stderrText;
  std::string sendState = "RUNNING";  // Empty: the answer carries no X-Regent-Attempt-State.
  bool hang = false;                  // Never answer.
  std::function<void(int answer)> beforeAnswer;
  int answers = 0;
  std::vector<std::string> ranges;  // The Range header of each request ("" without one).
  std::vector<std::string> paths;

 private:
  kj::Promise<void> send(Response& response, uint status, kj::StringPtr statusText,
                         const kj::HttpHeaders& headers, std::string body) {
    auto stream = response.send(status, statusText, headers, body.size());
    auto bytes = kj::heapString(body.data(), body.size());  // Stays put while written.
    auto write = stream->write(bytes.begin(), bytes.size());
    return write.attach(kj::mv(stream), kj::mv(bytes));
  }

  kj::HttpHeaderId range_;
  kj::HttpHeaderId contentRange_;
  kj::HttpHeaderId attemptState_;
  const kj::HttpHeaderTable* table_ = nullptr;
};

class AttemptOutputReaderTest : public ::testing::Test {
 protected:
  AttemptOutputReaderTest() {
    kj::HttpHeaderTable::Builder builder;
    worker_ = kj::heap<FakeWorkerOutput>(builder);
    table_ = builder.build();
    worker_->setTable(*table_);
    listener_ = loop_.run(loop_.io().getNetwork().parseAddress("127.0.0.1", 0))->listen();
    port_ = listener_->getPort();
    server_ = kj::heap<kj::HttpServer>(loop_.timer(), *table_, *worker_);
    serving_ = server_->listenHttp(*listener_).eagerlyEvaluate(nullptr);
  }

  ~AttemptOutputReaderTest() noexcept override = default;

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  AttemptOutputSource source() const { return {kAttempt, address(), "a", 0}; }

  // Reads with `options` (the poll interval made short: polling is the protocol, and the script
  // in beforeAnswer, not time, decides what each poll finds) and returns the exit code.
  int read(AttemptOutputOptions options, AttemptOutputSource from) {
    options.pollInterval = Duration(1);
    AttemptOutputReader reader(loop_.io().getNetwork(), loop_.timer(), out_, err_);
    return loop_.run(reader.read(std::move(from), options));
  }
  int read(AttemptOutputOptions options) { return read(options, source()); }

  EventLoop loop_;
  kj::Own<kj::HttpHeaderTable> table_;
  kj::Own<FakeWorkerOutput> worker_;
  kj::Own<kj::ConnectionReceiver> listener_;
  uint port_ = 0;
  kj::Own<kj::HttpServer> server_;
  kj::Promise<void> serving_ = nullptr;
  std::ostringstream out_;
  std::ostringstream err_;
};

// A file of `size` bytes that differ from position to position, so a misplaced range shows.
std::string patterned(uint64_t size) {
  std::string text(size, '\0');
  for (uint64_t i = 0; i < size; ++i) text[i] = static_cast<char>('a' + (i * 7 + i / 251) % 26);
  return text;
}

TEST_F(AttemptOutputReaderTest, PrintsASmallFileAsItIs) {
  worker_->stdoutText = std::string("hello\n\0\x01\xff world\n", 16);
  worker_->sendState = "FINISHED";
  EXPECT_EQ(read({}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), worker_->stdoutText);
  EXPECT_EQ(err_.str(), "");
  EXPECT_EQ(worker_->ranges, std::vector<std::string>{"bytes=0-"});
  EXPECT_EQ(worker_->paths,
            std::vector<std::string>{"/v1/attempts/" + kAttempt.toHex() + "/stdout"});
}

TEST_F(AttemptOutputReaderTest, ReadsStderrWhenAsked) {
  worker_->stdoutText = "out\n";
  worker_->stderrText = "err\n";
  AttemptOutputOptions options;
  options.stderrStream = true;
  EXPECT_EQ(read(options), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), "err\n");
  EXPECT_EQ(worker_->paths,
            std::vector<std::string>{"/v1/attempts/" + kAttempt.toHex() + "/stderr"});
}

TEST_F(AttemptOutputReaderTest, AFileLargerThanOneAnswerIsReadInConsecutiveRanges) {
  worker_->stdoutText = patterned(2 * kMiB + kMiB / 2);
  EXPECT_EQ(read({}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), worker_->stdoutText);
  EXPECT_EQ(worker_->ranges, (std::vector<std::string>{"bytes=0-", "bytes=1048576-",
                                                       "bytes=2097152-"}));
}

TEST_F(AttemptOutputReaderTest, AnEmptyFileAnswered416PrintsNothingAndSucceeds) {
  EXPECT_EQ(read({}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), "");
  EXPECT_EQ(err_.str(), "");
  EXPECT_EQ(worker_->answers, 1);
}

TEST_F(AttemptOutputReaderTest, WithoutFollowItStopsAtTheSizeOfTheFirstAnswer) {
  // The attempt keeps writing; a read without --follow prints what there was when it began.
  worker_->stdoutText = "first\n";
  worker_->beforeAnswer = [this](int answer) {
    if (answer > 1) worker_->stdoutText += "more\n";
  };
  EXPECT_EQ(read({}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), "first\n");
  EXPECT_EQ(worker_->answers, 1);
}

TEST_F(AttemptOutputReaderTest, FollowReadsNewOutputUntilTheAttemptEndedAndItsFileIsRead) {
  // Answer 1: "one\n" while RUNNING; 2: "two\n" written; 3: nothing new (416); 4: the attempt
  // wrote 1.5 MiB and FINISHED, which takes two answers to read; then nothing is asked again.
  const std::string tail = patterned(kMiB + kMiB / 2);
  worker_->stdoutText = "one\n";
  worker_->beforeAnswer = [&](int answer) {
    if (answer == 2) worker_->stdoutText += "two\n";
    if (answer == 4) {
      worker_->stdoutText += tail;
      worker_->sendState = "FINISHED";
    }
  };
  AttemptOutputOptions options;
  options.follow = true;
  EXPECT_EQ(read(options), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), "one\ntwo\n" + tail);
  EXPECT_EQ(worker_->ranges, (std::vector<std::string>{"bytes=0-", "bytes=4-", "bytes=8-",
                                                       "bytes=8-", "bytes=1048584-"}));
}

TEST_F(AttemptOutputReaderTest, FollowOfAFailedAttemptEndsOnceItsOutputIsRead) {
  worker_->stdoutText = "partial";
  worker_->sendState = "FAILED";
  AttemptOutputOptions options;
  options.follow = true;
  EXPECT_EQ(read(options), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), "partial");
  EXPECT_EQ(worker_->answers, 1);
}

TEST_F(AttemptOutputReaderTest, PrunedOutputIs404AndRefusedNamingTheWorker) {
  AttemptOutputSource other = source();
  other.attempt = AttemptId(0xdead, 2);
  EXPECT_EQ(read({}, other), kExitRefused);
  EXPECT_EQ(out_.str(), "");
  EXPECT_EQ(err_.str(), "regentctl: the worker at " + address() + " has no stdout of attempt " +
                            other.attempt.toHex() +
                            " (subtask 0 of vertex a) (404: unknown attempt): it was pruned "
                            "(worker.attempts.retain) or the worker lost its data directory\n");
}

TEST_F(AttemptOutputReaderTest, AnUnreachableWorkerIsAnErrorNamingItsAddress) {
  // A port that was just listened on and closed: nothing answers there.
  auto closed = loop_.run(loop_.io().getNetwork().parseAddress("127.0.0.1", 0))->listen();
  const std::string address = "127.0.0.1:" + std::to_string(closed->getPort());
  closed = nullptr;
  AttemptOutputSource gone = source();
  gone.httpAddress = address;
  EXPECT_EQ(read({}, gone), kExitError);
  EXPECT_EQ(err_.str().rfind("regentctl: the worker at " + address +
                                 " cannot be reached for the stdout of attempt " +
                                 kAttempt.toHex() + " (subtask 0 of vertex a): ",
                             0),
            0u)
      << err_.str();
}

TEST_F(AttemptOutputReaderTest, AWorkerThatDoesNotAnswerInTimeIsAnErrorNamingTheTimeout) {
  worker_->hang = true;
  AttemptOutputOptions options;
  options.requestTimeout = Duration(50);
  EXPECT_EQ(read(options), kExitError);
  EXPECT_EQ(err_.str(), "regentctl: the worker at " + address() +
                            " did not answer within 50ms (rpc.call-timeout) when asked for the "
                            "stdout of attempt " + kAttempt.toHex() +
                            " (subtask 0 of vertex a)\n");
}

TEST_F(AttemptOutputReaderTest, AnAnswerWithoutTheAttemptStateBreaksTheProtocol) {
  worker_->stdoutText = "x";
  worker_->sendState = "";
  EXPECT_EQ(read({}), kExitError);
  EXPECT_EQ(out_.str(), "");
  EXPECT_EQ(err_.str(), "regentctl: the worker at " + address() +
                            " answered the read of the stdout of attempt " + kAttempt.toHex() +
                            " (subtask 0 of vertex a) at byte 0 with no X-Regent-Attempt-State "
                            "header\n");
}

}  // namespace
}  // namespace regent::cli

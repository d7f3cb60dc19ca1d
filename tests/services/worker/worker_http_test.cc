// The worker's HTTP routes against a fake worker, in process (no socket): health, readiness with
// its reason, 404/405 like a master's, /metrics parsed strictly, and the attempts' output
// (200, 206 ranges, 416, 404, the state header, the 1 MiB cap).
#include "services/worker/worker_http.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <kj/compat/http.h>
#include <kj/debug.h>
#include <kj/io.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "services/worker/worker_metrics.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/http/prometheus_text_test_util.h"

namespace regent::worker {
namespace {

using regent::testing::metricsMatch;

class FakeWorker final : public WorkerHttpHost {
 public:
  std::optional<std::string> notReadyReason() const override { return reason; }
  uint64_t registeredEpoch() const override { return epoch; }
  uint64_t highestEpoch() const override { return highest; }
  const taskexecutor::TaskExecutorCounters& counters() const override { return taskCounters; }
  const std::vector<taskexecutor::SlotState>& slots() const override { return slotStates; }
  const rpc::FencingCounters& fencingCounters() const override { return fencing; }
  size_t tasksRunning() const override { return running; }
  uint64_t mastersRefused(rpc::MasterRefusal reason) const override {
    return refused[static_cast<size_t>(reason)];
  }
  const taskexecutor::TaskContainment& containment() const override { return *contained; }
  std::optional<AttemptOutput> attemptOutput(const AttemptId& attempt,
                                             OutputStream stream) const override {
    auto found = outputs.find(attempt);
    if (found == outputs.end()) return std::nullopt;
    AttemptOutput output = found->second;
    output.path += stream == OutputStream::kStdout ? "/stdout" : "/stderr";
    output.attemptsFd = attemptsFd;
    return output;
  }
  bool outputTokenRequired() const override { return tokenRequired; }
  const std::optional<rpc::OutputReadKey>& outputReadKey() const override { return readKey; }

  std::optional<std::string> reason = std::string("no leader known");
  uint64_t epoch = 0;
  uint64_t highest = 0;
  taskexecutor::TaskExecutorCounters taskCounters;
  std::vector<taskexecutor::SlotState> slotStates;
  rpc::FencingCounters fencing;
  size_t running = 0;
  std::array<uint64_t, rpc::kMasterRefusalCount> refused{};
  std::map<AttemptId, AttemptOutput> outputs;  // path: the attempt's directory.
  int attemptsFd = -1;  // The directory holding the attempts' directories.
  std::unique_ptr<taskexecutor::TaskContainment> contained =
      taskexecutor::createTaskContainment({.mode = "subreaper"}).value();
  bool tokenRequired = false;
  std::optional<rpc::OutputReadKey> readKey;
};

struct Reply {
  uint status = 0;
  std::string body;
  std::string allow;
  std::string contentType;
  std::string contentRange;
  std::string attemptState;
  std::string noSniff;  // X-Content-Type-Options.
  std::string policy;   // Content-Security-Policy.
};

class WorkerHttpTest : public ::testing::Test {
 protected:
  // The metric families a worker registers (WorkerProcess), over the fake.
  WorkerHttpTest() {
    addWorkerMetrics(metrics_, worker_);
    http::addHttpServerMetrics(metrics_, [] { return nullptr; });
  }
  ~WorkerHttpTest() noexcept override = default;

  Reply fetch(const std::string& path, kj::HttpMethod method = kj::HttpMethod::GET,
              const std::string& range = "", const std::string& authorization = "") {
    auto client = kj::newHttpClient(routes_);
    kj::HttpHeaders headers(*table_);
    if (!range.empty()) headers.add("Range", range);
    if (!authorization.empty()) headers.add("Authorization", authorization);
    auto response =
        loop_.run(client->request(method, kj::StringPtr(path.c_str()), headers).response);
    Reply reply;
    reply.status = response.statusCode;
    reply.body = loop_.run(response.body->readAllText()).cStr();
    KJ_IF_MAYBE (allow, response.headers->get(KJ_ASSERT_NONNULL(table_->stringToId("Allow")))) {
      reply.allow = allow->cStr();
    }
    KJ_IF_MAYBE (type, response.headers->get(kj::HttpHeaderId::CONTENT_TYPE)) {
      reply.contentType = type->cStr();
    }
    response.headers->forEach([&](kj::StringPtr name, kj::StringPtr value) {
      if (name == "Content-Range") reply.contentRange = value.cStr();
      if (name == "X-Regent-Attempt-State") reply.attemptState = value.cStr();
      if (name == "X-Content-Type-Options") reply.noSniff = value.cStr();
      if (name == "Content-Security-Policy") reply.policy = value.cStr();
    });
    return reply;
  }

  // An attempt whose stdout holds `out` and whose stderr holds `err`.
  void addAttempt(const AttemptId& attempt, const std::string& state, const std::string& out,
                  const std::string& err = "") {
    const std::string dir = dir_.path() + "/" + attempt.toHex();
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/stdout", std::ios::binary) << out;
    std::ofstream(dir + "/stderr", std::ios::binary) << err;
    worker_.outputs[attempt] = AttemptOutput{.path = dir, .state = state};
  }

  static std::string url(const AttemptId& attempt, const std::string& stream = "stdout") {
    return "/v1/attempts/" + attempt.toHex() + "/" + stream;
  }

  EventLoop loop_;
  FakeWorker worker_;
  regent::testing::TempDir dir_{"worker-http-test"};
  kj::AutoCloseFd dirFd_{[this] {
    const int fd = ::open(dir_.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    worker_.attemptsFd = fd;
    return fd;
  }()};
  kj::Own<kj::HttpHeaderTable> table_ = http::makeHeaderTable();
  int64_t nowMs_ = 1'800'000'000'000;
  http::MetricsRegistry metrics_;
  WorkerHttpRoutes routes_{worker_, metrics_, loop_, *table_, [this] { return nowMs_; }};
};

const AttemptId kAttempt(7, 7);

TEST_F(WorkerHttpTest, HealthzAnswersOkWhateverTheRegistration) {
  Reply reply = fetch("/healthz");
  EXPECT_EQ(reply.status, 200u);
  EXPECT_EQ(reply.body, "ok\n");
}

TEST_F(WorkerHttpTest, ReadyzIs503WithTheReasonUntilRegistered) {
  Reply notReady = fetch("/readyz");
  EXPECT_EQ(notReady.status, 503u);
  EXPECT_EQ(notReady.body, "not ready: no leader known\n");

  worker_.reason = "registering with the leader of epoch 3 (last attempt: connection refused)";
  notReady = fetch("/readyz?verbose=1");
  EXPECT_EQ(notReady.status, 503u);
  EXPECT_EQ(notReady.body,
            "not ready: registering with the leader of epoch 3 (last attempt: connection "
            "refused)\n");

  worker_.reason = std::nullopt;
  worker_.epoch = 3;
  Reply ready = fetch("/readyz");
  EXPECT_EQ(ready.status, 200u);
  EXPECT_EQ(ready.body, "ok: registered with the leader of epoch 3\n");
}

TEST_F(WorkerHttpTest, UnknownPathIs404AndWrongMethodIs405) {
  Reply missing = fetch("/v1/jobs");
  EXPECT_EQ(missing.status, 404u);
  EXPECT_EQ(missing.body, "no such endpoint: /v1/jobs\n");
  Reply escaped = fetch("/x%0a\x7f");
  EXPECT_EQ(escaped.status, 404u);
  EXPECT_EQ(escaped.body, "no such endpoint: /x%0a\\x7f\n");
  Reply wrongMethod = fetch("/readyz", kj::HttpMethod::POST);
  EXPECT_EQ(wrongMethod.status, 405u);
  EXPECT_EQ(wrongMethod.allow, "GET");
}

TEST_F(WorkerHttpTest, MetricsParseAsPrometheusTextWithEveryWorkerFamily) {
  worker_.reason = std::nullopt;
  worker_.epoch = 4;
  worker_.highest = 5;
  worker_.taskCounters.registrations = 2;
  worker_.taskCounters.registrationAttempts = 7;
  worker_.taskCounters.resourceManagerLost = 1;
  worker_.slotStates = {{.index = 0},
                        {.index = 1, .allocation = AllocationId(1, 2), .job = JobId(3, 4)},
                        {.index = 2}};
  worker_.fencing.reject("TaskExecutorGateway.heartbeat");
  worker_.fencing.reject("TaskExecutorGateway.heartbeat");
  worker_.fencing.reject("Odd\"Name");
  Reply reply = fetch("/metrics");
  ASSERT_EQ(reply.status, 200u);
  EXPECT_EQ(reply.contentType, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_TRUE(metricsMatch(
      reply.body,
      {.samples =
           {{"regent_worker_registered", 1},
            {"regent_worker_epoch_highest", 5},
            {"regent_worker_registrations_total", 2},
            {"regent_worker_registration_attempts_total", 7},
            {"regent_worker_resource_manager_lost_total", 1},
            {"regent_worker_slots{state=\"free\"}", 2},
            {"regent_worker_slots{state=\"allocated\"}", 1},
            {"regent_worker_epoch_gate_refusals_total{method=\"TaskExecutorGateway.heartbeat\"}",
             2},
            {"regent_worker_epoch_gate_refusals_total{method=\"Odd\\\"Name\"}", 1}},
       .types = {{"regent_worker_registrations_total", "counter"},
                 {"regent_worker_slots", "gauge"}}}));

  worker_.reason = "no leader known";
  EXPECT_TRUE(metricsMatch(fetch("/metrics").body, {.samples = {{"regent_worker_registered", 0}}}));
}

TEST_F(WorkerHttpTest, MetricsCountTheWorkersTasks) {
  worker_.running = 2;
  worker_.taskCounters.tasksStarted = 5;
  worker_.taskCounters.tasksFinished = 1;
  worker_.taskCounters.tasksFailed = 1;
  worker_.taskCounters.tasksCanceled = 1;
  worker_.taskCounters.updatesDropped = 7;
  EXPECT_TRUE(metricsMatch(fetch("/metrics").body,
                           {.samples = {{"regent_worker_tasks_running", 2},
                                        {"regent_worker_tasks_started_total", 5},
                                        {"regent_worker_tasks_ended_total{state=\"finished\"}", 1},
                                        {"regent_worker_tasks_ended_total{state=\"failed\"}", 1},
                                        {"regent_worker_tasks_ended_total{state=\"canceled\"}", 1},
                                        {"regent_worker_updates_dropped_total", 7}},
                            .types = {{"regent_worker_updates_dropped_total", "counter"},
                                      {"regent_worker_tasks_ended_total", "counter"}}}));
}

TEST_F(WorkerHttpTest, MetricsCountTheMastersRefusedForNotProvingThemselves) {
  worker_.refused[static_cast<size_t>(rpc::MasterRefusal::kNotChallenged)] = 3;
  worker_.refused[static_cast<size_t>(rpc::MasterRefusal::kWrongProof)] = 1;
  EXPECT_TRUE(metricsMatch(
      fetch("/metrics").body,
      {.samples = {{"regent_rpc_master_auth_refusals_total{reason=\"not_challenged\"}", 3},
                   {"regent_rpc_master_auth_refusals_total{reason=\"wrong_proof\"}", 1}},
       .types = {{"regent_rpc_master_auth_refusals_total", "counter"},
                 {"regent_worker_tasks_running", "gauge"}}}));
}

TEST_F(WorkerHttpTest, MetricsNameHowTheWorkerContainsItsTasks) {
  EXPECT_TRUE(metricsMatch(fetch("/metrics").body,
                           {.samples = {{"regent_worker_task_containment{mode=\"subreaper\","
                                         "description=\"subreaper (worker.containment is "
                                         "subreaper)\"}",
                                         1}},
                            .types = {{"regent_worker_task_containment", "gauge"}}}));
}

TEST_F(WorkerHttpTest, AnAttemptsOutputIsServedWholeWithItsState) {
  addAttempt(kAttempt, "RUNNING", "hello\n", "oops\n");
  Reply out = fetch(url(kAttempt));
  EXPECT_EQ(out.status, 200u);
  EXPECT_EQ(out.body, "hello\n");
  EXPECT_EQ(out.attemptState, "RUNNING");
  EXPECT_EQ(out.contentType, "application/octet-stream");
  EXPECT_EQ(out.contentRange, "");
  // A task's bytes are never read as markup: no sniffing, and a sandbox that runs nothing.
  EXPECT_EQ(out.noSniff, "nosniff");
  EXPECT_EQ(out.policy, "default-src 'none'; sandbox");
  EXPECT_EQ(fetch("/healthz").noSniff, "nosniff");
  Reply err = fetch(url(kAttempt, "stderr"));
  EXPECT_EQ(err.status, 200u);
  EXPECT_EQ(err.body, "oops\n");

  addAttempt(kAttempt, "FINISHED", "");
  Reply empty = fetch(url(kAttempt));
  EXPECT_EQ(empty.status, 200u);
  EXPECT_EQ(empty.body, "");
  EXPECT_EQ(empty.attemptState, "FINISHED");
}

TEST_F(WorkerHttpTest, ARangeIsAnswered206WithItsContentRange) {
  addAttempt(kAttempt, "FAILED", "0123456789");
  Reply tail = fetch(url(kAttempt), kj::HttpMethod::GET, "bytes=4-");
  EXPECT_EQ(tail.status, 206u);
  EXPECT_EQ(tail.body, "456789");
  EXPECT_EQ(tail.contentRange, "bytes 4-9/10");
  EXPECT_EQ(tail.attemptState, "FAILED");
  Reply middle = fetch(url(kAttempt), kj::HttpMethod::GET, "bytes=2-5");
  EXPECT_EQ(middle.status, 206u);
  EXPECT_EQ(middle.body, "2345");
  EXPECT_EQ(middle.contentRange, "bytes 2-5/10");
  Reply beyond = fetch(url(kAttempt), kj::HttpMethod::GET, "bytes=8-100");
  EXPECT_EQ(beyond.status, 206u);
  EXPECT_EQ(beyond.body, "89");
  EXPECT_EQ(beyond.contentRange, "bytes 8-9/10");
}

TEST_F(WorkerHttpTest, ARangeFromTheEndOnIs416WithTheSize) {
  addAttempt(kAttempt, "RUNNING", "0123456789");
  Reply atEnd = fetch(url(kAttempt), kj::HttpMethod::GET, "bytes=10-");
  EXPECT_EQ(atEnd.status, 416u);
  EXPECT_EQ(atEnd.contentRange, "bytes */10");
  EXPECT_EQ(atEnd.attemptState, "RUNNING");
  addAttempt(kAttempt, "RUNNING", "");
  Reply emptyFile = fetch(url(kAttempt), kj::HttpMethod::GET, "bytes=0-");
  EXPECT_EQ(emptyFile.status, 416u);
  EXPECT_EQ(emptyFile.contentRange, "bytes */0");
}

TEST_F(WorkerHttpTest, NoResponseCarriesMoreThanOneMebibyte) {
  std::string big(kMaxOutputChunk + 10, 'x');
  big[kMaxOutputChunk] = 'y';
  addAttempt(kAttempt, "FINISHED", big);
  const std::string size = std::to_string(big.size());
  Reply whole = fetch(url(kAttempt));
  EXPECT_EQ(whole.status, 206u);
  EXPECT_EQ(whole.body.size(), kMaxOutputChunk);
  EXPECT_EQ(whole.contentRange, "bytes 0-1048575/" + size);
  Reply ranged = fetch(url(kAttempt), kj::HttpMethod::GET, "bytes=5-");
  EXPECT_EQ(ranged.status, 206u);
  EXPECT_EQ(ranged.body.size(), kMaxOutputChunk);
  EXPECT_EQ(ranged.contentRange, "bytes 5-1048580/" + size);
  Reply rest = fetch(url(kAttempt), kj::HttpMethod::GET, "bytes=1048576-");
  EXPECT_EQ(rest.status, 206u);
  EXPECT_EQ(rest.body, "yxxxxxxxxx");
  EXPECT_EQ(rest.contentRange, "bytes 1048576-1048585/" + size);
}

TEST_F(WorkerHttpTest, AnUnknownOrPrunedAttemptIs404) {
  Reply unknown = fetch(url(kAttempt));
  EXPECT_EQ(unknown.status, 404u);
  EXPECT_EQ(unknown.body,
            "no attempt " + kAttempt.toHex() +
                " on this worker (unknown, or its output was pruned)\n");
  // Known, but its directory removed since.
  worker_.outputs[kAttempt] = AttemptOutput{.path = dir_.path() + "/gone", .state = "FINISHED"};
  Reply pruned = fetch(url(kAttempt));
  EXPECT_EQ(pruned.status, 404u);
  EXPECT_EQ(pruned.attemptState, "FINISHED");
  Reply malformed = fetch("/v1/attempts/xyz/stdout");
  EXPECT_EQ(malformed.status, 404u);
  EXPECT_NE(malformed.body.find("not an attempt id"), std::string::npos) << malformed.body;
  Reply wrongStream = fetch("/v1/attempts/" + kAttempt.toHex() + "/stdin");
  EXPECT_EQ(wrongStream.status, 404u);
  Reply post = fetch(url(kAttempt), kj::HttpMethod::POST);
  EXPECT_EQ(post.status, 405u);
}

// The task user owns its attempt's directory: a link put in place of an output file is not
// followed.
TEST_F(WorkerHttpTest, AnOutputFileReplacedByALinkIsNotFollowed) {
  addAttempt(kAttempt, "FINISHED", "out");
  const std::string secret = dir_.path() + "/secret";
  std::ofstream(secret) << "not for the task";
  const std::string stdoutPath = dir_.path() + "/" + kAttempt.toHex() + "/stdout";
  std::filesystem::remove(stdoutPath);
  std::filesystem::create_symlink(secret, stdoutPath);
  Reply reply = fetch(url(kAttempt));
  EXPECT_EQ(reply.status, 403u);
  EXPECT_NE(reply.body.find("symbolic link"), std::string::npos) << reply.body;
  EXPECT_EQ(reply.body.find("not for the task"), std::string::npos) << reply.body;
}

// Where the data directory is misconfigured a task may replace more than its own files: an
// attempt's directory replaced by a link to a directory holding a file of that name is not
// followed either.
TEST_F(WorkerHttpTest, AnAttemptDirectoryReplacedByALinkIsNotFollowed) {
  addAttempt(kAttempt, "FINISHED", "out");
  regent::testing::TempDir elsewhere("worker-http-elsewhere");
  std::ofstream(elsewhere.path() + "/stdout") << "not for the task";
  const std::string attemptDir = dir_.path() + "/" + kAttempt.toHex();
  std::filesystem::remove_all(attemptDir);
  std::filesystem::create_directory_symlink(elsewhere.path(), attemptDir);
  Reply reply = fetch(url(kAttempt));
  EXPECT_EQ(reply.status, 403u);
  EXPECT_EQ(reply.body.find("not for the task"), std::string::npos) << reply.body;
}

// A hard link has the target's owner and contents: it is refused by its second name.
TEST_F(WorkerHttpTest, AnOutputFileReplacedByAHardLinkIsRefused) {
  addAttempt(kAttempt, "FINISHED", "out");
  const std::string secret = dir_.path() + "/secret";
  std::ofstream(secret) << "not for the task";
  const std::string stdoutPath = dir_.path() + "/" + kAttempt.toHex() + "/stdout";
  std::filesystem::remove(stdoutPath);
  std::filesystem::create_hard_link(secret, stdoutPath);
  Reply reply = fetch(url(kAttempt));
  EXPECT_EQ(reply.status, 403u);
  EXPECT_NE(reply.body.find("2 links"), std::string::npos) << reply.body;
  EXPECT_EQ(reply.body.find("not for the task"), std::string::npos) << reply.body;
}

// A worker holding a credential, with the key its registration in epoch 5 handed over.
class WorkerHttpTokenTest : public WorkerHttpTest {
 protected:
  WorkerHttpTokenTest() {
    worker_.tokenRequired = true;
    worker_.readKey = rpc::OutputReadKey{5, signer_.workerKey(kWorker, kRegistration)};
  }
  std::string bearer(const AttemptId& attempt, rpc::OutputStreamSet streams, int64_t atMs) {
    return "Bearer " + signer_.sign(kWorker, kRegistration, attempt, streams, atMs / 1000);
  }

  const ResourceId kWorker{7, 7};
  const RegistrationId kRegistration{8, 8};
  const rpc::OutputTokenSigner signer_{5, std::string(rpc::kOutputKeySize, 's')};
};

TEST_F(WorkerHttpTokenTest, OutputWithoutATokenIs401WhetherTheAttemptExistsOrNot) {
  addAttempt(kAttempt, "FINISHED", "hello\n");
  Reply known = fetch(url(kAttempt));
  Reply unknown = fetch(url(AttemptId(9, 9)));
  Reply malformed = fetch("/v1/attempts/nothex/stdout");
  EXPECT_EQ(known.status, 401u);
  EXPECT_EQ(known.body.find("hello"), std::string::npos);
  EXPECT_EQ(unknown.status, 401u);
  EXPECT_EQ(unknown.body, known.body);
  EXPECT_EQ(malformed.status, 401u);
}

TEST_F(WorkerHttpTokenTest, ATokenOfTheAttemptAndStreamReadsIt) {
  addAttempt(kAttempt, "FINISHED", "hello\n", "oops\n");
  Reply out = fetch(url(kAttempt), kj::HttpMethod::GET, "",
                    bearer(kAttempt, rpc::OutputStreamSet::kStdout, nowMs_));
  EXPECT_EQ(out.status, 200u) << out.body;
  EXPECT_EQ(out.body, "hello\n");
  // The scheme's case does not matter (RFC 9110).
  std::string lower = bearer(kAttempt, rpc::OutputStreamSet::kBoth, nowMs_);
  lower.replace(0, 6, "bearer");
  Reply err = fetch(url(kAttempt, "stderr"), kj::HttpMethod::GET, "", lower);
  EXPECT_EQ(err.status, 200u) << err.body;
  EXPECT_EQ(err.body, "oops\n");
}

TEST_F(WorkerHttpTokenTest, ForgedExpiredAndOtherAttemptTokensAre403) {
  addAttempt(kAttempt, "FINISHED", "hello\n");
  const AttemptId other(9, 9);
  addAttempt(other, "FINISHED", "other\n");
  const rpc::OutputTokenSigner forger(5, std::string(rpc::kOutputKeySize, 'f'));
  const std::vector<std::pair<std::string, std::string>> refused{
      {"Bearer " + forger.sign(kWorker, kRegistration, kAttempt, rpc::OutputStreamSet::kStdout,
                                nowMs_ / 1000),
       "signature does not verify"},
      {bearer(kAttempt, rpc::OutputStreamSet::kStdout, nowMs_ - 61'000), "expired"},
      {bearer(other, rpc::OutputStreamSet::kStdout, nowMs_), "for attempt " + other.toHex()},
      {bearer(kAttempt, rpc::OutputStreamSet::kStderr, nowMs_), "does not cover stdout"},
      {"Bearer " + std::string(88, '+'), "not base64url"},
      {"Bearer abc", "characters long"},
      {"Basic dXNlcjpwYXNz", "not \"Bearer <token>\""},
  };
  for (const auto& [authorization, why] : refused) {
    Reply reply = fetch(url(kAttempt), kj::HttpMethod::GET, "", authorization);
    EXPECT_EQ(reply.status, 403u) << authorization;
    EXPECT_NE(reply.body.find(why), std::string::npos) << reply.body;
    EXPECT_EQ(reply.body.find("hello"), std::string::npos) << reply.body;
  }
}

TEST_F(WorkerHttpTokenTest, WithoutAKeyYetAReadIs503) {
  addAttempt(kAttempt, "FINISHED", "hello\n");
  worker_.readKey.reset();
  Reply reply = fetch(url(kAttempt), kj::HttpMethod::GET, "",
                      bearer(kAttempt, rpc::OutputStreamSet::kStdout, nowMs_));
  EXPECT_EQ(reply.status, 503u) << reply.body;
}

TEST(ParseByteRange, AcceptsFromAndFromToOnly) {
  auto from = parseByteRange("bytes=5-");
  ASSERT_TRUE(from);
  EXPECT_EQ(from->first, 5u);
  EXPECT_FALSE(from->last);
  auto fromTo = parseByteRange("bytes=5-9");
  ASSERT_TRUE(fromTo);
  EXPECT_EQ(fromTo->last, 9u);
  for (const char* bad : {"bytes=-5", "bytes=9-5", "items=0-", "bytes=a-", "bytes=0-1,4-5", ""}) {
    EXPECT_FALSE(parseByteRange(bad)) << bad;
  }
}

}  // namespace
}  // namespace regent::worker

// Task output is not public when RPC authentication is on (docs/security.md, "Reading task
// output" and "What the HTTP endpoints reveal"), with real processes: a master requiring
// authentication, a worker holding the worker credential, regentctl with each role. The worker
// serves an attempt's output only against a token the leader signed for that attempt and stream
// (which a reader obtains over RPC), and the master's HTTP shows no attempt ids, worker addresses,
// commands or environment.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/integration/http_get_test_util.h"
#include "tests/integration/job_cluster_test_util.h"

namespace regent::testing {
namespace {

// Marks that appear only in the job's command, environment and output.
constexpr const char* kOutputMark = "out-mark-7f3a91";
constexpr const char* kErrorMark = "err-mark-7f3a91";
constexpr const char* kEnvValue = "env-value-5c2e08";

// The ZooKeeper ACL a master with RPC authentication requires: the masters' credential, and the
// one workers and regentctl read with.
constexpr const char* kMastersZooKeeper = "ha.zookeeper.auth=regent:master-secret";
constexpr const char* kReadersZooKeeper = "ha.zookeeper.read-auth=viewer:viewer-secret";

// An RPC credential and the ZooKeeper read credential ("" as the role: the latter only).
std::vector<std::string> credential(const std::string& role, const std::string& secretFile) {
  if (role.empty()) return {kReadersZooKeeper};
  return {"rpc.credential.role=" + role, "rpc.credential.secret-file=" + secretFile,
          kReadersZooKeeper};
}

// One cluster and one finished job for every test: the masters require authentication, tokens
// live 3 s (so that one can be seen expiring), and the job's two subtasks ran on the one worker.
class OutputAccess : public ::testing::Test {
 protected:
  ~OutputAccess() noexcept override = default;

  static void SetUpTestSuite() {
    dir_ = new TempDir("output-access");
    admin_ = writeSecret("admin", "admin-secret-0123456789");
    reader_ = writeSecret("reader", "reader-secret-0123456789");
    worker_ = writeSecret("worker", "worker-secret-0123456789");
    JobClusterOptions options{.workers = 1, .slotsPerWorker = 2};
    options.masterSet = {"rpc.auth-secret.admin-file=" + admin_,
                         "rpc.auth-secret.reader-file=" + reader_,
                         "rpc.auth-secret.worker-file=" + worker_, "rpc.output-token-ttl=3s",
                         kMastersZooKeeper, kReadersZooKeeper};
    options.workerSet = credential("worker", worker_);
    options.ctlSet = credential("admin", admin_);
    auto started = JobCluster::start("output-access", options);
    if (!started.ok()) {
      setUpError_ = started.error().message;
      return;
    }
    cluster_ = std::move(started).value().release();
    auto job = cluster_->submit(
        std::string("name: secretive\nvertices:\n  - name: talk\n    parallelism: 2\n"
                    "    command:\n      argv: [/bin/sh, -c, 'echo ") +
        kOutputMark + "; echo " + kErrorMark + " >&2']\n      env:\n        SECRET_VALUE: " +
        kEnvValue + "\n");
    if (!job.ok()) {
      setUpError_ = job.error().message;
      return;
    }
    job_ = job.value();
    auto clean = cluster_->waitForJobClean(job_, kJobsTimeout);
    if (!clean.ok() || clean.value().state != "FINISHED") {
      setUpError_ = "the job did not finish: " +
                    (clean.ok() ? clean.value().describe() : clean.error().message);
    }
  }

  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override { ASSERT_TRUE(setUpError_.empty()) << setUpError_; }

  static std::string writeSecret(const std::string& role, const std::string& secret) {
    const std::string path = dir_->path() + "/" + role + ".secret";
    std::ofstream(path) << secret << "\n";
    ::chmod(path.c_str(), 0600);
    return path;
  }

  // The attempt of subtask `index` and its worker's HTTP address, from `jobs status` as admin.
  static nlohmann::json subtask(uint32_t index) {
    auto status = cluster_->status(job_);
    EXPECT_TRUE(status.ok()) << status.error().message;
    if (!status.ok()) return {};
    const nlohmann::json* found = subtaskStatus(status.value(), "talk", index);
    EXPECT_NE(found, nullptr) << status.value().dump();
    return found == nullptr ? nlohmann::json{} : *found;
  }

  HttpReply get(const std::string& address, const std::string& path,
                const std::string& token = "") {
    std::vector<std::pair<std::string, std::string>> headers;
    if (!token.empty()) headers.emplace_back("Authorization", "Bearer " + token);
    return httpGet(cluster_->loop(), *table_, address, path, headers);
  }

  // `regentctl jobs logs --print-token` with `set` as its settings: the JSON it printed, or the
  // failure with its output.
  static Result<nlohmann::json> printToken(const std::vector<std::string>& set,
                                           const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args{"jobs", "logs", job_, "--vertex", "talk", "--print-token"};
    args.insert(args.end(), extra.begin(), extra.end());
    CtlResult printed = cluster_->ctlWith(set, args);
    const auto lines = jsonLines(printed.output);
    if (printed.exit.exitCode != 0 || lines.size() != 1) {
      return Error::fatal(printed.exit.describe() + "\n" + printed.output);
    }
    return nlohmann::json::parse(lines[0]);
  }

  static TempDir* dir_;
  static JobCluster* cluster_;
  static std::string setUpError_;
  static std::string admin_, reader_, worker_;
  static std::string job_;
  kj::Own<kj::HttpHeaderTable> table_ = kj::heap<kj::HttpHeaderTable>();
};

TempDir* OutputAccess::dir_ = nullptr;
JobCluster* OutputAccess::cluster_ = nullptr;
std::string OutputAccess::setUpError_;
std::string OutputAccess::admin_, OutputAccess::reader_, OutputAccess::worker_;
std::string OutputAccess::job_;

TEST_F(OutputAccess, WorkerRefusesOutputWithoutATokenAndDoesNotSayWhetherTheAttemptExists) {
  const nlohmann::json zero = subtask(0);
  const std::string attempt = textField(zero["attempt"], "attempt_id");
  const std::string address = textField(zero, "http_address");
  ASSERT_FALSE(attempt.empty()) << zero.dump();
  const std::string unknown = AttemptId::random().toHex();

  for (const char* stream : {"stdout", "stderr"}) {
    HttpReply known = get(address, "/v1/attempts/" + attempt + "/" + stream);
    HttpReply missing = get(address, "/v1/attempts/" + unknown + "/" + stream);
    EXPECT_EQ(known.status, 401u) << known.body;
    EXPECT_FALSE(containsText(known.body, kOutputMark) || containsText(known.body, kErrorMark))
        << known.body;
    // The same answer for an attempt the worker never had.
    EXPECT_EQ(missing.status, known.status) << missing.body;
    EXPECT_EQ(missing.body, known.body);
  }
}

TEST_F(OutputAccess, WorkerRefusesForgedTokens) {
  const nlohmann::json zero = subtask(0);
  const std::string attempt = textField(zero["attempt"], "attempt_id");
  const std::string address = textField(zero, "http_address");
  const std::string unknown = AttemptId::random().toHex();
  // Well-formed but signed by nobody, too short, not base64url.
  for (const std::string& forged : {std::string(88, 'A'), std::string("abc"),
                                    std::string(87, 'A') + "="}) {
    HttpReply known = get(address, "/v1/attempts/" + attempt + "/stdout", forged);
    HttpReply missing = get(address, "/v1/attempts/" + unknown + "/stdout", forged);
    EXPECT_EQ(known.status, 403u) << known.body;
    EXPECT_FALSE(containsText(known.body, kOutputMark)) << known.body;
    EXPECT_EQ(missing.status, known.status) << missing.body;
  }
}

TEST_F(OutputAccess, TokenFromTheLeaderReadsItsAttemptAndStreamOnlyUntilItExpires) {
  auto granted = printToken(credential("reader", reader_));
  ASSERT_OK(granted);
  const nlohmann::json grant = granted.value();
  const std::string token = textField(grant, "token");
  const std::string url = textField(grant, "url");
  const nlohmann::json zero = subtask(0);
  const nlohmann::json one = subtask(1);
  const std::string attempt = textField(zero["attempt"], "attempt_id");
  const std::string address = textField(zero, "http_address");
  EXPECT_EQ(url, "http://" + address + "/v1/attempts/" + attempt + "/stdout") << grant.dump();

  HttpReply read = get(address, "/v1/attempts/" + attempt + "/stdout", token);
  EXPECT_EQ(read.status, 200u) << read.body;
  EXPECT_EQ(read.body, std::string(kOutputMark) + "\n");

  // Not the other stream, not the other subtask's attempt.
  HttpReply otherStream = get(address, "/v1/attempts/" + attempt + "/stderr", token);
  EXPECT_EQ(otherStream.status, 403u) << otherStream.body;
  EXPECT_TRUE(containsText(otherStream.body, "does not cover stderr")) << otherStream.body;
  const std::string otherAttempt = textField(one["attempt"], "attempt_id");
  ASSERT_NE(otherAttempt, attempt);
  HttpReply otherOne = get(address, "/v1/attempts/" + otherAttempt + "/stdout", token);
  EXPECT_EQ(otherOne.status, 403u) << otherOne.body;
  EXPECT_FALSE(containsText(otherOne.body, kOutputMark)) << otherOne.body;

  // rpc.output-token-ttl is 3 s here: the same token is refused once it expired, by the worker's
  // clock (the bound is generous; the test waits for the refusal, not for a time).
  HttpReply last;
  for (int tries = 0; tries < 300; ++tries) {
    last = get(address, "/v1/attempts/" + attempt + "/stdout", token);
    if (last.status != 200) break;
    cluster_->loop().run(cluster_->loop().timer().afterDelay(100 * kj::MILLISECONDS));
  }
  EXPECT_EQ(last.status, 403u) << last.body;
  EXPECT_TRUE(containsText(last.body, "expired")) << last.body;
  EXPECT_FALSE(containsText(last.body, kOutputMark)) << last.body;
}

TEST_F(OutputAccess, RegentctlReadsOutputWithAReaderCredentialOnly) {
  CtlResult asReader = cluster_->ctlWith(credential("reader", reader_),
                                         {"jobs", "logs", job_, "--vertex", "talk"});
  EXPECT_EQ(asReader.exit.exitCode, 0) << asReader.output;
  EXPECT_EQ(asReader.output, std::string(kOutputMark) + "\n");
  CtlResult errors = cluster_->ctlWith(credential("reader", reader_),
                                       {"jobs", "logs", job_, "--vertex", "talk", "--stderr"});
  EXPECT_EQ(errors.exit.exitCode, 0) << errors.output;
  EXPECT_EQ(errors.output, std::string(kErrorMark) + "\n");

  // A worker credential and none cannot obtain a token, so they read nothing.
  for (const auto& set : {credential("worker", worker_), credential("", "")}) {
    CtlResult logs = cluster_->ctlWith(set, {"jobs", "logs", job_, "--vertex", "talk"});
    EXPECT_NE(logs.exit.exitCode, 0) << logs.output;
    EXPECT_FALSE(containsText(logs.output, kOutputMark)) << logs.output;
    auto token = printToken(set);
    EXPECT_FALSE(token.ok()) << token.value().dump();
  }
}

TEST_F(OutputAccess, MasterHttpRevealsNoAttemptsWorkersCommandsOrEnvironment) {
  auto masterAddress = cluster_->masterHttpAddress();
  ASSERT_OK(masterAddress);
  const nlohmann::json zero = subtask(0);
  const nlohmann::json one = subtask(1);
  const std::vector<std::string> secret{textField(zero["attempt"], "attempt_id"),
                                        textField(one["attempt"], "attempt_id"),
                                        textField(zero, "http_address"),
                                        kOutputMark,
                                        kErrorMark,
                                        kEnvValue,
                                        "/bin/sh"};
  for (const std::string& value : secret) ASSERT_FALSE(value.empty()) << zero.dump();
  for (const std::string& path :
       std::vector<std::string>{"/v1/jobs", "/v1/jobs/" + job_, "/v1/workers"}) {
    HttpReply reply = get(masterAddress.value(), path);
    EXPECT_EQ(reply.status, 200u) << path << ": " << reply.body;
    for (const std::string& value : secret) {
      EXPECT_FALSE(containsText(reply.body, value)) << path << " shows " << value << ":\n"
                                                    << reply.body;
    }
  }
  // What monitoring needs stays: the job, its name and state, the worker's slot counts.
  HttpReply detail = get(masterAddress.value(), "/v1/jobs/" + job_);
  EXPECT_TRUE(containsText(detail.body, job_)) << detail.body;
  EXPECT_TRUE(containsText(detail.body, "secretive")) << detail.body;
  EXPECT_TRUE(containsText(detail.body, "FINISHED")) << detail.body;
  HttpReply workers = get(masterAddress.value(), "/v1/workers");
  EXPECT_TRUE(containsText(workers.body, "\"slots\"")) << workers.body;
}

}  // namespace
}  // namespace regent::testing

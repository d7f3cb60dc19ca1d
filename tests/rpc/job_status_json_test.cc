// The one JSON shape of a job's status (rpc/job_status_json.h): what a reader sees, and what the
// public form (the masters' HTTP with RPC authentication on) leaves out.
#include "rpc/job_status_json.h"

#include <capnp/message.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "common/ids.h"
#include "rpc/wire_ids.h"

namespace regent::wire {
namespace {

constexpr int64_t kStarted = 1795500000000;  // 2026-11-24T06:00:00.000Z

// Job 0x42:1 "etl", RESTARTING, failed once in vertex "extract": subtask 0 runs attempt 0x7:7 on
// w1 (pid 4242) after a failure; subtask 1 has no attempt yet and no text set.
class JobStatusJsonTest : public ::testing::Test {
 protected:
  JobStatusJsonTest() {
    auto status = message_.initRoot<JobStatus>();
    setWireId(status.initJobId(), JobId(0x42, 1));
    status.setName("etl");
    status.setState(JobState::RESTARTING);
    status.setSubmittedAtMs(kStarted);
    auto failure = status.initFailure();
    failure.setMessage("exited with code 1");
    failure.setVertexName("extract");
    auto vertex = status.initVertices(1)[0];
    vertex.setName("extract");
    vertex.setParallelism(2);
    auto subtasks = vertex.initSubtasks(2);
    subtasks[0].setIndex(0);
    subtasks[0].setAttempts(2);
    setWireId(subtasks[0].initResourceId(), ResourceId(0xab, 1));
    subtasks[0].setHost("w1");
    subtasks[0].setHttpAddress("10.0.0.5:8082");
    subtasks[0].setLastFailure("exited with code 1");
    auto attempt = subtasks[0].initAttempt();
    setWireId(attempt.initAttemptId(), AttemptId(0x7, 7));
    attempt.setAttemptNumber(1);
    attempt.setState(ExecutionState::RUNNING);
    attempt.setPid(4242);
    attempt.setStartedAtMs(kStarted);
    subtasks[1].setIndex(1);
  }

  ~JobStatusJsonTest() noexcept override = default;

  JobStatus::Reader status() { return message_.getRoot<JobStatus>().asReader(); }

  capnp::MallocMessageBuilder message_;
};

TEST_F(JobStatusJsonTest, AReaderSeesEverythingWithUnsetTextsAsNullAndTimesAsIso) {
  const nlohmann::json json = jobStatusJson(status());
  EXPECT_EQ(json["job_id"], JobId(0x42, 1).toHex());
  EXPECT_EQ(json["state"], "RESTARTING");
  EXPECT_EQ(json["submitted_at"], "2026-11-24T06:00:00.000Z");
  EXPECT_TRUE(json["waiting_reason"].is_null());
  EXPECT_EQ(json["failure"]["message"], "exited with code 1");
  EXPECT_FALSE(json.contains("redacted"));
  const auto& running = json["vertices"][0]["subtasks"][0];
  EXPECT_EQ(running["host"], "w1");
  EXPECT_EQ(running["http_address"], "10.0.0.5:8082");
  EXPECT_EQ(running["resource_id"], ResourceId(0xab, 1).toHex());
  EXPECT_EQ(running["attempt"]["attempt_id"], AttemptId(0x7, 7).toHex());
  EXPECT_EQ(running["attempt"]["pid"], 4242);
  EXPECT_EQ(running["attempt"]["started_at"], "2026-11-24T06:00:00.000Z");
  EXPECT_EQ(running["attempt"]["ended_at"], "-");
  EXPECT_TRUE(running["attempt"]["failure_message"].is_null());
  const auto& waiting = json["vertices"][0]["subtasks"][1];
  for (const char* unset :
       {"attempt", "resource_id", "host", "http_address", "last_failure", "waiting_reason"}) {
    EXPECT_TRUE(waiting[unset].is_null()) << unset << ": " << waiting.dump();
  }
}

TEST_F(JobStatusJsonTest, ThePublicFormLeavesOutHostsAddressesAttemptIdsPidsAndMessages) {
  const nlohmann::json json = jobStatusJson(status(), JobStatusAudience::kPublic);
  EXPECT_TRUE(json["redacted"].is_string());
  EXPECT_FALSE(json["failure"].contains("message")) << json.dump();
  EXPECT_EQ(json["failure"]["vertex"], "extract");
  const auto& running = json["vertices"][0]["subtasks"][0];
  for (const char* hidden : {"host", "http_address", "last_failure"}) {
    EXPECT_FALSE(running.contains(hidden)) << hidden << " in " << running.dump();
  }
  for (const char* hidden : {"attempt_id", "pid", "failure_message"}) {
    EXPECT_FALSE(running["attempt"].contains(hidden)) << hidden << " in " << running.dump();
  }
  EXPECT_EQ(running["resource_id"], ResourceId(0xab, 1).toHex());
  EXPECT_EQ(running["attempt"]["state"], "RUNNING");
  const std::string text = json.dump();
  for (const char* secret : {"10.0.0.5", "w1", "4242", "exited with code 1"}) {
    EXPECT_EQ(text.find(secret), std::string::npos) << secret << " in " << text;
  }
}

// The keys docs/operations.md shows for /v1/jobs/<id>'s "job", at every level: no more, no fewer.
TEST_F(JobStatusJsonTest, TheKeysAreTheOnesDocsOperationsShowsForAJob) {
  auto keys = [](const nlohmann::json& object) {
    std::set<std::string> names;
    for (const auto& [key, value] : object.items()) names.insert(key);
    return names;
  };
  const nlohmann::json json = jobStatusJson(status());
  EXPECT_EQ(keys(json),
            (std::set<std::string>{"job_id", "name", "state", "submitted_at", "submitted_at_ms",
                                   "state_changed_at_ms", "ended_at_ms", "restarts", "tasks",
                                   "waiting_reason", "failure", "vertices"}));
  EXPECT_EQ(keys(json["tasks"]),
            (std::set<std::string>{"total", "pending", "running", "finished", "canceling",
                                   "canceled", "failed", "reconciling"}));
  EXPECT_EQ(keys(json["failure"]),
            (std::set<std::string>{"message", "vertex", "subtask_index", "exit_code", "at_ms"}));
  const auto& vertex = json["vertices"][0];
  EXPECT_EQ(keys(vertex), (std::set<std::string>{"name", "parallelism", "tasks", "subtasks"}));
  EXPECT_EQ(keys(vertex["subtasks"][0]),
            (std::set<std::string>{"index", "attempts", "resource_id", "host", "http_address",
                                   "last_failure", "waiting_reason", "attempt"}));
  EXPECT_EQ(
      keys(vertex["subtasks"][0]["attempt"]),
      (std::set<std::string>{"attempt_id", "attempt_number", "state", "pid", "exit_code", "signal",
                             "failure_message", "output_problem", "started_at", "started_at_ms",
                             "ended_at", "ended_at_ms", "state_changed_at_ms"}));
  EXPECT_TRUE(vertex["subtasks"][0]["attempt"]["output_problem"].is_null());
}

}  // namespace
}  // namespace regent::wire

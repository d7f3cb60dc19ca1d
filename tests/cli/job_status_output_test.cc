// How `regentctl jobs status` prints a job with its vertices and each subtask's latest attempt:
// the text people read and the JSON object scripts read, from a built jobStatus answer.
#include "cli/job_status_output.h"

#include <capnp/message.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/ids.h"
#include "rpc/wire_ids.h"

namespace regent::cli {
namespace {

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool hasLine(const std::string& text, const std::string& line) {
  for (const auto& each : lines(text)) {
    if (each == line) return true;
  }
  return false;
}

constexpr int64_t kStarted = 1795500000000;  // 2026-11-24T06:00:00.000Z
const AttemptId kRunning(0x1a2b3c4d00000000, 7);
const AttemptId kFailed(0x5e6f708100000000, 8);
const ResourceId kWorker(0xab, 1);

// Job 0x42:1 "etl", RESTARTING after one restart, with a job-level waiting reason. Vertex
// "extract" (parallelism 3): subtask 0 RUNNING (attempt kRunning, number 1, pid 4242, on w1,
// after a failed attempt: last failure kept); subtask 1 FAILED by SIGKILL (attempt kFailed,
// number 0, ended), restart pending; subtask 2 has no attempt and waits for a slot. Vertex "load"
// (parallelism 1) has no subtask detail.
class JobStatusOutputTest : public ::testing::Test {
 protected:
  JobStatusOutputTest() {
    auto answer = message_.initRoot<wire::DispatcherGateway::JobStatusResults>();
    auto status = answer.initStatus();
    wire::setWireId(status.initJobId(), JobId(0x42, 1));
    status.setName("etl");
    status.setState(wire::JobState::RESTARTING);
    status.setSubmittedAtMs(kStarted - 60000);
    status.setStateChangedAtMs(kStarted + 5000);
    status.setRestarts(1);
    status.setWaitingReason("1 subtask waits for slots of cpu=1.000 memory=1GiB; the cluster "
                            "has 0 free of 4");
    auto failure = status.initFailure();
    failure.setMessage("exited with code 1");
    failure.setVertexName("extract");
    auto vertices = status.initVertices(2);
    vertices[0].setName("extract");
    vertices[0].setParallelism(3);
    auto subtasks = vertices[0].initSubtasks(3);

    subtasks[0].setIndex(0);
    subtasks[0].setAttempts(2);
    auto running = subtasks[0].initAttempt();
    wire::setWireId(running.initAttemptId(), kRunning);
    running.setAttemptNumber(1);
    running.setState(wire::ExecutionState::RUNNING);
    running.setPid(4242);
    running.setStartedAtMs(kStarted);
    running.setStateChangedAtMs(kStarted);
    wire::setWireId(subtasks[0].initResourceId(), kWorker);
    subtasks[0].setHost("w1");
    subtasks[0].setHttpAddress("10.0.0.5:8082");
    subtasks[0].setLastFailure("exited with code 1");

    subtasks[1].setIndex(1);
    subtasks[1].setAttempts(1);
    auto failed = subtasks[1].initAttempt();
    wire::setWireId(failed.initAttemptId(), kFailed);
    failed.setState(wire::ExecutionState::FAILED);
    failed.setTermSignal(9);
    failed.setFailureMessage("killed by signal 9 (SIGKILL)");
    failed.setStartedAtMs(kStarted);
    failed.setEndedAtMs(kStarted + 1500);
    subtasks[1].setHost("w\x1b" "2");
    subtasks[1].setHttpAddress("10.0.0.6:8082");
    subtasks[1].setLastFailure("killed by signal 9 (SIGKILL)");
    subtasks[1].setWaitingReason("restarting in 1.2s");

    subtasks[2].setIndex(2);
    subtasks[2].setWaitingReason("waiting for a slot (cpu=1.000 memory=1GiB): 0 of 4 slots free");

    vertices[1].setName("load");
    vertices[1].setParallelism(1);
  }

  ~JobStatusOutputTest() noexcept override = default;

  wire::DispatcherGateway::JobStatusResults::Reader answer() {
    return message_.getRoot<wire::DispatcherGateway::JobStatusResults>().asReader();
  }

  capnp::MallocMessageBuilder message_;
};

TEST_F(JobStatusOutputTest, TheTextShowsTheJobThenEachVertexWithATableOfItsSubtasks) {
  const std::string text = jobStatusText(answer());
  EXPECT_EQ(lines(text), (std::vector<std::string>{
      "job id:         00000000000000420000000000000001",
      "name:           etl",
      "state:          RESTARTING",
      "submitted at:   2026-11-24T05:59:00.000Z",
      "state changed:  2026-11-24T06:00:05.000Z",
      "ended at:       -",
      "restarts:       1",
      "tasks:          0 total, 0 pending, 0 running, 0 finished, 0 canceling, 0 canceled, 0 "
      "failed, 0 reconciling",
      "waiting:        1 subtask waits for slots of cpu=1.000 memory=1GiB; the cluster has 0 "
      "free of 4",
      "vertex extract: parallelism 3, 0 total, 0 pending, 0 running, 0 finished, 0 canceling, 0 "
      "canceled, 0 failed, 0 reconciling",
      "  SUBTASK  ATTEMPT   #  HOST    STATE    EXIT      STARTED                   ENDED",
      "  0        1a2b3c4d  1  w1      RUNNING  -         2026-11-24T06:00:00.000Z  -",
      "           last failure: exited with code 1",
      "  1        5e6f7081  0  w\\x1b2  FAILED   signal 9  2026-11-24T06:00:00.000Z  "
      "2026-11-24T06:00:01.500Z",
      "           last failure: killed by signal 9 (SIGKILL)",
      "           waiting: restarting in 1.2s",
      "  2        -         -  -       -        -         -                         -",
      "           waiting: waiting for a slot (cpu=1.000 memory=1GiB): 0 of 4 slots free",
      "vertex load: parallelism 1, 0 total, 0 pending, 0 running, 0 finished, 0 canceling, 0 "
      "canceled, 0 failed, 0 reconciling",
      "failure:        exited with code 1",
  }));
}

TEST_F(JobStatusOutputTest, AFinishedAttemptShowsItsExitCode) {
  auto attempt = message_.getRoot<wire::DispatcherGateway::JobStatusResults>()
                     .getStatus()
                     .getVertices()[0]
                     .getSubtasks()[0]
                     .getAttempt();
  attempt.setState(wire::ExecutionState::FINISHED);
  attempt.setExitCode(0);
  attempt.setEndedAtMs(kStarted + 2000);
  EXPECT_TRUE(hasLine(jobStatusText(answer()),
                      "  0        1a2b3c4d  1  w1      FINISHED  0         "
                      "2026-11-24T06:00:00.000Z  2026-11-24T06:00:02.000Z"))
      << jobStatusText(answer());
}

TEST_F(JobStatusOutputTest, AnAttemptWhoseOutputIsIncompleteSaysWhyInTextAndJson) {
  auto attempt = message_.getRoot<wire::DispatcherGateway::JobStatusResults>()
                     .getStatus()
                     .getVertices()[0]
                     .getSubtasks()[0]
                     .getAttempt();
  attempt.setState(wire::ExecutionState::FINISHED);
  attempt.setOutputProblem("stdout truncated at 4096 bytes (worker.attempt-output.max)");
  EXPECT_TRUE(hasLine(jobStatusText(answer()),
                      "           output: stdout truncated at 4096 bytes "
                      "(worker.attempt-output.max)"))
      << jobStatusText(answer());
  const auto json = nlohmann::json::parse(jobStatusJson(answer()));
  EXPECT_EQ(json["vertices"][0]["subtasks"][0]["attempt"]["output_problem"],
            "stdout truncated at 4096 bytes (worker.attempt-output.max)");
  EXPECT_TRUE(json["vertices"][0]["subtasks"][1]["attempt"]["output_problem"].is_null());
}

TEST_F(JobStatusOutputTest, AJobWithoutWaitingReasonOrSubtasksPrintsNeitherLine) {
  auto status = message_.getRoot<wire::DispatcherGateway::JobStatusResults>().getStatus();
  status.setWaitingReason("");
  status.getVertices()[0].initSubtasks(0);
  const std::string text = jobStatusText(answer());
  EXPECT_EQ(text.find("waiting"), std::string::npos) << text;
  EXPECT_EQ(text.find("SUBTASK"), std::string::npos) << text;
}

TEST_F(JobStatusOutputTest, TheJsonCarriesEverySubtaskWithItsLatestAttempt) {
  const std::string line = jobStatusJson(answer());
  ASSERT_EQ(lines(line).size(), 1u);
  ASSERT_EQ(line.back(), '\n');
  const auto json = nlohmann::json::parse(line);
  EXPECT_EQ(json["job_id"], "00000000000000420000000000000001");
  EXPECT_EQ(json["state"], "RESTARTING");
  EXPECT_EQ(json["restarts"], 1);
  EXPECT_EQ(json["waiting_reason"],
            "1 subtask waits for slots of cpu=1.000 memory=1GiB; the cluster has 0 free of 4");
  EXPECT_EQ(json["failure"]["message"], "exited with code 1");
  ASSERT_EQ(json["vertices"].size(), 2u);
  const auto& subtasks = json["vertices"][0]["subtasks"];
  ASSERT_EQ(subtasks.size(), 3u);

  const auto& running = subtasks[0];
  EXPECT_EQ(running["index"], 0);
  EXPECT_EQ(running["attempts"], 2);
  EXPECT_EQ(running["resource_id"], kWorker.toHex());
  EXPECT_EQ(running["host"], "w1");
  EXPECT_EQ(running["http_address"], "10.0.0.5:8082");
  EXPECT_EQ(running["last_failure"], "exited with code 1");
  EXPECT_TRUE(running["waiting_reason"].is_null());
  EXPECT_EQ(running["attempt"]["attempt_id"], kRunning.toHex());
  EXPECT_EQ(running["attempt"]["attempt_number"], 1);
  EXPECT_EQ(running["attempt"]["state"], "RUNNING");
  EXPECT_EQ(running["attempt"]["pid"], 4242);
  EXPECT_EQ(running["attempt"]["started_at"], "2026-11-24T06:00:00.000Z");
  EXPECT_EQ(running["attempt"]["started_at_ms"], kStarted);
  EXPECT_EQ(running["attempt"]["ended_at"], "-");
  EXPECT_EQ(running["attempt"]["ended_at_ms"], 0);
  EXPECT_TRUE(running["attempt"]["failure_message"].is_null());

  const auto& failed = subtasks[1];
  EXPECT_EQ(failed["host"], "w\x1b" "2");  // JSON escapes it; the value is as sent.
  EXPECT_EQ(failed["attempt"]["state"], "FAILED");
  EXPECT_EQ(failed["attempt"]["signal"], 9);
  EXPECT_EQ(failed["attempt"]["failure_message"], "killed by signal 9 (SIGKILL)");
  EXPECT_EQ(failed["attempt"]["ended_at_ms"], kStarted + 1500);
  EXPECT_EQ(failed["waiting_reason"], "restarting in 1.2s");

  const auto& waiting = subtasks[2];
  EXPECT_TRUE(waiting["attempt"].is_null());
  EXPECT_TRUE(waiting["resource_id"].is_null());
  EXPECT_TRUE(waiting["host"].is_null());
  EXPECT_EQ(waiting["waiting_reason"],
            "waiting for a slot (cpu=1.000 memory=1GiB): 0 of 4 slots free");

  EXPECT_EQ(json["vertices"][1]["name"], "load");
  EXPECT_TRUE(json["vertices"][1]["subtasks"].empty());
}

TEST_F(JobStatusOutputTest, TheJsonOfAnEndedJobCarriesItsResultAndNoWaitingReason) {
  auto answer = message_.getRoot<wire::DispatcherGateway::JobStatusResults>();
  auto status = answer.getStatus();
  status.setState(wire::JobState::FINISHED);
  status.setWaitingReason("");
  status.initVertices(0);
  auto result = answer.initResult();
  result.setState(wire::JobState::FINISHED);
  result.setClean(true);
  const auto json = nlohmann::json::parse(jobStatusJson(answer.asReader()));
  EXPECT_TRUE(json["waiting_reason"].is_null());
  EXPECT_TRUE(json["vertices"].empty());
  EXPECT_EQ(json["result"]["state"], "FINISHED");
  EXPECT_EQ(json["result"]["clean"], true);
  EXPECT_TRUE(hasLine(jobStatusText(answer.asReader()), "result:         FINISHED"));
}

}  // namespace
}  // namespace regent::cli

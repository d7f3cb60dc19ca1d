// The JSON shape of a job's status (see job_status_json.h).
#include "rpc/job_status_json.h"

#include <nlohmann/json.hpp>
#include <string_view>

#include "common/ids.h"
#include "common/time.h"
#include "common/utf8.h"
#include "rpc/wire_ids.h"

namespace regent::wire {
namespace {

// What a public answer says in place of what it left out.
constexpr const char* kRedacted =
    "RPC authentication is on: attempt ids, pids, worker hosts and addresses and failure messages "
    "are left out; regentctl (role reader) shows them";

std::string textOf(capnp::Text::Reader text) {
  return sanitizeUtf8(std::string_view(text.begin(), text.size()));
}

// The text, or null for an empty text (a reason or address the master did not set).
nlohmann::json textOrNull(capnp::Text::Reader text) {
  if (text.size() == 0) return nullptr;
  return textOf(text);
}

nlohmann::json taskCountsJson(TaskCounts::Reader tasks) {
  return {{"total", tasks.getTotal()},         {"pending", tasks.getPending()},
          {"running", tasks.getRunning()},     {"finished", tasks.getFinished()},
          {"canceling", tasks.getCanceling()}, {"canceled", tasks.getCanceled()},
          {"failed", tasks.getFailed()},       {"reconciling", tasks.getReconciling()}};
}

nlohmann::json attemptJson(TaskExecutionState::Reader attempt) {
  return {{"attempt_id", idFromWire<AttemptId>(attempt.getAttemptId()).toHex()},
          {"attempt_number", attempt.getAttemptNumber()},
          {"state", enumNameUpper(attempt.getState())},
          {"pid", attempt.getPid()},
          {"exit_code", attempt.getExitCode()},
          {"signal", attempt.getTermSignal()},
          {"failure_message", textOrNull(attempt.getFailureMessage())},
          {"output_problem", textOrNull(attempt.getOutputProblem())},
          {"started_at", timeOrDash(attempt.getStartedAtMs())},
          {"started_at_ms", attempt.getStartedAtMs()},
          {"ended_at", timeOrDash(attempt.getEndedAtMs())},
          {"ended_at_ms", attempt.getEndedAtMs()},
          {"state_changed_at_ms", attempt.getStateChangedAtMs()}};
}

nlohmann::json subtaskJson(SubtaskStatus::Reader subtask, JobStatusAudience audience) {
  auto resourceId = idFromWireIfSet<ResourceId>(subtask.hasResourceId(), subtask.getResourceId());
  nlohmann::json json{
      {"index", subtask.getIndex()},
      {"attempts", subtask.getAttempts()},
      {"attempt", subtask.hasAttempt() ? attemptJson(subtask.getAttempt()) : nullptr},
      {"resource_id", resourceId ? nlohmann::json(resourceId->toHex()) : nullptr},
      {"host", textOrNull(subtask.getHost())},
      {"http_address", textOrNull(subtask.getHttpAddress())},
      {"last_failure", textOrNull(subtask.getLastFailure())},
      {"waiting_reason", textOrNull(subtask.getWaitingReason())}};
  if (audience == JobStatusAudience::kPublic) {
    for (const char* key : {"host", "http_address", "last_failure"}) json.erase(key);
    if (json["attempt"].is_object()) {
      for (const char* key : {"attempt_id", "pid", "failure_message"}) json["attempt"].erase(key);
    }
  }
  return json;
}

}  // namespace

nlohmann::json jobStatusJson(JobStatus::Reader job, JobStatusAudience audience) {
  nlohmann::json json{{"job_id", idFromWire<JobId>(job.getJobId()).toHex()},
                      {"name", textOf(job.getName())},
                      {"state", enumNameUpper(job.getState())},
                      {"submitted_at", timeOrDash(job.getSubmittedAtMs())},
                      {"submitted_at_ms", job.getSubmittedAtMs()},
                      {"state_changed_at_ms", job.getStateChangedAtMs()},
                      {"ended_at_ms", job.getEndedAtMs()},
                      {"restarts", job.getRestarts()},
                      {"tasks", taskCountsJson(job.getTasks())},
                      {"waiting_reason", textOrNull(job.getWaitingReason())},
                      {"failure", nullptr}};
  if (job.getState() == JobState::CORRUPT) json["corrupt_reason"] = textOf(job.getCorruptReason());
  if (job.getSubtasksOmitted().size() > 0) {
    json["subtasks_omitted"] = textOf(job.getSubtasksOmitted());
  }
  nlohmann::json vertices = nlohmann::json::array();
  for (auto vertex : job.getVertices()) {
    nlohmann::json subtasks = nlohmann::json::array();
    for (auto subtask : vertex.getSubtasks()) subtasks.push_back(subtaskJson(subtask, audience));
    vertices.push_back({{"name", textOf(vertex.getName())},
                        {"parallelism", vertex.getParallelism()},
                        {"tasks", taskCountsJson(vertex.getTasks())},
                        {"subtasks", std::move(subtasks)}});
  }
  json["vertices"] = std::move(vertices);
  if (job.hasFailure()) {
    auto failure = job.getFailure();
    json["failure"] = {{"message", textOf(failure.getMessage())},
                       {"vertex", textOf(failure.getVertexName())},
                       {"subtask_index", failure.getSubtaskIndex()},
                       {"exit_code", failure.getExitCode()},
                       {"at_ms", failure.getAtMs()}};
    if (audience == JobStatusAudience::kPublic) json["failure"].erase("message");
  }
  if (audience == JobStatusAudience::kPublic) json["redacted"] = kRedacted;
  return json;
}

}  // namespace regent::wire

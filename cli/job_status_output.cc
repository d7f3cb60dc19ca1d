// Text and JSON rendering of `regentctl jobs status` (see job_status_output.h).
#include "cli/job_status_output.h"

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/regentctl_output.h"
#include "common/ids.h"
#include "rpc/job_status_json.h"
#include "rpc/wire_ids.h"

namespace regent::cli {
namespace {

// How many hex digits of an attempt id the table shows: enough to tell a job's attempts apart.
constexpr size_t kShortAttemptId = 8;

std::string taskCountsText(wire::TaskCounts::Reader tasks) {
  std::ostringstream text;
  text << tasks.getTotal() << " total, " << tasks.getPending() << " pending, "
       << tasks.getRunning() << " running, " << tasks.getFinished() << " finished, "
       << tasks.getCanceling() << " canceling, " << tasks.getCanceled() << " canceled, "
       << tasks.getFailed() << " failed, " << tasks.getReconciling() << " reconciling";
  return text.str();
}

bool terminal(wire::ExecutionState state) {
  return state == wire::ExecutionState::FINISHED || state == wire::ExecutionState::FAILED ||
         state == wire::ExecutionState::CANCELED;
}

// The EXIT cell: "signal 9" for a process killed by a signal, the exit code once the attempt
// ended, "-" while it has not.
std::string exitText(wire::TaskExecutionState::Reader attempt) {
  if (attempt.getTermSignal() != 0) return "signal " + std::to_string(attempt.getTermSignal());
  if (!terminal(attempt.getState())) return "-";
  return std::to_string(attempt.getExitCode());
}

// A vertex's subtask table, indented under its vertex line, with each subtask's last failure and
// waiting reason on indented lines below its row.
std::string subtasksText(capnp::List<wire::SubtaskStatus>::Reader subtasks) {
  std::vector<std::vector<std::string>> rows{
      {"SUBTASK", "ATTEMPT", "#", "HOST", "STATE", "EXIT", "STARTED", "ENDED"}};
  for (auto subtask : subtasks) {
    std::vector<std::string> row{std::to_string(subtask.getIndex())};
    if (subtask.hasAttempt()) {
      auto attempt = subtask.getAttempt();
      row.push_back(wire::idFromWire<AttemptId>(attempt.getAttemptId())
                        .toHex()
                        .substr(0, kShortAttemptId));
      row.push_back(std::to_string(attempt.getAttemptNumber()));
      row.push_back(subtask.getHost().size() == 0 ? "-" : shownText(subtask.getHost()));
      row.push_back(wire::enumNameUpper(attempt.getState()));
      row.push_back(exitText(attempt));
      row.push_back(timeOrDash(attempt.getStartedAtMs()));
      row.push_back(timeOrDash(attempt.getEndedAtMs()));
    } else {
      row.insert(row.end(), {"-", "-", "-", "-", "-", "-", "-"});
    }
    rows.push_back(std::move(row));
  }
  std::istringstream table(alignColumns(rows));
  std::string text;
  std::string line;
  std::getline(table, line);
  text += "  " + line + "\n";
  // Detail lines start under ATTEMPT: the indent, SUBTASK (the widest cell of that column: no
  // index has 7 digits) and the two spaces between columns.
  const std::string detailIndent(2 + 7 + 2, ' ');
  for (auto subtask : subtasks) {
    std::getline(table, line);
    text += "  " + line + "\n";
    if (subtask.getLastFailure().size() > 0) {
      text += detailIndent + "last failure: " + shownText(subtask.getLastFailure()) + "\n";
    }
    if (subtask.hasAttempt() && subtask.getAttempt().getOutputProblem().size() > 0) {
      text += detailIndent + "output: " + shownText(subtask.getAttempt().getOutputProblem()) +
              "\n";
    }
    if (subtask.getWaitingReason().size() > 0) {
      text += detailIndent + "waiting: " + shownText(subtask.getWaitingReason()) + "\n";
    }
  }
  return text;
}

}  // namespace

std::string jobStatusText(wire::DispatcherGateway::JobStatusResults::Reader answer) {
  auto status = answer.getStatus();
  const std::string jobId = wire::idFromWire<JobId>(status.getJobId()).toHex();
  std::ostringstream text;
  text << "job id:         " << jobId << "\n"
       << "name:           " << shownText(status.getName()) << "\n"
       << "state:          " << wire::enumNameUpper(status.getState()) << "\n"
       << "submitted at:   " << timeOrDash(status.getSubmittedAtMs()) << "\n"
       << "state changed:  " << timeOrDash(status.getStateChangedAtMs()) << "\n"
       << "ended at:       " << timeOrDash(status.getEndedAtMs()) << "\n"
       << "restarts:       " << status.getRestarts() << "\n"
       << "tasks:          " << taskCountsText(status.getTasks()) << "\n";
  if (status.getWaitingReason().size() > 0) {
    text << "waiting:        " << shownText(status.getWaitingReason()) << "\n";
  }
  if (status.getState() == wire::JobState::CORRUPT) {
    text << "corrupt:        " << shownText(status.getCorruptReason()) << "\n"
         << "                the stored JobGraph record is left in place; remove it with "
            "regentctl jobs remove-corrupt "
         << jobId << "\n";
  }
  for (auto vertex : status.getVertices()) {
    text << "vertex " << shownText(vertex.getName()) << ": parallelism "
         << vertex.getParallelism() << ", " << taskCountsText(vertex.getTasks()) << "\n";
    if (vertex.getSubtasks().size() > 0) text << subtasksText(vertex.getSubtasks());
  }
  if (status.getSubtasksOmitted().size() > 0) {
    text << "subtasks:       not shown: " << shownText(status.getSubtasksOmitted()) << "\n";
  }
  if (status.hasFailure()) {
    text << "failure:        " << shownText(status.getFailure().getMessage()) << "\n";
  }
  if (answer.hasResult()) {
    auto result = answer.getResult();
    text << "result:         " << wire::enumNameUpper(result.getState())
         << (result.getClean() ? "" : " (cleanup not yet confirmed)") << "\n";
  }
  return text.str();
}

std::string jobStatusJson(wire::DispatcherGateway::JobStatusResults::Reader answer) {
  nlohmann::json json = wire::jobStatusJson(answer.getStatus());
  if (answer.hasResult()) {
    auto result = answer.getResult();
    json["result"] = {{"state", wire::enumNameUpper(result.getState())},
                      {"clean", result.getClean()},
                      {"ended_at_ms", result.getEndedAtMs()},
                      {"net_runtime_ms", result.getNetRuntimeMs()}};
  }
  return jsonLine(json);
}

}  // namespace regent::cli

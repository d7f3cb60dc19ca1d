// How `regentctl jobs status` prints one job: its fields, its vertices and, per vertex, each
// subtask with its latest attempt (docs/operations.md shows both shapes).
#pragma once

#include <string>

#include "rpc/schema/gateways.capnp.h"

namespace regent::cli {

// The text for people: one "name: value" line per job field (a "waiting:" line when the job says
// why subtasks wait), then per vertex a line with its counts and a table of its subtasks (when
// the master sent them; an ended job has none): SUBTASK, ATTEMPT (the first 8 hex digits of the
// latest attempt's id), # (its attempt number, 0 for the first), HOST (its worker), STATE, EXIT
// (the exit code, "signal N", or "-" while it runs), STARTED, ENDED (ISO times, "-" when not
// reached). Under a subtask's row, indented, its "last failure:" and "waiting:" lines when set.
// Then "failure:" and "result:" when present. Text from the master is shown with control
// characters escaped.
std::string jobStatusText(wire::DispatcherGateway::JobStatusResults::Reader answer);

// The same as one JSON object on one line (with its newline): the job as wire::jobStatusJson
// writes it (rpc/job_status_json.h, the shape of /v1/jobs/<id>'s "job"), and "result" (state,
// clean, ended_at_ms, net_runtime_ms) once the job has one.
std::string jobStatusJson(wire::DispatcherGateway::JobStatusResults::Reader answer);

}  // namespace regent::cli

// The one JSON shape of a job's status (wire::JobStatus, what DispatcherGateway.jobStatus
// answers): `regentctl jobs status --json` and the masters' /v1/jobs/<id> both write it with
// this, so that a script reads either alike (docs/operations.md describes the fields).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "rpc/schema/jobs.capnp.h"

namespace regent::wire {

// Whether a job status JSON carries everything, or only what may be shown to anyone (the masters'
// unauthenticated HTTP with RPC authentication on: docs/security.md, "What the HTTP endpoints
// reveal").
enum class JobStatusAudience { kReader, kPublic };

// The job as one JSON object: job_id, name, state, submitted_at (ISO, "-" when 0),
// submitted_at_ms, state_changed_at_ms, ended_at_ms, restarts, tasks (counts by state),
// waiting_reason (null when nothing waits), failure (null unless the job failed or restarts:
// message, vertex, subtask_index, exit_code, at_ms), corrupt_reason (a CORRUPT job only) and
// vertices: name, parallelism, tasks and subtasks (when the status carries them): index,
// attempts, resource_id, host, http_address, last_failure, waiting_reason (null when unset) and
// attempt (null before the first): attempt_id, attempt_number, state, pid, exit_code, signal,
// failure_message, output_problem (null when unset), started_at, started_at_ms, ended_at,
// ended_at_ms, state_changed_at_ms. Text is sanitized (invalid UTF-8 replaced).
// kPublic leaves out each subtask's host, http_address and last_failure, its attempt's
// attempt_id, pid and failure_message, and the failure's message, and says so in "redacted".
nlohmann::json jobStatusJson(JobStatus::Reader job,
                             JobStatusAudience audience = JobStatusAudience::kReader);

}  // namespace regent::wire

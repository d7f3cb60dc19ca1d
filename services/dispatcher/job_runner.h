// What the Dispatcher needs from whatever runs its jobs (the term's JobMasters,
// services/jobmaster/), and what it is told back. The Dispatcher writes the JobGraphs and the
// JobResults: a runner never writes a JobResult or removes a JobGraph; it reports that a job
// reached a terminal state and releases the job's work on workers when the Dispatcher asks. The
// one record a runner writes is each job's progress (store::JobProgressStore, wire::JobProgress),
// which the Dispatcher reads at recovery, hands to start(), and removes with the JobGraph.
//
// Ending a job (docs/jobgraph.md, "How a job runs and ends"): the runner reports jobEnded(). For
// a FINISHED end the Dispatcher stores the result clean, the detail and the cleanup (JobGraph and
// progress record removed) in one transaction, then calls release() (slots freed, the JobMaster
// disconnected from the ResourceManager). For a FAILED one it writes the dirty JobResult, calls
// release() (attempts cancelled too), then removes the JobGraph and marks the result clean in one
// transaction. cancel goes the FAILED way, the Dispatcher deciding the end itself.
#pragma once

#include <capnp/common.h>
#include <kj/array.h>
#include <kj/async.h>

#include <cstdint>
#include <string>

#include "common/ids.h"
#include "rpc/schema/jobs.capnp.h"

namespace regent::dispatcher {

// How a job ended, as its runner saw it (becomes the JobResult).
struct JobEnd {
  wire::JobState state = wire::JobState::FINISHED;  // FINISHED or FAILED (CANCELED comes
                                                    // from the Dispatcher's cancel).
  uint32_t restarts = 0;
  uint64_t netRuntimeMs = 0;
  // FAILED: the root cause. Empty message otherwise.
  std::string failureMessage;
  std::string failureVertex;
  uint32_t failureSubtask = 0;
  AttemptId failureAttempt;  // Null when not one attempt's failure.
  int32_t failureExitCode = 0;
  int64_t failureAtMs = 0;
};

// Told by the runner; implemented by the Dispatcher. Loop-thread only; the runner may call these
// from within its own callbacks, never from inside a JobRunner method call.
class JobRunnerListener {
 public:
  virtual ~JobRunnerListener() = default;
  // The job's live state changed (RUNNING, RESTARTING, FAILING, ...); not for terminal states.
  virtual void jobStateChanged(JobId job, wire::JobState state, int64_t atMs) = 0;
  // The job reached FINISHED or FAILED. Called at most once per job; the runner keeps the job's
  // attempts as they are (it deploys and restarts nothing more) until release().
  virtual void jobEnded(JobId job, const JobEnd& end) = 0;
};

// Runs accepted jobs. Loop-thread only. Owned by the term next to the Dispatcher; the Dispatcher
// holds a reference and calls it only between recover() and its destruction.
class JobRunner {
 public:
  virtual ~JobRunner() = default;
  virtual void setListener(JobRunnerListener& listener) = 0;
  // Starts running `job` (validated and persisted). `graph` (canonical, submittedAtMs set) stays
  // valid until release() resolves or the runner is destroyed. Called once per job per term.
  // `recovered`: the job's progress record as an earlier term left it (recovery only; none for a
  // job submitted in this term, or when the record is missing or corrupt), valid during the
  // call only. With it the job starts RECONCILING (docs/jobgraph.md, "Failover"): its finished
  // subtasks stay finished, its live attempts are waited for (adopted when a worker offers them),
  // and nothing is deployed until reconciliation ends.
  virtual void start(JobId job, wire::JobGraph::Reader graph,
                     kj::Maybe<wire::JobProgress::Reader> recovered) = 0;
  // The job is over (its result is stored, dirty or, FINISHED, clean): cancel its attempts and wait for their ends
  // (at most `heartbeat.timeout`), free its slots (each freeSlot bounded by `rpc.call-timeout`),
  // disconnect its JobMaster from the ResourceManager, and forget the job. Resolves when done
  // with the job's final detail: what describe() fills just before the job is forgotten (the
  // cancelled attempts in their final states), as one flat canonical JobStatus message; an empty
  // array when the runner does not run `job`. Never rejects (what could not be done is logged:
  // the workers' own heartbeats and the next leader clean up the rest).
  virtual kj::Promise<kj::Array<capnp::word>> release(JobId job, const std::string& cause) = 0;
  // Live detail of a running job for jobStatus: fills `status` (state, tasks, vertices with
  // their subtasks, failure, restarts, waitingReason); false when the runner does not run `job`.
  virtual bool describe(JobId job, wire::JobStatus::Builder status) const = 0;
  // Live counts for listJobs (tasks over all vertices, restarts); false when not running `job`.
  virtual bool counts(JobId job, wire::TaskCounts::Builder tasks, uint32_t& restarts) const = 0;
};

}  // namespace regent::dispatcher

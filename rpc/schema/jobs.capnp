# Job wire types: the submitted JobGraph (also the record in the JobGraphStore), task deployment
# and execution state, job status and the JobResult kept in the JobResultStore (docs/stores.md,
# docs/jobgraph.md).
@0xa5d8307a59ad9b0b;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("regent::wire");

using Common = import "/rpc/schema/common.capnp";
using Common.JobId;
using Common.AllocationId;
using Common.AttemptId;
using Common.ResourceId;
using Common.ResourceProfile;

# ---- JobGraph -------------------------------------------------------------------------------

struct JobGraph {
  # What a user submits (from YAML or JSON) and what the JobGraphStore persists before the job
  # runs. A DAG of vertices; edges point from upstream to downstream vertex.
  jobId @0 :JobId;                      # chosen by the submitter; resubmitting is idempotent
  name @1 :Text;                        # for humans; need not be unique across jobs
  vertices @2 :List(JobVertex);         # non-empty; vertex names unique within the job
  restartStrategy @3 :RestartStrategy;  # null = none
  submittedAtMs @4 :Int64;              # Unix ms, set by the Dispatcher on acceptance
}

struct JobVertex {
  # One operator of the job: `parallelism` identical subtasks, each a child process on a worker.
  name @0 :Text;                        # unique within the job; edges and failures refer to it
  parallelism @1 :UInt32;               # number of subtasks, >= 1
  command @2 :Command;
  resources @3 :ResourceProfile;        # per subtask; must fit some worker's slot profile
  upstream @4 :List(Text);              # names of vertices whose subtasks must all have
                                        # FINISHED before any subtask of this vertex starts
}

struct Command {
  # A process to spawn (no shell): argv[0] is resolved against PATH of the worker.
  argv @0 :List(Text);                  # non-empty
  env @1 :List(EnvVar);                 # added to the worker's environment, later entries win
  workingDir @2 :Text;                  # empty = the worker's per-attempt directory
}

struct EnvVar {
  # One environment variable of a task's process.
  name @0 :Text;
  value @1 :Text;
}

struct RestartStrategy {
  # What the JobMaster does when a subtask attempt fails. Restarts re-run the failed subtasks
  # (and the downstream subtasks that had not started); attempts count across the whole job.
  union {
    none @0 :Void;                      # first failure fails the job
    fixedDelay @1 :FixedDelay;
    exponentialDelay @2 :ExponentialDelay;
    failureRate @3 :FailureRate;
  }

  struct FixedDelay {
    # Restart after a constant delay, at most `attempts` times (Flink's fixed-delay).
    attempts @0 :UInt32;                # restarts allowed before the job fails
    delayMs @1 :UInt64;                 # wait between a failure and its restart
  }

  struct ExponentialDelay {
    # Restart after a delay that grows with each restart up to a cap (Flink's exponential-delay).
    initialDelayMs @0 :UInt64;
    maxDelayMs @1 :UInt64;
    multiplier @2 :Float64;             # delay grows by this factor per restart, >= 1
    resetAfterMs @3 :UInt64;            # a run this long without failure resets the delay
    attempts @4 :UInt32;                # 0 = unlimited
  }

  struct FailureRate {
    # Restart after a constant delay while failures stay below a rate (Flink's failure-rate).
    maxFailures @0 :UInt32;             # more failures than this within `intervalMs` fail the job
    intervalMs @1 :UInt64;
    delayMs @2 :UInt64;
  }
}

# ---- Execution ------------------------------------------------------------------------------

enum ExecutionState {
  # Lifecycle of one subtask attempt (Flink's ExecutionState). Terminal: finished, canceled,
  # failed. Transitions only move forward, so delivering a state twice is harmless.
  created @0;
  scheduled @1;      # waiting for a slot
  deploying @2;      # submitTask sent, process not yet spawned
  running @3;        # process spawned
  finished @4;       # exited with code 0
  canceling @5;      # cancelTask received, process being terminated
  canceled @6;
  failed @7;         # non-zero exit, signal, spawn error, or lost with its worker
  reconciling @8;    # known to a new JobMaster from the JobGraph, not yet reported by a worker
}

struct TaskDeployment {
  # Everything a worker needs to run one subtask attempt in an allocated slot (Flink's
  # TaskDeploymentDescriptor). Sent by the JobMaster with submitTask.
  jobId @0 :JobId;
  jobName @1 :Text;
  attemptId @2 :AttemptId;
  allocationId @3 :AllocationId;        # the slot's allocation; must belong to `jobId`
  vertexName @4 :Text;
  subtaskIndex @5 :UInt32;              # 0 .. parallelism-1
  parallelism @6 :UInt32;
  attemptNumber @7 :UInt32;             # 0 for the first attempt of this subtask
  command @8 :Command;
  resources @9 :ResourceProfile;
}

struct TaskExecutionState {
  # One attempt's state as a worker reports it (updateTaskExecutionState, slot reports, slot
  # offers). Idempotent by (attemptId, state).
  attemptId @0 :AttemptId;
  jobId @1 :JobId;
  allocationId @2 :AllocationId;
  vertexName @3 :Text;
  subtaskIndex @4 :UInt32;
  attemptNumber @5 :UInt32;
  state @6 :ExecutionState;
  pid @7 :UInt32;                       # child process id while running, else 0
  exitCode @8 :Int32;                   # meaningful when finished or failed by exit
  termSignal @9 :Int32;                 # signal that killed the process, 0 = none
  failureMessage @10 :Text;             # why it failed; empty unless failed
  startedAtMs @11 :Int64;               # Unix ms the process was spawned, 0 = not yet
  stateChangedAtMs @12 :Int64;          # Unix ms of the transition into `state`
  endedAtMs @13 :Int64;                 # Unix ms it reached a terminal state, 0 = not yet
  outputProblem @14 :Text;              # terminal: why its captured output is incomplete
                                        # ("stdout truncated at N bytes (worker.attempt-output.max)",
                                        # a write that failed); empty when whole
  workerFault @15 :Bool;                # failed: the worker could not start it for want of its
                                        # own resources (descriptors, processes, its attempt
                                        # directory), not through anything the task did; the
                                        # JobMaster runs it again elsewhere without counting a
                                        # restart (docs/jobgraph.md, "Worker faults")
}

# ---- Jobs -----------------------------------------------------------------------------------

enum JobState {
  # Lifecycle of a job (Flink's JobStatus). Globally terminal: finished, failed, canceled.
  created @0;        # accepted and persisted, no JobMaster running yet
  reconciling @1;    # a new leader's JobMaster is waiting for workers to report attempts (§8)
  running @2;
  failing @3;        # a failure exhausted the restart strategy; attempts being cancelled
  failed @4;
  cancelling @5;
  canceled @6;
  finished @7;       # every subtask finished
  restarting @8;     # waiting out a restart delay
  suspended @9;      # leadership lost; the next leader resumes the job
  corrupt @10;       # the stored JobGraph record does not decode; left in place for an operator
                     # (regentctl jobs remove-corrupt); the job cannot run or be resubmitted
}

struct TaskCounts {
  # Number of subtasks by the state of their latest attempt.
  total @0 :UInt32;
  pending @1 :UInt32;                   # created, scheduled or deploying
  running @2 :UInt32;
  finished @3 :UInt32;
  canceling @4 :UInt32;
  canceled @5 :UInt32;
  failed @6 :UInt32;
  reconciling @7 :UInt32;
}

struct VertexStatus {
  # One vertex of a running job: its subtasks counted by state.
  name @0 :Text;
  parallelism @1 :UInt32;
  tasks @2 :TaskCounts;
  subtasks @3 :List(SubtaskStatus);     # jobStatus only (empty in listJobs), by subtask index
}

struct SubtaskStatus {
  # One subtask of a running job and its latest attempt (regentctl jobs status).
  index @0 :UInt32;
  attempt @1 :TaskExecutionState;       # the latest attempt; null before the first one exists
  attempts @2 :UInt32;                  # attempts started so far for this subtask index
  resourceId @3 :ResourceId;            # the worker of the latest attempt; null before deployment
  host @4 :Text;                        # that worker's host
  httpAddress @5 :Text;                 # "host:port" serving the attempt's output (jobs logs)
  lastFailure @6 :Text;                 # the message of the latest failed attempt, kept after
                                        # a restart; empty when none failed
  waitingReason @7 :Text;               # why it is not running yet (no slot, upstream, restart
                                        # delay); empty when running or ended
}

struct JobFailure {
  # The root cause that failed a job (or the latest failure that caused a restart).
  message @0 :Text;
  vertexName @1 :Text;                  # empty when not caused by one subtask
  subtaskIndex @2 :UInt32;
  attemptId @3 :AttemptId;              # null when not caused by one attempt
  exitCode @4 :Int32;
  atMs @5 :Int64;                       # Unix ms
}

struct JobStatus {
  # A job as the Dispatcher reports it (listJobs, jobStatus). Terminal jobs come from the
  # JobResultStore; in jobStatus they also carry their final tasks, vertices and subtasks, kept
  # beside the result (JobResultStore.putDetail) so that every later leader has them, for as long
  # as the result is kept (store.job-results.retain).
  jobId @0 :JobId;
  name @1 :Text;
  state @2 :JobState;
  submittedAtMs @3 :Int64;
  stateChangedAtMs @4 :Int64;
  endedAtMs @5 :Int64;                  # 0 while not terminal
  restarts @6 :UInt32;                  # restarts so far under the restart strategy
  tasks @7 :TaskCounts;                 # over all vertices
  vertices @8 :List(VertexStatus);      # in JobGraph order
  failure @9 :JobFailure;               # null unless failing, failed or restarting
  corruptReason @10 :Text;              # state corrupt: why the stored record does not decode
  waitingReason @11 :Text;              # why subtasks wait (slots the cluster lacks, restart
                                        # delay); empty when nothing waits
  subtasksOmitted @12 :Text;            # an ended job without its subtask rows: why (its detail
                                        # was over store.job-details.max-size, or does not
                                        # decode, or was never kept); empty otherwise
}

struct JobResult {
  # The outcome of a terminal job, as the JobResultStore keeps it. Created dirty before cleanup
  # (JobGraph removed, slots freed), marked clean after; a new leader only finishes the cleanup
  # of dirty results and never re-runs their jobs.
  jobId @0 :JobId;
  jobName @1 :Text;
  state @2 :JobState;                   # finished, failed or canceled
  clean @3 :Bool;                       # false = dirty: cleanup not yet confirmed
  submittedAtMs @4 :Int64;
  endedAtMs @5 :Int64;
  netRuntimeMs @6 :UInt64;              # time spent running, excluding restart delays
  restarts @7 :UInt32;
  failure @8 :JobFailure;               # null unless failed
}

struct JobProgress {
  # What one job's JobMaster has done so far, as the JobProgressStore keeps it (ZooKeeper
  # `job-progress/<jobId>`). Written before an attempt is deployed (so every attempt a worker may
  # run is in it) and before an attempt's terminal state is acknowledged to its worker (so a
  # finished subtask is never run again). A new leader's JobMaster starts from it in RECONCILING:
  # it adopts the live attempts workers report, and fails those nobody reports within
  # jobmaster.reconciliation-timeout (docs/jobgraph.md, "Failover"). Removed with the JobGraph.
  jobId @0 :JobId;
  epoch @1 :UInt64;                     # the term that wrote it
  writtenAtMs @2 :Int64;                # Unix ms
  restarts @3 :UInt32;                  # restarts the job's strategy granted so far
  startedAtMs @4 :Int64;                # Unix ms the job first started (its net runtime)
  restartDelayMs @5 :Int64;             # restart delays so far, left out of the net runtime
  subtasks @6 :List(SubtaskProgress);   # only subtasks that had an attempt, by ascending index
  ended @7 :JobState;                   # failed once the restart strategy gave up (the Dispatcher
                                        # may not have stored the result yet): the next leader
                                        # ends the job failed at once; created otherwise
  failure @8 :JobFailure;               # the root cause when ended is failed; null otherwise
  parts @9 :List(UInt32);               # a large job's progress is split: once any subtask of
                                        # index 32 or more had an attempt (kProgressPartSubtasks),
                                        # `subtasks` is empty and part k (listed here ascending) is
                                        # the record `job-progress-parts/<jobId>-<k>`, a
                                        # JobProgressPart with the subtasks [32k, 32(k+1)) that
                                        # had an attempt; a put rewrites only the parts that
                                        # changed (docs/stores.md). Empty while every subtask is in
                                        # `subtasks`, as in records written before parts existed
}

struct JobProgressPart {
  # One part of a large job's progress record (JobProgress.parts): written in the same
  # transaction as the JobProgress that lists it, removed with it.
  jobId @0 :JobId;
  part @1 :UInt32;                      # subtasks [32 * part, 32 * (part + 1))
  subtasks @2 :List(SubtaskProgress);   # those of the part's range that had an attempt, ascending
}

struct SubtaskProgress {
  # The latest attempt of one subtask.
  subtask @0 :UInt32;                   # global index: vertices in JobGraph order, then index
  attemptId @1 :AttemptId;
  attemptNumber @2 :UInt32;             # 0 for the first attempt
  state @3 :ExecutionState;             # deploying or running: live (to adopt); finished;
                                        # failed or canceled: to run again
  resourceId @4 :ResourceId;            # live: the worker the attempt was deployed to (or
                                        # adopted on); null in records written before it was kept
  allocationId @5 :AllocationId;        # live: the slot it was deployed into on that worker
}

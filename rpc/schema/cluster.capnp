# Cluster wire types exchanged between workers and the leader: TaskExecutor registration, slot
# reports and offers, resource requirements, heartbeat payloads, and the cluster overview.
@0xb378f5c81154087e;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("regent::wire");

using Common = import "/rpc/schema/common.capnp";
using Common.JobId;
using Common.AllocationId;
using Common.AttemptId;
using Common.ResourceId;
using Common.RegistrationId;
using Common.SlotId;
using Common.ResourceProfile;
using Common.LeaderInfo;
using Jobs = import "/rpc/schema/jobs.capnp";
using Jobs.TaskExecutionState;

# ---- Registration ---------------------------------------------------------------------------

struct TaskExecutorRegistration {
  # What a worker tells the ResourceManager about itself when it registers.
  resourceId @0 :ResourceId;            # the worker's, kept in worker.data-dir across restarts
  host @1 :Text;
  dataAddress @2 :Text;                 # "host:port" where the worker serves task logs/files
  httpAddress @3 :Text;                 # "host:port" of the worker's HTTP listener
  numberOfSlots @4 :UInt32;
  slotProfile @5 :ResourceProfile;      # what each slot offers
  totalProfile @6 :ResourceProfile;     # the whole worker
  version @7 :Text;                     # regent build version
  pid @8 :UInt32;
  startedAtMs @9 :Int64;                # Unix ms the worker process started
  containment @10 :Text;                # how it contains tasks: "cgroup v2 (...) under ...",
                                        # "subreaper (...)"; empty from a worker that predates it
  providerWorkerId @11 :Text;           # "<provider>:<worker id>" when a resource provider of
                                        # the cluster started it (worker.provider-id); empty for
                                        # a worker started by hand
}

struct StartedWorker {
  # A worker the leader's resource provider started (resourcemanager.provider), in the phase its
  # ResourceManager counts it: "requested", "pending registration", "registered", "releasing".
  providerWorkerId @0 :Text;            # "<provider>:<worker id>"
  phase @1 :Text;
  sinceMs @2 :Int64;                    # Unix ms it entered the phase
  resourceId @3 :ResourceId;            # once registered
  recovered @4 :Bool;                   # started by an earlier leader
}

struct TaskExecutorRegistrationSuccess {
  # The ResourceManager's answer to a successful registration.
  registrationId @0 :RegistrationId;    # names this registration; sendSlotReport repeats it
  heartbeatIntervalMs @1 :UInt64;       # how often the worker must heartbeat
  heartbeatTimeoutMs @2 :UInt64;        # silence after which either side declares the other lost
  outputReadKey @3 :Data;               # 32 bytes: the key this worker checks output-read tokens
                                        # with, for this registration (docs/security.md,
                                        # "Reading task output"); empty from masters that issue
                                        # none
}

# ---- Slots ----------------------------------------------------------------------------------

struct SlotStatus {
  # One slot as its worker sees it. After a failover the SlotManager is rebuilt from these alone.
  slotId @0 :SlotId;
  profile @1 :ResourceProfile;
  allocationId @2 :AllocationId;        # null when the slot is free
  jobId @3 :JobId;                      # null when the slot is free
  runningAttempts @4 :List(TaskExecutionState);  # attempts alive in the slot (not terminal)
}

struct SlotReport {
  # Every slot of one worker, sent on registration (sendSlotReport) and with each heartbeat.
  resourceId @0 :ResourceId;
  slots @1 :List(SlotStatus);           # one entry per slot index, free slots included
}

struct SlotOffer {
  # A slot allocated to a job, offered by its worker to that job's JobMaster. After a failover
  # the offer carries the attempts in it, which the new JobMaster adopts: those still running,
  # and those that ended while their terminal update is still queued on the worker (with that
  # terminal state).
  allocationId @0 :AllocationId;
  slotIndex @1 :UInt32;
  profile @2 :ResourceProfile;
  runningAttempts @3 :List(TaskExecutionState);
}

struct ResourceRequirement {
  # `numberOfRequiredSlots` slots that each fit `profile` (Flink's ResourceRequirement).
  profile @0 :ResourceProfile;
  numberOfRequiredSlots @1 :UInt32;
}

# ---- Heartbeats -----------------------------------------------------------------------------

struct MasterComponent {
  # Which leader-side component makes a call to a worker (heartbeat, disconnect).
  union {
    resourceManager @0 :Void;
    jobMaster @1 :JobId;                # the JobMaster of this job
  }
}

struct TaskExecutorHeartbeatPayload {
  # What a worker reports to the ResourceManager with each heartbeat.
  slotReport @0 :SlotReport;
  registrationId @1 :RegistrationId;
  # The registration this heartbeat belongs to (as sendSlotReport carries it): a heartbeat of a
  # replaced registration (a process that was stopped while another took its resource id) is
  # answered notRegistered. Unset by older workers: taken for the current registration.
}

struct TaskExecutorToJobMasterHeartbeatPayload {
  # What a worker reports to a JobMaster with each heartbeat (Flink's ExecutionDeploymentReport):
  # the JobMaster fails attempts it deployed that are missing here and cancels unknown ones.
  deployedAttempts @0 :List(AttemptId); # every attempt of this job the worker holds
}

# ---- Inspection -----------------------------------------------------------------------------

struct TaskExecutorInfo {
  # One registered worker as the leader sees it (regentctl workers / slots).
  registration @0 :TaskExecutorRegistration;
  slots @1 :List(SlotStatus);           # from its latest slot report
  registeredAtMs @2 :Int64;
  lastHeartbeatAtMs @3 :Int64;
}

struct ClusterOverview {
  # Counts for regentctl and /v1 overview (Flink's ClusterOverview).
  leader @0 :LeaderInfo;
  taskExecutors @1 :UInt32;             # registered workers
  slotsTotal @2 :UInt32;
  slotsFree @3 :UInt32;
  jobsRunning @4 :UInt32;               # not terminal: created, reconciling, running, restarting...
  jobsFinished @5 :UInt32;
  jobsCanceled @6 :UInt32;
  jobsFailed @7 :UInt32;
}

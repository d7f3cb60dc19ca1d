# The RPC interfaces between regent processes: the unfenced MasterBootstrap every master serves,
# the leader's fenced gateways, and the TaskExecutorGateway a worker hands to the leader.
@0xa66a977bc5aea9cd;

# Conventions (docs/wire.md):
# - Every method except MasterBootstrap.leaderInfo, authChallenge and authenticate carries
#   `epoch`, the caller's view of the leadership term. Masters refuse any epoch but their own;
#   workers refuse epochs below the highest they have seen. Both answer with Failure.fencing.
# - Every fallible method returns `failure :Failure`, null on success. Expected outcomes are
#   Failures; kj exceptions mean logistical trouble (disconnected, overloaded, timed out).
# - Capabilities obtained from a master are revoked when its leadership term ends; calls on them
#   then throw DISCONNECTED, and the caller re-resolves the leader.
# - Workers dial masters, never the reverse: the master reaches a worker only through the
#   TaskExecutorGateway the worker passed in on that worker's own connection.
# - When a master requires authentication, a connection's bootstrap answers only leaderInfo,
#   authChallenge and authenticate until it authenticates, and a call above the connection's
#   role is refused with Failure.permissionDenied naming the role it needs (docs/security.md).

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("regent::wire");

using Common = import "/rpc/schema/common.capnp";
using Common.Failure;
using Common.Role;
using Common.AuthMechanism;
using Common.LeaderView;
using Common.ContenderInfo;
using Common.JobId;
using Common.AllocationId;
using Common.AttemptId;
using Common.ResourceId;
using Common.RegistrationId;
using Common.SlotId;
using Common.ResourceProfile;
using Jobs = import "/rpc/schema/jobs.capnp";
using Jobs.JobGraph;
using Jobs.JobStatus;
using Jobs.JobResult;
using Jobs.TaskDeployment;
using Jobs.TaskExecutionState;
using Cluster = import "/rpc/schema/cluster.capnp";
using Cluster.TaskExecutorRegistration;
using Cluster.TaskExecutorRegistrationSuccess;
using Cluster.SlotReport;
using Cluster.SlotOffer;
using Cluster.ResourceRequirement;
using Cluster.MasterComponent;
using Cluster.TaskExecutorHeartbeatPayload;
using Cluster.TaskExecutorToJobMasterHeartbeatPayload;
using Cluster.TaskExecutorInfo;
using Cluster.StartedWorker;
using Cluster.ClusterOverview;

interface MasterBootstrap {
  # The bootstrap capability of every master's RPC listener, leader or standby. Unfenced itself;
  # it hands out the leader's fenced gateways for the current term.

  leaderInfo @0 () -> (leader :LeaderView, contender :ContenderInfo, leading :Bool);
  # Called by regentctl (leader, masters, leader --watch), workers and clients on any master to
  # learn who leads and with which epoch. `contender` describes the called master itself;
  # `leading` is true when the called master is the leader of `leader.epoch`. Never fails.

  handOver @1 (epoch :UInt64) -> (failure :Failure);
  # Called by regentctl failover on the leader. Ends the term like SIGTERM does (leader and latch
  # znodes deleted in one transaction, services stopped, capabilities revoked) but the process
  # stays up and contends again. Returns once the leader znode is gone. The epoch guards a
  # retried request against deposing the next leader. Failures: notLeader, fencing.

  dispatcher @2 (epoch :UInt64) -> (failure :Failure, dispatcher :DispatcherGateway);
  # Called by regentctl and clients after learning the epoch from leaderInfo or the leader
  # znode. Failures: notLeader (names the leader this master knows of), fencing.

  resourceManager @3 (epoch :UInt64) -> (failure :Failure, resourceManager :ResourceManagerGateway);
  # Called by a worker when it finds a new leader (leader znode watch, higher epoch seen, or
  # lost connection), before registerTaskExecutor. Failures: notLeader, fencing.

  jobMaster @4 (epoch :UInt64, jobId :JobId) -> (failure :Failure, jobMaster :JobMasterGateway);
  # Called by a worker after requestSlot for a job, and after a failover for every job it holds
  # slots of, to reach that job's JobMaster. Failures: notLeader, fencing; notFound when the job
  # is unknown to this term (the worker then cancels its attempts and frees its slots);
  # unavailable while the job's JobMaster is not started yet.

  authChallenge @5 () -> (serverNonce :Data, mechanisms :List(AuthMechanism), required :Bool);
  # First step of shared-secret authentication (docs/wire.md, "Authentication"). Returns a fresh
  # 32-byte random nonce, usable once and only on this connection; a new challenge replaces the
  # previous one. `mechanisms` lists what this master accepts; `required` says whether the
  # connection must authenticate before anything but leaderInfo. Unfenced, never fails.

  authenticate @6 (role :Role, clientNonce :Data, proof :Data)
      -> (failure :Failure, serverProof :Data, bootstrap :MasterBootstrap);
  # Second step: `proof` = HMAC-SHA256(secret of `role`, "regent-auth-v1 client" 0 role-name 0
  # serverNonce clientNonce), `clientNonce` 32 random bytes of the caller. On success the
  # connection is authenticated, `serverProof` = HMAC-SHA256(same secret, "regent-auth-v1 server"
  # 0 role-name 0 serverNonce clientNonce) lets the caller check it talks to a master holding the
  # secret, and `bootstrap` is this master restricted to `role`. Unfenced. Failures:
  # unauthenticated (no challenge outstanding, wrong proof, no secret configured for `role`).
}

interface DispatcherGateway {
  # The leader's job front door, used by regentctl and HTTP clients. Obtained from
  # MasterBootstrap.dispatcher; every method answers fencing for an epoch other than the term's.

  submitJob @0 (epoch :UInt64, jobGraph :JobGraph) -> (failure :Failure, jobId :JobId);
  # Called by `regentctl jobs submit`. Validates, persists the JobGraph, then starts its
  # JobMaster; success means the job is persisted. Resubmitting an identical graph with the same
  # job id succeeds again. Failures: invalidArgument (field named), alreadyExists (same id,
  # different graph or already terminal), tooLarge, unavailable (store unreachable).

  cancelJob @1 (epoch :UInt64, jobId :JobId) -> (failure :Failure);
  # Called by `regentctl jobs cancel`. Returns once cancellation has started; cancelling a job
  # already cancelling succeeds. Failures: notFound, failedPrecondition (already terminal).

  listJobs @2 (epoch :UInt64) -> (failure :Failure, jobs :List(JobStatus));
  # Called by `regentctl jobs list` and /v1/jobs. Running jobs and terminal jobs still in the
  # JobResultStore, without vertex detail. Failures: unavailable while RECOVERING.

  jobStatus @3 (epoch :UInt64, jobId :JobId) -> (failure :Failure, status :JobStatus, result :JobResult);
  # Called by `regentctl jobs status`. `result` is set only once the job is terminal.
  # Failures: notFound.

  clusterOverview @4 (epoch :UInt64) -> (failure :Failure, overview :ClusterOverview);
  # Called by regentctl and the HTTP overview. Never fails once the epoch is right.

  listTaskExecutors @5 (epoch :UInt64) -> (failure :Failure, taskExecutors :List(TaskExecutorInfo),
                                           startedWorkers :List(StartedWorker));
  # Called by `regentctl workers` and `regentctl slots`: registered workers and their slots, and
  # the workers the leader's resource provider started in every phase (empty without one).

  removeCorruptJob @6 (epoch :UInt64, jobId :JobId) -> (failure :Failure);
  # Called by `regentctl jobs remove-corrupt` (admin). Removes the JobGraph record of `jobId`
  # only when it really is corrupt: the record is read again and must fail to decode. Then the
  # job id is free for a new submission. Failures: notFound (no record under that id),
  # failedPrecondition (the record decodes: a healthy job is cancelled, never removed here),
  # unavailable (store unreachable, or the job is being submitted or cancelled).

  attemptOutputToken @7 (epoch :UInt64, jobId :JobId, attemptId :AttemptId,
                         streams :OutputStreams)
      -> (failure :Failure, token :Text, validForMs :UInt64, httpAddress :Text);
  # Called by `regentctl jobs logs` (reader). A short-lived capability to read `streams` of
  # `attemptId`, the latest attempt of one of `jobId`'s subtasks, from the worker that runs it
  # (docs/security.md, "Reading task output"): `token` goes in that worker's HTTP request as
  # "Authorization: Bearer <token>", for `validForMs` (the token carries its absolute expiry);
  # `httpAddress` is that worker's. A worker checks it only when it holds an RPC credential.
  # Failures: notFound (no such job, or the attempt is not the latest attempt of a subtask the
  # leader describes), failedPrecondition (the attempt has no worker yet, or its worker is not
  # registered with this leader).
}

enum OutputStreams {
  # Which output of an attempt a token reads.
  stdoutOnly @0;
  stderrOnly @1;
  both @2;
}

interface ResourceManagerGateway {
  # The leader's ResourceManager (with its SlotManager), called by workers and JobMasters.
  # Obtained from MasterBootstrap.resourceManager.

  registerTaskExecutor @0 (epoch :UInt64, registration :TaskExecutorRegistration,
                           taskExecutor :TaskExecutorGateway)
      -> (failure :Failure, success :TaskExecutorRegistrationSuccess);
  # Called by a worker on start and after every leader change, retried with backoff. The
  # ResourceManager calls the worker back through `taskExecutor`, on the same connection. A new
  # registration with the same resource id replaces the old one. The worker then sends its
  # slot report. Failures: fencing, invalidArgument, unavailable.

  sendSlotReport @1 (epoch :UInt64, resourceId :ResourceId, registrationId :RegistrationId,
                     slotReport :SlotReport) -> (failure :Failure);
  # Called by a worker right after registerTaskExecutor succeeds. The SlotManager takes the
  # report as the truth about that worker's slots (docs/architecture.md, "Failover", step 3).
  # Failures: fencing, notRegistered (stale or unknown registration id: register again).

  heartbeat @2 (epoch :UInt64, resourceId :ResourceId, payload :TaskExecutorHeartbeatPayload)
      -> (failure :Failure);
  # Called by a registered worker in answer to TaskExecutorGateway.heartbeat from the
  # ResourceManager (Flink's heartbeatFromTaskManager); the slot report reconciles the
  # SlotManager. Failures: fencing, notRegistered (register again; also when the payload's
  # registrationId is not the current registration).

  disconnect @3 (epoch :UInt64, resourceId :ResourceId, cause :Text,
                 registrationId :RegistrationId) -> (failure :Failure);
  # Called by a worker shutting down cleanly; its slots are removed at once instead of after a
  # heartbeat timeout. `registrationId` names the registration that ends: another registration
  # of the resource id (a newer process) is not removed. Unset by older workers: the current
  # registration is removed. Failures: fencing, notRegistered.

  registerJobMaster @4 (epoch :UInt64, jobId :JobId, jobMaster :JobMasterGateway)
      -> (failure :Failure);
  # Called by a JobMaster when it starts (or restarts in a new term). Required before
  # declareRequiredResources. Failures: fencing.

  declareRequiredResources @5 (epoch :UInt64, jobId :JobId,
                               requirements :List(ResourceRequirement)) -> (failure :Failure);
  # Called by a JobMaster whenever the slots it needs change; the list replaces the previous
  # declaration (empty = needs none). The SlotManager allocates matching free slots with
  # TaskExecutorGateway.requestSlot. Failures: fencing, notRegistered (the JobMaster),
  # invalidArgument (a profile no worker can fit).

  disconnectJobMaster @6 (epoch :UInt64, jobId :JobId, cause :Text) -> (failure :Failure);
  # Called by a JobMaster when its job reaches a terminal state; its requirements are dropped.
  # Failures: fencing, notRegistered.
}

interface JobMasterGateway {
  # The leader's JobMaster of one job, called by workers holding slots of that job. Obtained
  # from MasterBootstrap.jobMaster.

  offerSlots @0 (epoch :UInt64, resourceId :ResourceId, taskExecutor :TaskExecutorGateway,
                 slots :List(SlotOffer)) -> (failure :Failure, accepted :List(AllocationId));
  # Called by a worker after requestSlot allocated slots to this job, and after a failover for
  # every slot it holds of this job, with the attempts running in them. The JobMaster adopts the
  # running attempts and deploys through `taskExecutor`; slots not in `accepted` must be freed.
  # Failures: fencing, notRegistered (the worker is not registered with the ResourceManager).

  updateTaskExecutionState @1 (epoch :UInt64, state :TaskExecutionState) -> (failure :Failure);
  # Called by a worker on every state change of an attempt of this job; changes that happened
  # while no leader was reachable are buffered and delivered in order later. Idempotent by
  # (attemptId, state). Failures: fencing, notFound (unknown attempt: the worker cancels it).

  heartbeat @2 (epoch :UInt64, resourceId :ResourceId,
                payload :TaskExecutorToJobMasterHeartbeatPayload) -> (failure :Failure);
  # Called by a worker holding slots of this job in answer to TaskExecutorGateway.heartbeat from
  # this JobMaster. Failures: fencing, notRegistered (offer the slots again).

  disconnect @3 (epoch :UInt64, resourceId :ResourceId, cause :Text) -> (failure :Failure);
  # Called by a worker that shuts down or frees all slots of this job; the JobMaster fails the
  # attempts still on it at once. Failures: fencing, notRegistered.
}

interface TaskExecutorGateway {
  # A worker's TaskExecutor, handed to the ResourceManager in registerTaskExecutor and to
  # JobMasters in offerSlots, and called back on the worker's own connection. Every method
  # carries the caller's epoch: the worker refuses epochs below the highest it has seen (fencing,
  # `expected` = that highest epoch) and re-resolves the leader when it sees a higher one.

  requestSlot @0 (epoch :UInt64, slotId :SlotId, jobId :JobId, allocationId :AllocationId,
                  profile :ResourceProfile) -> (failure :Failure);
  # Called by the ResourceManager's SlotManager to allocate a free slot to a job. The worker
  # then reaches the job's JobMaster (MasterBootstrap.jobMaster) and offers the slot. Repeating
  # the same allocation succeeds. Failures: fencing, failedPrecondition (slot allocated to
  # another allocation), notFound (no such slot index).

  submitTask @1 (epoch :UInt64, deployment :TaskDeployment) -> (failure :Failure);
  # Called by a JobMaster to run one subtask attempt in a slot the worker offered to it.
  # Success means accepted; progress arrives via updateTaskExecutionState. Repeating the same
  # attempt id succeeds. Failures: fencing, notFound (allocation not held for this job),
  # invalidArgument (bad command).

  cancelTask @2 (epoch :UInt64, attemptId :AttemptId) -> (failure :Failure);
  # Called by a JobMaster to stop an attempt (job cancelled, failover of a region, unknown
  # attempt after reconciliation). Succeeds for attempts already terminal. Failures: fencing,
  # notFound.

  freeSlot @3 (epoch :UInt64, allocationId :AllocationId, cause :Text) -> (failure :Failure);
  # Called by a JobMaster or the ResourceManager to release an allocation; attempts still in the
  # slot are cancelled first. Freeing an unknown allocation succeeds. Failures: fencing.

  heartbeat @4 (epoch :UInt64, sender :MasterComponent) -> (failure :Failure);
  # Called every heartbeat interval by the ResourceManager and by each JobMaster with slots on
  # this worker (Flink's heartbeatFromResourceManager / heartbeatFromJobManager). The worker
  # answers with ResourceManagerGateway.heartbeat or JobMasterGateway.heartbeat. Failures:
  # fencing.

  disconnect @5 (epoch :UInt64, sender :MasterComponent, cause :Text) -> (failure :Failure);
  # Called by the ResourceManager (worker removed) or a JobMaster (job terminal, slots
  # released). On resourceManager the worker registers again; on jobMaster it frees that job's
  # slots. Failures: fencing.

  stop @6 (epoch :UInt64, cause :Text) -> (failure :Failure);
  # Called by the ResourceManager to release an idle worker that a resource provider started
  # (its registration carries a providerWorkerId): the worker answers, then stops as on SIGTERM
  # and exits; the provider reaps what is left. Works across hosts: the call goes over the
  # worker's own connection. Failures: fencing, failedPrecondition (a worker started by hand,
  # or one holding an allocated slot: it is not idle).
}

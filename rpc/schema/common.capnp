# Wire types shared by every regent schema file: ids, resource profiles, leader and contender
# descriptions, and the Failure value that every fallible RPC returns instead of throwing.
@0xd06e85cde083b0e4;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("regent::wire");

# ---- Identifiers ----------------------------------------------------------------------------

struct Id128 {
  # A random 128-bit identifier (common/ids.h renders it as 32 lowercase hex digits, hi first).
  # All-zero is never issued; a pointer field of an id type that is null means "absent".
  hi @0 :UInt64;
  lo @1 :UInt64;
}

# Aliases document intent in the schema only: capnpc-c++ emits no C++ names for them, so C++
# code reads regent::wire::Id128 and converts it to the typed ids of common/ids.h.
using JobId = Id128;           # one submitted job, chosen by the submitter (idempotent submit)
using AllocationId = Id128;    # one allocation of one slot for one job, chosen by the SlotManager
using ResourceId = Id128;      # one worker, chosen at its first start and kept in its data dir
using AttemptId = Id128;       # one execution attempt of one subtask, chosen by the JobMaster
using RegistrationId = Id128;  # one registration of a TaskExecutor at a ResourceManager term

struct SlotId {
  # A slot is addressed by its TaskExecutor and its index there (Flink's SlotID).
  resourceId @0 :ResourceId;
  slotIndex @1 :UInt32;  # 0 .. numberOfSlots-1
}

# ---- Resources ------------------------------------------------------------------------------

struct ResourceProfile {
  # What one subtask needs, or what one slot offers. A slot fits a requirement when every
  # component is >= the required one.
  cpuMillis @0 :UInt32;    # thousandths of a core (1000 = one core)
  memoryBytes @1 :UInt64;
}

# ---- Leadership -----------------------------------------------------------------------------

enum LeaderStatus {
  # Phase of a leadership term, published in the leader znode (docs/zookeeper.md).
  recovering @0;  # elected; Dispatcher recovering jobs, SlotManager rebuilding from reports (§8)
  serving @1;     # recovery and reconciliation done
}

struct LeaderInfo {
  # The content of the `leader` znode (published there as JSON) and what masters tell callers
  # about the leader. One leadership term is identified by its epoch.
  epoch @0 :UInt64;          # issued exactly once per term; only grows (docs/leader-election.md)
  masterId @1 :Text;         # stable name of the leading master
  rpcAddress @2 :Text;       # "host:port" of its Cap'n Proto listener (MasterBootstrap)
  httpAddress @3 :Text;      # "host:port" of its HTTP listener
  host @4 :Text;             # hostname, for humans
  pid @5 :UInt32;
  electedAtMs @6 :Int64;     # Unix time in milliseconds when the term began
  status @7 :LeaderStatus;
}

struct ContenderInfo {
  # The content of a master's `latch/m-<seq>` znode (JSON there): one master process, leading
  # or standing by.
  masterId @0 :Text;
  rpcAddress @1 :Text;       # "host:port"
  httpAddress @2 :Text;      # "host:port"
  host @3 :Text;
  pid @4 :UInt32;
  version @5 :Text;          # regent build version, e.g. "0.1.0"
  startedAtMs @6 :Int64;     # Unix time in milliseconds when the process started
}

struct LeaderView {
  # What one master believes about the current leader; it may lag ZooKeeper by one watch event.
  union {
    unknown @0 :Void;        # no leader known right now (election in progress): retry later
    leader @1 :LeaderInfo;
  }
}

# ---- Authentication ---------------------------------------------------------------------------

enum Role {
  # What an authenticated RPC connection may do (docs/security.md). `admin` includes `reader`;
  # `worker` is separate.
  reader @0;  # inspect: leaderInfo, listJobs, jobStatus, clusterOverview, listTaskExecutors
  admin @1;   # reader + submitJob, cancelJob, handOver and every other Dispatcher method
  worker @2;  # MasterBootstrap.resourceManager / jobMaster and everything on those gateways
}

enum AuthMechanism {
  # How a connection may prove its role; MasterBootstrap.authChallenge lists the enabled ones.
  sharedSecret @0;  # HMAC-SHA256 challenge-response over a per-role secret (docs/wire.md)
  tlsCertificate @1;  # the verified client certificate's common name maps to a role
}

# ---- Failures (expected outcomes, returned as values) ---------------------------------------

struct Failure {
  # The outcome of a call that did not do what was asked, for a reason the caller must handle.
  # Every fallible method returns `failure :Failure`, null on success; result fields other than
  # `failure` are meaningful only on success. Logistical failures (disconnected, overloaded,
  # timed out, bugs) are kj exceptions instead, never a Failure.
  message @0 :Text;          # one human-readable line for logs and regentctl; never parsed
  union {
    fencing @1 :FencingError;
      # The call's epoch is not acceptable. Retryable after re-resolving the leader.
    notLeader @2 :LeaderView;
      # The called master does not lead; the view names the leader it knows of, if any.
      # Retryable against that leader.
    invalidArgument @3 :InvalidArgument;
      # The request is malformed or violates validation. Fatal: retrying cannot help.
    notFound @4 :EntityRef;
      # The named entity does not exist in this term (unknown job, allocation, attempt...).
    alreadyExists @5 :EntityRef;
      # An entity with this id already exists and differs from the request (same request
      # repeated is answered with success, so retries are idempotent).
    notRegistered @6 :EntityRef;
      # The caller (a TaskExecutor or JobMaster) is not registered with the callee in this
      # term: register again, then retry.
    failedPrecondition @7 :Void;
      # The entity is in a state that forbids the call (e.g. cancelling a FINISHED job, a slot
      # allocated to another job). `message` names the state. Fatal for this request.
    tooLarge @8 :TooLarge;
      # The payload exceeds a limit (e.g. a JobGraph above the store's limit). Fatal.
    unavailable @9 :Unavailable;
      # The callee cannot serve this now (still RECOVERING, store unreachable, shutting down).
      # Retryable after `retryAfterMs`.
    unauthenticated @10 :Void;
      # The connection has not authenticated and the call needs a role (docs/security.md): only
      # MasterBootstrap.leaderInfo, authChallenge and authenticate are open to it. Fatal: the
      # caller configures a credential and authenticates first.
    permissionDenied @11 :PermissionDenied;
      # The connection's role does not allow the call; `message` names the role it needs.
      # Fatal: retrying with the same credential cannot help.
  }
}

struct FencingError {
  # On a master: `expected` is the master's own epoch and the call is refused unless equal.
  # On a worker: `expected` is the highest epoch the worker has seen, the minimum it accepts.
  expected @0 :UInt64;
  received @1 :UInt64;
}

struct InvalidArgument {
  # Which part of the request failed validation, and why.
  field @0 :Text;            # path of the offending field, e.g. "vertices[2].parallelism"
  message @1 :Text;          # what is wrong with it, e.g. "must be in 1..1024, got 0"
}

struct EntityRef {
  # Names the entity a Failure is about.
  union {
    job @0 :JobId;
    allocation @1 :AllocationId;
    attempt @2 :AttemptId;
    taskExecutor @3 :ResourceId;
    slot @4 :SlotId;
    vertex @5 :Text;         # vertex name within the job the call is about
  }
}

struct TooLarge {
  # A payload above a size limit, e.g. a serialized JobGraph above the store's limit.
  sizeBytes @0 :UInt64;
  limitBytes @1 :UInt64;
}

struct PermissionDenied {
  # A call above the caller's role: the role the call needs and the one the connection holds.
  required @0 :Role;
  held @1 :Role;
  accepted @2 :List(Role);
  # Every role that may make the call (`required` among them; admin wherever reader may). Empty
  # from a peer older than this field: `required` alone.
}

struct Unavailable {
  # The callee is temporarily unable to serve; the message says why.
  retryAfterMs @0 :UInt64;   # suggested back-off; 0 = caller's default back-off
}

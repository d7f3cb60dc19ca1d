// Multi-process test helpers for workers: real regent-worker processes in numbered slots (each
// with its own worker.data-dir, kept across restarts), their event lines and the masters'
// worker event lines (docs/operations.md) parsed, the leader's slot table as regentctl reports
// it, a worker's /metrics, jobs submitted to hold slots, and the ResourceManager's JobMaster
// methods called over real RPC (for bad input). Builds on master_cluster_test_util.h.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "common/ids.h"
#include "common/result.h"
#include "common/time.h"
#include "rpc/rpc_client.h"
#include "rpc/schema/gateways.capnp.h"
#include "tests/fixtures/process_harness.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/integration/master_cluster_test_util.h"

// Expects (gtest, not fatal) that a Result or Status is ok, printing its error otherwise; for
// helpers that return a value.
#define EXPECT_OK(expr)                                                 \
  do {                                                                  \
    const auto& expectOkResult = (expr);                                \
    EXPECT_TRUE(expectOkResult.ok()) << expectOkResult.error().message; \
  } while (false)

namespace regent::testing {

// ---- Event lines ------------------------------------------------------------------------------

// One event line of a worker.
struct WorkerEvent {
  enum class Kind {
    kStarting,             // worker starting resource_id=R host=H pid=P slots=N data_dir=D
    kRegistered,           // worker registered resource_id=R epoch=E registration_id=G leader=M attempts=A
    kResourceManagerLost,  // resource manager lost resource_id=R epoch=E reason=".."
    kEpochGateRefused,     // epoch gate refused resource_id=R method=M received=X highest=H
    kDisconnected,         // worker disconnected resource_id=R epoch=E cause=".."
    kExiting,              // worker exiting resource_id=R code=C
  };
  Kind kind = Kind::kStarting;
  std::string resourceId;
  uint64_t epoch = 0;           // kRegistered, kResourceManagerLost, kDisconnected.
  std::string registrationId;   // kRegistered.
  std::string leader;           // kRegistered: the master id.
  uint64_t attempts = 0;        // kRegistered.
  std::string host;             // kStarting.
  int64_t pid = 0;              // kStarting.
  uint64_t slots = 0;           // kStarting.
  std::string dataDir;          // kStarting.
  std::string reason;           // kResourceManagerLost (reason), kDisconnected (cause).
  std::string method;           // kEpochGateRefused.
  uint64_t received = 0;        // kEpochGateRefused.
  uint64_t highest = 0;         // kEpochGateRefused.
  int code = 0;                 // kExiting.
};

// One worker event line of a master (its ResourceManager).
struct MasterWorkerEvent {
  enum class Kind {
    kRegistered,  // worker registered epoch=E resource_id=R registration_id=G host=H pid=P slots=N replaced=B
    kSlotReport,  // slot report epoch=E resource_id=R slots=N allocated=A workers_reported=W slots_total=T
    kRemoved,     // worker removed epoch=E resource_id=R reason=".."
    kRefused,     // worker refused epoch=E resource_id=R reason=".."
  };
  Kind kind = Kind::kRegistered;
  uint64_t epoch = 0;
  std::string resourceId;
  std::string registrationId;  // kRegistered.
  std::string host;            // kRegistered.
  int64_t pid = 0;             // kRegistered.
  uint64_t slots = 0;          // kRegistered, kSlotReport.
  bool replaced = false;       // kRegistered.
  uint64_t allocated = 0;      // kSlotReport.
  uint64_t workersReported = 0;  // kSlotReport.
  uint64_t slotsTotal = 0;       // kSlotReport.
  std::string reason;            // kRemoved, kRefused.
};

// Parse one output line (text, or JSON log format through its "msg"); nullopt if it is not such
// an event line.
std::optional<WorkerEvent> parseWorkerEventLine(const std::string& line);
std::optional<MasterWorkerEvent> parseMasterWorkerEventLine(const std::string& line);
// Every such event of `output`, in order (complete lines only).
std::vector<WorkerEvent> parseWorkerEvents(const std::string& output);
std::vector<MasterWorkerEvent> parseMasterWorkerEvents(const std::string& output);

// ---- Masters ----------------------------------------------------------------------------------

// The worker events of the slot's current run.
std::vector<MasterWorkerEvent> masterWorkerEvents(MasterCluster& cluster, size_t slot);
// Waits until the slot's current run logged a worker event matching `match`; returns it.
Result<MasterWorkerEvent> waitForMasterWorkerEvent(
    MasterCluster& cluster, size_t slot,
    const std::function<bool(const MasterWorkerEvent&)>& match, Duration timeout);

// ---- Workers ----------------------------------------------------------------------------------

struct WorkerClusterOptions {
  std::string quorum;  // Each worker's ha.zookeeper.quorum unless startWorker overrides it.
  std::string clusterId;
  Duration sessionTimeout{4000};
  uint32_t slots = 2;
  std::string slotCpu = "1.0";
  std::string slotMemory = "256MiB";
  std::vector<std::string> extraSet;  // "key=value" for every worker.
  std::string logFormat = "text";     // --log-format.
  std::vector<std::string> env;       // "NAME=value" added to every worker's environment.
};

// regent-worker processes in numbered slots, each with its own data directory and HTTP port
// (both kept across restarts of the slot). Not thread-safe; use from the test's main thread
// (the harness ties each child's death signal to it).
class WorkerCluster final {
 public:
  explicit WorkerCluster(WorkerClusterOptions options);
  ~WorkerCluster();

  // Starts a worker in a new slot and returns the slot. `quorum` overrides the cluster's;
  // `extraSet` adds --set entries after the cluster's. `dataDir` (default: a fresh directory of
  // its own) lets two slots share one, for the tests of that refusal.
  Result<size_t> startWorker(std::vector<std::string> extraSet = {},
                             std::optional<std::string> quorum = std::nullopt,
                             std::optional<std::string> dataDir = std::nullopt);
  // Starts `count` workers; returns the first new slot.
  Result<size_t> startWorkers(size_t count);
  // Starts a fresh process in `slot` (whose previous process has ended), same settings, same
  // data directory.
  Status restart(size_t slot);

  size_t size() const { return slots_.size(); }
  ProcessHarness& process(size_t slot);
  const std::string& dataDir(size_t slot) const;
  // The events file (events.file) of the slot's current run; every run writes its own.
  const std::string& eventsPath(size_t slot) const;
  // "127.0.0.1:port" of the slot's HTTP listener.
  const std::string& httpAddress(size_t slot) const;
  // The resource id the slot's current run logged in "worker starting" ("" before it did).
  std::string resourceId(size_t slot);

  // SIGKILL, then waits for the exit.
  Status kill(size_t slot);

  std::vector<WorkerEvent> events(size_t slot);
  Result<WorkerEvent> waitForEvent(size_t slot, const std::function<bool(const WorkerEvent&)>& match,
                                   Duration timeout);
  // Waits until the slot's current run logged "worker registered" with `epoch` (any epoch when
  // 0) at least `count` times in all; returns the last such event.
  Result<WorkerEvent> waitForRegistered(size_t slot, uint64_t epoch, Duration timeout,
                                        size_t count = 1);
  // How many of the slot's current run's events are of `kind`.
  size_t count(size_t slot, WorkerEvent::Kind kind);

  std::string describe() const;

 private:
  struct Slot {
    std::vector<std::string> argv;
    std::string dataDir;
    std::string httpAddress;
    std::string eventsPath;  // Of the current run.
    int runs = 0;
    std::unique_ptr<ProcessHarness> process;
  };

  Status launch(size_t slot);

  WorkerClusterOptions options_;
  TempDir dir_;
  std::vector<Slot> slots_;
};

// ---- The leader's view: regentctl workers / slots ---------------------------------------------

// One slot as `regentctl workers --json` lists it: "<resource id> #<index> <STATE> job=<id>
// allocation=<id>" (empty ids for a free slot), comparable across leaders.
struct SlotRow {
  std::string resourceId;
  uint32_t index = 0;
  std::string state;  // FREE, ALLOCATED, PENDING.
  std::string jobId;
  std::string allocationId;
  auto operator<=>(const SlotRow&) const = default;
  std::string describe() const;
};
using SlotTable = std::set<SlotRow>;
std::string describeTable(const SlotTable& table);

// One worker as `regentctl workers --json` lists it.
struct WorkerRow {
  std::string resourceId;
  std::string host;
  int64_t pid = 0;
  std::vector<SlotRow> slots;
};

// Runs regentctl against one cluster (auth off: the test masters bind loopback only).
class Regentctl final {
 public:
  Regentctl(std::string quorum, std::string clusterId);

  Result<CtlResult> run(std::vector<std::string> args, Duration timeout = Duration(60000));
  // `regentctl workers --json`, parsed; fails unless regentctl exits 0 with valid lines.
  Result<std::vector<WorkerRow>> workers();
  // `regentctl slots --json`: how many slot lines it printed; fails unless it exits 0.
  Result<size_t> slotLines();
  // Every slot of every worker (from `workers`); fails if a resource id is listed twice.
  Result<SlotTable> slotTable();
  // Polls slotTable() until `done` holds for it (regentctl failures count as "not yet");
  // returns the last table, or fails after `timeout` naming the last table or error.
  Result<SlotTable> waitForTable(const std::function<bool(const SlotTable&)>& done,
                                 Duration timeout);
  // regentctl's output directory.
  const std::string& dir() const { return dir_.path(); }

 private:
  std::vector<std::string> base_;
  TempDir dir_;
};

// Submits (`regentctl jobs submit`) a job of one vertex "hold" of `parallelism` subtasks, each
// needing `cpu` cores and `memory` and sleeping ten minutes: the job holds that many slots of
// the cluster until the test stops its workers (a task ends with its worker). Tasks run as
// worker.task-user (nobody) when the tests run as root; WorkerCluster lets it reach its data
// directories. Returns the job's id; fails unless regentctl exits 0.
Result<JobId> submitSlotHoldingJob(Regentctl& regentctl, uint32_t parallelism,
                                   const std::string& cpu, const std::string& memory);

// Slots of `table` in `state`.
size_t countState(const SlotTable& table, const std::string& state);
// Distinct resource ids of `table`.
std::set<std::string> resourceIds(const SlotTable& table);

// ---- A worker's HTTP ----------------------------------------------------------------------------

// GETs `path` from `address` on `loop` (httpGet of http_get_test_util.h): the status and body;
// a refused or dropped connection is an error.
Result<std::pair<uint, std::string>> httpGetText(EventLoop& loop, const std::string& address,
                                                 const std::string& path);
// The sum of every sample of `metric` (all label sets) in Prometheus text; nullopt if absent.
std::optional<double> metricSum(const std::string& text, const std::string& metric);
// The sample of `metric` with exactly `labels` ("state=\"allocated\"", "" for none).
std::optional<double> metricValue(const std::string& text, const std::string& metric,
                                  const std::string& labels);

// ---- Calls to the leader's ResourceManager ----------------------------------------------------

// A call answered with a Failure: its kind and message.
struct CallFailure {
  wire::Failure::Which which;
  std::string message;
};

// One RPC connection to a master, and its ResourceManagerGateway for one epoch; its calls run
// on `loop`, which must outlive it: the calls bad-input tests make. Its registerJobMaster hands
// over a JobMasterGateway that answers nothing, and the leader's term runs no such job: a worker
// frees a slot allocated to it (MasterBootstrap.jobMaster answers notFound), so a test that
// needs slots held submits a job (submitSlotHoldingJob).
class ResourceManagerCaller final {
 public:
  // Connects to `rpcAddress` and obtains MasterBootstrap.resourceManager(epoch).
  static Result<std::unique_ptr<ResourceManagerCaller>> connect(EventLoop& loop,
                                                                const std::string& rpcAddress,
                                                                uint64_t epoch);
  ~ResourceManagerCaller();

  uint64_t epoch() const { return epoch_; }

  // registerJobMaster(epoch, job, <this test's JobMasterGateway>).
  std::optional<CallFailure> registerJobMaster(const JobId& job);
  // declareRequiredResources(epoch, job, [{cpuMillis, memoryBytes} x count]).
  std::optional<CallFailure> declare(const JobId& job, uint32_t cpuMillis, uint64_t memoryBytes,
                                     uint32_t count);
  // registerTaskExecutor(epoch, a worker `resource` of `slots` slots of one core and 256 MiB,
  // <this test's TaskExecutorGateway, which answers nothing>): this connection then speaks for
  // `resource` (docs/security.md, "Worker identity"). The registration id, or the failure.
  Result<RegistrationId> registerWorker(const ResourceId& resource, uint32_t slots);
  // sendSlotReport(epoch, resource, registration, a report of `slots` free slots).
  std::optional<CallFailure> sendSlotReport(const ResourceId& resource,
                                            const RegistrationId& registration, uint32_t slots);

 private:
  ResourceManagerCaller(EventLoop& loop, kj::Own<rpc::RpcClient> client, uint64_t epoch);

  EventLoop& loop_;
  kj::Own<rpc::RpcClient> client_;
  uint64_t epoch_;
  wire::ResourceManagerGateway::Client gateway_;
};

// The epoch of the leader in `slot` once it logged "leader serving" (waits at most `timeout`).
Result<uint64_t> waitForServing(MasterCluster& cluster, size_t slot, Duration timeout);

// ---- The settings every worker itest uses -----------------------------------------------------

// Short heartbeats and sessions, so that every timeout the tests wait for passes in seconds.
inline constexpr Duration kTestSessionTimeout{4000};
inline constexpr const char* kTestHeartbeatInterval = "heartbeat.interval=300ms";
inline constexpr const char* kTestHeartbeatTimeout = "heartbeat.timeout=2s";

// Masters on `quorum` that advertise the address they bind (workers dial it), with the test
// heartbeats and a short RPC call timeout.
MasterClusterOptions workerTestMasters(const std::string& quorum, const std::string& clusterId);
// Workers on `quorum` with a short registration backoff and call timeout (the heartbeats are the
// masters' options).
WorkerClusterOptions workerTestWorkers(const std::string& quorum, const std::string& clusterId);

}  // namespace regent::testing

// Multi-process test helpers for jobs that run: one real regent-master and real regent-worker
// processes on the shared ZooKeeper server, regentctl to submit, inspect and cancel jobs, the
// job and attempt events of the master and the task events of workers (docs/operations.md) read
// from their events files, the job stores as ZooKeeper holds them, and the processes a task
// left behind. Builds on master_cluster_test_util.h and worker_cluster_test_util.h.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "common/result.h"
#include "common/time.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/integration/master_cluster_test_util.h"
#include "tests/integration/worker_cluster_test_util.h"

namespace regent::testing {

// ---- Events -----------------------------------------------------------------------------------
// Read from each process's events file (events.file, which the clusters set for every run), not
// from its log; the events are the ones docs/operations.md lists.

// One job or attempt event of a master (its JobMasters and Dispatcher).
struct JobEvent {
  enum class Kind {
    kAttemptDeployed,  // attempt deployed epoch=E job=J vertex=V subtask=I attempt=A
                       //   attempt_number=N resource_id=R
    kAttemptState,     // attempt state epoch=E job=J vertex=V subtask=I attempt=A state=S
                       //   exit_code=C signal=S [message=".."]
    kJobState,         // job state epoch=E job=J state=S restarts=N
    kJobEnded,         // job ended epoch=E job=J state=S restarts=N
    kJobClean,         // job clean epoch=E job=J state=S
    // After a failover (docs/jobgraph.md); the epoch is read when the line carries one.
    kJobReconciling,  // job reconciling job=J expected=N
    kAttemptAdopted,  // attempt adopted job=J vertex=V subtask=I attempt=A attempt_number=N
                      //   worker=R pid=P
    kJobReconciled,   // job reconciled job=J adopted=N ended=N unreported=N timed_out=B
  };
  Kind kind = Kind::kJobState;
  uint64_t epoch = 0;
  std::string job;
  std::string state;          // kAttemptState, kJob*.
  std::string vertex;         // kAttempt*.
  uint32_t subtask = 0;       // kAttempt*.
  std::string attempt;        // kAttempt*.
  uint32_t attemptNumber = 0;  // kAttemptDeployed, kAttemptAdopted.
  std::string resourceId;      // kAttemptDeployed, kAttemptAdopted (its worker=).
  int64_t pid = 0;             // kAttemptAdopted.
  int exitCode = 0;            // kAttemptState.
  int signal = 0;              // kAttemptState.
  std::string message;         // kAttemptState, FAILED.
  uint32_t restarts = 0;       // kJobState, kJobEnded.
  uint32_t expected = 0;       // kJobReconciling.
  uint32_t adopted = 0;        // kJobReconciled.
  uint32_t ended = 0;          // kJobReconciled.
  uint32_t unreported = 0;     // kJobReconciled.
  bool timedOut = false;       // kJobReconciled.
  std::string describe() const;
};

// One task event of a worker.
struct TaskEvent {
  enum class Kind {
    kStarted,  // task started resource_id=R job=J attempt=A pid=P
    kEnded,    // task ended resource_id=R job=J attempt=A state=S exit_code=C signal=S [message=".."]
  };
  Kind kind = Kind::kStarted;
  std::string resourceId;
  std::string job;
  std::string attempt;
  int64_t pid = 0;      // kStarted.
  std::string state;    // kEnded.
  int exitCode = 0;     // kEnded.
  int signal = 0;       // kEnded.
  std::string message;  // kEnded, FAILED.
  std::string describe() const;
};

// Reads one event of a process's events file (readEventsFile); nullopt if it is not such an
// event.
std::optional<JobEvent> parseJobEvent(const Event& event);
std::optional<TaskEvent> parseTaskEvent(const Event& event);
// Every such event of `events`, in order.
std::vector<JobEvent> parseJobEvents(const std::vector<Event>& events);
std::vector<TaskEvent> parseTaskEvents(const std::vector<Event>& events);

// ---- Processes a task left ----------------------------------------------------------------------

// True when no process `pid` exists, or only its zombie does (an orphan reparented to an init
// that has not reaped it yet runs nothing any more).
bool processGone(pid_t pid);
// Waits until every pid of `pids` is gone; returns those still alive after `timeout`.
std::vector<pid_t> waitForProcessesGone(const std::vector<pid_t>& pids, Duration timeout);
// The whole numbers of `path`, one per line (a task's pid file); empty when it cannot be read.
std::vector<pid_t> readPids(const std::string& path);

// ---- Marked tasks -------------------------------------------------------------------------------
// The reconciliation tests follow each start of a subtask from the task's own marker file: every
// attempt of subtask I of vertex V appends "<pid> <attempt id> <attempt number>" to
// `<dir>/V-I` when it starts, then runs until the file `<dir>/V-I.go` exists (bounded: ten
// minutes) and exits 1 if `<dir>/V-I.fail-<attempt number>` exists, else 0. The pid is the
// task's shell, alive while the attempt runs.

struct MarkedVertex {
  std::string name;
  uint32_t parallelism = 1;
  std::vector<std::string> upstream;
};

// A job file of `vertices`, each running the marked task with DIR=`dir`; `restartStrategy` is
// the job's `restart_strategy:` block ("" for none).
std::string markedJob(const std::string& name, const std::string& dir,
                      const std::vector<MarkedVertex>& vertices,
                      const std::string& restartStrategy = "");

// One start of a marked task.
struct TaskMarker {
  pid_t pid = 0;
  std::string attempt;
  uint32_t attemptNumber = 0;
  std::string describe() const;
};

std::string markerPath(const std::string& dir, const std::string& vertex, uint32_t subtask);
// The starts of subtask `subtask` of `vertex` so far, in order; malformed lines are skipped.
std::vector<TaskMarker> readMarkers(const std::string& dir, const std::string& vertex,
                                    uint32_t subtask);
// Waits until the subtask's marker file holds at least `count` starts; returns them all, or
// fails after `timeout` naming what it holds.
Result<std::vector<TaskMarker>> waitForMarkers(const std::string& dir, const std::string& vertex,
                                               uint32_t subtask, size_t count, Duration timeout);
// Waits until each of the first `parallelism` subtasks of `vertex` started at least once; returns
// the first start of each, by subtask index, or fails (as waitForMarkers) at the first subtask
// that did not start within `timeout` (each subtask waits up to `timeout`).
Result<std::vector<TaskMarker>> waitForFirstStarts(const std::string& dir,
                                                   const std::string& vertex, uint32_t parallelism,
                                                   Duration timeout);
// Lets every attempt of the subtask end (creates its go file), and makes its attempt
// `attemptNumber` exit 1 instead of 0 (creates that fail file; call it before the go file).
void letSubtaskEnd(const std::string& dir, const std::string& vertex, uint32_t subtask);
void failAttemptNumber(const std::string& dir, const std::string& vertex, uint32_t subtask,
                       uint32_t attemptNumber);

// ---- A cluster that runs jobs -------------------------------------------------------------------

struct JobClusterOptions {
  size_t masters = 1;
  size_t workers = 2;
  uint32_t slotsPerWorker = 2;
  std::vector<std::string> masterSet;  // "key=value" added to every master's settings.
  std::vector<std::string> workerSet;  // "key=value" added to every worker's settings.
  std::vector<std::string> workerEnv;  // "NAME=value" added to every worker's environment.
  std::vector<std::string> ctlSet;     // "key=value" given to every ctl() with --set.
  // YAML every master loads with --config (under masterSet): the worker.* options of the workers
  // a resource provider starts, which a master's command line refuses. "": none.
  std::string masterConfig;
};

// A cancel timeout short enough that the tests wait for it in well under a second.
inline constexpr const char* kTestTaskCancelTimeout = "worker.task-cancel-timeout=500ms";

// regent-master processes (one leading) and regent-worker processes (workerTestMasters / workerTestWorkers,
// plus kTestTaskCancelTimeout) on the shared ZooKeeper server, in a cluster of its own, and
// regentctl for it. Not thread-safe; use from the test's main thread, which it gives an EventLoop
// (for HTTP to the workers): a test holding one makes no other.
class JobCluster final {
 public:
  // Starts the masters, waits until the first leader serves, starts `options.workers` workers
  // and waits until each registered with it. `name` prefixes the cluster id.
  static Result<std::unique_ptr<JobCluster>> start(const std::string& name,
                                                   JobClusterOptions options = {});
  ~JobCluster();

  MasterCluster& masters() { return *masters_; }
  WorkerCluster& workers() { return *workers_; }
  Regentctl& regentctl() { return *regentctl_; }
  size_t leader() const { return leader_; }
  uint64_t epoch() const { return epoch_; }
  const std::string& clusterId() const { return clusterId_; }
  // The test's event loop (the one the cluster's HTTP reads run on), for a test's own RPC.
  EventLoop& loop() { return loop_; }

  // Waits until a master serves as the leader of `epoch` and every running worker registered
  // with it; from then on leader() and epoch() are that master's, and the job events read are
  // its own. Workers in `notWaitingFor` (stopped ones) are not waited for.
  Status followLeader(uint64_t epoch, const std::vector<size_t>& notWaitingFor = {});
  // Starts one more worker and waits until it registered with the leader; returns its slot.
  Result<size_t> addWorker();
  // The worker slot whose current run has resource id `resourceId`.
  std::optional<size_t> workerSlotOf(const std::string& resourceId);

  // A directory the tasks may write to. Tests run as root and tasks then run as
  // worker.task-user (nobody), so it is world-writable (mode 1777).
  const std::string& taskDir() const { return taskDir_.path(); }
  // Writes `text` to `name` in the test's own directory; returns the path.
  std::string writeFile(const std::string& name, const std::string& text);

  // regentctl with this cluster's --zk and --cluster-id, options.ctlSet, then `args`
  // (regentctlChecked).
  CtlResult ctl(const std::vector<std::string>& args);
  // The same with `set` ("key=value", each given with --set) instead of options.ctlSet: another
  // credential, or none.
  CtlResult ctlWith(const std::vector<std::string>& set, const std::vector<std::string>& args);
  // `regentctl jobs submit` of a job file holding `yaml`; returns the job id (hex).
  Result<std::string> submit(const std::string& yaml);
  // `regentctl --json jobs status <job>`, parsed.
  Result<nlohmann::json> status(const std::string& job);
  // Polls status() until `done` holds for it; returns the last status, or fails after `timeout`
  // naming the last one.
  Result<nlohmann::json> waitForStatus(const std::string& job,
                                       const std::function<bool(const nlohmann::json&)>& done,
                                       Duration timeout);
  // status() of a job that ended, checked to show it in `state` with its result clean; fails
  // naming the status when it does not.
  Result<nlohmann::json> endedStatus(const std::string& job, const std::string& state);
  // `regentctl --json jobs list`: job id -> state.
  Result<std::map<std::string, std::string>> listJobs();

  // The leader's job events (its current run's events file), and waiting for one.
  std::vector<JobEvent> jobEvents();
  Result<JobEvent> waitForJobEvent(const std::function<bool(const JobEvent&)>& match,
                                   Duration timeout);
  // Waits for "job clean" of `job`: the job's end to end completion.
  Result<JobEvent> waitForJobClean(const std::string& job, Duration timeout);
  // Waits for "job clean" of `job` and checks that the job ended once ("job ended"), in `state`
  // (the state it is clean in too), after `restarts` restarts; returns that "job ended" event, or
  // fails naming what differs.
  Result<JobEvent> waitForJobEnd(const std::string& job, const std::string& state,
                                 uint32_t restarts, Duration timeout);
  // Waits for "job reconciled" of `job`: its JobMaster left RECONCILING after a failover.
  Result<JobEvent> waitForJobReconciled(const std::string& job, Duration timeout);
  // The leader's events of `job` of `kind`, in order.
  std::vector<JobEvent> jobEventsOf(const std::string& job, JobEvent::Kind kind);

  // A worker's task events (its current run's events file), and waiting for one on any worker.
  std::vector<TaskEvent> taskEvents(size_t worker);
  Result<TaskEvent> waitForTaskEvent(const std::function<bool(const TaskEvent&)>& match,
                                     Duration timeout);
  // The task events of `job` of `kind` on every worker (current runs), worker by worker.
  std::vector<TaskEvent> taskEventsOf(const std::string& job, TaskEvent::Kind kind);

  // Whether ZooKeeper holds the job's JobGraph (`jobgraphs/<job>`) or JobResult
  // (`job-results/<job>`) under the cluster's root.
  Result<bool> jobGraphStored(const std::string& job);
  Result<bool> jobResultStored(const std::string& job);

  // Waits until `regentctl workers --json` lists every slot of every running worker FREE.
  Result<SlotTable> waitForAllSlotsFree(Duration timeout);
  // regent_worker_tasks_running of the worker's /metrics.
  Result<double> tasksRunning(size_t worker);
  // The /metrics text of the leader and of a worker.
  Result<std::string> masterMetrics();
  // The leader's HTTP address ("127.0.0.1:PORT"), from its "http listening on" line.
  Result<std::string> masterHttpAddress();
  // The HTTP address master `index` listens on (its "http listening" line).
  Result<std::string> masterHttpAddressOf(size_t index);
  Result<std::string> workerMetrics(size_t worker);

  // Every process's output tail, for failure messages.
  std::string describe();

 private:
  JobCluster(std::string clusterId, std::string quorum, JobClusterOptions options);
  Result<bool> nodeExists(const std::string& relativePath);
  // Every event of the events file at `path` so far; each call reads only what was appended.
  const std::vector<Event>& eventsIn(const std::string& path);

  const std::string clusterId_;
  const std::string quorum_;
  const JobClusterOptions options_;
  std::unique_ptr<MasterCluster> masters_;
  std::unique_ptr<WorkerCluster> workers_;
  std::unique_ptr<Regentctl> regentctl_;
  size_t leader_ = 0;
  uint64_t epoch_ = 0;
  EventLoop loop_;
  TempDir dir_{"regent-jobs"};
  TempDir taskDir_{"regent-tasks"};
  int files_ = 0;
  std::map<std::string, EventsFileReader> eventsFiles_;  // By path: each run's file of its own.
};

// The status's vertex named `vertex` (`jobs status --json`), or null.
const nlohmann::json* vertexStatus(const nlohmann::json& status, const std::string& vertex);
// The subtask `index` of `vertex`, or null.
const nlohmann::json* subtaskStatus(const nlohmann::json& status, const std::string& vertex,
                                    uint32_t index);
// Polls `jobs status` of `job` until each of the first `parallelism` subtasks of `vertex` shows
// an attempt in `state`; returns those attempts ("attempt" of each subtask, by index).
Result<std::vector<nlohmann::json>> waitForSubtaskAttempts(
    JobCluster& cluster, const std::string& job, const std::string& vertex, uint32_t parallelism,
    const std::string& state, Duration timeout);
// A text field of `object` ("" when absent or not text).
std::string textField(const nlohmann::json& object, const char* key);

// A submitted job whose subtasks of one vertex all run, as the leader that ran them saw them.
struct RunningJob {
  std::string id;
  std::vector<TaskMarker> markers;       // The first start of each subtask, by index.
  std::vector<nlohmann::json> attempts;  // `jobs status` "attempt" of each subtask, by index.
};
// Submits `jobFile`, then waits until each of the first `parallelism` subtasks of `vertex` started
// (its marker) and `jobs status` shows them all RUNNING; fails naming the step that did not
// happen within `timeout` (each step waits up to `timeout`).
Result<RunningJob> submitAndWaitRunning(JobCluster& cluster, const std::string& jobFile,
                                        const std::string& vertex, uint32_t parallelism,
                                        Duration timeout);

// What a "job reconciled" line should say. `adopted` and `adoptedOrEnded` (the attempts the
// JobMaster heard of, adopted or their end reported) are checked only when set.
struct ExpectedReconciliation {
  std::optional<uint32_t> adopted;
  std::optional<uint32_t> adoptedOrEnded;
  uint32_t unreported = 0;
  bool timedOut = false;
};
// How the "job reconciled" line `reconciled` differs from `expected`, naming both; "" when it
// does not.
std::string reconciliationMismatch(const JobEvent& reconciled,
                                   const ExpectedReconciliation& expected);
// Waits for the "job reconciled" line of `job` and returns it, or fails naming the line when it
// says otherwise than `expected` (or when none came within `timeout`).
Result<JobEvent> waitForReconciliation(JobCluster& cluster, const std::string& job,
                                       const ExpectedReconciliation& expected, Duration timeout);

// The bound of every wait in the jobs itests. Generous: ASan builds and parallel tests on two
// cores are slow; none of these waits is a claim about speed.
constexpr Duration kJobsTimeout{60000};

// Whether `text` holds `part` (for regentctl output and messages).
inline bool containsText(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace regent::testing

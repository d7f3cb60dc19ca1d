// What a chaos run leaves to check (docs/testing.md, "Chaos suite"): the records read from the
// processes' events files, the tasks' own marker files, the faults the run injected, the leader
// claims sampled over HTTP, and the cluster's state after the last heal. Plain data:
// chaos_checker.h judges it; chaos_cluster_test_util.h gathers it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace regent::testing::chaos {

// Milliseconds of the wall clock (every process of a run shares the machine's clock).
using WallMs = int64_t;

// "leadership granted" of one master run.
struct Grant {
  std::string master;  // "m<slot>/<run>".
  uint64_t epoch = 0;
  WallMs at = 0;
};

// A master that claimed, on /metrics, to serve as the leader (regent_leader_serving 1) of
// `epoch`; the request went out at `sentUs` and its answer was read at `receivedUs` (the test
// process's monotonic clock).
struct ServingClaim {
  std::string master;
  uint64_t epoch = 0;
  int64_t sentUs = 0;
  int64_t receivedUs = 0;
};

// "job ended" of a master run.
struct JobEnd {
  std::string job;
  std::string state;
  std::string master;
  WallMs at = 0;
};

// "attempt state ... state=FINISHED" of a master run: the leader took the subtask as finished.
struct AttemptFinished {
  std::string job;
  std::string vertex;
  uint32_t subtask = 0;
  std::string attempt;
  std::string master;
  WallMs at = 0;
};

// A task's own marker line: "start" when its process began, "end" (with its exit code) when it
// ended by itself. A task killed by a signal writes no end.
struct TaskMark {
  std::string job;
  std::string vertex;
  uint32_t subtask = 0;
  bool start = true;
  pid_t pid = 0;
  std::string attempt;
  uint32_t attemptNumber = 0;
  int exitCode = 0;  // End marks.
  WallMs at = 0;
};

// "task started" / "task ended" of a worker run: where an attempt ran, and when the worker saw
// its process end. A master's "attempt deployed" counts as a start too: where it was sent.
struct WorkerTask {
  std::string resourceId;
  std::string job;
  std::string attempt;
  bool ended = false;
  std::string state;  // Ended: FINISHED, FAILED, CANCELED.
  WallMs at = 0;
};

// A worker run's "worker registered" (method "") or "call admitted" (the method): the epoch it
// took from a leader. In the order of the run's events file.
struct WorkerEpoch {
  std::string run;  // "w<slot>/<run>".
  std::string resourceId;
  std::string method;
  uint64_t epoch = 0;
  WallMs at = 0;
};

// A fault the run put on a worker: SIGKILL (its tasks die with it at `from`), SIGSTOP (its tasks
// run on, unheard, from `from` to `to`), or a cut from the leader.
struct WorkerFault {
  enum class Kind { kKill, kPause, kCut };
  std::string resourceId;
  Kind kind = Kind::kKill;
  WallMs from = 0;
  WallMs to = 0;
};

// One round of the run: the fault drawn for it and when it was injected, healed and settled.
struct Round {
  int number = 0;
  std::string fault;
  std::string target;  // "m1", "w2", "zk0+zk2", ...
  WallMs from = 0;     // Injected.
  WallMs healed = 0;
  WallMs to = 0;  // Settled (or gave up).
  int64_t settleMs = -1;  // From the heal; -1: did not settle within the bound.
};

// A job the run submitted; `acknowledged` when `regentctl jobs submit` said it was stored.
struct SubmittedJob {
  std::string id;
  std::string name;
  std::string shape;
  bool acknowledged = false;
  bool cancelled = false;
};

// One slot of the leader's /v1/workers held by a job.
struct AllocatedSlot {
  std::string resourceId;
  uint32_t index = 0;
  std::string job;
};

// The cluster after the last heal, once every job was released and given time to end.
struct FinalState {
  std::vector<std::string> servingMasters;    // Masters claiming SERVING in the last sample.
  std::set<std::string> liveWorkers;          // Resource ids of the workers that run.
  std::set<std::string> registeredWorkers;    // The leader's /v1/workers.
  std::vector<AllocatedSlot> allocatedSlots;  // The leader's /v1/workers.
  std::map<std::string, std::string> jobStates;  // The leader's /v1/jobs: job -> state.
  std::vector<pid_t> leftoverPids;  // Task processes (from the start marks) still alive.
  uint64_t zookeeperEpoch = 0;      // The epoch of ZooKeeper's leader node.
};

struct History {
  std::vector<Grant> grants;
  std::vector<ServingClaim> claims;
  std::vector<JobEnd> jobEnds;
  std::vector<AttemptFinished> finished;
  std::vector<TaskMark> marks;
  std::vector<WorkerTask> workerTasks;
  std::vector<WorkerEpoch> workerEpochs;
  std::vector<WorkerFault> workerFaults;
  std::vector<Round> rounds;
  std::vector<SubmittedJob> jobs;
  FinalState final;
  // "epoch gate refused" events of the workers (the first ten of each run, then one in a
  // hundred): stale calls the workers' gate stopped. Not judged; the summary shows it.
  size_t epochGateRefusals = 0;
};

}  // namespace regent::testing::chaos

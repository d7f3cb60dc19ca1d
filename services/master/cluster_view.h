// The leader's state as one read-only view, for the master's HTTP routes (/v1/leader, /v1/jobs,
// /v1/workers, /readyz, /metrics) and the status page: the leadership as this master sees it, the
// term's jobs and workers, the recent events and the sampled history. Every answer is a value snapshot
// taken when asked, so a reader keeps nothing of the term alive; a new field is a field of a
// snapshot, not a new method.
#pragma once

#include <capnp/message.h>
#include <kj/async.h>
#include <kj/memory.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "common/event_sink.h"
#include "common/ids.h"
#include "common/result.h"
#include "leader/leader_info.h"
#include "leader/leader_retrieval.h"
#include "rpc/schema/cluster.capnp.h"
#include "services/master/cluster_history.h"
#include "rpc/schema/jobs.capnp.h"
#include "services/dispatcher/dispatcher.h"
#include "services/dispatcher/dispatcher_gateway.h"

namespace regent::master {

// The leadership as this master sees it.
struct LeadershipSnapshot {
  std::string clusterId;                     // cluster-id.
  leader::ContenderInfo self;                // This master.
  std::optional<leader::LeaderInfo> leader;  // The leader as this master believes (its own term
                                             // while it leads); nullopt: none known.
  uint64_t leadingEpoch = 0;                 // The epoch this master leads, 0 when it does not.
  bool recovered = false;           // Leading, and the term recovered: its jobs can be read.
  bool serving = false;             // Leading, and SERVING was published for the term.
  bool zooKeeperConnected = false;  // The ZooKeeper session is up (false in standalone mode).
};

// The term's jobs, each as the Dispatcher's wire mapping describes it (dispatcher::toWire with
// JobDetail::kCounts), in the Dispatcher's order. `jobs` reads `message`.
struct JobsSnapshot {
  kj::Own<capnp::MallocMessageBuilder> message;
  capnp::List<wire::JobStatus>::Reader jobs;
};

// One job with its vertices and subtasks (dispatcher::toWire with JobDetail::kSubtasks): what
// jobStatus answers. `status` reads `message`.
struct JobDetailSnapshot {
  kj::Own<capnp::MallocMessageBuilder> message;
  wire::JobStatus::Reader status;
};

// The term's registered workers with their slots, as listTaskExecutors answers
// (TaskExecutorView::list), and what only the leader knows in process: which allocated slots the
// worker has not confirmed yet. `workers` reads `message`.
struct WorkersSnapshot {
  dispatcher::TaskExecutorView::Counts counts;
  kj::Own<capnp::MallocMessageBuilder> message;
  capnp::List<wire::TaskExecutorInfo>::Reader workers;
  std::vector<std::pair<ResourceId, uint32_t>> pendingSlots;  // (worker, slot index)

  bool slotPending(const ResourceId& worker, uint32_t index) const;
};

// The snapshots as the term fills them from its services (LeaderTerm; tests on a Dispatcher or
// a TaskExecutorView of their own).
JobsSnapshot jobsSnapshot(const dispatcher::Dispatcher& from);
// nullopt: the Dispatcher has no job `id`.
std::optional<JobDetailSnapshot> jobDetailSnapshot(const dispatcher::Dispatcher& from,
                                                   const JobId& id);
WorkersSnapshot workersSnapshot(const dispatcher::TaskExecutorView& taskExecutors);

// A master's view of the cluster. Loop-thread only; every snapshot is taken when asked.
class ClusterView {
 public:
  virtual ~ClusterView() = default;
  virtual LeadershipSnapshot leadership() const = 0;
  // The term's jobs; nullopt unless leadership().recovered.
  virtual std::optional<JobsSnapshot> jobs() const = 0;
  // The term's jobs by state as jobs() would show them, counted without a snapshot
  // (dispatcher::Dispatcher::counts, for /metrics); nullopt unless leadership().recovered.
  virtual std::optional<dispatcher::JobCounts> jobCounts() const = 0;
  // Job `id` of the term; nullopt when the term has no such job, or unless recovered.
  virtual std::optional<JobDetailSnapshot> job(const JobId& id) const = 0;
  // Before job(id): brings an ended job's detail that is not in memory (it ended under an
  // earlier leader) from the store. Resolves when job(id) has it, or why not; never rejects.
  virtual kj::Promise<void> loadJobDetail(const JobId& id) = 0;
  // The term's workers; nullopt unless leading (they are there while the term still recovers,
  // once its ResourceManager started).
  virtual std::optional<WorkersSnapshot> workers() const = 0;
  // The term's workers and slots counted without a snapshot (for /metrics and the history);
  // nullopt unless leading.
  virtual std::optional<dispatcher::TaskExecutorView::Counts> workerCounts() const = 0;
  // The recent events of docs/operations.md a page shows, oldest first, at most as many as the
  // view keeps: this master's grants, revocations and hand-overs, and its terms' workers lost
  // (`worker removed`), workers ended or not started, and jobs ended.
  virtual std::vector<Event> recentEvents() const = 0;
  // The samples of the master's own history (cluster_history.h), oldest first; empty unless it
  // served a term since it last was granted one.
  virtual std::vector<ClusterSample> history() const = 0;
  // Every master contending, in latch order, read from the election's coordination service.
  virtual kj::Promise<Result<std::vector<leader::ContenderEntry>>> contenders() = 0;
};

}  // namespace regent::master

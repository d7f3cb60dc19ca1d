// The Dispatcher's wire side: a DispatcherGateway server that translates calls into Dispatcher
// operations and their outcomes into results and Failures (docs/wire.md, "Error model").
#pragma once

#include <capnp/orphan.h>
#include <kj/async.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>

#include "common/ids.h"
#include "rpc/output_token.h"
#include "rpc/schema/gateways.capnp.h"
#include "services/dispatcher/dispatcher.h"

namespace regent::dispatcher {

// `outcome` as the wire's Failure.
void toWire(const JobFailure& outcome, wire::Failure::Builder failure);

// How much of a running job's live detail toWire() asks its runner for.
enum class JobDetail {
  kCounts,    // listJobs, /v1/jobs: task counts and restarts of the whole job (JobRunner::counts).
  kSubtasks,  // jobStatus, /v1/jobs/<id>: every vertex and subtask (JobRunner::describe).
};

// Fills a JobStatus from what the Dispatcher knows of a job: a job its runner runs carries the
// runner's detail (`detail`) with the Dispatcher's state; a job not (yet) running has every
// subtask pending; an ended job carries its result's state, times and failure, and, for kSubtasks
// when it ended in this term, its runner's last task counts, vertices and subtasks;
// a corrupt one only its id, state CORRUPT and the reason.
void toWire(const JobView& job, wire::JobStatus::Builder status,
            JobDetail detail = JobDetail::kCounts);

// The term's registered workers and their slots as inspection reads them
// (DispatcherGateway.listTaskExecutors and clusterOverview, /v1/workers, /metrics): the term's
// ResourceManager, adapted by the LeaderTerm. Loop-thread only.
class TaskExecutorView {
 public:
  struct Counts {
    uint32_t taskExecutors = 0;   // Registered workers, reported or not.
    uint32_t slotsTotal = 0;      // Slots of the workers that reported.
    uint32_t slotsFree = 0;
    uint32_t slotsAllocated = 0;  // Allocated and held (pending ones excluded).
    uint32_t slotsPending = 0;    // Allocated by the SlotManager, not yet confirmed by the worker.
  };
  virtual ~TaskExecutorView() = default;
  virtual Counts counts() const = 0;
  // Every registered worker with its latest slot report, in resource id order, built in
  // `orphanage` (the message the caller answers with).
  virtual capnp::Orphan<capnp::List<wire::TaskExecutorInfo>> list(
      capnp::Orphanage orphanage) const = 0;
  // Whether slot `index` of `worker` is allocated but not yet confirmed by the worker (the wire's
  // SlotStatus does not say; /v1/workers shows it as PENDING).
  virtual bool slotPending(const ResourceId& worker, uint32_t index) const = 0;
  // The workers a resource provider started, in every phase (none without a provider).
  virtual size_t startedWorkerCount() const { return 0; }
  virtual void listStartedWorkers(capnp::List<wire::StartedWorker>::Builder out) const {
    (void)out;
  }
};

// What DispatcherGateway.attemptOutputToken signs with: the term's signer, the wall clock, and
// the current registration of a worker (nullopt: not registered in this term).
struct OutputTokenIssuer {
  const rpc::OutputTokenSigner& signer;
  std::function<int64_t()> nowMs;  // Unix milliseconds; null: wallClockMillis().
  std::function<std::optional<RegistrationId>(const ResourceId& worker)> registrationOf;
};

// Serve it only through the term's rpc::LeadershipTerm::serve(): that checks the epoch and
// readiness before any method here runs, and drops the handlers still running when the term
// ends, before the term destroys `dispatcher`. `dispatcher` and `taskExecutors` must outlive
// every handler. Without `taskExecutors` (a process with no ResourceManager) listTaskExecutors
// answers an empty list and clusterOverview counts no worker. `describeLeader`, when set, fills
// clusterOverview's `leader` (the master's own record of its term). `outputTokens`, when set
// (it must outlive the server), signs attemptOutputToken's tokens; without it that method answers
// failedPrecondition. Loop-thread only.
class DispatcherGatewayServer final : public wire::DispatcherGateway::Server {
 public:
  using DescribeLeader = std::function<void(wire::LeaderInfo::Builder)>;

  explicit DispatcherGatewayServer(Dispatcher& dispatcher,
                                   const TaskExecutorView* taskExecutors = nullptr,
                                   DescribeLeader describeLeader = {},
                                   const OutputTokenIssuer* outputTokens = nullptr)
      : dispatcher_(dispatcher),
        taskExecutors_(taskExecutors),
        describeLeader_(std::move(describeLeader)),
        outputTokens_(outputTokens) {}

  kj::Promise<void> submitJob(SubmitJobContext context) override;
  kj::Promise<void> cancelJob(CancelJobContext context) override;
  kj::Promise<void> listJobs(ListJobsContext context) override;
  kj::Promise<void> jobStatus(JobStatusContext context) override;
  kj::Promise<void> clusterOverview(ClusterOverviewContext context) override;
  kj::Promise<void> listTaskExecutors(ListTaskExecutorsContext context) override;
  kj::Promise<void> removeCorruptJob(RemoveCorruptJobContext context) override;
  // The attempt must be the latest of one of the job's subtasks as jobStatus describes them; the
  // token is signed for the worker that subtask entry names.
  kj::Promise<void> attemptOutputToken(AttemptOutputTokenContext context) override;

 private:
  Dispatcher& dispatcher_;
  const TaskExecutorView* taskExecutors_;
  const DescribeLeader describeLeader_;
  const OutputTokenIssuer* outputTokens_;
};

}  // namespace regent::dispatcher

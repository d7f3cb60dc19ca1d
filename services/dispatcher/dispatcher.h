// The Dispatcher (DESIGN §7, §8): the leader's job front door for one leadership term. It
// recovers every stored JobGraph and job result when the term starts, then validates, persists
// and accepts submissions, lists jobs and cancels them through the dirty -> clean protocol.
// Jobs do not run yet (no JobMaster): a recovered or submitted job stays CREATED.
#pragma once

#include <kj/async.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "common/ids.h"
#include "common/result.h"
#include "rpc/schema/gateways.capnp.h"
#include "services/dispatcher/job_graph_validation.h"
#include "store/store_services.h"

namespace regent::dispatcher {

// One term's Dispatcher. Serve it with the term's rpc::LeadershipTerm::serve(), which checks the
// epoch before any method here runs and drops the handlers still running when the term ends.
// Loop-thread only. `stores` must outlive the Dispatcher and its running handlers (serve() ends
// those at revocation); destroying the Dispatcher cancels what is in flight.
class Dispatcher final : public wire::DispatcherGateway::Server {
 public:
  // `nowMs` gives Unix milliseconds (injected for tests).
  Dispatcher(uint64_t epoch, store::LeaderStores& stores, JobGraphLimits limits,
             std::function<int64_t()> nowMs);
  ~Dispatcher() noexcept;

  // Reads every JobGraph and job result. A job with a result (dirty or clean) ended in an
  // earlier term: a dirty result's cleanup is finished (its JobGraph removed, the result marked
  // clean) and the job is never re-run. Every other job is CREATED. Corrupt records are logged
  // and skipped. Until this resolves, calls answer `unavailable` (still RECOVERING).
  kj::Promise<Status> recover();

  // Jobs known in this term, for metrics: not terminal.
  size_t activeJobCount() const { return jobs_.size(); }

  kj::Promise<void> submitJob(SubmitJobContext context) override;
  kj::Promise<void> cancelJob(CancelJobContext context) override;
  kj::Promise<void> listJobs(ListJobsContext context) override;
  kj::Promise<void> jobStatus(JobStatusContext context) override;
  kj::Promise<void> clusterOverview(ClusterOverviewContext context) override;

 private:
  struct Job {
    kj::Own<capnp::MallocMessageBuilder> graph;  // As persisted (submittedAtMs set).
    wire::JobState state = wire::JobState::CREATED;
    int64_t stateChangedAtMs = 0;
  };

  // Finishes the cleanup of a job that ended: JobGraph removed, result marked clean.
  kj::Promise<Status> finishCleanup(JobId id, bool dirty);
  // Answers `unavailable` until recover() finished; true when the call may go on.
  template <typename Context>
  bool recoveredOrAnswered(Context& context);

  const uint64_t epoch_;
  store::LeaderStores& stores_;
  const JobGraphLimits limits_;
  const std::function<int64_t()> nowMs_;
  bool recovered_ = false;
  std::map<JobId, Job> jobs_;
  std::set<JobId> inFlight_;  // Submissions or cancellations being persisted.
  kj::Canceler canceler_;
};

}  // namespace regent::dispatcher

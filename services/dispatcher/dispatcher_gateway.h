// The Dispatcher's wire side: a DispatcherGateway server that translates calls into Dispatcher
// operations and their outcomes into results and Failures (docs/wire.md, "Error model").
#pragma once

#include <kj/async.h>

#include "rpc/schema/gateways.capnp.h"
#include "services/dispatcher/dispatcher.h"

namespace regent::dispatcher {

// `outcome` as the wire's Failure.
void toWire(const JobFailure& outcome, wire::Failure::Builder failure);

// Fills a JobStatus from what the Dispatcher knows of a job: a job of this term has every
// subtask pending; an ended job carries its result's state, times and failure; a corrupt one
// only its id, state CORRUPT and the reason.
void toWire(const JobView& job, wire::JobStatus::Builder status);

// Serve it only through the term's rpc::LeadershipTerm::serve(): that checks the epoch and
// readiness before any method here runs, and drops the handlers still running when the term
// ends, before the term destroys `dispatcher`. `dispatcher` must outlive every handler.
// Loop-thread only.
class DispatcherGatewayServer final : public wire::DispatcherGateway::Server {
 public:
  explicit DispatcherGatewayServer(Dispatcher& dispatcher) : dispatcher_(dispatcher) {}

  kj::Promise<void> submitJob(SubmitJobContext context) override;
  kj::Promise<void> cancelJob(CancelJobContext context) override;
  kj::Promise<void> listJobs(ListJobsContext context) override;
  kj::Promise<void> jobStatus(JobStatusContext context) override;
  kj::Promise<void> clusterOverview(ClusterOverviewContext context) override;
  kj::Promise<void> removeCorruptJob(RemoveCorruptJobContext context) override;

 private:
  Dispatcher& dispatcher_;
};

}  // namespace regent::dispatcher

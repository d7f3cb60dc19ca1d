// A DispatcherGateway whose submitJob, cancelJob and listJobs only count that they were reached:
// for tests (and the authentication fuzz target) that check which calls get past the role and
// epoch checks to a handler.
#pragma once

#include <kj/async.h>

#include <cstdint>

#include "rpc/schema/gateways.capnp.h"

namespace regent::testing {

class CountingDispatcher final : public wire::DispatcherGateway::Server {
 public:
  // `reached` must outlive the server.
  explicit CountingDispatcher(uint64_t& reached) : reached_(reached) {}
  kj::Promise<void> submitJob(SubmitJobContext) override { return reached(); }
  kj::Promise<void> cancelJob(CancelJobContext) override { return reached(); }
  kj::Promise<void> listJobs(ListJobsContext) override { return reached(); }

 private:
  kj::Promise<void> reached() {
    ++reached_;
    return kj::READY_NOW;
  }
  uint64_t& reached_;
};

}  // namespace regent::testing

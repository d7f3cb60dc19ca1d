// The JobMasters of one term (job_masters.h): one JobMaster per running job (job_master.h).
#include "services/jobmaster/job_masters.h"

#include <capnp/message.h>
#include <spdlog/spdlog.h>

#include <utility>

#include "services/jobmaster/job_master.h"

namespace regent::jobmaster {

// ---- JobMasters -------------------------------------------------------------------------------

JobMasters::JobMasters(kj::Timer& timer, EventSink& events, uint64_t epoch,
                       resourcemanager::JobMasterPort& resourceManager,
                       store::JobProgressStore& progress, Serve serve, JobMasterCounters& counters,
                       JobMasterOptions options)
    : term_{timer, events, epoch, resourceManager, progress, std::move(serve), counters,
            std::move(options)} {
  term_.startedAtMs = term_.wallNow();
  term_.resourceManager.setWorkerListener(this);
}

JobMasters::~JobMasters() noexcept {
  term_.resourceManager.setWorkerListener(nullptr);
  releases_.cancel("the term's JobMasters are gone");
  jobs_.clear();
}

void JobMasters::workerRestarted(const ResourceId& worker, const std::string& message) {
  for (auto& [job, master] : jobs_) master->workerRestarted(worker, message);
}

void JobMasters::workerReported(const ResourceId& worker) {
  for (auto& [job, master] : jobs_) master->workerReported(worker);
}

void JobMasters::setListener(dispatcher::JobRunnerListener& listener) {
  term_.listener = &listener;
}

void JobMasters::start(JobId job, wire::JobGraph::Reader graph,
                       kj::Maybe<wire::JobProgress::Reader> recovered) {
  if (jobs_.count(job) != 0) {
    spdlog::warn("job {}: start() for a job already running in this term; ignored", job.toHex());
    return;
  }
  auto master = kj::heap<JobMaster>(term_, job, graph, recovered);
  JobMaster& started = *master;
  jobs_.emplace(job, kj::mv(master));
  started.start();
}

kj::Promise<kj::Array<capnp::word>> JobMasters::release(JobId job, const std::string& cause) {
  auto found = jobs_.find(job);
  if (found == jobs_.end()) {
    term_.resourceManager.disconnectJobMaster(job, cause);
    return kj::Array<capnp::word>();
  }
  if (found->second->releasing()) {
    // The first release() still runs and drops the JobMaster when done.
    spdlog::warn("job {}: release() while its release runs; nothing more to do", job.toHex());
    return kj::Array<capnp::word>();
  }
  return releases_.wrap(found->second->release(cause).then([this, job] {
    // The final detail (the cancelled attempts' ends) for the Dispatcher to keep.
    capnp::MallocMessageBuilder message;
    describe(job, message.initRoot<wire::JobStatus>());
    jobs_.erase(job);
    return capnp::canonicalize(message.getRoot<wire::JobStatus>().asReader());
  }));
}

bool JobMasters::describe(JobId job, wire::JobStatus::Builder status) const {
  auto found = jobs_.find(job);
  if (found == jobs_.end()) return false;
  found->second->execution().describe(status, term_.monoNow(), term_.resourceManager);
  return true;
}

bool JobMasters::counts(JobId job, wire::TaskCounts::Builder tasks, uint32_t& restarts) const {
  auto found = jobs_.find(job);
  if (found == jobs_.end()) return false;
  found->second->execution().counts(tasks);
  restarts = found->second->execution().restarts();
  return true;
}

kj::Maybe<wire::JobMasterGateway::Client> JobMasters::gateway(
    JobId job, kj::Own<resourcemanager::WorkerBinding> caller) {
  auto found = jobs_.find(job);
  if (found == jobs_.end()) return nullptr;
  return found->second->serveFor(kj::mv(caller));
}

size_t JobMasters::size() const { return jobs_.size(); }

size_t JobMasters::heldBytesForTests() const {
  size_t bytes = sizeof(*this);
  for (const auto& [job, master] : jobs_) {
    bytes += sizeof(JobMaster) + 48 + master->execution().heldBytes();
  }
  return bytes;
}

}  // namespace regent::jobmaster

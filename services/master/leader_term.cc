// LeaderTerm (see leader_term.h): serve the ResourceManager, open the stores, recover, serve; end
// in a fixed order.
#include "services/master/leader_term.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "common/units.h"
#include "services/dispatcher/dispatcher_gateway.h"

namespace regent::master {
namespace {

// The ResourceManager's workers as inspection reads them.
class ResourceManagerTaskExecutors final : public dispatcher::TaskExecutorView {
 public:
  explicit ResourceManagerTaskExecutors(const resourcemanager::ResourceManager& resourceManager)
      : resourceManager_(resourceManager) {}

  Counts counts() const override {
    const resourcemanager::SlotCounts counts = resourceManager_.counts();
    return {.taskExecutors = static_cast<uint32_t>(counts.workers),
            .slotsTotal = static_cast<uint32_t>(counts.total),
            .slotsFree = static_cast<uint32_t>(counts.free),
            .slotsAllocated = static_cast<uint32_t>(counts.allocated - counts.pending),
            .slotsPending = static_cast<uint32_t>(counts.pending)};
  }

  capnp::Orphan<capnp::List<wire::TaskExecutorInfo>> list(
      capnp::Orphanage orphanage) const override {
    auto listed = orphanage.newOrphan<capnp::List<wire::TaskExecutorInfo>>(
        static_cast<uint32_t>(resourceManager_.counts().workers));
    resourceManager_.listTaskExecutors(listed.get());
    return listed;
  }

  size_t startedWorkerCount() const override {
    const resourcemanager::PoolCounts counts = resourceManager_.workerPoolCounts();
    return counts.requested + counts.pending + counts.registered + counts.releasing;
  }

  void listStartedWorkers(capnp::List<wire::StartedWorker>::Builder out) const override {
    resourceManager_.listStartedWorkers(out);
  }

  bool slotPending(const ResourceId& worker, uint32_t index) const override {
    const resourcemanager::Worker* found = resourceManager_.slotManager().worker(worker);
    if (found == nullptr) return false;
    for (const resourcemanager::Slot& slot : found->slots) {
      if (slot.index == index) return slot.pending;
    }
    return false;
  }

 private:
  const resourcemanager::ResourceManager& resourceManager_;
};

// A promise forked for its waiters, and in `fulfiller` what resolves it.
kj::ForkedPromise<void> forkFulfilledBy(kj::Own<kj::PromiseFulfiller<void>>& fulfiller) {
  auto paf = kj::newPromiseAndFulfiller<void>();
  fulfiller = kj::mv(paf.fulfiller);
  return paf.promise.fork();
}

}  // namespace

LeaderTerm::LeaderTerm(kj::Timer& timer, EventSink& events, uint64_t epoch,
                       rpc::FencingCounters& counters,
                       resourcemanager::ResourceManagerCounters& resourceManagerCounters,
                       jobmaster::JobMasterCounters& jobMasterCounters,
                       store::StoreServices& storeServices, store::StoreTerm storeTerm,
                       LeaderTermOptions options)
    : timer_(timer),
      events_(events),
      epoch_(epoch),
      capabilities_(epoch, counters),
      resourceManagerCounters_(resourceManagerCounters),
      jobMasterCounters_(jobMasterCounters),
      storeServices_(storeServices),
      storeTerm_(std::move(storeTerm)),
      options_(std::move(options)),
      backoff_(options_.retryInitial, options_.retryMax, options_.jitter),
      outputTokens_(rpc::OutputTokenSigner::random(epoch, options_.outputTokenTtlSeconds)),
      outputTokenIssuer_{outputTokens_, options_.nowMs,
                         [this](const ResourceId& worker) -> std::optional<RegistrationId> {
                           if (resourceManager_.get() == nullptr) return std::nullopt;
                           const resourcemanager::Worker* registered =
                               resourceManager_->slotManager().worker(worker);
                           if (registered == nullptr) return std::nullopt;
                           return registered->registrationId;
                         }},
      ready_(forkFulfilledBy(markReady_)) {}

LeaderTerm::~LeaderTerm() noexcept {
  // Handlers first: they must not run on against the services destroyed below.
  capabilities_.revoke("leadership revoked");
  canceler_.cancel("the leadership term of epoch " + std::to_string(epoch_) + " ended");
}

kj::Promise<void> LeaderTerm::start() {
  resourcemanager::ResourceManagerOptions resourceManagerOptions = options_.resourceManager;
  resourceManagerOptions.outputReadKey = [this](const ResourceId& worker,
                                                const RegistrationId& registration) {
    return outputTokens_.workerKey(worker, registration);
  };
  resourceManager_ = kj::heap<resourcemanager::ResourceManager>(
      timer_, events_, epoch_, resourceManagerCounters_, std::move(resourceManagerOptions));
  taskExecutors_ = kj::heap<ResourceManagerTaskExecutors>(*resourceManager_);
  resourceManager_->start();
  return canceler_.wrap(openStores().then([this]() { return recover(); }).then([this]() {
    capabilities_.markReady();
    markReady_->fulfill();
  }));
}

kj::Promise<void> LeaderTerm::whenReady() { return ready_.addBranch(); }

Duration jobMasterReadyWait(Duration callTimeout) {
  return std::min(callTimeout / 2, Duration(1000));
}

kj::Promise<void> LeaderTerm::openStores() {
  return storeServices_.openTerm(storeTerm_).then(
      [this](store::StoreResult<kj::Own<store::LeaderStores>>&& opened) -> kj::Promise<void> {
        if (!opened.ok()) {
          return afterFailure("cannot open the stores: " + opened.error().message)
              .then([this]() { return openStores(); });
        }
        stores_ = kj::mv(opened).value();
        // Each JobMaster's gateway is a capability of the term: fenced, revoked with it. It
        // serves at once; MasterBootstrap.jobMaster hands it out only once the term is ready.
        jobMasters_ = kj::heap<jobmaster::JobMasters>(
            timer_, events_, epoch_, *resourceManager_, stores_->jobProgress(),
            [this](kj::Own<wire::JobMasterGateway::Server> server) {
              return capabilities_.serve<wire::JobMasterGateway>(
                  kj::mv(server), rpc::LeadershipTerm::Readiness::kImmediately);
            },
            jobMasterCounters_, options_.jobMaster);
        dispatcher_ = kj::heap<dispatcher::Dispatcher>(epoch_, *stores_, timer_, events_,
                                                       options_.limits, options_.retainCleanResults,
                                                       options_.nowMs, jobMasters_.get());
        dispatcherGateway_ = capabilities_.serve<wire::DispatcherGateway>(
            kj::heap<dispatcher::DispatcherGatewayServer>(*dispatcher_, taskExecutors_.get(),
                                                          options_.describeLeader,
                                                          &outputTokenIssuer_));
        return kj::READY_NOW;
      });
}

kj::Promise<void> LeaderTerm::recover() {
  return dispatcher_->recover().then([this](Status recovered) -> kj::Promise<void> {
    if (recovered.ok()) return kj::READY_NOW;
    return afterFailure(recovered.error().message).then([this]() { return recover(); });
  });
}

kj::Promise<void> LeaderTerm::afterFailure(const std::string& what) {
  const Duration delay = backoff_.next();
  spdlog::warn("recovery of epoch={} failed: {}; retrying in {}", epoch_, what,
               formatDuration(delay));
  return timer_.afterDelay(delay.count() * kj::MILLISECONDS);
}

kj::Maybe<wire::DispatcherGateway::Client> LeaderTerm::dispatcherGateway() {
  return dispatcherGateway_;
}

kj::Maybe<const dispatcher::Dispatcher&> LeaderTerm::dispatcher() const {
  if (!ready() || dispatcher_.get() == nullptr) return nullptr;
  return *dispatcher_;
}

kj::Maybe<wire::ResourceManagerGateway::Client> LeaderTerm::resourceManagerGateway(
    kj::Own<resourcemanager::WorkerBinding> caller) {
  if (resourceManager_.get() == nullptr) return nullptr;
  // Served while the term recovers: workers register and report meanwhile.
  return capabilities_.serve<wire::ResourceManagerGateway>(
      resourceManager_->makeGatewayServer(kj::mv(caller)),
      rpc::LeadershipTerm::Readiness::kImmediately);
}

LeaderTerm::JobMasterLookup LeaderTerm::jobMaster(const JobId& job,
                                                  kj::Own<resourcemanager::WorkerBinding> caller) {
  JobMasterLookup lookup;
  if (!ready() || jobMasters_.get() == nullptr) return lookup;
  lookup.ready = true;
  lookup.gateway = jobMasters_->gateway(job, kj::mv(caller));
  return lookup;
}

kj::Maybe<const dispatcher::TaskExecutorView&> LeaderTerm::taskExecutors() const {
  if (taskExecutors_.get() == nullptr) return nullptr;
  return *taskExecutors_;
}

std::optional<JobsSnapshot> LeaderTerm::jobs() const {
  KJ_IF_MAYBE (ready, dispatcher()) return jobsSnapshot(*ready);
  return std::nullopt;
}

std::optional<dispatcher::JobCounts> LeaderTerm::jobCounts() const {
  KJ_IF_MAYBE (ready, dispatcher()) return ready->counts();
  return std::nullopt;
}

std::optional<JobDetailSnapshot> LeaderTerm::job(const JobId& id) const {
  KJ_IF_MAYBE (ready, dispatcher()) return jobDetailSnapshot(*ready, id);
  return std::nullopt;
}

kj::Promise<void> LeaderTerm::loadJobDetail(const JobId& id) {
  if (!ready() || dispatcher_.get() == nullptr) return kj::READY_NOW;
  return dispatcher_->loadDetail(id).ignoreResult();
}

std::optional<WorkersSnapshot> LeaderTerm::workers() const {
  if (taskExecutors_.get() == nullptr) return std::nullopt;
  return workersSnapshot(*taskExecutors_);
}

std::optional<dispatcher::TaskExecutorView::Counts> LeaderTerm::workerCounts() const {
  if (taskExecutors_.get() == nullptr) return std::nullopt;
  return taskExecutors_->counts();
}

}  // namespace regent::master

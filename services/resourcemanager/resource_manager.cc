// The ResourceManager of one term (resource_manager.h): the gateway's handlers turn wire calls
// into SlotManager updates, and the SlotManager's decisions into calls on the workers'
// TaskExecutorGateways, each bounded by the call timeout.
#include "services/resourcemanager/resource_manager.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string_view>
#include <utility>
#include <vector>

#include "common/event_sink.h"
#include "common/units.h"
#include "rpc/call_deadline.h"
#include "rpc/failure.h"
#include "rpc/wire_ids.h"

namespace regent::resourcemanager {

struct ResourceManager::Connection {
  wire::TaskExecutorGateway::Client client;
  RegistrationId registrationId;
  kj::Own<WorkerBinding> binding;  // The connection that registered it.
};

namespace {

constexpr uint32_t kMaxSlots = 1024;
// The waits between attempts to list a provider's workers at a term's start.
constexpr Duration kListRetryInitial{1000};
constexpr Duration kListRetryMax{30000};
// The first segment of a small call to a worker (heartbeat, requestSlot): a few dozen words with
// the RPC header. Without a hint Cap'n Proto starts every message with 8 KiB.
constexpr capnp::MessageSize kSmallRequest{64, 0};

Profile fromWire(wire::ResourceProfile::Reader profile) {
  return Profile{profile.getCpuMillis(), profile.getMemoryBytes()};
}

void toWire(const Profile& profile, wire::ResourceProfile::Builder out) {
  out.setCpuMillis(profile.cpuMillis);
  out.setMemoryBytes(profile.memoryBytes);
}

std::vector<ReportedSlot> fromWire(capnp::List<wire::SlotStatus>::Reader slots) {
  std::vector<ReportedSlot> reported;
  reported.reserve(slots.size());
  for (auto slot : slots) {
    ReportedSlot entry;
    entry.index = slot.getSlotId().getSlotIndex();
    entry.profile = fromWire(slot.getProfile());
    entry.allocation =
        wire::idFromWireIfSet<AllocationId>(slot.hasAllocationId(), slot.getAllocationId());
    entry.job = wire::idFromWireIfSet<JobId>(slot.hasJobId(), slot.getJobId());
    if (entry.allocation && !entry.job) entry.allocation.reset();  // Half an allocation: none.
    if (!entry.allocation) entry.job.reset();
    auto attempts = slot.getRunningAttempts();
    entry.runningAttempts.reserve(attempts.size());
    for (auto attempt : attempts) {
      entry.runningAttempts.push_back(wire::idFromWire<AttemptId>(attempt.getAttemptId()));
    }
    reported.push_back(std::move(entry));
  }
  return reported;
}

// A name of letters, digits, '.', '_' and '-', not "." or "..": safe as a path component.
bool isProviderName(std::string_view name) {
  if (name.empty() || name.size() > 128 || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-';
  });
}

// A registration's fields, or the invalidArgument naming the first wrong one.
struct RegistrationCheck {
  std::string field;
  std::string message;
};

std::optional<RegistrationCheck> validate(wire::TaskExecutorRegistration::Reader in,
                                          WorkerRegistration& out) {
  out.resourceId = wire::idFromWire<ResourceId>(in.getResourceId());
  out.host = in.getHost();
  out.dataAddress = in.getDataAddress();
  out.httpAddress = in.getHttpAddress();
  out.version = in.getVersion();
  out.pid = in.getPid();
  out.startedAtMs = in.getStartedAtMs();
  out.containment = in.getContainment();
  out.providerWorkerId = in.getProviderWorkerId();
  out.numberOfSlots = in.getNumberOfSlots();
  out.slotProfile = fromWire(in.getSlotProfile());
  out.totalProfile = fromWire(in.getTotalProfile());
  if (!in.hasResourceId() || out.resourceId.isZero()) {
    return RegistrationCheck{"registration.resourceId", "missing or zero"};
  }
  if (!out.providerWorkerId.empty()) {
    // A provider and a worker name (worker.provider-id): the name becomes a path component of
    // the provider's (the process provider's worker directory).
    const std::string_view id = out.providerWorkerId;
    const size_t colon = id.find(':');
    if (colon == std::string_view::npos || !isProviderName(id.substr(0, colon)) ||
        !isProviderName(id.substr(colon + 1))) {
      return RegistrationCheck{"registration.providerWorkerId",
                               "\"" + out.providerWorkerId.substr(0, 200) +
                                   "\" is not <provider>:<worker id> of letters, digits, '.', "
                                   "'_' and '-'"};
    }
  }
  if (out.numberOfSlots < 1 || out.numberOfSlots > kMaxSlots) {
    return RegistrationCheck{
        "registration.numberOfSlots",
        std::to_string(out.numberOfSlots) + " is not within 1.." + std::to_string(kMaxSlots)};
  }
  if (out.slotProfile.cpuMillis == 0 || out.slotProfile.memoryBytes == 0) {
    return RegistrationCheck{"registration.slotProfile",
                             describe(out.slotProfile) + " offers no cpu or no memory"};
  }
  // total >= slot x n, written as floor(total / n) >= slot so that no product can wrap.
  if (out.totalProfile.cpuMillis / out.numberOfSlots < out.slotProfile.cpuMillis ||
      out.totalProfile.memoryBytes / out.numberOfSlots < out.slotProfile.memoryBytes) {
    return RegistrationCheck{"registration.totalProfile",
                             describe(out.totalProfile) + " is less than numberOfSlots (" +
                                 std::to_string(out.numberOfSlots) + ") slots of " +
                                 describe(out.slotProfile)};
  }
  return std::nullopt;
}

bool sameProcess(const WorkerRegistration& a, const WorkerRegistration& b) {
  return a.host == b.host && a.pid == b.pid && a.startedAtMs == b.startedAtMs;
}

}  // namespace

// ---- The gateway ------------------------------------------------------------------------------

class ResourceManager::Gateway final : public wire::ResourceManagerGateway::Server {
 public:
  Gateway(ResourceManager& manager, kj::Own<WorkerBinding> caller)
      : rm_(manager), caller_(kj::mv(caller)) {}

  kj::Promise<void> registerTaskExecutor(RegisterTaskExecutorContext context) override {
    auto params = context.getParams();
    WorkerRegistration registration;
    if (auto wrong = validate(params.getRegistration(), registration)) {
      const std::string message = wrong->field + ": " + wrong->message;
      rm_.refusedEvent(registration.resourceId, message);
      rpc::failures::invalidArgument(context.getResults().initFailure(), wrong->field,
                                     wrong->message, message);
      return kj::READY_NOW;
    }
    if (auto refusal = refusalOf(registration)) {
      rm_.counters_.identityRefusals.refuse(*caller_,
                                            "ResourceManagerGateway.registerTaskExecutor",
                                            registration.resourceId.toHex(), *refusal,
                                            context.getResults().initFailure());
      return kj::READY_NOW;
    }
    return claim(context, registration, params.getTaskExecutor());
  }

  // The worker calls below reach their handler only through the gate (guardWorkerCalls): the
  // connection registered, and its registration is current. They act for that registration.
  kj::Promise<void> sendSlotReport(SendSlotReportContext context) override {
    const WorkerIdentity me = caller();
    const bool first = isFirstReport(me.resourceId);
    auto applied = rm_.slots_.applyReport(me.resourceId, me.registrationId,
                                          fromWire(context.getParams().getSlotReport().getSlots()),
                                          rm_.monoNow(), rm_.wallNow());
    if (!applied.ok()) {
      toWire(applied.error(), me.resourceId, context.getResults().initFailure());
      return kj::READY_NOW;
    }
    reported(me.resourceId, first);
    return kj::READY_NOW;
  }

  kj::Promise<void> heartbeat(HeartbeatContext context) override {
    const WorkerIdentity me = caller();
    const bool first = isFirstReport(me.resourceId);
    auto applied = rm_.slots_.applyReport(
        me.resourceId, me.registrationId,
        fromWire(context.getParams().getPayload().getSlotReport().getSlots()), rm_.monoNow(),
        rm_.wallNow());
    if (!applied.ok()) {
      toWire(applied.error(), me.resourceId, context.getResults().initFailure());
      return kj::READY_NOW;
    }
    reported(me.resourceId, first);
    return kj::READY_NOW;
  }

  kj::Promise<void> disconnect(DisconnectContext context) override {
    const WorkerIdentity me = caller();
    if (!rm_.slots_.removeWorker(me.resourceId)) {
      rpc::failures::notRegistered(context.getResults().initFailure(), me.resourceId,
                                   "resource id " + me.resourceId.toHex() +
                                       " is not registered with this ResourceManager");
      return kj::READY_NOW;
    }
    rm_.forgetWorker(me.resourceId,
                     "disconnected: " + std::string(context.getParams().getCause().cStr()), false);
    rm_.matchAndRequest();
    return kj::READY_NOW;
  }

  kj::Promise<void> registerJobMaster(RegisterJobMasterContext context) override {
    auto params = context.getParams();
    const auto job = wire::idFromWire<JobId>(params.getJobId());
    if (!params.hasJobId() || job.isZero()) {
      rpc::failures::invalidArgument(context.getResults().initFailure(), "jobId", "missing or zero",
                                     "jobId: missing or zero");
      return kj::READY_NOW;
    }
    rm_.registerJobMaster(job);
    return kj::READY_NOW;
  }

  kj::Promise<void> declareRequiredResources(DeclareRequiredResourcesContext context) override {
    auto params = context.getParams();
    const auto job = wire::idFromWire<JobId>(params.getJobId());
    std::vector<Requirement> needs;
    needs.reserve(params.getRequirements().size());
    for (auto requirement : params.getRequirements()) {
      needs.push_back(
          Requirement{fromWire(requirement.getProfile()), requirement.getNumberOfRequiredSlots()});
    }
    const SlotOutcome declared = rm_.declareRequiredResources(job, needs);
    if (!declared.ok()) {
      const SlotFailure& failure = declared.error();
      auto out = context.getResults().initFailure();
      if (failure.error == SlotError::kNotRegistered) {
        rpc::failures::notRegistered(out, job, failure.message);
      } else {
        rpc::failures::invalidArgument(out, failure.field, failure.message,
                                       failure.field + ": " + failure.message);
      }
      return kj::READY_NOW;
    }
    return kj::READY_NOW;
  }

  kj::Promise<void> disconnectJobMaster(DisconnectJobMasterContext context) override {
    auto params = context.getParams();
    const auto job = wire::idFromWire<JobId>(params.getJobId());
    if (!rm_.slots_.jobRegistered(job)) {
      rpc::failures::notRegistered(
          context.getResults().initFailure(), job,
          "the JobMaster of job " + job.toHex() + " is not registered with this ResourceManager");
      return kj::READY_NOW;
    }
    rm_.disconnectJobMaster(job, params.getCause());
    return kj::READY_NOW;
  }

 private:
  WorkerIdentity caller() const { return caller_->bound(); }

  // Why this connection may not register `registration`'s resource id, or nullopt.
  std::optional<std::string> refusalOf(const WorkerRegistration& registration) const {
    const auto& bound = caller_->identity();
    if (bound && bound->resourceId != registration.resourceId) {
      return "this connection registered worker " + bound->resourceId.toHex() +
             "; one connection speaks for one worker";
    }
    if (!rm_.options_.requireCertificateResourceId) return std::nullopt;
    const std::string& name = caller_->certificateName();
    if (name.empty()) {
      return std::string("rpc.auth-tls.worker-name-is-resource-id: a worker registers over "
                         "mutual TLS with a certificate named by its resource id; this "
                         "connection has no verified certificate");
    }
    if (ResourceId::fromHex(name) != registration.resourceId) {
      return "rpc.auth-tls.worker-name-is-resource-id: this connection's certificate names \"" +
             name + "\", not resource id " + registration.resourceId.toHex();
    }
    return std::nullopt;
  }

  void accept(RegisterTaskExecutorContext& context, const WorkerRegistration& registration,
              wire::TaskExecutorGateway::Client taskExecutor) {
    const Worker* holder = rm_.slots_.worker(registration.resourceId);
    const bool replaced = holder != nullptr;
    // Another process of the same worker (a restart on its data directory): the one it
    // replaces, and every attempt that one ran, are gone.
    std::optional<WorkerRegistration> previous;
    if (replaced && !sameProcess(holder->registration, registration)) {
      previous = holder->registration;
    }
    if (replaced)
      rm_.forgetWorker(registration.resourceId, "replaced by a new registration", false);
    const RegistrationId id = rm_.slots_.registerWorker(registration, rm_.monoNow(), rm_.wallNow());
    rm_.connections_.insert_or_assign(registration.resourceId,
                                      kj::heap<Connection>(Connection{kj::mv(taskExecutor), id,
                                                                      kj::addRef(*caller_)}));
    // From now on this connection speaks for the worker, and a connection that registered it
    // before no longer does (its registration is not current any more).
    caller_->bind(WorkerIdentity{registration.resourceId, id});
    ++rm_.counters_.registrations;
    rm_.events_.emit(Event("worker registered")
                         .field("epoch", rm_.epoch_)
                         .field("resource_id", registration.resourceId.toHex())
                         .field("registration_id", id.toHex())
                         .field("host", registration.host)
                         .field("pid", uint64_t{registration.pid})
                         .field("slots", uint64_t{registration.numberOfSlots})
                         .field("replaced", replaced ? "true" : "false")
                         .field("provider_id", registration.providerWorkerId.empty()
                                                   ? std::string("-")
                                                   : registration.providerWorkerId));
    KJ_IF_MAYBE (pool, rm_.pool_) {
      if (!registration.providerWorkerId.empty()) {
        const std::string& claimed = registration.providerWorkerId;
        const std::string prefix = pool->options().provider + ":";
        const Vouch vouch =
            claimed.rfind(prefix, 0) == 0
                ? rm_.options_.provider->vouches(claimed.substr(prefix.size()), registration.host,
                                                 registration.pid)
                : Vouch::kUnknown;
        if (!pool->registered(claimed, registration.resourceId, rm_.monoNow(), vouch) &&
            claimed.rfind(prefix, 0) == 0) {
          spdlog::warn("worker {} registered as {}, which is not (or no longer) that started "
                       "worker: it is treated as a worker started by hand",
                       registration.resourceId.toHex(), claimed);
        }
        const PooledWorker* pooled = pool->byResourceId(registration.resourceId);
        if (pooled != nullptr && pooled->phase == PooledPhase::kReleasing) {
          rm_.slots_.setDraining(registration.resourceId, true);  // Still being released.
        }
        rm_.planLater();
      }
    }
    if (previous && rm_.workerListener_ != nullptr) {
      rm_.workerListener_->workerRestarted(
          registration.resourceId,
          "worker " + registration.resourceId.toHex() + " restarted (host " + registration.host +
              " pid " + std::to_string(registration.pid) + " replaces pid " +
              std::to_string(previous->pid) + "): its attempts ended with its previous process");
    }
    auto success = context.getResults().initSuccess();
    wire::setWireId(success.initRegistrationId(), id);
    success.setHeartbeatIntervalMs(static_cast<uint64_t>(rm_.options_.heartbeatInterval.count()));
    success.setHeartbeatTimeoutMs(static_cast<uint64_t>(rm_.options_.heartbeatTimeout.count()));
    if (rm_.options_.outputReadKey) {
      const std::string key = rm_.options_.outputReadKey(registration.resourceId, id);
      success.setOutputReadKey(
          capnp::Data::Reader(reinterpret_cast<const kj::byte*>(key.data()), key.size()));
    }
  }

  // Accepts `registration` unless another live process holds its resource id: a holder that is
  // the same process, or has no connection, is replaced at once; another one is probed with a
  // heartbeat and the registration refused while it answers. When the probe fails, the holder
  // may have changed meanwhile (another newcomer accepted after its own probe): a different
  // holder is probed in turn, never replaced unprobed.
  kj::Promise<void> claim(RegisterTaskExecutorContext context,
                          const WorkerRegistration& registration,
                          wire::TaskExecutorGateway::Client taskExecutor) {
    const Worker* holder = rm_.slots_.worker(registration.resourceId);
    auto connection = rm_.connections_.find(registration.resourceId);
    if (holder == nullptr || sameProcess(holder->registration, registration) ||
        connection == rm_.connections_.end()) {
      accept(context, registration, kj::mv(taskExecutor));
      return kj::READY_NOW;
    }
    // Another process holds the id: refuse while it answers, replace it once it does not.
    const WorkerRegistration held = holder->registration;
    const RegistrationId probed = holder->registrationId;
    return rm_.heartbeats_.probe(connection->second->client)
        .then(
            [this, context, held, registration]() mutable -> kj::Promise<void> {
              const std::string message =
                  "resource id " + registration.resourceId.toHex() +
                  " is held by the live worker on host " + held.host + " pid " +
                  std::to_string(held.pid) + "; this registration comes from host " +
                  registration.host + " pid " + std::to_string(registration.pid);
              ++rm_.counters_.registrationsRefused;
              rm_.refusedEvent(registration.resourceId, message);
              rpc::failures::alreadyExists(context.getResults().initFailure(),
                                           registration.resourceId, message);
              return kj::READY_NOW;
            },
            [this, context, registration, probed,
             taskExecutor = kj::mv(taskExecutor)](kj::Exception&& exception) mutable
            -> kj::Promise<void> {
              const Worker* current = rm_.slots_.worker(registration.resourceId);
              if (current != nullptr && current->registrationId != probed) {
                return claim(context, registration, kj::mv(taskExecutor));
              }
              spdlog::info(
                  "the worker holding resource id {} did not answer ({}); the new "
                  "registration from host {} pid {} replaces it",
                  registration.resourceId.toHex(), exception.getDescription().cStr(),
                  registration.host, registration.pid);
              accept(context, registration, kj::mv(taskExecutor));
              return kj::READY_NOW;
            });
  }

  bool isFirstReport(const ResourceId& worker) const {
    const Worker* known = rm_.slots_.worker(worker);
    return known != nullptr && !known->reported;
  }

  // After a report was applied: the event line for a registration's first one, then matching.
  void reported(const ResourceId& id, bool first) {
    if (first) {
      const Worker& worker = *rm_.slots_.worker(id);
      size_t allocated = 0;
      for (const Slot& slot : worker.slots) allocated += slot.allocation ? 1 : 0;
      const SlotCounts counts = rm_.slots_.counts();
      rm_.events_.emit(Event("slot report")
                           .field("epoch", rm_.epoch_)
                           .field("resource_id", id.toHex())
                           .field("slots", uint64_t{worker.slots.size()})
                           .field("allocated", uint64_t{allocated})
                           .field("workers_reported", uint64_t{counts.reported})
                           .field("slots_total", uint64_t{counts.total}));
    }
    rm_.matchAndRequest();
    if (first && rm_.workerListener_ != nullptr) rm_.workerListener_->workerReported(id);
  }

  void toWire(const SlotFailure& failure, const ResourceId& worker, wire::Failure::Builder out) {
    if (failure.error == SlotError::kNotRegistered) {
      spdlog::debug("resource manager: {}", failure.message);
      rpc::failures::notRegistered(out, worker, failure.message);
    } else {
      rpc::failures::invalidArgument(out, failure.field, failure.message,
                                     failure.field + ": " + failure.message);
    }
  }

  ResourceManager& rm_;
  kj::Own<WorkerBinding> caller_;
};

// ---- The ResourceManager ----------------------------------------------------------------------

ResourceManager::ResourceManager(kj::Timer& timer, EventSink& events, uint64_t epoch,
                                 ResourceManagerCounters& counters, ResourceManagerOptions options)
    : timer_(timer),
      events_(events),
      epoch_(epoch),
      counters_(counters),
      options_(std::move(options)),
      heartbeats_(timer, epoch, std::nullopt, "resource manager",
                  HeartbeatOptions{options_.heartbeatInterval, options_.heartbeatTimeout,
                                   options_.callTimeout},
                  *this) {}

ResourceManager::~ResourceManager() noexcept {
  if (options_.provider != nullptr) options_.provider->setListener(nullptr);
  // The term is over: the connections its workers registered over serve nothing any more. Each
  // worker keeps the connection to a leader it left open for a while (previousLeaderLinger),
  // so that a deposed leader's late calls reach its epoch gate; a leader that knows its term
  // ended makes no such calls, and closing them ends that wait at once (no master holds a
  // term's worth of connections into the next).
  const std::string reason =
      "the leader's term of epoch " + std::to_string(epoch_) + " is over";
  for (auto& [id, connection] : connections_) connection->binding->closeConnection(reason);
  counters_.workersRequested = 0;
  counters_.workersPending = 0;
  counters_.workersStarted = 0;
}

kj::Own<wire::ResourceManagerGateway::Server> ResourceManager::makeGatewayServer(
    kj::Own<WorkerBinding> caller) {
  auto handlers = kj::heap<Gateway>(*this, kj::addRef(*caller));
  return guardWorkerCalls<wire::ResourceManagerGateway>(kj::mv(handlers), kj::mv(caller), *this,
                                                        counters_.identityRefusals);
}

bool ResourceManager::isCurrent(const WorkerIdentity& identity) const {
  const Worker* found = slots_.worker(identity.resourceId);
  return found != nullptr && found->registrationId == identity.registrationId;
}

bool ResourceManager::hasReported(const ResourceId& worker) const {
  const Worker* found = slots_.worker(worker);
  return found != nullptr && found->reported;
}

bool ResourceManager::holdsAllocation(const ResourceId& worker, const AllocationId& allocation,
                                      const JobId& job) const {
  const Worker* found = slots_.worker(worker);
  if (found == nullptr) return false;
  for (const Slot& slot : found->slots) {
    if (slot.allocation == allocation && slot.job == job) return true;
  }
  return false;
}

void ResourceManager::start() {
  heartbeats_.start(monoNow());
  WorkerProvider* provider = options_.provider;
  if (provider == nullptr) return;
  WorkerPoolOptions poolOptions = options_.pool;
  poolOptions.provider = provider->name();
  poolOptions.slotsPerWorker = provider->slotsPerWorker();
  poolOptions.slotProfile = provider->slotProfile();
  pool_.emplace(std::move(poolOptions), epoch_);
  slots_.setProvidedProfile(provider->slotProfile());
  provider->setListener(this);
  listProviderWorkers(kListRetryInitial);
}

void ResourceManager::listProviderWorkers(Duration nextWait) {
  // Until the list is back nothing is started: an earlier leader's workers may cover the need.
  auto list = options_.provider->list().catch_(
      [](kj::Exception&& exception) -> Result<std::vector<std::string>> {
        return Error::fatal(exception.getDescription().cStr());
      });
  tasks_.add(kj::mv(list).then([this, nextWait](Result<std::vector<std::string>> listed)
                                                -> kj::Promise<void> {
    WorkerPool& pool = KJ_ASSERT_NONNULL(pool_);
    if (!listed.ok()) {
      spdlog::warn("{} provider: cannot list the workers earlier leaders started: {} (again in {})",
                   pool.options().provider, listed.error().message, formatDuration(nextWait));
      pool.listFailed(listed.error().message);
      return timer_.afterDelay(nextWait.count() * kj::MILLISECONDS).then([this, nextWait]() {
        listProviderWorkers(std::min(nextWait * 2, kListRetryMax));
      });
    }
    pool.listed(listed.value(), monoNow());
    events_.emit(Event("provider workers listed")
                     .field("epoch", epoch_)
                     .field("provider", pool.options().provider)
                     .field("count", uint64_t(listed.value().size())));
    planWorkers();
    return kj::READY_NOW;
  }));
}

MonoTime ResourceManager::monoNow() const { return regent::monoNow(timer_); }

int64_t ResourceManager::wallNow() const {
  return options_.nowMs ? options_.nowMs() : wallClockMillis();
}

void ResourceManager::refusedEvent(const ResourceId& worker, const std::string& reason) const {
  events_.emit(Event("worker refused", EventLevel::kWarn)
                   .field("epoch", epoch_)
                   .field("resource_id", worker.toHex())
                   .quotedField("reason", reason));
}

template <typename T>
kj::Promise<T> ResourceManager::bounded(const char* method, kj::Promise<T> call) {
  return rpc::withDeadline(timer_, options_.callTimeout, method, kj::mv(call));
}

void ResourceManager::refreshAll(MonoTime now) { slots_.refreshAll(now); }

void ResourceManager::expire(MonoTime now, Duration timeout) {
  for (const ResourceId& id : slots_.expire(now, timeout)) {
    ++counters_.heartbeatTimeouts;
    forgetWorker(id, "heartbeat timeout", true);
  }
  // Expiry may have made requirements unmet again.
  matchAndRequest();
}

void ResourceManager::forEachGateway(
    kj::FunctionParam<void(const ResourceId&, wire::TaskExecutorGateway::Client&)> visit) {
  for (auto& [id, connection] : connections_) visit(id, connection->client);
}

kj::Maybe<wire::TaskExecutorGateway::Client&> ResourceManager::gatewayOf(const ResourceId& worker) {
  auto found = connections_.find(worker);
  if (found == connections_.end()) return nullptr;
  return found->second->client;
}

void ResourceManager::forgetWorker(const ResourceId& worker, const std::string& reason,
                                   bool tellWorker) {
  KJ_IF_MAYBE (pool, pool_) {
    pool->unregistered(worker, monoNow());
    planLater();
  }
  auto connection = connections_.find(worker);
  if (connection != connections_.end()) {
    if (tellWorker) heartbeats_.disconnect(worker, connection->second->client, reason);
    connections_.erase(connection);
  }
  events_.emit(Event("worker removed")
                   .field("epoch", epoch_)
                   .field("resource_id", worker.toHex())
                   .quotedField("reason", reason));
}

void ResourceManager::registerJobMaster(const JobId& job) { slots_.registerJob(job); }

SlotOutcome ResourceManager::declareRequiredResources(const JobId& job,
                                                      const std::vector<Requirement>& needs) {
  SlotOutcome declared = slots_.declare(job, needs);
  if (declared.ok()) matchLater();
  return declared;
}

void ResourceManager::slotFaulted(const JobId& job, const ResourceId& worker,
                                  const AllocationId& allocation, const std::string& cause) {
  if (!slots_.slotFaulted(worker, allocation, job)) return;
  freeOnWorker(SlotRelease{worker, allocation}, cause);
  matchLater();
}

void ResourceManager::disconnectJobMaster(const JobId& job, const std::string& cause) {
  if (!slots_.jobRegistered(job)) return;
  for (const SlotRelease& release : slots_.disconnectJob(job)) freeOnWorker(release, cause);
  matchLater();
}

std::optional<WorkerAddress> ResourceManager::workerAddress(const ResourceId& worker) const {
  const Worker* found = slots_.worker(worker);
  if (found == nullptr) return std::nullopt;
  return WorkerAddress{found->registration.host, found->registration.httpAddress};
}

void ResourceManager::matchLater() {
  if (matchScheduled_) return;
  matchScheduled_ = true;
  tasks_.add(kj::evalLater([this]() {
    matchScheduled_ = false;
    matchAndRequest();
  }));
}

void ResourceManager::matchAndRequest() {
  // Whatever the match leaves unmet is what the provider may start workers for.
  planLater();
  for (const SlotRequest& decision : slots_.match()) {
    auto connection = connections_.find(decision.worker);
    if (connection == connections_.end()) {
      slots_.requestFailed(decision);
      continue;
    }
    auto request = connection->second->client.requestSlotRequest(kSmallRequest);
    request.setEpoch(epoch_);
    auto slot = request.initSlotId();
    wire::setWireId(slot.initResourceId(), decision.worker);
    slot.setSlotIndex(decision.slotIndex);
    wire::setWireId(request.initJobId(), decision.job);
    wire::setWireId(request.initAllocationId(), decision.allocation);
    toWire(decision.profile, request.initProfile());
    tasks_.add(bounded("TaskExecutorGateway.requestSlot", request.send())
                   .then(
                       [this, decision](auto response) {
                         if (!response.hasFailure()) {
                           slots_.confirmed(decision);
                           return;
                         }
                         spdlog::warn("requestSlot of slot {} of worker {} for job {} refused: {}",
                                      decision.slotIndex, decision.worker.toHex(),
                                      decision.job.toHex(),
                                      response.getFailure().getMessage().cStr());
                         slots_.requestFailed(decision);
                       },
                       [this, decision](kj::Exception&& exception) {
                         spdlog::warn("requestSlot of slot {} of worker {} for job {} failed: {}",
                                      decision.slotIndex, decision.worker.toHex(),
                                      decision.job.toHex(), exception.getDescription().cStr());
                         slots_.requestFailed(decision);
                       }));
  }
}

void ResourceManager::freeOnWorker(const SlotRelease& release, const std::string& cause) {
  auto connection = connections_.find(release.worker);
  if (connection == connections_.end()) return;
  tasks_.add(
      heartbeats_.freeSlot(release.worker, connection->second->client, release.allocation, cause));
}

// ---- Workers started on demand ----------------------------------------------------------------

void ResourceManager::poolEvent(const char* name, const std::string& id,
                                const std::string& reason) const {
  const WorkerPool& pool = KJ_ASSERT_NONNULL(pool_);
  Event line(name);
  line.field("epoch", epoch_).field("provider", pool.options().provider).field("worker", id);
  if (!reason.empty()) line.quotedField("reason", reason);
  events_.emit(std::move(line));
}

void ResourceManager::planLater() {
  if (pool_ == nullptr || planScheduled_) return;
  planScheduled_ = true;
  tasks_.add(kj::evalLater([this]() {
    planScheduled_ = false;
    planWorkers();
  }));
}

void ResourceManager::planWorkers() {
  KJ_IF_MAYBE (pool, pool_) {
    const MonoTime now = monoNow();
    const uint32_t unmet = slots_.unmetFitting(pool->options().slotProfile);
    PoolDecisions decisions = pool->plan(
        unmet,
        [this](const ResourceId& id) {
          WorkerPool::SlotView view;
          const Worker* worker = slots_.worker(id);
          if (worker == nullptr || !worker->reported) return view;
          view.reported = true;
          view.idle = std::none_of(worker->slots.begin(), worker->slots.end(),
                                   [](const Slot& slot) { return slot.allocation.has_value(); });
          return view;
        },
        now);
    for (const std::string& id : decisions.start) startWorker(id);
    for (const PoolDecisions::Release& release : decisions.release) {
      if (release.failedStart) ++counters_.workerStartFailures;
      releaseWorker(release);
    }
    const PoolCounts counts = pool->counts();
    counters_.workersRequested = counts.requested;
    counters_.workersPending = counts.pending;
    counters_.workersStarted = counts.requested + counts.pending + counts.registered + counts.releasing;
    // Again at the next timeout or the end of a backoff (a deadline still ahead: a past one has
    // been acted on, or is held by the floor or waiting requirements until something changes).
    const auto next = pool->nextDeadline(now);
    if (next && (!planArmedFor_ || *next < *planArmedFor_ || *planArmedFor_ <= now)) {
      planArmedFor_ = *next;
      const auto wait = std::max<int64_t>(
          1, std::chrono::duration_cast<std::chrono::milliseconds>(*next - now).count() + 1);
      tasks_.add(timer_.afterDelay(wait * kj::MILLISECONDS).then([this, at = *next]() {
        if (planArmedFor_ == at) planArmedFor_.reset();
        planWorkers();
      }));
    }
  }
}

void ResourceManager::startWorker(const std::string& id) {
  WorkerProvider& provider = *options_.provider;
  poolEvent("worker requested", id, {});
  // A provider's promises never reject; one that did would be a failed start, not a worker
  // requested forever.
  auto start = provider.start(id, epoch_).catch_([](kj::Exception&& exception) -> Status {
    return Error::fatal(exception.getDescription().cStr());
  });
  tasks_.add(kj::mv(start).then([this, id](Status started) {
    WorkerPool& pool = KJ_ASSERT_NONNULL(pool_);
    if (started.ok()) {
      pool.started(id, monoNow());
      poolEvent("worker started", id, {});
    } else {
      ++counters_.workerStartFailures;
      spdlog::warn("{} provider: starting worker {} failed: {}", pool.options().provider, id,
                   started.error().message);
      pool.startFailed(id, pool.options().provider + ": " + started.error().message, monoNow());
      poolEvent("worker start failed", id, started.error().message);
    }
    planLater();
  }));
}

void ResourceManager::releaseWorker(const PoolDecisions::Release& release) {
  WorkerProvider& provider = *options_.provider;
  poolEvent("worker releasing", release.id, release.reason);
  // Whether the release goes on: false when the worker refused to stop (it holds a slot after
  // all); a worker that cannot be asked (gone, or not answering) is released all the same.
  kj::Promise<bool> asked = true;
  if (release.resourceId) {
    // No new allocation on it from now on.
    slots_.setDraining(*release.resourceId, true);
    auto connection = connections_.find(*release.resourceId);
    if (connection != connections_.end()) {
      auto request = connection->second->client.stopRequest();
      request.setEpoch(epoch_);
      request.setCause(release.reason);
      const std::string id = release.id;
      asked = bounded("TaskExecutorGateway.stop", request.send())
                  .then(
                      [id](auto response) {
                        if (!response.hasFailure()) return true;
                        spdlog::warn("worker {} refused to stop: {}; not releasing it", id,
                                     response.getFailure().getMessage().cStr());
                        return false;
                      },
                      [id](kj::Exception&& exception) {
                        spdlog::warn("asking worker {} to stop failed: {}; releasing it", id,
                                     exception.getDescription().cStr());
                        return true;
                      });
    }
  }
  // The worker's own stop: its tasks killed (it has none), their ends delivered, disconnect.
  const Duration grace = options_.callTimeout * 2;
  tasks_.add(asked.then([this, &provider, id = release.id, resourceId = release.resourceId,
                         grace](bool stopping) -> kj::Promise<void> {
    if (!stopping) {
      KJ_ASSERT_NONNULL(pool_).releaseCalledOff(id, monoNow());
      if (resourceId) slots_.setDraining(*resourceId, false);
      poolEvent("worker release called off", id, "the worker refused to stop");
      matchLater();
      return kj::READY_NOW;
    }
    return provider.release(id, grace)
        .catch_([](kj::Exception&& exception) -> Status {
          return Error::fatal(exception.getDescription().cStr());
        })
        .then([this, id](Status released) {
      WorkerPool& pool = KJ_ASSERT_NONNULL(pool_);
      pool.released(id);
      ++counters_.workersReleased;
      if (!released.ok()) {
        spdlog::warn("{} provider: releasing worker {}: {}", pool.options().provider, id,
                     released.error().message);
      }
      poolEvent("worker released", id, released.ok() ? std::string() : released.error().message);
      planLater();
    });
  }));
}

void ResourceManager::workerEnded(const std::string& id, const std::string& reason) {
  KJ_IF_MAYBE (pool, pool_) {
    const auto found = pool->workers().find(id);
    if (found == pool->workers().end()) return;
    // Counted as the pool counts it: a failed start only if it never registered.
    const uint64_t failuresBefore = pool->startFailures();
    // As a failed start's error, named by its provider ("docker: worker e3-1 ... exited ...").
    pool->ended(id, pool->options().provider + ": " + reason, monoNow());
    counters_.workerStartFailures += pool->startFailures() - failuresBefore;
    poolEvent("worker ended", id, reason);
    planLater();
  }
}

std::string ResourceManager::workerSupplyReason() const {
  KJ_IF_MAYBE (pool, pool_) return pool->waitingReason(monoNow());
  return {};
}

void ResourceManager::listStartedWorkers(capnp::List<wire::StartedWorker>::Builder out) const {
  KJ_IF_MAYBE (pool, pool_) {
    const MonoTime now = monoNow();
    const int64_t wall = wallNow();
    unsigned i = 0;
    for (const auto& [id, worker] : pool->workers()) {
      if (i >= out.size()) break;
      auto entry = out[i++];
      entry.setProviderWorkerId(pool->providerWorkerId(id));
      entry.setPhase(phaseName(worker.phase));
      entry.setSinceMs(wall -
                       std::chrono::duration_cast<std::chrono::milliseconds>(now - worker.since)
                           .count());
      if (worker.resourceId) wire::setWireId(entry.initResourceId(), *worker.resourceId);
      entry.setRecovered(worker.recovered);
    }
  }
}

PoolCounts ResourceManager::workerPoolCounts() const {
  KJ_IF_MAYBE (pool, pool_) return pool->counts();
  return {};
}

void ResourceManager::listTaskExecutors(capnp::List<wire::TaskExecutorInfo>::Builder out) const {
  uint32_t i = 0;
  for (const auto& [id, worker] : slots_.workers()) {
    if (i >= out.size()) break;
    auto info = out[i++];
    const WorkerRegistration& registration = worker.registration;
    auto registered = info.initRegistration();
    wire::setWireId(registered.initResourceId(), registration.resourceId);
    registered.setHost(registration.host);
    registered.setDataAddress(registration.dataAddress);
    registered.setHttpAddress(registration.httpAddress);
    registered.setNumberOfSlots(registration.numberOfSlots);
    toWire(registration.slotProfile, registered.initSlotProfile());
    toWire(registration.totalProfile, registered.initTotalProfile());
    registered.setVersion(registration.version);
    registered.setPid(registration.pid);
    registered.setStartedAtMs(registration.startedAtMs);
    registered.setContainment(registration.containment);
    registered.setProviderWorkerId(registration.providerWorkerId);
    info.setRegisteredAtMs(worker.registeredAtMs);
    info.setLastHeartbeatAtMs(worker.lastHeartbeatAtMs);
    auto slots = info.initSlots(static_cast<uint32_t>(worker.slots.size()));
    for (uint32_t s = 0; s < worker.slots.size(); ++s) {
      const Slot& slot = worker.slots[s];
      auto status = slots[s];
      auto slotId = status.initSlotId();
      wire::setWireId(slotId.initResourceId(), id);
      slotId.setSlotIndex(slot.index);
      toWire(slot.profile, status.initProfile());
      if (slot.allocation) wire::setWireId(status.initAllocationId(), *slot.allocation);
      if (slot.job) wire::setWireId(status.initJobId(), *slot.job);
      auto attempts =
          status.initRunningAttempts(static_cast<uint32_t>(slot.runningAttempts.size()));
      for (uint32_t a = 0; a < slot.runningAttempts.size(); ++a) {
        wire::setWireId(attempts[a].initAttemptId(), slot.runningAttempts[a]);
        if (slot.job) wire::setWireId(attempts[a].initJobId(), *slot.job);
        if (slot.allocation) wire::setWireId(attempts[a].initAllocationId(), *slot.allocation);
      }
    }
  }
}

}  // namespace regent::resourcemanager

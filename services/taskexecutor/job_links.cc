// JobLinks (see job_links.h): the JobMasters of the jobs on the worker, reached through the
// registered leader's bootstrap; the offers of the jobs' slots; the answers to the JobMasters'
// heartbeats; the JobMasters told when the worker leaves.
#include "services/taskexecutor/job_links.h"

#include <kj/debug.h>
#include <kj/vector.h>
#include <spdlog/spdlog.h>

#include <set>
#include <utility>
#include <vector>

#include "client/leader_client.h"
#include "rpc/wire_ids.h"
#include "services/taskexecutor/registration.h"
#include "services/taskexecutor/task_executor.h"

namespace regent::taskexecutor {

JobLinks::Reaction JobLinks::reactionTo(const rpc::CallFailure& failure) {
  if (failure.which == wire::Failure::NOT_FOUND) return Reaction::kUnknown;
  if (failure.which == wire::Failure::NOT_REGISTERED) return Reaction::kNotRegistered;
  return failure.action() == rpc::FailureAction::kFatal ? Reaction::kGiveUp : Reaction::kRetry;
}

JobLinks::Reaction JobLinks::reactionTo(const kj::Exception& exception) {
  return rpc::classify(exception) == rpc::FailureAction::kFatal ? Reaction::kGiveUp
                                                                : Reaction::kRetry;
}

Duration JobLinks::waitBefore(ExponentialBackoff& backoff, Duration retryAfter, Duration max) {
  const Duration next = backoff.next();
  if (retryAfter > next) return retryAfter < max ? retryAfter : max;
  return next;
}

JobLinks::JobLink::JobLink(const TaskExecutorOptions& options, kj::Timer& timer)
    : offerBackoff(options.registrationInitial, options.registrationMax, options.jitter),
      updateBackoff(options.registrationInitial, options.registrationMax, options.jitter),
      backoffWaits(timer) {}

JobLinks::JobLinks(kj::Timer& timer, client::LeaderClient& leaders, EventSink& events,
                   const TaskExecutorOptions& options, TaskExecutorCounters& counters,
                   Registration& registration, SlotTable& slots, TaskRunner& runner,
                   wire::TaskExecutorGateway::Client gateway)
    : timer_(timer),
      leaders_(leaders),
      events_(events),
      options_(options),
      counters_(counters),
      registration_(registration),
      slots_(slots),
      runner_(runner),
      gateway_(kj::mv(gateway)) {}

JobLinks::~JobLinks() noexcept = default;

JobLinks::JobLink& JobLinks::link(const JobId& job) {
  auto found = jobs_.find(job);
  if (found == jobs_.end()) found = jobs_.emplace(job, kj::heap<JobLink>(options_, timer_)).first;
  return *found->second;
}

void JobLinks::forgetIfIdle(const JobId& job) {
  auto found = jobs_.find(job);
  if (found == jobs_.end()) return;
  const JobLink& held = *found->second;
  if (held.delivering || held.offering || held.offerScheduled || !held.updates.empty()) return;
  if (slots_.holdsAnythingOf(job)) return;
  jobs_.erase(found);
}

void JobLinks::onRegistered() {
  // Asked again through this registration's bootstrap: a JobMaster reached before may be gone
  // (released while this worker was away) even when the epoch is the same.
  for (auto& [job, held] : jobs_) {
    held->gateway = nullptr;
    held->offerSingly = false;  // A refused batch of this registration switches again.
  }
  // Every allocated slot, also one accepted in this epoch already: registering again in the
  // same epoch means the ResourceManager dropped this worker (a pause past heartbeat.timeout,
  // say), and the JobMaster may have dropped it too, failed its attempts, or ended. The offer
  // tells the JobMaster what runs (and what ended) here; it adopts what it expects and cancels
  // the rest, and a job the leader no longer runs (notFound) is cancelled here (jobUnknown).
  std::set<JobId> toOffer;
  for (SlotState& slot : slots_.slots()) {
    if (!slot.allocation || !slot.job) continue;
    slot.acceptedEpoch = 0;
    toOffer.insert(*slot.job);
  }
  // Loops waiting out a backoff try at once, against this registration.
  for (auto& [job, held] : jobs_) wakeJob(*held);
  for (const JobId& job : toOffer) scheduleOffer(job);
  // The queued updates of a job holding slots here wait for the answer to its offer (offerLoop
  // marks it offered): the JobMaster learns the attempts from the offer, then how they went on.
  // A job holding no slot here any more has nothing to offer: its updates go at once.
  std::vector<JobId> slotless;
  for (const auto& [job, held] : jobs_) {
    if (toOffer.count(job) == 0 || !runner_.runsTasks()) slotless.push_back(job);
  }
  for (const JobId& job : slotless) markOffered(job);
}

kj::Promise<rpc::Attempt<wire::JobMasterGateway::Client>> JobLinks::jobMaster(const JobId& job,
                                                                              uint64_t epoch) {
  using Outcome = rpc::Attempt<wire::JobMasterGateway::Client>;
  JobLink& held = link(job);
  KJ_IF_MAYBE (gateway, held.gateway) {
    if (held.gatewayEpoch == epoch) return Outcome(*gateway);
  }
  if (!registration_.epochStands(epoch)) {
    rpc::CallFailure failure;
    failure.which = wire::Failure::UNAVAILABLE;
    failure.message = "not registered with the leader of epoch " + std::to_string(epoch);
    return Outcome(std::move(failure));
  }
  auto request = KJ_ASSERT_NONNULL(registration_.bootstrap()).jobMasterRequest();
  request.setEpoch(epoch);
  wire::setWireId(request.initJobId(), job);
  return leaders_.deadline()
      .send(kj::mv(request))
      .then([this, job,
             epoch](capnp::Response<wire::MasterBootstrap::JobMasterResults> response) -> Outcome {
        if (response.hasFailure()) return rpc::CallFailure::from(response.getFailure());
        wire::JobMasterGateway::Client gateway = response.getJobMaster();
        auto found = jobs_.find(job);
        if (found != jobs_.end() && registration_.epochStands(epoch)) {
          found->second->gateway = gateway;
          found->second->gatewayEpoch = epoch;
        }
        return Outcome(kj::mv(gateway));
      })
      .catch_([](kj::Exception&& exception) -> Outcome {
        // The leader went away with the call in flight (DISCONNECTED), or it timed out: a
        // failure the callers retry, not an exception that would end their loop with its flag
        // (JobLink::delivering, offering) still set. Any other exception is retried too: giving
        // up would mean freeing the job's slots, so cancelling tasks that may be running fine.
        rpc::CallFailure failure;
        failure.which = wire::Failure::UNAVAILABLE;
        failure.message =
            "MasterBootstrap.jobMaster: " + std::string(exception.getDescription().cStr());
        return Outcome(std::move(failure));
      });
}

void JobLinks::scheduleOffer(const JobId& job) {
  if (!runner_.runsTasks()) return;  // Runs no tasks: the allocation is only recorded, reported.
  JobLink& held = link(job);
  // A running offer looks for slots allocated meanwhile when it is done.
  if (held.offerScheduled || held.offering) return;
  held.offerScheduled = true;
  // Once nothing else is queued, so that the slots requestSlot allocates to the job together go
  // together: also calls that arrived in one read, which the RPC system dispatches one per turn.
  tasks_.add(kj::evalLast([this, job]() {
    link(job).offerScheduled = false;
    return offerLoop(job, registration_.epoch());
  }));
}

kj::Promise<void> JobLinks::offerLoop(JobId job, uint64_t epoch) {
  JobLink& held = link(job);
  std::vector<std::pair<uint32_t, AllocationId>> offered;
  if (registration_.epochStands(epoch)) {
    for (const SlotState& slot : slots_.slots()) {
      if (slot.job == job && slot.allocation && slot.acceptedEpoch != epoch) {
        offered.emplace_back(slot.index, *slot.allocation);
      }
    }
  }
  if (offered.empty()) {
    held.offerSingly = false;
    // Registered in another epoch meanwhile: that registration's offer (onRegistered) found
    // this loop running and left the slots to it.
    if (epoch != registration_.epoch() && registration_.epochStands(registration_.epoch())) {
      return offerLoop(job, registration_.epoch());
    }
    held.offering = false;
    // Every slot of the job accepted in this registration, or freed: its updates may go.
    if (registration_.epochStands(epoch)) markOffered(job);
    forgetIfIdle(job);
    return kj::READY_NOW;
  }
  held.offering = true;
  if (held.offerSingly) offered.resize(1);

  // The offered slots that still hold their allocation.
  auto stillHeld = [this, offered]() {
    std::vector<SlotState*> slots;
    for (const auto& [index, allocation] : offered) {
      if (slots_.slots()[index].allocation == allocation) slots.push_back(&slots_.slots()[index]);
    }
    return slots;
  };
  // After a failure: again after the backoff, or the slots freed. `offerRefused`: the JobMaster
  // answered the offer itself with the failure (not the bootstrap reaching it, nor the link).
  auto failed = [this, job, epoch, stillHeld, sent = offered.size()](
                    Reaction reaction, const std::string& why, Duration retryAfter,
                    bool offerRefused) -> kj::Promise<void> {
    JobLink& held = link(job);
    held.gateway = nullptr;  // Asked again next time.
    if (reaction == Reaction::kRetry || reaction == Reaction::kNotRegistered) {
      const Duration wait = waitBefore(held.offerBackoff, retryAfter, options_.registrationMax);
      spdlog::debug("task executor {}: offering slots to job {} failed: {} (again in {} ms)",
                    options_.resourceId.toHex(), job.toHex(), why, wait.count());
      return backoffWait(job, wait).then([this, job, epoch]() { return offerLoop(job, epoch); });
    }
    if (reaction == Reaction::kUnknown) {
      jobUnknown(job, why);
      return offerLoop(job, epoch);
    }
    if (offerRefused && sent > 1) {
      // Refused as a whole, maybe for one of them (which may be freed already): each is offered
      // alone now, at once. Decided from what was sent, not from what is still held.
      spdlog::info("task executor {}: the offer of {} slots to job {} was refused ({}); offering "
                   "them one at a time",
                   options_.resourceId.toHex(), sent, job.toHex(), why);
      held.offerSingly = true;
      return offerLoop(job, epoch);
    }
    const std::string cause =
        "the JobMaster of job " + job.toHex() + " refused the slot offer: " + why;
    spdlog::warn("task executor {}: freeing {} slot(s): {}", options_.resourceId.toHex(),
                 stillHeld().size(), cause);
    for (SlotState* slot : stillHeld()) releaseSlot(*slot, cause);
    return offerLoop(job, epoch);
  };

  return jobMaster(job, epoch)
      .then([this, job, epoch, offered, stillHeld,
             failed](rpc::Attempt<wire::JobMasterGateway::Client> reached) -> kj::Promise<void> {
        if (auto* failure = std::get_if<rpc::CallFailure>(&reached)) {
          return failed(reactionTo(*failure), failure->describe(), failure->retryAfter, false);
        }
        auto request = std::get<wire::JobMasterGateway::Client>(reached).offerSlotsRequest();
        request.setEpoch(epoch);
        wire::setWireId(request.initResourceId(), options_.resourceId);
        request.setTaskExecutor(gateway_);
        std::vector<SlotState*> slots = stillHeld();
        auto list = request.initSlots(static_cast<unsigned>(slots.size()));
        for (size_t i = 0; i < slots.size(); ++i) {
          auto offer = list[static_cast<unsigned>(i)];
          const SlotState& slot = *slots[i];
          wire::setWireId(offer.initAllocationId(), *slot.allocation);
          offer.setSlotIndex(slot.index);
          slots_.fillProfile(offer.initProfile());
          // Every attempt in the slot: running (its current state), ended with its terminal
          // update still queued (that state; the update follows the offer's answer), or the
          // last one that FINISHED in it (SlotState::finished: acknowledged, maybe not stored).
          std::map<AttemptId, const AttemptRecord*> inSlot;
          for (const auto& [id, record] : slots_.attempts()) {
            if (record.allocation == *slot.allocation) inSlot.emplace(id, &record);
          }
          if (slot.finished) inSlot.emplace(slot.finished->attempt, &*slot.finished);
          for (const PendingUpdate& pending : link(job).updates) {
            const AttemptRecord& record = pending.record;
            if (record.allocation == *slot.allocation &&
                record.latest.phase != TaskPhase::kRunning &&
                slots_.attempts().count(record.attempt) == 0) {
              inSlot[record.attempt] = &record;
            }
          }
          auto attempts = offer.initRunningAttempts(static_cast<unsigned>(inSlot.size()));
          unsigned j = 0;
          for (const auto& [id, record] : inSlot) slots_.fillAttempt(attempts[j++], *record);
        }
        // An answer arriving after a newer registration (same epoch) no longer counts: that
        // registration wants its own offer answered.
        const uint64_t round = registration_.round();
        return leaders_.deadline()
            .send(kj::mv(request))
            .then(
                [this, job, epoch, round, stillHeld,
                 failed](capnp::Response<wire::JobMasterGateway::OfferSlotsResults> response)
                    -> kj::Promise<void> {
                  if (response.hasFailure()) {
                    auto failure = rpc::CallFailure::from(response.getFailure());
                    return failed(reactionTo(failure), failure.describe(), failure.retryAfter,
                                  true);
                  }
                  std::set<AllocationId> accepted;
                  for (auto id : response.getAccepted()) {
                    accepted.insert(wire::idFromWire<AllocationId>(id));
                  }
                  link(job).offerBackoff.reset();
                  for (SlotState* slot : stillHeld()) {
                    if (accepted.count(*slot->allocation) != 0) {
                      if (registration_.epochStands(epoch) && round == registration_.round()) {
                        slot->acceptedEpoch = epoch;
                      }
                    } else {
                      releaseSlot(*slot, "the JobMaster of job " + job.toHex() +
                                             " did not accept the slot");
                    }
                  }
                  return offerLoop(job, epoch);
                },
                [failed](kj::Exception&& exception) {
                  return failed(reactionTo(exception),
                                std::string(exception.getDescription().cStr()), Duration(0),
                                false);
                });
      });
}

void JobLinks::releaseSlot(SlotState& slot, const std::string& cause) {
  if (auto job = slots_.release(slot, cause)) forgetIfIdle(*job);
}

void JobLinks::freeJob(const JobId& job, const std::string& cause) {
  for (SlotState& slot : slots_.slots()) {
    if (slot.job == job) releaseSlot(slot, cause);
  }
  // Attempts whose slot was freed before they ended.
  slots_.cancelAttemptsOf(job);
}

void JobLinks::jobUnknown(const JobId& job, const std::string& why) {
  JobLink& held = link(job);
  const size_t dropped = held.updates.size();
  held.updates.clear();
  held.unknownRound = registration_.round();
  spdlog::warn(
      "task executor {}: job {} is unknown to the leader ({}); cancelling its "
      "attempts, freeing its slots, dropping its {} queued update(s)",
      options_.resourceId.toHex(), job.toHex(), why, dropped);
  freeJob(job, "job " + job.toHex() + " is unknown to the leader: " + why);
  notifyIfFlushed();
}

kj::Promise<void> JobLinks::backoffWait(const JobId& job, Duration wait) {
  return link(job).backoffWaits.wait(wait);
}

void JobLinks::wakeJob(JobLink& held) {
  held.backoffWaits.wakeAll();
  held.offerBackoff.reset();
  held.updateBackoff.reset();
}

void JobLinks::answerHeartbeat(const JobId& job, uint64_t epoch) {
  if (!registration_.epochStands(epoch)) return;  // Registering with that leader first.
  tasks_.add(
      jobMaster(job, epoch)
          .then([this, job,
                 epoch](rpc::Attempt<wire::JobMasterGateway::Client> reached) -> kj::Promise<void> {
            if (auto* failure = std::get_if<rpc::CallFailure>(&reached)) {
              spdlog::debug("task executor {}: cannot answer the heartbeat of job {}: {}",
                            options_.resourceId.toHex(), job.toHex(), failure->describe());
              forgetIfIdle(job);
              return kj::READY_NOW;
            }
            // Every attempt of the job held here: running, or ended with its update still on the
            // way.
            std::set<AttemptId> held;
            for (const auto& [id, record] : slots_.attempts()) {
              if (record.job == job) held.insert(id);
            }
            auto found = jobs_.find(job);
            if (found != jobs_.end()) {
              for (const PendingUpdate& pending : found->second->updates) {
                held.insert(pending.record.attempt);
              }
            }
            auto request = std::get<wire::JobMasterGateway::Client>(reached).heartbeatRequest();
            request.setEpoch(epoch);
            wire::setWireId(request.initResourceId(), options_.resourceId);
            auto list =
                request.initPayload().initDeployedAttempts(static_cast<unsigned>(held.size()));
            unsigned i = 0;
            for (const AttemptId& attempt : held) wire::setWireId(list[i++], attempt);
            return leaders_.deadline()
                .send(kj::mv(request))
                .then(
                    [this, job,
                     epoch](capnp::Response<wire::JobMasterGateway::HeartbeatResults> response) {
                      if (!response.hasFailure()) return;
                      auto failure = rpc::CallFailure::from(response.getFailure());
                      if (failure.which == wire::Failure::NOT_REGISTERED &&
                          registration_.epochStands(epoch)) {
                        // The JobMaster does not hold this worker's slots: offer them again.
                        for (SlotState& slot : slots_.slots()) {
                          if (slot.job == job) slot.acceptedEpoch = 0;
                        }
                        scheduleOffer(job);
                        return;
                      }
                      spdlog::debug(
                          "task executor {}: the JobMaster heartbeat of job {} was refused: {}",
                          options_.resourceId.toHex(), job.toHex(), failure.describe());
                    },
                    [this, job](kj::Exception&& exception) {
                      auto found = jobs_.find(job);
                      if (found != jobs_.end()) found->second->gateway = nullptr;
                      spdlog::debug(
                          "task executor {}: the JobMaster heartbeat of job {} failed: {}",
                          options_.resourceId.toHex(), job.toHex(),
                          std::string(exception.getDescription().cStr()));
                    });
          }));
}

kj::Promise<void> JobLinks::disconnectJobMasters(const std::string& cause) {
  const uint64_t epoch = registration_.epoch();
  if (!runner_.runsTasks() || !registration_.epochStands(epoch)) return kj::READY_NOW;
  std::set<JobId> jobs;
  for (const SlotState& slot : slots_.slots()) {
    if (slot.allocation && slot.job) jobs.insert(*slot.job);
  }
  if (jobs.empty()) return kj::READY_NOW;
  kj::Vector<kj::Promise<void>> calls;
  for (const JobId& job : jobs) {
    calls.add(
        jobMaster(job, epoch)
            .then([this, job, epoch, cause](
                      rpc::Attempt<wire::JobMasterGateway::Client> reached) -> kj::Promise<void> {
              if (auto* failure = std::get_if<rpc::CallFailure>(&reached)) {
                spdlog::info(
                    "task executor {}: not telling the JobMaster of job {} that the "
                    "worker leaves: {}",
                    options_.resourceId.toHex(), job.toHex(), failure->describe());
                return kj::READY_NOW;
              }
              auto request = std::get<wire::JobMasterGateway::Client>(reached).disconnectRequest();
              request.setEpoch(epoch);
              wire::setWireId(request.initResourceId(), options_.resourceId);
              request.setCause(cause);
              return leaders_.deadline()
                  .send(kj::mv(request))
                  .then([this,
                         job](capnp::Response<wire::JobMasterGateway::DisconnectResults> response) {
                    if (!response.hasFailure()) return;
                    spdlog::info(
                        "task executor {}: the JobMaster of job {} refused the "
                        "disconnect: {}",
                        options_.resourceId.toHex(), job.toHex(),
                        rpc::CallFailure::from(response.getFailure()).describe());
                  });
            })
            .catch_([this, job](kj::Exception&& exception) {
              spdlog::warn(
                  "task executor {}: disconnecting from the JobMaster of job {} failed: "
                  "{}",
                  options_.resourceId.toHex(), job.toHex(),
                  std::string(exception.getDescription().cStr()));
            }));
  }
  const Duration bound = leaders_.deadline().timeout();
  return kj::joinPromises(calls.releaseAsArray())
      .exclusiveJoin(timer_.afterDelay(bound.count() * kj::MILLISECONDS).then([this, bound] {
        spdlog::warn(
            "task executor {}: the JobMasters did not answer the disconnect within {} "
            "ms; leaving anyway",
            options_.resourceId.toHex(), bound.count());
      }));
}

}  // namespace regent::taskexecutor

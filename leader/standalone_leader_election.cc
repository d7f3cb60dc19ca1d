// Standalone election and retrieval: the epoch file is the only state.
#include "leader/standalone_leader_election.h"

#include <kj/debug.h>
#include <spdlog/spdlog.h>

#include "leader/epoch_file.h"

namespace regent::leader {

class StandaloneLeaderElection::ErrorHandler final : public kj::TaskSet::ErrorHandler {
 public:
  void taskFailed(kj::Exception&& exception) override {
    spdlog::error("standalone leader election: {}", exception.getDescription().cStr());
  }
};

StandaloneLeaderElection::StandaloneLeaderElection(EventLoop& loop, std::string epochFile)
    : loop_(loop),
      epochFile_(std::move(epochFile)),
      errorHandler_(kj::heap<ErrorHandler>()),
      tasks_(*errorHandler_) {}

StandaloneLeaderElection::~StandaloneLeaderElection() noexcept = default;

void StandaloneLeaderElection::start(LeaderContender& contender) {
  KJ_REQUIRE(contender_ == nullptr, "StandaloneLeaderElection::start called twice");
  contender_ = &contender;
  takeNextEpoch();
}

void StandaloneLeaderElection::takeNextEpoch() {
  uint64_t generation = ++generation_;
  tasks_.add(loop_.runBlocking([path = epochFile_] { return advanceEpochFile(path); })
                 .then([this, generation](Result<uint64_t>&& next) {
                   if (generation != generation_) return;
                   if (!next) {
                     spdlog::error("standalone leader election: {}; not taking leadership",
                                   next.error().message);
                     return;
                   }
                   contender_->contending("standalone");
                   if (generation != generation_) return;  // Handed over from the callback.
                   KJ_ASSERT(!leading_);
                   leading_ = true;
                   epoch_ = next.value();
                   spdlog::info("standalone leader election: epoch={} taken from {}", epoch_,
                                epochFile_);
                   contender_->grantLeadership(epoch_);
                 }));
}

kj::Promise<Status> StandaloneLeaderElection::markServing(uint64_t epoch) {
  if (!leading_ || epoch != epoch_) {
    return Status(Error::fatal(
        "epoch " + std::to_string(epoch) + " is not the current term (" +
        (leading_ ? "current epoch " + std::to_string(epoch_) : std::string("not leading")) + ")"));
  }
  return Status();
}

kj::Promise<void> StandaloneLeaderElection::handOver(bool recontend) {
  ++generation_;
  // Deferred: the contender is never called from inside one of our own methods.
  return kj::evalLater([this, recontend] {
    if (leading_) {
      leading_ = false;
      spdlog::info("standalone leader election: epoch={} handed over", epoch_);
      contender_->revokeLeadership(epoch_, "handed over");
    }
    if (recontend && contender_ != nullptr) takeNextEpoch();
  });
}

class StandaloneLeaderRetrieval::ErrorHandler final : public kj::TaskSet::ErrorHandler {
 public:
  void taskFailed(kj::Exception&& exception) override {
    spdlog::error("standalone leader retrieval: {}", exception.getDescription().cStr());
  }
};

StandaloneLeaderRetrieval::StandaloneLeaderRetrieval(EventLoop& loop, LeaderInfo leader,
                                                     std::string epochFile)
    : loop_(loop),
      leader_(std::move(leader)),
      epochFile_(std::move(epochFile)),
      errorHandler_(kj::heap<ErrorHandler>()),
      tasks_(*errorHandler_) {}

StandaloneLeaderRetrieval::~StandaloneLeaderRetrieval() noexcept = default;

kj::Promise<LeaderInfo> StandaloneLeaderRetrieval::current() {
  return loop_.runBlocking([path = epochFile_] { return readEpochFile(path); })
      .then([leader = leader_](Result<std::optional<uint64_t>>&& epoch) mutable {
        if (epoch && epoch.value()) leader.epoch = *epoch.value();
        return leader;
      });
}

void StandaloneLeaderRetrieval::start(LeaderRetrievalListener& listener) {
  tasks_.add(current().then([&listener](LeaderInfo&& leader) { listener.leaderChanged(leader); }));
}

kj::Promise<Result<std::optional<LeaderInfo>>> StandaloneLeaderRetrieval::leader() {
  return current().then([](LeaderInfo&& leader) -> Result<std::optional<LeaderInfo>> {
    return std::optional<LeaderInfo>(kj::mv(leader));
  });
}

kj::Promise<Result<std::vector<ContenderEntry>>> StandaloneLeaderRetrieval::contenders() {
  return current().then([](LeaderInfo&& leader) -> Result<std::vector<ContenderEntry>> {
    ContenderEntry entry;
    entry.latchNode = "standalone";
    entry.info.masterId = leader.masterId;
    entry.info.rpcAddress = leader.rpcAddress;
    entry.info.httpAddress = leader.httpAddress;
    entry.info.host = leader.host;
    entry.info.pid = leader.pid;
    entry.leader = true;
    return std::vector<ContenderEntry>{kj::mv(entry)};
  });
}

}  // namespace regent::leader

// LeaderClient (see leader_client.h): finding the leader, and the retry loop of a call.
#include "client/leader_client.h"

#include <kj/debug.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <variant>

#include "common/units.h"

namespace regent::client {
namespace {

leader::LeaderInfo fromWire(wire::LeaderInfo::Reader info) {
  leader::LeaderInfo leader;
  leader.epoch = info.getEpoch();
  leader.masterId = info.getMasterId().cStr();
  leader.rpcAddress = info.getRpcAddress().cStr();
  leader.httpAddress = info.getHttpAddress().cStr();
  leader.host = info.getHost().cStr();
  leader.pid = info.getPid();
  leader.electedAtMs = info.getElectedAtMs();
  leader.status = info.getStatus() == wire::LeaderStatus::SERVING ? leader::LeaderStatus::kServing
                                                                   : leader::LeaderStatus::kRecovering;
  return leader;
}

std::string describeLeader(const leader::LeaderInfo& leader) {
  return "the leader " + leader.masterId + " at " + leader.rpcAddress + " (epoch " +
         std::to_string(leader.epoch) + ")";
}

}  // namespace

struct LeaderClient::Call {
  ErasedFn fn;
  ExponentialBackoff backoff;
  Duration retryAfter{0};  // An unavailable leader's suggestion for the next wait.
};

LeaderClient::LeaderClient(kj::Network& network, kj::Timer& timer,
                           kj::Own<leader::LeaderRetrieval> retrieval,
                           LeaderClientOptions options)
    : network_(network),
      timer_(timer),
      retrieval_(kj::mv(retrieval)),
      options_(std::move(options)),
      deadline_(timer, options_.rpc.callTimeout) {
  retrieval_->start(*this);
}

LeaderClient::LeaderClient(kj::Network& network, kj::Timer& timer, std::string masterAddress,
                           LeaderClientOptions options)
    : network_(network),
      timer_(timer),
      masterAddress_(std::move(masterAddress)),
      options_(std::move(options)),
      deadline_(timer, options_.rpc.callTimeout) {}

// The retrieval goes first: it may still call leaderChanged() while it shuts down, and that
// touches the members declared after it.
LeaderClient::~LeaderClient() noexcept { retrieval_ = nullptr; }

void LeaderClient::noteObstacle(std::string obstacle, bool noLeader) {
  lastObstacle_ = std::move(obstacle);
  lastWasNoLeader_ = noLeader;
}

void LeaderClient::connectTo(const std::string& address) {
  if (!client_) {
    client_ = kj::heap<rpc::RpcClient>(network_, timer_, address, options_.rpc);
  } else if (client_->address() != address && options_.previousLeaderLinger.count() > 0) {
    // The previous connection lingers (see previousLeaderLinger) until it ends or the wait does;
    // a new one goes to `address`. One that ended is not dialled again (the leader it reached
    // is gone, or closed it because its term is over).
    kj::Own<rpc::RpcClient> previous = kj::mv(client_);
    kj::Promise<void> ended = previous->onDisconnect();
    client_ = kj::heap<rpc::RpcClient>(network_, timer_, address, options_.rpc);
    ++clientGeneration_;
    lingering_.add(timer_.afterDelay(options_.previousLeaderLinger.count() * kj::MILLISECONDS)
                       .exclusiveJoin(kj::mv(ended))
                       .attach(kj::mv(previous)));
  } else {
    client_->setAddress(address);
  }
}

std::string LeaderClient::connectionProblem(bool asking) const {
  const rpc::RpcClient* client = asking && asking_ ? asking_.get() : client_.get();
  if (client == nullptr || client->state() == rpc::RpcClientState::kConnected ||
      client->consecutiveFailures() == 0) {
    return "";
  }
  return client->lastFailure();
}

std::string LeaderClient::withConnectionProblem(std::string obstacle, bool asking) const {
  const std::string problem = connectionProblem(asking);
  return problem.empty() ? obstacle : obstacle + " (" + problem + ")";
}

std::string LeaderClient::giveUpReason() const {
  if (!lastObstacle_.empty()) return lastObstacle_;
  if (!waitingFor_.empty()) {
    const std::string problem = connectionProblem();
    return "no answer yet: waiting for " + waitingFor_ +
           (problem.empty() ? " (each RPC may take up to " +
                                  formatDuration(options_.rpc.callTimeout) + ", rpc.call-timeout)"
                            : "; " + problem);
  }
  return "no answer from " + options_.clusterName;
}

kj::Promise<Status> LeaderClient::run(ErasedFn fn, Duration timeout) {
  auto call = std::make_shared<Call>(
      Call{std::move(fn), ExponentialBackoff(options_.backoffInitial, options_.backoffMax)});
  failedToFindLeader_ = false;
  return attemptLoop(call).exclusiveJoin(
      timer_.afterDelay(timeout.count() * kj::MILLISECONDS).then([this]() -> Status {
        return Error::retryable(giveUpReason());
      }));
}

kj::Promise<Status> LeaderClient::attemptLoop(std::shared_ptr<Call> call) {
  const uint64_t movesBefore = leaderMoves_;
  return attemptOnce(*call).then([this, call, movesBefore](
                                     std::optional<Status> end) -> kj::Promise<Status> {
    if (end) return kj::mv(*end);
    const Duration delay =
        std::max(call->backoff.next(), std::min(call->retryAfter, options_.backoffMax));
    call->retryAfter = Duration(0);
    return backoffWait(delay, movesBefore).then([this, call]() { return attemptLoop(call); });
  });
}

kj::Promise<void> LeaderClient::backoffWait(Duration delay, uint64_t movesBefore) {
  if (leaderMoves_ != movesBefore) return kj::READY_NOW;  // Moved while the attempt ran.
  return leaderMoved_.wait(delay);
}

kj::Promise<std::optional<Status>> LeaderClient::attemptOnce(Call& call) {
  using End = std::optional<Status>;
  return resolve().then([this, &call](Result<std::optional<leader::LeaderInfo>> resolved)
                            -> kj::Promise<End> {
    if (!resolved.ok()) {
      failedToFindLeader_ = true;
      return End(Status(resolved.error()));
    }
    if (!resolved.value()) return End();
    const std::optional<leader::LeaderInfo>& leader = resolved.value();
    connectTo(leader->rpcAddress);
    const std::string where = describeLeader(*leader);
    waitingFor_ = "an answer from " + where;
    kj::Promise<rpc::ProvenBootstrap> proving = nullptr;
    KJ_IF_MAYBE (current, currentAuthenticated()) {
      proving = rpc::ProvenBootstrap(*current);
    } else {
      proving =
          deadline_
              .apply("MasterBootstrap.bootstrap", client_->bootstrapAs<wire::MasterBootstrap>())
              .then([this, leader = *leader](wire::MasterBootstrap::Client bootstrap) {
                return authenticated(kj::mv(bootstrap),
                                     "the master at " + leader.rpcAddress + " (named the leader " +
                                         leader.masterId + " of epoch " +
                                         std::to_string(leader.epoch) + ")");
              });
    }
    return proving
        .then([this, &call, leader = *leader, where](rpc::ProvenBootstrap&& proven)
                  -> kj::Promise<End> {
          if (auto* refused = std::get_if<rpc::RefusedMaster>(&proven)) {
            return refuseMaster(*refused);
          }
          if (auto* failure = std::get_if<rpc::CallFailure>(&proven)) {
            // The master refused the credential; it has not proven itself, so the next call reads
            // the leader again rather than trusting its record.
            known_.reset();
            return afterFailure(call, std::move(*failure), where);
          }
          return call.fn(std::get<wire::MasterBootstrap::Client>(kj::mv(proven)), leader)
              .then([this, &call, where](std::optional<rpc::CallFailure> failure) -> End {
                if (!failure) return Status();
                return afterFailure(call, std::move(*failure), where);
              });
        })
        .catch_([this, where](kj::Exception&& exception) -> kj::Promise<End> {
          const rpc::FailureAction action = rpc::classify(exception);
          if (action == rpc::FailureAction::kFatal) return kj::mv(exception);
          if (action == rpc::FailureAction::kResolveAgain) known_.reset();
          noteObstacle(withConnectionProblem(where + ": " + exception.getDescription().cStr()));
          return End();
        });
  });
}

std::optional<Status> LeaderClient::afterFailure(Call& call, rpc::CallFailure failure,
                                                 const std::string& where) {
  switch (failure.action()) {
    case rpc::FailureAction::kFatal:
      return Status(Error::fatal(failure.describe()));
    case rpc::FailureAction::kResolveAgain:
      known_.reset();
      call.retryAfter = failure.retryAfter;
      break;
    case rpc::FailureAction::kBackOff:
      break;
  }
  noteObstacle(where + ": " + failure.message);
  return std::nullopt;
}

std::optional<Status> LeaderClient::refuseMaster(const rpc::RefusedMaster& refused) {
  ++mastersRefused_[static_cast<size_t>(refused.reason)];
  spdlog::warn("{}", refused.message);
  if (rpc::classify(refused.reason) == rpc::FailureAction::kResolveAgain) known_.reset();
  noteObstacle(refused.message);
  return std::nullopt;
}

kj::Maybe<wire::MasterBootstrap::Client&> LeaderClient::currentAuthenticated() {
  KJ_IF_MAYBE (cached, authenticated_) {
    if (client_ && client_->state() == rpc::RpcClientState::kConnected &&
        authenticatedOn_ == client_->connectionsEstablished() &&
        authenticatedAt_ == client_->address() && authenticatedGeneration_ == clientGeneration_) {
      return *cached;
    }
  }
  return nullptr;
}

kj::Promise<rpc::ProvenBootstrap> LeaderClient::authenticated(
    wire::MasterBootstrap::Client bootstrap, const std::string& where) {
  if (!options_.credential) return rpc::ProvenBootstrap(kj::mv(bootstrap));
  KJ_IF_MAYBE (current, currentAuthenticated()) return rpc::ProvenBootstrap(*current);
  const uint64_t connection = client_->connectionsEstablished();
  const std::string address = client_->address();
  const uint64_t generation = clientGeneration_;
  return rpc::authenticateBootstrap(kj::mv(bootstrap), *options_.credential, deadline_, where)
      .then([this, connection, address, generation](rpc::ProvenBootstrap&& done) {
        if (auto* proven = std::get_if<wire::MasterBootstrap::Client>(&done)) {
          authenticated_ = *proven;
          authenticatedOn_ = connection;
          authenticatedAt_ = address;
          authenticatedGeneration_ = generation;
          // The bootstrap it replaces is done with: the master can let go of it (one less set of
          // capabilities per worker on a leader). Calls on this connection go through
          // currentAuthenticated() from now on.
          if (client_ && client_->connectionsEstablished() == connection &&
              clientGeneration_ == generation) {
            client_->releaseBootstrap();
          }
        }
        return kj::mv(done);
      });
}

kj::Promise<Result<std::optional<leader::LeaderInfo>>> LeaderClient::resolve() {
  using Found = std::optional<leader::LeaderInfo>;
  using Resolved = Result<Found>;
  if (known_) return Resolved(Found(*known_));
  if (!retrieval_) {
    waitingFor_ = "the master at " + masterAddress_ + " to name the leader";
    return askMaster().then([](Found found) { return Resolved(std::move(found)); });
  }
  waitingFor_ = "the leader record of " + options_.clusterName + " from ZooKeeper";
  return retrieval_->leader().then([this](Result<Found> read) -> Resolved {
    if (!read.ok()) {
      const std::string message =
          "cannot read the leader of " + options_.clusterName + ": " + read.error().message;
      // A fatal read (no permission: ZNOAUTH) stays so on every retry.
      if (!read.error().isRetryable()) return Error::fatal(message);
      noteObstacle(message);
      return Found();
    }
    if (!read.value()) {
      noteObstacle("no master leads " + options_.clusterName, true);
      return Found();
    }
    const leader::LeaderInfo& leader = *read.value();
    if (leader.rpcAddress.empty()) {
      noteObstacle("the leader " + leader.masterId + " (epoch " + std::to_string(leader.epoch) +
                   ") advertises no rpc address");
      return Found();
    }
    known_ = leader;
    return known_;
  });
}

rpc::RpcClient& LeaderClient::askingClient() {
  if (!client_ || client_->address() == masterAddress_) {
    connectTo(masterAddress_);
    return *client_;
  }
  if (!asking_) {
    asking_ = kj::heap<rpc::RpcClient>(network_, timer_, masterAddress_, options_.rpc);
  }
  return *asking_;
}

kj::Promise<std::optional<leader::LeaderInfo>> LeaderClient::askMaster() {
  using Found = std::optional<leader::LeaderInfo>;
  rpc::RpcClient& asking = askingClient();
  const bool viaAsking = &asking == asking_.get();
  const std::string where = "the master at " + masterAddress_;
  // leaderInfo is open to every role: on the leader's connection, once authenticated, through
  // the authenticated bootstrap (asking for the first again would make the master build it anew).
  kj::Promise<wire::MasterBootstrap::Client> bootstrap = nullptr;
  kj::Maybe<wire::MasterBootstrap::Client&> authenticated = nullptr;
  if (!viaAsking) authenticated = currentAuthenticated();
  KJ_IF_MAYBE (current, authenticated) {
    bootstrap = *current;
  } else {
    bootstrap =
        deadline_.apply("MasterBootstrap.bootstrap", asking.bootstrapAs<wire::MasterBootstrap>());
  }
  return bootstrap
      .then([this](wire::MasterBootstrap::Client bootstrap) {
        return deadline_.send(bootstrap.leaderInfoRequest());
      })
      .then([this, where](capnp::Response<wire::MasterBootstrap::LeaderInfoResults> response)
                -> Found {
        auto view = response.getLeader();
        if (!view.isLeader()) {
          noteObstacle(where + " knows of no leader of " + options_.clusterName, true);
          return Found();
        }
        leader::LeaderInfo leader = fromWire(view.getLeader());
        // The master asked leads: call it where it was reached (it may advertise a name this
        // host resolves differently).
        if (response.getLeading()) leader.rpcAddress = masterAddress_;
        if (leader.rpcAddress.empty()) {
          noteObstacle(where + " names the leader " + leader.masterId +
                       " but no rpc address of it");
          return Found();
        }
        known_ = leader;
        return known_;
      })
      .catch_([this, where, viaAsking](kj::Exception&& exception) -> kj::Promise<Found> {
        if (rpc::classify(exception) == rpc::FailureAction::kFatal) return kj::mv(exception);
        noteObstacle(withConnectionProblem(where + ": " + exception.getDescription().cStr(),
                                           viaAsking));
        return Found();
      });
}

kj::Promise<leader::LeaderInfo> LeaderClient::leaderAbove(uint64_t epoch) {
  noteObstacle("the leadership has not moved above epoch " + std::to_string(epoch));
  if (!retrieval_) {
    auto backoff =
        std::make_shared<ExponentialBackoff>(options_.backoffInitial, options_.backoffMax);
    return pollLeaderAbove(epoch, backoff);
  }
  waitingAbove_ = epoch;
  auto paf = kj::newPromiseAndFulfiller<leader::LeaderInfo>();
  above_ = kj::mv(paf.fulfiller);
  if (watched_ && watched_->epoch > epoch) above_->fulfill(leader::LeaderInfo(*watched_));
  return kj::mv(paf.promise);
}

kj::Promise<leader::LeaderInfo> LeaderClient::pollLeaderAbove(
    uint64_t epoch, std::shared_ptr<ExponentialBackoff> backoff) {
  known_.reset();
  return askMaster().then(
      [this, epoch, backoff](std::optional<leader::LeaderInfo> leader)
          -> kj::Promise<leader::LeaderInfo> {
        if (leader && leader->epoch > epoch) return kj::mv(*leader);
        if (leader) {
          noteObstacle("the leadership has not moved above epoch " + std::to_string(epoch) +
                       " (the master at " + masterAddress_ + " names epoch " +
                       std::to_string(leader->epoch) + ")");
        }
        return timer_.afterDelay(backoff->next().count() * kj::MILLISECONDS)
            .then([this, epoch, backoff]() { return pollLeaderAbove(epoch, backoff); });
      });
}

void LeaderClient::leaderChanged(const std::optional<leader::LeaderInfo>& leader) {
  const uint64_t previousEpoch = watched_ ? watched_->epoch : 0;
  watched_ = leader;
  if (!leader) {
    known_.reset();
    noteObstacle("no master leads " + options_.clusterName, true);
    return;
  }
  if (!leader->rpcAddress.empty() && (!known_ || leader->epoch >= known_->epoch)) {
    known_ = leader;
  }
  if (above_ && above_->isWaiting() && leader->epoch > waitingAbove_) {
    above_->fulfill(leader::LeaderInfo(*leader));
  }
  if (leader->epoch != previousEpoch) {
    ++leaderMoves_;
    leaderMoved_.wakeAll();
  }
}

void LeaderClient::connectionChanged(bool connected) {
  if (!connected) {
    noteObstacle("lost the connection to ZooKeeper while following the leader of " +
                 options_.clusterName);
  }
}

}  // namespace regent::client

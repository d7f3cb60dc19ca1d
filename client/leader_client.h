// The follow-the-leader client: finds the leading master (leader retrieval, or one master asked
// over RPC), keeps an RPC connection to it, and runs calls against the leader's epoch, retrying
// them per the one classification of failures (rpc/failure.h) until a deadline. Used by
// regentctl's jobs commands; meant for any process that calls the leader (workers too).
#pragma once

#include <kj/async.h>
#include <kj/async-io.h>
#include <kj/timer.h>

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/backoff.h"
#include "common/result.h"
#include "common/task_set_error_logger.h"
#include "common/time.h"
#include "common/wakeable_delay.h"
#include "leader/leader_info.h"
#include "leader/leader_retrieval.h"
#include "rpc/auth_config.h"
#include "rpc/auth_session.h"
#include "rpc/call_deadline.h"
#include "rpc/failure.h"
#include "rpc/rpc_client.h"
#include "rpc/rpc_options.h"
#include "rpc/schema/gateways.capnp.h"

namespace regent::client {

struct LeaderClientOptions {
  rpc::RpcOptions rpc;  // The connection, and callTimeout: the deadline of each RPC.
  // The wait between attempts: ExponentialBackoff(backoffInitial, backoffMax); an unavailable
  // leader's retryAfterMs is honoured up to backoffMax.
  Duration backoffInitial{50};
  Duration backoffMax{1000};
  // Names the cluster in obstacles ("no master leads cluster \"default\"").
  std::string clusterName = "the cluster";
  // The shared-secret credential (rpc.credential.*): when set, every new connection to a master
  // runs authChallenge + authenticate before the call, checks the master's proof, and calls
  // through the bootstrap restricted to the credential's role. A master that asks for no
  // credential, or whose proof does not verify, is refused (see LeaderClient).
  std::optional<rpc::ClientCredential> credential;
  // How long the RPC connection to a leader the client moved away from stays open (0: closed at
  // once). Capabilities obtained over it keep working until then: a worker's TaskExecutorGateway,
  // exported on that connection, stays reachable so that the deposed leader's late calls reach
  // the worker's epoch gate and are refused with the new epoch instead of failing on a closed
  // connection. Each move starts its own wait; the wait ends early when that connection ends
  // (the leader is gone, or closed it because its term is over: a master does so for the
  // workers registered in a term that ended) or was not up at the move, and is then not dialled
  // again. The client's destruction closes them all.
  Duration previousLeaderLinger{0};
};

// Where the client learns who leads: a LeaderRetrieval it follows (ZooKeeper, or the standalone
// record), or one master's address, asked with MasterBootstrap.leaderInfo (a master that does
// not lead names the leader it knows of, which the client then calls; it is asked over a
// connection of its own, so that asking never closes the connection to the leader).
//
// call(fn, timeout) repeats, until `timeout` has passed: find the leader (the last one known
// while no failure said otherwise), connect to its rpc address, get its MasterBootstrap, and
// run `fn` with it and the leader's record (whose epoch fn sends). Each RPC is bounded by
// rpc.callTimeout. After a failure classified kResolveAgain the next attempt reads the leader
// again; after kBackOff it retries the same leader; both wait the backoff first, except that,
// following a retrieval, a leader of another epoch reported by its watch ends every wait at once
// (a worker whose leader died calls the next one when it is elected, not when its backoff,
// grown while the old session expired, runs out). A kFatal
// Failure ends the call with Error::fatal(rpc::CallFailure::describe()); a kFatal exception is
// rethrown. Exceptions `fn` throws are classified the same way. A leader that cannot be read for
// good (the retrieval's fatal error, such as ZNOAUTH: a credential that may not read the
// cluster) ends the call at once with Error::fatal naming it, and lastCallFailedToFindLeader()
// is then true. When `timeout` passes, the call ends with Error::retryable naming the last
// obstacle (the last cause a failed attempt gave, such as a refused connection; or, before any
// attempt failed, the step still waiting for an answer), and lastObstacleWasNoLeader() tells
// whether that was "no master leads".
//
// The master proves itself (docs/security.md, "Chain of trust"). With a credential, `fn` gets
// only a bootstrap whose master proved it holds the credential's secret on that connection: a
// master that asks for no credential, or whose serverProof does not verify, is refused
// (rpc::MasterRefusal: logged as a warning naming its address, counted in mastersRefused(),
// noted as the obstacle) and the attempt classified kResolveAgain: the leader is read again after
// the backoff, never called through that connection. The master's own refusal of the credential
// (Failure.unauthenticated) ends the call as a kFatal Failure, but the next call reads the leader
// again too: nothing a master that did not prove itself said is kept. Over TLS (rpc.tls.ca) the
// handshake has verified the master's certificate before any of this.
//
// Following a retrieval, its watch keeps the known leader current between calls, so a
// long-running process (a worker) calls a new leader on its next attempt without a failure
// first. Several calls may run at once; they share the known leader and the connection.
//
// Thread-safety: loop-thread only. `network` and `timer` (and whatever the retrieval runs on,
// such as the ZooKeeper client) must outlive the client. Promises it returns must be dropped
// before it is destroyed; destroying it stops the retrieval and closes the RPC connection.
class LeaderClient final : private leader::LeaderRetrievalListener {
 public:
  // What one attempt does once the leader's bootstrap is at hand.
  template <typename T>
  using Fn = std::function<kj::Promise<rpc::Attempt<T>>(wire::MasterBootstrap::Client,
                                                   const leader::LeaderInfo& leader)>;

  // Follows `retrieval`, which it starts with itself as the listener.
  LeaderClient(kj::Network& network, kj::Timer& timer, kj::Own<leader::LeaderRetrieval> retrieval,
               LeaderClientOptions options);
  // Asks the master at `masterAddress` (host:port) who leads.
  LeaderClient(kj::Network& network, kj::Timer& timer, std::string masterAddress,
               LeaderClientOptions options);
  ~LeaderClient() noexcept override;
  LeaderClient(const LeaderClient&) = delete;
  LeaderClient& operator=(const LeaderClient&) = delete;

  template <typename T>
  kj::Promise<Result<T>> call(Fn<T> fn, Duration timeout) {
    auto value = std::make_shared<std::optional<T>>();
    return run(
               [fn = std::move(fn), value](wire::MasterBootstrap::Client bootstrap,
                                           const leader::LeaderInfo& leader) {
                 return fn(kj::mv(bootstrap), leader)
                     .then([value](rpc::Attempt<T>&& attempt) -> std::optional<rpc::CallFailure> {
                       if (auto* failure = std::get_if<rpc::CallFailure>(&attempt)) {
                         return std::move(*failure);
                       }
                       value->emplace(std::get<T>(std::move(attempt)));
                       return std::nullopt;
                     });
               },
               timeout)
        .then([value](Status status) -> Result<T> {
          if (!status.ok()) return status.error();
          return std::move(**value);
        });
  }

  // Resolves with the first leader seen whose epoch is above `epoch` (following: from the
  // retrieval's watch; with a master address: asking it after each backoff). Never rejects on
  // its own; bound it with a timeout. One wait at a time.
  kj::Promise<leader::LeaderInfo> leaderAbove(uint64_t epoch);

  // The last reason an attempt did not succeed ("" before any), for a give-up message.
  const std::string& lastObstacle() const { return lastObstacle_; }
  bool lastObstacleWasNoLeader() const { return lastWasNoLeader_; }
  // Whether the last call that ended with a fatal error ended because the leader could not be
  // read (not because the leader refused the request).
  bool lastCallFailedToFindLeader() const { return failedToFindLeader_; }
  // Whether the connection to a leader the client moved away from still lingers
  // (previousLeaderLinger).
  bool lingering() { return !lingering_.isEmpty(); }
  // The deadline every RPC of the client gets (rpc.callTimeout).
  const rpc::CallDeadline& deadline() const { return deadline_; }
  // The master asked who leads; "" when following a retrieval.
  const std::string& masterAddress() const { return masterAddress_; }
  // Masters this client refused for not proving themselves, by reason, since it was made.
  uint64_t mastersRefused(rpc::MasterRefusal reason) const {
    return mastersRefused_[static_cast<size_t>(reason)];
  }

 private:
  // One attempt's work, type-erased: nullopt on success.
  using ErasedFn = std::function<kj::Promise<std::optional<rpc::CallFailure>>(
      wire::MasterBootstrap::Client, const leader::LeaderInfo&)>;
  struct Call;

  kj::Promise<Status> run(ErasedFn fn, Duration timeout);
  kj::Promise<Status> attemptLoop(std::shared_ptr<Call> call);
  // `delay`, ended early (following) when the watch reports a leader of another epoch; none at
  // all when it did so since `movesBefore` (leaderMoves_ when the failed attempt began).
  kj::Promise<void> backoffWait(Duration delay, uint64_t movesBefore);
  // nullopt: retry (the obstacle is noted); else the call's end.
  kj::Promise<std::optional<Status>> attemptOnce(Call& call);
  // The leader to call: the known one, or read / asked anew. Notes the obstacle on nullopt; an
  // error is a fatal one that ends the call.
  kj::Promise<Result<std::optional<leader::LeaderInfo>>> resolve();
  kj::Promise<std::optional<leader::LeaderInfo>> askMaster();
  // The connection askMaster() uses: client_ while it is at the master's address (or none
  // exists yet), else asking_, so that asking never moves client_ away from the leader.
  rpc::RpcClient& askingClient();
  // `bootstrap` as options_.credential's role: itself without a credential; else the
  // authenticated bootstrap, the master's refusal (a fatal CallFailure) or this client's refusal
  // of the master (rpc::authenticateBootstrap). Authenticates once per connection. `where` names
  // the master in a refusal. Once authenticated it releases the connection's bootstrap
  // (RpcClient::releaseBootstrap): later calls use currentAuthenticated() and ask for none.
  kj::Promise<rpc::ProvenBootstrap> authenticated(wire::MasterBootstrap::Client bootstrap,
                                                  const std::string& where);
  // The authenticated bootstrap of client_'s current connection, if it is connected and
  // authenticated.
  kj::Maybe<wire::MasterBootstrap::Client&> currentAuthenticated();
  // An attempt that ended with `failure` (of the leader `where`): the call's end when kFatal,
  // else nullopt (retry) with the obstacle noted.
  std::optional<Status> afterFailure(Call& call, rpc::CallFailure failure,
                                     const std::string& where);
  // An attempt whose master did not prove itself: counted, logged, noted; nullopt (retry).
  std::optional<Status> refuseMaster(const rpc::RefusedMaster& refused);
  void connectTo(const std::string& address);
  void noteObstacle(std::string obstacle, bool noLeader = false);
  // What a give-up says: the last obstacle, else the step still waiting, else "no answer".
  std::string giveUpReason() const;
  // Why the RPC client has no connection now (a refused or failed connect, a lost connection),
  // or "" while connected or before any failure: the cause a timed-out bootstrap hides. `asking`:
  // of askMaster()'s own connection when it has one.
  std::string connectionProblem(bool asking = false) const;
  std::string withConnectionProblem(std::string obstacle, bool asking = false) const;
  kj::Promise<leader::LeaderInfo> pollLeaderAbove(uint64_t epoch,
                                                  std::shared_ptr<ExponentialBackoff> backoff);

  // leader::LeaderRetrievalListener.
  void leaderChanged(const std::optional<leader::LeaderInfo>& leader) override;
  void connectionChanged(bool connected) override;

  kj::Network& network_;
  kj::Timer& timer_;
  kj::Own<leader::LeaderRetrieval> retrieval_;  // Following; null with a master address.
  const std::string masterAddress_;               // Direct.
  const LeaderClientOptions options_;
  const rpc::CallDeadline deadline_;
  std::optional<leader::LeaderInfo> known_;  // The leader to call while nothing says otherwise.
  std::optional<leader::LeaderInfo> watched_;  // The retrieval's latest view (following).
  std::string lastObstacle_;
  bool lastWasNoLeader_ = false;
  bool failedToFindLeader_ = false;
  std::string waitingFor_;  // The step in flight ("MasterBootstrap.bootstrap from ..."), or "".
  // leaderAbove(): the epoch waited past and who waits.
  uint64_t waitingAbove_ = 0;
  kj::Own<kj::PromiseFulfiller<leader::LeaderInfo>> above_;
  // Calls waiting out a backoff, woken (following) by a leader of another epoch, and how often
  // the watch reported one.
  WakeableDelay leaderMoved_{timer_};
  uint64_t leaderMoves_ = 0;
  kj::Own<rpc::RpcClient> client_;
  // With a master address that does not lead: the connection to it for leaderInfo.
  kj::Own<rpc::RpcClient> asking_;
  // Connections to previous leaders, each closed when its previousLeaderLinger wait ends.
  TaskSetErrorLogger lingerErrors_{"leader client", spdlog::level::debug};
  kj::TaskSet lingering_{lingerErrors_};
  // client_'s number: a client made when the previous one lingers counts its connections from
  // 1 again, so a cached bootstrap names the client it came from too.
  uint64_t clientGeneration_ = 0;
  std::array<uint64_t, rpc::kMasterRefusalCount> mastersRefused_{};
  // The authenticated bootstrap of the connection numbered `authenticatedOn_`
  // (RpcClient::connectionsEstablished) to `authenticatedAt_` of client number
  // `authenticatedGeneration_`.
  kj::Maybe<wire::MasterBootstrap::Client> authenticated_;
  uint64_t authenticatedOn_ = 0;
  std::string authenticatedAt_;
  uint64_t authenticatedGeneration_ = 0;
};

}  // namespace regent::client

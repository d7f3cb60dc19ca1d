// MasterBootstrap (rpc/schema/gateways.capnp): the unfenced capability every master serves,
// leader or standby. It says who leads as this master believes, hands over on request, hands
// out the current term's fenced Dispatcher, ResourceManager and JobMaster gateways, and
// authenticates the connection when the master requires it (docs/security.md).
#pragma once

#include <kj/async.h>

#include <cstdint>
#include <optional>

#include "leader/leader_info.h"
#include "rpc/auth_roles.h"
#include "rpc/auth_session.h"
#include "rpc/fenced_endpoint.h"
#include "rpc/rpc_server.h"
#include "rpc/schema/gateways.capnp.h"
#include "services/master/leader_term.h"
#include "services/resourcemanager/worker_binding.h"

namespace regent::master {

// What the bootstrap asks of its master. Loop-thread only.
class MasterBootstrapHost {
 public:
  virtual ~MasterBootstrapHost() = default;
  virtual const leader::ContenderInfo& self() const = 0;
  // The leader as this master believes (its own term while it leads).
  virtual std::optional<leader::LeaderInfo> knownLeader() const = 0;
  // The epoch this master leads, 0 when it does not.
  virtual uint64_t leadingEpoch() const = 0;
  // The current term's gateway, or nullptr while the term's stores are still opening.
  virtual kj::Maybe<wire::DispatcherGateway::Client> dispatcherGateway() = 0;
  // The current term's ResourceManager gateway for the connection whose worker identity is
  // `caller` (LeaderTerm::resourceManagerGateway), or nullptr while the term has none yet (and
  // always for a host that runs no ResourceManager, the default).
  virtual kj::Maybe<wire::ResourceManagerGateway::Client> resourceManagerGateway(
      kj::Own<resourcemanager::WorkerBinding> /*caller*/) {
    return nullptr;
  }
  // The current term's gateway of `job`'s JobMaster for `caller`'s connection
  // (LeaderTerm::jobMaster): not ready while the term's stores open or it recovers (and always
  // for a host that runs no JobMasters, the default); ready without a gateway when the term runs
  // no JobMaster for `job`.
  virtual LeaderTerm::JobMasterLookup jobMaster(
      const JobId&, kj::Own<resourcemanager::WorkerBinding> /*caller*/) {
    return {};
  }
  // Resolves when the current term is ready (LeaderTerm::whenReady), when it ends, or after a
  // bound the host chooses (MasterProcess: jobMasterReadyWait), whichever comes first; never
  // rejects. MasterBootstrap.jobMaster waits on it instead of answering `unavailable` at once, so
  // that the workers' offers after a failover reach the JobMasters the moment recovery ends
  // rather than after a retry delay. The default resolves at once.
  virtual kj::Promise<void> whenTermReady() { return kj::READY_NOW; }
  // Graceful hand-over without exiting; resolves ok once the `leader` node is gone, with an
  // error saying what happened when the hand-over did not apply (LeaderElection::handOver).
  virtual kj::Promise<Status> handOverForCaller() = 0;
};

// The bootstrap's epoch rule: the epoch this master leads at the time of the call. A standby
// answers `notLeader` (naming the leader it knows of, "master M does not lead; the leader is ...");
// a leader refuses another epoch with `fencing` ("called with epoch R, this master leads epoch
// E"). `host` must outlive the rule.
class LeadingEpoch final : public rpc::EpochRule {
 public:
  explicit LeadingEpoch(const MasterBootstrapHost& host) : host_(host) {}
  bool admits(uint64_t received) override;
  void refuse(const std::string& method, uint64_t received,
              wire::Failure::Builder failure) override;

 private:
  const MasterBootstrapHost& host_;
};

// What a connection's bootstrap needs to authenticate it: its authenticator and the counters
// the bootstraps it hands out after authentication use.
struct ConnectionAuth {
  kj::Own<rpc::ConnectionAuthenticator> authenticator;
  rpc::FencingCounters& fencingCounters;
  rpc::AuthCounters& authCounters;
};

// The bootstrap's handlers. Serve it only through serveMasterBootstrap() or
// serveMasterBootstrapFor(), whose fenced endpoint checks every epoch before a handler runs.
// `host` must outlive it. Without a ConnectionAuth, authChallenge says authentication is not
// required and authenticate answers `unauthenticated`. `caller` is the worker identity of the
// connection it serves (docs/security.md, "Worker identity"): every ResourceManager and
// JobMaster gateway it hands out speaks for that worker only, and so do those of the bootstrap
// authenticate answers.
class MasterBootstrapServer final : public wire::MasterBootstrap::Server {
 public:
  MasterBootstrapServer(MasterBootstrapHost& host, kj::Own<resourcemanager::WorkerBinding> caller)
      : host_(host), caller_(kj::mv(caller)) {}
  MasterBootstrapServer(MasterBootstrapHost& host, ConnectionAuth auth,
                        kj::Own<resourcemanager::WorkerBinding> caller)
      : host_(host), auth_(kj::mv(auth)), caller_(kj::mv(caller)) {}

  kj::Promise<void> leaderInfo(LeaderInfoContext context) override;
  kj::Promise<void> handOver(HandOverContext context) override;
  kj::Promise<void> dispatcher(DispatcherContext context) override;
  kj::Promise<void> resourceManager(ResourceManagerContext context) override;
  // notFound for a job the term runs no JobMaster for (unknown, ended, released). While the
  // term is not ready the answer waits for host.whenTermReady(); unavailable when the term is
  // still not ready then, or no longer leads the caller's epoch.
  kj::Promise<void> jobMaster(JobMasterContext context) override;
  kj::Promise<void> authChallenge(AuthChallengeContext context) override;
  kj::Promise<void> authenticate(AuthenticateContext context) override;

 private:
  // Fills jobMaster's results from `lookup` (host.jobMaster() of the caller's job).
  void answerJobMaster(JobMasterContext& context, LeaderTerm::JobMasterLookup lookup);
  MasterBootstrapHost& host_;
  kj::Maybe<ConnectionAuth> auth_;
  kj::Own<resourcemanager::WorkerBinding> caller_;
};

// The bootstrap every master serves: MasterBootstrapServer behind the fenced endpoint with the
// LeadingEpoch rule (leaderInfo carries no epoch and passes), with a worker identity of its own
// (one bootstrap, one connection). Calls and refusals count in `counters`. `host` and `counters` must outlive it and every connection serving it.
wire::MasterBootstrap::Client serveMasterBootstrap(MasterBootstrapHost& host,
                                                  rpc::FencingCounters& counters);

// The bootstrap of one accepted connection (the RpcServer's bootstrap factory), with the
// connection's worker identity (unbound until the connection registers a worker, whatever roles
// it holds; shared by the bootstrap authenticate answers, and kept in `peer.bootstrapState` so
// that a bootstrap the connection asks for again shares it too). When `settings`
// requires no authentication it is serveMasterBootstrap()'s, with every role. Otherwise it is
// restricted (rpc::restrictToRoles) to the role the peer's verified certificate maps to
// (rpc.auth-tls.*-names; the gate is marked authenticated at once), or to no role at all:
// leaderInfo, authChallenge and authenticate only, everything else refused with
// `unauthenticated`. A successful authenticate marks `peer.gate` and answers a bootstrap
// restricted to the proven role; the Dispatcher, ResourceManager and JobMaster gateways it hands out are
// restricted the same way and still revoked with their term. `host`, `fencingCounters`, `settings` and `authCounters` must
// outlive the connection and every capability handed out on it.
wire::MasterBootstrap::Client serveMasterBootstrapFor(MasterBootstrapHost& host,
                                                     rpc::FencingCounters& fencingCounters,
                                                     const rpc::ServerAuthSettings& settings,
                                                     rpc::AuthCounters& authCounters,
                                                     const rpc::RpcPeer& peer);

void toWire(const leader::LeaderInfo& info, wire::LeaderInfo::Builder out);
void toWire(const leader::ContenderInfo& info, wire::ContenderInfo::Builder out);

}  // namespace regent::master

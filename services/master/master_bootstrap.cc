// MasterBootstrap: leaderInfo, handOver, dispatcher, resourceManager and jobMaster, answered from the
// master's own view, its epoch rule, and the authentication of a connection.
#include "services/master/master_bootstrap.h"

#include <capnp/message.h>

#include <string>

#include "rpc/failure.h"
#include "rpc/wire_ids.h"

namespace regent::master {

void toWire(const leader::LeaderInfo& info, wire::LeaderInfo::Builder out) {
  out.setEpoch(info.epoch);
  out.setMasterId(info.masterId);
  out.setRpcAddress(info.rpcAddress);
  out.setHttpAddress(info.httpAddress);
  out.setHost(info.host);
  out.setPid(static_cast<uint32_t>(info.pid));
  out.setElectedAtMs(info.electedAtMs);
  out.setStatus(info.status == leader::LeaderStatus::kServing ? wire::LeaderStatus::SERVING
                                                              : wire::LeaderStatus::RECOVERING);
}

void toWire(const leader::ContenderInfo& info, wire::ContenderInfo::Builder out) {
  out.setMasterId(info.masterId);
  out.setRpcAddress(info.rpcAddress);
  out.setHttpAddress(info.httpAddress);
  out.setHost(info.host);
  out.setPid(static_cast<uint32_t>(info.pid));
  out.setVersion(info.version);
  out.setStartedAtMs(info.startedAtMs);
}

kj::Promise<void> MasterBootstrapServer::leaderInfo(LeaderInfoContext context) {
  auto results = context.getResults();
  const auto leader = host_.knownLeader();
  if (leader) {
    toWire(*leader, results.initLeader().initLeader());
  } else {
    results.initLeader().setUnknown();
  }
  toWire(host_.self(), results.initContender());
  results.setLeading(host_.leadingEpoch() != 0 && leader &&
                     leader->epoch == host_.leadingEpoch());
  return kj::READY_NOW;
}

bool LeadingEpoch::admits(uint64_t received) {
  const uint64_t leading = host_.leadingEpoch();
  return leading != 0 && received == leading;
}

void LeadingEpoch::refuse(const std::string&, uint64_t received, wire::Failure::Builder failure) {
  const uint64_t leading = host_.leadingEpoch();
  if (leading == 0) {
    const auto leader = host_.knownLeader();
    std::string message = "master " + host_.self().masterId + " does not lead";
    if (leader) {
      message += "; the leader is " + leader->masterId + " at " + leader->rpcAddress +
                 " (epoch " + std::to_string(leader->epoch) + ")";
      toWire(*leader, rpc::failures::notLeader(failure, message));
    } else {
      rpc::failures::notLeaderUnknown(failure, message + "; no leader is known right now");
    }
    return;
  }
  rpc::failures::fencing(failure, leading, received,
                         "called with epoch " + std::to_string(received) +
                             ", this master leads epoch " + std::to_string(leading));
}

wire::MasterBootstrap::Client serveMasterBootstrap(MasterBootstrapHost& host,
                                                  rpc::FencingCounters& counters) {
  return rpc::fencedEndpoint<wire::MasterBootstrap>(
      kj::heap<MasterBootstrapServer>(host,
                                      kj::refcounted<resourcemanager::WorkerBinding>("in process")),
      kj::heap<LeadingEpoch>(host), counters);
}

namespace {

// The connection's bootstrap with `roles`: unrestricted when the master requires no
// authentication.
wire::MasterBootstrap::Client bootstrapWithRoles(MasterBootstrapHost& host,
                                                 rpc::FencingCounters& fencingCounters,
                                                 rpc::AuthCounters& authCounters,
                                                 kj::Own<rpc::ConnectionAuthenticator> authenticator,
                                                 kj::Own<resourcemanager::WorkerBinding> caller,
                                                 rpc::RoleSet roles) {
  const bool required = authenticator->settings().required;
  auto fenced = rpc::fencedEndpoint<wire::MasterBootstrap>(
      kj::heap<MasterBootstrapServer>(
          host, ConnectionAuth{kj::mv(authenticator), fencingCounters, authCounters},
          kj::mv(caller)),
      kj::heap<LeadingEpoch>(host), fencingCounters);
  if (!required) return fenced;
  return rpc::restrictToRoles(kj::mv(fenced), roles, authCounters);
}

// What a connection keeps across its Bootstrap requests (RpcPeer::bootstrapState): its worker
// identity and the roles it held at connect, worked out (and counted, and logged) once.
struct ConnectionBootstrapState final : public kj::Refcounted {
  ConnectionBootstrapState(kj::Own<resourcemanager::WorkerBinding> binding, rpc::RoleSet roles)
      : binding(kj::mv(binding)), roles(roles) {}
  kj::Own<resourcemanager::WorkerBinding> binding;
  const rpc::RoleSet roles;
};

}  // namespace

wire::MasterBootstrap::Client serveMasterBootstrapFor(MasterBootstrapHost& host,
                                                     rpc::FencingCounters& fencingCounters,
                                                     const rpc::ServerAuthSettings& settings,
                                                     rpc::AuthCounters& authCounters,
                                                     const rpc::RpcPeer& peer) {
  auto authenticator = kj::refcounted<rpc::ConnectionAuthenticator>(
      settings, authCounters, peer.address, kj::addRef(*peer.gate));
  // One worker identity per connection, also when it asks for its bootstrap again (the server
  // keeps none of them, rpc/rpc_server.h).
  if (!peer.bootstrapState) {
    const rpc::RoleSet roles = authenticator->rolesAtConnect(peer.tlsCommonName);
    peer.bootstrapState = kj::refcounted<ConnectionBootstrapState>(
        kj::refcounted<resourcemanager::WorkerBinding>(peer.address, peer.tlsCommonName,
                                                       kj::addRef(*peer.gate)),
        roles);
  }
  auto& state = kj::downcast<ConnectionBootstrapState>(*peer.bootstrapState);
  return bootstrapWithRoles(host, fencingCounters, authCounters, kj::mv(authenticator),
                            kj::addRef(*state.binding), state.roles);
}

kj::Promise<void> MasterBootstrapServer::authChallenge(AuthChallengeContext context) {
  auto results = context.getResults();
  KJ_IF_MAYBE (auth, auth_) {
    const std::string nonce = auth->authenticator->challenge();
    results.setServerNonce(
        kj::arrayPtr(reinterpret_cast<const kj::byte*>(nonce.data()), nonce.size()));
    const auto& settings = auth->authenticator->settings();
    results.setRequired(settings.required);
    auto mechanisms = results.initMechanisms((settings.secrets.empty() ? 0 : 1) +
                                             (settings.tlsNames.empty() ? 0 : 1));
    unsigned at = 0;
    if (!settings.secrets.empty()) mechanisms.set(at++, wire::AuthMechanism::SHARED_SECRET);
    if (!settings.tlsNames.empty()) mechanisms.set(at++, wire::AuthMechanism::TLS_CERTIFICATE);
  } else {
    results.setRequired(false);
  }
  return kj::READY_NOW;
}

kj::Promise<void> MasterBootstrapServer::authenticate(AuthenticateContext context) {
  auto params = context.getParams();
  const wire::Role role = params.getRole();
  const auto nonce = params.getClientNonce();
  const auto proof = params.getProof();
  auto results = context.getResults();
  KJ_IF_MAYBE (auth, auth_) {
    auto proven = auth->authenticator->authenticate(
        role, std::string(reinterpret_cast<const char*>(nonce.begin()), nonce.size()),
        std::string(reinterpret_cast<const char*>(proof.begin()), proof.size()));
    if (!proven.ok()) {
      rpc::failures::unauthenticated(results.initFailure(), proven.error().message);
      return kj::READY_NOW;
    }
    const std::string& serverProof = proven.value();
    results.setServerProof(
        kj::arrayPtr(reinterpret_cast<const kj::byte*>(serverProof.data()), serverProof.size()));
    results.setBootstrap(bootstrapWithRoles(host_, auth->fencingCounters, auth->authCounters,
                                            kj::addRef(*auth->authenticator),
                                            kj::addRef(*caller_), rpc::RoleSet::of(role)));
  } else {
    rpc::failures::unauthenticated(results.initFailure(),
                                   "this master requires no authentication");
  }
  return kj::READY_NOW;
}

kj::Promise<void> MasterBootstrapServer::handOver(HandOverContext context) {
  return host_.handOverForCaller().then([context](Status handedOver) mutable {
    if (handedOver.ok()) return;
    // The term has ended here all the same; the caller must not read this as a move.
    rpc::failures::failedPrecondition(
        context.getResults().initFailure(),
        "the hand-over of epoch " + std::to_string(context.getParams().getEpoch()) +
            " did not apply: " + handedOver.error().message);
  });
}

kj::Promise<void> MasterBootstrapServer::dispatcher(DispatcherContext context) {
  const uint64_t epoch = context.getParams().getEpoch();
  KJ_IF_MAYBE (gateway, host_.dispatcherGateway()) {
    context.getResults().setDispatcher(*gateway);
  } else {
    rpc::failures::unavailable(context.getResults().initFailure(), 500,
                               "the leader of epoch " + std::to_string(epoch) +
                                   " is still opening its stores; retry shortly");
  }
  return kj::READY_NOW;
}

kj::Promise<void> MasterBootstrapServer::resourceManager(ResourceManagerContext context) {
  const uint64_t epoch = context.getParams().getEpoch();
  KJ_IF_MAYBE (gateway, host_.resourceManagerGateway(kj::addRef(*caller_))) {
    context.getResults().setResourceManager(*gateway);
  } else {
    rpc::failures::unavailable(context.getResults().initFailure(), rpc::kNotReadyRetryMs,
                               "the leader of epoch " + std::to_string(epoch) +
                                   " has not started its resource manager yet; retry shortly");
  }
  return kj::READY_NOW;
}

kj::Promise<void> MasterBootstrapServer::jobMaster(JobMasterContext context) {
  const auto job = wire::idFromWire<JobId>(context.getParams().getJobId());
  LeaderTerm::JobMasterLookup lookup = host_.jobMaster(job, kj::addRef(*caller_));
  if (lookup.ready) {
    answerJobMaster(context, kj::mv(lookup));
    return kj::READY_NOW;
  }
  // Right after a grant the workers ask before the Dispatcher recovered: answer once it has.
  return host_.whenTermReady().then([this, context, job]() mutable {
    const uint64_t epoch = context.getParams().getEpoch();
    if (host_.leadingEpoch() != epoch) {
      // The term the caller asked for ended while the call waited.
      rpc::failures::unavailable(context.getResults().initFailure(), rpc::kNotReadyRetryMs,
                                 "the leader of epoch " + std::to_string(epoch) +
                                     " no longer leads; find the leader again");
      return;
    }
    answerJobMaster(context, host_.jobMaster(job, kj::addRef(*caller_)));
  });
}

void MasterBootstrapServer::answerJobMaster(JobMasterContext& context,
                                            LeaderTerm::JobMasterLookup lookup) {
  auto params = context.getParams();
  const uint64_t epoch = params.getEpoch();
  const auto job = wire::idFromWire<JobId>(params.getJobId());
  auto results = context.getResults();
  if (!lookup.ready) {
    rpc::failures::unavailable(results.initFailure(), rpc::kNotReadyRetryMs,
                               "the leader of epoch " + std::to_string(epoch) +
                                   " is still recovering its jobs; retry shortly");
    return;
  }
  KJ_IF_MAYBE (gateway, lookup.gateway) {
    results.setJobMaster(kj::mv(*gateway));
  } else {
    rpc::failures::notFound(results.initFailure(), job,
                            "job " + job.toHex() + " is not running under the leader of epoch " +
                                std::to_string(epoch));
  }
}

}  // namespace regent::master

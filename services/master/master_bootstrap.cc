// MasterBootstrap: leaderInfo, handOver and dispatcher, answered from the master's own view, and
// its epoch rule.
#include "services/master/master_bootstrap.h"

#include <capnp/message.h>

#include <string>

#include "rpc/failure.h"

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
  return rpc::fencedEndpoint<wire::MasterBootstrap>(kj::heap<MasterBootstrapServer>(host),
                                                    kj::heap<LeadingEpoch>(host), counters);
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

}  // namespace regent::master

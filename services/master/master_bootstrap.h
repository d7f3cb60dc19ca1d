// MasterBootstrap (rpc/schema/gateways.capnp): the unfenced capability every master serves,
// leader or standby. It says who leads as this master believes, hands over on request, and
// hands out the current term's fenced Dispatcher gateway.
#pragma once

#include <kj/async.h>

#include <cstdint>
#include <optional>

#include "leader/leader_info.h"
#include "rpc/fenced_endpoint.h"
#include "rpc/schema/gateways.capnp.h"

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

// The bootstrap's handlers. Serve it only through serveMasterBootstrap(), whose fenced endpoint
// checks every epoch before a handler runs. `host` must outlive it.
class MasterBootstrapServer final : public wire::MasterBootstrap::Server {
 public:
  explicit MasterBootstrapServer(MasterBootstrapHost& host) : host_(host) {}

  kj::Promise<void> leaderInfo(LeaderInfoContext context) override;
  kj::Promise<void> handOver(HandOverContext context) override;
  kj::Promise<void> dispatcher(DispatcherContext context) override;

 private:
  MasterBootstrapHost& host_;
};

// The bootstrap every master serves: MasterBootstrapServer behind the fenced endpoint with the
// LeadingEpoch rule (leaderInfo carries no epoch and passes). Calls and refusals count in
// `counters`. `host` and `counters` must outlive it and every connection serving it.
wire::MasterBootstrap::Client serveMasterBootstrap(MasterBootstrapHost& host,
                                                  rpc::FencingCounters& counters);

void toWire(const leader::LeaderInfo& info, wire::LeaderInfo::Builder out);
void toWire(const leader::ContenderInfo& info, wire::ContenderInfo::Builder out);

}  // namespace regent::master

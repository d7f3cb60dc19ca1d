// Chooses the election and retrieval implementations from the HA mode: an owning pointer or an
// error, never a half-built object (docs/leader-election.md).
#pragma once

#include <kj/memory.h>

#include "common/result.h"
#include "ha/ha_services.h"
#include "leader/leader_election.h"
#include "leader/leader_info.h"
#include "leader/leader_retrieval.h"

namespace regent {
class Config;
class EventLoop;
}  // namespace regent

namespace regent::leader {

// zookeeper mode: ZooKeeperLeaderElection over ha.zooKeeper(); standalone: a
// StandaloneLeaderElection whose epoch lives in `ha.standalone.epoch-file` (and the leader
// record, built from `self`, next to it). `loop`, `config`
// and `ha` must outlive the election.
Result<kj::Own<LeaderElection>> createLeaderElection(EventLoop& loop, const Config& config,
                                                     ha::HaServices& ha, ContenderInfo self);

// zookeeper mode: ZooKeeperLeaderRetrieval; standalone: the standalone leader record, or the
// configured master as leader until there is one.
Result<kj::Own<LeaderRetrieval>> createLeaderRetrieval(EventLoop& loop, const Config& config,
                                                       ha::HaServices& ha);

}  // namespace regent::leader

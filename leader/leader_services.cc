// The factories: ZooKeeper election and retrieval over the HA services' client, or the
// standalone ones over the epoch file.
#include "leader/leader_services.h"

#include "common/event_loop.h"
#include "common/units.h"
#include "conf/config.h"
#include "ha/zookeeper_client.h"
#include "leader/standalone_leader_election.h"
#include "leader/tcp_leader_liveness.h"
#include "leader/zookeeper_leader_election.h"
#include "leader/zookeeper_leader_retrieval.h"

namespace regent::leader {
namespace {

// The configured master, as standalone retrieval reports it until the master wrote the leader
// record of its term.
LeaderInfo standaloneLeaderFrom(const Config& config) {
  LeaderInfo leader;
  leader.masterId = "standalone";
  const std::string& advertised = config.getString("rpc.advertised-address");
  leader.rpcAddress = advertised.empty() ? config.getString("rpc.bind") : advertised;
  leader.httpAddress = config.getString("http.bind");
  size_t colon = leader.rpcAddress.rfind(':');
  leader.host = colon == std::string::npos ? leader.rpcAddress : leader.rpcAddress.substr(0, colon);
  leader.status = LeaderStatus::kServing;
  return leader;
}

Result<ha::ZooKeeperClient*> zooKeeperOf(ha::HaServices& ha) {
  ha::ZooKeeperClient* client = ha.zooKeeper();
  if (client == nullptr) {
    return Error::fatal("ha.mode is zookeeper but the HA services have no ZooKeeper client");
  }
  return client;
}

}  // namespace

Result<kj::Own<LeaderElection>> createLeaderElection(EventLoop& loop, const Config& config,
                                                     ha::HaServices& ha, ContenderInfo self) {
  if (ha.mode() == ha::HaMode::kStandalone) {
    return kj::Own<LeaderElection>(
        kj::heap<StandaloneLeaderElection>(loop, config.getString("ha.standalone.epoch-file"),
                                           std::move(self)));
  }
  auto client = zooKeeperOf(ha);
  if (!client) return client.error();
  ZooKeeperLeaderElectionOptions options;
  // "auto" (nullopt): a third of the negotiated session timeout; otherwise a duration the
  // configuration already checked.
  const std::string& tolerance = config.getString("ha.zookeeper.suspend-tolerance");
  options.suspendTolerance =
      tolerance == "auto" ? std::nullopt : std::optional<Duration>(parseDuration(tolerance).value());
  options.clusterRoot = ha::zooKeeperClientOptionsFrom(config).root;
  kj::Own<TcpLeaderLiveness> liveness;
  if (config.getBool("ha.fast-failover")) {
    liveness = kj::heap<TcpLeaderLiveness>(loop);
    options.liveness = liveness.get();
  }
  // The liveness is attached: it outlives the election.
  return kj::Own<LeaderElection>(
      kj::heap<ZooKeeperLeaderElection>(*client.value(), loop.timer(), std::move(self), options)
          .attach(kj::mv(liveness)));
}

Result<kj::Own<LeaderRetrieval>> createLeaderRetrieval(EventLoop& loop, const Config& config,
                                                       ha::HaServices& ha) {
  if (ha.mode() == ha::HaMode::kStandalone) {
    return kj::Own<LeaderRetrieval>(kj::heap<StandaloneLeaderRetrieval>(
        loop, standaloneLeaderFrom(config), config.getString("ha.standalone.epoch-file")));
  }
  auto client = zooKeeperOf(ha);
  if (!client) return client.error();
  return kj::Own<LeaderRetrieval>(
      kj::heap<ZooKeeperLeaderRetrieval>(*client.value(), loop.timer()));
}

}  // namespace regent::leader

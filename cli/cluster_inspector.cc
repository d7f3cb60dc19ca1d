// ClusterInspector (see cluster_inspector.h): regentctl's leader, leader --watch and masters.
#include "cli/cluster_inspector.h"

#include <csignal>
#include <ostream>
#include <utility>

#include "cli/regentctl_output.h"
#include "common/time.h"
#include "common/units.h"
#include "conf/config.h"
#include "leader/leader_services.h"

namespace regent::cli {

Result<kj::Own<ClusterInspector>> ClusterInspector::create(EventLoop& loop, const Config& config,
                                                           InspectorOutput output) {
  auto ha = ha::HaServices::create(loop, config, ha::HaServices::Identity::kReader);
  if (!ha.ok()) return Error::fatal(ha.error().message);
  auto retrieval = leader::createLeaderRetrieval(loop, config, *ha.value());
  if (!retrieval.ok()) return Error::fatal(retrieval.error().message);
  return kj::heap<ClusterInspector>(FactoryKey<ClusterInspector>(), loop, config, output,
                                    std::move(ha).value(), std::move(retrieval).value());
}

ClusterInspector::ClusterInspector(FactoryKey<ClusterInspector>, EventLoop& loop,
                                   const Config& config, InspectorOutput output,
                                   kj::Own<ha::HaServices> ha,
                                   kj::Own<leader::LeaderRetrieval> retrieval)
    : loop_(loop),
      config_(config),
      output_(output),
      ha_(std::move(ha)),
      retrieval_(kj::mv(retrieval)) {}

ClusterInspector::~ClusterInspector() noexcept = default;

std::string ClusterInspector::clusterName() const { return clusterNameOf(config_); }

kj::Promise<bool> ClusterInspector::connect() {
  return connectToZooKeeper(*ha_, config_, output_.err,
                            config_.getDuration("ha.zookeeper.connect-timeout"),
                            "ha.zookeeper.connect-timeout");
}

kj::Promise<bool> connectToZooKeeper(ha::HaServices& ha, const Config& config, std::ostream& err,
                                     Duration wait, std::string waitOption) {
  ha::ZooKeeperClient* zooKeeper = ha.zooKeeper();
  if (zooKeeper == nullptr) return true;
  return zooKeeper->waitConnected(wait).then(
      [&config, &err, wait, waitOption = std::move(waitOption)](Status connected) {
        if (connected.ok()) return true;
        err << "regentctl: cannot reach ZooKeeper at " << config.getString("ha.zookeeper.quorum")
            << ": " << connected.error().message << " (" << waitOption << " is "
            << formatDuration(wait) << ")" << std::endl;
        return false;
      });
}

std::string clusterNameOf(const Config& config) {
  return "cluster \"" + config.getString("cluster-id") + "\"";
}

kj::Promise<int> ClusterInspector::leader() {
  return connect().then([this](bool connected) -> kj::Promise<int> {
    if (!connected) return kExitError;
    return retrieval_->leaderRecord().then([this](Result<leader::LeaderRecordView> read) -> int {
      if (!read.ok()) {
        output_.err << "regentctl: cannot read the leader of " << clusterName() << ": "
                    << read.error().message << std::endl;
        return kExitError;
      }
      const auto& current = read.value().leader;
      const std::string& stale = read.value().staleReason;
      if (!current) {
        if (output_.json) output_.out << leaderJson(std::nullopt) << std::endl;
        output_.err << "regentctl: no master leads " << clusterName() << " right now"
                    << std::endl;
        return kExitNoLeader;
      }
      output_.out << (output_.json ? leaderJson(current, std::nullopt, stale) + "\n"
                                   : leaderText(*current))
                  << std::flush;
      if (stale.empty()) return kExitOk;
      // The record still says what it said, but no master leads behind it.
      output_.err << "regentctl: no master leads " << clusterName()
                  << " right now; the leader record above is stale: " << stale << std::endl;
      return kExitNoLeader;
    });
  });
}

kj::Promise<int> ClusterInspector::watchLeader() {
  return connect().then([this](bool connected) -> kj::Promise<int> {
    if (!connected) return kExitError;
    auto done = kj::newPromiseAndFulfiller<int>();
    watchDone_ = kj::mv(done.fulfiller);
    sigint_ = std::make_unique<SignalWatcher>(loop_, SIGINT, [this]() { stopWatching(); });
    sigterm_ = std::make_unique<SignalWatcher>(loop_, SIGTERM, [this]() { stopWatching(); });
    retrieval_->start(*this);
    return kj::mv(done.promise);
  });
}

void ClusterInspector::stopWatching() {
  if (watchDone_ && watchDone_->isWaiting()) watchDone_->fulfill(int(kExitOk));
}

void ClusterInspector::leaderChanged(const std::optional<leader::LeaderInfo>& leader) {
  const int64_t now = wallClockMillis();
  output_.out << (output_.json ? leaderJson(leader, now) : leaderWatchLine(leader, now))
              << std::endl;
}

void ClusterInspector::connectionChanged(bool connected) {
  if (connected) {
    output_.err << "regentctl: connected to ZooKeeper again" << std::endl;
  } else {
    output_.err << "regentctl: lost the connection to ZooKeeper at "
                << config_.getString("ha.zookeeper.quorum")
                << "; the leader shown may be stale until it is back" << std::endl;
  }
}

kj::Promise<int> ClusterInspector::masters() {
  return connect().then([this](bool connected) -> kj::Promise<int> {
    if (!connected) return kExitError;
    return retrieval_->contenders().then(
        [this](Result<std::vector<leader::ContenderEntry>> read) -> int {
          if (!read.ok()) {
            output_.err << "regentctl: cannot list the masters of " << clusterName() << ": "
                        << read.error().message << std::endl;
            return kExitError;
          }
          const auto& contenders = read.value();
          if (output_.json) {
            for (const auto& contender : contenders) {
              output_.out << contenderJson(contender) << "\n";
            }
            output_.out << std::flush;
          } else if (contenders.empty()) {
            output_.out << "no master is contending in " << clusterName() << std::endl;
          } else {
            output_.out << mastersTable(contenders) << std::flush;
          }
          return kExitOk;
        });
  });
}

}  // namespace regent::cli

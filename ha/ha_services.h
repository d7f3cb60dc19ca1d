// The HA services factory: what a process needs to coordinate with other processes,
// chosen from `ha.mode`. zookeeper: a ZooKeeperClient on the loop; standalone: nothing shared.
#pragma once

#include <memory>
#include <string>

#include "common/result.h"
#include "ha/ha_mode.h"
#include "ha/zookeeper_client.h"

namespace regent {
class Config;
class EventLoop;
}  // namespace regent

namespace regent::ha {

class HaServices final {
 public:
  enum class Identity {
    kWriter,  // masters and workers: ha.zookeeper.auth
    kReader,  // inspection tools: ha.zookeeper.read-auth if set, else ha.zookeeper.auth
  };

  // Builds the services for `config` and starts connecting (zookeeper mode). Fails only on
  // options the client rejects; an unreachable ZooKeeper is not an error here (see
  // ZooKeeperClient::waitConnected). `loop` must outlive the services.
  static Result<std::unique_ptr<HaServices>> create(EventLoop& loop, const Config& config,
                                                    Identity identity);

  HaMode mode() const { return mode_; }
  // The ZooKeeper client; nullptr in standalone mode.
  ZooKeeperClient* zooKeeper() { return client_.get(); }

 private:
  HaServices(HaMode mode, std::unique_ptr<ZooKeeperClient> client)
      : mode_(mode), client_(std::move(client)) {}

  HaMode mode_;
  std::unique_ptr<ZooKeeperClient> client_;
};

}  // namespace regent::ha

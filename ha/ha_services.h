// The HA services factory: what a process needs to coordinate with other processes,
// chosen from `ha.mode`. zookeeper: a ZooKeeperClient on the loop; standalone: nothing shared.
#pragma once

#include <kj/memory.h>

#include <string>

#include "common/factory_key.h"
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
  static Result<kj::Own<HaServices>> create(EventLoop& loop, const Config& config,
                                            Identity identity);

  HaMode mode() const { return mode_; }
  // The ZooKeeper client; nullptr in standalone mode.
  ZooKeeperClient* zooKeeper() { return client_.get(); }
  const ZooKeeperClient* zooKeeper() const { return client_.get(); }

  // Built by its factory only (FactoryKey).
  HaServices(FactoryKey<HaServices>, HaMode mode, kj::Own<ZooKeeperClient> client)
      : mode_(mode), client_(kj::mv(client)) {}

 private:
  HaMode mode_;
  kj::Own<ZooKeeperClient> client_;
};

}  // namespace regent::ha

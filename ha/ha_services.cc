// HaServices: builds the coordination services `ha.mode` asks for.
#include "ha/ha_services.h"

#include "conf/config.h"

namespace regent::ha {

Result<kj::Own<HaServices>> HaServices::create(EventLoop& loop, const Config& config,
                                               Identity identity) {
  if (haModeFrom(config) == HaMode::kStandalone) {
    return kj::heap<HaServices>(FactoryKey<HaServices>(), HaMode::kStandalone,
                                kj::Own<ZooKeeperClient>());
  }
  ZooKeeperClientOptions options = zooKeeperClientOptionsFrom(config);
  options.readOnlyIdentity = identity == Identity::kReader;
  auto client = ZooKeeperClient::start(loop, std::move(options));
  if (!client.ok()) return client.error();
  return kj::heap<HaServices>(FactoryKey<HaServices>(), HaMode::kZooKeeper,
                              std::move(client).value());
}

}  // namespace regent::ha

// Test helper shared by the tests that drive real ZooKeeperClients on one loop.
#pragma once

#include <kj/debug.h>

#include <memory>

#include "common/event_loop.h"
#include "ha/zookeeper_client.h"

namespace regent::ha {

// Starts a client and runs the loop until its first session is established; throws (failing the
// test) if it cannot start or connect within `wait`.
inline kj::Own<ZooKeeperClient> connectForTests(EventLoop& loop, ZooKeeperClientOptions options,
                                                Duration wait) {
  auto client = ZooKeeperClient::start(loop, std::move(options));
  KJ_REQUIRE(client.ok(), client.error().message);
  auto status = loop.run(client.value()->waitConnected(wait));
  KJ_REQUIRE(status.ok(), status.error().message);
  return std::move(client).value();
}

}  // namespace regent::ha

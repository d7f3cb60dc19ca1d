// The transport settings shared by RpcServer, RpcClient and CallDeadline (rpc.max-message-size,
// rpc.call-timeout, rpc.reconnect.*), read once from the configuration.
#pragma once

#include <capnp/message.h>

#include <cstdint>

#include "common/time.h"

namespace regent {
class Config;
}  // namespace regent

namespace regent::rpc {

struct RpcOptions {
  // Largest message either side accepts; a peer sending a larger one is disconnected.
  uint64_t maxMessageSize = 16 * 1024 * 1024;
  // Deadline of every outgoing call (CallDeadline), and of each connection attempt (RpcClient).
  Duration callTimeout{10000};
  // RpcClient's reconnect backoff: the first delay, and the cap of the doubling ceiling.
  Duration reconnectInitial{200};
  Duration reconnectMax{10000};
  // Server side: whether a connection must authenticate (ConnectionGate) before it is trusted.
  // Set by the process from its authentication settings, not read from rpc.* here.
  bool requireAuthentication = false;
};

// Reads rpc.max-message-size, rpc.call-timeout, rpc.reconnect.initial and rpc.reconnect.max.
RpcOptions rpcOptionsFrom(const Config& config);

// What every connection reads incoming messages with: traversalLimitInWords is the message size
// limit in 8-byte words (capnp refuses a larger frame before reading its body).
capnp::ReaderOptions readerOptionsFor(const RpcOptions& options);

}  // namespace regent::rpc

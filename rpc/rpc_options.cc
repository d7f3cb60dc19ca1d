// Reading the transport settings from the configuration.
#include "rpc/rpc_options.h"

#include <algorithm>

#include "conf/config.h"

namespace regent::rpc {

RpcOptions rpcOptionsFrom(const Config& config) {
  RpcOptions options;
  options.maxMessageSize = config.getSize("rpc.max-message-size");
  options.callTimeout = config.getDuration("rpc.call-timeout");
  options.reconnectInitial = config.getDuration("rpc.reconnect.initial");
  options.reconnectMax = config.getDuration("rpc.reconnect.max");
  // Capped at rpc.max-message-size: a small message limit (a client's, say) must not need the
  // pre-authentication cap lowered with it.
  options.preAuthMaxMessageSize =
      std::min(config.getSize("rpc.pre-auth-max-message-size"), options.maxMessageSize);
  options.authTimeout = config.getDuration("rpc.auth-timeout");
  options.maxConnections = static_cast<uint64_t>(config.getInt("rpc.max-connections"));
  options.maxConnectionsPerPeer =
      static_cast<uint64_t>(config.getInt("rpc.max-connections-per-peer"));
  options.idleTimeout = config.getDuration("rpc.idle-timeout");
  options.messageTimeout = config.getDuration("rpc.message-timeout");
  return options;
}

capnp::ReaderOptions readerOptionsFor(const RpcOptions& options) {
  capnp::ReaderOptions reader;
  // Rounded up so a limit that is not a multiple of 8 still admits messages of that many bytes.
  reader.traversalLimitInWords = (options.maxMessageSize + 7) / 8;
  return reader;
}

}  // namespace regent::rpc

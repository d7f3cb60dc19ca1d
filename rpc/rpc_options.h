// The transport settings shared by RpcServer, RpcClient and CallDeadline (rpc.max-message-size,
// rpc.call-timeout, rpc.reconnect.*, and the server's limits on connections before and after
// authentication), read once from the configuration.
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
  // Server side, while a connection has not authenticated: the largest message it may send
  // (at most maxMessageSize), and how long it may stay open.
  uint64_t preAuthMaxMessageSize = 64 * 1024;
  Duration authTimeout{10000};
  // Server side: connections open at once, in total and from one IP address; one more is
  // closed as soon as it is accepted. Apply whether or not authentication is required.
  uint64_t maxConnections = 1024;
  uint64_t maxConnectionsPerPeer = 64;
  // Server side, authenticated or not: a connection over which nothing crossed, either way, for
  // idleTimeout is closed; so is one holding part of a message that has not arrived whole within
  // messageTimeout of its first bytes. Zero: never.
  Duration idleTimeout{300000};
  Duration messageTimeout{60000};
};

// Reads rpc.max-message-size, rpc.call-timeout, rpc.reconnect.initial, rpc.reconnect.max,
// rpc.pre-auth-max-message-size, rpc.auth-timeout, rpc.max-connections,
// rpc.max-connections-per-peer, rpc.idle-timeout and rpc.message-timeout.
RpcOptions rpcOptionsFrom(const Config& config);

// What every connection reads incoming messages with: traversalLimitInWords is the message size
// limit in 8-byte words (capnp refuses a larger frame before reading its body).
capnp::ReaderOptions readerOptionsFor(const RpcOptions& options);

}  // namespace regent::rpc

// How a standby learns at once that the process of the leader it follows has ended while its host
// stays up, without waiting for ZooKeeper to expire the leader's session (docs/leader-election.md,
// "Fast failover").
#pragma once

#include <kj/async.h>

#include <functional>
#include <string>

namespace regent::leader {

// The seam the election asks; TcpLeaderLiveness is the real one, tests replace it.
//
// Thread-safety: loop-thread only.
class LeaderLiveness {
 public:
  virtual ~LeaderLiveness() = default;

  // Resolves once the process serving RPC at `rpcAddress` ("host:port") is known to have ended:
  // a connection to it was open, then closed or reset, and a new connection to the address was
  // refused (ECONNREFUSED) by its host. Never resolves otherwise: not on a timeout, an unreachable
  // host, a connection that stays open (a stopped process keeps its sockets; a partition gives
  // timeouts, not refusals), nor when no connection could be opened in the first place (the
  // address may not be reachable from here, so its refusal says nothing about the leader).
  // Dropping the promise ends the watch and closes its connection.
  //
  // `reanswered` (may be null) is called, on the loop, each time a held connection ended and a
  // new connection to the address was answered: the address serves again, by the same process
  // (which closed a connection that never authenticated, say) or by a new one started on it in
  // the meantime. The caller tells those apart (the election: by the latch nodes).
  virtual kj::Promise<void> whenDead(const std::string& rpcAddress,
                                     std::function<void()> reanswered) = 0;
};

}  // namespace regent::leader

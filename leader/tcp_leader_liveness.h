// LeaderLiveness over one plain TCP connection to the leader's advertised RPC address, held open
// and watched for its end; a reconnect refused by the host says the leader's process is gone.
#pragma once

#include <cstdint>
#include <string>

#include "common/time.h"
#include "leader/leader_liveness.h"

namespace regent {
class EventLoop;
}  // namespace regent

namespace regent::leader {

struct TcpLeaderLivenessOptions {
  // A connect not answered within this counts as a failure that proves nothing (never "dead").
  Duration connectTimeout{5000};
  // Connects that failed, and reconnects after a connection that lived shorter than
  // `stableAfter`, wait a backoff from `initialBackoff` doubling up to `maxBackoff`. The first
  // reconnect after a connection that lived at least `stableAfter` goes at once: that is the one
  // that tells a crash. A dying process closes its connections and its listener one after the
  // other, so that reconnect may still land in the listen backlog and be reset a moment later:
  // the first backoff is short, as the next connect is the one refused.
  Duration initialBackoff{20};
  Duration maxBackoff{10000};
  Duration stableAfter{1000};
};

// Each whenDead() call resolves the address (getaddrinfo on the loop's thread pool), connects
// (trying each resolved address in turn), and waits for the connection to end, reading and
// dropping whatever arrives. It sends nothing: the leader's RPC server sees a connection that
// never authenticates, which it closes after rpc.auth-timeout (or rpc.idle-timeout); the next
// connect then succeeds and is held again, after a call of `reanswered`. "Refused" is every
// resolved address refusing.
//
// Cost: one socket per call, no traffic while the connection is open, one connect per close.
// Nothing here blocks the loop thread: sockets are non-blocking, watched through the loop's kj
// event port.
// Thread-safety: loop-thread only; `loop` must outlive the object and every promise it returned.
class TcpLeaderLiveness final : public LeaderLiveness {
 public:
  explicit TcpLeaderLiveness(EventLoop& loop, TcpLeaderLivenessOptions options = {});
  ~TcpLeaderLiveness() noexcept override;
  TcpLeaderLiveness(const TcpLeaderLiveness&) = delete;
  TcpLeaderLiveness& operator=(const TcpLeaderLiveness&) = delete;

  kj::Promise<void> whenDead(const std::string& rpcAddress,
                             std::function<void()> reanswered) override;

  // Connects refused so far, over every watch (dead or not).
  uint64_t refusalsForTests() const { return refusals_; }

 private:
  class Watch;
  EventLoop& loop_;
  TcpLeaderLivenessOptions options_;
  uint64_t refusals_ = 0;
};

}  // namespace regent::leader

// The ZooKeeper client every regent process uses: asynchronous operations on the process's event
// loop, a session state machine with listeners, digest ACLs, and every path relative to the
// cluster's root (`ha.zookeeper.root`/`cluster-id`), created on demand. The operations and their
// vocabulary are in ha/coordination.h; docs/zookeeper.md describes the session and the nodes.
#pragma once

#include <kj/async.h>
#include <kj/function.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/factory_key.h"
#include "common/result.h"
#include "common/time.h"
#include "ha/coordination.h"
#include "ha/quorum_resolution.h"
#include "ha/zookeeper_acl.h"

namespace regent {
class Config;
class EventLoop;
}  // namespace regent

namespace regent::ha {

class ZooKeeperSession;

struct ZooKeeperClientOptions {
  std::string quorum;        // "host:port,host:port".
  std::string root;          // Absolute cluster root, for example "/regent/default".
  Duration sessionTimeout{6000};  // Requested; the server may negotiate it.
  std::string auth;          // "user:password" or empty: no auth, nodes are world-accessible.
  std::string readAuth;      // "user:password" granted read access to the cluster's nodes.
  // When set, the client authenticates with readAuth instead of auth (inspection tools): it can
  // read the nodes but writes fail with kNoAuth.
  bool readOnlyIdentity = false;
  // Reports the session state and ZooKeeper's own log lines at this spdlog logger's name.
  std::string logName = "zookeeper";
  // Turns the quorum's host names into addresses on the loop's thread pool before every new
  // handle (ha/quorum_resolution.h); empty: resolveQuorumHosts. Tests hand a lookup that hangs.
  QuorumResolver resolveQuorum;
};

// Reads quorum, root (`ha.zookeeper.root` + "/" + `cluster-id`), session timeout and the
// credentials from `config`.
ZooKeeperClientOptions zooKeeperClientOptionsFrom(const Config& config);

// The ZooKeeper implementation over the single-threaded C library, driven by a uv poll and a
// uv timer on the loop (docs/event-loop.md).
class ZooKeeperClient final : public Coordination {
 public:
  // Starts connecting; fails on bad options (an empty quorum, a relative root, a credential
  // without ':'). A quorum that does not resolve yet is retried every second, not an error.
  // `loop` must outlive the client.
  static Result<kj::Own<ZooKeeperClient>> start(EventLoop& loop, ZooKeeperClientOptions options);
  ~ZooKeeperClient() noexcept override;

  // Resolves once the first session is established (kConnected), or with a retryable error
  // after `timeout`.
  kj::Promise<Status> waitConnected(Duration timeout);

  // Ends the session (its ephemeral nodes go away at once) and moves to kClosed. Pending
  // operations complete with kClosing. Idempotent. The destructor calls it.
  // WARNING: while connected, the C library flushes the close request (up to 3 s) and waits for
  // the server's acknowledgement (up to 1.5 s) if the server does not answer (a stalled
  // connection). It is the one bounded block on the loop thread, taken only at shutdown.
  void close();

  kj::Promise<ZkReply<std::string>> create(std::string path, std::string data,
                                           CreateMode mode) override;
  kj::Promise<ZkReply<NodeData>> get(std::string path) override;
  kj::Promise<Watched<NodeData>> getAndWatch(std::string path) override;
  kj::Promise<ZkReply<NodeStat>> set(std::string path, std::string data,
                                     int32_t version = -1) override;
  kj::Promise<ZkReply<bool>> remove(std::string path, int32_t version = -1) override;
  kj::Promise<ZkReply<std::optional<NodeStat>>> exists(std::string path) override;
  kj::Promise<Watched<std::optional<NodeStat>>> existsAndWatch(std::string path) override;
  kj::Promise<ZkReply<std::vector<std::string>>> children(std::string path) override;
  kj::Promise<Watched<std::vector<std::string>>> childrenAndWatch(std::string path) override;
  kj::Promise<ZkReply<std::vector<ZkOpResult>>> multi(std::vector<ZkOp> ops) override;
  kj::Promise<ZkReply<bool>> ensurePath(std::string path) override;
  // The node's ACL (ha/zookeeper_acl.h checks it). Not part of Coordination: only a master's
  // start reads ACLs (verifyClusterAcl), always against the real ZooKeeper.
  kj::Promise<ZkReply<std::vector<AclEntry>>> getAcl(std::string path);
  // The absolute cluster root every path is relative to ("/regent/default").
  const std::string& root() const;

  SessionState sessionState() const override;
  int64_t sessionId() const override;
  Duration negotiatedSessionTimeout() const override;
  std::optional<MonoTime> sessionDeadline() const override;
  kj::Own<void> onSessionState(kj::Function<void(SessionState)> listener) override;

  // The session's password, so tests can force its expiry from a second handle.
  std::string sessionPasswordForTests() const;
  // Number of path watches that fired with a real event so far (not session losses).
  uint64_t watchesFiredForTests() const;

  struct State;

  // Built by its factory only (FactoryKey).
  ZooKeeperClient(FactoryKey<ZooKeeperClient>, kj::Own<State> state);

 private:
  kj::Own<State> state_;
};

}  // namespace regent::ha

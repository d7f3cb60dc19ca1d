// The coordination service as the recipes above ha/ see it (leader election and retrieval, the
// zookeeper store): ZooKeeper's operations on paths relative to the cluster root, one-shot
// watches, multi-op transactions and the session's life. ZooKeeperClient implements it; unit
// tests use an in-memory fake. docs/zookeeper.md describes the nodes and the session states.
#pragma once

#include <kj/async.h>
#include <kj/function.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/time.h"

namespace regent::ha {

// ZooKeeper's return codes (their values are ZooKeeper's own, stable across versions). Codes not
// named here still fit in the enum; zkCodeName() names them all.
enum class ZkCode : int {
  kOk = 0,
  kRuntimeInconsistency = -2,  // In a failed transaction: an operation after the one that failed.
  kConnectionLoss = -4,
  kMarshallingError = -5,
  kOperationTimeout = -7,
  kBadArguments = -8,
  kInvalidState = -9,
  kApiError = -100,
  kNoNode = -101,
  kNoAuth = -102,
  kBadVersion = -103,
  kNoChildrenForEphemerals = -108,
  kNodeExists = -110,
  kNotEmpty = -111,
  kSessionExpired = -112,
  kInvalidAcl = -114,
  kClosing = -116,
  kSessionMoved = -118,
};

// "ZNONODE", "ZCONNECTIONLOSS", ... ; "ZOK" for kOk.
const char* zkCodeName(ZkCode code);

// The classification of codes, written once; every recipe above ha/ asks these two. A ZkCode is
// always what the server or the library said (or what they would have said: see
// Coordination's thread-safety note); recipes keep failures of their own out of it.
//
// Transient: no verdict reached us (connection loss, operation timeout, session moved). The
// same operation sent again in the same session may succeed; a write may or may not have been
// applied. kOk and node-level verdicts (no node, bad version, node exists, no auth, ...) are not
// transient: sending the same operation again gets the same answer.
bool isTransient(ZkCode code);
// The session the operation ran in is over (session expired, client closing, handle in an
// invalid state): nothing more happens in it, and its ephemeral nodes are gone or going. A
// recipe starts over once a session is usable again (SessionState kConnected of the next one),
// so this, like isTransient, is worth waiting out; retrying in place is not.
bool endsSession(ZkCode code);

// A node's metadata, as ZooKeeper reports it.
struct NodeStat {
  int64_t czxid = 0;
  int64_t mzxid = 0;
  int32_t version = 0;   // Data version: what set/remove/check compare against.
  int32_t cversion = 0;  // Children version.
  int64_t ephemeralOwner = 0;  // Session id of the owner; 0 for persistent nodes.
  int32_t dataLength = 0;
  int32_t numChildren = 0;
};

// The outcome of one operation: a code and, when the code is kOk, a value. Expected outcomes
// (no node, bad version, connection loss) are codes, never exceptions.
// [[nodiscard]]: an ignored reply is an ignored failure; a caller that means to ignore it says
// so with (void) and a comment why.
template <typename T>
struct [[nodiscard]] ZkReply {
  ZkCode code = ZkCode::kOk;
  T value{};

  bool ok() const { return code == ZkCode::kOk; }
};

struct NodeData {
  std::string data;
  NodeStat stat;
};

// What a one-shot watch reports. kSessionLost: the session the watch was set in expired or the
// client was closed, so the watch will never fire; the node may or may not have changed.
struct WatchEvent {
  enum class Type { kCreated, kDeleted, kDataChanged, kChildrenChanged, kSessionLost };
  Type type = Type::kSessionLost;
  std::string path;  // Relative to the cluster root, as the watch was set.
};

// An operation's reply plus, when ZooKeeper registered a watch, the promise of its one event.
// Dropping the promise only stops the delivery (ZooKeeper keeps the watch until it fires).
template <typename T>
struct [[nodiscard]] Watched {
  ZkReply<T> reply;
  kj::Maybe<kj::Promise<WatchEvent>> watch;
};

enum class CreateMode { kPersistent, kEphemeral, kPersistentSequential, kEphemeralSequential };

// One operation of a multi-op transaction. Paths are relative to the cluster root.
struct ZkOp {
  enum class Kind { kCreate, kRemove, kSetData, kCheck };
  Kind kind = Kind::kCheck;
  std::string path;
  std::string data;                        // kCreate, kSetData.
  CreateMode mode = CreateMode::kPersistent;  // kCreate.
  int32_t version = -1;                    // kRemove, kSetData, kCheck; -1 = any version.

  static ZkOp create(std::string path, std::string data, CreateMode mode);
  static ZkOp remove(std::string path, int32_t version = -1);
  static ZkOp setData(std::string path, std::string data, int32_t version = -1);
  static ZkOp check(std::string path, int32_t version = -1);
};

// One operation's result inside a transaction.
struct ZkOpResult {
  ZkCode code = ZkCode::kOk;
  std::string createdPath;  // kCreate: the created node (relative), with its sequence suffix.
  NodeStat stat;            // kSetData: the node's new stat.
};

// The index of the operation that failed a transaction: ZooKeeper reports that operation's own
// code, kOk before it and kRuntimeInconsistency after it. nullopt when no operation says so (the
// transaction succeeded, or failed as a whole: connection loss, session expiry, closing).
std::optional<size_t> failedOperation(const ZkReply<std::vector<ZkOpResult>>& reply);

// The session's life, as listeners see it:
//   kConnecting -> kConnected -> (kSuspended -> kReconnected)* -> kSuspended -> kExpired
//   -> kConnecting -> kConnected (a new session) ... -> kClosed.
// kExpired may also follow kConnected or kReconnected directly (authentication failure), and
// kClosed may follow any state.
// kSuspended: the connection is lost; the session may still live on the server. kExpired: the
// server said so on reconnect, or the client stayed cut off for the negotiated session timeout
// (a local timer), so every ephemeral node of the session must be considered gone; the client
// then opens a new session on its own. kClosed: close() was called or the client is gone.
enum class SessionState { kConnecting, kConnected, kSuspended, kReconnected, kExpired, kClosed };

const char* sessionStateName(SessionState state);

// The operations other layers use. An interface so the layers above can be unit-tested with a
// fake; ZooKeeperClient (ha/zookeeper_client.h) is the real one.
//
// Thread-safety: loop-thread only. Every promise resolves on the loop thread and never inside
// the ZooKeeper library. Closing or destroying the client completes operations still in flight
// with kClosing (kSessionExpired when their session expired) and resolves pending watches with
// kSessionLost. An operation issued while the client has no connection to send it on completes
// with kConnectionLoss, as the library completes requests it could not send; one issued after
// close() with kClosing.
class Coordination {
 public:
  virtual ~Coordination() = default;

  // Paths are relative to the cluster root ("latch/m-", "leader"); "" is the root itself.
  virtual kj::Promise<ZkReply<std::string>> create(std::string path, std::string data,
                                                   CreateMode mode) = 0;
  virtual kj::Promise<ZkReply<NodeData>> get(std::string path) = 0;
  virtual kj::Promise<Watched<NodeData>> getAndWatch(std::string path) = 0;
  virtual kj::Promise<ZkReply<NodeStat>> set(std::string path, std::string data,
                                             int32_t version = -1) = 0;
  virtual kj::Promise<ZkReply<bool>> remove(std::string path, int32_t version = -1) = 0;
  // value: whether the node exists (kNoNode is reported as ok with value false).
  virtual kj::Promise<ZkReply<std::optional<NodeStat>>> exists(std::string path) = 0;
  // The watch fires on creation, deletion or data change, whether or not the node exists now.
  virtual kj::Promise<Watched<std::optional<NodeStat>>> existsAndWatch(std::string path) = 0;
  // Child names (not paths), in ZooKeeper's order (unsorted).
  virtual kj::Promise<ZkReply<std::vector<std::string>>> children(std::string path) = 0;
  virtual kj::Promise<Watched<std::vector<std::string>>> childrenAndWatch(std::string path) = 0;
  // All operations apply, or none does. code is the first failing operation's code; results
  // has one entry per operation (when the transaction reached the server).
  virtual kj::Promise<ZkReply<std::vector<ZkOpResult>>> multi(std::vector<ZkOp> ops) = 0;
  // Creates `path` and its missing ancestors as persistent nodes (empty data).
  virtual kj::Promise<ZkReply<bool>> ensurePath(std::string path) = 0;

  virtual SessionState sessionState() const = 0;
  // The current session's id (0 before the first connect).
  virtual int64_t sessionId() const = 0;
  // The session timeout the server granted (the requested one before the first connect).
  virtual Duration negotiatedSessionTimeout() const = 0;
  // The last moment the server may still hold the current session by this process's own clock:
  // when the last request it answered was sent, plus the negotiated timeout; nullopt while no
  // session is established (kConnecting, kExpired, kClosed). A paused or starved process finds
  // it passed the moment it runs again, before any event tells it so (docs/zookeeper.md, "The
  // session's deadline").
  virtual std::optional<MonoTime> sessionDeadline() const = 0;

  // Calls `listener` on every state change, from the loop, never inside an operation's
  // callback; in order. A state reached before the call may still be delivered (events are
  // queued on the loop). The listener is removed when the returned object is destroyed; a
  // destroyed client calls no listener (not even with kClosed).
  virtual kj::Own<void> onSessionState(kj::Function<void(SessionState)> listener) = 0;
};

// Whether `coordination`'s session is established and its deadline (sessionDeadline) has not
// passed at `now`.
inline bool withinSessionDeadline(const Coordination& coordination, MonoTime now) {
  const std::optional<MonoTime> deadline = coordination.sessionDeadline();
  return deadline && now < *deadline;
}

}  // namespace regent::ha

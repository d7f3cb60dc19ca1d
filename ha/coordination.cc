// The coordination vocabulary: ZooKeeper's codes by name and class (transient, session ended), the
// session states by name, and the transaction helpers.
#include "ha/coordination.h"

#include <zookeeper/zookeeper.h>

namespace regent::ha {

static_assert(static_cast<int>(ZkCode::kRuntimeInconsistency) == ZRUNTIMEINCONSISTENCY);
static_assert(static_cast<int>(ZkCode::kConnectionLoss) == ZCONNECTIONLOSS);
static_assert(static_cast<int>(ZkCode::kMarshallingError) == ZMARSHALLINGERROR);
static_assert(static_cast<int>(ZkCode::kBadArguments) == ZBADARGUMENTS);
static_assert(static_cast<int>(ZkCode::kApiError) == ZAPIERROR);
static_assert(static_cast<int>(ZkCode::kInvalidAcl) == ZINVALIDACL);
static_assert(static_cast<int>(ZkCode::kOperationTimeout) == ZOPERATIONTIMEOUT);
static_assert(static_cast<int>(ZkCode::kNoNode) == ZNONODE);
static_assert(static_cast<int>(ZkCode::kNoAuth) == ZNOAUTH);
static_assert(static_cast<int>(ZkCode::kBadVersion) == ZBADVERSION);
static_assert(static_cast<int>(ZkCode::kNodeExists) == ZNODEEXISTS);
static_assert(static_cast<int>(ZkCode::kNotEmpty) == ZNOTEMPTY);
static_assert(static_cast<int>(ZkCode::kSessionExpired) == ZSESSIONEXPIRED);
static_assert(static_cast<int>(ZkCode::kClosing) == ZCLOSING);
static_assert(static_cast<int>(ZkCode::kSessionMoved) == ZSESSIONMOVED);
static_assert(static_cast<int>(ZkCode::kInvalidState) == ZINVALIDSTATE);
static_assert(static_cast<int>(ZkCode::kNoChildrenForEphemerals) == ZNOCHILDRENFOREPHEMERALS);

const char* zkCodeName(ZkCode code) {
  switch (code) {
    case ZkCode::kOk: return "ZOK";
    case ZkCode::kRuntimeInconsistency: return "ZRUNTIMEINCONSISTENCY";
    case ZkCode::kConnectionLoss: return "ZCONNECTIONLOSS";
    case ZkCode::kMarshallingError: return "ZMARSHALLINGERROR";
    case ZkCode::kOperationTimeout: return "ZOPERATIONTIMEOUT";
    case ZkCode::kBadArguments: return "ZBADARGUMENTS";
    case ZkCode::kInvalidState: return "ZINVALIDSTATE";
    case ZkCode::kApiError: return "ZAPIERROR";
    case ZkCode::kNoNode: return "ZNONODE";
    case ZkCode::kNoAuth: return "ZNOAUTH";
    case ZkCode::kBadVersion: return "ZBADVERSION";
    case ZkCode::kNoChildrenForEphemerals: return "ZNOCHILDRENFOREPHEMERALS";
    case ZkCode::kNodeExists: return "ZNODEEXISTS";
    case ZkCode::kNotEmpty: return "ZNOTEMPTY";
    case ZkCode::kSessionExpired: return "ZSESSIONEXPIRED";
    case ZkCode::kInvalidAcl: return "ZINVALIDACL";
    case ZkCode::kClosing: return "ZCLOSING";
    case ZkCode::kSessionMoved: return "ZSESSIONMOVED";
  }
  // zerror() names the codes this enum does not list (ZRUNTIMEINCONSISTENCY, ...).
  return zerror(static_cast<int>(code));
}

bool isTransient(ZkCode code) {
  return code == ZkCode::kConnectionLoss || code == ZkCode::kOperationTimeout ||
         code == ZkCode::kSessionMoved;
}

bool endsSession(ZkCode code) {
  // kInvalidState: the library refuses calls on a handle whose session expired (or failed
  // authentication) before the session driver replaced it.
  return code == ZkCode::kSessionExpired || code == ZkCode::kClosing ||
         code == ZkCode::kInvalidState;
}

const char* sessionStateName(SessionState state) {
  switch (state) {
    case SessionState::kConnecting: return "CONNECTING";
    case SessionState::kConnected: return "CONNECTED";
    case SessionState::kSuspended: return "SUSPENDED";
    case SessionState::kReconnected: return "RECONNECTED";
    case SessionState::kExpired: return "EXPIRED";
    case SessionState::kClosed: return "CLOSED";
  }
  return "?";
}

ZkOp ZkOp::create(std::string path, std::string data, CreateMode mode) {
  return ZkOp{Kind::kCreate, std::move(path), std::move(data), mode, -1};
}
ZkOp ZkOp::remove(std::string path, int32_t version) {
  return ZkOp{Kind::kRemove, std::move(path), {}, CreateMode::kPersistent, version};
}
ZkOp ZkOp::setData(std::string path, std::string data, int32_t version) {
  return ZkOp{Kind::kSetData, std::move(path), std::move(data), CreateMode::kPersistent, version};
}
ZkOp ZkOp::check(std::string path, int32_t version) {
  return ZkOp{Kind::kCheck, std::move(path), {}, CreateMode::kPersistent, version};
}

std::optional<size_t> failedOperation(const ZkReply<std::vector<ZkOpResult>>& reply) {
  for (size_t i = 0; i < reply.value.size(); ++i) {
    const ZkCode code = reply.value[i].code;
    if (code != ZkCode::kOk && code != ZkCode::kRuntimeInconsistency) return i;
  }
  return std::nullopt;
}

}  // namespace regent::ha

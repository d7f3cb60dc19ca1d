// The coordination vocabulary: every ZooKeeper code in exactly one class (ok, transient, session
// ended, or a verdict on the operation), and the transaction helpers.
#include "ha/coordination.h"

#include <gtest/gtest.h>

#include <vector>

namespace regent::ha {
namespace {

enum class CodeClass { kOk, kTransient, kSessionEnded, kVerdict };

CodeClass classOf(ZkCode code) {
  EXPECT_FALSE(isTransient(code) && endsSession(code)) << zkCodeName(code) << " is in two classes";
  if (code == ZkCode::kOk) return CodeClass::kOk;
  if (isTransient(code)) return CodeClass::kTransient;
  if (endsSession(code)) return CodeClass::kSessionEnded;
  return CodeClass::kVerdict;
}

TEST(ZkCodes, NoVerdictReachedUsIsTransient) {
  // The same operation sent again in the same session may succeed.
  for (ZkCode code : {ZkCode::kConnectionLoss, ZkCode::kOperationTimeout, ZkCode::kSessionMoved}) {
    EXPECT_EQ(classOf(code), CodeClass::kTransient) << zkCodeName(code);
  }
}

TEST(ZkCodes, AnEndedSessionIsNotTransientButItsOwnClass) {
  // Nothing more happens in that session: recipes wait for the next one instead of retrying.
  for (ZkCode code : {ZkCode::kSessionExpired, ZkCode::kClosing, ZkCode::kInvalidState}) {
    EXPECT_EQ(classOf(code), CodeClass::kSessionEnded) << zkCodeName(code);
  }
}

TEST(ZkCodes, VerdictsOnTheOperationAreNeitherTransientNorTheSessionsEnd) {
  // Sending the same operation again gets the same answer.
  for (ZkCode code : {ZkCode::kNoNode, ZkCode::kNodeExists, ZkCode::kBadVersion, ZkCode::kNotEmpty,
                      ZkCode::kNoAuth, ZkCode::kInvalidAcl, ZkCode::kNoChildrenForEphemerals,
                      ZkCode::kBadArguments, ZkCode::kMarshallingError, ZkCode::kApiError,
                      ZkCode::kRuntimeInconsistency}) {
    EXPECT_EQ(classOf(code), CodeClass::kVerdict) << zkCodeName(code);
  }
  EXPECT_EQ(classOf(ZkCode::kOk), CodeClass::kOk);
}

TEST(ZkCodes, CodesAreNamedAsTheLibraryNamesThem) {
  EXPECT_STREQ(zkCodeName(ZkCode::kNoNode), "ZNONODE");
  EXPECT_STREQ(zkCodeName(ZkCode::kSessionExpired), "ZSESSIONEXPIRED");
  // A code the enum does not list is still named by the library.
  EXPECT_STREQ(zkCodeName(static_cast<ZkCode>(-6)), "unimplemented");
}

TEST(ZkCodes, TheFailedOperationOfATransactionIsTheOneWithItsOwnCode) {
  ZkReply<std::vector<ZkOpResult>> reply{ZkCode::kNoNode, {}};
  reply.value = {{ZkCode::kOk, "", {}}, {ZkCode::kNoNode, "", {}},
                 {ZkCode::kRuntimeInconsistency, "", {}}};
  EXPECT_EQ(failedOperation(reply), std::optional<size_t>(1));
  // Failed as a whole (no per-operation results): no operation to blame.
  EXPECT_EQ(failedOperation(ZkReply<std::vector<ZkOpResult>>{ZkCode::kConnectionLoss, {}}),
            std::nullopt);
}

}  // namespace
}  // namespace regent::ha

// wire::Failure written and read in one place: every builder fills its member, every Failure and
// every kj exception type has its action, and a Failure copied out of its response keeps what a
// caller reports.
#include <gtest/gtest.h>
#include <capnp/message.h>
#include <capnp/schema.h>

#include <set>
#include <string>

#include "rpc/failure.h"
#include "rpc/schema/common.capnp.h"

namespace regent::rpc {
namespace {

wire::Failure::Which whichNamed(const std::string& name) {
  auto fields = capnp::Schema::from<wire::Failure>().getUnionFields();
  for (auto field : fields) {
    if (name == field.getProto().getName().cStr()) {
      return static_cast<wire::Failure::Which>(field.getProto().getDiscriminantValue());
    }
  }
  ADD_FAILURE() << "no Failure member " << name;
  return wire::Failure::FENCING;
}

TEST(CallFailure, LeadershipFailuresResolveTheLeaderAgain) {
  for (const char* name : {"fencing", "notLeader", "unavailable"}) {
    EXPECT_EQ(classify(whichNamed(name)), FailureAction::kResolveAgain) << name;
  }
}

TEST(CallFailure, RefusalsRetryingCannotHelpAreFatal) {
  for (const char* name : {"invalidArgument", "notFound", "alreadyExists", "notRegistered",
                           "failedPrecondition", "tooLarge", "unauthenticated",
                           "permissionDenied"}) {
    EXPECT_EQ(classify(whichNamed(name)), FailureAction::kFatal) << name;
  }
}

TEST(CallFailure, EveryFailureOfTheSchemaIsClassifiedOnPurpose) {
  // A member added to the schema must be added to one of the lists above.
  const std::set<std::string> classified = {
      "fencing",  "notLeader",          "unavailable", "invalidArgument", "notFound",
      "alreadyExists", "notRegistered", "failedPrecondition", "tooLarge",
      "unauthenticated", "permissionDenied"};
  for (auto field : capnp::Schema::from<wire::Failure>().getUnionFields()) {
    EXPECT_TRUE(classified.count(field.getProto().getName().cStr()))
        << "wire::Failure." << field.getProto().getName().cStr() << " has no tested action";
  }
}

TEST(CallFailure, LostConnectionsResolveAgainTimeoutsBackOffBugsAreFatal) {
  auto exception = [](kj::Exception::Type type) {
    return kj::Exception(type, __FILE__, __LINE__, kj::str("test"));
  };
  EXPECT_EQ(classify(exception(kj::Exception::Type::DISCONNECTED)), FailureAction::kResolveAgain);
  EXPECT_EQ(classify(exception(kj::Exception::Type::OVERLOADED)), FailureAction::kBackOff);
  EXPECT_EQ(classify(exception(kj::Exception::Type::FAILED)), FailureAction::kFatal);
  EXPECT_EQ(classify(exception(kj::Exception::Type::UNIMPLEMENTED)), FailureAction::kFatal);
}

TEST(CallFailure, CopiesTheFieldOfAnInvalidArgumentAndDescribesIt) {
  capnp::MallocMessageBuilder message;
  auto failure = message.initRoot<wire::Failure>();
  failures::invalidArgument(failure, "vertices[2].parallelism", "must be in 1..1024, got 0",
                            "vertices[2].parallelism: must be in 1..1024, got 0");

  CallFailure copy = CallFailure::from(failure.asReader());
  EXPECT_EQ(copy.which, wire::Failure::INVALID_ARGUMENT);
  EXPECT_EQ(copy.action(), FailureAction::kFatal);
  EXPECT_EQ(copy.field, "vertices[2].parallelism");
  EXPECT_EQ(copy.describe(), "vertices[2].parallelism: must be in 1..1024, got 0");

  failure.getInvalidArgument().setField("");
  EXPECT_EQ(CallFailure::from(failure.asReader()).describe(), "must be in 1..1024, got 0");
}

TEST(CallFailure, CopiesTheRetryAfterOfAnUnavailableLeader) {
  capnp::MallocMessageBuilder message;
  auto failure = message.initRoot<wire::Failure>();
  failures::unavailable(failure, 250, "recovering");
  CallFailure copy = CallFailure::from(failure.asReader());
  EXPECT_EQ(copy.action(), FailureAction::kResolveAgain);
  EXPECT_EQ(copy.retryAfter, Duration(250));
  EXPECT_EQ(copy.describe(), "recovering");
}

TEST(FailureBuilders, EachSetsTheMessageAndItsMemberWithItsDetails) {
  capnp::MallocMessageBuilder message;
  auto failure = message.initRoot<wire::Failure>();
  const JobId job(0x12, 0x34);

  failures::fencing(failure, 7, 6, "called with epoch 6");
  EXPECT_EQ(std::string(failure.getMessage().cStr()), "called with epoch 6");
  ASSERT_TRUE(failure.isFencing());
  EXPECT_EQ(failure.getFencing().getExpected(), 7u);
  EXPECT_EQ(failure.getFencing().getReceived(), 6u);

  failures::notLeader(failure, "not the leader").setEpoch(9);
  EXPECT_EQ(std::string(failure.getMessage().cStr()), "not the leader");
  ASSERT_TRUE(failure.isNotLeader() && failure.getNotLeader().isLeader());
  EXPECT_EQ(failure.getNotLeader().getLeader().getEpoch(), 9u);

  failures::notLeaderUnknown(failure, "no leader");
  ASSERT_TRUE(failure.isNotLeader() && failure.getNotLeader().isUnknown());

  failures::notFound(failure, job, "no job");
  ASSERT_TRUE(failure.isNotFound() && failure.getNotFound().isJob());
  EXPECT_EQ(failure.getNotFound().getJob().getHi(), 0x12u);
  EXPECT_EQ(failure.getNotFound().getJob().getLo(), 0x34u);

  failures::alreadyExists(failure, job, "exists");
  ASSERT_TRUE(failure.isAlreadyExists() && failure.getAlreadyExists().isJob());
  EXPECT_EQ(failure.getAlreadyExists().getJob().getLo(), 0x34u);

  failures::failedPrecondition(failure, "job already ended");
  EXPECT_TRUE(failure.isFailedPrecondition());
  EXPECT_EQ(std::string(failure.getMessage().cStr()), "job already ended");

  failures::tooLarge(failure, 2048, 1024, "too large");
  ASSERT_TRUE(failure.isTooLarge());
  EXPECT_EQ(failure.getTooLarge().getSizeBytes(), 2048u);
  EXPECT_EQ(failure.getTooLarge().getLimitBytes(), 1024u);

  failures::unavailable(failure, 500, "recovering");
  ASSERT_TRUE(failure.isUnavailable());
  EXPECT_EQ(failure.getUnavailable().getRetryAfterMs(), 500u);
  EXPECT_EQ(CallFailure::from(failure.asReader()).action(), FailureAction::kResolveAgain);
}

}  // namespace
}  // namespace regent::rpc

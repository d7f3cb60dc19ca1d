// The one classification of call failures: every wire::Failure and every kj exception type has
// its action, and a Failure copied out of its response keeps what a caller reports.
#include <gtest/gtest.h>
#include <capnp/message.h>
#include <capnp/schema.h>

#include <set>
#include <string>

#include "client/call_failure.h"
#include "rpc/schema/common.capnp.h"

namespace regent::client {
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
                           "failedPrecondition", "tooLarge"}) {
    EXPECT_EQ(classify(whichNamed(name)), FailureAction::kFatal) << name;
  }
}

TEST(CallFailure, EveryFailureOfTheSchemaIsClassifiedOnPurpose) {
  // A member added to the schema must be added to one of the lists above.
  const std::set<std::string> classified = {
      "fencing",  "notLeader",          "unavailable", "invalidArgument", "notFound",
      "alreadyExists", "notRegistered", "failedPrecondition", "tooLarge"};
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
  failure.setMessage("vertices[2].parallelism: must be in 1..1024, got 0");
  auto invalid = failure.initInvalidArgument();
  invalid.setField("vertices[2].parallelism");
  invalid.setMessage("must be in 1..1024, got 0");

  CallFailure copy = CallFailure::from(failure.asReader());
  EXPECT_EQ(copy.which, wire::Failure::INVALID_ARGUMENT);
  EXPECT_EQ(copy.action(), FailureAction::kFatal);
  EXPECT_EQ(copy.field, "vertices[2].parallelism");
  EXPECT_EQ(copy.describe(), "vertices[2].parallelism: must be in 1..1024, got 0");

  invalid.setField("");
  EXPECT_EQ(CallFailure::from(failure.asReader()).describe(), "must be in 1..1024, got 0");
}

TEST(CallFailure, CopiesTheRetryAfterOfAnUnavailableLeader) {
  capnp::MallocMessageBuilder message;
  auto failure = message.initRoot<wire::Failure>();
  failure.setMessage("recovering");
  failure.initUnavailable().setRetryAfterMs(250);
  CallFailure copy = CallFailure::from(failure.asReader());
  EXPECT_EQ(copy.action(), FailureAction::kResolveAgain);
  EXPECT_EQ(copy.retryAfter, Duration(250));
  EXPECT_EQ(copy.describe(), "recovering");
}

}  // namespace
}  // namespace regent::client

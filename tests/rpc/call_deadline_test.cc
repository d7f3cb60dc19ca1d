// Call deadlines on a manual timer: nothing happens before the timeout, the call fails as
// OVERLOADED naming the method after it, and a call that completes in time is untouched.
#include "rpc/call_deadline.h"

#include <gtest/gtest.h>
#include <kj/async.h>
#include <kj/timer.h>

#include "rpc/schema/gateways.capnp.h"

namespace regent::rpc {
namespace {

class CallDeadlineTest : public ::testing::Test {
 protected:
  ~CallDeadlineTest() noexcept override = default;

  kj::EventLoop loop_;
  kj::WaitScope waitScope_{loop_};
  kj::TimerImpl timer_{kj::origin<kj::TimePoint>()};

  void advance(Duration by) { timer_.advanceTo(timer_.now() + by.count() * kj::MILLISECONDS); }
};

TEST_F(CallDeadlineTest, FailsAsOverloadedNamingTheMethodOnlyOnceTheTimeoutPassed) {
  const CallDeadline deadline(timer_, Duration(10000));
  bool cancelled = false;
  auto never = kj::Promise<int>(kj::NEVER_DONE).attach(kj::defer([&] { cancelled = true; }));
  auto call = deadline.apply("DispatcherGateway.jobStatus", kj::mv(never));

  advance(Duration(9999));
  EXPECT_FALSE(call.poll(waitScope_));
  EXPECT_FALSE(cancelled);

  advance(Duration(1));
  ASSERT_TRUE(call.poll(waitScope_));
  KJ_IF_MAYBE (exception, kj::runCatchingExceptions([&] { call.wait(waitScope_); })) {
    EXPECT_EQ(exception->getType(), kj::Exception::Type::OVERLOADED);
    EXPECT_EQ(std::string(exception->getDescription().cStr()),
              "call DispatcherGateway.jobStatus timed out after 10s");
  } else {
    FAIL() << "the call did not fail";
  }
  EXPECT_TRUE(cancelled);  // The late call was dropped.
}

TEST_F(CallDeadlineTest, ACallThatCompletesInTimeKeepsItsValue) {
  auto paf = kj::newPromiseAndFulfiller<int>();
  auto call =
      withDeadline(timer_, Duration(500), "MasterBootstrap.leaderInfo", kj::mv(paf.promise));
  advance(Duration(499));
  paf.fulfiller->fulfill(42);
  EXPECT_EQ(call.wait(waitScope_), 42);
}

TEST(CallDeadlineNames, MethodNamesComeFromTheParameterStruct) {
  EXPECT_EQ(methodNameOf(capnp::Schema::from<wire::DispatcherGateway::JobStatusParams>()),
            "DispatcherGateway.jobStatus");
  EXPECT_EQ(methodNameOf(capnp::Schema::from<wire::MasterBootstrap::LeaderInfoParams>()),
            "MasterBootstrap.leaderInfo");
  EXPECT_EQ(methodNameOf(capnp::Schema::from<wire::JobGraph>()), "JobGraph");
}

TEST(CallDeadlineNames, TimeoutDescriptionUsesTheConfigSyntax) {
  EXPECT_EQ(std::string(callTimedOut("A.b", Duration(1500)).getDescription().cStr()),
            "call A.b timed out after 1500ms");
}

}  // namespace
}  // namespace regent::rpc

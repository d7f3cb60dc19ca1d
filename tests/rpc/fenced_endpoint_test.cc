// The fenced-endpoint wrapper refuses every call with another epoch before a handler runs, and a
// leadership term's membrane revokes every capability handed out in the term.
#include "rpc/fenced_endpoint.h"

#include <capnp/capability.h>
#include <gtest/gtest.h>
#include <kj/async.h>

#include <string>
#include <utility>
#include <vector>

#include "common/event_loop.h"
#include "rpc/schema/gateways.capnp.h"

namespace regent::rpc {
namespace {

using wire::DispatcherGateway;
using wire::MasterBootstrap;

// Counts the calls that reached it; cancelJob never completes (a call in flight).
class CountingDispatcher final : public DispatcherGateway::Server {
 public:
  explicit CountingDispatcher(int& reached) : reached_(reached) {}

  kj::Promise<void> jobStatus(JobStatusContext context) override {
    ++reached_;
    context.getResults().initStatus().setName("seen");
    return kj::READY_NOW;
  }
  kj::Promise<void> cancelJob(CancelJobContext) override {
    ++reached_;
    return kj::Promise<void>(kj::NEVER_DONE).attach(kj::defer([this] { ++dropped_; }));
  }

  // cancelJob handlers whose promise was destroyed.
  int dropped_ = 0;

 private:
  int& reached_;
};

// Hands out the term's guarded dispatcher, as the master's bootstrap will.
class TermBootstrap final : public MasterBootstrap::Server {
 public:
  TermBootstrap(DispatcherGateway::Client dispatcher) : dispatcher_(kj::mv(dispatcher)) {}

  kj::Promise<void> leaderInfo(LeaderInfoContext context) override {
    context.getResults().setLeading(true);
    return kj::READY_NOW;
  }
  kj::Promise<void> dispatcher(DispatcherContext context) override {
    context.getResults().setDispatcher(dispatcher_);
    return kj::READY_NOW;
  }

 private:
  DispatcherGateway::Client dispatcher_;
};

class FencedEndpointTest : public ::testing::Test {
 protected:
  DispatcherGateway::Client fencedDispatcher(uint64_t epoch) {
    return fencedEndpoint<DispatcherGateway>(kj::heap<CountingDispatcher>(reached_), epoch,
                                             counters_);
  }

  EventLoop loop_;
  int reached_ = 0;
  FencingCounters counters_;
};

TEST_F(FencedEndpointTest, ACallWithTheTermsEpochReachesTheHandler) {
  auto dispatcher = fencedDispatcher(7);
  auto request = dispatcher.jobStatusRequest();
  request.setEpoch(7);
  auto response = loop_.run(request.send());
  EXPECT_FALSE(response.hasFailure());
  EXPECT_EQ(std::string(response.getStatus().getName().cStr()), "seen");
  EXPECT_EQ(reached_, 1);
  EXPECT_TRUE(counters_.all().empty());
  EXPECT_EQ(counters_.called("DispatcherGateway.jobStatus"), 1u);
}

TEST_F(FencedEndpointTest, AnyOtherEpochFailsWithAFencingErrorAndNeverReachesTheHandler) {
  auto dispatcher = fencedDispatcher(7);
  for (uint64_t stale : {6u, 8u, 0u}) {
    auto request = dispatcher.jobStatusRequest();
    request.setEpoch(stale);
    auto response = loop_.run(request.send());
    ASSERT_TRUE(response.hasFailure());
    auto failure = response.getFailure();
    ASSERT_TRUE(failure.isFencing());
    EXPECT_EQ(failure.getFencing().getExpected(), 7u);
    EXPECT_EQ(failure.getFencing().getReceived(), stale);
    const std::string message = failure.getMessage().cStr();
    EXPECT_NE(message.find("DispatcherGateway.jobStatus"), std::string::npos) << message;
    EXPECT_NE(message.find("epoch " + std::to_string(stale)), std::string::npos) << message;
    EXPECT_NE(message.find("epoch 7"), std::string::npos) << message;
  }
  EXPECT_EQ(reached_, 0);
  EXPECT_EQ(counters_.rejected("DispatcherGateway.jobStatus"), 3u);
  EXPECT_EQ(counters_.called("DispatcherGateway.jobStatus"), 3u);
}

TEST_F(FencedEndpointTest, MethodsWithoutAnEpochPassThrough) {
  auto bootstrap = fencedEndpoint<MasterBootstrap>(
      kj::heap<TermBootstrap>(fencedDispatcher(3)), 3, counters_);
  auto info = loop_.run(bootstrap.leaderInfoRequest().send());
  EXPECT_TRUE(info.getLeading());
  auto stale = bootstrap.handOverRequest();
  stale.setEpoch(2);
  auto refused = loop_.run(stale.send());
  ASSERT_TRUE(refused.hasFailure());
  EXPECT_TRUE(refused.getFailure().isFencing());
  EXPECT_EQ(counters_.rejected("MasterBootstrap.handOver"), 1u);
}

TEST_F(FencedEndpointTest, RevokingTheTermFailsEveryCapabilityItHandedOutAndCallsInFlight) {
  auto term = kj::heap<LeadershipTerm>(4, counters_);
  auto bootstrap = term->guard<MasterBootstrap::Client>(
      kj::heap<TermBootstrap>(fencedDispatcher(4)));
  auto request = bootstrap.dispatcherRequest();
  request.setEpoch(4);
  DispatcherGateway::Client gateway = loop_.run(request.send()).getDispatcher();

  auto status = gateway.jobStatusRequest();
  status.setEpoch(4);
  EXPECT_FALSE(loop_.run(status.send()).hasFailure());

  auto hanging = gateway.cancelJobRequest();
  hanging.setEpoch(4);
  auto inFlight = hanging.send();
  loop_.run(kj::evalLater([] {}));  // Let the call reach the handler.
  EXPECT_EQ(reached_, 2);

  term->revoke("handed over");
  EXPECT_TRUE(term->revoked());
  try {
    // Bounded: a membrane that never revokes would leave the call hanging.
    loop_.run(loop_.timer().timeoutAfter(10 * kj::SECONDS, kj::mv(inFlight)));
    ADD_FAILURE() << "a call in flight survived the revocation";
  } catch (const kj::Exception& e) {
    EXPECT_EQ(e.getType(), kj::Exception::Type::DISCONNECTED);
    EXPECT_NE(std::string(e.getDescription().cStr()).find("epoch 4"), std::string::npos)
        << e.getDescription().cStr();
  }
  // The gateway obtained through the bootstrap, and the bootstrap itself, are dead too, even
  // for a caller that sends the right epoch.
  auto after = gateway.jobStatusRequest();
  after.setEpoch(4);
  EXPECT_THROW(loop_.run(after.send()), kj::Exception);
  EXPECT_THROW(loop_.run(bootstrap.leaderInfoRequest().send()), kj::Exception);
  EXPECT_EQ(reached_, 2);
}

TEST_F(FencedEndpointTest, TheGatewayOfAnEndedTermAnswersFencingWhateverEpochItIsCalledWith) {
  LeadershipTerm term(6, counters_);
  DispatcherGateway::Client gateway = term.guard(fencedDispatcher(6));
  auto before = gateway.jobStatusRequest();
  before.setEpoch(6);
  EXPECT_FALSE(loop_.run(before.send()).hasFailure());

  term.revoke("handed over");
  for (uint64_t epoch : {uint64_t{6}, uint64_t{7}}) {
    auto request = gateway.jobStatusRequest();
    request.setEpoch(epoch);
    auto response = loop_.run(request.send());
    ASSERT_TRUE(response.hasFailure()) << "epoch " << epoch;
    ASSERT_TRUE(response.getFailure().isFencing()) << response.getFailure().getMessage().cStr();
    EXPECT_EQ(response.getFailure().getFencing().getExpected(), 0u);
    EXPECT_EQ(response.getFailure().getFencing().getReceived(), epoch);
    const std::string message = response.getFailure().getMessage().cStr();
    EXPECT_NE(message.find("DispatcherGateway.jobStatus refused: called with epoch " +
                           std::to_string(epoch)),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("the leadership term of epoch 6 is over (handed over)"),
              std::string::npos)
        << message;
  }
  EXPECT_EQ(reached_, 1);
  EXPECT_EQ(counters_.rejected("DispatcherGateway.jobStatus"), 2u);
}

TEST_F(FencedEndpointTest, RevokingTheTermDropsTheHandlersOfItsGatewaysAtOnce) {
  LeadershipTerm term(3, counters_);
  auto dispatcher = kj::heap<CountingDispatcher>(reached_);
  CountingDispatcher& handlers = *dispatcher;
  DispatcherGateway::Client gateway = term.serve<DispatcherGateway>(kj::mv(dispatcher));
  term.markReady();
  auto request = gateway.cancelJobRequest();
  request.setEpoch(3);
  auto inFlight = request.send();
  loop_.run(kj::evalLast([] {}));  // The handler runs and waits.
  ASSERT_EQ(reached_, 1);
  ASSERT_EQ(handlers.dropped_, 0);

  // In the same turn, before the term's services (its stores) are destroyed: Cap'n Proto alone
  // would keep the handler until the caller's Finish.
  term.revoke("handed over");
  EXPECT_EQ(handlers.dropped_, 1);
  EXPECT_THROW(loop_.run(kj::mv(inFlight)), kj::Exception);
}

TEST_F(FencedEndpointTest, AGateOfTheHighestSeenEpochRefusesLowerEpochsAndRisesWithHigherOnes) {
  std::vector<std::pair<uint64_t, uint64_t>> raised;
  HighestSeenEpoch gate(5, [&raised](uint64_t previous, uint64_t now) {
    raised.emplace_back(previous, now);
  });
  auto dispatcher = fencedEndpoint<DispatcherGateway>(kj::heap<CountingDispatcher>(reached_),
                                                      kj::attachRef(gate), counters_);
  auto call = [&](uint64_t epoch) {
    auto request = dispatcher.jobStatusRequest();
    request.setEpoch(epoch);
    return loop_.run(request.send());
  };
  EXPECT_FALSE(call(5).hasFailure());  // Equal to the highest seen: admitted, nothing raised.
  EXPECT_TRUE(raised.empty());
  EXPECT_FALSE(call(7).hasFailure());  // Higher: admitted and raised.
  EXPECT_EQ(gate.highest(), 7u);
  ASSERT_EQ(raised.size(), 1u);
  EXPECT_EQ(raised[0], std::make_pair(uint64_t{5}, uint64_t{7}));

  auto refused = call(6);  // Below the highest seen since.
  ASSERT_TRUE(refused.hasFailure());
  ASSERT_TRUE(refused.getFailure().isFencing());
  EXPECT_EQ(refused.getFailure().getFencing().getExpected(), 7u);
  EXPECT_EQ(refused.getFailure().getFencing().getReceived(), 6u);
  EXPECT_EQ(std::string(refused.getFailure().getMessage().cStr()),
            "DispatcherGateway.jobStatus refused: called with epoch 6, this process has seen "
            "epoch 7");
  EXPECT_EQ(reached_, 2);
  EXPECT_EQ(counters_.rejected("DispatcherGateway.jobStatus"), 1u);
  EXPECT_EQ(raised.size(), 1u);
}

TEST_F(FencedEndpointTest, OneGateSharedByTwoEndpointsRisesForBoth) {
  HighestSeenEpoch gate;
  auto first = fencedEndpoint<DispatcherGateway>(kj::heap<CountingDispatcher>(reached_),
                                                 kj::attachRef(gate), counters_);
  auto second = fencedEndpoint<DispatcherGateway>(kj::heap<CountingDispatcher>(reached_),
                                                  kj::attachRef(gate), counters_);
  auto raise = first.jobStatusRequest();
  raise.setEpoch(3);
  EXPECT_FALSE(loop_.run(raise.send()).hasFailure());
  auto stale = second.jobStatusRequest();
  stale.setEpoch(2);
  EXPECT_TRUE(loop_.run(stale.send()).getFailure().isFencing());
  gate.observe(9);  // Learned elsewhere (e.g. the leader node).
  auto older = first.jobStatusRequest();
  older.setEpoch(8);
  EXPECT_TRUE(loop_.run(older.send()).getFailure().isFencing());
  EXPECT_EQ(reached_, 1);
}

TEST_F(FencedEndpointTest, AGatewayOfATermThatIsNotReadyAnswersUnavailableWithoutReachingItsHandler) {
  LeadershipTerm term(2, counters_);
  DispatcherGateway::Client gateway =
      term.serve<DispatcherGateway>(kj::heap<CountingDispatcher>(reached_));
  auto early = gateway.jobStatusRequest();
  early.setEpoch(2);
  auto response = loop_.run(early.send());
  ASSERT_TRUE(response.hasFailure());
  ASSERT_TRUE(response.getFailure().isUnavailable());
  EXPECT_EQ(response.getFailure().getUnavailable().getRetryAfterMs(), kNotReadyRetryMs);
  EXPECT_EQ(std::string(response.getFailure().getMessage().cStr()),
            "the leader of epoch 2 is still recovering; retry shortly");
  EXPECT_FALSE(response.hasStatus());
  // The epoch is checked first: a stale caller learns it is fenced, not that it should wait.
  auto stale = gateway.jobStatusRequest();
  stale.setEpoch(1);
  EXPECT_TRUE(loop_.run(stale.send()).getFailure().isFencing());
  EXPECT_EQ(reached_, 0);

  term.markReady();
  EXPECT_TRUE(term.ready());
  auto later = gateway.jobStatusRequest();
  later.setEpoch(2);
  EXPECT_FALSE(loop_.run(later.send()).hasFailure());
  EXPECT_EQ(reached_, 1);
}

TEST_F(FencedEndpointTest, AGatewayServedImmediatelyReachesItsHandlerBeforeTheTermIsReady) {
  LeadershipTerm term(3, counters_);
  DispatcherGateway::Client waiting =
      term.serve<DispatcherGateway>(kj::heap<CountingDispatcher>(reached_));
  DispatcherGateway::Client immediate = term.serve<DispatcherGateway>(
      kj::heap<CountingDispatcher>(reached_), LeadershipTerm::Readiness::kImmediately);
  ASSERT_FALSE(term.ready());

  auto early = immediate.jobStatusRequest();
  early.setEpoch(3);
  auto response = loop_.run(early.send());
  EXPECT_FALSE(response.hasFailure());
  EXPECT_EQ(std::string(response.getStatus().getName().cStr()), "seen");
  EXPECT_EQ(reached_, 1);
  // The default still waits for markReady().
  auto held = waiting.jobStatusRequest();
  held.setEpoch(3);
  EXPECT_TRUE(loop_.run(held.send()).getFailure().isUnavailable());
  EXPECT_EQ(reached_, 1);
  // The epoch is still checked first.
  auto stale = immediate.jobStatusRequest();
  stale.setEpoch(2);
  EXPECT_TRUE(loop_.run(stale.send()).getFailure().isFencing());
  EXPECT_EQ(reached_, 1);

  // Revocation ends it like every gateway of the term: its running handlers are dropped, later
  // calls are fenced.
  auto running = immediate.cancelJobRequest();
  running.setEpoch(3);
  auto pending = running.send();
  loop_.run(kj::evalLast([] {}));
  EXPECT_EQ(reached_, 2);
  term.revoke("test");
  EXPECT_THROW(loop_.run(kj::mv(pending)), kj::Exception);
  auto after = immediate.jobStatusRequest();
  after.setEpoch(3);
  EXPECT_TRUE(loop_.run(after.send()).getFailure().isFencing());
  EXPECT_EQ(reached_, 2);
}

TEST_F(FencedEndpointTest, AMethodTheServerDoesNotImplementAnswersFailedPreconditionNamingIt) {
  auto dispatcher = fencedDispatcher(4);
  auto request = dispatcher.listTaskExecutorsRequest();
  request.setEpoch(4);
  auto response = loop_.run(request.send());
  ASSERT_TRUE(response.hasFailure());
  EXPECT_TRUE(response.getFailure().isFailedPrecondition());
  EXPECT_EQ(std::string(response.getFailure().getMessage().cStr()),
            "DispatcherGateway.listTaskExecutors is not implemented by this process");
}

TEST_F(FencedEndpointTest, DestroyingTheTermRevokesIt) {
  DispatcherGateway::Client gateway = nullptr;
  {
    LeadershipTerm term(9, counters_);
    gateway = term.guard(fencedDispatcher(9));
  }
  auto request = gateway.jobStatusRequest();
  request.setEpoch(9);
  auto response = loop_.run(request.send());
  ASSERT_TRUE(response.hasFailure());
  EXPECT_TRUE(response.getFailure().isFencing()) << response.getFailure().getMessage().cStr();
  EXPECT_NE(std::string(response.getFailure().getMessage().cStr()).find("leadership term ended"),
            std::string::npos)
      << response.getFailure().getMessage().cStr();
  EXPECT_EQ(reached_, 0);
}

}  // namespace
}  // namespace regent::rpc

// LeaderClient against scripted masters on loopback RPC and a hand-driven leader retrieval: it
// re-reads the leader after a fencing refusal, ends at once on a fatal refusal, retries a
// timed-out call against the same leader, gives up at its deadline naming the last obstacle,
// learns the epoch from a master given by address, and keeps the previous leader's connection
// open for previousLeaderLinger after moving to a new leader. With a credential it calls only a
// master that proves it holds the secret: one that asks for no credential or answers a wrong
// proof is refused, counted and never called, and the next leader named is reached.
#include <gtest/gtest.h>
#include <capnp/capability.h>

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/leader_client.h"
#include "common/event_loop.h"
#include "rpc/auth_proof.h"
#include "rpc/auth_roles.h"
#include "rpc/failure.h"
#include "rpc/rpc_server.h"
#include "rpc/schema/gateways.capnp.h"
#include "tests/client/hand_retrieval_test_util.h"

namespace regent::client {
namespace {

using testing::HandRetrieval;

constexpr Duration kBound{10000};

// What a scripted master answers `dispatcher` with, in order; once the script is used up it
// answers success for its own epoch and fencing for any other.
enum class Answer { kFencing, kInvalidArgument, kHang };

// How a scripted master answers authChallenge and authenticate: it asks for no credential (an
// `rpc.auth: none` master, or an impostor), proves it holds the secret, answers with a proof of
// another secret, or refuses the credential.
enum class Authentication { kNotRequired, kProves, kWrongProof, kRefuses };

constexpr const char* kSecret = "worker-secret-0123456789";

struct MasterScript {
  uint64_t epoch = 1;
  std::string masterId;
  std::string rpcAddress;  // What leaderInfo names as the leader's address.
  bool leading = true;
  std::deque<Answer> answers;
  std::vector<uint64_t> dispatcherEpochs;  // The epoch of every dispatcher call received.
  int leaderInfoCalls = 0;
  Authentication authentication = Authentication::kNotRequired;
  int authenticateCalls = 0;
  std::vector<kj::Own<rpc::ConnectionGate>> gates;  // Of every bootstrap the server made.
  int alive = 0;  // ScriptedMasters not destroyed yet (bootstraps the server still holds).
};

class ScriptedMaster final : public wire::MasterBootstrap::Server {
 public:
  explicit ScriptedMaster(std::shared_ptr<MasterScript> script) : script_(std::move(script)) {
    ++script_->alive;
  }
  ~ScriptedMaster() noexcept { --script_->alive; }

  kj::Promise<void> leaderInfo(LeaderInfoContext context) override {
    ++script_->leaderInfoCalls;
    auto results = context.getResults();
    auto leader = results.initLeader().initLeader();
    leader.setEpoch(script_->epoch);
    leader.setMasterId(script_->masterId);
    leader.setRpcAddress(script_->rpcAddress);
    results.setLeading(script_->leading);
    return kj::READY_NOW;
  }

  kj::Promise<void> authChallenge(AuthChallengeContext context) override {
    auto results = context.getResults();
    serverNonce_ = rpc::randomAuthNonce();
    results.setServerNonce(bytesOf(serverNonce_));
    results.setRequired(script_->authentication != Authentication::kNotRequired);
    return kj::READY_NOW;
  }

  kj::Promise<void> authenticate(AuthenticateContext context) override {
    ++script_->authenticateCalls;
    auto params = context.getParams();
    auto results = context.getResults();
    const std::string clientNonce(reinterpret_cast<const char*>(params.getClientNonce().begin()),
                                  params.getClientNonce().size());
    const char* role = rpc::roleName(params.getRole());
    switch (script_->authentication) {
      case Authentication::kNotRequired:
      case Authentication::kRefuses:
        rpc::failures::unauthenticated(results.initFailure(),
                                       "authentication as worker refused: wrong proof");
        return kj::READY_NOW;
      case Authentication::kProves:
        results.setServerProof(bytesOf(rpc::authProof(rpc::ProofSide::kServer, kSecret, role,
                                                      serverNonce_, clientNonce)));
        break;
      case Authentication::kWrongProof:
        results.setServerProof(bytesOf(rpc::authProof(rpc::ProofSide::kServer,
                                                      "another-secret-0123456789", role,
                                                      serverNonce_, clientNonce)));
        break;
    }
    results.setBootstrap(kj::heap<ScriptedMaster>(script_));
    return kj::READY_NOW;
  }

  kj::Promise<void> dispatcher(DispatcherContext context) override {
    const uint64_t epoch = context.getParams().getEpoch();
    script_->dispatcherEpochs.push_back(epoch);
    auto results = context.getResults();
    std::optional<Answer> answer;
    if (!script_->answers.empty()) {
      answer = script_->answers.front();
      script_->answers.pop_front();
    } else if (epoch != script_->epoch) {
      answer = Answer::kFencing;
    }
    if (!answer) return kj::READY_NOW;
    switch (*answer) {
      case Answer::kFencing: {
        auto failure = results.initFailure();
        failure.setMessage("epoch " + std::to_string(epoch) + " is not " +
                           std::to_string(script_->epoch));
        failure.initFencing().setExpected(script_->epoch);
        break;
      }
      case Answer::kInvalidArgument: {
        auto invalid = results.initFailure().initInvalidArgument();
        invalid.setField("vertices[0].name");
        invalid.setMessage("must not be empty");
        break;
      }
      case Answer::kHang:
        context.allowCancellation();
        return kj::NEVER_DONE;
    }
    return kj::READY_NOW;
  }

 private:
  static kj::ArrayPtr<const kj::byte> bytesOf(const std::string& text) {
    return kj::arrayPtr(reinterpret_cast<const kj::byte*>(text.data()), text.size());
  }

  std::shared_ptr<MasterScript> script_;
  std::string serverNonce_;
};

class LeaderClientTest : public ::testing::Test {
 protected:
  ~LeaderClientTest() noexcept override = default;

  // A scripted master on a free loopback port; its script names that address.
  std::shared_ptr<MasterScript> startMaster(const std::string& masterId, uint64_t epoch) {
    auto script = std::make_shared<MasterScript>();
    script->masterId = masterId;
    script->epoch = epoch;
    auto listening = loop_.run(rpc::RpcServer::listen(
        loop_.io().getNetwork(), loop_.timer(), "127.0.0.1:0", rpc::RpcOptions{},
        [script](const rpc::RpcPeer& peer) -> capnp::Capability::Client {
          script->gates.push_back(kj::addRef(*peer.gate));
          return kj::heap<ScriptedMaster>(script);
        }));
    if (!listening.ok()) throw std::runtime_error(listening.error().message);
    script->rpcAddress = "127.0.0.1:" + std::to_string(listening.value()->port());
    servers_.push_back(kj::mv(listening).value());
    return script;
  }

  static leader::LeaderInfo leaderOf(const MasterScript& script) {
    leader::LeaderInfo leader;
    leader.epoch = script.epoch;
    leader.masterId = script.masterId;
    leader.rpcAddress = script.rpcAddress;
    return leader;
  }

  LeaderClientOptions options(Duration callTimeout = Duration(5000)) {
    LeaderClientOptions options;
    options.rpc.callTimeout = callTimeout;
    options.backoffInitial = Duration(5);
    options.backoffMax = Duration(20);
    options.clusterName = "cluster \"test\"";
    return options;
  }

  // options() with the worker credential of kSecret.
  LeaderClientOptions withCredential() {
    LeaderClientOptions with = options();
    with.credential = rpc::ClientCredential{wire::Role::WORKER, kSecret};
    return with;
  }

  // Runs the loop until `done` holds (false after kBound).
  bool runUntil(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + kBound;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      loop_.run(loop_.timer().afterDelay(kj::MILLISECONDS));
    }
    return done();
  }

  kj::Own<LeaderClient> following(std::optional<LeaderClientOptions> with = std::nullopt) {
    return kj::heap<LeaderClient>(loop_.io().getNetwork(), loop_.timer(),
                                  kj::heap<HandRetrieval>(current_, reads_, readError_),
                                  with ? *with : options());
  }

  // The bootstrap of the leader `client` calls now, obtained through a call.
  wire::MasterBootstrap::Client bootstrapOfLeader(LeaderClient& client) {
    auto held = std::make_shared<std::optional<wire::MasterBootstrap::Client>>();
    auto result = loop_.run(client.call<uint64_t>(
        [held](wire::MasterBootstrap::Client bootstrap, const leader::LeaderInfo& leader)
            -> kj::Promise<rpc::Attempt<uint64_t>> {
          held->emplace(kj::mv(bootstrap));
          return rpc::Attempt<uint64_t>(leader.epoch);
        },
        kBound));
    if (!result.ok()) throw std::runtime_error(result.error().message);
    return **held;
  }

  // Moves `client` from the leader `from` to the leader `to`: `from` refuses the next call with
  // fencing, and the record then names `to`.
  void moveLeader(LeaderClient& client, MasterScript& from, const MasterScript& to) {
    from.epoch = to.epoch;
    *current_ = leaderOf(to);
    auto result = loop_.run(client.call<uint64_t>(dispatcherCall(client), kBound));
    if (!result.ok()) throw std::runtime_error(result.error().message);
  }

  // Whether a leaderInfo call through `bootstrap` (of a previous leader's connection) succeeds.
  bool answers(wire::MasterBootstrap::Client bootstrap) {
    return loop_.run(bootstrap.leaderInfoRequest().send().then(
        [](capnp::Response<wire::MasterBootstrap::LeaderInfoResults>) { return true; },
        [](kj::Exception&&) { return false; }));
  }

  // One dispatcher call with the leader's epoch: the epoch the call was made with, or the
  // master's Failure.
  static LeaderClient::Fn<uint64_t> dispatcherCall(LeaderClient& client) {
    return [&client](wire::MasterBootstrap::Client bootstrap, const leader::LeaderInfo& leader) {
      auto request = bootstrap.dispatcherRequest();
      request.setEpoch(leader.epoch);
      const uint64_t epoch = leader.epoch;
      return client.deadline().send(kj::mv(request)).then(
          [epoch](capnp::Response<wire::MasterBootstrap::DispatcherResults> response)
              -> rpc::Attempt<uint64_t> {
            if (response.hasFailure()) return rpc::CallFailure::from(response.getFailure());
            return epoch;
          });
    };
  }

  EventLoop loop_;
  std::vector<kj::Own<rpc::RpcServer>> servers_;
  std::shared_ptr<std::optional<leader::LeaderInfo>> current_ =
      std::make_shared<std::optional<leader::LeaderInfo>>();
  std::shared_ptr<int> reads_ = std::make_shared<int>(0);
  std::shared_ptr<std::optional<Error>> readError_ = std::make_shared<std::optional<Error>>();
};

TEST_F(LeaderClientTest, AFencedCallReadsTheLeaderAgainAndSucceedsAgainstTheNextOne) {
  auto deposed = startMaster("a", 1);
  auto next = startMaster("b", 2);
  // The record still names the deposed leader of epoch 1, which knows of epoch 2 and refuses
  // (as ZooKeeper does until the old session is gone); then the record names the new leader.
  *current_ = leaderOf(*deposed);
  deposed->epoch = 2;
  auto client = following();
  auto call = client->call<uint64_t>(dispatcherCall(*client), kBound);
  const auto deadline = std::chrono::steady_clock::now() + kBound;
  while (deposed->dispatcherEpochs.empty() && std::chrono::steady_clock::now() < deadline) {
    loop_.run(loop_.timer().afterDelay(kj::MILLISECONDS));
  }
  ASSERT_FALSE(deposed->dispatcherEpochs.empty());
  *current_ = leaderOf(*next);
  auto result = loop_.run(kj::mv(call));
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(result.value(), 2u);
  EXPECT_EQ(next->dispatcherEpochs, std::vector<uint64_t>{2});
  for (uint64_t epoch : deposed->dispatcherEpochs) EXPECT_EQ(epoch, 1u);
  EXPECT_EQ(*reads_, static_cast<int>(deposed->dispatcherEpochs.size()) + 1)
      << "one read of the leader per attempt after a fencing refusal";
}

TEST_F(LeaderClientTest, AFatalRefusalEndsTheCallAtOnceWithItsDescription) {
  auto master = startMaster("a", 1);
  master->answers = {Answer::kInvalidArgument};
  *current_ = leaderOf(*master);
  auto client = following();
  auto result = loop_.run(client->call<uint64_t>(dispatcherCall(*client), kBound));
  ASSERT_FALSE(result.ok());
  EXPECT_FALSE(result.error().isRetryable());
  EXPECT_EQ(result.error().message, "vertices[0].name: must not be empty");
  EXPECT_EQ(master->dispatcherEpochs.size(), 1u);
}

TEST_F(LeaderClientTest, ATimedOutCallIsRetriedAgainstTheSameLeaderWithoutReadingItAgain) {
  auto master = startMaster("a", 1);
  master->answers = {Answer::kHang};
  *current_ = leaderOf(*master);
  auto client = kj::heap<LeaderClient>(loop_.io().getNetwork(), loop_.timer(),
                                       kj::heap<HandRetrieval>(current_, reads_, readError_),
                                       options(Duration(100)));
  auto result = loop_.run(client->call<uint64_t>(dispatcherCall(*client), kBound));
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(master->dispatcherEpochs, (std::vector<uint64_t>{1, 1}));
  EXPECT_EQ(*reads_, 1);
}

TEST_F(LeaderClientTest, GivesUpAtItsDeadlineNamingTheLastObstacle) {
  auto client = following();  // No master leads.
  auto result = loop_.run(client->call<uint64_t>(dispatcherCall(*client), Duration(100)));
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.error().isRetryable());
  EXPECT_EQ(result.error().message, "no master leads cluster \"test\"");
  EXPECT_TRUE(client->lastObstacleWasNoLeader());
  EXPECT_GE(*reads_, 2) << "it kept reading the leader until the deadline";
}

TEST_F(LeaderClientTest, ALeaderThatCannotBeReadForGoodEndsTheCallAtOnce) {
  // What the ZooKeeper retrieval answers when the credential may not read the cluster.
  *readError_ = Error::fatal("ZNOAUTH (not authenticated) reading /regent/test/leader");
  auto client = following();
  auto result = loop_.run(client->call<uint64_t>(dispatcherCall(*client), kBound));
  ASSERT_FALSE(result.ok());
  EXPECT_FALSE(result.error().isRetryable());
  EXPECT_EQ(result.error().message,
            "cannot read the leader of cluster \"test\": ZNOAUTH (not authenticated) reading "
            "/regent/test/leader");
  EXPECT_TRUE(client->lastCallFailedToFindLeader());
  EXPECT_EQ(*reads_, 1) << "a permanent refusal is not retried";
}

TEST_F(LeaderClientTest, ATransientLeaderReadFailureIsRetriedAndNamedAtTheDeadline) {
  *readError_ = Error::retryable("ZCONNECTIONLOSS (connection lost)");
  auto client = following();
  auto result = loop_.run(client->call<uint64_t>(dispatcherCall(*client), Duration(100)));
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.error().isRetryable());
  EXPECT_EQ(result.error().message,
            "cannot read the leader of cluster \"test\": ZCONNECTIONLOSS (connection lost)");
  EXPECT_FALSE(client->lastCallFailedToFindLeader());
  EXPECT_GE(*reads_, 2);
}

TEST_F(LeaderClientTest, ARefusedConnectionIsTheCauseNamedAtTheDeadline) {
  auto master = startMaster("a", 1);
  *current_ = leaderOf(*master);
  servers_.clear();  // Nothing listens there any more.
  auto client = following();
  auto result = loop_.run(client->call<uint64_t>(dispatcherCall(*client), Duration(300)));
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.error().isRetryable());
  // The RPC client retries the connection by itself, so the attempt is still waiting for its
  // bootstrap at the deadline; the cause is the client's last failed connect.
  EXPECT_EQ(result.error().message.rfind("no answer yet: waiting for an answer from the leader a "
                                         "at " + master->rpcAddress + " (epoch 1); cannot connect "
                                         "to " + master->rpcAddress + ": ",
                                         0),
            0u)
      << result.error().message;
  EXPECT_NE(result.error().message.find("Connection refused"), std::string::npos)
      << result.error().message;
}

TEST_F(LeaderClientTest, ABootstrapThatTimesOutNamesTheRefusedConnectionBehindIt) {
  auto master = startMaster("a", 1);
  *current_ = leaderOf(*master);
  servers_.clear();
  auto client = kj::heap<LeaderClient>(loop_.io().getNetwork(), loop_.timer(),
                                       kj::heap<HandRetrieval>(current_, reads_, readError_),
                                       options(Duration(50)));
  auto result = loop_.run(client->call<uint64_t>(dispatcherCall(*client), Duration(500)));
  ASSERT_FALSE(result.ok());
  const std::string& message = result.error().message;
  EXPECT_EQ(message.rfind("the leader a at " + master->rpcAddress + " (epoch 1): ", 0), 0u)
      << message;
  EXPECT_NE(message.find("(cannot connect to " + master->rpcAddress + ": "), std::string::npos)
      << message;
  EXPECT_NE(message.find("Connection refused"), std::string::npos) << message;
}

TEST_F(LeaderClientTest, AnAttemptStillWaitingAtTheDeadlineIsNamedWithTheStepItWaitsFor) {
  auto master = startMaster("a", 1);
  master->answers = {Answer::kHang};
  *current_ = leaderOf(*master);
  auto client = following();  // rpc.call-timeout 5s: the one attempt outlives the call.
  auto result = loop_.run(client->call<uint64_t>(dispatcherCall(*client), Duration(200)));
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.error().isRetryable());
  EXPECT_EQ(result.error().message,
            "no answer yet: waiting for an answer from the leader a at " + master->rpcAddress +
                " (epoch 1) (each RPC may take up to 5s, rpc.call-timeout)");
}

TEST_F(LeaderClientTest, AMasterAddressIsAskedForTheEpochAndNamesTheLeaderItDoesNotHold) {
  auto leaderMaster = startMaster("leader", 7);
  auto standby = startMaster("standby", 7);
  standby->leading = false;
  standby->rpcAddress = leaderMaster->rpcAddress;  // The standby names the leader.
  const std::string standbyAddress = "127.0.0.1:" + std::to_string(servers_[1]->port());

  LeaderClient direct(loop_.io().getNetwork(), loop_.timer(), standbyAddress, options());
  auto result = loop_.run(direct.call<uint64_t>(dispatcherCall(direct), kBound));
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(result.value(), 7u);
  EXPECT_EQ(leaderMaster->dispatcherEpochs, std::vector<uint64_t>{7});
  EXPECT_TRUE(standby->dispatcherEpochs.empty());

  // leaderAbove() asks again until the master names a later term: it does not end on the answer
  // naming epoch 7, which the next question shows (it is asked only after that answer).
  bool ended = false;
  auto above = direct.leaderAbove(7)
                   .then([&ended](leader::LeaderInfo info) {
                     ended = true;
                     return info;
                   })
                   .eagerlyEvaluate(nullptr);
  const int asked = standby->leaderInfoCalls;
  ASSERT_TRUE(runUntil([&] { return ended || standby->leaderInfoCalls >= asked + 2; }));
  EXPECT_FALSE(ended) << "leaderAbove(7) ended on an answer naming epoch 7";
  standby->epoch = 8;
  leader::LeaderInfo next = loop_.run(kj::mv(above));
  EXPECT_EQ(next.epoch, 8u);
}

TEST_F(LeaderClientTest, ThePreviousLeadersConnectionStaysOpenForTheLinger) {
  auto deposed = startMaster("a", 1);
  auto next = startMaster("b", 2);
  *current_ = leaderOf(*deposed);
  auto with = options();
  with.previousLeaderLinger = Duration(600000);
  auto client = following(with);
  wire::MasterBootstrap::Client old = bootstrapOfLeader(*client);
  moveLeader(*client, *deposed, *next);
  EXPECT_EQ(next->dispatcherEpochs, std::vector<uint64_t>{2});
  EXPECT_TRUE(answers(old)) << "a capability of the previous leader's connection still works";
}

TEST_F(LeaderClientTest, WithoutALingerThePreviousLeadersConnectionClosesAtOnce) {
  auto deposed = startMaster("a", 1);
  auto next = startMaster("b", 2);
  *current_ = leaderOf(*deposed);
  auto client = following();
  wire::MasterBootstrap::Client old = bootstrapOfLeader(*client);
  moveLeader(*client, *deposed, *next);
  EXPECT_FALSE(answers(old));
}

TEST_F(LeaderClientTest, ThePreviousLeadersConnectionClosesWhenTheLingerEnds) {
  auto deposed = startMaster("a", 1);
  auto next = startMaster("b", 2);
  *current_ = leaderOf(*deposed);
  auto with = options();
  with.previousLeaderLinger = Duration(100);
  auto client = following(with);
  wire::MasterBootstrap::Client old = bootstrapOfLeader(*client);
  moveLeader(*client, *deposed, *next);
  const auto deadline = std::chrono::steady_clock::now() + kBound;
  while (answers(old) && std::chrono::steady_clock::now() < deadline) {
    loop_.run(loop_.timer().afterDelay(10 * kj::MILLISECONDS));
  }
  EXPECT_FALSE(answers(old)) << "closed once the linger ended";
  EXPECT_TRUE(answers(bootstrapOfLeader(*client))) << "the current leader's connection stays";
}

// The deposed leader closes the connection (its term is over): the linger ends then, and the
// client does not dial that leader again for the rest of it.
TEST_F(LeaderClientTest, APreviousLeadersConnectionThatEndsEndsItsLingerAndIsNotDialledAgain) {
  auto deposed = startMaster("a", 1);
  auto next = startMaster("b", 2);
  *current_ = leaderOf(*deposed);
  auto with = options();
  with.previousLeaderLinger = Duration(600000);
  auto client = following(with);
  wire::MasterBootstrap::Client old = bootstrapOfLeader(*client);
  moveLeader(*client, *deposed, *next);
  ASSERT_TRUE(answers(old));
  ASSERT_TRUE(client->lingering());
  for (auto& gate : deposed->gates) gate->close("the leader's term of epoch 1 is over");
  // The linger ends with its connection (not after its 10 minutes), and its client with it: that
  // leader is not dialled again.
  ASSERT_TRUE(runUntil([&] { return !client->lingering(); }));
  EXPECT_FALSE(answers(old));
  EXPECT_EQ(servers_[0]->connectionsAccepted(), 1u);
  EXPECT_TRUE(answers(bootstrapOfLeader(*client))) << "the current leader's connection stays";
}

TEST_F(LeaderClientTest, AskingAMasterThatDoesNotLeadLeavesTheLeadersConnectionAlone) {
  auto leaderMaster = startMaster("leader", 7);
  auto standby = startMaster("standby", 7);
  standby->leading = false;
  standby->rpcAddress = leaderMaster->rpcAddress;
  const std::string standbyAddress = "127.0.0.1:" + std::to_string(servers_[1]->port());
  LeaderClient direct(loop_.io().getNetwork(), loop_.timer(), standbyAddress, options());
  wire::MasterBootstrap::Client leaders = bootstrapOfLeader(direct);

  // The leader watch asks the standby (again and again while the leadership stays).
  auto above = direct.leaderAbove(7).eagerlyEvaluate(nullptr);
  const int asked = standby->leaderInfoCalls;
  const auto deadline = std::chrono::steady_clock::now() + kBound;
  while (standby->leaderInfoCalls < asked + 2 && std::chrono::steady_clock::now() < deadline) {
    loop_.run(loop_.timer().afterDelay(kj::MILLISECONDS));
  }
  ASSERT_GE(standby->leaderInfoCalls, asked + 2);
  EXPECT_TRUE(answers(leaders)) << "the connection to the leader was not moved to the standby";
}

// A worker whose registration waits out a long backoff (its leader died; the record names the
// next leader only once the old session expires) calls the next leader as soon as the watch
// reports it, not after the backoff.
TEST_F(LeaderClientTest, ANewLeaderFromTheWatchEndsTheBackoffOfACallThatFoundNone) {
  auto master = startMaster("a", 1);
  auto retrieval = kj::heap<HandRetrieval>(current_, reads_, readError_);
  HandRetrieval& watch = *retrieval;
  auto with = options();
  // Far beyond the call's bound: only the watch can end the wait in time.
  with.backoffInitial = Duration(600000);
  with.backoffMax = Duration(600000);
  LeaderClient client(loop_.io().getNetwork(), loop_.timer(), kj::mv(retrieval), with);
  auto call = client.call<uint64_t>(dispatcherCall(client), kBound);
  // The first attempt finds no leader; the call then waits out its backoff.
  const auto deadline = std::chrono::steady_clock::now() + kBound;
  while (*reads_ == 0 && std::chrono::steady_clock::now() < deadline) {
    loop_.run(loop_.timer().afterDelay(kj::MILLISECONDS));
  }
  ASSERT_EQ(*reads_, 1);

  *current_ = leaderOf(*master);
  watch.announce();
  auto result = loop_.run(kj::mv(call));
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(result.value(), 1u);
  EXPECT_EQ(master->dispatcherEpochs, std::vector<uint64_t>{1});
}

TEST_F(LeaderClientTest, WithACredentialAMasterThatAsksForNoneIsRefusedUntilTheRealLeaderIsNamed) {
  auto rogue = startMaster("rogue", 100000);
  auto real = startMaster("real", 3);
  real->authentication = Authentication::kProves;
  *current_ = leaderOf(*rogue);
  auto client = following(withCredential());
  auto call = client->call<uint64_t>(dispatcherCall(*client), kBound);
  // Refused, and again: the attempts go on (the leader is read again each time), never
  // downgraded to calling the rogue.
  ASSERT_TRUE(runUntil([&] {
    return client->mastersRefused(rpc::MasterRefusal::kNotChallenged) >= 2;
  }));
  EXPECT_TRUE(rogue->dispatcherEpochs.empty());
  EXPECT_EQ(rogue->authenticateCalls, 0) << "no proof is sent to a master that asks for none";
  EXPECT_GE(*reads_, 2);
  EXPECT_EQ(client->lastObstacle().rfind("refusing the master at " + rogue->rpcAddress +
                                             " (named the leader rogue of epoch 100000): it asks "
                                             "for no credential",
                                         0),
            0u)
      << client->lastObstacle();

  *current_ = leaderOf(*real);
  auto result = loop_.run(kj::mv(call));
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(result.value(), 3u);
  EXPECT_EQ(real->dispatcherEpochs, std::vector<uint64_t>{3});
  EXPECT_EQ(real->authenticateCalls, 1);
  EXPECT_TRUE(rogue->dispatcherEpochs.empty());
  EXPECT_EQ(client->mastersRefused(rpc::MasterRefusal::kWrongProof), 0u);
}

TEST_F(LeaderClientTest, OnceAuthenticatedTheMasterLetsGoOfTheFirstBootstrapAndNoneIsAskedForAgain) {
  auto real = startMaster("real", 3);
  real->authentication = Authentication::kProves;
  *current_ = leaderOf(*real);
  auto client = following(withCredential());
  for (int i = 0; i < 3; ++i) {
    auto result = loop_.run(client->call<uint64_t>(dispatcherCall(*client), kBound));
    ASSERT_TRUE(result.ok()) << result.error().message;
  }
  EXPECT_EQ(real->authenticateCalls, 1);
  EXPECT_EQ(real->gates.size(), 1u) << "a later call asked for the bootstrap again";
  // Only the authenticated bootstrap is left on the master, the connection still open.
  ASSERT_TRUE(runUntil([&] { return real->alive == 1; }))
      << real->alive << " bootstraps held on the master";
  // And the next call goes through without a new bootstrap or authentication.
  auto result = loop_.run(client->call<uint64_t>(dispatcherCall(*client), kBound));
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(real->gates.size(), 1u);
  EXPECT_EQ(real->authenticateCalls, 1);
}

TEST_F(LeaderClientTest, WithACredentialAMasterWhoseProofDoesNotVerifyIsRefusedAndNamedAtTheDeadline) {
  auto impostor = startMaster("impostor", 7);
  impostor->authentication = Authentication::kWrongProof;
  *current_ = leaderOf(*impostor);
  auto client = following(withCredential());
  auto result = loop_.run(client->call<uint64_t>(dispatcherCall(*client), Duration(300)));
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.error().isRetryable()) << "retried like an unreachable leader until then";
  EXPECT_EQ(result.error().message.rfind("refusing the master at " + impostor->rpcAddress, 0), 0u)
      << result.error().message;
  EXPECT_NE(result.error().message.find("could not prove it holds the role's secret"),
            std::string::npos)
      << result.error().message;
  EXPECT_GE(client->mastersRefused(rpc::MasterRefusal::kWrongProof), 1u);
  EXPECT_TRUE(impostor->dispatcherEpochs.empty());
}

TEST_F(LeaderClientTest, AMasterRefusingTheCredentialEndsTheCallAndTheNextCallReadsTheLeaderAgain) {
  auto refusing = startMaster("refusing", 100000);
  refusing->authentication = Authentication::kRefuses;
  auto real = startMaster("real", 3);
  real->authentication = Authentication::kProves;
  *current_ = leaderOf(*refusing);
  auto retrieval = kj::heap<HandRetrieval>(current_, reads_, readError_);
  HandRetrieval& watch = *retrieval;
  LeaderClient client(loop_.io().getNetwork(), loop_.timer(), kj::mv(retrieval),
                      withCredential());
  watch.announce();
  auto refused = loop_.run(client.call<uint64_t>(dispatcherCall(client), kBound));
  ASSERT_FALSE(refused.ok());
  EXPECT_FALSE(refused.error().isRetryable());
  EXPECT_EQ(refused.error().message, "authentication as worker refused: wrong proof");

  // The record names the real leader again, with a lower epoch than the one the refusing master
  // was named with: nothing of that master is kept, so the next call reaches the real leader.
  *current_ = leaderOf(*real);
  watch.announce();
  auto result = loop_.run(client.call<uint64_t>(dispatcherCall(client), kBound));
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(real->dispatcherEpochs, std::vector<uint64_t>{3});
  EXPECT_TRUE(refusing->dispatcherEpochs.empty());
}

TEST_F(LeaderClientTest, WithoutACredentialAMasterThatAsksForNoneIsCalledAsItIs) {
  auto master = startMaster("a", 1);
  *current_ = leaderOf(*master);
  auto client = following();
  auto result = loop_.run(client->call<uint64_t>(dispatcherCall(*client), kBound));
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(master->dispatcherEpochs, std::vector<uint64_t>{1});
  EXPECT_EQ(client->mastersRefused(rpc::MasterRefusal::kNotChallenged), 0u);
}

}  // namespace
}  // namespace regent::client

// ZooKeeperClient against the real ZooKeeper server: operations, watches, transactions, the
// session state machine (through the TCP fault proxy and forced expiry), digest ACLs and the
// masters' check of the ACLs they find.
#include "ha/zookeeper_client.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <kj/debug.h>

#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>

#include "common/event_loop.h"
#include "common/ids.h"
#include "ha/zookeeper_acl.h"
#include "tests/fixtures/loop_wait_test_util.h"
#include "tests/fixtures/tcp_fault_proxy.h"
#include "tests/fixtures/zookeeper_server.h"
#include "tests/fixtures/zookeeper_test_client.h"
#include "tests/ha/zookeeper_client_test_util.h"

namespace regent::ha {
namespace {

using testing::sharedZooKeeperServer;

constexpr Duration kWait{30000};

class ZooKeeperClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = sharedZooKeeperServer();
    ASSERT_TRUE(server.ok()) << server.error().message;
    server_ = server.value();
    // Each test owns a fresh cluster root.
    root_ = "/regent-ha-test/" + JobId::random().toHex();
  }

  ZooKeeperClientOptions options(std::string quorum = "") {
    ZooKeeperClientOptions o;
    o.quorum = quorum.empty() ? server_->connectString() : quorum;
    o.root = root_;
    o.sessionTimeout = Duration(3000);
    return o;
  }

  kj::Own<ZooKeeperClient> connect(ZooKeeperClientOptions o) {
    return connectForTests(loop_, std::move(o), kWait);
  }

  template <typename T>
  T run(kj::Promise<T>&& promise) {
    return loop_.run(kj::mv(promise).exclusiveJoin(
        loop_.timer().afterDelay(kWait.count() * kj::MILLISECONDS).then([]() -> T {
          KJ_FAIL_REQUIRE("timed out waiting for ZooKeeper");
        })));
  }

  EventLoop loop_;
  testing::ZooKeeperServer* server_ = nullptr;
  std::string root_;
};

// Records every session state a client reports, and lets a test wait for one.
class SessionRecorder {
 public:
  SessionRecorder(EventLoop& loop, Coordination& client)
      : loop_(loop), registration_(client.onSessionState([this](SessionState s) {
          states_.push_back(s);
          if (waiting_ && s == *waiting_) {
            waiting_.reset();
            KJ_IF_MAYBE(f, fulfiller_) { f->get()->fulfill(); }
            fulfiller_ = nullptr;
          }
        })) {}

  // Runs the loop until `state` is reported (counting from the last call), or fails after kWait.
  bool waitFor(SessionState state) {
    for (size_t i = seen_; i < states_.size(); ++i) {
      if (states_[i] == state) {
        seen_ = i + 1;
        return true;
      }
    }
    auto paf = kj::newPromiseAndFulfiller<void>();
    waiting_ = state;
    fulfiller_ = kj::mv(paf.fulfiller);
    const bool reached =
        loop_.run(paf.promise.then([] { return true; })
                      .exclusiveJoin(loop_.timer()
                                         .afterDelay(kWait.count() * kj::MILLISECONDS)
                                         .then([] { return false; })));
    seen_ = states_.size();
    return reached;
  }

  const std::vector<SessionState>& states() const { return states_; }

 private:
  EventLoop& loop_;
  std::vector<SessionState> states_;
  size_t seen_ = 0;
  std::optional<SessionState> waiting_;
  kj::Maybe<kj::Own<kj::PromiseFulfiller<void>>> fulfiller_;
  kj::Own<void> registration_;
};

TEST_F(ZooKeeperClientTest, CreatesReadsUpdatesAndDeletesNodesUnderTheRoot) {
  auto client = connect(options());
  EXPECT_EQ(client->sessionState(), SessionState::kConnected);
  EXPECT_NE(client->sessionId(), 0);

  // The root does not exist yet: creating below it needs ensurePath.
  EXPECT_EQ(run(client->create("a", "x", CreateMode::kPersistent)).code, ZkCode::kNoNode);
  ASSERT_TRUE(run(client->ensurePath("")).ok());
  auto created = run(client->create("a", "one", CreateMode::kPersistent));
  ASSERT_TRUE(created.ok()) << zkCodeName(created.code);
  EXPECT_EQ(created.value, "a");
  EXPECT_EQ(run(client->create("a", "again", CreateMode::kPersistent)).code,
            ZkCode::kNodeExists);

  auto read = run(client->get("a"));
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read.value.data, "one");
  EXPECT_EQ(read.value.stat.version, 0);

  // Versioned update: the right version wins, a stale one is refused and changes nothing.
  auto updated = run(client->set("a", "two", 0));
  ASSERT_TRUE(updated.ok());
  EXPECT_EQ(updated.value.version, 1);
  EXPECT_EQ(run(client->set("a", "stale", 0)).code, ZkCode::kBadVersion);
  EXPECT_EQ(run(client->get("a")).value.data, "two");

  // The node really lives under the root, as another client sees it.
  auto raw = testing::ZooKeeperTestClient::connect(server_->connectString());
  ASSERT_TRUE(raw.ok());
  auto rawData = raw.value()->get(root_ + "/a");
  ASSERT_TRUE(rawData.ok());
  EXPECT_EQ(rawData.value(), "two");

  EXPECT_EQ(run(client->remove("a", 0)).code, ZkCode::kBadVersion);
  EXPECT_TRUE(run(client->remove("a", 1)).ok());
  auto gone = run(client->exists("a"));
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone.value.has_value());
  EXPECT_EQ(run(client->get("a")).code, ZkCode::kNoNode);
  EXPECT_EQ(run(client->get("/absolute")).code, ZkCode::kBadArguments);
}

TEST_F(ZooKeeperClientTest, SequentialAndEphemeralNodes) {
  auto client = connect(options());
  ASSERT_TRUE(run(client->ensurePath("latch")).ok());
  auto first = run(client->create("latch/m-", "1", CreateMode::kEphemeralSequential));
  auto second = run(client->create("latch/m-", "2", CreateMode::kEphemeralSequential));
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first.value.rfind("latch/m-", 0), 0u) << first.value;
  EXPECT_LT(first.value, second.value);
  auto kids = run(client->children("latch"));
  ASSERT_TRUE(kids.ok());
  EXPECT_EQ(kids.value.size(), 2u);
  auto stat = run(client->exists(first.value));
  ASSERT_TRUE(stat.ok() && stat.value.has_value());
  EXPECT_EQ(stat.value->ephemeralOwner, client->sessionId());

  // Closing ends the session: its ephemeral nodes go at once.
  client->close();
  EXPECT_EQ(client->sessionState(), SessionState::kClosed);
  EXPECT_EQ(run(client->get("latch")).code, ZkCode::kClosing);
  auto observer = connect(options());
  EXPECT_TRUE(run(observer->children("latch")).value.empty());
}

TEST_F(ZooKeeperClientTest, WatchesFireOnceWithTheEventType) {
  auto client = connect(options());
  auto other = connect(options());
  ASSERT_TRUE(run(client->ensurePath("w")).ok());

  auto missing = run(client->existsAndWatch("w/node"));
  ASSERT_TRUE(missing.reply.ok());
  EXPECT_FALSE(missing.reply.value.has_value());
  ASSERT_TRUE(missing.watch != nullptr);
  auto kids = run(client->childrenAndWatch("w"));
  ASSERT_TRUE(kids.reply.ok() && kids.watch != nullptr);

  ASSERT_TRUE(run(other->create("w/node", "1", CreateMode::kPersistent)).ok());
  KJ_IF_MAYBE(watch, missing.watch) {
    auto event = run(kj::mv(*watch));
    EXPECT_EQ(event.type, WatchEvent::Type::kCreated);
    EXPECT_EQ(event.path, "w/node");
  }
  KJ_IF_MAYBE(watch, kids.watch) {
    EXPECT_EQ(run(kj::mv(*watch)).type, WatchEvent::Type::kChildrenChanged);
  }

  auto data = run(client->getAndWatch("w/node"));
  ASSERT_TRUE(data.reply.ok());
  EXPECT_EQ(data.reply.value.data, "1");
  ASSERT_TRUE(run(other->set("w/node", "2")).ok());
  KJ_IF_MAYBE(watch, data.watch) {
    EXPECT_EQ(run(kj::mv(*watch)).type, WatchEvent::Type::kDataChanged);
  }
  auto again = run(client->getAndWatch("w/node"));
  ASSERT_TRUE(run(other->remove("w/node")).ok());
  KJ_IF_MAYBE(watch, again.watch) {
    EXPECT_EQ(run(kj::mv(*watch)).type, WatchEvent::Type::kDeleted);
  }
  EXPECT_EQ(client->watchesFiredForTests(), 4u);
  EXPECT_EQ(other->watchesFiredForTests(), 0u);

  // A read of a missing node sets no data watch.
  auto none = run(client->getAndWatch("w/missing"));
  EXPECT_EQ(none.reply.code, ZkCode::kNoNode);
  EXPECT_TRUE(none.watch == nullptr);
}

TEST_F(ZooKeeperClientTest, TransactionsApplyAllOrNothing) {
  auto client = connect(options());
  ASSERT_TRUE(run(client->ensurePath("")).ok());
  ASSERT_TRUE(run(client->create("epoch", "0", CreateMode::kPersistent)).ok());
  ASSERT_TRUE(run(client->create("latch", "", CreateMode::kPersistent)).ok());
  auto latch = run(client->create("latch/m-", "", CreateMode::kEphemeralSequential));
  ASSERT_TRUE(latch.ok());

  auto won = run(client->multi({ZkOp::check(latch.value),
                                ZkOp::create("leader", "{}", CreateMode::kEphemeral),
                                ZkOp::setData("epoch", "1", 0)}));
  ASSERT_TRUE(won.ok()) << zkCodeName(won.code);
  ASSERT_EQ(won.value.size(), 3u);
  EXPECT_EQ(won.value[1].createdPath, "leader");
  EXPECT_EQ(won.value[2].stat.version, 1);

  // A failed check applies nothing: neither the delete nor the epoch change.
  auto refused = run(client->multi({ZkOp::check("latch/m-9999999999"), ZkOp::remove("leader"),
                                    ZkOp::setData("epoch", "2", 1)}));
  EXPECT_EQ(refused.code, ZkCode::kNoNode);
  EXPECT_TRUE(run(client->exists("leader")).value.has_value());
  EXPECT_EQ(run(client->get("epoch")).value.data, "1");

  // A stale version fails the whole transaction too.
  auto stale = run(client->multi({ZkOp::remove("leader"), ZkOp::setData("epoch", "2", 0)}));
  EXPECT_EQ(stale.code, ZkCode::kBadVersion);
  EXPECT_TRUE(run(client->exists("leader")).value.has_value());
}

TEST_F(ZooKeeperClientTest, ConnectionLossSuspendsAndReconnectsTheSameSession) {
  auto proxy = loop_.run(testing::TcpFaultProxy::listen(loop_, "127.0.0.1", server_->clientPort()));
  auto client = connect(options(proxy->address()));
  SessionRecorder recorder(loop_, *client);
  const int64_t session = client->sessionId();

  proxy->cut();
  ASSERT_TRUE(recorder.waitFor(SessionState::kSuspended));
  proxy->resume();
  ASSERT_TRUE(recorder.waitFor(SessionState::kReconnected));
  EXPECT_EQ(client->sessionId(), session);
  EXPECT_EQ(client->sessionState(), SessionState::kReconnected);
  ASSERT_TRUE(run(client->ensurePath("after")).ok());
}

TEST_F(ZooKeeperClientTest, StayingCutOffForTheSessionTimeoutExpiresLocallyAndReconnects) {
  auto proxy = loop_.run(testing::TcpFaultProxy::listen(loop_, "127.0.0.1", server_->clientPort()));
  auto client = connect(options(proxy->address()));
  SessionRecorder recorder(loop_, *client);
  const int64_t session = client->sessionId();
  ASSERT_TRUE(run(client->ensurePath("")).ok());
  auto watched = run(client->existsAndWatch("never"));
  ASSERT_TRUE(watched.watch != nullptr);

  // Cut off for good: the server cannot tell the client, so the local timer must.
  proxy->cut();
  ASSERT_TRUE(recorder.waitFor(SessionState::kSuspended));
  auto pending = client->get("");  // Issued while cut off: it can never succeed in this session.
  ASSERT_TRUE(recorder.waitFor(SessionState::kExpired));
  const ZkCode pendingCode = run(kj::mv(pending)).code;
  EXPECT_TRUE(pendingCode == ZkCode::kSessionExpired || pendingCode == ZkCode::kConnectionLoss)
      << zkCodeName(pendingCode);
  KJ_IF_MAYBE(watch, watched.watch) {
    EXPECT_EQ(run(kj::mv(*watch)).type, WatchEvent::Type::kSessionLost);
  }
  proxy->resume();
  ASSERT_TRUE(recorder.waitFor(SessionState::kConnected));
  EXPECT_NE(client->sessionId(), session);
  EXPECT_TRUE(run(client->exists("")).ok());
}

// The session's deadline (docs/zookeeper.md): the probes move it while connected; cut off, it
// stays where the last answer put it, and the session is expired locally no earlier than that.
TEST_F(ZooKeeperClientTest, TheDeadlineMovesWithEachAnswerAndACutOffSessionEndsAtIt) {
  auto proxy = loop_.run(testing::TcpFaultProxy::listen(loop_, "127.0.0.1", server_->clientPort()));
  auto client = connect(options(proxy->address()));
  SessionRecorder recorder(loop_, *client);
  const std::optional<MonoTime> first = client->sessionDeadline();
  ASSERT_TRUE(first);
  // A probe goes every third of the session timeout; run the loop until an answer moved it.
  const kj::TimePoint giveUpAt = loop_.timer().now() + kWait.count() * kj::MILLISECONDS;
  while (client->sessionDeadline() == first && loop_.timer().now() < giveUpAt) {
    loop_.run(loop_.timer().afterDelay(50 * kj::MILLISECONDS));
  }
  const std::optional<MonoTime> moved = client->sessionDeadline();
  ASSERT_TRUE(moved);
  EXPECT_GT(*moved, *first);

  proxy->cut();
  ASSERT_TRUE(recorder.waitFor(SessionState::kSuspended));
  const std::optional<MonoTime> cutOff = client->sessionDeadline();
  ASSERT_TRUE(cutOff);
  EXPECT_GE(*cutOff, *moved);
  ASSERT_TRUE(recorder.waitFor(SessionState::kExpired));
  EXPECT_GE(std::chrono::steady_clock::now(), *cutOff);
  EXPECT_FALSE(client->sessionDeadline());  // No session until the next one is up.
  proxy->resume();
  ASSERT_TRUE(recorder.waitFor(SessionState::kConnected));
  EXPECT_TRUE(client->sessionDeadline());
}

TEST_F(ZooKeeperClientTest, ForcedExpiryIsReportedAndANewSessionOpens) {
  auto client = connect(options());
  SessionRecorder recorder(loop_, *client);
  ASSERT_TRUE(run(client->ensurePath("")).ok());
  ASSERT_TRUE(run(client->create("eph", "", CreateMode::kEphemeral)).ok());
  const int64_t session = client->sessionId();

  testing::ZooKeeperSession credentials;
  credentials.id = session;
  const std::string password = client->sessionPasswordForTests();
  ASSERT_EQ(password.size(), credentials.password.size());
  std::copy(password.begin(), password.end(), credentials.password.begin());
  // The helper blocks this thread; the client learns about the expiry when it next talks to the
  // server (its ping), which the loop runs afterwards.
  auto expired = testing::ZooKeeperTestClient::expireSession(server_->connectString(), credentials);
  ASSERT_TRUE(expired.ok()) << expired.error().message;

  ASSERT_TRUE(recorder.waitFor(SessionState::kExpired));
  ASSERT_TRUE(recorder.waitFor(SessionState::kConnected));
  EXPECT_NE(client->sessionId(), session);
  EXPECT_FALSE(run(client->exists("eph")).value.has_value());
}

TEST_F(ZooKeeperClientTest, DigestAclLetsOnlyTheWriterChangeAndTheReaderRead) {
  auto writerOptions = options();
  writerOptions.auth = "admin:secret";
  writerOptions.readAuth = "reader:pw";
  auto writer = connect(writerOptions);
  ASSERT_TRUE(run(writer->ensurePath("")).ok());
  ASSERT_TRUE(run(writer->create("leader", "{}", CreateMode::kPersistent)).ok());

  auto readerOptions = writerOptions;
  readerOptions.readOnlyIdentity = true;
  auto reader = connect(readerOptions);
  EXPECT_EQ(run(reader->get("leader")).value.data, "{}");
  EXPECT_EQ(run(reader->set("leader", "mine")).code, ZkCode::kNoAuth);
  EXPECT_EQ(run(reader->remove("leader")).code, ZkCode::kNoAuth);
  EXPECT_EQ(run(reader->create("x", "", CreateMode::kPersistent)).code, ZkCode::kNoAuth);

  auto anonymous = connect(options());
  EXPECT_EQ(run(anonymous->get("leader")).code, ZkCode::kNoAuth);
  EXPECT_EQ(run(anonymous->remove("leader")).code, ZkCode::kNoAuth);

  auto wrongPassword = options();
  wrongPassword.auth = "admin:guess";
  auto impostor = connect(wrongPassword);
  EXPECT_EQ(run(impostor->set("leader", "mine")).code, ZkCode::kNoAuth);
  EXPECT_EQ(run(writer->get("leader")).value.data, "{}");
  EXPECT_TRUE(run(writer->set("leader", "ok")).ok());
}

TEST_F(ZooKeeperClientTest, NodesTheClientCreatesCarryTheClusterAclAndPassTheMastersCheck) {
  auto writerOptions = options();
  writerOptions.auth = "admin:secret";
  writerOptions.readAuth = "reader:pw";
  auto writer = connect(writerOptions);
  // No root yet: nothing to refuse.
  EXPECT_TRUE(run(verifyClusterAcl(*writer, writerOptions.auth, writerOptions.readAuth)).ok());
  ASSERT_TRUE(run(writer->ensurePath("latch")).ok());
  ASSERT_TRUE(run(writer->create("leader", "{}", CreateMode::kEphemeral)).ok());

  auto acl = run(writer->getAcl("leader"));
  ASSERT_TRUE(acl.ok()) << zkCodeName(acl.code);
  EXPECT_EQ(describeAcl(acl.value), "digest:admin:cdrwa,digest:reader:r");
  EXPECT_EQ(acl.value.at(0).id, digestId("admin:secret"));
  EXPECT_TRUE(run(verifyClusterAcl(*writer, writerOptions.auth, writerOptions.readAuth)).ok());

  // A password ZooKeeper took at login but the nodes do not know: not even the ACL can be read.
  auto wrongPassword = writerOptions;
  wrongPassword.auth = "admin:guess";
  auto impostor = connect(wrongPassword);
  Status refused = run(verifyClusterAcl(*impostor, wrongPassword.auth, wrongPassword.readAuth));
  ASSERT_FALSE(refused.ok());
  EXPECT_FALSE(refused.error().isRetryable());
  EXPECT_NE(refused.error().message.find("ZNOAUTH"), std::string::npos) << refused.error().message;
}

TEST_F(ZooKeeperClientTest, AnOpenNodeBelowTheRootFailsTheMastersCheckNamingIt) {
  auto writerOptions = options();
  writerOptions.auth = "admin:secret";
  auto writer = connect(writerOptions);
  ASSERT_TRUE(run(writer->ensurePath("jobgraphs")).ok());
  // Created open under the masters' folder, as a run without ACLs would have.
  auto open = testing::ZooKeeperTestClient::connect(server_->connectString());
  ASSERT_TRUE(open.ok()) << open.error().message;
  ASSERT_TRUE(open.value()->addDigestAuth("admin:secret").ok());
  ASSERT_TRUE(open.value()->create(root_ + "/jobgraphs/j1").ok());

  Status refused = run(verifyClusterAcl(*writer, writerOptions.auth, ""));
  ASSERT_FALSE(refused.ok());
  EXPECT_FALSE(refused.error().isRetryable());
  EXPECT_NE(refused.error().message.find("'" + root_ + "/jobgraphs/j1' has the ACL "
                                         "world:anyone:cdrwa"),
            std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().message.find("setAcl -R " + root_ + " digest:admin:<hash>:cdrwa`"),
            std::string::npos)
      << refused.error().message;
}

TEST_F(ZooKeeperClientTest, RemovedListenersAreNotCalledAndTheSocketIsCloseOnExec) {
  auto proxy = loop_.run(testing::TcpFaultProxy::listen(loop_, "127.0.0.1", server_->clientPort()));
  auto client = connect(options(proxy->address()));
  int removedCalls = 0;
  auto registration = client->onSessionState([&](SessionState) { ++removedCalls; });
  registration = nullptr;
  SessionRecorder recorder(loop_, *client);
  proxy->cut();
  ASSERT_TRUE(recorder.waitFor(SessionState::kSuspended));
  proxy->resume();
  ASSERT_TRUE(recorder.waitFor(SessionState::kReconnected));
  EXPECT_EQ(removedCalls, 0);

  // Every socket this process holds must be close-on-exec, the ZooKeeper one included, so task
  // processes never inherit it.
  int sockets = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(entry.path(), ec).string();
    if (ec || target.rfind("socket:", 0) != 0) continue;
    const int fd = std::stoi(entry.path().filename().string());
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags < 0) continue;
    ++sockets;
    EXPECT_TRUE(flags & FD_CLOEXEC) << "fd " << fd << " " << target;
  }
  EXPECT_GT(sockets, 0);
}

TEST_F(ZooKeeperClientTest, UnreachableQuorumTimesOutWaitingForASession) {
  auto port = testing::pickFreeLoopbackPort();
  ASSERT_TRUE(port.ok());
  auto client = ZooKeeperClient::start(loop_, options("127.0.0.1:" + std::to_string(port.value())));
  ASSERT_TRUE(client.ok());
  auto status = loop_.run(client.value()->waitConnected(Duration(500)));
  ASSERT_FALSE(status.ok());
  EXPECT_TRUE(status.error().isRetryable());
  EXPECT_NE(status.error().message.find("127.0.0.1:" + std::to_string(port.value())),
            std::string::npos);
  EXPECT_EQ(client.value()->sessionState(), SessionState::kConnecting);
}

TEST_F(ZooKeeperClientTest, AQuorumThatDoesNotResolveIsRetriedNotFatal) {
  auto client = ZooKeeperClient::start(loop_, options("regent-no-such-host.invalid:2181"));
  ASSERT_TRUE(client.ok()) << client.error().message;
  auto status = loop_.run(client.value()->waitConnected(Duration(300)));
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(run(client.value()->get("")).code, ZkCode::kConnectionLoss);
  EXPECT_EQ(client.value()->sessionState(), SessionState::kConnecting);
}

// A lookup of the quorum's names that hangs (a resolver that never answers) runs off the loop:
// the loop's timers keep firing and calls fail as connection losses meanwhile; once it answers
// the session is made with the addresses it gave. Were the lookup on the loop thread, start()
// would block until the lookup gave up (after kWait), and the test would fail on that.
TEST_F(ZooKeeperClientTest, AQuorumLookupThatHangsRunsOffTheLoopWhoseTimersKeepFiring) {
  struct Gate {
    std::mutex mutex;
    std::condition_variable changed;
    bool entered = false;
    bool released = false;
    bool gaveUp = false;
    std::string asked;
  };
  auto gate = std::make_shared<Gate>();
  const std::string address = server_->connectString();
  ZooKeeperClientOptions o = options("regent-lookup-hangs.test:2181");
  o.resolveQuorum = [gate, address](const std::string& quorum) -> Result<std::string> {
    std::unique_lock<std::mutex> lock(gate->mutex);
    gate->entered = true;
    gate->asked = quorum;
    if (!gate->changed.wait_for(lock, std::chrono::milliseconds(kWait.count()),
                                [&] { return gate->released; })) {
      gate->gaveUp = true;
      return Error::retryable("the test never released the lookup");
    }
    return address;
  };
  auto entered = [&] {
    std::lock_guard<std::mutex> lock(gate->mutex);
    return gate->entered;
  };
  auto client = ZooKeeperClient::start(loop_, o);
  ASSERT_TRUE(client.ok()) << client.error().message;
  ASSERT_TRUE(testing::runLoopUntil(loop_, entered, kWait)) << "the lookup never started";
  // Twenty timers in a row, each armed by the one before, all fire while the lookup hangs.
  int fired = 0;
  std::function<kj::Promise<void>()> tick = [&]() -> kj::Promise<void> {
    return loop_.timer().afterDelay(10 * kj::MILLISECONDS).then([&]() -> kj::Promise<void> {
      if (++fired == 20) return kj::READY_NOW;
      return tick();
    });
  };
  run(tick());
  EXPECT_EQ(fired, 20);
  EXPECT_EQ(client.value()->sessionState(), SessionState::kConnecting);
  EXPECT_EQ(run(client.value()->get("")).code, ZkCode::kConnectionLoss);
  {
    std::lock_guard<std::mutex> lock(gate->mutex);
    EXPECT_FALSE(gate->gaveUp);
    EXPECT_EQ(gate->asked, "regent-lookup-hangs.test:2181");
    gate->released = true;
  }
  gate->changed.notify_all();
  auto connected = loop_.run(client.value()->waitConnected(kWait));
  EXPECT_TRUE(connected.ok()) << connected.error().message;
}

TEST_F(ZooKeeperClientTest, AQuorumHostThatDoesNotResolveIsLeftOutAndTheOthersServe) {
  auto client = connect(options("regent-no-such-host.invalid:2181," + server_->connectString()));
  EXPECT_EQ(run(client->exists("")).code, ZkCode::kOk);  // A call the server answered.
}

TEST_F(ZooKeeperClientTest, DestroyingTheClientCancelsAnEnsurePathInFlight) {
  auto client = connect(options());
  auto pending = client->ensurePath("a/b/c/d");
  client = nullptr;
  // Cancelled rather than left to run on the freed client (ASan would catch the latter).
  // (void): no reply is expected, only the exception.
  EXPECT_ANY_THROW((void)loop_.run(kj::mv(pending)));
}

TEST(ZooKeeperClientOptions, BadOptionsAreRefused) {
  EventLoop loop;
  ZooKeeperClientOptions o;
  o.quorum = "127.0.0.1:1";
  o.root = "relative";
  auto bad = ZooKeeperClient::start(loop, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("relative"), std::string::npos);
  o.root = "/ok";
  o.auth = "nocolon";
  EXPECT_FALSE(ZooKeeperClient::start(loop, o).ok());
  EXPECT_STREQ(zkCodeName(ZkCode::kNoNode), "ZNONODE");
}

}  // namespace
}  // namespace regent::ha

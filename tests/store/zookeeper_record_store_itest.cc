// ZooKeeperRecordStore against the real ZooKeeper server: the record layout, fencing by the
// writer's latch node (hand-over and session expiry), the payload limit, and readAll's reads in
// flight, observed through a counting decorator around the real client.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <kj/debug.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "common/ids.h"
#include "ha/zookeeper_client.h"
#include "store/zookeeper_record_store.h"
#include "tests/fixtures/loop_wait_test_util.h"
#include "tests/fixtures/tcp_fault_proxy.h"
#include "tests/fixtures/zookeeper_server.h"
#include "tests/fixtures/zookeeper_test_client.h"
#include "tests/ha/zookeeper_client_test_util.h"

namespace regent::store {
namespace {

using ha::CreateMode;
using ha::NodeData;
using ha::NodeStat;
using ha::SessionState;
using ha::ZkCode;
using ha::ZkOp;
using ha::ZkOpResult;
using ha::ZkReply;
using ha::ZooKeeperClient;
using ha::ZooKeeperClientOptions;

constexpr Duration kWait{30000};

// The real client with counters and hooks: how many get()s are outstanding (and the most at
// once), how many were outstanding when each one was issued, and callbacks that run after
// children() answers or before a multi() is sent, so a test can change ZooKeeper in between.
class CountingCoordination final : public ha::Coordination {
 public:
  explicit CountingCoordination(ha::Coordination& inner) : inner_(inner) {}

  size_t gets() const { return outstandingAtIssue_.size(); }
  size_t maxOutstandingGets() const { return maxOutstanding_; }
  // For the i-th get(): how many other get()s were outstanding when it was issued.
  const std::vector<size_t>& outstandingAtIssue() const { return outstandingAtIssue_; }

  // Runs once the next children() reply is in, before the caller sees it.
  std::function<kj::Promise<void>()> afterChildren;
  // Runs before each multi() is sent, with its operations.
  std::function<kj::Promise<void>(const std::vector<ZkOp>&)> beforeMulti;

  kj::Promise<ZkReply<NodeData>> get(std::string path) override {
    outstandingAtIssue_.push_back(outstanding_);
    ++outstanding_;
    maxOutstanding_ = std::max(maxOutstanding_, outstanding_);
    return inner_.get(std::move(path)).then([this](ZkReply<NodeData> reply) {
      --outstanding_;
      return reply;
    });
  }

  kj::Promise<ZkReply<std::vector<std::string>>> children(std::string path) override {
    return inner_.children(std::move(path))
        .then([this](ZkReply<std::vector<std::string>> reply)
                  -> kj::Promise<ZkReply<std::vector<std::string>>> {
          if (!afterChildren) return reply;
          auto hook = std::move(afterChildren);
          afterChildren = nullptr;
          return hook().then([reply = std::move(reply)]() mutable { return std::move(reply); });
        });
  }

  kj::Promise<ZkReply<std::vector<ZkOpResult>>> multi(std::vector<ZkOp> ops) override {
    if (!beforeMulti) return inner_.multi(std::move(ops));
    auto hooked = beforeMulti(ops);
    return hooked.then(
        [this, ops = std::move(ops)]() mutable { return inner_.multi(std::move(ops)); });
  }

  kj::Promise<ZkReply<std::string>> create(std::string path, std::string data,
                                           CreateMode mode) override {
    return inner_.create(std::move(path), std::move(data), mode);
  }
  kj::Promise<ha::Watched<NodeData>> getAndWatch(std::string path) override {
    return inner_.getAndWatch(std::move(path));
  }
  kj::Promise<ZkReply<NodeStat>> set(std::string path, std::string data, int32_t version) override {
    return inner_.set(std::move(path), std::move(data), version);
  }
  kj::Promise<ZkReply<bool>> remove(std::string path, int32_t version) override {
    return inner_.remove(std::move(path), version);
  }
  kj::Promise<ZkReply<std::optional<NodeStat>>> exists(std::string path) override {
    return inner_.exists(std::move(path));
  }
  kj::Promise<ha::Watched<std::optional<NodeStat>>> existsAndWatch(std::string path) override {
    return inner_.existsAndWatch(std::move(path));
  }
  kj::Promise<ha::Watched<std::vector<std::string>>> childrenAndWatch(std::string path) override {
    return inner_.childrenAndWatch(std::move(path));
  }
  kj::Promise<ZkReply<bool>> ensurePath(std::string path) override {
    return inner_.ensurePath(std::move(path));
  }
  SessionState sessionState() const override { return inner_.sessionState(); }
  int64_t sessionId() const override { return inner_.sessionId(); }
  Duration negotiatedSessionTimeout() const override { return inner_.negotiatedSessionTimeout(); }
  std::optional<MonoTime> sessionDeadline() const override { return inner_.sessionDeadline(); }
  kj::Own<void> onSessionState(kj::Function<void(SessionState)> listener) override {
    return inner_.onSessionState(kj::mv(listener));
  }

 private:
  ha::Coordination& inner_;
  size_t outstanding_ = 0;
  size_t maxOutstanding_ = 0;
  std::vector<size_t> outstandingAtIssue_;
};

// Holds the first transaction sent through `counting` until release(), so that the writes made
// meanwhile queue behind it, and records every transaction's number of ops (each starting with
// the latch check). With failSecond the client fails the next transaction as a whole.
struct HeldFirstTransaction {
  explicit HeldFirstTransaction(CountingCoordination& counting, bool failSecond = false) {
    counting.beforeMulti = [this, failSecond](const std::vector<ZkOp>& ops) -> kj::Promise<void> {
      EXPECT_EQ(ops[0].kind, ZkOp::Kind::kCheck);
      opsPerTransaction.push_back(ops.size());
      if (opsPerTransaction.size() == 1) return kj::mv(held.promise);
      if (opsPerTransaction.size() == 2 && failSecond) {
        return KJ_EXCEPTION(DISCONNECTED, "the client is closing");
      }
      return kj::READY_NOW;
    };
  }
  void release() { held.fulfiller->fulfill(); }

  kj::PromiseFulfillerPair<void> held = kj::newPromiseAndFulfiller<void>();
  std::vector<size_t> opsPerTransaction;
};

class ZooKeeperRecordStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = testing::sharedZooKeeperServer();
    ASSERT_TRUE(server.ok()) << server.error().message;
    server_ = server.value();
    root_ = "/regent-store-itest/" + JobId::random().toHex();
  }

  ZooKeeperClientOptions options(const std::string& quorum = "") const {
    ZooKeeperClientOptions o;
    o.quorum = quorum.empty() ? server_->connectString() : quorum;
    o.root = root_;
    o.sessionTimeout = Duration(4000);
    return o;
  }

  kj::Own<ZooKeeperClient> connect(const std::string& quorum = "") {
    return ha::connectForTests(loop_, options(quorum), kWait);
  }

  template <typename T>
  T run(kj::Promise<T>&& promise) {
    return regent::testing::runLoopBounded(loop_, kj::mv(promise), kWait, "waiting for ZooKeeper");
  }

  // Runs the loop until `done` holds; false after `timeout`.
  bool runUntil(const std::function<bool()>& done, Duration timeout = kWait) {
    return regent::testing::runLoopUntil(loop_, done, timeout);
  }

  // A latch node of `client`'s session, as a contender creates it: the term's fencing handle.
  std::string createLatch(ha::Coordination& client) {
    auto ensured = run(client.ensurePath("latch"));
    KJ_REQUIRE(ensured.ok(), ha::zkCodeName(ensured.code));
    auto created = run(client.create("latch/m-", "", CreateMode::kEphemeralSequential));
    KJ_REQUIRE(created.ok(), ha::zkCodeName(created.code));
    return created.value;
  }

  kj::Own<RecordStore> open(ha::Coordination& client, uint64_t epoch, const std::string& latch,
                            ZooKeeperRecordStoreOptions storeOptions = {}) {
    auto opened = run(ZooKeeperRecordStore::open(client, StoreTerm{epoch, latch}, storeOptions));
    KJ_REQUIRE(opened.ok(), opened.error().message);
    return kj::mv(opened.value());
  }

  // The node's data as ZooKeeper has it, or nullopt.
  std::optional<std::string> nodeData(ha::Coordination& client, const std::string& path) {
    auto reply = run(client.get(path));
    if (reply.code == ZkCode::kNoNode) return std::nullopt;
    KJ_REQUIRE(reply.ok(), ha::zkCodeName(reply.code));
    return reply.value.data;
  }

  static std::string key(int i) {
    // Job ids in hex, in a known order.
    char text[33];
    std::snprintf(text, sizeof text, "%032x", i);
    return text;
  }

  EventLoop loop_;
  testing::ZooKeeperServer* server_ = nullptr;
  std::string root_;
};

void expectOk(const StoreResult<void>& result) {
  EXPECT_TRUE(result.ok()) << (result.ok() ? "" : result.error().message);
}

TEST_F(ZooKeeperRecordStoreTest, PutsGetsReplacesRemovesListsAndReadsRecordsUnderTheirFolders) {
  auto client = connect();
  auto store = open(*client, 1, createLatch(*client));

  expectOk(run(store->put(RecordFamily::kJobGraphs, key(2), "graph two")));
  expectOk(run(store->put(RecordFamily::kJobGraphs, key(1), "graph one")));
  expectOk(run(store->put(RecordFamily::kJobGraphs, key(3), std::string("\0bin\xff", 5))));
  expectOk(run(store->put(RecordFamily::kJobResults, key(1), "result one")));
  expectOk(run(store->put(RecordFamily::kJobGraphs, key(4), "")));

  // One persistent node per record (docs/stores.md).
  EXPECT_EQ(nodeData(*client, "jobgraphs/" + key(1)), "graph one");
  EXPECT_EQ(nodeData(*client, "job-results/" + key(1)), "result one");
  auto stat = run(client->exists("jobgraphs/" + key(1)));
  ASSERT_TRUE(stat.ok() && stat.value);
  EXPECT_EQ(stat.value->ephemeralOwner, 0);

  auto got = run(store->get(RecordFamily::kJobGraphs, key(3)));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got.value(), std::string("\0bin\xff", 5));
  auto empty = run(store->get(RecordFamily::kJobGraphs, key(4)));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty.value(), "");
  auto missing = run(store->get(RecordFamily::kJobResults, key(2)));
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing.value().has_value());

  // Replace.
  expectOk(run(store->put(RecordFamily::kJobGraphs, key(1), "graph one, again")));
  EXPECT_EQ(run(store->get(RecordFamily::kJobGraphs, key(1))).value(), "graph one, again");

  auto keys = run(store->listKeys(RecordFamily::kJobGraphs));
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys.value(), (std::vector<std::string>{key(1), key(2), key(3), key(4)}));
  auto resultKeys = run(store->listKeys(RecordFamily::kJobResults));
  ASSERT_TRUE(resultKeys.ok());
  EXPECT_EQ(resultKeys.value(), std::vector<std::string>{key(1)});

  auto all = run(store->readAll(RecordFamily::kJobGraphs));
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all.value().size(), 4u);
  EXPECT_EQ(all.value()[0].key, key(1));
  EXPECT_EQ(all.value()[0].bytes, "graph one, again");
  EXPECT_EQ(all.value()[1].bytes, "graph two");
  EXPECT_EQ(all.value()[3].bytes, "");

  auto removed = run(store->remove(RecordFamily::kJobGraphs, key(2)));
  ASSERT_TRUE(removed.ok());
  EXPECT_TRUE(removed.value());
  auto again = run(store->remove(RecordFamily::kJobGraphs, key(2)));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again.value());
  EXPECT_FALSE(nodeData(*client, "jobgraphs/" + key(2)).has_value());
  EXPECT_EQ(run(store->listKeys(RecordFamily::kJobGraphs)).value(),
            (std::vector<std::string>{key(1), key(3), key(4)}));
}

// Every write transaction sent is counted (what regent_store_zookeeper_transactions_total and
// the jobs benchmark's zk_transactions_per_job read): a new record's put is one; a put over a
// record this store wrote or read is one too (setData at once); over one it does not know of,
// two (the create finds it, then the setData); a removal one.
TEST_F(ZooKeeperRecordStoreTest, EveryWriteTransactionSentIsCounted) {
  auto client = connect();
  uint64_t sent = 0;
  ZooKeeperRecordStoreOptions options;
  options.transactions = &sent;
  const std::string latch = createLatch(*client);
  auto store = open(*client, 1, latch, options);
  EXPECT_EQ(sent, 0u) << "opening writes nothing counted";
  expectOk(run(store->put(RecordFamily::kJobGraphs, key(1), "one")));
  EXPECT_EQ(sent, 1u);
  expectOk(run(store->put(RecordFamily::kJobGraphs, key(1), "one, again")));
  EXPECT_EQ(sent, 2u);
  ASSERT_TRUE(run(store->get(RecordFamily::kJobGraphs, key(1))).ok());
  EXPECT_EQ(sent, 2u) << "reads are not transactions";
  ASSERT_TRUE(run(store->remove(RecordFamily::kJobGraphs, key(1))).ok());
  ASSERT_TRUE(run(store->remove(RecordFamily::kJobGraphs, key(1))).ok());
  EXPECT_EQ(sent, 4u);
  // Removed: the next put creates it again, in one transaction.
  expectOk(run(store->put(RecordFamily::kJobGraphs, key(1), "one, anew")));
  EXPECT_EQ(sent, 5u);
  EXPECT_EQ(nodeData(*client, "jobgraphs/" + key(1)), "one, anew");

  // Another store of the same term (a new leader's) does not know the record: two, and then
  // one, once it wrote it; a record it read is replaced in one.
  expectOk(run(store->put(RecordFamily::kJobResults, key(2), "two")));
  uint64_t other = 0;
  ZooKeeperRecordStoreOptions otherOptions;
  otherOptions.transactions = &other;
  auto next = open(*client, 1, latch, otherOptions);
  expectOk(run(next->put(RecordFamily::kJobGraphs, key(1), "one, from the next")));
  EXPECT_EQ(other, 2u);
  expectOk(run(next->put(RecordFamily::kJobGraphs, key(1), "one, from the next, again")));
  EXPECT_EQ(other, 3u);
  ASSERT_TRUE(run(next->readAll(RecordFamily::kJobResults)).ok());
  expectOk(run(next->put(RecordFamily::kJobResults, key(2), "two, replaced")));
  EXPECT_EQ(other, 4u);
  EXPECT_EQ(nodeData(*client, "job-results/" + key(2)), "two, replaced");
}

// What the store's classification of failed writes relies on: ZooKeeper reports the failing
// operation's own code, ZOK for the operations before it and ZRUNTIMEINCONSISTENCY (-2) after.
TEST_F(ZooKeeperRecordStoreTest, AFailedTransactionNamesTheOperationThatFailed) {
  auto client = connect();
  const std::string latch = createLatch(*client);
  ASSERT_TRUE(run(client->ensurePath("jobgraphs/" + key(1))).ok());
  const auto inconsistent = static_cast<ZkCode>(-2);

  auto fenced =
      run(client->multi({ZkOp::check("latch/m-0000009999"),
                         ZkOp::create("jobgraphs/" + key(2), "", CreateMode::kPersistent)}));
  EXPECT_EQ(fenced.code, ZkCode::kNoNode);
  ASSERT_EQ(fenced.value.size(), 2u);
  EXPECT_EQ(fenced.value[0].code, ZkCode::kNoNode);
  EXPECT_EQ(fenced.value[1].code, inconsistent);

  auto exists = run(client->multi(
      {ZkOp::check(latch), ZkOp::create("jobgraphs/" + key(1), "", CreateMode::kPersistent)}));
  EXPECT_EQ(exists.code, ZkCode::kNodeExists);
  ASSERT_EQ(exists.value.size(), 2u);
  EXPECT_EQ(exists.value[0].code, ZkCode::kOk);
  EXPECT_EQ(exists.value[1].code, ZkCode::kNodeExists);

  // Both could say ZNONODE: only the per-op results tell a lost latch from a missing record.
  auto gone = run(client->multi({ZkOp::check(latch), ZkOp::remove("jobgraphs/" + key(3))}));
  EXPECT_EQ(gone.code, ZkCode::kNoNode);
  ASSERT_EQ(gone.value.size(), 2u);
  EXPECT_EQ(gone.value[0].code, ZkCode::kOk);
  EXPECT_EQ(gone.value[1].code, ZkCode::kNoNode);
}

TEST_F(ZooKeeperRecordStoreTest, AnEmptyStoreListsAndReadsNothing) {
  auto client = connect();
  auto store = open(*client, 1, createLatch(*client));
  auto keys = run(store->listKeys(RecordFamily::kJobResults));
  ASSERT_TRUE(keys.ok());
  EXPECT_TRUE(keys.value().empty());
  auto all = run(store->readAll(RecordFamily::kJobGraphs));
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all.value().empty());
}

TEST_F(ZooKeeperRecordStoreTest, AStoreWhoseLatchNodeWasHandedOverCannotWriteWhileTheNextTermCan) {
  auto leader = connect();
  const std::string oldLatch = createLatch(*leader);
  auto oldStore = open(*leader, 7, oldLatch);
  expectOk(run(oldStore->put(RecordFamily::kJobGraphs, key(1), "v1")));

  // Hand-over: the leader's latch node goes; its store object lives on, unaware.
  ASSERT_TRUE(run(leader->remove(oldLatch)).ok());

  auto replaced = run(oldStore->put(RecordFamily::kJobGraphs, key(1), "v2"));
  ASSERT_FALSE(replaced.ok());
  EXPECT_EQ(replaced.error().code, StoreErrorCode::kFenced);
  EXPECT_NE(replaced.error().message.find(oldLatch), std::string::npos) << replaced.error().message;
  EXPECT_NE(replaced.error().message.find("epoch 7"), std::string::npos)
      << replaced.error().message;
  auto created = run(oldStore->put(RecordFamily::kJobGraphs, key(2), "new"));
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.error().code, StoreErrorCode::kFenced);
  auto removed = run(oldStore->remove(RecordFamily::kJobGraphs, key(1)));
  ASSERT_FALSE(removed.ok());
  EXPECT_EQ(removed.error().code, StoreErrorCode::kFenced);
  // Even removing something that is not there reports the fencing, not "nothing to remove".
  auto removedNothing = run(oldStore->remove(RecordFamily::kJobGraphs, key(9)));
  ASSERT_FALSE(removedNothing.ok());
  EXPECT_EQ(removedNothing.error().code, StoreErrorCode::kFenced);

  // Nothing changed.
  EXPECT_EQ(nodeData(*leader, "jobgraphs/" + key(1)), "v1");
  EXPECT_FALSE(nodeData(*leader, "jobgraphs/" + key(2)).has_value());
  // Reads keep working for the deposed store.
  EXPECT_EQ(run(oldStore->get(RecordFamily::kJobGraphs, key(1))).value(), "v1");

  // The next leader's store writes.
  auto next = connect();
  auto newStore = open(*next, 8, createLatch(*next));
  EXPECT_EQ(run(newStore->get(RecordFamily::kJobGraphs, key(1))).value(), "v1");
  expectOk(run(newStore->put(RecordFamily::kJobGraphs, key(1), "v3")));
  expectOk(run(newStore->put(RecordFamily::kJobGraphs, key(2), "new")));
  auto newRemove = run(newStore->remove(RecordFamily::kJobGraphs, key(2)));
  ASSERT_TRUE(newRemove.ok());
  EXPECT_TRUE(newRemove.value());
  EXPECT_EQ(nodeData(*leader, "jobgraphs/" + key(1)), "v3");
}

TEST_F(ZooKeeperRecordStoreTest, AStoreWhoseSessionExpiredCannotWriteAfterItsClientReconnects) {
  auto leader = connect();
  const std::string latch = createLatch(*leader);
  auto store = open(*leader, 3, latch);
  expectOk(run(store->put(RecordFamily::kJobResults, key(1), "dirty")));

  const int64_t session = leader->sessionId();
  testing::ZooKeeperSession credentials;
  credentials.id = session;
  const std::string password = leader->sessionPasswordForTests();
  ASSERT_EQ(password.size(), credentials.password.size());
  std::copy(password.begin(), password.end(), credentials.password.begin());
  auto expired = testing::ZooKeeperTestClient::expireSession(server_->connectString(), credentials);
  ASSERT_TRUE(expired.ok()) << expired.error().message;
  // The client learns of the expiry on its next contact and opens a new session by itself.
  ASSERT_TRUE(runUntil([&] {
    return leader->sessionId() != session && leader->sessionState() == SessionState::kConnected;
  }));

  auto put = run(store->put(RecordFamily::kJobResults, key(1), "clean"));
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.error().code, StoreErrorCode::kFenced) << put.error().message;
  EXPECT_NE(put.error().message.find(latch), std::string::npos) << put.error().message;
  auto created = run(store->put(RecordFamily::kJobGraphs, key(2), "graph"));
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.error().code, StoreErrorCode::kFenced);
  auto removed = run(store->remove(RecordFamily::kJobResults, key(1)));
  ASSERT_FALSE(removed.ok());
  EXPECT_EQ(removed.error().code, StoreErrorCode::kFenced);
  EXPECT_EQ(nodeData(*leader, "job-results/" + key(1)), "dirty");
  EXPECT_FALSE(nodeData(*leader, "jobgraphs/" + key(2)).has_value());

  // The same client, in its new session, leads again with a new latch node and a new store.
  auto newStore = open(*leader, 4, createLatch(*leader));
  expectOk(run(newStore->put(RecordFamily::kJobResults, key(1), "clean")));
  EXPECT_EQ(nodeData(*leader, "job-results/" + key(1)), "clean");
}

TEST_F(ZooKeeperRecordStoreTest, RecordsWrittenByALeaderAreReadByTheNextTermsStore) {
  auto first = connect();
  const std::string firstLatch = createLatch(*first);
  {
    auto store = open(*first, 1, firstLatch);
    for (int i = 0; i < 20; ++i) {
      expectOk(run(store->put(RecordFamily::kJobGraphs, key(i), "graph " + std::to_string(i))));
    }
    expectOk(run(store->put(RecordFamily::kJobResults, key(100), "result")));
  }
  first = nullptr;  // The session ends: its latch node goes with it.

  auto second = connect();
  auto store = open(*second, 2, createLatch(*second));
  auto graphs = run(store->readAll(RecordFamily::kJobGraphs));
  ASSERT_TRUE(graphs.ok());
  ASSERT_EQ(graphs.value().size(), 20u);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(graphs.value()[i].key, key(i));
    EXPECT_EQ(graphs.value()[i].bytes, "graph " + std::to_string(i));
  }
  EXPECT_EQ(run(store->get(RecordFamily::kJobResults, key(100))).value(), "result");
}

TEST_F(ZooKeeperRecordStoreTest, OpeningATermWhoseLatchNodeIsMissingIsFenced) {
  auto client = connect();
  createLatch(*client);
  auto opened = run(ZooKeeperRecordStore::open(*client, StoreTerm{5, "latch/m-0000009999"}, {}));
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.error().code, StoreErrorCode::kFenced);
  EXPECT_NE(opened.error().message.find("latch/m-0000009999"), std::string::npos)
      << opened.error().message;
  EXPECT_NE(opened.error().message.find("epoch 5"), std::string::npos) << opened.error().message;

  auto noLatch = run(ZooKeeperRecordStore::open(*client, StoreTerm{5, ""}, {}));
  ASSERT_FALSE(noLatch.ok());
  EXPECT_EQ(noLatch.error().code, StoreErrorCode::kInvalid);
}

TEST_F(ZooKeeperRecordStoreTest, OpeningWhileZooKeeperIsCutOffIsUnavailable) {
  auto proxy = loop_.run(testing::TcpFaultProxy::listen(loop_, "127.0.0.1", server_->clientPort()));
  auto client = connect(proxy->address());
  const std::string latch = createLatch(*client);
  // The requests reach the proxy and are held; cutting the connection fails them.
  proxy->stall();
  auto opening = ZooKeeperRecordStore::open(*client, StoreTerm{1, latch}, {});
  ASSERT_TRUE(runUntil([&] { return proxy->heldBytes() > 0; }));
  proxy->cut();
  auto opened = run(kj::mv(opening));
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.error().code, StoreErrorCode::kUnavailable);
  EXPECT_NE(opened.error().message.find("ZCONNECTIONLOSS"), std::string::npos)
      << opened.error().message;
}

TEST_F(ZooKeeperRecordStoreTest, AWriteCutOffFromZooKeeperIsUnavailableAndSucceedsWhenRetried) {
  auto proxy = loop_.run(testing::TcpFaultProxy::listen(loop_, "127.0.0.1", server_->clientPort()));
  auto client = connect(proxy->address());
  auto store = open(*client, 1, createLatch(*client));

  proxy->stall();
  auto writing = store->put(RecordFamily::kJobGraphs, key(1), "graph");
  ASSERT_TRUE(runUntil([&] { return proxy->heldBytes() > 0; }));
  proxy->cut();
  auto written = run(kj::mv(writing));
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(written.error().code, StoreErrorCode::kUnavailable) << written.error().message;
  EXPECT_TRUE(written.error().retryable());

  proxy->resume();
  ASSERT_TRUE(runUntil([&] { return client->sessionState() == SessionState::kReconnected; }));
  expectOk(run(store->put(RecordFamily::kJobGraphs, key(1), "graph")));
  EXPECT_EQ(nodeData(*client, "jobgraphs/" + key(1)), "graph");
}

TEST_F(ZooKeeperRecordStoreTest, APutOverTheLimitIsRefusedAndCreatesNothing) {
  auto client = connect();
  ZooKeeperRecordStoreOptions small;
  small.maxPayload = 1000;
  auto store = open(*client, 1, createLatch(*client), small);
  EXPECT_EQ(store->maxRecordSize(), 1000u);

  auto refused = run(store->put(RecordFamily::kJobGraphs, key(1), std::string(1001, 'x')));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, StoreErrorCode::kTooLarge);
  for (const std::string& part :
       {std::string("jobgraphs"), key(1), std::string("1001"), std::string("1000")}) {
    EXPECT_NE(refused.error().message.find(part), std::string::npos)
        << refused.error().message << " should name " << part;
  }
  EXPECT_FALSE(nodeData(*client, "jobgraphs/" + key(1)).has_value());
  expectOk(run(store->put(RecordFamily::kJobGraphs, key(1), std::string(1000, 'x'))));
}

TEST_F(ZooKeeperRecordStoreTest, TheDefaultLimitFitsUnderZooKeepersDefaultBuffer) {
  auto client = connect();
  auto store = open(*client, 1, createLatch(*client));
  const size_t limit = ZooKeeperRecordStoreOptions{}.maxPayload;
  ASSERT_EQ(store->maxRecordSize(), limit);
  std::string big(limit, 'a');
  big.back() = 'z';
  // Both kinds of write transaction: create, then replace.
  expectOk(run(store->put(RecordFamily::kJobGraphs, key(1), big)));
  big.front() = 'b';
  expectOk(run(store->put(RecordFamily::kJobGraphs, key(1), big)));
  EXPECT_EQ(run(store->get(RecordFamily::kJobGraphs, key(1))).value(), big);
  auto over = run(store->put(RecordFamily::kJobGraphs, key(2), std::string(limit + 1, 'a')));
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().code, StoreErrorCode::kTooLarge);
}

TEST_F(ZooKeeperRecordStoreTest, KeysThatAreNotNodeNamesAreInvalid) {
  auto client = connect();
  auto store = open(*client, 1, createLatch(*client));
  for (const std::string& bad :
       {std::string(""), std::string("a/b"), std::string(".."), std::string("x\ny")}) {
    auto put = run(store->put(RecordFamily::kJobGraphs, bad, "x"));
    ASSERT_FALSE(put.ok()) << bad;
    EXPECT_EQ(put.error().code, StoreErrorCode::kInvalid) << bad;
    auto got = run(store->get(RecordFamily::kJobGraphs, bad));
    ASSERT_FALSE(got.ok()) << bad;
    EXPECT_EQ(got.error().code, StoreErrorCode::kInvalid) << bad;
  }
  EXPECT_TRUE(run(store->listKeys(RecordFamily::kJobGraphs)).value().empty());
}

TEST_F(ZooKeeperRecordStoreTest, ReadAllKeepsASlidingWindowOfReadsInFlight) {
  auto client = connect();
  const std::string latch = createLatch(*client);
  constexpr int kRecords = 2000;
  {
    // Written with every put in flight at once.
    auto writer = open(*client, 1, latch);
    auto puts = kj::heapArrayBuilder<kj::Promise<StoreResult<void>>>(kRecords);
    for (int i = 0; i < kRecords; ++i) {
      puts.add(writer->put(RecordFamily::kJobGraphs, key(i), "record " + std::to_string(i)));
    }
    auto written = run(kj::joinPromises(puts.finish()));
    for (const auto& result : written) ASSERT_TRUE(result.ok()) << result.error().message;
  }

  CountingCoordination counting(*client);
  ZooKeeperRecordStoreOptions windowed;
  windowed.maxReadsInFlight = 64;
  auto store = open(counting, 1, latch, windowed);
  auto all = run(store->readAll(RecordFamily::kJobGraphs));
  ASSERT_TRUE(all.ok()) << all.error().message;
  ASSERT_EQ(all.value().size(), static_cast<size_t>(kRecords));
  for (int i = 0; i < kRecords; ++i) {
    ASSERT_EQ(all.value()[i].key, key(i));
    ASSERT_EQ(all.value()[i].bytes, "record " + std::to_string(i));
  }
  EXPECT_EQ(counting.gets(), static_cast<size_t>(kRecords));
  EXPECT_GT(counting.maxOutstandingGets(), 1u);
  EXPECT_LE(counting.maxOutstandingGets(), 64u);
  // A sliding window, not batches: the 65th read goes out as soon as one of the first 64
  // answered, while the others are still outstanding (a batch would wait for all 64).
  ASSERT_GT(counting.outstandingAtIssue().size(), 64u);
  EXPECT_GE(counting.outstandingAtIssue()[64], 1u);
}

TEST_F(ZooKeeperRecordStoreTest, ReadAllLeavesOutARecordRemovedBetweenListingAndReading) {
  auto client = connect();
  auto store = open(*client, 1, createLatch(*client));
  for (int i = 0; i < 5; ++i) {
    expectOk(run(store->put(RecordFamily::kJobGraphs, key(i), "record " + std::to_string(i))));
  }
  CountingCoordination counting(*client);
  auto reader = open(counting, 1, createLatch(*client));
  ha::Coordination* raw = client.get();
  counting.afterChildren = [raw]() -> kj::Promise<void> {
    return raw->remove("jobgraphs/" + key(2)).then([](ZkReply<bool> removed) {
      KJ_REQUIRE(removed.ok(), ha::zkCodeName(removed.code));
    });
  };
  auto all = run(reader->readAll(RecordFamily::kJobGraphs));
  ASSERT_TRUE(all.ok()) << all.error().message;
  EXPECT_EQ(counting.gets(), 5u);  // The removed record was listed, and read.
  std::vector<std::string> keys;
  for (const Record& record : all.value()) keys.push_back(record.key);
  EXPECT_EQ(keys, (std::vector<std::string>{key(0), key(1), key(3), key(4)}));
}

TEST_F(ZooKeeperRecordStoreTest, APutThatFindsTheNodeRemovedBeforeReplacingCreatesItAgain) {
  auto client = connect();
  CountingCoordination counting(*client);
  auto store = open(counting, 1, createLatch(*client));
  // Written by someone else: the store does not know the record, so its put starts with create.
  auto created = run(client->create("jobgraphs/" + key(1), "v1", CreateMode::kPersistent));
  ASSERT_TRUE(created.ok()) << ha::zkCodeName(created.code);

  // The replace finds the node (create fails), and before its setData goes out someone removes
  // the node: the setData fails too, and put creates it again.
  ha::Coordination* raw = client.get();
  std::vector<ZkOp::Kind> writes;
  counting.beforeMulti = [raw, &writes](const std::vector<ZkOp>& ops) -> kj::Promise<void> {
    KJ_REQUIRE(ops.size() == 2 && ops[0].kind == ZkOp::Kind::kCheck);
    writes.push_back(ops[1].kind);
    if (ops[1].kind != ZkOp::Kind::kSetData) return kj::READY_NOW;
    return raw->remove("jobgraphs/" + key(1)).then([](ZkReply<bool>) {});
  };
  expectOk(run(store->put(RecordFamily::kJobGraphs, key(1), "v2")));
  EXPECT_EQ(writes, (std::vector<ZkOp::Kind>{ZkOp::Kind::kCreate, ZkOp::Kind::kSetData,
                                             ZkOp::Kind::kCreate}));
  EXPECT_EQ(nodeData(*client, "jobgraphs/" + key(1)), "v2");

  // Someone who keeps removing and re-creating it makes put give up, after a bounded number of
  // transactions, with a retryable error.
  writes.clear();
  counting.beforeMulti = [raw, &writes](const std::vector<ZkOp>& ops) -> kj::Promise<void> {
    writes.push_back(ops[1].kind);
    if (ops[1].kind == ZkOp::Kind::kSetData) {
      return raw->remove("jobgraphs/" + key(1)).then([](ZkReply<bool>) {});
    }
    return raw->create("jobgraphs/" + key(1), "theirs", CreateMode::kPersistent)
        .then([](ZkReply<std::string>) {});
  };
  auto contested = run(store->put(RecordFamily::kJobGraphs, key(1), "v3"));
  ASSERT_FALSE(contested.ok());
  EXPECT_EQ(contested.error().code, StoreErrorCode::kUnavailable) << contested.error().message;
  EXPECT_EQ(writes.size(), 4u);
}

// Group commit: the writes made while a transaction is in flight go together in the next one,
// behind one latch check, in call order; each caller learns its own outcome.
TEST_F(ZooKeeperRecordStoreTest, WritesMadeWhileATransactionIsInFlightGoTogetherInTheNextOne) {
  auto client = connect();
  CountingCoordination counting(*client);
  uint64_t sent = 0;
  ZooKeeperRecordStoreOptions options;
  options.transactions = &sent;
  auto store = open(counting, 1, createLatch(*client), options);
  expectOk(run(store->put(RecordFamily::kJobResults, key(9), "to remove")));
  const uint64_t before = sent;

  HeldFirstTransaction held(counting);
  auto first = store->put(RecordFamily::kJobGraphs, key(1), "one");
  auto second = store->put(RecordFamily::kJobGraphs, key(2), "two");
  std::vector<RecordWrite> writes;
  writes.push_back(RecordWrite{RecordFamily::kJobGraphs, key(3), std::string("three")});
  writes.push_back(RecordWrite{RecordFamily::kJobProgress, key(3), std::string("progress")});
  auto third = store->commit(std::move(writes));
  auto removed = store->remove(RecordFamily::kJobResults, key(9));
  auto absent = store->remove(RecordFamily::kJobResults, key(8));
  held.release();

  expectOk(run(kj::mv(first)));
  expectOk(run(kj::mv(second)));
  expectOk(run(kj::mv(third)));
  auto removedOne = run(kj::mv(removed));
  ASSERT_TRUE(removedOne.ok()) << removedOne.error().message;
  EXPECT_TRUE(removedOne.value());
  auto removedNone = run(kj::mv(absent));
  ASSERT_TRUE(removedNone.ok()) << removedNone.error().message;
  EXPECT_FALSE(removedNone.value());
  // The first alone; the next four callers' five writes in one (the remove of a record that
  // does not exist fails it once, and it goes again without that remove).
  EXPECT_EQ(held.opsPerTransaction, (std::vector<size_t>{2, 6, 5}));
  EXPECT_EQ(sent - before, 3u);
  EXPECT_EQ(nodeData(*client, "jobgraphs/" + key(1)), "one");
  EXPECT_EQ(nodeData(*client, "jobgraphs/" + key(2)), "two");
  EXPECT_EQ(nodeData(*client, "jobgraphs/" + key(3)), "three");
  EXPECT_EQ(nodeData(*client, "job-progress/" + key(3)), "progress");
  EXPECT_FALSE(nodeData(*client, "job-results/" + key(9)).has_value());
}

// A record is written at most once per transaction: a later write of it waits for the next one,
// so the writes of one record apply in call order (the last one stays).
TEST_F(ZooKeeperRecordStoreTest, QueuedWritesOfOneRecordApplyInCallOrder) {
  auto client = connect();
  CountingCoordination counting(*client);
  auto store = open(counting, 1, createLatch(*client));
  HeldFirstTransaction held(counting);
  auto first = store->put(RecordFamily::kJobGraphs, key(5), "first");
  auto put = store->put(RecordFamily::kJobProgress, key(1), "progress");
  auto gone = store->remove(RecordFamily::kJobProgress, key(1));
  auto again = store->put(RecordFamily::kJobGraphs, key(2), "a");
  auto last = store->put(RecordFamily::kJobGraphs, key(2), "b");
  held.release();
  expectOk(run(kj::mv(first)));
  expectOk(run(kj::mv(put)));
  auto removed = run(kj::mv(gone));
  ASSERT_TRUE(removed.ok()) << removed.error().message;
  EXPECT_TRUE(removed.value());
  expectOk(run(kj::mv(again)));
  expectOk(run(kj::mv(last)));
  EXPECT_FALSE(nodeData(*client, "job-progress/" + key(1)).has_value());
  EXPECT_EQ(nodeData(*client, "jobgraphs/" + key(2)), "b");
}

// One caller's write fails for a reason of its own (here its folder was removed behind the
// store's back): nothing of the shared transaction applied, each caller goes again alone, and
// only that one fails, naming its record.
TEST_F(ZooKeeperRecordStoreTest, AWriteThatFailsInASharedTransactionFailsAloneAndTheOthersApply) {
  auto client = connect();
  CountingCoordination counting(*client);
  auto store = open(counting, 1, createLatch(*client));
  ASSERT_TRUE(run(client->remove("job-details", -1)).ok());
  HeldFirstTransaction held(counting);
  auto first = store->put(RecordFamily::kJobGraphs, key(1), "one");
  auto before = store->put(RecordFamily::kJobGraphs, key(2), "two");
  auto orphan = store->put(RecordFamily::kJobDetails, key(2), "detail");
  auto after = store->put(RecordFamily::kJobResults, key(2), "result");
  held.release();
  expectOk(run(kj::mv(first)));
  expectOk(run(kj::mv(before)));
  auto failed = run(kj::mv(orphan));
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().code, StoreErrorCode::kUnavailable);
  EXPECT_THAT(failed.error().message, ::testing::HasSubstr("job-details/" + key(2)));
  EXPECT_THAT(failed.error().message, ::testing::HasSubstr("its parent node is missing"));
  expectOk(run(kj::mv(after)));
  EXPECT_EQ(held.opsPerTransaction, (std::vector<size_t>{2, 4, 2, 2, 2}));
  EXPECT_EQ(nodeData(*client, "jobgraphs/" + key(2)), "two");
  EXPECT_EQ(nodeData(*client, "job-results/" + key(2)), "result");
}

// A transaction the client fails as a whole answers each of its callers, naming the caller's
// own record, and the writes queued behind it go on.
TEST_F(ZooKeeperRecordStoreTest, ATransactionTheClientFailsAnswersEachCallerAndTheQueueGoesOn) {
  auto client = connect();
  CountingCoordination counting(*client);
  auto store = open(counting, 1, createLatch(*client));
  HeldFirstTransaction held(counting, /*failSecond=*/true);
  auto first = store->put(RecordFamily::kJobGraphs, key(1), "one");
  auto second = store->put(RecordFamily::kJobGraphs, key(2), "two");
  auto third = store->remove(RecordFamily::kJobResults, key(3));
  held.release();
  expectOk(run(kj::mv(first)));
  auto failedPut = run(kj::mv(second));
  ASSERT_FALSE(failedPut.ok());
  EXPECT_EQ(failedPut.error().code, StoreErrorCode::kUnavailable);
  EXPECT_THAT(failedPut.error().message, ::testing::HasSubstr("jobgraphs/" + key(2)));
  EXPECT_THAT(failedPut.error().message, ::testing::HasSubstr("the client is closing"));
  auto failedRemove = run(kj::mv(third));
  ASSERT_FALSE(failedRemove.ok());
  EXPECT_THAT(failedRemove.error().message, ::testing::HasSubstr("job-results/" + key(3)));
  expectOk(run(store->put(RecordFamily::kJobGraphs, key(4), "four")));
  EXPECT_EQ(nodeData(*client, "jobgraphs/" + key(4)), "four");
  EXPECT_FALSE(nodeData(*client, "jobgraphs/" + key(2)).has_value());
}

// Hundreds of writes made at once, among them transactions that remove a record an earlier
// write put: every caller succeeds and the records end as the calls, in order, leave them.
TEST_F(ZooKeeperRecordStoreTest, ManyWritesMadeAtOnceApplyInCallOrder) {
  auto client = connect();
  uint64_t sent = 0;
  ZooKeeperRecordStoreOptions options;
  options.transactions = &sent;
  auto store = open(*client, 1, createLatch(*client), options);
  constexpr int kRecords = 300;
  std::vector<kj::Promise<StoreResult<void>>> all;
  for (int i = 0; i < kRecords; ++i) {
    all.push_back(store->put(RecordFamily::kJobGraphs, key(i), std::string(200, 'x')));
    if (i % 3 == 0) {
      std::vector<RecordWrite> writes;
      writes.push_back(RecordWrite{RecordFamily::kJobResults, key(i), std::string("result")});
      writes.push_back(RecordWrite{RecordFamily::kJobGraphs, key(i), std::nullopt});
      all.push_back(store->commit(std::move(writes)));
    }
  }
  for (auto& promise : all) expectOk(run(kj::mv(promise)));
  EXPECT_LT(sent, all.size());
  auto graphs = run(store->listKeys(RecordFamily::kJobGraphs));
  auto results = run(store->listKeys(RecordFamily::kJobResults));
  ASSERT_TRUE(graphs.ok() && results.ok());
  std::vector<std::string> expectedGraphs;
  std::vector<std::string> expectedResults;
  for (int i = 0; i < kRecords; ++i) (i % 3 == 0 ? expectedResults : expectedGraphs).push_back(key(i));
  EXPECT_EQ(graphs.value(), expectedGraphs);
  EXPECT_EQ(results.value(), expectedResults);
}

TEST_F(ZooKeeperRecordStoreTest, DestroyingTheStoreCancelsItsOperationsInFlight) {
  auto client = connect();
  auto store = open(*client, 1, createLatch(*client));
  expectOk(run(store->put(RecordFamily::kJobGraphs, key(1), "v1")));
  auto put = store->put(RecordFamily::kJobGraphs, key(2), "v2");
  auto read = store->readAll(RecordFamily::kJobGraphs);
  store = nullptr;
  EXPECT_ANY_THROW((void)run(kj::mv(put)));
  EXPECT_ANY_THROW((void)run(kj::mv(read)));
  // The client is unharmed.
  EXPECT_EQ(nodeData(*client, "jobgraphs/" + key(1)), "v1");
}

}  // namespace
}  // namespace regent::store

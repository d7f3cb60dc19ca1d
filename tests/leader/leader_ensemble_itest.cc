// Leader election against a three-node ZooKeeper ensemble: a rolling restart of the ensemble (a
// routine operation) moves no leadership with the default suspend tolerance, and a partition
// longer than the tolerance still ends the term. The elections are built from the configuration
// as masters build them, so the default under test is the configuration's own.
#include <gtest/gtest.h>
#include <kj/debug.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

#include "common/event_loop.h"
#include "common/ids.h"
#include "conf/config.h"
#include "ha/ha_services.h"
#include "ha/zookeeper_client.h"
#include "leader/leader_services.h"
#include "tests/fixtures/loop_wait_test_util.h"
#include "tests/fixtures/tcp_fault_proxy.h"
#include "tests/fixtures/zookeeper_server.h"
#include "tests/leader/leader_test_util.h"

// LeakSanitizer, in this binary only: the ZooKeeper C client (3.8.0, libzookeeper_st) sometimes
// leaves one 24-byte object it allocated in zookeeper_process() behind when a handle is closed
// after its server was restarted under it (about one run in five of the rolling restart; the
// cause inside the library is not found yet). Callbacks run inside zookeeper_process() too, so
// this also hides a leak of theirs here; the other binaries keep the full check.
extern "C" const char* __lsan_default_suppressions() { return "leak:zookeeper_process\n"; }

namespace regent::leader {
namespace {

using ha::SessionState;
using testing::ElectionLog;
using testing::RecordingContender;

constexpr Duration kWait{60000};

// One thread of its own for the fixture calls that block (a member's stop and start), so the
// test's loop keeps serving the sessions meanwhile. It lives as long as the ensemble: a member's
// death signal is tied to the thread that forked it, so a thread that ended would take the
// members it started with it.
class FixtureThread final {
 public:
  FixtureThread() : thread_([this] { run(); }) {}
  ~FixtureThread() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  FixtureThread(const FixtureThread&) = delete;
  FixtureThread& operator=(const FixtureThread&) = delete;

  std::future<Status> post(std::function<Status()> call) {
    std::packaged_task<Status()> task(std::move(call));
    std::future<Status> done = task.get_future();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      tasks_.push_back(std::move(task));
    }
    wake_.notify_one();
    return done;
  }

 private:
  void run() {
    while (true) {
      std::packaged_task<Status()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::packaged_task<Status()>> tasks_;
  bool stopping_ = false;
  std::thread thread_;  // Declared last: started once the rest is ready.
};

struct Member {
  kj::Own<ha::HaServices> ha;
  std::unique_ptr<RecordingContender> contender;
  kj::Own<LeaderElection> election;
  std::vector<SessionState> sessionStates;
  kj::Own<void> sessionListener;

  ha::ZooKeeperClient& zk() { return *ha->zooKeeper(); }
  bool connected() {
    const SessionState state = zk().sessionState();
    return state == SessionState::kConnected || state == SessionState::kReconnected;
  }
};

class LeaderEnsembleTest : public ::testing::Test {
 protected:
  // One ensemble for the binary's tests: starting three JVMs is the slow part.
  // Started, restarted and stopped from the fixture thread only.
  static void SetUpTestSuite() {
    fixtureThread_ = new FixtureThread();
    Status started = fixtureThread_
                         ->post([] {
                           auto ensemble = regent::testing::ZooKeeperServer::startEnsemble(3);
                           if (!ensemble.ok()) return Status(ensemble.error());
                           ensemble_ = std::move(ensemble).value().release();
                           return Status();
                         })
                         .get();
    if (!started.ok()) startError_ = new std::string(started.error().message);
  }
  static void TearDownTestSuite() {
    if (fixtureThread_ != nullptr) {
      (void)fixtureThread_
          ->post([] {
            delete ensemble_;
            ensemble_ = nullptr;
            return Status();
          })
          .get();
    }
    delete fixtureThread_;
    fixtureThread_ = nullptr;
    delete startError_;
    startError_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(ensemble_, nullptr) << (startError_ ? *startError_ : "no ensemble");
    clusterId_ = "ensemble-" + JobId::random().toHex();
  }

  void TearDown() override {
    // Elections before their clients, clients before the loop.
    for (auto& member : members_) member.election = nullptr;
    members_.clear();
  }

  // A master's configuration: `quorum` (the ensemble's, or proxies in front of it), everything
  // else, the suspend tolerance included, at its default unless `set` says otherwise.
  Config configFor(const std::string& quorum, Duration sessionTimeout,
                   std::vector<std::string> set = {}) const {
    set.push_back("ha.zookeeper.quorum=" + quorum);
    set.push_back("cluster-id=" + clusterId_);
    set.push_back("ha.zookeeper.session-timeout=" + std::to_string(sessionTimeout.count()) + "ms");
    auto config = loadConfig(ConfigSources{.set = std::move(set)});
    KJ_REQUIRE(config.ok(), config.error().message);
    return std::move(config).value();
  }

  // A master named `name`: its HA services (a session), and its election, started.
  Member& add(const std::string& name, const Config& config) {
    Member member;
    auto ha = ha::HaServices::create(loop_, config, ha::HaServices::Identity::kWriter);
    KJ_REQUIRE(ha.ok(), ha.error().message);
    member.ha = std::move(ha).value();
    KJ_REQUIRE(regent::testing::runLoopBounded(loop_, member.zk().waitConnected(kWait), kWait)
                   .ok());
    member.contender = std::make_unique<RecordingContender>(name, log_);
    auto election =
        createLeaderElection(loop_, config, *member.ha, testing::contenderInfoForTests(name));
    KJ_REQUIRE(election.ok(), election.error().message);
    member.election = kj::mv(election.value());
    members_.push_back(std::move(member));
    Member& added = members_.back();
    added.sessionListener = added.zk().onSessionState(
        [&added](SessionState state) { added.sessionStates.push_back(state); });
    added.election->start(*added.contender);
    return added;
  }

  bool runUntil(const std::function<bool()>& done, Duration timeout = kWait) {
    return regent::testing::runLoopUntil(loop_, done, timeout);
  }

  // Runs `blocking` (a member's stop or start) on the fixture thread while the loop keeps serving
  // the sessions, so they see the restart as it happens.
  Status runAside(std::function<Status()> blocking) {
    auto done = fixtureThread_->post(std::move(blocking));
    EXPECT_TRUE(runUntil(
        [&] { return done.wait_for(std::chrono::seconds(0)) == std::future_status::ready; },
        Duration(180000)));
    return done.get();
  }

  std::string readEpoch(Member& reader) {
    auto node = regent::testing::runLoopBounded(loop_, reader.zk().get("epoch"), kWait);
    KJ_REQUIRE(node.ok(), ha::zkCodeName(node.code));
    return node.value.data;
  }

  void expectConsistentLog() {
    EXPECT_EQ(testing::checkElectionLog(log_), "");
    for (auto& member : members_) {
      EXPECT_TRUE(member.contender->violations().empty())
          << member.contender->name() << ": " << member.contender->violations().front();
    }
  }

  static FixtureThread* fixtureThread_;
  static regent::testing::ZooKeeperServer* ensemble_;
  static std::string* startError_;
  EventLoop loop_;
  std::string clusterId_;
  ElectionLog log_;
  std::list<Member> members_;
};

FixtureThread* LeaderEnsembleTest::fixtureThread_ = nullptr;
regent::testing::ZooKeeperServer* LeaderEnsembleTest::ensemble_ = nullptr;
std::string* LeaderEnsembleTest::startError_ = nullptr;

// Restarting each member in turn (the one the leader is connected to among them) cuts each
// client off for the moment it needs to reach another member, and for a ZooKeeper leader election
// when the member was the ensemble's leader. With suspend-tolerance 0 every such cut ended the
// term; with the default, a third of the negotiated session timeout, none does.
TEST_F(LeaderEnsembleTest, ARollingRestartOfTheEnsembleLeavesTheLeadersEpochUnchanged) {
  // A long session, so that a third of it rides out a member's restart on a loaded machine.
  const Config config = configFor(ensemble_->connectString(), Duration(30000));
  ASSERT_EQ(config.text("ha.zookeeper.suspend-tolerance"), "auto");
  Member& a = add("a", config);
  ASSERT_TRUE(runUntil([&] { return a.contender->leading(); }));
  Member& b = add("b", config);
  Member& c = add("c", config);
  ASSERT_TRUE(runUntil(
      [&] { return !b.contender->latchNodes().empty() && !c.contender->latchNodes().empty(); }));
  ASSERT_EQ(a.zk().negotiatedSessionTimeout(), Duration(30000));
  const uint64_t epoch = a.contender->epoch();

  for (size_t i = 0; i < ensemble_->memberCount(); ++i) {
    ASSERT_TRUE(runAside([&] { return ensemble_->stopMember(i); }).ok()) << "member " << i;
    ASSERT_TRUE(runAside([&] { return ensemble_->startMember(i); }).ok()) << "member " << i;
    // Every session is back (on some member) before the next member goes.
    ASSERT_TRUE(runUntil([&] {
      return std::all_of(members_.begin(), members_.end(),
                         [](Member& member) { return member.connected(); });
    })) << "after restarting member " << i;
    EXPECT_TRUE(a.contender->leading()) << "after restarting member " << i;
  }
  // The restarts did reach the leader's connection, and its term outlived them.
  EXPECT_NE(std::find(a.sessionStates.begin(), a.sessionStates.end(), SessionState::kSuspended),
            a.sessionStates.end());
  EXPECT_EQ(std::find(a.sessionStates.begin(), a.sessionStates.end(), SessionState::kExpired),
            a.sessionStates.end());
  EXPECT_TRUE(a.contender->leading());
  EXPECT_EQ(a.contender->epoch(), epoch);
  EXPECT_EQ(a.contender->revokes(), 0);
  EXPECT_EQ(b.contender->grants() + c.contender->grants(), 0);
  EXPECT_EQ(readEpoch(b), std::to_string(epoch));
  expectConsistentLog();
}

// The tolerance only rides out what a session survives: cut off from every member for longer,
// the leader ends its term (before the server expires its session, so before anyone else can
// win), and the next contender leads once the session is gone.
TEST_F(LeaderEnsembleTest, APartitionLongerThanTheToleranceStillEndsTheTerm) {
  std::vector<std::unique_ptr<regent::testing::ThreadedTcpFaultProxy>> proxies;
  std::string proxied;
  for (size_t i = 0; i < ensemble_->memberCount(); ++i) {
    auto proxy =
        regent::testing::ThreadedTcpFaultProxy::start("127.0.0.1", ensemble_->clientPort(i));
    ASSERT_TRUE(proxy.ok()) << proxy.error().message;
    proxied += (proxied.empty() ? "" : ",") + proxy.value()->address();
    proxies.push_back(std::move(proxy).value());
  }
  const Duration session{6000};
  Member& a = add("a", configFor(proxied, session));
  ASSERT_TRUE(runUntil([&] { return a.contender->leading(); }));
  Member& b = add("b", configFor(ensemble_->connectString(), session));
  ASSERT_TRUE(runUntil([&] { return !b.contender->latchNodes().empty(); }));
  const uint64_t epoch = a.contender->epoch();

  for (auto& proxy : proxies) proxy->cut();
  ASSERT_TRUE(runUntil([&] { return !a.contender->leading(); }));
  EXPECT_EQ(a.contender->lastReason(), "connection lost");
  // The term ended within the session's life: the client had not given it up, and the server
  // had not expired it, for nobody else leads yet.
  EXPECT_EQ(a.zk().sessionState(), SessionState::kSuspended);
  EXPECT_FALSE(b.contender->leading());

  ASSERT_TRUE(runUntil([&] { return b.contender->leading(); }));
  EXPECT_EQ(b.contender->epoch(), epoch + 1);
  for (auto& proxy : proxies) proxy->resume();
  // a comes back as a standby, in a new session.
  ASSERT_TRUE(runUntil([&] {
    return a.connected() && a.contender->latchNodes().size() == 2 &&
           a.contender->latchNodes().back() > b.contender->latchNodes().back();
  }));
  EXPECT_FALSE(a.contender->leading());
  EXPECT_TRUE(b.contender->leading());
  EXPECT_EQ(readEpoch(b), std::to_string(epoch + 1));
  expectConsistentLog();
}

}  // namespace
}  // namespace regent::leader

// A standalone master in process (RocksDB in a temporary directory, loopback ports): its cluster
// view shows its own term, its grant among the recent events, its sampled history, itself as the
// one contender, and its metrics registry what /metrics serves.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "common/descriptor_limit.h"
#include "common/event_loop.h"
#include "common/event_sink.h"
#include "conf/config.h"
#include "services/master/master_process.h"
#include "tests/fixtures/loop_wait_test_util.h"
#include "tests/fixtures/temp_dir_test_util.h"

namespace regent::master {
namespace {

// The value of `key` among `event`'s fields, or "" when it has none.
std::string fieldOf(const Event& event, const std::string& key) {
  for (const Event::Field& field : event.fields()) {
    if (field.key != key) continue;
    return std::visit(
        [](const auto& value) {
          if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::string>) {
            return value;
          } else {
            return std::to_string(value);
          }
        },
        field.value);
  }
  return "";
}

// Every event, to compare with what the view kept.
class RecordingEventSink final : public EventSink {
 public:
  void emit(const Event& event) override { names.push_back(event.name()); }
  std::vector<std::string> names;
};

TEST(MasterProcessView, AStandaloneMasterShowsItsTermItsGrantAndItselfAsTheOneContender) {
  regent::testing::TempDir dir("master-view");
  auto config = loadConfig(ConfigSources{
      .set = {"ha.mode=standalone", "ha.standalone.epoch-file=" + dir.path() + "/epoch",
              "store.rocksdb.path=" + dir.path() + "/store", "rpc.bind=127.0.0.1:0",
              "http.bind=127.0.0.1:0", "http.status-history-interval=100ms"}});
  ASSERT_TRUE(config.ok()) << config.error().message;
  auto auth = rpcAuthenticationFor(config.value());
  ASSERT_TRUE(auth.ok()) << auth.error().message;
  EventLoop loop;
  RecordingEventSink events;
  auto created = MasterProcess::create(loop, config.value(), events, std::move(auth).value(),
                                       raiseDescriptorLimit());
  ASSERT_TRUE(created.ok()) << created.error().message;
  MasterProcess& master = *created.value();
  const ClusterView& view = master;

  EXPECT_EQ(view.leadership().leadingEpoch, 0u);  // Not contending before run().
  EXPECT_TRUE(view.recentEvents().empty());
  EXPECT_TRUE(view.history().empty());
  EXPECT_FALSE(view.jobs().has_value());
  EXPECT_FALSE(view.jobCounts().has_value());
  EXPECT_FALSE(view.workers().has_value());

  kj::Promise<int> running = master.run().eagerlyEvaluate(nullptr);
  ASSERT_TRUE(regent::testing::runLoopUntil(
      loop, [&] { return view.leadership().serving; }, Duration(30000)))
      << "the standalone master did not serve";

  const LeadershipSnapshot leadership = view.leadership();
  EXPECT_GT(leadership.leadingEpoch, 0u);
  EXPECT_TRUE(leadership.recovered);
  EXPECT_FALSE(leadership.zooKeeperConnected);  // Standalone: no ZooKeeper.
  EXPECT_EQ(leadership.self.masterId, master.masterId());
  ASSERT_TRUE(leadership.leader.has_value());
  EXPECT_EQ(leadership.leader->masterId, master.masterId());
  EXPECT_EQ(leadership.leader->epoch, leadership.leadingEpoch);

  std::optional<JobsSnapshot> jobs = view.jobs();
  ASSERT_TRUE(jobs.has_value());
  EXPECT_EQ(jobs->jobs.size(), 0u);
  ASSERT_TRUE(view.jobCounts().has_value());
  EXPECT_EQ(view.jobCounts()->active, 0u);
  std::optional<WorkersSnapshot> workers = view.workers();
  ASSERT_TRUE(workers.has_value());
  EXPECT_EQ(workers->counts.taskExecutors, 0u);
  ASSERT_TRUE(view.workerCounts().has_value());
  EXPECT_EQ(view.workerCounts()->taskExecutors, 0u);

  // The history starts with the term's first sample, then one every
  // http.status-history-interval.
  ASSERT_FALSE(view.history().empty());
  EXPECT_EQ(view.history().front().jobs.active, 0u);
  EXPECT_GT(view.history().front().wallMs, 0);
  ASSERT_TRUE(regent::testing::runLoopUntil(
      loop, [&] { return view.history().size() >= 3; }, Duration(30000)))
      << "the history was not sampled again";
  const std::vector<ClusterSample> history = view.history();
  for (size_t i = 1; i < history.size(); ++i) {
    EXPECT_GE(history[i].wallMs, history[i - 1].wallMs);
  }

  // The grant is kept (the term's own events, if any, are not), and was emitted as well.
  const std::vector<Event> recent = view.recentEvents();
  ASSERT_EQ(recent.size(), 1u);
  EXPECT_EQ(recent[0].name(), "leadership granted");
  EXPECT_EQ(fieldOf(recent[0], "epoch"), std::to_string(leadership.leadingEpoch));
  EXPECT_EQ(fieldOf(recent[0], "master_id"), master.masterId());
  EXPECT_EQ(std::count(events.names.begin(), events.names.end(), "leadership granted"), 1);

  auto contenders =
      regent::testing::runLoopBounded(loop, master.contenders(), Duration(30000), "the contenders");
  ASSERT_TRUE(contenders.ok()) << contenders.error().message;
  ASSERT_EQ(contenders.value().size(), 1u);
  EXPECT_EQ(contenders.value()[0].info.masterId, master.masterId());

  const std::string metrics = master.metrics().text();
  EXPECT_NE(metrics.find("\nregent_leader 1\n"), std::string::npos) << metrics;
  // RocksDB: no ZooKeeper transaction.
  EXPECT_NE(metrics.find("\nregent_store_zookeeper_transactions_total 0\n"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("\nregent_epoch " + std::to_string(leadership.leadingEpoch) + "\n"),
            std::string::npos)
      << metrics;

  running = nullptr;
  loop.run(master.close());
  EXPECT_FALSE(view.leadership().recovered);  // close() ended the term.
}

}  // namespace
}  // namespace regent::master

// The HTTP endpoints of real regent-master processes: with http.bind port 0 the chosen port is
// the one the leader record advertises, a standby answers 307 to the leader on /v1/jobs, and
// /metrics of leader and standby parse as Prometheus text, and neither /metrics nor /v1/jobs reads
// ZooKeeper (the leader answers from its Dispatcher in memory). A leader paused past its session
// claims to serve on none of its endpoints when it runs again.
#include <gtest/gtest.h>
#include <kj/compat/http.h>
#include <kj/debug.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "common/event_loop.h"
#include "common/host_port.h"
#include "tests/fixtures/zookeeper_server.h"
#include "tests/http/prometheus_text_test_util.h"
#include "tests/integration/http_get_test_util.h"
#include "tests/integration/master_cluster_test_util.h"

namespace regent::testing {
namespace {

using Kind = MasterEvent::Kind;

constexpr Duration kStartTimeout{60000};

// The (listen, advertised) HTTP addresses from a master's "http listening on" line.
std::pair<std::string, std::string> httpAddressesOf(MasterCluster& cluster, size_t slot) {
  const std::regex pattern("http listening on (\\S+) advertised as (\\S+)");
  auto line = cluster.process(slot).waitForLine(pattern, kStartTimeout);
  KJ_REQUIRE(line.ok(), line.error().message);
  std::smatch match;
  KJ_REQUIRE(std::regex_search(line.value(), match, pattern));
  return {match[1], match[2]};
}

// ZooKeeper's count of read requests (getData, getChildren, exists, ...) under the first path
// component `space` ("regent"), from mntr's zk_cnt_<space>_read_per_namespace; pings and
// writes are not counted. -1 when mntr does not report it.
int64_t zooKeeperReadsUnder(ZooKeeperServer& server, const std::string& space, std::string* mntr) {
  auto reply = server.fourLetterWord(0, "mntr");
  KJ_REQUIRE(reply.ok(), reply.error().message);
  *mntr = reply.value();
  const std::regex pattern("zk_cnt_" + space + "_read_per_namespace\\s+(\\d+)");
  std::smatch match;
  if (!std::regex_search(*mntr, match, pattern)) return -1;
  return std::stoll(match[1]);
}

std::function<bool(const HttpReply&)> statusIs(uint status) {
  return [status](const HttpReply& reply) { return reply.status == status; };
}

class MasterHttpTest : public ::testing::Test {
 protected:
  ~MasterHttpTest() noexcept override = default;

  HttpReply get(const std::string& address, const std::string& path) {
    return httpGet(loop_, table_, address, path);
  }

  HttpReply getUntil(const std::string& address, const std::string& path,
                     const std::function<bool(const HttpReply&)>& done) {
    return httpGetUntil(loop_, table_, address, path, done);
  }

  EventLoop loop_;
  kj::HttpHeaderTable table_;
};

TEST_F(MasterHttpTest, StandbyRedirectsJobsToTheLeaderAndMetricsParse) {
  auto server = sharedZooKeeperServer();
  ASSERT_TRUE(server.ok()) << server.error().message;
  MasterCluster cluster({.quorum = server.value()->connectString(),
                         .clusterId = uniqueClusterId("http"),
                         .extraSet = {"rpc.advertised-address=", "http.bind=127.0.0.1:0"}});
  ASSERT_TRUE(cluster.startMasters(2).ok());
  auto first = cluster.waitForGrant(1, kStartTimeout);
  ASSERT_TRUE(first.ok()) << first.error().message;
  const size_t leaderSlot = first.value();
  const size_t standbySlot = 1 - leaderSlot;
  auto serving = cluster.waitForEvent(
      leaderSlot, [](const MasterEvent& e) { return e.kind == Kind::kServing && e.epoch == 1; },
      kStartTimeout);
  ASSERT_TRUE(serving.ok()) << serving.error().message;

  const auto [leaderListen, leaderAdvertised] = httpAddressesOf(cluster, leaderSlot);
  const auto [standbyListen, standbyAdvertised] = httpAddressesOf(cluster, standbySlot);
  auto listenParts = splitHostPort(leaderListen);
  auto advertisedParts = splitHostPort(leaderAdvertised);
  ASSERT_TRUE(listenParts.ok()) << listenParts.error().message;
  ASSERT_TRUE(advertisedParts.ok()) << advertisedParts.error().message;
  EXPECT_NE(listenParts.value().port, 0);
  EXPECT_EQ(listenParts.value().port, advertisedParts.value().port);

  EXPECT_EQ(get(leaderListen, "/healthz").status, 200u);
  EXPECT_EQ(getUntil(leaderListen, "/readyz", statusIs(200)).status, 200u);
  EXPECT_EQ(getUntil(standbyListen, "/readyz", statusIs(200)).status, 200u);

  // The standby's view of the leader carries the port the leader actually bound.
  HttpReply leaderView = getUntil(standbyListen, "/v1/leader", [](const HttpReply& r) {
    return r.status == 200 && nlohmann::json::parse(r.body)["status"] == "SERVING";
  });
  auto view = nlohmann::json::parse(leaderView.body);
  EXPECT_EQ(view["epoch"], 1);
  EXPECT_EQ(view["http_address"], leaderAdvertised);

  HttpReply redirect = getUntil(standbyListen, "/v1/jobs", statusIs(307));
  EXPECT_EQ(redirect.location, "http://" + leaderAdvertised + "/v1/jobs");
  // The redirect is usable: following it reaches the leader's jobs.
  const std::regex url("http://([^/]+)(/.*)");
  std::smatch target;
  ASSERT_TRUE(std::regex_match(redirect.location, target, url)) << redirect.location;
  EXPECT_EQ(getUntil(target[1], target[2], statusIs(200)).status, 200u);

  HttpReply jobs = getUntil(leaderListen, "/v1/jobs", statusIs(200));
  auto listed = nlohmann::json::parse(jobs.body);
  EXPECT_EQ(listed["epoch"], 1);
  EXPECT_TRUE(listed["jobs"].is_array());

  HttpReply leaderMetrics = get(leaderListen, "/metrics");
  ASSERT_EQ(leaderMetrics.status, 200u);
  auto parsed = parsePrometheusText(leaderMetrics.body);
  ASSERT_EQ(parsed.error, "") << leaderMetrics.body;
  EXPECT_EQ(parsed.samples.at("regent_leader"), 1);
  EXPECT_EQ(parsed.samples.at("regent_leader_serving"), 1);
  EXPECT_EQ(parsed.samples.at("regent_epoch"), 1);
  EXPECT_EQ(parsed.samples.at("regent_zookeeper_connected"), 1);
  EXPECT_EQ(parsed.samples.at("regent_jobs{state=\"created\"}"), 0);
  EXPECT_EQ(parsed.types.at("regent_rpc_fencing_rejections_total"), "counter");
  // The /v1/jobs and /metrics requests above read the Dispatcher in process: no RPC call.
  EXPECT_EQ(parsed.samples.at("regent_rpc_calls_total{method=\"DispatcherGateway.listJobs\"}"), 0);

  HttpReply standbyMetrics = get(standbyListen, "/metrics");
  ASSERT_EQ(standbyMetrics.status, 200u);
  auto standbyParsed = parsePrometheusText(standbyMetrics.body);
  ASSERT_EQ(standbyParsed.error, "") << standbyMetrics.body;
  EXPECT_EQ(standbyParsed.samples.at("regent_leader"), 0);
  EXPECT_EQ(standbyParsed.samples.at("regent_epoch"), 1);
  EXPECT_EQ(standbyParsed.samples.at("regent_zookeeper_connected"), 1);
}

TEST_F(MasterHttpTest, AScrapeAndAJobListingOfTheLeaderReadNothingFromZooKeeper) {
  auto server = sharedZooKeeperServer();
  ASSERT_TRUE(server.ok()) << server.error().message;
  MasterCluster cluster({.quorum = server.value()->connectString(),
                         .clusterId = uniqueClusterId("scrape"),
                         .extraSet = {"http.bind=127.0.0.1:0"}});
  ASSERT_TRUE(cluster.startMasters(1).ok());
  auto serving = cluster.waitForEvent(
      0, [](const MasterEvent& e) { return e.kind == Kind::kServing && e.epoch == 1; },
      kStartTimeout);
  ASSERT_TRUE(serving.ok()) << serving.error().message;
  const auto [listen, advertised] = httpAddressesOf(cluster, 0);
  // The jobs appear once the term serves; from then on they are the Dispatcher's in memory.
  getUntil(listen, "/v1/jobs", statusIs(200));

  // Every master's nodes live under /regent (ha.zookeeper.root), one namespace for ZooKeeper.
  std::string mntr;
  const int64_t before = zooKeeperReadsUnder(*server.value(), "regent", &mntr);
  ASSERT_GE(before, 1) << "mntr does not count reads under /regent:\n" << mntr;
  for (int i = 0; i < 5; ++i) {
    HttpReply metrics = get(listen, "/metrics");
    ASSERT_EQ(metrics.status, 200u);
    EXPECT_NE(metrics.body.find("regent_jobs{state=\"created\"} 0"), std::string::npos)
        << metrics.body;
    EXPECT_EQ(get(listen, "/v1/jobs").status, 200u);
  }
  EXPECT_EQ(zooKeeperReadsUnder(*server.value(), "regent", &mntr), before) << mntr;
}

// A leader SIGSTOPped past its ZooKeeper session, while a standby leads the next epoch, answers
// the requests it finds queued when it runs again (before it has read anything from ZooKeeper)
// as a master that does not lead: its own clock shows the session's deadline passed.
TEST_F(MasterHttpTest, ALeaderPausedPastItsSessionClaimsToServeNowhereWhenItRunsAgain) {
  auto server = sharedZooKeeperServer();
  ASSERT_TRUE(server.ok()) << server.error().message;
  MasterCluster cluster({.quorum = server.value()->connectString(),
                         .clusterId = uniqueClusterId("paused-leader-http"),
                         .sessionTimeout = Duration(2000),
                         .extraSet = {"http.bind=127.0.0.1:0"}});
  ASSERT_TRUE(cluster.startMasters(2).ok());
  auto leader = cluster.waitForGrant(1, kStartTimeout);
  ASSERT_TRUE(leader.ok()) << leader.error().message;
  const size_t paused = leader.value();
  const size_t standby = 1 - paused;
  const std::string pausedId = cluster.masterId(paused);
  const std::string pausedHttp = httpAddressesOf(cluster, paused).first;
  const std::string standbyHttp = httpAddressesOf(cluster, standby).first;
  getUntil(pausedHttp, "/readyz", statusIs(200));

  ASSERT_TRUE(cluster.process(paused).pause().ok());
  auto next = cluster.waitForGrant(2, kStartTimeout);
  ASSERT_TRUE(next.ok()) << next.error().message << cluster.describe();
  EXPECT_EQ(next.value(), standby);
  getUntil(standbyHttp, "/readyz", statusIs(200));  // Epoch 2 is SERVING.

  std::vector<std::pair<std::string, std::unique_ptr<QueuedHttpGet>>> queued;
  for (const char* path : {"/metrics", "/v1/leader", "/readyz"}) {
    auto sent = QueuedHttpGet::send(pausedHttp, path);
    ASSERT_TRUE(sent.ok()) << sent.error().message;
    queued.emplace_back(path, std::move(sent).value());
  }
  ASSERT_TRUE(cluster.process(paused).resume().ok());

  for (auto& [path, get] : queued) {
    SCOPED_TRACE(path);
    auto reply = get->reply(kStartTimeout);
    ASSERT_TRUE(reply.ok()) << reply.error().message;
    if (path == "/metrics") {
      ASSERT_EQ(reply.value().status, 200u);
      EXPECT_TRUE(metricsMatch(reply.value().body, {.samples = {{"regent_leader_serving", 0}}}));
    } else if (path == "/v1/leader") {
      // No leader known, or the new one: never this master.
      if (reply.value().status == 200u) {
        const auto json = nlohmann::json::parse(reply.value().body, nullptr, false);
        EXPECT_NE(json.value("master_id", ""), pausedId) << reply.value().body;
      } else {
        EXPECT_EQ(reply.value().status, 503u) << reply.value().body;
      }
    } else {
      EXPECT_EQ(reply.value().status, 503u) << reply.value().body;
    }
  }
  // And the term ends: the master logs the revocation of epoch 1.
  auto revoked = cluster.waitForEvent(
      paused, [](const MasterEvent& e) { return e.kind == Kind::kRevoked && e.epoch == 1; },
      kStartTimeout);
  EXPECT_TRUE(revoked.ok()) << revoked.error().message;
}

}  // namespace
}  // namespace regent::testing

// The master's HTTP endpoints against a fake cluster view and the master's metric families, over
// a real loopback socket: status codes, bodies, the standby's redirect, the leader's jobs and
// workers read in process, and /metrics parsed strictly.
#include "services/master/master_http.h"
#include "services/master/status_page.h"

#include <capnp/message.h>
#include <gtest/gtest.h>
#include <kj/compat/http.h>
#include <kj/debug.h>
#include <kj/timer.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/job_status_output.h"
#include "common/event_loop.h"
#include "common/ids.h"
#include "common/log_event_sink.h"
#include "jobgraph/job_graph_spec.h"
#include "rpc/wire_ids.h"
#include "services/master/master_metrics.h"
#include "tests/fixtures/loop_wait_test_util.h"
#include "tests/http/prometheus_text_test_util.h"
#include "tests/store/fake_stores_test_util.h"

namespace regent::master {
namespace {

using http::HttpServer;
using regent::testing::familyText;
using regent::testing::metricsMatch;

// A leader's Dispatcher on memory stores with three jobs: job-0 and job-1 CREATED, job-2
// CANCELED (ids 0x1234:1..3).
class LeaderJobs final {
 public:
  explicit LeaderJobs(EventLoop& loop) {
    stores_ = backend.openTerm();
    dispatcher = kj::heap<dispatcher::Dispatcher>(7, *stores_, loop.timer(), events_,
                                                  jobgraph::JobGraphLimits{}, 1000,
                                                  [this] { return clockMs_++; });
    KJ_REQUIRE(loop.run(dispatcher->recover()).ok());
    for (uint64_t i = 0; i < 3; ++i) {
      auto parsed = jobgraph::parseJobGraphSpec(
          "job_id: " + JobId(0x1234, i + 1).toHex() + "\nname: job-" + std::to_string(i) +
              "\nvertices:\n  - name: work\n    parallelism: 1\n    command:\n      argv: [true]\n",
          jobgraph::JobGraphSpecFormat::kYaml);
      KJ_REQUIRE(parsed.ok(), parsed.error().message);
      KJ_REQUIRE(loop.run(dispatcher->submit(parsed.value()->getRoot<wire::JobGraph>())).ok());
    }
    KJ_REQUIRE(loop.run(dispatcher->cancel(JobId(0x1234, 3))).ok());
    // Its cleanup runs on in the background (and reads the results once): let it end first.
    KJ_REQUIRE(
        regent::testing::runLoopUntil(
            loop, [this] { return dispatcher->cleanupsRunning() == 0; }, std::chrono::seconds(10)),
        "the cancelled job's cleanup did not end", dispatcher->cleanupsRunning());
  }

  store::testing::FakeStoreBackend backend;
  LogEventSink events_;
  kj::Own<dispatcher::Dispatcher> dispatcher;

 private:
  int64_t clockMs_ = 1000;
  kj::Own<store::LeaderStores> stores_;
};

// A leader's workers: worker 0xab:1 ("w1", pid 11) with slot 0 free, slot 1 allocated to job
// 0x1234:1 and slot 2 pending for it; worker 0xab:2 registered, not reported yet.
class LeaderWorkers final : public dispatcher::TaskExecutorView {
 public:
  Counts counts() const override {
    return {.taskExecutors = 2, .slotsTotal = 3, .slotsFree = 1, .slotsAllocated = 1,
            .slotsPending = 1};
  }
  capnp::Orphan<capnp::List<wire::TaskExecutorInfo>> list(
      capnp::Orphanage orphanage) const override {
    auto listed = orphanage.newOrphan<capnp::List<wire::TaskExecutorInfo>>(2);
    auto first = listed.get()[0];
    auto registration = first.initRegistration();
    wire::setWireId(registration.initResourceId(), ResourceId(0xab, 1));
    registration.setHost("w1");
    registration.setPid(11);
    registration.setDataAddress("10.0.0.5:9001");
    registration.setHttpAddress("10.0.0.5:8082");
    first.setRegisteredAtMs(1000);
    first.setLastHeartbeatAtMs(2000);
    auto slots = first.initSlots(3);
    for (uint32_t i = 0; i < 3; ++i) {
      slots[i].initSlotId().setSlotIndex(i);
      slots[i].initProfile().setCpuMillis(500);
      slots[i].getProfile().setMemoryBytes(uint64_t{1} << 30);
      if (i > 0) {
        wire::setWireId(slots[i].initAllocationId(), AllocationId(0xa1, i));
        wire::setWireId(slots[i].initJobId(), JobId(0x1234, 1));
      }
    }
    auto second = listed.get()[1].initRegistration();
    wire::setWireId(second.initResourceId(), ResourceId(0xab, 2));
    second.setHost("w2");
    return listed;
  }
  bool slotPending(const ResourceId& worker, uint32_t index) const override {
    return worker == ResourceId(0xab, 1) && index == 2;
  }
};

// A master's view whose leadership the tests set; the jobs and workers are snapshots of a real
// Dispatcher and a TaskExecutorView, filled as the term fills them.
class FakeView final : public ClusterView {
 public:
  FakeView() {
    self_.masterId = "self";
    self_.httpAddress = "127.0.0.1:1";
  }
  kj::Promise<void> loadJobDetail(const JobId&) override { return kj::READY_NOW; }
  LeadershipSnapshot leadership() const override {
    return {.self = self_,
            .leader = leader,
            .leadingEpoch = epoch,
            .recovered = epoch != 0 && leaderJobs != nullptr && ready,
            .serving = isServing,
            .zooKeeperConnected = connected};
  }
  std::optional<JobsSnapshot> jobs() const override {
    if (!leadership().recovered) return std::nullopt;
    ++jobsSnapshots;
    return jobsSnapshot(*leaderJobs->dispatcher);
  }
  std::optional<dispatcher::JobCounts> jobCounts() const override {
    if (!leadership().recovered) return std::nullopt;
    return leaderJobs->dispatcher->counts();
  }
  std::optional<JobDetailSnapshot> job(const JobId& id) const override {
    if (!leadership().recovered) return std::nullopt;
    return jobDetailSnapshot(*leaderJobs->dispatcher, id);
  }
  std::optional<WorkersSnapshot> workers() const override {
    if (epoch == 0 || leaderWorkers == nullptr) return std::nullopt;
    return workersSnapshot(*leaderWorkers);
  }
  std::optional<dispatcher::TaskExecutorView::Counts> workerCounts() const override {
    if (epoch == 0 || leaderWorkers == nullptr) return std::nullopt;
    return leaderWorkers->counts();
  }
  std::vector<Event> recentEvents() const override { return events; }
  std::vector<ClusterSample> history() const override { return samples; }
  kj::Promise<Result<std::vector<leader::ContenderEntry>>> contenders() override {
    return Result<std::vector<leader::ContenderEntry>>(std::vector<leader::ContenderEntry>{});
  }

  leader::ContenderInfo self_;
  std::optional<leader::LeaderInfo> leader;
  uint64_t epoch = 0;
  bool isServing = false;
  bool connected = false;
  LeaderJobs* leaderJobs = nullptr;
  bool ready = false;
  const LeaderWorkers* leaderWorkers = nullptr;
  mutable int jobsSnapshots = 0;  // jobs() calls.
  std::vector<Event> events;
  std::vector<ClusterSample> samples;
};

struct Reply {
  uint status = 0;
  std::string body;
  std::string location;
  std::string allow;
  std::string contentType;
  std::string noSniff;  // X-Content-Type-Options.
  std::string policy;   // Content-Security-Policy.
};

class HttpServerTest : public ::testing::Test {
 protected:
  // The metric families a master registers, over the fake's counters (the JobMasters' and the
  // authentication's are left out: tests add them).
  HttpServerTest() {
    addClusterViewMetrics(metrics_, host_);
    addResourceManagerMetrics(metrics_, resourceManagerCounters_);
    addFencingMetrics(metrics_, counters_);
    addRpcTransportMetrics(metrics_, [this] { return transport_; });
    http::addAcceptLoopMetrics(metrics_, "rpc", [] { return nullptr; });
    http::addHttpServerMetrics(metrics_, [this] { return metricsServer_; });
  }
  ~HttpServerTest() noexcept override = default;

  void SetUp() override { start(); }

  void start() {
    server_ = nullptr;
    auto listening = loop_.run(listenMasterHttp(loop_.io().getNetwork(), loop_.timer(),
                                                "127.0.0.1:0", host_, metrics_, authRequired_));
    ASSERT_TRUE(listening.ok()) << listening.error().message;
    server_ = kj::mv(listening).value();
  }

  Reply fetch(const std::string& path, kj::HttpMethod method = kj::HttpMethod::GET) {
    auto address = loop_.run(loop_.io().getNetwork().parseAddress(server_->listenAddress()));
    auto client = kj::newHttpClient(loop_.timer(), *table_, *address);
    kj::HttpHeaders headers(*table_);
    auto response =
        loop_.run(client->request(method, kj::StringPtr(path.c_str()), headers).response);
    Reply reply;
    reply.status = response.statusCode;
    reply.body = loop_.run(response.body->readAllText()).cStr();
    KJ_IF_MAYBE (location, response.headers->get(kj::HttpHeaderId::LOCATION)) {
      reply.location = location->cStr();
    }
    KJ_IF_MAYBE (allow, response.headers->get(KJ_ASSERT_NONNULL(table_->stringToId("Allow")))) {
      reply.allow = allow->cStr();
    }
    KJ_IF_MAYBE (type, response.headers->get(kj::HttpHeaderId::CONTENT_TYPE)) {
      reply.contentType = type->cStr();
    }
    response.headers->forEach([&](kj::StringPtr name, kj::StringPtr value) {
      if (name == "X-Content-Type-Options") reply.noSniff = value.cStr();
      if (name == "Content-Security-Policy") reply.policy = value.cStr();
    });
    return reply;
  }

  // Sends `request` as written on a fresh connection and reads until the server closes it; a
  // server that does not close within 30 s fails the test.
  std::string rawExchange(const std::string& request) {
    auto address = loop_.run(loop_.io().getNetwork().parseAddress(server_->listenAddress()));
    auto connection = loop_.run(address->connect());
    loop_.run(connection->write(request.data(), request.size()));
    auto read = connection->readAllText().then([](kj::String text) {
      return std::optional<std::string>(text.cStr());
    });
    auto bounded = loop_.run(read.exclusiveJoin(loop_.timer().afterDelay(30 * kj::SECONDS).then(
        [] { return std::optional<std::string>(); })));
    if (!bounded) ADD_FAILURE() << "the server kept the connection open";
    return bounded.value_or("");
  }

  // The server on a timer that never moves, so only a close the server decides on ends a
  // connection (kj's idle and pipeline timeouts never fire).
  void startOnAFrozenTimer() {
    server_ = nullptr;
    auto listening = loop_.run(listenMasterHttp(loop_.io().getNetwork(), frozenTimer_,
                                                "127.0.0.1:0", host_, metrics_, authRequired_));
    ASSERT_TRUE(listening.ok()) << listening.error().message;
    server_ = kj::mv(listening).value();
  }

  void lead(uint64_t epoch, bool serving) {
    host_.epoch = epoch;
    host_.isServing = serving;
    leader::ContenderInfo self = host_.self_;
    host_.leader = leader::leaderInfoFor(self, epoch, 42);
    host_.leaderJobs = &jobs_;
    host_.ready = true;
    host_.leaderWorkers = &workers_;
  }

  EventLoop loop_;
  LeaderJobs jobs_{loop_};
  LeaderWorkers workers_;
  FakeView host_;
  rpc::FencingCounters counters_;
  resourcemanager::ResourceManagerCounters resourceManagerCounters_;
  std::optional<RpcTransportCounts> transport_;
  const HttpServer* metricsServer_ = nullptr;
  bool authRequired_ = false;
  http::MetricsRegistry metrics_;
  kj::Own<kj::HttpHeaderTable> table_ = http::makeHeaderTable();
  kj::TimerImpl frozenTimer_{kj::origin<kj::TimePoint>()};
  kj::Own<HttpServer> server_;
};

TEST_F(HttpServerTest, HealthzAnswersOk) {
  Reply reply = fetch("/healthz");
  EXPECT_EQ(reply.status, 200u);
  EXPECT_EQ(reply.body, "ok\n");
}

TEST_F(HttpServerTest, ReadyzFollowsLeadershipAndZooKeeper) {
  Reply standbyDown = fetch("/readyz");
  EXPECT_EQ(standbyDown.status, 503u);
  EXPECT_NE(standbyDown.body.find("not connected to ZooKeeper"), std::string::npos)
      << standbyDown.body;

  host_.connected = true;
  EXPECT_EQ(fetch("/readyz").status, 200u);

  lead(7, false);
  Reply recovering = fetch("/readyz");
  EXPECT_EQ(recovering.status, 503u);
  EXPECT_NE(recovering.body.find("epoch 7 still RECOVERING"), std::string::npos) << recovering.body;

  host_.isServing = true;
  host_.connected = false;  // A serving leader is ready even while ZooKeeper is suspended.
  EXPECT_EQ(fetch("/readyz").status, 200u);
}

TEST_F(HttpServerTest, LeaderIsTheKnownLeaderOrNone) {
  Reply none = fetch("/v1/leader");
  EXPECT_EQ(none.status, 503u);
  EXPECT_EQ(nlohmann::json::parse(none.body), nlohmann::json({{"status", "NONE"}}));

  leader::LeaderInfo other;
  other.epoch = 3;
  other.masterId = "other";
  other.rpcAddress = "10.0.0.2:6123";
  other.httpAddress = "10.0.0.2:8081";
  other.status = leader::LeaderStatus::kServing;
  host_.leader = other;
  Reply known = fetch("/v1/leader?pretty=1");
  EXPECT_EQ(known.status, 200u);
  EXPECT_EQ(known.contentType, "application/json");
  auto parsed = leader::leaderInfoFromJson(known.body);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed.value(), other);
}

TEST_F(HttpServerTest, JobsOnTheLeaderAreReadFromItsDispatcherWithoutAStoreRead) {
  lead(7, true);
  const size_t reads = jobs_.backend.reads;
  Reply reply = fetch("/v1/jobs");
  ASSERT_EQ(reply.status, 200u) << reply.body;
  auto json = nlohmann::json::parse(reply.body);
  EXPECT_EQ(json["epoch"], 7);
  ASSERT_EQ(json["jobs"].size(), 3u);
  EXPECT_EQ(json["jobs"][0]["job_id"], JobId(0x1234, 1).toHex());
  EXPECT_EQ(json["jobs"][0]["name"], "job-0");
  EXPECT_EQ(json["jobs"][0]["state"], "CREATED");
  EXPECT_EQ(json["jobs"][2]["name"], "job-2");
  EXPECT_EQ(json["jobs"][2]["state"], "CANCELED");
  EXPECT_GT(json["jobs"][2]["ended_at_ms"], 0);
  EXPECT_GT(json["jobs"][1]["submitted_at_ms"], json["jobs"][0]["submitted_at_ms"]);
  EXPECT_EQ(jobs_.backend.reads, reads);
  EXPECT_TRUE(counters_.calls().empty());  // No RPC either.
}

TEST_F(HttpServerTest, OneJobOnTheLeaderCarriesItsVerticesAndItsResult) {
  lead(7, true);
  Reply reply = fetch("/v1/jobs/" + JobId(0x1234, 1).toHex());
  ASSERT_EQ(reply.status, 200u) << reply.body;
  auto json = nlohmann::json::parse(reply.body);
  EXPECT_EQ(json["epoch"], 7);
  EXPECT_EQ(json["job"]["job_id"], JobId(0x1234, 1).toHex());
  EXPECT_EQ(json["job"]["state"], "CREATED");
  ASSERT_EQ(json["job"]["vertices"].size(), 1u);
  EXPECT_EQ(json["job"]["vertices"][0]["name"], "work");
  EXPECT_EQ(json["job"]["vertices"][0]["tasks"]["pending"], 1);
  EXPECT_TRUE(json["job"]["vertices"][0]["subtasks"].empty());
  EXPECT_EQ(json["job"]["tasks"]["total"], 1);

  auto canceled = nlohmann::json::parse(fetch("/v1/jobs/" + JobId(0x1234, 3).toHex()).body);
  EXPECT_EQ(canceled["job"]["state"], "CANCELED");
  EXPECT_GT(canceled["job"]["ended_at_ms"], 0);

  Reply unknown = fetch("/v1/jobs/" + JobId(0x99, 9).toHex());
  EXPECT_EQ(unknown.status, 404u);
  EXPECT_EQ(nlohmann::json::parse(unknown.body)["message"], "no job " + JobId(0x99, 9).toHex());
  Reply bad = fetch("/v1/jobs/xyz");
  EXPECT_EQ(bad.status, 400u);
  EXPECT_EQ(nlohmann::json::parse(bad.body)["message"], "not a job id (32 hex digits): xyz");
}

// One writer: /v1/jobs/<id>'s "job" is what `regentctl jobs status --json` prints for the same
// status (without the CLI's "result"), in the same form (null for an unset text, ISO times).
TEST_F(HttpServerTest, OneJobIsTheJsonRegentctlJobsStatusPrints) {
  lead(7, true);
  for (uint64_t i = 1; i <= 3; ++i) {
    const JobId id(0x1234, i);
    Reply reply = fetch("/v1/jobs/" + id.toHex());
    ASSERT_EQ(reply.status, 200u) << reply.body;
    capnp::MallocMessageBuilder message;
    auto answer = message.initRoot<wire::DispatcherGateway::JobStatusResults>();
    dispatcher::toWire(KJ_ASSERT_NONNULL(jobs_.dispatcher->job(id)), answer.initStatus(),
                       dispatcher::JobDetail::kSubtasks);
    const auto printed = nlohmann::json::parse(cli::jobStatusJson(answer.asReader()));
    const auto served = nlohmann::json::parse(reply.body)["job"];
    EXPECT_EQ(served, printed) << "served: " << served.dump() << "\nprinted: " << printed.dump();
    EXPECT_TRUE(served.contains("submitted_at")) << served.dump();
  }
}

// ---- The status page -------------------------------------------------------------------------

TEST_F(HttpServerTest, ThePageOfTheLeaderShowsItsEpochWorkersAndJobsWithItsSecurityHeaders) {
  lead(7, true);
  const int snapshotsBefore = host_.jobsSnapshots;
  Reply reply = fetch("/");
  ASSERT_EQ(reply.status, 200u) << reply.body;
  EXPECT_EQ(host_.jobsSnapshots, snapshotsBefore + 1) << "one snapshot of the jobs per page";
  EXPECT_EQ(reply.contentType, "text/html; charset=utf-8");
  EXPECT_EQ(reply.policy, statusPagePolicy());
  EXPECT_EQ(reply.noSniff, "nosniff");
  // Every answer, not only the page's, is only ever the type it names.
  EXPECT_EQ(fetch("/v1/jobs").noSniff, "nosniff");
  EXPECT_EQ(fetch("/no-such-route").noSniff, "nosniff");
  EXPECT_NE(reply.body.find("This master <b>leads</b> (epoch <span id=\"epoch\">7</span>"),
            std::string::npos)
      << reply.body;
  EXPECT_NE(reply.body.find("<td class=\"name\">job-0</td>"), std::string::npos);
  EXPECT_NE(reply.body.find("<td class=\"state\">CANCELED</td>"), std::string::npos);
  EXPECT_NE(reply.body.find("<tr class=\"worker\"><td>w1</td>"), std::string::npos) << reply.body;
  EXPECT_NE(reply.body.find("href=\"/jobs/" + JobId(0x1234, 1).toHex() + "\""),
            std::string::npos);
  // No inline script or style: the policy forbids them, and the page needs none.
  EXPECT_EQ(reply.body.find("<script>"), std::string::npos);
  EXPECT_EQ(reply.body.find("style="), std::string::npos);
  Reply script = fetch("/static/status.js");
  EXPECT_EQ(script.status, 200u);
  EXPECT_EQ(script.contentType, "text/javascript; charset=utf-8");
  EXPECT_EQ(fetch("/static/status.css").status, 200u);

  Reply job = fetch("/jobs/" + JobId(0x1234, 3).toHex());
  ASSERT_EQ(job.status, 200u) << job.body;
  EXPECT_NE(job.body.find("<dd class=\"state\">CANCELED</dd>"), std::string::npos) << job.body;
  EXPECT_EQ(fetch("/jobs/" + JobId(0x99, 9).toHex()).status, 404u);
  Reply bad = fetch("/jobs/%3Cscript%3E");
  EXPECT_EQ(bad.status, 400u);
  EXPECT_EQ(bad.body.find("<script"), std::string::npos) << bad.body;
}

TEST_F(HttpServerTest, AStandbysPageSaysSoAndLinksToTheLeader) {
  leader::ContenderInfo other;
  other.masterId = "other";
  other.httpAddress = "10.0.0.2:8081";
  host_.leader = leader::leaderInfoFor(other, 9, 42);
  Reply reply = fetch("/");
  ASSERT_EQ(reply.status, 200u) << reply.body;
  EXPECT_NE(reply.body.find("This master is a <b>standby</b>. The leader is <a id=\"leader-link\" "
                            "href=\"http://10.0.0.2:8081/\">"),
            std::string::npos)
      << reply.body;
  EXPECT_NE(reply.body.find("<span id=\"epoch\">9</span>"), std::string::npos);
  EXPECT_NE(reply.body.find("Shown by the leader"), std::string::npos);
}

// Three samples: 2 jobs RUNNING then 1 RUNNING and 1 FINISHED; slots 8, 6 and 7 free of 8;
// 3 attempts restarted between the first two, 2 adopted between the last two.
std::vector<ClusterSample> threeSamples() {
  std::vector<ClusterSample> samples(3);
  for (size_t i = 0; i < samples.size(); ++i) {
    samples[i].wallMs = 1'000'000 + int64_t(i) * 5000;
    samples[i].slotsTotal = 8;
  }
  auto running = static_cast<size_t>(wire::JobState::RUNNING);
  auto finished = static_cast<size_t>(wire::JobState::FINISHED);
  samples[0].jobs.byState[running] = 2;
  samples[1].jobs.byState[running] = 2;
  samples[2].jobs.byState[running] = 1;
  samples[2].jobs.byState[finished] = 1;
  samples[0].slotsFree = 8;
  samples[1].slotsFree = 6;
  samples[2].slotsFree = 7;
  samples[0].attemptsRestarted = 10;  // Counted across terms: only the increase is charted.
  samples[1].attemptsRestarted = 13;
  samples[2].attemptsRestarted = 13;
  samples[2].attemptsAdopted = 2;
  return samples;
}

TEST(StatusPageCharts, OneLinePerSeriesWithItsLatestAndLargestValue) {
  const std::string charts = renderCharts(threeSamples());
  EXPECT_NE(charts.find("jobs RUNNING: <b>1</b> <small>(largest 2, 3 samples over 10s)"),
            std::string::npos)
      << charts;
  EXPECT_NE(charts.find("jobs FINISHED: <b>1</b>"), std::string::npos);
  // States no sample has are left out.
  EXPECT_EQ(charts.find("jobs FAILED"), std::string::npos);
  EXPECT_NE(charts.find("slots free of 8: <b>7</b> <small>(largest 8,"), std::string::npos);
  EXPECT_NE(charts.find("attempts restarted per sample: <b>0</b> <small>(largest 3,"),
            std::string::npos);
  EXPECT_NE(charts.find("attempts adopted per sample: <b>2</b>"), std::string::npos);
  // A series of zeros says so, and lies along the bottom.
  std::vector<ClusterSample> quiet = threeSamples();
  for (ClusterSample& sample : quiet) sample.attemptsRestarted = 0;
  const std::string flat = renderCharts(quiet);
  EXPECT_NE(flat.find("attempts restarted per sample: <b>0</b> <small>(largest 0,"),
            std::string::npos)
      << flat;
  // Five charts of three points: RUNNING 2,2,1 scaled to 40 px (bottom 39, top 1).
  size_t lines = 0;
  for (size_t at = charts.find("<polyline"); at != std::string::npos;
       at = charts.find("<polyline", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 5u);
  EXPECT_NE(charts.find("points=\"0,1 120,1 240,20\""), std::string::npos) << charts;
  EXPECT_EQ(charts.find("style="), std::string::npos);

  EXPECT_NE(renderCharts({}).find("No sample yet"), std::string::npos);
  // One sample is a short flat line.
  const std::string one = renderCharts({threeSamples()[0]});
  EXPECT_NE(one.find("points=\"0,1 30,1\""), std::string::npos) << one;
}

TEST_F(HttpServerTest, TheLeadersPageChartsItsHistoryAndAStandbysLeavesItToTheLeader) {
  host_.samples = threeSamples();
  Reply standby = fetch("/");
  ASSERT_EQ(standby.status, 200u);
  EXPECT_NE(standby.body.find("<section id=\"charts\"><h2>Recent history</h2><p>Shown by the "
                              "leader.</p></section>"),
            std::string::npos)
      << standby.body;
  EXPECT_EQ(standby.body.find("<polyline"), std::string::npos);

  lead(7, true);
  Reply leader = fetch("/");
  ASSERT_EQ(leader.status, 200u);
  EXPECT_NE(leader.body.find("<section id=\"charts\"><h2>Recent history</h2><div class=\"charts\">"),
            std::string::npos)
      << leader.body;
  EXPECT_NE(leader.body.find("jobs RUNNING: <b>1</b>"), std::string::npos);
}

TEST_F(HttpServerTest, ThePageListsTheRecentEventsNewestFirstWithTheirReasonsAsText) {
  lead(7, true);
  host_.events.push_back(Event("leadership granted").field("epoch", 7).at(1, 1000));
  host_.events.push_back(Event("worker removed")
                             .field("epoch", 7)
                             .quotedField("reason", "heartbeat timed out")
                             .at(2, 2000));
  host_.events.push_back(Event("job ended")
                             .field("job", "ab")
                             .field("state", "FAILED")
                             .quotedField("failure", "<img src=x onerror=alert(1)>")
                             .at(3, 3000));
  Reply reply = fetch("/");
  ASSERT_EQ(reply.status, 200u);
  const size_t ended = reply.body.find("<b>job ended</b> job=ab state=FAILED "
                                       "failure=&quot;&lt;img src=x onerror=alert(1)&gt;&quot;");
  const size_t removed =
      reply.body.find("<b>worker removed</b> epoch=7 reason=&quot;heartbeat timed out&quot;");
  const size_t granted = reply.body.find("<b>leadership granted</b> epoch=7");
  ASSERT_NE(ended, std::string::npos) << reply.body;
  ASSERT_NE(removed, std::string::npos);
  ASSERT_NE(granted, std::string::npos);
  EXPECT_LT(ended, removed);
  EXPECT_LT(removed, granted);
  EXPECT_EQ(reply.body.find("<img"), std::string::npos);

  // With RPC authentication on, reasons and failure messages are left out.
  authRequired_ = true;
  start();
  Reply redacted = fetch("/");
  ASSERT_EQ(redacted.status, 200u);
  EXPECT_NE(redacted.body.find("<b>job ended</b> job=ab state=FAILED failure=(left out)"),
            std::string::npos)
      << redacted.body;
  EXPECT_EQ(redacted.body.find("heartbeat timed out"), std::string::npos);
  EXPECT_EQ(redacted.body.find("onerror"), std::string::npos);
}

TEST(StatusPageEscaping, EveryValueFromAJobOrAWorkerIsText) {
  EXPECT_EQ(htmlEscaped("<script>alert(1)</script>"), "&lt;script&gt;alert(1)&lt;/script&gt;");
  EXPECT_EQ(htmlEscaped("\"><img src=x onerror=alert(1)>"),
            "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;");
  EXPECT_EQ(htmlEscaped("a & 'b'"), "a &amp; &#39;b&#39;");
  // A job page of a job whose name and failure are markup shows them as text.
  capnp::MallocMessageBuilder message;
  auto job = message.initRoot<wire::JobStatus>();
  wire::setWireId(job.initJobId(), JobId(1, 2));
  job.setName("<script>alert(1)</script>");
  job.setState(wire::JobState::FAILED);
  job.initFailure().setMessage("\"><img src=x onerror=alert(1)>");
  auto vertex = job.initVertices(1)[0];
  vertex.setName("<b>v</b>");
  auto subtask = vertex.initSubtasks(1)[0];
  subtask.setHost("<i>w</i>");
  subtask.setLastFailure("<svg onload=alert(1)>");
  LeadershipSnapshot leadership;
  leadership.leadingEpoch = 1;
  const std::string page = renderJobPage(leadership, job.asReader(), 0, false);
  for (const char* markup : {"<script>alert", "<img", "<b>v", "<i>w", "<svg"}) {
    EXPECT_EQ(page.find(markup), std::string::npos) << markup << " in\n" << page;
  }
  EXPECT_NE(page.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  // With RPC authentication on, hosts and failure messages are left out.
  const std::string redacted = renderJobPage(leadership, job.asReader(), 0, true);
  EXPECT_EQ(redacted.find("&lt;i&gt;w"), std::string::npos);
  EXPECT_EQ(redacted.find("&lt;svg"), std::string::npos);
  EXPECT_EQ(redacted.find("onerror"), std::string::npos);
}

TEST(StatusPagePagination, PagesOfFiftyJobsWithLinksAndNothingPastTheEnd) {
  JobsSnapshot jobs;
  jobs.message = kj::heap<capnp::MallocMessageBuilder>();
  auto list = jobs.message->initRoot<wire::DispatcherGateway::ListJobsResults>().initJobs(120);
  for (uint32_t i = 0; i < 120; ++i) {
    wire::setWireId(list[i].initJobId(), JobId(0x55, i + 1));
    list[i].setName("job-" + std::to_string(i));
  }
  jobs.jobs = jobs.message->getRoot<wire::DispatcherGateway::ListJobsResults>().asReader().getJobs();
  StatusPageInput input;
  input.leadership.leadingEpoch = 1;
  input.jobs = &jobs;
  auto rows = [](const std::string& page) {
    size_t found = 0;
    for (size_t at = page.find("<tr class=\"job\">"); at != std::string::npos;
         at = page.find("<tr class=\"job\">", at + 1)) {
      ++found;
    }
    return found;
  };
  input.page = 1;
  const std::string second = renderStatusPage(input);
  EXPECT_EQ(rows(second), 50u);
  EXPECT_NE(second.find("120 jobs, 51 to 100 shown"), std::string::npos) << second;
  EXPECT_NE(second.find(">job-50<"), std::string::npos);
  EXPECT_EQ(second.find(">job-49<"), std::string::npos);
  EXPECT_NE(second.find("href=\"/?page=0\">newer"), std::string::npos);
  EXPECT_NE(second.find("href=\"/?page=2\">older"), std::string::npos);
  input.page = 2;
  const std::string last = renderStatusPage(input);
  EXPECT_EQ(rows(last), 20u);
  EXPECT_EQ(last.find(">older<"), std::string::npos);
  input.page = 999999;
  const std::string past = renderStatusPage(input);
  EXPECT_EQ(rows(past), 0u);
  EXPECT_NE(past.find("none on this page"), std::string::npos) << past;
}

TEST_F(HttpServerTest, WorkersOnTheLeaderListEverySlotAlsoWhileTheTermRecovers) {
  lead(7, false);
  host_.ready = false;  // The Dispatcher still recovers; the workers are there already.
  Reply reply = fetch("/v1/workers");
  ASSERT_EQ(reply.status, 200u) << reply.body;
  EXPECT_EQ(reply.contentType, "application/json");
  auto json = nlohmann::json::parse(reply.body);
  EXPECT_EQ(json["epoch"], 7);
  ASSERT_EQ(json["workers"].size(), 2u);
  const auto& first = json["workers"][0];
  EXPECT_EQ(first["resource_id"], ResourceId(0xab, 1).toHex());
  EXPECT_EQ(first["host"], "w1");
  EXPECT_EQ(first["pid"], 11);
  EXPECT_EQ(first["data_address"], "10.0.0.5:9001");
  EXPECT_EQ(first["http_address"], "10.0.0.5:8082");
  EXPECT_EQ(first["registered_at_ms"], 1000);
  EXPECT_EQ(first["last_heartbeat_ms"], 2000);
  ASSERT_EQ(first["slots"].size(), 3u);
  EXPECT_EQ(first["slots"][0]["index"], 0);
  EXPECT_EQ(first["slots"][0]["cpu_millis"], 500);
  EXPECT_EQ(first["slots"][0]["memory_bytes"], uint64_t{1} << 30);
  EXPECT_EQ(first["slots"][0]["state"], "FREE");
  EXPECT_TRUE(first["slots"][0]["job_id"].is_null());
  EXPECT_TRUE(first["slots"][0]["allocation_id"].is_null());
  EXPECT_EQ(first["slots"][1]["state"], "ALLOCATED");
  EXPECT_EQ(first["slots"][1]["job_id"], JobId(0x1234, 1).toHex());
  EXPECT_EQ(first["slots"][1]["allocation_id"], AllocationId(0xa1, 1).toHex());
  EXPECT_EQ(first["slots"][2]["state"], "PENDING");
  EXPECT_EQ(json["workers"][1]["host"], "w2");
  EXPECT_TRUE(json["workers"][1]["slots"].empty());
  EXPECT_TRUE(counters_.calls().empty());  // Read in process, no RPC.
}

TEST_F(HttpServerTest, WithAuthenticationOnWorkersLeaveOutHostsPidsAndAddresses) {
  lead(7, false);
  authRequired_ = true;
  start();
  Reply reply = fetch("/v1/workers");
  ASSERT_EQ(reply.status, 200u) << reply.body;
  auto json = nlohmann::json::parse(reply.body);
  ASSERT_EQ(json["workers"].size(), 2u);
  const auto& first = json["workers"][0];
  for (const char* hidden : {"host", "pid", "data_address", "http_address"}) {
    EXPECT_FALSE(first.contains(hidden)) << hidden << " in " << first.dump();
  }
  EXPECT_EQ(reply.body.find("10.0.0.5"), std::string::npos) << reply.body;
  EXPECT_EQ(first["resource_id"], ResourceId(0xab, 1).toHex());
  EXPECT_EQ(first["slots"].size(), 3u);
  EXPECT_TRUE(json["redacted"].is_string());

  Reply job = fetch("/v1/jobs/" + JobId(0x1234, 1).toHex());
  ASSERT_EQ(job.status, 200u) << job.body;
  EXPECT_TRUE(nlohmann::json::parse(job.body)["job"]["redacted"].is_string());
}

// The routes only a leader answers (the jobs, one job, the workers), each the same way off the
// leader: a redirect to the same path on the leader, or 503 when there is none to redirect to.
class LeaderOnlyRouteTest : public HttpServerTest,
                            public ::testing::WithParamInterface<std::string> {};

TEST_P(LeaderOnlyRouteTest, OnAStandbyRedirectsToTheSamePathOnTheLeaderOrAnswers503) {
  const std::string path = GetParam();
  leader::LeaderInfo other;
  other.epoch = 3;
  other.masterId = "other";
  other.httpAddress = "10.0.0.2:8081";
  host_.leader = other;
  Reply reply = fetch(path);
  EXPECT_EQ(reply.status, 307u);
  EXPECT_EQ(reply.location, "http://10.0.0.2:8081" + path);

  host_.leader.reset();
  Reply none = fetch(path);
  EXPECT_EQ(none.status, 503u);
  EXPECT_EQ(nlohmann::json::parse(none.body)["status"], "NONE");

  // The record of this master's own ended term: no redirect to itself.
  other.masterId = "self";
  host_.leader = other;
  EXPECT_EQ(fetch(path).status, 503u);
  EXPECT_EQ(fetch(path, kj::HttpMethod::POST).status, 405u);
}

INSTANTIATE_TEST_SUITE_P(JobsJobAndWorkers, LeaderOnlyRouteTest,
                         ::testing::Values("/v1/jobs", "/v1/jobs/" + JobId(0x1234, 1).toHex(),
                                           "/v1/workers"));

// The job routes wait for the term's recovery (the workers do not: they are there already).
class JobRouteTest : public HttpServerTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(JobRouteTest, OnTheLeaderAnswers503WhileTheTermRecovers) {
  lead(7, false);
  host_.ready = false;
  Reply recovering = fetch(GetParam());
  EXPECT_EQ(recovering.status, 503u);
  auto json = nlohmann::json::parse(recovering.body);
  EXPECT_EQ(json["status"], "RECOVERING");
  EXPECT_EQ(json["message"], "leader of epoch 7 is still recovering");
}

INSTANTIATE_TEST_SUITE_P(JobsAndJob, JobRouteTest,
                         ::testing::Values("/v1/jobs", "/v1/jobs/" + JobId(0x1234, 1).toHex()));

TEST_F(HttpServerTest, UnknownPathIs404AndWrongMethodIs405) {
  EXPECT_EQ(fetch("/nope").status, 404u);
  EXPECT_EQ(fetch("/v1/jobs/extra/more").status, 404u);  // /v1/jobs/<id> has no sub-paths.
  Reply post = fetch("/healthz", kj::HttpMethod::POST);
  EXPECT_EQ(post.status, 405u);
  EXPECT_EQ(post.allow, "GET");
  EXPECT_EQ(fetch("/v1/jobs", kj::HttpMethod::DELETE).status, 405u);
}

TEST_F(HttpServerTest, DuplicateContentLengthIs400WithAPlainReasonAndNoInternals) {
  const std::string reply = rawExchange(
      "POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n"
      "hello");
  EXPECT_EQ(reply.rfind("HTTP/1.1 400 ", 0), 0u) << reply;
  EXPECT_NE(reply.find("bad request"), std::string::npos) << reply;
  // Nothing of kj's exception: no source file, no "stack:" trace, no addresses.
  EXPECT_EQ(reply.find(".c++"), std::string::npos) << reply;
  EXPECT_EQ(reply.find("stack"), std::string::npos) << reply;
  EXPECT_EQ(reply.find("0x"), std::string::npos) << reply;
}

TEST_F(HttpServerTest, NotFoundEchoesAtMostTwoHundredSanitizedBytesOfThePath) {
  Reply reply = fetch("/" + std::string(100000, 'a'));
  EXPECT_EQ(reply.status, 404u);
  EXPECT_EQ(reply.body, "no such endpoint: /" + std::string(http::kMaxEchoedPath - 1, 'a') +
                            "...\n");
  Reply control = fetch("/x%0d%0a\x7f");
  EXPECT_EQ(control.status, 404u);
  EXPECT_EQ(control.body, "no such endpoint: /x%0d%0a\\x7f\n");
}

TEST_F(HttpServerTest, ConnectionCloseIsHonouredRightAfterTheResponse) {
  startOnAFrozenTimer();
  const std::string reply =
      rawExchange("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(reply.rfind("HTTP/1.1 200 ", 0), 0u) << reply;
  // The reply says so, and the connection ended without any timeout (the timer is frozen).
  EXPECT_NE(reply.find("Connection: close\r\n"), std::string::npos) << reply;
  EXPECT_NE(reply.find("\r\n\r\nok\n"), std::string::npos) << reply;
}

TEST_F(HttpServerTest, KeepAliveRequestsKeepTheConnectionOpen) {
  startOnAFrozenTimer();
  const std::string reply = rawExchange(
      "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
      "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  // Both answered on the one connection, and only the second says it closes.
  const size_t first = reply.find("HTTP/1.1 200 ");
  const size_t second = reply.find("HTTP/1.1 200 ", first + 1);
  ASSERT_NE(second, std::string::npos) << reply;
  EXPECT_EQ(reply.substr(0, second).find("Connection: close"), std::string::npos) << reply;
  EXPECT_NE(reply.find("Connection: close", second), std::string::npos) << reply;
}

TEST_F(HttpServerTest, MetricsOfAServingLeaderParseAsPrometheusText) {
  lead(7, true);
  host_.connected = true;
  counters_.reject("DispatcherGateway.jobStatus");
  counters_.reject("DispatcherGateway.jobStatus");
  counters_.reject("Weird\"Name\\x");
  for (int i = 0; i < 5; ++i) counters_.call("DispatcherGateway.jobStatus");
  const size_t reads = jobs_.backend.reads;
  Reply reply = fetch("/metrics");
  ASSERT_EQ(reply.status, 200u);
  EXPECT_EQ(jobs_.backend.reads, reads);  // Counted in process, not read from the store.
  EXPECT_EQ(reply.contentType, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_TRUE(metricsMatch(
      reply.body,
      {.samples = {{"regent_leader", 1},
                   {"regent_leader_serving", 1},
                   {"regent_epoch", 7},
                   {"regent_zookeeper_connected", 1},
                   {"regent_jobs{state=\"created\"}", 2},
                   {"regent_jobs{state=\"canceled\"}", 1},
                   {"regent_jobs{state=\"running\"}", 0},
                   {"regent_rpc_fencing_rejections_total{method=\"DispatcherGateway.jobStatus\"}",
                    2},
                   {"regent_rpc_fencing_rejections_total{method=\"Weird\\\"Name\\\\x\"}", 1},
                   {"regent_rpc_calls_total{method=\"DispatcherGateway.jobStatus\"}", 5},
                   {"regent_workers_registered", 2},
                   {"regent_slots{state=\"free\"}", 1},
                   {"regent_slots{state=\"allocated\"}", 1},
                   {"regent_slots{state=\"pending\"}", 1},
                   {"regent_worker_heartbeat_timeouts_total", 0}},
       .types = {{"regent_rpc_fencing_rejections_total", "counter"},
                 {"regent_rpc_calls_total", "counter"},
                 {"regent_jobs", "gauge"},
                 {"regent_slots", "gauge"},
                 {"regent_worker_heartbeat_timeouts_total", "counter"}}}));
}

// regent_jobs reads the counts the term keeps, not a snapshot of every job; its text is the
// same: one sample per JobState, in the order of their names.
TEST_F(HttpServerTest, MetricsCountTheJobsByStateWithoutASnapshotOfTheJobs) {
  lead(7, true);
  const std::string text = fetch("/metrics").body;
  EXPECT_EQ(host_.jobsSnapshots, 0);
  EXPECT_EQ(familyText(text, "regent_jobs"),
            "# HELP regent_jobs Jobs by state in the leader's Dispatcher (no samples unless this "
            "master serves).\n"
            "# TYPE regent_jobs gauge\n"
            "regent_jobs{state=\"canceled\"} 1\n"
            "regent_jobs{state=\"cancelling\"} 0\n"
            "regent_jobs{state=\"corrupt\"} 0\n"
            "regent_jobs{state=\"created\"} 2\n"
            "regent_jobs{state=\"failed\"} 0\n"
            "regent_jobs{state=\"failing\"} 0\n"
            "regent_jobs{state=\"finished\"} 0\n"
            "regent_jobs{state=\"reconciling\"} 0\n"
            "regent_jobs{state=\"restarting\"} 0\n"
            "regent_jobs{state=\"running\"} 0\n"
            "regent_jobs{state=\"suspended\"} 0\n");
}

TEST_F(HttpServerTest, MetricsOfAStandbyHaveNoJobSamples) {
  leader::LeaderInfo other;
  other.epoch = 3;
  other.masterId = "other";
  host_.leader = other;
  Reply reply = fetch("/metrics");
  ASSERT_EQ(reply.status, 200u);
  EXPECT_TRUE(metricsMatch(reply.body, {.samples = {{"regent_leader", 0},
                                                    {"regent_epoch", 3},
                                                    {"regent_zookeeper_connected", 0},
                                                    {"regent_workers_registered", 0}},
                                        .types = {{"regent_jobs", "gauge"}},
                                        .withoutSamples = {"regent_jobs", "regent_slots"}}));
}

TEST_F(HttpServerTest, WorkerHeartbeatTimeoutsAreTheProcessCountAlsoOnAStandby) {
  resourceManagerCounters_.heartbeatTimeouts = 4;  // Counted while this master led an earlier term.
  EXPECT_TRUE(metricsMatch(fetch("/metrics").body,
                           {.samples = {{"regent_worker_heartbeat_timeouts_total", 4}}}));
}

TEST_F(HttpServerTest, MetricsCarryTheAttemptCountersAndTheSubmitToRunningHistogram) {
  jobmaster::JobMasterCounters counters;
  counters.attemptsStarted = 9;
  counters.attemptsFailed = 3;
  counters.attemptsRestarted = 2;
  counters.attemptsAdopted = 5;
  counters.reconciliationTimeouts = 1;
  counters.observeSubmitToRunning(0.015);
  counters.observeSubmitToRunning(3);
  // A registry without the JobMasters' counters has none of their families.
  const std::string none = fetch("/metrics").body;
  EXPECT_EQ(familyText(none, "regent_job_submit_to_running_seconds"), "");
  EXPECT_EQ(familyText(none, "regent_attempts_started_total"), "");

  addJobMasterMetrics(metrics_, counters);
  Reply reply = fetch("/metrics");
  ASSERT_EQ(reply.status, 200u);
  // Cumulative: 15 ms falls in every bucket from 20 ms on, 3 s from 5 s on.
  const std::string histogram = "regent_job_submit_to_running_seconds";
  EXPECT_TRUE(
      metricsMatch(reply.body, {.samples = {{"regent_attempts_started_total", 9},
                                            {"regent_attempts_failed_total", 3},
                                            {"regent_attempts_restarted_total", 2},
                                            {"regent_attempts_adopted_total", 5},
                                            {"regent_job_reconciliation_timeouts_total", 1},
                                            {histogram + "_bucket{le=\"0.01\"}", 0},
                                            {histogram + "_bucket{le=\"0.02\"}", 1},
                                            {histogram + "_bucket{le=\"2.5\"}", 1},
                                            {histogram + "_bucket{le=\"5\"}", 2},
                                            {histogram + "_bucket{le=\"30\"}", 2},
                                            {histogram + "_bucket{le=\"+Inf\"}", 2},
                                            {histogram + "_sum", 3.015},
                                            {histogram + "_count", 2}},
                                .types = {{"regent_attempts_started_total", "counter"},
                                          {"regent_attempts_failed_total", "counter"},
                                          {"regent_attempts_restarted_total", "counter"},
                                          {"regent_attempts_adopted_total", "counter"},
                                          {"regent_job_reconciliation_timeouts_total", "counter"},
                                          {histogram, "histogram"}}}));
}

TEST_F(HttpServerTest, MetricsCarryTheRpcTransportRefusalsAsCounters) {
  transport_ = RpcTransportCounts{.droppedBeforeAuthentication = 2,
                                  .timedOutBeforeAuthentication = 3,
                                  .refusedOverTotalCap = 5,
                                  .refusedOverPeerCap = 7,
                                  .tlsHandshakesFailed = 11,
                                  .idleTimedOut = 13,
                                  .messageTimedOut = 17};
  Reply reply = fetch("/metrics");
  ASSERT_EQ(reply.status, 200u);
  EXPECT_TRUE(metricsMatch(
      reply.body, {.samples = {{"regent_rpc_connections_dropped_before_auth_total", 2},
                               {"regent_rpc_connections_auth_timeouts_total", 3},
                               {"regent_rpc_connections_refused_total{cap=\"total\"}", 5},
                               {"regent_rpc_connections_refused_total{cap=\"peer\"}", 7},
                               {"regent_rpc_tls_handshake_failures_total", 11},
                               {"regent_rpc_connections_idle_timeouts_total", 13},
                               {"regent_rpc_connections_message_timeouts_total", 17}},
                   .types = {{"regent_rpc_connections_dropped_before_auth_total", "counter"},
                             {"regent_rpc_connections_auth_timeouts_total", "counter"},
                             {"regent_rpc_connections_refused_total", "counter"},
                             {"regent_rpc_tls_handshake_failures_total", "counter"},
                             {"regent_rpc_connections_idle_timeouts_total", "counter"},
                             {"regent_rpc_connections_message_timeouts_total", "counter"}}}));
}

TEST_F(HttpServerTest, MetricsCarryTheHttpListenersAcceptFailuresByReasonAndItsRefusals) {
  metricsServer_ = server_.get();
  Reply reply = fetch("/metrics");
  ASSERT_EQ(reply.status, 200u);
  // No RPC listener in this host: its families carry no samples.
  EXPECT_TRUE(metricsMatch(reply.body,
                           {.samples = {{"regent_http_accept_failures_total{reason=\"emfile\"}", 0},
                                        {"regent_http_accept_failures_total{reason=\"enfile\"}", 0},
                                        {"regent_http_accept_failures_total{reason=\"memory\"}", 0},
                                        {"regent_http_accept_failures_total{reason=\"other\"}", 0},
                                        {"regent_http_connections_shed_total", 0},
                                        {"regent_http_connections_refused_total", 0}},
                            .types = {{"regent_http_accept_failures_total", "counter"},
                                      {"regent_http_connections_shed_total", "counter"},
                                      {"regent_http_connections_refused_total", "counter"},
                                      {"regent_rpc_accept_failures_total", "counter"},
                                      {"regent_rpc_connections_shed_total", "counter"}},
                            .withoutSamples = {"regent_rpc_accept_failures_total",
                                               "regent_rpc_connections_shed_total"}}));
}

TEST_F(HttpServerTest, ConnectionsOverTheCapAreClosedAtOnceAndCounted) {
  server_ = nullptr;
  auto listening = loop_.run(listenMasterHttp(loop_.io().getNetwork(), loop_.timer(), "127.0.0.1:0",
                                              host_, metrics_, false, 1));
  ASSERT_TRUE(listening.ok()) << listening.error().message;
  server_ = kj::mv(listening).value();
  auto address = loop_.run(loop_.io().getNetwork().parseAddress(server_->listenAddress()));
  auto held = loop_.run(address->connect());  // Holds the only place, sending nothing.
  ASSERT_TRUE(regent::testing::runLoopUntil(
      loop_, [&] { return server_->connectionCount() == 1; }, Duration(20000)));
  auto refused = loop_.run(address->connect());
  char byte;
  const size_t ended = loop_.run(refused->tryRead(&byte, 1, 1));
  EXPECT_EQ(ended, 0u);  // Closed without an answer.
  EXPECT_EQ(server_->connectionsRefusedOverCap(), 1u);
  held = nullptr;
  ASSERT_TRUE(regent::testing::runLoopUntil(
      loop_, [&] { return server_->connectionCount() == 0; }, Duration(20000)));
  EXPECT_EQ(fetch("/healthz").status, 200u);
}

TEST_F(HttpServerTest, MetricsLeaveOutTheTransportFamiliesWhileThereIsNoRpcServer) {
  Reply reply = fetch("/metrics");
  ASSERT_EQ(reply.status, 200u);
  EXPECT_TRUE(metricsMatch(reply.body, {}));
  EXPECT_EQ(familyText(reply.body, "regent_rpc_connections_refused_total"), "") << reply.body;
  EXPECT_EQ(familyText(reply.body, "regent_rpc_tls_handshake_failures_total"), "") << reply.body;
}

}  // namespace
}  // namespace regent::master

// The HTTP endpoints against a fake master, over a real loopback socket: status codes, bodies,
// the standby's redirect, the gateway called with the term's epoch, and /metrics parsed strictly.
#include "services/http/http_server.h"

#include <gtest/gtest.h>
#include <kj/compat/http.h>
#include <kj/debug.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/event_loop.h"
#include "common/ids.h"
#include "tests/services/http/prometheus_text_test_util.h"

namespace regent::http {
namespace {

// A DispatcherGateway whose listJobs answers from a script and records the epoch it got.
class FakeGateway final : public wire::DispatcherGateway::Server {
 public:
  enum class Mode { kJobs, kFailure, kThrow, kHang };
  explicit FakeGateway(Mode mode, uint64_t* seenEpoch) : mode_(mode), seenEpoch_(seenEpoch) {}

  kj::Promise<void> listJobs(ListJobsContext context) override {
    *seenEpoch_ = context.getParams().getEpoch();
    switch (mode_) {
      case Mode::kThrow:
        return KJ_EXCEPTION(DISCONNECTED, "leadership of epoch 7 revoked");
      case Mode::kHang:
        return kj::NEVER_DONE;
      case Mode::kFailure: {
        auto failure = context.getResults().initFailure();
        failure.setMessage("recovering");
        failure.initUnavailable();
        return kj::READY_NOW;
      }
      case Mode::kJobs:
        break;
    }
    auto jobs = context.getResults().initJobs(3);
    const wire::JobState states[] = {wire::JobState::CREATED, wire::JobState::CREATED,
                                     wire::JobState::CANCELED};
    for (uint32_t i = 0; i < 3; ++i) {
      jobs[i].initJobId().setHi(0x1234);
      jobs[i].getJobId().setLo(i + 1);
      jobs[i].setName("job-" + std::to_string(i));
      jobs[i].setState(states[i]);
      jobs[i].setSubmittedAtMs(1000 + i);
    }
    return kj::READY_NOW;
  }

 private:
  Mode mode_;
  uint64_t* seenEpoch_;
};

class FakeHost final : public HttpHost {
 public:
  FakeHost() {
    self_.masterId = "self";
    self_.httpAddress = "127.0.0.1:1";
  }
  const leader::ContenderInfo& self() const override { return self_; }
  std::optional<leader::LeaderInfo> knownLeader() const override { return leader; }
  uint64_t leadingEpoch() const override { return epoch; }
  bool serving() const override { return isServing; }
  bool zooKeeperConnected() const override { return connected; }
  kj::Maybe<wire::DispatcherGateway::Client> dispatcherGateway() override {
    if (!gateway) return nullptr;
    return wire::DispatcherGateway::Client(kj::heap<FakeGateway>(*gateway, &seenEpoch));
  }
  const rpc::FencingCounters& fencingCounters() const override { return counters; }

  leader::ContenderInfo self_;
  std::optional<leader::LeaderInfo> leader;
  uint64_t epoch = 0;
  bool isServing = false;
  bool connected = false;
  std::optional<FakeGateway::Mode> gateway;
  uint64_t seenEpoch = 0;
  rpc::FencingCounters counters;
};

struct Reply {
  uint status = 0;
  std::string body;
  std::string location;
  std::string allow;
  std::string contentType;
};

class HttpServerTest : public ::testing::Test {
 protected:
  ~HttpServerTest() noexcept override = default;

  void SetUp() override { start(kj::SECONDS * 5); }

  void start(kj::Duration callTimeout) {
    server_ = nullptr;
    auto listening = loop_.run(HttpServer::listen(loop_.io().getNetwork(), loop_.timer(),
                                                  "127.0.0.1:0", host_, callTimeout));
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
    return reply;
  }

  void lead(uint64_t epoch, bool serving) {
    host_.epoch = epoch;
    host_.isServing = serving;
    leader::ContenderInfo self = host_.self_;
    host_.leader = leader::leaderInfoFor(self, epoch, 42);
    host_.gateway = FakeGateway::Mode::kJobs;
  }

  EventLoop loop_;
  FakeHost host_;
  kj::Own<kj::HttpHeaderTable> table_ = HttpRoutes::makeHeaderTable();
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

TEST_F(HttpServerTest, JobsOnTheLeaderCallTheGatewayWithTheTermsEpoch) {
  lead(7, true);
  Reply reply = fetch("/v1/jobs");
  ASSERT_EQ(reply.status, 200u) << reply.body;
  EXPECT_EQ(host_.seenEpoch, 7u);
  auto json = nlohmann::json::parse(reply.body);
  EXPECT_EQ(json["epoch"], 7);
  ASSERT_EQ(json["jobs"].size(), 3u);
  EXPECT_EQ(json["jobs"][0]["job_id"], JobId(0x1234, 1).toHex());
  EXPECT_EQ(json["jobs"][0]["name"], "job-0");
  EXPECT_EQ(json["jobs"][0]["state"], "CREATED");
  EXPECT_EQ(json["jobs"][2]["state"], "CANCELED");
  EXPECT_EQ(json["jobs"][1]["submitted_at_ms"], 1001);
}

TEST_F(HttpServerTest, JobsOnTheLeaderAnswer503WhenTheTermCannotAnswer) {
  lead(7, false);
  host_.gateway.reset();  // Stores still opening.
  Reply opening = fetch("/v1/jobs");
  EXPECT_EQ(opening.status, 503u);
  EXPECT_EQ(nlohmann::json::parse(opening.body)["status"], "RECOVERING");

  host_.gateway = FakeGateway::Mode::kFailure;
  Reply failure = fetch("/v1/jobs");
  EXPECT_EQ(failure.status, 503u);
  EXPECT_EQ(nlohmann::json::parse(failure.body)["message"], "recovering");

  host_.gateway = FakeGateway::Mode::kThrow;  // Revoked mid-call: still an answer, not a drop.
  Reply revoked = fetch("/v1/jobs");
  EXPECT_EQ(revoked.status, 503u);
  EXPECT_NE(revoked.body.find("epoch 7 revoked"), std::string::npos) << revoked.body;
}

TEST_F(HttpServerTest, JobsCallIsBoundedByTheCallTimeout) {
  start(50 * kj::MILLISECONDS);
  lead(7, true);
  host_.gateway = FakeGateway::Mode::kHang;
  Reply reply = fetch("/v1/jobs");
  EXPECT_EQ(reply.status, 503u);
  EXPECT_EQ(nlohmann::json::parse(reply.body)["status"], "UNAVAILABLE");
}

TEST_F(HttpServerTest, JobsOnAStandbyRedirectToTheLeader) {
  leader::LeaderInfo other;
  other.epoch = 3;
  other.masterId = "other";
  other.httpAddress = "10.0.0.2:8081";
  host_.leader = other;
  Reply reply = fetch("/v1/jobs");
  EXPECT_EQ(reply.status, 307u);
  EXPECT_EQ(reply.location, "http://10.0.0.2:8081/v1/jobs");

  host_.leader.reset();
  EXPECT_EQ(fetch("/v1/jobs").status, 503u);

  // The record of this master's own ended term: no redirect to itself.
  other.masterId = "self";
  host_.leader = other;
  EXPECT_EQ(fetch("/v1/jobs").status, 503u);
}

TEST_F(HttpServerTest, UnknownPathIs404AndWrongMethodIs405) {
  EXPECT_EQ(fetch("/nope").status, 404u);
  EXPECT_EQ(fetch("/v1/jobs/extra").status, 404u);
  Reply post = fetch("/healthz", kj::HttpMethod::POST);
  EXPECT_EQ(post.status, 405u);
  EXPECT_EQ(post.allow, "GET");
  EXPECT_EQ(fetch("/v1/jobs", kj::HttpMethod::DELETE).status, 405u);
}

TEST_F(HttpServerTest, MetricsOfAServingLeaderParseAsPrometheusText) {
  lead(7, true);
  host_.connected = true;
  host_.counters.reject("DispatcherGateway.jobStatus");
  host_.counters.reject("DispatcherGateway.jobStatus");
  host_.counters.reject("Weird\"Name\\x");
  for (int i = 0; i < 5; ++i) host_.counters.call("DispatcherGateway.jobStatus");
  Reply reply = fetch("/metrics");
  ASSERT_EQ(reply.status, 200u);
  EXPECT_EQ(reply.contentType, "text/plain; version=0.0.4; charset=utf-8");
  auto parsed = regent::testing::parsePrometheusText(reply.body);
  ASSERT_EQ(parsed.error, "") << reply.body;
  EXPECT_EQ(parsed.samples.at("regent_leader"), 1);
  EXPECT_EQ(parsed.samples.at("regent_leader_serving"), 1);
  EXPECT_EQ(parsed.samples.at("regent_epoch"), 7);
  EXPECT_EQ(parsed.samples.at("regent_zookeeper_connected"), 1);
  EXPECT_EQ(parsed.samples.at("regent_jobs{state=\"created\"}"), 2);
  EXPECT_EQ(parsed.samples.at("regent_jobs{state=\"canceled\"}"), 1);
  EXPECT_EQ(parsed.samples.at("regent_jobs{state=\"running\"}"), 0);
  EXPECT_EQ(parsed.samples.at(
                "regent_rpc_fencing_rejections_total{method=\"DispatcherGateway.jobStatus\"}"),
            2);
  EXPECT_EQ(parsed.samples.at("regent_rpc_fencing_rejections_total{method=\"Weird\\\"Name\\\\x\"}"),
            1);
  EXPECT_EQ(parsed.types.at("regent_rpc_fencing_rejections_total"), "counter");
  EXPECT_EQ(parsed.samples.at("regent_rpc_calls_total{method=\"DispatcherGateway.jobStatus\"}"),
            5);
  EXPECT_EQ(parsed.types.at("regent_rpc_calls_total"), "counter");
  EXPECT_EQ(parsed.types.at("regent_jobs"), "gauge");
  for (const auto& [family, type] : parsed.types) {
    EXPECT_FALSE(parsed.helps[family].empty()) << family;
  }
}

TEST_F(HttpServerTest, MetricsOfAStandbyHaveNoJobSamples) {
  leader::LeaderInfo other;
  other.epoch = 3;
  other.masterId = "other";
  host_.leader = other;
  Reply reply = fetch("/metrics");
  ASSERT_EQ(reply.status, 200u);
  auto parsed = regent::testing::parsePrometheusText(reply.body);
  ASSERT_EQ(parsed.error, "") << reply.body;
  EXPECT_EQ(parsed.samples.at("regent_leader"), 0);
  EXPECT_EQ(parsed.samples.at("regent_epoch"), 3);
  EXPECT_EQ(parsed.samples.at("regent_zookeeper_connected"), 0);
  for (const auto& [series, value] : parsed.samples) {
    EXPECT_EQ(series.rfind("regent_jobs", 0), std::string::npos) << series;
  }
}

TEST(PrometheusTextParserTest, RefusesMalformedText) {
  using regent::testing::parsePrometheusText;
  EXPECT_EQ(parsePrometheusText("# TYPE a gauge\na 1\n").error, "");
  EXPECT_NE(parsePrometheusText("a 1\n").error, "");                             // no TYPE
  EXPECT_NE(parsePrometheusText("# TYPE a gauge\na one\n").error, "");           // not a float
  EXPECT_NE(parsePrometheusText("# TYPE 1a gauge\n").error, "");                 // bad name
  EXPECT_NE(parsePrometheusText("# TYPE a gauge\na{x=1} 1\n").error, "");        // unquoted
  EXPECT_NE(parsePrometheusText("# TYPE a gauge\na{x=\"\\q\"} 1\n").error, "");  // escape
  EXPECT_NE(parsePrometheusText("# TYPE a gauge\na 1\na 2\n").error, "");        // duplicate
  EXPECT_NE(parsePrometheusText("# TYPE a gauge\na 1").error, "");               // no newline
  EXPECT_NE(parsePrometheusText("# TYPE a gage\n").error, "");                   // bad type
}

}  // namespace
}  // namespace regent::http

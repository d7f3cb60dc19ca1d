// The worker's HTTP routes against a fake worker, in process (no socket): health, readiness with
// its reason, 404/405 like a master's, and /metrics parsed strictly.
#include "services/worker/worker_http.h"

#include <gtest/gtest.h>
#include <kj/compat/http.h>
#include <kj/debug.h>

#include <optional>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "tests/services/http/prometheus_text_test_util.h"

namespace regent::worker {
namespace {

class FakeWorker final : public WorkerHttpHost {
 public:
  std::optional<std::string> notReadyReason() const override { return reason; }
  uint64_t registeredEpoch() const override { return epoch; }
  uint64_t highestEpoch() const override { return highest; }
  const taskexecutor::TaskExecutorCounters& counters() const override { return taskCounters; }
  const std::vector<taskexecutor::SlotState>& slots() const override { return slotStates; }
  const rpc::FencingCounters& fencingCounters() const override { return fencing; }

  std::optional<std::string> reason = std::string("no leader known");
  uint64_t epoch = 0;
  uint64_t highest = 0;
  taskexecutor::TaskExecutorCounters taskCounters;
  std::vector<taskexecutor::SlotState> slotStates;
  rpc::FencingCounters fencing;
};

struct Reply {
  uint status = 0;
  std::string body;
  std::string allow;
  std::string contentType;
};

class WorkerHttpTest : public ::testing::Test {
 protected:
  ~WorkerHttpTest() noexcept override = default;

  Reply fetch(const std::string& path, kj::HttpMethod method = kj::HttpMethod::GET) {
    auto client = kj::newHttpClient(routes_);
    kj::HttpHeaders headers(*table_);
    auto response =
        loop_.run(client->request(method, kj::StringPtr(path.c_str()), headers).response);
    Reply reply;
    reply.status = response.statusCode;
    reply.body = loop_.run(response.body->readAllText()).cStr();
    KJ_IF_MAYBE (allow, response.headers->get(KJ_ASSERT_NONNULL(table_->stringToId("Allow")))) {
      reply.allow = allow->cStr();
    }
    KJ_IF_MAYBE (type, response.headers->get(kj::HttpHeaderId::CONTENT_TYPE)) {
      reply.contentType = type->cStr();
    }
    return reply;
  }

  EventLoop loop_;
  FakeWorker worker_;
  kj::Own<kj::HttpHeaderTable> table_ = http::HttpRoutes::makeHeaderTable();
  WorkerHttpRoutes routes_{worker_, *table_};
};

TEST_F(WorkerHttpTest, HealthzAnswersOkWhateverTheRegistration) {
  Reply reply = fetch("/healthz");
  EXPECT_EQ(reply.status, 200u);
  EXPECT_EQ(reply.body, "ok\n");
}

TEST_F(WorkerHttpTest, ReadyzIs503WithTheReasonUntilRegistered) {
  Reply notReady = fetch("/readyz");
  EXPECT_EQ(notReady.status, 503u);
  EXPECT_EQ(notReady.body, "not ready: no leader known\n");

  worker_.reason = "registering with the leader of epoch 3 (last attempt: connection refused)";
  notReady = fetch("/readyz?verbose=1");
  EXPECT_EQ(notReady.status, 503u);
  EXPECT_EQ(notReady.body,
            "not ready: registering with the leader of epoch 3 (last attempt: connection "
            "refused)\n");

  worker_.reason = std::nullopt;
  worker_.epoch = 3;
  Reply ready = fetch("/readyz");
  EXPECT_EQ(ready.status, 200u);
  EXPECT_EQ(ready.body, "ok: registered with the leader of epoch 3\n");
}

TEST_F(WorkerHttpTest, UnknownPathIs404AndWrongMethodIs405) {
  Reply missing = fetch("/v1/jobs");
  EXPECT_EQ(missing.status, 404u);
  EXPECT_EQ(missing.body, "no such endpoint: /v1/jobs\n");
  Reply escaped = fetch("/x%0a\x7f");
  EXPECT_EQ(escaped.status, 404u);
  EXPECT_EQ(escaped.body, "no such endpoint: /x%0a\\x7f\n");
  Reply wrongMethod = fetch("/readyz", kj::HttpMethod::POST);
  EXPECT_EQ(wrongMethod.status, 405u);
  EXPECT_EQ(wrongMethod.allow, "GET");
}

TEST_F(WorkerHttpTest, MetricsParseAsPrometheusTextWithEveryWorkerFamily) {
  worker_.reason = std::nullopt;
  worker_.epoch = 4;
  worker_.highest = 5;
  worker_.taskCounters.registrations = 2;
  worker_.taskCounters.registrationAttempts = 7;
  worker_.taskCounters.resourceManagerLost = 1;
  worker_.slotStates = {{.index = 0},
                        {.index = 1, .allocation = AllocationId(1, 2), .job = JobId(3, 4)},
                        {.index = 2}};
  worker_.fencing.reject("TaskExecutorGateway.heartbeat");
  worker_.fencing.reject("TaskExecutorGateway.heartbeat");
  worker_.fencing.reject("Odd\"Name");
  Reply reply = fetch("/metrics");
  ASSERT_EQ(reply.status, 200u);
  EXPECT_EQ(reply.contentType, "text/plain; version=0.0.4; charset=utf-8");
  auto parsed = regent::testing::parsePrometheusText(reply.body);
  ASSERT_EQ(parsed.error, "") << reply.body;
  EXPECT_EQ(parsed.samples.at("regent_worker_registered"), 1);
  EXPECT_EQ(parsed.samples.at("regent_worker_epoch_highest"), 5);
  EXPECT_EQ(parsed.samples.at("regent_worker_registrations_total"), 2);
  EXPECT_EQ(parsed.samples.at("regent_worker_registration_attempts_total"), 7);
  EXPECT_EQ(parsed.samples.at("regent_worker_resource_manager_lost_total"), 1);
  EXPECT_EQ(parsed.samples.at("regent_worker_slots{state=\"free\"}"), 2);
  EXPECT_EQ(parsed.samples.at("regent_worker_slots{state=\"allocated\"}"), 1);
  EXPECT_EQ(parsed.samples.at(
                "regent_worker_epoch_gate_refusals_total{method=\"TaskExecutorGateway.heartbeat\"}"),
            2);
  EXPECT_EQ(parsed.samples.at("regent_worker_epoch_gate_refusals_total{method=\"Odd\\\"Name\"}"),
            1);
  EXPECT_EQ(parsed.types.at("regent_worker_registrations_total"), "counter");
  EXPECT_EQ(parsed.types.at("regent_worker_slots"), "gauge");
  for (const auto& [family, type] : parsed.types) {
    EXPECT_FALSE(parsed.helps[family].empty()) << family;
  }

  worker_.reason = "no leader known";
  parsed = regent::testing::parsePrometheusText(fetch("/metrics").body);
  EXPECT_EQ(parsed.samples.at("regent_worker_registered"), 0);
}

}  // namespace
}  // namespace regent::worker

// regentctl workers and slots as processes against real masters: a worker registered over RPC by
// this test (its TaskExecutorGateway served in process, a stand-in for regent-worker) with one
// free and one allocated slot is listed by the leader, as tables and as JSON lines, on
// /v1/workers and in /metrics; a standby redirects /v1/workers to the leader.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "common/ids.h"
#include "rpc/rpc_client.h"
#include "rpc/rpc_options.h"
#include "rpc/schema/gateways.capnp.h"
#include "rpc/wire_ids.h"
#include "tests/integration/http_get_test_util.h"
#include "tests/integration/master_cluster_test_util.h"
#include "tests/integration/regentctl_test_util.h"

namespace regent::testing {
namespace {

// The stand-in worker's gateway: the master's heartbeats reach it only while the test runs the
// loop, so the masters get a long heartbeat.timeout; no other call is expected.
class IdleTaskExecutor final : public wire::TaskExecutorGateway::Server {};

class RegentctlWorkers : public RegentctlTest {
 protected:
  RegentctlWorkers() : RegentctlTest("regentctl-workers") {}
  ~RegentctlWorkers() noexcept override = default;

  // Two masters advertising their real RPC port, with a heartbeat.timeout the stand-in worker
  // never runs out of; waits until the first one serves.
  void startCluster(const std::string& name) {
    RegentctlTest::startCluster(name, 2, {"rpc.advertised-address=", "heartbeat.timeout=10m"},
                                kCtlPatience);
  }

  // Registers worker `id` ("itest-worker", 2 slots of 0.5 cpu / 1 MiB) with the leader and
  // reports slot 0 free and slot 1 allocated to `job` as `allocation`.
  void registerWorker(const ResourceId& id, const JobId& job, const AllocationId& allocation) {
    CtlResult leader = ctl({"--json", "leader"});
    ASSERT_EQ(leader.exit.exitCode, 0) << leader.output;
    auto info = nlohmann::json::parse(jsonLines(leader.output).at(0));
    const uint64_t epoch = info.at("epoch").get<uint64_t>();
    client_ = kj::heap<rpc::RpcClient>(loop_.io().getNetwork(), loop_.timer(),
                                       info.at("rpc_address").get<std::string>(),
                                       rpc::RpcOptions{});
    auto bootstrap = loop_.run(client_->bootstrapAs<wire::MasterBootstrap>());
    auto obtain = bootstrap.resourceManagerRequest();
    obtain.setEpoch(epoch);
    auto obtained = loop_.run(obtain.send());
    ASSERT_FALSE(obtained.hasFailure()) << obtained.getFailure().getMessage().cStr();
    auto resourceManager = obtained.getResourceManager();

    auto registering = resourceManager.registerTaskExecutorRequest();
    registering.setEpoch(epoch);
    auto registration = registering.initRegistration();
    wire::setWireId(registration.initResourceId(), id);
    registration.setHost("itest-worker");
    registration.setPid(4242);
    registration.setContainment("cgroup v2 (hybrid: limits via v1 memory,cpu,pids) under /x");
    registration.setHttpAddress("127.0.0.1:18082");
    registration.setDataAddress("127.0.0.1:19001");
    registration.setNumberOfSlots(2);
    registration.initSlotProfile().setCpuMillis(500);
    registration.getSlotProfile().setMemoryBytes(1 << 20);
    registration.initTotalProfile().setCpuMillis(1000);
    registration.getTotalProfile().setMemoryBytes(2 << 20);
    registering.setTaskExecutor(kj::heap<IdleTaskExecutor>());
    auto registered = loop_.run(registering.send());
    ASSERT_FALSE(registered.hasFailure()) << registered.getFailure().getMessage().cStr();

    auto reporting = resourceManager.sendSlotReportRequest();
    reporting.setEpoch(epoch);
    wire::setWireId(reporting.initResourceId(), id);
    reporting.setRegistrationId(registered.getSuccess().getRegistrationId());
    auto report = reporting.initSlotReport();
    wire::setWireId(report.initResourceId(), id);
    auto slots = report.initSlots(2);
    for (uint32_t i = 0; i < 2; ++i) {
      wire::setWireId(slots[i].initSlotId().initResourceId(), id);
      slots[i].getSlotId().setSlotIndex(i);
      slots[i].initProfile().setCpuMillis(500);
      slots[i].getProfile().setMemoryBytes(1 << 20);
    }
    wire::setWireId(slots[1].initAllocationId(), allocation);
    wire::setWireId(slots[1].initJobId(), job);
    auto reported = loop_.run(reporting.send());
    ASSERT_FALSE(reported.hasFailure()) << reported.getFailure().getMessage().cStr();
  }

  kj::Own<rpc::RpcClient> client_;
};

TEST_F(RegentctlWorkers, ListsTheLeadersWorkersAndSlotsAsTablesAndJsonLines) {
  ASSERT_NO_FATAL_FAILURE(startCluster("ctl-workers"));
  CtlResult none = ctl({"workers"});
  ASSERT_EQ(none.exit.exitCode, 0) << none.output;
  EXPECT_NE(none.output.find("no workers registered in"), std::string::npos) << none.output;

  const ResourceId worker = ResourceId::random();
  const JobId job = JobId::random();
  const AllocationId allocation = AllocationId::random();
  ASSERT_NO_FATAL_FAILURE(registerWorker(worker, job, allocation));

  CtlResult table = ctl({"workers"});
  ASSERT_EQ(table.exit.exitCode, 0) << table.output;
  EXPECT_TRUE(std::regex_search(
      table.output,
      std::regex("RESOURCE ID +HOST +ADDRESS +SLOTS +FREE +CONTAINMENT +STARTED BY +REGISTERED "
                 "+LAST HEARTBEAT\n" +
                 worker.toHex() +
                 "  itest-worker  127\\.0\\.0\\.1:18082  2 +1 +cgroup v2 +- +20\\S+Z  "
                 "\\d+\\.\\ds ago\n")))
      << table.output;

  CtlResult workers = ctl({"--json", "workers"});
  ASSERT_EQ(workers.exit.exitCode, 0) << workers.output;
  auto lines = jsonLines(workers.output);
  ASSERT_EQ(lines.size(), 1u) << workers.output;
  auto json = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(json.at("resource_id"), worker.toHex());
  EXPECT_EQ(json.at("host"), "itest-worker");
  EXPECT_EQ(json.at("pid"), 4242);
  EXPECT_EQ(json.at("data_address"), "127.0.0.1:19001");
  EXPECT_EQ(json.at("containment"),
            "cgroup v2 (hybrid: limits via v1 memory,cpu,pids) under /x");
  ASSERT_EQ(json.at("slots").size(), 2u);
  EXPECT_EQ(json.at("slots")[1].at("allocation_id"), allocation.toHex());

  CtlResult slots = ctl({"slots"});
  ASSERT_EQ(slots.exit.exitCode, 0) << slots.output;
  EXPECT_NE(slots.output.find(worker.toHex() + "  1      0.500  1MiB    ALLOCATED  " + job.toHex() +
                              "  " + allocation.toHex()),
            std::string::npos)
      << slots.output;

  CtlResult slotsJson = ctl({"--json", "slots"});
  ASSERT_EQ(slotsJson.exit.exitCode, 0) << slotsJson.output;
  auto slotLines = jsonLines(slotsJson.output);
  ASSERT_EQ(slotLines.size(), 2u) << slotsJson.output;
  auto free = nlohmann::json::parse(slotLines[0]);
  EXPECT_EQ(free.at("resource_id"), worker.toHex());
  EXPECT_EQ(free.at("state"), "FREE");
  EXPECT_TRUE(free.at("job_id").is_null());
  auto allocated = nlohmann::json::parse(slotLines[1]);
  EXPECT_EQ(allocated.at("state"), "ALLOCATED");
  EXPECT_EQ(allocated.at("job_id"), job.toHex());
  EXPECT_EQ(allocated.at("allocation_id"), allocation.toHex());
}

TEST_F(RegentctlWorkers, TheLeaderServesV1WorkersAndWorkerMetricsAndAStandbyRedirects) {
  ASSERT_NO_FATAL_FAILURE(startCluster("http-workers"));
  const ResourceId worker = ResourceId::random();
  const AllocationId allocation = AllocationId::random();
  ASSERT_NO_FATAL_FAILURE(registerWorker(worker, JobId::random(), allocation));

  CtlResult masters = ctl({"--json", "masters"});
  ASSERT_EQ(masters.exit.exitCode, 0) << masters.output;
  std::string leaderHttp;
  std::string standbyHttp;
  for (const auto& line : jsonLines(masters.output)) {
    auto master = nlohmann::json::parse(line);
    (master.at("role") == "LEADER" ? leaderHttp : standbyHttp) =
        master.at("http_address").get<std::string>();
  }
  ASSERT_FALSE(leaderHttp.empty()) << masters.output;
  ASSERT_FALSE(standbyHttp.empty()) << masters.output;

  kj::HttpHeaderTable table;
  HttpReply workers = httpGet(loop_, table, leaderHttp, "/v1/workers");
  ASSERT_EQ(workers.status, 200u) << workers.body;
  auto json = nlohmann::json::parse(workers.body);
  ASSERT_EQ(json.at("workers").size(), 1u) << workers.body;
  EXPECT_EQ(json.at("workers")[0].at("resource_id"), worker.toHex());
  EXPECT_EQ(json.at("workers")[0].at("slots")[0].at("state"), "FREE");
  EXPECT_EQ(json.at("workers")[0].at("slots")[1].at("state"), "ALLOCATED");
  EXPECT_EQ(json.at("workers")[0].at("slots")[1].at("allocation_id"), allocation.toHex());

  HttpReply metrics = httpGet(loop_, table, leaderHttp, "/metrics");
  ASSERT_EQ(metrics.status, 200u);
  EXPECT_NE(metrics.body.find("\nregent_workers_registered 1\n"), std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("\nregent_slots{state=\"free\"} 1\n"), std::string::npos);
  EXPECT_NE(metrics.body.find("\nregent_slots{state=\"allocated\"} 1\n"), std::string::npos);
  EXPECT_NE(metrics.body.find("\nregent_worker_heartbeat_timeouts_total 0\n"), std::string::npos);

  HttpReply redirected = httpGetUntil(loop_, table, standbyHttp, "/v1/workers",
                                      [](const HttpReply& reply) { return reply.status == 307; });
  EXPECT_EQ(redirected.location, "http://" + leaderHttp + "/v1/workers");
}

}  // namespace
}  // namespace regent::testing

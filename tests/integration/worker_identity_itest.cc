// A worker speaks only for itself, on real processes (docs/security.md, "Roles"): a second
// worker-role connection to the leader (a rogue client written here with the project's RPC
// client, holding every role since the cluster runs without authentication) names the real
// worker running a job's attempt and tries to end the attempt FINISHED, to disconnect the worker
// from the ResourceManager and from the JobMaster, and to send heartbeats in its name, before and
// after registering a resource id of its own. Each call is refused with permissionDenied and
// counted in regent_rpc_worker_identity_refusals_total; the job keeps running, the worker stays
// registered with its attempt alive, and the job later finishes with that same attempt.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/ids.h"
#include "rpc/rpc_client.h"
#include "rpc/rpc_options.h"
#include "rpc/schema/gateways.capnp.h"
#include "rpc/wire_ids.h"
#include "tests/integration/job_cluster_test_util.h"

namespace regent::testing {
namespace {

const char* const kVertex = "work";

// The rogue's own TaskExecutorGateway: it answers nothing (the master's calls to it fail).
class SilentTaskExecutor final : public wire::TaskExecutorGateway::Server {};

// "permissionDenied: <message>", or "ok", or "<which>: <message>": what a call was answered.
std::string outcome(bool failed, wire::Failure::Reader failure) {
  if (!failed) return "ok";
  const std::string which =
      failure.which() == wire::Failure::PERMISSION_DENIED ? "permissionDenied"
                                                          : "failure " +
                                                                std::to_string(static_cast<int>(
                                                                    failure.which()));
  return which + ": " + failure.getMessage().cStr();
}

bool denied(const std::string& answer) { return answer.rfind("permissionDenied: ", 0) == 0; }

// A worker-role connection of its own to the leader, speaking through the cluster's loop.
class RogueConnection {
 public:
  RogueConnection(JobCluster& cluster, const std::string& rpcAddress)
      : cluster_(cluster),
        loop_(cluster.loop()),
        client_(kj::heap<rpc::RpcClient>(loop_.io().getNetwork(), loop_.timer(), rpcAddress,
                                         rpc::RpcOptions{})),
        bootstrap_(loop_.run(client_->bootstrapAs<wire::MasterBootstrap>())) {}

  wire::ResourceManagerGateway::Client resourceManager() {
    auto request = bootstrap_.resourceManagerRequest();
    request.setEpoch(cluster_.epoch());
    auto response = loop_.run(request.send());
    KJ_REQUIRE(!response.hasFailure(), response.getFailure().getMessage().cStr());
    return response.getResourceManager();
  }

  // The job's JobMaster gateway on this connection, or null with the answer in `refused` (the
  // job no longer runs).
  kj::Maybe<wire::JobMasterGateway::Client> jobMaster(const JobId& job, std::string& refused) {
    auto request = bootstrap_.jobMasterRequest();
    request.setEpoch(cluster_.epoch());
    wire::setWireId(request.initJobId(), job);
    auto response = loop_.run(request.send());
    if (response.hasFailure()) {
      refused = "MasterBootstrap.jobMaster " + outcome(true, response.getFailure());
      return nullptr;
    }
    return response.getJobMaster();
  }

  // Registers `self` (one slot) with the leader's ResourceManager: the answer.
  std::string registerAs(const ResourceId& self) {
    auto request = resourceManager().registerTaskExecutorRequest();
    request.setEpoch(cluster_.epoch());
    auto registration = request.initRegistration();
    wire::setWireId(registration.initResourceId(), self);
    registration.setHost("rogue");
    registration.setPid(4242);
    registration.setNumberOfSlots(1);
    registration.initSlotProfile().setCpuMillis(100);
    registration.getSlotProfile().setMemoryBytes(1 << 20);
    registration.initTotalProfile().setCpuMillis(100);
    registration.getTotalProfile().setMemoryBytes(1 << 20);
    request.setTaskExecutor(kj::heap<SilentTaskExecutor>());
    auto response = loop_.run(request.send());
    return outcome(response.hasFailure(), response.getFailure());
  }

  // ResourceManagerGateway.heartbeat in `worker`'s name, reporting no slot.
  std::string resourceManagerHeartbeat(const ResourceId& worker) {
    auto request = resourceManager().heartbeatRequest();
    request.setEpoch(cluster_.epoch());
    wire::setWireId(request.initResourceId(), worker);
    wire::setWireId(request.initPayload().initSlotReport().initResourceId(), worker);
    auto response = loop_.run(request.send());
    return outcome(response.hasFailure(), response.getFailure());
  }

  // ResourceManagerGateway.disconnect of `worker` (naming no registration: its current one).
  std::string resourceManagerDisconnect(const ResourceId& worker) {
    auto request = resourceManager().disconnectRequest();
    request.setEpoch(cluster_.epoch());
    wire::setWireId(request.initResourceId(), worker);
    request.setCause("rogue");
    auto response = loop_.run(request.send());
    return outcome(response.hasFailure(), response.getFailure());
  }

  // JobMasterGateway.updateTaskExecutionState: `attempt` (subtask 0 of kVertex) FINISHED.
  std::string reportFinished(const JobId& job, const AttemptId& attempt) {
    std::string refused;
    KJ_IF_MAYBE (gateway, jobMaster(job, refused)) {
      auto request = gateway->updateTaskExecutionStateRequest();
      request.setEpoch(cluster_.epoch());
      auto state = request.initState();
      wire::setWireId(state.initAttemptId(), attempt);
      wire::setWireId(state.initJobId(), job);
      state.setVertexName(kVertex);
      state.setSubtaskIndex(0);
      state.setState(wire::ExecutionState::FINISHED);
      state.setExitCode(0);
      auto response = loop_.run(request.send());
      return outcome(response.hasFailure(), response.getFailure());
    }
    return refused;
  }

  // JobMasterGateway.heartbeat in `worker`'s name, listing no attempt.
  std::string jobMasterHeartbeat(const JobId& job, const ResourceId& worker) {
    std::string refused;
    KJ_IF_MAYBE (gateway, jobMaster(job, refused)) {
      auto request = gateway->heartbeatRequest();
      request.setEpoch(cluster_.epoch());
      wire::setWireId(request.initResourceId(), worker);
      request.initPayload();
      auto response = loop_.run(request.send());
      return outcome(response.hasFailure(), response.getFailure());
    }
    return refused;
  }

  // JobMasterGateway.disconnect of `worker`.
  std::string jobMasterDisconnect(const JobId& job, const ResourceId& worker) {
    std::string refused;
    KJ_IF_MAYBE (gateway, jobMaster(job, refused)) {
      auto request = gateway->disconnectRequest();
      request.setEpoch(cluster_.epoch());
      wire::setWireId(request.initResourceId(), worker);
      request.setCause("rogue");
      auto response = loop_.run(request.send());
      return outcome(response.hasFailure(), response.getFailure());
    }
    return refused;
  }

 private:
  JobCluster& cluster_;
  EventLoop& loop_;
  kj::Own<rpc::RpcClient> client_;
  wire::MasterBootstrap::Client bootstrap_;
};

// The sum of every sample of `metric` in Prometheus text.
double metricSum(const std::string& text, const std::string& metric) {
  double sum = 0;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(metric, 0) != 0) continue;
    const char next = line.size() > metric.size() ? line[metric.size()] : ' ';
    if (next != ' ' && next != '{') continue;
    sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

TEST(WorkerIdentity, ASecondWorkerConnectionCannotEndFailOrDisconnectAnotherWorkersAttempts) {
  auto started = JobCluster::start("identity", {.workers = 2, .slotsPerWorker = 1});
  ASSERT_OK(started);
  JobCluster& cluster = *started.value();
  const std::string dir = cluster.taskDir();

  auto running = submitAndWaitRunning(cluster, markedJob("identity", dir, {{kVertex, 1}}),
                                      kVertex, 1, kJobsTimeout);
  ASSERT_OK(running);
  const JobId job = JobId::fromHex(running.value().id).value();
  const std::string attemptHex = running.value().markers[0].attempt;
  const AttemptId attempt = AttemptId::fromHex(attemptHex).value();
  auto before = cluster.status(running.value().id);
  ASSERT_OK(before);
  const nlohmann::json* subtask = subtaskStatus(before.value(), kVertex, 0);
  ASSERT_NE(subtask, nullptr) << before.value().dump();
  const std::string workerHex = textField(*subtask, "resource_id");
  const ResourceId worker = ResourceId::fromHex(workerHex).value();

  CtlResult leader = cluster.ctl({"--json", "leader"});
  ASSERT_EQ(leader.exit.exitCode, 0) << leader.output;
  const std::string rpcAddress =
      nlohmann::json::parse(jsonLines(leader.output).at(0)).at("rpc_address").get<std::string>();

  // A connection that registered nothing speaks for nobody.
  std::vector<std::string> answers;
  {
    RogueConnection unregistered(cluster, rpcAddress);
    answers.push_back(unregistered.resourceManagerHeartbeat(worker));
    answers.push_back(unregistered.jobMasterHeartbeat(job, worker));
    answers.push_back(unregistered.jobMasterHeartbeat(job, worker));
    answers.push_back(unregistered.reportFinished(job, attempt));
  }
  // One that registered a resource id of its own speaks for that one only.
  RogueConnection rogue(cluster, rpcAddress);
  const ResourceId self = ResourceId::random();
  ASSERT_EQ(rogue.registerAs(self), "ok");
  answers.push_back(rogue.reportFinished(job, attempt));
  answers.push_back(rogue.jobMasterHeartbeat(job, worker));
  answers.push_back(rogue.jobMasterHeartbeat(job, worker));
  answers.push_back(rogue.jobMasterDisconnect(job, worker));
  answers.push_back(rogue.resourceManagerHeartbeat(worker));
  answers.push_back(rogue.resourceManagerDisconnect(worker));
  answers.push_back(rogue.registerAs(worker));
  for (size_t i = 0; i < answers.size(); ++i) {
    EXPECT_TRUE(denied(answers[i])) << "call " << i << " answered " << answers[i];
  }

  // Nothing changed: the job runs its one attempt on the same worker, which stays registered.
  auto after = cluster.status(running.value().id);
  ASSERT_OK(after);
  EXPECT_EQ(textField(after.value(), "state"), "RUNNING") << after.value().dump();
  const nlohmann::json* now = subtaskStatus(after.value(), kVertex, 0);
  ASSERT_NE(now, nullptr) << after.value().dump();
  EXPECT_EQ(now->value("attempts", -1), 1) << after.value().dump();
  EXPECT_EQ(textField((*now)["attempt"], "attempt_id"), attemptHex) << after.value().dump();
  EXPECT_EQ(textField((*now)["attempt"], "state"), "RUNNING") << after.value().dump();
  EXPECT_EQ(textField(*now, "resource_id"), workerHex) << after.value().dump();
  EXPECT_FALSE(processGone(running.value().markers[0].pid));
  CtlResult workers = cluster.ctl({"--json", "workers"});
  ASSERT_EQ(workers.exit.exitCode, 0) << workers.output;
  EXPECT_TRUE(containsText(workers.output, workerHex)) << workers.output;

  // Each refusal counted, and logged with both identities.
  auto metrics = cluster.masterMetrics();
  ASSERT_OK(metrics);
  EXPECT_EQ(metricSum(metrics.value(), "regent_rpc_worker_identity_refusals_total"),
            static_cast<double>(answers.size()))
      << metrics.value();
  const std::string log = cluster.masters().process(cluster.leader()).output();
  EXPECT_TRUE(containsText(log, "resource_id=" + self.toHex()) &&
              containsText(log, "named=" + workerHex))
      << log;

  // The real attempt ends the job, FINISHED, without a restart.
  letSubtaskEnd(dir, kVertex, 0);
  auto clean = cluster.waitForJobClean(running.value().id, kJobsTimeout);
  ASSERT_OK(clean);
  EXPECT_EQ(clean.value().state, "FINISHED");
  auto ended = cluster.status(running.value().id);
  ASSERT_OK(ended);
  const nlohmann::json* last = subtaskStatus(ended.value(), kVertex, 0);
  ASSERT_NE(last, nullptr) << ended.value().dump();
  EXPECT_EQ(last->value("attempts", -1), 1) << ended.value().dump();
  EXPECT_EQ(textField((*last)["attempt"], "attempt_id"), attemptHex) << ended.value().dump();
}

}  // namespace
}  // namespace regent::testing

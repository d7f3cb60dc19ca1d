// A master that does not authenticate itself gets nothing (docs/security.md, "Chain of trust"),
// against real processes: a real ZooKeeper, a real master with RPC authentication and ZooKeeper
// ACLs, a real worker and regentctl holding credentials, and a rogue standalone master with
// `rpc.auth: none` serving the forged epoch 100000.
// - With ACLs off, a task could write the `leader` node to name the rogue. The test stages that
//   by rewriting the node with the masters' own ZooKeeper credential (as anyone could without
//   ACLs): the worker and regentctl refuse the rogue (counted on the worker's /metrics), no
//   worker registers with it, no job reaches it, the worker's epoch never moves to 100000, and
//   once the node names the real leader again the worker registers with it.
// - With ACLs on, a ZooKeeper client without the masters' credential cannot rewrite the node.
// - A master with RPC authentication and no ZooKeeper ACL credential refuses to start.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zookeeper/zookeeper.h>

#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "leader/leader_info.h"
#include "tests/fixtures/process_harness.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/fixtures/wait_test_util.h"
#include "tests/fixtures/zookeeper_server.h"
#include "tests/fixtures/zookeeper_test_client.h"
#include "tests/integration/master_cluster_test_util.h"
#include "tests/integration/worker_cluster_test_util.h"

namespace regent::testing {
namespace {

constexpr Duration kTimeout{60000};
constexpr uint64_t kForgedEpoch = 100000;
constexpr const char* kMastersZooKeeper = "regent:master-secret";
constexpr const char* kReadersZooKeeper = "viewer:viewer-secret";
constexpr const char* kJobId = "7b1c2a9e8b7d6c5e4f3a2b1c0d9e8f70";
constexpr const char* kRefusals = "regent_rpc_master_auth_refusals_total";

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class MasterImpersonation : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = sharedZooKeeperServer();
    ASSERT_OK(server);
    quorum_ = server.value()->connectString();
    clusterId_ = uniqueClusterId("impersonation");
    adminSecret_ = writeFile("admin.secret", "admin-secret-0123456789\n");
    workerSecret_ = writeFile("worker.secret", "worker-secret-0123456789\n");
  }

  std::string writeFile(const std::string& name, const std::string& text) {
    const std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << text;
    ::chmod(path.c_str(), 0600);
    return path;
  }

  std::string leaderPath() const { return "/regent/" + clusterId_ + "/leader"; }

  // The real master: RPC authentication (admin and worker secrets) and ZooKeeper ACLs.
  void startRealMaster() {
    MasterClusterOptions options = workerTestMasters(quorum_, clusterId_);
    options.extraSet.insert(options.extraSet.end(),
                            {"rpc.auth-secret.admin-file=" + adminSecret_,
                             "rpc.auth-secret.worker-file=" + workerSecret_,
                             std::string("ha.zookeeper.auth=") + kMastersZooKeeper,
                             std::string("ha.zookeeper.read-auth=") + kReadersZooKeeper});
    masters_ = std::make_unique<MasterCluster>(std::move(options));
    ASSERT_OK(masters_->startMasters(1));
    auto epoch = waitForServing(*masters_, 0, kTimeout);
    ASSERT_OK(epoch);
    epoch_ = epoch.value();
  }

  // A worker holding the worker credential, reading ZooKeeper with the read credential.
  void startWorker() {
    WorkerClusterOptions options = workerTestWorkers(quorum_, clusterId_);
    options.extraSet.insert(options.extraSet.end(),
                            {"rpc.credential.role=worker",
                             "rpc.credential.secret-file=" + workerSecret_,
                             std::string("ha.zookeeper.read-auth=") + kReadersZooKeeper});
    workers_ = std::make_unique<WorkerCluster>(std::move(options));
    ASSERT_OK(workers_->startWorker());
    ASSERT_OK(workers_->waitForRegistered(0, epoch_, kTimeout));
  }

  // The rogue: a standalone master with rpc.auth none whose next epoch is the forged one.
  void startRogue() {
    const std::string rogueDir = dir_.path() + "/rogue";
    ASSERT_EQ(::mkdir(rogueDir.c_str(), 0700), 0);
    writeFile("rogue/epoch", std::to_string(kForgedEpoch - 1) + "\n");
    ProcessOptions options;
    options.argv = {REGENT_BIN_DIR "/regent-master", "--set", "ha.mode=standalone",
                    "--set", "ha.standalone.epoch-file=" + rogueDir + "/epoch",
                    "--set", "store.rocksdb.path=" + rogueDir + "/store",
                    "--set", "rpc.auth=none",
                    "--set", "rpc.bind=127.0.0.1:0",
                    "--set", "rpc.advertised-address=",
                    "--set", "http.bind=127.0.0.1:0",
                    "--set", kTestHeartbeatInterval,
                    "--set", kTestHeartbeatTimeout};
    options.outputPath = rogueDir + "/rogue.log";
    auto process = ProcessHarness::start(options);
    ASSERT_OK(process);
    rogue_ = std::move(process).value();
    auto serving = rogue_->waitForLine(std::regex("leader serving epoch=100000"), kTimeout);
    ASSERT_OK(serving);
    std::smatch found;
    const std::string output = rogue_->output();
    ASSERT_TRUE(std::regex_search(output, found, std::regex("rpc listening on (\\S+)")))
        << output;
    rogueAddress_ = found[1];
  }

  // A ZooKeeper client holding `credential` (none when empty).
  std::unique_ptr<ZooKeeperTestClient> zooKeeperAs(const std::string& credential) {
    auto client = ZooKeeperTestClient::connectAs(quorum_, credential);
    EXPECT_OK(client);
    return client.ok() ? std::move(client).value() : nullptr;
  }

  // The `leader` node rewritten to name the rogue with the forged epoch, as any ZooKeeper client
  // could with ACLs off; returns the real record.
  std::string nameTheRogue(ZooKeeperTestClient& zooKeeper) {
    auto real = zooKeeper.get(leaderPath());
    EXPECT_OK(real);
    if (!real.ok()) return "";
    auto record = leader::leaderInfoFromJson(real.value());
    EXPECT_OK(record);
    if (!record.ok()) return "";
    leader::LeaderInfo forged = record.value();
    forged.epoch = kForgedEpoch;
    forged.masterId = "0badc0de0badc0de0badc0de0badc0de";
    forged.rpcAddress = rogueAddress_;
    forged.status = leader::LeaderStatus::kServing;
    EXPECT_OK(zooKeeper.set(leaderPath(), leader::toJson(forged)));
    return real.value();
  }

  std::string workerMetrics() {
    auto got = httpGetText(loop_, workers_->httpAddress(0), "/metrics");
    return got.ok() ? got.value().second : "";
  }

  std::vector<std::string> ctlArgs(std::vector<std::string> credential) const {
    std::vector<std::string> args = {"--zk", quorum_, "--cluster-id", clusterId_,
                                     "--set", std::string("ha.zookeeper.read-auth=") +
                                                  kReadersZooKeeper,
                                     "--set", "rpc.call-timeout=2s"};
    args.insert(args.end(), credential.begin(), credential.end());
    return args;
  }

  std::vector<std::string> asAdmin() const {
    return {"--set", "rpc.credential.role=admin", "--set",
            "rpc.credential.secret-file=" + adminSecret_};
  }

  TempDir dir_{"impersonation"};
  EventLoop loop_;
  std::string quorum_;
  std::string clusterId_;
  std::string adminSecret_;
  std::string workerSecret_;
  std::unique_ptr<MasterCluster> masters_;
  std::unique_ptr<WorkerCluster> workers_;
  std::unique_ptr<ProcessHarness> rogue_;
  std::string rogueAddress_;
  uint64_t epoch_ = 0;
};

TEST_F(MasterImpersonation, AWorkerAndRegentctlWithCredentialsRefuseARogueMasterNamedAsLeader) {
  startRealMaster();
  if (HasFatalFailure()) return;
  startWorker();
  if (HasFatalFailure()) return;
  startRogue();
  if (HasFatalFailure()) return;

  auto attacker = zooKeeperAs(kMastersZooKeeper);
  ASSERT_NE(attacker, nullptr);
  const std::string realRecord = nameTheRogue(*attacker);
  ASSERT_FALSE(realRecord.empty());

  // The worker follows the node to the rogue: it refuses it (twice: it keeps trying, never
  // downgrading), or, without the defence, registers with it.
  ASSERT_TRUE(waitUntil(
      [&] {
        const auto refused = metricSum(workerMetrics(), kRefusals);
        return (refused && *refused >= 2) ||
               workers_->count(0, WorkerEvent::Kind::kRegistered) >= 2;
      },
      kTimeout, Duration(200)))
      << workers_->describe();
  for (const WorkerEvent& event : workers_->events(0)) {
    if (event.kind == WorkerEvent::Kind::kRegistered) {
      EXPECT_EQ(event.epoch, epoch_) << "the worker registered with the rogue: "
                                     << workers_->describe();
    }
  }
  const std::string metrics = workerMetrics();
  EXPECT_GE(metricValue(metrics, kRefusals, "reason=\"not_challenged\"").value_or(0), 2)
      << metrics;
  EXPECT_EQ(metricValue(metrics, "regent_worker_epoch_highest", "").value_or(-1), epoch_)
      << metrics;
  EXPECT_TRUE(workers_->process(0)
                  .waitForLine(std::regex("refusing the master at " + rogueAddress_), kTimeout)
                  .ok())
      << workers_->process(0).output();

  // regentctl, following the same node with the admin credential, refuses it too: the job never
  // reaches it.
  const std::string job = writeFile("job.yaml", std::string("job_id: ") + kJobId +
                                                    "\nname: hijacked\nvertices:\n"
                                                    "  - name: work\n"
                                                    "    parallelism: 1\n"
                                                    "    command:\n"
                                                    "      argv: [sleep, \"1\"]\n");
  std::vector<std::string> submit = ctlArgs(asAdmin());
  submit.insert(submit.end(), {"--timeout", "5s", "jobs", "submit", job});
  CtlResult submitted = regentctlChecked(dir_.path(), {}, submit);
  EXPECT_NE(submitted.exit.exitCode, 0) << submitted.output;
  EXPECT_TRUE(contains(submitted.output, "refusing the master at " + rogueAddress_))
      << submitted.output;

  // Asked directly (it requires no credential), the rogue knows no job and no worker.
  CtlResult jobs = regentctlChecked(
      dir_.path(), {}, {"--master", rogueAddress_, "--timeout", "10s", "--json", "jobs", "list"});
  EXPECT_EQ(jobs.exit.exitCode, 0) << jobs.output;
  EXPECT_FALSE(contains(jobs.output, kJobId)) << jobs.output;
  CtlResult workers = regentctlChecked(
      dir_.path(), {}, {"--master", rogueAddress_, "--timeout", "10s", "--json", "workers"});
  EXPECT_EQ(workers.exit.exitCode, 0) << workers.output;
  EXPECT_FALSE(contains(workers.output, workers_->resourceId(0))) << workers.output;
  EXPECT_FALSE(contains(rogue_->output(), "worker registered")) << rogue_->output();

  // The node names the real leader again (from a new session: the attacker's may have expired
  // while the test waited): the worker registers with it, its epoch never moved.
  auto restorer = zooKeeperAs(kMastersZooKeeper);
  ASSERT_NE(restorer, nullptr);
  ASSERT_OK(restorer->set(leaderPath(), realRecord));
  ASSERT_OK(workers_->waitForRegistered(0, epoch_, kTimeout, 2));
  const std::string after = workerMetrics();
  EXPECT_EQ(metricValue(after, "regent_worker_epoch_highest", "").value_or(-1), epoch_) << after;
  CtlResult real = regentctlChecked(dir_.path(), {}, [&] {
    std::vector<std::string> args = ctlArgs(asAdmin());
    args.insert(args.end(), {"--timeout", "30s", "--json", "workers"});
    return args;
  }());
  EXPECT_EQ(real.exit.exitCode, 0) << real.output;
  EXPECT_TRUE(contains(real.output, workers_->resourceId(0))) << real.output;
}

TEST_F(MasterImpersonation, WithAclsAZooKeeperClientWithoutTheMastersCredentialCannotRewriteTheLeader) {
  startRealMaster();
  if (HasFatalFailure()) return;

  for (const std::string& credential : {std::string(), std::string(kReadersZooKeeper)}) {
    SCOPED_TRACE("ZooKeeper credential: " + (credential.empty() ? "none" : credential));
    auto attacker = zooKeeperAs(credential);
    ASSERT_NE(attacker, nullptr);
    EXPECT_FALSE(attacker->set(leaderPath(), "{}").ok());
    EXPECT_EQ(attacker->lastResultCode(), ZNOAUTH);
    EXPECT_FALSE(attacker->remove(leaderPath()).ok());
    EXPECT_EQ(attacker->lastResultCode(), ZNOAUTH);
    EXPECT_FALSE(attacker->create("/regent/" + clusterId_ + "/forged", "{}").ok());
    EXPECT_EQ(attacker->lastResultCode(), ZNOAUTH);
  }
  // The real record is untouched.
  auto reader = zooKeeperAs(kReadersZooKeeper);
  ASSERT_NE(reader, nullptr);
  auto record = reader->get(leaderPath());
  ASSERT_OK(record);
  auto parsed = leader::leaderInfoFromJson(record.value());
  ASSERT_OK(parsed);
  EXPECT_EQ(parsed.value().epoch, epoch_);
}

TEST_F(MasterImpersonation, AMasterWithAuthenticationButNoZooKeeperAclRefusesToStart) {
  ProcessOptions options;
  options.argv = {REGENT_BIN_DIR "/regent-master", "--set", "ha.zookeeper.quorum=" + quorum_,
                  "--set", "cluster-id=" + clusterId_,
                  "--set", "rpc.bind=127.0.0.1:0",
                  "--set", "http.bind=127.0.0.1:0",
                  "--set", "rpc.auth-secret.admin-file=" + adminSecret_};
  options.outputPath = dir_.path() + "/refused.log";
  auto process = ProcessHarness::start(options);
  ASSERT_OK(process);
  auto exit = process.value()->waitForExit(kTimeout);
  ASSERT_TRUE(exit) << process.value()->output();
  const std::string output = process.value()->output();
  EXPECT_EQ(exit->exitCode, 2) << output;
  EXPECT_TRUE(contains(output, "ha.zookeeper.auth")) << output;
  EXPECT_TRUE(contains(output, "ha.zookeeper.read-auth")) << output;
  EXPECT_FALSE(contains(output, "contending")) << output;
}

}  // namespace
}  // namespace regent::testing

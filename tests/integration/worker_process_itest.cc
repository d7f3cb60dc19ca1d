// regent-worker as a process (docs/workers.md): its configuration (--print-config, a refused slot
// profile), its data directory (the same resource id after a restart, a second worker refused
// naming both), its signals (SIGTERM exits 0 with the exiting line last), its HTTP endpoints
// without a master, and its registration with a real regent-master over real ZooKeeper and with
// a standalone master; a bad worker.task-user refused at start.
#include <gtest/gtest.h>
#include <kj/compat/http.h>

#include <unistd.h>

#include <csignal>
#include <fstream>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "common/event_line.h"
#include "common/event_loop.h"
#include "tests/fixtures/process_harness.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/fixtures/zookeeper_server.h"
#include "tests/integration/http_get_test_util.h"
#include "tests/integration/master_cluster_test_util.h"

namespace regent::testing {
namespace {

// Bounds for slow ASan builds on shared cores; none is a claim about speed.
constexpr Duration kStartTimeout{60000};
constexpr Duration kExitTimeout{30000};

// Where nothing listens: a worker pointed here never finds ZooKeeper (and keeps trying).
constexpr const char* kNoZooKeeper = "127.0.0.1:1";

class WorkerProcessTest : public ::testing::Test {
 protected:
  ~WorkerProcessTest() noexcept override = default;

  // regent-worker with `sets` (after defaults that keep it on loopback, on a free HTTP port, and
  // in this test's directory) and its output in a file of its own.
  Result<std::unique_ptr<ProcessHarness>> startWorker(std::vector<std::string> sets,
                                                      std::vector<std::string> extraArgs = {}) {
    ProcessOptions options;
    options.argv = {REGENT_BIN_DIR "/regent-worker"};
    options.argv.insert(options.argv.end(), extraArgs.begin(), extraArgs.end());
    std::vector<std::string> all = {"worker.data-dir=" + dir_.path() + "/data",
                                    "worker.http.bind=127.0.0.1:0",
                                    std::string("ha.zookeeper.quorum=") + kNoZooKeeper,
                                    "cluster.registration.max-timeout=500ms"};
    all.insert(all.end(), sets.begin(), sets.end());
    for (const std::string& set : all) {
      options.argv.push_back("--set");
      options.argv.push_back(set);
    }
    options.outputPath = dir_.path() + "/worker-" + std::to_string(runs_++) + ".log";
    return ProcessHarness::start(std::move(options));
  }

  // The fields of the first `event` line of `process` (waiting for it).
  EventFields waitForEvent(ProcessHarness& process, const std::string& event) {
    auto line = process.waitForLine(std::regex("(^|\\s)" + event + "( |$)"), kStartTimeout);
    EXPECT_TRUE(line.ok()) << (line.ok() ? "" : line.error().message);
    if (!line.ok()) return {};
    auto fields = parseEventLine(line.value(), event);
    EXPECT_TRUE(fields) << line.value();
    return fields.value_or(EventFields{});
  }

  // The address the worker's HTTP server bound ("127.0.0.1:PORT").
  std::string waitForHttp(ProcessHarness& process) {
    auto line =
        process.waitForLine(std::regex("http listening on (127\\.0\\.0\\.1:[0-9]+)"), kStartTimeout);
    EXPECT_TRUE(line.ok()) << (line.ok() ? "" : line.error().message);
    if (!line.ok()) return "";
    std::smatch match;
    std::regex_search(line.value(), match, std::regex("http listening on (127\\.0\\.0\\.1:[0-9]+)"));
    return match[1];
  }

  // The last non-empty line of `output`.
  static std::string lastLine(const std::string& output) {
    std::string trimmed = output;
    while (!trimmed.empty() && trimmed.back() == '\n') trimmed.pop_back();
    const size_t newline = trimmed.rfind('\n');
    return newline == std::string::npos ? trimmed : trimmed.substr(newline + 1);
  }

  TempDir dir_{"regent-worker-itest"};
  int runs_ = 0;
};

TEST_F(WorkerProcessTest, PrintConfigListsTheWorkerOptionsAndStartsNothing) {
  auto worker = startWorker({"worker.slots=3"}, {"--print-config"});
  ASSERT_OK(worker);
  auto exit = worker.value()->waitForExit(kExitTimeout);
  ASSERT_TRUE(exit);
  EXPECT_TRUE(exit->exited() && exit->exitCode == 0) << exit->describe();
  const std::string output = worker.value()->output();
  for (const char* key : {"worker.slots", "worker.slot-cpu", "worker.slot-memory",
                          "worker.data-dir", "worker.advertised-host", "worker.http.bind",
                          "cluster.registration.initial-timeout",
                          "cluster.registration.max-timeout", "heartbeat.interval"}) {
    EXPECT_NE(output.find(key), std::string::npos) << key << " missing from:\n" << output;
  }
  EXPECT_EQ(output.find("worker starting"), std::string::npos) << output;
}

// A master's option on the worker's command line is refused, not ignored: a worker given
// http.bind would serve on worker.http.bind's default, where a second worker collides.
TEST_F(WorkerProcessTest, AMastersOptionOnTheCommandLineExits2NamingTheWorkersOwn) {
  auto worker = startWorker({"http.bind=127.0.0.1:0"});
  ASSERT_OK(worker);
  auto exit = worker.value()->waitForExit(kExitTimeout);
  ASSERT_TRUE(exit);
  EXPECT_TRUE(exit->exited() && exit->exitCode == 2) << exit->describe();
  const std::string output = worker.value()->output();
  EXPECT_NE(output.find("regent-worker: http.bind from --set applies to the master, not the "
                        "worker; the worker's own is worker.http.bind"),
            std::string::npos)
      << output;
  EXPECT_EQ(output.find("worker starting"), std::string::npos) << output;
}

TEST_F(WorkerProcessTest, AnInvalidSlotProfileExits2NamingTheOption) {
  for (const auto& [set, option] :
       std::vector<std::pair<std::string, std::string>>{{"worker.slot-cpu=0.0001", "worker.slot-cpu"},
                                                        {"worker.slot-cpu=5000000", "worker.slot-cpu"},
                                                        {"worker.slots=0", "worker.slots"},
                                                        {"worker.slot-memory=1KiB", "worker.slot-memory"}}) {
    auto worker = startWorker({set});
    ASSERT_OK(worker);
    auto exit = worker.value()->waitForExit(kExitTimeout);
    ASSERT_TRUE(exit) << set;
    EXPECT_TRUE(exit->exited() && exit->exitCode == 2) << set << ": " << exit->describe();
    const std::string output = worker.value()->output();
    EXPECT_NE(output.find(option), std::string::npos) << set << ":\n" << output;
    EXPECT_EQ(output.find("worker starting"), std::string::npos) << output;
    EXPECT_NE(lastLine(output).find("worker exiting resource_id=? code=2"), std::string::npos)
        << output;
  }
}

// The task user is resolved at start (this test runs as root, where it applies): an unknown user,
// or root without worker.task-allow-root, exits 2 naming the option before anything starts.
TEST_F(WorkerProcessTest, ABadTaskUserExits2NamingTheOption) {
  if (::geteuid() != 0) GTEST_SKIP() << "worker.task-user applies to a worker running as root";
  for (const std::vector<std::string>& sets :
       std::vector<std::vector<std::string>>{{"worker.task-user=no-such-user-regent"},
                                             {"worker.task-user=root"}}) {
    auto worker = startWorker(sets);
    ASSERT_OK(worker);
    auto exit = worker.value()->waitForExit(kExitTimeout);
    ASSERT_TRUE(exit) << sets[0];
    EXPECT_TRUE(exit->exited() && exit->exitCode == 2) << sets[0] << ": " << exit->describe();
    const std::string output = worker.value()->output();
    EXPECT_NE(output.find("worker.task-user"), std::string::npos) << sets[0] << ":\n" << output;
    EXPECT_EQ(output.find("worker starting"), std::string::npos) << output;
    EXPECT_NE(lastLine(output).find("worker exiting resource_id=? code=2"), std::string::npos)
        << output;
  }
  // Told explicitly, root is accepted.
  auto worker = startWorker({"worker.task-user=root", "worker.task-allow-root=true"});
  ASSERT_OK(worker);
  waitForHttp(*worker.value());  // Its signal handlers are installed by then.
  ASSERT_OK(worker.value()->terminate());
  auto exit = worker.value()->waitForExit(kExitTimeout);
  ASSERT_TRUE(exit);
  EXPECT_TRUE(exit->exited() && exit->exitCode == 0) << exit->describe();
}

TEST_F(WorkerProcessTest, ASecondWorkerOnTheSameDataDirExits1NamingBothWorkers) {
  auto first = startWorker({});
  ASSERT_OK(first);
  EventFields started = waitForEvent(*first.value(), "worker starting");
  const std::string host = started.get("host").value_or("?");
  EXPECT_EQ(started.getInt("pid"), first.value()->pid());

  auto second = startWorker({});
  ASSERT_OK(second);
  auto exit = second.value()->waitForExit(kExitTimeout);
  ASSERT_TRUE(exit);
  EXPECT_TRUE(exit->exited() && exit->exitCode == 1) << exit->describe();
  const std::string output = second.value()->output();
  EXPECT_NE(output.find("is in use by the worker on host " + host + " pid " +
                        std::to_string(first.value()->pid()) + " (started "),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("this worker is host " + host + " pid " +
                        std::to_string(second.value()->pid())),
            std::string::npos)
      << output;
  EXPECT_NE(lastLine(output).find("worker exiting resource_id=? code=1"), std::string::npos)
      << output;
  // The first one did not notice.
  EXPECT_TRUE(first.value()->running());
}

TEST_F(WorkerProcessTest, SigtermExits0WithTheExitingLineLastAndARestartKeepsTheResourceId) {
  auto worker = startWorker({});
  ASSERT_OK(worker);
  EventFields started = waitForEvent(*worker.value(), "worker starting");
  const std::string resourceId = started.get("resource_id").value_or("");
  EXPECT_EQ(resourceId.size(), 32u);
  EXPECT_EQ(started.get("data_dir"), dir_.path() + "/data");
  waitForHttp(*worker.value());

  ASSERT_OK(worker.value()->signal(SIGHUP));
  ASSERT_OK(worker.value()->waitForLine(std::regex("SIGHUP ignored"), kStartTimeout));
  EXPECT_TRUE(worker.value()->running());

  ASSERT_OK(worker.value()->terminate());
  auto exit = worker.value()->waitForExit(kExitTimeout);
  ASSERT_TRUE(exit);
  EXPECT_TRUE(exit->exited() && exit->exitCode == 0) << exit->describe();
  const std::string last = lastLine(worker.value()->output());
  auto exiting = parseEventLine(last, "worker exiting");
  ASSERT_TRUE(exiting) << worker.value()->output();
  EXPECT_EQ(exiting->get("resource_id"), resourceId);
  EXPECT_EQ(exiting->getInt("code"), 0);
  EXPECT_TRUE(exiting->getInt("mono_us") && exiting->getInt("wall_ms")) << last;

  auto again = startWorker({});
  ASSERT_OK(again);
  EventFields restarted = waitForEvent(*again.value(), "worker starting");
  EXPECT_EQ(restarted.get("resource_id"), resourceId);
}

TEST_F(WorkerProcessTest, WithoutAMasterHealthzIsOkAndReadyzIs503WithTheReason) {
  auto worker = startWorker({});
  ASSERT_OK(worker);
  const std::string address = waitForHttp(*worker.value());
  ASSERT_FALSE(address.empty());
  EventLoop loop;
  kj::HttpHeaderTable table;
  HttpReply health = httpGet(loop, table, address, "/healthz");
  EXPECT_EQ(health.status, 200u);
  EXPECT_EQ(health.body, "ok\n");
  HttpReply ready = httpGet(loop, table, address, "/readyz");
  EXPECT_EQ(ready.status, 503u);
  EXPECT_EQ(ready.body.rfind("not ready: ", 0), 0u) << ready.body;
  HttpReply metrics = httpGet(loop, table, address, "/metrics");
  EXPECT_EQ(metrics.status, 200u);
  EXPECT_NE(metrics.body.find("regent_worker_registered 0\n"), std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("regent_worker_slots{state=\"free\"} 4\n"), std::string::npos)
      << metrics.body;
}

TEST_F(WorkerProcessTest, RegistersWithTheLeaderOfARealClusterAndBecomesReady) {
  ZooKeeperServer& server = sharedServer();
  const std::string clusterId = uniqueClusterId("worker");
  // The master advertises the RPC port it bound, which the worker dials.
  MasterCluster cluster({.quorum = server.connectString(), .clusterId = clusterId});
  ASSERT_OK(cluster.startMaster({"rpc.advertised-address="}));
  ASSERT_OK(cluster.waitForGrant(1, kStartTimeout));

  auto worker = startWorker({"ha.zookeeper.quorum=" + server.connectString(),
                             "cluster-id=" + clusterId, "worker.slots=2"});
  ASSERT_OK(worker);
  EventFields started = waitForEvent(*worker.value(), "worker starting");
  const std::string address = waitForHttp(*worker.value());
  EventFields registered = waitForEvent(*worker.value(), "worker registered");
  EXPECT_EQ(registered.get("resource_id"), started.get("resource_id"));
  EXPECT_EQ(registered.getUint("epoch"), 1u) << cluster.describe();

  EventLoop loop;
  kj::HttpHeaderTable table;
  HttpReply ready = httpGetUntil(loop, table, address, "/readyz",
                                 [](const HttpReply& reply) { return reply.status == 200; });
  EXPECT_EQ(ready.body, "ok: registered with the leader of epoch 1\n");

  ASSERT_OK(worker.value()->terminate());
  auto exit = worker.value()->waitForExit(kExitTimeout);
  ASSERT_TRUE(exit);
  EXPECT_TRUE(exit->exited() && exit->exitCode == 0) << exit->describe();
  EXPECT_NE(worker.value()->output().find("worker disconnected"), std::string::npos)
      << worker.value()->output();
}

TEST_F(WorkerProcessTest, ASecondSigtermWhileTheDisconnectHangsExitsAtOnceWith143) {
  ZooKeeperServer& server = sharedServer();
  const std::string clusterId = uniqueClusterId("worker-stop");
  MasterCluster cluster({.quorum = server.connectString(), .clusterId = clusterId});
  ASSERT_OK(cluster.startMaster({"rpc.advertised-address="}));
  ASSERT_OK(cluster.waitForGrant(1, kStartTimeout));
  // A long call timeout and heartbeat timeout: the disconnect to a stopped master hangs.
  auto worker = startWorker({"ha.zookeeper.quorum=" + server.connectString(),
                             "cluster-id=" + clusterId, "rpc.call-timeout=10m"});
  ASSERT_OK(worker);
  waitForEvent(*worker.value(), "worker registered");

  ASSERT_OK(cluster.process(0).pause());
  ASSERT_OK(worker.value()->terminate());
  ASSERT_OK(worker.value()->waitForLine(std::regex("SIGTERM received"), kStartTimeout));
  EXPECT_TRUE(worker.value()->running());
  ASSERT_OK(worker.value()->terminate());
  auto exit = worker.value()->waitForExit(kExitTimeout);
  ASSERT_OK(cluster.process(0).resume());
  ASSERT_TRUE(exit);
  EXPECT_TRUE(exit->exited() && exit->exitCode == 143) << exit->describe();
  const std::string output = worker.value()->output();
  EXPECT_NE(output.find("second stop signal (SIGTERM)"), std::string::npos) << output;
  auto exiting = parseEventLine(lastLine(output), "worker exiting");
  ASSERT_TRUE(exiting) << output;
  EXPECT_EQ(exiting->getInt("code"), 143);
}

TEST_F(WorkerProcessTest, FindsTheStandaloneMasterThroughTheMastersConfiguration) {
  // The master and the worker share the standalone settings in one file (the epoch file, next to
  // which the master writes its leader record with the port it bound, and the master's rpc.bind,
  // which a worker reads from a file but refuses on its command line); no ZooKeeper anywhere.
  const std::string shared = dir_.path() + "/standalone.yaml";
  std::ofstream(shared) << "ha.mode: standalone\nha.standalone.epoch-file: " << dir_.path()
                        << "/epoch\nrpc.bind: 127.0.0.1:0\n";
  ProcessOptions masterOptions;
  masterOptions.argv = {REGENT_BIN_DIR "/regent-master", "--config", shared, "--set",
                        "store.rocksdb.path=" + dir_.path() + "/store", "--set",
                        "http.bind=127.0.0.1:0"};
  masterOptions.outputPath = dir_.path() + "/master.log";
  auto master = ProcessHarness::start(masterOptions);
  ASSERT_OK(master);
  ASSERT_OK(master.value()->waitForLine(std::regex("leader serving epoch=1 "), kStartTimeout));

  auto worker = startWorker({"worker.slots=1"}, {"--config", shared});
  ASSERT_OK(worker);
  EventFields registered = waitForEvent(*worker.value(), "worker registered");
  EXPECT_EQ(registered.getUint("epoch"), 1u) << worker.value()->output();
  ASSERT_OK(master.value()->waitForLine(std::regex("worker registered epoch=1 "), kStartTimeout));
}

}  // namespace
}  // namespace regent::testing

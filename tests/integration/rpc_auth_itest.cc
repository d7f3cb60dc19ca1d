// Authenticated RPC with real processes (docs/security.md): a master with per-role secrets serves
// regentctl by the role of its credential, from --set or the environment (admin submits; reader
// lists but may not submit; without a credential it is told which options to set), and a master bound beyond loopback
// without authentication refuses to start unless rpc.auth is none, which it then warns about.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "tests/fixtures/process_harness.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/fixtures/zookeeper_server.h"
#include "tests/integration/master_cluster_test_util.h"

namespace regent::testing {
namespace {

using Kind = MasterEvent::Kind;
constexpr Duration kTimeout{60000};
constexpr const char* kJobId = "5a1c2a9e8b7d6c5e4f3a2b1c0d9e8f7a";

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class RpcAuth : public ::testing::Test {
 protected:
  std::string writeFile(const std::string& name, const std::string& text, mode_t mode = 0600) {
    const std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    return path;
  }

  void startCluster() {
    auto server = sharedZooKeeperServer();
    ASSERT_OK(server);
    const std::string clusterId = uniqueClusterId("rpc-auth");
    adminSecret_ = writeFile("admin.secret", "admin-secret-0123456789\n");
    readerSecret_ = writeFile("reader.secret", "reader-secret-0123456789\n");
    cluster_ = std::make_unique<MasterCluster>(MasterClusterOptions{
        .quorum = server.value()->connectString(),
        .clusterId = clusterId,
        .extraSet = {"rpc.advertised-address=", "rpc.auth-secret.admin-file=" + adminSecret_,
                     "rpc.auth-secret.reader-file=" + readerSecret_,
                     // RPC authentication needs the ZooKeeper ACL (docs/security.md).
                     "ha.zookeeper.auth=regent:master-secret",
                     "ha.zookeeper.read-auth=viewer:viewer-secret"}});
    ASSERT_OK(cluster_->startMasters(1));
    auto serving = cluster_->waitForEvent(
        0, [](const MasterEvent& e) { return e.kind == Kind::kServing; }, kTimeout);
    ASSERT_OK(serving);
    epoch_ = serving.value().epoch;
    ctlArgs_ = {"--zk", server.value()->connectString(), "--cluster-id", clusterId,
                "--set", "rpc.call-timeout=2s",
                "--set", "ha.zookeeper.read-auth=viewer:viewer-secret"};
  }

  CtlResult ctl(std::vector<std::string> credential, std::vector<std::string> args,
                const std::string& timeout = "30s") {
    std::vector<std::string> all = ctlArgs_;
    all.insert(all.end(), {"--timeout", timeout});
    all.insert(all.end(), credential.begin(), credential.end());
    all.insert(all.end(), args.begin(), args.end());
    auto run = runRegentctl(dir_.path(), all, Duration(90000));
    EXPECT_TRUE(run.ok()) << run.error().message;
    return run.ok() ? run.value() : CtlResult{};
  }

  std::vector<std::string> as(const std::string& role, const std::string& secretFile) {
    return {"--set", "rpc.credential.role=" + role, "--set",
            "rpc.credential.secret-file=" + secretFile};
  }

  std::string jobFile() {
    return writeFile("job.yaml", std::string("job_id: ") + kJobId +
                                     "\nname: guarded\nvertices:\n"
                                     "  - name: work\n"
                                     "    parallelism: 1\n"
                                     "    command:\n"
                                     "      argv: [sleep, \"1\"]\n");
  }

  TempDir dir_{"rpc-auth"};
  std::unique_ptr<MasterCluster> cluster_;
  std::vector<std::string> ctlArgs_;
  std::string adminSecret_;
  std::string readerSecret_;
  uint64_t epoch_ = 0;
};

TEST_F(RpcAuth, AnAdminSubmitsAReaderListsButMayNotSubmitAndNoCredentialIsToldWhatToSet) {
  startCluster();
  if (HasFatalFailure()) return;

  CtlResult submitted = ctl(as("admin", adminSecret_), {"jobs", "submit", jobFile()});
  EXPECT_EQ(submitted.exit.exitCode, 0) << submitted.output;
  EXPECT_TRUE(contains(submitted.output, kJobId)) << submitted.output;

  CtlResult listed = ctl(as("reader", readerSecret_), {"jobs", "list"});
  EXPECT_EQ(listed.exit.exitCode, 0) << listed.output;
  EXPECT_TRUE(contains(listed.output, kJobId)) << listed.output;

  CtlResult refused = ctl(as("reader", readerSecret_), {"jobs", "cancel", kJobId});
  EXPECT_EQ(refused.exit.exitCode, 4) << refused.output;
  EXPECT_TRUE(contains(refused.output, "DispatcherGateway.cancelJob needs role admin; this "
                                       "connection holds reader"))
      << refused.output;
  CtlResult readerSubmit = ctl(as("reader", readerSecret_), {"jobs", "submit", jobFile()});
  EXPECT_EQ(readerSubmit.exit.exitCode, 4) << readerSubmit.output;
  EXPECT_TRUE(contains(readerSubmit.output, "needs role admin")) << readerSubmit.output;
  CtlResult readerFailover = ctl(as("reader", readerSecret_), {"failover"});
  EXPECT_NE(readerFailover.exit.exitCode, 0) << readerFailover.output;
  EXPECT_TRUE(contains(readerFailover.output, "needs role admin")) << readerFailover.output;

  // The credential from the environment (REGENT_* mapping), as scripts would pass it.
  {
    ProcessOptions options;
    options.argv = {REGENT_BIN_DIR "/regentctl"};
    options.argv.insert(options.argv.end(), ctlArgs_.begin(), ctlArgs_.end());
    options.argv.insert(options.argv.end(), {"--timeout", "30s", "jobs", "list"});
    options.env = {"REGENT_RPC_CREDENTIAL_ROLE=reader",
                   "REGENT_RPC_CREDENTIAL_SECRET_FILE=" + readerSecret_};
    options.outputPath = dir_.path() + "/env-credential.log";
    auto process = ProcessHarness::start(options);
    ASSERT_OK(process);
    auto exit = process.value()->waitForExit(Duration(90000));
    ASSERT_TRUE(exit) << process.value()->output();
    EXPECT_EQ(exit->exitCode, 0) << process.value()->output();
    EXPECT_TRUE(contains(process.value()->output(), kJobId)) << process.value()->output();
  }

  CtlResult anonymous = ctl({}, {"jobs", "list"});
  EXPECT_EQ(anonymous.exit.exitCode, 4) << anonymous.output;
  EXPECT_TRUE(contains(anonymous.output, "needs an authenticated connection")) << anonymous.output;
  EXPECT_TRUE(contains(anonymous.output, "rpc.credential.role")) << anonymous.output;

  CtlResult wrong = ctl(as("admin", readerSecret_), {"jobs", "list"});
  EXPECT_EQ(wrong.exit.exitCode, 4) << wrong.output;
  EXPECT_TRUE(contains(wrong.output, "authentication as admin refused")) << wrong.output;

  // The refused failover moved nothing: the first term still leads.
  EXPECT_EQ(cluster_->highestEpoch(), epoch_);
  const std::string log = cluster_->process(0).output();
  EXPECT_TRUE(contains(log, "authentication required (shared secret:")) << log;
  EXPECT_TRUE(contains(log, "authentication of 127.0.0.1:")) << log;
  EXPECT_FALSE(contains(log, "admin-secret-0123456789")) << "a secret in the log";
}

struct Finished {
  ProcessExit exit;
  std::string output;
};

std::vector<std::string> standaloneMaster(const std::string& dir, const std::string& bind) {
  return {REGENT_BIN_DIR "/regent-master", "--set", "ha.mode=standalone",
          "--set", "ha.standalone.epoch-file=" + dir + "/epoch",
          "--set", "store.rocksdb.path=" + dir + "/store",
          "--set", "rpc.bind=" + bind,
          "--set", "http.bind=127.0.0.1:0"};
}

TEST(RpcAuthBind, AMasterBoundBeyondLoopbackWithoutAuthenticationRefusesToStartNamingTheOptions) {
  TempDir dir("rpc-auth-bind");
  ProcessOptions options;
  options.argv = standaloneMaster(dir.path(), "0.0.0.0:0");
  options.outputPath = dir.path() + "/refused.log";
  auto process = ProcessHarness::start(options);
  ASSERT_OK(process);
  auto exit = process.value()->waitForExit(Duration(30000));
  ASSERT_TRUE(exit) << process.value()->output();
  const std::string output = process.value()->output();
  EXPECT_EQ(exit->exitCode, 2) << output;
  EXPECT_TRUE(contains(output, "rpc.bind 0.0.0.0:0 is reachable beyond this machine")) << output;
  EXPECT_TRUE(contains(output, "rpc.auth-secret.admin-file")) << output;
  EXPECT_TRUE(contains(output, "rpc.auth: none")) << output;
  EXPECT_TRUE(contains(output, "master exiting")) << output;
  EXPECT_FALSE(contains(output, "rpc listening")) << output;
}

TEST(RpcAuthBind, WithRpcAuthNoneItStartsAndWarnsThatEveryPeerIsAdmin) {
  TempDir dir("rpc-auth-none");
  ProcessOptions options;
  options.argv = standaloneMaster(dir.path(), "0.0.0.0:0");
  options.argv.insert(options.argv.end(), {"--set", "rpc.auth=none"});
  options.outputPath = dir.path() + "/none.log";
  auto process = ProcessHarness::start(options);
  ASSERT_OK(process);
  ProcessHarness& master = *process.value();
  ASSERT_OK(master.waitForLine(std::regex("leader serving epoch="), Duration(30000)));
  EXPECT_TRUE(contains(master.output(), "rpc.auth is none and rpc.bind 0.0.0.0:0 is reachable"))
      << master.output();
  EXPECT_TRUE(contains(master.output(), "authentication off")) << master.output();
  ASSERT_OK(master.terminate());
  auto exit = master.waitForExit(Duration(30000));
  ASSERT_TRUE(exit) << master.output();
  EXPECT_EQ(exit->exitCode, 0) << master.output();
}

}  // namespace
}  // namespace regent::testing

// TLS between real processes: a regent-master serving RPC with rpc.tls.* and mutual TLS, and
// regentctl reaching it with the same options, or refused without them; misconfigured TLS stops
// both at startup with the option and the path named.
#include <gtest/gtest.h>

#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "tests/fixtures/process_harness.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/fixtures/zookeeper_server.h"
#include "tests/integration/master_cluster_test_util.h"
#include "tests/rpc/tls_test_certs.h"

namespace regent::testing {
namespace {

using Kind = MasterEvent::Kind;
using rpc::testing::PemPair;
using rpc::testing::TestCa;
using rpc::testing::writeTextFile;

constexpr Duration kTimeout{60000};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class RegentctlTls : public ::testing::Test {
 protected:
  RegentctlTls() : dir_("regentctl-tls"), ca_("regent itest CA") {
    writeTextFile(path("ca.pem"), ca_.certificatePem());
    // Masters advertise 127.0.0.1:<port>: regentctl checks that name.
    writePair("master", ca_.issue("master", "DNS:127.0.0.1,IP:127.0.0.1"));
    writePair("regentctl", ca_.issue("regentctl", ""));
  }

  std::string path(const std::string& name) const { return dir_.path() + "/" + name; }
  void writePair(const std::string& name, const PemPair& pair) const {
    writeTextFile(path(name + ".pem"), pair.certificate);
    writeTextFile(path(name + ".key"), pair.privateKey);
  }

  std::vector<std::string> masterTls() const {
    return {"rpc.tls.cert=" + path("master.pem"), "rpc.tls.key=" + path("master.key"),
            "rpc.tls.ca=" + path("ca.pem"), "rpc.tls.verify-clients=true"};
  }

  void startMaster(const std::string& name) {
    auto server = sharedZooKeeperServer();
    ASSERT_OK(server);
    const std::string clusterId = uniqueClusterId(name);
    std::vector<std::string> set = {"rpc.advertised-address="};
    for (const auto& option : masterTls()) set.push_back(option);
    cluster_ = std::make_unique<MasterCluster>(MasterClusterOptions{
        .quorum = server.value()->connectString(), .clusterId = clusterId, .extraSet = set});
    ASSERT_OK(cluster_->startMasters(1));
    auto serving = cluster_->waitForEvent(
        0, [](const MasterEvent& e) { return e.kind == Kind::kServing; }, kTimeout);
    ASSERT_OK(serving);
    ctlArgs_ = {"--zk",         server.value()->connectString(),
                "--cluster-id", clusterId,
                "--set",        "rpc.call-timeout=2s"};
  }

  CtlResult ctl(const std::vector<std::string>& args) {
    return regentctlChecked(dir_.path(), ctlArgs_, args);
  }

  TempDir dir_;
  TestCa ca_;
  std::unique_ptr<MasterCluster> cluster_;
  std::vector<std::string> ctlArgs_;
};

TEST_F(RegentctlTls, RegentctlWithTheCaAndACertificateIsServedOthersAreRefused) {
  startMaster("tls");
  if (HasFatalFailure()) return;
  auto served = ctl({"--timeout", "60s", "--set", "rpc.tls.ca=" + path("ca.pem"), "--set",
                     "rpc.tls.cert=" + path("regentctl.pem"), "--set",
                     "rpc.tls.key=" + path("regentctl.key"), "jobs", "list"});
  EXPECT_EQ(served.exit.exitCode, 0) << served.output;

  // Plain TCP, and TLS without a client certificate: refused until --timeout.
  auto plain = ctl({"--timeout", "3s", "jobs", "list"});
  EXPECT_NE(plain.exit.exitCode, 0) << plain.output;
  EXPECT_TRUE(contains(plain.output, "gave up")) << plain.output;
  auto anonymous =
      ctl({"--timeout", "3s", "--set", "rpc.tls.ca=" + path("ca.pem"), "jobs", "list"});
  EXPECT_NE(anonymous.exit.exitCode, 0) << anonymous.output;

  auto refusal = cluster_->process(0).waitForLine(
      std::regex("peer did not return a certificate"), kTimeout);
  EXPECT_TRUE(refusal.ok()) << cluster_->process(0).output();
  // The master kept serving after refusing them.
  auto again = ctl({"--timeout", "60s", "--set", "rpc.tls.ca=" + path("ca.pem"), "--set",
                    "rpc.tls.cert=" + path("regentctl.pem"), "--set",
                    "rpc.tls.key=" + path("regentctl.key"), "jobs", "list"});
  EXPECT_EQ(again.exit.exitCode, 0) << again.output;
}

TEST_F(RegentctlTls, MisconfiguredTlsStopsBothAtStartupNamingTheOption) {
  const std::string missing = path("missing.pem");
  ProcessOptions options;
  options.argv = {REGENT_BIN_DIR "/regent-master",
                  "--set",
                  "ha.mode=standalone",
                  "--set",
                  "ha.standalone.epoch-file=" + path("epoch"),
                  "--set",
                  "rpc.bind=127.0.0.1:0",  // Loopback: no authentication needed to start.
                  "--set",
                  "rpc.tls.cert=" + missing,
                  "--set",
                  "rpc.tls.key=" + path("master.key")};
  options.outputPath = path("master.log");
  auto master = ProcessHarness::start(options);
  ASSERT_OK(master);
  auto exit = master.value()->waitForExit(Duration(30000));
  ASSERT_TRUE(exit.has_value()) << master.value()->output();
  EXPECT_NE(exit->exitCode, 0);
  EXPECT_TRUE(contains(master.value()->output(),
                       "rpc.tls.cert: cannot read " + missing + ": No such file or directory"))
      << master.value()->output();

  auto halfPair =
      runRegentctl(dir_.path(), {"--set", "rpc.tls.cert=" + path("regentctl.pem"), "jobs", "list"});
  ASSERT_OK(halfPair);
  EXPECT_EQ(halfPair.value().exit.exitCode, 2) << halfPair.value().output;
  EXPECT_TRUE(
      contains(halfPair.value().output, "rpc.tls.cert and rpc.tls.key must be set together"))
      << halfPair.value().output;

  auto missingCa = runRegentctl(dir_.path(), {"--set", "rpc.tls.ca=" + missing, "jobs", "list"});
  ASSERT_OK(missingCa);
  EXPECT_EQ(missingCa.value().exit.exitCode, 2) << missingCa.value().output;
  EXPECT_TRUE(contains(missingCa.value().output, "rpc.tls.ca: cannot read " + missing))
      << missingCa.value().output;
}

}  // namespace
}  // namespace regent::testing

// The one fixture base of the regentctl itests (regentctl_*_itest.cc): a temporary directory
// that holds regentctl's output, a loop for the test's own RPC and HTTP calls, a cluster of its
// own on the shared ZooKeeper server with masters that serve it, and regentctl run against that
// cluster. Each fixture adds only what its tests need beyond that.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "common/event_loop.h"
#include "tests/fixtures/process_harness.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/fixtures/zookeeper_server.h"
#include "tests/integration/master_cluster_test_util.h"

namespace regent::testing {

// How long a regentctl test waits for a master's line or event.
constexpr Duration kCtlWait{60000};

// What regentctl is given beside --zk and --cluster-id by the fixtures that run jobs: a bound of
// its own far above any call, and calls that time out soon enough to be retried within it.
inline const std::vector<std::string> kCtlPatience = {"--timeout", "60s", "--set",
                                                      "rpc.call-timeout=2s"};

// `base` followed by `more`.
inline std::vector<std::string> withArgs(std::vector<std::string> base,
                                         const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

class RegentctlTest : public ::testing::Test {
 protected:
  // `dirName` names the temporary directory (under the system's temporary directory).
  explicit RegentctlTest(const std::string& dirName = "regentctl") : dir_(dirName) {}
  ~RegentctlTest() noexcept override = default;

  // A cluster id of its own, uniqueClusterId(`name`), on the shared ZooKeeper server: ctl() runs
  // regentctl with --zk and --cluster-id for it, then `ctlExtra`.
  void useCluster(const std::string& name, const std::vector<std::string>& ctlExtra = {}) {
    auto server = sharedZooKeeperServer();
    ASSERT_OK(server);
    quorum_ = server.value()->connectString();
    clusterId_ = uniqueClusterId(name);
    ctlArgs_ = withArgs({"--zk", quorum_, "--cluster-id", clusterId_}, ctlExtra);
  }

  // `masters` masters of the cluster useCluster() chose, with `extraSet`, each started once the
  // one before it contends (so the first one's latch node is the lowest and it leads); waits
  // until the first serves, whose epoch is then epoch_.
  void startMasters(size_t masters, const std::vector<std::string>& extraSet = {}) {
    cluster_ = std::make_unique<MasterCluster>(
        MasterClusterOptions{.quorum = quorum_, .clusterId = clusterId_, .extraSet = extraSet});
    ASSERT_OK(cluster_->startMasters(masters));
    auto serving = cluster_->waitForEvent(
        0, [](const MasterEvent& e) { return e.kind == MasterEvent::Kind::kServing; }, kCtlWait);
    ASSERT_OK(serving);
    epoch_ = serving.value().epoch;
  }

  // useCluster(`name`, `ctlExtra`), then startMasters(`masters`, `extraSet`).
  void startCluster(const std::string& name, size_t masters,
                    const std::vector<std::string>& extraSet = {},
                    const std::vector<std::string>& ctlExtra = {}) {
    ASSERT_NO_FATAL_FAILURE(useCluster(name, ctlExtra));
    ASSERT_NO_FATAL_FAILURE(startMasters(masters, extraSet));
  }

  // regentctl with ctlArgs_ and then `args` (regentctlChecked: bounded, a run that does not end
  // is a test failure).
  CtlResult ctl(const std::vector<std::string>& args) {
    return regentctlChecked(dir_.path(), ctlArgs_, args);
  }

  // Writes `text` to the file `name` in dir_; returns its path.
  std::string writeFile(const std::string& name, const std::string& text) {
    const std::string path = dir_.path() + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  // The address `process` listens on for `what` ("rpc" or "http"), from its "<what> listening
  // on ADDRESS advertised" line (waits for it); "" and a test failure without one.
  static std::string listenAddress(ProcessHarness& process, const std::string& what) {
    const std::regex pattern(what + " listening on (\\S+) advertised");
    auto line = process.waitForLine(pattern, kCtlWait);
    EXPECT_TRUE(line.ok()) << line.error().message;
    std::smatch match;
    if (!line.ok() || !std::regex_search(line.value(), match, pattern)) return "";
    return match[1];
  }

  TempDir dir_;
  EventLoop loop_;
  std::string quorum_;
  std::string clusterId_;
  std::vector<std::string> ctlArgs_;
  std::unique_ptr<MasterCluster> cluster_;
  uint64_t epoch_ = 0;
};

}  // namespace regent::testing

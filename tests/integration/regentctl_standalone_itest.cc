// regentctl against a standalone master (ha.mode standalone, no ZooKeeper): --master reaches it
// for jobs and failover; without --master (or --zk) regentctl refuses at once, naming both; the
// master's /v1/leader shows when it became leader.
#include <gtest/gtest.h>
#include <kj/compat/http.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "tests/fixtures/process_harness.h"
#include "tests/integration/http_get_test_util.h"
#include "tests/integration/master_cluster_test_util.h"
#include "tests/integration/regentctl_test_util.h"

namespace regent::testing {
namespace {

constexpr const char* kJobId = "5e2d3b0f9c8e7d6f5a4b3c2d1e0f9a8b";

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class RegentctlStandalone : public RegentctlTest {
 protected:
  RegentctlStandalone() : RegentctlTest("regentctl-standalone") {
    ctlArgs_ = {"--set", "ha.mode=standalone", "--timeout", "60s"};
  }
  ~RegentctlStandalone() noexcept override = default;

  // One standalone master on loopback ports chosen by the system; waits until it serves.
  void startMaster() {
    ProcessOptions options;
    options.argv = {REGENT_BIN_DIR "/regent-master", "--set", "ha.mode=standalone",
                    "--set", "ha.standalone.epoch-file=" + dir_.path() + "/epoch",
                    "--set", "store.rocksdb.path=" + dir_.path() + "/store",
                    "--set", "rpc.bind=127.0.0.1:0", "--set", "http.bind=127.0.0.1:0"};
    options.outputPath = dir_.path() + "/master.log";
    startedAtMs_ = wallClockMillis();
    auto started = ProcessHarness::start(options);
    ASSERT_OK(started);
    master_ = std::move(started).value();
    rpcAddress_ = listenAddress(*master_, "rpc");
    httpAddress_ = listenAddress(*master_, "http");
    ASSERT_OK(master_->waitForLine(std::regex("leader serving epoch=1 "), kCtlWait));
  }

  // /v1/leader once it shows `epoch` SERVING with an election time (the master learns its
  // record through a watch of the file), as JSON.
  nlohmann::json servingView(uint64_t epoch) {
    const HttpReply reply =
        httpGetUntil(loop_, table_, httpAddress_, "/v1/leader", [epoch](const HttpReply& got) {
          const auto view = nlohmann::json::parse(got.body, nullptr, false);
          return got.status == 200 && view.is_object() && view.value("epoch", 0u) == epoch &&
                 view.value("status", "") == "SERVING" && view.value("elected_at_ms", 0) != 0;
        });
    return nlohmann::json::parse(reply.body, nullptr, false);
  }

  kj::HttpHeaderTable table_;
  std::unique_ptr<ProcessHarness> master_;
  std::string rpcAddress_;
  std::string httpAddress_;
  int64_t startedAtMs_ = 0;
};

TEST_F(RegentctlStandalone, MasterOptionSubmitsAndListsJobsOfAStandaloneMaster) {
  ASSERT_NO_FATAL_FAILURE(startMaster());
  const std::string path = dir_.path() + "/job.yaml";
  std::ofstream(path) << "job_id: " << kJobId
                      << "\nname: alone\nvertices:\n  - name: work\n    parallelism: 1\n"
                         "    command:\n      argv: [sleep, \"1\"]\n";

  CtlResult submitted = ctl({"--master", rpcAddress_, "jobs", "submit", path});
  ASSERT_EQ(submitted.exit.exitCode, 0) << submitted.output;
  EXPECT_EQ(submitted.output, std::string(kJobId) + "\n");

  // The option works from the configuration too (cli.master).
  CtlResult list = ctl({"--set", "cli.master=" + rpcAddress_, "--json", "jobs", "list"});
  ASSERT_EQ(list.exit.exitCode, 0) << list.output;
  auto lines = jsonLines(list.output);
  ASSERT_EQ(lines.size(), 1u) << list.output;
  auto job = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(job.at("job_id"), kJobId);
  EXPECT_EQ(job.at("name"), "alone");

  // Refusals keep their exit code through --master.
  CtlResult unknown =
      ctl({"--master", rpcAddress_, "jobs", "status", "00000000000000000000000000000001"});
  EXPECT_EQ(unknown.exit.exitCode, 4) << unknown.output;
}

TEST_F(RegentctlStandalone, WithoutZooKeeperOrAMasterAddressItRefusesAtOnceNamingBoth) {
  // --timeout is far above the run's own bound: only refusing at once ends it in time.
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"jobs", "list"}, std::vector<std::string>{"failover"}}) {
    std::vector<std::string> args = {"--set", "ha.mode=standalone", "--timeout", "1h"};
    args.insert(args.end(), command.begin(), command.end());
    auto run = runRegentctl(dir_.path(), args, Duration(30000));
    ASSERT_OK(run);
    EXPECT_EQ(run.value().exit.exitCode, 2) << run.value().output;
    EXPECT_TRUE(contains(run.value().output, "--master HOST:PORT (cli.master)"))
        << run.value().output;
    EXPECT_TRUE(contains(run.value().output, "--zk HOST:PORT,... (ha.zookeeper.quorum)"))
        << run.value().output;
  }
}

TEST_F(RegentctlStandalone, LeaderViewShowsWhenTheMasterBecameLeaderAndFailoverMovesIt) {
  ASSERT_NO_FATAL_FAILURE(startMaster());
  nlohmann::json first = servingView(1);
  const int64_t electedAt = first.value("elected_at_ms", int64_t(0));
  EXPECT_GE(electedAt, startedAtMs_) << first.dump();
  EXPECT_LE(electedAt, wallClockMillis()) << first.dump();

  // failover through --master: the standalone master hands over and takes the next epoch;
  // no other master took over, which regentctl says (exit 4) after printing the term change.
  CtlResult moved = ctl({"--master", rpcAddress_, "--json", "failover"});
  ASSERT_EQ(moved.exit.exitCode, 4) << moved.output << master_->outputTail();
  EXPECT_NE(moved.output.find("failover: no other master took over"), std::string::npos)
      << moved.output;
  auto lines = jsonLines(moved.output);
  ASSERT_EQ(lines.size(), 1u) << moved.output;
  auto change = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(change.at("old_epoch"), 1u) << lines[0];
  EXPECT_EQ(change.at("new_epoch"), 2u) << lines[0];
  EXPECT_EQ(change.at("new_master_id"), change.at("old_master_id")) << lines[0];

  nlohmann::json second = servingView(2);
  EXPECT_GE(second.value("elected_at_ms", int64_t(0)), electedAt) << second.dump();
  EXPECT_EQ(second.at("master_id"), first.at("master_id"));
}

}  // namespace
}  // namespace regent::testing

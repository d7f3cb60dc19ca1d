// regentctl's jobs commands and failover run as processes against real masters over RPC: submit a
// YAML file, list, status, cancel; an invalid file is refused before anything is submitted;
// failover moves the leadership and the jobs stay listed; submit follows a SIGKILLed leader.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "tests/integration/master_cluster_test_util.h"
#include "tests/integration/regentctl_test_util.h"

namespace regent::testing {
namespace {

using Kind = MasterEvent::Kind;

// A fixed job id, so the test knows it before submitting.
constexpr const char* kJobId = "4f1c2a9e8b7d6c5e4f3a2b1c0d9e8f7a";

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class RegentctlJobs : public RegentctlTest {
 protected:
  RegentctlJobs() : RegentctlTest("regentctl-jobs") {}

  // Two masters advertising their real RPC port; waits until the first one serves.
  void startCluster(const std::string& name) {
    RegentctlTest::startCluster(name, 2, {"rpc.advertised-address="}, kCtlPatience);
  }

  std::string jobFile(const std::string& name) {
    return writeFile(name + ".yaml", std::string("job_id: ") + kJobId + "\nname: " + name +
                                         "\nvertices:\n"
                                         "  - name: work\n"
                                         "    parallelism: 2\n"
                                         "    command:\n"
                                         "      argv: [sleep, \"1\"]\n");
  }

  // Job id -> state from `jobs list --json`.
  std::map<std::string, std::string> listJobs() {
    CtlResult list = ctl({"--json", "jobs", "list"});
    EXPECT_EQ(list.exit.exitCode, 0) << list.output;
    std::map<std::string, std::string> jobs;
    for (const auto& line : jsonLines(list.output)) {
      auto job = nlohmann::json::parse(line);
      jobs[job.at("job_id").get<std::string>()] = job.at("state").get<std::string>();
    }
    return jobs;
  }
};

TEST_F(RegentctlJobs, SubmitsAYamlFileThenListsShowsAndCancelsTheJob) {
  ASSERT_NO_FATAL_FAILURE(startCluster("ctl-jobs"));
  const std::string path = jobFile("wordcount");

  CtlResult submitted = ctl({"jobs", "submit", path});
  ASSERT_EQ(submitted.exit.exitCode, 0) << submitted.output;
  EXPECT_EQ(submitted.output, std::string(kJobId) + "\n");

  CtlResult table = ctl({"jobs", "list"});
  ASSERT_EQ(table.exit.exitCode, 0) << table.output;
  EXPECT_TRUE(std::regex_search(table.output,
                                std::regex("JOB ID +NAME +STATE +SUBMITTED\n" +
                                           std::string(kJobId) + "  wordcount  CREATED  20")))
      << table.output;

  CtlResult status = ctl({"jobs", "status", kJobId});
  ASSERT_EQ(status.exit.exitCode, 0) << status.output;
  EXPECT_TRUE(std::regex_search(status.output, std::regex("state: +CREATED\n"))) << status.output;
  EXPECT_TRUE(std::regex_search(status.output, std::regex("vertex work: parallelism 2")))
      << status.output;

  CtlResult canceled = ctl({"jobs", "cancel", kJobId});
  ASSERT_EQ(canceled.exit.exitCode, 0) << canceled.output;
  EXPECT_EQ(canceled.output, std::string("canceled ") + kJobId + "\n");

  CtlResult after = ctl({"--json", "jobs", "status", kJobId});
  ASSERT_EQ(after.exit.exitCode, 0) << after.output;
  auto lines = jsonLines(after.output);
  ASSERT_EQ(lines.size(), 1u) << after.output;
  auto json = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(json.at("state"), "CANCELED") << lines[0];
  EXPECT_EQ(json.at("name"), "wordcount") << lines[0];
  EXPECT_EQ(listJobs(), (std::map<std::string, std::string>{{kJobId, "CANCELED"}}));

  // An unknown job is refused (4); a malformed id is bad usage (2).
  CtlResult unknown = ctl({"jobs", "status", "00000000000000000000000000000001"});
  EXPECT_EQ(unknown.exit.exitCode, 4) << unknown.output;
  CtlResult malformed = ctl({"jobs", "cancel", "not-an-id"});
  EXPECT_EQ(malformed.exit.exitCode, 2) << malformed.output;
  EXPECT_TRUE(contains(malformed.output, "job id \"not-an-id\"")) << malformed.output;
}

TEST_F(RegentctlJobs, AnInvalidFileIsRefusedNamingTheFieldAndNothingIsSubmitted) {
  ASSERT_NO_FATAL_FAILURE(startCluster("ctl-jobs-invalid"));
  const std::string zero = writeFile("zero.yaml",
                                     "name: broken\n"
                                     "vertices:\n"
                                     "  - name: work\n"
                                     "    parallelism: 0\n"
                                     "    command:\n"
                                     "      argv: [true]\n");
  CtlResult refused = ctl({"jobs", "submit", zero});
  EXPECT_EQ(refused.exit.exitCode, 4) << refused.output;
  EXPECT_TRUE(contains(refused.output, "regentctl: " + zero + ": vertices[0].parallelism: "))
      << refused.output;

  const std::string typo = writeFile("typo.json",
                                     R"({"name": "broken", "vertices": [{"name": "work",)"
                                     R"( "command": {"argvv": ["true"]}}]})");
  CtlResult unknownKey = ctl({"jobs", "submit", typo});
  EXPECT_EQ(unknownKey.exit.exitCode, 4) << unknownKey.output;
  EXPECT_TRUE(contains(unknownKey.output, "vertices[0].command.argvv")) << unknownKey.output;

  CtlResult missing = ctl({"jobs", "submit", dir_.path() + "/missing.yaml"});
  EXPECT_EQ(missing.exit.exitCode, 2) << missing.output;

  EXPECT_TRUE(listJobs().empty());
  CtlResult table = ctl({"jobs", "list"});
  EXPECT_EQ(table.exit.exitCode, 0) << table.output;
  EXPECT_TRUE(contains(table.output, "no jobs in cluster")) << table.output;
}

TEST_F(RegentctlJobs, FailoverMovesTheLeadershipAndTheJobsStayListed) {
  ASSERT_NO_FATAL_FAILURE(startCluster("ctl-failover"));
  CtlResult submitted = ctl({"jobs", "submit", jobFile("survivor")});
  ASSERT_EQ(submitted.exit.exitCode, 0) << submitted.output;

  CtlResult failover = ctl({"failover"});
  ASSERT_EQ(failover.exit.exitCode, 0) << failover.output << cluster_->describe();
  const std::string expected = "leader " + cluster_->masterId(0) + " (epoch " +
                               std::to_string(epoch_) + ") -> " + cluster_->masterId(1) +
                               " (epoch " + std::to_string(epoch_ + 1) + ")\n";
  EXPECT_EQ(failover.output, expected);
  ASSERT_OK(cluster_->waitForGrant(epoch_ + 1, kCtlWait));
  // Moved by the hand-over, not by a session expiry: the old leader says why its term ended, and
  // it is still running and contending again.
  auto revoked = cluster_->waitForEvent(
      0, [&](const MasterEvent& e) { return e.kind == Kind::kRevoked && e.epoch == epoch_; },
      kCtlWait);
  ASSERT_OK(revoked);
  EXPECT_EQ(revoked.value().reason, "handed over");
  EXPECT_TRUE(cluster_->process(0).running()) << cluster_->describe();

  // The new leader lists the job once its Dispatcher recovered (regentctl retries meanwhile).
  EXPECT_EQ(listJobs(), (std::map<std::string, std::string>{{kJobId, "CREATED"}}));

  CtlResult json = ctl({"--json", "failover"});
  ASSERT_EQ(json.exit.exitCode, 0) << json.output;
  auto lines = jsonLines(json.output);
  ASSERT_EQ(lines.size(), 1u) << json.output;
  auto moved = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(moved.at("old_epoch"), epoch_ + 1) << lines[0];
  EXPECT_GT(moved.at("new_epoch").get<uint64_t>(), epoch_ + 1) << lines[0];
}

TEST_F(RegentctlJobs, SubmitFollowsTheLeadershipThroughASigkillOfTheLeader) {
  ASSERT_NO_FATAL_FAILURE(startCluster("ctl-jobs-kill"));
  ASSERT_OK(cluster_->kill(0));
  // The leader record still names the dead master until its session expires: regentctl keeps
  // re-reading it until the standby leads and serves.
  CtlResult submitted = ctl({"jobs", "submit", jobFile("after-kill")});
  ASSERT_EQ(submitted.exit.exitCode, 0) << submitted.output << cluster_->describe();
  EXPECT_TRUE(contains(submitted.output, std::string(kJobId) + "\n")) << submitted.output;
  EXPECT_EQ(cluster_->currentLeader(), std::optional<size_t>(1));
  EXPECT_EQ(listJobs(), (std::map<std::string, std::string>{{kJobId, "CREATED"}}));
}

}  // namespace
}  // namespace regent::testing

// The master runs a submitted job on a real worker, end to end: one regent-master, one
// regent-worker, `regentctl jobs submit` of one vertex of two subtasks running `true`. The
// master logs `job ended ... state=FINISHED` (result stored clean, JobGraph removed, in one
// transaction), then `job clean` (attempts released, slots freed); `regentctl jobs status` then
// says FINISHED, still with its subtasks (their final attempts and output addresses), and the
// worker's slots are free again. The full scenarios (DAGs, restarts, cancel,
// lost workers, logs) are in the jobs itests.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "common/ids.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/fixtures/zookeeper_server.h"
#include "tests/integration/master_cluster_test_util.h"
#include "tests/integration/worker_cluster_test_util.h"

namespace regent::testing {
namespace {

// Generous bounds for ASan builds on shared cores; none is a claim about speed.
constexpr Duration kStartTimeout{60000};
constexpr Duration kJobTimeout{60000};

TEST(MasterRunsJobs, ASubmittedOneVertexJobRunsOnAWorkerToFinishedAndIsCleanedUp) {
  auto server = sharedZooKeeperServer();
  ASSERT_OK(server);
  const std::string quorum = server.value()->connectString();
  const std::string clusterId = uniqueClusterId("master-runs-jobs");
  MasterCluster masters(workerTestMasters(quorum, clusterId));
  WorkerCluster workers(workerTestWorkers(quorum, clusterId));
  Regentctl regentctl(quorum, clusterId);

  ASSERT_OK(masters.startMasters(1));
  auto leader = masters.waitForGrant(1, kStartTimeout);
  ASSERT_OK(leader);
  auto epoch = waitForServing(masters, leader.value(), kStartTimeout);
  ASSERT_OK(epoch);
  ASSERT_OK(workers.startWorkers(1));
  // Tasks run as worker.task-user (nobody) when the tests run as root: let it through the
  // private directory holding the worker's data directory to its attempt's directory.
  const std::string& dataDir = workers.dataDir(0);
  ::chmod(dataDir.substr(0, dataDir.rfind('/')).c_str(), 0711);
  ASSERT_OK(workers.waitForRegistered(0, epoch.value(), kStartTimeout));

  TempDir dir("master-runs-jobs");
  const JobId job = JobId::random();
  const std::string file = dir.path() + "/job.yaml";
  std::ofstream(file) << "job_id: " << job.toHex() << "\nname: smoke\nvertices:\n"
                      << "  - name: work\n    parallelism: 2\n    command:\n      argv: [true]\n";
  auto submitted = regentctl.run({"jobs", "submit", file});
  ASSERT_OK(submitted);
  ASSERT_EQ(submitted.value().exit.exitCode, 0) << submitted.value().output;

  ProcessHarness& master = masters.process(leader.value());
  auto ended = master.waitForLine(
      std::regex("job ended epoch=" + std::to_string(epoch.value()) + " job=" + job.toHex() +
                 " state=FINISHED restarts=0 "),
      kJobTimeout);
  ASSERT_TRUE(ended.ok()) << ended.error().message << "\n" << master.outputTail();
  auto clean = master.waitForLine(
      std::regex("job clean epoch=" + std::to_string(epoch.value()) + " job=" + job.toHex() +
                 " state=FINISHED "),
      kJobTimeout);
  ASSERT_TRUE(clean.ok()) << clean.error().message << "\n" << master.outputTail();
  // Both subtasks ran: two attempts deployed and finished.
  const std::string output = master.output();
  const std::regex finished("attempt state epoch=\\d+ job=" + job.toHex() +
                            " vertex=work subtask=\\d attempt=[0-9a-f]+ state=FINISHED");
  EXPECT_EQ(std::distance(std::sregex_iterator(output.begin(), output.end(), finished),
                          std::sregex_iterator()),
            2)
      << master.outputTail();

  auto status = regentctl.run({"jobs", "status", job.toHex()});
  ASSERT_OK(status);
  EXPECT_NE(status.value().output.find("FINISHED"), std::string::npos) << status.value().output;
  // The ended job keeps its subtasks: their final attempts and where their output is.
  auto json = regentctl.run({"jobs", "status", job.toHex(), "--json"});
  ASSERT_OK(json);
  const auto detail = nlohmann::json::parse(json.value().output, nullptr, false);
  ASSERT_FALSE(detail.is_discarded()) << json.value().output;
  ASSERT_EQ(detail["vertices"].size(), 1u) << json.value().output;
  ASSERT_EQ(detail["vertices"][0]["subtasks"].size(), 2u) << json.value().output;
  for (const auto& subtask : detail["vertices"][0]["subtasks"]) {
    EXPECT_EQ(subtask["attempt"]["state"], "FINISHED") << json.value().output;
    EXPECT_FALSE(subtask["http_address"].get<std::string>().empty()) << json.value().output;
  }
  auto table = regentctl.waitForTable(
      [](const SlotTable& t) { return !t.empty() && countState(t, "FREE") == t.size(); },
      kJobTimeout);
  EXPECT_OK(table);
}

}  // namespace
}  // namespace regent::testing

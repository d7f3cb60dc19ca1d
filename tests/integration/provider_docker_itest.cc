// The docker provider (resourcemanager.provider: docker) behind real masters: a provider error
// is the waiting job's reason, naming the option, and the masters keep serving. Against a real
// Docker daemon (tests/fixtures/docker_daemon.h, in a network namespace of its own): its worker
// containers could not reach this test's ZooKeeper and masters on the machine's loopback, so
// what runs whole jobs on started containers is `scripts/compose-demo.sh --provider docker`
// (docs/docker.md); the provider's own contract is docker_worker_provider_contract_test.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tests/fixtures/docker_daemon.h"
#include "tests/integration/job_cluster_test_util.h"

namespace regent::testing {
namespace {

TEST(DockerProvider, AMissingImageIsTheWaitingJobsReasonNamingTheOption) {
  std::string whyNot;
  auto daemon = DockerDaemon::start(&whyNot);
  if (!daemon) {
    if (dockerRequired()) FAIL() << "no docker daemon: " << whyNot;
    GTEST_SKIP() << "skipped: no docker daemon (" << whyNot << ")";
  }
  auto made =
      JobCluster::start("provider-docker-image",
                        {.masters = 1,
                         .workers = 0,
                         .masterConfig = "resourcemanager.provider: docker\n"
                                         "resourcemanager.docker.socket: " +
                                         daemon->socket() +
                                         "\n"
                                         "resourcemanager.docker.image: regent-no-such-image:1\n"
                                         "resourcemanager.docker.network: none\n"
                                         "worker.slots: 4\n"
                                         "worker.slot-cpu: 1\n"
                                         "worker.slot-memory: 256MiB\n"});
  ASSERT_OK(made);
  JobCluster& cluster = *made.value();
  auto job = cluster.submit(
      "name: imageless\nvertices:\n  - name: v\n    parallelism: 2\n    command:\n"
      "      argv: [/bin/true]\n    resources: {cpu: 0.5, memory: 64MiB}\n");
  ASSERT_OK(job);
  auto waiting = cluster.waitForStatus(
      job.value(),
      [](const nlohmann::json& status) {
        return textField(status, "waiting_reason")
                   .find(
                       "the last worker start failed (docker: image regent-no-such-image:1 "
                       "not found (resourcemanager.docker.image)") != std::string::npos;
      },
      kJobsTimeout);
  ASSERT_OK(waiting);
  // Nothing was created, and the master still answers.
  std::string containers;
  EXPECT_EQ(daemon->docker({"ps", "-a", "-q"}, &containers), 0);
  EXPECT_EQ(containers, "");
  auto metrics = cluster.masterMetrics();
  ASSERT_OK(metrics);
  EXPECT_NE(metrics.value().find("regent_workers_start_failures_total"), std::string::npos);
}

}  // namespace
}  // namespace regent::testing

// With ha.zookeeper.auth a master checks, before it contends, that the cluster's nodes that exist
// already carry the ACL it would have given them (docs/security.md, "Chain of trust"), against a
// real ZooKeeper and real masters:
// - a cluster root created open before the first master (by anyone, or by a run without ACLs)
//   makes the master exit 2, naming the root, the ACL found and the one it must have, and it
//   never contends;
// - so does an open node below a root the masters created (a job graph written without ACLs);
// - a cluster the masters created themselves keeps working: a second master, with or without the
//   read credential, and a restart of the first start and contend;
// - a worker, which does not know the masters' identity, warns about a cluster root anyone may
//   write (it still starts: what protects it is its refusal of masters that do not prove
//   themselves).
#include <gtest/gtest.h>

#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "tests/fixtures/process_harness.h"
#include "tests/fixtures/zookeeper_server.h"
#include "tests/fixtures/zookeeper_test_client.h"
#include "tests/integration/master_cluster_test_util.h"
#include "tests/integration/worker_cluster_test_util.h"

namespace regent::testing {
namespace {

// Bounds for slow sanitized builds on shared cores; none is a claim about speed.
constexpr Duration kTimeout{60000};
constexpr const char* kMastersZooKeeper = "regent:master-secret";
constexpr const char* kReadersZooKeeper = "viewer:viewer-secret";

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class MasterZooKeeperAcl : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = sharedZooKeeperServer();
    ASSERT_OK(server);
    quorum_ = server.value()->connectString();
    clusterId_ = uniqueClusterId("zkacl");
  }

  std::string rootPath() const { return "/regent/" + clusterId_; }

  // Masters with the ZooKeeper ACL credentials (no RPC authentication: the check is about
  // ZooKeeper alone).
  MasterCluster& masters() {
    if (!masters_) {
      MasterClusterOptions options = workerTestMasters(quorum_, clusterId_);
      options.extraSet.push_back(std::string("ha.zookeeper.auth=") + kMastersZooKeeper);
      masters_ = std::make_unique<MasterCluster>(std::move(options));
    }
    return *masters_;
  }

  // A ZooKeeper client holding `credential` (none when empty).
  std::unique_ptr<ZooKeeperTestClient> zooKeeperAs(const std::string& credential) {
    auto client = ZooKeeperTestClient::connectAs(quorum_, credential);
    EXPECT_OK(client);
    return client.ok() ? std::move(client).value() : nullptr;
  }

  // Waits for the slot's master to exit and checks it refused the open node `path`: exit 2, the
  // path, the open ACL and the fix named, and no contending.
  void expectRefusal(size_t slot, const std::string& path) {
    ProcessHarness& master = masters().process(slot);
    auto exit = master.waitForExit(kTimeout);
    ASSERT_TRUE(exit) << "the master did not exit\n" << master.output();
    const std::string output = master.output();
    EXPECT_TRUE(exit->exited() && exit->exitCode == 2) << exit->describe() << "\n" << output;
    EXPECT_TRUE(contains(output, "'" + path + "'")) << output;
    EXPECT_TRUE(contains(output, "world:anyone")) << output;
    EXPECT_TRUE(contains(output, "setAcl")) << output;
    EXPECT_FALSE(contains(output, "contending")) << output;
  }

  std::string quorum_;
  std::string clusterId_;
  std::unique_ptr<MasterCluster> masters_;
};

TEST_F(MasterZooKeeperAcl, AMasterRefusesAClusterRootThatAnyoneMayWrite) {
  // Created before the first master by a client without credentials (a task, or a run with ACLs
  // off): ZooKeeper gives it world:anyone with every permission.
  auto anyone = zooKeeperAs("");
  ASSERT_TRUE(anyone);
  ASSERT_OK(anyone->ensurePath(rootPath()));

  auto slot = masters().startMaster({std::string("ha.zookeeper.read-auth=") + kReadersZooKeeper});
  ASSERT_OK(slot);
  expectRefusal(slot.value(), rootPath());

  // The master left the open root as it found it: it created no node under it. (A new client:
  // the first one's session may have expired unpumped while the master ran.)
  auto reader = zooKeeperAs("");
  ASSERT_TRUE(reader);
  auto children = reader->children(rootPath());
  ASSERT_OK(children);
  EXPECT_TRUE(children.value().empty());
}

TEST_F(MasterZooKeeperAcl, AWorkerWarnsAboutAClusterRootThatAnyoneMayWrite) {
  auto anyone = zooKeeperAs("");
  ASSERT_TRUE(anyone);
  ASSERT_OK(anyone->ensurePath(rootPath()));

  WorkerClusterOptions options = workerTestWorkers(quorum_, clusterId_);
  options.extraSet.push_back(std::string("ha.zookeeper.read-auth=") + kReadersZooKeeper);
  WorkerCluster workers(std::move(options));
  auto slot = workers.startWorker();
  ASSERT_OK(slot);
  auto warning = workers.process(slot.value())
                     .waitForLine(std::regex("'" + rootPath() + "' has the ACL world:anyone:cdrwa"),
                                  kTimeout);
  EXPECT_OK(warning);
  EXPECT_TRUE(workers.process(slot.value()).running())
      << workers.process(slot.value()).output();
}

TEST_F(MasterZooKeeperAcl, AMasterRefusesAnOpenNodeBelowTheClusterRoot) {
  auto first = masters().startMaster();
  ASSERT_OK(first);
  ASSERT_OK(waitForServing(masters(), first.value(), kTimeout));
  ASSERT_OK(masters().kill(first.value()));

  // A job graph written open (by a run without ACLs, say): anyone could rewrite what a new
  // leader would recover and run.
  auto writer = zooKeeperAs(kMastersZooKeeper);
  ASSERT_TRUE(writer);
  const std::string jobGraph = rootPath() + "/jobgraphs/7b1c2a9e8b7d6c5e4f3a2b1c0d9e8f70";
  ASSERT_OK(writer->ensurePath(jobGraph));

  ASSERT_OK(masters().restart(first.value()));
  expectRefusal(first.value(), jobGraph);
}

TEST_F(MasterZooKeeperAcl, AClusterTheMastersCreatedStartsASecondMasterAndARestart) {
  auto first = masters().startMaster({std::string("ha.zookeeper.read-auth=") + kReadersZooKeeper});
  ASSERT_OK(first);
  ASSERT_OK(waitForServing(masters(), first.value(), kTimeout));

  // The nodes carry the read credential's entry: a master without it (or with another) accepts
  // them too.
  auto second = masters().startMaster();
  ASSERT_OK(second);
  ASSERT_OK(masters().waitForEvent(
      second.value(), [](const MasterEvent& e) { return e.kind == MasterEvent::Kind::kContending; },
      kTimeout));

  ASSERT_OK(masters().kill(first.value()));
  ASSERT_OK(waitForServing(masters(), second.value(), kTimeout));
  ASSERT_OK(masters().restart(first.value()));
  ASSERT_OK(masters().waitForEvent(
      first.value(), [](const MasterEvent& e) { return e.kind == MasterEvent::Kind::kContending; },
      kTimeout));
}

}  // namespace
}  // namespace regent::testing

// What regentctl and a real master do with bad job input and bad stored records: a FILE that is a
// directory or a device, a graph over rpc.max-message-size, a JobGraph record whose name is not
// valid UTF-8 stored before validation refused such names (listings keep working, CLI and HTTP),
// a corrupt JobGraph record (reported CORRUPT, never replaced by a submit, removed only by
// `jobs remove-corrupt`), and a failover with one master (no other master took over).
#include <gtest/gtest.h>
#include <kj/compat/http.h>
#include <kj/debug.h>

#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "common/ids.h"
#include "common/utf8.h"
#include "conf/config.h"
#include "ha/zookeeper_client.h"
#include "rpc/wire_ids.h"
#include "store/store_services.h"
#include "tests/fixtures/job_graph_test_util.h"
#include "tests/ha/zookeeper_client_test_util.h"
#include "tests/integration/http_get_test_util.h"
#include "tests/integration/master_cluster_test_util.h"
#include "tests/integration/regentctl_test_util.h"

namespace regent::testing {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class RegentctlJobsInput : public RegentctlTest {
 protected:
  RegentctlJobsInput() : RegentctlTest("regentctl-jobs-input") {}
  ~RegentctlJobsInput() noexcept override {
    stores_ = nullptr;
    if (services_.get() != nullptr) loop_.run(services_->close());
    services_ = nullptr;
    zk_ = nullptr;
  }

  // A cluster id of its own on the shared ZooKeeper server, and regentctl's arguments for it.
  void useCluster(const std::string& name) { RegentctlTest::useCluster(name, kCtlPatience); }

  // The cluster's stores, opened for a term fenced by a node of the test's own (as a leader
  // that wrote them before dying would have).
  store::LeaderStores& stores() {
    if (stores_) return *stores_;
    ConfigSources sources;
    sources.set = {"cluster-id=" + clusterId_, "ha.zookeeper.quorum=" + quorum_,
                   "store.backend=zookeeper"};
    auto config = loadConfig(sources);
    KJ_REQUIRE(config.ok(), config.error().message);
    zk_ = ha::connectForTests(loop_, ha::zooKeeperClientOptionsFrom(config.value()), kCtlWait);
    auto services = store::StoreServices::create(loop_, config.value(), zk_.get());
    KJ_REQUIRE(services.ok(), services.error().message);
    services_ = std::move(services).value();
    KJ_REQUIRE(loop_.run(zk_->ensurePath("earlier-leader-term")).ok());
    auto opened = loop_.run(services_->openTerm(store::StoreTerm{1, "earlier-leader-term"}));
    KJ_REQUIRE(opened.ok(), opened.error().message);
    stores_ = std::move(opened).value();
    return *stores_;
  }

  // One master advertising its real ports; waits until it serves.
  void startMaster() { startMasters(1, {"rpc.advertised-address="}); }

  std::string httpAddress() { return listenAddress(cluster_->process(0), "http"); }

  std::string jobFile(const std::string& name, const JobId& id, const std::string& extraArg = "") {
    return writeFile(name + ".yaml",
                     "job_id: " + id.toHex() + "\nname: " + name +
                         "\nvertices:\n  - name: work\n    command:\n      argv: [sleep, \"1\"" +
                         (extraArg.empty() ? "" : ", \"" + extraArg + "\"") + "]\n");
  }

  kj::Own<ha::ZooKeeperClient> zk_;
  kj::Own<store::StoreServices> services_;
  kj::Own<store::LeaderStores> stores_;
};

TEST_F(RegentctlJobsInput, SubmitRefusesADirectoryAndADeviceWithoutReadingThem) {
  ASSERT_NO_FATAL_FAILURE(useCluster("ctl-input-files"));
  // No master runs: the file is refused before anything connects.
  CtlResult directory = ctl({"jobs", "submit", dir_.path()});
  EXPECT_EQ(directory.exit.exitCode, 2) << directory.output;
  EXPECT_TRUE(contains(directory.output, dir_.path() + ": is a directory, not a JobGraph file"))
      << directory.output;

  CtlResult device = ctl({"jobs", "submit", "/dev/zero"});
  EXPECT_EQ(device.exit.exitCode, 2) << device.output;
  EXPECT_TRUE(contains(device.output, "/dev/zero: is not a regular file")) << device.output;

  CtlResult missing = ctl({"jobs", "submit", dir_.path() + "/nope.yaml"});
  EXPECT_EQ(missing.exit.exitCode, 2) << missing.output;
  EXPECT_TRUE(contains(missing.output, "nope.yaml: cannot open the file: No such file"))
      << missing.output;
}

TEST_F(RegentctlJobsInput, AGraphOverRpcMaxMessageSizeIsRefusedBeforeSendingAndNotRetried) {
  ASSERT_NO_FATAL_FAILURE(useCluster("ctl-input-large"));
  // A file below the limit whose graph, with the call around it, is above it.
  const std::string path = jobFile("large", JobId::random(), std::string(2000, 'x'));
  CtlResult graph = ctl({"--set", "rpc.max-message-size=2500", "jobs", "submit", path});
  EXPECT_EQ(graph.exit.exitCode, 4) << graph.output;
  EXPECT_TRUE(std::regex_search(graph.output,
                                std::regex("large.yaml: too large: the submitJob call for this "
                                           "JobGraph is [0-9]+ bytes, over rpc.max-message-size "
                                           "\\(2500B\\); nothing was sent")))
      << graph.output;

  // A file above the limit is not read past it.
  const std::string big = jobFile("big", JobId::random(), std::string(4000, 'x'));
  CtlResult file = ctl({"--set", "rpc.max-message-size=2500", "jobs", "submit", big});
  EXPECT_EQ(file.exit.exitCode, 4) << file.output;
  EXPECT_TRUE(contains(file.output, "big.yaml: too large: the file is")) << file.output;
}

TEST_F(RegentctlJobsInput, AStoredNameThatIsNotUtf8LeavesEveryListingWorking) {
  ASSERT_NO_FATAL_FAILURE(useCluster("ctl-input-utf8"));
  // Written straight into the store, as a master before validation refused such names did.
  const JobId bad = JobId::random();
  const JobId good = JobId::random();
  const std::string badName = std::string("bad\xff\xfe") + "\x1b[2J" + "\xe2\x80\xae" + "x";
  {
    capnp::MallocMessageBuilder message;
    auto graph = message.initRoot<wire::JobGraph>();
    fillJobGraph(graph, bad, {.name = "placeholder"});
    graph.setName(capnp::Text::Reader(badName.data(), badName.size()));
    ASSERT_TRUE(loop_.run(stores().jobGraphs().put(graph.asReader())).ok());
    capnp::MallocMessageBuilder other;
    fillJobGraph(other.initRoot<wire::JobGraph>(), good, {.name = "good"});
    ASSERT_TRUE(loop_.run(stores().jobGraphs().put(other.getRoot<wire::JobGraph>())).ok());
  }
  ASSERT_NO_FATAL_FAILURE(startMaster());

  CtlResult json = ctl({"--json", "jobs", "list"});
  ASSERT_EQ(json.exit.exitCode, 0) << json.output;
  std::map<std::string, std::string> names;
  for (const auto& line : jsonLines(json.output)) {
    auto job = nlohmann::json::parse(line);
    names[job.at("job_id").get<std::string>()] = job.at("name").get<std::string>();
  }
  ASSERT_EQ(names.size(), 2u) << json.output;
  EXPECT_EQ(names[good.toHex()], "good");
  EXPECT_EQ(names[bad.toHex()], sanitizeUtf8(badName));

  CtlResult table = ctl({"jobs", "list"});
  ASSERT_EQ(table.exit.exitCode, 0) << table.output;
  EXPECT_EQ(printableUtf8(badName), "bad\xef\xbf\xbd\xef\xbf\xbd\\x1b[2J\\u{202E}x");
  EXPECT_TRUE(contains(table.output, bad.toHex() + "  " + printableUtf8(badName))) << table.output;
  EXPECT_FALSE(contains(table.output, "\x1b")) << table.output;

  CtlResult status = ctl({"--json", "jobs", "status", bad.toHex()});
  ASSERT_EQ(status.exit.exitCode, 0) << status.output;
  auto statusLines = jsonLines(status.output);
  ASSERT_EQ(statusLines.size(), 1u) << status.output;
  EXPECT_EQ(nlohmann::json::parse(statusLines[0]).at("name"), sanitizeUtf8(badName));
  CtlResult text = ctl({"jobs", "status", bad.toHex()});
  ASSERT_EQ(text.exit.exitCode, 0) << text.output;
  EXPECT_TRUE(contains(text.output, "name:           bad\xef\xbf\xbd")) << text.output;

  kj::HttpHeaderTable headers;
  HttpReply jobs = httpGet(loop_, headers, httpAddress(), "/v1/jobs");
  ASSERT_EQ(jobs.status, 200u) << jobs.body;
  auto body = nlohmann::json::parse(jobs.body);
  ASSERT_EQ(body.at("jobs").size(), 2u) << jobs.body;
  HttpReply metrics = httpGet(loop_, headers, httpAddress(), "/metrics");
  EXPECT_EQ(metrics.status, 200u);
  EXPECT_TRUE(contains(metrics.body, "regent_jobs{state=\"created\"} 2")) << metrics.body;
}

TEST_F(RegentctlJobsInput, ACorruptRecordIsReportedNotReplacedAndRemovedOnlyOnRequest) {
  ASSERT_NO_FATAL_FAILURE(useCluster("ctl-input-corrupt"));
  const JobId corrupt = JobId::random();
  const JobId healthy = JobId::random();
  stores();  // Connects zk_ and creates the cluster's folders.
  {
    capnp::MallocMessageBuilder message;
    fillJobGraph(message.initRoot<wire::JobGraph>(), healthy, {.name = "healthy"});
    ASSERT_TRUE(loop_.run(stores().jobGraphs().put(message.getRoot<wire::JobGraph>())).ok());
  }
  auto created = loop_.run(zk_->create("jobgraphs/" + corrupt.toHex(),
                                       "\xff\xfe not a JobGraph", ha::CreateMode::kPersistent));
  ASSERT_TRUE(created.ok()) << ha::zkCodeName(created.code);
  ASSERT_NO_FATAL_FAILURE(startMaster());

  CtlResult status = ctl({"jobs", "status", corrupt.toHex()});
  ASSERT_EQ(status.exit.exitCode, 0) << status.output;
  EXPECT_TRUE(std::regex_search(status.output, std::regex("state: +CORRUPT\n"))) << status.output;
  EXPECT_TRUE(contains(status.output, "regentctl jobs remove-corrupt " + corrupt.toHex()))
      << status.output;

  CtlResult list = ctl({"--json", "jobs", "list"});
  ASSERT_EQ(list.exit.exitCode, 0) << list.output;
  std::map<std::string, std::string> states;
  for (const auto& line : jsonLines(list.output)) {
    auto job = nlohmann::json::parse(line);
    states[job.at("job_id").get<std::string>()] = job.at("state").get<std::string>();
  }
  EXPECT_EQ(states, (std::map<std::string, std::string>{{corrupt.toHex(), "CORRUPT"},
                                                        {healthy.toHex(), "CREATED"}}));

  kj::HttpHeaderTable table;
  HttpReply jobs = httpGet(loop_, table, httpAddress(), "/v1/jobs");
  ASSERT_EQ(jobs.status, 200u) << jobs.body;
  EXPECT_TRUE(contains(jobs.body, "\"state\":\"CORRUPT\"")) << jobs.body;
  EXPECT_TRUE(contains(jobs.body, "\"corrupt_reason\":")) << jobs.body;

  // A submit under the corrupt job's id does not replace the record.
  CtlResult refused = ctl({"jobs", "submit", jobFile("replacement", corrupt)});
  EXPECT_EQ(refused.exit.exitCode, 4) << refused.output;
  EXPECT_TRUE(contains(refused.output, "job " + corrupt.toHex() + " is CORRUPT")) << refused.output;
  auto stored = loop_.run(zk_->get("jobgraphs/" + corrupt.toHex()));
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored.value.data, "\xff\xfe not a JobGraph");

  // remove-corrupt refuses a healthy job, then removes the corrupt record; the id is free.
  CtlResult healthyKept = ctl({"jobs", "remove-corrupt", healthy.toHex()});
  EXPECT_EQ(healthyKept.exit.exitCode, 4) << healthyKept.output;
  EXPECT_TRUE(contains(healthyKept.output, "is not corrupt")) << healthyKept.output;
  CtlResult removed = ctl({"jobs", "remove-corrupt", corrupt.toHex()});
  ASSERT_EQ(removed.exit.exitCode, 0) << removed.output;
  EXPECT_EQ(removed.output, "removed the corrupt JobGraph record of " + corrupt.toHex() + "\n");
  CtlResult submitted = ctl({"jobs", "submit", jobFile("replacement", corrupt)});
  EXPECT_EQ(submitted.exit.exitCode, 0) << submitted.output;
  CtlResult after = ctl({"jobs", "status", corrupt.toHex()});
  EXPECT_TRUE(std::regex_search(after.output, std::regex("state: +CREATED\n"))) << after.output;
}

TEST_F(RegentctlJobsInput, FailoverWithOneMasterSaysNoOtherMasterTookOver) {
  ASSERT_NO_FATAL_FAILURE(useCluster("ctl-input-failover"));
  ASSERT_NO_FATAL_FAILURE(startMaster());
  CtlResult failover = ctl({"failover"});
  EXPECT_EQ(failover.exit.exitCode, 4) << failover.output;
  const std::string id = cluster_->masterId(0);
  EXPECT_TRUE(contains(failover.output, "leader " + id + " (epoch 1) -> " + id + " (epoch 2)"))
      << failover.output;
  EXPECT_TRUE(contains(failover.output, "failover: no other master took over: " +
                                            cluster_->masterId(0) + " leads again (epoch 1 -> 2)"))
      << failover.output;
}

}  // namespace
}  // namespace regent::testing

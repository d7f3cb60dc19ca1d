// The signals a regent-master handles (docs/operations.md, "Stopping a master"), run against real
// processes: SIGQUIT hands over like SIGTERM, a second stop signal during a stalled hand-over
// exits at once, and SIGHUP is logged and ignored (the master keeps leading). Each ends with the
// `master exiting` event line. And the events file, which holds what the log shows of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "tests/fixtures/process_harness.h"
#include "tests/fixtures/tcp_fault_proxy.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/fixtures/wait_test_util.h"
#include "tests/fixtures/zookeeper_server.h"
#include "tests/integration/master_cluster_test_util.h"

namespace regent::testing {
namespace {

using Kind = MasterEvent::Kind;

// Bounds for slow ASan builds on shared cores; none is a claim about speed.
constexpr Duration kStartTimeout{60000};
constexpr Duration kExitTimeout{30000};

// How many "SIGHUP ignored" lines `output` holds.
size_t countIgnored(const std::string& output) {
  size_t count = 0;
  for (size_t at = output.find("SIGHUP ignored"); at != std::string::npos;
       at = output.find("SIGHUP ignored", at + 1)) {
    ++count;
  }
  return count;
}

Result<MasterEvent> waitForKind(MasterCluster& cluster, size_t slot, Kind kind) {
  return cluster.waitForEvent(slot, [kind](const MasterEvent& e) { return e.kind == kind; },
                              kStartTimeout);
}

TEST(MasterSignals, SigquitHandsOverToTheStandbyLikeSigterm) {
  ZooKeeperServer& server = sharedServer();
  // A 20 s session: the standby is granted well before it could expire, so only the hand-over
  // transaction can have let it in.
  MasterCluster cluster({.quorum = server.connectString(),
                         .clusterId = uniqueClusterId("sigquit"),
                         .sessionTimeout = Duration(20000)});
  ASSERT_OK(cluster.startMasters(2));
  auto first = cluster.waitForGrant(1, kStartTimeout);
  ASSERT_OK(first);
  const size_t leader = first.value();
  const size_t standby = 1 - leader;

  ASSERT_OK(cluster.process(leader).signal(SIGQUIT));
  auto next = cluster.waitForGrant(2, Duration(10000));
  ASSERT_OK(next);
  EXPECT_EQ(next.value(), standby);
  auto exit = cluster.process(leader).waitForExit(kExitTimeout);
  ASSERT_TRUE(exit) << cluster.describe();
  EXPECT_TRUE(exit->exited() && exit->exitCode == 0) << exit->describe() << "\n"
                                                      << cluster.describe();

  const auto events = cluster.events(leader);
  EXPECT_EQ(countEvents(events, Kind::kHandoverRequested), 1u) << cluster.describe();
  EXPECT_EQ(countEvents(events, Kind::kHandoverDone), 1u) << cluster.describe();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().kind, Kind::kExiting) << cluster.describe();
  EXPECT_EQ(events.back().code, 0);
  EXPECT_EQ(checkTermsExclusiveAndDense(cluster.terms()), "") << cluster.describe();
}

TEST(MasterSignals, SigquitDuringAStalledHandOverExitsAtOnceWith131) {
  ZooKeeperServer& server = sharedServer();
  auto proxy = ThreadedTcpFaultProxy::start("127.0.0.1", server.clientPort());
  ASSERT_OK(proxy);
  // A long session, so the stalled connection is not declared lost during the test.
  MasterCluster cluster({.quorum = server.connectString(),
                         .clusterId = uniqueClusterId("second-sigquit"),
                         .sessionTimeout = Duration(20000)});
  auto leader = cluster.startMaster({}, proxy.value()->address());
  ASSERT_OK(leader);
  ASSERT_OK(waitForKind(cluster, leader.value(), Kind::kGranted));

  proxy.value()->stall();
  ASSERT_OK(cluster.terminate(leader.value()));
  ASSERT_OK(waitForKind(cluster, leader.value(), Kind::kHandoverRequested));
  ASSERT_OK(cluster.process(leader.value()).signal(SIGQUIT));
  auto exit = cluster.process(leader.value()).waitForExit(Duration(10000));
  ASSERT_TRUE(exit) << cluster.describe();
  EXPECT_TRUE(exit->exited() && exit->exitCode == 128 + SIGQUIT) << exit->describe();
  const auto events = cluster.events(leader.value());
  EXPECT_EQ(countEvents(events, Kind::kHandoverDone), 0u);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().kind, Kind::kExiting);
  EXPECT_EQ(events.back().code, 128 + SIGQUIT);
}

TEST(MasterSignals, SighupIsLoggedAndIgnoredTheMasterKeepsLeading) {
  TempDir dir("master-sighup");
  ProcessOptions options;
  options.argv = {REGENT_BIN_DIR "/regent-master", "--set", "ha.mode=standalone", "--set",
                  "ha.standalone.epoch-file=" + dir.path() + "/epoch", "--set",
                  "store.rocksdb.path=" + dir.path() + "/store", "--set", "rpc.bind=127.0.0.1:0",
                  "--set", "http.bind=127.0.0.1:0"};
  options.outputPath = dir.path() + "/master.log";
  auto started = ProcessHarness::start(options);
  ASSERT_OK(started);
  ProcessHarness& master = *started.value();
  ASSERT_OK(master.waitForLine(std::regex("leader serving epoch=1 "), kStartTimeout));

  // Twice: a second SIGHUP is not a second stop signal either.
  for (size_t i = 1; i <= 2; ++i) {
    ASSERT_OK(master.signal(SIGHUP));
    // The line is logged by the signal's callback: once it is there, the signal was handled.
    // (Unhandled, SIGHUP kills the master and the wait ends with the process.)
    waitUntil([&] { return countIgnored(master.output()) >= i || !master.running(); },
              kExitTimeout);
    ASSERT_TRUE(master.running()) << master.output();
    ASSERT_EQ(countIgnored(master.output()), i) << master.output();
  }
  const std::string output = master.output();
  EXPECT_NE(output.find("does not reload its configuration"), std::string::npos) << output;
  auto events = parseMasterEvents(output);
  EXPECT_EQ(countEvents(events, Kind::kRevoked), 0u) << output;
  EXPECT_EQ(countEvents(events, Kind::kHandoverRequested), 0u) << output;

  // Still the same master, leading the same term: SIGTERM hands it over and it exits 0.
  ASSERT_OK(master.terminate());
  auto exit = master.waitForExit(kExitTimeout);
  ASSERT_TRUE(exit) << master.output();
  EXPECT_TRUE(exit->exited() && exit->exitCode == 0) << exit->describe();
  events = parseMasterEvents(master.output());
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(countEvents(events, Kind::kGranted), 1u) << master.output();
  EXPECT_EQ(countEvents(events, Kind::kHandoverDone), 1u) << master.output();
  EXPECT_EQ(events.back().kind, Kind::kExiting);
  EXPECT_EQ(events.back().code, 0);
}

// events.file: the same events the log shows, one JSON object each, with the same clocks: the
// grant of a standalone master, and the hand-over and revocation SIGTERM causes.
TEST(MasterSignals, TheEventsFileHoldsTheEventsTheLogShowsWithTheSameClocks) {
  TempDir dir("master-events-file");
  const std::string eventsPath = dir.path() + "/events.jsonl";
  ProcessOptions options;
  options.argv = {REGENT_BIN_DIR "/regent-master", "--set", "ha.mode=standalone", "--set",
                  "ha.standalone.epoch-file=" + dir.path() + "/epoch", "--set",
                  "store.rocksdb.path=" + dir.path() + "/store", "--set", "rpc.bind=127.0.0.1:0",
                  "--set", "http.bind=127.0.0.1:0", "--set", "events.file=" + eventsPath};
  options.outputPath = dir.path() + "/master.log";
  auto started = ProcessHarness::start(options);
  ASSERT_OK(started);
  ProcessHarness& master = *started.value();
  ASSERT_OK(master.waitForLine(std::regex("leader serving epoch=1 "), kStartTimeout));
  ASSERT_OK(master.terminate());
  auto exit = master.waitForExit(kExitTimeout);
  ASSERT_TRUE(exit && exit->exited() && exit->exitCode == 0) << master.output();

  // The log's timed events, as (name, mono_us, wall_ms), in order.
  std::vector<std::string> logged;
  for (const MasterEvent& event : parseMasterEvents(master.output())) {
    if (event.monoUs == 0) continue;  // An event line without clocks: not an event.
    logged.push_back(std::string(masterEventKindName(event.kind)) + " " +
                     std::to_string(event.monoUs) + " " + std::to_string(event.wallMs));
  }
  std::vector<std::string> filed;
  for (const Event& event : readEventsFile(eventsPath)) {
    auto parsed = parseMasterEventLine(event.line());
    ASSERT_TRUE(parsed) << event.line();
    filed.push_back(std::string(masterEventKindName(parsed->kind)) + " " +
                    std::to_string(event.monoUs()) + " " + std::to_string(event.wallMs()));
  }
  EXPECT_EQ(filed.size(), 4u);  // Granted, handover requested, revoked, handover done.
  EXPECT_EQ(filed, logged) << master.output();
}

}  // namespace
}  // namespace regent::testing

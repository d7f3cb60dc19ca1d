// Crash safety of both backends: a `store-test-tool write-loop` process is SIGKILLed while its
// puts are in flight; reopening the backend (a new term) recovers every JobGraph it acknowledged,
// intact. Several rounds on the same backend, so earlier rounds' acknowledgements must survive too.
#include <gtest/gtest.h>
#include <kj/debug.h>

#include <csignal>
#include <map>
#include <memory>
#include <ostream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "common/ids.h"
#include "ha/zookeeper_client.h"
#include "rpc/wire_ids.h"
#include "store/rocksdb_record_store.h"
#include "store/store_services.h"
#include "store/zookeeper_record_store.h"
#include "tests/fixtures/process_harness.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/fixtures/wait_test_util.h"
#include "tests/fixtures/zookeeper_server.h"
#include "tests/ha/zookeeper_client_test_util.h"

namespace regent::store {
namespace {

using testing::ProcessHarness;
using testing::ProcessOptions;
using testing::TempDir;
using testing::waitUntil;

enum class Backend { kZooKeeper, kRocksDb };

const char* backendName(Backend backend) {
  return backend == Backend::kZooKeeper ? "ZooKeeper" : "RocksDb";
}

// gtest prints parameters with this (ctest shows it in the test's name).
void PrintTo(Backend backend, std::ostream* out) { *out << backendName(backend); }

constexpr int kRounds = 3;
constexpr size_t kInFlight = 16;  // The writer's puts in flight (--in-flight).
constexpr size_t kAcksBeforeKill = 200;
constexpr Duration kWait{60000};

// "acked <jobId> <name>" lines of `output`; a last line without its newline (the kill may cut a
// write short) is not an acknowledgement.
std::map<std::string, std::string> parseAcks(const std::string& output) {
  static const std::regex kAck("^acked ([0-9a-f]{32}) (\\S+)$");
  std::map<std::string, std::string> acks;
  size_t start = 0;
  for (size_t end = output.find('\n'); end != std::string::npos;
       start = end + 1, end = output.find('\n', start)) {
    std::smatch match;
    const std::string line = output.substr(start, end - start);
    if (std::regex_match(line, match, kAck)) acks[match[1]] = match[2];
  }
  return acks;
}

class StoreCrashTest : public ::testing::TestWithParam<Backend> {
 protected:
  StoreCrashTest() : dir_("store-crash") {}

  void SetUp() override {
    if (GetParam() == Backend::kZooKeeper) {
      auto server = testing::sharedZooKeeperServer();
      ASSERT_TRUE(server.ok()) << server.error().message;
      quorum_ = server.value()->connectString();
      root_ = "/store-crash-itest/" + JobId::random().toHex();
    }
  }

  std::unique_ptr<ProcessHarness> startWriter(int round) {
    ProcessOptions process;
    process.argv = {REGENT_BIN_DIR "/store-test-tool", "write-loop", "--size", "2048",
                    "--in-flight", std::to_string(kInFlight)};
    if (GetParam() == Backend::kZooKeeper) {
      process.argv.insert(process.argv.end(),
                          {"--backend", "zookeeper", "--zk", quorum_, "--root", root_});
    } else {
      process.argv.insert(process.argv.end(), {"--backend", "rocksdb", "--path", dbPath()});
    }
    process.outputPath = dir_.path() + "/writer-" + std::to_string(round) + ".log";
    auto writer = ProcessHarness::start(process);
    KJ_REQUIRE(writer.ok(), writer.error().message);
    return std::move(writer).value();
  }

  std::string dbPath() const { return dir_.path() + "/db"; }

  // Opens the backend for a new term, as a new leader would, and recovers every JobGraph.
  StoreResult<RecoveredJobGraphs> recover() {
    kj::Own<ha::ZooKeeperClient> zooKeeper;
    kj::Own<RocksDbDatabase> database;
    kj::Own<RecordStore> records;
    if (GetParam() == Backend::kZooKeeper) {
      ha::ZooKeeperClientOptions options;
      options.quorum = quorum_;
      options.root = root_;
      zooKeeper = ha::connectForTests(loop_, options, kWait);
      auto latchDir = loop_.run(zooKeeper->ensurePath("latch"));
      KJ_REQUIRE(latchDir.ok(), ha::zkCodeName(latchDir.code));
      auto latch =
          loop_.run(zooKeeper->create("latch/m-", "", ha::CreateMode::kEphemeralSequential));
      KJ_REQUIRE(latch.ok(), ha::zkCodeName(latch.code));
      auto opened = loop_.run(
          ZooKeeperRecordStore::open(*zooKeeper, StoreTerm{++epoch_, latch.value}, {}));
      if (!opened.ok()) return opened.error();
      records = kj::mv(opened).value();
    } else {
      RocksDbOptions options;
      options.path = dbPath();
      options.lockTimeout = kWait;
      auto opened = loop_.run(RocksDbDatabase::open(loop_, options));
      if (!opened.ok()) return opened.error();
      database = kj::mv(opened).value();
      auto term = loop_.run(database->openTerm(database->highestEpoch() + 1));
      if (!term.ok()) return term.error();
      records = kj::mv(term).value();
    }
    auto stores = makeLeaderStores(kj::mv(records), 1000);
    auto recovered = loop_.run(stores->jobGraphs().recoverAll());
    stores = nullptr;
    if (database) loop_.run(database->close());
    return recovered;
  }

  TempDir dir_;
  std::string quorum_;
  std::string root_;
  uint64_t epoch_ = 0;
  EventLoop loop_;
};

TEST_P(StoreCrashTest, EveryAcknowledgedJobGraphSurvivesAWriterKilledMidRun) {
  std::map<std::string, std::string> acknowledged;  // Job id -> name, over all rounds.
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto writer = startWriter(round);
    const bool enough = waitUntil(
        [&] {
          return !writer->running() || parseAcks(writer->output()).size() >= kAcksBeforeKill;
        },
        kWait);
    ASSERT_TRUE(enough) << "too few acks within " << kWait.count() << " ms: "
                        << writer->outputTail();
    // Killed while its puts are in flight (it keeps 16 outstanding until it is killed).
    ASSERT_TRUE(writer->running()) << "the writer ended early: " << writer->outputTail();
    ASSERT_TRUE(writer->kill().ok());
    auto exit = writer->waitForExit(kWait);
    ASSERT_TRUE(exit.has_value());
    EXPECT_TRUE(exit->killedBy(SIGKILL)) << exit->describe();

    const auto acks = parseAcks(writer->output());
    EXPECT_GE(acks.size(), kAcksBeforeKill);
    acknowledged.insert(acks.begin(), acks.end());

    auto recovered = recover();
    ASSERT_TRUE(recovered.ok()) << recovered.error().message;
    EXPECT_TRUE(recovered.value().corrupt.empty())
        << recovered.value().corrupt.size() << " corrupt, first: "
        << recovered.value().corrupt.front().key << ": " << recovered.value().corrupt.front().reason;

    std::map<std::string, std::string> found;  // Job id -> name of every recovered graph.
    for (const auto& graph : recovered.value().graphs) {
      auto reader = graph.get();
      const JobId id = wire::idFromWire<JobId>(reader.getJobId());
      ASSERT_EQ(reader.getVertices().size(), 1u) << id.toHex();
      EXPECT_EQ(reader.getVertices()[0].getName(), "work") << id.toHex();
      EXPECT_GT(reader.getVertices()[0].getCommand().getEnv()[0].getValue().size(), 1000u);
      found[id.toHex()] = reader.getName();
    }
    size_t missing = 0;
    for (const auto& [id, name] : acknowledged) {
      auto it = found.find(id);
      if (it == found.end()) {
        if (++missing <= 5) ADD_FAILURE() << "acknowledged JobGraph " << id << " (" << name
                                          << ") was not recovered";
        continue;
      }
      EXPECT_EQ(it->second, name) << id;
    }
    EXPECT_EQ(missing, 0u) << "of " << acknowledged.size() << " acknowledged";
    // Puts in flight at a kill may have landed without an ack; nothing else may appear.
    EXPECT_GE(found.size(), acknowledged.size());
    EXPECT_LE(found.size(), acknowledged.size() + kInFlight * static_cast<size_t>(round + 1));
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreCrashTest,
                         ::testing::Values(Backend::kZooKeeper, Backend::kRocksDb),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return std::string(backendName(info.param));
                         });

}  // namespace
}  // namespace regent::store

// store-test-tool: the helper process of the store tests. `hold` keeps a RocksDB store directory
// open (and so locked) until SIGTERM; `write-loop` puts JobGraphs through either backend and
// prints each one only once its put was acknowledged, so a test can SIGKILL it and check them.
#include <capnp/message.h>
#include <kj/async.h>
#include <kj/debug.h>
#include <kj/vector.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>

#include "common/event_loop.h"
#include "common/ids.h"
#include "common/logging.h"
#include "ha/zookeeper_client.h"
#include "store/rocksdb_record_store.h"
#include "store/store_services.h"
#include "store/zookeeper_record_store.h"
#include "tests/fixtures/job_graph_test_util.h"

namespace regent::store {
namespace {

constexpr Duration kConnectTimeout{15000};

struct WriteLoopOptions {
  std::string backend;  // "zookeeper" or "rocksdb".
  std::string quorum;
  std::string root;
  std::string path;
  uint64_t epoch = 0;   // RocksDB: 0 = one above the epoch recorded in the database.
  size_t size = 2048;   // Roughly the packed size of each JobGraph.
  size_t inFlight = 16;
  size_t maxPuts = 100000;
};

int fail(const std::string& message) {
  std::fprintf(stderr, "store-test-tool: %s\n", message.c_str());
  return 1;
}

// Opens the database and keeps it until SIGTERM or SIGINT. stdin is not watched: the test
// harness gives children /dev/null.
int runHold(const std::string& path) {
  EventLoop loop;
  RocksDbOptions options;
  options.path = path;
  auto opened = loop.run(RocksDbDatabase::open(loop, options));
  if (!opened.ok()) return fail(opened.error().message);
  kj::Own<RocksDbDatabase> db = kj::mv(opened).value();
  std::printf("locked pid=%d path=%s\n", static_cast<int>(::getpid()), path.c_str());
  std::fflush(stdout);

  auto stop = kj::newPromiseAndFulfiller<void>();
  auto& fulfiller = *stop.fulfiller;
  SignalWatcher term(loop, SIGTERM, [&fulfiller] { fulfiller.fulfill(); });
  SignalWatcher interrupt(loop, SIGINT, [&fulfiller] { fulfiller.fulfill(); });
  loop.run(kj::mv(stop.promise));
  loop.run(db->close());
  std::printf("released pid=%d\n", static_cast<int>(::getpid()));
  std::fflush(stdout);
  return 0;
}

// One JobGraph of about `size` packed bytes: a single vertex whose environment carries padding
// (the rest of the message packs to roughly 200 bytes).
void buildJobGraph(wire::JobGraph::Builder graph, const JobId& id, const std::string& name,
                   size_t size) {
  testing::fillJobGraph(graph, id,
                        {.name = name,
                         .argv = {"/bin/echo", name},
                         .cpuMillis = 100,
                         .memoryBytes = 64 << 20,
                         .paddingBytes = size > 200 ? size - 200 : 0,
                         .submittedAtMs = wallClockMillis()});
}

// Puts JobGraphs with `inFlight` puts outstanding until `maxPuts` were issued or one fails.
class WriteLoop final {
 public:
  WriteLoop(JobGraphStore& store, const WriteLoopOptions& options)
      : store_(store), options_(options) {}

  kj::Promise<void> run() {
    kj::Vector<kj::Promise<void>> lanes;
    for (size_t i = 0; i < options_.inFlight; ++i) lanes.add(lane());
    return kj::joinPromises(lanes.releaseAsArray());
  }

  bool failed() const { return failed_; }

 private:
  kj::Promise<void> lane() {
    if (failed_ || issued_ >= options_.maxPuts) return kj::READY_NOW;
    const JobId id = JobId::random();
    const std::string name = "crash-job-" + std::to_string(issued_++);
    capnp::MallocMessageBuilder message;
    buildJobGraph(message.initRoot<wire::JobGraph>(), id, name, options_.size);
    return store_.put(message.getRoot<wire::JobGraph>().asReader())
        .then([this, id, name](StoreResult<void> result) -> kj::Promise<void> {
          if (!result.ok()) {
            failed_ = true;
            std::fprintf(stderr, "store-test-tool: put %s failed: %s\n", id.toHex().c_str(),
                         result.error().message.c_str());
            return kj::READY_NOW;
          }
          std::printf("acked %s %s\n", id.toHex().c_str(), name.c_str());
          std::fflush(stdout);
          return lane();
        });
  }

  JobGraphStore& store_;
  const WriteLoopOptions& options_;
  size_t issued_ = 0;
  bool failed_ = false;
};

int runWriteLoop(const WriteLoopOptions& options) {
  EventLoop loop;
  kj::Own<ha::ZooKeeperClient> zooKeeper;
  kj::Own<RocksDbDatabase> database;
  kj::Own<RecordStore> records;

  if (options.backend == "zookeeper") {
    ha::ZooKeeperClientOptions zkOptions;
    zkOptions.quorum = options.quorum;
    zkOptions.root = options.root;
    auto started = ha::ZooKeeperClient::start(loop, zkOptions);
    if (!started.ok()) return fail(started.error().message);
    zooKeeper = std::move(started).value();
    auto connected = loop.run(zooKeeper->waitConnected(kConnectTimeout));
    if (!connected.ok()) return fail(connected.error().message);
    auto latchDir = loop.run(zooKeeper->ensurePath("latch"));
    if (!latchDir.ok()) return fail(std::string("ensurePath latch: ") + ha::zkCodeName(latchDir.code));
    auto latch = loop.run(zooKeeper->create("latch/m-", "", ha::CreateMode::kEphemeralSequential));
    if (!latch.ok()) return fail(std::string("create latch: ") + ha::zkCodeName(latch.code));
    auto opened =
        loop.run(ZooKeeperRecordStore::open(*zooKeeper, StoreTerm{1, latch.value}, {}));
    if (!opened.ok()) return fail(opened.error().message);
    records = kj::mv(opened).value();
  } else if (options.backend == "rocksdb") {
    RocksDbOptions dbOptions;
    dbOptions.path = options.path;
    auto opened = loop.run(RocksDbDatabase::open(loop, dbOptions));
    if (!opened.ok()) return fail(opened.error().message);
    database = kj::mv(opened).value();
    const uint64_t epoch = options.epoch != 0 ? options.epoch : database->highestEpoch() + 1;
    auto term = loop.run(database->openTerm(epoch));
    if (!term.ok()) return fail(term.error().message);
    records = kj::mv(term).value();
  } else {
    return fail("unknown backend " + options.backend);
  }

  kj::Own<LeaderStores> stores = makeLeaderStores(kj::mv(records), 1000);
  WriteLoop writer(stores->jobGraphs(), options);
  std::printf("writing backend=%s pid=%d\n", options.backend.c_str(), static_cast<int>(::getpid()));
  std::fflush(stdout);
  loop.run(writer.run());
  stores = nullptr;
  if (database) loop.run(database->close());
  return writer.failed() ? 1 : 0;
}

}  // namespace
}  // namespace regent::store

int main(int argc, char** argv) {
  CLI::App app{"Helper process of the store tests (tests/store)."};
  app.require_subcommand(1);

  std::string holdPath;
  auto* hold = app.add_subcommand(
      "hold", "Open the RocksDB store at --path, print \"locked pid=<pid>\", keep it until SIGTERM");
  hold->add_option("--path", holdPath, "the store directory")->required();

  regent::store::WriteLoopOptions writeOptions;
  auto* writeLoop = app.add_subcommand(
      "write-loop",
      "Put JobGraphs in a loop, printing \"acked <jobId> <name>\" once each put succeeded");
  writeLoop->add_option("--backend", writeOptions.backend, "zookeeper or rocksdb")
      ->required()
      ->check(CLI::IsMember({"zookeeper", "rocksdb"}));
  writeLoop->add_option("--zk", writeOptions.quorum, "ZooKeeper quorum (zookeeper backend)");
  writeLoop->add_option("--root", writeOptions.root, "absolute cluster root (zookeeper backend)");
  writeLoop->add_option("--path", writeOptions.path, "store directory (rocksdb backend)");
  writeLoop->add_option("--epoch", writeOptions.epoch,
                        "rocksdb term epoch (default: one above the recorded epoch)");
  writeLoop->add_option("--size", writeOptions.size, "approximate packed JobGraph size in bytes")
      ->capture_default_str();
  writeLoop->add_option("--in-flight", writeOptions.inFlight, "puts kept outstanding")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  writeLoop->add_option("--max-puts", writeOptions.maxPuts, "stop after this many puts")
      ->capture_default_str();

  CLI11_PARSE(app, argc, argv);

  regent::LogOptions logOptions;
  logOptions.level = "warn";
  logOptions.process = "store-test-tool";
  if (auto logging = regent::setupLogging(logOptions); !logging.ok()) {
    return regent::store::fail(logging.error().message);
  }

  if (hold->parsed()) return regent::store::runHold(holdPath);
  if (writeOptions.backend == "zookeeper" && (writeOptions.quorum.empty() || writeOptions.root.empty())) {
    return regent::store::fail("write-loop --backend zookeeper needs --zk and --root");
  }
  if (writeOptions.backend == "rocksdb" && writeOptions.path.empty()) {
    return regent::store::fail("write-loop --backend rocksdb needs --path");
  }
  return regent::store::runWriteLoop(writeOptions);
}

// The stores' contract, written once and run against both backends (docs/stores.md): the zookeeper
// backend on the real ZooKeeper server, the rocksdb backend on a real directory. Everything goes
// through StoreServices, as a master would open the stores of a term.
#include <capnp/message.h>
#include <gtest/gtest.h>
#include <kj/debug.h>
#include <rocksdb/db.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "common/ids.h"
#include "conf/config.h"
#include "ha/zookeeper_client.h"
#include "rpc/wire_ids.h"
#include "store/store_services.h"
#include "tests/fixtures/job_graph_test_util.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/fixtures/zookeeper_server.h"
#include "tests/ha/zookeeper_client_test_util.h"
#include "tests/store/progress_test_util.h"

namespace regent::store {
namespace {

constexpr Duration kWait{30000};

// ---- Messages ------------------------------------------------------------------------------

// The suite's JobGraph: one vertex of parallelism 2; `padding` random bytes set its size.
kj::Own<capnp::MallocMessageBuilder> makeGraph(JobId id, const std::string& name,
                                               size_t padding = 0) {
  return testing::makeJobGraph(id, {.name = name,
                                    .parallelism = 2,
                                    .paddingBytes = padding,
                                    .submittedAtMs = 1700000000000});
}

wire::JobGraph::Reader graphOf(capnp::MallocMessageBuilder& message) {
  return message.getRoot<wire::JobGraph>().asReader();
}

kj::Own<capnp::MallocMessageBuilder> makeResult(JobId id, wire::JobState state, int64_t endedAtMs) {
  auto message = kj::heap<capnp::MallocMessageBuilder>();
  auto result = message->initRoot<wire::JobResult>();
  wire::setWireId(result.initJobId(), id);
  result.setJobName("job-" + id.toHex().substr(0, 6));
  result.setState(state);
  result.setClean(true);  // createDirty must store it dirty whatever the caller says.
  result.setSubmittedAtMs(endedAtMs - 1000);
  result.setEndedAtMs(endedAtMs);
  return message;
}

wire::JobResult::Reader resultOf(capnp::MallocMessageBuilder& message) {
  return message.getRoot<wire::JobResult>().asReader();
}

// An ended job's detail: one vertex of `subtasks` subtasks, each with its attempt and worker.
kj::Own<capnp::MallocMessageBuilder> makeDetail(JobId id, uint32_t subtasks) {
  auto message = kj::heap<capnp::MallocMessageBuilder>();
  auto status = message->initRoot<wire::JobStatus>();
  wire::setWireId(status.initJobId(), id);
  status.setName("job-" + id.toHex().substr(0, 6));
  status.setState(wire::JobState::FINISHED);
  status.setEndedAtMs(1700000000000);
  status.initTasks().setTotal(subtasks);
  status.getTasks().setFinished(subtasks);
  auto vertex = status.initVertices(1)[0];
  vertex.setName("v");
  vertex.setParallelism(subtasks);
  vertex.initTasks().setTotal(subtasks);
  auto rows = vertex.initSubtasks(subtasks);
  for (uint32_t i = 0; i < subtasks; ++i) {
    rows[i].setIndex(i);
    rows[i].setAttempts(1);
    rows[i].setHost("worker-" + std::to_string(i % 7));
    auto attempt = rows[i].initAttempt();
    wire::setWireId(attempt.initAttemptId(), AttemptId::random());
    attempt.setState(wire::ExecutionState::FINISHED);
    attempt.setVertexName("v");
    attempt.setSubtaskIndex(i);
  }
  return message;
}

// A JobMaster's progress record: `subtasks` subtasks, each with an attempt of its own (the
// attempt ids are random, so the record packs as a real one does), subtask 0 finished.
kj::Own<capnp::MallocMessageBuilder> makeProgress(JobId id, uint32_t subtasks,
                                                  uint32_t restarts = 0) {
  auto message = regent::testing::progressRecord(
      id, regent::testing::firstFinishedOthersRunning(subtasks, restarts), restarts, 7);
  auto progress = message->getRoot<wire::JobProgress>();
  progress.setWrittenAtMs(1700000000000);
  progress.setStartedAtMs(1700000000000 - 5000);
  progress.setRestartDelayMs(250);
  return message;
}

wire::JobProgress::Reader progressOf(capnp::MallocMessageBuilder& message) {
  return message.getRoot<wire::JobProgress>().asReader();
}

// ---- Backends ------------------------------------------------------------------------------

class StoreContractTest : public ::testing::TestWithParam<std::string> {
 protected:
  ~StoreContractTest() noexcept override = default;

  void SetUp() override {
    if (zooKeeperBackend()) {
      auto server = testing::sharedZooKeeperServer();
      ASSERT_TRUE(server.ok()) << server.error().message;
      server_ = server.value();
      root_ = "/regent-store-contract/" + JobId::random().toHex();
      zk_ = connect();
    }
  }

  void TearDown() override {
    endTerm();  // Every term's stores before the services that opened them.
    if (services_.get() != nullptr) loop_.run(services_->close());
    services_ = nullptr;
    zk_ = nullptr;
  }

  bool zooKeeperBackend() const { return GetParam() == "zookeeper"; }

  kj::Own<ha::ZooKeeperClient> connect() {
    ha::ZooKeeperClientOptions options;
    options.quorum = server_->connectString();
    options.root = root_;
    return ha::connectForTests(loop_, std::move(options), kWait);
  }

  Config config(const std::vector<std::string>& extra) const {
    ConfigSources sources;
    sources.set = {"store.backend=" + GetParam(), "store.rocksdb.path=" + dir_.path() + "/store",
                   "store.rocksdb.lock-timeout=2s"};
    if (zooKeeperBackend()) {
      sources.set.push_back("ha.zookeeper.quorum=" + server_->connectString());
    } else {
      sources.set.push_back("ha.mode=standalone");
    }
    sources.set.insert(sources.set.end(), extra.begin(), extra.end());
    auto loaded = loadConfig(sources);
    KJ_REQUIRE(loaded.ok(), loaded.error().message);
    return std::move(loaded).value();
  }

  // Ends the current term (ZooKeeper: its latch node is deleted, as a hand-over does) and opens
  // the stores of the next one through fresh StoreServices configured with `extra`.
  LeaderStores& openTerm(const std::vector<std::string>& extra = {}) {
    endTerm();
    services_ = nullptr;
    auto services = StoreServices::create(loop_, config(extra), zk_.get());
    KJ_REQUIRE(services.ok(), services.error().message);
    services_ = std::move(services).value();
    return openNextTerm();
  }

  // Opens the next term on the same services, keeping the current term's stores open (fenced).
  LeaderStores& openNextTerm() {
    StoreTerm term;
    term.epoch = ++epoch_;
    if (zooKeeperBackend()) {
      if (!latch_.empty()) {
        auto removed = loop_.run(zk_->remove(latch_));
        KJ_REQUIRE(removed.ok(), ha::zkCodeName(removed.code));
      }
      KJ_REQUIRE(loop_.run(zk_->ensurePath("latch")).ok());
      auto created = loop_.run(zk_->create("latch/m-", "", ha::CreateMode::kEphemeralSequential));
      KJ_REQUIRE(created.ok(), ha::zkCodeName(created.code));
      latch_ = created.value;
      term.latchPath = latch_;
    }
    auto opened = loop_.run(services_->openTerm(term));
    KJ_REQUIRE(opened.ok(), opened.error().message);
    previous_ = kj::mv(stores_);
    stores_ = kj::mv(opened).value();
    return *stores_;
  }

  void endTerm() {
    previous_ = nullptr;
    stores_ = nullptr;
  }

  // The job id the fuzz seeds and regression inputs carry.
  static JobId fuzzSeedJob() { return *JobId::fromHex("0123456789abcdef0123456789abcdef"); }

  // Writes the record of the stored_records fuzz regression input `name` (a selector byte, then
  // the record) as fuzzSeedJob()'s JobGraph, behind the stores' back, and opens a term; returns
  // the record's size.
  size_t writeRegressionAsJobGraph(const std::string& name) {
    std::ifstream file(REGENT_SOURCE_DIR "/tests/fuzz/regressions/stored_records/" + name,
                       std::ios::binary);
    const std::string input{std::istreambuf_iterator<char>(file),
                            std::istreambuf_iterator<char>()};
    KJ_REQUIRE(input.size() > 1, "no regression input", name);
    openTerm();
    writeRaw(RecordFamily::kJobGraphs, fuzzSeedJob().toHex(), input.substr(1));
    openTerm();
    return input.size() - 1;
  }

  // Writes `bytes` under `key` behind the stores' back (corruption tests). The stores are
  // closed first (RocksDB allows one opener); call openTerm() afterwards.
  void writeRaw(RecordFamily family, const std::string& key, const std::string& bytes) {
    endTerm();
    services_ = nullptr;
    const std::string folder = recordFamilyName(family);
    if (zooKeeperBackend()) {
      KJ_REQUIRE(loop_.run(zk_->ensurePath(folder)).ok());
      auto created = loop_.run(zk_->create(folder + "/" + key, bytes, ha::CreateMode::kPersistent));
      KJ_REQUIRE(created.ok(), ha::zkCodeName(created.code));
      return;
    }
    withRawDatabase([&](rocksdb::DB& db, rocksdb::ColumnFamilyHandle& handle) {
      rocksdb::WriteOptions options;
      options.sync = true;
      const rocksdb::Status status = db.Put(options, &handle, key, bytes);
      KJ_REQUIRE(status.ok(), status.ToString());
    }, folder);
  }

  std::optional<std::string> readRaw(RecordFamily family, const std::string& key) {
    const std::string folder = recordFamilyName(family);
    if (zooKeeperBackend()) {
      auto node = loop_.run(zk_->get(folder + "/" + key));
      if (node.code == ha::ZkCode::kNoNode) return std::nullopt;
      KJ_REQUIRE(node.ok(), ha::zkCodeName(node.code));
      return node.value.data;
    }
    endTerm();
    services_ = nullptr;
    std::optional<std::string> value;
    withRawDatabase([&](rocksdb::DB& db, rocksdb::ColumnFamilyHandle& handle) {
      std::string bytes;
      const rocksdb::Status status = db.Get(rocksdb::ReadOptions(), &handle, key, &bytes);
      if (status.ok()) value = bytes;
      KJ_REQUIRE(status.ok() || status.IsNotFound(), status.ToString());
    }, folder);
    return value;
  }

  template <typename Body>
  void withRawDatabase(Body&& body, const std::string& family) {
    const std::string path = dir_.path() + "/store";
    std::vector<std::string> names;
    rocksdb::Status status = rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path, &names);
    KJ_REQUIRE(status.ok(), status.ToString());
    std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
    for (const std::string& name : names) descriptors.emplace_back(name, rocksdb::ColumnFamilyOptions());
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* raw = nullptr;
    status = rocksdb::DB::Open(rocksdb::DBOptions(), path, descriptors, &handles, &raw);
    KJ_REQUIRE(status.ok(), status.ToString());
    std::unique_ptr<rocksdb::DB> db(raw);
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == family) body(*db, *handles[i]);
    }
    for (auto* handle : handles) KJ_REQUIRE(db->DestroyColumnFamilyHandle(handle).ok());
    KJ_REQUIRE(db->Close().ok());
  }

  JobGraphStore& graphs() { return stores_->jobGraphs(); }
  JobResultStore& results() { return stores_->jobResults(); }
  JobProgressStore& progress() { return stores_->jobProgress(); }

  // The job ids of every progress record that decodes, in the order recoverAll() gives them.
  std::vector<JobId> recoveredProgressIds() {
    auto recovered = run(progress().recoverAll());
    KJ_REQUIRE(recovered.ok(), recovered.error().message);
    std::vector<JobId> ids;
    for (auto& record : recovered.value().records) {
      ids.push_back(wire::idFromWire<JobId>(record.get().getJobId()));
    }
    return ids;
  }

  template <typename T>
  T run(kj::Promise<T>&& promise) {
    return loop_.run(kj::mv(promise));
  }

  void putGraph(JobId id, const std::string& name, size_t padding = 0) {
    auto message = makeGraph(id, name, padding);
    auto put = run(graphs().put(graphOf(*message)));
    KJ_REQUIRE(put.ok(), put.error().message);  // Throws: the test stops here, not in the helper.
  }

  EventLoop loop_;
  testing::ZooKeeperServer* server_ = nullptr;
  std::string root_;
  testing::TempDir dir_{"regent-store-contract"};
  kj::Own<ha::ZooKeeperClient> zk_;
  std::string latch_;
  uint64_t epoch_ = 0;
  kj::Own<StoreServices> services_;
  kj::Own<LeaderStores> previous_;  // The term before stores_, when a test keeps it open.
  kj::Own<LeaderStores> stores_;
};

// ---- JobGraphs -----------------------------------------------------------------------------

TEST_P(StoreContractTest, AnEmptyStoreListsAndRecoversNothing) {
  openTerm();
  auto ids = run(graphs().listIds());
  ASSERT_TRUE(ids.ok()) << ids.error().message;
  EXPECT_TRUE(ids.value().ids.empty());
  auto recovered = run(graphs().recoverAll());
  ASSERT_TRUE(recovered.ok()) << recovered.error().message;
  EXPECT_TRUE(recovered.value().graphs.empty());
  EXPECT_TRUE(recovered.value().corrupt.empty());
  auto dirty = run(results().listDirty());
  ASSERT_TRUE(dirty.ok()) << dirty.error().message;
  EXPECT_TRUE(dirty.value().results.empty());
}

TEST_P(StoreContractTest, APutJobGraphReadsBackIdentical) {
  openTerm();
  const JobId id = JobId::random();
  auto message = makeGraph(id, "wordcount", 100);
  auto put = run(graphs().put(graphOf(*message)));
  ASSERT_TRUE(put.ok()) << put.error().message;

  auto got = run(graphs().get(id));
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(wire::idFromWire<JobId>(got.value().get().getJobId()), id);
  EXPECT_EQ(got.value().get().toString().flatten(), graphOf(*message).toString().flatten());
}

TEST_P(StoreContractTest, PutReplacesTheJobGraphOfTheSameJob) {
  openTerm();
  const JobId id = JobId::random();
  putGraph(id, "first");
  putGraph(id, "second");
  auto got = run(graphs().get(id));
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(std::string(got.value().get().getName().cStr()), "second");
  auto ids = run(graphs().listIds());
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids.value().ids, std::vector<JobId>{id});
}

TEST_P(StoreContractTest, RemoveDeletesAJobGraphAndSaysWhetherOneExisted) {
  openTerm();
  const JobId kept = JobId::random();
  const JobId removed = JobId::random();
  putGraph(kept, "kept");
  putGraph(removed, "removed");
  auto first = run(graphs().remove(removed));
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_TRUE(first.value());
  auto second = run(graphs().remove(removed));
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_FALSE(second.value());
  auto got = run(graphs().get(removed));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, StoreErrorCode::kNotFound);
  auto ids = run(graphs().listIds());
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids.value().ids, std::vector<JobId>{kept});
}

TEST_P(StoreContractTest, ListAndRecoverReturnEveryJobGraphSortedById) {
  openTerm();
  std::vector<JobId> ids;
  for (int i = 0; i < 25; ++i) {
    ids.push_back(JobId::random());
    putGraph(ids.back(), "job-" + std::to_string(i));
  }
  std::sort(ids.begin(), ids.end());
  auto listed = run(graphs().listIds());
  ASSERT_TRUE(listed.ok()) << listed.error().message;
  EXPECT_EQ(listed.value().ids, ids);
  auto recovered = run(graphs().recoverAll());
  ASSERT_TRUE(recovered.ok()) << recovered.error().message;
  ASSERT_EQ(recovered.value().graphs.size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(wire::idFromWire<JobId>(recovered.value().graphs[i].get().getJobId()), ids[i]);
  }
}

TEST_P(StoreContractTest, UnknownJobIdsAreNotFound) {
  openTerm();
  const JobId unknown = JobId::random();
  auto graph = run(graphs().get(unknown));
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.error().code, StoreErrorCode::kNotFound);
  EXPECT_NE(graph.error().message.find(unknown.toHex()), std::string::npos) << graph.error().message;
  auto removed = run(graphs().remove(unknown));
  ASSERT_TRUE(removed.ok());
  EXPECT_FALSE(removed.value());
  auto result = run(results().get(unknown));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code, StoreErrorCode::kNotFound);
  auto clean = run(results().markClean(unknown));
  ASSERT_FALSE(clean.ok());
  EXPECT_EQ(clean.error().code, StoreErrorCode::kNotFound);
}

TEST_P(StoreContractTest, AJobGraphWithoutAJobIdIsInvalidAndNothingIsWritten) {
  openTerm();
  capnp::MallocMessageBuilder message;
  message.initRoot<wire::JobGraph>().setName("no id");
  auto put = run(graphs().put(message.getRoot<wire::JobGraph>().asReader()));
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.error().code, StoreErrorCode::kInvalid);
  EXPECT_NE(put.error().message.find("jobId"), std::string::npos) << put.error().message;
  auto ids = run(graphs().listIds());
  ASSERT_TRUE(ids.ok());
  EXPECT_TRUE(ids.value().ids.empty());
}

TEST_P(StoreContractTest, SmallAndLargeJobGraphsRoundTripUnderTheDefaultLimits) {
  openTerm();
  const JobId small = JobId::random();
  const JobId large = JobId::random();
  putGraph(small, "s");
  // 900 KiB: near the zookeeper backend's default limit of 960 KiB, well under jute.maxbuffer.
  putGraph(large, "large", 900 * 1024);
  auto got = run(graphs().get(large));
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_GT(got.value().packed().size(), 900u * 1024);
  EXPECT_EQ(got.value().get().getVertices()[0].getCommand().getEnv()[0].getValue().size(),
            900u * 1024);
  auto tiny = run(graphs().get(small));
  ASSERT_TRUE(tiny.ok()) << tiny.error().message;
  EXPECT_EQ(std::string(tiny.value().get().getName().cStr()), "s");
}

TEST_P(StoreContractTest, AJobGraphOverTheLimitIsRefusedNamingJobSizeAndLimitAndNothingIsWritten) {
  openTerm({"store.zookeeper.max-payload=64KiB", "store.rocksdb.max-payload=64KiB"});
  const JobId id = JobId::random();
  putGraph(id, "fits", 60 * 1024);
  auto fits = run(graphs().get(id));
  ASSERT_TRUE(fits.ok()) << fits.error().message;

  auto tooLarge = makeGraph(id, "too-large", 70 * 1024);
  auto put = run(graphs().put(graphOf(*tooLarge)));
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.error().code, StoreErrorCode::kTooLarge);
  const std::string& message = put.error().message;
  EXPECT_NE(message.find(id.toHex()), std::string::npos) << message;
  EXPECT_NE(message.find("too-large"), std::string::npos) << message;
  EXPECT_NE(message.find(std::to_string(64 * 1024)), std::string::npos) << message;

  // The stored graph is still the one that fitted, and nothing else appeared.
  auto after = run(graphs().get(id));
  ASSERT_TRUE(after.ok()) << after.error().message;
  EXPECT_EQ(std::string(after.value().get().getName().cStr()), "fits");
  auto fresh = makeGraph(JobId::random(), "new-and-too-large", 70 * 1024);
  ASSERT_FALSE(run(graphs().put(graphOf(*fresh))).ok());
  auto ids = run(graphs().listIds());
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids.value().ids, std::vector<JobId>{id});
}

TEST_P(StoreContractTest, ConcurrentOperationsIssuedFromTheLoopAllComplete) {
  openTerm();
  std::vector<JobId> ids;
  std::vector<kj::Own<capnp::MallocMessageBuilder>> messages;
  kj::Vector<kj::Promise<StoreResult<void>>> puts;
  for (int i = 0; i < 200; ++i) {
    ids.push_back(JobId::random());
    messages.push_back(makeGraph(ids.back(), "job-" + std::to_string(i), 512));
    puts.add(graphs().put(graphOf(*messages.back())));
  }
  for (auto& put : run(kj::joinPromises(puts.releaseAsArray()))) {
    ASSERT_TRUE(put.ok()) << put.error().message;
  }

  // Gets of every job and removes of the even ones, all in flight at once.
  kj::Vector<kj::Promise<StoreResult<JobGraphMessage>>> gets;
  kj::Vector<kj::Promise<StoreResult<bool>>> removes;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i % 2 == 0) {
      removes.add(graphs().remove(ids[i]));
    } else {
      gets.add(graphs().get(ids[i]));
    }
  }
  auto got = run(kj::joinPromises(gets.releaseAsArray()));
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].ok()) << got[i].error().message;
    EXPECT_EQ(wire::idFromWire<JobId>(got[i].value().get().getJobId()), ids[2 * i + 1]);
  }
  for (auto& removed : run(kj::joinPromises(removes.releaseAsArray()))) {
    ASSERT_TRUE(removed.ok()) << removed.error().message;
    EXPECT_TRUE(removed.value());
  }
  auto listed = run(graphs().listIds());
  ASSERT_TRUE(listed.ok());
  std::vector<JobId> odd;
  for (size_t i = 1; i < ids.size(); i += 2) odd.push_back(ids[i]);
  std::sort(odd.begin(), odd.end());
  EXPECT_EQ(listed.value().ids, odd);
}

TEST_P(StoreContractTest, TheNextTermRecoversWhatTheLastTermWrote) {
  openTerm();
  const JobId id = JobId::random();
  putGraph(id, "survivor", 1000);
  auto dirty = makeResult(JobId::random(), wire::JobState::FAILED, 5000);
  ASSERT_TRUE(run(results().createDirty(resultOf(*dirty))).ok());

  openTerm();  // Fresh services: a new ZooKeeper store / the database closed and reopened.
  auto recovered = run(graphs().recoverAll());
  ASSERT_TRUE(recovered.ok()) << recovered.error().message;
  ASSERT_EQ(recovered.value().graphs.size(), 1u);
  EXPECT_EQ(std::string(recovered.value().graphs[0].get().getName().cStr()), "survivor");
  auto listed = run(results().listDirty());
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed.value().results.size(), 1u);
  EXPECT_EQ(listed.value().results[0].get().getState(), wire::JobState::FAILED);
}

// ---- Fencing -------------------------------------------------------------------------------

TEST_P(StoreContractTest, ANewTermFencesTheWritesOfTheTermBeforeIt) {
  openTerm();
  const JobId id = JobId::random();
  putGraph(id, "from-term-1");
  auto result = makeResult(JobId::random(), wire::JobState::FINISHED, 1000);
  ASSERT_TRUE(run(results().createDirty(resultOf(*result))).ok());

  openNextTerm();  // ZooKeeper: the old latch node is gone; RocksDB: a higher epoch opened it.
  JobGraphStore& stale = previous_->jobGraphs();
  auto replaced = makeGraph(id, "from-stale-term-1");
  auto put = run(stale.put(graphOf(*replaced)));
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.error().code, StoreErrorCode::kFenced) << put.error().message;
  auto removed = run(stale.remove(id));
  ASSERT_FALSE(removed.ok());
  EXPECT_EQ(removed.error().code, StoreErrorCode::kFenced);
  auto clean = run(previous_->jobResults().markClean(wire::idFromWire<JobId>(resultOf(*result).getJobId())));
  ASSERT_FALSE(clean.ok());
  EXPECT_EQ(clean.error().code, StoreErrorCode::kFenced);

  // Unchanged, and the new term writes.
  auto got = run(graphs().get(id));
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(std::string(got.value().get().getName().cStr()), "from-term-1");
  auto dirty = run(results().listDirty());
  ASSERT_TRUE(dirty.ok());
  EXPECT_EQ(dirty.value().results.size(), 1u);
  putGraph(id, "from-term-2");
  auto now = run(graphs().get(id));
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(std::string(now.value().get().getName().cStr()), "from-term-2");
}

// ---- JobResults ----------------------------------------------------------------------------

TEST_P(StoreContractTest, AResultIsCreatedDirtyAndLeavesListDirtyWhenMarkedClean) {
  openTerm();
  const JobId id = JobId::random();
  auto result = makeResult(id, wire::JobState::CANCELED, 42000);
  auto created = run(results().createDirty(resultOf(*result)));
  ASSERT_TRUE(created.ok()) << created.error().message;

  auto got = run(results().get(id));
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_FALSE(got.value().get().getClean());
  EXPECT_EQ(got.value().get().getState(), wire::JobState::CANCELED);
  EXPECT_EQ(got.value().get().getEndedAtMs(), 42000);
  auto dirty = run(results().listDirty());
  ASSERT_TRUE(dirty.ok());
  ASSERT_EQ(dirty.value().results.size(), 1u);

  auto clean = run(results().markClean(id));
  ASSERT_TRUE(clean.ok()) << clean.error().message;
  auto again = run(results().markClean(id));
  ASSERT_TRUE(again.ok()) << again.error().message;
  auto after = run(results().get(id));
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after.value().get().getClean());
  auto dirtyAfter = run(results().listDirty());
  ASSERT_TRUE(dirtyAfter.ok());
  EXPECT_TRUE(dirtyAfter.value().results.empty());
  auto all = run(results().listAll());
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all.value().results.size(), 1u);
}

TEST_P(StoreContractTest, AResultThatIsNotTerminalOrHasNoJobIdIsInvalid) {
  openTerm();
  auto running = makeResult(JobId::random(), wire::JobState::RUNNING, 1);
  auto created = run(results().createDirty(resultOf(*running)));
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.error().code, StoreErrorCode::kInvalid);
  EXPECT_NE(created.error().message.find("terminal"), std::string::npos) << created.error().message;
  capnp::MallocMessageBuilder anonymous;
  anonymous.initRoot<wire::JobResult>().setState(wire::JobState::FINISHED);
  auto noId = run(results().createDirty(anonymous.getRoot<wire::JobResult>().asReader()));
  ASSERT_FALSE(noId.ok());
  EXPECT_EQ(noId.error().code, StoreErrorCode::kInvalid);
  auto all = run(results().listAll());
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all.value().results.empty());
}

TEST_P(StoreContractTest, RetentionKeepsTheNewestCleanResultsAndEveryDirtyOne) {
  openTerm({"store.job-results.retain=3"});
  std::vector<JobId> clean;
  for (int i = 1; i <= 6; ++i) {
    clean.push_back(JobId::random());
    auto result = makeResult(clean.back(), wire::JobState::FINISHED, 1000 * i);
    ASSERT_TRUE(run(results().createDirty(resultOf(*result))).ok());
    auto marked = run(results().markClean(clean.back()));
    ASSERT_TRUE(marked.ok()) << marked.error().message;
  }
  const JobId oldDirty = JobId::random();  // Older than every clean one: never pruned.
  auto dirty = makeResult(oldDirty, wire::JobState::FAILED, 10);
  ASSERT_TRUE(run(results().createDirty(resultOf(*dirty))).ok());

  auto all = run(results().listAll());
  ASSERT_TRUE(all.ok()) << all.error().message;
  std::vector<JobId> listed;
  for (auto& result : all.value().results) listed.push_back(wire::idFromWire<JobId>(result.get().getJobId()));
  EXPECT_EQ(listed, (std::vector<JobId>{clean[5], clean[4], clean[3], oldDirty}));
  for (int i = 0; i < 3; ++i) {
    auto pruned = run(results().get(clean[i]));
    ASSERT_FALSE(pruned.ok()) << "result " << i << " should have been pruned";
    EXPECT_EQ(pruned.error().code, StoreErrorCode::kNotFound);
  }

  // A later term with the same retention keeps pruning from what is stored.
  openTerm({"store.job-results.retain=3"});
  const JobId newest = JobId::random();
  auto result = makeResult(newest, wire::JobState::FINISHED, 99000);
  ASSERT_TRUE(run(results().createDirty(resultOf(*result))).ok());
  ASSERT_TRUE(run(results().markClean(newest)).ok());
  auto gone = run(results().get(clean[3]));
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().code, StoreErrorCode::kNotFound);
  auto kept = run(results().get(oldDirty));
  ASSERT_TRUE(kept.ok()) << kept.error().message;
}

// ---- Job details ---------------------------------------------------------------------------

TEST_P(StoreContractTest, AnEndedJobsDetailIsKeptBesideItsResultForTheNextTerm) {
  openTerm();
  const JobId id = JobId::random();
  auto result = makeResult(id, wire::JobState::FINISHED, 5000);
  ASSERT_TRUE(run(results().createDirty(resultOf(*result))).ok());
  auto detail = makeDetail(id, 3);
  auto put = run(results().putDetail(detail->getRoot<wire::JobStatus>().asReader()));
  ASSERT_TRUE(put.ok()) << put.error().message;
  ASSERT_TRUE(run(results().markClean(id)).ok());

  openTerm();  // A later leader reads it back as it was written.
  auto read = run(results().getDetail(id));
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(read.value().get().toString().flatten(),
            detail->getRoot<wire::JobStatus>().asReader().toString().flatten());
  EXPECT_FALSE(read.value().get().hasSubtasksOmitted());
  auto none = run(results().getDetail(JobId::random()));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, StoreErrorCode::kNotFound);
}

TEST_P(StoreContractTest, ACleanupRemovesGraphAndProgressKeepsTheDetailAndMarksCleanInOneWrite) {
  openTerm();
  const JobId id = JobId::random();
  const JobId other = JobId::random();  // Untouched by the cleanup.
  putGraph(id, "cleaned");
  putGraph(other, "kept");
  auto record = makeProgress(id, 2);
  ASSERT_TRUE(run(progress().put(progressOf(*record))).ok());
  auto result = makeResult(id, wire::JobState::FINISHED, 7000);
  ASSERT_TRUE(run(results().createDirty(resultOf(*result))).ok());
  auto detail = makeDetail(id, 3);
  auto dirtyResult = run(results().get(id));  // What the Dispatcher holds: the dirty result.
  ASSERT_TRUE(dirtyResult.ok()) << dirtyResult.error().message;
  ASSERT_FALSE(dirtyResult.value().get().getClean());

  const uint64_t before = services_->zooKeeperTransactions();
  auto cleaned = run(results().cleanUp(dirtyResult.value().get(),
                                       detail->getRoot<wire::JobStatus>().asReader()));
  ASSERT_TRUE(cleaned.ok()) << cleaned.error().message;
  EXPECT_EQ(cleaned.value(), "");  // The detail was kept.
  if (zooKeeperBackend()) EXPECT_EQ(services_->zooKeeperTransactions() - before, 1u);

  openTerm();  // What the next leader finds.
  auto graph = run(graphs().get(id));
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.error().code, StoreErrorCode::kNotFound);
  EXPECT_TRUE(run(graphs().get(other)).ok());
  EXPECT_TRUE(recoveredProgressIds().empty());
  auto stored = run(results().get(id));
  ASSERT_TRUE(stored.ok()) << stored.error().message;
  EXPECT_TRUE(stored.value().get().getClean());
  auto dirty = run(results().listDirty());
  ASSERT_TRUE(dirty.ok());
  EXPECT_TRUE(dirty.value().results.empty());
  auto read = run(results().getDetail(id));
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(read.value().get().toString().flatten(),
            detail->getRoot<wire::JobStatus>().asReader().toString().flatten());
}

TEST_P(StoreContractTest, ACleanupWithNothingToRemoveAndAnotherJobsDetailStillMarksClean) {
  openTerm();
  const JobId id = JobId::random();
  auto result = makeResult(id, wire::JobState::CANCELED, 7000);
  ASSERT_TRUE(run(results().createDirty(resultOf(*result))).ok());
  auto foreign = makeDetail(JobId::random(), 1);
  auto dirtyResult = run(results().get(id));
  ASSERT_TRUE(dirtyResult.ok()) << dirtyResult.error().message;
  auto cleaned = run(results().cleanUp(dirtyResult.value().get(),
                                       foreign->getRoot<wire::JobStatus>().asReader()));
  ASSERT_TRUE(cleaned.ok()) << cleaned.error().message;
  EXPECT_NE(cleaned.value().find("another job's"), std::string::npos) << cleaned.value();
  auto stored = run(results().get(id));
  ASSERT_TRUE(stored.ok()) << stored.error().message;
  EXPECT_TRUE(stored.value().get().getClean());
  auto none = run(results().getDetail(id));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, StoreErrorCode::kNotFound);
  // Once clean, cleaning up again rewrites nothing of the result and still succeeds.
  auto again = run(results().cleanUp(stored.value().get(), nullptr));
  ASSERT_TRUE(again.ok()) << again.error().message;
}

TEST_P(StoreContractTest, AStaleTermsCleanupIsFencedAndChangesNothing) {
  openTerm();
  const JobId id = JobId::random();
  putGraph(id, "still-running-elsewhere");
  auto record = makeProgress(id, 2);
  ASSERT_TRUE(run(progress().put(progressOf(*record))).ok());
  auto result = makeResult(id, wire::JobState::FAILED, 7000);
  ASSERT_TRUE(run(results().createDirty(resultOf(*result))).ok());

  openNextTerm();
  auto detail = makeDetail(id, 1);
  auto cleaned = run(previous_->jobResults().cleanUp(
      resultOf(*result), detail->getRoot<wire::JobStatus>().asReader()));
  ASSERT_FALSE(cleaned.ok());
  EXPECT_EQ(cleaned.error().code, StoreErrorCode::kFenced) << cleaned.error().message;
  EXPECT_TRUE(run(graphs().get(id)).ok());
  EXPECT_EQ(recoveredProgressIds(), std::vector<JobId>{id});
  auto dirty = run(results().listDirty());
  ASSERT_TRUE(dirty.ok());
  EXPECT_EQ(dirty.value().results.size(), 1u);
  auto none = run(results().getDetail(id));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, StoreErrorCode::kNotFound);
}

TEST_P(StoreContractTest, ADetailOverItsCapIsKeptWithoutSubtaskRowsSayingWhy) {
  openTerm({"store.job-details.max-size=2KiB"});
  const JobId id = JobId::random();
  auto detail = makeDetail(id, 200);
  auto put = run(results().putDetail(detail->getRoot<wire::JobStatus>().asReader()));
  ASSERT_TRUE(put.ok()) << put.error().message;
  auto read = run(results().getDetail(id));
  ASSERT_TRUE(read.ok()) << read.error().message;
  auto kept = read.value().get();
  EXPECT_EQ(kept.getTasks().getTotal(), 200u);  // What sums the rows up stays.
  ASSERT_EQ(kept.getVertices().size(), 1u);
  EXPECT_EQ(kept.getVertices()[0].getParallelism(), 200u);
  EXPECT_EQ(kept.getVertices()[0].getSubtasks().size(), 0u);
  EXPECT_NE(std::string(kept.getSubtasksOmitted().cStr()).find("store.job-details.max-size"),
            std::string::npos)
      << kept.getSubtasksOmitted().cStr();
  // Without a job id nothing is written.
  capnp::MallocMessageBuilder anonymous;
  anonymous.initRoot<wire::JobStatus>().setName("no id");
  auto invalid = run(results().putDetail(anonymous.getRoot<wire::JobStatus>().asReader()));
  ASSERT_FALSE(invalid.ok());
  EXPECT_EQ(invalid.error().code, StoreErrorCode::kInvalid);
}

TEST_P(StoreContractTest, RetentionRemovesADetailWithItsResult) {
  openTerm({"store.job-results.retain=1"});
  std::vector<JobId> ids;
  for (int i = 1; i <= 3; ++i) {
    ids.push_back(JobId::random());
    auto result = makeResult(ids.back(), wire::JobState::FINISHED, 1000 * i);
    ASSERT_TRUE(run(results().createDirty(resultOf(*result))).ok());
    auto detail = makeDetail(ids.back(), 2);
    ASSERT_TRUE(run(results().putDetail(detail->getRoot<wire::JobStatus>().asReader())).ok());
    ASSERT_TRUE(run(results().markClean(ids.back())).ok());
  }
  for (int i = 0; i < 2; ++i) {
    auto pruned = run(results().getDetail(ids[i]));
    ASSERT_FALSE(pruned.ok()) << "the detail of pruned result " << i << " is still kept";
    EXPECT_EQ(pruned.error().code, StoreErrorCode::kNotFound);
  }
  EXPECT_TRUE(run(results().getDetail(ids[2])).ok());
  // Gone from the backend itself (readRaw closes the stores).
  EXPECT_FALSE(readRaw(RecordFamily::kJobDetails, ids[0].toHex()).has_value());
  EXPECT_FALSE(readRaw(RecordFamily::kJobDetails, ids[1].toHex()).has_value());
  EXPECT_TRUE(readRaw(RecordFamily::kJobDetails, ids[2].toHex()).has_value());
}

TEST_P(StoreContractTest, ACorruptDetailIsReportedAndItsResultStillReads) {
  openTerm();
  const JobId id = JobId::random();
  auto result = makeResult(id, wire::JobState::FINISHED, 5000);
  ASSERT_TRUE(run(results().createDirty(resultOf(*result))).ok());
  writeRaw(RecordFamily::kJobDetails, id.toHex(), std::string(40, '\0'));
  openTerm();
  auto detail = run(results().getDetail(id));
  ASSERT_FALSE(detail.ok());
  EXPECT_EQ(detail.error().code, StoreErrorCode::kCorrupt);
  EXPECT_NE(detail.error().message.find(id.toHex()), std::string::npos) << detail.error().message;
  auto stillThere = run(results().get(id));
  ASSERT_TRUE(stillThere.ok()) << stillThere.error().message;
  auto all = run(results().listAll());
  ASSERT_TRUE(all.ok()) << all.error().message;
  EXPECT_EQ(all.value().results.size(), 1u);
  EXPECT_TRUE(all.value().corrupt.empty());
}

// ---- Corruption ----------------------------------------------------------------------------

TEST_P(StoreContractTest, CorruptJobGraphsAreReportedSkippedAndLeftInPlace) {
  openTerm();
  const JobId good = JobId::random();
  putGraph(good, "good");
  const JobId garbage = JobId::random();
  const JobId impostor = JobId::random();
  const JobId other = JobId::random();
  auto otherGraph = makeGraph(other, "someone-else");
  {
    // The packed bytes of another job's graph, stored under `impostor`.
    auto put = run(graphs().put(graphOf(*otherGraph)));
    ASSERT_TRUE(put.ok());
  }
  auto otherBytes = run(graphs().get(other));
  ASSERT_TRUE(otherBytes.ok());
  const std::string otherPacked = otherBytes.value().packed();
  ASSERT_TRUE(run(graphs().remove(other)).ok());

  writeRaw(RecordFamily::kJobGraphs, garbage.toHex(), "\x01\x02 not cap'n proto \xff\xff\xff\xff");
  writeRaw(RecordFamily::kJobGraphs, impostor.toHex(), otherPacked);
  writeRaw(RecordFamily::kJobGraphs, "not-a-job-id", "whatever");
  openTerm();

  auto recovered = run(graphs().recoverAll());
  ASSERT_TRUE(recovered.ok()) << recovered.error().message;
  ASSERT_EQ(recovered.value().graphs.size(), 1u);
  EXPECT_EQ(wire::idFromWire<JobId>(recovered.value().graphs[0].get().getJobId()), good);
  std::map<std::string, std::string> corrupt;
  for (auto& record : recovered.value().corrupt) corrupt[record.key] = record.reason;
  ASSERT_EQ(corrupt.size(), 3u);
  EXPECT_TRUE(corrupt.count(garbage.toHex()));
  EXPECT_NE(corrupt[impostor.toHex()].find(other.toHex()), std::string::npos)
      << corrupt[impostor.toHex()];
  EXPECT_NE(corrupt["not-a-job-id"].find("not a job id"), std::string::npos);

  auto ids = run(graphs().listIds());
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids.value().corrupt.size(), 1u);  // Only the key that is not a job id.
  auto get = run(graphs().get(garbage));
  ASSERT_FALSE(get.ok());
  EXPECT_EQ(get.error().code, StoreErrorCode::kCorrupt);
  EXPECT_NE(get.error().message.find(garbage.toHex()), std::string::npos) << get.error().message;

  // Left in place for an operator.
  EXPECT_TRUE(readRaw(RecordFamily::kJobGraphs, garbage.toHex()).has_value());
  EXPECT_TRUE(readRaw(RecordFamily::kJobGraphs, "not-a-job-id").has_value());
}

// A crafted record lists millions of structs of no size in a few words (the fuzzer found one of
// 512 bytes that took 24 s to read under the sanitizers): it is corrupt, and reading it does not
// walk the list.
TEST_P(StoreContractTest, AJobGraphWhoseListTakesNoSpaceForItsElementsIsCorrupt) {
  writeRegressionAsJobGraph("amplified-jobgraph-vertex-list");
  const JobId id = fuzzSeedJob();
  auto get = run(graphs().get(id));
  ASSERT_FALSE(get.ok());
  EXPECT_EQ(get.error().code, StoreErrorCode::kCorrupt);
  EXPECT_NE(get.error().message.find("an amplified list"), std::string::npos)
      << get.error().message;
  auto recovered = run(graphs().recoverAll());
  ASSERT_TRUE(recovered.ok()) << recovered.error().message;
  EXPECT_TRUE(recovered.value().graphs.empty());
  ASSERT_EQ(recovered.value().corrupt.size(), 1u);
  EXPECT_EQ(recovered.value().corrupt[0].key, id.toHex());
}

// Two packed bytes whose segment table claims a segment of almost 8 million words (64 MiB):
// corrupt, named so, without the decoder allocating what the table claims (the fuzzer found it:
// seconds per read under the sanitizers).
TEST_P(StoreContractTest, ARecordWhoseSegmentTableClaimsMoreThanItsBytesHoldIsCorrupt) {
  ASSERT_EQ(writeRegressionAsJobGraph("progress-segment-table-claims-64mib"), 2u);
  auto get = run(graphs().get(fuzzSeedJob()));
  ASSERT_FALSE(get.ok());
  EXPECT_EQ(get.error().code, StoreErrorCode::kCorrupt);
  EXPECT_NE(get.error().message.find("its segment table claims 7995393 words, more than 2 packed "
                                     "bytes can hold"),
            std::string::npos)
      << get.error().message;
}

TEST_P(StoreContractTest, CorruptResultsAreReportedSkippedAndNeverPruned) {
  openTerm({"store.job-results.retain=1"});
  const JobId garbage = JobId::random();
  writeRaw(RecordFamily::kJobResults, garbage.toHex(), std::string(40, '\0'));
  openTerm({"store.job-results.retain=1"});
  for (int i = 1; i <= 3; ++i) {
    const JobId id = JobId::random();
    auto result = makeResult(id, wire::JobState::FINISHED, 1000 * i);
    ASSERT_TRUE(run(results().createDirty(resultOf(*result))).ok());
    ASSERT_TRUE(run(results().markClean(id)).ok());
  }
  auto dirty = run(results().listDirty());
  ASSERT_TRUE(dirty.ok()) << dirty.error().message;
  EXPECT_TRUE(dirty.value().results.empty());
  ASSERT_EQ(dirty.value().corrupt.size(), 1u);
  EXPECT_EQ(dirty.value().corrupt[0].key, garbage.toHex());
  auto all = run(results().listAll());
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all.value().results.size(), 1u);
  EXPECT_TRUE(readRaw(RecordFamily::kJobResults, garbage.toHex()).has_value());
}

// ---- JobProgress ---------------------------------------------------------------------------

TEST_P(StoreContractTest, AProgressRecordIsReplacedByItsNextPutRecoveredAndRemoved) {
  openTerm();
  EXPECT_TRUE(recoveredProgressIds().empty());
  std::vector<JobId> ids{JobId::random(), JobId::random(), JobId::random()};
  for (const JobId& id : ids) {
    auto record = makeProgress(id, 2);
    auto put = run(progress().put(progressOf(*record)));
    ASSERT_TRUE(put.ok()) << put.error().message;
  }
  auto replacement = makeProgress(ids[1], 3, 2);
  ASSERT_TRUE(run(progress().put(progressOf(*replacement))).ok());

  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(recoveredProgressIds(), ids);  // Sorted by job id.
  auto recovered = run(progress().recoverAll());
  ASSERT_TRUE(recovered.ok()) << recovered.error().message;
  EXPECT_TRUE(recovered.value().corrupt.empty());
  for (auto& record : recovered.value().records) {
    if (wire::idFromWire<JobId>(record.get().getJobId()) != wire::idFromWire<JobId>(
                                                               progressOf(*replacement).getJobId())) {
      continue;
    }
    // What was put last, field for field.
    EXPECT_EQ(capnp::canonicalize(record.get()).asBytes(),
              capnp::canonicalize(progressOf(*replacement)).asBytes());
  }

  const JobId removed = ids[0];
  auto first = run(progress().remove(removed));
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_TRUE(first.value());
  auto again = run(progress().remove(removed));
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_FALSE(again.value());
  EXPECT_EQ(recoveredProgressIds(), (std::vector<JobId>{ids[1], ids[2]}));

  openTerm();  // The next term reads what this one left.
  EXPECT_EQ(recoveredProgressIds(), (std::vector<JobId>{ids[1], ids[2]}));
}

TEST_P(StoreContractTest, AProgressRecordWithoutAJobIdIsInvalidAndNothingIsWritten) {
  openTerm();
  capnp::MallocMessageBuilder message;
  message.initRoot<wire::JobProgress>().initSubtasks(1)[0].setSubtask(0);
  auto put = run(progress().put(message.getRoot<wire::JobProgress>().asReader()));
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.error().code, StoreErrorCode::kInvalid);
  EXPECT_NE(put.error().message.find("jobId"), std::string::npos) << put.error().message;
  EXPECT_TRUE(recoveredProgressIds().empty());
}

TEST_P(StoreContractTest, AProgressRecordOfTheMostSubtasksAJobMayHaveFitsUnderTheDefaultLimits) {
  openTerm();
  const JobId id = JobId::random();
  auto record = makeProgress(id, 10000);  // jobmaster.max-subtasks' default.
  auto put = run(progress().put(progressOf(*record)));
  ASSERT_TRUE(put.ok()) << put.error().message;
  auto recovered = run(progress().recoverAll());
  ASSERT_TRUE(recovered.ok()) << recovered.error().message;
  ASSERT_EQ(recovered.value().records.size(), 1u);
  EXPECT_EQ(recovered.value().records[0].get().getSubtasks().size(), 10000u);
  // docs/stores.md gives the size per subtask (these carry no worker): at most 32 bytes,
  // packed (packed() is the record merged back from its parts).
  EXPECT_LE(recovered.value().records[0].packed().size(), 10000u * 32);
}

TEST_P(StoreContractTest, ALargeJobsProgressPartsAreStoredReadBackAndRemovedWithItsRecord) {
  openTerm();
  const JobId id = JobId::random();
  const uint32_t subtasks = 3 * kProgressPartSubtasks + 1;  // Parts 0-3 beside the record.
  auto record = makeProgress(id, subtasks);
  ASSERT_TRUE(run(progress().put(progressOf(*record))).ok());
  // One subtask of part 2 ends, and the job restarts: the record and part 2 are rewritten.
  auto root = record->getRoot<wire::JobProgress>();
  root.getSubtasks()[2 * kProgressPartSubtasks].setState(wire::ExecutionState::FINISHED);
  root.setRestarts(1);
  ASSERT_TRUE(run(progress().put(progressOf(*record))).ok());
  const std::string last = id.toHex() + "-3";
  EXPECT_TRUE(readRaw(RecordFamily::kJobProgressParts, last).has_value());

  openTerm();  // The next term reads the record whole, as last put.
  auto recovered = run(progress().recoverAll());
  ASSERT_TRUE(recovered.ok()) << recovered.error().message;
  ASSERT_EQ(recovered.value().records.size(), 1u);
  const auto merged = recovered.value().records[0].get();
  EXPECT_EQ(merged.getRestarts(), 1u);
  ASSERT_EQ(merged.getSubtasks().size(), subtasks);
  for (uint32_t i = 0; i < subtasks; ++i) {
    const auto want = progressOf(*record).getSubtasks()[i];
    EXPECT_EQ(merged.getSubtasks()[i].getSubtask(), i);
    EXPECT_EQ(merged.getSubtasks()[i].getState(), want.getState()) << i;
    EXPECT_EQ(wire::idFromWire<AttemptId>(merged.getSubtasks()[i].getAttemptId()),
              wire::idFromWire<AttemptId>(want.getAttemptId()));
  }
  // Back to subtasks of part 0 only: the parts are removed in the same transaction.
  auto small = makeProgress(id, 2);
  ASSERT_TRUE(run(progress().put(progressOf(*small))).ok());
  EXPECT_FALSE(readRaw(RecordFamily::kJobProgressParts, last).has_value());
  EXPECT_FALSE(readRaw(RecordFamily::kJobProgressParts, id.toHex() + "-0").has_value());
  openTerm();
  auto large = makeProgress(id, subtasks);
  ASSERT_TRUE(run(progress().put(progressOf(*large))).ok());
  auto removed = run(progress().remove(id));
  ASSERT_TRUE(removed.ok()) << removed.error().message;
  EXPECT_FALSE(readRaw(RecordFamily::kJobProgressParts, last).has_value());
  EXPECT_FALSE(readRaw(RecordFamily::kJobProgress, id.toHex()).has_value());
}

TEST_P(StoreContractTest, AProgressRecordOverTheLimitIsRefusedNamingTheJobAndNothingIsWritten) {
  openTerm({"store.zookeeper.max-payload=64KiB", "store.rocksdb.max-payload=64KiB"});
  const JobId id = JobId::random();
  auto fits = makeProgress(id, 100);
  ASSERT_TRUE(run(progress().put(progressOf(*fits))).ok());

  auto tooLarge = makeProgress(id, 5000);
  auto put = run(progress().put(progressOf(*tooLarge)));
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.error().code, StoreErrorCode::kTooLarge);
  const std::string& message = put.error().message;
  EXPECT_NE(message.find(id.toHex()), std::string::npos) << message;
  EXPECT_NE(message.find("progress"), std::string::npos) << message;
  EXPECT_NE(message.find(std::to_string(64 * 1024)), std::string::npos) << message;

  // The record that fitted stays, and a new job's record too large is not written either.
  auto recovered = run(progress().recoverAll());
  ASSERT_TRUE(recovered.ok()) << recovered.error().message;
  ASSERT_EQ(recovered.value().records.size(), 1u);
  EXPECT_EQ(recovered.value().records[0].get().getSubtasks().size(), 100u);
  auto fresh = makeProgress(JobId::random(), 5000);
  ASSERT_FALSE(run(progress().put(progressOf(*fresh))).ok());
  EXPECT_EQ(recoveredProgressIds(), std::vector<JobId>{id});
}

TEST_P(StoreContractTest, AdmitsSaysAheadWhetherAJobsProgressRecordCanAlwaysBeStored) {
  openTerm({"store.zookeeper.max-payload=64KiB", "store.rocksdb.max-payload=64KiB"});
  // What admits() lets through, a put of the same number of subtasks stores.
  uint32_t admitted = 0;
  for (uint32_t subtasks : {1u, 100u, 500u}) {
    if (!progress().admits(subtasks).ok()) break;
    admitted = subtasks;
    auto record = makeProgress(JobId::random(), subtasks);
    auto put = run(progress().put(progressOf(*record)));
    EXPECT_TRUE(put.ok()) << subtasks << ": " << put.error().message;
  }
  EXPECT_EQ(admitted, 500u);
  // A record too large to put is refused ahead, naming the count and the limit's option.
  auto refused = progress().admits(5000);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, StoreErrorCode::kTooLarge);
  EXPECT_NE(refused.error().message.find("5000 subtasks"), std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().message.find(std::to_string(64 * 1024)), std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().message.find(".max-payload"), std::string::npos)
      << refused.error().message;
  // Under the default limits, the most subtasks a job may have (jobmaster.max-subtasks) fit.
  openTerm();
  EXPECT_TRUE(progress().admits(10000).ok());
}

TEST_P(StoreContractTest, ANewTermFencesTheProgressWritesOfTheTermBeforeIt) {
  openTerm();
  const JobId id = JobId::random();
  auto written = makeProgress(id, 2, 1);
  ASSERT_TRUE(run(progress().put(progressOf(*written))).ok());

  openNextTerm();
  JobProgressStore& stale = previous_->jobProgress();
  auto late = makeProgress(id, 2, 5);
  auto put = run(stale.put(progressOf(*late)));
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.error().code, StoreErrorCode::kFenced) << put.error().message;
  auto fresh = makeProgress(JobId::random(), 1);
  auto created = run(stale.put(progressOf(*fresh)));
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.error().code, StoreErrorCode::kFenced) << created.error().message;
  auto removed = run(stale.remove(id));
  ASSERT_FALSE(removed.ok());
  EXPECT_EQ(removed.error().code, StoreErrorCode::kFenced) << removed.error().message;

  // Unchanged: the record the old term wrote while it led, and nothing else.
  auto recovered = run(progress().recoverAll());
  ASSERT_TRUE(recovered.ok()) << recovered.error().message;
  ASSERT_EQ(recovered.value().records.size(), 1u);
  EXPECT_EQ(recovered.value().records[0].get().getRestarts(), 1u);
  // The new term writes.
  ASSERT_TRUE(run(progress().put(progressOf(*late))).ok());
  auto now = run(progress().recoverAll());
  ASSERT_TRUE(now.ok());
  ASSERT_EQ(now.value().records.size(), 1u);
  EXPECT_EQ(now.value().records[0].get().getRestarts(), 5u);
}

TEST_P(StoreContractTest, CorruptProgressRecordsAreReportedSkippedAndLeftInPlace) {
  openTerm();
  const JobId good = JobId::random();
  auto record = makeProgress(good, 2);
  ASSERT_TRUE(run(progress().put(progressOf(*record))).ok());
  const JobId garbage = JobId::random();
  const JobId impostor = JobId::random();
  auto others = makeProgress(JobId::random(), 1);
  const std::string otherPacked = [&] {
    // Another job's packed record, read back through a term of its own.
    const JobId other = wire::idFromWire<JobId>(progressOf(*others).getJobId());
    KJ_REQUIRE(run(progress().put(progressOf(*others))).ok());
    auto all = run(progress().recoverAll());
    KJ_REQUIRE(all.ok());
    std::string packed;
    for (auto& stored : all.value().records) {
      if (wire::idFromWire<JobId>(stored.get().getJobId()) == other) packed = stored.packed();
    }
    KJ_REQUIRE(run(progress().remove(other)).ok());
    return packed;
  }();
  ASSERT_FALSE(otherPacked.empty());
  writeRaw(RecordFamily::kJobProgress, garbage.toHex(), "\x01\x02 not cap'n proto \xff\xff\xff");
  writeRaw(RecordFamily::kJobProgress, impostor.toHex(), otherPacked);
  openTerm();

  auto recovered = run(progress().recoverAll());
  ASSERT_TRUE(recovered.ok()) << recovered.error().message;
  ASSERT_EQ(recovered.value().records.size(), 1u);
  EXPECT_EQ(wire::idFromWire<JobId>(recovered.value().records[0].get().getJobId()), good);
  std::map<std::string, std::string> corrupt;
  for (auto& bad : recovered.value().corrupt) corrupt[bad.key] = bad.reason;
  ASSERT_EQ(corrupt.size(), 2u);
  EXPECT_TRUE(corrupt.count(garbage.toHex()));
  EXPECT_NE(corrupt[impostor.toHex()].find("carries job id"), std::string::npos)
      << corrupt[impostor.toHex()];
  EXPECT_TRUE(readRaw(RecordFamily::kJobProgress, garbage.toHex()).has_value());

  // A corrupt record is replaced by its job's next put, and removed like any other.
  openTerm();
  auto replacement = makeProgress(garbage, 1);
  ASSERT_TRUE(run(progress().put(progressOf(*replacement))).ok());
  auto removed = run(progress().remove(impostor));
  ASSERT_TRUE(removed.ok()) << removed.error().message;
  EXPECT_TRUE(removed.value());
  auto after = run(progress().recoverAll());
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after.value().corrupt.empty());
  EXPECT_EQ(after.value().records.size(), 2u);
}

TEST_P(StoreContractTest, AStoreWrittenBeforeTheProgressRecordsExistedOpensAndGainsThem) {
  openTerm();
  const JobId id = JobId::random();
  putGraph(id, "older");
  // What an earlier version left: no job-progress nor job-progress-parts folder / column family.
  endTerm();
  services_ = nullptr;
  for (RecordFamily dropped : {RecordFamily::kJobProgress, RecordFamily::kJobProgressParts}) {
    const std::string family = recordFamilyName(dropped);
    if (zooKeeperBackend()) {
      auto removed = loop_.run(zk_->remove(family));
      ASSERT_TRUE(removed.ok()) << ha::zkCodeName(removed.code);
    } else {
      withRawDatabase([](rocksdb::DB& db, rocksdb::ColumnFamilyHandle& handle) {
        const rocksdb::Status dropped = db.DropColumnFamily(&handle);
        KJ_REQUIRE(dropped.ok(), dropped.ToString());
      }, family);
      std::vector<std::string> names;
      ASSERT_TRUE(
          rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir_.path() + "/store", &names)
              .ok());
      ASSERT_EQ(std::count(names.begin(), names.end(), family), 0);
    }
  }

  openTerm();
  EXPECT_TRUE(recoveredProgressIds().empty());
  auto graph = run(graphs().get(id));
  ASSERT_TRUE(graph.ok()) << graph.error().message;
  auto record = makeProgress(id, 2 * kProgressPartSubtasks);  // The record and parts 0 and 1.
  ASSERT_TRUE(run(progress().put(progressOf(*record))).ok());
  openTerm();
  auto recovered = run(progress().recoverAll());
  ASSERT_TRUE(recovered.ok()) << recovered.error().message;
  ASSERT_EQ(recovered.value().records.size(), 1u);
  EXPECT_EQ(recovered.value().records[0].get().getSubtasks().size(), 2 * kProgressPartSubtasks);
}

TEST_P(StoreContractTest, AutoPicksTheBackendThatFollowsTheHaMode) {
  // The fixture's config names this backend and the ha.mode it needs; auto must agree.
  auto services = StoreServices::create(loop_, config({"store.backend=auto"}), zk_.get());
  ASSERT_TRUE(services.ok()) << services.error().message;
  EXPECT_EQ(std::string(storeBackendName(services.value()->backend())), GetParam());
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreContractTest, ::testing::Values("zookeeper", "rocksdb"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace regent::store

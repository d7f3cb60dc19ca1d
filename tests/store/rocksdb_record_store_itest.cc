// The RocksDB backend on a real directory: round trips, epoch fencing within one process and
// across reopen, the directory lock held by another live process (store-test-tool hold), and
// refused writes that leave nothing behind. The backend-neutral behaviour is in the contract
// suite (store_contract_itest.cc).
#include <gtest/gtest.h>
#include <kj/async.h>
#include <kj/debug.h>
#include <kj/vector.h>
#include <rocksdb/db.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "common/event_loop.h"
#include "conf/config.h"
#include "store/rocksdb_record_store.h"
#include "store/store_services.h"
#include "tests/fixtures/loop_wait_test_util.h"
#include "tests/fixtures/process_harness.h"
#include "tests/fixtures/temp_dir_test_util.h"

namespace regent::store {
namespace {

using testing::ProcessHarness;
using testing::ProcessOptions;
using testing::TempDir;

constexpr auto kGraphs = RecordFamily::kJobGraphs;
constexpr auto kResults = RecordFamily::kJobResults;
constexpr Duration kProcessWait{30000};

#define ASSERT_STORE_OK(expr)                                              \
  do {                                                                     \
    const auto& storeResult = (expr);                                      \
    ASSERT_TRUE(storeResult.ok()) << storeResult.error().message;          \
  } while (false)

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Counts the lines logged through the default logger (at any level, from any thread) that
// contain `text`, from construction to destruction, which puts the previous logger back.
class LogLineCounter {
 public:
  explicit LogLineCounter(std::string text)
      : count_(std::make_shared<std::atomic<int>>(0)), previous_(spdlog::default_logger()) {
    auto logger = std::make_shared<spdlog::logger>(
        "counted", std::make_shared<Sink>(std::move(text), count_));
    logger->set_level(spdlog::level::debug);
    spdlog::set_default_logger(std::move(logger));
  }
  ~LogLineCounter() { spdlog::set_default_logger(previous_); }
  LogLineCounter(const LogLineCounter&) = delete;
  LogLineCounter& operator=(const LogLineCounter&) = delete;

  int count() const { return count_->load(); }

 private:
  class Sink final : public spdlog::sinks::base_sink<std::mutex> {
   public:
    Sink(std::string text, std::shared_ptr<std::atomic<int>> count)
        : text_(std::move(text)), count_(std::move(count)) {}

   protected:
    void sink_it_(const spdlog::details::log_msg& message) override {
      const std::string_view payload(message.payload.data(), message.payload.size());
      if (payload.find(text_) != std::string_view::npos) ++*count_;
    }
    void flush_() override {}

   private:
    const std::string text_;
    std::shared_ptr<std::atomic<int>> count_;
  };

  std::shared_ptr<std::atomic<int>> count_;
  std::shared_ptr<spdlog::logger> previous_;
};

class RocksDbRecordStoreTest : public ::testing::Test {
 protected:
  RocksDbRecordStoreTest() : dir_("rocksdb-store"), path_(dir_.path() + "/db") {}

  RocksDbOptions options(Duration lockTimeout = Duration(10000)) const {
    RocksDbOptions result;
    result.path = path_;
    result.maxPayload = 4096;
    result.lockTimeout = lockTimeout;
    return result;
  }

  StoreResult<kj::Own<RocksDbDatabase>> open(RocksDbOptions opts) {
    return loop_.run(RocksDbDatabase::open(loop_, std::move(opts)));
  }

  kj::Own<RocksDbDatabase> openOrDie() {
    auto db = open(options());
    KJ_REQUIRE(db.ok(), db.error().message);
    return kj::mv(db).value();
  }

  kj::Own<RecordStore> termOrDie(RocksDbDatabase& db, uint64_t epoch) {
    auto store = loop_.run(db.openTerm(epoch));
    KJ_REQUIRE(store.ok(), store.error().message);
    return kj::mv(store).value();
  }

  std::optional<std::string> get(RecordStore& store, RecordFamily family, const std::string& key) {
    auto result = loop_.run(store.get(family, key));
    KJ_REQUIRE(result.ok(), result.error().message);
    return result.value();
  }

  std::vector<std::string> keys(RecordStore& store, RecordFamily family) {
    auto result = loop_.run(store.listKeys(family));
    KJ_REQUIRE(result.ok(), result.error().message);
    return result.value();
  }

  // Starts `store-test-tool hold` on path_ and waits until it holds the lock; returns its pid.
  std::unique_ptr<ProcessHarness> startHolder() {
    ProcessOptions process;
    process.argv = {REGENT_BIN_DIR "/store-test-tool", "hold", "--path", path_};
    process.outputPath = dir_.path() + "/holder.log";
    auto holder = ProcessHarness::start(process);
    KJ_REQUIRE(holder.ok(), holder.error().message);
    auto line = holder.value()->waitForLine(std::regex("^locked pid=\\d+"), kProcessWait);
    KJ_REQUIRE(line.ok(), line.error().message);
    return std::move(holder).value();
  }

  TempDir dir_;
  std::string path_;
  EventLoop loop_;
};

TEST_F(RocksDbRecordStoreTest, RecordsRoundTripSortedPerFamilyAndSurviveReopen) {
  auto db = openOrDie();
  EXPECT_EQ(db->path(), path_);
  EXPECT_EQ(db->highestEpoch(), 0u);
  auto store = termOrDie(*db, 1);
  EXPECT_EQ(store->maxRecordSize(), 4096u);

  for (std::string key : {"cc", "aa", "bb"}) {
    ASSERT_STORE_OK(loop_.run(store->put(kGraphs, key, "graph-" + key)));
  }
  ASSERT_STORE_OK(loop_.run(store->put(kResults, "aa", std::string("result\0aa", 9))));
  ASSERT_STORE_OK(loop_.run(store->put(kGraphs, "bb", "graph-bb-replaced")));

  EXPECT_EQ(get(*store, kGraphs, "aa"), "graph-aa");
  EXPECT_EQ(get(*store, kGraphs, "bb"), "graph-bb-replaced");
  EXPECT_EQ(get(*store, kResults, "aa"), std::string("result\0aa", 9));
  EXPECT_EQ(get(*store, kResults, "bb"), std::nullopt);
  EXPECT_EQ(keys(*store, kGraphs), (std::vector<std::string>{"aa", "bb", "cc"}));
  EXPECT_EQ(keys(*store, kResults), (std::vector<std::string>{"aa"}));

  auto all = loop_.run(store->readAll(kGraphs));
  ASSERT_STORE_OK(all);
  ASSERT_EQ(all.value().size(), 3u);
  EXPECT_EQ(all.value()[0].key, "aa");
  EXPECT_EQ(all.value()[1].bytes, "graph-bb-replaced");
  EXPECT_EQ(all.value()[2].bytes, "graph-cc");

  auto removed = loop_.run(store->remove(kGraphs, "cc"));
  ASSERT_STORE_OK(removed);
  EXPECT_TRUE(removed.value());
  auto removedAgain = loop_.run(store->remove(kGraphs, "cc"));
  ASSERT_STORE_OK(removedAgain);
  EXPECT_FALSE(removedAgain.value());

  store = nullptr;
  loop_.run(db->close());
  db = nullptr;

  auto reopened = openOrDie();
  EXPECT_EQ(reopened->highestEpoch(), 1u);
  auto again = termOrDie(*reopened, 1);
  EXPECT_EQ(keys(*again, kGraphs), (std::vector<std::string>{"aa", "bb"}));
  EXPECT_EQ(get(*again, kResults, "aa"), std::string("result\0aa", 9));
}

TEST_F(RocksDbRecordStoreTest, AHigherEpochFencesTheOlderStoreWhoseWritesThenChangeNothing) {
  auto db = openOrDie();
  auto term5 = termOrDie(*db, 5);
  ASSERT_STORE_OK(loop_.run(term5->put(kGraphs, "a", "from-5")));

  auto term6 = termOrDie(*db, 6);
  EXPECT_EQ(db->highestEpoch(), 6u);

  auto put = loop_.run(term5->put(kGraphs, "a", "late-5"));
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.error().code, StoreErrorCode::kFenced);
  EXPECT_TRUE(contains(put.error().message, "epoch 5")) << put.error().message;
  EXPECT_TRUE(contains(put.error().message, "epoch 6")) << put.error().message;
  EXPECT_TRUE(contains(put.error().message, "jobgraphs/a")) << put.error().message;

  auto created = loop_.run(term5->put(kResults, "b", "late-5"));
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.error().code, StoreErrorCode::kFenced);

  auto removed = loop_.run(term5->remove(kGraphs, "a"));
  ASSERT_FALSE(removed.ok());
  EXPECT_EQ(removed.error().code, StoreErrorCode::kFenced);

  // Reads are never fenced, and show that nothing changed.
  EXPECT_EQ(get(*term5, kGraphs, "a"), "from-5");
  EXPECT_EQ(get(*term6, kGraphs, "a"), "from-5");
  EXPECT_EQ(keys(*term6, kResults), std::vector<std::string>{});

  ASSERT_STORE_OK(loop_.run(term6->put(kGraphs, "a", "from-6")));
  auto removedBy6 = loop_.run(term6->remove(kResults, "nothing"));
  ASSERT_STORE_OK(removedBy6);
  EXPECT_FALSE(removedBy6.value());
  EXPECT_EQ(get(*term5, kGraphs, "a"), "from-6");

  auto lower = loop_.run(db->openTerm(5));
  ASSERT_FALSE(lower.ok());
  EXPECT_EQ(lower.error().code, StoreErrorCode::kFenced);
  EXPECT_TRUE(contains(lower.error().message, "epoch 5")) << lower.error().message;
  EXPECT_TRUE(contains(lower.error().message, "epoch 6")) << lower.error().message;
}

TEST_F(RocksDbRecordStoreTest, WritesOfTheOlderTermInFlightFinishBeforeTheNewTermOpens) {
  auto db = openOrDie();
  // Whether a write would still be running when the new term opens depends on the thread pool's
  // timing, so the hand-over is repeated to give a missing wait many chances to show.
  constexpr uint64_t kTerms = 12;
  constexpr int kWrites = 48;
  auto older = termOrDie(*db, 1);
  for (uint64_t epoch = 2; epoch <= kTerms; ++epoch) {
    SCOPED_TRACE("opening epoch " + std::to_string(epoch));
    int acknowledged = 0;
    kj::Vector<kj::Promise<void>> writes;
    for (int i = 0; i < kWrites; ++i) {
      // A third of the writes remove records that earlier rounds put.
      const std::string key = "k" + std::to_string(100 + i);
      if ((i + epoch) % 3 == 0) {
        writes.add(older->remove(kGraphs, key)
                       .then([&acknowledged](StoreResult<bool> result) {
                         KJ_REQUIRE(result.ok(), result.error().message);
                         ++acknowledged;
                       })
                       .eagerlyEvaluate(nullptr));
      } else {
        writes.add(older->put(kGraphs, key, std::string(1000, 'x'))
                       .then([&acknowledged](StoreResult<void> result) {
                         KJ_REQUIRE(result.ok(), result.error().message);
                         ++acknowledged;
                       })
                       .eagerlyEvaluate(nullptr));
      }
    }
    auto opening = db->openTerm(epoch);
    // From the call of openTerm() on, the older term may not start a write.
    auto refused = loop_.run(older->put(kGraphs, "after", "x"));
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().code, StoreErrorCode::kFenced);

    int acknowledgedWhenOpened = -1;
    auto newer = loop_.run(opening.then([&](StoreResult<kj::Own<RecordStore>> store) {
      acknowledgedWhenOpened = acknowledged;
      return store;
    }));
    ASSERT_STORE_OK(newer);
    loop_.run(kj::joinPromises(writes.releaseAsArray()));
    ASSERT_EQ(acknowledgedWhenOpened, kWrites);
    older = kj::mv(newer).value();
  }
  EXPECT_EQ(get(*older, kGraphs, "after"), std::nullopt);
}

TEST_F(RocksDbRecordStoreTest, RecordedEpochSurvivesReopenAndRefusesLowerTerms) {
  {
    auto db = openOrDie();
    auto store = termOrDie(*db, 6);
    ASSERT_STORE_OK(loop_.run(store->put(kGraphs, "a", "from-6")));
    store = nullptr;
    loop_.run(db->close());
  }
  auto db = openOrDie();
  EXPECT_EQ(db->highestEpoch(), 6u);

  auto lower = loop_.run(db->openTerm(4));
  ASSERT_FALSE(lower.ok());
  EXPECT_EQ(lower.error().code, StoreErrorCode::kFenced);
  EXPECT_TRUE(contains(lower.error().message, "epoch 4")) << lower.error().message;
  EXPECT_TRUE(contains(lower.error().message, "epoch 6")) << lower.error().message;
  EXPECT_TRUE(contains(lower.error().message, path_)) << lower.error().message;

  // A restart within the same term may reopen it.
  auto same = termOrDie(*db, 6);
  ASSERT_STORE_OK(loop_.run(same->put(kGraphs, "b", "from-6-again")));
  EXPECT_EQ(get(*same, kGraphs, "a"), "from-6");

  auto higher = termOrDie(*db, 9);
  EXPECT_EQ(db->highestEpoch(), 9u);
  same = nullptr;
  higher = nullptr;
  // Destroyed without close(): the destructor closes the database, so it can be opened again.
  db = nullptr;

  auto reopened = openOrDie();
  EXPECT_EQ(reopened->highestEpoch(), 9u);
  auto stale = loop_.run(reopened->openTerm(8));
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.error().code, StoreErrorCode::kFenced);
}

TEST_F(RocksDbRecordStoreTest, PutOverTheLimitIsRefusedNamingKeySizeAndLimitAndWritesNothing) {
  auto db = openOrDie();
  auto store = termOrDie(*db, 1);
  auto tooLarge = loop_.run(store->put(kGraphs, "big", std::string(4097, 'x')));
  ASSERT_FALSE(tooLarge.ok());
  EXPECT_EQ(tooLarge.error().code, StoreErrorCode::kTooLarge);
  EXPECT_FALSE(tooLarge.error().retryable());
  const std::string& message = tooLarge.error().message;
  EXPECT_TRUE(contains(message, "jobgraphs/big")) << message;
  EXPECT_TRUE(contains(message, "4097")) << message;
  EXPECT_TRUE(contains(message, "4096")) << message;
  EXPECT_EQ(get(*store, kGraphs, "big"), std::nullopt);
  EXPECT_EQ(keys(*store, kGraphs), std::vector<std::string>{});

  ASSERT_STORE_OK(loop_.run(store->put(kGraphs, "big", std::string(4096, 'x'))));
  EXPECT_EQ(get(*store, kGraphs, "big")->size(), 4096u);
}

TEST_F(RocksDbRecordStoreTest, DirectoryLockedByAnotherProcessFailsNamingThePathAndItsPid) {
  auto holder = startHolder();
  auto db = open(options(Duration(300)));
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.error().code, StoreErrorCode::kUnavailable);
  EXPECT_TRUE(db.error().retryable());
  EXPECT_TRUE(contains(db.error().message, path_)) << db.error().message;
  EXPECT_TRUE(contains(db.error().message, "pid " + std::to_string(holder->pid())))
      << db.error().message;
  EXPECT_TRUE(contains(db.error().message, "store.rocksdb.lock-timeout")) << db.error().message;
  EXPECT_TRUE(holder->running()) << holder->output();
}

TEST_F(RocksDbRecordStoreTest, StoreServicesOpenGivesUpAfterTheLockTimeoutNamingPathAndOption) {
  // What a master does before it contends: open the store services' database up front.
  auto config = loadConfig(ConfigSources{
      .set = {"ha.mode=standalone", "store.rocksdb.path=" + path_,
              "store.rocksdb.lock-timeout=300ms"}});
  ASSERT_TRUE(config.ok()) << config.error().message;
  auto services = StoreServices::create(loop_, config.value(), nullptr);
  ASSERT_TRUE(services.ok()) << services.error().message;
  auto holder = startHolder();
  auto opened = loop_.run(services.value()->open());
  ASSERT_FALSE(opened.ok());
  EXPECT_TRUE(contains(opened.error().message, path_)) << opened.error().message;
  EXPECT_TRUE(contains(opened.error().message, "store.rocksdb.lock-timeout"))
      << opened.error().message;

  // Once the holder is gone, the next open succeeds and the term's stores use that database.
  ASSERT_TRUE(holder->terminate().ok());
  auto exit = holder->waitForExit(kProcessWait);
  ASSERT_TRUE(exit.has_value()) << holder->output();
  ASSERT_STORE_OK(loop_.run(services.value()->open()));
  ASSERT_STORE_OK(loop_.run(services.value()->openTerm(StoreTerm{1, ""})));
  loop_.run(services.value()->close());
}

TEST_F(RocksDbRecordStoreTest, OpenRetriesAndSucceedsOnceTheHolderExits) {
  auto holder = startHolder();
  // Every attempt that finds the directory locked says it retries (a debug line), after deciding
  // not to end the open: the third such line comes after three attempts that did not end it.
  LogLineCounter retries("; retrying in ");
  bool opened = false;
  auto opening = RocksDbDatabase::open(loop_, options(Duration(60000)))
                     .then([&opened](StoreResult<kj::Own<RocksDbDatabase>> db) {
                       opened = true;
                       return db;
                     })
                     .eagerlyEvaluate(nullptr);
  ASSERT_TRUE(testing::runLoopUntil(
      loop_, [&] { return opened || retries.count() >= 3; }, kProcessWait));
  EXPECT_FALSE(opened) << "the open ended while another process holds the directory";

  ASSERT_TRUE(holder->terminate().ok());
  auto exit = holder->waitForExit(kProcessWait);
  ASSERT_TRUE(exit.has_value()) << holder->output();
  EXPECT_TRUE(exit->exited()) << exit->describe();

  auto db = loop_.run(kj::mv(opening));
  ASSERT_STORE_OK(db);
  auto store = termOrDie(*db.value(), 1);
  ASSERT_STORE_OK(loop_.run(store->put(kGraphs, "after-holder", "x")));
}

TEST_F(RocksDbRecordStoreTest, SecondOpenInTheSameProcessFailsNamingThisProcess) {
  auto db = openOrDie();
  auto second = open(options(Duration(200)));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().code, StoreErrorCode::kUnavailable);
  EXPECT_TRUE(contains(second.error().message, path_)) << second.error().message;
  EXPECT_TRUE(contains(second.error().message, "pid " + std::to_string(::getpid())))
      << second.error().message;
  // The first handle is unaffected.
  auto store = termOrDie(*db, 1);
  ASSERT_STORE_OK(loop_.run(store->put(kGraphs, "a", "x")));
}

TEST_F(RocksDbRecordStoreTest, PathThatIsARegularFileFailsNamingThePath) {
  { std::ofstream(path_) << "not a database\n"; }
  auto db = open(options(Duration(200)));
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.error().code, StoreErrorCode::kUnavailable);
  EXPECT_TRUE(contains(db.error().message, path_)) << db.error().message;
}

TEST_F(RocksDbRecordStoreTest, ADirectoryThatIsNotARegentStoreIsRefusedAndLeftUnchanged) {
  std::filesystem::create_directories(path_);
  { std::ofstream(path_ + "/notes.txt") << "someone else's files\n"; }
  auto db = open(options(Duration(200)));
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.error().code, StoreErrorCode::kUnavailable);
  EXPECT_TRUE(contains(db.error().message, path_)) << db.error().message;
  EXPECT_TRUE(contains(db.error().message, "not empty")) << db.error().message;
  EXPECT_FALSE(std::filesystem::exists(path_ + "/CURRENT"));

  // Another program's RocksDB database (no meta column family) is not changed either.
  const std::string foreign = path_ + "-foreign";
  {
    rocksdb::Options create;
    create.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(create, foreign, &raw).ok());
    std::unique_ptr<rocksdb::DB> other(raw);
    ASSERT_TRUE(other->Put(rocksdb::WriteOptions(), "theirs", "value").ok());
  }
  RocksDbOptions foreignOptions = options(Duration(200));
  foreignOptions.path = foreign;
  auto opened = open(foreignOptions);
  ASSERT_FALSE(opened.ok());
  EXPECT_TRUE(contains(opened.error().message, "not a regent store")) << opened.error().message;
  std::vector<std::string> families;
  ASSERT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), foreign, &families).ok());
  EXPECT_EQ(families, std::vector<std::string>{rocksdb::kDefaultColumnFamilyName});
  std::filesystem::remove_all(foreign);
}

TEST_F(RocksDbRecordStoreTest, DestroyingAStoreWithWritesInFlightLeavesTheDatabaseUsable) {
  auto db = openOrDie();
  auto store = termOrDie(*db, 1);
  kj::Vector<kj::Promise<StoreResult<void>>> writes;
  for (int i = 0; i < 20; ++i) {
    writes.add(store->put(kGraphs, "k" + std::to_string(i), std::string(2000, 'y')));
  }
  store = nullptr;  // Cancels the promises; writes already on the pool still finish.
  for (auto& write : writes) {
    EXPECT_THROW((void)loop_.run(kj::mv(write)), kj::Exception);
  }
  auto next = termOrDie(*db, 1);
  ASSERT_STORE_OK(loop_.run(next->put(kGraphs, "next", "z")));
  EXPECT_EQ(get(*next, kGraphs, "next"), "z");
  next = nullptr;
  loop_.run(db->close());
  auto afterClose = loop_.run(db->openTerm(2));
  ASSERT_FALSE(afterClose.ok());
  EXPECT_EQ(afterClose.error().code, StoreErrorCode::kUnavailable);
}

}  // namespace
}  // namespace regent::store

// A large job's progress record split into parts (store/packed_stores.cc, docs/stores.md "Job
// progress"): which records each put writes, what recovery merges back, and what it reports as
// corrupt. Over an in-memory backend that logs every transaction; the contract suite
// (store_contract_itest) runs the same records through ZooKeeper and RocksDB.
#include <capnp/message.h>
#include <capnp/serialize-packed.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <kj/async.h>
#include <kj/io.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/ids.h"
#include "rpc/wire_ids.h"
#include "store/job_progress_store.h"
#include "store/record_store.h"
#include "store/store_services.h"
#include "tests/fixtures/memory_record_store_test_util.h"
#include "tests/store/progress_test_util.h"

namespace regent::store {
namespace {

using ::testing::HasSubstr;

// The in-memory backend, logging each transaction's writes; `failCommits` fails the next ones
// (kUnavailable, nothing written), `applyThenFailCommits` applies the next ones and then fails
// them (what a lost connection may do to a ZooKeeper transaction).
class LoggingRecordStore final : public RecordStore {
 public:
  explicit LoggingRecordStore(testing::MemoryRecordStore& inner) : inner_(inner) {}
  ~LoggingRecordStore() noexcept override = default;

  std::vector<std::vector<std::string>> commits;  // "family/key" per write, "-" for a removal.
  int failCommits = 0;
  int applyThenFailCommits = 0;

  size_t maxRecordSize() const override { return inner_.maxRecordSize(); }
  const char* maxRecordSizeOption() const override { return inner_.maxRecordSizeOption(); }
  kj::Promise<StoreResult<void>> put(RecordFamily family, std::string key,
                                     std::string bytes) override {
    std::vector<RecordWrite> writes{RecordWrite{family, std::move(key), std::move(bytes)}};
    return commit(std::move(writes));
  }
  kj::Promise<StoreResult<void>> commit(std::vector<RecordWrite> writes) override {
    if (failCommits > 0) {
      --failCommits;
      return StoreResult<void>(StoreError::unavailable("injected"));
    }
    std::vector<std::string> logged;
    for (const RecordWrite& write : writes) {
      logged.push_back((write.bytes ? "" : "-") + recordName(write.family, write.key));
    }
    commits.push_back(std::move(logged));
    if (applyThenFailCommits > 0) {
      --applyThenFailCommits;
      return inner_.commit(std::move(writes)).then([](StoreResult<void>&&) {
        return StoreResult<void>(StoreError::unavailable("injected after applying"));
      });
    }
    return inner_.commit(std::move(writes));
  }
  kj::Promise<StoreResult<std::optional<std::string>>> get(RecordFamily family,
                                                           std::string key) override {
    return inner_.get(family, std::move(key));
  }
  kj::Promise<StoreResult<bool>> remove(RecordFamily family, std::string key) override {
    commits.push_back({"-" + recordName(family, key)});
    return inner_.remove(family, std::move(key));
  }
  kj::Promise<StoreResult<std::vector<std::string>>> listKeys(RecordFamily family) override {
    return inner_.listKeys(family);
  }
  kj::Promise<StoreResult<std::vector<Record>>> readAll(RecordFamily family) override {
    return inner_.readAll(family);
  }

 private:
  testing::MemoryRecordStore& inner_;
};

std::string part(const JobId& id, uint32_t k) {
  return "job-progress-parts/" + id.toHex() + "-" + std::to_string(k);
}
std::string header(const JobId& id) { return "job-progress/" + id.toHex(); }

template <typename Builder>
std::string packed(Builder& message) {
  kj::VectorOutputStream output;
  capnp::writePackedMessage(output, message);
  return std::string(reinterpret_cast<const char*>(output.getArray().begin()),
                     output.getArray().size());
}

class ProgressPartsTest : public ::testing::Test {
 protected:
  ProgressPartsTest() { openTerm(); }
  ~ProgressPartsTest() noexcept override = default;

  // A new term's stores over the same records (what a new leader opens).
  void openTerm() {
    stores_ = nullptr;
    auto logging = kj::heap<LoggingRecordStore>(memory_);
    log_ = logging.get();
    stores_ = makeLeaderStores(kj::mv(logging), /*retain=*/10);
  }
  JobProgressStore& progress() { return stores_->jobProgress(); }

  template <typename T>
  T run(kj::Promise<T>&& promise) {
    return promise.wait(waitScope_);
  }

  StoreResult<void> put(capnp::MallocMessageBuilder& record) {
    return run(progress().put(record.getRoot<wire::JobProgress>().asReader()));
  }
  // The writes of the last transaction.
  std::vector<std::string> lastCommit() const {
    return log_->commits.empty() ? std::vector<std::string>{} : log_->commits.back();
  }
  std::set<std::string> partKeys() {
    std::set<std::string> keys;
    for (const auto& [key, bytes] : memory_.records[RecordFamily::kJobProgressParts]) {
      keys.insert(key);
    }
    return keys;
  }
  RecoveredJobProgress recover() {
    auto recovered = run(progress().recoverAll());
    KJ_REQUIRE(recovered.ok(), recovered.error().message);
    return kj::mv(recovered).value();
  }

  // Why each corrupt record of `recovered` is corrupt, by its key.
  static std::map<std::string, std::string> reasonsByKey(const RecoveredJobProgress& recovered) {
    std::map<std::string, std::string> why;
    for (const auto& corrupt : recovered.corrupt) why[corrupt.key] = corrupt.reason;
    return why;
  }

  // Subtask `subtask` of `record` in `state`.
  static void setState(capnp::MallocMessageBuilder& record, uint32_t subtask,
                       wire::ExecutionState state) {
    for (auto entry : record.getRoot<wire::JobProgress>().getSubtasks()) {
      if (entry.getSubtask() == subtask) entry.setState(state);
    }
  }
  // The subtasks of a recovered record, as (index, state) pairs.
  static std::vector<std::pair<uint32_t, wire::ExecutionState>> subtasksOf(
      wire::JobProgress::Reader record) {
    std::vector<std::pair<uint32_t, wire::ExecutionState>> all;
    for (auto entry : record.getSubtasks()) all.emplace_back(entry.getSubtask(), entry.getState());
    return all;
  }

  kj::EventLoop loop_;
  kj::WaitScope waitScope_{loop_};
  testing::MemoryRecordStore memory_;
  LoggingRecordStore* log_ = nullptr;
  kj::Own<LeaderStores> stores_;
};

TEST_F(ProgressPartsTest, AJobWhoseSubtasksAllFallInPartZeroKeepsOneRecordAsBefore) {
  const JobId id = JobId::random();
  auto record = regent::testing::progressRecord(
      id, regent::testing::firstFinishedOthersRunning(kProgressPartSubtasks));
  ASSERT_TRUE(put(*record).ok());
  EXPECT_EQ(lastCommit(), std::vector<std::string>{header(id)});
  EXPECT_TRUE(partKeys().empty());
  auto recovered = recover();
  ASSERT_EQ(recovered.records.size(), 1u);
  EXPECT_EQ(recovered.records[0].get().getSubtasks().size(), kProgressPartSubtasks);
  EXPECT_EQ(recovered.records[0].get().getParts().size(), 0u);
}

TEST_F(ProgressPartsTest, APutWritesTheRecordAndOnlyThePartsWhoseSubtasksChanged) {
  const JobId id = JobId::random();
  constexpr uint32_t kPart = kProgressPartSubtasks;
  auto record = regent::testing::progressRecord(
      id, regent::testing::firstFinishedOthersRunning(3 * kPart + 1));
  ASSERT_TRUE(put(*record).ok());
  // Parts 0-3 (the last holding one subtask) beside the record, all in one transaction.
  EXPECT_EQ(lastCommit(), (std::vector<std::string>{header(id), part(id, 0), part(id, 1),
                                                    part(id, 2), part(id, 3)}));
  const size_t transactions = log_->commits.size();

  setState(*record, 2 * kPart + 5, wire::ExecutionState::FINISHED);
  ASSERT_TRUE(put(*record).ok());
  EXPECT_EQ(log_->commits.size(), transactions + 1);
  EXPECT_EQ(lastCommit(), (std::vector<std::string>{header(id), part(id, 2)}));

  setState(*record, 5, wire::ExecutionState::FINISHED);
  setState(*record, 3 * kPart, wire::ExecutionState::FAILED);
  ASSERT_TRUE(put(*record).ok());
  EXPECT_EQ(lastCommit(), (std::vector<std::string>{header(id), part(id, 0), part(id, 3)}));

  record->getRoot<wire::JobProgress>().setRestarts(3);  // Only the record itself changes.
  ASSERT_TRUE(put(*record).ok());
  EXPECT_EQ(lastCommit(), std::vector<std::string>{header(id)});

  // Recovery merges the parts back: the record as last put, whole.
  auto recovered = recover();
  ASSERT_EQ(recovered.records.size(), 1u);
  EXPECT_TRUE(recovered.corrupt.empty());
  const auto merged = recovered.records[0].get();
  EXPECT_EQ(merged.getParts().size(), 0u);
  EXPECT_EQ(subtasksOf(merged), subtasksOf(record->getRoot<wire::JobProgress>().asReader()));
}

TEST_F(ProgressPartsTest, ANewTermKnowsThePartsItReadAndRewritesOnlyWhatChanged) {
  const JobId id = JobId::random();
  auto record = regent::testing::progressRecord(
      id, regent::testing::firstFinishedOthersRunning(5 * kProgressPartSubtasks));
  ASSERT_TRUE(put(*record).ok());

  openTerm();
  auto recovered = recover();
  ASSERT_EQ(recovered.records.size(), 1u);
  // What a new leader's JobMaster writes first: the record it recovered, then a change.
  ASSERT_TRUE(run(progress().put(recovered.records[0].get())).ok());
  EXPECT_EQ(lastCommit(), std::vector<std::string>{header(id)});
  setState(*record, 2 * kProgressPartSubtasks, wire::ExecutionState::FAILED);
  ASSERT_TRUE(put(*record).ok());
  EXPECT_EQ(lastCommit(), (std::vector<std::string>{header(id), part(id, 2)}));
}

TEST_F(ProgressPartsTest, AfterAFailedPutTheNextPutWritesEveryPart) {
  const JobId id = JobId::random();
  auto record = regent::testing::progressRecord(
      id, regent::testing::firstFinishedOthersRunning(3 * kProgressPartSubtasks));
  ASSERT_TRUE(put(*record).ok());
  setState(*record, 2 * kProgressPartSubtasks, wire::ExecutionState::FINISHED);
  log_->failCommits = 1;
  ASSERT_FALSE(put(*record).ok());
  // Whether a failed write applied is unknown (ZooKeeper may answer no verdict): all again.
  ASSERT_TRUE(put(*record).ok());
  EXPECT_EQ(lastCommit(),
            (std::vector<std::string>{header(id), part(id, 0), part(id, 1), part(id, 2)}));
}

TEST_F(ProgressPartsTest, PartsOfAPutThatAppliedButFailedAreRemovedLaterAndRewritten) {
  const JobId id = JobId::random();
  auto small = regent::testing::progressRecord(
      id, regent::testing::firstFinishedOthersRunning(2 * kProgressPartSubtasks));
  ASSERT_TRUE(put(*small).ok());
  auto large = regent::testing::progressRecord(
      id, regent::testing::firstFinishedOthersRunning(4 * kProgressPartSubtasks));
  log_->applyThenFailCommits = 1;
  ASSERT_FALSE(put(*large).ok());
  EXPECT_EQ(partKeys().size(), 4u);  // It applied: parts 2 and 3 exist, written by no success.
  // The next put writes every part again (what is stored is unknown).
  ASSERT_TRUE(put(*large).ok());
  EXPECT_EQ(lastCommit(), (std::vector<std::string>{header(id), part(id, 0), part(id, 1),
                                                    part(id, 2), part(id, 3)}));
  log_->applyThenFailCommits = 1;
  auto larger = regent::testing::progressRecord(
      id, regent::testing::firstFinishedOthersRunning(6 * kProgressPartSubtasks));
  ASSERT_FALSE(put(*larger).ok());
  // Parts 4 and 5 came only with the failed put: a removal takes them too.
  auto removed = run(progress().remove(id));
  ASSERT_TRUE(removed.ok()) << removed.error().message;
  EXPECT_TRUE(partKeys().empty());
  EXPECT_TRUE(memory_.records[RecordFamily::kJobProgress].empty());
}

TEST_F(ProgressPartsTest, PartsARecordNoLongerHasAreRemovedInItsTransaction) {
  const JobId id = JobId::random();
  auto large = regent::testing::progressRecord(
      id, regent::testing::firstFinishedOthersRunning(3 * kProgressPartSubtasks));
  ASSERT_TRUE(put(*large).ok());
  EXPECT_EQ(partKeys().size(), 3u);
  auto small = regent::testing::progressRecord(id, regent::testing::firstFinishedOthersRunning(2));
  ASSERT_TRUE(put(*small).ok());
  EXPECT_EQ(lastCommit(), (std::vector<std::string>{header(id), "-" + part(id, 0),
                                                    "-" + part(id, 1), "-" + part(id, 2)}));
  EXPECT_TRUE(partKeys().empty());
  auto recovered = recover();
  ASSERT_EQ(recovered.records.size(), 1u);
  EXPECT_EQ(recovered.records[0].get().getSubtasks().size(), 2u);
}

TEST_F(ProgressPartsTest, RemovingARecordRemovesItsPartsInOneTransaction) {
  const JobId id = JobId::random();
  auto record = regent::testing::progressRecord(
      id, regent::testing::firstFinishedOthersRunning(2 * kProgressPartSubtasks));
  ASSERT_TRUE(put(*record).ok());
  openTerm();  // What this term knows of the parts comes from recovery.
  ASSERT_EQ(recover().records.size(), 1u);
  auto removed = run(progress().remove(id));
  ASSERT_TRUE(removed.ok()) << removed.error().message;
  EXPECT_TRUE(removed.value());
  EXPECT_EQ(lastCommit(),
            (std::vector<std::string>{"-" + header(id), "-" + part(id, 0), "-" + part(id, 1)}));
  EXPECT_TRUE(partKeys().empty());
  auto again = run(progress().remove(id));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again.value());
}

TEST_F(ProgressPartsTest, AnEndedJobsCleanupRemovesItsPartsWithItsRecord) {
  const JobId id = JobId::random();
  auto record = regent::testing::progressRecord(
      id, regent::testing::firstFinishedOthersRunning(2 * kProgressPartSubtasks));
  ASSERT_TRUE(put(*record).ok());
  capnp::MallocMessageBuilder result;
  auto root = result.initRoot<wire::JobResult>();
  wire::setWireId(root.initJobId(), id);
  root.setState(wire::JobState::FINISHED);
  ASSERT_TRUE(run(stores_->jobResults().createDirty(root.asReader())).ok());
  auto cleaned = run(stores_->jobResults().cleanUp(root.asReader(), nullptr));
  ASSERT_TRUE(cleaned.ok()) << cleaned.error().message;
  EXPECT_THAT(lastCommit(), ::testing::Contains("-" + part(id, 0)));
  EXPECT_THAT(lastCommit(), ::testing::Contains("-" + part(id, 1)));
  EXPECT_THAT(lastCommit(), ::testing::Contains("-" + header(id)));
  EXPECT_TRUE(partKeys().empty());
  EXPECT_TRUE(recover().records.empty());
}

TEST_F(ProgressPartsTest, AMissingOrMisfitPartMakesTheRecordCorruptNamingThePart) {
  const JobId missing = JobId::random();
  const JobId misfit = JobId::random();
  for (const JobId& id : {missing, misfit}) {
    auto record = regent::testing::progressRecord(
        id, regent::testing::firstFinishedOthersRunning(3 * kProgressPartSubtasks));
    ASSERT_TRUE(put(*record).ok());
  }
  auto& parts = memory_.records[RecordFamily::kJobProgressParts];
  parts.erase(missing.toHex() + "-2");
  parts[misfit.toHex() + "-2"] = parts[misfit.toHex() + "-1"];  // Part 1's bytes as part 2.

  openTerm();
  auto recovered = recover();
  EXPECT_TRUE(recovered.records.empty());
  ASSERT_EQ(recovered.corrupt.size(), 2u);
  auto why = reasonsByKey(recovered);
  EXPECT_THAT(why[missing.toHex()], HasSubstr(part(missing, 2) + ", which is missing"));
  EXPECT_THAT(why[misfit.toHex()], HasSubstr(part(misfit, 2)));
  EXPECT_THAT(why[misfit.toHex()], HasSubstr("carries part number 1"));
  // The corrupt record is replaced by the job's next put, its stale parts removed with it.
  auto fresh =
      regent::testing::progressRecord(misfit, regent::testing::firstFinishedOthersRunning(2));
  ASSERT_TRUE(put(*fresh).ok());
  EXPECT_EQ(partKeys(), (std::set<std::string>{missing.toHex() + "-0", missing.toHex() + "-1"}));
}

TEST_F(ProgressPartsTest, ARecordWhosePartsDoNotFitIsCorruptNamingWhatDoesNotFit) {
  // Four split jobs of three parts each, each spoiled in one way behind the store's back.
  std::vector<JobId> ids(5);
  for (JobId& id : ids) {
    id = JobId::random();
    auto record = regent::testing::progressRecord(
        id, regent::testing::firstFinishedOthersRunning(3 * kProgressPartSubtasks));
    ASSERT_TRUE(put(*record).ok());
  }
  auto& records = memory_.records[RecordFamily::kJobProgress];
  auto& parts = memory_.records[RecordFamily::kJobProgressParts];
  auto headerListing = [](const JobId& id, std::vector<uint32_t> listed, uint32_t inlined) {
    auto message = regent::testing::progressRecord(
        id, regent::testing::firstFinishedOthersRunning(inlined));
    auto list = message->getRoot<wire::JobProgress>().initParts(listed.size());
    for (uint32_t i = 0; i < listed.size(); ++i) list.set(i, listed[i]);
    return packed(*message);
  };
  records[ids[0].toHex()] = headerListing(ids[0], {0, 2, 1}, 0);
  records[ids[1].toHex()] = headerListing(ids[1], {0, 1, 2}, 2);
  {
    capnp::MallocMessageBuilder message;
    auto misplaced = message.initRoot<wire::JobProgressPart>();
    wire::setWireId(misplaced.initJobId(), ids[2]);
    misplaced.setPart(1);
    misplaced.initSubtasks(1)[0].setSubtask(5);  // Part 0's range.
    parts[ids[2].toHex() + "-1"] = packed(message);
  }
  parts[ids[3].toHex() + "-2"] = "not cap'n proto";
  parts[ids[4].toHex() + "-7"] = parts[ids[4].toHex() + "-0"];  // Listed by nobody.

  openTerm();
  auto recovered = recover();
  auto why = reasonsByKey(recovered);
  EXPECT_EQ(why.size(), 4u);
  EXPECT_THAT(why[ids[0].toHex()], HasSubstr(part(ids[0], 1) + " twice or out of order"));
  EXPECT_THAT(why[ids[1].toHex()], HasSubstr("holds subtasks in the record and lists parts"));
  EXPECT_THAT(why[ids[2].toHex()], HasSubstr(part(ids[2], 1) + " holding subtask 5"));
  EXPECT_THAT(why[ids[3].toHex()], HasSubstr(part(ids[3], 2) + " that does not decode"));
  // A part its record does not list is left out, and its next put removes it.
  ASSERT_EQ(recovered.records.size(), 1u);
  EXPECT_EQ(recovered.records[0].get().getSubtasks().size(), 3 * kProgressPartSubtasks);
  ASSERT_TRUE(run(progress().put(recovered.records[0].get())).ok());
  EXPECT_EQ(lastCommit(), (std::vector<std::string>{header(ids[4]), "-" + part(ids[4], 7)}));
}

TEST_F(ProgressPartsTest, PartsWithoutARecordAreReportedUnderTheirJobAndRemovedWithIt) {
  const JobId id = JobId::random();
  auto record = regent::testing::progressRecord(
      id, regent::testing::firstFinishedOthersRunning(3 * kProgressPartSubtasks));
  ASSERT_TRUE(put(*record).ok());
  memory_.records[RecordFamily::kJobProgress].erase(id.toHex());
  memory_.records[RecordFamily::kJobProgressParts]["not-a-part"] = "x";

  openTerm();
  auto recovered = recover();
  EXPECT_TRUE(recovered.records.empty());
  ASSERT_EQ(recovered.corrupt.size(), 2u);
  auto why = reasonsByKey(recovered);
  EXPECT_THAT(why[id.toHex()], HasSubstr("but no progress record"));
  EXPECT_THAT(why["not-a-part"], HasSubstr("not a progress part's key"));
  // What the Dispatcher does with a corrupt record of a job it does not know: remove it.
  ASSERT_TRUE(run(progress().remove(id)).ok());
  EXPECT_EQ(partKeys(), std::set<std::string>{"not-a-part"});
}

TEST_F(ProgressPartsTest, ARecordOfAnEarlierVersionWithEverySubtaskInItReadsWhole) {
  // Written before parts existed: every subtask in the record itself, no parts listed.
  const JobId id = JobId::random();
  auto record = regent::testing::progressRecord(
      id, regent::testing::firstFinishedOthersRunning(3 * kProgressPartSubtasks));
  memory_.records[RecordFamily::kJobProgress][id.toHex()] = packed(*record);
  auto recovered = recover();
  ASSERT_EQ(recovered.records.size(), 1u);
  EXPECT_EQ(recovered.records[0].get().getSubtasks().size(), 3 * kProgressPartSubtasks);
  // Its next put splits it.
  ASSERT_TRUE(run(progress().put(recovered.records[0].get())).ok());
  EXPECT_EQ(partKeys().size(), 3u);
}

TEST_F(ProgressPartsTest, AdmitsBoundsTheWholeFirstTransactionAndPutRefusesALargerOne) {
  // The in-memory backend's limit is 1 MiB: admits() says where the record and all its parts
  // written at once stop fitting, and such a put is refused whole.
  uint32_t admitted = 0;
  for (uint32_t subtasks = 1000; subtasks <= 64000; subtasks += 1000) {
    if (!progress().admits(subtasks).ok()) break;
    admitted = subtasks;
  }
  ASSERT_GT(admitted, 1000u);
  ASSERT_LT(admitted, 64000u);
  auto fits = regent::testing::progressRecord(
      JobId::random(), regent::testing::firstFinishedOthersRunning(admitted));
  EXPECT_TRUE(put(*fits).ok());
  const JobId id = JobId::random();
  auto over = regent::testing::progressRecord(
      id, regent::testing::firstFinishedOthersRunning(admitted * 3));
  auto refused = put(*over);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, StoreErrorCode::kTooLarge);
  EXPECT_THAT(refused.error().message, HasSubstr(header(id)));
  EXPECT_THAT(refused.error().message, HasSubstr("one transaction"));
  EXPECT_EQ(memory_.records[RecordFamily::kJobProgress].count(id.toHex()), 0u);
  for (const std::string& key : partKeys()) EXPECT_EQ(key.find(id.toHex()), std::string::npos);
}

}  // namespace
}  // namespace regent::store

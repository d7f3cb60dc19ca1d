// RocksDbDatabase and its per-term RocksDbRecordStore: every RocksDB call runs on the loop's
// thread pool; fencing, in-flight counts and the lock retry are bookkept on the loop thread.
#include "store/rocksdb_record_store.h"

#include <fcntl.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "common/backoff.h"
#include "common/event_loop.h"
#include "common/task_set_error_logger.h"

namespace regent::store {
namespace {

constexpr const char* kMetaFamily = "meta";
// The meta record holding the highest epoch that opened the database, as decimal text (so
// `ldb get` shows it as it is): "0" is never written, a missing record means 0.
constexpr const char* kEpochKey = "epoch";
// Written by whoever holds the database's LOCK, right after opening: "pid=<pid> host=<host>".
// Read by an opener that finds the lock taken, to name the holder. Never removed (removing it on
// close would race with the next holder writing its own).
constexpr const char* kOwnerFile = "OWNER";

constexpr Duration kFirstLockRetry{50};
constexpr Duration kMaxLockRetry{1000};

// The open RocksDB handle, shared by the database and every thread-pool job that uses it, so a
// job still running when the database is destroyed never touches a closed DB: whoever drops the
// last reference closes it (on the loop thread; close() closes it on the pool instead).
struct OpenDb {
  rocksdb::DB* db = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::ColumnFamilyHandle* jobGraphs = nullptr;
  rocksdb::ColumnFamilyHandle* jobResults = nullptr;
  rocksdb::ColumnFamilyHandle* jobProgress = nullptr;
  rocksdb::ColumnFamilyHandle* jobDetails = nullptr;
  rocksdb::ColumnFamilyHandle* jobProgressParts = nullptr;
  rocksdb::ColumnFamilyHandle* meta = nullptr;

  OpenDb() = default;
  OpenDb(const OpenDb&) = delete;
  OpenDb& operator=(const OpenDb&) = delete;
  ~OpenDb() { closeNow(); }

  rocksdb::ColumnFamilyHandle* family(RecordFamily family) const {
    switch (family) {
      case RecordFamily::kJobGraphs: return jobGraphs;
      case RecordFamily::kJobResults: return jobResults;
      case RecordFamily::kJobProgress: return jobProgress;
      case RecordFamily::kJobDetails: return jobDetails;
      case RecordFamily::kJobProgressParts: return jobProgressParts;
    }
    return nullptr;
  }

  rocksdb::Status closeNow() {
    if (db == nullptr) return rocksdb::Status::OK();
    for (auto* handle : handles) db->DestroyColumnFamilyHandle(handle);
    handles.clear();
    rocksdb::Status status = db->Close();
    delete db;
    db = nullptr;
    return status;
  }
};

std::string errnoText() { return std::strerror(errno); }

std::string localHostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

bool isLockFailure(const rocksdb::Status& status) {
  // RocksDB 7.8 reports "While lock file: <dir>/LOCK: Resource temporarily unavailable" for
  // another process and "lock hold by current process ... <dir>/LOCK: No locks available" for
  // this one.
  if (!status.IsIOError()) return false;
  const std::string text = status.ToString();
  return text.find("lock file") != std::string::npos ||
         text.find("lock hold by current process") != std::string::npos;
}

// Blocking. Replaces <dir>/OWNER through a temporary file and a rename, so a reader sees either
// the old holder or the new one, never a torn line.
void writeOwnerFile(const std::string& dir) {
  const std::string path = dir + "/" + kOwnerFile;
  const std::string temp = path + ".tmp";
  const std::string text =
      "pid=" + std::to_string(::getpid()) + " host=" + localHostName() + "\n";
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    spdlog::warn("rocksdb store: cannot write {}: {}", temp, errnoText());
    return;
  }
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (!ok) spdlog::warn("rocksdb store: cannot write {}: {}", temp, errnoText());
  ::close(fd);
  if (ok && ::rename(temp.c_str(), path.c_str()) != 0) {
    spdlog::warn("rocksdb store: cannot rename {} to {}: {}", temp, path, errnoText());
  }
}

// Blocking. "pid 1234 on host x" from <dir>/OWNER, or a note that the holder is unknown.
std::string describeHolder(const std::string& dir) {
  std::ifstream in(dir + "/" + kOwnerFile);
  std::string line;
  if (!in || !std::getline(in, line)) return "another process (holder not recorded)";
  std::istringstream fields(line);
  std::string field;
  std::string pid;
  std::string host;
  while (fields >> field) {
    if (field.rfind("pid=", 0) == 0) pid = field.substr(4);
    if (field.rfind("host=", 0) == 0) host = field.substr(5);
  }
  if (pid.empty()) return "another process (holder not recorded)";
  std::string text = "pid " + pid;
  if (!host.empty()) text += " on host " + host;
  if (pid == std::to_string(::getpid())) text += " (this process)";
  return text;
}

std::optional<uint64_t> parseEpoch(const std::string& text) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

// The outcome of one open attempt on the thread pool.
struct OpenAttempt {
  std::shared_ptr<OpenDb> db;  // Set on success.
  uint64_t recordedEpoch = 0;
  bool locked = false;         // Another holder has the LOCK: worth retrying.
  std::string error;           // What went wrong (RocksDB's status or ours).
  std::string holder;          // When locked: who holds it, as far as OWNER says.
};

// Blocking: one attempt to open the database at `path`.
OpenAttempt openOnPool(const std::string& path) {
  OpenAttempt attempt;
  std::error_code fsError;
  if (!std::filesystem::exists(path, fsError)) {
    // RocksDB creates only the last component of the path; create its parents too.
    std::filesystem::create_directories(path, fsError);
    if (fsError) {
      attempt.error = "cannot create the directory: " + fsError.message();
      return attempt;
    }
  }

  // A store is created only in a missing or empty directory, so a mistyped path or another
  // program's database is refused, not changed (checked below). Emptiness is read before the
  // lock probe creates LOCK.
  const bool empty = std::filesystem::is_empty(path, fsError);
  if (fsError) {
    attempt.error = "cannot read the directory: " + fsError.message();
    return attempt;
  }

  // Probe the lock first: DB::Open rotates the info LOG before it takes the lock, so every
  // attempt that fails on the lock would otherwise rename the holder's LOG. (A holder that takes
  // the lock between the probe and the open is still reported by DB::Open below.)
  if (std::filesystem::is_directory(path, fsError)) {
    rocksdb::FileLock* probe = nullptr;
    rocksdb::Status locked = rocksdb::Env::Default()->LockFile(path + "/LOCK", &probe);
    if (locked.ok()) {
      rocksdb::Status unlocked = rocksdb::Env::Default()->UnlockFile(probe);
      if (!unlocked.ok()) spdlog::warn("rocksdb store: {}", unlocked.ToString());
    } else if (isLockFailure(locked)) {
      attempt.locked = true;
      attempt.error = locked.ToString();
      attempt.holder = describeHolder(path);
      return attempt;
    }
  }

  rocksdb::Options options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  options.keep_log_file_num = 4;

  // Every existing column family must be opened, including any this version does not use.
  std::vector<std::string> names;
  if (!rocksdb::DB::ListColumnFamilies(options, path, &names).ok()) names.clear();
  if (!empty && std::find(names.begin(), names.end(), kMetaFamily) == names.end()) {
    attempt.error = names.empty()
                        ? "the directory is not empty and holds no RocksDB database; a store is "
                          "created only in a missing or empty directory"
                        : "it holds a RocksDB database that is not a regent store (no meta "
                          "column family); refusing to change it";
    return attempt;
  }
  for (const char* required : {rocksdb::kDefaultColumnFamilyName.c_str(),
                               recordFamilyName(RecordFamily::kJobGraphs),
                               recordFamilyName(RecordFamily::kJobResults),
                               recordFamilyName(RecordFamily::kJobProgress),
                               recordFamilyName(RecordFamily::kJobDetails),
                               recordFamilyName(RecordFamily::kJobProgressParts), kMetaFamily}) {
    if (std::find(names.begin(), names.end(), required) == names.end()) names.emplace_back(required);
  }
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const auto& name : names) {
    descriptors.emplace_back(name, rocksdb::ColumnFamilyOptions(options));
  }

  auto db = std::make_shared<OpenDb>();
  rocksdb::Status status = rocksdb::DB::Open(options, path, descriptors, &db->handles, &db->db);
  if (!status.ok()) {
    db->db = nullptr;
    attempt.error = status.ToString();
    if (isLockFailure(status)) {
      attempt.locked = true;
      attempt.holder = describeHolder(path);
    }
    return attempt;
  }
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == recordFamilyName(RecordFamily::kJobGraphs)) db->jobGraphs = db->handles[i];
    if (names[i] == recordFamilyName(RecordFamily::kJobResults)) db->jobResults = db->handles[i];
    if (names[i] == recordFamilyName(RecordFamily::kJobProgress)) db->jobProgress = db->handles[i];
    if (names[i] == recordFamilyName(RecordFamily::kJobDetails)) db->jobDetails = db->handles[i];
    if (names[i] == recordFamilyName(RecordFamily::kJobProgressParts)) {
      db->jobProgressParts = db->handles[i];
    }
    if (names[i] == kMetaFamily) db->meta = db->handles[i];
  }
  writeOwnerFile(path);

  std::string epochText;
  status = db->db->Get(rocksdb::ReadOptions(), db->meta, kEpochKey, &epochText);
  if (status.IsNotFound()) {
    attempt.recordedEpoch = 0;
  } else if (!status.ok()) {
    attempt.error = "cannot read the recorded epoch: " + status.ToString();
    return attempt;  // `db` closes as it goes out of scope.
  } else if (auto epoch = parseEpoch(epochText)) {
    attempt.recordedEpoch = *epoch;
  } else {
    attempt.error = "the recorded epoch (meta/epoch) is not a decimal number: \"" +
                    epochText.substr(0, 40) + "\"";
    return attempt;
  }
  attempt.db = std::move(db);
  return attempt;
}

// One open attempt; while the directory is locked by another holder, the next one after
// `backoff`'s delay (cut at `deadline`).
kj::Promise<StoreResult<kj::Own<RocksDbDatabase>>> attemptOpen(EventLoop& loop,
                                                               RocksDbOptions options,
                                                               MonoTime deadline,
                                                               ExponentialBackoff backoff);

}  // namespace

// Loop-thread state of the database. Pool jobs see only the OpenDb they captured.
struct RocksDbDatabase::State final {
  State(EventLoop& loop, RocksDbOptions options, std::shared_ptr<OpenDb> db, uint64_t epoch)
      : loop(loop),
        options(std::move(options)),
        db(std::move(db)),
        recordedEpoch(epoch),
        fencingEpoch(epoch),
        jobFailures("rocksdb store " + this->options.path),
        jobs(jobFailures) {}
  ~State() noexcept(false) = default;

  EventLoop& loop;
  const RocksDbOptions options;
  std::shared_ptr<OpenDb> db;  // Null once close() started.
  bool closed = false;

  uint64_t recordedEpoch;  // The epoch in meta, as last read or written.
  // The highest epoch openTerm() accepted: raised at once, before it is recorded, so the writes
  // of every lower-epoch store are refused from that moment on.
  uint64_t fencingEpoch;

  size_t jobsInFlight = 0;                    // Every pool job dispatched and not yet finished.
  std::map<uint64_t, size_t> writesInFlight;  // Store writes on the pool, by the writer's epoch.

  struct EpochWaiter {
    uint64_t epoch;
    kj::Own<kj::PromiseFulfiller<void>> fulfiller;
  };
  std::vector<EpochWaiter> epochWaiters;                          // writesBelowDrained().
  std::vector<kj::Own<kj::PromiseFulfiller<void>>> idleWaiters;  // allJobsDrained().
  // openTerm() calls run their wait-and-record phase one at a time, in call order, so meta
  // writes never race each other; each call leaves here the promise of its own end.
  kj::Promise<void> openTail = kj::READY_NOW;

  struct RecordQueue {
    size_t pending = 0;                    // Writes of the record queued or running.
    kj::Promise<void> tail = kj::READY_NOW;  // Resolves when the last of them finished.
  };
  std::map<std::string, RecordQueue> recordQueues;  // By family and key; see dispatchWrite().

  TaskSetErrorLogger jobFailures;
  kj::TaskSet jobs;        // Pool jobs with their bookkeeping; they finish even if the caller
                           // dropped its promise.
  kj::Canceler canceler;   // openTerm()/close() promises; declared last so it cancels first.

  std::string fencedWrite(uint64_t epoch, const std::string& record) const {
    return "cannot write " + record + " in " + options.path + ": the store of epoch " +
           std::to_string(epoch) + " is fenced, epoch " + std::to_string(fencingEpoch) +
           " opened the database";
  }

  StoreError closedError(const std::string& what) const {
    return StoreError::unavailable("cannot " + what + ": the RocksDB database " + options.path +
                                   " is closed");
  }

  // Runs `work(OpenDb&)` (returning StoreResult<T>) on the pool. `writeEpoch` marks a store
  // write, which openTerm() of a higher epoch waits for.
  template <typename T, typename Work>
  kj::Promise<StoreResult<T>> dispatch(std::optional<uint64_t> writeEpoch, Work work) {
    ++jobsInFlight;
    if (writeEpoch) ++writesInFlight[*writeEpoch];
    auto paf = kj::newPromiseAndFulfiller<StoreResult<T>>();
    const std::string path = options.path;
    jobs.add(loop.runBlocking([db = db, work = kj::mv(work)]() mutable -> StoreResult<T> {
                   // Dropped here, on the pool: if this is the last reference (close() ran
                   // meanwhile), the database closes off the loop thread.
                   auto open = std::move(db);
                   return work(*open);
                 })
                 .catch_([path](kj::Exception&& exception) -> StoreResult<T> {
                   return StoreError::unavailable("RocksDB work on " + path + " failed: " +
                                                  exception.getDescription().cStr());
                 })
                 .then([this, writeEpoch, fulfiller = kj::mv(paf.fulfiller)](
                           StoreResult<T>&& result) mutable {
                   // The caller hears of the write before openTerm() waiting for it does.
                   fulfiller->fulfill(kj::mv(result));
                   finishJob(writeEpoch);
                 }));
    return kj::mv(paf.promise);
  }

  // A store write of `record` ("family/key"), already checked against the fence:
  // writes to one record run one after another in call order (the RecordStore contract),
  // whatever their callers do with the promises. It counts as in flight for its epoch from this
  // call on, so openTerm() of a higher epoch waits for it even while it waits for its turn.
  // A transaction (commit) writes several records: it waits for the turn of each, and holds
  // them all until it is done.
  template <typename T, typename Work>
  kj::Promise<StoreResult<T>> dispatchWrite(uint64_t epoch, std::vector<std::string> records,
                                            Work work) {
    auto turn = kj::newPromiseAndFulfiller<void>();
    kj::ForkedPromise<void> mine = turn.promise.fork();
    auto previous = kj::heapArrayBuilder<kj::Promise<void>>(records.size());
    for (const std::string& record : records) {
      RecordQueue& queue = recordQueues[record];
      ++queue.pending;
      previous.add(kj::mv(queue.tail));
      queue.tail = mine.addBranch();
    }
    auto result = kj::newPromiseAndFulfiller<StoreResult<T>>();
    ++writesInFlight[epoch];
    std::string what = records.front();
    jobs.add(kj::joinPromises(previous.finish())
                 .then([this, what = kj::mv(what),
                        work = kj::mv(work)]() mutable -> kj::Promise<StoreResult<T>> {
                   if (closed) return StoreResult<T>(closedError("write " + what));
                   return dispatch<T>(std::nullopt, kj::mv(work));
                 })
                 .then([this, epoch, records = kj::mv(records), mine = kj::mv(mine),
                        fulfiller = kj::mv(result.fulfiller),
                        next = kj::mv(turn.fulfiller)](StoreResult<T>&& written) mutable {
                   // The caller hears of the write before openTerm() waiting for it does.
                   fulfiller->fulfill(kj::mv(written));
                   finishWrite(epoch);
                   next->fulfill();
                   for (const std::string& record : records) {
                     auto it = recordQueues.find(record);
                     if (it != recordQueues.end() && --it->second.pending == 0) {
                       recordQueues.erase(it);
                     }
                   }
                 }));
    return kj::mv(result.promise);
  }

  void finishWrite(uint64_t epoch) {
    auto it = writesInFlight.find(epoch);
    if (it != writesInFlight.end() && --it->second == 0) writesInFlight.erase(it);
    for (size_t i = 0; i < epochWaiters.size();) {
      if (noWritesBelow(epochWaiters[i].epoch)) {
        epochWaiters[i].fulfiller->fulfill();
        epochWaiters.erase(epochWaiters.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }

  void finishJob(std::optional<uint64_t> writeEpoch) {
    --jobsInFlight;
    if (writeEpoch) finishWrite(*writeEpoch);
    if (jobsInFlight == 0) {
      for (auto& waiter : idleWaiters) waiter->fulfill();
      idleWaiters.clear();
    }
  }

  bool noWritesBelow(uint64_t epoch) const {
    return writesInFlight.empty() || writesInFlight.begin()->first >= epoch;
  }

  // Resolves once no write of an epoch below `epoch` is on the pool.
  kj::Promise<void> writesBelowDrained(uint64_t epoch) {
    if (noWritesBelow(epoch)) return kj::READY_NOW;
    auto paf = kj::newPromiseAndFulfiller<void>();
    epochWaiters.push_back({epoch, kj::mv(paf.fulfiller)});
    return kj::mv(paf.promise);
  }

  kj::Promise<void> allJobsDrained() {
    if (jobsInFlight == 0) return kj::READY_NOW;
    auto paf = kj::newPromiseAndFulfiller<void>();
    idleWaiters.push_back(kj::mv(paf.fulfiller));
    return kj::mv(paf.promise);
  }
};

namespace {

// One term's view of the database: writes are checked against the database's fencing epoch on
// the loop before they are handed to the pool; reads are never fenced.
class RocksDbRecordStore final : public RecordStore {
 public:
  RocksDbRecordStore(RocksDbDatabase::State& db, uint64_t epoch) : db_(db), epoch_(epoch) {}
  ~RocksDbRecordStore() noexcept override = default;  // The canceler cancels what is in flight.

  size_t maxRecordSize() const override { return db_.options.maxPayload; }
  const char* maxRecordSizeOption() const override { return "store.rocksdb.max-payload"; }

  kj::Promise<StoreResult<void>> put(RecordFamily family, std::string key,
                                     std::string bytes) override {
    std::string record = recordName(family, key);
    if (bytes.size() > db_.options.maxPayload) {
      return StoreResult<void>(StoreError::tooLarge(
          "record " + record + " is " + std::to_string(bytes.size()) +
          " bytes, over the limit of " + std::to_string(db_.options.maxPayload) +
          " bytes (store.rocksdb.max-payload)"));
    }
    if (auto refused = refuseWrite(record)) return StoreResult<void>(std::move(*refused));
    return canceler_.wrap(db_.dispatchWrite<void>(
        epoch_, {record},
        [family, key = std::move(key), bytes = std::move(bytes), record = record,
         path = db_.options.path](OpenDb& db) {
          rocksdb::WriteOptions write;
          write.sync = true;
          rocksdb::Status status = db.db->Put(write, db.family(family), key, bytes);
          if (!status.ok()) {
            return StoreResult<void>(StoreError::unavailable(
                "cannot write " + record + " in " + path + ": " + status.ToString()));
          }
          return StoreResult<void>();
        }));
  }

  kj::Promise<StoreResult<void>> commit(std::vector<RecordWrite> writes) override {
    if (auto refused = refusedCommit(writes, db_.options.maxPayload, maxRecordSizeOption())) {
      return StoreResult<void>(std::move(*refused));
    }
    std::vector<std::string> records;
    for (const RecordWrite& write : writes) records.push_back(recordName(write.family, write.key));
    if (auto refused = refuseWrite(records.front())) return StoreResult<void>(std::move(*refused));
    return canceler_.wrap(db_.dispatchWrite<void>(
        epoch_, records,
        [writes = std::move(writes), what = records.front(),
         path = db_.options.path](OpenDb& db) -> StoreResult<void> {
          rocksdb::WriteBatch batch;
          for (const RecordWrite& write : writes) {
            rocksdb::Status status = write.bytes ? batch.Put(db.family(write.family), write.key,
                                                             *write.bytes)
                                                 : batch.Delete(db.family(write.family), write.key);
            if (!status.ok()) {
              return StoreError::unavailable("cannot write " + recordName(write.family, write.key) +
                                             " in " + path + ": " + status.ToString());
            }
          }
          rocksdb::WriteOptions options;
          options.sync = true;
          rocksdb::Status status = db.db->Write(options, &batch);
          if (!status.ok()) {
            return StoreError::unavailable("cannot write " + what + " and the rest of its "
                                           "transaction in " + path + ": " + status.ToString());
          }
          return StoreResult<void>();
        }));
  }

  kj::Promise<StoreResult<std::optional<std::string>>> get(RecordFamily family,
                                                           std::string key) override {
    using Value = std::optional<std::string>;
    if (db_.closed) return StoreResult<Value>(db_.closedError("read " + recordName(family, key)));
    return canceler_.wrap(db_.dispatch<Value>(
        std::nullopt,
        [family, key = std::move(key), path = db_.options.path](OpenDb& db) -> StoreResult<Value> {
          std::string bytes;
          rocksdb::Status status = db.db->Get(rocksdb::ReadOptions(), db.family(family), key, &bytes);
          if (status.IsNotFound()) return Value();
          if (!status.ok()) {
            return StoreError::unavailable("cannot read " + recordName(family, key) + " in " +
                                           path + ": " + status.ToString());
          }
          return Value(std::move(bytes));
        }));
  }

  kj::Promise<StoreResult<bool>> remove(RecordFamily family, std::string key) override {
    std::string record = recordName(family, key);
    if (auto refused = refuseWrite(record)) return StoreResult<bool>(std::move(*refused));
    // Writes to one record run one at a time (dispatchWrite), so nothing changes the key
    // between the Get and the Delete.
    return canceler_.wrap(db_.dispatchWrite<bool>(
        epoch_, {record},
        [family, key = std::move(key), record = record,
         path = db_.options.path](OpenDb& db) -> StoreResult<bool> {
          std::string bytes;
          rocksdb::Status status = db.db->Get(rocksdb::ReadOptions(), db.family(family), key, &bytes);
          if (status.IsNotFound()) return false;
          if (status.ok()) {
            rocksdb::WriteOptions write;
            write.sync = true;
            status = db.db->Delete(write, db.family(family), key);
          }
          if (!status.ok()) {
            return StoreError::unavailable("cannot remove " + record + " in " + path + ": " +
                                           status.ToString());
          }
          return true;
        }));
  }

  kj::Promise<StoreResult<std::vector<std::string>>> listKeys(RecordFamily family) override {
    using Keys = std::vector<std::string>;
    if (db_.closed) return StoreResult<Keys>(db_.closedError(std::string("list ") + recordFamilyName(family)));
    return canceler_.wrap(db_.dispatch<Keys>(
        std::nullopt, [family, path = db_.options.path](OpenDb& db) -> StoreResult<Keys> {
          Keys keys;
          std::unique_ptr<rocksdb::Iterator> it(
              db.db->NewIterator(rocksdb::ReadOptions(), db.family(family)));
          for (it->SeekToFirst(); it->Valid(); it->Next()) keys.push_back(it->key().ToString());
          if (!it->status().ok()) {
            return StoreError::unavailable(std::string("cannot list ") +
                                           recordFamilyName(family) + " in " + path + ": " +
                                           it->status().ToString());
          }
          return keys;
        }));
  }

  kj::Promise<StoreResult<std::vector<Record>>> readAll(RecordFamily family) override {
    using Records = std::vector<Record>;
    if (db_.closed) return StoreResult<Records>(db_.closedError(std::string("read ") + recordFamilyName(family)));
    return canceler_.wrap(db_.dispatch<Records>(
        std::nullopt, [family, path = db_.options.path](OpenDb& db) -> StoreResult<Records> {
          Records records;
          std::unique_ptr<rocksdb::Iterator> it(
              db.db->NewIterator(rocksdb::ReadOptions(), db.family(family)));
          for (it->SeekToFirst(); it->Valid(); it->Next()) {
            records.push_back(Record{it->key().ToString(), it->value().ToString()});
          }
          if (!it->status().ok()) {
            return StoreError::unavailable(std::string("cannot read ") +
                                           recordFamilyName(family) + " in " + path + ": " +
                                           it->status().ToString());
          }
          return records;
        }));
  }

 private:
  // kFenced once a higher epoch opened the database; kUnavailable once it is closed.
  std::optional<StoreError> refuseWrite(const std::string& record) const {
    if (epoch_ < db_.fencingEpoch) return StoreError::fenced(db_.fencedWrite(epoch_, record));
    if (db_.closed) return db_.closedError("write " + record);
    return std::nullopt;
  }

  RocksDbDatabase::State& db_;
  const uint64_t epoch_;
  kj::Canceler canceler_;  // Destroying the store cancels what is in flight.
};

kj::Promise<StoreResult<kj::Own<RocksDbDatabase>>> attemptOpen(EventLoop& loop,
                                                               RocksDbOptions options,
                                                               MonoTime deadline,
                                                               ExponentialBackoff backoff) {
  std::string path = options.path;
  return loop.runBlocking([path]() { return openOnPool(path); })
      .then([&loop, options = std::move(options), deadline, backoff = std::move(backoff)](
                OpenAttempt attempt) mutable -> kj::Promise<StoreResult<kj::Own<RocksDbDatabase>>> {
        using Opened = StoreResult<kj::Own<RocksDbDatabase>>;
        if (attempt.db) {
          spdlog::info("rocksdb store: opened {} (recorded epoch {})", options.path,
                       attempt.recordedEpoch);
          auto state = kj::heap<RocksDbDatabase::State>(loop, std::move(options),
                                                        std::move(attempt.db),
                                                        attempt.recordedEpoch);
          return Opened(kj::heap<RocksDbDatabase>(kj::mv(state)));
        }
        if (!attempt.locked) {
          return Opened(StoreError::unavailable("cannot open the RocksDB store at " +
                                                options.path + ": " + attempt.error));
        }
        const MonoTime now = std::chrono::steady_clock::now();
        if (now >= deadline) {
          return Opened(StoreError::unavailable(
              "cannot open the RocksDB store at " + options.path + ": it is locked by " +
              attempt.holder + " (gave up after store.rocksdb.lock-timeout " +
              std::to_string(options.lockTimeout.count()) + " ms; " + attempt.error + ")"));
        }
        const Duration wait = std::min<Duration>(
            backoff.next(), std::chrono::ceil<Duration>(deadline - now));
        spdlog::debug("rocksdb store: {} is locked by {}; retrying in {} ms", options.path,
                      attempt.holder, wait.count());
        return loop.timer()
            .afterDelay(wait.count() * kj::MILLISECONDS)
            .then([&loop, options = std::move(options), deadline,
                   backoff = std::move(backoff)]() mutable {
              return attemptOpen(loop, std::move(options), deadline, std::move(backoff));
            });
      });
}

}  // namespace

kj::Promise<StoreResult<kj::Own<RocksDbDatabase>>> RocksDbDatabase::open(EventLoop& loop,
                                                                         RocksDbOptions options) {
  const MonoTime deadline = std::chrono::steady_clock::now() + options.lockTimeout;
  return attemptOpen(loop, std::move(options), deadline,
                     ExponentialBackoff(kFirstLockRetry, kMaxLockRetry));
}

RocksDbDatabase::RocksDbDatabase(kj::Own<State> state) : state_(kj::mv(state)) {}

RocksDbDatabase::~RocksDbDatabase() noexcept {
  // Cancels pending openTerm()/close() calls and drops the pool jobs' bookkeeping. Jobs already
  // running keep their reference to the OpenDb; whoever drops the last one closes it, on the loop
  // thread (the EventLoop's destructor waits for pool work still running).
  state_ = nullptr;
}

kj::Promise<StoreResult<kj::Own<RecordStore>>> RocksDbDatabase::openTerm(uint64_t epoch) {
  using Opened = StoreResult<kj::Own<RecordStore>>;
  State& state = *state_;
  if (state.closed) return Opened(state.closedError("open a store for epoch " + std::to_string(epoch)));
  if (epoch < state.fencingEpoch) {
    return Opened(StoreError::fenced("cannot open the RocksDB store at " + state.options.path +
                                     " for epoch " + std::to_string(epoch) + ": epoch " +
                                     std::to_string(state.fencingEpoch) +
                                     " already opened it"));
  }
  // Fence every lower-epoch store at once: their writes not yet dispatched are refused from here.
  state.fencingEpoch = epoch;

  auto turn = kj::newPromiseAndFulfiller<void>();
  kj::Promise<void> previous = kj::mv(state.openTail);
  state.openTail = kj::mv(turn.promise);
  State* self = &state;

  auto opened =
      previous.catch_([](kj::Exception&&) {})
          .then([self, epoch] { return self->writesBelowDrained(epoch); })
          .then([self, epoch]() -> kj::Promise<StoreResult<void>> {
            if (self->fencingEpoch > epoch) {
              // A later openTerm() raised the epoch while this one waited for its turn.
              return StoreResult<void>(StoreError::fenced(
                  "cannot open the RocksDB store at " + self->options.path + " for epoch " +
                  std::to_string(epoch) + ": epoch " + std::to_string(self->fencingEpoch) +
                  " opened it meanwhile"));
            }
            if (self->closed) {
              return StoreResult<void>(
                  self->closedError("open a store for epoch " + std::to_string(epoch)));
            }
            if (self->recordedEpoch == epoch) return StoreResult<void>();  // Same term again.
            // Counted as a write of `epoch`, so a later openTerm() waits for it even if this
            // call is cancelled: meta never goes back to a lower epoch.
            return self
                ->dispatch<void>(epoch,
                                 [epoch, path = self->options.path](OpenDb& db) {
                                   rocksdb::WriteOptions write;
                                   write.sync = true;
                                   rocksdb::Status status =
                                       db.db->Put(write, db.meta, kEpochKey, std::to_string(epoch));
                                   if (!status.ok()) {
                                     return StoreResult<void>(StoreError::unavailable(
                                         "cannot record epoch " + std::to_string(epoch) + " in " +
                                         path + ": " + status.ToString()));
                                   }
                                   return StoreResult<void>();
                                 })
                .then([self, epoch](StoreResult<void> written) {
                  if (written.ok()) self->recordedEpoch = std::max(self->recordedEpoch, epoch);
                  return written;
                });
          })
          .then([self, epoch](StoreResult<void> recorded) -> Opened {
            if (!recorded.ok()) return recorded.error();
            spdlog::info("rocksdb store: {} opened for epoch {}", self->options.path, epoch);
            return kj::Own<RecordStore>(kj::heap<RocksDbRecordStore>(*self, epoch));
          })
          .attach(kj::defer([fulfiller = kj::mv(turn.fulfiller)]() mutable { fulfiller->fulfill(); }));
  return state.canceler.wrap(kj::mv(opened));
}

uint64_t RocksDbDatabase::highestEpoch() const { return state_->recordedEpoch; }

const std::string& RocksDbDatabase::path() const { return state_->options.path; }

kj::Promise<void> RocksDbDatabase::close() {
  State& state = *state_;
  if (state.closed) return kj::READY_NOW;
  state.closed = true;
  State* self = &state;
  return state.canceler.wrap(state.allJobsDrained().then([self]() {
    return self->loop.runBlocking([db = std::move(self->db)]() {
      rocksdb::Status status = db->closeNow();
      if (!status.ok()) spdlog::warn("rocksdb store: close failed: {}", status.ToString());
    });
  }));
}

}  // namespace regent::store

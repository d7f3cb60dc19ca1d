// The RocksDB backend of the stores (docs/stores.md): one database with column families
// `jobgraphs`, `job-results` and `meta`; writes are synced and run on the loop's thread pool.
// The meta family records the highest epoch that opened the database, which fences older terms.
#pragma once

#include <kj/async.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/time.h"
#include "store/record_store.h"

namespace regent {
class EventLoop;
}

namespace regent::store {

struct RocksDbOptions {
  std::string path;                    // `store.rocksdb.path`; created if missing.
  size_t maxPayload = 64 * 1024 * 1024;  // `store.rocksdb.max-payload`.
  // `store.rocksdb.lock-timeout`: how long open() retries while another process holds the lock.
  Duration lockTimeout{10000};
};

// The open database, one per process, kept across leadership terms. Loop-thread only.
class RocksDbDatabase final {
 public:
  // Opens (creating if missing) on the thread pool. While another live process holds the
  // directory's lock, retries with backoff up to `lockTimeout`, then fails kUnavailable naming
  // the path and the holder's host and pid (recorded in the directory by whoever opened it).
  // Other failures (not a directory, unreadable, a database from something else) fail with
  // kUnavailable naming the path and RocksDB's reason. `loop` must outlive the database.
  static kj::Promise<StoreResult<kj::Own<RocksDbDatabase>>> open(EventLoop& loop,
                                                                 RocksDbOptions options);

  // Opens a store for the term `epoch`: kFenced (naming both epochs) when the database already
  // recorded a higher epoch; otherwise records `epoch` (synced) and fences every store opened
  // before with a lower epoch: their writes fail kFenced from then on, and writes of theirs
  // still in flight complete before this resolves. Reopening with the same epoch is allowed
  // (a restart within one term). The database must outlive the stores it opened.
  kj::Promise<StoreResult<kj::Own<RecordStore>>> openTerm(uint64_t epoch);

  // The highest epoch recorded so far (0 for a new database).
  uint64_t highestEpoch() const;
  const std::string& path() const;

  // Closes the database on the thread pool (flushes nothing unsynced: every write was synced).
  // The destructor closes it inline if this was not called.
  kj::Promise<void> close();

  struct State;
  explicit RocksDbDatabase(kj::Own<State> state);
  ~RocksDbDatabase() noexcept;

 private:
  kj::Own<State> state_;
};

}  // namespace regent::store

// The stores' factory (docs/stores.md): picks the backend from `store.backend` (auto: zookeeper
// with ha.mode=zookeeper, rocksdb with ha.mode=standalone) and opens the stores of one leadership
// term.
#pragma once

#include <kj/async.h>

#include <cstdint>
#include <memory>
#include <string>

#include "common/result.h"
#include "store/job_graph_store.h"
#include "store/job_progress_store.h"
#include "store/job_result_store.h"
#include "store/record_store.h"

namespace regent {
class Config;
class EventLoop;
}  // namespace regent

namespace regent::ha {
class Coordination;
}

namespace regent::store {

enum class StoreBackend { kZooKeeper, kRocksDb };

// "zookeeper", "rocksdb".
const char* storeBackendName(StoreBackend backend);

// The stores of one leadership term; destroy them when the term ends (before any later term's
// stores are used). Destroying them cancels their operations in flight.
class LeaderStores {
 public:
  virtual ~LeaderStores() noexcept(false) = default;
  virtual JobGraphStore& jobGraphs() = 0;
  virtual JobResultStore& jobResults() = 0;
  virtual JobProgressStore& jobProgress() = 0;
};

// One per process. Loop-thread only. Must outlive every LeaderStores it opened.
class StoreServices {
 public:
  virtual ~StoreServices() noexcept(false) = default;

  // Reads `store.*` (and ha.mode for auto). `zooKeeper` is required by the zookeeper backend and
  // must then outlive the services; `loop` must outlive them. Fails on an unusable combination
  // (zookeeper backend without a ZooKeeper client) naming the options involved.
  static Result<kj::Own<StoreServices>> create(EventLoop& loop, const Config& config,
                                               ha::Coordination* zooKeeper);

  virtual StoreBackend backend() const = 0;

  // The ZooKeeper backend: the write transactions every term's stores sent so far (each put
  // attempt and each remove, ZooKeeperRecordStoreOptions::transactions); 0 for RocksDB. What
  // /metrics shows as regent_store_zookeeper_transactions_total.
  virtual uint64_t zooKeeperTransactions() const { return 0; }
  // The ZooKeeper backend: the writes every term's stores were asked for (each put, commit and
  // remove once, however many transactions it took or shared with others;
  // ZooKeeperRecordStoreOptions::writes); 0 for RocksDB. regent_store_zookeeper_writes_total.
  virtual uint64_t zooKeeperWrites() const { return 0; }

  // Opens what the backend keeps open across terms, before any term: the RocksDB database
  // (waiting up to `store.rocksdb.lock-timeout` while another process holds its lock, then
  // kUnavailable naming the path, the holder and the option); nothing to do for ZooKeeper. A
  // master calls it before it contends, so a store it cannot open ends the master before it
  // takes an epoch. Without it, openTerm() opens the database on first use.
  virtual kj::Promise<StoreResult<void>> open() { return StoreResult<void>(); }

  // Opens the stores for `term` (the RocksDB database is opened on first use and kept open
  // across terms). kFenced when the term is already over; kUnavailable when the backend cannot
  // be reached or the database is locked by another process (after `store.rocksdb.lock-timeout`).
  virtual kj::Promise<StoreResult<kj::Own<LeaderStores>>> openTerm(StoreTerm term) = 0;

  // Closes the RocksDB database on the thread pool once its work in flight is done (nothing to
  // do for ZooKeeper). Call it at shutdown after the last term's stores are destroyed; the
  // destructor otherwise closes the database on the loop thread.
  virtual kj::Promise<void> close() = 0;
};

// The stores over an already opened backend (the factory uses it; so do tests and benchmarks
// that open a backend directly). `retain` is `store.job-results.retain`, `detailMaxBytes`
// `store.job-details.max-size`.
kj::Own<LeaderStores> makeLeaderStores(kj::Own<RecordStore> records, size_t retain,
                                       size_t detailMaxBytes = kDefaultJobDetailMaxBytes);

}  // namespace regent::store

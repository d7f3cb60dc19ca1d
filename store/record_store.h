// The seam between the stores' encoding (Cap'n Proto records, validation, retention: see
// packed_stores.cc) and a backend that keeps opaque bytes under a key, fenced for one
// leadership term. Implementations: ZooKeeperRecordStore, RocksDbRecordStore.
#pragma once

#include <kj/async.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ha/fence.h"
#include "store/store_error.h"

namespace regent::store {

// The kinds of records; each is one ZooKeeper folder or one RocksDB column family.
enum class RecordFamily { kJobGraphs, kJobResults, kJobProgress, kJobDetails, kJobProgressParts };

// "jobgraphs", "job-results", "job-progress", "job-details", "job-progress-parts": the ZooKeeper
// folder and the RocksDB column family name.
const char* recordFamilyName(RecordFamily family);

// "jobgraphs/<key>": the record's ZooKeeper path under the cluster root, and its name in messages.
std::string recordName(RecordFamily family, const std::string& key);

struct RecordWrite;

// What one write adds to a transaction beyond its record's name and bytes: ZooKeeper's op header,
// the cluster root in front of the name, and a create's ACL (two digest entries with
// ha.zookeeper.auth), with room to spare.
constexpr size_t kTransactionBytesPerWrite = 256;

// One write's share of a transaction: its record's name (recordName()) and bytes, and
// kTransactionBytesPerWrite.
inline size_t transactionBytes(size_t nameBytes, size_t recordBytes) {
  return kTransactionBytesPerWrite + nameBytes + recordBytes;
}

// Why RecordStore::commit() must refuse `writes` before it sends anything: none given (kInvalid),
// a record written twice (kInvalid), a record over `maxSize` (kTooLarge naming the record, its
// size and `maxSizeOption`), several writes whose transactionBytes() add up to more than
// `maxSize` (kTooLarge naming the first record, the total and the limit: ZooKeeper would refuse
// the request). nullopt when they may go.
std::optional<StoreError> refusedCommit(const std::vector<RecordWrite>& writes, size_t maxSize,
                                        const char* maxSizeOption);

// The leadership term a store is opened for: the fence the election granted (ha/fence.h). The
// ZooKeeper backend checks `latchPath` in every write's transaction (and refuses an empty one);
// the RocksDB backend fences by `epoch` alone and ignores `latchPath`.
using StoreTerm = ha::WriterFence;

// One write of a transaction (RecordStore::commit): `bytes` creates or replaces the record,
// nullopt removes it (a record that does not exist is then no error).
struct RecordWrite {
  RecordFamily family;
  std::string key;
  std::optional<std::string> bytes;
};

struct Record {
  std::string key;    // The job id as stored (32 hex digits unless someone wrote garbage).
  std::string bytes;  // Exactly what was put.
};

// One backend opened for one term. Keys are job ids in hex (a progress part's: "<job id>-<part>");
// the backend does not interpret the bytes. Loop-thread only; every promise resolves on the loop
// thread; blocking I/O runs on the loop's thread pool. Destroying the store cancels the operations
// still in flight (a write already handed to ZooKeeper or RocksDB may still apply; its outcome is
// not reported).
//
// Order: ZooKeeper applies one session's transactions in call order; the RocksDB backend runs
// the writes to one record one after another in call order. A ZooKeeper put that finds the node
// created or removed meanwhile retries (create <-> setData), so callers should not issue
// concurrent writes to one record and rely on their order.
//
// Fencing: once the term is over (ZooKeeper: the latch node is gone; RocksDB: a higher epoch
// opened the database), every write fails with kFenced and changes nothing. Reads keep working.
class RecordStore {
 public:
  virtual ~RecordStore() noexcept(false) = default;

  // The largest `bytes` put() accepts, and the option that sets it (for error messages).
  virtual size_t maxRecordSize() const = 0;
  virtual const char* maxRecordSizeOption() const = 0;

  // Creates or replaces. kTooLarge (nothing written) above maxRecordSize(), naming the key, the
  // size and the limit; kFenced; kUnavailable.
  virtual kj::Promise<StoreResult<void>> put(RecordFamily family, std::string key,
                                             std::string bytes) = 0;
  // Every write or none, as one transaction fenced like put() (ZooKeeper: one multi with the
  // latch check; RocksDB: one write batch), each record written at most once. kInvalid for no
  // writes, a record written twice or a bad key; kTooLarge naming the record; kFenced;
  // kUnavailable.
  virtual kj::Promise<StoreResult<void>> commit(std::vector<RecordWrite> writes) = 0;
  // nullopt when there is no such record.
  virtual kj::Promise<StoreResult<std::optional<std::string>>> get(RecordFamily family,
                                                                   std::string key) = 0;
  // value: whether a record existed. kFenced; kUnavailable.
  virtual kj::Promise<StoreResult<bool>> remove(RecordFamily family, std::string key) = 0;
  // Every key of the family, sorted.
  virtual kj::Promise<StoreResult<std::vector<std::string>>> listKeys(RecordFamily family) = 0;
  // Every record of the family, sorted by key. ZooKeeper issues the reads with many in flight,
  // not one round trip each; a record removed between listing and reading is left out.
  virtual kj::Promise<StoreResult<std::vector<Record>>> readAll(RecordFamily family) = 0;
};

}  // namespace regent::store

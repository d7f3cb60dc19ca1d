// The ZooKeeper backend of the stores (docs/stores.md): records are persistent nodes
// `jobgraphs/<key>` and `job-results/<key>` under the cluster root, and every write is one
// transaction that also checks the writer's latch node, so a deposed leader changes nothing.
#pragma once

#include <kj/async.h>

#include <cstddef>
#include <string>
#include <unordered_set>

#include "store/record_store.h"

namespace regent::ha {
class Coordination;
}

namespace regent::store {

struct ZooKeeperRecordStoreOptions {
  // Largest record accepted (`store.zookeeper.max-payload`); must stay under the server's
  // jute.maxbuffer (1 MiB by default) with room for the path and the transaction's framing.
  size_t maxPayload = 960 * 1024;
  // Reads kept in flight by listKeys/readAll.
  size_t maxReadsInFlight = 1024;
  // When set, counts every write transaction the store sends (a put's create that finds the node
  // and its setData are two; a remove is one; a commit is one per multi sent, whatever it
  // writes): StoreServices::zooKeeperTransactions(), across terms.
  uint64_t* transactions = nullptr;
};

class ZooKeeperRecordStore final : public RecordStore {
 public:
  // Creates the `jobgraphs` and `job-results` folders if missing and checks that
  // `term.latchPath` exists: kFenced if it does not (the term is already over), kUnavailable
  // when ZooKeeper cannot be reached. `zooKeeper` must outlive the store.
  static kj::Promise<StoreResult<kj::Own<RecordStore>>> open(ha::Coordination& zooKeeper,
                                                             StoreTerm term,
                                                             ZooKeeperRecordStoreOptions options);

  ZooKeeperRecordStore(ha::Coordination& zooKeeper, StoreTerm term,
                       ZooKeeperRecordStoreOptions options);
  ~ZooKeeperRecordStore() noexcept override;

  size_t maxRecordSize() const override;
  const char* maxRecordSizeOption() const override { return "store.zookeeper.max-payload"; }
  kj::Promise<StoreResult<void>> put(RecordFamily family, std::string key,
                                     std::string bytes) override;
  kj::Promise<StoreResult<void>> commit(std::vector<RecordWrite> writes) override;
  kj::Promise<StoreResult<std::optional<std::string>>> get(RecordFamily family,
                                                           std::string key) override;
  kj::Promise<StoreResult<bool>> remove(RecordFamily family, std::string key) override;
  kj::Promise<StoreResult<std::vector<std::string>>> listKeys(RecordFamily family) override;
  kj::Promise<StoreResult<std::vector<Record>>> readAll(RecordFamily family) override;

 private:
  ha::Coordination& zooKeeper_;
  StoreTerm term_;
  ZooKeeperRecordStoreOptions options_;
  // The records this store wrote or read and did not remove: a put of one starts with setData
  // instead of a create that would find the node (one transaction instead of two).
  std::unordered_set<std::string> known_;
  kj::Canceler canceler_;  // Destroying the store cancels what is in flight.
};

}  // namespace regent::store

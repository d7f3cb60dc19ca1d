// The ZooKeeper backend of the stores (docs/stores.md): records are persistent nodes
// `jobgraphs/<key>` and `job-results/<key>` under the cluster root, and every write is one
// transaction that also checks the writer's latch node, so a deposed leader changes nothing.
//
// Writes (put, commit, remove) go out in call order through one queue with one transaction in
// flight: the first goes at once, and those made while a transaction is in flight go together
// in the next one, one multi of their writes behind a single latch check (group commit). Each
// caller's writes still apply all or none, and in call order. A batch holds no record twice and
// at most max-payload bytes (a larger single write goes alone). When one caller's write fails for
// a reason of its own (not fencing, not the connection), nothing of the transaction applied and
// each caller of the batch is sent again alone, so only that one fails. Reads are not queued: a
// read made while a write waits in the queue does not see it (ZooKeeper orders a session's
// requests, but the write has not been sent yet): a caller that needs a write to be seen waits
// for its answer first (the packed stores fill their index of clean results only from a read
// that no write of theirs overlapped).
#pragma once

#include <kj/async.h>

#include <cstddef>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/task_set_error_logger.h"
#include "ha/coordination.h"
#include "store/record_store.h"

namespace regent::store {

struct ZooKeeperRecordStoreOptions {
  // Largest record accepted (`store.zookeeper.max-payload`); must stay under the server's
  // jute.maxbuffer (1 MiB by default) with room for the path and the transaction's framing.
  size_t maxPayload = 960 * 1024;
  // Reads kept in flight by listKeys/readAll.
  size_t maxReadsInFlight = 1024;
  // When set, counts every write transaction the store sends (a put's create that finds the node
  // and its setData are two; a remove is one; a commit is one per multi sent, whatever it
  // writes; writes queued together share one): StoreServices::zooKeeperTransactions(), across
  // terms.
  uint64_t* transactions = nullptr;
  // When set, counts every write a caller asked for (a put, a commit, a remove: one each, however
  // many transactions it took or shared): StoreServices::zooKeeperWrites().
  uint64_t* writes = nullptr;
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
  enum class Mode { kCreate, kSetData, kRemove };
  struct Write {
    std::string path;
    std::optional<std::string> bytes;  // nullopt: a remove.
    Mode mode;
    bool dropped = false;  // A remove that found nothing: left out of later transactions.
    bool decided = false;  // Its mode was chosen when first sent (sendQueued).
  };
  // One caller's writes (a put, a commit, a remove), queued or in a transaction.
  struct Pending {
    std::vector<Write> writes;
    // Resolves with whether every remove found its record (remove()'s answer), or the error.
    kj::Own<kj::PromiseFulfiller<StoreResult<bool>>> fulfiller;
    int transactionsLeft = 0;  // Bounds the create <-> setData alternation.
    bool alone = false;        // Sent in a transaction of its own (after a batch failed).
  };

  kj::Promise<StoreResult<bool>> enqueue(kj::Own<Pending> pending);
  // Sends the queue's head and what may join it, when no transaction is in flight.
  void sendQueued();
  kj::Promise<void> send(std::vector<kj::Own<Pending>> batch);
  void answered(std::vector<kj::Own<Pending>> batch,
                const std::vector<std::pair<size_t, size_t>>& origin,
                const ha::ZkReply<std::vector<ha::ZkOpResult>>& reply);
  // The transaction applied: notes what exists now, answers every caller of `batch` (whether its
  // removes found their records), sends the next.
  void succeeded(std::vector<kj::Own<Pending>>& batch);
  // What `write` does, as error messages name it: "write" or "remove".
  static std::string actionOf(const Write& write) {
    return write.mode == Mode::kRemove ? "remove" : "write";
  }
  // Fails every caller of `batch` with its own error; sends the next.
  void failEach(std::vector<kj::Own<Pending>>& batch,
                const std::function<StoreError(const Pending&)>& error);
  void fail(Pending& pending, const StoreError& error);
  void requeueFront(std::vector<kj::Own<Pending>> batch, bool alone);
  void sendNext();

  ha::Coordination& zooKeeper_;
  StoreTerm term_;
  ZooKeeperRecordStoreOptions options_;
  // The records this store wrote or read and did not remove: a put of one starts with setData
  // instead of a create that would find the node (one transaction instead of two).
  std::unordered_set<std::string> known_;
  std::deque<kj::Own<Pending>> queued_;  // Writes waiting for the transaction in flight.
  bool sending_ = false;                 // A transaction is in flight.
  TaskSetErrorLogger sendErrors_{"zookeeper store"};
  kj::TaskSet sends_{sendErrors_};  // The transaction in flight.
  // Destroying the store cancels what its callers wait for (declared last: first, so they see
  // the cancellation rather than a dropped answer), then the transaction in flight.
  kj::Canceler canceler_;
};

}  // namespace regent::store

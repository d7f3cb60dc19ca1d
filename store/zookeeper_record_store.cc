// ZooKeeperRecordStore: records as persistent nodes under `jobgraphs/` and `job-results/`, every
// write one transaction guarded by a check of the writer's latch node, reads with many in flight.
#include "store/zookeeper_record_store.h"

#include <kj/debug.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ha/zookeeper_client.h"

namespace regent::store {
namespace {

using ha::CreateMode;
using ha::ZkCode;
using ha::ZkOp;
using ha::ZkOpResult;
using ha::ZkReply;

// A write alternates create and setData while another writer keeps removing and re-creating the
// node; this bounds the alternation per transaction (each step is one transaction).
constexpr int kMaxPutTransactions = 4;

// The most writes one shared transaction holds (its bytes are bounded by max-payload, counting
// kTransactionBytesPerWrite per write, so that it stays under the server's jute.maxbuffer as a
// single record does).
constexpr size_t kMaxBatchWrites = 1000;

// Every transaction is [check(latch), the write].
constexpr size_t kCheckOp = 0;
constexpr size_t kWriteOp = 1;

// A key becomes one node name: no '/', not "." or "..", no control characters.
std::optional<StoreError> invalidKey(RecordFamily family, const std::string& key) {
  std::string why;
  if (key.empty()) {
    why = "it is empty";
  } else if (key == "." || key == "..") {
    why = "'.' and '..' are not node names";
  } else if (key.find('/') != std::string::npos) {
    why = "it contains '/'";
  } else if (std::any_of(key.begin(), key.end(), [](char c) {
               const auto u = static_cast<unsigned char>(c);
               return u < 0x20 || u == 0x7f;
             })) {
    why = "it contains a control character";
  }
  if (why.empty()) return std::nullopt;
  return StoreError::invalid(std::string("invalid ") + recordFamilyName(family) + " key '" + key +
                             "': " + why);
}

// How a transaction ended: applied, refused by one of its operations (ZooKeeper reports that
// operation's code and marks the others ZOK or ZRUNTIMEINCONSISTENCY), or failed as a whole
// before reaching a verdict (connection loss, session expiry, closing: no per-op code).
struct TransactionOutcome {
  bool applied = false;
  std::optional<size_t> failedOp;
  ZkCode code = ZkCode::kOk;
};

TransactionOutcome outcomeOf(const ZkReply<std::vector<ZkOpResult>>& reply) {
  TransactionOutcome outcome;
  outcome.applied = reply.ok();
  outcome.code = reply.code;
  outcome.failedOp = ha::failedOperation(reply);
  if (outcome.failedOp) outcome.code = reply.value[*outcome.failedOp].code;
  return outcome;
}

StoreError fencedError(const StoreTerm& term, const std::string& what) {
  return StoreError::fenced("the store's term (epoch " + std::to_string(term.epoch) +
                            ") is over: its latch node '" + term.latchPath +
                            "' no longer exists; " + what);
}

// Any outcome that is neither success, nor fencing, nor the expected node-level answer.
StoreError transactionError(const TransactionOutcome& outcome, const std::string& action,
                            const std::string& path) {
  const std::string code = ha::zkCodeName(outcome.code);
  if (outcome.code == ZkCode::kNoAuth) {
    return StoreError::unavailable("ZooKeeper refused to " + action + " '" + path +
                                   "': not authorized (" + code +
                                   "); this client's credential (ha.zookeeper.auth) lacks write "
                                   "access to the cluster's nodes");
  }
  if (outcome.failedOp == kWriteOp && outcome.code == ZkCode::kNoNode) {
    // create: the folder was removed behind the store's back (open() creates it).
    return StoreError::unavailable("cannot " + action + " '" + path +
                                   "': its parent node is missing (" + code + ")");
  }
  std::string message = "cannot " + action + " '" + path + "': ZooKeeper answered " + code;
  if (!outcome.failedOp) {
    // No verdict reached us (connection loss, session expiry, closing): the transaction may
    // have been applied. A retry finds out, and reports kFenced if the term is over.
    message += "; it may or may not have been applied";
  }
  return StoreError::unavailable(std::move(message));
}

// The keys of `family`, sorted. No folder means no records (open() creates it; an operator
// may have removed it since).
kj::Promise<StoreResult<std::vector<std::string>>> listFolder(ha::Coordination& zooKeeper,
                                                              RecordFamily family) {
  using Listed = StoreResult<std::vector<std::string>>;
  std::string folder = recordFamilyName(family);
  return zooKeeper.children(folder).then(
      [folder](ZkReply<std::vector<std::string>> reply) -> Listed {
        if (reply.code == ZkCode::kNoNode) return std::vector<std::string>();
        if (!reply.ok()) {
          return StoreError::unavailable("cannot list '" + folder + "': ZooKeeper answered " +
                                         ha::zkCodeName(reply.code));
        }
        std::sort(reply.value.begin(), reply.value.end());
        return std::move(reply.value);
      });
}

// readAll(): the keys (sorted) and what has been read so far. Owned by the readAll promise.
struct ReadAllState {
  ReadAllState(ha::Coordination& zooKeeper, RecordFamily family, std::vector<std::string> keys)
      : zooKeeper(zooKeeper), family(family), keys(std::move(keys)), values(this->keys.size()) {}

  ha::Coordination& zooKeeper;
  RecordFamily family;
  std::vector<std::string> keys;
  std::vector<std::optional<std::string>> values;  // nullopt: removed since the listing.
  size_t next = 0;                                 // The next key to read.
  std::optional<StoreError> error;                 // The first failure; stops further reads.
};

// One lane of the sliding window: reads the next unread key, and on its reply the next one,
// so each reply immediately puts another read in flight.
kj::Promise<void> readLane(ReadAllState& state) {
  if (state.error || state.next >= state.keys.size()) return kj::READY_NOW;
  const size_t index = state.next++;
  return state.zooKeeper.get(recordName(state.family, state.keys[index]))
      .then([&state, index](ZkReply<ha::NodeData> reply) -> kj::Promise<void> {
        if (reply.ok()) {
          state.values[index] = std::move(reply.value.data);
        } else if (reply.code != ZkCode::kNoNode) {
          if (!state.error) {
            state.error = StoreError::unavailable("cannot read '" +
                                                  recordName(state.family, state.keys[index]) +
                                                  "': ZooKeeper answered " + ha::zkCodeName(reply.code));
          }
          return kj::READY_NOW;
        }
        return readLane(state);
      });
}

}  // namespace

kj::Promise<StoreResult<kj::Own<RecordStore>>> ZooKeeperRecordStore::open(
    ha::Coordination& zooKeeper, StoreTerm term, ZooKeeperRecordStoreOptions options) {
  using Opened = StoreResult<kj::Own<RecordStore>>;
  if (term.latchPath.empty()) {
    return Opened(StoreError::invalid("cannot open the ZooKeeper store for epoch " +
                                      std::to_string(term.epoch) + ": no latch node given"));
  }
  auto ensureFolder = [&zooKeeper](RecordFamily family) {
    const std::string folder = recordFamilyName(family);
    return zooKeeper.ensurePath(folder).then(
        [folder](ZkReply<bool> reply) -> std::optional<StoreError> {
          if (reply.ok()) return std::nullopt;
          return StoreError::unavailable("cannot create the store's folder '" + folder +
                                         "' in ZooKeeper: " + ha::zkCodeName(reply.code));
        });
  };
  return ensureFolder(RecordFamily::kJobGraphs)
      .then([ensureFolder](std::optional<StoreError> failed) mutable
            -> kj::Promise<std::optional<StoreError>> {
        if (failed) return kj::mv(failed);
        return ensureFolder(RecordFamily::kJobResults);
      })
      .then([ensureFolder](std::optional<StoreError> failed) mutable
            -> kj::Promise<std::optional<StoreError>> {
        if (failed) return kj::mv(failed);
        return ensureFolder(RecordFamily::kJobProgress);
      })
      .then([ensureFolder](std::optional<StoreError> failed) mutable
            -> kj::Promise<std::optional<StoreError>> {
        if (failed) return kj::mv(failed);
        return ensureFolder(RecordFamily::kJobDetails);
      })
      .then([ensureFolder](std::optional<StoreError> failed) mutable
            -> kj::Promise<std::optional<StoreError>> {
        if (failed) return kj::mv(failed);
        return ensureFolder(RecordFamily::kJobProgressParts);
      })
      .then([&zooKeeper, term = std::move(term),
             options](std::optional<StoreError> failed) mutable -> kj::Promise<Opened> {
        if (failed) return Opened(std::move(*failed));
        std::string latch = term.latchPath;
        return zooKeeper.exists(std::move(latch))
            .then([&zooKeeper, term = std::move(term),
                   options](ZkReply<std::optional<ha::NodeStat>> latch) mutable -> Opened {
              if (!latch.ok()) {
                return StoreError::unavailable("cannot check the latch node '" + term.latchPath +
                                               "' of epoch " + std::to_string(term.epoch) +
                                               ": ZooKeeper answered " + ha::zkCodeName(latch.code));
              }
              if (!latch.value) {
                return StoreError::fenced("the term of epoch " + std::to_string(term.epoch) +
                                          " is already over: its latch node '" + term.latchPath +
                                          "' does not exist");
              }
              return Opened(kj::Own<RecordStore>(
                  kj::heap<ZooKeeperRecordStore>(zooKeeper, std::move(term), options)));
            });
      });
}

ZooKeeperRecordStore::ZooKeeperRecordStore(ha::Coordination& zooKeeper, StoreTerm term,
                                           ZooKeeperRecordStoreOptions options)
    : zooKeeper_(zooKeeper), term_(std::move(term)), options_(options) {}

ZooKeeperRecordStore::~ZooKeeperRecordStore() noexcept = default;

size_t ZooKeeperRecordStore::maxRecordSize() const { return options_.maxPayload; }

kj::Promise<StoreResult<void>> ZooKeeperRecordStore::put(RecordFamily family, std::string key,
                                                         std::string bytes) {
  if (auto invalid = invalidKey(family, key)) return StoreResult<void>(std::move(*invalid));
  if (bytes.size() > options_.maxPayload) {
    return StoreResult<void>(StoreError::tooLarge(
        std::string(recordFamilyName(family)) + " record '" + key + "' is " +
        std::to_string(bytes.size()) + " bytes, over the ZooKeeper store's limit of " +
        std::to_string(options_.maxPayload) + " bytes (store.zookeeper.max-payload)"));
  }
  std::vector<RecordWrite> writes;
  writes.push_back(RecordWrite{family, std::move(key), std::move(bytes)});
  return commit(std::move(writes));
}

kj::Promise<StoreResult<void>> ZooKeeperRecordStore::commit(std::vector<RecordWrite> writes) {
  if (auto refused = refusedCommit(writes, options_.maxPayload, maxRecordSizeOption())) {
    return StoreResult<void>(std::move(*refused));
  }
  auto pending = kj::heap<Pending>();
  pending->writes.reserve(writes.size());
  for (RecordWrite& write : writes) {
    if (auto invalid = invalidKey(write.family, write.key)) {
      return StoreResult<void>(std::move(*invalid));
    }
    // Whether a put creates or replaces is decided when it is sent (sendQueued).
    const Mode mode = write.bytes ? Mode::kCreate : Mode::kRemove;
    pending->writes.push_back(
        Write{recordName(write.family, write.key), std::move(write.bytes), mode});
  }
  return enqueue(kj::mv(pending)).then([](StoreResult<bool> written) -> StoreResult<void> {
    if (!written.ok()) return written.error();
    return {};
  });
}

kj::Promise<StoreResult<std::optional<std::string>>> ZooKeeperRecordStore::get(RecordFamily family,
                                                                               std::string key) {
  using Got = StoreResult<std::optional<std::string>>;
  if (auto invalid = invalidKey(family, key)) return Got(std::move(*invalid));
  std::string path = recordName(family, key);
  return canceler_.wrap(zooKeeper_.get(path).then([path](ZkReply<ha::NodeData> reply) -> Got {
    if (reply.ok()) return std::optional<std::string>(std::move(reply.value.data));
    if (reply.code == ZkCode::kNoNode) return std::optional<std::string>();
    return StoreError::unavailable("cannot read '" + path + "': ZooKeeper answered " +
                                   ha::zkCodeName(reply.code));
  }));
}

kj::Promise<StoreResult<bool>> ZooKeeperRecordStore::remove(RecordFamily family, std::string key) {
  if (auto invalid = invalidKey(family, key)) return StoreResult<bool>(std::move(*invalid));
  auto pending = kj::heap<Pending>();
  pending->writes.push_back(Write{recordName(family, key), std::nullopt, Mode::kRemove});
  return enqueue(kj::mv(pending));
}

// ---- The write queue ---------------------------------------------------------------------------

kj::Promise<StoreResult<bool>> ZooKeeperRecordStore::enqueue(kj::Own<Pending> pending) {
  if (options_.writes != nullptr) ++*options_.writes;
  auto paf = kj::newPromiseAndFulfiller<StoreResult<bool>>();
  pending->fulfiller = kj::mv(paf.fulfiller);
  pending->transactionsLeft = kMaxPutTransactions + static_cast<int>(pending->writes.size()) - 1;
  queued_.push_back(kj::mv(pending));
  if (!sending_) sendQueued();
  return canceler_.wrap(kj::mv(paf.promise));
}

void ZooKeeperRecordStore::sendQueued() {
  if (queued_.empty()) return;
  // The queue's head, and those behind it that fit: no record twice in one transaction (each
  // write's way is decided from what the store knows when it is sent), at most maxPayload
  // bytes unless the head alone is larger, and none that has to go alone.
  std::vector<kj::Own<Pending>> batch;
  std::unordered_set<std::string> paths;
  size_t bytes = 0;
  const auto cost = [](const Write& write) {
    return transactionBytes(write.path.size(), write.bytes ? write.bytes->size() : 0);
  };
  while (!queued_.empty()) {
    Pending& next = *queued_.front();
    if (!batch.empty()) {
      if (next.alone || batch.front()->alone) break;
      size_t more = 0;
      bool repeats = false;
      for (const Write& write : next.writes) {
        more += cost(write);
        repeats = repeats || paths.count(write.path) != 0;
      }
      if (repeats || bytes + more > options_.maxPayload ||
          paths.size() + next.writes.size() > kMaxBatchWrites) {
        break;
      }
    }
    for (Write& write : next.writes) {
      bytes += cost(write);
      paths.insert(write.path);
      // A record this store wrote or read is replaced with setData at once; a write sent before
      // (a batch that went again alone) keeps the way it found.
      if (write.mode != Mode::kRemove && !write.decided) {
        write.mode = known_.contains(write.path) ? Mode::kSetData : Mode::kCreate;
      }
      write.decided = true;
    }
    batch.push_back(kj::mv(queued_.front()));
    queued_.pop_front();
  }
  sending_ = true;
  sends_.add(send(kj::mv(batch)));
}

kj::Promise<void> ZooKeeperRecordStore::send(std::vector<kj::Own<Pending>> batch) {
  // [check(latch), every write of every caller still to send], and where each op comes from.
  std::vector<ZkOp> ops;
  std::vector<std::pair<size_t, size_t>> origin;  // (caller, write) of ops[i + 1].
  ops.push_back(ZkOp::check(term_.latchPath));
  for (size_t p = 0; p < batch.size(); ++p) {
    for (size_t w = 0; w < batch[p]->writes.size(); ++w) {
      const Write& write = batch[p]->writes[w];
      if (write.dropped) continue;
      switch (write.mode) {
        case Mode::kCreate:
          ops.push_back(ZkOp::create(write.path, *write.bytes, CreateMode::kPersistent));
          break;
        case Mode::kSetData:
          ops.push_back(ZkOp::setData(write.path, *write.bytes));
          break;
        case Mode::kRemove:
          ops.push_back(ZkOp::remove(write.path));
          break;
      }
      origin.emplace_back(p, w);
    }
  }
  if (origin.empty()) {  // Only removes of absent records.
    succeeded(batch);
    return kj::READY_NOW;
  }
  if (options_.transactions != nullptr) ++*options_.transactions;
  // Held by both continuations: a transaction that fails as a whole (the client rejects it)
  // answers its callers too, and the queue moves on.
  auto held = std::make_shared<std::vector<kj::Own<Pending>>>(std::move(batch));
  return zooKeeper_.multi(std::move(ops))
      .then(
          [this, held, origin = std::move(origin)](ZkReply<std::vector<ZkOpResult>> reply) {
            answered(std::move(*held), origin, reply);
          },
          [this, held](kj::Exception&& exception) {
            const std::string problem = exception.getDescription().cStr();
            failEach(*held, [&problem](const Pending& pending) {
              const Write& first = pending.writes.front();
              return StoreError::unavailable("cannot " + actionOf(first) + " '" + first.path +
                                             "': " + problem +
                                             "; it may or may not have been applied");
            });
          });
}

void ZooKeeperRecordStore::answered(std::vector<kj::Own<Pending>> batch,
                                    const std::vector<std::pair<size_t, size_t>>& origin,
                                    const ZkReply<std::vector<ZkOpResult>>& reply) {
  const TransactionOutcome outcome = outcomeOf(reply);
  if (outcome.applied) return succeeded(batch);
  // Fenced, or no verdict: every caller alike, each told of its own records.
  if (outcome.failedOp == kCheckOp && outcome.code == ZkCode::kNoNode) {
    return failEach(batch, [this](const Pending& pending) {
      std::string what = "'" + pending.writes.front().path + "'";
      if (pending.writes.size() > 1) {
        what += " and " + std::to_string(pending.writes.size() - 1) + " more records";
      }
      const bool removal = pending.writes.size() == 1 && pending.writes.front().mode == Mode::kRemove;
      return fencedError(term_, what + (removal ? " not removed" : " not written"));
    });
  }
  if (!outcome.failedOp || *outcome.failedOp < 1 || *outcome.failedOp > origin.size()) {
    // No verdict reached us (connection loss, session expiry, closing).
    return failEach(batch, [&outcome](const Pending& pending) {
      const Write& first = pending.writes.front();
      return transactionError(outcome, actionOf(first), first.path);
    });
  }
  const auto [p, w] = origin[*outcome.failedOp - 1];
  Pending& pending = *batch[p];
  Write& write = pending.writes[w];
  // A create that finds its node, or a setData or remove that finds it gone (another writer; a
  // record never written), changes that write; the transaction goes again.
  bool changed = true;
  if (write.mode == Mode::kCreate && outcome.code == ZkCode::kNodeExists) {
    write.mode = Mode::kSetData;
  } else if (write.mode == Mode::kSetData && outcome.code == ZkCode::kNoNode) {
    write.mode = Mode::kCreate;
  } else if (write.mode == Mode::kRemove && outcome.code == ZkCode::kNoNode) {
    write.dropped = true;
  } else {
    changed = false;
  }
  if (changed) {
    if (--pending.transactionsLeft > 0) {
      sends_.add(send(std::move(batch)));
      return;
    }
    const std::string message = "cannot " + actionOf(write) + " '" + write.path +
                                "': it was created and removed by someone else meanwhile";
    kj::Own<Pending> given = kj::mv(batch[p]);
    batch.erase(batch.begin() + static_cast<std::ptrdiff_t>(p));
    fail(*given, StoreError::unavailable(message));
    // The others go again without it.
    if (!batch.empty()) requeueFront(std::move(batch), false);
    sendNext();
    return;
  }
  if (batch.size() > 1) {
    // One caller's write failed for its own reason, and nothing of the transaction applied:
    // each caller goes again alone, so that only that one fails.
    requeueFront(std::move(batch), true);
    sendNext();
    return;
  }
  // Named as a one-record transaction's would be: the failed write and what it did.
  TransactionOutcome failed = outcome;
  failed.failedOp = kWriteOp;
  fail(pending, transactionError(failed, actionOf(write), write.path));
  sendNext();
}

void ZooKeeperRecordStore::succeeded(std::vector<kj::Own<Pending>>& batch) {
  for (auto& pending : batch) {
    bool found = true;
    for (const Write& write : pending->writes) {
      if (write.mode == Mode::kRemove) {
        known_.erase(write.path);
        found = found && !write.dropped;
      } else {
        known_.insert(write.path);
      }
    }
    pending->fulfiller->fulfill(StoreResult<bool>(found));
  }
  sendNext();
}

void ZooKeeperRecordStore::failEach(std::vector<kj::Own<Pending>>& batch,
                                    const std::function<StoreError(const Pending&)>& error) {
  for (auto& pending : batch) fail(*pending, error(*pending));
  sendNext();
}

void ZooKeeperRecordStore::fail(Pending& pending, const StoreError& error) {
  // What the store knows stays: a next put that finds otherwise switches its way (create <->
  // setData).
  pending.fulfiller->fulfill(StoreResult<bool>(error));
}

void ZooKeeperRecordStore::requeueFront(std::vector<kj::Own<Pending>> batch, bool alone) {
  for (auto it = batch.rbegin(); it != batch.rend(); ++it) {
    (*it)->alone = alone;
    queued_.push_front(kj::mv(*it));
  }
}

void ZooKeeperRecordStore::sendNext() {
  sending_ = false;
  sendQueued();
}

kj::Promise<StoreResult<std::vector<std::string>>> ZooKeeperRecordStore::listKeys(
    RecordFamily family) {
  return canceler_.wrap(listFolder(zooKeeper_, family));
}

kj::Promise<StoreResult<std::vector<Record>>> ZooKeeperRecordStore::readAll(RecordFamily family) {
  using Read = StoreResult<std::vector<Record>>;
  const size_t window = std::max<size_t>(options_.maxReadsInFlight, 1);
  ha::Coordination& zooKeeper = zooKeeper_;
  return canceler_.wrap(
      listFolder(zooKeeper_, family)
          .then([this, &zooKeeper, family,
                 window](StoreResult<std::vector<std::string>> listed) -> kj::Promise<Read> {
            if (!listed.ok()) return Read(listed.error());
            auto state = kj::heap<ReadAllState>(zooKeeper, family, std::move(listed).value());
            const size_t lanes = std::min(window, state->keys.size());
            auto builder = kj::heapArrayBuilder<kj::Promise<void>>(lanes);
            for (size_t i = 0; i < lanes; ++i) builder.add(readLane(*state));
            ReadAllState& s = *state;
            return kj::joinPromises(builder.finish())
                .then([this, &s, family]() -> Read {
                  if (s.error) return std::move(*s.error);
                  std::vector<Record> records;
                  records.reserve(s.keys.size());
                  for (size_t i = 0; i < s.keys.size(); ++i) {
                    if (!s.values[i]) continue;  // Removed between listing and reading.
                    known_.insert(recordName(family, s.keys[i]));
                    records.push_back(Record{std::move(s.keys[i]), std::move(*s.values[i])});
                  }
                  return records;
                })
                .attach(kj::mv(state));
          }));
}

}  // namespace regent::store

// ZooKeeperRecordStore: records as persistent nodes under `jobgraphs/` and `job-results/`, every
// write one transaction guarded by a check of the writer's latch node, reads with many in flight.
#include "store/zookeeper_record_store.h"

#include <kj/debug.h>

#include <algorithm>
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

// commit(): the writes still to send and how each goes (a remove that found nothing is dropped).
struct CommitState {
  enum class Mode { kCreate, kSetData, kRemove };
  struct Write {
    std::string path;
    std::optional<std::string> bytes;
    Mode mode;
  };
  std::vector<Write> writes;
  int transactionsLeft = 0;
};

// One transaction of commit(): [check(latch), every write]. A create that finds its node, or a
// setData or remove that finds it gone (another writer; a record never written), changes that
// write and sends the rest again, at most transactionsLeft transactions in all.
kj::Promise<StoreResult<void>> commitStep(ha::Coordination& zooKeeper, const StoreTerm& term,
                                          std::shared_ptr<CommitState> state, uint64_t* sent) {
  if (state->writes.empty()) return StoreResult<void>();  // Only removes of absent records.
  if (sent != nullptr) ++*sent;
  std::vector<ZkOp> ops;
  ops.reserve(state->writes.size() + 1);
  ops.push_back(ZkOp::check(term.latchPath));
  for (const CommitState::Write& write : state->writes) {
    switch (write.mode) {
      case CommitState::Mode::kCreate:
        ops.push_back(ZkOp::create(write.path, *write.bytes, CreateMode::kPersistent));
        break;
      case CommitState::Mode::kSetData:
        ops.push_back(ZkOp::setData(write.path, *write.bytes));
        break;
      case CommitState::Mode::kRemove:
        ops.push_back(ZkOp::remove(write.path));
        break;
    }
  }
  return zooKeeper.multi(std::move(ops))
      .then([&zooKeeper, &term, state = std::move(state),
             sent](ZkReply<std::vector<ZkOpResult>> reply) mutable
            -> kj::Promise<StoreResult<void>> {
        const TransactionOutcome outcome = outcomeOf(reply);
        if (outcome.applied) return StoreResult<void>();
        if (outcome.failedOp == kCheckOp && outcome.code == ZkCode::kNoNode) {
          std::string what = state->writes.empty() ? std::string("nothing")
                                                   : "'" + state->writes.front().path + "'";
          if (state->writes.size() > 1) {
            what += " and " + std::to_string(state->writes.size() - 1) + " more records";
          }
          return StoreResult<void>(fencedError(term, what + " not written"));
        }
        std::string path = state->writes.empty() ? std::string() : state->writes.front().path;
        if (outcome.failedOp && *outcome.failedOp >= 1 &&
            *outcome.failedOp <= state->writes.size()) {
          const size_t index = *outcome.failedOp - 1;
          CommitState::Write& write = state->writes[index];
          path = write.path;
          bool changed = true;
          if (write.mode == CommitState::Mode::kCreate && outcome.code == ZkCode::kNodeExists) {
            write.mode = CommitState::Mode::kSetData;
          } else if (write.mode == CommitState::Mode::kSetData && outcome.code == ZkCode::kNoNode) {
            write.mode = CommitState::Mode::kCreate;
          } else if (write.mode == CommitState::Mode::kRemove && outcome.code == ZkCode::kNoNode) {
            state->writes.erase(state->writes.begin() + static_cast<std::ptrdiff_t>(index));
          } else {
            changed = false;
          }
          if (changed) {
            if (--state->transactionsLeft > 0) {
              return commitStep(zooKeeper, term, std::move(state), sent);
            }
            return StoreResult<void>(StoreError::unavailable(
                "cannot write '" + path + "': it was created and removed by someone else while "
                "writing"));
          }
        }
        // Named as a one-record transaction's would be: the failed write and what it did.
        TransactionOutcome failed = outcome;
        std::string action = "write";
        if (failed.failedOp && *failed.failedOp >= 1) {
          if (*failed.failedOp <= state->writes.size() &&
              state->writes[*failed.failedOp - 1].mode == CommitState::Mode::kRemove) {
            action = "remove";
          }
          failed.failedOp = kWriteOp;
        }
        return StoreResult<void>(transactionError(failed, action, path));
      });
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
  // One write of a transaction: a record this store wrote or read is replaced with setData at
  // once, any other created, and either switches to the other when it finds the node otherwise.
  std::vector<RecordWrite> writes;
  writes.push_back(RecordWrite{family, std::move(key), std::move(bytes)});
  return commit(std::move(writes));
}

kj::Promise<StoreResult<void>> ZooKeeperRecordStore::commit(std::vector<RecordWrite> writes) {
  if (auto refused = refusedCommit(writes, options_.maxPayload, maxRecordSizeOption())) {
    return StoreResult<void>(std::move(*refused));
  }
  auto state = std::make_shared<CommitState>();
  state->writes.reserve(writes.size());
  for (RecordWrite& write : writes) {
    if (auto invalid = invalidKey(write.family, write.key)) {
      return StoreResult<void>(std::move(*invalid));
    }
    std::string path = recordName(write.family, write.key);
    // A record this store wrote or read is replaced with setData at once.
    const auto mode = !write.bytes                ? CommitState::Mode::kRemove
                      : known_.contains(path) ? CommitState::Mode::kSetData
                                              : CommitState::Mode::kCreate;
    state->writes.push_back(CommitState::Write{std::move(path), std::move(write.bytes), mode});
  }
  // One write alone may take kMaxPutTransactions; each further write may change its way once more.
  state->transactionsLeft = kMaxPutTransactions + static_cast<int>(state->writes.size()) - 1;
  std::vector<std::pair<std::string, bool>> outcome;  // Path, whether it exists afterwards.
  for (const auto& write : state->writes) outcome.emplace_back(write.path, write.bytes.has_value());
  return canceler_.wrap(commitStep(zooKeeper_, term_, std::move(state), options_.transactions)
                            .then([this, outcome = std::move(outcome)](StoreResult<void> written) {
                              if (written.ok()) {
                                for (const auto& [path, exists] : outcome) {
                                  if (exists) known_.insert(path);
                                  else known_.erase(path);
                                }
                              }
                              return written;
                            }));
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
  std::string path = recordName(family, key);
  std::vector<ZkOp> ops;
  ops.reserve(2);
  ops.push_back(ZkOp::check(term_.latchPath));
  ops.push_back(ZkOp::remove(path));
  if (options_.transactions != nullptr) ++*options_.transactions;
  return canceler_.wrap(
      zooKeeper_.multi(std::move(ops))
          .then([this, path](ZkReply<std::vector<ZkOpResult>> reply) -> StoreResult<bool> {
            const TransactionOutcome outcome = outcomeOf(reply);
            if (outcome.applied || outcome.failedOp == kWriteOp) known_.erase(path);
            if (outcome.applied) return true;
            if (outcome.failedOp == kCheckOp && outcome.code == ZkCode::kNoNode) {
              return fencedError(term_, "'" + path + "' was not removed");
            }
            if (outcome.failedOp == kWriteOp && outcome.code == ZkCode::kNoNode) {
              return false;  // Nothing to remove (and the term is still ours).
            }
            return transactionError(outcome, "remove", path);
          }));
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

// The stores' factory: the backend `store.backend` names (auto follows ha.mode), opened per term.
#include "store/store_services.h"

#include <kj/debug.h>

#include <utility>

#include "conf/config.h"
#include "ha/ha_mode.h"
#include "ha/zookeeper_client.h"
#include "store/rocksdb_record_store.h"
#include "store/zookeeper_record_store.h"

namespace regent::store {
namespace {

class ZooKeeperStoreServices final : public StoreServices {
 public:
  ZooKeeperStoreServices(ha::Coordination& zooKeeper, ZooKeeperRecordStoreOptions options,
                         size_t retain, size_t detailMaxBytes)
      : zooKeeper_(zooKeeper), options_(options), retain_(retain), detailMaxBytes_(detailMaxBytes) {}
  ~ZooKeeperStoreServices() noexcept override = default;

  StoreBackend backend() const override { return StoreBackend::kZooKeeper; }
  kj::Promise<void> close() override { return kj::READY_NOW; }
  uint64_t zooKeeperTransactions() const override { return transactions_; }
  uint64_t zooKeeperWrites() const override { return writes_; }

  kj::Promise<StoreResult<kj::Own<LeaderStores>>> openTerm(StoreTerm term) override {
    ZooKeeperRecordStoreOptions options = options_;
    options.transactions = &transactions_;
    options.writes = &writes_;
    return canceler_.wrap(ZooKeeperRecordStore::open(zooKeeper_, kj::mv(term), options)
                              .then([retain = retain_, detailMax = detailMaxBytes_](StoreResult<kj::Own<RecordStore>>&& records)
                                        -> StoreResult<kj::Own<LeaderStores>> {
                                if (!records.ok()) return records.error();
                                return makeLeaderStores(kj::mv(records).value(), retain, detailMax);
                              }));
  }

 private:
  ha::Coordination& zooKeeper_;
  const ZooKeeperRecordStoreOptions options_;
  const size_t retain_;
  const size_t detailMaxBytes_;
  uint64_t transactions_ = 0;  // Every term's stores' (ZooKeeperRecordStoreOptions::transactions).
  uint64_t writes_ = 0;        // Every term's stores' (ZooKeeperRecordStoreOptions::writes).
  kj::Canceler canceler_;
};

class RocksDbStoreServices final : public StoreServices {
 public:
  RocksDbStoreServices(EventLoop& loop, RocksDbOptions options, size_t retain,
                       size_t detailMaxBytes)
      : loop_(loop), options_(std::move(options)), retain_(retain), detailMaxBytes_(detailMaxBytes) {}
  ~RocksDbStoreServices() noexcept override = default;

  StoreBackend backend() const override { return StoreBackend::kRocksDb; }

  kj::Promise<StoreResult<void>> open() override {
    return canceler_.wrap(database().then([](StoreResult<bool>&& opened) -> StoreResult<void> {
      if (!opened.ok()) return opened.error();
      return StoreResult<void>();
    }));
  }

  kj::Promise<void> close() override {
    KJ_IF_MAYBE (database, database_) {
      return (*database)->close();
    }
    return kj::READY_NOW;
  }

  kj::Promise<StoreResult<kj::Own<LeaderStores>>> openTerm(StoreTerm term) override {
    const uint64_t epoch = term.epoch;
    return canceler_.wrap(database().then(
        [this, epoch](StoreResult<bool>&& opened) -> kj::Promise<StoreResult<kj::Own<LeaderStores>>> {
          if (!opened.ok()) {
            return StoreResult<kj::Own<LeaderStores>>(opened.error());
          }
          KJ_IF_MAYBE (database, database_) {
            return (*database)->openTerm(epoch).then(
                [retain = retain_, detailMax = detailMaxBytes_](StoreResult<kj::Own<RecordStore>>&& records)
                    -> StoreResult<kj::Own<LeaderStores>> {
                  if (!records.ok()) return records.error();
                  return makeLeaderStores(kj::mv(records).value(), retain, detailMax);
                });
          }
          KJ_UNREACHABLE;
        }));
  }

 private:
  // Opens the database on first use and keeps it for later terms; a failed open is retried by
  // the next term.
  kj::Promise<StoreResult<bool>> database() {
    if (database_ != nullptr) return StoreResult<bool>(true);
    if (opening_ == nullptr) {
      ++openGeneration_;
      opening_ = RocksDbDatabase::open(loop_, options_)
                     .then([this](StoreResult<kj::Own<RocksDbDatabase>>&& opened)
                               -> StoreResult<bool> {
                       if (!opened.ok()) return opened.error();
                       database_ = kj::mv(opened).value();
                       return true;
                     })
                     .fork();
    }
    KJ_IF_MAYBE (opening, opening_) {
      return opening->addBranch().then(
          [this, generation = openGeneration_](StoreResult<bool>&& opened) {
            // The next call retries a failed open, unless one already did.
            if (generation == openGeneration_) opening_ = nullptr;
            return kj::mv(opened);
          });
    }
    KJ_UNREACHABLE;
  }

  EventLoop& loop_;
  const RocksDbOptions options_;
  const size_t retain_;
  const size_t detailMaxBytes_;
  kj::Maybe<kj::Own<RocksDbDatabase>> database_;  // Outlives every term store it opened.
  kj::Maybe<kj::ForkedPromise<StoreResult<bool>>> opening_;
  uint64_t openGeneration_ = 0;
  kj::Canceler canceler_;
};

}  // namespace

const char* storeBackendName(StoreBackend backend) {
  switch (backend) {
    case StoreBackend::kZooKeeper: return "zookeeper";
    case StoreBackend::kRocksDb: return "rocksdb";
  }
  return "unknown";
}

Result<kj::Own<StoreServices>> StoreServices::create(EventLoop& loop, const Config& config,
                                                     ha::Coordination* zooKeeper) {
  std::string backend = config.getString("store.backend");
  if (backend == "auto") {
    backend = ha::haModeFrom(config) == ha::HaMode::kZooKeeper ? "zookeeper" : "rocksdb";
  }
  const auto retain = static_cast<size_t>(config.getInt("store.job-results.retain"));
  const auto detailMax = static_cast<size_t>(config.getSize("store.job-details.max-size"));
  if (backend == "zookeeper") {
    if (zooKeeper == nullptr) {
      return Error::fatal(
          "store.backend zookeeper needs a ZooKeeper connection (ha.mode zookeeper)");
    }
    ZooKeeperRecordStoreOptions options;
    options.maxPayload = config.getSize("store.zookeeper.max-payload");
    return kj::Own<StoreServices>(kj::heap<ZooKeeperStoreServices>(*zooKeeper, options, retain, detailMax));
  }
  RocksDbOptions options;
  options.path = config.getString("store.rocksdb.path");
  options.maxPayload = config.getSize("store.rocksdb.max-payload");
  options.lockTimeout = config.getDuration("store.rocksdb.lock-timeout");
  return kj::Own<StoreServices>(kj::heap<RocksDbStoreServices>(loop, std::move(options), retain, detailMax));
}

}  // namespace regent::store

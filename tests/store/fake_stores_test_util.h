// In-memory stores for unit tests of the services above them (the Dispatcher, the leader term):
// the real JobGraphStore, JobResultStore and JobProgressStore (store/packed_stores.cc: encoding,
// validation, retention) over a memory RecordStore, the backend seam, so nothing of the stores is
// written twice. The backend outlives terms like a real one, counts reads, and injects faults:
// failing reads (all, or of one family), failing writes, fenced writes, writes held until
// released (all, or one at a time).
#pragma once

#include <kj/async.h>
#include <kj/debug.h>
#include <kj/vector.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "store/record_store.h"
#include "store/store_services.h"

namespace regent::store::testing {

// The records, shared by every term's stores. Loop-thread only.
class FakeStoreBackend final {
 public:
  // Reads (get, listKeys, readAll) served so far, failed ones included.
  size_t reads = 0;
  // The next `failReads` reads fail kUnavailable.
  size_t failReads = 0;
  // The next reads of one family fail kUnavailable: how many, by family.
  std::map<RecordFamily, size_t> failReadsOf;
  // The next `failWrites` writes fail kUnavailable and change nothing.
  size_t failWrites = 0;
  // While true, writes fail kFenced and change nothing.
  bool fenced = false;
  // While true, writes wait (not applied) until releaseWrites().
  bool holdWrites = false;
  // Writes applied so far (a put, a remove, a commit of any number of writes: one each).
  size_t transactions = 0;
  // The largest record a put stores; larger ones fail kTooLarge.
  size_t maxRecordSize = 1 << 20;

  size_t count(RecordFamily family) const { return records_.count(family) ? records_.at(family).size() : 0; }

  // Stores `bytes` under `key` as they are, bypassing the stores' encoding (a corrupt record).
  void putRaw(RecordFamily family, const std::string& key, std::string bytes) {
    records_[family][key] = std::move(bytes);
  }
  // The bytes stored under `key`, nullopt when there is none.
  std::optional<std::string> raw(RecordFamily family, const std::string& key) const {
    if (records_.count(family) == 0 || records_.at(family).count(key) == 0) return std::nullopt;
    return records_.at(family).at(key);
  }

  // Applies the held writes in order and lets later ones through.
  void releaseWrites() {
    holdWrites = false;
    auto held = kj::mv(held_);
    for (auto& fulfiller : held) fulfiller->fulfill();
  }
  // Writes waiting while holdWrites.
  size_t heldWrites() const { return held_.size(); }
  // Applies the oldest held write only (in a later turn of the loop); later ones stay held.
  void releaseOneWrite() {
    KJ_REQUIRE(!held_.empty(), "no write is held");
    auto first = kj::mv(held_[0]);
    kj::Vector<kj::Own<kj::PromiseFulfiller<void>>> rest;
    for (size_t i = 1; i < held_.size(); ++i) rest.add(kj::mv(held_[i]));
    held_ = kj::mv(rest);
    first->fulfill();
  }

  // The stores of one term over this backend. The backend must outlive them.
  kj::Own<LeaderStores> openTerm(size_t retain = 1000);

 private:
  friend class FakeRecordStore;
  kj::Promise<void> writeTurn() {
    if (!holdWrites) return kj::READY_NOW;
    auto paf = kj::newPromiseAndFulfiller<void>();
    held_.add(kj::mv(paf.fulfiller));
    return kj::mv(paf.promise);
  }
  std::optional<StoreError> writeFault() {
    if (fenced) return StoreError::fenced("fenced (fake)");
    if (failWrites == 0) return std::nullopt;
    --failWrites;
    return StoreError::unavailable("injected write failure");
  }
  std::optional<StoreError> readFault(RecordFamily family) {
    ++reads;
    if (auto of = failReadsOf.find(family); of != failReadsOf.end() && of->second > 0) {
      --of->second;
      return StoreError::unavailable(std::string("injected read failure of ") +
                                     recordFamilyName(family));
    }
    if (failReads == 0) return std::nullopt;
    --failReads;
    return StoreError::unavailable("injected read failure");
  }

  std::map<RecordFamily, std::map<std::string, std::string>> records_;
  kj::Vector<kj::Own<kj::PromiseFulfiller<void>>> held_;
};

class FakeRecordStore final : public RecordStore {
 public:
  explicit FakeRecordStore(FakeStoreBackend& backend) : backend_(backend) {}

  size_t maxRecordSize() const override { return backend_.maxRecordSize; }
  const char* maxRecordSizeOption() const override { return "fake.max-record-size"; }

  kj::Promise<StoreResult<void>> put(RecordFamily family, std::string key,
                                     std::string bytes) override {
    if (bytes.size() > maxRecordSize()) return StoreResult<void>(StoreError::tooLarge(key));
    return backend_.writeTurn().then(
        [this, family, key = std::move(key), bytes = std::move(bytes)]() mutable
        -> StoreResult<void> {
          if (auto fault = backend_.writeFault()) return *fault;
          ++backend_.transactions;
          backend_.records_[family][key] = std::move(bytes);
          return StoreResult<void>();
        });
  }
  kj::Promise<StoreResult<void>> commit(std::vector<RecordWrite> writes) override {
    if (auto refused = refusedCommit(writes, maxRecordSize(), maxRecordSizeOption())) {
      return StoreResult<void>(std::move(*refused));
    }
    return backend_.writeTurn().then([this, writes = std::move(writes)]() mutable
                                     -> StoreResult<void> {
      if (auto fault = backend_.writeFault()) return *fault;
      ++backend_.transactions;
      for (RecordWrite& write : writes) {
        if (write.bytes) {
          backend_.records_[write.family][write.key] = std::move(*write.bytes);
        } else {
          backend_.records_[write.family].erase(write.key);
        }
      }
      return StoreResult<void>();
    });
  }
  kj::Promise<StoreResult<std::optional<std::string>>> get(RecordFamily family,
                                                           std::string key) override {
    using R = StoreResult<std::optional<std::string>>;
    if (auto fault = backend_.readFault(family)) return R(*fault);
    auto& records = backend_.records_[family];
    auto found = records.find(key);
    return R(found == records.end() ? std::nullopt : std::optional<std::string>(found->second));
  }
  kj::Promise<StoreResult<bool>> remove(RecordFamily family, std::string key) override {
    return backend_.writeTurn().then([this, family, key = std::move(key)]() -> StoreResult<bool> {
      if (auto fault = backend_.writeFault()) return *fault;
      ++backend_.transactions;
      return backend_.records_[family].erase(key) > 0;
    });
  }
  kj::Promise<StoreResult<std::vector<std::string>>> listKeys(RecordFamily family) override {
    using R = StoreResult<std::vector<std::string>>;
    if (auto fault = backend_.readFault(family)) return R(*fault);
    std::vector<std::string> keys;
    for (auto& [key, bytes] : backend_.records_[family]) keys.push_back(key);
    return R(std::move(keys));
  }
  kj::Promise<StoreResult<std::vector<Record>>> readAll(RecordFamily family) override {
    using R = StoreResult<std::vector<Record>>;
    if (auto fault = backend_.readFault(family)) return R(*fault);
    std::vector<Record> all;
    for (auto& [key, bytes] : backend_.records_[family]) all.push_back(Record{key, bytes});
    return R(std::move(all));
  }

 private:
  FakeStoreBackend& backend_;
};

inline kj::Own<LeaderStores> FakeStoreBackend::openTerm(size_t retain) {
  return makeLeaderStores(kj::heap<FakeRecordStore>(*this), retain);
}

// StoreServices over a FakeStoreBackend: openTerm() fails kUnavailable `failOpens` times first.
class FakeStoreServices final : public StoreServices {
 public:
  explicit FakeStoreServices(FakeStoreBackend& backend) : backend_(backend) {}

  size_t opens = 0;
  size_t failOpens = 0;
  std::vector<StoreTerm> terms;  // Every term opened, in order.

  StoreBackend backend() const override { return StoreBackend::kRocksDb; }
  kj::Promise<StoreResult<kj::Own<LeaderStores>>> openTerm(StoreTerm term) override {
    using R = StoreResult<kj::Own<LeaderStores>>;
    ++opens;
    if (failOpens > 0) {
      --failOpens;
      return R(StoreError::unavailable("injected open failure"));
    }
    terms.push_back(term);
    return R(backend_.openTerm());
  }
  kj::Promise<void> close() override { return kj::READY_NOW; }

 private:
  FakeStoreBackend& backend_;
};

}  // namespace regent::store::testing

// A RecordStore backend in memory whose operations complete at once, for the stored-records fuzz
// target (which plants the fuzzed bytes as a record) and the seed generator (which captures the
// records the real stores write). Loop-thread only, like every RecordStore.
#pragma once

#include <kj/async.h>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "store/record_store.h"

namespace regent::store::testing {

class MemoryRecordStore final : public RecordStore {
 public:
  // Every record, by family and key; read and write it directly.
  std::map<RecordFamily, std::map<std::string, std::string>> records;

  size_t maxRecordSize() const override { return 1 << 20; }
  const char* maxRecordSizeOption() const override { return "memory.max-record-size"; }

  kj::Promise<StoreResult<void>> put(RecordFamily family, std::string key,
                                     std::string bytes) override {
    if (bytes.size() > maxRecordSize()) return StoreResult<void>(StoreError::tooLarge(key));
    records[family][key] = std::move(bytes);
    return StoreResult<void>();
  }
  kj::Promise<StoreResult<void>> commit(std::vector<RecordWrite> writes) override {
    if (auto refused = refusedCommit(writes, maxRecordSize(), maxRecordSizeOption())) {
      return StoreResult<void>(std::move(*refused));
    }
    for (RecordWrite& write : writes) {
      if (write.bytes) {
        records[write.family][write.key] = std::move(*write.bytes);
      } else {
        records[write.family].erase(write.key);
      }
    }
    return StoreResult<void>();
  }
  kj::Promise<StoreResult<std::optional<std::string>>> get(RecordFamily family,
                                                           std::string key) override {
    auto& familyRecords = records[family];
    auto found = familyRecords.find(key);
    return StoreResult<std::optional<std::string>>(
        found == familyRecords.end() ? std::nullopt : std::optional<std::string>(found->second));
  }
  kj::Promise<StoreResult<bool>> remove(RecordFamily family, std::string key) override {
    return StoreResult<bool>(records[family].erase(key) > 0);
  }
  kj::Promise<StoreResult<std::vector<std::string>>> listKeys(RecordFamily family) override {
    std::vector<std::string> keys;
    for (auto& [key, bytes] : records[family]) keys.push_back(key);
    return StoreResult<std::vector<std::string>>(std::move(keys));
  }
  kj::Promise<StoreResult<std::vector<Record>>> readAll(RecordFamily family) override {
    std::vector<Record> all;
    for (auto& [key, bytes] : records[family]) all.push_back(Record{key, bytes});
    return StoreResult<std::vector<Record>>(std::move(all));
  }
};

}  // namespace regent::store::testing

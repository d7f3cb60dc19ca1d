// Names of the record families and records, and the checks every backend's commit() makes.
#include "store/record_store.h"
#include "store/store_error.h"

#include <set>

namespace regent::store {

const char* recordFamilyName(RecordFamily family) {
  switch (family) {
    case RecordFamily::kJobGraphs: return "jobgraphs";
    case RecordFamily::kJobResults: return "job-results";
    case RecordFamily::kJobProgress: return "job-progress";
    case RecordFamily::kJobDetails: return "job-details";
    case RecordFamily::kJobProgressParts: return "job-progress-parts";
  }
  return "unknown";
}

std::string recordName(RecordFamily family, const std::string& key) {
  return std::string(recordFamilyName(family)) + "/" + key;
}

std::optional<StoreError> refusedCommit(const std::vector<RecordWrite>& writes, size_t maxSize,
                                        const char* maxSizeOption) {
  if (writes.empty()) return StoreError::invalid("a store transaction needs at least one write");
  std::set<std::string> written;
  size_t total = 0;
  for (const RecordWrite& write : writes) {
    std::string name = recordName(write.family, write.key);
    if (write.bytes && write.bytes->size() > maxSize) {
      return StoreError::tooLarge("record " + name + " is " + std::to_string(write.bytes->size()) +
                                  " bytes, over the limit of " + std::to_string(maxSize) +
                                  " bytes (" + maxSizeOption + ")");
    }
    if (!written.insert(name).second) {
      return StoreError::invalid("a store transaction writes " + name + " twice");
    }
    total += transactionBytes(name.size(), write.bytes ? write.bytes->size() : 0);
  }
  if (writes.size() > 1 && total > maxSize) {
    StoreError error = StoreError::tooLarge(
        "a store transaction of " + std::to_string(writes.size()) + " writes (" +
        recordName(writes.front().family, writes.front().key) + ", …) is " +
        std::to_string(total) + " bytes with its framing, over the limit of " +
        std::to_string(maxSize) + " bytes for one transaction (" + maxSizeOption +
        "); nothing was written");
    error.sizeBytes = total;
    error.limitBytes = maxSize;
    return error;
  }
  return std::nullopt;
}

}  // namespace regent::store

// Names of the record families and records.
#include "store/record_store.h"
#include "store/store_error.h"

namespace regent::store {

const char* recordFamilyName(RecordFamily family) {
  switch (family) {
    case RecordFamily::kJobGraphs: return "jobgraphs";
    case RecordFamily::kJobResults: return "job-results";
    case RecordFamily::kJobProgress: return "job-progress";
    case RecordFamily::kJobDetails: return "job-details";
  }
  return "unknown";
}

std::string recordName(RecordFamily family, const std::string& key) {
  return std::string(recordFamilyName(family)) + "/" + key;
}

}  // namespace regent::store

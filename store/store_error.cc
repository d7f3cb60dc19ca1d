// Names of the stores' error codes and record families.
#include "store/record_store.h"
#include "store/store_error.h"

namespace regent::store {

const char* storeErrorCodeName(StoreErrorCode code) {
  switch (code) {
    case StoreErrorCode::kFenced: return "fenced";
    case StoreErrorCode::kTooLarge: return "too large";
    case StoreErrorCode::kNotFound: return "not found";
    case StoreErrorCode::kCorrupt: return "corrupt";
    case StoreErrorCode::kUnavailable: return "unavailable";
    case StoreErrorCode::kInvalid: return "invalid";
  }
  return "unknown";
}

const char* recordFamilyName(RecordFamily family) {
  switch (family) {
    case RecordFamily::kJobGraphs: return "jobgraphs";
    case RecordFamily::kJobResults: return "job-results";
  }
  return "unknown";
}

}  // namespace regent::store

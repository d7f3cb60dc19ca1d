// Expected failures of the stores: a StoreResult<T> holds a value or a StoreError whose
// message names the job, the size and limit, the epoch or the path involved.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "common/result.h"

namespace regent::store {

enum class StoreErrorCode {
  kFenced,       // The writer's term is over (latch node gone, or a higher epoch opened the store);
                 // nothing was written.
  kTooLarge,     // The record exceeds the backend's limit; nothing was written.
  kNotFound,     // No record under that job id.
  kCorrupt,      // A stored record does not decode; it is left in place for an operator.
  kUnavailable,  // ZooKeeper unreachable, the database locked by another process: retry later.
  kInvalid,      // The caller's input is malformed (for example a JobGraph without a job id).
};

struct StoreError {
  StoreErrorCode code = StoreErrorCode::kUnavailable;
  std::string message;
  // kTooLarge from the stores: the record's size and the limit it exceeds, in bytes.
  uint64_t sizeBytes = 0;
  uint64_t limitBytes = 0;

  static StoreError fenced(std::string message) { return {StoreErrorCode::kFenced, std::move(message)}; }
  static StoreError tooLarge(std::string message) { return {StoreErrorCode::kTooLarge, std::move(message)}; }
  static StoreError notFound(std::string message) { return {StoreErrorCode::kNotFound, std::move(message)}; }
  static StoreError corrupt(std::string message) { return {StoreErrorCode::kCorrupt, std::move(message)}; }
  static StoreError unavailable(std::string message) {
    return {StoreErrorCode::kUnavailable, std::move(message)};
  }
  static StoreError invalid(std::string message) { return {StoreErrorCode::kInvalid, std::move(message)}; }

  // Only kUnavailable may succeed when retried unchanged.
  bool retryable() const { return code == StoreErrorCode::kUnavailable; }
};

// A value or a StoreError; StoreResult<void> carries no value.
template <typename T>
using StoreResult = Result<T, StoreError>;

}  // namespace regent::store

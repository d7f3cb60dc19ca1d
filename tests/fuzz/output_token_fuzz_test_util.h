// What the output_token fuzz target checks tokens with, shared with fuzz-seed-generator so that
// its seeds include tokens the target accepts.
#pragma once

#include <cstdint>
#include <string>

#include "rpc/output_token.h"

namespace regent::fuzz {

inline rpc::OutputReadKey outputTokenFuzzKey() {
  return rpc::OutputReadKey{7, std::string(rpc::kOutputKeySize, 'k')};
}
// The worker's clock in the target, Unix seconds.
inline constexpr int64_t kOutputTokenFuzzNow = 1'800'000'000;

}  // namespace regent::fuzz

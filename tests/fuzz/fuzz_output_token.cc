// Fuzz target: the output-read token a worker parses from the Authorization header of anyone who
// reaches its HTTP port (rpc/output_token.h). Every input is parsed and checked for every stream
// and for the attempt it names; the checks must never crash, a refusal must say why, and a token
// that verifies must be exactly the one the key signs for its claims (no other input is accepted).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "rpc/output_token.h"
#include "tests/fuzz/output_token_fuzz_test_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace regent;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const rpc::OutputReadKey key = fuzz::outputTokenFuzzKey();

  auto parsed = rpc::parseOutputToken(text);
  if (!parsed.ok()) {
    if (parsed.error().message.empty()) std::abort();
    if (rpc::verifyOutputToken(text, key, AttemptId(1, 2), rpc::OutputStreamSet::kStdout,
                               fuzz::kOutputTokenFuzzNow)
            .ok()) {
      std::abort();
    }
    return 0;
  }
  const rpc::OutputTokenClaims& claims = parsed.value().claims;
  // The claims survive their own encoding.
  auto again = rpc::parseOutputToken(rpc::encodeOutputToken(claims, key.key));
  if (!again.ok() || again.value().claims.epoch != claims.epoch ||
      again.value().claims.attempt != claims.attempt ||
      again.value().claims.streams != claims.streams ||
      again.value().claims.expiresAtSeconds != claims.expiresAtSeconds) {
    std::abort();
  }
  for (rpc::OutputStreamSet stream :
       {rpc::OutputStreamSet::kStdout, rpc::OutputStreamSet::kStderr}) {
    for (const AttemptId& attempt : {claims.attempt, AttemptId(1, 2)}) {
      const Status verified =
          rpc::verifyOutputToken(text, key, attempt, stream, fuzz::kOutputTokenFuzzNow);
      if (!verified.ok()) {
        if (verified.error().message.empty()) std::abort();
        continue;
      }
      // Accepted: signed by this key for exactly these claims, for this attempt and stream, live.
      if (std::string(text) != rpc::encodeOutputToken(claims, key.key) ||
          attempt != claims.attempt || claims.epoch != key.epoch ||
          (static_cast<uint8_t>(claims.streams) & static_cast<uint8_t>(stream)) == 0 ||
          claims.expiresAtSeconds <= fuzz::kOutputTokenFuzzNow) {
        std::abort();
      }
    }
  }
  return 0;
}

// Output-read tokens (docs/security.md, "Reading task output"): a short-lived capability, signed by
// the leader, to read one attempt's stdout and/or stderr from the worker that runs it. The leader
// draws a random key per term and hands each worker, at registration, the key derived from it for
// that registration; a worker checks a token with its key alone, without calling a master.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/ids.h"
#include "common/result.h"

namespace regent::rpc {

// The streams a token lets its holder read (a bit set).
enum class OutputStreamSet : uint8_t { kStdout = 1, kStderr = 2, kBoth = 3 };

// What a token says, signature apart.
struct OutputTokenClaims {
  uint64_t epoch = 0;  // The term whose key signed it (the key id).
  AttemptId attempt;
  OutputStreamSet streams = OutputStreamSet::kBoth;
  int64_t expiresAtSeconds = 0;  // Unix seconds on the leader's wall clock.
};

// Size of a term key and of a worker key, in bytes.
inline constexpr size_t kOutputKeySize = 32;
// How long a token is valid after the leader signs it: rpc.output-token-ttl, at most
// kOutputTokenMaxTtlSeconds.
inline constexpr int64_t kOutputTokenTtlSeconds = 60;
inline constexpr int64_t kOutputTokenMaxTtlSeconds = 600;
// The furthest in the future a worker accepts an expiry: the longest TTL plus this much clock skew
// between the leader's and the worker's clocks. A token beyond it (a leader whose clock runs far
// ahead) is refused rather than honoured for longer than intended.
inline constexpr int64_t kOutputTokenMaxSkewSeconds = 300;
// Length of an encoded token: base64url without padding of 66 bytes.
inline constexpr size_t kOutputTokenLength = 88;

// The key of one registration of a worker in one term: HMAC-SHA256(termKey,
// "regent-output-key-v1" 0 epoch resourceId registrationId), kOutputKeySize bytes. A worker that
// holds it can sign tokens for its own attempts only, and only while that registration lasts.
std::string outputWorkerKey(std::string_view termKey, uint64_t epoch, const ResourceId& worker,
                            const RegistrationId& registration);

// `claims` signed with `workerKey`: version 1, streams, epoch, attempt id, expiry (big-endian),
// then HMAC-SHA256(workerKey, "regent-output-token-v1" 0 those 34 bytes), encoded base64url
// without padding (kOutputTokenLength characters).
std::string encodeOutputToken(const OutputTokenClaims& claims, std::string_view workerKey);

// A decoded token: its claims and its signature, not yet checked.
struct ParsedOutputToken {
  OutputTokenClaims claims;
  std::string signature;  // 32 bytes.
};

// Parses `text` strictly: exactly kOutputTokenLength base64url characters (no padding, no
// whitespace, no other alphabet), version 1, a stream set of 1, 2 or 3. The error names what is
// wrong; nothing about any key is consulted.
Result<ParsedOutputToken> parseOutputToken(std::string_view text);

// The key a worker checks tokens with: the one its last registration handed over.
struct OutputReadKey {
  uint64_t epoch = 0;
  std::string key;  // kOutputKeySize bytes.
};

// Whether `text` lets its holder read `stream` (kStdout or kStderr) of `attempt` at `nowSeconds`
// (the worker's wall clock): parsed, signed by `key` (in constant time), of `key`'s epoch, for
// this attempt and stream, not expired, and not expiring beyond the longest TTL plus the tolerated
// skew.
// The error says which check failed; it never depends on whether the attempt exists.
Status verifyOutputToken(std::string_view text, const OutputReadKey& key,
                         const AttemptId& attempt, OutputStreamSet stream, int64_t nowSeconds);

// The leader's side for one term: the random term key, the key of each worker, and signing.
// Immutable after construction; any thread.
class OutputTokenSigner final {
 public:
  // `termKey` must be kOutputKeySize bytes; random() draws it from OpenSSL's RAND_bytes.
  // `ttlSeconds`: 1 to kOutputTokenMaxTtlSeconds.
  OutputTokenSigner(uint64_t epoch, std::string termKey,
                    int64_t ttlSeconds = kOutputTokenTtlSeconds);
  static OutputTokenSigner random(uint64_t epoch, int64_t ttlSeconds = kOutputTokenTtlSeconds);

  uint64_t epoch() const { return epoch_; }
  // What `registration` of `worker` is handed (outputWorkerKey).
  std::string workerKey(const ResourceId& worker, const RegistrationId& registration) const;
  int64_t ttlSeconds() const { return ttlSeconds_; }
  // A token for `attempt` on `worker` in its `registration`, valid ttlSeconds() from
  // `nowSeconds`.
  std::string sign(const ResourceId& worker, const RegistrationId& registration,
                   const AttemptId& attempt, OutputStreamSet streams, int64_t nowSeconds) const;

 private:
  uint64_t epoch_;
  std::string termKey_;
  int64_t ttlSeconds_;
};

}  // namespace regent::rpc

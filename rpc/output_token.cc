// Output-read tokens: encoding, strict parsing, signing and checking (see output_token.h).
#include "rpc/output_token.h"

#include <kj/debug.h>
#include <openssl/rand.h>

#include <array>
#include <utility>

#include "rpc/auth_proof.h"

namespace regent::rpc {
namespace {

constexpr uint8_t kVersion = 1;
// version, streams, epoch, attempt id (hi, lo), expiry.
constexpr size_t kClaimsSize = 1 + 1 + 8 + 16 + 8;
constexpr size_t kSignatureSize = 32;
constexpr size_t kTokenSize = kClaimsSize + kSignatureSize;
static_assert(kTokenSize % 3 == 0 && kTokenSize / 3 * 4 == kOutputTokenLength,
              "a token is whole base64 groups, so it never has padding");

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

void putUint64(std::string& out, uint64_t value) {
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>(value >> shift));
}

uint64_t getUint64(std::string_view in) {
  uint64_t value = 0;
  for (size_t i = 0; i < 8; ++i) value = (value << 8) | static_cast<uint8_t>(in[i]);
  return value;
}

std::string claimsBytes(const OutputTokenClaims& claims) {
  std::string out;
  out.reserve(kClaimsSize);
  out.push_back(static_cast<char>(kVersion));
  out.push_back(static_cast<char>(claims.streams));
  putUint64(out, claims.epoch);
  putUint64(out, claims.attempt.hi());
  putUint64(out, claims.attempt.lo());
  putUint64(out, static_cast<uint64_t>(claims.expiresAtSeconds));
  return out;
}

std::string signature(std::string_view workerKey, std::string_view claims) {
  std::string message = "regent-output-token-v1";
  message.push_back('\0');
  message.append(claims);
  return hmacSha256(workerKey, message);
}

// Whole groups of 3 bytes only (kTokenSize is one).
std::string encodeBase64Url(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() / 3 * 4);
  for (size_t i = 0; i + 3 <= bytes.size(); i += 3) {
    const uint32_t group = (uint32_t(uint8_t(bytes[i])) << 16) |
                           (uint32_t(uint8_t(bytes[i + 1])) << 8) | uint8_t(bytes[i + 2]);
    for (int shift = 18; shift >= 0; shift -= 6) out.push_back(kAlphabet[(group >> shift) & 63]);
  }
  return out;
}

// The value of a base64url character, or -1.
int base64UrlValue(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}

}  // namespace

std::string outputWorkerKey(std::string_view termKey, uint64_t epoch, const ResourceId& worker,
                            const RegistrationId& registration) {
  std::string message = "regent-output-key-v1";
  message.push_back('\0');
  putUint64(message, epoch);
  putUint64(message, worker.hi());
  putUint64(message, worker.lo());
  putUint64(message, registration.hi());
  putUint64(message, registration.lo());
  return hmacSha256(termKey, message);
}

std::string encodeOutputToken(const OutputTokenClaims& claims, std::string_view workerKey) {
  std::string bytes = claimsBytes(claims);
  bytes += signature(workerKey, bytes);
  return encodeBase64Url(bytes);
}

Result<ParsedOutputToken> parseOutputToken(std::string_view text) {
  if (text.size() != kOutputTokenLength) {
    return Error::fatal("the token is " + std::to_string(text.size()) + " characters long, not " +
                        std::to_string(kOutputTokenLength));
  }
  std::string bytes;
  bytes.reserve(kTokenSize);
  for (size_t i = 0; i < text.size(); i += 4) {
    uint32_t group = 0;
    for (size_t j = 0; j < 4; ++j) {
      const int value = base64UrlValue(text[i + j]);
      if (value < 0) {
        return Error::fatal("the token is not base64url: character " + std::to_string(i + j) +
                            " is outside its alphabet");
      }
      group = (group << 6) | static_cast<uint32_t>(value);
    }
    bytes.push_back(static_cast<char>(group >> 16));
    bytes.push_back(static_cast<char>(group >> 8));
    bytes.push_back(static_cast<char>(group));
  }
  const std::string_view view(bytes);
  if (static_cast<uint8_t>(view[0]) != kVersion) {
    return Error::fatal("the token has version " + std::to_string(uint8_t(view[0])) +
                        ", not " + std::to_string(kVersion));
  }
  const uint8_t streams = static_cast<uint8_t>(view[1]);
  if (streams < 1 || streams > 3) {
    return Error::fatal("the token names no valid stream set (" + std::to_string(streams) + ")");
  }
  ParsedOutputToken token;
  token.claims.streams = static_cast<OutputStreamSet>(streams);
  token.claims.epoch = getUint64(view.substr(2));
  token.claims.attempt = AttemptId(getUint64(view.substr(10)), getUint64(view.substr(18)));
  token.claims.expiresAtSeconds = static_cast<int64_t>(getUint64(view.substr(26)));
  token.signature = std::string(view.substr(kClaimsSize));
  return token;
}

Status verifyOutputToken(std::string_view text, const OutputReadKey& key,
                         const AttemptId& attempt, OutputStreamSet stream, int64_t nowSeconds) {
  auto parsed = parseOutputToken(text);
  if (!parsed.ok()) return parsed.error();
  const OutputTokenClaims& claims = parsed.value().claims;
  // The signature first: nothing a forger chose is believed before it verifies.
  if (!proofMatches(signature(key.key, claimsBytes(claims)), parsed.value().signature)) {
    return Error::fatal(claims.epoch == key.epoch
                            ? "the token's signature does not verify"
                            : "the token was signed in epoch " + std::to_string(claims.epoch) +
                                  ", and this worker holds the key of epoch " +
                                  std::to_string(key.epoch) + " (obtain a new token)");
  }
  if (claims.epoch != key.epoch) {
    return Error::fatal("the token was signed in epoch " + std::to_string(claims.epoch) +
                        ", not in epoch " + std::to_string(key.epoch));
  }
  if (claims.attempt != attempt) {
    return Error::fatal("the token is for attempt " + claims.attempt.toHex() + ", not " +
                        attempt.toHex());
  }
  if ((static_cast<uint8_t>(claims.streams) & static_cast<uint8_t>(stream)) == 0) {
    return Error::fatal(std::string("the token does not cover ") +
                        (stream == OutputStreamSet::kStderr ? "stderr" : "stdout"));
  }
  // Differences in unsigned arithmetic: an expiry is any 64-bit value, and must not overflow.
  const uint64_t now = static_cast<uint64_t>(nowSeconds);
  const uint64_t expires = static_cast<uint64_t>(claims.expiresAtSeconds);
  if (claims.expiresAtSeconds <= nowSeconds) {
    return Error::fatal("the token expired " + std::to_string(now - expires) +
                        " s ago by this worker's clock (obtain a new one; the leader's and the "
                        "workers' clocks must agree to well within rpc.output-token-ttl)");
  }
  constexpr int64_t kLongest = kOutputTokenMaxTtlSeconds + kOutputTokenMaxSkewSeconds;
  if (expires - now > static_cast<uint64_t>(kLongest)) {
    return Error::fatal("the token expires " + std::to_string(expires - now) +
                        " s from now by this worker's clock, beyond the " +
                        std::to_string(kLongest) +
                        " s a token may live (the leader's clock runs ahead of this worker's)");
  }
  return Status();
}

OutputTokenSigner::OutputTokenSigner(uint64_t epoch, std::string termKey, int64_t ttlSeconds)
    : epoch_(epoch), termKey_(std::move(termKey)), ttlSeconds_(ttlSeconds) {
  KJ_REQUIRE(termKey_.size() == kOutputKeySize, "an output term key is 32 bytes");
  KJ_REQUIRE(ttlSeconds_ >= 1 && ttlSeconds_ <= kOutputTokenMaxTtlSeconds, ttlSeconds_);
}

OutputTokenSigner OutputTokenSigner::random(uint64_t epoch, int64_t ttlSeconds) {
  std::string key(kOutputKeySize, '\0');
  KJ_REQUIRE(RAND_bytes(reinterpret_cast<unsigned char*>(key.data()),
                        static_cast<int>(key.size())) == 1,
             "the random generator failed to make an output term key");
  return OutputTokenSigner(epoch, std::move(key), ttlSeconds);
}

std::string OutputTokenSigner::workerKey(const ResourceId& worker,
                                         const RegistrationId& registration) const {
  return outputWorkerKey(termKey_, epoch_, worker, registration);
}

std::string OutputTokenSigner::sign(const ResourceId& worker, const RegistrationId& registration,
                                    const AttemptId& attempt, OutputStreamSet streams,
                                    int64_t nowSeconds) const {
  return encodeOutputToken(OutputTokenClaims{.epoch = epoch_,
                                             .attempt = attempt,
                                             .streams = streams,
                                             .expiresAtSeconds = nowSeconds + ttlSeconds_},
                           workerKey(worker, registration));
}

}  // namespace regent::rpc

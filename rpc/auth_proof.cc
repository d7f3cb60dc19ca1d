// HMAC-SHA256 proofs and nonces of shared-secret authentication (see auth_proof.h).
#include "rpc/auth_proof.h"

#include <kj/debug.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

namespace regent::rpc {

std::string randomAuthNonce() {
  std::string nonce(kAuthNonceSize, '\0');
  KJ_REQUIRE(RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()),
                        static_cast<int>(nonce.size())) == 1,
             "the random generator failed to make an authentication nonce");
  return nonce;
}

std::string authProof(ProofSide side, std::string_view secret, std::string_view roleName,
                      std::string_view serverNonce, std::string_view clientNonce) {
  std::string message = side == ProofSide::kClient ? "regent-auth-v1 client" : "regent-auth-v1 server";
  message.push_back('\0');
  message.append(roleName);
  message.push_back('\0');
  message.append(serverNonce);
  message.append(clientNonce);
  return hmacSha256(secret, message);
}

std::string hmacSha256(std::string_view key, std::string_view message) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  KJ_REQUIRE(HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
                  reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest,
                  &length) != nullptr,
             "HMAC-SHA256 failed");
  return std::string(reinterpret_cast<const char*>(digest), length);
}

bool proofMatches(std::string_view expected, std::string_view received) {
  if (expected.size() != received.size() || expected.empty()) return false;
  return CRYPTO_memcmp(expected.data(), received.data(), expected.size()) == 0;
}

}  // namespace regent::rpc

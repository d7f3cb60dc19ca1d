// The shared-secret proof of RPC authentication (docs/wire.md, "Authentication"): HMAC-SHA256
// over a domain-separation label, the role and both nonces. Pure functions, no state; the secret
// never leaves this process.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace regent::rpc {

// Size of the server's and the client's nonce, in bytes.
inline constexpr size_t kAuthNonceSize = 32;
// Shortest secret a process accepts (rpc.auth-secret.*-file, rpc.credential.secret-file).
inline constexpr size_t kMinAuthSecretSize = 16;

// Which side proves: the client proves it holds the role's secret; the server answers with its
// own proof (another label) so that the client knows the master holds the secret too.
enum class ProofSide { kClient, kServer };

// kAuthNonceSize bytes from OpenSSL's RAND_bytes. Throws a kj exception if the generator fails.
std::string randomAuthNonce();

// HMAC-SHA256(secret, label ‖ 0 ‖ roleName ‖ 0 ‖ serverNonce ‖ clientNonce), 32 bytes, with label
// "regent-auth-v1 client" or "regent-auth-v1 server". The nonces have a fixed size, so the
// concatenation is unambiguous.
std::string authProof(ProofSide side, std::string_view secret, std::string_view roleName,
                      std::string_view serverNonce, std::string_view clientNonce);

// HMAC-SHA256(key, message), 32 bytes. Throws a kj exception if OpenSSL fails.
std::string hmacSha256(std::string_view key, std::string_view message);

// Whether `received` equals `expected`, in time that depends only on their lengths
// (CRYPTO_memcmp): a wrong proof reveals nothing about how much of it was right.
bool proofMatches(std::string_view expected, std::string_view received);

}  // namespace regent::rpc

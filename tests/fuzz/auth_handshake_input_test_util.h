// The input format of the authentication-handshake fuzz target (fuzz_auth_handshake.cc), written
// once for the target that decodes it and for the seed generator that encodes the seeds.
//
// An input is two header bytes, then steps until the bytes run out; a step is an opcode byte
// (taken modulo kAuthStepCount) and its operands; operands missing at the end read as 0.
//   byte 0: the master's authentication settings (AuthSettingsChoice, modulo its count)
//   byte 1: the verified client certificate's common name (CertificateChoice, modulo its count)
#pragma once

#include <cstdint>
#include <string>

namespace regent::fuzz {

enum class AuthSettingsChoice : uint8_t {
  // Required; secrets for admin and reader (none for worker); certificate names ops -> admin,
  // robot -> worker.
  kRequiredSomeSecrets = 0,
  // Required; a secret for every role; no certificate names.
  kRequiredAllSecrets = 1,
  // Not required (every connection holds every role); a reader secret all the same.
  kOptional = 2,
  kCount = 3,
};

enum class CertificateChoice : uint8_t { kNone = 0, kOps = 1, kRobot = 2, kUnmapped = 3, kCount = 4 };

enum class AuthStep : uint8_t {
  // authChallenge. Operands: via (which bootstrap of the connection is called: 0 the one the
  // connection got, k the k-th one an authenticate answered, modulo how many there are).
  kChallenge = 0,
  // authenticate with a proof the driver computes. Operands: via; role (2 bytes, little endian,
  // any value: out-of-range roles included); key (0 the role's own secret, 1 another role's, 2 a
  // secret the master does not have, 3 an empty one); nonce (0 the latest challenge's, k the one
  // k challenges earlier); client nonce size (below 128: kAuthNonceSize bytes; else size - 128);
  // client nonce fill byte.
  kProve = 1,
  // authenticate with fuzz-made bytes. Operands: via; role (2 bytes); client nonce length (1
  // byte) and bytes; proof length (1 byte) and bytes.
  kForge = 2,
  // authenticate again with exactly the parameters of an earlier authenticate of this input.
  // Operands: which (modulo how many there were).
  kReplay = 3,
  // A call that needs a role. Operands: via; method (MethodChoice, modulo its count); epoch
  // (odd: the master's epoch; even: that value, which the master does not lead).
  kCall = 4,
  kCount = 5,
};

enum class MethodChoice : uint8_t {
  kLeaderInfo = 0,
  kDispatcher = 1,
  kHandOver = 2,
  kResourceManager = 3,
  kJobMaster = 4,
  kListJobs = 5,   // on the Dispatcher gateway that bootstrap hands out
  kSubmitJob = 6,  // idem
  kCancelJob = 7,  // idem
  kUnknownMethod = 8,  // a MasterBootstrap method id this build does not know (default deny)
  kCount = 9,
};

// Builds an input step by step (the seed generator's side).
class AuthHandshakeInput final {
 public:
  AuthHandshakeInput(AuthSettingsChoice settings, CertificateChoice certificate) {
    bytes_.push_back(static_cast<char>(settings));
    bytes_.push_back(static_cast<char>(certificate));
  }

  AuthHandshakeInput& challenge(uint8_t via = 0) { return put(AuthStep::kChallenge, via); }
  AuthHandshakeInput& prove(uint16_t role, uint8_t key, uint8_t nonce = 0, uint8_t via = 0,
                            uint8_t clientNonceSize = 0, uint8_t fill = 0x5a) {
    put(AuthStep::kProve, via);
    role16(role);
    for (uint8_t b : {key, nonce, clientNonceSize, fill}) bytes_.push_back(static_cast<char>(b));
    return *this;
  }
  AuthHandshakeInput& forge(uint16_t role, const std::string& clientNonce,
                            const std::string& proof, uint8_t via = 0) {
    put(AuthStep::kForge, via);
    role16(role);
    for (const std::string* field : {&clientNonce, &proof}) {
      const std::string bounded = field->substr(0, 255);
      bytes_.push_back(static_cast<char>(bounded.size()));
      bytes_ += bounded;
    }
    return *this;
  }
  AuthHandshakeInput& replay(uint8_t which) { return put(AuthStep::kReplay, which); }
  AuthHandshakeInput& call(uint8_t via, MethodChoice method, uint8_t epoch = 1) {
    put(AuthStep::kCall, via);
    bytes_.push_back(static_cast<char>(method));
    bytes_.push_back(static_cast<char>(epoch));
    return *this;
  }

  const std::string& bytes() const { return bytes_; }

 private:
  AuthHandshakeInput& put(AuthStep step, uint8_t operand) {
    bytes_.push_back(static_cast<char>(step));
    bytes_.push_back(static_cast<char>(operand));
    return *this;
  }
  void role16(uint16_t role) {
    bytes_.push_back(static_cast<char>(role & 0xff));
    bytes_.push_back(static_cast<char>(role >> 8));
  }
  std::string bytes_;
};

}  // namespace regent::fuzz

// Throwaway certificates for the TLS tests, made in process with OpenSSL when a test runs (none
// are committed: they would expire): a CA, and leaf certificates it signs.
#pragma once

#include <memory>
#include <string>

namespace regent::rpc::testing {

// A certificate and its private key, PEM-encoded.
struct PemPair {
  std::string certificate;
  std::string privateKey;
};

// A self-signed CA (EC P-256, valid from an hour ago for a day). Throws std::runtime_error
// when OpenSSL fails (a broken test environment).
class TestCa final {
 public:
  explicit TestCa(const std::string& commonName);
  ~TestCa();
  TestCa(const TestCa&) = delete;
  TestCa& operator=(const TestCa&) = delete;

  const std::string& certificatePem() const;

  // A leaf certificate signed by this CA, usable by TLS servers and clients, with subject CN
  // `commonName` and the subjectAltName extension `subjectAltNames` in OpenSSL's syntax
  // ("DNS:localhost,IP:127.0.0.1"); empty leaves the extension out.
  PemPair issue(const std::string& commonName, const std::string& subjectAltNames) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Writes `text` to `path` (replacing it); throws std::runtime_error when it cannot.
void writeTextFile(const std::string& path, const std::string& text);

}  // namespace regent::rpc::testing

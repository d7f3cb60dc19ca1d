// Making the TLS tests' CA and leaf certificates with OpenSSL's C API (see tls_test_certs.h).
#include "tests/rpc/tls_test_certs.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <atomic>
#include <fstream>
#include <stdexcept>

namespace regent::rpc::testing {
namespace {

constexpr long kValidBeforeSeconds = 3600;
constexpr long kValidForSeconds = 24 * 3600;

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("OpenSSL failed: ") + what);
}

struct KeyDeleter {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
struct CertDeleter {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct BioDeleter {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using Key = std::unique_ptr<EVP_PKEY, KeyDeleter>;
using Cert = std::unique_ptr<X509, CertDeleter>;
using Bio = std::unique_ptr<BIO, BioDeleter>;

Key newKey() {
  Key key(EVP_EC_gen("P-256"));
  check(key != nullptr, "EVP_EC_gen");
  return key;
}

std::string bioText(BIO* bio) {
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(size));
}

std::string certPem(X509* cert) {
  Bio bio(BIO_new(BIO_s_mem()));
  check(bio && PEM_write_bio_X509(bio.get(), cert) == 1, "PEM_write_bio_X509");
  return bioText(bio.get());
}

std::string keyPem(EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()));
  check(bio && PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) == 1,
        "PEM_write_bio_PrivateKey");
  return bioText(bio.get());
}

void addExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX context;
  X509V3_set_ctx(&context, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, &context, nid, value.c_str());
  check(extension != nullptr, "X509V3_EXT_conf_nid");
  const int added = X509_add_ext(cert, extension, -1);
  X509_EXTENSION_free(extension);
  check(added == 1, "X509_add_ext");
}

// A certificate for `key` named `commonName`, issued by `issuer` (itself when null).
Cert newCert(EVP_PKEY* key, const std::string& commonName, X509* issuer) {
  static std::atomic<long> serial{1000};
  Cert cert(X509_new());
  check(cert != nullptr, "X509_new");
  check(X509_set_version(cert.get(), 2) == 1, "X509_set_version");
  check(ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial++) == 1, "serial");
  check(X509_gmtime_adj(X509_getm_notBefore(cert.get()), -kValidBeforeSeconds) != nullptr,
        "notBefore");
  check(X509_gmtime_adj(X509_getm_notAfter(cert.get()), kValidForSeconds) != nullptr, "notAfter");
  check(X509_set_pubkey(cert.get(), key) == 1, "X509_set_pubkey");
  X509_NAME* name = X509_get_subject_name(cert.get());
  check(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                   reinterpret_cast<const unsigned char*>(commonName.c_str()), -1,
                                   -1, 0) == 1,
        "CN");
  check(X509_set_issuer_name(cert.get(), issuer ? X509_get_subject_name(issuer) : name) == 1,
        "X509_set_issuer_name");
  return cert;
}

}  // namespace

struct TestCa::Impl {
  Key key;
  Cert cert;
  std::string pem;
};

TestCa::TestCa(const std::string& commonName) : impl_(std::make_unique<Impl>()) {
  impl_->key = newKey();
  impl_->cert = newCert(impl_->key.get(), commonName, nullptr);
  X509* cert = impl_->cert.get();
  addExtension(cert, cert, NID_basic_constraints, "critical,CA:TRUE");
  addExtension(cert, cert, NID_key_usage, "critical,keyCertSign,cRLSign");
  addExtension(cert, cert, NID_subject_key_identifier, "hash");
  check(X509_sign(cert, impl_->key.get(), EVP_sha256()) > 0, "X509_sign");
  impl_->pem = certPem(cert);
}

TestCa::~TestCa() = default;

const std::string& TestCa::certificatePem() const { return impl_->pem; }

PemPair TestCa::issue(const std::string& commonName, const std::string& subjectAltNames) const {
  Key key = newKey();
  Cert cert = newCert(key.get(), commonName, impl_->cert.get());
  X509* issuer = impl_->cert.get();
  addExtension(cert.get(), issuer, NID_basic_constraints, "critical,CA:FALSE");
  addExtension(cert.get(), issuer, NID_key_usage, "critical,digitalSignature,keyEncipherment");
  addExtension(cert.get(), issuer, NID_ext_key_usage, "serverAuth,clientAuth");
  addExtension(cert.get(), issuer, NID_authority_key_identifier, "keyid");
  if (!subjectAltNames.empty()) {
    addExtension(cert.get(), issuer, NID_subject_alt_name, subjectAltNames);
  }
  check(X509_sign(cert.get(), impl_->key.get(), EVP_sha256()) > 0, "X509_sign");
  return PemPair{certPem(cert.get()), keyPem(key.get())};
}

void writeTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace regent::rpc::testing

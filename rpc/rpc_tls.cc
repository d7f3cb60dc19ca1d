// Building the RPC network from rpc.tls.* with kj-tls (see rpc_tls.h): the TLS context, and the
// network, address and receiver wrappers that run the handshakes.
#include "rpc/rpc_tls.h"

#include <kj/compat/tls.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>
#include <sstream>
#include <utility>

#include "common/host_port.h"
#include "common/task_set_error_logger.h"
#include "common/units.h"
#include "conf/config.h"
#include "rpc/abort_watching_stream.h"
#include "rpc/rpc_server.h"

namespace regent::rpc {

struct RpcNetwork::Impl {
  Impl(kj::Network& inner, kj::Timer& timer, Duration handshakeTimeout)
      : inner(inner), timer(timer), handshakeTimeout(handshakeTimeout) {}
  ~Impl() noexcept = default;

  kj::Network& inner;
  kj::Timer& timer;
  const Duration handshakeTimeout;
  std::string description = "plain TCP";
  uint64_t handshakesFailed = 0;
  // Set when TLS is on. The wrapper network goes before the context it uses.
  kj::Maybe<kj::TlsKeypair> keypair;
  kj::Maybe<kj::TlsCertificate> ca;
  kj::Own<kj::TlsContext> context;
  kj::Own<kj::Network> tlsNetwork;
};

namespace {

kj::Duration toKj(Duration duration) { return duration.count() * kj::MILLISECONDS; }

std::string explain(const kj::Exception& exception) { return exception.getDescription().cStr(); }

Result<std::string> readFile(const char* option, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Error::fatal(std::string(option) + ": cannot read " + path + ": " +
                        std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Error::fatal(std::string(option) + ": cannot read " + path);
  return text.str();
}

// Parses `path`'s text as a PEM T (kj::TlsCertificate or kj::TlsPrivateKey) into `out`, and
// keeps the text in `pem`.
template <typename T>
Status loadPem(const char* option, const std::string& path, const char* what, kj::Maybe<T>& out,
               std::string& pem) {
  auto text = readFile(option, path);
  if (!text.ok()) return text.error();
  pem = text.value();
  KJ_IF_MAYBE (problem,
               kj::runCatchingExceptions([&] { out = T(kj::StringPtr(text.value().c_str())); })) {
    return Error::fatal(std::string(option) + ": " + path + " holds no " + what +
                        " in PEM form: " + explain(*problem));
  }
  return {};
}

// Whether the private key `keyPem` belongs to the first certificate of `certificatePem` (kj-tls
// does not check: a mismatch would only show as failed handshakes). Both already parsed.
bool keyMatchesCertificate(const std::string& certificatePem, const std::string& keyPem) {
  BIO* certificateText = BIO_new_mem_buf(certificatePem.data(), int(certificatePem.size()));
  BIO* keyText = BIO_new_mem_buf(keyPem.data(), int(keyPem.size()));
  X509* certificate =
      certificateText ? PEM_read_bio_X509(certificateText, nullptr, nullptr, nullptr) : nullptr;
  // No password prompt: kj-tls has already refused an encrypted key.
  auto noPassword = [](char*, int, int, void*) { return 0; };
  EVP_PKEY* key =
      keyText ? PEM_read_bio_PrivateKey(keyText, nullptr, noPassword, nullptr) : nullptr;
  const bool matches = certificate && key && X509_check_private_key(certificate, key) == 1;
  EVP_PKEY_free(key);
  X509_free(certificate);
  BIO_free(keyText);
  BIO_free(certificateText);
  ERR_clear_error();
  return matches;
}

// The identity to hand RpcServer for a finished handshake: the certificate's common name when
// the client presented a verified one (kj-tls asks for one only with rpc.tls.verify-clients),
// else kj's own identity, which names none.
kj::Own<kj::PeerIdentity> identityOf(kj::Own<kj::PeerIdentity> identity) {
  auto& tls = kj::downcast<kj::TlsPeerIdentity>(*identity);
  if (!tls.hasCertificate()) return identity;
  std::string commonName;
  KJ_IF_MAYBE (problem,
               kj::runCatchingExceptions([&] { commonName = tls.getCommonName().cStr(); })) {
    // A certificate without a common name: verified, but naming no one.
    spdlog::debug("rpc: TLS client certificate has no common name: {}", explain(*problem));
    return identity;
  }
  return kj::heap<VerifiedClientCertificate>(std::move(commonName));
}

// Accepted connections, handed out only once their TLS handshake succeeded, with the identity
// of a client that presented a verified certificate (VerifiedClientCertificate).
class TlsReceiver final : public HoldingConnectionReceiver {
 public:
  TlsReceiver(RpcNetwork::Impl& tls, kj::Own<kj::ConnectionReceiver> inner)
      : tls_(tls),
        inner_(kj::mv(inner)),
        handshakes_(handshakeErrors_),
        accepting_(tls_.timer, *inner_,
                   AcceptLoop::Options{.name = "rpc",
                                       .address = "TLS port " + std::to_string(inner_->getPort())},
                   [this](kj::AuthenticatedStream&& accepted) { handshake(kj::mv(accepted)); }) {}
  ~TlsReceiver() noexcept = default;

  kj::Promise<kj::Own<kj::AsyncIoStream>> accept() override {
    return acceptAuthenticated().then(
        [](kj::AuthenticatedStream&& accepted) { return kj::mv(accepted.stream); });
  }

  kj::Promise<kj::AuthenticatedStream> acceptAuthenticated() override {
    if (!ready_.empty()) {
      kj::AuthenticatedStream accepted = kj::mv(ready_.front());
      ready_.pop_front();
      return kj::mv(accepted);
    }
    auto paf = kj::newPromiseAndFulfiller<kj::AuthenticatedStream>();
    waiter_ = kj::mv(paf.fulfiller);
    return kj::mv(paf.promise);
  }

  void capHeldConnections(uint64_t maxTotal, uint64_t maxPerPeer) override {
    caps_ = kj::heap<ConnectionCaps>(tls_.timer, maxTotal, maxPerPeer, " (in TLS handshakes)");
  }
  kj::Maybe<const ConnectionCaps&> heldConnectionCaps() const override {
    KJ_IF_MAYBE (caps, caps_) return **caps;
    return nullptr;
  }

  AcceptLoop& socketAccepts() override { return accepting_; }

  uint getPort() override { return inner_->getPort(); }
  void getsockopt(int level, int option, void* value, uint* length) override {
    inner_->getsockopt(level, option, value, length);
  }
  void setsockopt(int level, int option, const void* value, uint length) override {
    inner_->setsockopt(level, option, value, length);
  }

 private:
  void handshake(kj::AuthenticatedStream accepted) {
    const std::string peer = peerAddressOf(*accepted.stream);
    // A handshake holds its connection's place within the caps until it ends either way.
    kj::Maybe<kj::Own<ConnectionCaps::Slot>> slot;
    KJ_IF_MAYBE (caps, caps_) {
      slot = (*caps)->admit(peer);
      if (slot == nullptr) return;  // Over a cap: dropping the stream closes the socket.
    }
    const Duration timeout = tls_.handshakeTimeout;
    kj::TlsContext& context = *tls_.context;
    auto handshake =
        kj::evalNow([&] { return context.wrapServer(kj::mv(accepted)); })
            .exclusiveJoin(tls_.timer.afterDelay(toKj(timeout))
                               .then([timeout]() -> kj::Promise<kj::AuthenticatedStream> {
                                 return KJ_EXCEPTION(DISCONNECTED,
                                                     kj::str("no TLS handshake within ",
                                                             formatDuration(timeout).c_str()));
                               }));
    handshakes_.add(handshake
                        .then(
                            [this](kj::AuthenticatedStream&& secured) {
                              secured.peerIdentity = identityOf(kj::mv(secured.peerIdentity));
                              deliver(kj::mv(secured));
                            },
                            [this, peer](kj::Exception&& exception) {
                              ++tls_.handshakesFailed;
                              spdlog::warn(
                                  "rpc: refused connection from {}: TLS handshake failed: {}", peer,
                                  explain(exception));
                            })
                        .attach(kj::mv(slot)));
  }

  void deliver(kj::AuthenticatedStream accepted) {
    KJ_IF_MAYBE (waiter, waiter_) {
      if ((*waiter)->isWaiting()) {
        (*waiter)->fulfill(kj::mv(accepted));
        waiter_ = nullptr;
        return;
      }
    }
    ready_.push_back(kj::mv(accepted));
  }

  RpcNetwork::Impl& tls_;
  kj::Own<kj::ConnectionReceiver> inner_;
  // Set by the RPC server; handshakes hold slots of it, so it goes after them.
  kj::Maybe<kj::Own<ConnectionCaps>> caps_;
  std::deque<kj::AuthenticatedStream> ready_;  // Handshake done, not yet accepted.
  kj::Maybe<kj::Own<kj::PromiseFulfiller<kj::AuthenticatedStream>>> waiter_;
  TaskSetErrorLogger handshakeErrors_{"rpc: TLS handshake"};
  kj::TaskSet handshakes_;
  AcceptLoop accepting_;  // Out of descriptors, it backs off and sheds (common/accept_loop.h).
};

class TlsAddress final : public kj::NetworkAddress {
 public:
  TlsAddress(RpcNetwork::Impl& tls, std::string host, kj::Own<kj::NetworkAddress> inner)
      : tls_(tls), host_(std::move(host)), inner_(kj::mv(inner)) {}
  ~TlsAddress() noexcept = default;

  kj::Promise<kj::Own<kj::AsyncIoStream>> connect() override {
    // Callers may drop the address once connect() returns: the continuation owns what it uses.
    kj::TlsContext& context = *tls_.context;
    return inner_->connect().then(
        [&context, host = kj::str(host_.c_str())](kj::Own<kj::AsyncIoStream>&& stream) mutable {
          auto secured = context.wrapClient(kj::mv(stream), host);
          return secured.attach(kj::mv(host));
        });
  }

  kj::Own<kj::ConnectionReceiver> listen() override {
    KJ_REQUIRE(tls_.keypair != nullptr, "a TLS listener needs rpc.tls.cert and rpc.tls.key");
    return kj::heap<TlsReceiver>(tls_, inner_->listen());
  }

  kj::Own<kj::NetworkAddress> clone() override {
    return kj::heap<TlsAddress>(tls_, host_, inner_->clone());
  }

  kj::String toString() override { return kj::str("tls:", inner_->toString()); }

 private:
  RpcNetwork::Impl& tls_;
  const std::string host_;
  kj::Own<kj::NetworkAddress> inner_;
};

class TlsNetwork final : public kj::Network {
 public:
  explicit TlsNetwork(RpcNetwork::Impl& tls) : tls_(tls) {}

  kj::Promise<kj::Own<kj::NetworkAddress>> parseAddress(kj::StringPtr address,
                                                        uint portHint) override {
    RpcNetwork::Impl& tls = tls_;
    return tls.inner.parseAddress(address, portHint)
        .then([&tls, host = hostOf(address.cStr())](
                  kj::Own<kj::NetworkAddress>&& resolved) -> kj::Own<kj::NetworkAddress> {
          return kj::heap<TlsAddress>(tls, host, kj::mv(resolved));
        });
  }

  kj::Own<kj::NetworkAddress> getSockaddr(const void*, uint) override {
    KJ_UNIMPLEMENTED("the TLS RPC network needs a host name to verify: use parseAddress()");
  }

  kj::Own<kj::Network> restrictPeers(kj::ArrayPtr<const kj::StringPtr>,
                                     kj::ArrayPtr<const kj::StringPtr>) override {
    KJ_UNIMPLEMENTED("the TLS RPC network does not restrict peers");
  }

 private:
  RpcNetwork::Impl& tls_;
};

}  // namespace

RpcTlsOptions rpcTlsOptionsFrom(const Config& config) {
  RpcTlsOptions options;
  options.certFile = config.getString("rpc.tls.cert");
  options.keyFile = config.getString("rpc.tls.key");
  options.caFile = config.getString("rpc.tls.ca");
  options.verifyClients = config.getBool("rpc.tls.verify-clients");
  return options;
}

Result<kj::Own<RpcNetwork>> RpcNetwork::create(kj::Network& inner, kj::Timer& timer,
                                               const RpcTlsOptions& options, RpcTlsRole role,
                                               Duration handshakeTimeout) {
  auto impl = kj::heap<Impl>(inner, timer, handshakeTimeout);
  const bool hasCert = !options.certFile.empty();
  const bool hasKey = !options.keyFile.empty();
  const bool hasCa = !options.caFile.empty();
  if (hasCert != hasKey) {
    return Error::fatal("rpc.tls.cert and rpc.tls.key must be set together (rpc.tls.cert is \"" +
                        options.certFile + "\", rpc.tls.key is \"" + options.keyFile + "\")");
  }
  if (options.verifyClients && !hasCa) {
    return Error::fatal(
        "rpc.tls.verify-clients needs rpc.tls.ca (the CA client certificates must chain to)");
  }
  bool on = false;
  if (role == RpcTlsRole::kServer) {
    if (hasCa && !hasCert) {
      return Error::fatal("rpc.tls.ca is set (" + options.caFile +
                          ") but rpc.tls.cert and rpc.tls.key are not: the RPC listener needs "
                          "a certificate and key to serve TLS");
    }
    on = hasCert;
  } else {
    if (hasCert && !hasCa) {
      return Error::fatal("rpc.tls.cert is set (" + options.certFile +
                          ") but rpc.tls.ca is not: an RPC client needs rpc.tls.ca to verify "
                          "the server's certificate");
    }
    on = hasCa;
  }
  if (!on) return kj::heap<RpcNetwork>(kj::mv(impl));

  if (hasCert) {
    kj::Maybe<kj::TlsCertificate> certificate;
    kj::Maybe<kj::TlsPrivateKey> key;
    std::string certificatePem;
    std::string keyPem;
    if (auto loaded =
            loadPem("rpc.tls.cert", options.certFile, "certificate", certificate, certificatePem);
        !loaded.ok()) {
      return loaded.error();
    }
    if (auto loaded = loadPem("rpc.tls.key", options.keyFile, "private key", key, keyPem);
        !loaded.ok()) {
      return loaded.error();
    }
    if (!keyMatchesCertificate(certificatePem, keyPem)) {
      return Error::fatal("rpc.tls.key: " + options.keyFile +
                          " is not the private key of the certificate in rpc.tls.cert (" +
                          options.certFile + ")");
    }
    KJ_IF_MAYBE (c, certificate) {
      KJ_IF_MAYBE (k, key) {
        impl->keypair = kj::TlsKeypair{kj::mv(*k), kj::mv(*c)};
      }
    }
  }
  if (hasCa) {
    std::string caPem;
    if (auto loaded = loadPem("rpc.tls.ca", options.caFile, "CA certificate", impl->ca, caPem);
        !loaded.ok()) {
      return loaded.error();
    }
  }

  kj::TlsContext::Options tlsOptions;
  tlsOptions.useSystemTrustStore = false;  // Only rpc.tls.ca is trusted.
  tlsOptions.verifyClients = role == RpcTlsRole::kServer && options.verifyClients;
  KJ_IF_MAYBE (keypair, impl->keypair) {
    tlsOptions.defaultKeypair = *keypair;
  }
  KJ_IF_MAYBE (ca, impl->ca) {
    tlsOptions.trustedCertificates = kj::arrayPtr(ca, 1);
  }
  KJ_IF_MAYBE (problem, kj::runCatchingExceptions([&] {
                 impl->context = kj::heap<kj::TlsContext>(kj::mv(tlsOptions));
               })) {
    return Error::fatal("cannot set up TLS from rpc.tls.cert (" + options.certFile +
                        "), rpc.tls.key (" + options.keyFile + ") and rpc.tls.ca (" +
                        options.caFile + "): " + explain(*problem));
  }
  impl->tlsNetwork = kj::heap<TlsNetwork>(*impl);
  if (role == RpcTlsRole::kServer) {
    impl->description =
        "TLS (certificate " + options.certFile +
        (options.verifyClients ? ", clients must present a certificate from " + options.caFile
                               : std::string(", clients not verified")) +
        ")";
  } else {
    impl->description = "TLS (servers verified against " + options.caFile +
                        (hasCert ? ", client certificate " + options.certFile : std::string()) +
                        ")";
  }
  return kj::heap<RpcNetwork>(kj::mv(impl));
}

RpcNetwork::RpcNetwork(kj::Own<Impl> impl) : impl_(kj::mv(impl)) {}

RpcNetwork::~RpcNetwork() noexcept = default;

kj::Network& RpcNetwork::network() { return impl_->tlsNetwork ? *impl_->tlsNetwork : impl_->inner; }

bool RpcNetwork::tls() const { return impl_->tlsNetwork.get() != nullptr; }

const std::string& RpcNetwork::describe() const { return impl_->description; }

uint64_t RpcNetwork::handshakesFailed() const { return impl_->handshakesFailed; }

}  // namespace regent::rpc

// Optional TLS for the RPC transport (rpc.tls.*): the network RpcServer and RpcClient are given,
// either the loop's plain one or a kj-tls wrapper of it, built from the options at startup.
#pragma once

#include <kj/async-io.h>
#include <kj/memory.h>
#include <kj/timer.h>

#include <cstdint>
#include <string>

#include "common/result.h"
#include "common/time.h"

namespace regent {
class Config;
}  // namespace regent

namespace regent::rpc {

// rpc.tls.cert, rpc.tls.key, rpc.tls.ca (PEM file paths; empty when unset) and
// rpc.tls.verify-clients, as configured.
struct RpcTlsOptions {
  std::string certFile;
  std::string keyFile;
  std::string caFile;
  bool verifyClients = false;
};

RpcTlsOptions rpcTlsOptionsFrom(const Config& config);

// Which end of RPC connections a process is; it decides when TLS is on:
//   kServer (regent-master's listener): TLS when rpc.tls.cert and rpc.tls.key are set. The
//     server presents that certificate; with rpc.tls.verify-clients it also requires a client
//     certificate chaining to rpc.tls.ca. rpc.tls.ca without rpc.tls.cert is an error (the
//     listener would be plain while clients expect TLS).
//   kClient (regentctl): TLS when rpc.tls.ca is set; the server's certificate must chain to
//     it and name the host dialled (see RpcNetwork). rpc.tls.cert and rpc.tls.key, when set,
//     are presented as the client certificate (mutual TLS); without rpc.tls.ca they are an
//     error (the client could not verify the server).
// Only rpc.tls.ca is trusted: the system's trust store never is.
enum class RpcTlsRole { kServer, kClient };

// The kj::Network a process's RPC runs on. With TLS off it is the plain network it was created
// from; with TLS on it wraps that network:
//   - connect() (client) completes the TCP connection, then the TLS handshake, and only then
//     resolves; a failed handshake (untrusted certificate, wrong host name) rejects it with
//     kj's reason ("TLS peer's certificate is not trusted", ...). The host name checked is the
//     host part of the address dialled: "master-1.internal" for "master-1.internal:6123",
//     "127.0.0.1" for "127.0.0.1:6123", "::1" for "[::1]:6123". kj-tls 0.9.2 checks it with
//     X509_VERIFY_PARAM_set1_host, which compares against the certificate's DNS names only, so
//     a server dialled by IP address needs that address as a DNS subjectAltName
//     ("DNS:127.0.0.1"); an IP subjectAltName alone does not match.
//   - listen() returns a receiver whose accept() yields only connections whose handshake
//     succeeded. Handshakes run concurrently, each bounded by `handshakeTimeout`; a failed one
//     (a plain-TCP client, an untrusted or missing client certificate, a timeout) is logged as
//     a warning naming the peer, counted in handshakesFailed(), and never reaches the RPC
//     server, which keeps serving the others. The server ignores the host name a client asks
//     for (SNI): it always presents rpc.tls.cert. A verified client is any holder of a
//     certificate chaining to rpc.tls.ca; its names are not checked here. The receiver's
//     acceptAuthenticated() gives such a client's connection a VerifiedClientCertificate
//     identity (rpc_server.h) carrying the certificate's common name, which RpcServer puts in
//     RpcPeer::tlsCommonName for the bootstrap to map to a role; a client that presented none
//     (rpc.tls.verify-clients off: none is asked for) or one without a common name gets kj's
//     identity, which names no one. The receiver is a HoldingConnectionReceiver: the RPC server
//     gives it its connection caps (rpc.max-connections, rpc.max-connections-per-peer), which
//     then also bound the connections in their handshake, counted apart from those served; one
//     over a cap is closed at once, before its handshake.
// getSockaddr() and restrictPeers() are not supported on the TLS network.
//
// Thread-safety: loop-thread only. The inner network and the timer must outlive this object,
// and this object must outlive every server, client and stream made through network().
class RpcNetwork final {
 public:
  // Reads the PEM files and builds the TLS context. Fails (fatal) naming the option and the
  // path when a file cannot be read or does not hold what the option needs ("rpc.tls.key:
  // /etc/regent/key.pem holds no private key: ..."), or when the options do not fit `role`
  // (see RpcTlsRole). The pairing rules that hold for every role (rpc.tls.cert and rpc.tls.key
  // together; rpc.tls.verify-clients needs rpc.tls.ca) are checked when the configuration is
  // loaded (conf/options.cc) and again here.
  static Result<kj::Own<RpcNetwork>> create(kj::Network& inner, kj::Timer& timer,
                                            const RpcTlsOptions& options, RpcTlsRole role,
                                            Duration handshakeTimeout);

  struct Impl;
  explicit RpcNetwork(kj::Own<Impl> impl);
  ~RpcNetwork() noexcept;
  RpcNetwork(const RpcNetwork&) = delete;
  RpcNetwork& operator=(const RpcNetwork&) = delete;

  // What RpcServer::listen and RpcClient take.
  kj::Network& network();
  bool tls() const;
  // One line for the startup log: "plain TCP", "TLS (certificate /etc/regent/master.pem,
  // clients verified against /etc/regent/ca.pem)".
  const std::string& describe() const;
  // Server side: handshakes of accepted connections that failed or timed out so far.
  uint64_t handshakesFailed() const;

 private:
  kj::Own<Impl> impl_;
};

}  // namespace regent::rpc

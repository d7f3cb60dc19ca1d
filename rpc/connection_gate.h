// The state of one accepted RPC connection that the server shares with what its bootstrap
// built for it: whether the peer authenticated, and a way to close the connection
// (rpc/rpc_server.h serves connections; the master's per-connection objects keep a reference).
#pragma once

#include <kj/function.h>
#include <kj/refcount.h>

#include <string>

namespace regent::rpc {

// The authentication state of one accepted connection, and a way to close it, shared by the
// server and whatever the bootstrap factory built for that connection (keep a reference with
// kj::addRef). A connection
// starts unauthenticated unless the server was told that no authentication is required
// (RpcOptions::requireAuthentication false); the bootstrap marks it authenticated once the
// peer has proven who it is, which lifts the limits RpcServer holds an unauthenticated
// connection to (its message cap and deadline, see RpcServer). The factory may mark it at once,
// while it builds the bootstrap (a peer its verified TLS certificate identifies): then neither
// limit ever applies. Loop-thread only.
class ConnectionGate final : public kj::Refcounted {
 public:
  explicit ConnectionGate(bool authenticated) : authenticated_(authenticated) {}

  bool authenticated() const { return authenticated_; }
  // Marks the connection authenticated and runs the server's hook (set by RpcServer), which
  // lifts the limits an unauthenticated connection is held to. Idempotent; harmless once the
  // connection has closed.
  void markAuthenticated() {
    if (authenticated_) return;
    authenticated_ = true;
    KJ_IF_MAYBE (hook, onAuthenticated_) {
      (*hook)();
    }
  }
  // Server side: what markAuthenticated() runs, or nothing (the connection is gone).
  void setOnAuthenticated(kj::Maybe<kj::Function<void()>> hook) { onAuthenticated_ = kj::mv(hook); }

  // Asks the server to close the connection, telling the peer `reason` first (an Abort, best
  // effort): whoever served it decided it is over (a leader whose term ended closes the
  // connections of the workers registered in it). Harmless once the connection has closed.
  void close(const std::string& reason) {
    KJ_IF_MAYBE (hook, onClose_) {
      (*hook)(reason);
    }
  }
  // Server side: what close() runs, or nothing (the connection is gone).
  void setOnClose(kj::Maybe<kj::Function<void(const std::string&)>> hook) {
    onClose_ = kj::mv(hook);
  }

 private:
  bool authenticated_;
  kj::Maybe<kj::Function<void()>> onAuthenticated_;
  kj::Maybe<kj::Function<void(const std::string&)>> onClose_;
};

}  // namespace regent::rpc

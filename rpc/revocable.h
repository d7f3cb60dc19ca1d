// A link from what a service hands out and cannot take back (a gateway server Cap'n Proto keeps
// alive until its last client lets go, an endpoint that outlives the term that made it) to the
// service itself, cut when the service goes: a call through a cut link fails with DISCONNECTED
// instead of reaching freed memory. One mechanism for every served capability that may outlive
// its service (the JobMasters' gateways, the term's endpoints, the worker's gateway).
#pragma once

#include <kj/exception.h>

#include <memory>
#include <string>
#include <utility>

namespace regent::rpc {

// The service's end: it owns the link to `target` and cuts it in its destructor (or earlier,
// with revoke()). Declare it as a member of the target, so that the link is cut before the
// target's other members go. Loop-thread only (nothing is atomic): the links it hands out are
// used on the thread that owns the target.
template <typename T>
class Revocable final {
  struct State {
    T* target;
    std::string message;
  };

 public:
  // The end handed out. Copyable; it keeps a small shared record alive, never the target.
  class Link final {
   public:
    // The target. WARNING: throws kj DISCONNECTED with the revocation message once the link is
    // cut; a gateway handler calls this first, so that its call fails as a lost connection does
    // (the caller reconnects or gives up) and no handler runs against a service that is gone.
    T& get() const {
      if (state_->target == nullptr) {
        const std::string& message = state_->message;
        kj::throwFatalException(kj::Exception(kj::Exception::Type::DISCONNECTED, __FILE__, __LINE__,
                                              kj::heapString(message.data(), message.size())));
      }
      return *state_->target;
    }
    // The target, or null once the link is cut (for callbacks that then do nothing).
    T* tryGet() const { return state_->target; }
    bool revoked() const { return state_->target == nullptr; }

   private:
    friend class Revocable;
    explicit Link(std::shared_ptr<const State> state) : state_(std::move(state)) {}
    std::shared_ptr<const State> state_;
  };

  // `message` is the description of the DISCONNECTED exception a cut link throws ("the JobMaster
  // of job 2a… was released").
  Revocable(T& target, std::string message)
      : state_(std::make_shared<State>(State{&target, std::move(message)})) {}
  ~Revocable() noexcept { revoke(); }
  Revocable(const Revocable&) = delete;
  Revocable& operator=(const Revocable&) = delete;

  Link link() const { return Link(state_); }
  // Cuts every link handed out, at once. Idempotent.
  void revoke() { state_->target = nullptr; }
  bool revoked() const { return state_->target == nullptr; }

 private:
  const std::shared_ptr<State> state_;
};

}  // namespace regent::rpc

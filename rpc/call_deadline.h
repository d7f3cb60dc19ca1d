// Deadlines for outgoing RPC calls (rpc.call-timeout): a call that has not completed in time is
// cancelled and fails as OVERLOADED, naming the method and the timeout.
#pragma once

#include <capnp/capability.h>
#include <capnp/schema.h>
#include <kj/async.h>
#include <kj/exception.h>
#include <kj/timer.h>

#include <string>
#include <utility>

#include "common/time.h"

namespace regent::rpc {

// "Interface.method" for the parameter struct of a method ("DispatcherGateway.jobStatus" for
// DispatcherGateway.jobStatus$Params); a named parameter struct gives its own name.
std::string methodNameOf(capnp::StructSchema params);

// The exception a timed-out call fails with: type OVERLOADED (back off, then retry: rpc/failure.h),
// description "call DispatcherGateway.jobStatus timed out after 10s".
kj::Exception callTimedOut(const std::string& method, Duration timeout);

// `call` bounded by `timeout` on `timer`: resolves as `call` does if it completes in time;
// otherwise `call` is dropped (Cap'n Proto then tells the callee to cancel it) and the result
// rejects with callTimedOut(method, timeout). `timer` must outlive the returned promise.
template <typename T>
kj::Promise<T> withDeadline(kj::Timer& timer, Duration timeout, std::string method,
                            kj::Promise<T> call) {
  return call.exclusiveJoin(timer.afterDelay(timeout.count() * kj::MILLISECONDS)
                                .then([method = std::move(method), timeout]() -> kj::Promise<T> {
                                  return callTimedOut(method, timeout);
                                }));
}

// The deadline every outgoing call of a process gets (rpc.call-timeout). Loop-thread only.
class CallDeadline final {
 public:
  // `timer` (the loop's, or a manual one in tests) must outlive this object and every promise
  // it returns.
  CallDeadline(kj::Timer& timer, Duration timeout) : timer_(timer), timeout_(timeout) {}

  Duration timeout() const { return timeout_; }

  // Sends `request` with the deadline; the method is named from the request's type.
  // Pipelining on the result is given up (the answer is a plain promise).
  template <typename Params, typename Results>
  kj::Promise<capnp::Response<Results>> send(capnp::Request<Params, Results>&& request) const {
    kj::Promise<capnp::Response<Results>> call = request.send();
    return withDeadline(timer_, timeout_, methodNameOf(capnp::Schema::from<Params>()),
                        kj::mv(call));
  }

  // Any promise with the deadline, named `method` in the timeout error.
  template <typename T>
  kj::Promise<T> apply(std::string method, kj::Promise<T> call) const {
    return withDeadline(timer_, timeout_, std::move(method), kj::mv(call));
  }

 private:
  kj::Timer& timer_;
  Duration timeout_;
};

}  // namespace regent::rpc

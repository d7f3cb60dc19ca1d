// How a caller of the leader's gateways treats what went wrong: ONE classification of the wire
// Failures a master returns and of the kj exceptions a call throws, shared by every follower of
// the leader (regentctl, workers). docs/wire.md lists the Failures.
#pragma once

#include <kj/exception.h>

#include <string>
#include <variant>

#include "common/time.h"
#include "rpc/schema/common.capnp.h"

namespace regent::client {

// What to do after a failed attempt.
enum class FailureAction {
  // The leadership moved or is not ready (fencing, notLeader, unavailable, a lost connection:
  // DISCONNECTED): read the leader again, then retry after a short backoff.
  kResolveAgain,
  // The leader is there but did not answer in time (a call past its deadline: OVERLOADED):
  // retry the same leader after a growing backoff.
  kBackOff,
  // Retrying cannot help (invalidArgument, notFound, alreadyExists, failedPrecondition,
  // tooLarge, notRegistered, and kj exceptions of type FAILED or UNIMPLEMENTED, which are bugs):
  // the caller gets the failure. notRegistered is final for the call: the caller registers
  // again and makes a new call.
  kFatal,
};

const char* failureActionName(FailureAction action);  // "resolve again", "back off", "fatal"

FailureAction classify(wire::Failure::Which failure);
FailureAction classify(const kj::Exception& exception);

// A wire::Failure copied out of its response (which it may outlive).
struct CallFailure {
  wire::Failure::Which which = wire::Failure::FENCING;
  std::string message;       // Failure.message.
  std::string field;         // invalidArgument: the offending field's path.
  std::string fieldMessage;  // invalidArgument: what is wrong with it.
  Duration retryAfter{0};    // unavailable: the callee's suggestion (0: the caller's backoff).

  static CallFailure from(wire::Failure::Reader failure);
  FailureAction action() const { return classify(which); }
  // One line for people: "field: message" for invalidArgument (just the message when no field
  // is named), else Failure.message.
  std::string describe() const;
};

// What one attempt of a call came to: the value, or the callee's Failure.
template <typename T>
using Attempt = std::variant<T, CallFailure>;

}  // namespace regent::client

// wire::Failure builders and the classification of failed calls (see failure.h).
#include "rpc/failure.h"

#include "rpc/wire_ids.h"

namespace regent::rpc {
namespace failures {

void fencing(wire::Failure::Builder failure, uint64_t expected, uint64_t received,
             const std::string& message) {
  failure.setMessage(message);
  auto fencing = failure.initFencing();
  fencing.setExpected(expected);
  fencing.setReceived(received);
}

wire::LeaderInfo::Builder notLeader(wire::Failure::Builder failure, const std::string& message) {
  failure.setMessage(message);
  return failure.initNotLeader().initLeader();
}

void notLeaderUnknown(wire::Failure::Builder failure, const std::string& message) {
  failure.setMessage(message);
  failure.initNotLeader().setUnknown();
}

void invalidArgument(wire::Failure::Builder failure, const std::string& field,
                     const std::string& fieldMessage, const std::string& message) {
  failure.setMessage(message);
  auto invalid = failure.initInvalidArgument();
  invalid.setField(field);
  invalid.setMessage(fieldMessage);
}

void notFound(wire::Failure::Builder failure, const JobId& job, const std::string& message) {
  failure.setMessage(message);
  wire::setWireId(failure.initNotFound().initJob(), job);
}

void alreadyExists(wire::Failure::Builder failure, const JobId& job, const std::string& message) {
  failure.setMessage(message);
  wire::setWireId(failure.initAlreadyExists().initJob(), job);
}

void notFound(wire::Failure::Builder failure, const AllocationId& allocation,
              const std::string& message) {
  failure.setMessage(message);
  wire::setWireId(failure.initNotFound().initAllocation(), allocation);
}

void notFound(wire::Failure::Builder failure, const AttemptId& attempt,
              const std::string& message) {
  failure.setMessage(message);
  wire::setWireId(failure.initNotFound().initAttempt(), attempt);
}

void notFoundSlot(wire::Failure::Builder failure, const ResourceId& taskExecutor,
                  uint32_t slotIndex, const std::string& message) {
  failure.setMessage(message);
  auto slot = failure.initNotFound().initSlot();
  wire::setWireId(slot.initResourceId(), taskExecutor);
  slot.setSlotIndex(slotIndex);
}

void alreadyExists(wire::Failure::Builder failure, const ResourceId& taskExecutor,
                   const std::string& message) {
  failure.setMessage(message);
  wire::setWireId(failure.initAlreadyExists().initTaskExecutor(), taskExecutor);
}

void notRegistered(wire::Failure::Builder failure, const ResourceId& taskExecutor,
                   const std::string& message) {
  failure.setMessage(message);
  wire::setWireId(failure.initNotRegistered().initTaskExecutor(), taskExecutor);
}

void notRegistered(wire::Failure::Builder failure, const JobId& jobMaster,
                   const std::string& message) {
  failure.setMessage(message);
  wire::setWireId(failure.initNotRegistered().initJob(), jobMaster);
}

void failedPrecondition(wire::Failure::Builder failure, const std::string& message) {
  failure.setMessage(message);
  failure.setFailedPrecondition();
}

void tooLarge(wire::Failure::Builder failure, uint64_t sizeBytes, uint64_t limitBytes,
              const std::string& message) {
  failure.setMessage(message);
  auto tooLarge = failure.initTooLarge();
  tooLarge.setSizeBytes(sizeBytes);
  tooLarge.setLimitBytes(limitBytes);
}

void unavailable(wire::Failure::Builder failure, uint64_t retryAfterMs,
                 const std::string& message) {
  failure.setMessage(message);
  failure.initUnavailable().setRetryAfterMs(retryAfterMs);
}

void unauthenticated(wire::Failure::Builder failure, const std::string& message) {
  failure.setMessage(message);
  failure.setUnauthenticated();
}

void permissionDenied(wire::Failure::Builder failure, wire::Role required, wire::Role held,
                      const std::vector<wire::Role>& accepted, const std::string& message) {
  failure.setMessage(message);
  auto denied = failure.initPermissionDenied();
  denied.setRequired(required);
  denied.setHeld(held);
  auto list = denied.initAccepted(static_cast<unsigned>(accepted.empty() ? 1 : accepted.size()));
  if (accepted.empty()) {
    list.set(0, required);
  } else {
    for (unsigned i = 0; i < accepted.size(); ++i) list.set(i, accepted[i]);
  }
}

void permissionDenied(wire::Failure::Builder failure, wire::Role required, wire::Role held,
                      const std::string& message) {
  permissionDenied(failure, required, held, {}, message);
}

}  // namespace failures


const char* failureActionName(FailureAction action) {
  switch (action) {
    case FailureAction::kResolveAgain:
      return "resolve again";
    case FailureAction::kBackOff:
      return "back off";
    case FailureAction::kFatal:
      return "fatal";
  }
  return "?";
}

FailureAction classify(wire::Failure::Which failure) {
  switch (failure) {
    case wire::Failure::FENCING:
    case wire::Failure::NOT_LEADER:
    case wire::Failure::UNAVAILABLE:
      return FailureAction::kResolveAgain;
    case wire::Failure::INVALID_ARGUMENT:
    case wire::Failure::NOT_FOUND:
    case wire::Failure::ALREADY_EXISTS:
    case wire::Failure::NOT_REGISTERED:
    case wire::Failure::FAILED_PRECONDITION:
    case wire::Failure::TOO_LARGE:
    case wire::Failure::UNAUTHENTICATED:
    case wire::Failure::PERMISSION_DENIED:
      return FailureAction::kFatal;
  }
  // A Failure of a newer schema this build does not know: do not retry blindly.
  return FailureAction::kFatal;
}

FailureAction classify(const kj::Exception& exception) {
  switch (exception.getType()) {
    case kj::Exception::Type::DISCONNECTED:
      return FailureAction::kResolveAgain;
    case kj::Exception::Type::OVERLOADED:
      return FailureAction::kBackOff;
    case kj::Exception::Type::FAILED:
    case kj::Exception::Type::UNIMPLEMENTED:
      return FailureAction::kFatal;
  }
  return FailureAction::kFatal;
}

const char* masterRefusalName(MasterRefusal refusal) {
  switch (refusal) {
    case MasterRefusal::kNotChallenged:
      return "not_challenged";
    case MasterRefusal::kWrongProof:
      return "wrong_proof";
  }
  return "?";
}

FailureAction classify(MasterRefusal /*refusal*/) { return FailureAction::kResolveAgain; }

CallFailure CallFailure::from(wire::Failure::Reader failure) {
  CallFailure copy;
  copy.which = failure.which();
  copy.message = failure.getMessage().cStr();
  if (failure.isInvalidArgument()) {
    copy.field = failure.getInvalidArgument().getField().cStr();
    copy.fieldMessage = failure.getInvalidArgument().getMessage().cStr();
  } else if (failure.isUnavailable()) {
    copy.retryAfter =
        Duration(static_cast<Duration::rep>(failure.getUnavailable().getRetryAfterMs()));
  }
  return copy;
}

std::string CallFailure::describe() const {
  if (which != wire::Failure::INVALID_ARGUMENT) return message;
  const std::string& what = fieldMessage.empty() ? message : fieldMessage;
  return field.empty() ? what : field + ": " + what;
}

}  // namespace regent::rpc

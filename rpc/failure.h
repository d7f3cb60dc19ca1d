// wire::Failure written and read in one place. The builders are how every callee (the master's
// bootstrap, the fenced endpoint, the Dispatcher's gateway, the workers' gateways) fills a
// Failure; the classification is how every caller (regentctl, workers, through the
// follow-the-leader client of client/leader_client.h) decides what to do with one, and with the
// kj exception a call throws instead. docs/wire.md lists the Failures and what each means.
#pragma once

#include <kj/exception.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "common/ids.h"
#include "common/time.h"
#include "rpc/schema/common.capnp.h"

namespace regent::rpc {

// ---- Building a Failure -----------------------------------------------------------------------
// Each builder sets Failure.message (one line for people) and the member of the union with its
// details; `failure` is the result's freshly initialized `failure` field.
namespace failures {

// The call's epoch is not acceptable: `expected` is the callee's epoch (a master) or the lowest
// it accepts (a worker); 0 when the callee's term has ended.
void fencing(wire::Failure::Builder failure, uint64_t expected, uint64_t received,
             const std::string& message);
// The callee does not lead. Returns the LeaderInfo to fill with the leader the callee knows of.
wire::LeaderInfo::Builder notLeader(wire::Failure::Builder failure, const std::string& message);
// The callee does not lead and knows no leader right now.
void notLeaderUnknown(wire::Failure::Builder failure, const std::string& message);
// `field` (a path such as "vertices[2].parallelism", may be empty) is wrong: `fieldMessage`.
void invalidArgument(wire::Failure::Builder failure, const std::string& field,
                     const std::string& fieldMessage, const std::string& message);
void notFound(wire::Failure::Builder failure, const JobId& job, const std::string& message);
void alreadyExists(wire::Failure::Builder failure, const JobId& job, const std::string& message);
// The same for the other entities a Failure can name (EntityRef).
void notFound(wire::Failure::Builder failure, const AllocationId& allocation,
              const std::string& message);
void notFound(wire::Failure::Builder failure, const AttemptId& attempt,
              const std::string& message);
void notFoundSlot(wire::Failure::Builder failure, const ResourceId& taskExecutor,
                  uint32_t slotIndex, const std::string& message);
void alreadyExists(wire::Failure::Builder failure, const ResourceId& taskExecutor,
                   const std::string& message);
// The caller is not registered with the callee in this term: a TaskExecutor (by its resource
// id) or a JobMaster (by its job id). It registers again, then makes a new call.
void notRegistered(wire::Failure::Builder failure, const ResourceId& taskExecutor,
                   const std::string& message);
void notRegistered(wire::Failure::Builder failure, const JobId& jobMaster,
                   const std::string& message);
void failedPrecondition(wire::Failure::Builder failure, const std::string& message);
void tooLarge(wire::Failure::Builder failure, uint64_t sizeBytes, uint64_t limitBytes,
              const std::string& message);
// The callee cannot serve now; `retryAfterMs` is its suggested back-off (0: the caller's own).
void unavailable(wire::Failure::Builder failure, uint64_t retryAfterMs,
                 const std::string& message);
// The connection has not authenticated and the call needs a role.
void unauthenticated(wire::Failure::Builder failure, const std::string& message);
// The connection holds `held` and the call needs `required` (any of `accepted`, which holds
// `required`; empty: `required` alone).
void permissionDenied(wire::Failure::Builder failure, wire::Role required, wire::Role held,
                      const std::vector<wire::Role>& accepted, const std::string& message);
// The same, for a call only `required` may make.
void permissionDenied(wire::Failure::Builder failure, wire::Role required, wire::Role held,
                      const std::string& message);

}  // namespace failures

// ---- Classifying a failed call ----------------------------------------------------------------

// What a caller does after a failed attempt.
enum class FailureAction {
  // The leadership moved or is not ready (fencing, notLeader, unavailable, a lost connection:
  // DISCONNECTED): read the leader again, then retry after a short backoff.
  kResolveAgain,
  // The leader is there but did not answer in time (a call past its deadline: OVERLOADED):
  // retry the same leader after a growing backoff.
  kBackOff,
  // Retrying cannot help (invalidArgument, notFound, alreadyExists, failedPrecondition,
  // tooLarge, notRegistered, unauthenticated, permissionDenied, and kj exceptions of type FAILED or UNIMPLEMENTED, which are bugs):
  // the caller gets the failure. notRegistered is final for the call: the caller registers
  // again and makes a new call.
  kFatal,
};

const char* failureActionName(FailureAction action);  // "resolve again", "back off", "fatal"

FailureAction classify(wire::Failure::Which failure);
FailureAction classify(const kj::Exception& exception);

// Why a client that holds a credential refused a master that did not prove itself
// (docs/security.md, "Chain of trust"). The refusal is the client's, not the master's: nothing
// that master said is trusted, and nothing more is sent to it.
enum class MasterRefusal {
  kNotChallenged,  // authChallenge said `required` false: the master asks for no credential.
  kWrongProof,     // The master accepted the credential, but its serverProof does not verify.
};
inline constexpr size_t kMasterRefusalCount = 2;

// "not_challenged", "wrong_proof": the reason label of regent_rpc_master_auth_refusals_total.
const char* masterRefusalName(MasterRefusal refusal);

// kResolveAgain, as for a leader that cannot be reached: the `leader` node may name an impostor
// (while ZooKeeper ACLs are off), so the caller reads the leader again after its backoff and keeps
// trying, never with a downgraded connection, and reaches the real leader once the node names it.
FailureAction classify(MasterRefusal refusal);

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

}  // namespace regent::rpc

// Fuzz target: the server side of the RPC authentication handshake, driven as a hostile peer
// would. Each input is one connection to a real MasterBootstrap (serveMasterBootstrapFor: the
// connection's ConnectionAuthenticator, the role membrane, the fenced endpoint) served over an
// in-process Cap'n Proto connection (TwoPartyVatNetwork over kj::newTwoWayPipe); the steps the
// input decodes to (auth_handshake_input_test_util.h) challenge, authenticate with proofs the
// driver computes or with fuzz-made bytes, replay earlier attempts, and call methods that need a
// role on every bootstrap the connection holds. A model of what docs/security.md promises checks
// every answer; a violation aborts:
//   - the connection is authenticated only by a certificate name mapped to a role, or by a
//     proof computed with the role's configured secret over the outstanding challenge;
//   - a challenge is good for one authenticate, whatever its outcome: a server nonce is never
//     accepted twice, a replayed or forged proof is refused;
//   - a correct proof is accepted, and the server proves it holds the same secret;
//   - a bootstrap holds exactly the role proven: a call above it is refused (unauthenticated or
//     permissionDenied naming the role needed) before its handler runs, a call within it is not;
//   - the authentication counters count exactly those outcomes.
// The loop, the settings and the master are set up once; a connection is made per input.
#include <capnp/dynamic.h>
#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <kj/async.h>
#include <kj/debug.h>
#include <kj/exception.h>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "rpc/auth_config.h"
#include "rpc/auth_proof.h"
#include "rpc/auth_roles.h"
#include "rpc/fenced_endpoint.h"
#include "rpc/rpc_server.h"
#include "services/master/master_bootstrap.h"
#include "tests/services/master/counting_dispatcher_test_util.h"
#include "tests/fuzz/auth_handshake_input_test_util.h"

namespace {

using namespace regent;
using fuzz::AuthSettingsChoice;
using fuzz::AuthStep;
using fuzz::CertificateChoice;
using fuzz::MethodChoice;
using wire::Role;

constexpr uint64_t kEpoch = 7;
const std::array<Role, 3> kRoles = {Role::READER, Role::ADMIN, Role::WORKER};

[[noreturn]] void violated(const char* what) {
  std::fprintf(stderr, "fuzz_auth_handshake: invariant violated: %s\n", what);
  std::abort();
}
void check(bool holds, const char* what) {
  if (!holds) violated(what);
}

// ---- The master ------------------------------------------------------------------------------

// A master leading kEpoch whose term is ready; counts the hand-overs and Dispatcher calls that
// reached it (a hand-over leaves it leading, so every input meets the same master).
class LeadingMaster final : public master::MasterBootstrapHost {
 public:
  LeadingMaster() : term_(kj::heap<rpc::LeadershipTerm>(kEpoch, fencing)) {
    self_.masterId = "fuzz-master";
    self_.rpcAddress = "127.0.0.1:6123";
    gateway_ = term_->serve<wire::DispatcherGateway>(
        kj::heap<regent::testing::CountingDispatcher>(dispatcherCalls));
    term_->markReady();
  }
  ~LeadingMaster() noexcept override = default;
  const leader::ContenderInfo& self() const override { return self_; }
  std::optional<leader::LeaderInfo> knownLeader() const override {
    return leader::leaderInfoFor(self_, kEpoch, 1);
  }
  uint64_t leadingEpoch() const override { return kEpoch; }
  kj::Maybe<wire::DispatcherGateway::Client> dispatcherGateway() override { return gateway_; }
  kj::Promise<Status> handOverForCaller() override {
    ++handOvers;
    return Status();
  }

  rpc::FencingCounters fencing;
  uint64_t dispatcherCalls = 0;
  uint64_t handOvers = 0;

 private:
  leader::ContenderInfo self_;
  kj::Own<rpc::LeadershipTerm> term_;
  wire::DispatcherGateway::Client gateway_ = nullptr;
};

const char* const kSecrets[] = {"reader-secret-0123456789", "admin-secret-0123456789",
                                "worker-secret-0123456789"};
const char* kUnknownSecret = "not-a-configured-secret-0123";

rpc::ServerAuthSettings settingsFor(AuthSettingsChoice choice) {
  rpc::ServerAuthSettings settings;
  switch (choice) {
    case AuthSettingsChoice::kRequiredSomeSecrets:
      settings.required = true;
      settings.secrets[Role::READER] = kSecrets[0];
      settings.secrets[Role::ADMIN] = kSecrets[1];
      settings.tlsNames["ops"] = Role::ADMIN;
      settings.tlsNames["robot"] = Role::WORKER;
      break;
    case AuthSettingsChoice::kRequiredAllSecrets:
      settings.required = true;
      for (Role role : kRoles) settings.secrets[role] = kSecrets[static_cast<unsigned>(role)];
      break;
    default:
      settings.required = false;
      settings.secrets[Role::READER] = kSecrets[0];
      break;
  }
  return settings;
}

// Everything that lives across inputs. Never destroyed (libFuzzer exits without unwinding).
struct Harness {
  Harness() {
    // Every refused proof logs a warning: formatted as always, but not written, or the log
    // lines would be most of the work and of the fuzzer's output.
    spdlog::set_default_logger(std::make_shared<spdlog::logger>(
        "fuzz_auth_handshake", std::make_shared<spdlog::sinks::null_sink_st>()));
  }

  kj::EventLoop loop;
  kj::WaitScope waitScope{loop};
  LeadingMaster master;
  std::array<rpc::ServerAuthSettings, 3> settings = {
      settingsFor(AuthSettingsChoice::kRequiredSomeSecrets),
      settingsFor(AuthSettingsChoice::kRequiredAllSecrets),
      settingsFor(AuthSettingsChoice::kOptional)};
};

Harness& harness() {
  static Harness* const instance = new Harness();
  return *instance;
}

// ---- The model -------------------------------------------------------------------------------

// The roles a bootstrap holds, written apart from rpc::RoleSet: bit r = role r.
using Roles = unsigned;
constexpr Roles kNoRole = 0;
constexpr Roles kEveryRole = 7;
Roles only(Role role) { return 1u << static_cast<unsigned>(role); }
Role primary(Roles held) {
  for (Role role : {Role::ADMIN, Role::WORKER, Role::READER}) {
    if (held & only(role)) return role;
  }
  return Role::READER;
}
bool isKnownRole(uint16_t role) { return role <= static_cast<uint16_t>(Role::WORKER); }

// The gateway method each choice calls.
capnp::InterfaceSchema::Method methodOf(MethodChoice method) {
  auto bootstrap = capnp::Schema::from<wire::MasterBootstrap>();
  auto dispatcher = capnp::Schema::from<wire::DispatcherGateway>();
  switch (method) {
    case MethodChoice::kLeaderInfo: return bootstrap.getMethodByName("leaderInfo");
    case MethodChoice::kDispatcher: return bootstrap.getMethodByName("dispatcher");
    case MethodChoice::kHandOver: return bootstrap.getMethodByName("handOver");
    case MethodChoice::kResourceManager: return bootstrap.getMethodByName("resourceManager");
    case MethodChoice::kJobMaster: return bootstrap.getMethodByName("jobMaster");
    case MethodChoice::kListJobs: return dispatcher.getMethodByName("listJobs");
    case MethodChoice::kSubmitJob: return dispatcher.getMethodByName("submitJob");
    default: return dispatcher.getMethodByName("cancelJob");
  }
}

// Who may make the call: the role table itself (rpc::methodAccess), the one the membrane
// enforces, so the model and the code cannot drift apart.
rpc::MethodAccess accessOf(MethodChoice method) {
  auto chosen = methodOf(method);
  return rpc::methodAccess(chosen.getContainingInterface(), chosen.getIndex());
}
bool allows(Roles held, const rpc::MethodAccess& access) {
  if (access.open) return true;
  for (Role role : kRoles) {
    if ((held & only(role)) && access.accepted.contains(role)) return true;
  }
  return false;
}

struct AuthenticateParams {
  uint16_t role = 0;
  std::string clientNonce;
  std::string proof;
};

// Reads operands; missing ones read as 0.
class Bytes final {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return at_ >= size_; }
  uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  uint16_t u16() {
    const uint16_t low = byte();
    return static_cast<uint16_t>(low | (byte() << 8));
  }
  std::string bytes(size_t count) {
    std::string out;
    while (count-- > 0 && at_ < size_) out.push_back(static_cast<char>(data_[at_++]));
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

kj::ArrayPtr<const kj::byte> asBytes(const std::string& text) {
  return kj::arrayPtr(reinterpret_cast<const kj::byte*>(text.data()), text.size());
}
std::string asText(capnp::Data::Reader data) {
  return std::string(reinterpret_cast<const char*>(data.begin()), data.size());
}

// One connection: the client's bootstraps, the model of what the master must have done, and
// the checks.
class Connection final {
 public:
  Connection(Harness& harness, AuthSettingsChoice settingsChoice, CertificateChoice certificate)
      : h_(harness),
        settings_(harness.settings[static_cast<unsigned>(settingsChoice)]),
        pipe_(kj::newTwoWayPipe()),
        serverNetwork_(*pipe_.ends[0], capnp::rpc::twoparty::Side::SERVER),
        server_(capnp::makeRpcServer(serverNetwork_, bootstrapFor(certificate))),
        client_(*pipe_.ends[1]) {
    bootstraps_.push_back({client_.bootstrap().castAs<wire::MasterBootstrap>(), rolesAtConnect_});
    checkCounters();
  }

  void challenge(Bytes& in) {
    auto& via = pick(in.byte());
    auto answer = via.cap.authChallengeRequest().send().wait(h_.waitScope);
    const std::string nonce = asText(answer.getServerNonce());
    check(nonce.size() == rpc::kAuthNonceSize, "a challenge's nonce has kAuthNonceSize bytes");
    check(answer.getRequired() == settings_.required, "the challenge says whether auth is required");
    for (const std::string& earlier : challenges_) check(earlier != nonce, "every nonce is fresh");
    challenges_.push_back(nonce);
    outstanding_ = nonce;
  }

  void prove(Bytes& in) {
    auto& via = pick(in.byte());
    AuthenticateParams params;
    params.role = in.u16();
    const uint8_t key = in.byte() % 4;
    const uint8_t back = in.byte();
    const uint8_t size = in.byte();
    params.clientNonce.assign(size < 128 ? rpc::kAuthNonceSize : size - 128u,
                              static_cast<char>(in.byte()));
    std::string serverNonce;
    if (!challenges_.empty()) {
      serverNonce = challenges_[challenges_.size() - 1 - back % challenges_.size()];
    }
    const Role role = static_cast<Role>(params.role);
    std::string secret;
    bool ownSecret = false;
    switch (key) {
      case 0:
        if (isKnownRole(params.role) && settings_.secrets.count(role)) {
          secret = settings_.secrets.at(role);
          ownSecret = true;
        } else {
          secret = kUnknownSecret;
        }
        break;
      case 1: {
        const Role other = kRoles[(params.role + 1u) % kRoles.size()];
        secret = settings_.secrets.count(other) ? settings_.secrets.at(other) : kUnknownSecret;
        break;
      }
      case 2: secret = kUnknownSecret; break;
      default: break;  // empty
    }
    params.proof =
        rpc::authProof(rpc::ProofSide::kClient, secret, rpc::roleName(role), serverNonce,
                       params.clientNonce);
    const bool shouldSucceed = ownSecret && outstanding_ && serverNonce == *outstanding_ &&
                               params.clientNonce.size() == rpc::kAuthNonceSize;
    authenticate(via, params, shouldSucceed ? std::optional<std::string>(secret) : std::nullopt,
                 serverNonce);
  }

  void forge(Bytes& in) {
    auto& via = pick(in.byte());
    AuthenticateParams params;
    params.role = in.u16();
    params.clientNonce = in.bytes(in.byte());
    params.proof = in.bytes(in.byte());
    // The fuzzer cannot know the random nonce, so it cannot forge the proof.
    authenticate(via, params, std::nullopt, "");
  }

  void replay(Bytes& in) {
    const uint8_t which = in.byte();
    if (attempts_.empty()) return;
    // Every earlier attempt consumed the challenge its proof was computed over (or that
    // challenge was replaced), and challenges are never issued twice.
    authenticate(bootstraps_.front(), attempts_[which % attempts_.size()], std::nullopt, "");
  }

  void call(Bytes& in) {
    auto& via = pick(in.byte());
    const auto method = static_cast<MethodChoice>(in.byte() % static_cast<uint8_t>(MethodChoice::kCount));
    const uint8_t epochByte = in.byte();
    const uint64_t epoch = (epochByte & 1) ? kEpoch : epochByte;
    switch (method) {
      case MethodChoice::kLeaderInfo: {
        auto answer = via.cap.leaderInfoRequest().send().wait(h_.waitScope);
        check(answer.getLeading(), "leaderInfo is open to every connection");
        break;
      }
      case MethodChoice::kDispatcher: {
        auto request = via.cap.dispatcherRequest();
        request.setEpoch(epoch);
        auto answer = request.send().wait(h_.waitScope);
        judge(via.roles, method, answer.hasFailure() ? answer.getFailure() : noFailure());
        break;
      }
      case MethodChoice::kHandOver: {
        const uint64_t before = h_.master.handOvers;
        auto request = via.cap.handOverRequest();
        request.setEpoch(epoch);
        auto answer = request.send().wait(h_.waitScope);
        const bool allowed =
            judge(via.roles, method, answer.hasFailure() ? answer.getFailure() : noFailure());
        check(h_.master.handOvers == before + (allowed && epoch == kEpoch ? 1 : 0),
              "a hand-over reaches the master exactly when its role and epoch allow it");
        break;
      }
      case MethodChoice::kResourceManager: {
        auto request = via.cap.resourceManagerRequest();
        request.setEpoch(epoch);
        auto answer = request.send().wait(h_.waitScope);
        judge(via.roles, method, answer.hasFailure() ? answer.getFailure() : noFailure());
        break;
      }
      case MethodChoice::kJobMaster: {
        auto request = via.cap.jobMasterRequest();
        request.setEpoch(epoch);
        auto answer = request.send().wait(h_.waitScope);
        judge(via.roles, method, answer.hasFailure() ? answer.getFailure() : noFailure());
        break;
      }
      case MethodChoice::kListJobs:
      case MethodChoice::kSubmitJob:
      case MethodChoice::kCancelJob:
        callDispatcher(via, method, epoch);
        break;
      default:
        callUnknownMethod(via, epochByte);
        break;
    }
  }

  void checkCounters() const {
    check(counters_.successes().count("secret") ? counters_.successes().at("secret") == secretSuccesses_
                                                : secretSuccesses_ == 0,
          "every accepted proof is counted once");
    check(counters_.failures().count("secret") ? counters_.failures().at("secret") == secretFailures_
                                               : secretFailures_ == 0,
          "every refused proof is counted once");
    check(counters_.successes().count("tls") ? counters_.successes().at("tls") == tlsSuccesses_
                                             : tlsSuccesses_ == 0,
          "a certificate mapped to a role is counted once");
    check(counters_.failures().count("tls") ? counters_.failures().at("tls") == tlsFailures_
                                            : tlsFailures_ == 0,
          "a certificate mapped to no role is counted once");
    check(counters_.unauthenticatedRefusals() == unauthenticatedRefusals_,
          "every call refused for want of authentication is counted once");
    for (Role role : kRoles) {
      check(counters_.deniedFor(role) == denials_[static_cast<unsigned>(role)],
            "every call refused for its role is counted once, under the role it needs");
    }
    check(gate_->authenticated() == authenticated_,
          "the connection is authenticated exactly when a credential was proven");
  }

 private:
  struct Bootstrap {
    wire::MasterBootstrap::Client cap;
    Roles roles;
  };

  capnp::Capability::Client bootstrapFor(CertificateChoice certificate) {
    static const char* const kNames[] = {"", "ops", "robot", "mallory"};
    rpc::RpcPeer peer;
    peer.connectionId = 1;
    peer.address = "127.0.0.1:40000";
    peer.tlsCommonName = kNames[static_cast<unsigned>(certificate)];
    peer.gate = kj::refcounted<rpc::ConnectionGate>(!settings_.required);
    gate_ = kj::addRef(*peer.gate);
    // The model of rolesAtConnect.
    authenticated_ = !settings_.required;
    rolesAtConnect_ = settings_.required ? kNoRole : kEveryRole;
    if (settings_.required) {
      auto mapped = settings_.tlsNames.find(peer.tlsCommonName);
      if (mapped != settings_.tlsNames.end() && !peer.tlsCommonName.empty()) {
        rolesAtConnect_ = only(mapped->second);
        authenticated_ = true;
        ++tlsSuccesses_;
      } else if (!peer.tlsCommonName.empty()) {
        ++tlsFailures_;  // It may still authenticate with a secret.
      }
    }
    return master::serveMasterBootstrapFor(h_.master, h_.master.fencing, settings_, counters_, peer);
  }

  Bootstrap& pick(uint8_t via) { return bootstraps_[via % bootstraps_.size()]; }

  // A Failure reader standing for "no failure".
  wire::Failure::Reader noFailure() { return wire::Failure::Reader(); }

  // Sends authenticate through `via`. `proven` is the secret when the model says the proof must
  // be accepted; `serverNonce` the challenge it was computed over.
  void authenticate(Bootstrap& via, const AuthenticateParams& params,
                    std::optional<std::string> proven, const std::string& serverNonce) {
    auto request = via.cap.authenticateRequest();
    request.setRole(static_cast<Role>(params.role));
    request.setClientNonce(asBytes(params.clientNonce));
    request.setProof(asBytes(params.proof));
    auto answer = request.send().wait(h_.waitScope);
    attempts_.push_back(params);
    outstanding_.reset();  // Whatever the outcome: a challenge is good for one attempt.
    if (!proven) {
      check(answer.hasFailure() && answer.getFailure().isUnauthenticated(),
            "an authenticate without the role's secret over the outstanding challenge is refused");
      check(!answer.hasBootstrap(), "a refused authenticate hands out no bootstrap");
      ++secretFailures_;
      checkCounters();
      return;
    }
    check(!answer.hasFailure(), "a proof with the role's secret over the outstanding challenge is accepted");
    check(accepted_.insert(serverNonce).second, "a server nonce is never accepted twice");
    const Role role = static_cast<Role>(params.role);
    check(asText(answer.getServerProof()) ==
              rpc::authProof(rpc::ProofSide::kServer, *proven, rpc::roleName(role), serverNonce,
                             params.clientNonce),
          "the server proves it holds the same secret");
    ++secretSuccesses_;
    authenticated_ = true;
    bootstraps_.push_back({answer.getBootstrap(), settings_.required ? only(role) : kEveryRole});
    checkCounters();
  }

  // Checks one answer of a call of `method`: refused (and counted) exactly when `held` shares
  // no role with the roles the table says it accepts. Returns whether it was allowed.
  bool judge(Roles held, MethodChoice method, wire::Failure::Reader failure) {
    const rpc::MethodAccess access = accessOf(method);
    const bool allowed = allows(held, access);
    const bool refusedUnauthenticated = failure.isUnauthenticated();
    const bool refusedForRole = failure.isPermissionDenied();
    if (allowed) {
      check(!refusedUnauthenticated && !refusedForRole, "a call within the held role is not refused");
    } else if (held == kNoRole) {
      check(refusedUnauthenticated, "a call on an unauthenticated bootstrap is refused as such");
      ++unauthenticatedRefusals_;
    } else {
      check(refusedForRole, "a call above the held role is refused");
      const auto denied = failure.getPermissionDenied();
      check(denied.getRequired() == access.required, "a refusal names the role the call needs");
      check(denied.getHeld() == primary(held), "a refusal names the role the connection holds");
      Roles named = kNoRole;
      for (Role role : denied.getAccepted()) named |= only(role);
      Roles accepted = kNoRole;
      for (Role role : kRoles) {
        if (access.accepted.contains(role)) accepted |= only(role);
      }
      check(named == accepted, "a refusal names every role that may make the call");
      for (Role role : kRoles) {
        if (access.accepted.contains(role)) {
          check(std::string(failure.getMessage().cStr()).find(rpc::roleName(role)) !=
                    std::string::npos,
                "a refusal's message names every role that may make the call");
        }
      }
      ++denials_[static_cast<unsigned>(access.required)];
    }
    checkCounters();
    return allowed;
  }

  void callDispatcher(Bootstrap& via, MethodChoice method, uint64_t epoch) {
    auto obtain = via.cap.dispatcherRequest();
    obtain.setEpoch(kEpoch);
    auto obtained = obtain.send().wait(h_.waitScope);
    if (!judge(via.roles, MethodChoice::kDispatcher,
               obtained.hasFailure() ? obtained.getFailure() : noFailure())) {
      return;
    }
    check(obtained.hasDispatcher(), "an allowed dispatcher call hands out the gateway");
    auto gateway = obtained.getDispatcher();
    const uint64_t before = h_.master.dispatcherCalls;
    bool allowed = false;
    if (method == MethodChoice::kListJobs) {
      auto request = gateway.listJobsRequest();
      request.setEpoch(epoch);
      auto answer = request.send().wait(h_.waitScope);
      allowed = judge(via.roles, method, answer.hasFailure() ? answer.getFailure() : noFailure());
    } else if (method == MethodChoice::kSubmitJob) {
      auto request = gateway.submitJobRequest();
      request.setEpoch(epoch);
      auto answer = request.send().wait(h_.waitScope);
      allowed = judge(via.roles, method, answer.hasFailure() ? answer.getFailure() : noFailure());
    } else {
      auto request = gateway.cancelJobRequest();
      request.setEpoch(epoch);
      auto answer = request.send().wait(h_.waitScope);
      allowed = judge(via.roles, method, answer.hasFailure() ? answer.getFailure() : noFailure());
    }
    check(h_.master.dispatcherCalls == before + (allowed && epoch == kEpoch ? 1 : 0),
          "a Dispatcher call reaches its handler exactly when its role and epoch allow it");
  }

  // A MasterBootstrap method id this build does not know: what the table says of it (admin only:
  // default deny), and unimplemented when allowed.
  void callUnknownMethod(Bootstrap& via, uint8_t operand) {
    const uint64_t interfaceId = capnp::Schema::from<wire::MasterBootstrap>().getProto().getId();
    const uint16_t methodId = static_cast<uint16_t>(
        capnp::Schema::from<wire::MasterBootstrap>().getMethods().size() + operand % 32);
    auto request = via.cap.typelessRequest(interfaceId, methodId, nullptr);
    request.initAsAnyStruct(1, 0);
    kj::Maybe<kj::Exception> failed = kj::runCatchingExceptions(
        [&] { (void)request.send().wait(h_.waitScope); });
    const rpc::MethodAccess access =
        rpc::methodAccess(capnp::Schema::from<wire::MasterBootstrap>(), methodId);
    const bool allowed = allows(via.roles, access);
    KJ_IF_MAYBE (exception, failed) {
      const std::string description = exception->getDescription().cStr();
      const bool refused = exception->getType() == kj::Exception::Type::FAILED &&
                           (description.find("needs") != std::string::npos ||
                            description.find("permission denied") != std::string::npos);
      if (allowed) {
        check(exception->getType() == kj::Exception::Type::UNIMPLEMENTED,
              "an unknown method allowed by the role is unimplemented, not refused");
      } else {
        check(refused, "an unknown method above the held role is refused");
        if (via.roles == kNoRole) {
          ++unauthenticatedRefusals_;
        } else {
          ++denials_[static_cast<unsigned>(access.required)];
        }
      }
    } else {
      violated("an unknown method never completes");
    }
    checkCounters();
  }

  Harness& h_;
  const rpc::ServerAuthSettings& settings_;
  rpc::AuthCounters counters_;
  kj::Own<rpc::ConnectionGate> gate_;
  // Set by bootstrapFor(), so declared before the connection's members.
  Roles rolesAtConnect_ = kNoRole;
  bool authenticated_ = false;
  uint64_t tlsSuccesses_ = 0;
  uint64_t tlsFailures_ = 0;

  kj::TwoWayPipe pipe_;
  capnp::TwoPartyVatNetwork serverNetwork_;
  capnp::RpcSystem<capnp::rpc::twoparty::VatId> server_;
  capnp::TwoPartyClient client_;
  std::vector<Bootstrap> bootstraps_;

  std::vector<std::string> challenges_;
  std::optional<std::string> outstanding_;
  std::set<std::string> accepted_;
  std::vector<AuthenticateParams> attempts_;
  uint64_t secretSuccesses_ = 0;
  uint64_t secretFailures_ = 0;
  uint64_t unauthenticatedRefusals_ = 0;
  std::array<uint64_t, 3> denials_ = {0, 0, 0};
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  Harness& h = harness();
  Bytes in(data, size);
  const auto settings =
      static_cast<AuthSettingsChoice>(in.byte() % static_cast<uint8_t>(AuthSettingsChoice::kCount));
  const auto certificate =
      static_cast<CertificateChoice>(in.byte() % static_cast<uint8_t>(CertificateChoice::kCount));
  {
    Connection connection(h, settings, certificate);
    // A bounded number of steps per input: each is a round trip.
    for (unsigned steps = 0; !in.empty() && steps < 64; ++steps) {
      switch (static_cast<AuthStep>(in.byte() % static_cast<uint8_t>(AuthStep::kCount))) {
        case AuthStep::kChallenge: connection.challenge(in); break;
        case AuthStep::kProve: connection.prove(in); break;
        case AuthStep::kForge: connection.forge(in); break;
        case AuthStep::kReplay: connection.replay(in); break;
        default: connection.call(in); break;
      }
    }
    connection.checkCounters();
  }
  // Lets the connection's teardown run before the next input.
  h.waitScope.poll();
  return 0;
}

// JobCommands (see job_commands.h): regentctl's jobs submit/list/status/cancel and failover.
#include "cli/job_commands.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/debug.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>
#include <utility>
#include <variant>
#include <vector>

#include "cli/job_status_output.h"
#include "cli/regentctl_output.h"
#include "common/ids.h"
#include "common/units.h"
#include "common/utf8.h"
#include "conf/config.h"
#include "jobgraph/job_graph_spec.h"
#include "jobgraph/job_graph_validation.h"
#include "leader/leader_services.h"
#include "rpc/rpc_options.h"
#include "rpc/wire_ids.h"

namespace regent::cli {
namespace {

constexpr Duration kBackoffInitial{50};
constexpr Duration kBackoffMax{1000};

// What a submitJob call adds to the JobGraph's own message: the segment table, the RPC
// Message and Call structs, the params struct with the epoch, and an empty cap table; a few
// dozen words, bounded generously so the check never lets a call through that the transport
// would refuse.
constexpr uint64_t kCallOverheadBytes = 512;

// Whether a failed call's exception is Cap'n Proto's refusal of a message over a size limit.
bool messageTooLarge(const kj::Exception& exception) {
  const std::string_view text(exception.getDescription().cStr());
  return text.find("Message is too large") != std::string_view::npos ||
         text.find("max-message-size") != std::string_view::npos;
}

// Why a JobGraph file was not read, and regentctl's exit code for it.
struct FileRefusal {
  int exitCode;
  std::string message;
};

// The text of `path` ("-" = standard input), read only when it is a regular file (or standard
// input) of at most `maxBytes`: a directory, a device (/dev/zero), a FIFO or a socket is refused
// before reading, and reading stops after maxBytes + 1 bytes, so nothing is read without bound.
std::variant<std::string, FileRefusal> readJobGraphFile(const std::string& path,
                                                        uint64_t maxBytes) {
  const bool stdinput = path == "-";
  int fd = STDIN_FILENO;
  if (!stdinput) {
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0) {
      return FileRefusal{kExitUsage, std::string("cannot open the file: ") + std::strerror(errno)};
    }
    if (S_ISDIR(info.st_mode)) {
      return FileRefusal{kExitUsage, "is a directory, not a JobGraph file"};
    }
    if (!S_ISREG(info.st_mode)) {
      return FileRefusal{kExitUsage,
                         "is not a regular file (a device, FIFO or socket); give a JobGraph "
                         "file, or - and the JobGraph on standard input"};
    }
    if (static_cast<uint64_t>(info.st_size) > maxBytes) {
      return FileRefusal{kExitRefused,
                         "too large: the file is " + std::to_string(info.st_size) + " bytes, over "
                         "rpc.max-message-size (" + formatSize(maxBytes) + "), the most regentctl "
                         "reads; nothing was sent"};
    }
    // O_NONBLOCK: should the path have become a FIFO since stat, open must not wait for a writer.
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
      return FileRefusal{kExitUsage, std::string("cannot open the file: ") + std::strerror(errno)};
    }
    if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
      ::close(fd);
      return FileRefusal{kExitUsage, "is not a regular file"};
    }
  }
  std::string text;
  const uint64_t cap = maxBytes + 1;  // One byte more tells "too large" from "exactly the limit".
  char buffer[64 * 1024];
  std::optional<std::string> failed;
  while (text.size() < cap) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(sizeof buffer, cap - text.size()));
    const ssize_t got = ::read(fd, buffer, want);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      failed = std::string("cannot read: ") + std::strerror(errno);
      break;
    }
    if (got == 0) break;
    text.append(buffer, static_cast<size_t>(got));
  }
  if (!stdinput) ::close(fd);
  if (failed) return FileRefusal{kExitUsage, *failed};
  if (text.size() > maxBytes) {
    return FileRefusal{kExitRefused, "too large: more than rpc.max-message-size (" +
                                         formatSize(maxBytes) +
                                         "), the most regentctl reads; nothing was sent"};
  }
  return text;
}

}  // namespace

const char* const kNoMasterToReach =
    "no master to reach: ha.mode is standalone, so there is no ZooKeeper to find the leader in; "
    "give the master's rpc address with --master HOST:PORT (cli.master), or a ZooKeeper quorum "
    "with --zk HOST:PORT,... (ha.zookeeper.quorum) and ha.mode zookeeper";

Result<kj::Own<JobCommands>> JobCommands::create(EventLoop& loop, const Config& config,
                                                 InspectorOutput output, Duration timeout) {
  const std::string& master = config.getString("cli.master");
  if (master.empty() && config.getString("ha.mode") == "standalone") {
    return Error::fatal(kNoMasterToReach);
  }
  // TLS first: a misconfigured rpc.tls.* fails before anything connects to ZooKeeper.
  auto rpcNetwork =
      rpc::RpcNetwork::create(loop.io().getNetwork(), loop.timer(), rpc::rpcTlsOptionsFrom(config),
                              rpc::RpcTlsRole::kClient, config.getDuration("rpc.call-timeout"));
  if (!rpcNetwork.ok()) return Error::fatal(rpcNetwork.error().message);
  auto commands = kj::heap<JobCommands>(FactoryKey<JobCommands>(), loop, config, output, timeout);
  commands->rpcNetwork_ = kj::mv(rpcNetwork).value();
  // The credential (rpc.credential.*, docs/security.md) is read before anything connects.
  auto credential = rpc::clientCredentialFrom(config);
  if (!credential.ok()) return Error::fatal(credential.error().message);
  // With cli.master regentctl dials that master and reads no leader node.
  if (auto warning = rpc::unprotectedLeaderNodeWarning(
          config, /*readsLeaderNode=*/config.getString("cli.master").empty())) {
    output.err << "regentctl: warning: " << *warning << std::endl;
  }
  client::LeaderClientOptions options{.rpc = rpc::rpcOptionsFrom(config),
                                      .backoffInitial = kBackoffInitial,
                                      .backoffMax = kBackoffMax,
                                      .clusterName = clusterNameOf(config),
                                      .credential = std::move(credential).value()};
  if (!master.empty()) {
    commands->client_ = kj::heap<client::LeaderClient>(commands->rpcNetwork_->network(),
                                                       loop.timer(), master, std::move(options));
    return commands;
  }
  auto ha = ha::HaServices::create(loop, config, ha::HaServices::Identity::kReader);
  if (!ha.ok()) return Error::fatal(ha.error().message);
  commands->ha_ = std::move(ha).value();
  auto retrieval = leader::createLeaderRetrieval(loop, config, *commands->ha_);
  if (!retrieval.ok()) return Error::fatal(retrieval.error().message);
  commands->client_ =
      kj::heap<client::LeaderClient>(commands->rpcNetwork_->network(), loop.timer(),
                                     std::move(retrieval).value(), std::move(options));
  return commands;
}

JobCommands::JobCommands(FactoryKey<JobCommands>, EventLoop& loop, const Config& config,
                         InspectorOutput output, Duration timeout)
    : loop_(loop), config_(config), output_(output), timeout_(timeout) {}

JobCommands::~JobCommands() noexcept = default;

std::string JobCommands::clusterName() const { return clusterNameOf(config_); }

kj::Promise<bool> JobCommands::connectZooKeeper() {
  if (ha_.get() == nullptr) return true;
  // The whole --timeout, not ha.zookeeper.connect-timeout: these commands retry until it passes.
  return connectToZooKeeper(*ha_, config_, output_.err, timeout_, "--timeout");
}

int JobCommands::gaveUp(const std::string& reason) {
  output_.err << "regentctl: gave up after " << formatDuration(timeout_) << " (--timeout): "
              << reason << std::endl;
  return client_->lastObstacleWasNoLeader() ? kExitNoLeader : kExitError;
}

// The ZooKeeper session may take up to --timeout, and the call gets what is left of it; each
// step reports its own cause when the time runs out.
kj::Promise<int> JobCommands::run(client::LeaderClient::Fn<int> call, std::string subject) {
  const kj::TimePoint deadline = loop_.timer().now() + timeout_.count() * kj::MILLISECONDS;
  return connectZooKeeper().then(
      [this, deadline, call = std::move(call), subject = std::move(subject)](bool connected) mutable
      -> kj::Promise<int> {
        if (!connected) return kExitError;
        const kj::Duration left = std::max(deadline - loop_.timer().now(), 1 * kj::MILLISECONDS);
        return client_->call<int>(std::move(call), Duration(left / kj::MILLISECONDS))
            .then([this, subject = std::move(subject)](Result<int> done) -> int {
              if (done.ok()) return done.value();
              if (done.error().isRetryable()) return gaveUp(done.error().message);
              output_.err << "regentctl: " << (subject.empty() ? "" : subject + ": ")
                          << done.error().message << std::endl;
              // The leader could not be read (no permission): not a refusal by the leader.
              return client_->lastCallFailedToFindLeader() ? kExitError : kExitRefused;
            });
      });
}

kj::Promise<int> JobCommands::withDispatcher(DispatcherCall call, std::string subject) {
  return run(
      [this, call = std::move(call)](wire::MasterBootstrap::Client bootstrap,
                                     const leader::LeaderInfo& leader) {
        auto request = bootstrap.dispatcherRequest();
        request.setEpoch(leader.epoch);
        const uint64_t epoch = leader.epoch;
        return client_->deadline()
            .send(kj::mv(request))
            .then([call, epoch](capnp::Response<wire::MasterBootstrap::DispatcherResults> response)
                      -> kj::Promise<rpc::Attempt<int>> {
              if (response.hasFailure()) {
                return rpc::Attempt<int>(rpc::CallFailure::from(response.getFailure()));
              }
              return call(response.getDispatcher(), epoch);
            });
      },
      std::move(subject));
}

kj::Promise<int> JobCommands::submit(std::string path) {
  const uint64_t maxBytes = rpc::rpcOptionsFrom(config_).maxMessageSize;
  auto read = readJobGraphFile(path, maxBytes);
  if (auto* refused = std::get_if<FileRefusal>(&read)) {
    output_.err << "regentctl: " << (path == "-" ? "standard input" : path) << ": "
                << refused->message << std::endl;
    return refused->exitCode;
  }
  const std::string text = std::get<std::string>(std::move(read));
  auto parsed = jobgraph::parseJobGraphSpec(text, jobgraph::jobGraphSpecFormatForPath(path));
  if (!parsed.ok()) {
    output_.err << "regentctl: " << path << ": " << parsed.error().message << std::endl;
    return kExitRefused;
  }
  auto graph = parsed.value()->getRoot<wire::JobGraph>().asReader();
  if (auto violation = jobgraph::findJobGraphViolation(graph, jobgraph::JobGraphLimits{})) {
    output_.err << "regentctl: " << path << ": " << violation->describe() << std::endl;
    return kExitRefused;
  }
  // Every attempt sends this same graph, job id included (the Dispatcher accepts an identical
  // resubmit).
  auto message = std::make_shared<capnp::MallocMessageBuilder>();
  message->setRoot(graph);
  // A call over rpc.max-message-size would only break the connection (and look like a lost
  // connection worth retrying): refuse it here, before anything is sent.
  const uint64_t callBytes =
      capnp::computeSerializedSizeInWords(*message) * sizeof(capnp::word) + kCallOverheadBytes;
  if (callBytes > maxBytes) {
    output_.err << "regentctl: " << path << ": too large: the submitJob call for this JobGraph is "
                << callBytes << " bytes, over rpc.max-message-size (" << formatSize(maxBytes)
                << "); nothing was sent" << std::endl;
    return kExitRefused;
  }
  return withDispatcher([this, message, path](wire::DispatcherGateway::Client gateway,
                                              uint64_t epoch) {
    auto request = gateway.submitJobRequest();
    request.setEpoch(epoch);
    request.setJobGraph(message->getRoot<wire::JobGraph>().asReader());
    return client_->deadline().send(kj::mv(request))
        .then(
            [this, path](capnp::Response<wire::DispatcherGateway::SubmitJobResults> response)
                -> rpc::Attempt<int> {
              if (response.hasFailure()) return rpc::CallFailure::from(response.getFailure());
              const std::string id = wire::idFromWire<JobId>(response.getJobId()).toHex();
              if (output_.json) {
                output_.out << nlohmann::json{{"job_id", id}}.dump() << std::endl;
              } else {
                output_.out << id << std::endl;
              }
              return kExitOk;
            },
            [](kj::Exception&& exception) -> rpc::Attempt<int> {
              // The master refused the message as over its own rpc.max-message-size (which
              // may be below this client's): sending it again cannot help.
              if (messageTooLarge(exception)) {
                rpc::CallFailure failure;
                failure.which = wire::Failure::TOO_LARGE;
                failure.message =
                    "too large: the master refused the submitJob call as larger than its "
                    "rpc.max-message-size; nothing was submitted";
                return failure;
              }
              kj::throwFatalException(kj::mv(exception));
            });
  }, path);
}

kj::Promise<int> JobCommands::withTaskExecutors(
    std::function<void(wire::DispatcherGateway::ListTaskExecutorsResults::Reader)> print) {
  return withDispatcher([this, print = kj::mv(print)](wire::DispatcherGateway::Client gateway,
                                                       uint64_t epoch) {
    auto request = gateway.listTaskExecutorsRequest();
    request.setEpoch(epoch);
    return client_->deadline().send(kj::mv(request))
        .then([print](capnp::Response<wire::DispatcherGateway::ListTaskExecutorsResults> response)
                  -> rpc::Attempt<int> {
          if (response.hasFailure()) return rpc::CallFailure::from(response.getFailure());
          print(response);
          return kExitOk;
        });
  });
}

kj::Promise<int> JobCommands::workers() {
  return withTaskExecutors([this](wire::DispatcherGateway::ListTaskExecutorsResults::Reader listed) {
    auto workers = listed.getTaskExecutors();
    const std::string started = startedWorkersTable(listed.getStartedWorkers(), wallClockMillis());
    if (output_.json) {
      output_.out << workersJsonLines(workers) << std::flush;
      return;
    }
    if (workers.size() == 0) {
      output_.out << "no workers registered in " << clusterName() << std::endl;
    } else {
      output_.out << workersTable(workers, wallClockMillis()) << std::flush;
    }
    if (!started.empty()) output_.out << "\n" << started << std::flush;
  });
}

kj::Promise<int> JobCommands::slots() {
  return withTaskExecutors([this](wire::DispatcherGateway::ListTaskExecutorsResults::Reader listed) {
    auto workers = listed.getTaskExecutors();
    size_t count = 0;
    for (auto worker : workers) count += worker.getSlots().size();
    if (output_.json) {
      output_.out << slotsJsonLines(workers) << std::flush;
    } else if (count == 0) {
      output_.out << "no slots reported in " << clusterName() << std::endl;
    } else {
      output_.out << slotsTable(workers) << std::flush;
    }
  });
}

kj::Promise<int> JobCommands::list() {
  return withDispatcher([this](wire::DispatcherGateway::Client gateway, uint64_t epoch) {
    auto request = gateway.listJobsRequest();
    request.setEpoch(epoch);
    return client_->deadline().send(kj::mv(request))
        .then([this](capnp::Response<wire::DispatcherGateway::ListJobsResults> response)
                  -> rpc::Attempt<int> {
          if (response.hasFailure()) return rpc::CallFailure::from(response.getFailure());
          struct Row {
            std::string id, name, shownName, state, submitted;
            int64_t submittedAtMs;
          };
          std::vector<Row> rows;
          for (auto job : response.getJobs()) {
            const bool corrupt = job.getState() == wire::JobState::CORRUPT;
            rows.push_back({wire::idFromWire<JobId>(job.getJobId()).toHex(),
                            jsonText(job.getName()),
                            corrupt ? "(corrupt record)" : shownText(job.getName()),
                            wire::enumNameUpper(job.getState()), timeOrDash(job.getSubmittedAtMs()),
                            job.getSubmittedAtMs()});
          }
          std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
            return std::tie(a.submittedAtMs, a.id) < std::tie(b.submittedAtMs, b.id);
          });
          if (output_.json) {
            for (const Row& row : rows) {
              output_.out << jsonLine({{"job_id", row.id},
                                       {"name", row.name},
                                       {"state", row.state},
                                       {"submitted_at", row.submitted},
                                       {"submitted_at_ms", row.submittedAtMs}});
            }
            output_.out << std::flush;
            return kExitOk;
          }
          if (rows.empty()) {
            output_.out << "no jobs in " << clusterName() << std::endl;
            return kExitOk;
          }
          size_t nameWidth = 4;
          size_t stateWidth = 5;
          for (const Row& row : rows) {
            nameWidth = std::max(nameWidth, row.shownName.size());
            stateWidth = std::max(stateWidth, row.state.size());
          }
          auto pad = [](const std::string& text, size_t width) {
            return text + std::string(width > text.size() ? width - text.size() : 0, ' ');
          };
          output_.out << pad("JOB ID", 32) << "  " << pad("NAME", nameWidth) << "  "
                      << pad("STATE", stateWidth) << "  SUBMITTED\n";
          for (const Row& row : rows) {
            output_.out << row.id << "  " << pad(row.shownName, nameWidth) << "  "
                        << pad(row.state, stateWidth) << "  " << row.submitted << "\n";
          }
          output_.out << std::flush;
          return kExitOk;
        });
  });
}

std::optional<JobId> JobCommands::jobIdArgument(const std::string& text) {
  auto id = JobId::fromHex(text);
  if (!id) output_.err << "regentctl: job id \"" << text << "\": expected 32 hex digits" << std::endl;
  return id;
}

kj::Promise<int> JobCommands::status(std::string jobId) {
  auto id = jobIdArgument(jobId);
  if (!id) return kExitUsage;
  return withDispatcher([this, id = *id](wire::DispatcherGateway::Client gateway,
                                         uint64_t epoch) {
    auto request = gateway.jobStatusRequest();
    request.setEpoch(epoch);
    wire::setWireId(request.initJobId(), id);
    return client_->deadline().send(kj::mv(request))
        .then([this](capnp::Response<wire::DispatcherGateway::JobStatusResults> response)
                  -> rpc::Attempt<int> {
          if (response.hasFailure()) return rpc::CallFailure::from(response.getFailure());
          output_.out << (output_.json ? jobStatusJson(response) : jobStatusText(response))
                      << std::flush;
          return kExitOk;
        });
  });
}

kj::Promise<int> JobCommands::logs(std::string jobId, LogsRequest request) {
  auto id = jobIdArgument(jobId);
  if (!id) return kExitUsage;
  auto found = kj::heap<std::optional<AttemptOutputSource>>();
  auto& source = *found;
  return withDispatcher([this, id = *id, request, &source](wire::DispatcherGateway::Client gateway,
                                                          uint64_t epoch) {
           auto call = gateway.jobStatusRequest();
           call.setEpoch(epoch);
           wire::setWireId(call.initJobId(), id);
           return client_->deadline().send(kj::mv(call)).then(
               [this, request, &source](
                   capnp::Response<wire::DispatcherGateway::JobStatusResults> response)
                   -> rpc::Attempt<int> {
                 if (response.hasFailure()) return rpc::CallFailure::from(response.getFailure());
                 auto located =
                     findAttemptOutput(response.getStatus(), request.vertex, request.subtask);
                 if (!located.ok()) {
                   output_.err << "regentctl: " << located.error().message << std::endl;
                   return kExitRefused;
                 }
                 source = std::move(located).value();
                 return kExitOk;
               });
         })
      .then([this, request, &source, job = *id](int exitCode) -> kj::Promise<int> {
        if (exitCode != kExitOk || !source) return exitCode;
        if (request.printToken) {
          return outputToken(job, source->attempt, request.stderrStream)
              .then([this, request, &source](OutputReadGrant grant) {
                if (grant.exitCode != kExitOk) return grant.exitCode;
                output_.out << nlohmann::json{
                                   {"attempt_id", source->attempt.toHex()},
                                   {"url", "http://" + source->httpAddress + "/v1/attempts/" +
                                               source->attempt.toHex() +
                                               (request.stderrStream ? "/stderr" : "/stdout")},
                                   {"token", grant.token},
                                   {"valid_for_ms", grant.validFor.count()}}
                                   .dump()
                            << std::endl;
                return kExitOk;
              });
        }
        outputReader_ = kj::heap<AttemptOutputReader>(loop_.io().getNetwork(), loop_.timer(),
                                                      output_.out, output_.err);
        AttemptOutputOptions options;
        options.stderrStream = request.stderrStream;
        options.follow = request.follow;
        options.requestTimeout = config_.getDuration("rpc.call-timeout");
        options.tokens = [this, job, attempt = source->attempt, stream = request.stderrStream]() {
          return outputToken(job, attempt, stream);
        };
        return outputReader_->read(*source, options);
      })
      .attach(kj::mv(found));
}

kj::Promise<OutputReadGrant> JobCommands::outputToken(JobId job, AttemptId attempt,
                                                      bool stderrStream) {
  auto grant = kj::heap<OutputReadGrant>();
  auto& filled = *grant;
  return withDispatcher([this, job, attempt, stderrStream, &filled](
                            wire::DispatcherGateway::Client gateway, uint64_t epoch) {
           auto call = gateway.attemptOutputTokenRequest();
           call.setEpoch(epoch);
           wire::setWireId(call.initJobId(), job);
           wire::setWireId(call.initAttemptId(), attempt);
           call.setStreams(stderrStream ? wire::OutputStreams::STDERR_ONLY
                                        : wire::OutputStreams::STDOUT_ONLY);
           return client_->deadline().send(kj::mv(call)).then(
               [&filled](capnp::Response<wire::DispatcherGateway::AttemptOutputTokenResults>
                             response) -> rpc::Attempt<int> {
                 if (response.hasFailure()) return rpc::CallFailure::from(response.getFailure());
                 filled.token = response.getToken().cStr();
                 filled.validFor = Duration(static_cast<int64_t>(response.getValidForMs()));
                 return kExitOk;
               });
         },
         "a token to read the output of attempt " + attempt.toHex())
      .then([&filled](int exitCode) {
        filled.exitCode = exitCode;
        return std::move(filled);
      })
      .attach(kj::mv(grant));
}

kj::Promise<int> JobCommands::cancel(std::string jobId) {
  auto id = jobIdArgument(jobId);
  if (!id) return kExitUsage;
  return withDispatcher([this, id = *id](wire::DispatcherGateway::Client gateway,
                                         uint64_t epoch) {
    auto request = gateway.cancelJobRequest();
    request.setEpoch(epoch);
    wire::setWireId(request.initJobId(), id);
    return client_->deadline().send(kj::mv(request))
        .then([this, id](capnp::Response<wire::DispatcherGateway::CancelJobResults> response)
                  -> rpc::Attempt<int> {
          if (response.hasFailure()) return rpc::CallFailure::from(response.getFailure());
          if (output_.json) {
            output_.out << nlohmann::json{{"job_id", id.toHex()}, {"canceled", true}}.dump()
                        << std::endl;
          } else {
            output_.out << "canceled " << id.toHex() << std::endl;
          }
          return kExitOk;
        });
  });
}

kj::Promise<int> JobCommands::removeCorrupt(std::string jobId) {
  auto id = jobIdArgument(jobId);
  if (!id) return kExitUsage;
  return withDispatcher([this, id = *id](wire::DispatcherGateway::Client gateway,
                                         uint64_t epoch) {
    auto request = gateway.removeCorruptJobRequest();
    request.setEpoch(epoch);
    wire::setWireId(request.initJobId(), id);
    return client_->deadline().send(kj::mv(request))
        .then([this, id](capnp::Response<wire::DispatcherGateway::RemoveCorruptJobResults> response)
                  -> rpc::Attempt<int> {
          if (response.hasFailure()) return rpc::CallFailure::from(response.getFailure());
          if (output_.json) {
            output_.out << nlohmann::json{{"job_id", id.toHex()}, {"removed", true}}.dump()
                        << std::endl;
          } else {
            output_.out << "removed the corrupt JobGraph record of " << id.toHex() << std::endl;
          }
          return kExitOk;
        });
  });
}

kj::Promise<int> JobCommands::failover() {
  return run([this](wire::MasterBootstrap::Client bootstrap, const leader::LeaderInfo& leader) {
    auto request = bootstrap.handOverRequest();
    request.setEpoch(leader.epoch);
    return client_->deadline()
        .send(kj::mv(request))
        .then(
            [this, leader](capnp::Response<wire::MasterBootstrap::HandOverResults> response)
                -> kj::Promise<rpc::Attempt<int>> {
              if (response.hasFailure()) {
                auto failure = response.getFailure();
                // The leader of this epoch no longer leads: the leadership moved already,
                // which is what was asked; report the move rather than hand over its
                // successor too.
                if (!failure.isFencing() && !failure.isNotLeader()) {
                  return rpc::Attempt<int>(rpc::CallFailure::from(failure));
                }
              }
              return waitForNewLeader(leader);
            },
            [this, leader](kj::Exception&& exception) -> kj::Promise<rpc::Attempt<int>> {
              // The request may have reached the leader before the connection ended or the
              // deadline passed: watch whether the leadership moves.
              if (rpc::classify(exception) == rpc::FailureAction::kFatal) {
                return kj::mv(exception);
              }
              return waitForNewLeader(leader);
            });
  });
}

kj::Promise<rpc::Attempt<int>> JobCommands::waitForNewLeader(leader::LeaderInfo old) {
  return client_->leaderAbove(old.epoch).then([this, old](leader::LeaderInfo next) {
    if (output_.json) {
      output_.out << nlohmann::json{{"old_master_id", old.masterId},
                                    {"old_epoch", old.epoch},
                                    {"new_master_id", next.masterId},
                                    {"new_epoch", next.epoch},
                                    {"new_rpc_address", next.rpcAddress}}
                         .dump()
                  << std::endl;
    } else {
      output_.out << "leader " << old.masterId << " (epoch " << old.epoch << ") -> "
                  << next.masterId << " (epoch " << next.epoch << ")" << std::endl;
    }
    if (next.masterId == old.masterId) {
      // The master handed over and won the next term itself: no other master contends (or,
      // standalone, there is none). The term changed; the leadership did not move.
      output_.err << "regentctl: failover: no other master took over: " << old.masterId
                  << " leads again (epoch " << old.epoch << " -> " << next.epoch
                  << "); start another master to fail over to (regentctl masters lists the "
                     "contenders)"
                  << std::endl;
      return rpc::Attempt<int>(kExitRefused);
    }
    return rpc::Attempt<int>(kExitOk);
  });
}

}  // namespace regent::cli

// JobCommands (see job_commands.h): regentctl's jobs submit/list/status/cancel and failover.
#include "cli/job_commands.h"

#include <capnp/message.h>
#include <kj/debug.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>
#include <utility>
#include <vector>

#include "cli/regentctl_output.h"
#include "common/ids.h"
#include "conf/config.h"
#include "conf/values.h"
#include "leader/leader_services.h"
#include "rpc/wire_ids.h"
#include "services/dispatcher/job_graph_spec.h"
#include "services/dispatcher/job_graph_validation.h"

namespace regent::cli {
namespace {

constexpr Duration kBackoffInitial{50};
constexpr Duration kBackoffMax{1000};

std::string timeOrDash(int64_t unixMillis) {
  return unixMillis == 0 ? "-" : formatUtcMillis(unixMillis);
}

nlohmann::json taskCountsJson(wire::TaskCounts::Reader tasks) {
  return {{"total", tasks.getTotal()},         {"pending", tasks.getPending()},
          {"running", tasks.getRunning()},     {"finished", tasks.getFinished()},
          {"canceling", tasks.getCanceling()}, {"canceled", tasks.getCanceled()},
          {"failed", tasks.getFailed()},       {"reconciling", tasks.getReconciling()}};
}

std::string taskCountsText(wire::TaskCounts::Reader tasks) {
  std::ostringstream text;
  text << tasks.getTotal() << " total, " << tasks.getPending() << " pending, "
       << tasks.getRunning() << " running, " << tasks.getFinished() << " finished, "
       << tasks.getCanceling() << " canceling, " << tasks.getCanceled() << " canceled, "
       << tasks.getFailed() << " failed, " << tasks.getReconciling() << " reconciling";
  return text.str();
}

}  // namespace

const char* const kNoMasterToReach =
    "no master to reach: ha.mode is standalone, so there is no ZooKeeper to find the leader in; "
    "give the master's rpc address with --master HOST:PORT (cli.master), or a ZooKeeper quorum "
    "with --zk HOST:PORT,... (ha.zookeeper.quorum) and ha.mode zookeeper";

Result<std::unique_ptr<JobCommands>> JobCommands::create(EventLoop& loop, const Config& config,
                                                         InspectorOutput output,
                                                         Duration timeout) {
  const std::string& master = config.getString("cli.master");
  if (master.empty() && config.getString("ha.mode") == "standalone") {
    return Error::fatal(kNoMasterToReach);
  }
  // TLS first: a misconfigured rpc.tls.* fails before anything connects to ZooKeeper.
  auto rpcNetwork =
      rpc::RpcNetwork::create(loop.io().getNetwork(), loop.timer(), rpc::rpcTlsOptionsFrom(config),
                              rpc::RpcTlsRole::kClient, config.getDuration("rpc.call-timeout"));
  if (!rpcNetwork.ok()) return Error::fatal(rpcNetwork.error().message);
  std::unique_ptr<JobCommands> commands(new JobCommands(loop, config, output, timeout));
  commands->rpcNetwork_ = kj::mv(rpcNetwork).value();
  // The credential (rpc.credential.*, docs/security.md) is read before anything connects.
  auto credential = rpc::clientCredentialFrom(config);
  if (!credential.ok()) return Error::fatal(credential.error().message);
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

JobCommands::JobCommands(EventLoop& loop, const Config& config, InspectorOutput output,
                         Duration timeout)
    : loop_(loop), config_(config), output_(output), timeout_(timeout) {}

JobCommands::~JobCommands() noexcept = default;

std::string JobCommands::clusterName() const { return clusterNameOf(config_); }

kj::Promise<bool> JobCommands::connectZooKeeper() {
  if (!ha_) return true;
  return connectToZooKeeper(*ha_, config_, output_.err);
}

int JobCommands::gaveUp() {
  const std::string& obstacle = client_->lastObstacle();
  output_.err << "regentctl: gave up after " << formatDuration(timeout_) << " (--timeout): "
              << (obstacle.empty() ? "no answer from " + clusterName() : obstacle) << std::endl;
  return client_->lastObstacleWasNoLeader() ? kExitNoLeader : kExitError;
}

kj::Promise<int> JobCommands::run(client::LeaderClient::Fn<int> call, std::string subject) {
  kj::Promise<int> work = connectZooKeeper().then(
      [this, call = std::move(call), subject = std::move(subject)](bool connected) mutable
      -> kj::Promise<int> {
        if (!connected) return kExitError;
        return client_->call<int>(std::move(call), timeout_)
            .then([this, subject = std::move(subject)](Result<int> done) -> int {
              if (done.ok()) return done.value();
              if (done.error().isRetryable()) return gaveUp();
              output_.err << "regentctl: " << (subject.empty() ? "" : subject + ": ")
                          << done.error().message << std::endl;
              return kExitRefused;
            });
      });
  return work.exclusiveJoin(
      loop_.timer().afterDelay(timeout_.count() * kj::MILLISECONDS).then([this]() {
        return gaveUp();
      }));
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
  std::string text;
  if (path == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    std::ifstream file(path, std::ios::binary);
    if (!file) {
      output_.err << "regentctl: " << path << ": cannot open the file" << std::endl;
      return kExitUsage;
    }
    text.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
    if (file.bad()) {
      output_.err << "regentctl: " << path << ": cannot read the file" << std::endl;
      return kExitUsage;
    }
  }
  auto parsed = dispatcher::parseJobGraphSpec(text, dispatcher::jobGraphSpecFormatForPath(path));
  if (!parsed.ok()) {
    output_.err << "regentctl: " << path << ": " << parsed.error().message << std::endl;
    return kExitRefused;
  }
  auto graph = parsed.value()->getRoot<wire::JobGraph>().asReader();
  if (auto violation = dispatcher::findJobGraphViolation(graph, dispatcher::JobGraphLimits{})) {
    output_.err << "regentctl: " << path << ": " << violation->describe() << std::endl;
    return kExitRefused;
  }
  // Every attempt sends this same graph, job id included (the Dispatcher accepts an identical
  // resubmit).
  auto message = std::make_shared<capnp::MallocMessageBuilder>();
  message->setRoot(graph);
  return withDispatcher([this, message, path](wire::DispatcherGateway::Client gateway,
                                              uint64_t epoch) {
    auto request = gateway.submitJobRequest();
    request.setEpoch(epoch);
    request.setJobGraph(message->getRoot<wire::JobGraph>().asReader());
    return client_->deadline().send(kj::mv(request))
        .then([this, path](capnp::Response<wire::DispatcherGateway::SubmitJobResults> response)
                  -> rpc::Attempt<int> {
          if (response.hasFailure()) return rpc::CallFailure::from(response.getFailure());
          const std::string id = wire::idFromWire<JobId>(response.getJobId()).toHex();
          if (output_.json) {
            output_.out << nlohmann::json{{"job_id", id}}.dump() << std::endl;
          } else {
            output_.out << id << std::endl;
          }
          return kExitOk;
        });
  }, path);
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
            std::string id, name, state, submitted;
            int64_t submittedAtMs;
          };
          std::vector<Row> rows;
          for (auto job : response.getJobs()) {
            rows.push_back({wire::idFromWire<JobId>(job.getJobId()).toHex(), job.getName().cStr(),
                            wire::enumNameUpper(job.getState()), timeOrDash(job.getSubmittedAtMs()),
                            job.getSubmittedAtMs()});
          }
          std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
            return std::tie(a.submittedAtMs, a.id) < std::tie(b.submittedAtMs, b.id);
          });
          if (output_.json) {
            for (const Row& row : rows) {
              output_.out << nlohmann::json{{"job_id", row.id},
                                            {"name", row.name},
                                            {"state", row.state},
                                            {"submitted_at", row.submitted},
                                            {"submitted_at_ms", row.submittedAtMs}}
                                 .dump()
                          << "\n";
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
            nameWidth = std::max(nameWidth, row.name.size());
            stateWidth = std::max(stateWidth, row.state.size());
          }
          auto pad = [](const std::string& text, size_t width) {
            return text + std::string(width > text.size() ? width - text.size() : 0, ' ');
          };
          output_.out << pad("JOB ID", 32) << "  " << pad("NAME", nameWidth) << "  "
                      << pad("STATE", stateWidth) << "  SUBMITTED\n";
          for (const Row& row : rows) {
            output_.out << row.id << "  " << pad(row.name, nameWidth) << "  "
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
          auto status = response.getStatus();
          nlohmann::json json{{"job_id", wire::idFromWire<JobId>(status.getJobId()).toHex()},
                              {"name", status.getName().cStr()},
                              {"state", wire::enumNameUpper(status.getState())},
                              {"submitted_at", timeOrDash(status.getSubmittedAtMs())},
                              {"submitted_at_ms", status.getSubmittedAtMs()},
                              {"state_changed_at_ms", status.getStateChangedAtMs()},
                              {"ended_at_ms", status.getEndedAtMs()},
                              {"restarts", status.getRestarts()},
                              {"tasks", taskCountsJson(status.getTasks())}};
          std::ostringstream text;
          text << "job id:         " << wire::idFromWire<JobId>(status.getJobId()).toHex() << "\n"
               << "name:           " << status.getName().cStr() << "\n"
               << "state:          " << wire::enumNameUpper(status.getState()) << "\n"
               << "submitted at:   " << timeOrDash(status.getSubmittedAtMs()) << "\n"
               << "state changed:  " << timeOrDash(status.getStateChangedAtMs()) << "\n"
               << "ended at:       " << timeOrDash(status.getEndedAtMs()) << "\n"
               << "restarts:       " << status.getRestarts() << "\n"
               << "tasks:          " << taskCountsText(status.getTasks()) << "\n";
          nlohmann::json vertices = nlohmann::json::array();
          for (auto vertex : status.getVertices()) {
            vertices.push_back({{"name", vertex.getName().cStr()},
                                {"parallelism", vertex.getParallelism()},
                                {"tasks", taskCountsJson(vertex.getTasks())}});
            text << "vertex " << vertex.getName().cStr() << ": parallelism "
                 << vertex.getParallelism() << ", " << taskCountsText(vertex.getTasks())
                 << "\n";
          }
          json["vertices"] = vertices;
          if (status.hasFailure()) {
            auto failure = status.getFailure();
            json["failure"] = {{"message", failure.getMessage().cStr()},
                               {"vertex", failure.getVertexName().cStr()},
                               {"subtask_index", failure.getSubtaskIndex()},
                               {"exit_code", failure.getExitCode()},
                               {"at_ms", failure.getAtMs()}};
            text << "failure:        " << failure.getMessage().cStr() << "\n";
          }
          if (response.hasResult()) {
            auto result = response.getResult();
            json["result"] = {{"state", wire::enumNameUpper(result.getState())},
                              {"clean", result.getClean()},
                              {"ended_at_ms", result.getEndedAtMs()},
                              {"net_runtime_ms", result.getNetRuntimeMs()}};
            text << "result:         " << wire::enumNameUpper(result.getState())
                 << (result.getClean() ? "" : " (cleanup not yet confirmed)") << "\n";
          }
          output_.out << (output_.json ? json.dump() + "\n" : text.str()) << std::flush;
          return kExitOk;
        });
  });
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
    return rpc::Attempt<int>(kExitOk);
  });
}

}  // namespace regent::cli

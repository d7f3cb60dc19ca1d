// The jobs benchmark (scripts/bench.sh jobs): end-to-end job throughput and latency of one
// regent-master over a real ZooKeeper server with real regent-worker processes. It submits
// --jobs small jobs (one vertex of --parallelism subtasks running /bin/true) with at most
// --in-flight submissions outstanding, waits until every job's result is clean (stored, run,
// JobGraph removed, slots freed), and prints throughput, submit -> first RUNNING and submit ->
// clean latencies, and the memory of the master and of one worker afterwards. Before the
// throughput run it measures what the master holds per subtask of one large job.
// docs/benchmarks.md explains each number.
//
// The benchmark itself is the client: it submits over RPC with the follow-the-leader client
// (as regentctl jobs submit does, one DispatcherGateway.submitJob per job), taking each job's
// submit time with monotonicMicros() just before the call. Every other time comes from the
// master's own event lines (mono_us, the same CLOCK_MONOTONIC in every process on the machine):
// the first "attempt state ... state=RUNNING" of a job and its "job clean" line.
#include <capnp/message.h>
#include <spdlog/spdlog.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "client/leader_client.h"
#include "common/event_line.h"
#include "common/event_loop.h"
#include "common/ids.h"
#include "common/result.h"
#include "common/task_set_error_logger.h"
#include "common/time.h"
#include "conf/config.h"
#include "ha/ha_services.h"
#include "jobgraph/job_graph_spec.h"
#include "leader/leader_services.h"
#include "rpc/call_deadline.h"
#include "rpc/failure.h"
#include "rpc/rpc_options.h"
#include "rpc/rpc_tls.h"
#include "rpc/schema/gateways.capnp.h"
#include "rpc/schema/jobs.capnp.h"
#include "rpc/wire_ids.h"
#include "tests/fixtures/process_harness.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/fixtures/wait_test_util.h"
#include "tests/fixtures/zookeeper_server.h"

namespace regent::bench {
namespace {

// The value of the sample `name` (a metric without labels) in the Prometheus text that
// `address` ("127.0.0.1:8081") serves at /metrics; nullopt when it cannot be read. Blocking: the
// benchmark calls it between its runs, with nothing on its loop.
std::optional<uint64_t> metricOf(const std::string& address, const std::string& name) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  if (::inet_pton(AF_INET, address.substr(0, colon).c_str(), &to.sin_addr) != 1) return std::nullopt;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  std::string reply;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) == 0) {
    const std::string request = "GET /metrics HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n";
    if (::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buffer[8192];
      ssize_t got;
      while ((got = ::read(fd, buffer, sizeof buffer)) > 0) reply.append(buffer, size_t(got));
    }
  }
  ::close(fd);
  const std::string line = "\n" + name + " ";
  const size_t at = reply.find(line);
  if (at == std::string::npos) return std::nullopt;
  return std::strtoull(reply.c_str() + at + line.size(), nullptr, 10);
}

using testing::ProcessHarness;
using testing::ProcessOptions;
using testing::TempDir;
using testing::ZooKeeperServer;
using testing::ZooKeeperServerOptions;

// Generous bounds: exceeding one means something failed, not that something was slow.
constexpr Duration kStartTimeout{60000};
constexpr Duration kSubmitTimeout{60000};  // One submission, retries included.
constexpr Duration kLogPoll{10};           // How often the client reads the master's new lines.

struct BenchOptions {
  int jobs = 1000;
  int inFlight = 64;
  int parallelism = 2;  // Subtasks per job (one vertex).
  int workers = 4;
  int slots = 32;  // Per worker.
  // Subtasks of the job whose JobMaster's memory is measured (0: skip that step).
  int memorySubtasks = 10000;
  // Jobs submitted one at a time before the throughput run, for the latency without queueing
  // (0: skip that step).
  int idleJobs = 20;
  // Subtasks of the one wide job run after the throughput run, for what its progress record
  // costs ZooKeeper (0: skip that step).
  int wideSubtasks = 2000;
  std::vector<std::string> masterSets, workerSets;
  std::string binDir = thisExecutableDir();  // --bin-dir; by default next to this binary.
};

// What the master's event lines said about one job (mono_us of each event, 0 = not yet).
struct JobTimes {
  int64_t submitUs = 0;    // The client's monotonicMicros() before submitJob.
  int64_t acceptedUs = 0;  // The client's monotonicMicros() when submitJob succeeded.
  int64_t deployedUs = 0;  // The first "attempt deployed" of the job.
  int64_t runningUs = 0;   // The first "attempt state ... state=RUNNING" of the job.
  int64_t finishedUs = 0;  // The last "attempt state ... state=FINISHED" of the job.
  int64_t endedUs = 0;     // "job ended".
  int64_t cleanUs = 0;     // "job clean".
  std::string state;       // From "job clean".
};

// One job event of the master's log.
struct JobEvent {
  enum class Kind { kDeployed, kRunning, kFinished, kEnded, kClean } kind = Kind::kRunning;
  std::string job;  // Hex id.
  int64_t monoUs = 0;
  std::string state;  // kClean: the job's end state.
};

// Reads the master's job event lines ("attempt deployed", "attempt state" RUNNING and FINISHED,
// "job ended", "job clean") from its log file, from where the last call stopped. Not thread-safe:
// one reader at a time (the client reads off its loop thread).
class MasterEvents final {
 public:
  explicit MasterEvents(std::string logPath) : tail_(std::move(logPath)) {}

  std::vector<JobEvent> next() {
    std::vector<JobEvent> events;
    for (const std::string& line : tail_.next()) {
      JobEvent event;
      std::optional<EventFields> fields;
      if ((fields = parseEventLine(line, "attempt deployed"))) {
        event.kind = JobEvent::Kind::kDeployed;
      } else if ((fields = parseEventLine(line, "attempt state"))) {
        const auto state = fields->get("state");
        if (state == "RUNNING") {
          event.kind = JobEvent::Kind::kRunning;
        } else if (state == "FINISHED") {
          event.kind = JobEvent::Kind::kFinished;
        } else {
          continue;
        }
      } else if ((fields = parseEventLine(line, "job ended"))) {
        event.kind = JobEvent::Kind::kEnded;
      } else if ((fields = parseEventLine(line, "job clean"))) {
        event.kind = JobEvent::Kind::kClean;
        event.state = fields->get("state").value_or("?");
      } else {
        continue;
      }
      event.job = fields->get("job").value_or("");
      event.monoUs = fields->getInt("mono_us").value_or(0);
      events.push_back(std::move(event));
    }
    return events;
  }

 private:
  LogTail tail_;
};

// The client side, on the benchmark's own loop: submits jobs over RPC with at most `inFlight`
// outstanding and follows the master's event lines until each is clean. Loop-thread only.
class JobClient final {
 public:
  JobClient(EventLoop& loop, client::LeaderClient& client, MasterEvents& events)
      : loop_(loop), client_(client), events_(events) {}

  // Submits every graph of `specs` (YAML, each with its own job_id), at most `inFlight` at once,
  // and resolves once every one of them is clean, or with an error when a submission failed or
  // `timeout` passed first.
  kj::Promise<Status> run(std::vector<std::pair<JobId, std::string>> specs, int inFlight,
                          Duration timeout) {
    specs_ = std::move(specs);
    next_ = 0;
    inFlight_ = 0;
    maxInFlight_ = inFlight;
    failure_.reset();
    for (const auto& [job, spec] : specs_) jobs_[job.toHex()] = JobTimes{};
    auto paf = kj::newPromiseAndFulfiller<Status>();
    done_ = kj::mv(paf.fulfiller);
    fill();
    const int64_t deadlineUs = monotonicMicros() + timeout.count() * 1000;
    tasks_.add(follow(deadlineUs));
    return kj::mv(paf.promise);
  }

  std::map<std::string, JobTimes>& jobs() { return jobs_; }

  // Cancels `job` (DispatcherGateway.cancelJob).
  kj::Promise<Status> cancel(JobId job) {
    const rpc::CallDeadline& deadline = client_.deadline();
    return callDispatcher(
        [job, &deadline](wire::DispatcherGateway::Client dispatcher, uint64_t epoch) {
          auto cancel = dispatcher.cancelJobRequest();
          cancel.setEpoch(epoch);
          wire::setWireId(cancel.initJobId(), job);
          return deadline.send(kj::mv(cancel))
              .then([](capnp::Response<wire::DispatcherGateway::CancelJobResults> cancelled)
                        -> rpc::Attempt<bool> {
                if (cancelled.hasFailure()) return rpc::CallFailure::from(cancelled.getFailure());
                return true;
              });
        });
  }

 private:
  using DispatcherCall = std::function<kj::Promise<rpc::Attempt<bool>>(
      wire::DispatcherGateway::Client dispatcher, uint64_t epoch)>;

  // One call on the leader's Dispatcher, as regentctl's jobs commands make it: each attempt gets
  // the DispatcherGateway from MasterBootstrap.dispatcher and runs `call` with it; failures are
  // retried per rpc/failure.h until kSubmitTimeout.
  kj::Promise<Status> callDispatcher(DispatcherCall call) {
    const rpc::CallDeadline& deadline = client_.deadline();
    auto attempt = [call = std::move(call), &deadline](
                       wire::MasterBootstrap::Client bootstrap,
                       const leader::LeaderInfo& leader) -> kj::Promise<rpc::Attempt<bool>> {
      auto request = bootstrap.dispatcherRequest();
      request.setEpoch(leader.epoch);
      const uint64_t epoch = leader.epoch;
      return deadline.send(kj::mv(request))
          .then([call, epoch](capnp::Response<wire::MasterBootstrap::DispatcherResults> response)
                    -> kj::Promise<rpc::Attempt<bool>> {
            if (response.hasFailure()) {
              return rpc::Attempt<bool>(rpc::CallFailure::from(response.getFailure()));
            }
            return call(response.getDispatcher(), epoch);
          });
    };
    return client_.call<bool>(attempt, kSubmitTimeout).then([](Result<bool> done) -> Status {
      if (!done.ok()) return done.error();
      return {};
    });
  }

  // Starts submissions until `maxInFlight_` are outstanding or none is left.
  void fill() {
    while (!failure_ && inFlight_ < maxInFlight_ && next_ < specs_.size()) {
      const size_t index = next_++;
      ++inFlight_;
      tasks_.add(submit(index));
    }
  }

  kj::Promise<void> submit(size_t index) {
    const auto& [job, spec] = specs_[index];
    auto parsed = jobgraph::parseJobGraphSpec(spec, jobgraph::JobGraphSpecFormat::kYaml);
    if (!parsed.ok()) {
      fail(Error::fatal("job " + job.toHex() + ": " + parsed.error().message));
      return kj::READY_NOW;
    }
    // Every attempt of the call sends the same graph (the Dispatcher accepts an identical
    // resubmit).
    auto graph = std::make_shared<kj::Own<capnp::MallocMessageBuilder>>(kj::mv(parsed).value());
    const std::string id = job.toHex();
    const rpc::CallDeadline& deadline = client_.deadline();
    jobs_[id].submitUs = monotonicMicros();
    auto submitted = callDispatcher(
        [graph, &deadline](wire::DispatcherGateway::Client dispatcher, uint64_t epoch) {
          auto submit = dispatcher.submitJobRequest();
          submit.setEpoch(epoch);
          submit.setJobGraph((*graph)->getRoot<wire::JobGraph>().asReader());
          return deadline.send(kj::mv(submit))
              .then([](capnp::Response<wire::DispatcherGateway::SubmitJobResults> submitted)
                        -> rpc::Attempt<bool> {
                if (submitted.hasFailure()) return rpc::CallFailure::from(submitted.getFailure());
                return true;
              });
        });
    return submitted.then([this, id](Status done) {
      --inFlight_;
      if (!done.ok()) {
        fail(Error::fatal("submitJob " + id + ": " + done.error().message));
        return;
      }
      jobs_[id].acceptedUs = monotonicMicros();
      fill();
    });
  }

  // Reads the master's new lines every kLogPoll (off the loop thread) until every job is clean.
  kj::Promise<void> follow(int64_t deadlineUs) {
    return loop_.timer()
        .afterDelay(kLogPoll.count() * kj::MILLISECONDS)
        .then([this] { return loop_.runBlocking([this] { return events_.next(); }); })
        .then([this, deadlineUs](std::vector<JobEvent> events) -> kj::Promise<void> {
          apply(events);
          if (failure_) return kj::READY_NOW;
          size_t clean = 0;
          for (const auto& [id, times] : jobs_) clean += times.cleanUs != 0 ? 1 : 0;
          if (clean == jobs_.size()) {
            finish({});
            return kj::READY_NOW;
          }
          if (monotonicMicros() > deadlineUs) {
            size_t running = 0, ended = 0, accepted = 0;
            for (const auto& [id, times] : jobs_) {
              accepted += times.acceptedUs != 0 ? 1 : 0;
              running += times.runningUs != 0 ? 1 : 0;
              ended += times.endedUs != 0 ? 1 : 0;
            }
            finish(Error::fatal("not every job was clean in time: of " +
                                std::to_string(jobs_.size()) + " jobs " + std::to_string(accepted) +
                                " were accepted, " + std::to_string(running) +
                                " had a subtask RUNNING, " + std::to_string(ended) + " ended and " +
                                std::to_string(clean) + " were clean"));
            return kj::READY_NOW;
          }
          return follow(deadlineUs);
        });
  }

  // Records the events of this run's jobs (the first of each kind per job).
  void apply(const std::vector<JobEvent>& events) {
    for (const JobEvent& event : events) {
      auto job = jobs_.find(event.job);
      if (job == jobs_.end()) continue;
      JobTimes& times = job->second;
      switch (event.kind) {
        case JobEvent::Kind::kDeployed:
          if (times.deployedUs == 0) times.deployedUs = event.monoUs;
          break;
        case JobEvent::Kind::kRunning:
          if (times.runningUs == 0) times.runningUs = event.monoUs;
          break;
        case JobEvent::Kind::kFinished:
          times.finishedUs = std::max(times.finishedUs, event.monoUs);
          break;
        case JobEvent::Kind::kEnded:
          if (times.endedUs == 0) times.endedUs = event.monoUs;
          break;
        case JobEvent::Kind::kClean:
          if (times.cleanUs == 0) {
            times.cleanUs = event.monoUs;
            times.state = event.state;
          }
          break;
      }
    }
  }

  void fail(Error error) {
    if (failure_) return;
    failure_ = error;
    finish(std::move(error));
  }

  void finish(Status status) {
    if (done_ && done_->isWaiting()) done_->fulfill(std::move(status));
  }

  EventLoop& loop_;
  client::LeaderClient& client_;
  MasterEvents& events_;
  std::vector<std::pair<JobId, std::string>> specs_;
  size_t next_ = 0;
  int inFlight_ = 0;
  int maxInFlight_ = 1;
  std::optional<Error> failure_;
  std::map<std::string, JobTimes> jobs_;
  kj::Own<kj::PromiseFulfiller<Status>> done_;
  TaskSetErrorLogger errorLogger_{"bench_jobs client"};
  kj::TaskSet tasks_{errorLogger_};
};

// The bench job: one vertex of `parallelism` subtasks, each running /bin/true.
std::string benchJobSpec(JobId job, int index, int parallelism) {
  return "job_id: " + job.toHex() + "\nname: bench-" + std::to_string(index) +
         "\nvertices:\n  - name: work\n    parallelism: " + std::to_string(parallelism) +
         "\n    command:\n      argv: [/bin/true]\n";
}

// The memory job: `subtasks` in all, of which one runs (sleep) and the rest wait for it
// downstream, so the JobMaster holds the state of every subtask while one slot is used.
std::string memoryJobSpec(JobId job, int subtasks) {
  return "job_id: " + job.toHex() +
         "\nname: bench-memory\nvertices:\n  - name: hold\n    command:\n"
         "      argv: [/bin/sleep, \"3600\"]\n  - name: waiting\n    parallelism: " +
         std::to_string(subtasks - 1) +
         "\n    command:\n      argv: [/bin/true]\n    upstream: [hold]\n";
}

Result<std::unique_ptr<ProcessHarness>> startProcess(std::vector<std::string> argv,
                                                     const std::string& logPath) {
  return ProcessHarness::start(ProcessOptions{.argv = std::move(argv), .outputPath = logPath});
}

// The first process whose command line holds `text`, other than this one; nullopt if none.
std::optional<pid_t> pidWithCommandLineContaining(const std::string& text) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (pid == ::getpid()) continue;
    if (procCommandLine(pid).find(text) != std::string::npos) return pid;
  }
  return std::nullopt;
}

class JobsBench final {
 public:
  // `zooKeeperDir`: the server's own directory (its process's command line names it).
  JobsBench(const BenchOptions& options, std::string quorum, std::string dir,
            const std::string& zooKeeperDir)
      : options_(options),
        quorum_(std::move(quorum)),
        dir_(std::move(dir)),
        clusterId_("bench-jobs-" + std::to_string(::getpid())),
        zooKeeperPid_(pidWithCommandLineContaining(zooKeeperDir)) {}

  Status run() {
    if (Status started = startCluster(); !started.ok()) return started;

    // The client: the follow-the-leader client over the cluster's ZooKeeper, as regentctl.
    ConfigSources sources;
    sources.set = {"ha.zookeeper.quorum=" + quorum_, "cluster-id=" + clusterId_};
    auto config = loadConfig(sources);
    if (!config.ok()) return config.error();
    EventLoop loop;
    auto network = rpc::RpcNetwork::create(
        loop.io().getNetwork(), loop.timer(), rpc::rpcTlsOptionsFrom(config.value()),
        rpc::RpcTlsRole::kClient, config.value().getDuration("rpc.call-timeout"));
    if (!network.ok()) return network.error();
    auto ha = ha::HaServices::create(loop, config.value(), ha::HaServices::Identity::kReader);
    if (!ha.ok()) return ha.error();
    auto retrieval = leader::createLeaderRetrieval(loop, config.value(), *ha.value());
    if (!retrieval.ok()) return retrieval.error();
    client::LeaderClient leaderClient(
        network.value()->network(), loop.timer(), kj::mv(retrieval).value(),
        client::LeaderClientOptions{.rpc = rpc::rpcOptionsFrom(config.value()),
                                    .clusterName = "cluster \"" + clusterId_ + "\""});
    MasterEvents events(master_->outputPath());
    JobClient client(loop, leaderClient, events);

    if (options_.memorySubtasks > 0) {
      if (Status measured = measureMemory(loop, client); !measured.ok()) return measured;
    }
    if (options_.idleJobs > 0) {
      if (Status measured = measureIdleLatency(loop, client, options_.idleJobs); !measured.ok()) {
        return measured;
      }
    }
    if (Status measured = measureThroughput(loop, client); !measured.ok()) return measured;
    if (options_.wideSubtasks > 0) return measureWideJob(loop, client);
    return {};
  }

 private:
  // ZooKeeper is up; starts the master and the workers and waits until every worker is
  // registered.
  Status startCluster() {
    std::vector<std::string> masterSets = {
        "ha.zookeeper.quorum=" + quorum_, "cluster-id=" + clusterId_, "rpc.bind=127.0.0.1:0",
        "http.bind=127.0.0.1:0",          "log.level=info",
    };
    masterSets.insert(masterSets.end(), options_.masterSets.begin(), options_.masterSets.end());
    auto master = startProcess(withSets(options_.binDir + "/regent-master", masterSets),
                               dir_ + "/master.log");
    if (!master.ok()) return Error::fatal("regent-master: " + master.error().message);
    master_ = std::move(master).value();
    if (auto serving = master_->waitForLine(std::regex("leader serving "), kStartTimeout);
        !serving.ok()) {
      return Error::fatal("regent-master did not serve: " + serving.error().message);
    }
    if (auto http = master_->waitForLine(std::regex("http listening on \\S+ advertised as"),
                                         kStartTimeout);
        http.ok()) {
      std::smatch found;
      if (std::regex_search(http.value(), found, std::regex("http listening on (\\S+) "))) {
        masterHttp_ = found[1];
      }
    }
    for (int i = 0; i < options_.workers; ++i) {
      std::vector<std::string> sets =
          workerSettings(quorum_, clusterId_, makeWorkerDataDir(dir_, i), options_.slots);
      sets.insert(sets.end(), options_.workerSets.begin(), options_.workerSets.end());
      auto worker = startProcess(withSets(options_.binDir + "/regent-worker", sets),
                                 dir_ + "/worker-" + std::to_string(i) + ".log");
      if (!worker.ok()) return Error::fatal("regent-worker: " + worker.error().message);
      workers_.push_back(std::move(worker).value());
    }
    for (size_t i = 0; i < workers_.size(); ++i) {
      Status registered = waitForWorkerRegistered(*workers_[i], i, kStartTimeout);
      if (!registered.ok()) return registered;
    }
    note("1 regent-master, " + std::to_string(options_.workers) + " regent-worker x " +
         std::to_string(options_.slots) + " slots registered; logs in " + dir_ +
         " (kept with KEEP_TEST_TMP=1)");
    return {};
  }

  // One job of --memory-subtasks subtasks, all but one waiting upstream: the master's resident
  // set before and once its first subtask runs, per subtask. Then the job is cancelled.
  Status measureMemory(EventLoop& loop, JobClient& client) {
    const pid_t pid = master_->pid();
    const auto before = settledRssKb(pid);
    if (!before) return Error::fatal("cannot read the VmRSS of regent-master");
    const JobId job = JobId::random();
    // Wait for the first RUNNING only: run() resolves when the job is clean, so follow it with a
    // bound of its own and cancel it once it runs.
    auto done = client.run({{job, memoryJobSpec(job, options_.memorySubtasks)}}, 1,
                           Duration(kStartTimeout));
    const bool running = loop.run(waitForRunning(loop, client, job.toHex()));
    if (!running) {
      return Error::fatal("the memory job (" + std::to_string(options_.memorySubtasks) +
                          " subtasks) had no subtask RUNNING within " +
                          std::to_string(kStartTimeout.count()) + " ms");
    }
    const auto with = settledRssKb(pid);
    if (!with) return Error::fatal("cannot read the VmRSS of regent-master");
    if (Status cancelled = loop.run(client.cancel(job)); !cancelled.ok()) {
      return Error::fatal("cancelJob of the memory job: " + cancelled.error().message);
    }
    if (Status clean = loop.run(kj::mv(done)); !clean.ok()) {
      return Error::fatal("the memory job: " + clean.error().message);
    }
    const double perSubtask =
        static_cast<double>(with->kb - before->kb) * 1024.0 / options_.memorySubtasks;
    note("memory job: master VmRSS " + std::to_string(before->kb) + " kB before, " +
         std::to_string(with->kb) + " kB with the job running (" +
         (before->settled && with->settled ? "settled" : "not settled") + "), its end state " +
         client.jobs()[job.toHex()].state);
    std::printf("jobmaster subtasks=%d master_bytes_per_subtask=%s\n", options_.memorySubtasks,
                formatFixed(perSubtask, 0).c_str());
    std::fflush(stdout);
    client.jobs().clear();
    return {};
  }

  kj::Promise<bool> waitForRunning(EventLoop& loop, JobClient& client, std::string id,
                                   int64_t deadlineUs = 0) {
    if (deadlineUs == 0) deadlineUs = monotonicMicros() + kStartTimeout.count() * 1000;
    if (client.jobs()[id].runningUs != 0) return true;
    if (monotonicMicros() > deadlineUs) return false;
    return loop.timer()
        .afterDelay(kLogPoll.count() * kj::MILLISECONDS)
        .then([this, &loop, &client, id = std::move(id), deadlineUs]() mutable {
          return waitForRunning(loop, client, std::move(id), deadlineUs);
        });
  }

  // Submits `count` jobs one at a time (each submission waits for the previous one to be
  // accepted; the jobs themselves overlap), few enough that every job finds free slots at once,
  // and prints their submit -> first RUNNING latency: the path without queueing.
  Status measureIdleLatency(EventLoop& loop, JobClient& client, int count) {
    std::vector<std::pair<JobId, std::string>> specs;
    for (int i = 0; i < count; ++i) {
      const JobId job = JobId::random();
      specs.emplace_back(job, benchJobSpec(job, i, options_.parallelism));
    }
    const Duration timeout(kStartTimeout.count() + int64_t{count} * 1000);
    const StoreCounts before = storeCounts();
    if (Status done = loop.run(client.run(std::move(specs), 1, timeout)); !done.ok()) {
      return Error::fatal("idle latency: " + done.error().message +
                          "; the master's log ends with:\n" + master_->outputTail(3000));
    }
    std::vector<double> toRunning;
    for (const auto& [id, times] : client.jobs()) {
      if (times.runningUs != 0) toRunning.push_back(ms(times.runningUs - times.submitUs));
    }
    notePhases("idle cluster", client.jobs());
    std::printf("jobs idle=%d submit_to_running_p50_ms=%s p99=%s\n", count,
                formatFixed(percentile(toRunning, 50), 2).c_str(),
                formatFixed(percentile(toRunning, 99), 2).c_str());
    printStoreCounts("zk_idle", before, storeCounts(), count);
    std::fflush(stdout);
    client.jobs().clear();
    return {};
  }

  // The master's ZooKeeper store counters (docs/operations.md), when it serves them.
  struct StoreCounts {
    std::optional<uint64_t> transactions;
    std::optional<uint64_t> writes;
  };
  StoreCounts storeCounts() const {
    return StoreCounts{metricOf(masterHttp_, "regent_store_zookeeper_transactions_total"),
                       metricOf(masterHttp_, "regent_store_zookeeper_writes_total")};
  }
  // `prefix`_transactions_per_job and `prefix`_writes_per_job: the counters' increase / `jobs`.
  static void printStoreCounts(const std::string& prefix, const StoreCounts& before,
                               const StoreCounts& after, int jobs) {
    const auto print = [&](const char* what, const std::optional<uint64_t>& from,
                           const std::optional<uint64_t>& to, const char* metric) {
      if (from && to && jobs > 0) {
        std::printf("%s_%s_per_job=%s\n", prefix.c_str(), what,
                    formatFixed(double(*to - *from) / jobs, 2).c_str());
      } else {
        note(prefix + "_" + what + "_per_job: the master's " + metric + " could not be read");
      }
    };
    print("transactions", before.transactions, after.transactions,
          "regent_store_zookeeper_transactions_total");
    print("writes", before.writes, after.writes, "regent_store_zookeeper_writes_total");
  }

  // Where each job's time went, from the master's event lines: p50 / p99 in ms of each step.
  static void notePhases(const std::string& what, const std::map<std::string, JobTimes>& jobs) {
    struct Step {
      const char* name;
      int64_t JobTimes::*from;
      int64_t JobTimes::*to;
    };
    static constexpr Step kSteps[] = {
        {"submit->accepted", &JobTimes::submitUs, &JobTimes::acceptedUs},
        {"submit->first deployed", &JobTimes::submitUs, &JobTimes::deployedUs},
        {"first deployed->first RUNNING", &JobTimes::deployedUs, &JobTimes::runningUs},
        {"first RUNNING->last FINISHED", &JobTimes::runningUs, &JobTimes::finishedUs},
        {"last FINISHED->job ended", &JobTimes::finishedUs, &JobTimes::endedUs},
        {"job ended->job clean", &JobTimes::endedUs, &JobTimes::cleanUs},
    };
    std::string text = what + ", p50/p99 ms per job:";
    for (const Step& step : kSteps) {
      std::vector<double> samples;
      for (const auto& [id, times] : jobs) {
        if (times.*(step.from) != 0 && times.*(step.to) != 0) {
          samples.push_back(ms(times.*(step.to) - times.*(step.from)));
        }
      }
      text += std::string(" ") + step.name + " " + formatFixed(percentile(samples, 50), 1) + "/" +
              formatFixed(percentile(samples, 99), 1);
    }
    note(text);
  }

  Status measureThroughput(EventLoop& loop, JobClient& client) {
    std::vector<std::pair<JobId, std::string>> specs;
    for (int i = 0; i < options_.jobs; ++i) {
      const JobId job = JobId::random();
      specs.emplace_back(job, benchJobSpec(job, i, options_.parallelism));
    }
    const auto processes = allProcesses();
    std::vector<SchedTimes> before;
    for (const pid_t pid : processes) before.push_back(procSchedTimes(pid).value_or(SchedTimes{}));
    before.push_back(procSchedTimes(::getpid()).value_or(SchedTimes{}));
    // Bound: far beyond any plausible rate (10 jobs/s), so exceeding it means something failed.
    const Duration timeout(kStartTimeout.count() + int64_t{options_.jobs} * 100);
    const StoreCounts countsBefore = storeCounts();
    const int64_t startUs = monotonicMicros();
    if (Status done = loop.run(client.run(std::move(specs), options_.inFlight, timeout));
        !done.ok()) {
      return Error::fatal(done.error().message + "; the master's log ends with:\n" +
                          master_->outputTail(3000));
    }
    const int64_t seenUs = monotonicMicros();

    std::vector<double> toRunning, toClean;
    int64_t firstSubmitUs = INT64_MAX, lastCleanUs = 0, lastAcceptedUs = 0;
    std::map<std::string, int> states;
    for (const auto& [id, times] : client.jobs()) {
      firstSubmitUs = std::min(firstSubmitUs, times.submitUs);
      lastCleanUs = std::max(lastCleanUs, times.cleanUs);
      lastAcceptedUs = std::max(lastAcceptedUs, times.acceptedUs);
      ++states[times.state];
      toClean.push_back(ms(times.cleanUs - times.submitUs));
      if (times.runningUs != 0) toRunning.push_back(ms(times.runningUs - times.submitUs));
    }
    const double seconds = static_cast<double>(lastCleanUs - firstSubmitUs) / 1e6;
    const double jobsPerS = options_.jobs / seconds;
    std::string ended;
    for (const auto& [state, count] : states) {
      ended += (ended.empty() ? "" : ", ") + std::to_string(count) + " " + state;
    }
    note(std::to_string(options_.jobs) + " jobs x " + std::to_string(options_.parallelism) +
         " subtasks, " + std::to_string(options_.inFlight) +
         " submissions in flight: first submit -> last job clean " +
         formatFixed(seconds * 1000, 0) + " ms, the last submission accepted after " +
         formatFixed(ms(lastAcceptedUs - firstSubmitUs), 0) + " ms; ended " + ended + "; " +
         std::to_string(toRunning.size()) + " jobs logged a RUNNING attempt");
    notePhases("under load", client.jobs());
    // A failed or canceled job is no throughput: the numbers would flatter a broken run.
    if (states.size() != 1 || states.count("FINISHED") == 0) {
      return Error::fatal("not every job ended FINISHED (ended " + ended +
                          "): no throughput is reported; the master's log ends with:\n" +
                          master_->outputTail(3000));
    }
    // Where the CPU went meanwhile (two cores: 2 x the elapsed time is all there is), and how long
    // each process waited for one (the other work on the machine).
    std::string cpu = "CPU used (waited for a CPU) during the run, " +
                      formatFixed(ms(seenUs - startUs), 0) + " ms elapsed, load average " +
                      loadAverage() + ":";
    std::vector<std::string> names = {"master"};
    for (size_t i = 0; i < workers_.size(); ++i) names.push_back("worker-" + std::to_string(i));
    if (zooKeeperPid_) names.push_back("ZooKeeper");
    std::vector<pid_t> measured = processes;
    measured.push_back(::getpid());
    names.push_back("this client");
    for (size_t i = 0; i < measured.size(); ++i) {
      const SchedTimes now = procSchedTimes(measured[i]).value_or(before[i]);
      cpu += (i == 0 ? " " : ", ") + names[i] + " " + formatFixed(now.cpuMs - before[i].cpuMs, 0) +
             " (" + formatFixed(now.waitMs - before[i].waitMs, 0) + ") ms";
    }
    note(cpu);

    std::printf(
        "jobs finished_per_s=%s subtasks_per_s=%s submit_to_running_p50_ms=%s p99=%s "
        "submit_to_finished_p50_ms=%s\n",
        formatFixed(jobsPerS, 1).c_str(), formatFixed(jobsPerS * options_.parallelism, 1).c_str(),
        formatFixed(percentile(toRunning, 50), 2).c_str(),
        formatFixed(percentile(toRunning, 99), 2).c_str(),
        formatFixed(percentile(toClean, 50), 2).c_str());
    std::fflush(stdout);

    const auto masterRss = settledRssKb(master_->pid());
    const auto workerRss = settledRssKb(workers_.front()->pid());
    if (!masterRss || !workerRss) return Error::fatal("cannot read the VmRSS of the processes");
    note("after the run: master VmHWM " +
         std::to_string(procStatusKb(master_->pid(), "VmHWM").value_or(-1)) + " kB, worker VmHWM " +
         std::to_string(procStatusKb(workers_.front()->pid(), "VmHWM").value_or(-1)) + " kB" +
         (masterRss->settled && workerRss->settled ? "" : " (a VmRSS did not settle)"));
    std::printf("master_rss_kb=%lld\nworker_rss_kb=%lld\n", static_cast<long long>(masterRss->kb),
                static_cast<long long>(workerRss->kb));
    // Read once every job is clean (the run waits for that), from the store's own counters.
    printStoreCounts("zk", countsBefore, storeCounts(), options_.jobs);
    std::fflush(stdout);
    return {};
  }

  // One job of --wide-subtasks subtasks of /bin/true, many more than the slots: its JobMaster
  // rewrites the job's progress record as the subtasks end. Prints what ZooKeeper received
  // meanwhile (its process's rchar: mostly this master's requests, plus the workers' session
  // pings), per subtask, and the store's transactions.
  Status measureWideJob(EventLoop& loop, JobClient& client) {
    if (!zooKeeperPid_) {
      note("wide job: the ZooKeeper server's process was not found; skipped");
      return {};
    }
    client.jobs().clear();
    const JobId job = JobId::random();
    const StoreCounts countsBefore = storeCounts();
    const auto readBefore = procValue(*zooKeeperPid_, "io", "rchar");
    const int64_t startUs = monotonicMicros();
    const Duration timeout(kStartTimeout.count() + int64_t{options_.wideSubtasks} * 100);
    if (Status done = loop.run(client.run(
            {{job, benchJobSpec(job, 0, options_.wideSubtasks)}}, 1, timeout));
        !done.ok()) {
      return Error::fatal("the wide job: " + done.error().message +
                          "; the master's log ends with:\n" + master_->outputTail(3000));
    }
    const auto readAfter = procValue(*zooKeeperPid_, "io", "rchar");
    const StoreCounts countsAfter = storeCounts();
    const std::string state = client.jobs()[job.toHex()].state;
    if (state != "FINISHED") return Error::fatal("the wide job ended " + state);
    if (!readBefore || !readAfter) return Error::fatal("cannot read the ZooKeeper server's rchar");
    const auto received = static_cast<uint64_t>(*readAfter - *readBefore);
    std::string transactions = "?";
    if (countsBefore.transactions && countsAfter.transactions) {
      transactions = std::to_string(*countsAfter.transactions - *countsBefore.transactions);
    }
    note("wide job: " + std::to_string(options_.wideSubtasks) + " subtasks of /bin/true on " +
         std::to_string(options_.workers * options_.slots) + " slots, submit -> clean " +
         formatFixed(ms(monotonicMicros() - startUs), 0) + " ms; ZooKeeper received " +
         std::to_string(received) + " bytes in the meantime, " + transactions +
         " store transactions");
    std::printf("wide_job subtasks=%d zk_bytes_received=%llu zk_bytes_received_per_subtask=%s\n",
                options_.wideSubtasks, static_cast<unsigned long long>(received),
                formatFixed(double(received) / options_.wideSubtasks, 0).c_str());
    std::fflush(stdout);
    return {};
  }

  // The master, the workers, and the ZooKeeper server when found, for CPU readings.
  std::vector<pid_t> allProcesses() {
    std::vector<pid_t> all = {master_->pid()};
    for (auto& worker : workers_) all.push_back(worker->pid());
    if (zooKeeperPid_) all.push_back(*zooKeeperPid_);
    return all;
  }

  const BenchOptions& options_;
  const std::string quorum_;
  const std::string dir_;
  const std::string clusterId_;
  std::unique_ptr<ProcessHarness> master_;
  std::string masterHttp_;  // The master's /metrics address ("" when its log did not say).
  std::vector<std::unique_ptr<ProcessHarness>> workers_;
  std::optional<pid_t> zooKeeperPid_;
};

int run(const BenchOptions& options) {
  auto fail = [](const std::string& what) { return reportFailure("bench_jobs", what); };
  if (Status present = requireBinaries(options.binDir, {"regent-master", "regent-worker"});
      !present.ok()) {
    return fail(present.error().message);
  }
  spdlog::set_level(spdlog::level::warn);
  auto server = ZooKeeperServer::start(ZooKeeperServerOptions{.tickTime = Duration(500)});
  if (!server.ok()) return fail("ZooKeeper did not start: " + server.error().message);
  TempDir dir("regent-bench-jobs");
  // The workers' data directories live here; their tasks run as an unprivileged user.
  ::chmod(dir.path().c_str(), 0755);
  JobsBench bench(options, server.value()->connectString(), dir.path(), server.value()->tempDir());
  if (Status done = bench.run(); !done.ok()) return fail(done.error().message);
  return 0;
}

}  // namespace
}  // namespace regent::bench

int main(int argc, char** argv) {
  regent::bench::BenchOptions options;
  CLI::App app{
      "Jobs benchmark: one regent-master and real regent-worker processes over a real ZooKeeper "
      "server; submits small jobs (one vertex running /bin/true) with a bounded number in "
      "flight, waits until each job's result is clean, and prints throughput, submit -> RUNNING "
      "and submit -> clean latencies, the master's bytes per subtask and the memory of the "
      "master and a worker. Prints result lines; never asserts timings. See docs/benchmarks.md."};
  app.add_option("--jobs", options.jobs, "jobs to submit")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--in-flight", options.inFlight, "submissions outstanding at most")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  app.add_option("--parallelism", options.parallelism, "subtasks per job")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  app.add_option("--workers", options.workers, "regent-worker processes")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--slots", options.slots, "slots per worker")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--memory-subtasks", options.memorySubtasks,
                 "subtasks of the job whose memory per subtask is measured first (0: skip)")
      ->check(CLI::Range(0, 10000000))
      ->capture_default_str();
  app.add_option("--idle-jobs", options.idleJobs,
                 "jobs submitted one at a time first, for the latency without queueing (0: skip)")
      ->check(CLI::Range(0, 10000))
      ->capture_default_str();
  app.add_option("--wide-subtasks", options.wideSubtasks,
                 "subtasks of the one wide job run last, for the ZooKeeper bytes its progress "
                 "costs (0: skip)")
      ->check(CLI::Range(0, 10000))
      ->capture_default_str();
  app.add_option("--set", options.masterSets, "extra key=value for the master (repeatable)");
  app.add_option("--worker-set", options.workerSets,
                 "extra key=value for every worker (repeatable)");
  app.add_option("--bin-dir", options.binDir, "where regent-master and regent-worker are")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (options.memorySubtasks == 1) {
    std::fprintf(stderr, "bench_jobs: --memory-subtasks must be 0 (skip) or at least 2\n");
    return 2;
  }
  return regent::bench::run(options);
}

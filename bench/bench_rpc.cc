// The RPC benchmark (scripts/bench.sh rpc): one client and one master side (a Dispatcher), each
// on its own thread and loop as in two processes, over loopback TCP through the transport, the
// leadership term's membrane and the fenced endpoint. Fenced jobStatus calls one at a time
// (latency) and 64 in flight (throughput), against the floor: a plain TCP request/response of
// the same sizes between the same two loops. With --auth secret or tls the client first
// authenticates through a MasterBootstrap (shared-secret challenge, or mutual TLS whose client
// certificate maps to the reader role) and the calls also cross the role membrane. Prints its
// numbers; never asserts timings.
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/async-io.h>
#include <kj/debug.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "common/event_loop.h"
#include "common/ids.h"
#include "common/log_event_sink.h"
#include "conf/config.h"
#include "rpc/auth_session.h"
#include "rpc/call_deadline.h"
#include "rpc/fenced_endpoint.h"
#include "rpc/rpc_client.h"
#include "rpc/rpc_options.h"
#include "rpc/rpc_server.h"
#include "rpc/rpc_tls.h"
#include "services/dispatcher/dispatcher.h"
#include "services/dispatcher/dispatcher_gateway.h"
#include "services/master/master_bootstrap.h"
#include "store/store_services.h"
#include "tests/fixtures/job_graph_test_util.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/rpc/tls_test_certs.h"

namespace regent::bench {
namespace {

using Clock = std::chrono::steady_clock;
using wire::DispatcherGateway;

struct BenchOptions {
  int sequentialCalls = 20000;
  int pipelinedCalls = 200000;
  int inFlight = 64;
  // "fenced": the leader's path (membrane + fenced endpoint + Dispatcher); "bare": the Dispatcher
  // served directly, to see what the fencing layers cost.
  std::string layers = "fenced";
  // "none": the client bootstraps the gateway directly; "secret": it authenticates as reader with
  // the shared secret over plain TCP; "tls": mutual TLS, the client certificate's name mapped to
  // reader (the shared secret is used when the transport does not report the name).
  // "all" runs the three in turn.
  std::string auth = "all";
  // With --auth tls: PEM files of the CA, the master's and the client's certificates.
  std::string tlsDir;
};

constexpr const char* kBenchSecret = "bench-reader-secret-0123456789";
constexpr const char* kBenchClientName = "bench-client";

rpc::RpcTlsOptions tlsOptionsFor(const BenchOptions& options, const char* who) {
  if (options.auth != "tls") return {};
  return rpc::RpcTlsOptions{.certFile = options.tlsDir + "/" + who + ".pem",
                            .keyFile = options.tlsDir + "/" + who + ".key",
                            .caFile = options.tlsDir + "/ca.pem",
                            .verifyClients = std::string(who) == "master"};
}

// Hands out the term's gateway, as a leading master does.
class BenchBootstrapHost final : public master::MasterBootstrapHost {
 public:
  explicit BenchBootstrapHost(DispatcherGateway::Client gateway) : gateway_(kj::mv(gateway)) {
    self_.masterId = "bench";
  }
  ~BenchBootstrapHost() noexcept override = default;
  const leader::ContenderInfo& self() const override { return self_; }
  std::optional<leader::LeaderInfo> knownLeader() const override {
    leader::LeaderInfo info;
    info.epoch = 1;
    info.masterId = "bench";
    return info;
  }
  uint64_t leadingEpoch() const override { return 1; }
  kj::Maybe<DispatcherGateway::Client> dispatcherGateway() override { return gateway_; }
  kj::Promise<Status> handOverForCaller() override { return Status(); }

 private:
  leader::ContenderInfo self_;
  DispatcherGateway::Client gateway_;
};

double micros(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

kj::Own<capnp::MallocMessageBuilder> benchGraph(const JobId& id) {
  return testing::makeJobGraph(id, {.name = "bench", .parallelism = 4, .argv = {"true"}});
}

kj::Promise<capnp::Response<DispatcherGateway::JobStatusResults>> jobStatus(
    DispatcherGateway::Client& gateway, const JobId& id, uint64_t epoch) {
  auto request = gateway.jobStatusRequest();
  request.setEpoch(epoch);
  wire::setWireId(request.initJobId(), id);
  return request.send();
}

// Keeps `inFlight` calls outstanding until `total` completed.
kj::Promise<void> pipelined(DispatcherGateway::Client& gateway, const JobId& id, int& started,
                            int total) {
  if (started >= total) return kj::READY_NOW;
  ++started;
  return jobStatus(gateway, id, 1).then([&gateway, id, &started, total](auto&& response) {
    KJ_REQUIRE(!response.hasFailure(), response.getFailure().getMessage().cStr());
    return pipelined(gateway, id, started, total);
  });
}

// The floor: a server that answers every `requestBytes` read with `responseBytes`.
kj::Promise<void> echoConnection(kj::Own<kj::AsyncIoStream> stream, size_t requestBytes,
                                 size_t responseBytes) {
  auto buffer = kj::heapArray<kj::byte>(kj::max(requestBytes, responseBytes));
  auto& streamRef = *stream;
  auto bufferPtr = buffer.begin();
  return streamRef.tryRead(bufferPtr, requestBytes, requestBytes)
      .then([&streamRef, bufferPtr, responseBytes](size_t n) -> kj::Promise<bool> {
        if (n == 0) return false;
        return streamRef.write(bufferPtr, responseBytes).then([] { return true; });
      })
      .then([stream = kj::mv(stream), buffer = kj::mv(buffer), requestBytes,
             responseBytes](bool more) mutable -> kj::Promise<void> {
        if (!more) return kj::READY_NOW;
        return echoConnection(kj::mv(stream), requestBytes, responseBytes);
      });
}

// The master side, on its own thread and loop: a Dispatcher with one job behind the term's
// membrane and the fenced endpoint, served on loopback, and the floor's echo server.
class MasterSide {
 public:
  explicit MasterSide(const BenchOptions& options)
      : thread_([this, options] { serve(options); }) {
    auto ready = ready_.get_future().get();
    if (!ready.error.empty()) {
      thread_.join();  // It ended after reporting the error.
      KJ_FAIL_REQUIRE("the master side did not start", ready.error);
    }
    rpcPort_ = ready.rpcPort;
    floorPort_ = ready.floorPort;
  }
  ~MasterSide() {
    loop_.load()->post([this] { stop_->fulfill(); });
    thread_.join();
  }
  MasterSide(const MasterSide&) = delete;
  MasterSide& operator=(const MasterSide&) = delete;

  uint16_t rpcPort() const { return rpcPort_; }
  uint16_t floorPort() const { return floorPort_; }
  const JobId& jobId() const { return id_; }

 private:
  struct Ready {
    std::string error;
    uint16_t rpcPort = 0;
    uint16_t floorPort = 0;
  };

  void serve(const BenchOptions& options) {
    const std::string& layers = options.layers;
    try {
      EventLoop loop;
      testing::TempDir dir("regent-bench-rpc");
      ConfigSources sources;
      sources.set = {"ha.mode=standalone", "store.rocksdb.path=" + dir.path() + "/store"};
      auto config = loadConfig(sources);
      KJ_REQUIRE(config.ok(), config.error().message);
      auto services = store::StoreServices::create(loop, config.value(), nullptr);
      KJ_REQUIRE(services.ok(), services.error().message);
      auto stores = loop.run(services.value()->openTerm(store::StoreTerm{1, ""}));
      KJ_REQUIRE(stores.ok(), stores.error().message);

      rpc::FencingCounters counters;
      rpc::LeadershipTerm term(1, counters);
      LogEventSink events;
      auto dispatcher = kj::heap<dispatcher::Dispatcher>(1, *stores.value(), loop.timer(), events,
                                                         jobgraph::JobGraphLimits{}, 1000,
                                                         [] { return int64_t{1700000000000}; });
      auto recovered = loop.run(dispatcher->recover());
      KJ_REQUIRE(recovered.ok(), recovered.error().message);
      term.markReady();
      auto gatewayServer = kj::heap<dispatcher::DispatcherGatewayServer>(*dispatcher);
      DispatcherGateway::Client gateway =
          layers == "bare" ? DispatcherGateway::Client(kj::mv(gatewayServer))
                           : term.serve<DispatcherGateway>(kj::mv(gatewayServer));
      {
        auto graph = benchGraph(id_);
        auto submit = gateway.submitJobRequest();
        submit.setEpoch(1);
        submit.setJobGraph(graph->getRoot<wire::JobGraph>().asReader());
        auto response = loop.run(submit.send());
        KJ_REQUIRE(!response.hasFailure(), response.getFailure().getMessage().cStr());
      }
      auto network = rpc::RpcNetwork::create(loop.io().getNetwork(), loop.timer(),
                                             tlsOptionsFor(options, "master"),
                                             rpc::RpcTlsRole::kServer, Duration(10000));
      KJ_REQUIRE(network.ok(), network.error().message);
      rpc::RpcOptions rpcOptions = rpc::rpcOptionsFrom(config.value());
      BenchBootstrapHost host(gateway);
      rpc::ServerAuthSettings settings;
      rpc::AuthCounters authCounters;
      rpc::RpcServer::BootstrapFactory bootstrap = [gateway](const rpc::RpcPeer&) mutable {
        return capnp::Capability::Client(gateway);
      };
      if (options.auth != "none") {
        settings.required = true;
        settings.secrets[wire::Role::READER] = kBenchSecret;
        if (options.auth == "tls") settings.tlsNames[kBenchClientName] = wire::Role::READER;
        rpcOptions.requireAuthentication = true;
        bootstrap = [&](const rpc::RpcPeer& peer) {
          return capnp::Capability::Client(
              master::serveMasterBootstrapFor(host, counters, settings, authCounters, peer));
        };
      }
      auto server = loop.run(rpc::RpcServer::listen(network.value()->network(), loop.timer(),
                                                    "127.0.0.1:0", rpcOptions, kj::mv(bootstrap)));
      KJ_REQUIRE(server.ok(), server.error().message);

      // The floor: plain TCP on the same loop, answering each request of the bench's size.
      auto listener = loop.run(loop.io().getNetwork().parseAddress("127.0.0.1", 0))->listen();
      auto floorServing = listener->accept()
                              .then([this](kj::Own<kj::AsyncIoStream> stream) {
                                return echoConnection(kj::mv(stream), requestBytes_.load(),
                                                      responseBytes_.load());
                              })
                              .eagerlyEvaluate(nullptr);

      auto stop = kj::newPromiseAndFulfiller<void>();
      stop_ = kj::mv(stop.fulfiller);
      loop_.store(&loop);
      ready_.set_value(Ready{"", server.value()->port(), static_cast<uint16_t>(listener->getPort())});
      loop.run(kj::mv(stop.promise));
    } catch (const kj::Exception& e) {
      failed(e.getDescription().cStr());
    } catch (const std::exception& e) {
      failed(e.what());
    }
  }

  void failed(const std::string& error) {
    if (loop_.load() == nullptr) {
      ready_.set_value(Ready{error});
      return;
    }
    std::fprintf(stderr, "bench_rpc: the master side failed while serving: %s\n", error.c_str());
    std::abort();  // The client would wait for it forever.
  }

 public:
  // The floor's message sizes, set by the client before it connects to the floor.
  std::atomic<size_t> requestBytes_{0};
  std::atomic<size_t> responseBytes_{0};

 private:
  const JobId id_ = JobId::random();
  std::promise<Ready> ready_;
  std::atomic<EventLoop*> loop_{nullptr};
  kj::Own<kj::PromiseFulfiller<void>> stop_;  // Used on the master's thread only.
  uint16_t rpcPort_ = 0;
  uint16_t floorPort_ = 0;
  std::thread thread_;  // Last: started once the members above exist.
};

// The Dispatcher gateway through an authenticated MasterBootstrap: with --auth tls at once, the
// connection's certificate name mapped to reader (a master that does not map it fails the run,
// so the tls numbers never measure the secret instead); with --auth secret after the
// shared-secret challenge. `mechanism` says which.
DispatcherGateway::Client authenticatedGateway(EventLoop& loop, rpc::RpcClient& client,
                                               const rpc::RpcOptions& rpcOptions,
                                               const std::string& auth, std::string& mechanism) {
  auto bootstrap = loop.run(client.bootstrapAs<wire::MasterBootstrap>());
  auto dispatcherOf = [&](wire::MasterBootstrap::Client& cap) {
    auto request = cap.dispatcherRequest();
    request.setEpoch(1);
    return loop.run(request.send());
  };
  auto first = dispatcherOf(bootstrap);
  if (!first.hasFailure()) {
    mechanism = "tls-certificate";
    return first.getDispatcher();
  }
  KJ_REQUIRE(first.getFailure().isUnauthenticated(), first.getFailure().getMessage().cStr());
  KJ_REQUIRE(auth != "tls", "the bench master did not map the client certificate's name to a role",
             first.getFailure().getMessage().cStr());
  const rpc::CallDeadline deadline(loop.timer(), rpcOptions.callTimeout);
  auto authenticated = loop.run(rpc::authenticateBootstrap(
      bootstrap, rpc::ClientCredential{wire::Role::READER, kBenchSecret}, deadline,
      "the bench master"));
  auto* restricted = std::get_if<wire::MasterBootstrap::Client>(&authenticated);
  if (restricted == nullptr) {
    const auto* refused = std::get_if<rpc::RefusedMaster>(&authenticated);
    KJ_FAIL_REQUIRE("authentication failed", refused != nullptr
                                                 ? refused->message
                                                 : std::get<rpc::CallFailure>(authenticated).message);
  }
  mechanism = "shared-secret";
  auto second = dispatcherOf(*restricted);
  KJ_REQUIRE(!second.hasFailure(), second.getFailure().getMessage().cStr());
  return second.getDispatcher();
}

// With --auth tls: a CA, the master's certificate (for 127.0.0.1) and the client's (CN
// kBenchClientName), written to options.tlsDir.
void writeBenchCertificates(const BenchOptions& options) {
  rpc::testing::TestCa ca("regent bench CA");
  // The client dials 127.0.0.1 and kj-tls checks it as a DNS name (as rpc_tls_test does).
  const auto master = ca.issue("127.0.0.1", "DNS:127.0.0.1,IP:127.0.0.1");
  const auto client = ca.issue(kBenchClientName, "");
  rpc::testing::writeTextFile(options.tlsDir + "/ca.pem", ca.certificatePem());
  rpc::testing::writeTextFile(options.tlsDir + "/master.pem", master.certificate);
  rpc::testing::writeTextFile(options.tlsDir + "/master.key", master.privateKey);
  rpc::testing::writeTextFile(options.tlsDir + "/client.pem", client.certificate);
  rpc::testing::writeTextFile(options.tlsDir + "/client.key", client.privateKey);
}

int run(BenchOptions options) {
  testing::TempDir tlsDir("regent-bench-rpc-tls");
  if (options.auth == "tls") {
    options.tlsDir = tlsDir.path();
    writeBenchCertificates(options);
  }
  spdlog::set_level(spdlog::level::warn);
  MasterSide master(options);
  const JobId id = master.jobId();

  EventLoop loop;
  rpc::RpcOptions rpcOptions;
  auto network = rpc::RpcNetwork::create(loop.io().getNetwork(), loop.timer(),
                                         tlsOptionsFor(options, "client"), rpc::RpcTlsRole::kClient,
                                         rpcOptions.callTimeout);
  KJ_REQUIRE(network.ok(), network.error().message);
  const auto connectStart = Clock::now();
  rpc::RpcClient client(network.value()->network(), loop.timer(),
                        "127.0.0.1:" + std::to_string(master.rpcPort()), rpcOptions);
  std::string mechanism = "none";
  DispatcherGateway::Client remote = nullptr;
  if (options.auth == "none") {
    remote = loop.run(client.bootstrapAs<DispatcherGateway>());
  } else {
    remote = authenticatedGateway(loop, client, rpcOptions, options.auth, mechanism);
  }
  const double setupMicros = micros(Clock::now() - connectStart);

  // Sizes of one call on the wire, for the floor: request and response messages.
  size_t requestBytes = 0;
  size_t responseBytes = 0;
  {
    capnp::MallocMessageBuilder request;
    auto params = request.initRoot<DispatcherGateway::JobStatusParams>();
    params.setEpoch(1);
    wire::setWireId(params.initJobId(), id);
    auto response = loop.run(jobStatus(remote, id, 1));
    KJ_REQUIRE(!response.hasFailure(), response.getFailure().getMessage().cStr());
    capnp::MallocMessageBuilder results;
    results.setRoot(response.getStatus());
    // The RPC frames add a Call/Return header (about 10 words) around the payload.
    requestBytes = (capnp::computeSerializedSizeInWords(request) + 10) * 8;
    responseBytes = (capnp::computeSerializedSizeInWords(results) + 10) * 8;
  }
  master.requestBytes_.store(requestBytes);
  master.responseBytes_.store(responseBytes);

  for (int i = 0; i < 1000; ++i) loop.run(jobStatus(remote, id, 1));  // Warm-up.
  std::vector<double> latencies;
  latencies.reserve(static_cast<size_t>(options.sequentialCalls));
  for (int i = 0; i < options.sequentialCalls; ++i) {
    const auto start = Clock::now();
    auto response = loop.run(jobStatus(remote, id, 1));
    latencies.push_back(micros(Clock::now() - start));
    KJ_REQUIRE(!response.hasFailure());
  }

  int started = 0;
  const auto pipelineStart = Clock::now();
  {
    kj::Vector<kj::Promise<void>> lanes;
    for (int lane = 0; lane < options.inFlight; ++lane) {
      lanes.add(pipelined(remote, id, started, options.pipelinedCalls));
    }
    loop.run(kj::joinPromises(lanes.releaseAsArray()));
  }
  const double pipelineSeconds =
      std::chrono::duration<double>(Clock::now() - pipelineStart).count();

  // The floor between the same two loops: plain TCP, one request/response at a time.
  auto floorClient = loop.run(
      loop.run(loop.io().getNetwork().parseAddress("127.0.0.1", master.floorPort()))->connect());
  auto request = kj::heapArray<kj::byte>(requestBytes);
  auto response = kj::heapArray<kj::byte>(responseBytes);
  std::fill(request.begin(), request.end(), kj::byte(7));
  std::vector<double> floorLatencies;
  floorLatencies.reserve(static_cast<size_t>(options.sequentialCalls));
  for (int i = 0; i < options.sequentialCalls + 1000; ++i) {
    const auto start = Clock::now();
    loop.run(floorClient->write(request.begin(), request.size()));
    loop.run(floorClient->read(response.begin(), response.size()));
    if (i >= 1000) floorLatencies.push_back(micros(Clock::now() - start));
  }
  floorClient = nullptr;

  const double fencedP50 = percentile(latencies, 50);
  const double floorP50 = percentile(floorLatencies, 50);
  std::printf("# layers: %s; auth: %s (%s), connect + authenticate %.0f us, once per connection\n",
              options.layers.c_str(), options.auth.c_str(), mechanism.c_str(), setupMicros);
  std::printf("# %d sequential calls, %d calls with %d in flight on one connection; request %zu "
              "bytes, response %zu bytes on the wire (approx.); client and master on their own threads and loops\n",
              options.sequentialCalls, options.pipelinedCalls, options.inFlight, requestBytes,
              responseBytes);
  std::printf("# tcp floor p99=%.1f us; fenced p50/floor p50 = %.2f\n",
              percentile(floorLatencies, 99), fencedP50 / floorP50);
  std::printf("rpc auth=%s fenced_p50_us=%.1f fenced_p99_us=%.1f fenced_calls_per_s=%.0f "
              "tcp_floor_p50_us=%.1f\n",
              options.auth.c_str(), fencedP50, percentile(latencies, 99),
              static_cast<double>(options.pipelinedCalls) / pipelineSeconds, floorP50);
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace regent::bench

int main(int argc, char** argv) {
  regent::bench::BenchOptions options;
  CLI::App app{
      "RPC benchmark: fenced DispatcherGateway.jobStatus calls over loopback (one at a time, then "
      "many in flight) against a plain TCP request/response of the same size on the same loop. "
      "Prints result lines; never asserts timings."};
  app.add_option("--calls", options.sequentialCalls, "sequential calls (latency)")
      ->check(CLI::Range(100, 10000000))
      ->capture_default_str();
  app.add_option("--pipelined-calls", options.pipelinedCalls, "calls with --in-flight outstanding")
      ->check(CLI::Range(100, 100000000))
      ->capture_default_str();
  app.add_option("--in-flight", options.inFlight, "calls kept outstanding on one connection")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  app.add_option("--layers", options.layers,
                 "fenced: membrane + fenced endpoint + Dispatcher; bare: the Dispatcher alone")
      ->check(CLI::IsMember({"fenced", "bare"}))
      ->capture_default_str();
  app.add_option("--auth", options.auth,
                 "none: no authentication; secret: the reader's shared secret over TCP; tls: "
                 "mutual TLS, the client certificate mapped to reader; all: the three in turn")
      ->check(CLI::IsMember({"all", "none", "secret", "tls"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (options.auth != "all") return regent::bench::run(options);
  for (const char* auth : {"none", "secret", "tls"}) {
    options.auth = auth;
    if (const int code = regent::bench::run(options); code != 0) return code;
  }
  return 0;
}

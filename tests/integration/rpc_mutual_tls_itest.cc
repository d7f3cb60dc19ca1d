// Authentication end to end with real processes (docs/security.md): a master serving mutual TLS
// maps each verified client certificate's common name to a role (rpc.auth-tls.*), and refuses a
// certificate from another CA at the handshake; a master's /metrics counts the connections its
// RPC transport refused before authentication (pre-authentication size cap, rpc.auth-timeout,
// rpc.max-connections-per-peer) and the TLS handshakes it refused.
#include <gtest/gtest.h>
#include <kj/async-io.h>
#include <kj/compat/http.h>
#include <kj/debug.h>
#include <sys/stat.h>

#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/fixtures/zookeeper_server.h"
#include "tests/integration/http_get_test_util.h"
#include "tests/integration/master_cluster_test_util.h"
#include "tests/rpc/tls_test_certs.h"
#include "tests/http/prometheus_text_test_util.h"

namespace regent::testing {
namespace {

using Kind = MasterEvent::Kind;
using rpc::testing::PemPair;
using rpc::testing::TestCa;
using rpc::testing::writeTextFile;

constexpr Duration kTimeout{60000};
constexpr const char* kJobId = "6b2d3b0f9c8e7d6f5a4b3c2d1e0f9a8b";

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The address a master's server listens on, from its "<server> listening on ADDRESS" line.
std::string listenAddressOf(MasterCluster& cluster, size_t slot, const std::string& server) {
  const std::regex pattern(server + " listening on (\\S+)");
  auto line = cluster.process(slot).waitForLine(pattern, kTimeout);
  KJ_REQUIRE(line.ok(), line.error().message);
  std::smatch match;
  KJ_REQUIRE(std::regex_search(line.value(), match, pattern));
  return match[1];
}

// A master (one, through the real ZooKeeper server, with the ZooKeeper ACL authentication needs)
// with `set` added to its options, serving /metrics on a port of its own; regentctl is pointed at
// its cluster and reads it with the read credential.
class AuthenticatedMaster : public ::testing::Test {
 protected:
  explicit AuthenticatedMaster(const std::string& name) : dir_(name) {}
  ~AuthenticatedMaster() noexcept override = default;

  std::string path(const std::string& name) const { return dir_.path() + "/" + name; }

  void startMaster(std::vector<std::string> set) {
    auto server = sharedZooKeeperServer();
    ASSERT_OK(server);
    const std::string clusterId = uniqueClusterId("mutual-tls");
    // Authentication needs the ZooKeeper ACL (docs/security.md, "Safe by default").
    set.insert(set.begin(), {"rpc.advertised-address=", "http.bind=127.0.0.1:0",
                             "ha.zookeeper.auth=regent:master-secret",
                             "ha.zookeeper.read-auth=viewer:viewer-secret"});
    cluster_ = std::make_unique<MasterCluster>(MasterClusterOptions{
        .quorum = server.value()->connectString(), .clusterId = clusterId, .extraSet = set});
    ASSERT_OK(cluster_->startMasters(1));
    auto serving = cluster_->waitForEvent(
        0, [](const MasterEvent& e) { return e.kind == Kind::kServing; }, kTimeout);
    ASSERT_OK(serving);
    rpcAddress_ = listenAddressOf(*cluster_, 0, "rpc");
    httpAddress_ = listenAddressOf(*cluster_, 0, "http");
    ctlArgs_ = {"--zk", server.value()->connectString(), "--cluster-id", clusterId,
                "--set", "rpc.call-timeout=2s",
                "--set", "ha.zookeeper.read-auth=viewer:viewer-secret"};
  }

  CtlResult ctl(std::vector<std::string> args, const std::string& timeout = "30s") {
    std::vector<std::string> all = ctlArgs_;
    all.insert(all.end(), {"--timeout", timeout});
    all.insert(all.end(), args.begin(), args.end());
    auto run = runRegentctl(dir_.path(), all, Duration(90000));
    EXPECT_TRUE(run.ok()) << run.error().message;
    return run.ok() ? run.value() : CtlResult{};
  }

  // The master's /metrics, parsed; `done` is asked until it holds (counters lag the events
  // a test sees from the outside by a turn of the master's loop).
  PrometheusText metricsOnceThey(const std::function<bool(const PrometheusText&)>& done) {
    PrometheusText parsed;
    httpGetUntil(loop_, table_, httpAddress_, "/metrics", [&](const HttpReply& reply) {
      if (reply.status != 200) return false;
      parsed = parsePrometheusText(reply.body);
      return parsed.error.empty() && done(parsed);
    });
    return parsed;
  }

  // Connects to the master's RPC port over plain TCP and sends nothing.
  kj::Own<kj::AsyncIoStream> connectRpc() {
    auto address = loop_.run(loop_.io().getNetwork().parseAddress(rpcAddress_));
    return loop_.run(address->connect());
  }

  // Whether the master closed `stream` (end of stream or reset) within `within`; what it sends
  // first (an Abort message) is read and dropped.
  bool closedByMaster(kj::AsyncIoStream& stream, Duration within) {
    kj::byte buffer[4096];
    return loop_.run(loop_.timer()
                         .timeoutAfter(within.count() * kj::MILLISECONDS,
                                       untilEnd(stream, buffer, sizeof buffer))
                         .catch_([](kj::Exception&&) { return false; }));
  }
  static kj::Promise<bool> untilEnd(kj::AsyncIoStream& stream, kj::byte* buffer, size_t size) {
    return stream.tryRead(buffer, 1, size).then(
        [&stream, buffer, size](size_t n) -> kj::Promise<bool> {
          if (n == 0) return true;
          return untilEnd(stream, buffer, size);
        },
        [](kj::Exception&&) -> kj::Promise<bool> { return true; });
  }

  TempDir dir_;
  EventLoop loop_;
  kj::HttpHeaderTable table_;
  std::unique_ptr<MasterCluster> cluster_;
  std::vector<std::string> ctlArgs_;
  std::string rpcAddress_;
  std::string httpAddress_;
};

class TransportRefusalMetrics : public AuthenticatedMaster {
 protected:
  TransportRefusalMetrics() : AuthenticatedMaster("transport-metrics") {}
};

TEST_F(TransportRefusalMetrics, EachRefusalBeforeAuthenticationIsCountedInMetrics) {
  const std::string secret = path("admin.secret");
  writeTextFile(secret, "admin-secret-0123456789\n");
  ::chmod(secret.c_str(), 0600);
  startMaster({"rpc.auth-secret.admin-file=" + secret, "rpc.auth-timeout=1s",
               "rpc.max-connections-per-peer=1"});
  if (HasFatalFailure()) return;

  PrometheusText before = metricsOnceThey([](const PrometheusText&) { return true; });
  EXPECT_EQ(before.samples.at("regent_rpc_connections_auth_timeouts_total"), 0);
  EXPECT_EQ(before.samples.at("regent_rpc_connections_refused_total{cap=\"peer\"}"), 0);
  EXPECT_EQ(before.samples.at("regent_rpc_connections_refused_total{cap=\"total\"}"), 0);
  EXPECT_EQ(before.samples.at("regent_rpc_connections_dropped_before_auth_total"), 0);
  EXPECT_EQ(before.samples.at("regent_rpc_tls_handshake_failures_total"), 0);
  EXPECT_EQ(before.types.at("regent_rpc_connections_refused_total"), "counter");

  // An idle connection holds the peer's only place: a second one is closed at accept, and the
  // idle one is closed when rpc.auth-timeout has passed.
  auto idle = connectRpc();
  auto second = connectRpc();  // Accepted after the idle one: connections are taken in order.
  EXPECT_TRUE(closedByMaster(*second, Duration(30000)));
  EXPECT_TRUE(closedByMaster(*idle, Duration(30000)));
  PrometheusText refused = metricsOnceThey([](const PrometheusText& m) {
    return m.samples.at("regent_rpc_connections_auth_timeouts_total") >= 1 &&
           m.samples.at("regent_rpc_connections_refused_total{cap=\"peer\"}") >= 1;
  });
  EXPECT_EQ(refused.samples.at("regent_rpc_connections_auth_timeouts_total"), 1);
  EXPECT_EQ(refused.samples.at("regent_rpc_connections_refused_total{cap=\"peer\"}"), 1);
  EXPECT_EQ(refused.samples.at("regent_rpc_connections_dropped_before_auth_total"), 0);

  // A frame header announcing 10 MiB before authenticating: dropped from the header. (The idle
  // connection's place was freed with its timeout counted, so this one is not over the cap.)
  auto rogue = connectRpc();
  const uint32_t words = 10 * 1024 * 1024 / 8;
  const kj::byte header[8] = {0, 0, 0, 0, kj::byte(words), kj::byte(words >> 8),
                              kj::byte(words >> 16), kj::byte(words >> 24)};
  loop_.run(rogue->write(header, sizeof header));
  EXPECT_TRUE(closedByMaster(*rogue, Duration(30000)));
  PrometheusText dropped = metricsOnceThey([](const PrometheusText& m) {
    return m.samples.at("regent_rpc_connections_dropped_before_auth_total") >= 1;
  });
  EXPECT_EQ(dropped.samples.at("regent_rpc_connections_dropped_before_auth_total"), 1);
  EXPECT_EQ(dropped.samples.at("regent_rpc_connections_auth_timeouts_total"), 1);
  EXPECT_EQ(dropped.samples.at("regent_rpc_connections_refused_total{cap=\"peer\"}"), 1);
  EXPECT_EQ(dropped.samples.at("regent_rpc_connections_refused_total{cap=\"total\"}"), 0);
  EXPECT_EQ(dropped.samples.at("regent_rpc_tls_handshake_failures_total"), 0);
}

class MutualTlsRoles : public AuthenticatedMaster {
 protected:
  MutualTlsRoles() : AuthenticatedMaster("mutual-tls-roles"), ca_("regent itest CA") {
    writeTextFile(path("ca.pem"), ca_.certificatePem());
    // Masters advertise 127.0.0.1:<port>: regentctl checks that name.
    writePair("master", ca_.issue("master", "DNS:127.0.0.1,IP:127.0.0.1"));
    writePair("ops", ca_.issue("ops-admin", ""));
    writePair("viewer", ca_.issue("dashboard", ""));
    writePair("unmapped", ca_.issue("somebody", ""));
    TestCa other("another CA");
    writePair("foreign", other.issue("ops-admin", ""));  // The admin's name, the wrong CA.
  }

  void writePair(const std::string& name, const PemPair& pair) const {
    writeTextFile(path(name + ".pem"), pair.certificate);
    writeTextFile(path(name + ".key"), pair.privateKey);
  }

  // regentctl's TLS options presenting the client certificate `name`.
  std::vector<std::string> as(const std::string& name) const {
    return {"--set", "rpc.tls.ca=" + path("ca.pem"), "--set",
            "rpc.tls.cert=" + path(name + ".pem"), "--set",
            "rpc.tls.key=" + path(name + ".key")};
  }

  std::vector<std::string> with(std::vector<std::string> credential,
                                const std::vector<std::string>& args) const {
    credential.insert(credential.end(), args.begin(), args.end());
    return credential;
  }

  std::string jobFile() {
    const std::string file = path("job.yaml");
    writeTextFile(file, std::string("job_id: ") + kJobId +
                            "\nname: by-certificate\nvertices:\n"
                            "  - name: work\n"
                            "    parallelism: 1\n"
                            "    command:\n"
                            "      argv: [sleep, \"1\"]\n");
    return file;
  }

  TestCa ca_;
};

TEST_F(MutualTlsRoles, ACertificateNameMapsToItsRoleAndAForeignCertificateIsRefusedAndCounted) {
  startMaster({"rpc.tls.cert=" + path("master.pem"), "rpc.tls.key=" + path("master.key"),
               "rpc.tls.ca=" + path("ca.pem"), "rpc.tls.verify-clients=true",
               "rpc.auth-tls.admin-names=ops-admin", "rpc.auth-tls.reader-names=dashboard"});
  if (HasFatalFailure()) return;

  CtlResult submitted = ctl(with(as("ops"), {"jobs", "submit", jobFile()}));
  EXPECT_EQ(submitted.exit.exitCode, 0) << submitted.output;
  EXPECT_TRUE(contains(submitted.output, kJobId)) << submitted.output;

  CtlResult listed = ctl(with(as("viewer"), {"jobs", "list"}));
  EXPECT_EQ(listed.exit.exitCode, 0) << listed.output;
  EXPECT_TRUE(contains(listed.output, kJobId)) << listed.output;
  CtlResult readerSubmit = ctl(with(as("viewer"), {"jobs", "submit", jobFile()}));
  EXPECT_EQ(readerSubmit.exit.exitCode, 4) << readerSubmit.output;
  EXPECT_TRUE(contains(readerSubmit.output, "needs role admin")) << readerSubmit.output;
  CtlResult readerCancel = ctl(with(as("viewer"), {"jobs", "cancel", kJobId}));
  EXPECT_EQ(readerCancel.exit.exitCode, 4) << readerCancel.output;
  EXPECT_TRUE(contains(readerCancel.output, "needs role admin")) << readerCancel.output;

  // Verified, but its name is mapped to no role, and it has no secret: told to authenticate.
  CtlResult unmapped = ctl(with(as("unmapped"), {"jobs", "list"}));
  EXPECT_EQ(unmapped.exit.exitCode, 4) << unmapped.output;
  EXPECT_TRUE(contains(unmapped.output, "needs an authenticated connection")) << unmapped.output;

  PrometheusText before = metricsOnceThey([](const PrometheusText&) { return true; });
  EXPECT_EQ(before.samples.at("regent_rpc_tls_handshake_failures_total"), 0);
  EXPECT_GE(before.samples.at("regent_rpc_auth_successes_total{mechanism=\"tls\"}"), 3);
  EXPECT_GE(before.samples.at("regent_rpc_permission_denials_total{required=\"admin\"}"), 2);

  // The admin's name from another CA: refused at the handshake, never served, and counted.
  CtlResult foreign = ctl(with(as("foreign"), {"jobs", "cancel", kJobId}), "3s");
  EXPECT_NE(foreign.exit.exitCode, 0) << foreign.output;
  EXPECT_FALSE(contains(foreign.output, "canceled")) << foreign.output;
  PrometheusText after = metricsOnceThey([](const PrometheusText& m) {
    return m.samples.at("regent_rpc_tls_handshake_failures_total") >= 1;
  });
  EXPECT_GE(after.samples.at("regent_rpc_tls_handshake_failures_total"), 1);
  EXPECT_TRUE(cluster_->process(0).waitForLine(std::regex("certificate verify failed"), kTimeout)
                  .ok())
      << cluster_->process(0).output();

  // The job the foreign certificate tried to cancel is still there, and the admin still served.
  CtlResult status = ctl(with(as("ops"), {"jobs", "status", kJobId}));
  EXPECT_EQ(status.exit.exitCode, 0) << status.output;
  EXPECT_TRUE(std::regex_search(status.output, std::regex("state:\\s+CREATED"))) << status.output;
}

}  // namespace
}  // namespace regent::testing

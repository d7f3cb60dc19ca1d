// File-descriptor exhaustion and idle or stalled connections against real processes
// (docs/security.md, "Connection limits"): a flood from many loopback addresses is refused by
// caps fitted to the open-file limit; a master or worker out of descriptors keeps its ZooKeeper
// session, counts and warns, and serves RPC and HTTP again once descriptors free up; a leader
// whose listener keeps failing hands over to a standby; idle connections and stalled half-messages
// are closed.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <kj/compat/http.h>
#include <kj/debug.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "common/host_port.h"
#include "tests/fixtures/process_harness.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/fixtures/wait_test_util.h"
#include "tests/fixtures/zookeeper_server.h"
#include "tests/integration/http_get_test_util.h"
#include "tests/integration/master_cluster_test_util.h"

namespace regent::testing {
namespace {

using Kind = MasterEvent::Kind;
// Bounds for slow ASan builds on shared cores; none is a claim about speed.
constexpr Duration kTimeout{60000};
// The open-file limit the processes under test start with (soft = hard).
constexpr uint64_t kLimit = 256;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Descriptors `pid` holds now.
uint64_t openDescriptors(pid_t pid) {
  uint64_t count = 0;
  std::error_code error;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    ++count;
  }
  return count;
}

// Sets `pid`'s RLIMIT_NOFILE (lowering is allowed for a process of the same user).
void setOpenFileLimit(pid_t pid, uint64_t soft, uint64_t hard) {
  struct rlimit limit {
    .rlim_cur = static_cast<rlim_t>(soft), .rlim_max = static_cast<rlim_t>(hard)
  };
  ASSERT_EQ(::prlimit(pid, RLIMIT_NOFILE, &limit, nullptr), 0) << std::strerror(errno);
}

uint64_t softOpenFileLimit(pid_t pid) {
  struct rlimit limit {};
  EXPECT_EQ(::prlimit(pid, RLIMIT_NOFILE, nullptr, &limit), 0) << std::strerror(errno);
  return limit.rlim_cur;
}

// Leaves `pid` no descriptor to spare: its soft limit becomes the count it holds.
void exhaustDescriptors(pid_t pid) { setOpenFileLimit(pid, openDescriptors(pid), kLimit); }

// TCP connections opened from this process, from 127.0.0.2, 127.0.0.3, ... Closed on destruction.
class Flood final {
 public:
  Flood() {
    // This process holds every connection: give it room.
    struct rlimit limit {};
    ::getrlimit(RLIMIT_NOFILE, &limit);
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
  ~Flood() { close(); }

  // `perAddress` connections from each of `addresses` source addresses to `target`
  // ("127.0.0.1:PORT"), without waiting for the server to accept them (the kernel completes the
  // handshake into the listen backlog).
  void open(const std::string& target, int addresses, int perAddress) {
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(std::stoi(target.substr(target.rfind(':') + 1))));
    ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    for (int a = 0; a < addresses; ++a) {
      const std::string source = "127.0.0." + std::to_string(2 + a);
      for (int i = 0; i < perAddress; ++i) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        ASSERT_GE(fd, 0) << std::strerror(errno);
        sockaddr_in from{};
        from.sin_family = AF_INET;
        ::inet_pton(AF_INET, source.c_str(), &from.sin_addr);
        ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from), 0)
            << source << ": " << std::strerror(errno);
        const int connected = ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to);
        ASSERT_TRUE(connected == 0 || errno == EINPROGRESS) << std::strerror(errno);
        fds_.push_back(fd);
      }
    }
  }

  size_t size() const { return fds_.size(); }

  void close() {
    for (int fd : fds_) ::close(fd);
    fds_.clear();
  }

 private:
  std::vector<int> fds_;
};

// One blocking connection to `target`, from 127.0.0.1.
int connectTo(const std::string& target) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(std::stoi(target.substr(target.rfind(':') + 1))));
  ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Whether the server closed `fd` within `timeout` (reads until the end of the stream or a reset,
// discarding what the server sent first, such as an Abort message).
bool closedByServerWithin(int fd, Duration timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd readable{.fd = fd, .events = POLLIN, .revents = 0};
    if (::poll(&readable, 1, 100) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
  }
  return false;
}

// The value of the metric sample `sample` ("name{label=\"x\"}") in Prometheus text, or -1.
double metricValue(const std::string& text, const std::string& sample) {
  const size_t at = text.find("\n" + sample + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + sample.size() + 2));
}

std::string httpAddressOf(ProcessHarness& process) {
  const std::regex pattern("http listening on (127\\.0\\.0\\.1:[0-9]+)");
  auto line = process.waitForLine(pattern, kTimeout);
  EXPECT_TRUE(line.ok()) << (line.ok() ? "" : line.error().message);
  if (!line.ok()) return "";
  std::smatch match;
  std::regex_search(line.value(), match, pattern);
  return match[1];
}

// Whether GET `path` on `address` answers 200 within `timeout` (a refused or hanging connection
// is retried).
bool httpAnswers(EventLoop& loop, kj::HttpHeaderTable& table, const std::string& address,
                 const std::string& path, Duration timeout, std::string* body = nullptr) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    std::optional<HttpReply> reply;
    KJ_IF_MAYBE (problem, kj::runCatchingExceptions([&] {
                   auto target = loop.run(loop.io().getNetwork().parseAddress(address));
                   auto client = kj::newHttpClient(loop.timer(), table, *target);
                   kj::HttpHeaders headers(table);
                   auto request =
                       client->request(kj::HttpMethod::GET, kj::StringPtr(path.c_str()), headers);
                   // Bounded: a listener that stopped accepting leaves the request hanging.
                   auto response = loop.run(request.response.exclusiveJoin(
                       loop.timer().afterDelay(3 * kj::SECONDS).then(
                           []() -> kj::HttpClient::Response {
                             KJ_FAIL_REQUIRE("no answer within 3s");
                           })));
                   HttpReply got;
                   got.status = response.statusCode;
                   got.body = loop.run(response.body->readAllText()).cStr();
                   reply = std::move(got);
                 })) {
      last = problem->getDescription().cStr();
    }
    if (reply && reply->status == 200) {
      if (body != nullptr) *body = reply->body;
      return true;
    }
    if (reply) last = "status " + std::to_string(reply->status) + ": " + reply->body;
    loop.run(loop.timer().afterDelay(200 * kj::MILLISECONDS));
  }
  ADD_FAILURE() << "GET " << path << " on " << address << " last: " << last;
  return false;
}

// Whether the binary at `path` was built with UBSan's vptr check (the sanitized debug build).
// Such a process aborts when it runs out of descriptors: the check opens a pipe to look at a type
// it has not seen yet. The product keeps serving; the sanitizer cannot, so the tests that exhaust
// a process's descriptors run binaries built without sanitizers (docs/testing.md).
bool builtWithVptrCheck(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  const std::string needle = "__ubsan_handle_dynamic_type_cache_miss";
  std::string window;
  std::vector<char> chunk(1 << 20);
  while (file.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || file.gcount() > 0) {
    window.append(chunk.data(), static_cast<size_t>(file.gcount()));
    if (window.find(needle) != std::string::npos) return true;
    window.erase(0, window.size() > needle.size() ? window.size() - needle.size() : 0);
  }
  return false;
}

// `binary` as the tests that exhaust a process's descriptors run it: from
// REGENT_UNSANITIZED_BIN_DIR, where a sanitized build puts the same programs built without
// sanitizers (tests/integration/CMakeLists.txt; an unsanitized build's own bin/).
std::string unsanitized(const std::string& binary) {
  return REGENT_UNSANITIZED_BIN_DIR "/" + binary;
}

// Why unsanitized(`binary`) cannot run out of descriptors cleanly, or "" if it can.
std::string unsanitizedMissing(const std::string& binary) {
  const std::string path = unsanitized(binary);
  const std::string remedy =
      ": run `scripts/build.sh descriptor_exhaustion_itest` (a build with REGENT_SANITIZE=ON, "
      "which also builds regent-master, regent-worker and regent-task-shim without sanitizers "
      "for this test)";
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) return path + " does not exist" + remedy;
  if (builtWithVptrCheck(path)) {
    return path + " is built with UBSan's vptr check, which aborts out of descriptors" + remedy;
  }
  return "";
}

#define SKIP_UNLESS_UNSANITIZED(binary)                                           \
  if (const std::string missing = unsanitizedMissing(binary); !missing.empty()) { \
    GTEST_SKIP() << missing;                                                      \
  }

class DescriptorExhaustion : public ::testing::Test {
 protected:
  ~DescriptorExhaustion() noexcept override = default;

  // `binary`: the regent-master to run ("": the sanitized one of REGENT_BIN_DIR).
  void startMasters(size_t count, std::vector<std::string> extraSet = {}, std::string binary = "") {
    auto server = sharedZooKeeperServer();
    ASSERT_OK(server);
    clusterId_ = uniqueClusterId("fds");
    extraSet.push_back("rpc.advertised-address=");  // regentctl dials the bound port.
    cluster_ = std::make_unique<MasterCluster>(
        MasterClusterOptions{.quorum = server.value()->connectString(),
                             .clusterId = clusterId_,
                             .extraSet = std::move(extraSet),
                             .openFileLimit = std::pair<uint64_t, uint64_t>{kLimit, kLimit},
                             .binary = std::move(binary)});
    ASSERT_OK(cluster_->startMasters(count));
    auto serving = cluster_->waitForEvent(
        0, [](const MasterEvent& e) { return e.kind == Kind::kServing; }, kTimeout);
    ASSERT_OK(serving);
    epoch_ = serving.value().epoch;
    ctlArgs_ = {"--zk",         server.value()->connectString(),
                "--cluster-id", clusterId_,
                "--set",        "rpc.call-timeout=3s"};
  }

  // Whether `regentctl jobs list` (an RPC call to the leader) succeeds within `timeout`.
  bool rpcAnswers(Duration timeout) {
    CtlResult last;
    const bool answered = waitUntil(
        [&] {
          std::vector<std::string> args = ctlArgs_;
          args.insert(args.end(), {"--timeout", "5s", "jobs", "list"});
          auto run = runRegentctl(dir_.path(), args, Duration(30000));
          if (!run.ok()) return false;
          last = run.value();
          return last.exit.exited() && last.exit.exitCode == 0;
        },
        timeout, Duration(200));
    if (!answered) ADD_FAILURE() << "regentctl jobs list last said: " << last.output;
    return answered;
  }

  std::string output(size_t slot) { return cluster_->process(slot).output(); }

  bool logged(size_t slot, const std::string& text, Duration timeout) {
    return waitUntil([&] { return contains(output(slot), text); }, timeout, Duration(50));
  }

  TempDir dir_{"regent-fds-itest"};
  std::unique_ptr<MasterCluster> cluster_;
  std::string clusterId_;
  uint64_t epoch_ = 0;
  std::vector<std::string> ctlArgs_;
  EventLoop loop_;
  kj::Own<kj::HttpHeaderTable> table_ = kj::heap<kj::HttpHeaderTable>();
};

// The flood: more connections than the open-file limit, from 23 loopback addresses, each
// under rpc.max-connections-per-peer. With rpc.max-connections fitted to the limit, the surplus is
// refused by the cap (counted) instead of exhausting the descriptors; once the flood closes,
// regentctl is served again.
TEST_F(DescriptorExhaustion, AFloodBeyondTheOpenFileLimitIsRefusedByTheFittedCap) {
  ASSERT_NO_FATAL_FAILURE(startMasters(1));
  const pid_t pid = cluster_->process(0).pid();
  EXPECT_TRUE(logged(0, "open-file limit 256", Duration(0))) << output(0);
  EXPECT_TRUE(std::regex_search(output(0),
                                std::regex("rpc\\.max-connections 1024 lowered to [0-9]+ to fit")))
      << output(0);
  const std::string http = httpAddressOf(cluster_->process(0));
  auto rpc = masterRpcAddress(*cluster_, 0);
  ASSERT_OK(rpc);

  Flood flood;
  flood.open(rpc.value(), 23, 12);  // 276 connections, 12 from each address.
  // The cap refuses the surplus (a warning names it); descriptors never run out.
  EXPECT_TRUE(logged(0, "rpc.max-connections (", kTimeout)) << output(0);
  EXPECT_FALSE(contains(output(0), "cannot accept connections")) << output(0);
  EXPECT_LT(openDescriptors(pid), kLimit);
  flood.close();

  EXPECT_TRUE(rpcAnswers(kTimeout)) << output(0);
  std::string metrics;
  ASSERT_TRUE(httpAnswers(loop_, *table_, http, "/metrics", kTimeout, &metrics)) << output(0);
  EXPECT_GT(metricValue(metrics, "regent_rpc_connections_refused_total{cap=\"total\"}"), 0)
      << metrics;
  EXPECT_EQ(metricValue(metrics, "regent_rpc_accept_failures_total{reason=\"emfile\"}"), 0)
      << metrics;
  EXPECT_EQ(countEvents(cluster_->events(0), Kind::kRevoked), 0u) << output(0);
}

// A master with no descriptor to spare: its RPC and HTTP listeners fail to accept, count and warn,
// keep retrying (summed up while it lasts), and the master keeps leading (its ZooKeeper session
// needs no new descriptor). Once descriptors free up, regentctl and HTTP are served again.
TEST_F(DescriptorExhaustion, AMasterOutOfDescriptorsKeepsLeadingAndServesAgainOnceTheyFree) {
  SKIP_UNLESS_UNSANITIZED("regent-master");
  ASSERT_NO_FATAL_FAILURE(startMasters(1, {}, unsanitized("regent-master")));
  const pid_t pid = cluster_->process(0).pid();
  const std::string http = httpAddressOf(cluster_->process(0));
  auto rpc = masterRpcAddress(*cluster_, 0);
  ASSERT_OK(rpc);
  ASSERT_TRUE(httpAnswers(loop_, *table_, http, "/healthz", kTimeout));

  exhaustDescriptors(pid);
  Flood flood;
  flood.open(rpc.value(), 23, 4);
  flood.open(http, 4, 8);
  EXPECT_TRUE(logged(0, "rpc: cannot accept connections on", kTimeout)) << output(0);
  EXPECT_TRUE(logged(0, "http: cannot accept connections on", kTimeout)) << output(0);
  // Still failing, still retrying: the summary of the failures since the first warning.
  EXPECT_TRUE(logged(0, "more failed accept(s) on", kTimeout)) << output(0);
  // Still the leader: its ZooKeeper session is alive and no term ended.
  const std::string masterId = cluster_->masterId(0);
  CtlResult leader = regentctlChecked(dir_.path(), ctlArgs_, {"leader"});
  EXPECT_TRUE(contains(leader.output, masterId)) << leader.output;
  EXPECT_EQ(countEvents(cluster_->events(0), Kind::kRevoked), 0u) << output(0);

  flood.close();
  setOpenFileLimit(pid, kLimit, kLimit);
  EXPECT_TRUE(rpcAnswers(kTimeout)) << output(0);
  std::string metrics;
  ASSERT_TRUE(httpAnswers(loop_, *table_, http, "/metrics", kTimeout, &metrics)) << output(0);
  EXPECT_TRUE(logged(0, "rpc: accepting connections on", kTimeout)) << output(0);
  EXPECT_GT(metricValue(metrics, "regent_rpc_accept_failures_total{reason=\"emfile\"}"), 0)
      << metrics;
  EXPECT_GT(metricValue(metrics, "regent_http_accept_failures_total{reason=\"emfile\"}"), 0)
      << metrics;
  EXPECT_EQ(countEvents(cluster_->events(0), Kind::kRevoked), 0u) << output(0);
}

// A leader whose RPC listener keeps failing for rpc.listener-failure-handover hands over to the
// standby, saying why, and stays up as a contender.
TEST_F(DescriptorExhaustion, ALeaderWhoseListenerKeepsFailingHandsOverToTheStandby) {
  SKIP_UNLESS_UNSANITIZED("regent-master");
  ASSERT_NO_FATAL_FAILURE(
      startMasters(2, {"rpc.listener-failure-handover=2s"}, unsanitized("regent-master")));
  ASSERT_EQ(cluster_->currentLeader(), std::optional<size_t>(0));
  const pid_t pid = cluster_->process(0).pid();
  auto rpc = masterRpcAddress(*cluster_, 0);
  ASSERT_OK(rpc);

  exhaustDescriptors(pid);
  Flood flood;
  flood.open(rpc.value(), 1, 16);
  auto granted = cluster_->waitForGrant(epoch_ + 1, kTimeout);
  ASSERT_OK(granted);
  EXPECT_EQ(granted.value(), 1u);
  EXPECT_TRUE(contains(output(0), "(rpc.listener-failure-handover)")) << output(0);
  auto revoked = cluster_->waitForEvent(
      0, [&](const MasterEvent& e) { return e.kind == Kind::kRevoked && e.epoch == epoch_; },
      kTimeout);
  ASSERT_OK(revoked);
  EXPECT_EQ(revoked.value().reason, "handed over");
  EXPECT_TRUE(cluster_->process(0).running());

  flood.close();
  setOpenFileLimit(pid, kLimit, kLimit);
  // Back in line behind the new leader.
  EXPECT_TRUE(
      waitUntil([&] { return countEvents(cluster_->events(0), Kind::kContending) >= 2; }, kTimeout))
      << output(0);
}

// Connections over which nothing crosses are closed after rpc.idle-timeout.
TEST_F(DescriptorExhaustion, AnIdleConnectionIsClosedAfterTheIdleTimeout) {
  ASSERT_NO_FATAL_FAILURE(startMasters(1, {"rpc.idle-timeout=1s", "heartbeat.interval=200ms"}));
  auto rpc = masterRpcAddress(*cluster_, 0);
  ASSERT_OK(rpc);
  const int fd = connectTo(rpc.value());
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(closedByServerWithin(fd, kTimeout));
  ::close(fd);
  EXPECT_TRUE(logged(0, "nothing sent or received for 1s (rpc.idle-timeout)", kTimeout))
      << output(0);
  EXPECT_TRUE(rpcAnswers(kTimeout));  // A connection in use is not idle.
}

// A message whose first bytes arrived and whose rest trickles in too slowly is closed after
// rpc.message-timeout, so it cannot pin the memory its frame announced.
TEST_F(DescriptorExhaustion, AStalledHalfMessageIsClosedAfterTheMessageTimeout) {
  ASSERT_NO_FATAL_FAILURE(startMasters(1, {"rpc.message-timeout=1s", "rpc.idle-timeout=1m"}));
  auto rpc = masterRpcAddress(*cluster_, 0);
  ASSERT_OK(rpc);
  const int fd = connectTo(rpc.value());
  ASSERT_GE(fd, 0);
  // One segment of 2M words (16 MiB, within rpc.max-message-size), then 8 bytes of it.
  const uint32_t frame[4] = {0, 2u * 1024 * 1024, 0, 0};
  ASSERT_EQ(::send(fd, frame, sizeof frame, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof frame));
  // One more byte every 200 ms (so the connection is never idle) until the server closes it.
  bool closed = false;
  for (int i = 0; i < 300 && !closed; ++i) {
    closed = closedByServerWithin(fd, Duration(200));
    if (!closed && ::send(fd, "x", 1, MSG_NOSIGNAL) != 1) closed = true;
  }
  ::close(fd);
  EXPECT_TRUE(closed);
  EXPECT_TRUE(logged(0, "(rpc.message-timeout)", kTimeout)) << output(0);
}

// A worker's HTTP out of descriptors counts, warns and serves again once they free up; the worker
// raised its soft limit at start and fitted http.max-connections into it.
TEST_F(DescriptorExhaustion, AWorkerOutOfDescriptorsServesHttpAgainOnceTheyFree) {
  SKIP_UNLESS_UNSANITIZED("regent-worker");
  auto server = sharedZooKeeperServer();  // Connected: no reconnect needs a descriptor.
  ASSERT_OK(server);
  ProcessOptions options;
  options.argv = {unsanitized("regent-worker")};
  for (const std::string& set :
       {"worker.data-dir=" + dir_.path() + "/worker", std::string("worker.http.bind=127.0.0.1:0"),
        "ha.zookeeper.quorum=" + server.value()->connectString(),
        "cluster-id=" + uniqueClusterId("fds-worker")}) {
    options.argv.push_back("--set");
    options.argv.push_back(set);
  }
  options.outputPath = dir_.path() + "/worker.log";
  options.openFileLimit = std::pair<uint64_t, uint64_t>{64, kLimit};
  auto worker = ProcessHarness::start(std::move(options));
  ASSERT_OK(worker);
  ProcessHarness& process = *worker.value();
  const std::string http = httpAddressOf(process);
  ASSERT_TRUE(httpAnswers(loop_, *table_, http, "/healthz", kTimeout));
  EXPECT_EQ(softOpenFileLimit(process.pid()), kLimit);
  EXPECT_TRUE(contains(process.output(), "open-file limit 256 (raised from 64, hard 256)"))
      << process.output();

  exhaustDescriptors(process.pid());
  Flood flood;
  flood.open(http, 4, 8);
  EXPECT_TRUE(waitUntil([&] { return contains(process.output(), "http: cannot accept"); }, kTimeout,
                        Duration(50)))
      << process.output();
  flood.close();
  setOpenFileLimit(process.pid(), kLimit, kLimit);
  std::string metrics;
  ASSERT_TRUE(httpAnswers(loop_, *table_, http, "/metrics", kTimeout, &metrics))
      << process.output();
  EXPECT_GT(metricValue(metrics, "regent_http_accept_failures_total{reason=\"emfile\"}"), 0)
      << metrics;
}

}  // namespace
}  // namespace regent::testing

// The WorkerProvider contract (services/resourcemanager/worker_provider.h) for the docker
// provider, against a real Docker daemon (tests/fixtures/docker_daemon.h: the machine's dockerd
// in a network namespace of its own) and stand-in workers: an image of this machine's sh, sleep,
// cat and ls with a script as the worker. The same cases as the process provider's contract
// (worker_provider_contract_test.cc): a started worker is listed and gets its configuration by
// file, none of it in its environment or command line; an ended worker is reported once, with
// why, and no longer listed; release() ends a worker that does not stop by itself and forgets it;
// a second provider (a new leader's) lists and releases the workers the first one started;
// destroying a provider leaves its workers running. And the docker provider's own bad input: a
// missing image, network, worker binary or socket, each an error naming its option.
//
// Without a daemon (not root, docker.io not installed, dockerd not starting) the cases that need
// one say "skipped: no docker daemon (<why>)".
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "common/event_sink.h"
#include "services/providers/docker_worker_provider.h"
#include "tests/fixtures/docker_daemon.h"
#include "tests/fixtures/temp_dir_test_util.h"

namespace regent::providers {
namespace {

using regent::testing::DockerDaemon;
using regent::testing::TempDir;

constexpr Duration kWait{30000};
constexpr const char* kImage = "regent-provider-standin:test";

// The stand-in worker: says where its configuration is, then sleeps; it ignores SIGTERM (so a
// release must end it), as a worker busy stopping would.
constexpr const char* kSleepingWorker =
    "#!/bin/sh\n"
    "trap '' TERM\n"
    "echo \"stand-in worker: $*\"\n"
    "exec sleep 600\n";
// A worker that fails at once, saying why on stderr.
constexpr const char* kFailingWorker =
    "#!/bin/sh\n"
    "echo 'regent-worker: cannot reach ZooKeeper at zk-1:2181' >&2\n"
    "exit 3\n";

class RecordingListener final : public resourcemanager::WorkerProviderListener {
 public:
  void workerEnded(const std::string& id, const std::string& reason) override {
    ended.push_back(id + ": " + reason);
  }
  std::vector<std::string> ended;
};

class DockerProviderContractTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = DockerDaemon::start(&whyNot_).release();
    if (daemon_ != nullptr) {
      const std::string failed =
          daemon_->importImage(kImage, {{"/usr/local/bin/regent-worker", kSleepingWorker},
                                        {"/usr/local/bin/failing-worker", kFailingWorker}});
      if (!failed.empty()) {
        whyNot_ = failed;
        delete daemon_;
        daemon_ = nullptr;
      }
    }
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }

  void SetUp() override {
    if (daemon_ == nullptr) {
      // Where the daemon must run (REGENT_TEST_REQUIRE_DOCKER=1), its absence fails the suite.
      if (testing::dockerRequired()) FAIL() << "no docker daemon: " << whyNot_;
      GTEST_SKIP() << "skipped: no docker daemon (" << whyNot_ << ")";
    }
    secret_ = dir_.path() + "/worker-secret";
    std::ofstream(secret_) << "the-worker-secret\n";
  }

  void TearDown() override {
    if (daemon_ == nullptr) return;
    // No container of the test cluster left, whatever the test did.
    std::string ids;
    daemon_->docker({"ps", "-a", "-q", "--filter", "label=regent.cluster=test"}, &ids);
    std::istringstream each(ids);
    std::string id;
    while (each >> id) daemon_->docker({"rm", "-f", id});
  }

  DockerProviderOptions options(const std::string& binary = "regent-worker") {
    DockerProviderOptions options;
    options.socket = daemon_->socket();
    options.image = kImage;
    options.network = "none";
    options.workerCommand = {binary};
    options.clusterId = "test";
    options.slotsPerWorker = 2;
    options.slotProfile = resourcemanager::Profile{500, 64 * 1024 * 1024};
    options.settings = {{"cluster-id", "test"},
                        {"worker.slots", "2"},
                        {"rpc.credential.role", "worker"},
                        {"rpc.credential.secret-file", secret_}};
    options.pollInterval = Duration(200);
    return options;
  }

  kj::Own<DockerWorkerProvider> provider(DockerProviderOptions options) {
    auto created = DockerWorkerProvider::create(loop_, events_, std::move(options));
    if (!created.ok()) ADD_FAILURE() << created.error().message;
    return kj::mv(created).value();
  }
  kj::Own<DockerWorkerProvider> provider() { return provider(options()); }

  std::vector<std::string> list(DockerWorkerProvider& provider) {
    auto listed = loop_.run(provider.list());
    EXPECT_TRUE(listed.ok()) << (listed.ok() ? "" : listed.error().message);
    return listed.ok() ? listed.value() : std::vector<std::string>{};
  }

  // `docker <args>`, its output; a failure fails the test.
  std::string docker(const std::vector<std::string>& args) {
    std::string out;
    EXPECT_EQ(daemon_->docker(args, &out), 0) << out;
    return out;
  }

  // The test cluster's containers, running or not.
  std::string containers() {
    return docker({"ps", "-a", "-q", "--filter", "label=regent.cluster=test"});
  }

  bool runUntil(const std::function<bool()>& done) {
    const auto until = std::chrono::steady_clock::now() + kWait;
    while (!done() && std::chrono::steady_clock::now() < until) {
      loop_.run(loop_.timer().afterDelay(50 * kj::MILLISECONDS));
    }
    return done();
  }

  static DockerDaemon* daemon_;
  static std::string whyNot_;
  TempDir dir_{"regent-docker-provider"};
  std::string secret_;
  EventLoop loop_;
  NullEventSink events_;
};

DockerDaemon* DockerProviderContractTest::daemon_ = nullptr;
std::string DockerProviderContractTest::whyNot_;

TEST_F(DockerProviderContractTest, AStartedWorkerIsListedLabelledAndGetsItsConfigurationAsFiles) {
  auto started = provider();
  const Status status = loop_.run(started->start("e7-1", 7));
  ASSERT_TRUE(status.ok()) << status.error().message;
  EXPECT_EQ(list(*started), (std::vector<std::string>{"e7-1"}));
  const std::string name = "regent-test-e7-1";
  EXPECT_EQ(docker({"inspect", "-f", "{{.State.Status}}", name}), "running");
  EXPECT_EQ(docker({"inspect", "-f",
                    "{{index .Config.Labels \"regent.cluster\"}} "
                    "{{index .Config.Labels \"regent.worker-id\"}} "
                    "{{index .Config.Labels \"regent.epoch\"}}",
                    name}),
            "test e7-1 7");
  // Its command names its configuration file, nothing else; its environment holds no option
  // and no secret; no path of the daemon's host is mounted into it.
  EXPECT_EQ(docker({"inspect", "-f", "{{json .Config.Entrypoint}}", name}),
            "[\"regent-worker\",\"--config\",\"/etc/regent-worker/worker.yaml\"]");
  const std::string env = docker({"inspect", "-f", "{{json .Config.Env}}", name});
  EXPECT_EQ(env.find("REGENT_"), std::string::npos) << env;
  EXPECT_EQ(env.find("the-worker-secret"), std::string::npos) << env;
  EXPECT_EQ(docker({"inspect", "-f", "{{len .Mounts}}", name}), "0");
  // Confined: every capability dropped but a worker's own, no new privileges, an init.
  EXPECT_EQ(docker({"inspect", "-f", "{{json .HostConfig.CapDrop}}", name}), "[\"ALL\"]");
  EXPECT_EQ(docker({"inspect", "-f", "{{json .HostConfig.SecurityOpt}}", name}),
            "[\"no-new-privileges:true\"]");
  EXPECT_EQ(docker({"inspect", "-f", "{{.HostConfig.Init}}", name}), "true");
  // Limited to its slots (2 x 64MiB, and 256MiB for the worker; 2 x half a core).
  EXPECT_EQ(docker({"inspect", "-f", "{{.HostConfig.Memory}}", name}),
            std::to_string((2 * 64 + 256) * 1024 * 1024));
  EXPECT_EQ(docker({"inspect", "-f", "{{.HostConfig.NanoCpus}}", name}), "1000000000");
  // Its configuration and the worker secret are files only root reads; the configuration names
  // the copy of the secret, not the master's path.
  const std::string yaml = docker({"exec", name, "cat", "/etc/regent-worker/worker.yaml"});
  EXPECT_NE(yaml.find("worker.provider-id: \"docker:e7-1\""), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("worker.slots: \"2\""), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("rpc.credential.secret-file: "
                      "\"/etc/regent-worker/rpc.credential.secret-file\""),
            std::string::npos)
      << yaml;
  EXPECT_EQ(yaml.find(secret_), std::string::npos) << yaml;
  EXPECT_EQ(docker({"exec", name, "cat", "/etc/regent-worker/rpc.credential.secret-file"}),
            "the-worker-secret");
  const std::string modes = docker({"exec", name, "ls", "-ln", "/etc/regent-worker"});
  EXPECT_NE(modes.find("-rw------- 1 0 0"), std::string::npos) << modes;
  EXPECT_EQ(modes.find("-rw-r--r--"), std::string::npos) << modes;
  // On the none network a container has no name to advertise: the provider cannot vouch.
  EXPECT_EQ(started->vouches("e7-1", name, 1), resourcemanager::Vouch::kUnknown);
}

TEST_F(DockerProviderContractTest, AWorkerThatEndsIsReportedOnceWithWhyAndRemoved) {
  auto started = provider(options("/usr/local/bin/failing-worker"));
  RecordingListener listener;
  started->setListener(&listener);
  ASSERT_TRUE(loop_.run(started->start("e1-1", 1)).ok());
  ASSERT_TRUE(runUntil([&] { return !listener.ended.empty(); }));
  // A few more polls: still once.
  loop_.run(loop_.timer().afterDelay(600 * kj::MILLISECONDS));
  ASSERT_EQ(listener.ended.size(), 1u);
  EXPECT_EQ(listener.ended[0].rfind("e1-1: worker e1-1 (container ", 0), 0u) << listener.ended[0];
  EXPECT_NE(listener.ended[0].find(
                "exited with status 3: regent-worker: cannot reach ZooKeeper at zk-1:2181"),
            std::string::npos)
      << listener.ended[0];
  EXPECT_TRUE(list(*started).empty());
  EXPECT_TRUE(runUntil([&] { return containers().empty(); })) << "its container stays";
  started->setListener(nullptr);
}

TEST_F(DockerProviderContractTest, AWorkerKilledOutsideIsReportedAndTheOthersStayListed) {
  auto started = provider();
  RecordingListener listener;
  started->setListener(&listener);
  ASSERT_TRUE(loop_.run(started->start("e1-1", 1)).ok());
  ASSERT_TRUE(loop_.run(started->start("e1-2", 1)).ok());
  docker({"kill", "regent-test-e1-1"});
  ASSERT_TRUE(runUntil([&] { return !listener.ended.empty(); }));
  ASSERT_EQ(listener.ended.size(), 1u);
  EXPECT_EQ(listener.ended[0].rfind("e1-1: ", 0), 0u) << listener.ended[0];
  EXPECT_NE(listener.ended[0].find("exited with status 137"), std::string::npos)
      << listener.ended[0];
  EXPECT_EQ(list(*started), (std::vector<std::string>{"e1-2"}));
  started->setListener(nullptr);
}

TEST_F(DockerProviderContractTest, ReleaseEndsAWorkerThatDoesNotStopAndRemovesItsContainer) {
  auto started = provider();
  RecordingListener listener;
  started->setListener(&listener);
  ASSERT_TRUE(loop_.run(started->start("e1-1", 1)).ok());
  // The stand-in ignores SIGTERM: the grace passes, then the daemon's SIGKILL.
  const Status released = loop_.run(started->release("e1-1", Duration(1000)));
  EXPECT_TRUE(released.ok()) << (released.ok() ? "" : released.error().message);
  EXPECT_EQ(containers(), "");
  EXPECT_TRUE(list(*started).empty());
  loop_.run(loop_.timer().afterDelay(500 * kj::MILLISECONDS));
  EXPECT_TRUE(listener.ended.empty()) << "a released worker is not reported as ended";
  started->setListener(nullptr);
}

TEST_F(DockerProviderContractTest, ANewLeadersProviderListsAndReleasesWhatTheFirstStarted) {
  {
    auto first = provider();
    ASSERT_TRUE(loop_.run(first->start("e1-1", 1)).ok());
    ASSERT_TRUE(loop_.run(first->start("e1-2", 1)).ok());
    // Destroying the provider (its master stops) leaves the workers running.
  }
  EXPECT_EQ(docker({"inspect", "-f", "{{.State.Status}}", "regent-test-e1-1"}), "running");
  // One ends while no master follows it: the next list removes it and does not count it.
  docker({"kill", "regent-test-e1-2"});
  auto second = provider();
  EXPECT_EQ(list(*second), (std::vector<std::string>{"e1-1"}));
  EXPECT_TRUE(runUntil([&] {
    return docker({"ps", "-a", "-q", "--filter", "name=regent-test-e1-2"}).empty();
  })) << "the ended worker's container stays";
  // Ended while the second provider follows it: reported by its poll.
  RecordingListener listener;
  second->setListener(&listener);
  ASSERT_TRUE(loop_.run(second->start("e2-1", 2)).ok());
  docker({"kill", "regent-test-e2-1"});
  ASSERT_TRUE(runUntil([&] { return !listener.ended.empty(); }));
  EXPECT_EQ(listener.ended[0].rfind("e2-1: ", 0), 0u) << listener.ended[0];
  second->setListener(nullptr);
  // And it releases the first one's worker.
  EXPECT_TRUE(loop_.run(second->release("e1-1", Duration(200))).ok());
  EXPECT_EQ(containers(), "");
}

TEST_F(DockerProviderContractTest, AMissingImageNetworkOrBinaryFailsTheStartNamingIt) {
  auto options = this->options();
  options.image = "regent-no-such-image:1";
  auto noImage = provider(options);
  Status started = loop_.run(noImage->start("e1-1", 1));
  ASSERT_FALSE(started.ok());
  EXPECT_NE(started.error().message.find(
                "image regent-no-such-image:1 not found (resourcemanager.docker.image)"),
            std::string::npos)
      << started.error().message;

  options = this->options();
  options.network = "regent-no-such-network";
  auto noNetwork = provider(options);
  started = loop_.run(noNetwork->start("e1-2", 1));
  ASSERT_FALSE(started.ok());
  EXPECT_NE(started.error().message.find(
                "network regent-no-such-network not found (resourcemanager.docker.network)"),
            std::string::npos)
      << started.error().message;

  // The daemon starts the container (its init runs), the worker binary is not there: the
  // worker ends at once, saying so.
  auto noBinary = provider(this->options("/no/such/regent-worker"));
  RecordingListener listener;
  noBinary->setListener(&listener);
  started = loop_.run(noBinary->start("e1-3", 1));
  ASSERT_TRUE(started.ok()) << started.error().message;
  ASSERT_TRUE(runUntil([&] { return !listener.ended.empty(); }));
  EXPECT_NE(listener.ended[0].find("exited with status 127"), std::string::npos)
      << listener.ended[0];
  EXPECT_NE(listener.ended[0].find("/no/such/regent-worker"), std::string::npos)
      << listener.ended[0];
  noBinary->setListener(nullptr);
  EXPECT_TRUE(runUntil([&] { return containers().empty(); }));
  // Nothing is left behind by a start that failed.
  EXPECT_EQ(containers(), "");
  EXPECT_TRUE(list(*noBinary).empty());
}

TEST_F(DockerProviderContractTest, AnIdThatIsNoNamePartIsRefusedAndNothingIsCreated) {
  auto started = provider();
  for (const std::string& id :
       {std::string(".."), std::string("a/b"), std::string("a b"), std::string("")}) {
    EXPECT_FALSE(loop_.run(started->start(id, 1)).ok()) << id;
    EXPECT_FALSE(loop_.run(started->release(id, Duration(10))).ok()) << id;
  }
  EXPECT_EQ(containers(), "");
}

// Needs no daemon: what create() checks, and a socket nobody answers on.
TEST(DockerProviderOptionsTest, AMissingSocketOrImageIsRefusedNamingTheOption) {
  TempDir dir("regent-docker-options");
  EventLoop loop;
  NullEventSink events;
  DockerProviderOptions options;
  options.image = "regent:latest";
  options.clusterId = "test";
  options.socket = dir.path() + "/no-such.sock";
  auto missing = DockerWorkerProvider::create(loop, events, options);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("resourcemanager.docker.socket: " + options.socket),
            std::string::npos)
      << missing.error().message;
  options.socket = dir.path();  // A directory.
  auto notSocket = DockerWorkerProvider::create(loop, events, options);
  ASSERT_FALSE(notSocket.ok());
  EXPECT_NE(notSocket.error().message.find("is not a unix socket"), std::string::npos);
  options.image = "";
  auto noImage = DockerWorkerProvider::create(loop, events, options);
  ASSERT_FALSE(noImage.ok());
  EXPECT_NE(noImage.error().message.find("resourcemanager.docker.image"), std::string::npos);

  // A socket file nobody listens on any more (a daemon that stopped): the start fails naming
  // the socket and its option.
  const std::string stale = dir.path() + "/stale.sock";
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof address.sun_path, "%s", stale.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ::close(fd);
  options.image = "regent:latest";
  options.socket = stale;
  auto provider = DockerWorkerProvider::create(loop, events, options);
  ASSERT_TRUE(provider.ok()) << provider.error().message;
  const Status started = loop.run(provider.value()->start("e1-1", 1));
  ASSERT_FALSE(started.ok());
  EXPECT_NE(started.error().message.find("cannot reach the Docker daemon at " + stale +
                                         " (resourcemanager.docker.socket)"),
            std::string::npos)
      << started.error().message;
  auto listed = loop.run(provider.value()->list());
  EXPECT_FALSE(listed.ok());
}

TEST(DockerArchiveTest, TarArchiveHoldsEachFileWithItsModeUnderItsDirectories) {
  TempDir dir("regent-docker-tar");
  const auto archived = tarArchive({{"/etc/regent-worker/worker.yaml", 0600, "a: \"1\"\n"},
                                     {"/etc/regent-worker/ca.pem", 0644, std::string(700, 'x')}});
  ASSERT_TRUE(archived.ok()) << archived.error().message;
  const std::string& tar = archived.value();
  EXPECT_EQ(tar.size() % 512, 0u);
  std::ofstream(dir.path() + "/a.tar", std::ios::binary) << tar;
  const std::string list = dir.path() + "/list";
  ASSERT_EQ(std::system(("tar -tvf " + dir.path() + "/a.tar > " + list).c_str()), 0);
  // Each entry's line of `tar -tv`: its mode and owner, then (after the size and date) its name.
  std::ifstream in(list);
  std::map<std::string, std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines[line.substr(line.rfind(' ') + 1)] = line;
  }
  ASSERT_EQ(lines.size(), 4u);  // etc/, etc/regent-worker/ and the two files
  EXPECT_EQ(lines["etc/"].rfind("drwxr-xr-x root/root ", 0), 0u) << lines["etc/"];
  EXPECT_EQ(lines["etc/regent-worker/"].rfind("drwxr-xr-x root/root ", 0), 0u);
  EXPECT_EQ(lines["etc/regent-worker/worker.yaml"].rfind("-rw------- root/root ", 0), 0u)
      << lines["etc/regent-worker/worker.yaml"];
  EXPECT_EQ(lines["etc/regent-worker/ca.pem"].rfind("-rw-r--r-- root/root ", 0), 0u)
      << lines["etc/regent-worker/ca.pem"];
  EXPECT_NE(lines["etc/regent-worker/ca.pem"].find(" 700 "), std::string::npos);
  ASSERT_EQ(std::system(("mkdir -p " + dir.path() + "/x && tar -xf " + dir.path() + "/a.tar -C " +
                         dir.path() + "/x")
                            .c_str()),
            0);
  std::ifstream yaml(dir.path() + "/x/etc/regent-worker/worker.yaml");
  std::string line;
  std::getline(yaml, line);
  EXPECT_EQ(line, "a: \"1\"");
}

TEST(DockerArchiveTest, APathTooLongForAUstarNameIsAnErrorNotTruncated) {
  const auto archived = tarArchive({{"/" + std::string(120, 'a'), 0600, "x"}});
  ASSERT_FALSE(archived.ok());
  EXPECT_NE(archived.error().message.find("at most 99 characters"), std::string::npos);
  EXPECT_FALSE(tarArchive({{"relative/path", 0600, "x"}}).ok());
}

TEST(DockerArchiveTest, ALogStreamIsDemultiplexed) {
  std::string stream;
  auto frame = [&](char type, const std::string& text) {
    stream += type;
    stream += std::string(3, '\0');
    stream += static_cast<char>((text.size() >> 24) & 0xff);
    stream += static_cast<char>((text.size() >> 16) & 0xff);
    stream += static_cast<char>((text.size() >> 8) & 0xff);
    stream += static_cast<char>(text.size() & 0xff);
    stream += text;
  };
  frame(1, "out line\n");
  frame(2, "err line\n");
  EXPECT_EQ(demultiplexedLog(stream), "out line\nerr line\n");
  EXPECT_EQ(demultiplexedLog("plain text\n"), "plain text\n");
}

}  // namespace
}  // namespace regent::providers

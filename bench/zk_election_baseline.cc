// zk-election-baseline: a bare ZooKeeper leader-election recipe (ephemeral sequential node, the
// lowest leads, each contender watches only its predecessor), the floor bench_failover compares
// regent-master's crash failover against. Single-threaded C client driven with poll().
//
//   zk-election-baseline --zk HOST:PORT --path /election [--session-timeout-ms 2000]
//
// Prints one line per event on stdout (line-buffered):
//   contending node=<name> pid=<pid>
//   granted mono_us=<steady_clock µs> wall_ms=<unix ms> node=<name>
// and exits non-zero on a fatal ZooKeeper error or session expiry. SIGTERM closes the session
// (its node goes at once) and exits 0.
#include <poll.h>
#include <sys/signalfd.h>
#include <unistd.h>
#include <zookeeper/zookeeper.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

int64_t monoMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t wallMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

[[noreturn]] void fail(const std::string& what, int rc) {
  std::printf("error %s: %s\n", what.c_str(), zerror(rc));
  std::exit(1);
}

// One contender. Every callback runs inside zookeeper_process() on the only thread.
class Contender final {
 public:
  explicit Contender(std::string path) : path_(std::move(path)) {}

  void connect(const std::string& quorum, int sessionTimeoutMs) {
    handle_ =
        zookeeper_init(quorum.c_str(), &Contender::onWatch, sessionTimeoutMs, nullptr, this, 0);
    if (handle_ == nullptr) {
      std::printf("error zookeeper_init failed\n");
      std::exit(1);
    }
  }

  // Drives the handle until SIGTERM or a fatal error ends the process.
  [[noreturn]] void run() {
    sigset_t terminate;
    sigemptyset(&terminate);
    sigaddset(&terminate, SIGTERM);
    sigprocmask(SIG_BLOCK, &terminate, nullptr);
    const int signals = signalfd(-1, &terminate, SFD_CLOEXEC);
    for (;;) {
      int fd = -1;
      int interest = 0;
      timeval tv{};
      const int rc = zookeeper_interest(handle_, &fd, &interest, &tv);
      if (rc != ZOK && rc != ZCONNECTIONLOSS) fail("zookeeper_interest", rc);
      // Round up so a due timer is not polled for in a busy loop.
      const long long waitMs = tv.tv_sec * 1000LL + (tv.tv_usec + 999) / 1000;
      pollfd p[2] = {{signals, POLLIN, 0}, {fd, 0, 0}};
      if (interest & ZOOKEEPER_READ) p[1].events |= POLLIN;
      if (interest & ZOOKEEPER_WRITE) p[1].events |= POLLOUT;
      ::poll(p, fd >= 0 ? 2 : 1, static_cast<int>(waitMs));
      if (p[0].revents & POLLIN) {
        std::printf("closing\n");
        zookeeper_close(handle_);
        std::exit(0);
      }
      int events = 0;
      if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) events |= ZOOKEEPER_READ;
      if (p[1].revents & POLLOUT) events |= ZOOKEEPER_WRITE;
      zookeeper_process(handle_, events);
    }
  }

 private:
  static void onWatch(zhandle_t*, int type, int state, const char* path, void* context) {
    auto* self = static_cast<Contender*>(context);
    if (type == ZOO_SESSION_EVENT) {
      if (state == ZOO_EXPIRED_SESSION_STATE) {
        std::printf("session expired\n");
        std::exit(3);
      }
      if (state == ZOO_CONNECTED_STATE && !self->started_) {
        self->started_ = true;
        self->contend();
      }
      return;
    }
    if (type == ZOO_DELETED_EVENT && path != nullptr && self->predecessor_ == path) {
      self->checkChildren();
    }
  }

  // Creates the election path's missing ancestors and then the contender's node. Requests of one
  // session are applied in order, so they can all be sent at once.
  void contend() {
    for (size_t slash = path_.find('/', 1);; slash = path_.find('/', slash + 1)) {
      const std::string prefix = path_.substr(0, slash);
      const int rc = zoo_acreate(handle_, prefix.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0,
                                 &Contender::onParentCreated, this);
      if (rc != ZOK) fail("create " + prefix, rc);
      if (slash == std::string::npos) break;
    }
    const std::string prefix = path_ + "/n-";
    const int rc = zoo_acreate(handle_, prefix.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE,
                               ZOO_EPHEMERAL_SEQUENTIAL, &Contender::onNodeCreated, this);
    if (rc != ZOK) fail("create " + prefix, rc);
  }

  static void onParentCreated(int rc, const char*, const void*) {
    if (rc != ZOK && rc != ZNODEEXISTS) fail("create parent", rc);
  }

  static void onNodeCreated(int rc, const char* created, const void* context) {
    if (rc != ZOK) fail("create node", rc);
    auto* self = static_cast<Contender*>(const_cast<void*>(context));
    const std::string full(created);
    self->node_ = full.substr(full.rfind('/') + 1);
    std::printf("contending node=%s pid=%d\n", self->node_.c_str(), static_cast<int>(getpid()));
    self->checkChildren();
  }

  void checkChildren() {
    const int rc = zoo_aget_children(handle_, path_.c_str(), 0, &Contender::onChildren, this);
    if (rc != ZOK) fail("get children", rc);
  }

  static void onChildren(int rc, const String_vector* strings, const void* context) {
    if (rc != ZOK) fail("get children", rc);
    auto* self = static_cast<Contender*>(const_cast<void*>(context));
    std::vector<std::string> names(strings->data, strings->data + strings->count);
    // Every node is "n-" + a 10-digit sequence number, so names sort in sequence order.
    std::sort(names.begin(), names.end());
    const auto mine = std::find(names.begin(), names.end(), self->node_);
    if (mine == names.end()) {
      std::printf("error own node %s is gone\n", self->node_.c_str());
      std::exit(1);
    }
    if (mine == names.begin()) {
      std::printf("granted mono_us=%lld wall_ms=%lld node=%s\n",
                  static_cast<long long>(monoMicros()), static_cast<long long>(wallMillis()),
                  self->node_.c_str());
      return;
    }
    self->predecessor_ = self->path_ + "/" + *(mine - 1);
    const int arc = zoo_aexists(self->handle_, self->predecessor_.c_str(), 1,
                                &Contender::onPredecessorExists, self);
    if (arc != ZOK) fail("exists", arc);
  }

  static void onPredecessorExists(int rc, const Stat*, const void* context) {
    auto* self = static_cast<Contender*>(const_cast<void*>(context));
    if (rc == ZNONODE) {
      self->checkChildren();  // Gone between listing and watching.
    } else if (rc != ZOK) {
      fail("exists", rc);
    }
  }

  std::string path_;
  zhandle_t* handle_ = nullptr;
  bool started_ = false;
  std::string node_;
  std::string predecessor_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"A bare ZooKeeper leader-election recipe (the baseline of bench_failover)."};
  std::string quorum;
  std::string path;
  int sessionTimeoutMs = 2000;
  app.add_option("--zk", quorum, "ZooKeeper connect string")->required();
  app.add_option("--path", path, "election path; contenders' nodes are created under it")
      ->required()
      ->check([](const std::string& p) {
        return p.size() > 1 && p.front() == '/' && p.back() != '/' ? "" : "an absolute path";
      });
  app.add_option("--session-timeout-ms", sessionTimeoutMs, "requested session timeout")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  zoo_set_debug_level(ZOO_LOG_LEVEL_WARN);
  Contender contender(path);
  contender.connect(quorum, sessionTimeoutMs);
  contender.run();
}

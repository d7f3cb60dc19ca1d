// The store benchmark (scripts/bench.sh store): for each backend, put N JobGraphs of about 2 KiB
// through the JobGraphStore with a bounded number in flight, then recover them all through a
// fresh store of a new term; for ZooKeeper also the floor: the same nodes read with the plain C
// client and every request in flight at once. Prints its numbers; never asserts timings.
#include <capnp/message.h>
#include <capnp/serialize-packed.h>
#include <kj/debug.h>
#include <kj/io.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <zookeeper/zookeeper.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "common/event_loop.h"
#include "common/ids.h"
#include "common/result.h"
#include "common/time.h"
#include "ha/zookeeper_client.h"
#include "rpc/schema/jobs.capnp.h"
#include "store/job_graph_store.h"
#include "store/rocksdb_record_store.h"
#include "store/store_services.h"
#include "store/zookeeper_record_store.h"
#include "tests/fixtures/job_graph_test_util.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/fixtures/zookeeper_server.h"

namespace regent::bench {
namespace {

using store::JobGraphStore;
using store::RecordFamily;
using store::StoreError;
using store::StoreResult;
using testing::TempDir;
using testing::ZooKeeperServer;
using testing::ZooKeeperServerOptions;

// Generous bounds: exceeding one means something failed, not that something was slow.
constexpr Duration kConnectTimeout{30000};
constexpr Duration kPhaseTimeout{300000};
constexpr size_t kRetain = 1000;  // store.job-results.retain (unused by JobGraphs).

struct BenchOptions {
  size_t count = 10000;
  int trials = 3;
  int warmups = 1;  // Trials run first and left out of the summary.
  std::string backend = "both";
  size_t putsInFlight = 256;
  size_t recordBytes = 2048;  // Target packed size of one JobGraph.
  size_t readsInFlight = store::ZooKeeperRecordStoreOptions{}.maxReadsInFlight;
};

double millisSince(MonoTime start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// CPU time of the calling thread (the loop thread, which also runs the raw reader), in ms.
double threadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1000.0 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// The pid of the process whose command line mentions `needle` (the ZooKeeper server's
// temporary directory), or 0.
int findProcess(const std::string& needle) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    std::ifstream in(entry.path() / "cmdline", std::ios::binary);
    const std::string cmdline((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
    if (cmdline.find(needle) != std::string::npos) return std::stoi(name);
  }
  return 0;
}

// CPU time (user + system, all threads) of process `pid` in ms, at the kernel's tick resolution;
// 0 when unknown.
double processCpuMs(int pid) {
  if (pid <= 0) return 0;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  double ticks = 0;
  // Fields after the command: state(3) ... utime(14), stime(15).
  for (int index = 3; index <= 15 && fields >> field; ++index) {
    if (index == 14 || index == 15) ticks += std::stod(field);
  }
  return ticks * 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// ---- the JobGraphs ---------------------------------------------------------------------------

std::string randomText(std::mt19937_64& random, size_t length) {
  static constexpr char kAlphabet[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=";
  std::uniform_int_distribution<size_t> pick(0, sizeof kAlphabet - 2);
  std::string text(length, ' ');
  for (char& c : text) c = kAlphabet[pick(random)];
  return text;
}

// A plausible JobGraph: four vertices in a chain, each with a command and a resource profile;
// an environment variable of random text (it does not pack) on the last vertex pads the packed
// message to about the target size.
kj::Own<capnp::MallocMessageBuilder> buildGraph(std::mt19937_64& random, size_t padding) {
  return testing::makeJobGraph(
      JobId::random(), {.name = "bench-job-" + randomText(random, 12),
                        .vertices = 4,
                        .parallelism = 4,
                        .argv = {"/usr/bin/bench-task", "--input=s3://bench/" + randomText(random, 32),
                                 "--output=s3://bench/" + randomText(random, 32)},
                        .cpuMillis = 500,
                        .memoryBytes = 256u << 20,
                        .paddingBytes = padding,
                        .submittedAtMs = 1'700'000'000'000,
                        .fixedDelayRestart = true});
}

size_t packedSize(capnp::MallocMessageBuilder& message) {
  kj::VectorOutputStream out;
  capnp::writePackedMessage(out, message);
  return out.getArray().size();
}

struct Graphs {
  std::vector<kj::Own<capnp::MallocMessageBuilder>> messages;
  std::vector<wire::JobGraph::Reader> readers;  // One per message.
  double meanPackedBytes = 0;
};

Graphs buildGraphs(size_t count, size_t targetBytes, uint64_t seed) {
  std::mt19937_64 random(seed);
  // Every graph has the same shape and string lengths, so a few probes size the padding.
  size_t padding = 0;
  for (int probe = 0; probe < 4; ++probe) {
    const size_t size = packedSize(*buildGraph(random, padding));
    if (size == targetBytes) break;
    padding = size < targetBytes ? padding + (targetBytes - size)
                                 : padding - std::min(padding, size - targetBytes);
  }
  Graphs graphs;
  graphs.messages.reserve(count);
  size_t total = 0;
  for (size_t i = 0; i < count; ++i) {
    graphs.messages.push_back(buildGraph(random, padding));
    total += packedSize(*graphs.messages.back());
    graphs.readers.push_back(graphs.messages.back()->getRoot<wire::JobGraph>().asReader());
  }
  graphs.meanPackedBytes = count == 0 ? 0 : static_cast<double>(total) / static_cast<double>(count);
  return graphs;
}

// ---- putting and recovering through the stores ---------------------------------------------

// put() of every graph, `inFlight` at a time: each reply sends the next put (a sliding window).
struct PutRun {
  JobGraphStore& store;
  const Graphs& graphs;
  size_t next = 0;
  std::optional<StoreError> error;
};

kj::Promise<void> putLane(PutRun& run) {
  if (run.error || run.next >= run.graphs.messages.size()) return kj::READY_NOW;
  const size_t index = run.next++;
  return run.store.put(run.graphs.readers[index])
      .then([&run](StoreResult<void> result) -> kj::Promise<void> {
        if (!result.ok()) {
          if (!run.error) run.error = result.error();
          return kj::READY_NOW;
        }
        return putLane(run);
      });
}

template <typename T>
T runBounded(EventLoop& loop, kj::Promise<T>&& promise, const char* what) {
  return loop.run(kj::mv(promise).exclusiveJoin(
      loop.timer().afterDelay(kPhaseTimeout.count() * kj::MILLISECONDS).then([what]() -> T {
        KJ_FAIL_REQUIRE("timed out", what);
      })));
}

// Puts every graph; returns the elapsed ms or the first store error.
Result<double> putAll(EventLoop& loop, JobGraphStore& store, const Graphs& graphs,
                      size_t inFlight) {
  PutRun run{store, graphs};
  const size_t lanes = std::min(inFlight, graphs.messages.size());
  auto builder = kj::heapArrayBuilder<kj::Promise<void>>(lanes);
  const MonoTime start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < lanes; ++i) builder.add(putLane(run));
  runBounded(loop, kj::joinPromises(builder.finish()), "putting the JobGraphs");
  const double elapsed = millisSince(start);
  if (run.error) return Error::fatal("put failed: " + run.error->message);
  return elapsed;
}

// recoverAll() (which lists, then reads every record and decodes it); returns the elapsed ms.
Result<double> recoverAll(EventLoop& loop, JobGraphStore& store, size_t expected) {
  const MonoTime start = std::chrono::steady_clock::now();
  auto recovered = runBounded(loop, store.recoverAll(), "recovering the JobGraphs");
  const double elapsed = millisSince(start);
  if (!recovered.ok()) return Error::fatal("recoverAll failed: " + recovered.error().message);
  if (recovered.value().graphs.size() != expected || !recovered.value().corrupt.empty()) {
    return Error::fatal("recoverAll found " + std::to_string(recovered.value().graphs.size()) +
                        " JobGraphs and " + std::to_string(recovered.value().corrupt.size()) +
                        " corrupt records, expected " + std::to_string(expected));
  }
  return elapsed;
}

// ---- the floor: the plain ZooKeeper C client -------------------------------------------------

// Reads every child of `folder` with the single-threaded C library: getChildren, then a get for
// every child sent at once from its completion, driven by a poll() loop with
// zookeeper_interest()/zookeeper_process(). Times from getChildren to the last reply.
class RawReader final {
 public:
  static Result<double> readAll(const std::string& quorum, const std::string& folder,
                                size_t expected) {
    RawReader reader(folder);
    Status connected = reader.connect(quorum);
    if (!connected.ok()) return connected.error();
    const MonoTime start = std::chrono::steady_clock::now();
    const int rc =
        zoo_aget_children(reader.zh_, folder.c_str(), 0, &RawReader::onChildren, &reader);
    if (rc != ZOK) return Error::fatal(std::string("zoo_aget_children: ") + zerror(rc));
    Status done = reader.driveUntil([&reader] { return reader.finished(); });
    const double elapsed = millisSince(start);
    if (!done.ok()) return done.error();
    if (reader.failure_ != ZOK) {
      return Error::fatal(std::string("raw read failed: ") + zerror(reader.failure_));
    }
    if (reader.read_ != expected) {
      return Error::fatal("raw read found " + std::to_string(reader.read_) + " nodes, expected " +
                          std::to_string(expected));
    }
    return elapsed;
  }

  ~RawReader() {
    if (zh_ != nullptr) zookeeper_close(zh_);
  }
  RawReader(const RawReader&) = delete;
  RawReader& operator=(const RawReader&) = delete;

 private:
  explicit RawReader(std::string folder) : folder_(std::move(folder)) {}

  Status connect(const std::string& quorum) {
    zh_ = zookeeper_init2(quorum.c_str(), &RawReader::onSession, 30000, nullptr, this,
                          ZOO_NO_LOG_CLIENTENV, [](const char*) {});
    if (zh_ == nullptr) return Error::fatal("zookeeper_init2 failed");
    return driveUntil([this] { return connected_; });
  }

  bool finished() const { return failure_ != ZOK || (listed_ && read_ + missing_ == children_); }

  Status driveUntil(const std::function<bool()>& done) {
    const MonoTime deadline = std::chrono::steady_clock::now() + kPhaseTimeout;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return Error::fatal("raw read timed out");
      int fd = -1;
      int interest = 0;
      timeval tv{};
      const int rc = zookeeper_interest(zh_, &fd, &interest, &tv);
      if (rc != ZOK && rc != ZCONNECTIONLOSS) {
        return Error::fatal(std::string("zookeeper_interest: ") + zerror(rc));
      }
      pollfd p{fd, 0, 0};
      if (interest & ZOOKEEPER_READ) p.events |= POLLIN;
      if (interest & ZOOKEEPER_WRITE) p.events |= POLLOUT;
      const long long waitMs = tv.tv_sec * 1000LL + (tv.tv_usec + 999) / 1000;
      ::poll(&p, fd >= 0 ? 1 : 0, static_cast<int>(std::min<long long>(waitMs, 100)));
      int events = 0;
      if (p.revents & (POLLIN | POLLHUP | POLLERR)) events |= ZOOKEEPER_READ;
      if (p.revents & POLLOUT) events |= ZOOKEEPER_WRITE;
      zookeeper_process(zh_, events);
    }
    return Status();
  }

  static void onSession(zhandle_t*, int type, int state, const char*, void* context) {
    if (type == ZOO_SESSION_EVENT && state == ZOO_CONNECTED_STATE) {
      static_cast<RawReader*>(context)->connected_ = true;
    }
  }

  static void onChildren(int rc, const String_vector* names, const void* context) {
    auto* self = static_cast<RawReader*>(const_cast<void*>(context));
    if (rc != ZOK) {
      self->failure_ = rc;
      return;
    }
    self->children_ = static_cast<size_t>(names->count);
    self->listed_ = true;
    std::string path;
    for (int32_t i = 0; i < names->count; ++i) {
      path.assign(self->folder_).append("/").append(names->data[i]);
      const int sent = zoo_aget(self->zh_, path.c_str(), 0, &RawReader::onData, self);
      if (sent != ZOK) {
        self->failure_ = sent;
        return;
      }
    }
  }

  static void onData(int rc, const char*, int length, const Stat*, const void* context) {
    auto* self = static_cast<RawReader*>(const_cast<void*>(context));
    if (rc == ZOK) {
      ++self->read_;
      self->bytes_ += static_cast<size_t>(std::max(length, 0));
    } else if (rc == ZNONODE) {
      ++self->missing_;
    } else if (self->failure_ == ZOK) {
      self->failure_ = rc;
    }
  }

  std::string folder_;
  zhandle_t* zh_ = nullptr;
  bool connected_ = false;
  bool listed_ = false;
  size_t children_ = 0;
  size_t read_ = 0;
  size_t missing_ = 0;
  size_t bytes_ = 0;
  int failure_ = ZOK;
};

// ---- one trial per backend -------------------------------------------------------------------

// One timed read of every record: wall time, and the CPU time it cost this thread (the loop
// thread, which also runs the raw reader) and the ZooKeeper server.
struct Phase {
  double ms = 0;
  double clientCpuMs = 0;
  double serverCpuMs = 0;
};

struct Trial {
  double putPerSecond = 0;
  Phase recover;                 // JobGraphStore::recoverAll(): list, read, decode.
  std::optional<Phase> records;  // ZooKeeper: RecordStore::readAll() alone (no decoding).
  std::optional<Phase> raw;      // ZooKeeper: the plain C client, the floor.
};

// Runs `read` (which returns its own wall time in ms) and adds the CPU times around it.
template <typename Read>
Result<Phase> measure(int serverPid, Read&& read) {
  const double client = threadCpuMs();
  const double server = processCpuMs(serverPid);
  Result<double> ms = read();
  if (!ms.ok()) return ms.error();
  return Phase{ms.value(), threadCpuMs() - client, processCpuMs(serverPid) - server};
}

template <typename T>
Result<T> fromStore(StoreResult<T>&& result, const std::string& what) {
  if (!result.ok()) return Error::fatal(what + ": " + result.error().message);
  return std::move(result).value();
}

Result<kj::Own<ha::ZooKeeperClient>> connect(EventLoop& loop, const std::string& quorum,
                                             const std::string& root) {
  ha::ZooKeeperClientOptions options;
  options.quorum = quorum;
  options.root = root;
  options.sessionTimeout = Duration(30000);  // The raw read blocks the loop for a while.
  auto client = ha::ZooKeeperClient::start(loop, options);
  if (!client.ok()) return client.error();
  Status connected = loop.run(client.value()->waitConnected(kConnectTimeout));
  if (!connected.ok()) return connected.error();
  return std::move(client).value();
}

Result<std::string> createLatch(EventLoop& loop, ha::Coordination& zk) {
  auto ensured = runBounded(loop, zk.ensurePath("latch"), "creating the latch folder");
  if (!ensured.ok())
    return Error::fatal(std::string("latch folder: ") + ha::zkCodeName(ensured.code));
  auto latch = runBounded(loop, zk.create("latch/m-", "", ha::CreateMode::kEphemeralSequential),
                          "creating a latch node");
  if (!latch.ok()) return Error::fatal(std::string("latch node: ") + ha::zkCodeName(latch.code));
  return latch.value;
}

Result<kj::Own<store::RecordStore>> openZooKeeperRecords(EventLoop& loop, ha::Coordination& zk,
                                                         store::StoreTerm term,
                                                         size_t readsInFlight) {
  store::ZooKeeperRecordStoreOptions options;
  options.maxReadsInFlight = readsInFlight;
  return fromStore(runBounded(loop, store::ZooKeeperRecordStore::open(zk, term, options),
                              "opening the ZooKeeper store"),
                   "opening the ZooKeeper store");
}

// RecordStore::readAll() of the JobGraphs; returns the elapsed ms.
Result<double> readRecords(EventLoop& loop, store::RecordStore& records, size_t expected) {
  const MonoTime start = std::chrono::steady_clock::now();
  auto read = runBounded(loop, records.readAll(RecordFamily::kJobGraphs), "reading the records");
  const double elapsed = millisSince(start);
  if (!read.ok()) return Error::fatal("readAll failed: " + read.error().message);
  if (read.value().size() != expected) {
    return Error::fatal("readAll found " + std::to_string(read.value().size()) +
                        " records, expected " + std::to_string(expected));
  }
  return elapsed;
}

// Removes every node the trial wrote, so trials do not pile up in the server's memory.
Status removeRecords(EventLoop& loop, ha::Coordination& zk) {
  auto names = runBounded(loop, zk.children("jobgraphs"), "listing for clean-up");
  if (!names.ok()) return Error::fatal(std::string("clean-up: ") + ha::zkCodeName(names.code));
  constexpr size_t kWindow = 1024;
  for (size_t begin = 0; begin < names.value.size(); begin += kWindow) {
    const size_t end = std::min(begin + kWindow, names.value.size());
    auto removes = kj::heapArrayBuilder<kj::Promise<ha::ZkReply<bool>>>(end - begin);
    for (size_t i = begin; i < end; ++i) removes.add(zk.remove("jobgraphs/" + names.value[i]));
    runBounded(loop, kj::joinPromises(removes.finish()), "clean-up");
  }
  return Status();
}

Result<Trial> zooKeeperTrial(EventLoop& loop, const std::string& quorum, int serverPid,
                             const Graphs& graphs, const BenchOptions& options, int trial) {
  const std::string root = "/regent-bench-store/" + JobId::random().toHex();
  const size_t count = graphs.messages.size();
  Trial result;
  {
    auto writer = connect(loop, quorum, root);
    if (!writer.ok()) return writer.error();
    auto latch = createLatch(loop, *writer.value());
    if (!latch.ok()) return latch.error();
    auto records =
        openZooKeeperRecords(loop, *writer.value(), {1, latch.value()}, options.readsInFlight);
    if (!records.ok()) return records.error();
    auto stores = store::makeLeaderStores(kj::mv(records.value()), kRetain);
    auto put = putAll(loop, stores->jobGraphs(), graphs, options.putsInFlight);
    if (!put.ok()) return put.error();
    result.putPerSecond = static_cast<double>(count) * 1000.0 / put.value();
  }
  // A fresh client, session and term: nothing cached from the writer.
  auto reader = connect(loop, quorum, root);
  if (!reader.ok()) return reader.error();
  auto latch = createLatch(loop, *reader.value());
  if (!latch.ok()) return latch.error();
  auto records =
      openZooKeeperRecords(loop, *reader.value(), {2, latch.value()}, options.readsInFlight);
  if (!records.ok()) return records.error();
  auto stores = store::makeLeaderStores(kj::mv(records.value()), kRetain);
  // The same backend without the encoding layer: how much of the recovery is decoding.
  auto bare =
      openZooKeeperRecords(loop, *reader.value(), {2, latch.value()}, options.readsInFlight);
  if (!bare.ok()) return bare.error();

  // The three reads, in an order rotated from trial to trial so none always goes first (and
  // meets a colder server) or last.
  enum Read { kRaw, kRecover, kRecords };
  const Read orders[3][3] = {
      {kRaw, kRecover, kRecords}, {kRecover, kRecords, kRaw}, {kRecords, kRaw, kRecover}};
  for (Read read : orders[trial % 3]) {
    Result<Phase> phase = Error::fatal("unreachable");
    switch (read) {
      case kRaw:
        phase = measure(serverPid,
                        [&] { return RawReader::readAll(quorum, root + "/jobgraphs", count); });
        if (phase.ok()) result.raw = phase.value();
        break;
      case kRecover:
        phase = measure(serverPid, [&] { return recoverAll(loop, stores->jobGraphs(), count); });
        if (phase.ok()) result.recover = phase.value();
        break;
      case kRecords:
        phase = measure(serverPid, [&] { return readRecords(loop, *bare.value(), count); });
        if (phase.ok()) result.records = phase.value();
        break;
    }
    if (!phase.ok()) return phase.error();
  }
  stores = nullptr;
  bare.value() = nullptr;
  if (Status removed = removeRecords(loop, *reader.value()); !removed.ok()) return removed.error();
  return result;
}

Result<Trial> rocksDbTrial(EventLoop& loop, const Graphs& graphs, const BenchOptions& options) {
  TempDir dir("regent-bench-store-rocksdb");
  store::RocksDbOptions dbOptions;
  dbOptions.path = dir.path() + "/db";
  Trial result;
  {
    auto db = fromStore(
        runBounded(loop, store::RocksDbDatabase::open(loop, dbOptions), "opening RocksDB"),
        "opening RocksDB");
    if (!db.ok()) return db.error();
    auto records =
        fromStore(runBounded(loop, db.value()->openTerm(1), "opening term 1"), "opening term 1");
    if (!records.ok()) return records.error();
    auto stores = store::makeLeaderStores(kj::mv(records.value()), kRetain);
    auto put = putAll(loop, stores->jobGraphs(), graphs, options.putsInFlight);
    if (!put.ok()) return put.error();
    result.putPerSecond = static_cast<double>(graphs.messages.size()) * 1000.0 / put.value();
    stores = nullptr;
    runBounded(loop, db.value()->close(), "closing RocksDB");
  }
  // A fresh database handle and term.
  auto db = fromStore(
      runBounded(loop, store::RocksDbDatabase::open(loop, dbOptions), "reopening RocksDB"),
      "reopening RocksDB");
  if (!db.ok()) return db.error();
  auto records =
      fromStore(runBounded(loop, db.value()->openTerm(2), "opening term 2"), "opening term 2");
  if (!records.ok()) return records.error();
  auto stores = store::makeLeaderStores(kj::mv(records.value()), kRetain);
  auto recovered =
      measure(0, [&] { return recoverAll(loop, stores->jobGraphs(), graphs.messages.size()); });
  if (!recovered.ok()) return recovered.error();
  result.recover = recovered.value();
  stores = nullptr;
  runBounded(loop, db.value()->close(), "closing RocksDB");
  return result;
}

std::string trialLabel(int trial) {
  return trial >= 1 ? "trial " + std::to_string(trial) : "warm-up";
}

std::string describe(const char* name, const Phase& phase, bool server) {
  std::string text =
      std::string(name) + " " + formatFixed(phase.ms, 1) + " ms (cpu: client " + formatFixed(phase.clientCpuMs, 1);
  if (server) text += ", server " + formatFixed(phase.serverCpuMs, 1);
  return text + ")";
}

void printTrial(const char* backend, const std::string& label, const Trial& t) {
  std::string line = "# " + label + " store " + backend +
                     " put_per_s=" + formatFixed(t.putPerSecond, 0) +
                     " recover_10k_ms=" + formatFixed(t.recover.ms, 1);
  if (t.raw) {
    line += " zk_raw_read_10k_ms=" + formatFixed(t.raw->ms, 1) +
            " ratio=" + formatFixed(t.recover.ms / t.raw->ms, 2);
  }
  line += "; " + describe("recoverAll", t.recover, t.raw.has_value());
  if (t.records) line += ", " + describe("records readAll", *t.records, true);
  if (t.raw) line += ", " + describe("raw read", *t.raw, true);
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

void printSummary(const char* backend, const std::vector<Trial>& trials) {
  std::vector<double> puts, recovers, records, raws, ratios, recordRatios;
  for (const Trial& t : trials) {
    puts.push_back(t.putPerSecond);
    recovers.push_back(t.recover.ms);
    if (t.raw) {
      raws.push_back(t.raw->ms);
      ratios.push_back(t.recover.ms / t.raw->ms);
    }
    if (t.records && t.raw) {
      records.push_back(t.records->ms);
      recordRatios.push_back(t.records->ms / t.raw->ms);
    }
  }
  std::string mins = "min over trials: recover_10k_ms=" + formatFixed(summarize(recovers).min, 1);
  std::string line = std::string("store ") + backend + " put_per_s=" + formatFixed(median(puts), 0) +
                     " recover_10k_ms=" + formatFixed(median(recovers), 1);
  if (!raws.empty()) {
    line += " zk_raw_read_10k_ms=" + formatFixed(median(raws), 1) + " ratio=" + formatFixed(median(ratios), 2);
    mins += " zk_raw_read_10k_ms=" + formatFixed(summarize(raws).min, 1) + " ratio=" + formatFixed(summarize(ratios).min, 2);
  }
  note(std::string(backend) + " " + mins);
  if (!records.empty()) {
    note(std::string(backend) + " median records readAll (no decoding) " + formatFixed(median(records), 1) +
         " ms, ratio to the raw read " + formatFixed(median(recordRatios), 2));
  }
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

int run(const BenchOptions& options) {
  auto fail = [](const std::string& what) {
    std::fflush(stdout);
    std::fprintf(stderr, "bench_store: %s\n", what.c_str());
    return 1;
  };
  spdlog::set_level(spdlog::level::warn);
  const bool zookeeper = options.backend == "both" || options.backend == "zookeeper";
  const bool rocksdb = options.backend == "both" || options.backend == "rocksdb";

  note(std::to_string(options.count) + " JobGraphs per trial, " + std::to_string(options.trials) +
       " trials, " + std::to_string(options.putsInFlight) +
       " puts in flight; recover_10k_ms times JobGraphStore::recoverAll() (it lists, reads and "
       "decodes every record) on a fresh store of a new term; summary lines are medians "
       "(ratio: median of the per-trial ratios)");
  EventLoop loop;

  if (zookeeper) {
    ZooKeeperServerOptions zkOptions;
    // Default jute.maxbuffer; a production-like JIT (not the tests' C1-only start-up flags) and
    // room for 10k records per trial.
    zkOptions.jvmFlags = {"-Xmx1g", "-XX:+UseSerialGC", "-Djava.net.preferIPv4Stack=true"};
    auto server = ZooKeeperServer::start(zkOptions);
    if (!server.ok()) return fail("ZooKeeper did not start: " + server.error().message);
    const std::string quorum = server.value()->connectString();
    const int serverPid = findProcess(server.value()->tempDir());
    note("ZooKeeper " + quorum + " (standalone, data in " + server.value()->dataDir() +
         "), store reads in flight " + std::to_string(options.readsInFlight) +
         "; zk_raw_read_10k_ms: plain C client, getChildren then every get in flight at once");
    std::vector<Trial> trials;
    // Warm-up trials (the server's JIT, the page cache) are printed but not summarized.
    for (int trial = 1 - options.warmups; trial <= options.trials; ++trial) {
      Graphs graphs = buildGraphs(options.count, options.recordBytes, std::random_device{}());
      if (trial == 1 - options.warmups) {
        note("mean packed JobGraph " + formatFixed(graphs.meanPackedBytes, 1) + " bytes");
      }
      // Trials alternate which read goes first; the count includes the warm-ups.
      auto result =
          zooKeeperTrial(loop, quorum, serverPid, graphs, options, trial + options.warmups);
      if (!result.ok())
        return fail("zookeeper trial " + std::to_string(trial) + ": " + result.error().message);
      printTrial("zookeeper", trialLabel(trial), result.value());
      if (trial >= 1) trials.push_back(result.value());
    }
    printSummary("zookeeper", trials);
  }

  if (rocksdb) {
    std::vector<Trial> trials;
    for (int trial = 1 - options.warmups; trial <= options.trials; ++trial) {
      Graphs graphs = buildGraphs(options.count, options.recordBytes, std::random_device{}());
      if (trial == 1 - options.warmups && !zookeeper) {
        note("mean packed JobGraph " + formatFixed(graphs.meanPackedBytes, 1) + " bytes");
      }
      auto result = rocksDbTrial(loop, graphs, options);
      if (!result.ok())
        return fail("rocksdb trial " + std::to_string(trial) + ": " + result.error().message);
      printTrial("rocksdb", trialLabel(trial), result.value());
      if (trial >= 1) trials.push_back(result.value());
    }
    printSummary("rocksdb", trials);
  }
  return 0;
}

}  // namespace
}  // namespace regent::bench

int main(int argc, char** argv) {
  regent::bench::BenchOptions options;
  CLI::App app{
      "Store benchmark: put JobGraphs of about 2 KiB, then recover them all through a fresh store "
      "of a new term, per backend; for ZooKeeper also the plain C client's read of the same "
      "nodes. Prints result lines; never asserts timings."};
  app.add_option("--count", options.count, "JobGraphs per trial")
      ->check(CLI::Range(size_t{1}, size_t{1000000}))
      ->capture_default_str();
  app.add_option("--trials", options.trials, "trials per backend")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--warmups", options.warmups, "untimed trials before the measured ones")
      ->check(CLI::Range(0, 10))
      ->capture_default_str();
  app.add_option("--backend", options.backend, "both, zookeeper or rocksdb")
      ->check(CLI::IsMember({"both", "zookeeper", "rocksdb"}))
      ->capture_default_str();
  app.add_option("--puts-in-flight", options.putsInFlight, "puts kept in flight")
      ->check(CLI::Range(size_t{1}, size_t{100000}))
      ->capture_default_str();
  app.add_option("--reads-in-flight", options.readsInFlight,
                 "the ZooKeeper store's maxReadsInFlight")
      ->check(CLI::Range(size_t{1}, size_t{100000}))
      ->capture_default_str();
  app.add_option("--record-bytes", options.recordBytes, "target packed size of one JobGraph")
      ->check(CLI::Range(size_t{256}, size_t{900000}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return regent::bench::run(options);
}

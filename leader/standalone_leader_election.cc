// Standalone election and retrieval: the epoch file decides the term; the leader record next to
// it says who holds it and since when.
#include "leader/standalone_leader_election.h"

#include <kj/debug.h>
#include <spdlog/spdlog.h>
#include <uv.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/time.h"
#include "leader/epoch_file.h"

namespace regent::leader {
namespace {

// Blocking. The record in `path`; nullopt if it is missing or unreadable (a reader then falls
// back to the configuration; a torn or foreign file is not worth failing a read for).
std::optional<LeaderInfo> readLeaderRecord(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  auto record = leaderInfoFromJson(buffer.str());
  if (!record) {
    spdlog::warn("standalone leader record {} is unreadable: {}", path, record.error().message);
    return std::nullopt;
  }
  return std::move(record).value();
}

// Blocking; logs a failure (the epoch file alone decides the term).
void writeLeaderRecord(const std::string& path, const LeaderInfo& record) {
  Status written = replaceFileDurably(path, toJson(record) + "\n", "leader record");
  if (!written) spdlog::warn("standalone leader election: {}", written.error().message);
}

}  // namespace

std::string leaderRecordPathFor(const std::string& epochFile) { return epochFile + ".leader"; }

StandaloneLeaderElection::StandaloneLeaderElection(EventLoop& loop, std::string epochFile,
                                                   ContenderInfo self)
    : loop_(loop),
      epochFile_(std::move(epochFile)),
      self_(std::move(self)),
      errorHandler_("standalone leader election"),
      tasks_(errorHandler_) {}

StandaloneLeaderElection::~StandaloneLeaderElection() noexcept = default;

void StandaloneLeaderElection::start(LeaderContender& contender) {
  KJ_REQUIRE(contender_ == nullptr, "StandaloneLeaderElection::start called twice");
  contender_ = &contender;
  takeNextEpoch();
}

void StandaloneLeaderElection::takeNextEpoch() {
  uint64_t generation = ++generation_;
  tasks_.add(loop_.runBlocking([path = epochFile_, self = self_]() -> Result<LeaderInfo> {
                    auto next = advanceEpochFile(path);
                    if (!next) return next.error();
                    LeaderInfo record = leaderInfoFor(self, next.value(), wallClockMillis());
                    record.status = LeaderStatus::kRecovering;
                    writeLeaderRecord(leaderRecordPathFor(path), record);
                    return record;
                  })
                 .catch_([path = epochFile_](kj::Exception&& exception) -> Result<LeaderInfo> {
                   return Error::fatal("cannot use epoch file " + path + ": " +
                                       exception.getDescription().cStr());
                 })
                 .then([this, generation](Result<LeaderInfo>&& next) {
                   if (generation != generation_) return;
                   if (!next) {
                     spdlog::error("standalone leader election: {}; not taking leadership",
                                   next.error().message);
                     failed_ = true;
                     contender_->electionFailed(next.error());
                     return;
                   }
                   contender_->contending("standalone");
                   if (generation != generation_) return;  // Handed over from the callback.
                   KJ_ASSERT(!leading_);
                   leading_ = true;
                   record_ = next.value();
                   epoch_ = record_.epoch;
                   spdlog::info("standalone leader election: epoch={} taken from {}", epoch_,
                                epochFile_);
                   // No latch: the epoch file's order alone fences a standalone writer.
                   contender_->grantLeadership(ha::WriterFence{epoch_, ""});
                 }));
}

kj::Promise<Status> StandaloneLeaderElection::markServing(uint64_t epoch) {
  if (!leading_ || epoch != epoch_) {
    return Status(Error::fatal(
        "epoch " + std::to_string(epoch) + " is not the current term (" +
        (leading_ ? "current epoch " + std::to_string(epoch_) : std::string("not leading")) + ")"));
  }
  record_.status = LeaderStatus::kServing;
  return loop_.runBlocking([path = leaderRecordPathFor(epochFile_), record = record_] {
           writeLeaderRecord(path, record);
         })
      .then([]() { return Status(); });
}

kj::Promise<Status> StandaloneLeaderElection::handOver(bool recontend) {
  ++generation_;
  // Deferred: the contender is never called from inside one of our own methods.
  return kj::evalLater([this, recontend] {
    if (leading_) {
      leading_ = false;
      spdlog::info("standalone leader election: epoch={} handed over", epoch_);
      contender_->revokeLeadership(epoch_, "handed over");
    }
    if (recontend && contender_ != nullptr && !failed_) takeNextEpoch();
    // Nothing to remove anywhere: the next epoch comes from the file.
    return Status();
  });
}

// A libuv fs-event watch (inotify on Linux) of one file's directory that calls `changed` on the
// loop thread whenever an entry named like the file is created, replaced or written.
class StandaloneLeaderRetrieval::RecordWatch final {
 public:
  RecordWatch(EventLoop& loop, const std::string& file, kj::Function<void()> changed)
      : loop_(loop), handle_(new Handle{}) {
    const std::filesystem::path path(file);
    handle_->name = path.filename().string();
    handle_->changed = kj::mv(changed);
    std::string dir = path.parent_path().string();
    if (dir.empty()) dir = ".";
    uv_fs_event_init(loop.uv(), &handle_->event);
    handle_->event.data = handle_;
    const int rc = uv_fs_event_start(
        &handle_->event,
        [](uv_fs_event_t* event, const char* filename, int, int status) {
          auto* handle = static_cast<Handle*>(event->data);
          if (status != 0 || filename == nullptr || handle->name != filename) return;
          KJ_IF_MAYBE(changed, handle->changed) { (*changed)(); }
        },
        dir.c_str(), 0);
    if (rc != 0) {
      spdlog::warn("standalone leader retrieval: cannot watch {} ({}); leader changes in {} "
                   "are not reported",
                   dir, uv_strerror(rc), file);
    }
    loop_.kick();
  }
  ~RecordWatch() {
    handle_->changed = nullptr;
    uv_close(reinterpret_cast<uv_handle_t*>(&handle_->event),
             [](uv_handle_t* h) { delete static_cast<Handle*>(h->data); });
    loop_.kick();
  }
  KJ_DISALLOW_COPY(RecordWatch);

 private:
  struct Handle {
    uv_fs_event_t event;
    std::string name;
    kj::Maybe<kj::Function<void()>> changed;
  };
  EventLoop& loop_;
  Handle* handle_;  // Owned; freed by uv's close callback.
};

StandaloneLeaderRetrieval::StandaloneLeaderRetrieval(EventLoop& loop, LeaderInfo leader,
                                                     std::string epochFile)
    : loop_(loop),
      leader_(std::move(leader)),
      epochFile_(std::move(epochFile)),
      errorHandler_("standalone leader retrieval"),
      tasks_(errorHandler_) {}

StandaloneLeaderRetrieval::~StandaloneLeaderRetrieval() noexcept = default;

kj::Promise<LeaderInfo> StandaloneLeaderRetrieval::current() {
  return loop_.runBlocking([path = epochFile_, leader = leader_]() mutable {
    auto epoch = readEpochFile(path);
    if (epoch && epoch.value()) leader.epoch = *epoch.value();
    auto record = readLeaderRecord(leaderRecordPathFor(path));
    // A record of an older term (the epoch file moved on, the record is not written yet) says
    // nothing about the current one.
    if (record && leader.epoch != 0 && record->epoch == leader.epoch) return *record;
    return leader;
  });
}

void StandaloneLeaderRetrieval::start(LeaderRetrievalListener& listener) {
  KJ_REQUIRE(listener_ == nullptr, "StandaloneLeaderRetrieval::start called twice");
  listener_ = &listener;
  watch_ = kj::heap<RecordWatch>(loop_, leaderRecordPathFor(epochFile_), [this] { refresh(); });
  refresh();
}

void StandaloneLeaderRetrieval::refresh() {
  const uint64_t read = ++reads_;
  tasks_.add(current().then([this, read](LeaderInfo&& leader) {
    if (read != reads_ || reported_ == leader) return;
    reported_ = leader;
    listener_->leaderChanged(leader);
  }));
}

kj::Promise<Result<std::optional<LeaderInfo>>> StandaloneLeaderRetrieval::leader() {
  return current().then([](LeaderInfo&& leader) -> Result<std::optional<LeaderInfo>> {
    return std::optional<LeaderInfo>(kj::mv(leader));
  });
}

kj::Promise<Result<std::vector<ContenderEntry>>> StandaloneLeaderRetrieval::contenders() {
  return current().then([](LeaderInfo&& leader) -> Result<std::vector<ContenderEntry>> {
    ContenderEntry entry;
    entry.latchNode = "standalone";
    entry.info.masterId = leader.masterId;
    entry.info.rpcAddress = leader.rpcAddress;
    entry.info.httpAddress = leader.httpAddress;
    entry.info.host = leader.host;
    entry.info.pid = leader.pid;
    entry.leader = true;
    return std::vector<ContenderEntry>{kj::mv(entry)};
  });
}

}  // namespace regent::leader

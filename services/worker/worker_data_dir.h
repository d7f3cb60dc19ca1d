// A worker's data directory (worker.data-dir, docs/workers.md): the resource id that makes a
// restarted worker the same worker to the ResourceManager, the lock that keeps a second live
// worker off the same directory (and so off the same resource id), and the held descriptor of its
// `attempts` directory through which the worker reaches everything of its tasks.
#pragma once

#include <kj/memory.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "common/factory_key.h"
#include "common/ids.h"
#include "common/result.h"

namespace regent::worker {

// Who holds a data directory: what its lock file says ("host pid started_at_ms").
struct DataDirHolder {
  std::string host;
  int64_t pid = 0;
  int64_t startedAtMs = 0;
};

// The files inside a data directory.
inline constexpr const char* kResourceIdFile = "resource-id";
inline constexpr const char* kLockFile = "lock";
inline constexpr const char* kAttemptsDir = "attempts";

// Why one directory on the way to the data directory (the data directory itself when
// `isDataDir`, else a directory above it) is unsafe for a worker whose tasks run as `taskUid`
// (nullopt: as the worker's own user), from its owner and mode; nullopt when it is safe. A task
// user that owns it, or may write it, could rename or replace what the worker keeps below it
// (docs/security.md, "Tasks"):
//   - owned by the task user: unsafe;
//   - the data directory writable by its group or others: unsafe;
//   - a directory above it writable by its group or others: unsafe unless the sticky bit is set
//     (as on /tmp: only an entry's owner may rename or remove it).
std::optional<std::string> unsafeDirectoryReason(uid_t owner, mode_t mode, bool isDataDir,
                                                 std::optional<uid_t> taskUid);

// Checks `dir` and every directory above it up to / (symbolic links resolved first) with
// unsafeDirectoryReason(); a `dir` that does not exist yet is checked from its closest existing
// directory up. A fatal Error naming the first unsafe directory and why. Blocking (stat).
Status checkDataDirPath(const std::string& dir, std::optional<uid_t> taskUid);

// An open data directory, locked for as long as this object lives.
//
// WARNING: open() blocks on file I/O (mkdir, fsync): call it before the event loop runs (start-up
// of regent-worker), never on a running loop thread.
//
// Everything below the data directory is reached through descriptors this object holds (the data
// directory's, opened once its path was checked, and `attempts`'s), never again by path, so a
// directory renamed or replaced by a link later does not redirect the worker.
//
// The lock is flock(LOCK_EX | LOCK_NB) on `lock`, held by an open file description of this
// object: a second open() of the same directory fails whether it comes from another
// process or from this one. The kernel drops the lock when the process dies, however it dies, so
// a lock file left behind by a killed worker holds no one off.
class WorkerDataDir final {
 public:
  // Checks the path (checkDataDirPath, for tasks running as `taskUid`; a `taskUid` that is the
  // worker's own counts as none); creates `dir` (mode 0700,
  // parents too) if missing and checks it again; takes the lock, or fails with a message
  // naming the holder and `self` ("worker.data-dir D is in use by the worker on host H pid P
  // (started T); this worker is host H2 pid P2"); writes `self` into the lock file; then reads
  // the resource id file, or creates it with a random id (written durably: temporary file, fsync,
  // rename, fsync of the directory) when it does not exist. A resource id file that does not hold
  // exactly 32 hex digits (a trailing newline is fine) fails naming the file and what it
  // holds; it is never replaced. Last, creates `attempts` (mode 0711) if missing and opens it: an
  // `attempts` that is not a directory (a file, a symbolic link) or that the worker's user does
  // not own fails naming it. When tasks run as another user, the data directory gets o+x (that
  // user may traverse it to its attempt's directory, not list it).
  //
  // Errors: retryable when another live worker holds the lock (it may stop; regent-worker exits
  // 1), fatal when the directory or a file in it cannot be used (regent-worker exits 2).
  static Result<kj::Own<WorkerDataDir>> open(const std::string& dir, const DataDirHolder& self,
                                             std::optional<uid_t> taskUid = std::nullopt);
  // Releases the lock (closes the lock file; its contents stay, and say nothing once unlocked).
  ~WorkerDataDir();
  WorkerDataDir(const WorkerDataDir&) = delete;
  WorkerDataDir& operator=(const WorkerDataDir&) = delete;

  const std::string& path() const { return path_; }
  const ResourceId& resourceId() const { return resourceId_; }
  // Whether open() created the resource id (the first start on this directory).
  bool created() const { return created_; }
  // <path>/attempts, and its descriptor (O_DIRECTORY; owned: valid while this object lives).
  std::string attemptsPath() const { return path_ + "/" + kAttemptsDir; }
  int attemptsFd() const { return attemptsFd_; }

  // Built by its factory only (FactoryKey).
  WorkerDataDir(FactoryKey<WorkerDataDir>, std::string path) : path_(std::move(path)) {}

 private:
  // Creates and opens `attempts` (see open()).
  Status openAttempts(std::optional<uid_t> taskUid);

  std::string path_;
  int dirFd_ = -1;       // Owned.
  int lockFd_ = -1;      // Owned.
  int attemptsFd_ = -1;  // Owned.
  ResourceId resourceId_;
  bool created_ = false;
};

// "host H pid P (started 2026-11-24T02:30:00Z)".
std::string describeHolder(const DataDirHolder& holder);

}  // namespace regent::worker

// A worker's data directory (worker.data-dir, docs/workers.md): the resource id that makes a
// restarted worker the same worker to the ResourceManager, and the lock that keeps a second live
// worker off the same directory (and so off the same resource id).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

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

// An open data directory, locked for as long as this object lives.
//
// WARNING: open() blocks on file I/O (mkdir, fsync): call it before the event loop runs (start-up
// of regent-worker), never on a running loop thread.
//
// The lock is flock(LOCK_EX | LOCK_NB) on `lock`, held by an open file description of this
// object: a second open() of the same directory fails whether it comes from another
// process or from this one. The kernel drops the lock when the process dies, however it dies, so
// a lock file left behind by a killed worker holds no one off.
class WorkerDataDir final {
 public:
  // Creates `dir` (mode 0700, parents too) if missing; takes the lock, or fails with a message
  // naming the holder and `self` ("worker.data-dir D is in use by the worker on host H pid P
  // (started T); this worker is host H2 pid P2"); writes `self` into the lock file; then reads
  // the resource id file, or creates it with a random id (written durably: temporary file, fsync,
  // rename, fsync of the directory) when it does not exist. A resource id file that does not hold
  // exactly 32 hex digits (a trailing newline is fine) fails naming the file and what it
  // holds; it is never replaced.
  //
  // Errors: retryable when another live worker holds the lock (it may stop; regent-worker exits
  // 1), fatal when the directory or a file in it cannot be used (regent-worker exits 2).
  static Result<std::unique_ptr<WorkerDataDir>> open(const std::string& dir,
                                                     const DataDirHolder& self);
  // Releases the lock (closes the lock file; its contents stay, and say nothing once unlocked).
  ~WorkerDataDir();
  WorkerDataDir(const WorkerDataDir&) = delete;
  WorkerDataDir& operator=(const WorkerDataDir&) = delete;

  const std::string& path() const { return path_; }
  const ResourceId& resourceId() const { return resourceId_; }
  // Whether open() created the resource id (the first start on this directory).
  bool created() const { return created_; }

 private:
  WorkerDataDir(std::string path, int lockFd) : path_(std::move(path)), lockFd_(lockFd) {}

  std::string path_;
  int lockFd_;  // Owned.
  ResourceId resourceId_;
  bool created_ = false;
};

// "host H pid P (started 2026-11-24T02:30:00Z)".
std::string describeHolder(const DataDirHolder& holder);

}  // namespace regent::worker

// The standalone master's epoch file: one decimal number, the last epoch issued, replaced
// atomically (write a temporary file, fsync, rename, fsync the directory).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/result.h"

namespace regent::leader {

// WARNING: both functions block on file I/O; on the loop thread run them through
// EventLoop::runBlocking.

// The epoch in `path`; nullopt if the file does not exist. A file that cannot be read or does
// not hold exactly one decimal number (a trailing newline is fine) is an error naming the path.
Result<std::optional<uint64_t>> readEpochFile(const std::string& path);

// Replaces `path` with `epoch` so that a crash leaves either the old or the new number.
Status writeEpochFile(const std::string& path, uint64_t epoch);

// Replaces `path` with `contents` through a temporary file of its own (`path`.tmp.<pid>.<n>), a
// rename and a sync of the directory, so a crash leaves the old or the new contents; calls may run
// at once on different threads. Errors name `what` ("epoch file") and the path.
Status replaceFileDurably(const std::string& path, const std::string& contents,
                          const std::string& what);

// Reads the file (a missing one counts as 0), writes the next epoch and returns it. A file at
// the largest epoch (2^64-1) is an error naming it and is left as it is: the next would wrap to 0.
Result<uint64_t> advanceEpochFile(const std::string& path);

}  // namespace regent::leader

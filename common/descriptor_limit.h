// The process's open-file limit (RLIMIT_NOFILE): raised to the hard limit at start, and the
// connection caps fitted into it so that connections alone cannot exhaust it (docs/security.md,
// "Connection limits").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace regent {

// The soft and hard RLIMIT_NOFILE before and after raiseDescriptorLimit().
struct DescriptorLimit {
  uint64_t softBefore = 0;
  uint64_t soft = 0;  // What the process may open now.
  uint64_t hard = 0;
  // Why the soft limit could not be raised ("" when it was, or already was the hard limit).
  std::string problem;
};

// Raises the soft RLIMIT_NOFILE to the hard limit (an unlimited hard limit is read as the
// kernel's fs.nr_open). Never fails: a refusal keeps the soft limit and says why in `problem`.
// Main thread, at start, before anything else opens descriptors in bulk.
DescriptorLimit raiseDescriptorLimit();

// One connection cap of a process, as configured and as fitted.
struct ConnectionCap {
  std::string option;   // "rpc.max-connections".
  uint64_t configured;  // The configured value.
  // Descriptors one connection may hold at once: 2 for RPC over TLS (the TLS listener holds as
  // many connections in their handshakes as the server serves), else 1.
  uint64_t weight = 1;
  uint64_t fitted = 0;  // Set by fitConnectionCaps.
};

// Descriptors kept out of every connection cap for the rest of the process (ZooKeeper, files,
// tasks, the listeners' reserve descriptors): a quarter of `limit`, at least 32, at most 256.
uint64_t descriptorReserve(uint64_t limit);

// Fits `caps` into `limit` minus descriptorReserve(limit): when their weighted sum is larger,
// every cap is lowered in proportion to its configured value (at least 1 each); otherwise each
// keeps its configured value. Returns whether any was lowered.
bool fitConnectionCaps(uint64_t limit, std::vector<ConnectionCap>& caps);

// One line for the start-up log: "open-file limit 1024 (raised from 256, hard 1024);
// rpc.max-connections 1024 lowered to 576 to fit, http.max-connections 256; 256 kept for
// ZooKeeper, files and tasks".
std::string describeDescriptorBudget(const DescriptorLimit& limit,
                                     const std::vector<ConnectionCap>& caps);

}  // namespace regent

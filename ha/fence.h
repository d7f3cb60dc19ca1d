// The fence a leadership term's writer carries: handed out by the election with each grant
// (leader/leader_election.h) and checked by the stores with each write (store/record_store.h).
// It lives in ha/ because both sides depend on ha/ and neither on the other.
#pragma once

#include <cstdint>
#include <string>

namespace regent::ha {

// One granted term, as the term's writes prove it. Fencing is described in docs/stores.md.
struct WriterFence {
  // The term's epoch (> 0 for a granted term).
  uint64_t epoch = 0;
  // ZooKeeper election: the writer's latch node relative to the cluster root
  // ("latch/m-0000000007"), whose existence every write checks in the same transaction; the
  // node goes when the term does. Empty when the election has no latch (standalone): the epoch
  // alone fences then.
  std::string latchPath;

  bool operator==(const WriterFence&) const = default;
};

}  // namespace regent::ha

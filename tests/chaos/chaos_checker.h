// The chaos suite's invariants (docs/testing.md, "Chaos suite"), judged on a run's History:
//   (a) every epoch granted once, grants in time order with rising epochs, no master claiming
//       SERVING after a master of a later epoch was seen serving, ZooKeeper's leader node at the
//       last epoch granted, no worker acting on a call of an epoch below one it registered with
//       (or acted on) before;
//   (b) no acknowledged job lost: the last leader lists it;
//   (c) no job with two terminal states, no task started after its job ended;
//   (d) no two live attempts of one subtask, unless the older one's worker was paused or cut;
//   (e) no subtask started again after the leader took it as FINISHED;
//   (f) no attempt started again without a cause: its previous attempt failed by itself, or that
//       attempt's worker was faulted (a master fault alone restarts nothing);
//   (g) after the last heal: one master SERVING, every live worker registered, no slot held by
//       an ended job, no task process left, every acknowledged job ended.
#pragma once

#include <string>
#include <vector>

#include "tests/chaos/chaos_history.h"

namespace regent::testing::chaos {

struct Violation {
  char invariant = '?';  // 'a' .. 'g'.
  std::string what;      // One line.
  std::vector<std::string> lines;  // The records that show it.
  WallMs at = 0;         // When it happened (0: after the last round).
};

// Every violation `history` shows, in the order of the invariants.
std::vector<Violation> checkHistory(const History& history);

// The round `at` falls in (the last one that began at or before it); nullptr before the first
// round or when `at` is 0.
const Round* roundAt(const History& history, WallMs at);

// The violation as the run prints it: the invariant, the seed, the round and its fault, what is
// wrong, and the lines that show it.
std::string describeViolation(const History& history, uint64_t seed, const Violation& violation);

bool isTerminalJobState(const std::string& state);

}  // namespace regent::testing::chaos

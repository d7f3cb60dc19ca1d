// The chaos suite's run (docs/testing.md, "Chaos suite"): a three-node ZooKeeper ensemble, three
// regent-master processes (each reaching ZooKeeper through fault proxies of its own), three
// regent-workers; jobs of several shapes submitted throughout; one fault per round drawn from a
// seeded generator, healed, and the cluster waited for (bounded) until it settles. Afterwards it
// releases every job, reads what the processes and tasks recorded into a History, and judges it
// (chaos_checker.h).
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "common/result.h"
#include "tests/chaos/chaos_checker.h"
#include "tests/chaos/chaos_history.h"

namespace regent::testing::chaos {

// The faults a round can draw, in the order the generator numbers them.
const std::vector<std::string>& faultKinds();

struct ChaosOptions {
  uint64_t seed = 1;
  int rounds = 4;
  // Only these kinds are drawn (names of faultKinds()); empty: every kind.
  std::vector<std::string> faults;
  // Progress lines (one per round), and the summary.
  std::ostream* log = nullptr;
};

struct ChaosReport {
  History history;
  std::vector<Violation> violations;
};

// Runs the whole suite once. Fails only when the cluster cannot be set up or a step of the
// harness itself goes wrong (naming it); what the cluster did wrong is in the report.
Result<ChaosReport> runChaos(const ChaosOptions& options);

// Rounds per fault kind and the settle times (median / max, from the heal) of each, and how many
// records of each kind the checker judged.
std::string summarize(const History& history);

}  // namespace regent::testing::chaos

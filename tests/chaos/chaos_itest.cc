// The seeded chaos suite against real processes (docs/testing.md, "Chaos suite"). ctest runs a
// short fixed-seed run (label `chaos`); scripts/chaos.sh runs long ones:
//   CHAOS_SEED    the generator's seed (default 1)
//   CHAOS_ROUNDS  rounds, one fault each (default 4)
//   CHAOS_FAULTS  only these fault kinds, comma separated (default every kind)
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>

#include "tests/chaos/chaos_cluster_test_util.h"

namespace regent::testing::chaos {
namespace {

std::string envOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

TEST(ChaosTest, SeededRoundsOfFaultsKeepEveryInvariant) {
  ChaosOptions options;
  options.seed = std::stoull(envOr("CHAOS_SEED", "1"));
  options.rounds = std::stoi(envOr("CHAOS_ROUNDS", "4"));
  std::istringstream faults(envOr("CHAOS_FAULTS", ""));
  for (std::string fault; std::getline(faults, fault, ',');) {
    if (!fault.empty()) options.faults.push_back(fault);
  }
  options.log = &std::cerr;
  auto report = runChaos(options);
  ASSERT_TRUE(report.ok()) << report.error().message;
  std::cerr << summarize(report.value().history);
  std::cerr << "chaos seed=" << options.seed << ": " << report.value().violations.size()
            << " violations" << std::endl;
  for (const Violation& violation : report.value().violations) {
    ADD_FAILURE() << describeViolation(report.value().history, options.seed, violation);
  }
}

}  // namespace
}  // namespace regent::testing::chaos

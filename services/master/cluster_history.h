// The master's own recent history of the numbers people compare over time: jobs by state, slots
// free, attempts restarted and adopted. The master samples its view every
// http.status-history-interval while it serves a term and keeps the last kCapacity samples; the
// status page draws them as small charts.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "services/dispatcher/dispatcher.h"

namespace regent::master {

struct ClusterSample {
  int64_t wallMs = 0;                // When it was taken (Unix ms).
  dispatcher::JobCounts jobs;        // The term's jobs by state.
  uint32_t workers = 0;              // Registered workers.
  uint32_t slotsTotal = 0;           // Slots of the workers that reported.
  uint32_t slotsFree = 0;
  uint64_t attemptsRestarted = 0;    // Across terms, as /metrics counts them.
  uint64_t attemptsAdopted = 0;
};

// Loop-thread only. The oldest sample makes room for the newest.
class ClusterHistory {
 public:
  static constexpr size_t kCapacity = 120;

  void record(const ClusterSample& sample);
  // Forgets every sample: a new term's jobs are counted from its own recovery.
  void clear() { samples_.clear(); }
  // Oldest first.
  std::vector<ClusterSample> samples() const { return {samples_.begin(), samples_.end()}; }

 private:
  std::deque<ClusterSample> samples_;
};

}  // namespace regent::master

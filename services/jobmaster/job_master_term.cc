// The counters the JobMasters keep across terms (job_master_term.h).
#include "services/jobmaster/job_master_term.h"

namespace regent::jobmaster {

void JobMasterCounters::observeSubmitToRunning(double seconds) {
  for (size_t i = 0; i < kSubmitToRunningBounds.size(); ++i) {
    if (seconds <= kSubmitToRunningBounds[i]) ++submitToRunningBuckets[i];
  }
  submitToRunningSum += seconds;
  ++submitToRunningCount;
}

}  // namespace regent::jobmaster

// The counters the JobMasters keep across terms, and their settle queue (job_master_term.h).
#include "services/jobmaster/job_master_term.h"

namespace regent::jobmaster {

void JobMasterCounters::observeSubmitToRunning(double seconds) {
  for (size_t i = 0; i < kSubmitToRunningBounds.size(); ++i) {
    if (seconds <= kSubmitToRunningBounds[i]) ++submitToRunningBuckets[i];
  }
  submitToRunningSum += seconds;
  ++submitToRunningCount;
}

SettleQueue::~SettleQueue() noexcept {
  // Entries are removed by their owners before they go; what is left is only unlinked here so
  // that no link outlives the list.
  while (!queued_.empty()) queued_.remove(queued_.front());
}

void SettleQueue::add(Entry& entry) {
  if (queued(entry)) return;
  entry.round_ = round_;
  queued_.add(entry);
  if (armed_) return;
  armed_ = true;
  tasks_.add(kj::evalLast([this] { run(); }));
}

void SettleQueue::remove(Entry& entry) {
  if (queued(entry)) queued_.remove(entry);
}

void SettleQueue::run() {
  armed_ = false;
  // This round settles the entries queued so far; those queued while it runs join the next.
  const uint64_t round = round_++;
  while (!queued_.empty() && queued_.front().round_ <= round) {
    Entry& entry = queued_.front();
    queued_.remove(entry);
    // May remove or queue entries, or destroy this one: not touched after. A failure is the
    // entry's alone: reported, and the round goes on.
    KJ_IF_MAYBE (exception, kj::runCatchingExceptions([&entry] { entry.settleNow(); })) {
      errors_.taskFailed(kj::mv(*exception));
    }
  }
}

}  // namespace regent::jobmaster

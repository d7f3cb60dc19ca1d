// A delay that its owner can cut short for every waiter at once: the backoff of a retry loop
// that should try again as soon as something changes (a new leader, a new registration).
#pragma once

#include <kj/async.h>
#include <kj/timer.h>

#include "common/time.h"

namespace regent {

// Loop-thread only. Waits are independent of each other: each ends on its own timer or at the
// first wakeAll() after it began, whichever comes first. A wait that is dropped leaves nothing
// behind, so callers that give up cost nothing however many there were.
//
// Destroying the WakeableDelay rejects the waits still pending (their owners are normally gone
// first). `timer` must outlive it.
class WakeableDelay final {
 public:
  explicit WakeableDelay(kj::Timer& timer);
  WakeableDelay(const WakeableDelay&) = delete;
  WakeableDelay& operator=(const WakeableDelay&) = delete;

  // Resolves after `delay`, or at the next wakeAll() if that comes first.
  kj::Promise<void> wait(Duration delay);
  // Ends every wait() pending now (their continuations run on a later turn of the loop); waits
  // that begin afterwards run their whole delay unless woken again.
  void wakeAll();

 private:
  // One wake: every wait begun since the previous one branches off `woken`.
  struct Generation {
    kj::Own<kj::PromiseFulfiller<void>> wake;
    kj::ForkedPromise<void> woken;
  };
  static Generation nextGeneration();

  kj::Timer& timer_;
  Generation generation_;
};

}  // namespace regent

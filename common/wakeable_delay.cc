// WakeableDelay: a timer raced against the branch of the current wake.
#include "common/wakeable_delay.h"

#include <utility>

namespace regent {

WakeableDelay::WakeableDelay(kj::Timer& timer) : timer_(timer), generation_(nextGeneration()) {}

WakeableDelay::Generation WakeableDelay::nextGeneration() {
  auto paf = kj::newPromiseAndFulfiller<void>();
  return Generation{kj::mv(paf.fulfiller), paf.promise.fork()};
}

kj::Promise<void> WakeableDelay::wait(Duration delay) {
  return timer_.afterDelay(delay.count() * kj::MILLISECONDS)
      .exclusiveJoin(generation_.woken.addBranch());
}

void WakeableDelay::wakeAll() {
  // The fork lives on in the branches still waiting; a branch that was dropped is gone from it.
  Generation woken = std::exchange(generation_, nextGeneration());
  woken.wake->fulfill();
}

}  // namespace regent

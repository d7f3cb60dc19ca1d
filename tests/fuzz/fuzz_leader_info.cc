// Fuzz target: the LeaderInfo and ContenderInfo JSON a master or regentctl reads from ZooKeeper
// (the `leader` node and the latch nodes), which anyone with write access to the cluster's
// nodes can set. A record that parses must survive a round trip through toJson unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "leader/leader_info.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace regent::leader;
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  auto leader = leaderInfoFromJson(text);
  if (leader) {
    auto again = leaderInfoFromJson(toJson(leader.value()));
    if (!again || !(again.value() == leader.value())) std::abort();
  } else if (leader.error().message.empty()) {
    std::abort();
  }

  auto contender = contenderInfoFromJson(text);
  if (contender) {
    auto again = contenderInfoFromJson(toJson(contender.value()));
    if (!again || !(again.value() == contender.value())) std::abort();
    // A contender's record turned into the leader's, as the election does when it wins.
    (void)toJson(leaderInfoFor(contender.value(), 1, 0));
  } else if (contender.error().message.empty()) {
    std::abort();
  }
  return 0;
}

// One leader retrieval followed by many listeners: the slot-rebuild benchmark runs thousands of
// simulated workers in one process, each with its own LeaderClient, on one ZooKeeper session
// and one watch of `leader`.
#pragma once

#include <kj/async.h>
#include <kj/debug.h>
#include <kj/memory.h>

#include <cstdint>
#include <optional>
#include <unordered_set>
#include <vector>

#include "common/result.h"
#include "leader/leader_info.h"
#include "leader/leader_retrieval.h"

namespace regent::leader {

// Owns a source retrieval, starts it at construction with itself as the listener, and hands out
// views: each view is a LeaderRetrieval of its own whose start(listener) follows the source.
//
// A view's listener hears, inside start(), the source's last connection state (if it told one)
// and then its last leader (if it reported one), so a view started late knows at once what the
// source knows; after that, every change the source reports, in the source's order. Listeners
// are told in the order their views were started. A view's one-shot reads (leader(),
// contenders(), leaderRecord()) are the source's.
//
// WARNING: unlike ZooKeeperLeaderRetrieval, a view calls its listener from inside start() when
// the source has reported already; start() must be called where the listener is ready for it
// (LeaderClient starts its retrieval as the last step of its constructor).
//
// Thread-safety: loop-thread only. Views must be destroyed before the shared retrieval; a
// listener may destroy views (its own or others) while being told of a change, and a view
// destroyed that way hears nothing more.
class SharedLeaderRetrieval final : private LeaderRetrievalListener {
 public:
  explicit SharedLeaderRetrieval(kj::Own<LeaderRetrieval> source);
  ~SharedLeaderRetrieval() noexcept override;
  SharedLeaderRetrieval(const SharedLeaderRetrieval&) = delete;
  SharedLeaderRetrieval& operator=(const SharedLeaderRetrieval&) = delete;

  // A new view, not yet started.
  kj::Own<LeaderRetrieval> view();

  // Views started and not yet destroyed.
  size_t listeningViews() const { return listening_.size(); }

 private:
  class View;

  void listen(View& view);
  void forget(View& view);

  // LeaderRetrievalListener, from the source.
  void leaderChanged(const std::optional<LeaderInfo>& leader) override;
  void connectionChanged(bool connected) override;

  // Calls `tell` on every view started before this call that is still listening when its turn
  // comes.
  template <typename Tell>
  void tellViews(Tell&& tell);

  std::optional<std::optional<LeaderInfo>> leader_;  // Unset until the source reports.
  std::optional<bool> connected_;                    // Unset until the source tells.
  uint64_t started_ = 0;                             // Views started so far.
  std::vector<View*> order_;                         // Started views, in start order.
  std::unordered_set<View*> listening_;              // The same views, for lookups.
  kj::Own<LeaderRetrieval> source_;                  // Declared last: stopped first.
};

}  // namespace regent::leader

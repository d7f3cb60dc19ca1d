// One leader retrieval followed by many listeners (see the header).
#include "leader/shared_leader_retrieval.h"

#include <algorithm>
#include <utility>

namespace regent::leader {

class SharedLeaderRetrieval::View final : public LeaderRetrieval {
 public:
  explicit View(SharedLeaderRetrieval& shared) : shared_(shared) {}
  ~View() noexcept override { shared_.forget(*this); }
  View(const View&) = delete;
  View& operator=(const View&) = delete;

  void start(LeaderRetrievalListener& listener) override {
    KJ_REQUIRE(listener_ == nullptr, "a leader retrieval view is started once");
    listener_ = &listener;
    shared_.listen(*this);
  }
  kj::Promise<Result<std::optional<LeaderInfo>>> leader() override {
    return shared_.source_->leader();
  }
  kj::Promise<Result<std::vector<ContenderEntry>>> contenders() override {
    return shared_.source_->contenders();
  }
  kj::Promise<Result<LeaderRecordView>> leaderRecord() override {
    return shared_.source_->leaderRecord();
  }

  LeaderRetrievalListener& listener() { return *listener_; }
  uint64_t startNumber = 0;  // Set by listen(): the views started before this one, plus one.

 private:
  SharedLeaderRetrieval& shared_;
  LeaderRetrievalListener* listener_ = nullptr;
};

SharedLeaderRetrieval::SharedLeaderRetrieval(kj::Own<LeaderRetrieval> source)
    : source_(kj::mv(source)) {
  source_->start(*this);
}

// The source goes first: it may still report while it shuts down.
SharedLeaderRetrieval::~SharedLeaderRetrieval() noexcept { source_ = nullptr; }

kj::Own<LeaderRetrieval> SharedLeaderRetrieval::view() { return kj::heap<View>(*this); }

void SharedLeaderRetrieval::listen(View& view) {
  view.startNumber = ++started_;
  order_.push_back(&view);
  listening_.insert(&view);
  // The listener may destroy the view while hearing the replay.
  if (connected_) {
    view.listener().connectionChanged(*connected_);
    if (!listening_.count(&view)) return;
  }
  if (leader_) view.listener().leaderChanged(*leader_);
}

void SharedLeaderRetrieval::forget(View& view) {
  if (listening_.erase(&view) == 0) return;
  order_.erase(std::find(order_.begin(), order_.end(), &view));
}

template <typename Tell>
void SharedLeaderRetrieval::tellViews(Tell&& tell) {
  // A snapshot: listeners may start or destroy views while hearing the change. A view started
  // meanwhile heard the new value in its replay; its start number tells it apart from a
  // destroyed view at the same address.
  const std::vector<View*> views = order_;
  const uint64_t startedBefore = started_;
  for (View* view : views) {
    if (listening_.count(view) && view->startNumber <= startedBefore) tell(view->listener());
  }
}

void SharedLeaderRetrieval::leaderChanged(const std::optional<LeaderInfo>& leader) {
  leader_ = leader;
  tellViews([&](LeaderRetrievalListener& listener) { listener.leaderChanged(leader); });
}

void SharedLeaderRetrieval::connectionChanged(bool connected) {
  connected_ = connected;
  tellViews([&](LeaderRetrievalListener& listener) { listener.connectionChanged(connected); });
}

}  // namespace regent::leader

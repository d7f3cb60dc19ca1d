// A leader retrieval driven by the test, for the LeaderClient and whatever runs on one (the
// TaskExecutor): leader() reads the test's `current` (or fails with `readError`), and announce()
// tells the listener about `current` as a watch would.
#pragma once

#include <kj/async.h>

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "common/result.h"
#include "leader/leader_retrieval.h"

namespace regent::testing {

class HandRetrieval final : public leader::LeaderRetrieval {
 public:
  HandRetrieval(std::shared_ptr<std::optional<leader::LeaderInfo>> current,
                std::shared_ptr<int> reads, std::shared_ptr<std::optional<Error>> readError)
      : current_(std::move(current)), reads_(std::move(reads)), readError_(std::move(readError)) {}

  void start(leader::LeaderRetrievalListener& listener) override { listener_ = &listener; }
  // Tells the listener `current` is the leader now, as the watch of a real retrieval does.
  void announce() {
    if (listener_ != nullptr) listener_->leaderChanged(*current_);
  }
  kj::Promise<Result<std::optional<leader::LeaderInfo>>> leader() override {
    ++*reads_;
    if (*readError_) return Result<std::optional<leader::LeaderInfo>>(**readError_);
    return Result<std::optional<leader::LeaderInfo>>(*current_);
  }
  kj::Promise<Result<std::vector<leader::ContenderEntry>>> contenders() override {
    return Result<std::vector<leader::ContenderEntry>>(std::vector<leader::ContenderEntry>{});
  }

 private:
  std::shared_ptr<std::optional<leader::LeaderInfo>> current_;
  std::shared_ptr<int> reads_;
  std::shared_ptr<std::optional<Error>> readError_;
  leader::LeaderRetrievalListener* listener_ = nullptr;
};

}  // namespace regent::testing

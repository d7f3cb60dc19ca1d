// Test helpers for leader/: a contender and a retrieval listener that record what they hear, in
// one shared, ordered event log, so tests can check the order of grants and revokes across
// contenders on one loop.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "leader/leader_election.h"
#include "leader/leader_info.h"
#include "leader/leader_retrieval.h"

namespace regent::ha {

// gtest's name for a fence in failure messages.
inline void PrintTo(const WriterFence& fence, std::ostream* out) {
  *out << "{epoch " << fence.epoch << ", latch \"" << fence.latchPath << "\"}";
}

}  // namespace regent::ha

namespace regent::leader::testing {

struct ElectionEvent {
  std::string contender;
  bool granted = false;  // false: revoked.
  uint64_t epoch = 0;
  std::string reason;  // Revocations only.
};

using ElectionLog = std::vector<ElectionEvent>;

// Records grants and revokes, and checks the contract on the way: a grant never while leading,
// a revoke only of the open term.
class RecordingContender final : public LeaderContender {
 public:
  RecordingContender(std::string name, ElectionLog& log) : name_(std::move(name)), log_(log) {}

  void grantLeadership(const ha::WriterFence& fence) override {
    const uint64_t epoch = fence.epoch;
    fences_.push_back(fence);
    if (epoch_ != 0) violations_.push_back("granted " + std::to_string(epoch) + " while leading");
    epoch_ = epoch;
    ++grants_;
    log_.push_back({name_, true, epoch, ""});
  }
  void revokeLeadership(uint64_t epoch, const std::string& reason) override {
    if (epoch != epoch_) {
      violations_.push_back("revoked " + std::to_string(epoch) + " while holding " +
                            std::to_string(epoch_));
    }
    epoch_ = 0;
    ++revokes_;
    lastReason_ = reason;
    log_.push_back({name_, false, epoch, reason});
  }

  void contending(const std::string& latchNode) override { latchNodes_.push_back(latchNode); }
  void electionFailed(const Error& error) override {
    if (epoch_ != 0) violations_.push_back("election failed while leading: " + error.message);
    if (!failure_.empty()) violations_.push_back("election failed twice: " + error.message);
    failure_ = error.message;
  }

  const std::string& name() const { return name_; }
  // Every fence granted, in order.
  const std::vector<ha::WriterFence>& fences() const { return fences_; }
  // Every latch node the election reported, in order.
  const std::vector<std::string>& latchNodes() const { return latchNodes_; }
  bool leading() const { return epoch_ != 0; }
  uint64_t epoch() const { return epoch_; }
  int grants() const { return grants_; }
  int revokes() const { return revokes_; }
  const std::string& lastReason() const { return lastReason_; }
  // The message of electionFailed(), "" if it did not fire.
  const std::string& failure() const { return failure_; }
  const std::vector<std::string>& violations() const { return violations_; }

 private:
  std::string name_;
  ElectionLog& log_;
  uint64_t epoch_ = 0;
  int grants_ = 0;
  int revokes_ = 0;
  std::string lastReason_;
  std::string failure_;
  std::vector<std::string> violations_;
  std::vector<std::string> latchNodes_;
  std::vector<ha::WriterFence> fences_;
};

// Checks the whole log: at no point two open terms, and each grant's epoch is exactly one above
// the previous grant's. Returns a description of the first violation, or "" if none.
inline std::string checkElectionLog(const ElectionLog& log, uint64_t firstEpoch = 0) {
  std::optional<std::string> holder;
  uint64_t holderEpoch = 0;
  uint64_t lastGrant = firstEpoch;
  for (size_t i = 0; i < log.size(); ++i) {
    const ElectionEvent& event = log[i];
    std::string where = "event " + std::to_string(i) + " (" + event.contender + "): ";
    if (event.granted) {
      if (holder) {
        return where + "granted epoch " + std::to_string(event.epoch) + " while " + *holder +
               " holds epoch " + std::to_string(holderEpoch);
      }
      if (lastGrant != 0 && event.epoch != lastGrant + 1) {
        return where + "granted epoch " + std::to_string(event.epoch) + " after epoch " +
               std::to_string(lastGrant);
      }
      holder = event.contender;
      holderEpoch = event.epoch;
      lastGrant = event.epoch;
    } else {
      if (!holder || *holder != event.contender || holderEpoch != event.epoch) {
        return where + "revoked epoch " + std::to_string(event.epoch) + " it does not hold";
      }
      holder.reset();
    }
  }
  return "";
}

// Records every leader the retrieval reports, and connection changes.
class RecordingListener final : public LeaderRetrievalListener {
 public:
  void leaderChanged(const std::optional<LeaderInfo>& leader) override {
    changes.push_back(leader);
  }
  void connectionChanged(bool connected) override { connection.push_back(connected); }

  std::optional<LeaderInfo> current() const {
    return changes.empty() ? std::nullopt : changes.back();
  }

  std::vector<std::optional<LeaderInfo>> changes;
  std::vector<bool> connection;
};

inline ContenderInfo contenderInfoForTests(const std::string& masterId) {
  return ContenderInfo{
      .masterId = masterId,
      .rpcAddress = "127.0.0.1:6123",
      .httpAddress = "127.0.0.1:8081",
      .host = "localhost",
      .pid = 4242,
      .version = "0.1.0",
      .startedAtMs = 1700000000000,
  };
}

}  // namespace regent::leader::testing

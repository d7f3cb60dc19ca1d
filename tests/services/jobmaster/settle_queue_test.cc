// The settle queue the JobMasters of a term share: each queued entry settles once per round, in
// the order queued, once the event loop has nothing else queued; what is queued during a round
// waits for the next; an entry taken out (or destroyed) by another's settle does not settle; a
// settle that throws is reported and stops nothing else.
#include <gtest/gtest.h>
#include <kj/async.h>
#include <kj/debug.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/task_set_error_logger.h"
#include "services/jobmaster/job_master_term.h"

namespace regent::jobmaster {
namespace {

class SettleQueueTest : public ::testing::Test {
 protected:
  // An entry that records its settles in `log` and runs `onSettle` (if any) from its settle.
  class Recorder final : public SettleQueue::Entry {
   public:
    Recorder(SettleQueue& queue, std::string name, std::vector<std::string>& log)
        : queue_(queue), name_(std::move(name)), log_(log) {}
    ~Recorder() { queue_.remove(*this); }
    void settleNow() override {
      log_.push_back(name_);
      if (onSettle) onSettle();
    }
    std::function<void()> onSettle;

   private:
    SettleQueue& queue_;
    const std::string name_;
    std::vector<std::string>& log_;
  };

  // Counts the failures reported to it.
  class Failures final : public kj::TaskSet::ErrorHandler {
   public:
    void taskFailed(kj::Exception&& exception) override {
      descriptions.push_back(exception.getDescription().cStr());
    }
    std::vector<std::string> descriptions;
  };

  ~SettleQueueTest() noexcept override {}

  // Another event queued now, recorded as `name` when it runs.
  void later(const std::string& name) {
    other_.add(kj::evalLater([this, name] { log_.push_back(name); }));
  }

  kj::EventLoop loop_;
  kj::WaitScope waitScope_{loop_};
  TaskSetErrorLogger errors_{"settle queue test"};
  Failures failures_;
  SettleQueue queue_{failures_};
  kj::TaskSet other_{errors_};
  std::vector<std::string> log_;
};

TEST_F(SettleQueueTest, QueuedEntriesSettleOnceInOrderAfterTheOtherQueuedEvents) {
  Recorder a(queue_, "a", log_), b(queue_, "b", log_);
  queue_.add(b);
  queue_.add(a);
  queue_.add(b);  // Already queued: settles once.
  later("other");
  EXPECT_TRUE(queue_.queued(a));
  waitScope_.poll();
  EXPECT_EQ(log_, (std::vector<std::string>{"other", "b", "a"}));
  EXPECT_FALSE(queue_.queued(a));
  EXPECT_FALSE(queue_.queued(b));

  // Queued again after its round: settles again.
  queue_.add(a);
  waitScope_.poll();
  EXPECT_EQ(log_, (std::vector<std::string>{"other", "b", "a", "a"}));
}

TEST_F(SettleQueueTest, AnEntryQueuedDuringARoundSettlesInTheNextAfterEventsQueuedMeanwhile) {
  Recorder a(queue_, "a", log_), b(queue_, "b", log_);
  bool first = true;
  a.onSettle = [&] {
    if (!std::exchange(first, false)) return;
    queue_.add(b);
    queue_.add(a);  // Itself again, from its own settle.
    later("other");
  };
  queue_.add(a);
  waitScope_.poll();
  EXPECT_EQ(log_, (std::vector<std::string>{"a", "other", "b", "a"}));
}

TEST_F(SettleQueueTest, AnEntryTakenOutOrDestroyedByAnotherSettleDoesNotSettle) {
  Recorder a(queue_, "a", log_), b(queue_, "b", log_);
  auto c = std::make_unique<Recorder>(queue_, "c", log_);
  a.onSettle = [&] {
    queue_.remove(b);
    c.reset();
  };
  queue_.add(a);
  queue_.add(b);
  queue_.add(*c);
  waitScope_.poll();
  EXPECT_EQ(log_, (std::vector<std::string>{"a"}));
  EXPECT_FALSE(queue_.queued(b));
}

TEST_F(SettleQueueTest, ASettleThatThrowsIsReportedAndTheRestOfTheRoundAndLaterRoundsSettle) {
  Recorder a(queue_, "a", log_), b(queue_, "b", log_);
  a.onSettle = [] { KJ_FAIL_REQUIRE("settle broke"); };
  queue_.add(a);
  queue_.add(b);
  waitScope_.poll();
  EXPECT_EQ(log_, (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(failures_.descriptions.size(), 1u);
  EXPECT_NE(failures_.descriptions[0].find("settle broke"), std::string::npos);
  // The queue still serves: both settle again when asked.
  a.onSettle = nullptr;
  queue_.add(b);
  queue_.add(a);
  waitScope_.poll();
  EXPECT_EQ(log_, (std::vector<std::string>{"a", "b", "b", "a"}));
  EXPECT_FALSE(queue_.queued(a));
}

TEST_F(SettleQueueTest, AnEntryMayDestroyItselfInItsSettle) {
  auto a = std::make_unique<Recorder>(queue_, "a", log_);
  Recorder b(queue_, "b", log_);
  a->onSettle = [&] { a.reset(); };
  queue_.add(*a);
  queue_.add(b);
  waitScope_.poll();
  EXPECT_EQ(log_, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(a, nullptr);
}

}  // namespace
}  // namespace regent::jobmaster

// The accept loop out of descriptors: with a real listening socket in this process, whose
// descriptors the test fills up to its soft limit.
#include "common/accept_loop.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <vector>

namespace regent {
namespace {

constexpr auto kBound = 20 * kj::SECONDS;

// A blocking connection to 127.0.0.1:`port` (the kernel completes it into the listen backlog).
int connectTo(uint port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to), 0) << std::strerror(errno);
  return fd;
}

class AcceptLoopTest : public ::testing::Test {
 protected:
  ~AcceptLoopTest() noexcept override = default;

  void SetUp() override { ::getrlimit(RLIMIT_NOFILE, &original_); }
  void TearDown() override {
    release();
    ::setrlimit(RLIMIT_NOFILE, &original_);
  }

  // Opens /dev/null until the process has no descriptor left (its soft limit lowered first, so
  // this stays quick); false if that did not end in EMFILE.
  bool exhaust() {
    struct rlimit lowered = original_;
    lowered.rlim_cur = std::min<rlim_t>(original_.rlim_cur, 512);
    if (::setrlimit(RLIMIT_NOFILE, &lowered) != 0) return false;
    while (fillers_.size() < 1000) {
      const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd < 0) return errno == EMFILE;
      fillers_.push_back(fd);
    }
    return false;
  }
  void release() {
    for (int fd : fillers_) ::close(fd);
    fillers_.clear();
  }

  // Runs the loop until `condition` holds; false after kBound.
  bool runUntil(const std::function<bool()>& condition) {
    const kj::TimePoint deadline = timer().now() + kBound;
    while (!condition()) {
      if (timer().now() >= deadline) return false;
      timer().afterDelay(2 * kj::MILLISECONDS).wait(io_.waitScope);
    }
    return true;
  }

  kj::Timer& timer() { return io_.provider->getTimer(); }

  kj::AsyncIoContext io_ = kj::setupAsyncIo();
  struct rlimit original_ {};
  std::vector<int> fillers_;
};

TEST_F(AcceptLoopTest,
       OutOfDescriptorsItCountsClosesWaitingConnectionsAndAcceptsAgainOnceTheyFree) {
  auto address = io_.provider->getNetwork().parseAddress("127.0.0.1:0").wait(io_.waitScope);
  auto receiver = address->listen();
  std::vector<kj::Own<kj::AsyncIoStream>> served;
  bool failing = false;
  AcceptLoop accepting(
      timer(), *receiver,
      {.name = "test",
       .address = "127.0.0.1:" + std::to_string(receiver->getPort()),
       .initialBackoff = Duration(1),
       .maxBackoff = Duration(20),
       .warnInterval = Duration(50)},
      [&](kj::AuthenticatedStream&& accepted) { served.push_back(kj::mv(accepted.stream)); });
  accepting.onFailingChanged([&](bool now) { failing = now; });

  const int early = connectTo(receiver->getPort());
  ASSERT_TRUE(runUntil([&] { return served.size() == 1; }));
  served.clear();
  ::close(early);
  // Waits in the backlog: the loop does not run again before descriptors are gone.
  const int waiting = connectTo(receiver->getPort());
  const bool exhausted = exhaust();
  ASSERT_TRUE(exhausted);
  ASSERT_TRUE(runUntil([&] { return accepting.shed() >= 1; }));
  EXPECT_GE(accepting.failures(AcceptFailure::kProcessDescriptors), 1u);
  EXPECT_TRUE(accepting.failingSince().has_value());
  EXPECT_TRUE(failing);
  EXPECT_TRUE(served.empty());
  // The waiting client was told at once: its connection ended.
  char byte;
  EXPECT_EQ(::recv(waiting, &byte, 1, 0), 0);
  ::close(waiting);

  release();
  const int later = connectTo(receiver->getPort());
  ASSERT_TRUE(runUntil([&] { return served.size() == 1; }));
  EXPECT_FALSE(accepting.failingSince().has_value());
  EXPECT_FALSE(failing);
  ::close(later);
}

// With no connection waiting, accept() finds an empty backlog: that must not pass for serving
// again while the process still has no descriptor for the next connection (a leader would
// otherwise never hand over, its run of failures starting anew with every connection). It does
// not, because Linux's accept4 takes a descriptor before it looks at the backlog: out of them,
// it fails with EMFILE even when no connection waits, and an empty backlog (EAGAIN) means one
// was free.
TEST_F(AcceptLoopTest, AnEmptyBacklogWhileOutOfDescriptorsDoesNotEndTheRunOfFailures) {
  auto address = io_.provider->getNetwork().parseAddress("127.0.0.1:0").wait(io_.waitScope);
  auto receiver = address->listen();
  std::vector<kj::Own<kj::AsyncIoStream>> served;
  std::vector<bool> changes;
  AcceptLoop accepting(
      timer(), *receiver,
      {.name = "test",
       .address = "127.0.0.1:" + std::to_string(receiver->getPort()),
       .initialBackoff = Duration(1),
       .maxBackoff = Duration(5),
       .warnInterval = Duration(50)},
      [&](kj::AuthenticatedStream&& accepted) { served.push_back(kj::mv(accepted.stream)); });
  accepting.onFailingChanged([&](bool now) { changes.push_back(now); });

  const int waiting = connectTo(receiver->getPort());
  const bool exhausted = exhaust();
  ASSERT_TRUE(exhausted);
  ASSERT_TRUE(runUntil([&] { return accepting.shed() >= 1; }));
  const auto since = accepting.failingSince();
  ASSERT_TRUE(since.has_value());
  // Many backoff delays go by with an empty backlog: still failing, the same run. (`waiting`
  // stays open: closing it would free a descriptor of this process.)
  const kj::TimePoint until = timer().now() + 200 * kj::MILLISECONDS;
  while (timer().now() < until && changes.size() == 1) {
    timer().afterDelay(2 * kj::MILLISECONDS).wait(io_.waitScope);
  }
  EXPECT_EQ(changes, std::vector<bool>{true});
  EXPECT_EQ(accepting.failingSince(), since);

  release();
  ::close(waiting);
  const int later = connectTo(receiver->getPort());
  ASSERT_TRUE(runUntil([&] { return served.size() == 1; }));
  EXPECT_EQ(changes, (std::vector<bool>{true, false}));
  EXPECT_FALSE(accepting.failingSince().has_value());
  ::close(later);
}

TEST(AcceptFailure, IsClassifiedFromKjsDescriptionOfTheSyscallError) {
  auto failure = [](int error) {
    return classifyAcceptFailure(kj::Exception(kj::Exception::Type::OVERLOADED, __FILE__, __LINE__,
                                               kj::str("accept: ", std::strerror(error))));
  };
  EXPECT_EQ(failure(EMFILE), AcceptFailure::kProcessDescriptors);
  EXPECT_EQ(failure(ENFILE), AcceptFailure::kSystemDescriptors);
  EXPECT_EQ(failure(ENOBUFS), AcceptFailure::kMemory);
  EXPECT_EQ(failure(ENOMEM), AcceptFailure::kMemory);
  EXPECT_EQ(failure(EINVAL), AcceptFailure::kOther);
  EXPECT_STREQ(acceptFailureLabel(AcceptFailure::kProcessDescriptors), "emfile");
}

}  // namespace
}  // namespace regent

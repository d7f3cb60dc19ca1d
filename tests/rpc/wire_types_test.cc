// Hand-written round trips of the central wire types through the generated C++ API, packed as
// they travel over RPC and are kept in the stores.
#include <capnp/message.h>
#include <capnp/serialize-packed.h>
#include <gtest/gtest.h>
#include <kj/io.h>

#include <string>

#include "rpc/schema/cluster.capnp.h"
#include "rpc/schema/common.capnp.h"
#include "rpc/schema/gateways.capnp.h"
#include "rpc/schema/jobs.capnp.h"
#include "tests/rpc/wire_schema_test_util.h"

namespace regent::wire {
namespace {

// Writes `message` packed and hands a reader of the bytes to `check`.
template <typename Root, typename Check>
void readBackPacked(capnp::MessageBuilder& message, Check&& check) {
  auto bytes = testing::writePacked(message);
  kj::ArrayInputStream in(bytes);
  capnp::PackedMessageReader reader(in);
  check(reader.getRoot<Root>());
}

void setId(Id128::Builder id, uint64_t hi, uint64_t lo) {
  id.setHi(hi);
  id.setLo(lo);
}

TEST(WireTypes, JobGraphWithTwoVerticesAndAnEdgeRoundTrips) {
  capnp::MallocMessageBuilder message;
  auto graph = message.initRoot<JobGraph>();
  setId(graph.initJobId(), 0x0123456789abcdefULL, 0xfedcba9876543210ULL);
  graph.setName("etl");
  graph.setSubmittedAtMs(1700000000123);
  auto vertices = graph.initVertices(2);

  auto extract = vertices[0];
  extract.setName("extract");
  extract.setParallelism(4);
  auto extractArgv = extract.initCommand().initArgv(2);
  extractArgv.set(0, "/bin/extract");
  extractArgv.set(1, "--all");
  auto env = extract.getCommand().initEnv(1);
  env[0].setName("MODE");
  env[0].setValue("full");
  extract.getCommand().setWorkingDir("/data");
  extract.initResources().setCpuMillis(500);
  extract.getResources().setMemoryBytes(256ULL << 20);

  auto load = vertices[1];
  load.setName("load");
  load.setParallelism(1);
  load.initCommand().initArgv(1).set(0, "/bin/load");
  load.initResources().setCpuMillis(1000);
  load.initUpstream(1).set(0, "extract");

  auto fixedDelay = graph.initRestartStrategy().initFixedDelay();
  fixedDelay.setAttempts(3);
  fixedDelay.setDelayMs(10000);

  readBackPacked<JobGraph>(message, [](JobGraph::Reader read) {
    EXPECT_EQ(read.getJobId().getHi(), 0x0123456789abcdefULL);
    EXPECT_EQ(read.getJobId().getLo(), 0xfedcba9876543210ULL);
    EXPECT_EQ(read.getName(), "etl");
    EXPECT_EQ(read.getSubmittedAtMs(), 1700000000123);
    ASSERT_EQ(read.getVertices().size(), 2u);

    auto extract = read.getVertices()[0];
    EXPECT_EQ(extract.getName(), "extract");
    EXPECT_EQ(extract.getParallelism(), 4u);
    ASSERT_EQ(extract.getCommand().getArgv().size(), 2u);
    EXPECT_EQ(extract.getCommand().getArgv()[0], "/bin/extract");
    EXPECT_EQ(extract.getCommand().getArgv()[1], "--all");
    ASSERT_EQ(extract.getCommand().getEnv().size(), 1u);
    EXPECT_EQ(extract.getCommand().getEnv()[0].getName(), "MODE");
    EXPECT_EQ(extract.getCommand().getEnv()[0].getValue(), "full");
    EXPECT_EQ(extract.getCommand().getWorkingDir(), "/data");
    EXPECT_EQ(extract.getResources().getCpuMillis(), 500u);
    EXPECT_EQ(extract.getResources().getMemoryBytes(), 256ULL << 20);
    EXPECT_EQ(extract.getUpstream().size(), 0u);

    auto load = read.getVertices()[1];
    EXPECT_EQ(load.getName(), "load");
    ASSERT_EQ(load.getUpstream().size(), 1u);
    EXPECT_EQ(load.getUpstream()[0], "extract");

    ASSERT_TRUE(read.hasRestartStrategy());
    ASSERT_EQ(read.getRestartStrategy().which(), RestartStrategy::FIXED_DELAY);
    EXPECT_EQ(read.getRestartStrategy().getFixedDelay().getAttempts(), 3u);
    EXPECT_EQ(read.getRestartStrategy().getFixedDelay().getDelayMs(), 10000u);
  });
}

TEST(WireTypes, SlotReportWithRunningAttemptsRoundTrips) {
  capnp::MallocMessageBuilder message;
  auto report = message.initRoot<SlotReport>();
  setId(report.initResourceId(), 7, 8);
  auto slots = report.initSlots(2);

  auto busy = slots[0];
  setId(busy.initSlotId().initResourceId(), 7, 8);
  busy.getSlotId().setSlotIndex(0);
  busy.initProfile().setCpuMillis(2000);
  setId(busy.initAllocationId(), 11, 12);
  setId(busy.initJobId(), 21, 22);
  auto attempts = busy.initRunningAttempts(2);
  for (uint i = 0; i < 2; ++i) {
    setId(attempts[i].initAttemptId(), 31, 40 + i);
    setId(attempts[i].initJobId(), 21, 22);
    attempts[i].setVertexName("map");
    attempts[i].setSubtaskIndex(i);
    attempts[i].setAttemptNumber(1);
    attempts[i].setState(ExecutionState::RUNNING);
    attempts[i].setPid(4000 + i);
    attempts[i].setStartedAtMs(1700000000000 + i);
  }

  auto free = slots[1];
  setId(free.initSlotId().initResourceId(), 7, 8);
  free.getSlotId().setSlotIndex(1);
  free.initProfile().setCpuMillis(2000);

  readBackPacked<SlotReport>(message, [](SlotReport::Reader read) {
    EXPECT_EQ(read.getResourceId().getLo(), 8u);
    ASSERT_EQ(read.getSlots().size(), 2u);

    auto busy = read.getSlots()[0];
    EXPECT_EQ(busy.getSlotId().getSlotIndex(), 0u);
    EXPECT_EQ(busy.getProfile().getCpuMillis(), 2000u);
    ASSERT_TRUE(busy.hasAllocationId());
    EXPECT_EQ(busy.getAllocationId().getLo(), 12u);
    ASSERT_TRUE(busy.hasJobId());
    EXPECT_EQ(busy.getJobId().getHi(), 21u);
    ASSERT_EQ(busy.getRunningAttempts().size(), 2u);
    for (uint i = 0; i < 2; ++i) {
      auto attempt = busy.getRunningAttempts()[i];
      EXPECT_EQ(attempt.getAttemptId().getLo(), 40u + i);
      EXPECT_EQ(attempt.getVertexName(), "map");
      EXPECT_EQ(attempt.getSubtaskIndex(), i);
      EXPECT_EQ(attempt.getAttemptNumber(), 1u);
      EXPECT_EQ(attempt.getState(), ExecutionState::RUNNING);
      EXPECT_EQ(attempt.getPid(), 4000u + i);
      EXPECT_EQ(attempt.getStartedAtMs(), 1700000000000 + i);
    }

    // A free slot is one without allocation and job.
    auto free = read.getSlots()[1];
    EXPECT_EQ(free.getSlotId().getSlotIndex(), 1u);
    EXPECT_FALSE(free.hasAllocationId());
    EXPECT_FALSE(free.hasJobId());
    EXPECT_EQ(free.getRunningAttempts().size(), 0u);
  });
}

TEST(WireTypes, FailureWithFencingErrorRoundTrips) {
  capnp::MallocMessageBuilder message;
  auto failure = message.initRoot<Failure>();
  failure.setMessage("epoch 6 is not the current epoch 7");
  auto fencing = failure.initFencing();
  fencing.setExpected(7);
  fencing.setReceived(6);

  readBackPacked<Failure>(message, [](Failure::Reader read) {
    EXPECT_EQ(read.getMessage(), "epoch 6 is not the current epoch 7");
    ASSERT_EQ(read.which(), Failure::FENCING);
    EXPECT_EQ(read.getFencing().getExpected(), 7u);
    EXPECT_EQ(read.getFencing().getReceived(), 6u);
  });
}

TEST(WireTypes, NotLeaderFailureNamesTheLeaderRoundTrips) {
  capnp::MallocMessageBuilder message;
  auto failure = message.initRoot<Failure>();
  failure.setMessage("not the leader");
  auto leader = failure.initNotLeader().initLeader();
  leader.setEpoch(42);
  leader.setMasterId("master-b");
  leader.setRpcAddress("10.0.0.2:6123");
  leader.setStatus(LeaderStatus::SERVING);

  readBackPacked<Failure>(message, [](Failure::Reader read) {
    ASSERT_EQ(read.which(), Failure::NOT_LEADER);
    ASSERT_EQ(read.getNotLeader().which(), LeaderView::LEADER);
    auto leader = read.getNotLeader().getLeader();
    EXPECT_EQ(leader.getEpoch(), 42u);
    EXPECT_EQ(leader.getMasterId(), "master-b");
    EXPECT_EQ(leader.getRpcAddress(), "10.0.0.2:6123");
    EXPECT_EQ(leader.getStatus(), LeaderStatus::SERVING);
  });
}

TEST(WireTypes, ResultWithoutFailureMeansSuccess) {
  // Success is a result whose failure pointer was never set; its other fields carry the answer.
  capnp::MallocMessageBuilder message;
  setId(message.initRoot<DispatcherGateway::SubmitJobResults>().initJobId(), 1, 2);
  readBackPacked<DispatcherGateway::SubmitJobResults>(
      message, [](DispatcherGateway::SubmitJobResults::Reader read) {
        EXPECT_FALSE(read.hasFailure());
        EXPECT_EQ(read.getJobId().getLo(), 2u);
      });
}

}  // namespace
}  // namespace regent::wire

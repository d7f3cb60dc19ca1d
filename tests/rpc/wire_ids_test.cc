// The conversion between typed ids and wire ids, and the schema's enum names (rpc/wire_ids.h).
#include "rpc/wire_ids.h"

#include <capnp/message.h>
#include <gtest/gtest.h>

#include "rpc/schema/jobs.capnp.h"

namespace regent::wire {
namespace {

TEST(WireIds, ATypedIdSurvivesTheWireWithBothHalves) {
  capnp::MallocMessageBuilder message;
  auto result = message.initRoot<JobResult>();
  const JobId id(0x0123456789abcdefULL, 0xfedcba9876543210ULL);
  setWireId(result.initJobId(), id);
  EXPECT_EQ(result.getJobId().getHi(), 0x0123456789abcdefULL);
  EXPECT_EQ(result.getJobId().getLo(), 0xfedcba9876543210ULL);
  EXPECT_EQ(idFromWire<JobId>(result.asReader().getJobId()), id);
}

TEST(WireIds, AnAbsentOrZeroIdReadsAsNoId) {
  capnp::MallocMessageBuilder message;
  auto result = message.initRoot<JobResult>();
  EXPECT_FALSE(idFromWireIfSet<JobId>(result.hasJobId(), result.asReader().getJobId()));
  result.initJobId();
  EXPECT_FALSE(idFromWireIfSet<JobId>(result.hasJobId(), result.asReader().getJobId()));
  setWireId(result.initJobId(), JobId(0, 1));
  EXPECT_EQ(idFromWireIfSet<JobId>(result.hasJobId(), result.asReader().getJobId()), JobId(0, 1));
}

TEST(WireIds, EnumNamesAreTheSchemasNames) {
  EXPECT_EQ(enumName(JobState::RUNNING), "running");
  EXPECT_EQ(enumName(JobState::SUSPENDED), "suspended");
  EXPECT_EQ(enumName(ExecutionState::RECONCILING), "reconciling");
  EXPECT_EQ(enumNameUpper(JobState::CANCELED), "CANCELED");
}

TEST(WireIds, AnEnumValueFromANewerPeerIsNamedByItsNumber) {
  EXPECT_EQ(enumName(static_cast<JobState>(200)), "unknown(200)");
  EXPECT_EQ(enumNameUpper(static_cast<JobState>(200)), "UNKNOWN(200)");
}

}  // namespace
}  // namespace regent::wire

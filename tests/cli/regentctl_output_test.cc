// regentctl's rendering of the leader's workers and slots: the tables people read and the JSON
// lines scripts read (the same fields as /v1/workers).
#include "cli/regentctl_output.h"

#include <capnp/message.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/ids.h"
#include "rpc/schema/gateways.capnp.h"
#include "rpc/wire_ids.h"

namespace regent::cli {
namespace {

// The cell of `row` in the column headed `name` in `header` (up to the next two spaces).
std::string cell(const std::string& header, const std::string& row, const std::string& name) {
  const size_t at = header.find(name);
  if (at == std::string::npos || at >= row.size()) return "<none>";
  return row.substr(at, row.find("  ", at) - at);
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Worker 0xab:1 "w1" with two slots (0 free, 1 allocated to job 0x1234:1 as 0xa1:1), heard of
// 2.5 s before "now"; worker 0xab:2 "w\x1b2" registered, not reported yet.
class WorkersOutputTest : public ::testing::Test {
 protected:
  WorkersOutputTest() {
    auto workers = message_.initRoot<wire::DispatcherGateway::ListTaskExecutorsResults>()
                       .initTaskExecutors(2);
    auto first = workers[0];
    auto registration = first.initRegistration();
    wire::setWireId(registration.initResourceId(), ResourceId(0xab, 1));
    registration.setHost("w1");
    registration.setPid(11);
    registration.setHttpAddress("10.0.0.5:8082");
    registration.setDataAddress("10.0.0.5:9001");
    registration.setNumberOfSlots(2);
    first.setRegisteredAtMs(kNow - 60000);
    first.setLastHeartbeatAtMs(kNow - 2500);
    auto slots = first.initSlots(2);
    for (uint32_t i = 0; i < 2; ++i) {
      slots[i].initSlotId().setSlotIndex(i);
      slots[i].initProfile().setCpuMillis(500);
      slots[i].getProfile().setMemoryBytes(uint64_t{1} << 30);
    }
    wire::setWireId(slots[1].initAllocationId(), AllocationId(0xa1, 1));
    wire::setWireId(slots[1].initJobId(), JobId(0x1234, 1));
    auto second = workers[1].initRegistration();
    wire::setWireId(second.initResourceId(), ResourceId(0xab, 2));
    second.setHost("w\x1b" "2");
    second.setNumberOfSlots(4);
    second.setProviderWorkerId("process:e3-1");
    workers[1].setRegisteredAtMs(kNow);
  }

  ~WorkersOutputTest() noexcept override = default;

  capnp::List<wire::TaskExecutorInfo>::Reader workers() {
    return message_.getRoot<wire::DispatcherGateway::ListTaskExecutorsResults>()
        .asReader()
        .getTaskExecutors();
  }

  static constexpr int64_t kNow = 1763980000000;  // 2025-11-24T10:26:40.000Z
  capnp::MallocMessageBuilder message_;
};

TEST_F(WorkersOutputTest, TheWorkersTableHasOneAlignedRowPerWorker) {
  auto table = lines(workersTable(workers(), kNow));
  ASSERT_EQ(table.size(), 3u);
  EXPECT_EQ(table[0].find("RESOURCE ID"), 0u);
  const size_t host = table[0].find("HOST");
  const size_t address = table[0].find("ADDRESS");
  const size_t heartbeat = table[0].find("LAST HEARTBEAT");
  ASSERT_NE(heartbeat, std::string::npos);
  EXPECT_EQ(table[1].find(ResourceId(0xab, 1).toHex()), 0u);
  EXPECT_EQ(table[1].find("w1"), host);
  EXPECT_EQ(table[1].find("10.0.0.5:8082"), address);
  EXPECT_EQ(table[1].substr(heartbeat), "2.5s ago");
  EXPECT_EQ(cell(table[0], table[1], "SLOTS"), "2");
  EXPECT_EQ(cell(table[0], table[1], "FREE"), "1");
  EXPECT_EQ(cell(table[0], table[1], "REGISTERED"), "2025-11-24T10:25:40.000Z");
  // Not reported yet: its slot count, no free count, no heartbeat; the escape is escaped.
  EXPECT_EQ(table[2].find("\x1b"), std::string::npos) << table[2];
  EXPECT_EQ(cell(table[0], table[2], "SLOTS"), "4");
  EXPECT_EQ(cell(table[0], table[2], "FREE"), "-");
  EXPECT_EQ(cell(table[0], table[2], "REGISTERED"), "2025-11-24T10:26:40.000Z");
  EXPECT_EQ(table[2].substr(heartbeat), "-");
  // Who started each: by hand, or a resource provider.
  EXPECT_EQ(cell(table[0], table[1], "STARTED BY"), "-");
  EXPECT_EQ(cell(table[0], table[2], "STARTED BY"), "process:e3-1");
}

TEST(StartedWorkersOutput, ListsTheStartedWorkersNotRegisteredWithTheirPhase) {
  constexpr int64_t kNow = 1763980000000;
  capnp::MallocMessageBuilder message;
  auto started = message.initRoot<wire::DispatcherGateway::ListTaskExecutorsResults>()
                     .initStartedWorkers(3);
  started[0].setProviderWorkerId("process:e3-1");
  started[0].setPhase("registered");
  started[1].setProviderWorkerId("process:e3-2");
  started[1].setPhase("pending registration");
  started[1].setSinceMs(kNow - 1500);
  started[2].setProviderWorkerId("process:e2-7");
  started[2].setPhase("releasing");
  started[2].setSinceMs(kNow - 300);
  started[2].setRecovered(true);
  auto table = lines(startedWorkersTable(started.asReader(), kNow));
  ASSERT_EQ(table.size(), 4u);  // A title, the header, the two not registered.
  EXPECT_NE(table[0].find("not registered"), std::string::npos) << table[0];
  EXPECT_EQ(cell(table[1], table[2], "STARTED WORKER"), "process:e3-2");
  EXPECT_EQ(cell(table[1], table[2], "PHASE"), "pending registration");
  EXPECT_EQ(cell(table[1], table[2], "SINCE"), "1.5s ago");
  EXPECT_EQ(table[2].substr(table[1].find("FROM")), "this leader");
  EXPECT_EQ(table[3].substr(table[1].find("FROM")), "an earlier leader");
  // Every started worker registered: nothing to add below the workers table.
  capnp::MallocMessageBuilder allRegistered;
  auto only = allRegistered.initRoot<wire::DispatcherGateway::ListTaskExecutorsResults>()
                  .initStartedWorkers(1);
  only[0].setProviderWorkerId("process:e3-1");
  only[0].setPhase("registered");
  EXPECT_EQ(startedWorkersTable(only.asReader(), kNow), "");
}

TEST_F(WorkersOutputTest, TheSlotsTableHasOneRowPerReportedSlot) {
  auto table = lines(slotsTable(workers()));
  ASSERT_EQ(table.size(), 3u);
  EXPECT_EQ(table[0].find("WORKER"), 0u);
  for (const char* column : {"INDEX", "CPU", "MEMORY", "STATE", "JOB", "ALLOCATION"}) {
    EXPECT_NE(table[0].find(column), std::string::npos) << column;
  }
  const std::string worker = ResourceId(0xab, 1).toHex();
  EXPECT_EQ(table[1], worker + "  0      0.500  1GiB    FREE       -" +
                          std::string(33, ' ') + "-");
  EXPECT_EQ(table[2], worker + "  1      0.500  1GiB    ALLOCATED  " + JobId(0x1234, 1).toHex() +
                          "  " + AllocationId(0xa1, 1).toHex());
}

TEST_F(WorkersOutputTest, JsonLinesCarryTheFieldsOfV1Workers) {
  auto workerLines = lines(workersJsonLines(workers()));
  ASSERT_EQ(workerLines.size(), 2u);
  auto first = nlohmann::json::parse(workerLines[0]);
  EXPECT_EQ(first["resource_id"], ResourceId(0xab, 1).toHex());
  EXPECT_EQ(first["host"], "w1");
  EXPECT_EQ(first["pid"], 11);
  EXPECT_EQ(first["http_address"], "10.0.0.5:8082");
  EXPECT_EQ(first["data_address"], "10.0.0.5:9001");
  EXPECT_EQ(first["registered_at_ms"], kNow - 60000);
  EXPECT_EQ(first["last_heartbeat_ms"], kNow - 2500);
  ASSERT_EQ(first["slots"].size(), 2u);
  EXPECT_EQ(first["slots"][1]["state"], "ALLOCATED");
  EXPECT_EQ(first["slots"][1]["allocation_id"], AllocationId(0xa1, 1).toHex());
  EXPECT_EQ(nlohmann::json::parse(workerLines[1])["host"], "w\x1b" "2");  // JSON escapes it.

  auto slotLines = lines(slotsJsonLines(workers()));
  ASSERT_EQ(slotLines.size(), 2u);
  auto free = nlohmann::json::parse(slotLines[0]);
  EXPECT_EQ(free["resource_id"], ResourceId(0xab, 1).toHex());
  EXPECT_EQ(free["host"], "w1");
  EXPECT_EQ(free["index"], 0);
  EXPECT_EQ(free["cpu_millis"], 500);
  EXPECT_EQ(free["memory_bytes"], uint64_t{1} << 30);
  EXPECT_EQ(free["state"], "FREE");
  EXPECT_TRUE(free["job_id"].is_null());
  EXPECT_EQ(nlohmann::json::parse(slotLines[1])["job_id"], JobId(0x1234, 1).toHex());
}

}  // namespace
}  // namespace regent::cli

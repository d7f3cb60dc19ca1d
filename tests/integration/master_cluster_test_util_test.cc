// Tests of the helpers the multi-process tests rely on: the event-line parser (text and JSON
// log formats) and the check of leadership terms.
#include "tests/integration/master_cluster_test_util.h"

#include <gtest/gtest.h>

namespace regent::testing {
namespace {

using Kind = MasterEvent::Kind;

TEST(MasterEventLines, EveryEventLineParsesInTextAndJsonFormat) {
  const std::string text =
      "2026-11-21T10:58:01.917+00:00 info  [master] master starting master_id=aa pid=42 "
      "ha_mode=zookeeper\n"
      "2026-11-21T10:58:01.918+00:00 info  [master] contending master_id=aa latch=m-0000000003\n"
      "2026-11-21T10:58:01.919+00:00 info  [master] leadership granted epoch=7 master_id=aa "
      "mono_us=100 wall_ms=200\n"
      "2026-11-21T10:58:01.920+00:00 info  [master] leader serving epoch=7 master_id=aa\n"
      "2026-11-21T10:58:01.921+00:00 info  [master] handover requested master_id=aa mono_us=300 "
      "wall_ms=400\n"
      "2026-11-21T10:58:01.922+00:00 info  [master] leadership revoked epoch=7 master_id=aa "
      "reason=\"handed over\" mono_us=301 wall_ms=401\n"
      "2026-11-21T10:58:01.923+00:00 info  [master] handover done master_id=aa mono_us=302 "
      "wall_ms=402\n"
      "2026-11-21T10:58:01.924+00:00 info  [master] master exiting master_id=aa code=0\n"
      "2026-11-21T10:58:01.925+00:00 info  [master] zookeeper: something else\n"
      "an unfinished line without a newline: leader serving epoch=9 master_id=aa";
  const auto events = parseMasterEvents(text);
  ASSERT_EQ(events.size(), 8u);
  EXPECT_EQ(events[0].kind, Kind::kStarting);
  EXPECT_EQ(events[0].pid, 42);
  EXPECT_EQ(events[0].haMode, "zookeeper");
  EXPECT_EQ(events[1].kind, Kind::kContending);
  EXPECT_EQ(events[1].latch, "m-0000000003");
  EXPECT_EQ(events[2].kind, Kind::kGranted);
  EXPECT_EQ(events[2].epoch, 7u);
  EXPECT_EQ(events[2].monoUs, 100);
  EXPECT_EQ(events[2].wallMs, 200);
  EXPECT_EQ(events[3].kind, Kind::kServing);
  EXPECT_EQ(events[4].kind, Kind::kHandoverRequested);
  EXPECT_EQ(events[5].kind, Kind::kRevoked);
  EXPECT_EQ(events[5].reason, "handed over");
  EXPECT_EQ(events[5].monoUs, 301);
  EXPECT_EQ(events[6].kind, Kind::kHandoverDone);
  EXPECT_EQ(events[7].kind, Kind::kExiting);
  EXPECT_EQ(events[7].code, 0);
  for (const auto& event : events) EXPECT_EQ(event.masterId, "aa");

  const auto json = parseMasterEventLine(
      R"({"ts":"2026-11-21T10:58:01.919Z","level":"info","logger":"master","thread":1,)"
      R"("msg":"leadership revoked epoch=3 master_id=bb reason=\"connection lost\" mono_us=5 wall_ms=6"})");
  ASSERT_TRUE(json);
  EXPECT_EQ(json->kind, Kind::kRevoked);
  EXPECT_EQ(json->epoch, 3u);
  EXPECT_EQ(json->reason, "connection lost");
  EXPECT_FALSE(parseMasterEventLine(R"({"msg":"zookeeper: session established"})"));
}

TEST(LeadershipTerms, OverlappingTermsAndEpochGapsAreReported) {
  EXPECT_EQ(checkTermsExclusiveAndDense({{0, 0, 1, 10, 20}, {1, 0, 2, 25, 30}, {0, 1, 3, 31, {}}}),
            "");
  // Listed out of order: the check sorts by grant time.
  EXPECT_EQ(checkTermsExclusiveAndDense({{1, 0, 2, 25, {}}, {0, 0, 1, 10, 20}}), "");

  const std::string overlap = checkTermsExclusiveAndDense({{0, 0, 1, 10, 26}, {1, 0, 2, 25, {}}});
  EXPECT_NE(overlap.find("overlap"), std::string::npos) << overlap;
  const std::string open = checkTermsExclusiveAndDense({{0, 0, 1, 10, {}}, {1, 0, 2, 25, {}}});
  EXPECT_NE(open.find("overlap"), std::string::npos) << open;
  const std::string gap = checkTermsExclusiveAndDense({{0, 0, 1, 10, 20}, {1, 0, 3, 25, {}}});
  EXPECT_NE(gap.find("epoch gap"), std::string::npos) << gap;
  const std::string repeated = checkTermsExclusiveAndDense({{0, 0, 4, 10, 20}, {1, 0, 4, 25, {}}});
  EXPECT_NE(repeated.find("epoch gap"), std::string::npos) << repeated;
}

}  // namespace
}  // namespace regent::testing

// The metrics registry every process's /metrics writes: families in registration order, read when
// written, left out on request, and text the strict parser accepts.
#include "http/metrics_registry.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "common/json_lines_event_sink.h"
#include "tests/http/prometheus_text_test_util.h"

namespace regent::http {
namespace {

using regent::testing::metricsMatch;

TEST(MetricsRegistryTest, FamiliesAreWrittenInRegistrationOrderWithTheirValuesAtWriteTime) {
  MetricsRegistry registry;
  uint64_t leader = 0;
  uint64_t calls = 0;
  registry.gauge("regent_b", "Second letter first.", [&] { return leader; });
  registry.counter("regent_a_total", "Calls.", [&] { return calls; });
  leader = 1;
  calls = 7;
  EXPECT_EQ(registry.text(),
            "# HELP regent_b Second letter first.\n# TYPE regent_b gauge\nregent_b 1\n"
            "# HELP regent_a_total Calls.\n# TYPE regent_a_total counter\nregent_a_total 7\n");
  calls = 8;
  EXPECT_NE(registry.text().find("regent_a_total 8\n"), std::string::npos);
}

TEST(MetricsRegistryTest, LabelValuesAreEscapedAndAFamilyCanBeLeftOutOrWrittenWithoutSamples) {
  MetricsRegistry registry;
  std::optional<std::vector<MetricSample>> samples;
  registry.add("regent_calls_total", MetricsRegistry::Type::kCounter, "By method.",
               [&] { return samples; });
  EXPECT_EQ(registry.text(), "");  // Left out: not even its HELP and TYPE lines.

  samples.emplace();
  EXPECT_EQ(registry.text(),
            "# HELP regent_calls_total By method.\n# TYPE regent_calls_total counter\n");

  samples->push_back(
      {.labels = {{"method", "Weird\"Name\\x"}, {"cap", "peer"}}, .value = uint64_t{2}});
  const std::string text = registry.text();
  EXPECT_NE(text.find("regent_calls_total{method=\"Weird\\\"Name\\\\x\",cap=\"peer\"} 2\n"),
            std::string::npos)
      << text;
  EXPECT_TRUE(metricsMatch(
      text, {.samples = {{"regent_calls_total{method=\"Weird\\\"Name\\\\x\",cap=\"peer\"}", 2}}}));
}

TEST(MetricsRegistryTest, AHistogramHasCumulativeBucketsInfSumAndCount) {
  MetricsRegistry registry;
  registry.histogram("regent_wait_seconds", "Waits.", [] {
    return HistogramSnapshot{.buckets = {{0.005, 0}, {0.25, 1}, {5, 2}}, .count = 3, .sum = 9.5};
  });
  EXPECT_EQ(registry.text(),
            "# HELP regent_wait_seconds Waits.\n# TYPE regent_wait_seconds histogram\n"
            "regent_wait_seconds_bucket{le=\"0.005\"} 0\n"
            "regent_wait_seconds_bucket{le=\"0.25\"} 1\n"
            "regent_wait_seconds_bucket{le=\"5\"} 2\n"
            "regent_wait_seconds_bucket{le=\"+Inf\"} 3\n"
            "regent_wait_seconds_sum 9.5\n"
            "regent_wait_seconds_count 3\n");
  EXPECT_TRUE(metricsMatch(registry.text(), {.types = {{"regent_wait_seconds", "histogram"}}}));
}

// The events file's failed writes are a counter of their own, there (at 0) without a file too.
TEST(MetricsRegistryTest, TheEventsFilesFailedWritesAreCountedAndZeroWithoutAFile) {
  MetricsRegistry without;
  addEventsFileMetrics(without, nullptr);
  EXPECT_EQ(without.text(),
            "# HELP regent_events_file_write_failures_total Events this process failed to write "
            "to events.file (each still reached the log); 0 without events.file.\n"
            "# TYPE regent_events_file_write_failures_total counter\n"
            "regent_events_file_write_failures_total 0\n");

  const int full = ::open("/dev/full", O_WRONLY | O_CLOEXEC);  // Every write: ENOSPC.
  ASSERT_GE(full, 0);
  JsonLinesFileEventSink sink(full, "/dev/full", EventOrigin{});
  MetricsRegistry registry;
  addEventsFileMetrics(registry, &sink);
  EXPECT_TRUE(
      metricsMatch(registry.text(), {.samples = {{"regent_events_file_write_failures_total", 0}}}));
  sink.emit(Event("job state"));
  sink.emit(Event("job state"));
  EXPECT_TRUE(metricsMatch(registry.text(),
                           {.samples = {{"regent_events_file_write_failures_total", 2}},
                            .types = {{"regent_events_file_write_failures_total", "counter"}}}));
}

}  // namespace
}  // namespace regent::http

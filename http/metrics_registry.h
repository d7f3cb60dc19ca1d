// The metrics a process serves on /metrics: families registered by the process's parts when
// main() wires them together, read each time /metrics is served and written in the Prometheus
// text format (prometheus_text.h) in the order they were registered. A new metric is one
// registration where its value lives; the routes that serve /metrics do not change.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/accept_loop.h"
#include "common/json_lines_event_sink.h"

namespace regent::http {

// One sample of a family: its labels (name, value; the values are escaped when written) and its
// value, written as the stream writes a uint64_t or a double.
struct MetricSample {
  std::vector<std::pair<std::string, std::string>> labels;
  std::variant<uint64_t, double> value = uint64_t{0};
};

// A histogram's state: for each upper bound the count of observations at or below it
// (cumulative, as Prometheus wants), and the count and sum of all observations.
struct HistogramSnapshot {
  std::vector<std::pair<double, uint64_t>> buckets;  // (le, cumulative count), ascending.
  uint64_t count = 0;
  double sum = 0;
};

// The families of one process. Loop-thread only: the value functions run on the thread that
// writes (the loop thread, while /metrics is served), and read whatever they captured, which must
// outlive the registry (or the last write).
class MetricsRegistry final {
 public:
  enum class Type { kCounter, kGauge };
  // A family's samples now; nullopt leaves the family out of this write (its HELP and TYPE lines
  // too), an empty list writes only those two lines.
  using Samples = std::function<std::optional<std::vector<MetricSample>>()>;

  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // A family of any samples. `name` and `help` as Prometheus wants them (the help on one line).
  void add(std::string name, Type type, std::string help, Samples samples);
  // A family of one unlabelled sample, always there.
  void counter(std::string name, std::string help, std::function<uint64_t()> value);
  void gauge(std::string name, std::string help, std::function<uint64_t()> value);
  // A histogram family: <name>_bucket{le} for each bound and +Inf, <name>_sum, <name>_count.
  void histogram(std::string name, std::string help, std::function<HistogramSnapshot()> value);

  // Every family in registration order.
  void write(std::ostream& out) const;
  std::string text() const;

 private:
  // Writes one family (its HELP and TYPE lines and samples), or nothing.
  std::vector<std::function<void(std::ostream&)>> families_;
};

// One sample per entry of `counts` (value, count), labelled `label`, in the map's order.
std::vector<MetricSample> samplesByLabel(const char* label,
                                         const std::map<std::string, uint64_t>& counts);

// regent_events_file_write_failures_total: the events the events.file sink (`file`,
// common/json_lines_event_sink.h) failed to write since the process started (each still reached
// the log); always there, 0 while `file` is null (no events.file). `file` must outlive `registry`.
void addEventsFileMetrics(MetricsRegistry& registry, const JsonLinesFileEventSink* file);

// The accept failures of a listener's accept loop (common/accept_loop.h) as
// regent_<protocol>_accept_failures_total{reason} and regent_<protocol>_connections_shed_total,
// `protocol` in lower case ("http", "rpc"; upper case in the help text): the families always,
// the samples while `listener` returns one (nullptr: none yet).
void addAcceptLoopMetrics(MetricsRegistry& registry, std::string_view protocol,
                          std::function<const AcceptLoop*()> listener);

}  // namespace regent::http

// MetricsRegistry (see metrics_registry.h).
#include "http/metrics_registry.h"

#include <cctype>
#include <sstream>

#include "http/prometheus_text.h"

namespace regent::http {
namespace {

void writeSample(std::ostream& out, const std::string& name, const MetricSample& sample) {
  out << name;
  if (!sample.labels.empty()) {
    out << '{';
    const char* separator = "";
    for (const auto& [label, value] : sample.labels) {
      out << separator << label << "=\"" << escapeLabelValue(value) << '"';
      separator = ",";
    }
    out << '}';
  }
  out << ' ';
  std::visit([&out](auto value) { out << value; }, sample.value);
  out << '\n';
}

}  // namespace

void MetricsRegistry::add(std::string name, Type type, std::string help, Samples samples) {
  families_.push_back([name = std::move(name), type, help = std::move(help),
                       samples = std::move(samples)](std::ostream& out) {
    std::optional<std::vector<MetricSample>> now = samples();
    if (!now) return;
    writeMetricFamily(out, name.c_str(), type == Type::kCounter ? "counter" : "gauge",
                      help.c_str());
    for (const MetricSample& sample : *now) writeSample(out, name, sample);
  });
}

void MetricsRegistry::counter(std::string name, std::string help, std::function<uint64_t()> value) {
  add(std::move(name), Type::kCounter, std::move(help),
      [value = std::move(value)] { return std::vector<MetricSample>{{.value = value()}}; });
}

void MetricsRegistry::gauge(std::string name, std::string help, std::function<uint64_t()> value) {
  add(std::move(name), Type::kGauge, std::move(help),
      [value = std::move(value)] { return std::vector<MetricSample>{{.value = value()}}; });
}

void MetricsRegistry::histogram(std::string name, std::string help,
                                std::function<HistogramSnapshot()> value) {
  families_.push_back([name = std::move(name), help = std::move(help),
                       value = std::move(value)](std::ostream& out) {
    const HistogramSnapshot now = value();
    writeMetricFamily(out, name.c_str(), "histogram", help.c_str());
    const std::string bucket = name + "_bucket";
    for (const auto& [bound, count] : now.buckets) {
      std::ostringstream le;
      le << bound;
      writeSample(out, bucket, {.labels = {{"le", le.str()}}, .value = count});
    }
    writeSample(out, bucket, {.labels = {{"le", "+Inf"}}, .value = now.count});
    writeSample(out, name + "_sum", {.value = now.sum});
    writeSample(out, name + "_count", {.value = now.count});
  });
}

void MetricsRegistry::write(std::ostream& out) const {
  for (const auto& family : families_) family(out);
}

std::string MetricsRegistry::text() const {
  std::ostringstream out;
  write(out);
  return out.str();
}

std::vector<MetricSample> samplesByLabel(const char* label,
                                         const std::map<std::string, uint64_t>& counts) {
  std::vector<MetricSample> samples;
  for (const auto& [value, count] : counts) samples.push_back({{{label, value}}, count});
  return samples;
}

void addEventsFileMetrics(MetricsRegistry& registry, const JsonLinesFileEventSink* file) {
  registry.counter("regent_events_file_write_failures_total",
                   "Events this process failed to write to events.file (each still reached the "
                   "log); 0 without events.file.",
                   [file] { return file != nullptr ? file->writeFailures() : uint64_t{0}; });
}

void addAcceptLoopMetrics(MetricsRegistry& registry, std::string_view protocol,
                          std::function<const AcceptLoop*()> listener) {
  std::string upper(protocol);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const std::string prefix = "regent_" + std::string(protocol);
  registry.add(prefix + "_accept_failures_total", MetricsRegistry::Type::kCounter,
               "Failed accepts on the " + upper +
                   " port, by reason (emfile, enfile: out of file descriptors; memory; other); "
                   "the server backs off and accepts again.",
               [listener] {
                 std::vector<MetricSample> samples;
                 if (const AcceptLoop* loop = listener()) {
                   for (AcceptFailure reason : kAcceptFailures) {
                     samples.push_back({.labels = {{"reason", acceptFailureLabel(reason)}},
                                        .value = loop->failures(reason)});
                   }
                 }
                 return samples;
               });
  registry.add(prefix + "_connections_shed_total", MetricsRegistry::Type::kCounter,
               upper + " connections closed unserved while out of file descriptors.", [listener] {
                 std::vector<MetricSample> samples;
                 if (const AcceptLoop* loop = listener()) {
                   samples.push_back({.value = loop->shed()});
                 }
                 return samples;
               });
}

}  // namespace regent::http

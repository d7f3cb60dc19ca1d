// The Prometheus text writer (see prometheus_text.h).
#include "http/prometheus_text.h"

#include "http/metrics_registry.h"

namespace regent::http {

void writeMetricFamily(std::ostream& out, const char* name, const char* type, const char* help) {
  out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}

std::string escapeLabelValue(const std::string& value) {
  std::string escaped;
  for (char c : value) {
    if (c == '\\') {
      escaped += "\\\\";
    } else if (c == '"') {
      escaped += "\\\"";
    } else if (c == '\n') {
      escaped += "\\n";
    } else {
      escaped += c;
    }
  }
  return escaped;
}

void writeAcceptLoopMetrics(std::ostream& out, std::string_view protocol,
                            const AcceptLoop* listener) {
  MetricsRegistry registry;
  addAcceptLoopMetrics(registry, protocol, [listener] { return listener; });
  registry.write(out);
}

}  // namespace regent::http

// The Prometheus text writer (see prometheus_text.h).
#include "http/prometheus_text.h"

#include <cctype>

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
  std::string upper(protocol);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const std::string prefix = "regent_" + std::string(protocol);
  const std::string failures = prefix + "_accept_failures_total";
  const std::string failuresHelp = "Failed accepts on the " + upper +
                                   " port, by reason (emfile, enfile: out of file descriptors; "
                                   "memory; other); the server backs off and accepts again.";
  writeMetricFamily(out, failures.c_str(), "counter", failuresHelp.c_str());
  if (listener != nullptr) {
    for (AcceptFailure reason : kAcceptFailures) {
      out << failures << "{reason=\"" << acceptFailureLabel(reason) << "\"} "
          << listener->failures(reason) << '\n';
    }
  }
  const std::string shed = prefix + "_connections_shed_total";
  const std::string shedHelp =
      upper + " connections closed unserved while out of file descriptors.";
  writeMetricFamily(out, shed.c_str(), "counter", shedHelp.c_str());
  if (listener != nullptr) out << shed << ' ' << listener->shed() << '\n';
}

}  // namespace regent::http

// The Prometheus text format 0.0.4 as every regent process writes it on /metrics: a family's
// "# HELP" / "# TYPE" lines, label values escaped, and the accept-loop families every listener
// shares.
#pragma once

#include <ostream>
#include <string>
#include <string_view>

#include "common/accept_loop.h"

namespace regent::http {

// The content type of a /metrics answer.
inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

// The "# HELP" and "# TYPE" lines of one Prometheus metric family.
void writeMetricFamily(std::ostream& out, const char* name, const char* type, const char* help);

// Prometheus label value escaping (backslash, double quote, newline).
std::string escapeLabelValue(const std::string& value);

// The accept failures of a listener's accept loop (common/accept_loop.h) as
// regent_<protocol>_accept_failures_total{reason} and regent_<protocol>_connections_shed_total
// (addAcceptLoopMetrics of metrics_registry.h, written once): the families always, the samples
// when there is a listener.
void writeAcceptLoopMetrics(std::ostream& out, std::string_view protocol,
                            const AcceptLoop* listener);

}  // namespace regent::http

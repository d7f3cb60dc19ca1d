// The Prometheus text writer every process's /metrics uses, and the strict parser of
// prometheus_text_test_util.h the HTTP tests read metrics with.
#include "http/prometheus_text.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "http/http_server.h"
#include "tests/http/prometheus_text_test_util.h"

namespace regent::http {
namespace {

TEST(PrometheusTextTest, LabelValuesEscapeBackslashQuoteAndNewline) {
  EXPECT_EQ(escapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
}

// The accept-loop families of the RPC and the HTTP listener are one writer; their text is what
// masters and workers have always served.
TEST(PrometheusTextTest, AcceptLoopFamiliesWithoutAListenerAreTheirHelpAndTypeLines) {
  std::ostringstream rpc;
  writeAcceptLoopMetrics(rpc, "rpc", nullptr);
  EXPECT_EQ(rpc.str(),
            "# HELP regent_rpc_accept_failures_total Failed accepts on the RPC port, by reason "
            "(emfile, enfile: out of file descriptors; memory; other); the server backs off and "
            "accepts again.\n"
            "# TYPE regent_rpc_accept_failures_total counter\n"
            "# HELP regent_rpc_connections_shed_total RPC connections closed unserved while out "
            "of file descriptors.\n"
            "# TYPE regent_rpc_connections_shed_total counter\n");
  std::ostringstream http;
  writeHttpServerMetrics(http, nullptr);
  EXPECT_EQ(http.str(),
            "# HELP regent_http_accept_failures_total Failed accepts on the HTTP port, by reason "
            "(emfile, enfile: out of file descriptors; memory; other); the server backs off and "
            "accepts again.\n"
            "# TYPE regent_http_accept_failures_total counter\n"
            "# HELP regent_http_connections_shed_total HTTP connections closed unserved while out "
            "of file descriptors.\n"
            "# TYPE regent_http_connections_shed_total counter\n"
            "# HELP regent_http_connections_refused_total HTTP connections closed at accept "
            "because http.max-connections were open.\n"
            "# TYPE regent_http_connections_refused_total counter\n");
  EXPECT_TRUE(regent::testing::metricsMatch(rpc.str() + http.str(), {}));
}

TEST(PrometheusTextParserTest, RefusesMalformedText) {
  using regent::testing::parsePrometheusText;
  EXPECT_EQ(parsePrometheusText("# TYPE a gauge\na 1\n").error, "");
  EXPECT_NE(parsePrometheusText("a 1\n").error, "");                             // no TYPE
  EXPECT_NE(parsePrometheusText("# TYPE a gauge\na one\n").error, "");           // not a float
  EXPECT_NE(parsePrometheusText("# TYPE 1a gauge\n").error, "");                 // bad name
  EXPECT_NE(parsePrometheusText("# TYPE a gauge\na{x=1} 1\n").error, "");        // unquoted
  EXPECT_NE(parsePrometheusText("# TYPE a gauge\na{x=\"\\q\"} 1\n").error, "");  // escape
  EXPECT_NE(parsePrometheusText("# TYPE a gauge\na 1\na 2\n").error, "");        // duplicate
  EXPECT_NE(parsePrometheusText("# TYPE a gauge\na 1").error, "");               // no newline
  EXPECT_NE(parsePrometheusText("# TYPE a gage\n").error, "");                   // bad type
}

// The matcher every /metrics test checks with names each difference, and passes only on text
// that parses, with a HELP line for every family.
TEST(PrometheusTextMatcherTest, NamesEachDifferenceAndRequiresParsableTextWithHelp) {
  using regent::testing::metricsMatch;
  const std::string text =
      "# HELP a_total Calls.\n# TYPE a_total counter\na_total{m=\"x\"} 2\n"
      "# HELP b Level.\n# TYPE b gauge\nb 1\n";
  EXPECT_TRUE(metricsMatch(text, {.samples = {{"a_total{m=\"x\"}", 2}, {"b", 1}},
                                  .types = {{"a_total", "counter"}, {"b", "gauge"}},
                                  .withoutSamples = {"c"}}));
  const ::testing::AssertionResult wrong = metricsMatch(text, {.samples = {{"b", 2}, {"c", 0}},
                                                               .types = {{"b", "counter"}},
                                                               .withoutSamples = {"a_total"}});
  EXPECT_FALSE(wrong);
  const std::string message = wrong.message();
  for (const char* named : {"b: 1, expected 2", "c: missing", "b: TYPE gauge, expected counter",
                            "a_total{m=\"x\"}: there, expected none"}) {
    EXPECT_NE(message.find(named), std::string::npos) << named << " in " << message;
  }
  EXPECT_FALSE(metricsMatch("# TYPE b gauge\nb 1\n", {}));  // No HELP.
  EXPECT_FALSE(metricsMatch("b 1\n", {}));                  // Not Prometheus text.
  EXPECT_EQ(regent::testing::familyText(text, "b"), "# HELP b Level.\n# TYPE b gauge\nb 1\n");
  EXPECT_EQ(regent::testing::familyText(text, "a"), "");
}

}  // namespace
}  // namespace regent::http

// Helpers for the JobGraph format and validation tests: a full example in both syntaxes, parsing
// that must succeed, and the examples of docs/jobgraph.md.
#pragma once

#include <capnp/message.h>
#include <gtest/gtest.h>
#include <kj/string.h>

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "jobgraph/job_graph_spec.h"
#include "rpc/schema/jobs.capnp.h"

namespace regent::jobgraph::testing {

// Every field of the format, with a restart strategy that has every field too.
inline constexpr std::string_view kFullYaml = R"(# every field
job_id: 0123456789ABCDEF0123456789abcdef
name: nightly-wordcount
vertices:
  - name: fetch
    parallelism: 1
    command:
      argv: [/usr/bin/curl, -sSfo, input.txt, "https://example.com/corpus.txt"]
      env:
        HTTPS_PROXY: http://proxy.internal:3128
        RETRIES: 3
      working_dir: /var/lib/jobs/wordcount
    resources:
      cpu: 0.5
      memory: 256MiB
  - name: count
    parallelism: 4
    command:
      argv: [python3, count.py, --shards, "4"]
      env:
        - name: PYTHONUNBUFFERED
          value: "1"
        - name: PYTHONUNBUFFERED
          value: "0"
    resources:
      cpu: "1500m"
      memory: 1073741824
    upstream: [fetch]
  - name: report
    command:
      argv: [python3, report.py]
    upstream: [count, fetch]
restart_strategy:
  type: exponential-delay
  initial_delay: 500ms
  max_delay: 2m
  multiplier: 1.5
  reset_after: 1h
  attempts: 10
)";

// The same graph as kFullYaml, in JSON.
inline constexpr std::string_view kFullJson = R"({
  "job_id": "0123456789abcdef0123456789ABCDEF",
  "name": "nightly-wordcount",
  "vertices": [
    {
      "name": "fetch",
      "parallelism": 1,
      "command": {
        "argv": ["/usr/bin/curl", "-sSfo", "input.txt", "https://example.com/corpus.txt"],
        "env": {"HTTPS_PROXY": "http://proxy.internal:3128", "RETRIES": 3},
        "working_dir": "/var/lib/jobs/wordcount"
      },
      "resources": {"cpu": 0.5, "memory": "256MiB"}
    },
    {
      "name": "count",
      "parallelism": 4,
      "command": {
        "argv": ["python3", "count.py", "--shards", "4"],
        "env": [{"name": "PYTHONUNBUFFERED", "value": "1"},
                {"name": "PYTHONUNBUFFERED", "value": "0"}]
      },
      "resources": {"cpu": "1500m", "memory": 1073741824},
      "upstream": ["fetch"]
    },
    {
      "name": "report",
      "command": {"argv": ["python3", "report.py"]},
      "upstream": ["count", "fetch"]
    }
  ],
  "restart_strategy": {
    "type": "exponential-delay",
    "initial_delay": "500ms",
    "max_delay": "2m",
    "multiplier": 1.5,
    "reset_after": "1h",
    "attempts": 10
  }
})";

// Parses `text`, failing the test (and returning an empty message) if it does not parse.
inline kj::Own<capnp::MallocMessageBuilder> parseOrFail(
    std::string_view text, JobGraphSpecFormat format = JobGraphSpecFormat::kYaml) {
  auto parsed = parseJobGraphSpec(text, format);
  if (!parsed) {
    ADD_FAILURE() << "does not parse: " << parsed.error().message << "\n" << text;
    auto empty = kj::heap<capnp::MallocMessageBuilder>();
    empty->initRoot<wire::JobGraph>();
    return empty;
  }
  return kj::mv(parsed).value();
}

// The error message of a text that must not parse ("" and a test failure if it parses).
inline std::string parseError(std::string_view text,
                              JobGraphSpecFormat format = JobGraphSpecFormat::kYaml) {
  auto parsed = parseJobGraphSpec(text, format);
  if (parsed) {
    ADD_FAILURE() << "parses, but should not:\n" << text;
    return "";
  }
  return parsed.error().message;
}

inline wire::JobGraph::Reader graphOf(capnp::MallocMessageBuilder& message) {
  return message.getRoot<wire::JobGraph>().asReader();
}

// The text form of a graph, for comparing two graphs with a readable difference.
inline std::string textOf(wire::JobGraph::Reader graph) { return kj::str(graph).cStr(); }

// The first block fenced as ```<language> in docs/jobgraph.md ("" if there is none).
inline std::string docsExample(std::string_view language) {
  std::ifstream file(std::string(REGENT_SOURCE_DIR) + "/docs/jobgraph.md");
  std::stringstream buffer;
  buffer << file.rdbuf();
  const std::string text = buffer.str();
  const std::string fence = "```" + std::string(language) + "\n";
  const size_t start = text.find(fence);
  if (start == std::string::npos) return "";
  const size_t body = start + fence.size();
  const size_t end = text.find("```", body);
  if (end == std::string::npos) return "";
  return text.substr(body, end - body);
}

}  // namespace regent::jobgraph::testing

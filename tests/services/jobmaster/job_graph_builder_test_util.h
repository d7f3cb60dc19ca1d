// Builds wire JobGraphs for the JobMaster's tests: vertices with a parallelism, a cpu profile and
// upstream names, and an optional restart strategy. The builder owns the message; readers it
// hands out live as long as it does.
#pragma once

#include <capnp/message.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/ids.h"
#include "rpc/schema/jobs.capnp.h"
#include "rpc/wire_ids.h"

namespace regent::jobmaster::testing {

inline constexpr uint64_t kGiB = uint64_t{1} << 30;

struct VertexSpec {
  std::string name;
  uint32_t parallelism = 1;
  std::vector<std::string> upstream;
  uint32_t cpuMillis = 1000;
};

class JobGraphBuilder final {
 public:
  explicit JobGraphBuilder(std::vector<VertexSpec> vertices, JobId job = JobId::random(),
                           int64_t submittedAtMs = 1000) {
    auto graph = message_.initRoot<wire::JobGraph>();
    wire::setWireId(graph.initJobId(), job);
    graph.setName("test-job");
    graph.setSubmittedAtMs(submittedAtMs);
    auto out = graph.initVertices(static_cast<unsigned>(vertices.size()));
    for (unsigned i = 0; i < vertices.size(); ++i) {
      const VertexSpec& spec = vertices[i];
      out[i].setName(spec.name);
      out[i].setParallelism(spec.parallelism);
      auto argv = out[i].initCommand().initArgv(2);
      argv.set(0, "/bin/echo");
      argv.set(1, spec.name);
      out[i].initResources().setCpuMillis(spec.cpuMillis);
      out[i].getResources().setMemoryBytes(kGiB);
      auto upstream = out[i].initUpstream(static_cast<unsigned>(spec.upstream.size()));
      for (unsigned u = 0; u < spec.upstream.size(); ++u) upstream.set(u, spec.upstream[u]);
    }
  }

  JobId job() const { return wire::idFromWire<JobId>(graph().getJobId()); }
  wire::JobGraph::Reader graph() const {
    return const_cast<capnp::MallocMessageBuilder&>(message_).getRoot<wire::JobGraph>().asReader();
  }
  wire::RestartStrategy::Builder restartStrategy() {
    return message_.getRoot<wire::JobGraph>().initRestartStrategy();
  }
  void fixedDelay(uint32_t attempts, uint64_t delayMs) {
    auto fixed = restartStrategy().initFixedDelay();
    fixed.setAttempts(attempts);
    fixed.setDelayMs(delayMs);
  }

 private:
  capnp::MallocMessageBuilder message_;
};

}  // namespace regent::jobmaster::testing

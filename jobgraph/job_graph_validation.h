// The JobGraph rules (docs/jobgraph.md): what the Dispatcher's submitJob checks before
// it persists a graph, and what regentctl checks before it submits one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/result.h"
#include "common/time.h"
#include "rpc/schema/jobs.capnp.h"

namespace regent::jobgraph {

// What one slot offers: the same units as wire::ResourceProfile.
struct SlotProfile {
  uint32_t cpuMillis = 0;
  uint64_t memoryBytes = 0;
};

struct JobGraphLimits {
  uint32_t maxVertices = 1000;
  uint32_t maxParallelism = 10000;  // per vertex
  // The sum of every vertex's parallelism (jobmaster.max-subtasks): what one JobMaster tracks.
  uint32_t maxTotalSubtasks = 10000;
  // Longest job name and vertex name, in bytes of UTF-8.
  uint32_t maxJobNameBytes = 256;
  uint32_t maxVertexNameBytes = 128;
  // The largest slot profile a worker offers. A vertex whose resources exceed it in cpu or
  // memory is refused. Unset: the fit check is skipped (regentctl does not know the workers).
  // The check is per component; with slots of different shapes pass the component-wise
  // maximum, and a vertex that passes may still find no single slot that fits it in both.
  std::optional<SlotProfile> largestSlot;
  // Every duration of the restart strategy is at most this long, so that a delay in ms can be
  // turned into a timer deadline without overflow.
  Duration maxRestartDuration = std::chrono::hours(24 * 7);
};

// One broken rule. `field` is the path of the offending field in the file format's key names
// ("vertices[2].parallelism", "restart_strategy.multiplier"; empty for a message that cannot be
// read at all); `message` says what is wrong with it ("must be in 1..10000, got 0"). The two map
// onto wire::InvalidArgument.
struct JobGraphViolation {
  std::string field;
  std::string message;

  // "<field>: <message>", or just the message when there is no field.
  std::string describe() const;
};

// The first rule `graph` breaks, or nullopt if it breaks none. Rules are checked in a fixed
// order, so the answer is deterministic: job_id, name, the vertex count, then each vertex in
// list order (name, parallelism, command, resources, upstream), then the total of subtasks, then
// cycles, then the restart strategy. The full list of rules and messages is in docs/jobgraph.md.
//
// Never throws for a malformed message (bad pointers, missing NUL terminators, traversal limit
// exceeded): that is reported as a violation with an empty field. Reads each part of the graph
// once, so it costs one traversal of the message against the reader's traversal limit.
// Synchronous, no I/O; safe on any thread that may read `graph`.
std::optional<JobGraphViolation> findJobGraphViolation(wire::JobGraph::Reader graph,
                                                       const JobGraphLimits& limits);

// findJobGraphViolation as a Status: a fatal Error whose message is the violation's describe().
Status validateJobGraph(wire::JobGraph::Reader graph, const JobGraphLimits& limits);

}  // namespace regent::jobgraph

// The JobGraph rules (job_graph_validation.h). The graph is first copied into plain views in one
// guarded pass over the message, then checked without touching Cap'n Proto again.
#include "jobgraph/job_graph_validation.h"

#include <kj/exception.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/units.h"
#include "common/utf8.h"
#include "jobgraph/job_graph_messages.h"
#include "rpc/wire_ids.h"

namespace regent::jobgraph {
namespace {

struct EnvView {
  std::string_view name;
  std::string_view value;
};

struct VertexView {
  std::string_view name;
  uint32_t parallelism = 0;
  std::vector<std::string_view> argv;
  std::vector<EnvView> env;
  std::string_view workingDir;
  uint32_t cpuMillis = 0;
  uint64_t memoryBytes = 0;
  std::vector<std::string_view> upstream;
};

struct RestartView {
  enum class Type { kAbsent, kNone, kFixedDelay, kExponentialDelay, kFailureRate, kUnknown };
  Type type = Type::kAbsent;
  uint16_t unknownWhich = 0;
  uint32_t attempts = 0;
  uint64_t delayMs = 0;
  uint64_t initialDelayMs = 0;
  uint64_t maxDelayMs = 0;
  double multiplier = 0;
  uint64_t resetAfterMs = 0;
  uint32_t maxFailures = 0;
  uint64_t intervalMs = 0;
};

// The text views point into the message, which outlives the (synchronous) check.
struct GraphView {
  bool hasJobId = false;
  JobId jobId;
  std::string_view name;
  size_t vertexCount = 0;
  std::vector<VertexView> vertices;  // empty when vertexCount is above the limit
  RestartView restart;
};

std::string_view viewOf(capnp::Text::Reader text) {
  return std::string_view(text.begin(), text.size());
}

// Reads every field once. May throw kj exceptions on a malformed message.
GraphView readGraph(wire::JobGraph::Reader graph, const JobGraphLimits& limits) {
  GraphView view;
  view.hasJobId = graph.hasJobId();
  if (view.hasJobId) {
    view.jobId = wire::idFromWire<JobId>(graph.getJobId());
  }
  view.name = viewOf(graph.getName());

  auto vertices = graph.getVertices();
  view.vertexCount = vertices.size();
  if (view.vertexCount <= limits.maxVertices) {
    view.vertices.reserve(view.vertexCount);
    for (auto vertex : vertices) {
      VertexView& out = view.vertices.emplace_back();
      out.name = viewOf(vertex.getName());
      out.parallelism = vertex.getParallelism();
      auto command = vertex.getCommand();
      for (auto arg : command.getArgv()) out.argv.push_back(viewOf(arg));
      for (auto env : command.getEnv()) {
        out.env.push_back(EnvView{viewOf(env.getName()), viewOf(env.getValue())});
      }
      out.workingDir = viewOf(command.getWorkingDir());
      auto resources = vertex.getResources();
      out.cpuMillis = resources.getCpuMillis();
      out.memoryBytes = resources.getMemoryBytes();
      for (auto name : vertex.getUpstream()) out.upstream.push_back(viewOf(name));
    }
  }

  RestartView& restart = view.restart;
  if (graph.hasRestartStrategy()) {
    auto strategy = graph.getRestartStrategy();
    switch (strategy.which()) {
      case wire::RestartStrategy::NONE:
        restart.type = RestartView::Type::kNone;
        break;
      case wire::RestartStrategy::FIXED_DELAY: {
        auto fixed = strategy.getFixedDelay();
        restart.type = RestartView::Type::kFixedDelay;
        restart.attempts = fixed.getAttempts();
        restart.delayMs = fixed.getDelayMs();
        break;
      }
      case wire::RestartStrategy::EXPONENTIAL_DELAY: {
        auto exponential = strategy.getExponentialDelay();
        restart.type = RestartView::Type::kExponentialDelay;
        restart.initialDelayMs = exponential.getInitialDelayMs();
        restart.maxDelayMs = exponential.getMaxDelayMs();
        restart.multiplier = exponential.getMultiplier();
        restart.resetAfterMs = exponential.getResetAfterMs();
        restart.attempts = exponential.getAttempts();
        break;
      }
      case wire::RestartStrategy::FAILURE_RATE: {
        auto rate = strategy.getFailureRate();
        restart.type = RestartView::Type::kFailureRate;
        restart.maxFailures = rate.getMaxFailures();
        restart.intervalMs = rate.getIntervalMs();
        restart.delayMs = rate.getDelayMs();
        break;
      }
      default:  // a member added by a newer schema
        restart.type = RestartView::Type::kUnknown;
        restart.unknownWhich = static_cast<uint16_t>(strategy.which());
        break;
    }
  }
  return view;
}

// ---- The rules --------------------------------------------------------------------------

std::string vertexPath(size_t index) { return "vertices[" + std::to_string(index) + "]"; }

std::string indexed(std::string_view name, size_t index) {
  return std::string(name) + "[" + std::to_string(index) + "]";
}

JobGraphViolation violation(std::string field, std::string message) {
  return JobGraphViolation{std::move(field), std::move(message)};
}

std::string hexByte(unsigned char c) {
  constexpr char kHex[] = "0123456789abcdef";
  return std::string("\\x") + kHex[c >> 4] + kHex[c & 0xf];
}

// Why `text` is not valid UTF-8, described for a message, or nullopt when it is.
std::optional<std::string> invalidUtf8In(std::string_view text) {
  const auto offset = firstInvalidUtf8(text);
  if (!offset) return std::nullopt;
  return "is not valid UTF-8 (byte " + hexByte(static_cast<unsigned char>(text[*offset])) +
         " at byte " + std::to_string(*offset) + " of " + quotedForMessage(text) + ")";
}

// The first character a name may not hold (isUnsafeInName), described for a message. `text`
// is valid UTF-8.
std::optional<std::string> unsafeCharacterIn(std::string_view text) {
  const auto found = firstUnsafeInName(text);
  if (!found) return std::nullopt;
  const char32_t c = found->codePoint;
  const bool bidi = c >= 0x202a;
  std::string shown = c < 0x80 ? hexByte(static_cast<unsigned char>(c)) : formatCodePoint(c);
  return std::string(bidi ? "must not contain bidirectional override or isolate characters"
                          : "must not contain control characters") +
         " (found " + shown + " at byte " + std::to_string(found->offset) + " of " +
         quotedForMessage(text) + ")";
}

// The rules of a name people read (the job's, a vertex's): not empty, valid UTF-8, at most
// `maxBytes` long, no control or bidirectional override characters.
std::optional<std::string> nameProblem(std::string_view name, size_t maxBytes) {
  if (name.empty()) return "must not be empty";
  if (auto invalid = invalidUtf8In(name)) return invalid;
  if (name.size() > maxBytes) {
    return "must be at most " + std::to_string(maxBytes) + " bytes long, got " +
           std::to_string(name.size()) + " bytes (" + quotedForMessage(name) + ")";
  }
  return unsafeCharacterIn(name);
}

bool hasNul(std::string_view text) { return text.find('\0') != std::string_view::npos; }

constexpr std::string_view kNulMessage = "must not contain a NUL byte";

std::string formatMillis(uint64_t millis) {
  if (millis > static_cast<uint64_t>(std::numeric_limits<Duration::rep>::max())) {
    return std::to_string(millis) + "ms";
  }
  return formatDuration(Duration(static_cast<Duration::rep>(millis)));
}

std::string formatNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

std::string formatCpu(uint32_t millis) { return std::to_string(millis) + "m"; }

std::optional<JobGraphViolation> checkVertex(
    const GraphView& graph, size_t index,
    const std::unordered_map<std::string_view, size_t>& byName, const JobGraphLimits& limits) {
  const VertexView& vertex = graph.vertices[index];
  const std::string path = vertexPath(index);

  if (auto bad = nameProblem(vertex.name, limits.maxVertexNameBytes)) {
    return violation(path + ".name", *bad);
  }
  if (const size_t first = byName.at(vertex.name); first != index) {
    return violation(path + ".name", "duplicate vertex name " + quotedForMessage(vertex.name) +
                                         " (also " + vertexPath(first) + ".name)");
  }

  if (vertex.parallelism < 1 || vertex.parallelism > limits.maxParallelism) {
    return violation(path + ".parallelism", "must be in 1.." +
                                                std::to_string(limits.maxParallelism) + ", got " +
                                                std::to_string(vertex.parallelism));
  }

  const std::string commandPath = path + ".command";
  if (vertex.argv.empty()) {
    return violation(commandPath + ".argv", "must not be empty (argv[0] is the program to run)");
  }
  if (vertex.argv[0].empty()) {
    return violation(commandPath + ".argv[0]", "must not be empty (it is the program to run)");
  }
  for (size_t i = 0; i < vertex.argv.size(); ++i) {
    if (hasNul(vertex.argv[i])) {
      return violation(indexed(commandPath + ".argv", i), std::string(kNulMessage));
    }
    if (auto invalid = invalidUtf8In(vertex.argv[i])) {
      return violation(indexed(commandPath + ".argv", i), *invalid);
    }
  }
  for (size_t i = 0; i < vertex.env.size(); ++i) {
    const std::string envPath = indexed(commandPath + ".env", i);
    const EnvView& env = vertex.env[i];
    if (env.name.empty()) return violation(envPath + ".name", "must not be empty");
    if (env.name.find('=') != std::string_view::npos) {
      return violation(envPath + ".name",
                       "must not contain '=', got " + quotedForMessage(env.name));
    }
    if (hasNul(env.name)) return violation(envPath + ".name", std::string(kNulMessage));
    if (auto invalid = invalidUtf8In(env.name)) return violation(envPath + ".name", *invalid);
    if (auto unsafe = unsafeCharacterIn(env.name)) return violation(envPath + ".name", *unsafe);
    if (hasNul(env.value)) return violation(envPath + ".value", std::string(kNulMessage));
    if (auto invalid = invalidUtf8In(env.value)) return violation(envPath + ".value", *invalid);
  }
  if (hasNul(vertex.workingDir)) {
    return violation(commandPath + ".working_dir", std::string(kNulMessage));
  }
  if (auto invalid = invalidUtf8In(vertex.workingDir)) {
    return violation(commandPath + ".working_dir", *invalid);
  }

  if (limits.largestSlot.has_value()) {
    const SlotProfile& slot = *limits.largestSlot;
    if (vertex.cpuMillis > slot.cpuMillis || vertex.memoryBytes > slot.memoryBytes) {
      return violation(
          path + ".resources",
          "vertex " + quotedForMessage(vertex.name) + " requests cpu " +
              formatCpu(vertex.cpuMillis) + " and memory " + formatSize(vertex.memoryBytes) +
              " per subtask, more than the largest slot offers (cpu " + formatCpu(slot.cpuMillis) +
              ", memory " + formatSize(slot.memoryBytes) + ")");
    }
  }

  const std::string upstreamPath = path + ".upstream";
  std::unordered_map<size_t, size_t> listedAt;  // upstream vertex -> its first position here
  for (size_t i = 0; i < vertex.upstream.size(); ++i) {
    const std::string_view name = vertex.upstream[i];
    const auto found = byName.find(name);
    if (found == byName.end()) {
      return violation(indexed(upstreamPath, i), "no vertex is named " + quotedForMessage(name));
    }
    if (found->second == index) {
      return violation(indexed(upstreamPath, i),
                       "vertex " + quotedForMessage(name) + " cannot be its own upstream");
    }
    if (const auto [first, added] = listedAt.emplace(found->second, i); !added) {
      return violation(indexed(upstreamPath, i), quotedForMessage(name) +
                                                     " is listed twice (also " +
                                                     indexed("upstream", first->second) + ")");
    }
  }
  return std::nullopt;
}

// A vertex name for a list of names in a message: as is, but cut after 60 bytes.
std::string shortName(std::string_view name) {
  constexpr size_t kShown = 60;
  if (name.size() <= kShown) return std::string(name);
  return std::string(name.substr(0, kShown)) + "...";
}

// The first cycle met by a depth-first search along the edges (upstream -> downstream), started
// from each vertex in list order. Every upstream name is known to exist here.
std::optional<JobGraphViolation> findCycle(
    const GraphView& graph, const std::unordered_map<std::string_view, size_t>& byName) {
  struct Edge {
    size_t to;
    size_t upstreamIndex;  // position of the edge in vertices[to].upstream
  };
  const size_t count = graph.vertices.size();
  std::vector<std::vector<Edge>> downstream(count);
  for (size_t to = 0; to < count; ++to) {
    const auto& upstream = graph.vertices[to].upstream;
    for (size_t k = 0; k < upstream.size(); ++k) {
      downstream[byName.at(upstream[k])].push_back({to, k});
    }
  }

  enum class Color : uint8_t { kUnvisited, kOnPath, kDone };
  std::vector<Color> color(count, Color::kUnvisited);
  struct Frame {
    size_t vertex;
    size_t nextEdge;
  };
  std::vector<Frame> path;
  for (size_t start = 0; start < count; ++start) {
    if (color[start] != Color::kUnvisited) continue;
    color[start] = Color::kOnPath;
    path.push_back({start, 0});
    while (!path.empty()) {
      Frame& frame = path.back();
      if (frame.nextEdge == downstream[frame.vertex].size()) {
        color[frame.vertex] = Color::kDone;
        path.pop_back();
        continue;
      }
      const Edge edge = downstream[frame.vertex][frame.nextEdge++];
      if (color[edge.to] == Color::kUnvisited) {
        color[edge.to] = Color::kOnPath;
        path.push_back({edge.to, 0});
        continue;
      }
      if (color[edge.to] == Color::kDone) continue;

      // edge.to is on the path: the cycle runs from it to the path's end and back.
      size_t from = 0;
      while (path[from].vertex != edge.to) ++from;
      constexpr size_t kShownVertices = 16;
      std::string cycle;
      for (size_t i = from; i < path.size() && i - from < kShownVertices; ++i) {
        cycle += shortName(graph.vertices[path[i].vertex].name) + " -> ";
      }
      if (path.size() - from > kShownVertices) cycle += "... -> ";
      cycle += shortName(graph.vertices[edge.to].name);
      if (path.size() - from > kShownVertices) {
        cycle += " (" + std::to_string(path.size() - from) + " vertices)";
      }
      return violation(indexed(vertexPath(edge.to) + ".upstream", edge.upstreamIndex),
                       "closes a cycle: " + cycle);
    }
  }
  return std::nullopt;
}

std::optional<JobGraphViolation> checkDuration(std::string_view key, uint64_t millis,
                                               const JobGraphLimits& limits) {
  const auto max = static_cast<uint64_t>(limits.maxRestartDuration.count());
  if (millis <= max) return std::nullopt;
  return violation("restart_strategy." + std::string(key),
                   "must be at most " + formatMillis(max) + ", got " + formatMillis(millis));
}

std::optional<JobGraphViolation> checkRestartStrategy(const RestartView& restart,
                                                      const JobGraphLimits& limits) {
  switch (restart.type) {
    case RestartView::Type::kAbsent:
    case RestartView::Type::kNone:
      return std::nullopt;
    case RestartView::Type::kUnknown:
      return violation("restart_strategy",
                       "unknown type (union member " + std::to_string(restart.unknownWhich) +
                           "; known: none, fixed-delay, exponential-delay, failure-rate)");
    case RestartView::Type::kFixedDelay:
      return checkDuration("delay", restart.delayMs, limits);
    case RestartView::Type::kExponentialDelay:
      if (auto bad = checkDuration("initial_delay", restart.initialDelayMs, limits)) return bad;
      if (auto bad = checkDuration("max_delay", restart.maxDelayMs, limits)) return bad;
      if (restart.maxDelayMs < restart.initialDelayMs) {
        return violation("restart_strategy.max_delay",
                         "must be at least initial_delay (" + formatMillis(restart.initialDelayMs) +
                             "), got " + formatMillis(restart.maxDelayMs));
      }
      // Written so that NaN fails too.
      if (!(std::isfinite(restart.multiplier) && restart.multiplier >= 1.0)) {
        return violation("restart_strategy.multiplier",
                         "must be a number of at least 1, got " + formatNumber(restart.multiplier));
      }
      return checkDuration("reset_after", restart.resetAfterMs, limits);
    case RestartView::Type::kFailureRate:
      if (restart.intervalMs == 0) {
        return violation("restart_strategy.interval", "must be longer than 0");
      }
      if (auto bad = checkDuration("interval", restart.intervalMs, limits)) return bad;
      return checkDuration("delay", restart.delayMs, limits);
  }
  return std::nullopt;
}

std::optional<JobGraphViolation> check(const GraphView& graph, const JobGraphLimits& limits) {
  if (!graph.hasJobId) return violation("job_id", "is missing");
  if (graph.jobId.isZero()) return violation("job_id", "must not be all zeros");

  if (auto bad = nameProblem(graph.name, limits.maxJobNameBytes)) return violation("name", *bad);

  if (graph.vertexCount == 0) return violation("vertices", "must hold at least one vertex");
  if (graph.vertexCount > limits.maxVertices) {
    return violation("vertices", "holds " + std::to_string(graph.vertexCount) +
                                     " vertices, more than the limit of " +
                                     std::to_string(limits.maxVertices));
  }

  // First index of each name; later duplicates are reported at their own position.
  std::unordered_map<std::string_view, size_t> byName;
  for (size_t i = 0; i < graph.vertices.size(); ++i) byName.emplace(graph.vertices[i].name, i);
  for (size_t i = 0; i < graph.vertices.size(); ++i) {
    if (auto bad = checkVertex(graph, i, byName, limits)) return bad;
  }
  // What one JobMaster tracks: every subtask of every vertex.
  uint64_t subtasks = 0;
  for (const auto& vertex : graph.vertices) subtasks += vertex.parallelism;
  if (subtasks > limits.maxTotalSubtasks) {
    return violation("vertices", "hold " + std::to_string(subtasks) +
                                     " subtasks in total (the sum of their parallelism), more "
                                     "than the limit of " +
                                     std::to_string(limits.maxTotalSubtasks) +
                                     " (jobmaster.max-subtasks)");
  }
  if (auto cycle = findCycle(graph, byName)) return cycle;

  return checkRestartStrategy(graph.restart, limits);
}

// An exception's description as one printable line (it may quote the bytes it choked on).
std::string oneLine(kj::StringPtr text) {
  std::string out(text.begin(), text.size());
  for (char& c : out) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) c = '?';
  }
  return out;
}

}  // namespace

std::string JobGraphViolation::describe() const {
  return field.empty() ? message : field + ": " + message;
}

std::optional<JobGraphViolation> findJobGraphViolation(wire::JobGraph::Reader graph,
                                                       const JobGraphLimits& limits) {
  GraphView view;
  KJ_IF_MAYBE (exception, kj::runCatchingExceptions([&]() { view = readGraph(graph, limits); })) {
    return violation(
        "", "the JobGraph message cannot be read: " + oneLine(exception->getDescription()));
  }
  return check(view, limits);
}

Status validateJobGraph(wire::JobGraph::Reader graph, const JobGraphLimits& limits) {
  if (auto bad = findJobGraphViolation(graph, limits)) return Error::fatal(bad->describe());
  return Status();
}

}  // namespace regent::jobgraph

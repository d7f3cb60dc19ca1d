// Tests of the JobGraph rules (jobgraph/job_graph_validation.h): one test per rule,
// each checking the field path and the message, plus ordering and malformed messages.
#include "jobgraph/job_graph_validation.h"

#include <capnp/any.h>
#include <capnp/schema.h>
#include <capnp/serialize.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <ostream>
#include <string>
#include <string_view>

#include "tests/jobgraph/job_graph_test_util.h"

namespace regent::jobgraph {

bool operator==(const JobGraphViolation& a, const JobGraphViolation& b) {
  return a.field == b.field && a.message == b.message;
}

void PrintTo(const JobGraphViolation& violation, std::ostream* out) {
  *out << "{field \"" << violation.field << "\", message \"" << violation.message << "\"}";
}

namespace {

using testing::graphOf;
using testing::kFullYaml;
using testing::parseOrFail;
using ::testing::StartsWith;

// "{name: <name>, command: {argv: [true]}<extra>}": a valid vertex plus `extra` keys.
std::string vertex(const std::string& name, const std::string& extra = "") {
  return "{name: " + name + ", command: {argv: [true]}" + extra + "}";
}

// A valid job with an id, named j, with the given vertices and `extra` top-level lines.
std::string job(std::initializer_list<std::string> vertices, const std::string& extra = "") {
  std::string text = "job_id: 00000000000000000000000000000001\nname: j\nvertices:\n";
  for (const std::string& v : vertices) text += "  - " + v + "\n";
  return text + extra;
}

std::optional<JobGraphViolation> check(const std::string& yaml,
                                       const JobGraphLimits& limits = JobGraphLimits{}) {
  auto message = parseOrFail(yaml);
  return findJobGraphViolation(graphOf(*message), limits);
}

JobGraphViolation violation(std::string field, std::string message) {
  return JobGraphViolation{std::move(field), std::move(message)};
}

TEST(JobGraphValidation, AcceptsTheFullExample) {
  EXPECT_EQ(check(std::string(kFullYaml)), std::nullopt);
}

TEST(JobGraphValidation, TheJobIdMustBePresent) {
  auto message = parseOrFail(job({vertex("v")}));
  message->getRoot<wire::JobGraph>().disownJobId();
  EXPECT_EQ(findJobGraphViolation(graphOf(*message), JobGraphLimits{}),
            violation("job_id", "is missing"));
}

TEST(JobGraphValidation, TheJobIdMustNotBeZero) {
  std::string text = job({vertex("v")});
  text.replace(text.find("00000000000000000000000000000001"), 32, std::string(32, '0'));
  EXPECT_EQ(check(text), violation("job_id", "must not be all zeros"));
}

TEST(JobGraphValidation, TheJobNameMustNotBeEmpty) {
  EXPECT_EQ(check("job_id: 00000000000000000000000000000001\nname: ''\nvertices: [" + vertex("v") +
                  "]\n"),
            violation("name", "must not be empty"));
}

TEST(JobGraphValidation, TheJobNameMustNotHoldControlCharacters) {
  EXPECT_EQ(check("job_id: 00000000000000000000000000000001\nname: \"a\\tb\"\nvertices: [" +
                  vertex("v") + "]\n"),
            violation("name",
                      "must not contain control characters (found \\x09 at byte 1 of "
                      "\"a\\x09b\")"));
}

TEST(JobGraphValidation, AJobNeedsAVertex) {
  EXPECT_EQ(check("job_id: 00000000000000000000000000000001\nname: j\nvertices: []\n"),
            violation("vertices", "must hold at least one vertex"));
}

TEST(JobGraphValidation, TheNumberOfVerticesIsLimited) {
  JobGraphLimits limits;
  limits.maxVertices = 2;
  EXPECT_EQ(check(job({vertex("a"), vertex("b")}), limits), std::nullopt);
  EXPECT_EQ(check(job({vertex("a"), vertex("b"), vertex("c")}), limits),
            violation("vertices", "holds 3 vertices, more than the limit of 2"));
}

TEST(JobGraphValidation, AVertexNameMustNotBeEmpty) {
  EXPECT_EQ(check(job({vertex("a"), vertex("''")})),
            violation("vertices[1].name", "must not be empty"));
}

TEST(JobGraphValidation, AVertexNameMustNotHoldControlCharacters) {
  EXPECT_EQ(check(job({vertex("\"a\\nb\"")})),
            violation("vertices[0].name",
                      "must not contain control characters (found \\x0a at "
                      "byte 1 of \"a\\x0ab\")"));
  EXPECT_EQ(check(job({vertex("\"del\\x7f\"")})),
            violation("vertices[0].name",
                      "must not contain control characters (found \\x7f at "
                      "byte 3 of \"del\\x7f\")"));
}

TEST(JobGraphValidation, VertexNamesMustBeUnique) {
  EXPECT_EQ(check(job({vertex("a"), vertex("b"), vertex("a")})),
            violation("vertices[2].name", "duplicate vertex name \"a\" (also vertices[0].name)"));
}

TEST(JobGraphValidation, ParallelismMustBeAtLeastOne) {
  EXPECT_EQ(check(job({vertex("v", ", parallelism: 0")})),
            violation("vertices[0].parallelism", "must be in 1..10000, got 0"));
}

TEST(JobGraphValidation, ParallelismIsLimited) {
  JobGraphLimits limits;
  limits.maxParallelism = 8;
  EXPECT_EQ(check(job({vertex("v", ", parallelism: 8")}), limits), std::nullopt);
  EXPECT_EQ(check(job({vertex("v", ", parallelism: 9")}), limits),
            violation("vertices[0].parallelism", "must be in 1..8, got 9"));
  EXPECT_EQ(check(job({vertex("v", ", parallelism: 10001")})),
            violation("vertices[0].parallelism", "must be in 1..10000, got 10001"));
}

TEST(JobGraphValidation, TheTotalOfSubtasksIsLimitedNamingTheTotalAndTheOption) {
  JobGraphLimits limits;
  limits.maxTotalSubtasks = 10;
  EXPECT_EQ(check(job({vertex("a", ", parallelism: 6"), vertex("b", ", parallelism: 4")}), limits),
            std::nullopt);
  EXPECT_EQ(check(job({vertex("a", ", parallelism: 6"), vertex("b", ", parallelism: 5")}), limits),
            violation("vertices",
                      "hold 11 subtasks in total (the sum of their parallelism), more "
                      "than the limit of 10 (jobmaster.max-subtasks)"));
  // The default: two vertices at the largest parallelism are twice the default total.
  EXPECT_EQ(check(job({vertex("a", ", parallelism: 10000"), vertex("b", ", parallelism: 10000")})),
            violation("vertices",
                      "hold 20000 subtasks in total (the sum of their parallelism), "
                      "more than the limit of 10000 (jobmaster.max-subtasks)"));
}

TEST(JobGraphValidation, ACommandNeedsArguments) {
  EXPECT_EQ(
      check(job({"{name: v, command: {argv: []}}"})),
      violation("vertices[0].command.argv", "must not be empty (argv[0] is the program to run)"));
}

TEST(JobGraphValidation, TheProgramMustNotBeEmpty) {
  EXPECT_EQ(
      check(job({"{name: v, command: {argv: ['', x]}}"})),
      violation("vertices[0].command.argv[0]", "must not be empty (it is the program to run)"));
  // Later arguments may be empty.
  EXPECT_EQ(check(job({"{name: v, command: {argv: [echo, '']}}"})), std::nullopt);
}

TEST(JobGraphValidation, ArgumentsMustNotHoldNulBytes) {
  EXPECT_EQ(check(job({"{name: v, command: {argv: [echo, ok, \"a\\0b\"]}}"})),
            violation("vertices[0].command.argv[2]", "must not contain a NUL byte"));
}

TEST(JobGraphValidation, EnvNamesMustNotBeEmpty) {
  EXPECT_EQ(check(job({"{name: v, command: {argv: [true], env: [{name: A, value: x}, "
                       "{name: '', value: y}]}}"})),
            violation("vertices[0].command.env[1].name", "must not be empty"));
}

TEST(JobGraphValidation, EnvNamesMustNotHoldAnEqualsSign) {
  EXPECT_EQ(check(job({"{name: v, command: {argv: [true], env: {'A=B': x}}}"})),
            violation("vertices[0].command.env[0].name", "must not contain '=', got \"A=B\""));
}

TEST(JobGraphValidation, EnvAndWorkingDirMustNotHoldNulBytes) {
  EXPECT_EQ(check(job({"{name: v, command: {argv: [true], env: {\"A\\0\": x}}}"})),
            violation("vertices[0].command.env[0].name", "must not contain a NUL byte"));
  EXPECT_EQ(check(job({"{name: v, command: {argv: [true], env: {A: \"x\\0\"}}}"})),
            violation("vertices[0].command.env[0].value", "must not contain a NUL byte"));
  EXPECT_EQ(check(job({"{name: v, command: {argv: [true], working_dir: \"/tmp\\0\"}}"})),
            violation("vertices[0].command.working_dir", "must not contain a NUL byte"));
}

// A valid graph from `job({vertex("v")})` whose text at `set` is then replaced by raw bytes
// (the YAML reader would not produce invalid UTF-8, but a client on the wire can).
std::optional<JobGraphViolation> checkWithBytes(
    const std::function<void(wire::JobGraph::Builder, capnp::Text::Reader)>& set,
    std::string_view bytes) {
  auto message =
      parseOrFail(job({"{name: v, command: {argv: [echo, x], env: {A: x}, "
                       "working_dir: /tmp}}"}));
  set(message->getRoot<wire::JobGraph>(), capnp::Text::Reader(bytes.data(), bytes.size()));
  return findJobGraphViolation(graphOf(*message), JobGraphLimits{});
}

TEST(JobGraphValidation, EveryTextFieldMustBeValidUtf8NamingTheField) {
  using Graph = wire::JobGraph::Builder;
  using Text = capnp::Text::Reader;
  EXPECT_EQ(checkWithBytes([](Graph g, Text t) { g.setName(t); }, "bad\xff"),
            violation("name", "is not valid UTF-8 (byte \\xff at byte 3 of \"bad\\xff\")"));
  EXPECT_EQ(
      checkWithBytes([](Graph g, Text t) { g.getVertices()[0].setName(t); },
                     "v\xc3"),  // truncated
      violation("vertices[0].name", "is not valid UTF-8 (byte \\xc3 at byte 1 of \"v\\xc3\")"));
  EXPECT_EQ(
      checkWithBytes([](Graph g, Text t) { g.getVertices()[0].getCommand().getArgv().set(1, t); },
                     "\xed\xa0\x80"),  // a surrogate
      violation("vertices[0].command.argv[1]",
                "is not valid UTF-8 (byte \\xed at byte 0 of \"\\xed\\xa0\\x80\")"));
  EXPECT_EQ(checkWithBytes(
                [](Graph g, Text t) { g.getVertices()[0].getCommand().getEnv()[0].setName(t); },
                "\xc0\xaf"),  // overlong
            violation("vertices[0].command.env[0].name",
                      "is not valid UTF-8 (byte \\xc0 at byte 0 of \"\\xc0\\xaf\")"));
  EXPECT_EQ(checkWithBytes(
                [](Graph g, Text t) { g.getVertices()[0].getCommand().getEnv()[0].setValue(t); },
                "x\x80"),
            violation("vertices[0].command.env[0].value",
                      "is not valid UTF-8 (byte \\x80 at byte 1 of \"x\\x80\")"));
  EXPECT_EQ(
      checkWithBytes([](Graph g, Text t) { g.getVertices()[0].getCommand().setWorkingDir(t); },
                     "/tmp/\xfe"),
      violation("vertices[0].command.working_dir",
                "is not valid UTF-8 (byte \\xfe at byte 5 of \"/tmp/\\xfe\")"));
  // Valid UTF-8 beyond ASCII is fine everywhere, and so are tabs and newlines in arguments.
  EXPECT_EQ(checkWithBytes([](Graph g, Text t) { g.setName(t); }, "caf\xc3\xa9 \xe2\x82\xac"),
            std::nullopt);
  EXPECT_EQ(
      checkWithBytes([](Graph g, Text t) { g.getVertices()[0].getCommand().getArgv().set(1, t); },
                     "a\tb\nc"),
      std::nullopt);
}

TEST(JobGraphValidation, NamesMustNotHoldC1ControlsOrBidirectionalOverrides) {
  using Graph = wire::JobGraph::Builder;
  using Text = capnp::Text::Reader;
  EXPECT_EQ(checkWithBytes([](Graph g, Text t) { g.setName(t); },
                           "a\xc2\x85"
                           "b"),
            violation("name",
                      "must not contain control characters (found U+0085 at byte 1 of "
                      "\"a\\x85b\")"));
  // "invoice" shown reversed after U+202E RIGHT-TO-LEFT OVERRIDE.
  EXPECT_EQ(checkWithBytes([](Graph g, Text t) { g.getVertices()[0].setName(t); },
                           "x\xe2\x80\xae"
                           "eciovni"),
            violation("vertices[0].name",
                      "must not contain bidirectional override or isolate characters (found "
                      "U+202E at byte 1 of \"x\\u{202E}eciovni\")"));
  EXPECT_EQ(checkWithBytes([](Graph g, Text t) { g.setName(t); },
                           "\xe2\x81\xa6"
                           "a"),
            violation("name",
                      "must not contain bidirectional override or isolate characters "
                      "(found U+2066 at byte 0 of \"\\u{2066}a\")"));
  EXPECT_EQ(
      checkWithBytes(
          [](Graph g, Text t) { g.getVertices()[0].getCommand().getEnv()[0].setName(t); }, "A\x1b"),
      violation("vertices[0].command.env[0].name",
                "must not contain control characters (found \\x1b at byte 1 of "
                "\"A\\x1b\")"));
}

TEST(JobGraphValidation, NameLengthsAreLimited) {
  const std::string longest(256, 'n');
  EXPECT_EQ(check("job_id: 00000000000000000000000000000001\nname: " + longest + "\nvertices: [" +
                  vertex("v") + "]\n"),
            std::nullopt);
  auto tooLong = check("job_id: 00000000000000000000000000000001\nname: " + longest +
                       "x\nvertices: [" + vertex("v") + "]\n");
  ASSERT_TRUE(tooLong.has_value());
  EXPECT_EQ(tooLong->field, "name");
  EXPECT_THAT(tooLong->message, StartsWith("must be at most 256 bytes long, got 257 bytes (\"nnn"));

  EXPECT_EQ(check(job({vertex(std::string(128, 'v'))})), std::nullopt);
  auto vertexTooLong = check(job({vertex(std::string(129, 'v'))}));
  ASSERT_TRUE(vertexTooLong.has_value());
  EXPECT_EQ(vertexTooLong->field, "vertices[0].name");
  EXPECT_THAT(vertexTooLong->message, StartsWith("must be at most 128 bytes long, got 129 bytes"));

  JobGraphLimits limits;
  limits.maxVertexNameBytes = 4;
  EXPECT_EQ(check(job({vertex("abcde")}), limits),
            violation("vertices[0].name", "must be at most 4 bytes long, got 5 bytes (\"abcde\")"));
}

TEST(JobGraphValidation, UpstreamNamesMustExist) {
  EXPECT_EQ(check(job({vertex("a"), vertex("b", ", upstream: [a, c]")})),
            violation("vertices[1].upstream[1]", "no vertex is named \"c\""));
}

TEST(JobGraphValidation, AVertexCannotBeItsOwnUpstream) {
  EXPECT_EQ(check(job({vertex("a"), vertex("b", ", upstream: [a, b]")})),
            violation("vertices[1].upstream[1]", "vertex \"b\" cannot be its own upstream"));
}

TEST(JobGraphValidation, AnUpstreamIsListedOnce) {
  EXPECT_EQ(check(job({vertex("a"), vertex("b", ", upstream: [a, a]")})),
            violation("vertices[1].upstream[1]", "\"a\" is listed twice (also upstream[0])"));
}

TEST(JobGraphValidation, ACycleOfTwoIsNamed) {
  EXPECT_EQ(check(job({vertex("a", ", upstream: [b]"), vertex("b", ", upstream: [a]")})),
            violation("vertices[0].upstream[0]", "closes a cycle: a -> b -> a"));
}

TEST(JobGraphValidation, ALongerCycleIsNamedInDataFlowOrder) {
  EXPECT_EQ(check(job({vertex("source"), vertex("a", ", upstream: [source, c]"),
                       vertex("b", ", upstream: [a]"), vertex("c", ", upstream: [b]"),
                       vertex("sink", ", upstream: [c]")})),
            violation("vertices[1].upstream[1]", "closes a cycle: a -> b -> c -> a"));
}

TEST(JobGraphValidation, AVeryLongCycleIsShortenedInTheMessage) {
  std::string text = "job_id: 00000000000000000000000000000001\nname: j\nvertices:\n";
  constexpr int kCount = 20;
  for (int i = 0; i < kCount; ++i) {
    text += "  - " +
            vertex("v" + std::to_string(i),
                   ", upstream: [v" + std::to_string((i + kCount - 1) % kCount) + "]") +
            "\n";
  }
  auto found = check(text);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->field, "vertices[0].upstream[0]");
  EXPECT_EQ(found->message,
            "closes a cycle: v0 -> v1 -> v2 -> v3 -> v4 -> v5 -> v6 -> v7 -> v8 -> v9 -> v10 -> "
            "v11 -> v12 -> v13 -> v14 -> v15 -> ... -> v0 (20 vertices)");
}

TEST(JobGraphValidation, AcceptsDiamondsAndLongChains) {
  EXPECT_EQ(check(job({vertex("d", ", upstream: [b, c]"), vertex("b", ", upstream: [a]"),
                       vertex("c", ", upstream: [a]"), vertex("a")})),
            std::nullopt);
  // A chain as long as the vertex limit: the search does not recurse per vertex.
  std::string chain =
      "job_id: 00000000000000000000000000000001\nname: j\nvertices:\n  - " + vertex("v0") + "\n";
  for (int i = 1; i < 1000; ++i) {
    chain += "  - " +
             vertex("v" + std::to_string(i), ", upstream: [v" + std::to_string(i - 1) + "]") + "\n";
  }
  EXPECT_EQ(check(chain), std::nullopt);
}

TEST(JobGraphValidation, AcceptsAFullyConnectedGraphAtTheVertexLimit) {
  // Every vertex lists every earlier one: about half a million edges.
  capnp::MallocMessageBuilder message;
  auto graph = message.initRoot<wire::JobGraph>();
  graph.initJobId().setLo(1);
  graph.setName("dense");
  constexpr unsigned kCount = 1000;
  auto vertices = graph.initVertices(kCount);
  for (unsigned i = 0; i < kCount; ++i) {
    vertices[i].setName("v" + std::to_string(i));
    vertices[i].setParallelism(1);
    vertices[i].initCommand().initArgv(1).set(0, "true");
    auto upstream = vertices[i].initUpstream(i);
    for (unsigned k = 0; k < i; ++k) upstream.set(k, "v" + std::to_string(k));
  }
  EXPECT_EQ(findJobGraphViolation(graph.asReader(), JobGraphLimits{}), std::nullopt);
  // v998 now comes after v999 only, and v999 still after v998: the search from v0 reaches v999
  // (through v997), then v998, and the edge back to v999 closes the cycle.
  vertices[kCount - 2].initUpstream(1).set(0, "v" + std::to_string(kCount - 1));
  EXPECT_EQ(findJobGraphViolation(graph.asReader(), JobGraphLimits{}),
            violation("vertices[999].upstream[998]", "closes a cycle: v999 -> v998 -> v999"));
}

TEST(JobGraphValidation, ResourcesMustFitTheLargestSlot) {
  JobGraphLimits limits;
  limits.largestSlot = SlotProfile{1000, 1ULL << 30};
  EXPECT_EQ(check(job({vertex("a"), vertex("big", ", resources: {cpu: 2}")}), limits),
            violation("vertices[1].resources",
                      "vertex \"big\" requests cpu 2000m and memory 0B per subtask, more than the "
                      "largest slot offers (cpu 1000m, memory 1GiB)"));
  EXPECT_EQ(check(job({vertex("big", ", resources: {cpu: 0.5, memory: 1025MiB}")}), limits),
            violation("vertices[0].resources",
                      "vertex \"big\" requests cpu 500m and memory 1025MiB per subtask, more than "
                      "the largest slot offers (cpu 1000m, memory 1GiB)"));
  // An exact fit is a fit.
  EXPECT_EQ(check(job({vertex("v", ", resources: {cpu: 1, memory: 1GiB}")}), limits), std::nullopt);
}

TEST(JobGraphValidation, WithoutASlotProfileTheFitIsNotChecked) {
  EXPECT_EQ(check(job({vertex("v", ", resources: {cpu: 512, memory: 1TiB}")})), std::nullopt);
}

TEST(JobGraphValidation, TheExponentialMultiplierIsAtLeastOne) {
  EXPECT_EQ(check(job({vertex("v")}, "restart_strategy: {type: exponential-delay, multiplier: 1}")),
            std::nullopt);
  EXPECT_EQ(
      check(job({vertex("v")}, "restart_strategy: {type: exponential-delay, multiplier: 0.5}")),
      violation("restart_strategy.multiplier", "must be a number of at least 1, got 0.5"));
  // Not expressible in the file format, but possible on the wire.
  auto message = parseOrFail(job({vertex("v")}, "restart_strategy: {type: exponential-delay}"));
  message->getRoot<wire::JobGraph>().getRestartStrategy().getExponentialDelay().setMultiplier(NAN);
  EXPECT_EQ(findJobGraphViolation(graphOf(*message), JobGraphLimits{}),
            violation("restart_strategy.multiplier", "must be a number of at least 1, got nan"));
}

TEST(JobGraphValidation, TheMaximumDelayIsAtLeastTheInitialOne) {
  EXPECT_EQ(
      check(job({vertex("v")},
                "restart_strategy: {type: exponential-delay, initial_delay: 10s, "
                "max_delay: 5s}")),
      violation("restart_strategy.max_delay", "must be at least initial_delay (10s), got 5s"));
}

TEST(JobGraphValidation, TheFailureRateIntervalIsLongerThanZero) {
  EXPECT_EQ(check(job({vertex("v")}, "restart_strategy: {type: failure-rate, interval: 0}")),
            violation("restart_strategy.interval", "must be longer than 0"));
}

TEST(JobGraphValidation, RestartDurationsAreLimited) {
  const std::pair<std::string, std::string> cases[] = {
      {"{type: fixed-delay, delay: 169h}", "delay"},
      {"{type: exponential-delay, initial_delay: 169h, max_delay: 170h}", "initial_delay"},
      {"{type: exponential-delay, max_delay: 169h}", "max_delay"},
      {"{type: exponential-delay, reset_after: 169h}", "reset_after"},
      {"{type: failure-rate, interval: 169h}", "interval"},
      {"{type: failure-rate, delay: 169h}", "delay"},
  };
  for (const auto& [strategy, field] : cases) {
    SCOPED_TRACE(strategy);
    EXPECT_EQ(check(job({vertex("v")}, "restart_strategy: " + strategy)),
              violation("restart_strategy." + field, "must be at most 168h, got 169h"));
  }
  EXPECT_EQ(check(job({vertex("v")}, "restart_strategy: {type: fixed-delay, delay: 168h}")),
            std::nullopt);
  JobGraphLimits limits;
  limits.maxRestartDuration = std::chrono::seconds(30);
  EXPECT_EQ(check(job({vertex("v")}, "restart_strategy: {type: fixed-delay, delay: 31s}"), limits),
            violation("restart_strategy.delay", "must be at most 30s, got 31s"));
  // A value beyond what a Duration holds is still reported readably.
  auto message = parseOrFail(job({vertex("v")}, "restart_strategy: {type: fixed-delay}"));
  message->getRoot<wire::JobGraph>().getRestartStrategy().getFixedDelay().setDelayMs(~0ULL);
  EXPECT_EQ(
      findJobGraphViolation(graphOf(*message), JobGraphLimits{}),
      violation("restart_strategy.delay", "must be at most 168h, got 18446744073709551615ms"));
}

TEST(JobGraphValidation, AnUnknownRestartStrategyIsRefused) {
  auto message = parseOrFail(job({vertex("v")}, "restart_strategy: {type: fixed-delay}"));
  // Set the union's discriminant to a member this schema does not know (as a newer one might).
  capnp::AnyStruct::Builder strategy = message->getRoot<wire::JobGraph>().getRestartStrategy();
  const uint32_t offset =
      capnp::Schema::from<wire::RestartStrategy>().getProto().getStruct().getDiscriminantOffset();
  const uint16_t unknown = 9;
  std::memcpy(strategy.getDataSection().begin() + offset * 2, &unknown, sizeof unknown);
  EXPECT_EQ(findJobGraphViolation(graphOf(*message), JobGraphLimits{}),
            violation("restart_strategy",
                      "unknown type (union member 9; known: none, "
                      "fixed-delay, exponential-delay, failure-rate)"));
}

TEST(JobGraphValidation, ReportsTheFirstViolationInAFixedOrder) {
  // Vertex order first: vertices[0]'s upstream before vertices[1]'s name.
  EXPECT_EQ(check(job({vertex("a", ", upstream: [nope]"), vertex("''")})),
            violation("vertices[0].upstream[0]", "no vertex is named \"nope\""));
  // Within a vertex: name, parallelism, command, resources, upstream.
  EXPECT_EQ(check(job({"{name: a, parallelism: 0, command: {argv: []}, upstream: [a]}"})),
            violation("vertices[0].parallelism", "must be in 1..10000, got 0"));
  // Job fields before vertices, vertices before cycles, cycles before the restart strategy.
  EXPECT_EQ(check("job_id: 00000000000000000000000000000001\nname: ''\nvertices: [" + vertex("''") +
                  "]\n"),
            violation("name", "must not be empty"));
  EXPECT_EQ(check(job({vertex("a", ", upstream: [b]"), vertex("b", ", upstream: [a]"),
                       vertex("c", ", parallelism: 0")})),
            violation("vertices[2].parallelism", "must be in 1..10000, got 0"));
  EXPECT_EQ(check(job({vertex("a", ", upstream: [b]"), vertex("b", ", upstream: [a]")},
                      "restart_strategy: {type: failure-rate, interval: 0}")),
            violation("vertices[0].upstream[0]", "closes a cycle: a -> b -> a"));
}

TEST(JobGraphValidation, ValidateJobGraphJoinsFieldAndMessage) {
  auto message = parseOrFail(job({vertex("v", ", parallelism: 0")}));
  auto status = validateJobGraph(graphOf(*message), JobGraphLimits{});
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().message, "vertices[0].parallelism: must be in 1..10000, got 0");
  EXPECT_FALSE(status.error().isRetryable());
  auto valid = parseOrFail(std::string(kFullYaml));
  EXPECT_TRUE(validateJobGraph(graphOf(*valid), JobGraphLimits{}).ok());
  EXPECT_EQ(violation("", "unreadable").describe(), "unreadable");
}

// The full example as a flat (unpacked) message.
kj::Array<capnp::word> fullExampleWords() {
  auto message = parseOrFail(std::string(kFullYaml));
  return capnp::messageToFlatArray(*message);
}

TEST(JobGraphValidation, AMessageOverTheTraversalLimitIsAViolationNotAnException) {
  auto words = fullExampleWords();
  capnp::ReaderOptions options;
  options.traversalLimitInWords = 8;
  capnp::FlatArrayMessageReader reader(words, options);
  auto found = findJobGraphViolation(reader.getRoot<wire::JobGraph>(), JobGraphLimits{});
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->field, "");
  EXPECT_THAT(found->message, StartsWith("the JobGraph message cannot be read: "));
  EXPECT_THAT(found->message, ::testing::HasSubstr("traversal limit"));
}

TEST(JobGraphValidation, TextWithoutItsNulTerminatorIsAViolationNotAnException) {
  auto message = parseOrFail(job({vertex("UNTERMINATED")}));
  auto words = capnp::messageToFlatArray(*message);
  auto bytes = words.asBytes();
  const std::string needle("UNTERMINATED\0", 13);
  auto at = std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end());
  ASSERT_NE(at, bytes.end());
  at[12] = 'X';
  capnp::FlatArrayMessageReader reader(words);
  auto found = findJobGraphViolation(reader.getRoot<wire::JobGraph>(), JobGraphLimits{});
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->field, "");
  EXPECT_THAT(found->message, StartsWith("the JobGraph message cannot be read: "));
  EXPECT_THAT(found->message, ::testing::HasSubstr("NUL-terminated"));
  EXPECT_EQ(found->message.find('\0'), std::string::npos);
}

TEST(JobGraphValidation, GarbagePointersAreAViolationNotAnException) {
  auto words = fullExampleWords();
  // Word 0 is the segment table, word 1 the root pointer, word 2 the root's data section; from
  // word 3 on, the root's pointers and everything they point to become garbage.
  auto bytes = words.asBytes();
  std::memset(bytes.begin() + 3 * sizeof(capnp::word), 0xff,
              bytes.size() - 3 * sizeof(capnp::word));
  capnp::FlatArrayMessageReader reader(words);
  auto found = findJobGraphViolation(reader.getRoot<wire::JobGraph>(), JobGraphLimits{});
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->field, "");
  EXPECT_THAT(found->message, StartsWith("the JobGraph message cannot be read: "));
}

}  // namespace
}  // namespace regent::jobgraph

// Tests of the JobGraph file format (jobgraph/job_graph_spec.h): both syntaxes, every
// field and default, and the errors for unknown keys, wrong types, bad values and bad syntax.
#include "jobgraph/job_graph_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "jobgraph/job_graph_validation.h"
#include "rpc/wire_ids.h"
#include "tests/jobgraph/job_graph_test_util.h"

namespace regent::jobgraph {
namespace {

using testing::docsExample;
using testing::graphOf;
using ::testing::HasSubstr;
using testing::kFullJson;
using testing::kFullYaml;
using testing::parseError;
using testing::parseOrFail;
using ::testing::StartsWith;
using testing::textOf;

// A minimal valid graph with `vertexLines` as its only vertex's extra keys.
std::string oneVertex(const std::string& extra, const std::string& command = "argv: [true]") {
  return "name: j\nvertices:\n  - name: v\n    command: {" + command + "}\n" + extra;
}

std::string withRestart(const std::string& strategy) {
  return "name: j\nvertices: [{name: v, command: {argv: [true]}}]\nrestart_strategy: " + strategy +
         "\n";
}

TEST(JobGraphSpec, ReadsEveryFieldOfTheYamlExample) {
  auto message = parseOrFail(kFullYaml);
  auto graph = graphOf(*message);

  ASSERT_TRUE(graph.hasJobId());
  EXPECT_EQ(wire::idFromWire<JobId>(graph.getJobId()).toHex(), "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(graph.getName(), "nightly-wordcount");
  EXPECT_EQ(graph.getSubmittedAtMs(), 0);
  ASSERT_EQ(graph.getVertices().size(), 3u);

  auto fetch = graph.getVertices()[0];
  EXPECT_EQ(fetch.getName(), "fetch");
  EXPECT_EQ(fetch.getParallelism(), 1u);
  ASSERT_EQ(fetch.getCommand().getArgv().size(), 4u);
  EXPECT_EQ(fetch.getCommand().getArgv()[0], "/usr/bin/curl");
  EXPECT_EQ(fetch.getCommand().getArgv()[3], "https://example.com/corpus.txt");
  ASSERT_EQ(fetch.getCommand().getEnv().size(), 2u);
  EXPECT_EQ(fetch.getCommand().getEnv()[0].getName(), "HTTPS_PROXY");
  EXPECT_EQ(fetch.getCommand().getEnv()[0].getValue(), "http://proxy.internal:3128");
  EXPECT_EQ(fetch.getCommand().getEnv()[1].getName(), "RETRIES");
  EXPECT_EQ(fetch.getCommand().getEnv()[1].getValue(), "3");
  EXPECT_EQ(fetch.getCommand().getWorkingDir(), "/var/lib/jobs/wordcount");
  EXPECT_EQ(fetch.getResources().getCpuMillis(), 500u);
  EXPECT_EQ(fetch.getResources().getMemoryBytes(), 256u << 20);
  EXPECT_EQ(fetch.getUpstream().size(), 0u);

  auto count = graph.getVertices()[1];
  EXPECT_EQ(count.getName(), "count");
  EXPECT_EQ(count.getParallelism(), 4u);
  ASSERT_EQ(count.getCommand().getEnv().size(), 2u);  // a repeated name is kept: later wins
  EXPECT_EQ(count.getCommand().getEnv()[0].getValue(), "1");
  EXPECT_EQ(count.getCommand().getEnv()[1].getName(), "PYTHONUNBUFFERED");
  EXPECT_EQ(count.getCommand().getEnv()[1].getValue(), "0");
  EXPECT_EQ(count.getCommand().getWorkingDir(), "");
  EXPECT_EQ(count.getResources().getCpuMillis(), 1500u);
  EXPECT_EQ(count.getResources().getMemoryBytes(), 1u << 30);
  ASSERT_EQ(count.getUpstream().size(), 1u);
  EXPECT_EQ(count.getUpstream()[0], "fetch");

  auto report = graph.getVertices()[2];
  EXPECT_EQ(report.getParallelism(), 1u);  // the default
  EXPECT_EQ(report.getResources().getCpuMillis(), 0u);
  EXPECT_EQ(report.getResources().getMemoryBytes(), 0u);
  ASSERT_EQ(report.getUpstream().size(), 2u);
  EXPECT_EQ(report.getUpstream()[0], "count");
  EXPECT_EQ(report.getUpstream()[1], "fetch");

  ASSERT_TRUE(graph.hasRestartStrategy());
  ASSERT_TRUE(graph.getRestartStrategy().isExponentialDelay());
  auto exponential = graph.getRestartStrategy().getExponentialDelay();
  EXPECT_EQ(exponential.getInitialDelayMs(), 500u);
  EXPECT_EQ(exponential.getMaxDelayMs(), 120'000u);
  EXPECT_EQ(exponential.getMultiplier(), 1.5);
  EXPECT_EQ(exponential.getResetAfterMs(), 3'600'000u);
  EXPECT_EQ(exponential.getAttempts(), 10u);

  EXPECT_TRUE(validateJobGraph(graph, JobGraphLimits{}).ok());
}

TEST(JobGraphSpec, JsonGivesTheSameGraphAsYaml) {
  auto yaml = parseOrFail(kFullYaml, JobGraphSpecFormat::kYaml);
  auto json = parseOrFail(kFullJson, JobGraphSpecFormat::kJson);
  EXPECT_EQ(textOf(graphOf(*json)), textOf(graphOf(*yaml)));
  // JSON is YAML too: the YAML reader gives the same graph from the JSON text.
  auto jsonAsYaml = parseOrFail(kFullJson, JobGraphSpecFormat::kYaml);
  EXPECT_EQ(textOf(graphOf(*jsonAsYaml)), textOf(graphOf(*yaml)));
}

TEST(JobGraphSpec, TheExamplesOfTheDocsParseValidateAndAgree) {
  const std::string yaml = docsExample("yaml");
  const std::string json = docsExample("json");
  ASSERT_FALSE(yaml.empty()) << "docs/jobgraph.md has no ```yaml block";
  ASSERT_FALSE(json.empty()) << "docs/jobgraph.md has no ```json block";
  auto fromYaml = parseOrFail(yaml, JobGraphSpecFormat::kYaml);
  auto fromJson = parseOrFail(json, JobGraphSpecFormat::kJson);
  auto valid = validateJobGraph(graphOf(*fromYaml), JobGraphLimits{});
  EXPECT_TRUE(valid.ok()) << valid.error().message;
  EXPECT_EQ(textOf(graphOf(*fromJson)), textOf(graphOf(*fromYaml)));
}

TEST(JobGraphSpec, EveryRestartStrategyReadsTheSameFromYamlAndJson) {
  struct Case {
    std::string yaml;
    std::string json;
    std::string expected;  // the wire struct's text form
  };
  const Case cases[] = {
      {"{type: none}", R"({"type": "none"})", "(none = void)"},
      {"{type: fixed-delay, attempts: 5, delay: 10s}",
       R"({"type": "fixed-delay", "attempts": 5, "delay": "10s"})",
       "(fixedDelay = (attempts = 5, delayMs = 10000))"},
      {"{type: exponential-delay, initial_delay: 2s, max_delay: 1m, multiplier: 3, "
       "reset_after: 30m, attempts: 0}",
       R"({"type": "exponential-delay", "initial_delay": "2s", "max_delay": "1m",
           "multiplier": 3, "reset_after": "30m", "attempts": 0})",
       "(exponentialDelay = (initialDelayMs = 2000, maxDelayMs = 60000, multiplier = 3, "
       "resetAfterMs = 1800000, attempts = 0))"},
      {"{type: failure-rate, max_failures: 3, interval: 5m, delay: 500ms}",
       R"({"type": "failure-rate", "max_failures": 3, "interval": "5m", "delay": "500ms"})",
       "(failureRate = (maxFailures = 3, intervalMs = 300000, delayMs = 500))"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.yaml);
    auto yaml = parseOrFail(withRestart(c.yaml));
    const std::string json = R"({"name": "j", "vertices": [{"name": "v", "command": {"argv":
        ["true"]}}], "restart_strategy": )" +
                             c.json + "}";
    auto fromJson = parseOrFail(json, JobGraphSpecFormat::kJson);
    ASSERT_TRUE(graphOf(*yaml).hasRestartStrategy());
    EXPECT_EQ(kj::str(graphOf(*yaml).getRestartStrategy()).cStr(), c.expected);
    EXPECT_EQ(kj::str(graphOf(*fromJson).getRestartStrategy()).cStr(), c.expected);
    EXPECT_TRUE(validateJobGraph(graphOf(*yaml), JobGraphLimits{}).ok());
  }
}

TEST(JobGraphSpec, RestartStrategyFieldsHaveDefaults) {
  auto fixed = parseOrFail(withRestart("{type: fixed-delay}"));
  EXPECT_EQ(kj::str(graphOf(*fixed).getRestartStrategy()).cStr(),
            std::string("(fixedDelay = (attempts = 1, delayMs = 1000))"));
  auto exponential = parseOrFail(withRestart("{type: exponential-delay}"));
  EXPECT_EQ(kj::str(graphOf(*exponential).getRestartStrategy()).cStr(),
            std::string("(exponentialDelay = (initialDelayMs = 1000, maxDelayMs = 300000, "
                        "multiplier = 2, resetAfterMs = 3600000, attempts = 0))"));
  auto rate = parseOrFail(withRestart("{type: failure-rate}"));
  EXPECT_EQ(kj::str(graphOf(*rate).getRestartStrategy()).cStr(),
            std::string("(failureRate = (maxFailures = 1, intervalMs = 60000, delayMs = 1000))"));
}

TEST(JobGraphSpec, LeftOutKeysTakeTheirDefaults) {
  auto message = parseOrFail("name: j\nvertices: [{name: v, command: {argv: [true]}}]\n");
  auto graph = graphOf(*message);
  EXPECT_FALSE(graph.hasRestartStrategy());  // null = none
  auto vertex = graph.getVertices()[0];
  EXPECT_EQ(vertex.getParallelism(), 1u);
  EXPECT_EQ(vertex.getResources().getCpuMillis(), 0u);
  EXPECT_EQ(vertex.getResources().getMemoryBytes(), 0u);
  EXPECT_EQ(vertex.getUpstream().size(), 0u);
  EXPECT_EQ(vertex.getCommand().getEnv().size(), 0u);
  EXPECT_EQ(vertex.getCommand().getWorkingDir(), "");
  EXPECT_EQ(graph.getSubmittedAtMs(), 0);
}

TEST(JobGraphSpec, NullValuesAreTheSameAsLeftOutKeys) {
  auto message = parseOrFail(
      "job_id: ~\nname: j\nrestart_strategy: null\nvertices:\n"
      "  - {name: v, parallelism: ~, upstream: ~, resources: ~,\n"
      "     command: {argv: [true], env: ~, working_dir: ~}}\n");
  auto graph = graphOf(*message);
  EXPECT_TRUE(graph.hasJobId());
  EXPECT_FALSE(graph.hasRestartStrategy());
  EXPECT_EQ(graph.getVertices()[0].getParallelism(), 1u);
}

TEST(JobGraphSpec, AMissingJobIdIsAFreshRandomOne) {
  const std::string text = "name: j\nvertices: [{name: v, command: {argv: [true]}}]\n";
  auto first = parseOrFail(text);
  auto second = parseOrFail(text);
  ASSERT_TRUE(graphOf(*first).hasJobId());
  const JobId a = wire::idFromWire<JobId>(graphOf(*first).getJobId());
  const JobId b = wire::idFromWire<JobId>(graphOf(*second).getJobId());
  EXPECT_FALSE(a.isZero());
  EXPECT_NE(a.toHex(), b.toHex());
}

TEST(JobGraphSpec, AJobIdMustBe32HexDigits) {
  EXPECT_EQ(parseError("job_id: 1234\nname: j\nvertices: []\n"),
            "job_id: expected 32 hex digits, got \"1234\" (line 1, column 9)");
  EXPECT_THAT(parseError("job_id: 0123456789abcdef0123456789abcdeg\nname: j\nvertices: []\n"),
              StartsWith("job_id: expected 32 hex digits"));
  EXPECT_THAT(parseError("job_id: [1]\nname: j\nvertices: []\n"),
              StartsWith("job_id: expected a string, got a list"));
}

TEST(JobGraphSpec, CpuIsCoresOrThousandthsOfACore) {
  const std::pair<std::string, uint32_t> good[] = {
      {"0.5", 500}, {"2", 2000},       {"1.25", 1250}, {"1.500", 1500},
      {"0", 0},     {"\"500m\"", 500}, {"750m", 750},  {"\"0.001\"", 1},
  };
  for (const auto& [text, millis] : good) {
    SCOPED_TRACE(text);
    auto message = parseOrFail(oneVertex("    resources: {cpu: " + text + "}\n"));
    EXPECT_EQ(graphOf(*message).getVertices()[0].getResources().getCpuMillis(), millis);
  }
  EXPECT_EQ(parseError(oneVertex("    resources: {cpu: 0.0005}\n")),
            "vertices[0].resources.cpu: expected a CPU amount in cores such as 0.5 or 2, or in "
            "thousandths of a core such as \"500m\", got \"0.0005\" (finer than a thousandth of "
            "a core) (line 5, column 22)");
  for (const std::string bad : {"-1", "half", "1.", ".5", "1.5.0", "5mm", "m", "1e3", "5000000"}) {
    SCOPED_TRACE(bad);
    EXPECT_THAT(parseError(oneVertex("    resources: {cpu: " + bad + "}\n")),
                StartsWith("vertices[0].resources.cpu: expected a CPU amount"));
  }
  EXPECT_THAT(parseError(oneVertex("    resources: {cpu: 5000000}\n")), HasSubstr("(too large)"));
}

TEST(JobGraphSpec, MemoryIsASize) {
  const std::pair<std::string, uint64_t> good[] = {
      {"512MiB", 512ULL << 20}, {"4096", 4096}, {"\"1GiB\"", 1ULL << 30}, {"2TiB", 2ULL << 40}};
  for (const auto& [text, bytes] : good) {
    SCOPED_TRACE(text);
    auto message = parseOrFail(oneVertex("    resources: {memory: " + text + "}\n"));
    EXPECT_EQ(graphOf(*message).getVertices()[0].getResources().getMemoryBytes(), bytes);
  }
  EXPECT_EQ(parseError(oneVertex("    resources: {memory: 512MB}\n")),
            "vertices[0].resources.memory: expected a size such as 4096, 64MiB or 1GiB (units B, "
            "KiB, MiB, GiB, TiB) (unknown unit \"MB\"), got \"512MB\" (line 5, column 25)");
  EXPECT_THAT(parseError(oneVertex("    resources: {memory: -1}\n")),
              StartsWith("vertices[0].resources.memory: expected a size"));
  EXPECT_THAT(parseError(oneVertex("    resources: {memory: [1]}\n")),
              StartsWith("vertices[0].resources.memory: expected a string, got a list"));
}

TEST(JobGraphSpec, DurationsNeedAUnit) {
  EXPECT_EQ(parseError(withRestart("{type: fixed-delay, delay: 10}")),
            "restart_strategy.delay: expected a duration such as 500ms, 6s or 2m (a number needs "
            "a unit: ms, s, m or h), got \"10\" (line 3, column 46)");
  EXPECT_THAT(parseError(withRestart("{type: failure-rate, interval: soon}")),
              StartsWith("restart_strategy.interval: expected a duration such as 500ms"));
  EXPECT_THAT(parseError(withRestart("{type: exponential-delay, max_delay: 10d}")),
              StartsWith("restart_strategy.max_delay: expected a duration such as 500ms, 6s or 2m "
                         "(unknown unit \"d\")"));
  auto zero = parseOrFail(withRestart("{type: fixed-delay, delay: 0}"));
  EXPECT_EQ(graphOf(*zero).getRestartStrategy().getFixedDelay().getDelayMs(), 0u);
}

TEST(JobGraphSpec, UnknownKeysAreErrorsNamingTheirPath) {
  const std::string text =
      "name: j\n"
      "vertices:\n"
      "  - name: a\n"
      "    command: {argv: [true]}\n"
      "  - name: b\n"
      "    command:\n"
      "      argvv: [true]\n";
  EXPECT_EQ(parseError(text),
            "vertices[1].command.argvv: unknown key (expected one of argv, env, working_dir) "
            "(line 7, column 7)");
  EXPECT_EQ(parseError("name: j\nvertices: []\nsubmitted_at_ms: 5\n"),
            "submitted_at_ms: unknown key (expected one of job_id, name, vertices, "
            "restart_strategy) (line 3, column 1)");
  EXPECT_EQ(parseError(oneVertex("    resource: {cpu: 1}\n")),
            "vertices[0].resource: unknown key (expected one of name, parallelism, command, "
            "resources, upstream) (line 5, column 5)");
  EXPECT_EQ(parseError(oneVertex("    resources: {cpus: 1}\n")),
            "vertices[0].resources.cpus: unknown key (expected one of cpu, memory) (line 5, "
            "column 17)");
  EXPECT_EQ(parseError(oneVertex("", "argv: [true], env: [{name: A, valu: b}]")),
            "vertices[0].command.env[0].valu: unknown key (expected one of name, value) (line 4, "
            "column 45)");
  // A key that belongs to another restart strategy type.
  EXPECT_EQ(parseError(withRestart("{type: fixed-delay, max_failures: 3}")),
            "restart_strategy.max_failures: unknown key for type fixed-delay (expected one of "
            "type, attempts, delay) (line 3, column 39)");
  EXPECT_EQ(parseError(R"({"name": "j", "vertices": [], "Name": "k"})", JobGraphSpecFormat::kJson),
            "Name: unknown key (expected one of job_id, name, vertices, restart_strategy)");
}

TEST(JobGraphSpec, DuplicateKeysAreErrors) {
  EXPECT_EQ(parseError("name: j\nvertices: []\nname: k\n"),
            "name: duplicate key (line 3, column 1); first given on line 1");
  EXPECT_EQ(parseError(R"({"name": "j", "vertices": [], "name": "k"})", JobGraphSpecFormat::kJson),
            "name: duplicate key");
  EXPECT_EQ(parseError(oneVertex("", "argv: [true], env: {A: x, A: y}")),
            "vertices[0].command.env.A: duplicate key (line 4, column 41); first given on line 4");
}

TEST(JobGraphSpec, WrongTypesNameThePathAndTheExpectedType) {
  EXPECT_EQ(parseError(oneVertex("    parallelism: many\n")),
            "vertices[0].parallelism: expected a whole number from 0 to 4294967295, got \"many\" "
            "(line 5, column 18)");
  EXPECT_EQ(parseError(oneVertex("    parallelism: \"4\"\n")),
            "vertices[0].parallelism: expected a whole number from 0 to 4294967295, got the "
            "string \"4\" (line 5, column 18)");
  EXPECT_EQ(parseError(oneVertex("    parallelism: 2.5\n")),
            "vertices[0].parallelism: expected a whole number from 0 to 4294967295, got \"2.5\" "
            "(line 5, column 18)");
  EXPECT_EQ(parseError(oneVertex("    parallelism: -1\n")),
            "vertices[0].parallelism: expected a whole number from 0 to 4294967295, got \"-1\" "
            "(line 5, column 18)");
  EXPECT_EQ(parseError(oneVertex("    parallelism: 4294967296\n")),
            "vertices[0].parallelism: expected a whole number from 0 to 4294967295, got "
            "4294967296 (too large) (line 5, column 18)");
  EXPECT_EQ(parseError(oneVertex("    parallelism: 99999999999x\n")),
            "vertices[0].parallelism: expected a whole number from 0 to 4294967295, got "
            "\"99999999999x\" (line 5, column 18)");
  EXPECT_EQ(parseError(oneVertex("", "argv: echo")),
            "vertices[0].command.argv: expected a list, got \"echo\" (line 4, column 21)");
  EXPECT_EQ(parseError(oneVertex("", "argv: [echo, [a]]")),
            "vertices[0].command.argv[1]: expected a string, got a list (line 4, column 28)");
  EXPECT_EQ(parseError(oneVertex("", "argv: [echo, ~]")),
            "vertices[0].command.argv[1]: expected a string, got null (line 4, column 28)");
  EXPECT_EQ(parseError("name: j\nvertices: {a: 1}\n"),
            "vertices: expected a list, got a map (line 2, column 11)");
  EXPECT_EQ(parseError("name: [j]\nvertices: []\n"),
            "name: expected a string, got a list (line 1, column 7)");
  EXPECT_EQ(parseError("name: j\nvertices: [5]\n"),
            "vertices[0]: expected a map, got \"5\" (line 2, column 12)");
  EXPECT_EQ(parseError(oneVertex("    upstream: a\n")),
            "vertices[0].upstream: expected a list, got \"a\" (line 5, column 15)");
  EXPECT_EQ(parseError(oneVertex("", "argv: [true], env: 5")),
            "vertices[0].command.env: expected a map of NAME: value, or a list of {name, value} "
            "maps, got \"5\" (line 4, column 34)");
  EXPECT_EQ(parseError(oneVertex("", "argv: [true], env: {A: }")),
            "vertices[0].command.env.A: expected a string, got null (write \"\" for an empty "
            "value) (line 4, column 38)");
  EXPECT_EQ(parseError(withRestart("fixed-delay")),
            "restart_strategy: expected a map with a type, got \"fixed-delay\" (line 3, column "
            "19)");
  EXPECT_EQ(parseError(withRestart("{type: exponential-delay, multiplier: fast}")),
            "restart_strategy.multiplier: expected a number such as 2 or 1.5, got \"fast\" (line "
            "3, column 57)");
  EXPECT_EQ(parseError(withRestart("{type: exponential-delay, multiplier: .inf}")),
            "restart_strategy.multiplier: expected a number such as 2 or 1.5, got \".inf\" (line "
            "3, column 57)");
  EXPECT_EQ(parseError(R"({"name": "j", "vertices": [{"name": "v", "parallelism": "2",
                          "command": {"argv": ["true"]}}]})",
                       JobGraphSpecFormat::kJson),
            "vertices[0].parallelism: expected a whole number from 0 to 4294967295, got the "
            "string \"2\"");
}

TEST(JobGraphSpec, RequiredKeysMustBeGiven) {
  EXPECT_EQ(parseError("vertices: []\n"), "name: required key is missing (line 1, column 1)");
  EXPECT_EQ(parseError("name: j\n"), "vertices: required key is missing (line 1, column 1)");
  EXPECT_EQ(parseError("name: j\nvertices: [{command: {argv: [true]}}]\n"),
            "vertices[0].name: required key is missing (line 2, column 12)");
  EXPECT_EQ(parseError("name: j\nvertices: [{name: v}]\n"),
            "vertices[0].command: required key is missing (line 2, column 12)");
  EXPECT_EQ(parseError("name: j\nvertices: [{name: v, command: {env: {}}}]\n"),
            "vertices[0].command.argv: required key is missing (line 2, column 31)");
  EXPECT_EQ(parseError(oneVertex("", "argv: [true], env: [{value: x}]")),
            "vertices[0].command.env[0].name: required key is missing (line 4, column 35)");
  EXPECT_EQ(parseError(withRestart("{attempts: 3}")),
            "restart_strategy.type: required key is missing (line 3, column 19)");
  EXPECT_EQ(parseError(withRestart("{type: linear}")),
            "restart_strategy.type: unknown type \"linear\" (expected none, fixed-delay, "
            "exponential-delay or failure-rate) (line 3, column 26)");
}

TEST(JobGraphSpec, EnvIsAMapOrAListOfNameValuePairs) {
  auto map = parseOrFail(oneVertex("", "argv: [true], env: {B: '2', A: 1, EMPTY: ''}"));
  auto env = graphOf(*map).getVertices()[0].getCommand().getEnv();
  ASSERT_EQ(env.size(), 3u);  // in file order
  EXPECT_EQ(env[0].getName(), "B");
  EXPECT_EQ(env[1].getName(), "A");
  EXPECT_EQ(env[1].getValue(), "1");
  EXPECT_EQ(env[2].getValue(), "");
  auto list = parseOrFail(oneVertex("",
                                    "argv: [true], env: [{name: B, value: '2'}, "
                                    "{name: A, value: 1}, {name: EMPTY, value: ''}]"));
  EXPECT_EQ(textOf(graphOf(*list)).substr(textOf(graphOf(*list)).find("vertices")),
            textOf(graphOf(*map)).substr(textOf(graphOf(*map)).find("vertices")));
}

TEST(JobGraphSpec, YamlSyntaxErrorsNameLineAndColumn) {
  EXPECT_EQ(parseError("name: j\nvertices: [\n  {name: v\n"),
            "YAML syntax error (line 4, column 1): end of map flow not found");
  EXPECT_EQ(parseError("name: [a, b\nvertices: []\n"),
            "YAML syntax error (line 2, column 9): end of sequence flow not found");
  EXPECT_EQ(parseError("name: j\n\tvertices: []\n"),
            "YAML syntax error (line 2, column 1): illegal tab when looking for indentation");
  EXPECT_EQ(parseError("name: j\n  vertices: []\n"),
            "YAML syntax error (line 2, column 11): illegal map value");
}

TEST(JobGraphSpec, JsonIsStrict) {
  EXPECT_EQ(parseError("{\n  \"name\": \"j\",\n  \"vertices\": [],\n}", JobGraphSpecFormat::kJson),
            "JSON syntax error (line 4, column 1): syntax error while parsing object key - "
            "unexpected '}'; expected string literal");
  EXPECT_THAT(parseError(R"({"name": "j", "vertices": []} trailing)", JobGraphSpecFormat::kJson),
              StartsWith("JSON syntax error (line 1, column 33): "));
  EXPECT_THAT(
      parseError("{\"name\": \"j\", // a comment\n\"vertices\": []}", JobGraphSpecFormat::kJson),
      StartsWith("JSON syntax error (line 1, column 15): "));
  EXPECT_THAT(parseError("{name: j, vertices: []}", JobGraphSpecFormat::kJson),
              StartsWith("JSON syntax error (line 1, column 3): "));
  EXPECT_THAT(parseError("", JobGraphSpecFormat::kJson), StartsWith("JSON syntax error"));
  EXPECT_EQ(parseError(R"(["name", "j"])", JobGraphSpecFormat::kJson),
            "expected the JobGraph as a map with name and vertices, got a list");
}

TEST(JobGraphSpec, JsonStringsDecodeEscapes) {
  // An escaped surrogate pair (U+1F600), an escaped slash, a tab and a UTF-8 BOM up front.
  auto message = parseOrFail(
      "\xEF\xBB\xBF{\"name\": \"smile \\ud83d\\ude00 a\\/b\\tc\", \"vertices\": [{\"name\": "
      "\"v\", \"command\": {\"argv\": [\"true\"]}}]}",
      JobGraphSpecFormat::kJson);
  EXPECT_EQ(std::string(graphOf(*message).getName().cStr()), "smile \xF0\x9F\x98\x80 a/b\tc");
}

TEST(JobGraphSpec, DetectsJsonByItsOpeningBrace) {
  const std::string yaml = "name: j\nvertices: [{name: v, command: {argv: [true]}}]\n";
  EXPECT_EQ(textOf(graphOf(*parseOrFail(kFullJson, JobGraphSpecFormat::kDetect))),
            textOf(graphOf(*parseOrFail(kFullYaml))));
  EXPECT_EQ(textOf(graphOf(*parseOrFail(kFullYaml, JobGraphSpecFormat::kDetect))),
            textOf(graphOf(*parseOrFail(kFullYaml))));
  EXPECT_TRUE(
      parseJobGraphSpec("\xEF\xBB\xBF  \n" + std::string(kFullJson), JobGraphSpecFormat::kDetect));
  // A YAML flow map at the top is taken for JSON, and is not strict JSON.
  EXPECT_THAT(parseError("{name: j, vertices: []}", JobGraphSpecFormat::kDetect),
              StartsWith("JSON syntax error"));
  EXPECT_TRUE(parseJobGraphSpec("{name: j, vertices: [{name: v, command: {argv: [true]}}]}",
                                JobGraphSpecFormat::kYaml));

  EXPECT_EQ(jobGraphSpecFormatForPath("jobs/wordcount.json"), JobGraphSpecFormat::kJson);
  EXPECT_EQ(jobGraphSpecFormatForPath("WORDCOUNT.JSON"), JobGraphSpecFormat::kJson);
  EXPECT_EQ(jobGraphSpecFormatForPath("a.yaml"), JobGraphSpecFormat::kYaml);
  EXPECT_EQ(jobGraphSpecFormatForPath("a.yml"), JobGraphSpecFormat::kYaml);
  EXPECT_EQ(jobGraphSpecFormatForPath("-"), JobGraphSpecFormat::kDetect);
  EXPECT_EQ(jobGraphSpecFormatForPath("job"), JobGraphSpecFormat::kDetect);
  EXPECT_EQ(jobGraphSpecFormatForPath("json"), JobGraphSpecFormat::kDetect);
}

TEST(JobGraphSpec, TheDocumentMustBeOneMap) {
  EXPECT_EQ(parseError(""), "the document is empty: expected a map with name and vertices");
  EXPECT_EQ(parseError("# only a comment\n"),
            "the document is empty: expected a map with name and vertices");
  EXPECT_EQ(parseError("- a\n- b\n"),
            "expected the JobGraph as a map with name and vertices, got a list (line 1, column 1)");
  EXPECT_EQ(parseError("name: j\nvertices: []\n---\nname: k\nvertices: []\n"),
            "the file holds more than one YAML document; a JobGraph file holds one (line 4, "
            "column 1)");
  // A document end marker alone is fine.
  EXPECT_TRUE(parseJobGraphSpec("name: j\nvertices: []\n...\n", JobGraphSpecFormat::kYaml));
  EXPECT_EQ(parseError("? [a]\n: 1\n"),
            "a key must be a plain name, not a list (line 1, column 3)");
}

TEST(JobGraphSpec, AliasesWorkButCannotExpandBeyondTheText) {
  auto message = parseOrFail(
      "name: j\nvertices:\n"
      "  - {name: a, command: {argv: [true], env: &common {A: '1', B: '2'}}}\n"
      "  - {name: b, command: {argv: [true], env: *common}}\n");
  EXPECT_EQ(graphOf(*message).getVertices()[1].getCommand().getEnv().size(), 2u);

  std::string laughs = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i) {
    const std::string prev = "*a" + std::to_string(i - 1);
    laughs += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [" + prev;
    for (int k = 1; k < 10; ++k) laughs += ", " + prev;
    laughs += "]\n";
  }
  EXPECT_THAT(parseError(laughs),
              StartsWith("the document expands (through aliases) beyond its own size"));
}

TEST(JobGraphSpec, DeepNestingIsRefused) {
  const std::string deepYaml = "name: " + std::string(40, '[') + std::string(40, ']') + "\n";
  EXPECT_THAT(parseError(deepYaml), StartsWith("the document nests deeper than 32 levels"));
  const std::string deepJson =
      "{\"name\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_EQ(parseError(deepJson, JobGraphSpecFormat::kJson),
            "the document nests deeper than 32 levels");
}

}  // namespace
}  // namespace regent::jobgraph

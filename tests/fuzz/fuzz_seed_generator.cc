// Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/) from the tests'
// examples and the project's real encoders, so every seed has a source: the JobGraph examples of
// the format tests and of docs/jobgraph.md, conf/regent.yaml, LeaderInfo/ContenderInfo JSON from
// toJson, records packed by the real stores, RPC frames serialized by Cap'n Proto, and
// authentication handshakes in the auth_handshake target's step format.
//
//   fuzz-seed-generator DIR   (scripts/fuzz.sh --write-seeds runs it on tests/fuzz/corpus)
#include <capnp/message.h>
#include <capnp/rpc.capnp.h>
#include <capnp/serialize.h>
#include <kj/async.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>

#include "common/ids.h"
#include "jobgraph/job_graph_spec.h"
#include "leader/leader_info.h"
#include "rpc/output_token.h"
#include "rpc/schema/jobs.capnp.h"
#include "rpc/wire_ids.h"
#include "store/job_progress_store.h"
#include "store/store_services.h"
#include "tests/fixtures/job_graph_test_util.h"
#include "tests/fuzz/auth_handshake_input_test_util.h"
#include "tests/fixtures/memory_record_store_test_util.h"
#include "tests/fuzz/output_token_fuzz_test_util.h"
#include "tests/jobgraph/job_graph_test_util.h"
#include "tests/store/progress_test_util.h"

namespace {

namespace fs = std::filesystem;
using namespace regent;

// The job id the stored-records target stores its input under (fuzz_stored_records.cc).
constexpr const char* kKey = "0123456789abcdef0123456789abcdef";

fs::path outputDir;

void writeSeed(const std::string& target, const std::string& name, char selector,
               std::string_view body, bool withSelector = true) {
  const fs::path dir = outputDir / target;
  fs::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
  if (withSelector) out.put(selector);
  out.write(body.data(), static_cast<std::streamsize>(body.size()));
  if (!out) throw std::runtime_error("cannot write " + (dir / name).string());
  std::cout << (dir / name).string() << " (" << body.size() + (withSelector ? 1 : 0)
            << " bytes)\n";
}

std::string readSourceFile(const std::string& relative) {
  std::ifstream in(std::string(REGENT_SOURCE_DIR) + "/" + relative, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + relative);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string flat(capnp::MessageBuilder& message) {
  auto words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

kj::Own<capnp::MallocMessageBuilder> parsed(std::string_view text,
                                            jobgraph::JobGraphSpecFormat format) {
  auto message = jobgraph::parseJobGraphSpec(text, format);
  if (!message) throw std::runtime_error("example does not parse: " + message.error().message);
  return kj::mv(message).value();
}

void jobGraphSeeds() {
  using jobgraph::JobGraphSpecFormat;
  using jobgraph::testing::docsExample;
  using jobgraph::testing::kFullJson;
  using jobgraph::testing::kFullYaml;
  writeSeed("jobgraph", "full.yaml", 0, kFullYaml);
  writeSeed("jobgraph", "full.json", 1, kFullJson);
  writeSeed("jobgraph", "docs.yaml", 2, docsExample("yaml"));
  writeSeed("jobgraph", "docs.json", 2, docsExample("json"));
  writeSeed("jobgraph", "full.message", 3, flat(*parsed(kFullYaml, JobGraphSpecFormat::kYaml)));
}

void configSeeds() {
  const std::string example = readSourceFile("conf/regent.yaml");
  writeSeed("config", "example", 0,
            example + std::string(1, '\0') +
                "REGENT_HA_ZOOKEEPER_QUORUM=127.0.0.1:2181,127.0.0.1:2182\nREGENT_LOG_LEVEL=debug\n" +
                std::string(1, '\0') + "ha.mode=standalone\nrpc.max-message-size=1MiB\n",
            /*withSelector=*/false);
  writeSeed("config", "small", 0,
            "ha:\n  mode: standalone\n  zookeeper:\n    session-timeout: 10s\nrpc:\n  bind: "
            "127.0.0.1:6123\n" +
                std::string(1, '\0') + "REGENT_RPC_BIND=127.0.0.1:0\n" + std::string(1, '\0') +
                "log.level=warn\n",
            /*withSelector=*/false);
}

void leaderInfoSeeds() {
  const leader::ContenderInfo contender{
      .masterId = "5f0c1a9e2b7d4c36",
      .rpcAddress = "10.0.0.5:6123",
      .httpAddress = "10.0.0.5:8081",
      .host = "master-1",
      .pid = 4242,
      .version = "0.1.0",
      .startedAtMs = 1795000000000,
  };
  leader::LeaderInfo serving = leader::leaderInfoFor(contender, 7, 1795000001000);
  serving.status = leader::LeaderStatus::kServing;
  writeSeed("leader_info", "contender.json", 0, leader::toJson(contender), false);
  writeSeed("leader_info", "leader.json", 0, leader::toJson(serving), false);
}

void storedRecordSeeds() {
  kj::EventLoop loop;
  kj::WaitScope waitScope(loop);
  auto backend = kj::heap<store::testing::MemoryRecordStore>();
  auto& records = backend->records;
  auto stores = store::makeLeaderStores(kj::mv(backend), 10);
  const JobId id = *JobId::fromHex(kKey);
  auto stored = [&](store::RecordFamily family) { return records.at(family).at(kKey); };

  // kFullYaml carries the job id kKey.
  auto full = parsed(jobgraph::testing::kFullYaml, jobgraph::JobGraphSpecFormat::kYaml);
  if (!stores->jobGraphs().put(full->getRoot<wire::JobGraph>()).wait(waitScope).ok()) {
    throw std::runtime_error("put of the full JobGraph failed");
  }
  writeSeed("stored_records", "jobgraph-full", 0, stored(store::RecordFamily::kJobGraphs));

  auto chain = regent::testing::makeJobGraph(
      id, {.name = "chain", .vertices = 3, .parallelism = 2, .cpuMillis = 500,
           .memoryBytes = 1 << 20, .paddingBytes = 64, .fixedDelayRestart = true});
  if (!stores->jobGraphs().put(chain->getRoot<wire::JobGraph>()).wait(waitScope).ok()) {
    throw std::runtime_error("put of the chain JobGraph failed");
  }
  writeSeed("stored_records", "jobgraph-chain", 0, stored(store::RecordFamily::kJobGraphs));

  capnp::MallocMessageBuilder result;
  auto root = result.initRoot<wire::JobResult>();
  wire::setWireId(root.initJobId(), id);
  root.setJobName("nightly-wordcount");
  root.setState(wire::JobState::FAILED);
  root.setSubmittedAtMs(1795000000000);
  root.setEndedAtMs(1795000060000);
  root.setNetRuntimeMs(58000);
  root.setRestarts(3);
  root.initFailure().setMessage("exit code 2");
  root.getFailure().setVertexName("count");
  if (!stores->jobResults().createDirty(root.asReader()).wait(waitScope).ok()) {
    throw std::runtime_error("createDirty failed");
  }
  writeSeed("stored_records", "jobresult-dirty", 1, stored(store::RecordFamily::kJobResults));
  if (!stores->jobResults().markClean(id).wait(waitScope).ok()) {
    throw std::runtime_error("markClean failed");
  }
  writeSeed("stored_records", "jobresult-clean", 1, stored(store::RecordFamily::kJobResults));

  // A job three subtasks in: one finished, one running, one failed (to run again).
  auto hexAttempt = [](char last) { return *AttemptId::fromHex(std::string(31, 'a') + last); };
  auto progress =
      regent::testing::progressRecord(id,
                                      {{0, hexAttempt('0'), 0, wire::ExecutionState::FINISHED},
                                       {2, hexAttempt('1'), 0, wire::ExecutionState::RUNNING},
                                       {4, hexAttempt('2'), 1, wire::ExecutionState::FAILED}},
                                      1, 4);
  auto record = progress->getRoot<wire::JobProgress>();
  record.setWrittenAtMs(1795000030000);
  record.setStartedAtMs(1795000000000);
  record.setRestartDelayMs(1000);
  if (!stores->jobProgress().put(record.asReader()).wait(waitScope).ok()) {
    throw std::runtime_error("put of the job progress failed");
  }
  writeSeed("stored_records", "jobprogress", 2, stored(store::RecordFamily::kJobProgress));

  // Part 0 of a split record: subtasks 0, 2 and 4 as above, and one past part 0.
  auto split = regent::testing::progressRecord(
      id,
      {{0, hexAttempt('0'), 0, wire::ExecutionState::FINISHED},
       {2, hexAttempt('1'), 0, wire::ExecutionState::RUNNING},
       {4, hexAttempt('2'), 1, wire::ExecutionState::FAILED},
       {store::kProgressPartSubtasks, hexAttempt('3'), 0, wire::ExecutionState::DEPLOYING}},
      1, 4);
  auto splitRecord = split->getRoot<wire::JobProgress>().asReader();
  if (!stores->jobProgress().put(splitRecord).wait(waitScope).ok()) {
    throw std::runtime_error("put of the split job progress failed");
  }
  writeSeed("stored_records", "jobprogress-part", 4,
            records.at(store::RecordFamily::kJobProgressParts).at(std::string(kKey) + "-0"));
}

void rpcFramingSeeds() {
  capnp::MallocMessageBuilder bootstrap;
  bootstrap.initRoot<capnp::rpc::Message>().initBootstrap().setQuestionId(0);

  capnp::MallocMessageBuilder call;
  auto callRoot = call.initRoot<capnp::rpc::Message>().initCall();
  callRoot.setQuestionId(1);
  callRoot.initTarget().setImportedCap(0);
  callRoot.setInterfaceId(0x9d0a1b2c3d4e5f60ull);
  callRoot.setMethodId(0);
  regent::testing::fillJobGraph(callRoot.initParams().getContent().initAs<wire::JobGraph>(),
                        *JobId::fromHex(kKey), {.name = "wordcount", .vertices = 2});

  capnp::MallocMessageBuilder abort;
  auto exception = abort.initRoot<capnp::rpc::Message>().initAbort();
  exception.setReason("message larger than rpc.max-message-size");
  exception.setType(capnp::rpc::Exception::Type::FAILED);

  // Limit selector 13: 2^13 words (64 KiB), every message fits; 4: 16 words, the call does not.
  writeSeed("rpc_framing", "bootstrap-call-abort", 13, flat(bootstrap) + flat(call) + flat(abort));
  writeSeed("rpc_framing", "call-over-the-cap", 4, flat(bootstrap) + flat(call));
}

// Handshakes in the step format of fuzz_auth_handshake.cc: one that succeeds and uses its role,
// wrong proofs, replays, a certificate role, and a master that does not require authentication.
void authHandshakeSeeds() {
  using fuzz::AuthHandshakeInput;
  using fuzz::AuthSettingsChoice;
  using fuzz::CertificateChoice;
  using fuzz::MethodChoice;
  constexpr uint16_t kReader = static_cast<uint16_t>(wire::Role::READER);
  constexpr uint16_t kAdmin = static_cast<uint16_t>(wire::Role::ADMIN);
  constexpr uint16_t kWorker = static_cast<uint16_t>(wire::Role::WORKER);
  auto seed = [](const std::string& name, const AuthHandshakeInput& input) {
    writeSeed("auth_handshake", name, 0, input.bytes(), /*withSelector=*/false);
  };

  seed("valid-handshake",
       AuthHandshakeInput(AuthSettingsChoice::kRequiredSomeSecrets, CertificateChoice::kNone)
           .call(0, MethodChoice::kDispatcher)
           .challenge()
           .prove(kAdmin, /*key=*/0)
           .call(1, MethodChoice::kSubmitJob)
           .call(1, MethodChoice::kHandOver)
           .call(1, MethodChoice::kUnknownMethod)
           .call(0, MethodChoice::kLeaderInfo));
  seed("wrong-proof",
       AuthHandshakeInput(AuthSettingsChoice::kRequiredAllSecrets, CertificateChoice::kNone)
           .challenge()
           .prove(kAdmin, /*key=*/1)
           .challenge()
           .prove(kWorker, /*key=*/0, /*nonce=*/0, /*via=*/0, /*clientNonceSize=*/128 + 31)
           .challenge()
           .forge(9, "short", "not-a-proof")
           .call(0, MethodChoice::kHandOver));
  seed("replay",
       AuthHandshakeInput(AuthSettingsChoice::kRequiredSomeSecrets, CertificateChoice::kNone)
           .challenge()
           .prove(kReader, /*key=*/0)
           .replay(0)
           .challenge()
           .prove(kReader, /*key=*/0, /*nonce=*/1)
           .call(1, MethodChoice::kListJobs)
           .call(1, MethodChoice::kCancelJob)
           .call(1, MethodChoice::kResourceManager));
  seed("certificate-role",
       AuthHandshakeInput(AuthSettingsChoice::kRequiredSomeSecrets, CertificateChoice::kRobot)
           .call(0, MethodChoice::kJobMaster)
           .call(0, MethodChoice::kDispatcher)
           .challenge()
           .prove(kWorker, /*key=*/0));
  seed("not-required",
       AuthHandshakeInput(AuthSettingsChoice::kOptional, CertificateChoice::kUnmapped)
           .call(0, MethodChoice::kSubmitJob)
           .challenge()
           .prove(kReader, /*key=*/0)
           .call(1, MethodChoice::kHandOver, /*epoch=*/2));
}

// Tokens signed with the target's key: live, expired, of another epoch, for both streams; and one
// cut short.
void outputTokenSeeds() {
  const rpc::OutputReadKey key = fuzz::outputTokenFuzzKey();
  const AttemptId attempt(0x0123456789abcdefULL, 0x0fedcba987654321ULL);
  auto token = [&](uint64_t epoch, rpc::OutputStreamSet streams, int64_t expires) {
    return rpc::encodeOutputToken(rpc::OutputTokenClaims{.epoch = epoch,
                                                         .attempt = attempt,
                                                         .streams = streams,
                                                         .expiresAtSeconds = expires},
                                  key.key);
  };
  const int64_t now = fuzz::kOutputTokenFuzzNow;
  writeSeed("output_token", "live-stdout", 0,
            token(key.epoch, rpc::OutputStreamSet::kStdout, now + 60), false);
  writeSeed("output_token", "live-both", 0,
            token(key.epoch, rpc::OutputStreamSet::kBoth, now + 1), false);
  writeSeed("output_token", "expired", 0,
            token(key.epoch, rpc::OutputStreamSet::kStderr, now - 1), false);
  writeSeed("output_token", "other-epoch", 0,
            token(key.epoch + 1, rpc::OutputStreamSet::kStdout, now + 60), false);
  writeSeed("output_token", "truncated", 0,
            token(key.epoch, rpc::OutputStreamSet::kStdout, now + 60).substr(0, 44), false);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: fuzz-seed-generator DIR\n";
    return 2;
  }
  outputDir = argv[1];
  try {
    jobGraphSeeds();
    configSeeds();
    leaderInfoSeeds();
    storedRecordSeeds();
    rpcFramingSeeds();
    authHandshakeSeeds();
    outputTokenSeeds();
  } catch (const std::exception& e) {
    std::cerr << "fuzz-seed-generator: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

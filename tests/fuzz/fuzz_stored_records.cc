// Fuzz target: decoding of every stored record (packed Cap'n Proto JobGraph, JobResult and
// JobProgress), the
// way a new leader reads them on recovery and the Dispatcher reads one job, through the real
// stores (store/packed_stores.cc) over a one-record backend. Anyone who can write the cluster's
// ZooKeeper nodes or the RocksDB directory controls these bytes: a bad record must be reported
// as corrupt, naming its job, and never crash the reader.
//
// Input: one selector byte (modulo 5 — 0: a JobGraph record, 1: a JobResult record, 2: a
// JobProgress record, 3: a job detail, 4: part 0 of a split JobProgress record, stored beside a
// well-formed record of job kKey that lists it), then the record's bytes, stored under the job
// id kKey (the seeds carry that id; fuzz-seed-generator writes them).
#include <capnp/message.h>
#include <capnp/serialize-packed.h>
#include <kj/async.h>
#include <kj/io.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/ids.h"
#include "jobgraph/job_graph_validation.h"
#include "rpc/wire_ids.h"
#include "store/record_store.h"
#include "store/store_services.h"
#include "tests/fixtures/memory_record_store_test_util.h"

namespace {

using namespace regent::store;
using regent::JobId;

constexpr const char* kKey = "0123456789abcdef0123456789abcdef";

// A record that does not decode is reported corrupt, naming its job; nothing else may happen.
void expectCorruptNamingTheJob(const StoreError& error) {
  if (error.code != StoreErrorCode::kCorrupt) std::abort();
  if (error.message.find(kKey) == std::string::npos) std::abort();
}

void fuzzJobGraph(JobGraphStore& graphs, kj::WaitScope& waitScope) {
  const JobId id = *JobId::fromHex(kKey);
  auto recovered = graphs.recoverAll().wait(waitScope);
  if (!recovered.ok()) std::abort();
  auto one = graphs.get(id).wait(waitScope);
  if (recovered.value().graphs.size() + recovered.value().corrupt.size() != 1) std::abort();
  if (!recovered.value().graphs.empty()) {
    if (!one.ok()) std::abort();  // Recovery and get() decode alike.
    // What the Dispatcher does with a recovered graph: check it and read its name.
    const auto graph = recovered.value().graphs.front().get();
    regent::jobgraph::JobGraphLimits limits;
    (void)regent::jobgraph::findJobGraphViolation(graph, limits);
    (void)graph.getName();
  } else {
    if (one.ok()) std::abort();
    expectCorruptNamingTheJob(one.error());
  }
}

void fuzzJobResult(JobResultStore& results, kj::WaitScope& waitScope) {
  const JobId id = *JobId::fromHex(kKey);
  auto all = results.listAll().wait(waitScope);
  if (!all.ok()) std::abort();
  (void)results.listDirty().wait(waitScope);
  auto one = results.get(id).wait(waitScope);
  if (all.value().results.empty()) {
    if (one.ok()) std::abort();
    expectCorruptNamingTheJob(one.error());
    return;
  }
  if (!one.ok()) std::abort();
  const auto result = all.value().results.front().get();
  (void)result.getJobName();
  // A new leader finishing the cleanup of a dirty result re-encodes it.
  auto cleaned = results.markClean(id).wait(waitScope);
  if (!cleaned.ok() && cleaned.error().code != StoreErrorCode::kTooLarge) std::abort();
}

// A stored detail of an ended job: read as jobStatus would, then stored again by a leader.
void fuzzJobDetail(JobResultStore& results, kj::WaitScope& waitScope) {
  const JobId id = *JobId::fromHex(kKey);
  auto detail = results.getDetail(id).wait(waitScope);
  if (!detail.ok()) {
    expectCorruptNamingTheJob(detail.error());
    return;
  }
  const auto status = detail.value().get();
  for (auto vertex : status.getVertices()) {
    (void)vertex.getName();
    for (auto subtask : vertex.getSubtasks()) (void)subtask.getHost();
  }
  auto stored = results.putDetail(status).wait(waitScope);
  if (!stored.ok() && stored.error().code != StoreErrorCode::kTooLarge &&
      stored.error().code != StoreErrorCode::kInvalid) {
    std::abort();
  }
}

void fuzzJobProgress(JobProgressStore& progress, kj::WaitScope& waitScope) {
  auto recovered = progress.recoverAll().wait(waitScope);
  if (!recovered.ok()) std::abort();
  if (recovered.value().records.size() + recovered.value().corrupt.size() != 1) std::abort();
  if (recovered.value().records.empty()) {
    if (recovered.value().corrupt.front().key != kKey) std::abort();
    return;
  }
  // What a new JobMaster reads of a recovered record, then its first write replacing it.
  const auto record = recovered.value().records.front().get();
  for (auto subtask : record.getSubtasks()) {
    (void)subtask.getSubtask();
    (void)subtask.getAttemptId().getHi();
    (void)subtask.getState();
  }
  auto replaced = progress.put(record).wait(waitScope);
  if (!replaced.ok() && replaced.error().code != StoreErrorCode::kTooLarge) std::abort();
  // A record of ascending subtasks, split into parts or not, reads back as it was put.
  bool ascending = true;
  for (uint32_t i = 1; i < record.getSubtasks().size(); ++i) {
    ascending = ascending && record.getSubtasks()[i - 1].getSubtask() <
                                 record.getSubtasks()[i].getSubtask();
  }
  if (!replaced.ok() || !ascending) return;
  auto again = progress.recoverAll().wait(waitScope);
  if (!again.ok() || again.value().records.size() != 1) std::abort();
  const auto reread = again.value().records.front().get();
  if (reread.getSubtasks().size() != record.getSubtasks().size()) std::abort();
  for (uint32_t i = 0; i < reread.getSubtasks().size(); ++i) {
    const auto a = reread.getSubtasks()[i];
    const auto b = record.getSubtasks()[i];
    if (a.getSubtask() != b.getSubtask() || a.getState() != b.getState() ||
        a.getAttemptNumber() != b.getAttemptNumber() ||
        a.getAttemptId().getHi() != b.getAttemptId().getHi() ||
        a.getAttemptId().getLo() != b.getAttemptId().getLo()) {
      std::abort();
    }
  }
}

// A split progress record of job kKey listing part 0 only: what a fuzzed part is read with.
std::string recordListingPartZero() {
  capnp::MallocMessageBuilder builder;
  auto record = builder.initRoot<regent::wire::JobProgress>();
  regent::wire::setWireId(record.initJobId(), *JobId::fromHex(kKey));
  record.setEpoch(1);
  record.initParts(1).set(0, 0);
  kj::VectorOutputStream output;
  capnp::writePackedMessage(output, builder);
  return std::string(reinterpret_cast<const char*>(output.getArray().begin()),
                     output.getArray().size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const RecordFamily families[] = {RecordFamily::kJobGraphs, RecordFamily::kJobResults,
                                   RecordFamily::kJobProgress, RecordFamily::kJobDetails,
                                   RecordFamily::kJobProgressParts};
  const RecordFamily family = families[data[0] % 5];
  kj::EventLoop loop;
  kj::WaitScope waitScope(loop);

  auto backend = kj::heap<testing::MemoryRecordStore>();
  testing::MemoryRecordStore& records = *backend;
  const std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  if (family == RecordFamily::kJobProgressParts) {
    records.records[RecordFamily::kJobProgress][kKey] = recordListingPartZero();
    records.records[family][std::string(kKey) + "-0"] = bytes;
  } else {
    records.records[family][kKey] = bytes;
  }
  auto stores = makeLeaderStores(kj::mv(backend), /*retain=*/10);
  switch (family) {
    case RecordFamily::kJobGraphs: fuzzJobGraph(stores->jobGraphs(), waitScope); break;
    case RecordFamily::kJobResults: fuzzJobResult(stores->jobResults(), waitScope); break;
    case RecordFamily::kJobProgress: fuzzJobProgress(stores->jobProgress(), waitScope); break;
    case RecordFamily::kJobDetails: fuzzJobDetail(stores->jobResults(), waitScope); break;
    case RecordFamily::kJobProgressParts:
      fuzzJobProgress(stores->jobProgress(), waitScope);
      break;
  }
  return 0;
}

// The status page benchmark (scripts/bench.sh status_page; docs/benchmarks.md): how long a
// master takes to render its page (services/master/status_page.h) with 1,000 and 10,000 jobs,
// the page showing the newest 50 with their subtasks (8 each), 20 workers and 3 masters. It
// measures the rendering from the snapshots a request takes, on one thread; the snapshots are
// made once. Prints min / median / max over the runs; asserts nothing.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "common/ids.h"
#include "rpc/wire_ids.h"
#include "services/master/status_page.h"

namespace regent::bench {
namespace {

using master::JobDetailSnapshot;
using master::JobsSnapshot;
using master::WorkersSnapshot;

void fillJob(wire::JobStatus::Builder job, const JobId& id, uint32_t index) {
  wire::setWireId(job.initJobId(), id);
  job.setName("nightly-etl-" + std::to_string(index));
  job.setState(index % 3 == 0 ? wire::JobState::RUNNING : wire::JobState::FINISHED);
  job.setSubmittedAtMs(1796600000000 + index);
  auto tasks = job.initTasks();
  tasks.setTotal(8);
  tasks.setRunning(index % 3 == 0 ? 8 : 0);
  tasks.setFinished(index % 3 == 0 ? 0 : 8);
}

JobsSnapshot jobsOf(uint32_t count) {
  JobsSnapshot snapshot;
  snapshot.message = kj::heap<capnp::MallocMessageBuilder>();
  auto jobs = snapshot.message->initRoot<wire::DispatcherGateway::ListJobsResults>().initJobs(count);
  for (uint32_t i = 0; i < count; ++i) fillJob(jobs[i], JobId(0x77, i + 1), i);
  snapshot.jobs = snapshot.message->getRoot<wire::DispatcherGateway::ListJobsResults>().asReader().getJobs();
  return snapshot;
}

JobDetailSnapshot detailOf(uint32_t index) {
  JobDetailSnapshot snapshot;
  snapshot.message = kj::heap<capnp::MallocMessageBuilder>();
  auto job = snapshot.message->initRoot<wire::JobStatus>();
  fillJob(job, JobId(0x77, index + 1), index);
  auto vertex = job.initVertices(1)[0];
  vertex.setName("transform");
  vertex.setParallelism(8);
  auto subtasks = vertex.initSubtasks(8);
  for (uint32_t s = 0; s < 8; ++s) {
    subtasks[s].setIndex(s);
    subtasks[s].setAttempts(1);
    subtasks[s].setHost("worker-" + std::to_string(s));
    subtasks[s].setHttpAddress("worker-" + std::to_string(s) + ":8082");
    auto attempt = subtasks[s].initAttempt();
    wire::setWireId(attempt.initAttemptId(), AttemptId(index, s + 1));
    attempt.setState(wire::ExecutionState::RUNNING);
    attempt.setStartedAtMs(1796600001000);
  }
  snapshot.status = snapshot.message->getRoot<wire::JobStatus>().asReader();
  return snapshot;
}

void run(uint32_t jobCount, int runs) {
  JobsSnapshot jobs = jobsOf(jobCount);
  master::StatusPageInput input;
  input.leadership.clusterId = "bench";
  input.leadership.leadingEpoch = 7;
  input.leadership.serving = true;
  input.leadership.recovered = true;
  input.jobs = &jobs;
  for (uint32_t i = 0; i < input.pageSize && i < jobCount; ++i) {
    input.shownJobs.push_back(detailOf(i));
  }
  for (int m = 0; m < 3; ++m) {
    leader::ContenderEntry entry;
    entry.latchNode = "m-000000000" + std::to_string(m);
    entry.info.masterId = "master" + std::to_string(m);
    entry.info.httpAddress = "master-" + std::to_string(m) + ":8081";
    entry.leader = m == 0;
    input.contenders.push_back(entry);
  }
  input.nowMs = 1796600005000;
  // A full history (the charts) and a full event ring.
  for (size_t i = 0; i < master::ClusterHistory::kCapacity; ++i) {
    master::ClusterSample sample;
    sample.wallMs = input.nowMs - int64_t(master::ClusterHistory::kCapacity - i) * 5000;
    sample.jobs.byState[static_cast<size_t>(wire::JobState::RUNNING)] = uint32_t(i % 17);
    sample.jobs.byState[static_cast<size_t>(wire::JobState::FINISHED)] = uint32_t(i * 3);
    sample.slotsTotal = 128;
    sample.slotsFree = uint32_t(128 - i % 64);
    sample.attemptsRestarted = i / 4;
    input.history.push_back(sample);
  }
  for (int e = 0; e < 100; ++e) {
    input.events.push_back(Event("job ended")
                               .field("epoch", 7)
                               .field("job", JobId(7, uint64_t(e)).toHex())
                               .field("state", "FAILED")
                               .quotedField("failure", "subtask 3 of vertex work exited with 1"));
  }
  std::vector<double> samples;
  size_t bytes = 0;
  for (int r = 0; r < runs; ++r) {
    const auto start = std::chrono::steady_clock::now();
    const std::string page = master::renderStatusPage(input);
    const auto end = std::chrono::steady_clock::now();
    bytes = page.size();
    samples.push_back(std::chrono::duration<double, std::milli>(end - start).count());
  }
  std::printf("status page, %u jobs (50 shown with 8 subtasks each, 120 samples charted, 100 "
              "events): render ms %s, %zu bytes\n",
              jobCount, describe(summarize(samples), 3).c_str(), bytes);
}

}  // namespace
}  // namespace regent::bench

int main(int argc, char** argv) {
  CLI::App app("status page rendering benchmark");
  int runs = 200;
  app.add_option("--runs", runs, "renders per case")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  regent::bench::note("load average " + regent::bench::loadAverage());
  for (uint32_t jobs : {1000u, 10000u}) regent::bench::run(jobs, runs);
  return 0;
}

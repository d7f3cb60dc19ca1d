// The HTTP endpoints a worker serves on worker.http.bind (docs/workers.md): health, readiness
// (registered with the current leader), Prometheus metrics, and the output of its subtask
// attempts (ranged reads, for regentctl jobs logs), on the listener of http/http_server.h.
#pragma once

#include <kj/compat/http.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/event_loop.h"
#include "common/ids.h"
#include "http/http_server.h"
#include "http/metrics_registry.h"
#include "rpc/failure.h"
#include "rpc/fenced_endpoint.h"
#include "rpc/output_token.h"
#include "services/taskexecutor/task_containment.h"
#include "services/taskexecutor/task_executor.h"

namespace regent::worker {

enum class OutputStream { kStdout, kStderr };

// Where an attempt's output is and the state it is in.
struct AttemptOutput {
  std::string path;   // The file (may be missing, when pruned since), for messages.
  // The attempts directory holding the attempt's directory (borrowed): the file is opened as
  // <attempt id>/<stdout|stderr> relative to it, never by `path`.
  int attemptsFd = -1;
  std::string state;  // "RUNNING", "FINISHED", "FAILED", "CANCELED" (taskexecutor::phaseName).
  // Why this stream is incomplete ("truncated at N bytes (worker.attempt-output.max)"), sent as
  // X-Regent-Output-Problem; empty when it is whole (or the attempt still runs).
  std::string problem;
};

// The most one response of /v1/attempts carries.
inline constexpr uint64_t kMaxOutputChunk = 1 << 20;

// A Range request header's "bytes=N-" or "bytes=N-M" (M >= N): first and last byte (nullopt:
// to the end). nullopt for any other value, which the endpoint ignores (RFC 9110: it answers the
// whole representation).
struct ByteRange {
  uint64_t first = 0;
  std::optional<uint64_t> last;
};
std::optional<ByteRange> parseByteRange(std::string_view header);

// What the endpoints ask of their worker, and what its metric families read (worker_metrics.h).
// Loop-thread only; called while a request is served.
class WorkerHttpHost {
 public:
  virtual ~WorkerHttpHost() = default;
  // nullopt when registered with the current leader (TaskExecutor::registered()) and able to run
  // tasks; otherwise why not, for /readyz: no leader known, registering, the last registration
  // attempt's failure, or why attempt directories cannot be created.
  virtual std::optional<std::string> notReadyReason() const = 0;
  // The epoch registered with (0 while not registered) and the epoch gate's highest.
  virtual uint64_t registeredEpoch() const = 0;
  virtual uint64_t highestEpoch() const = 0;
  virtual const taskexecutor::TaskExecutorCounters& counters() const = 0;
  virtual const std::vector<taskexecutor::SlotState>& slots() const = 0;
  // The TaskExecutorGateway's calls and the epoch gate's refusals, by method.
  virtual const rpc::FencingCounters& fencingCounters() const = 0;
  // Attempts accepted and not ended (TaskExecutor::tasksRunning()).
  virtual size_t tasksRunning() const = 0;
  // Masters the worker refused for not proving themselves, by reason
  // (LeaderClient::mastersRefused()).
  virtual uint64_t mastersRefused(rpc::MasterRefusal reason) const = 0;
  // How the worker contains its tasks (task_containment.h).
  virtual const taskexecutor::TaskContainment& containment() const = 0;
  // The attempt's output file and state (running, or ended and retained), or nullopt when the
  // worker does not know the attempt or has pruned it.
  virtual std::optional<AttemptOutput> attemptOutput(const AttemptId& attempt,
                                                     OutputStream stream) const = 0;
  // Whether a read of attempt output must carry a token the leader signed (docs/security.md,
  // "Reading task output"): true when the worker holds an RPC credential (the cluster
  // authenticates).
  virtual bool outputTokenRequired() const = 0;
  // The key tokens are checked with (TaskExecutor::outputReadKey); nullopt until a leader handed
  // one.
  virtual const std::optional<rpc::OutputReadKey>& outputReadKey() const = 0;
};

// The routes:
//   GET /healthz  200 "ok"
//   GET /readyz   200 "ok: registered with the leader of epoch E"; 503 "not ready: <reason>"
//   GET /metrics  Prometheus text format 0.0.4: every family of `metrics`, in its order (the
//                 worker's: worker_metrics.h)
//   GET /v1/attempts/<attempt id hex>/stdout, .../stderr
//                 The attempt's output file, application/octet-stream, at most kMaxOutputChunk
//                 bytes per response. No Range: 200 with the whole file when it is at most
//                 kMaxOutputChunk, else 206 with its first kMaxOutputChunk bytes. "Range: bytes=N-"
//                 or "bytes=N-M": 206 with "Content-Range: bytes N-L/SIZE" (L cut to the file's
//                 end and to kMaxOutputChunk bytes); N >= SIZE: 416 with "Content-Range:
//                 bytes */SIZE". Every answer carries "X-Regent-Attempt-State" (RUNNING, FINISHED,
//                 FAILED, CANCELED). An unknown or pruned attempt (or a malformed id): 404 with a
//                 one-line text. When host.outputTokenRequired(), first: no "Authorization: Bearer
//                 <token>" header is 401 (WWW-Authenticate: Bearer), a token that does not verify
//                 against host.outputReadKey() for this attempt and stream at nowMs is 403 naming
//                 why, no key yet is 503; none of them depends on whether the attempt exists.
//                 The file is read on the loop's thread pool (runBlocking), opened relative to the
//                 attempts directory's descriptor without following a link (the attempt's
//                 directory nor the file); one that is a link, not a regular file, not the
//                 worker's or linked twice: 403.
// Other paths 404 and other methods 405 (Allow: GET), as on a master. A query string is ignored.
// `host`, `metrics`, `loop` and `headerTable` must outlive the routes; `headerTable` must come from
// http::makeHeaderTable(). `nowMs`: the wall clock tokens expire by (Unix ms; null:
// wallClockMillis()).
class WorkerHttpRoutes final : public http::HttpRouteSet {
 public:
  WorkerHttpRoutes(WorkerHttpHost& host, const http::MetricsRegistry& metrics, EventLoop& loop,
                   const kj::HttpHeaderTable& headerTable, std::function<int64_t()> nowMs = {});

  kj::Promise<void> request(kj::HttpMethod method, kj::StringPtr url,
                            const kj::HttpHeaders& headers, kj::AsyncInputStream& requestBody,
                            Response& response) override;
  bool closeRequested() const override { return closeRequested_; }

 private:
  kj::Promise<void> route(kj::HttpMethod method, const std::string& path,
                          const kj::HttpHeaders& headers, Response& response);
  kj::Promise<void> attemptOutput(const std::string& path, const kj::HttpHeaders& headers,
                                  Response& response);
  // Why a read of `stream` of `attempt` (nullopt: a malformed id) with `headers` is refused:
  // status and one line; nullopt when it may go on.
  struct Refusal {
    uint status = 0;
    std::string text;
  };
  std::optional<Refusal> refuseOutputRead(const kj::HttpHeaders& headers,
                                          const std::optional<AttemptId>& attempt,
                                          OutputStream stream) const;
  // `extra`: further headers (name, value) of the reply.
  kj::Promise<void> reply(Response& response, uint status, kj::StringPtr statusText,
                          kj::StringPtr contentType, std::string body,
                          const std::vector<std::pair<std::string, std::string>>& extra = {});

  WorkerHttpHost& host_;
  const http::MetricsRegistry& metrics_;
  EventLoop& loop_;
  const kj::HttpHeaderTable& headerTable_;
  const std::function<int64_t()> nowMs_;
  bool closeRequested_ = false;
};

}  // namespace regent::worker

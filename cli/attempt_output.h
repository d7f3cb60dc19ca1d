// What `regentctl jobs logs` does once it has the job's status: find the subtask's latest attempt
// and its worker, then read the attempt's stdout or stderr from the worker's HTTP endpoint
// (GET /v1/attempts/<attempt>/stdout|stderr, ranged reads; docs/workers.md), following it while
// the attempt runs.
#pragma once

#include <kj/async-io.h>
#include <kj/compat/http.h>
#include <kj/time.h>

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>

#include "common/ids.h"
#include "common/result.h"
#include "common/time.h"
#include "rpc/schema/jobs.capnp.h"

namespace regent::cli {

// The attempt whose output `jobs logs` reads, and where.
struct AttemptOutputSource {
  AttemptId attempt;
  std::string httpAddress;  // The worker's "host:port", as it registered.
  std::string vertex;       // For messages: "subtask 0 of vertex a".
  uint32_t subtask = 0;
};

// The latest attempt of subtask `subtask` of the vertex named `vertex` in `status` (a jobStatus
// answer). Fails, with a message for the user, when the job has ended (a terminal job carries no
// subtask detail), the vertex does not exist (the message lists the job's vertices), the index is
// out of range (it names the valid ones), the subtask has no attempt yet ("subtask 0 of vertex a
// has not started", with its waiting reason when the master gave one), or the attempt's worker
// has no known HTTP address.
Result<AttemptOutputSource> findAttemptOutput(wire::JobStatus::Reader status,
                                              const std::string& vertex, uint32_t subtask);

// A token to read an attempt's output (DispatcherGateway.attemptOutputToken), or why none came.
struct OutputReadGrant {
  int exitCode = 0;    // kExitOk, or the exit code of the failed call (its message printed).
  std::string token;   // Sent as "Authorization: Bearer <token>".
  Duration validFor{0};
};

// How one attempt's output is read.
struct AttemptOutputOptions {
  bool stderrStream = false;  // stderr instead of stdout.
  // Keep reading while the attempt runs, until it ended and its file is read to the end.
  bool follow = false;
  // With follow: the wait between two reads that found nothing new. The worker's protocol has no
  // push, so polling is how new output is learned.
  Duration pollInterval{300};
  Duration requestTimeout{10000};  // Bounds each HTTP exchange (rpc.call-timeout).
  // Obtains a token from the leader; called before the first read and again before a read once
  // half of the last token's validity has passed (a --follow outlives tokens). Null: no token is
  // sent.
  std::function<kj::Promise<OutputReadGrant>()> tokens;
};

// Reads an attempt's output from its worker with HTTP/1.1 GETs on the event loop, each asking for
// `Range: bytes=<next offset>-` (the worker sends at most 1 MiB per answer), and writes the bytes,
// as they are, to `out`, flushing after each answer. Without follow it reads up to the size the
// first answer gave, then resolves kExitOk. With follow it goes on, waiting pollInterval whenever
// it has read everything, until an answer says (X-Regent-Attempt-State) the attempt ended and its
// file is read to the end: kExitOk. When the last answer says the worker did not keep the whole
// stream (X-Regent-Output-Problem: truncated at worker.attempt-output.max, or a capture that
// failed), one "regentctl: the stdout of attempt ... is incomplete: ..." line goes to `err`; the
// exit code stays kExitOk.
//
// Failures write one "regentctl: ..." line to `err` and resolve: kExitRefused for a 404 (the
// worker does not have the attempt's output: pruned by worker.attempts.retain, or the worker lost
// it) and for a 401 or 403 (the worker refused the token, with its reason); a token that could
// not be obtained resolves with the grant's exit code; kExitError for a worker that cannot be
// reached or does not answer within requestTimeout (the message names the address), and for an
// answer that breaks the protocol (another status, a missing or inconsistent Content-Range, no
// X-Regent-Attempt-State, more than 1 MiB).
//
// Thread-safety: loop-thread only. `network`, `timer` and the streams must outlive it; call
// read() once. Destroying it cancels the read in flight.
class AttemptOutputReader final {
 public:
  AttemptOutputReader(kj::Network& network, kj::Timer& timer, std::ostream& out,
                      std::ostream& err);
  ~AttemptOutputReader() noexcept;
  AttemptOutputReader(const AttemptOutputReader&) = delete;
  AttemptOutputReader& operator=(const AttemptOutputReader&) = delete;

  kj::Promise<int> read(AttemptOutputSource source, AttemptOutputOptions options);

  // The most a worker sends in one answer.
  static constexpr uint64_t kMaxChunkBytes = uint64_t{1} << 20;

 private:
  struct Answer;
  // What comes after an answer: the exit code, or another read (at once, or after a poll wait).
  struct Step {
    std::optional<int> exitCode;
    bool wait = false;
  };

  kj::Promise<int> next();
  // next() after a fresh token when none is held or the one held is half spent.
  kj::Promise<int> nextWithToken();
  // One GET from offset_, bounded by requestTimeout.
  kj::Promise<Answer> get();
  // Writes the bytes `answer` carries and says what comes next.
  Step take(Answer answer);
  int fail(int exitCode, const std::string& message);
  std::string what() const;  // "attempt <32 hex digits> (subtask 0 of vertex a)"

  kj::Network& network_;
  kj::Timer& timer_;
  std::ostream& out_;
  std::ostream& err_;
  kj::Own<kj::HttpHeaderTable> headerTable_;
  kj::HttpHeaderId range_;
  kj::HttpHeaderId contentRange_;
  kj::HttpHeaderId attemptState_;
  kj::HttpHeaderId outputProblem_;
  kj::HttpHeaderId authorization_;
  AttemptOutputSource source_;
  AttemptOutputOptions options_;
  std::string path_;
  kj::Own<kj::NetworkAddress> address_;
  kj::Own<kj::HttpClient> client_;
  std::string token_;  // The token held ("" before the first).
  kj::TimePoint refreshAt_ = kj::origin<kj::TimePoint>();  // When to obtain the next one.
  uint64_t offset_ = 0;  // The next byte to read.
  // Without follow: read up to here (the size the first answer gave); then stop.
  std::optional<uint64_t> stopAt_;
};

}  // namespace regent::cli

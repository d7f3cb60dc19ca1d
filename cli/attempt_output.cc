// `regentctl jobs logs`: the attempt behind a subtask, and its output read from the worker (see
// attempt_output.h).
#include "cli/attempt_output.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <ostream>
#include <string_view>
#include <utility>

#include "cli/cluster_inspector.h"
#include "cli/regentctl_output.h"
#include "common/units.h"
#include "common/utf8.h"
#include "rpc/wire_ids.h"

namespace regent::cli {
namespace {

bool endedJob(wire::JobState state) {
  return state == wire::JobState::FINISHED || state == wire::JobState::FAILED ||
         state == wire::JobState::CANCELED;
}

// The states X-Regent-Attempt-State names for an attempt that will write no more.
bool endedAttempt(std::string_view state) {
  return state == "FINISHED" || state == "FAILED" || state == "CANCELED";
}

// A decimal number that is all of `text`.
std::optional<uint64_t> decimal(std::string_view text) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  auto [at, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || at != end) return std::nullopt;
  return value;
}

// A Content-Range of a 206 ("bytes N-M/SIZE") or a 416 ("bytes */SIZE"; first and last unset).
struct ContentRange {
  std::optional<uint64_t> first;
  std::optional<uint64_t> last;
  uint64_t size = 0;
};

std::optional<ContentRange> parseContentRange(std::string_view text) {
  constexpr std::string_view kUnit = "bytes ";
  if (!text.starts_with(kUnit)) return std::nullopt;
  text.remove_prefix(kUnit.size());
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  ContentRange range;
  auto size = decimal(text.substr(slash + 1));
  if (!size) return std::nullopt;
  range.size = *size;
  const std::string_view span = text.substr(0, slash);
  if (span == "*") return range;
  const size_t dash = span.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  range.first = decimal(span.substr(0, dash));
  range.last = decimal(span.substr(dash + 1));
  if (!range.first || !range.last || *range.last < *range.first || *range.last >= range.size) {
    return std::nullopt;
  }
  return range;
}

// The first line of a worker's error body, at most 200 bytes, safe for a terminal.
std::string firstLine(kj::ArrayPtr<const kj::byte> body) {
  std::string_view text(reinterpret_cast<const char*>(body.begin()), body.size());
  text = text.substr(0, text.find('\n'));
  if (text.size() > 200) text = text.substr(0, 200);
  return printableUtf8(text);
}

}  // namespace

Result<AttemptOutputSource> findAttemptOutput(wire::JobStatus::Reader status,
                                              const std::string& vertex, uint32_t subtask) {
  const std::string job = wire::idFromWire<JobId>(status.getJobId()).toHex();
  const std::string state = wire::enumNameUpper(status.getState());
  auto vertices = status.getVertices();
  if (vertices.size() == 0) {
    if (endedJob(status.getState())) {
      const std::string why = status.getSubtasksOmitted().size() > 0
                                  ? std::string(status.getSubtasksOmitted().cStr())
                                  : std::string("its result no longer keeps them");
      return Error::fatal("job " + job + " has ended (" + state +
                          "): the leader has no subtask rows of it (" + why +
                          "), so the output of its attempts cannot be located");
    }
    return Error::fatal("job " + job + " (" + state + ") has no vertices to read output from");
  }
  std::string names;
  for (auto candidate : vertices) {
    const std::string_view name(candidate.getName().begin(), candidate.getName().size());
    if (name != vertex) {
      names += (names.empty() ? "" : ", ") + shownText(candidate.getName());
      continue;
    }
    const std::string which = "subtask " + std::to_string(subtask) + " of vertex " +
                              printableUtf8(vertex);
    const uint32_t parallelism = candidate.getParallelism();
    if (subtask >= parallelism) {
      return Error::fatal("vertex " + printableUtf8(vertex) + " has parallelism " +
                          std::to_string(parallelism) + ", so its subtasks are " +
                          (parallelism == 1 ? "just 0"
                                            : "0.." + std::to_string(parallelism - 1)) +
                          "; there is no subtask " + std::to_string(subtask));
    }
    for (auto entry : candidate.getSubtasks()) {
      if (entry.getIndex() != subtask) continue;
      if (!entry.hasAttempt()) break;
      auto attempt = entry.getAttempt();
      const AttemptId id = wire::idFromWire<AttemptId>(attempt.getAttemptId());
      if (entry.getHttpAddress().size() == 0) {
        return Error::fatal(
            "the worker of attempt " + id.toHex() + " (" + which + ")" +
            (entry.getHost().size() > 0 ? " on host " + shownText(entry.getHost()) : "") +
            " is not registered with the leader, so its output cannot be reached");
      }
      return AttemptOutputSource{
          id, std::string(entry.getHttpAddress().begin(), entry.getHttpAddress().size()),
          vertex, subtask};
    }
    std::string message = which + " has not started";
    for (auto entry : candidate.getSubtasks()) {
      if (entry.getIndex() == subtask && entry.getWaitingReason().size() > 0) {
        message += ": " + shownText(entry.getWaitingReason());
      }
    }
    return Error::fatal(message);
  }
  return Error::fatal("job " + job + " has no vertex \"" + printableUtf8(vertex) +
                      "\"; its vertices are " + names);
}

struct AttemptOutputReader::Answer {
  uint status = 0;
  std::optional<std::string> contentRange;
  std::optional<std::string> attemptState;
  std::optional<std::string> outputProblem;  // X-Regent-Output-Problem
  kj::Array<kj::byte> body;
};

AttemptOutputReader::AttemptOutputReader(kj::Network& network, kj::Timer& timer,
                                         std::ostream& out, std::ostream& err)
    : network_(network), timer_(timer), out_(out), err_(err) {
  kj::HttpHeaderTable::Builder builder;
  range_ = builder.add("Range");
  contentRange_ = builder.add("Content-Range");
  attemptState_ = builder.add("X-Regent-Attempt-State");
  outputProblem_ = builder.add("X-Regent-Output-Problem");
  authorization_ = builder.add("Authorization");
  headerTable_ = builder.build();
}

AttemptOutputReader::~AttemptOutputReader() noexcept = default;

kj::Promise<int> AttemptOutputReader::read(AttemptOutputSource source,
                                           AttemptOutputOptions options) {
  source_ = std::move(source);
  options_ = options;
  path_ = "/v1/attempts/" + source_.attempt.toHex() +
          (options_.stderrStream ? "/stderr" : "/stdout");
  return network_.parseAddress(source_.httpAddress)
      .then(
          [this](kj::Own<kj::NetworkAddress> address) {
            address_ = kj::mv(address);
            client_ = kj::newHttpClient(timer_, *headerTable_, *address_);
            return nextWithToken();
          },
          [this](kj::Exception&& exception) -> kj::Promise<int> {
            return fail(kExitError, "the worker address " + source_.httpAddress + " of " +
                                        what() + " does not resolve: " +
                                        exception.getDescription().cStr());
          });
}

std::string AttemptOutputReader::what() const {
  return "attempt " + source_.attempt.toHex() + " (subtask " + std::to_string(source_.subtask) +
         " of vertex " + printableUtf8(source_.vertex) + ")";
}

int AttemptOutputReader::fail(int exitCode, const std::string& message) {
  err_ << "regentctl: " << message << std::endl;
  return exitCode;
}

kj::Promise<int> AttemptOutputReader::nextWithToken() {
  if (!options_.tokens || (!token_.empty() && timer_.now() < refreshAt_)) return next();
  const kj::TimePoint asked = timer_.now();
  return options_.tokens().then([this, asked](OutputReadGrant grant) -> kj::Promise<int> {
    if (grant.exitCode != kExitOk) return grant.exitCode;
    token_ = std::move(grant.token);
    refreshAt_ = asked + grant.validFor.count() / 2 * kj::MILLISECONDS;
    return next();
  });
}

kj::Promise<int> AttemptOutputReader::next() {
  return get().then(
      [this](Answer answer) -> kj::Promise<int> {
        const Step step = take(std::move(answer));
        if (step.exitCode) return *step.exitCode;
        if (!step.wait) return nextWithToken();
        return timer_.afterDelay(options_.pollInterval.count() * kj::MILLISECONDS).then([this] {
          return nextWithToken();
        });
      },
      [this](kj::Exception&& exception) -> kj::Promise<int> {
        const std::string stream = options_.stderrStream ? "stderr" : "stdout";
        if (exception.getType() == kj::Exception::Type::OVERLOADED) {
          return fail(kExitError, "the worker at " + source_.httpAddress +
                                      " did not answer within " +
                                      formatDuration(options_.requestTimeout) +
                                      " (rpc.call-timeout) when asked for the " + stream +
                                      " of " + what());
        }
        return fail(kExitError, "the worker at " + source_.httpAddress +
                                    " cannot be reached for the " + stream + " of " + what() +
                                    ": " + exception.getDescription().cStr());
      });
}

kj::Promise<AttemptOutputReader::Answer> AttemptOutputReader::get() {
  kj::HttpHeaders headers(*headerTable_);
  headers.set(range_, kj::str("bytes=", offset_, "-"));
  if (!token_.empty()) headers.set(authorization_, kj::str("Bearer ", token_));
  auto request = client_->request(kj::HttpMethod::GET, kj::StringPtr(path_.c_str()), headers);
  auto exchange = request.response.then([this](kj::HttpClient::Response&& response) {
    Answer answer;
    answer.status = response.statusCode;
    KJ_IF_MAYBE (range, response.headers->get(contentRange_)) {
      answer.contentRange = std::string(range->cStr());
    }
    KJ_IF_MAYBE (state, response.headers->get(attemptState_)) {
      answer.attemptState = std::string(state->cStr());
    }
    KJ_IF_MAYBE (problem, response.headers->get(outputProblem_)) {
      answer.outputProblem = std::string(problem->cStr());
    }
    // One byte over the most a worker sends tells a protocol break from a full answer.
    auto reading = response.body->readAllBytes(kMaxChunkBytes + 1);
    return reading.attach(kj::mv(response.body))
        .then([answer = std::move(answer)](kj::Array<kj::byte> body) mutable {
          answer.body = kj::mv(body);
          return std::move(answer);
        });
  });
  return timer_.timeoutAfter(options_.requestTimeout.count() * kj::MILLISECONDS,
                             kj::mv(exchange));
}

AttemptOutputReader::Step AttemptOutputReader::take(Answer answer) {
  const std::string stream = options_.stderrStream ? "stderr" : "stdout";
  const std::string from = "the worker at " + source_.httpAddress;
  auto broken = [&](const std::string& why) {
    return Step{fail(kExitError, from + " answered the read of the " + stream + " of " + what() +
                                     " at byte " + std::to_string(offset_) + " with " + why),
                false};
  };
  if (answer.status == 404) {
    return Step{fail(kExitRefused, from + " has no " + stream + " of " + what() + " (404: " +
                                       firstLine(answer.body) +
                                       "): it was pruned (worker.attempts.retain) or the "
                                       "worker lost its data directory"),
                false};
  }
  if (answer.status == 401 || answer.status == 403) {
    return Step{fail(kExitRefused, from + " refused the read of the " + stream + " of " + what() +
                                       " (" + std::to_string(answer.status) + ": " +
                                       firstLine(answer.body) + ")"),
                false};
  }
  if (answer.status != 200 && answer.status != 206 && answer.status != 416) {
    return broken("status " + std::to_string(answer.status) + ": " + firstLine(answer.body));
  }
  if (!answer.attemptState) return broken("no X-Regent-Attempt-State header");
  if (answer.body.size() > kMaxChunkBytes) return broken("more than 1 MiB");
  uint64_t size = 0;
  if (answer.status == 200) {
    // The whole file: a worker that ignored the Range. Print what is new in it.
    size = answer.body.size();
    if (size > offset_) out_.write(reinterpret_cast<const char*>(answer.body.begin() + offset_),
                                   static_cast<std::streamsize>(size - offset_));
    offset_ = std::max(offset_, size);
  } else {
    if (!answer.contentRange) return broken("status " + std::to_string(answer.status) +
                                            " and no Content-Range");
    auto range = parseContentRange(*answer.contentRange);
    if (!range) return broken("an invalid Content-Range \"" + *answer.contentRange + "\"");
    size = range->size;
    if (answer.status == 416) {
      if (range->first || size > offset_) {
        return broken("416 and Content-Range \"" + *answer.contentRange + "\"");
      }
    } else {
      if (!range->first || *range->first != offset_ ||
          *range->last - *range->first + 1 != answer.body.size()) {
        return broken("Content-Range \"" + *answer.contentRange + "\" and " +
                      std::to_string(answer.body.size()) + " bytes");
      }
      out_.write(reinterpret_cast<const char*>(answer.body.begin()),
                 static_cast<std::streamsize>(answer.body.size()));
      offset_ = *range->last + 1;
    }
  }
  out_.flush();
  // The end of what there is: said on stderr when the worker did not keep all of it.
  auto done = [&] {
    if (answer.outputProblem) {
      err_ << "regentctl: the " << stream << " of " << what()
           << " is incomplete: " << printableUtf8(*answer.outputProblem) << std::endl;
    }
    return Step{kExitOk, false};
  };
  if (!options_.follow) {
    if (!stopAt_) stopAt_ = size;
    return offset_ >= *stopAt_ ? done() : Step{std::nullopt, false};
  }
  if (offset_ < size) return Step{std::nullopt, false};
  if (endedAttempt(*answer.attemptState)) return done();
  return Step{std::nullopt, true};
}

}  // namespace regent::cli

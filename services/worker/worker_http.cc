// WorkerHttpRoutes (see worker_http.h).
#include "services/worker/worker_http.h"

#include <fcntl.h>
#include <kj/debug.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <utility>

#include "common/time.h"
#include "http/prometheus_text.h"

namespace regent::worker {
namespace {

constexpr const char* kText = "text/plain; charset=utf-8";
constexpr const char* kOctets = "application/octet-stream";
constexpr std::string_view kAttemptsPrefix = "/v1/attempts/";

bool parseUint(std::string_view text, uint64_t& out) {
  if (text.empty()) return false;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return error == std::errc() && end == text.data() + text.size();
}

bool equalsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// What the read of one output file came to (on the thread pool).
struct OutputRead {
  // kRefused: the path is not the file the worker created (a link, or not its own).
  enum class Outcome { kRead, kMissing, kUnsatisfiable, kRefused, kError } outcome = Outcome::kRead;
  uint64_t size = 0;
  uint64_t first = 0;
  bool partial = false;  // 206: a Range was asked, or the file is larger than one chunk.
  std::string bytes;
  std::string error;
};

// Blocking: opens <attempt>/<name> in the attempts directory `attemptsFd` (owned: closed here),
// decides the range against its size, reads it. `path` names the file in messages.
OutputRead readOutput(int attemptsFd, const std::string& attempt, const char* name,
                      const std::string& path, std::optional<ByteRange> range) {
  OutputRead read;
  // The task user owns the attempt's directory and may replace the file (and, where the data
  // directory is misconfigured, more): nothing is reached by path, no symbolic link is followed,
  // and only the file the worker created is served: a regular file (a FIFO would block the
  // read) owned by the worker's user with no other name (a hard link the task user made to a
  // file it may not read has a second one).
  int fd = -1;
  const int dirFd =
      ::openat(attemptsFd, attempt.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  ::close(attemptsFd);
  if (dirFd >= 0) {
    fd = ::openat(dirFd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    const int error = errno;
    ::close(dirFd);
    errno = error;
  } else if (errno == ENOTDIR) {
    errno = ELOOP;  // The attempt's directory is a link (or a file): not what the worker made.
  }
  if (fd < 0) {
    const int error = errno;
    read.outcome = error == ENOENT   ? OutputRead::Outcome::kMissing
                   : error == ELOOP ? OutputRead::Outcome::kRefused
                                    : OutputRead::Outcome::kError;
    read.error = error == ELOOP ? path + " is a symbolic link, not the output file the worker "
                                         "created; refused"
                                : "cannot open " + path + ": " + std::strerror(error);
    return read;
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    read.outcome = OutputRead::Outcome::kError;
    read.error = "cannot stat " + path + ": " + std::strerror(errno);
    ::close(fd);
    return read;
  }
  std::string refused;
  if (!S_ISREG(info.st_mode)) {
    refused = path + " is not a regular file";
  } else if (info.st_nlink != 1) {
    refused = path + " has " + std::to_string(info.st_nlink) +
              " links (a file the worker created has one)";
  } else if (info.st_uid != ::geteuid()) {
    refused = path + " is owned by uid " + std::to_string(info.st_uid) +
              ", not by the worker's uid " + std::to_string(::geteuid());
  }
  if (!refused.empty()) {
    read.outcome = OutputRead::Outcome::kRefused;
    read.error = refused + "; refused";
    ::close(fd);
    return read;
  }
  read.size = static_cast<uint64_t>(info.st_size);
  uint64_t last = 0;  // Inclusive; meaningful when the range is not empty.
  if (range) {
    if (range->first >= read.size) {
      read.outcome = OutputRead::Outcome::kUnsatisfiable;
      ::close(fd);
      return read;
    }
    read.first = range->first;
    last = std::min(range->last.value_or(read.size - 1), read.size - 1);
    read.partial = true;
  } else {
    read.partial = read.size > kMaxOutputChunk;
    last = read.size == 0 ? 0 : read.size - 1;
  }
  if (read.size > 0) last = std::min(last, read.first + kMaxOutputChunk - 1);
  const uint64_t length = read.size == 0 ? 0 : last - read.first + 1;
  read.bytes.resize(length);
  uint64_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(fd, read.bytes.data() + done, length - done,
                              static_cast<off_t>(read.first + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      read.outcome = OutputRead::Outcome::kError;
      read.error = "cannot read " + path + ": " + std::strerror(errno);
      ::close(fd);
      return read;
    }
    if (n == 0) break;  // Truncated meanwhile: what there is.
    done += static_cast<uint64_t>(n);
  }
  read.bytes.resize(done);
  ::close(fd);
  return read;
}

}  // namespace

std::optional<ByteRange> parseByteRange(std::string_view header) {
  constexpr std::string_view kBytes = "bytes=";
  if (header.substr(0, kBytes.size()) != kBytes) return std::nullopt;
  header.remove_prefix(kBytes.size());
  const size_t dash = header.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  ByteRange range;
  if (!parseUint(header.substr(0, dash), range.first)) return std::nullopt;
  const std::string_view last = header.substr(dash + 1);
  if (last.empty()) return range;
  uint64_t value = 0;
  if (!parseUint(last, value) || value < range.first) return std::nullopt;
  range.last = value;
  return range;
}

WorkerHttpRoutes::WorkerHttpRoutes(WorkerHttpHost& host, const http::MetricsRegistry& metrics,
                                   EventLoop& loop, const kj::HttpHeaderTable& headerTable,
                                   std::function<int64_t()> nowMs)
    : host_(host),
      metrics_(metrics),
      loop_(loop),
      headerTable_(headerTable),
      nowMs_(std::move(nowMs)) {}

kj::Promise<void> WorkerHttpRoutes::request(kj::HttpMethod method, kj::StringPtr url,
                                            const kj::HttpHeaders& headers, kj::AsyncInputStream&,
                                            Response& response) {
  return http::serveRoute(url, headers, closeRequested_, [&](const std::string& path) {
    return route(method, path, headers, response);
  });
}

kj::Promise<void> WorkerHttpRoutes::reply(
    Response& response, uint status, kj::StringPtr statusText, kj::StringPtr contentType,
    std::string body, const std::vector<std::pair<std::string, std::string>>& extra) {
  return http::reply(response, headerTable_, status, statusText, contentType, std::move(body),
                     extra);
}

kj::Promise<void> WorkerHttpRoutes::route(kj::HttpMethod method, const std::string& path,
                                          const kj::HttpHeaders& headers, Response& response) {
  const bool attempts = path.compare(0, kAttemptsPrefix.size(), kAttemptsPrefix) == 0;
  const bool known = path == "/healthz" || path == "/readyz" || path == "/metrics" || attempts;
  KJ_IF_MAYBE (refused, http::refuseUnrouted(response, headerTable_, method, path, known)) {
    return kj::mv(*refused);
  }
  if (path == "/healthz") return reply(response, 200, "OK", kText, "ok\n");
  if (attempts) return attemptOutput(path, headers, response);
  if (path == "/readyz") {
    if (auto reason = host_.notReadyReason()) {
      return reply(response, 503, "Service Unavailable", kText, "not ready: " + *reason + "\n");
    }
    return reply(response, 200, "OK", kText,
                 "ok: registered with the leader of epoch " +
                     std::to_string(host_.registeredEpoch()) + "\n");
  }
  return reply(response, 200, "OK", http::kPrometheusContentType, metrics_.text());
}

kj::Promise<void> WorkerHttpRoutes::attemptOutput(const std::string& path,
                                                  const kj::HttpHeaders& headers,
                                                  Response& response) {
  // <prefix><32 hex digits>/stdout|stderr
  const std::string_view rest = std::string_view(path).substr(kAttemptsPrefix.size());
  const size_t slash = rest.find('/');
  const std::string_view name = slash == std::string_view::npos ? "" : rest.substr(slash + 1);
  if (slash == std::string_view::npos || (name != "stdout" && name != "stderr")) {
    return reply(response, 404, "Not Found", kText,
                 "no such endpoint: " + http::echoablePath(path) +
                     " (expected /v1/attempts/<attempt id>/stdout or /stderr)\n");
  }
  const std::optional<AttemptId> attempt = AttemptId::fromHex(rest.substr(0, slash));
  if (auto refusal = refuseOutputRead(headers, attempt,
                                      name == "stdout" ? OutputStream::kStdout
                                                       : OutputStream::kStderr)) {
    std::vector<std::pair<std::string, std::string>> extra;
    if (refusal->status == 401) extra.emplace_back("WWW-Authenticate", "Bearer realm=\"regent\"");
    const char* statusText = refusal->status == 401   ? "Unauthorized"
                             : refusal->status == 403 ? "Forbidden"
                                                      : "Service Unavailable";
    return reply(response, refusal->status, statusText, kText, refusal->text + "\n", extra);
  }
  if (!attempt) {
    return reply(response, 404, "Not Found", kText,
                 "not an attempt id: " + http::echoablePath(std::string(rest.substr(0, slash))) +
                     " (expected 32 hex digits)\n");
  }
  const OutputStream stream = name == "stdout" ? OutputStream::kStdout : OutputStream::kStderr;
  std::optional<AttemptOutput> output = host_.attemptOutput(*attempt, stream);
  if (!output) {
    return reply(response, 404, "Not Found", kText,
                 "no attempt " + attempt->toHex() +
                     " on this worker (unknown, or its output was pruned)\n");
  }
  std::optional<ByteRange> range;
  headers.forEach([&](kj::StringPtr header, kj::StringPtr value) {
    if (equalsIgnoringCase(header.cStr(), "Range")) range = parseByteRange(value.cStr());
  });
  // A descriptor of its own: the read may outlive the request.
  const int attemptsFd =
      output->attemptsFd >= 0 ? ::fcntl(output->attemptsFd, F_DUPFD_CLOEXEC, 0) : -1;
  if (attemptsFd < 0) {
    return reply(response, 500, "Internal Server Error", kText,
                 "cannot reach the attempts directory: " + std::string(std::strerror(errno)) +
                     "\n");
  }
  return loop_.runBlocking([attemptsFd, attempt = attempt->toHex(),
                            name = stream == OutputStream::kStdout ? "stdout" : "stderr",
                            file = output->path, range]() {
           return readOutput(attemptsFd, attempt, name, file, range);
         })
      .then([this, &response, attempt = *attempt, state = output->state,
             problem = output->problem](OutputRead read) {
        // A task's output is a stranger's bytes: text only (nosniff, on every answer), and were
        // a browser to render it anyway, in a sandbox that runs and loads nothing.
        std::vector<std::pair<std::string, std::string>> extra{
            {"X-Regent-Attempt-State", state},
            {"Content-Security-Policy", "default-src 'none'; sandbox"}};
        if (!problem.empty()) extra.emplace_back("X-Regent-Output-Problem", problem);
        switch (read.outcome) {
          case OutputRead::Outcome::kMissing:
            return reply(response, 404, "Not Found", kText,
                         "no attempt " + attempt.toHex() +
                             " on this worker (unknown, or its output was pruned)\n",
                         extra);
          case OutputRead::Outcome::kRefused:
            return reply(response, 403, "Forbidden", kText, read.error + "\n", extra);
          case OutputRead::Outcome::kError:
            return reply(response, 500, "Internal Server Error", kText, read.error + "\n", extra);
          case OutputRead::Outcome::kUnsatisfiable:
            extra.emplace_back("Content-Range", "bytes */" + std::to_string(read.size));
            return reply(response, 416, "Range Not Satisfiable", kText,
                         "the output is " + std::to_string(read.size) + " bytes long\n", extra);
          case OutputRead::Outcome::kRead:
            break;
        }
        if (!read.partial) return reply(response, 200, "OK", kOctets, std::move(read.bytes), extra);
        const uint64_t last = read.first + read.bytes.size() - (read.bytes.empty() ? 0 : 1);
        extra.emplace_back("Content-Range", "bytes " + std::to_string(read.first) + "-" +
                                                std::to_string(last) + "/" +
                                                std::to_string(read.size));
        return reply(response, 206, "Partial Content", kOctets, std::move(read.bytes), extra);
      });
}

std::optional<WorkerHttpRoutes::Refusal> WorkerHttpRoutes::refuseOutputRead(
    const kj::HttpHeaders& headers, const std::optional<AttemptId>& attempt,
    OutputStream stream) const {
  if (!host_.outputTokenRequired()) return std::nullopt;
  std::vector<std::string> authorizations;
  headers.forEach([&](kj::StringPtr header, kj::StringPtr value) {
    if (equalsIgnoringCase(header.cStr(), "Authorization")) authorizations.emplace_back(value);
  });
  if (authorizations.empty()) {
    return Refusal{401,
                   "reading attempt output needs a token from the leader: use regentctl jobs "
                   "logs with a reader credential (or send \"Authorization: Bearer <token>\" "
                   "with a token of DispatcherGateway.attemptOutputToken)"};
  }
  if (authorizations.size() > 1) {
    return Refusal{403, "output-read token refused: more than one Authorization header"};
  }
  constexpr std::string_view kScheme = "bearer ";
  const std::string_view value = authorizations.front();
  if (value.size() <= kScheme.size() ||
      !equalsIgnoringCase(value.substr(0, kScheme.size()), kScheme)) {
    return Refusal{403, "output-read token refused: the Authorization header is not \"Bearer "
                        "<token>\""};
  }
  // A malformed id is no attempt: refused like any other before anything is looked up.
  if (!attempt) return Refusal{403, "output-read token refused: the path names no attempt"};
  const std::optional<rpc::OutputReadKey>& key = host_.outputReadKey();
  if (!key) {
    return Refusal{503, "this worker holds no output-read key yet (it has not registered with a "
                        "leader); try again once it has"};
  }
  const int64_t nowMs = nowMs_ ? nowMs_() : wallClockMillis();
  Status verified = rpc::verifyOutputToken(
      value.substr(kScheme.size()), *key, *attempt,
      stream == OutputStream::kStdout ? rpc::OutputStreamSet::kStdout
                                      : rpc::OutputStreamSet::kStderr,
      nowMs / 1000);
  if (!verified.ok()) return Refusal{403, "output-read token refused: " + verified.error().message};
  return std::nullopt;
}

}  // namespace regent::worker

// The Docker Engine API client (docker_engine.h).
#include "services/providers/docker_engine.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sys/socket.h>
#include <sys/un.h>

#include <kj/debug.h>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "common/units.h"

namespace regent::providers {

namespace {

constexpr const char* kApiVersion = "/v1.41";
// The most of an answer read: container lists of a large daemon stay far below it.
constexpr uint64_t kMaxAnswerBytes = 16 * 1024 * 1024;

// One ustar header field: `value` in octal, zero-padded, NUL-terminated, in `width` bytes.
void putOctal(char* field, size_t width, uint64_t value) {
  field[width - 1] = '\0';
  for (size_t digit = width - 1; digit-- > 0;) {
    field[digit] = static_cast<char>('0' + (value & 7));
    value >>= 3;
  }
}

void appendEntry(std::string& out, const std::string& name, char type, uint32_t mode,
                 const std::string& contents) {
  char header[512];
  std::memset(header, 0, sizeof header);
  std::memcpy(header, name.data(), std::min<size_t>(name.size(), 99));
  putOctal(header + 100, 8, mode);
  putOctal(header + 108, 8, 0);  // uid root
  putOctal(header + 116, 8, 0);  // gid root
  putOctal(header + 124, 12, type == '0' ? contents.size() : 0);
  putOctal(header + 136, 12, 0);  // mtime
  header[156] = type;
  std::memcpy(header + 257, "ustar", 6);
  std::memcpy(header + 263, "00", 2);
  std::memcpy(header + 265, "root", 4);
  std::memcpy(header + 297, "root", 4);
  // The checksum counts its own field as spaces.
  std::memset(header + 148, ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : header) sum += c;
  putOctal(header + 148, 7, sum);  // six digits and a NUL, then the space already there
  header[155] = ' ';
  out.append(header, sizeof header);
  if (type != '0') return;
  out += contents;
  out.append((512 - contents.size() % 512) % 512, '\0');
}

}  // namespace

DockerEngine::DockerEngine(kj::Network& network, kj::Timer& timer, std::string socketPath)
    : timer_(timer), socketPath_(std::move(socketPath)) {
  kj::HttpHeaderTable::Builder builder;
  headerTable_ = builder.build();
  // The address is made here, at once (a unix socket needs no lookup), so that every call shares
  // one client from the first on.
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (socketPath_.size() < sizeof address.sun_path) {
    std::memcpy(address.sun_path, socketPath_.data(), socketPath_.size());
    address_ = network.getSockaddr(&address, sizeof address);
    client_ = kj::newHttpClient(timer_, *headerTable_, *address_);
  }
}

DockerEngine::~DockerEngine() noexcept = default;

kj::Promise<Result<DockerAnswer>> DockerEngine::call(kj::HttpMethod method, const std::string& path,
                                                     Duration timeout,
                                                     const std::string& contentType,
                                                     std::string body) {
  auto exchanged = timer_.timeoutAfter(timeout.count() * kj::MILLISECONDS,
                                       exchange(method, path, contentType, std::move(body)));
  const std::string what = std::string(kj::str(method).cStr()) + " " + path;
  return exchanged.then(
      [](DockerAnswer answer) -> Result<DockerAnswer> { return answer; },
      [this, what, timeout](kj::Exception&& exception) -> Result<DockerAnswer> {
        // The client connects anew for the next call (to the same path: a daemon that
        // restarted is found again).
        if (exception.getType() == kj::Exception::Type::OVERLOADED) {
          return Error::retryable("the Docker daemon at " + socketPath_ +
                                  " (resourcemanager.docker.socket) did not answer " + what +
                                  " within " + formatDuration(timeout));
        }
        return Error::retryable(
            "cannot reach the Docker daemon at " + socketPath_ +
            " (resourcemanager.docker.socket): " + exception.getDescription().cStr());
      });
}

kj::Promise<DockerAnswer> DockerEngine::exchange(kj::HttpMethod method, std::string path,
                                                 std::string contentType, std::string body) {
  return kj::evalNow([&]() {
    KJ_REQUIRE(client_.get() != nullptr, "the socket path is longer than a unix socket allows");
    kj::HttpHeaders headers(*headerTable_);
    // The daemon (Go's HTTP server) refuses a request without a Host.
    headers.set(kj::HttpHeaderId::HOST, "docker");
    if (!contentType.empty()) {
      headers.set(kj::HttpHeaderId::CONTENT_TYPE, kj::str(contentType.c_str()));
    }
    const std::string url = kApiVersion + path;
    // Always a Content-Length (0 without a body): never a chunked request.
    auto request = client_->request(method, kj::StringPtr(url.c_str()), headers,
                                    kj::Maybe<uint64_t>(body.size()));
    kj::Promise<void> sent = kj::READY_NOW;
    if (!body.empty()) {
      auto bytes = kj::heapString(body.data(), body.size());
      sent = request.body->write(bytes.begin(), bytes.size()).attach(kj::mv(bytes));
    }
    auto stream = kj::mv(request.body);
    return sent.attach(kj::mv(stream))
        .then([response = kj::mv(request.response)]() mutable { return kj::mv(response); })
        .then([](kj::HttpClient::Response&& response) {
          const unsigned status = response.statusCode;
          auto reading = response.body->readAllText(kMaxAnswerBytes);
          return reading.attach(kj::mv(response.body)).then([status](kj::String text) {
            return DockerAnswer{status, std::string(text.cStr(), text.size())};
          });
        });
  });
}

std::string dockerMessage(const DockerAnswer& answer) {
  const auto parsed = nlohmann::json::parse(answer.body, nullptr, false);
  if (parsed.is_object() && parsed.contains("message") && parsed["message"].is_string()) {
    return parsed["message"].get<std::string>();
  }
  std::string text = answer.body.substr(0, 300);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text.empty() ? "HTTP " + std::to_string(answer.status) : text;
}

Result<std::string> tarArchive(const std::vector<ArchiveFile>& files) {
  for (const ArchiveFile& file : files) {
    // A ustar name holds 99 characters (without the prefix field, which is not written).
    if (file.path.size() < 2 || file.path[0] != '/' || file.path.size() > 99) {
      return Error::fatal("cannot archive " + file.path +
                          ": not an absolute path of at most 99 characters");
    }
  }
  std::string out;
  std::set<std::string> directories;
  for (const ArchiveFile& file : files) {
    // Every parent directory, outermost first, once.
    for (size_t slash = file.path.find('/', 1); slash != std::string::npos;
         slash = file.path.find('/', slash + 1)) {
      const std::string directory = file.path.substr(1, slash);  // "etc/", "etc/regent/"
      if (directories.insert(directory).second) appendEntry(out, directory, '5', 0755, "");
    }
    appendEntry(out, file.path.substr(1), '0', file.mode, file.contents);
  }
  out.append(1024, '\0');
  return out;
}

std::string demultiplexedLog(const std::string& stream) {
  std::string text;
  size_t at = 0;
  while (at < stream.size()) {
    const auto stream_type = static_cast<unsigned char>(stream[at]);
    if (stream.size() - at < 8 || stream_type > 2 || stream[at + 1] != 0 || stream[at + 2] != 0 ||
        stream[at + 3] != 0) {
      text += stream.substr(at);  // Not framed (a container with a terminal).
      break;
    }
    const size_t size = (static_cast<size_t>(static_cast<unsigned char>(stream[at + 4])) << 24) |
                        (static_cast<size_t>(static_cast<unsigned char>(stream[at + 5])) << 16) |
                        (static_cast<size_t>(static_cast<unsigned char>(stream[at + 6])) << 8) |
                        static_cast<size_t>(static_cast<unsigned char>(stream[at + 7]));
    text += stream.substr(at + 8, size);
    at += 8 + size;
  }
  return text;
}

}  // namespace regent::providers

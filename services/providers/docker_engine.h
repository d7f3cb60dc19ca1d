// A small client of the Docker Engine API (https://docs.docker.com/engine/api/) over the daemon's
// unix socket, with kj-http on the loop: the docker provider's only way to the daemon (it never
// runs the `docker` command). Speaks API version 1.41 (Docker 20.10, Debian 12's docker.io),
// which later daemons still serve.
#pragma once

#include <kj/async-io.h>
#include <kj/compat/http.h>
#include <kj/time.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/time.h"

namespace regent::providers {

// One answer of the daemon: its HTTP status and body.
struct DockerAnswer {
  unsigned status = 0;
  std::string body;
};

class DockerEngine {
 public:
  // `socketPath`: the daemon's unix socket (resourcemanager.docker.socket).
  DockerEngine(kj::Network& network, kj::Timer& timer, std::string socketPath);
  ~DockerEngine() noexcept;

  // `path` starts after the version ("/containers/json?all=1"). Resolves with the daemon's
  // answer whatever its status, or with an error naming the socket when the daemon cannot be
  // reached or did not answer within `timeout`. Never rejects.
  kj::Promise<Result<DockerAnswer>> call(kj::HttpMethod method, const std::string& path,
                                         Duration timeout, const std::string& contentType = "",
                                         std::string body = "");

  const std::string& socketPath() const { return socketPath_; }

 private:
  kj::Promise<DockerAnswer> exchange(kj::HttpMethod method, std::string path,
                                     std::string contentType, std::string body);

  kj::Timer& timer_;
  const std::string socketPath_;
  kj::Own<kj::HttpHeaderTable> headerTable_;
  kj::Own<kj::NetworkAddress> address_;  // Null when the path is too long for a socket.
  kj::Own<kj::HttpClient> client_;       // Shared by every call; connects as needed.
};

// The daemon's own words in an error answer ({"message": "..."}), or the body as it came.
std::string dockerMessage(const DockerAnswer& answer);

// A file for PUT /containers/{id}/archive: a path inside the container (absolute), its mode and
// contents; owned by root.
struct ArchiveFile {
  std::string path;
  uint32_t mode = 0600;
  std::string contents;
};

// A tar archive (POSIX ustar) of `files`, their directories first (mode 0755, owned by root).
// Paths must be absolute and normalised; one longer than 99 characters is an error.
Result<std::string> tarArchive(const std::vector<ArchiveFile>& files);

// The frames of a log stream of a container without a terminal (stdout and stderr multiplexed,
// each frame an 8-byte header then its bytes), as text; bytes that are no frame are kept.
std::string demultiplexedLog(const std::string& stream);

}  // namespace regent::providers

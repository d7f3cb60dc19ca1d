// resolveQuorumHosts (see quorum_resolution.h).
#include "ha/quorum_resolution.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <vector>

namespace regent::ha {

namespace {

struct QuorumEntry {
  std::string host;
  std::string port;
};

// The entries of `quorum`'s host list (before any chroot), blanks around each trimmed, empty
// ones skipped; an error naming the first entry that is not host:port.
Result<std::vector<QuorumEntry>> entriesOf(const std::string& quorum) {
  const std::string hosts = quorum.substr(0, quorum.find('/'));
  std::vector<QuorumEntry> entries;
  size_t from = 0;
  while (from <= hosts.size()) {
    size_t comma = hosts.find(',', from);
    if (comma == std::string::npos) comma = hosts.size();
    std::string entry = hosts.substr(from, comma - from);
    from = comma + 1;
    const size_t first = entry.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    entry = entry.substr(first, entry.find_last_not_of(" \t") - first + 1);
    const size_t colon = entry.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == entry.size()) {
      return Error::fatal("ZooKeeper quorum entry '" + entry + "' is not host:port");
    }
    entries.push_back({entry.substr(0, colon), entry.substr(colon + 1)});
  }
  if (entries.empty()) return Error::fatal("ZooKeeper quorum '" + quorum + "' names no server");
  return entries;
}

}  // namespace

Status checkQuorum(const std::string& quorum) {
  auto entries = entriesOf(quorum);
  if (!entries.ok()) return entries.error();
  return {};
}

Result<std::string> resolveQuorumHosts(const std::string& quorum) {
  const size_t slash = quorum.find('/');
  const std::string chroot = slash == std::string::npos ? "" : quorum.substr(slash);
  auto entries = entriesOf(quorum);
  if (!entries.ok()) return entries.error();
  std::vector<std::string> addresses;
  std::string problems;
  for (const auto& [host, port] : entries.value()) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    // As the library asks: only the address families this machine has configured.
    hints.ai_flags = AI_ADDRCONFIG;
    addrinfo* found = nullptr;
    int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
    if (rc == EAI_BADFLAGS) {
      hints.ai_flags = 0;
      rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
    }
    if (rc != 0) {
      problems += (problems.empty() ? "" : "; ") + host + ": " + ::gai_strerror(rc);
      continue;
    }
    for (const addrinfo* at = found; at != nullptr; at = at->ai_next) {
      char text[INET6_ADDRSTRLEN] = {};
      const void* raw = at->ai_family == AF_INET6
                            ? static_cast<const void*>(
                                  &reinterpret_cast<const sockaddr_in6*>(at->ai_addr)->sin6_addr)
                            : static_cast<const void*>(
                                  &reinterpret_cast<const sockaddr_in*>(at->ai_addr)->sin_addr);
      if (at->ai_family != AF_INET && at->ai_family != AF_INET6) continue;
      if (::inet_ntop(at->ai_family, raw, text, sizeof text) == nullptr) continue;
      std::string address = std::string(text) + ":" + port;
      if (std::find(addresses.begin(), addresses.end(), address) == addresses.end()) {
        addresses.push_back(std::move(address));
      }
    }
    ::freeaddrinfo(found);
  }
  if (addresses.empty()) {
    return Error::retryable("no host of the ZooKeeper quorum " + quorum + " resolves" +
                            (problems.empty() ? "" : " (" + problems + ")"));
  }
  std::string out;
  for (const std::string& address : addresses) out += (out.empty() ? "" : ",") + address;
  return out + chroot;
}

}  // namespace regent::ha

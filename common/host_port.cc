// Host:port text (see host_port.h).
#include "common/host_port.h"

#include <unistd.h>

#include <charconv>
#include <climits>
#include <system_error>

namespace regent {
namespace {

Error invalid(std::string_view address, std::string_view why) {
  return Error::fatal("\"" + std::string(address) + "\" is not host:port: " + std::string(why));
}

}  // namespace

Result<HostPort> splitHostPort(std::string_view address) {
  HostPort parts;
  std::string_view rest;
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    if (close == std::string_view::npos) return invalid(address, "'[' without ']'");
    parts.host = std::string(address.substr(1, close - 1));
    rest = address.substr(close + 1);
    if (rest.empty() || rest.front() != ':') return invalid(address, "no ':port' after ']'");
    rest.remove_prefix(1);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == std::string_view::npos) return invalid(address, "no ':port'");
    parts.host = std::string(address.substr(0, colon));
    if (parts.host.find(':') != std::string::npos) {
      return invalid(address, "an IPv6 host must be written in brackets, as [::1]:7000");
    }
    rest = address.substr(colon + 1);
  }
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), port);
  if (rest.empty() || ec != std::errc() || end != rest.data() + rest.size() || port > 65535) {
    return invalid(address, "the port is not a number from 0 to 65535");
  }
  parts.port = static_cast<uint16_t>(port);
  return parts;
}

std::string hostOf(std::string_view address) {
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    return std::string(close == std::string_view::npos ? address.substr(1)
                                                       : address.substr(1, close - 1));
  }
  const size_t colon = address.find(':');
  if (colon == std::string_view::npos || address.find(':', colon + 1) != std::string_view::npos) {
    return std::string(address);  // No port, or a bare IPv6 literal.
  }
  return std::string(address.substr(0, colon));
}

std::string joinHostPort(std::string_view host, uint16_t port) {
  std::string joined;
  if (host.find(':') != std::string_view::npos) {
    joined.append("[").append(host).append("]");
  } else {
    joined.append(host);
  }
  return joined + ":" + std::to_string(port);
}

bool isWildcardHost(std::string_view host) {
  return host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]" || host == "*";
}

std::string advertisedAddress(std::string_view bind, std::string_view advertisedOption,
                              std::string_view hostName, uint16_t boundPort) {
  if (!advertisedOption.empty()) return std::string(advertisedOption);
  auto parts = splitHostPort(bind);
  if (!parts.ok()) return std::string(bind);
  const std::string_view host =
      isWildcardHost(parts.value().host) ? hostName : std::string_view(parts.value().host);
  return joinHostPort(host, boundPort != 0 ? boundPort : parts.value().port);
}

std::string localHostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace regent

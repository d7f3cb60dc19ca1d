// Network addresses as "host:port" text, split and joined in one place, and the one rule for the
// address a process advertises (publishes for others to dial) given the address it binds.
// IPv6 literals are written in brackets ("[::1]:7000"); the host parts returned here never carry
// them. docs/configuration.md describes the address options these functions read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace regent {

struct HostPort {
  std::string host;  // Without brackets: "::1", "0.0.0.0", "master-1". May be empty (":7000").
  uint16_t port = 0;
};

// "host:port" or "[ipv6]:port" split into its parts. Errors (fatal) name the text and what is
// wrong with it: no port, a port that is not a number in [0, 65535], an unclosed bracket, or an
// IPv6 literal without brackets.
Result<HostPort> splitHostPort(std::string_view address);

// The host of `address` without its port and brackets; `address` itself (brackets removed) when
// it has no port or is a bare IPv6 literal. For addresses already validated or where a missing
// port is allowed (a TLS client's name to verify).
std::string hostOf(std::string_view address);

// "host:port", with brackets around a host that contains ':' (an IPv6 literal).
std::string joinHostPort(std::string_view host, uint16_t port);

// True for a host that means "every interface" when binding: empty, "0.0.0.0", "::" (with or
// without brackets) or "*". Others cannot dial it.
bool isWildcardHost(std::string_view host);

// The address a process advertises for a socket bound to `bind`: `advertisedOption` when it is
// set (non-empty), as given; otherwise the host of `bind` (a wildcard host replaced by
// `hostName`) with `boundPort`, or with the port of `bind` while `boundPort` is 0 (not bound yet).
// A `bind` that is not host:port is returned as it is (the configuration checked it already).
std::string advertisedAddress(std::string_view bind, std::string_view advertisedOption,
                              std::string_view hostName, uint16_t boundPort);

// The local host name (gethostname), or "localhost" if it cannot be read.
std::string localHostName();

}  // namespace regent

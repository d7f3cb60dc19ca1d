// The quorum's host names resolved off the loop. The ZooKeeper C library resolves the host names
// of its connect string inside zookeeper_init(), synchronously, on the thread that calls it: on
// the loop thread, a lookup the resolver never answers stalls every timer and call for as long as
// it waits (20 s per name without a DNS answer). The session therefore resolves the names on the
// loop's thread pool first and hands the library addresses only.
#pragma once

#include <functional>
#include <string>

#include "common/result.h"

namespace regent::ha {

// Turns a quorum into a connect string of addresses; blocking, run on the thread pool.
using QuorumResolver = std::function<Result<std::string>(const std::string& quorum)>;

// `quorum` ("host:port,host:port[/chroot]") with every host replaced by each address it resolves
// to (getaddrinfo, TCP), written as the C library parses them ("10.0.0.1:2181", "::1:2181": the
// port after the last ':'), duplicates dropped, the chroot kept. A host that does not resolve is
// left out; a retryable error names each host and why when none resolves, and an entry without
// a port is an error too (checkQuorum). Blanks around an entry are ignored.
Result<std::string> resolveQuorumHosts(const std::string& quorum);

// Ok when every entry of `quorum` is host:port (blanks around entries allowed) and there is one
// at least; else an error naming the entry. What ZooKeeperClient::start checks.
Status checkQuorum(const std::string& quorum);

}  // namespace regent::ha

// GET requests to a master's HTTP endpoints from an integration test's loop: one request, or
// repeated until the reply is the one expected (a master learns of the leader through a watch,
// so its answer may lag).
#pragma once

#include <gtest/gtest.h>
#include <kj/compat/http.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/event_loop.h"

namespace regent::testing {

struct HttpReply {
  uint status = 0;
  std::string body;
  std::string location;  // The Location header, "" without one.
};

// One GET of `path` from the server at `address` ("127.0.0.1:8081"), run on `loop`. A refused
// or dropped connection throws the kj exception. `table` must outlive the call.
// `extra`: request headers (name, value) to send.
inline HttpReply httpGet(EventLoop& loop, kj::HttpHeaderTable& table, const std::string& address,
                         const std::string& path,
                         const std::vector<std::pair<std::string, std::string>>& extra = {}) {
  auto target = loop.run(loop.io().getNetwork().parseAddress(address));
  auto client = kj::newHttpClient(loop.timer(), table, *target);
  kj::HttpHeaders headers(table);
  for (const auto& [name, value] : extra) headers.add(name, value);
  auto response = loop.run(
      client->request(kj::HttpMethod::GET, kj::StringPtr(path.c_str()), headers).response);
  HttpReply reply;
  reply.status = response.statusCode;
  reply.body = loop.run(response.body->readAllText()).cStr();
  KJ_IF_MAYBE (location, response.headers->get(kj::HttpHeaderId::LOCATION)) {
    reply.location = location->cStr();
  }
  return reply;
}

// GETs until `done` holds for the reply, at most 600 times with 50 ms on the loop's timer
// between attempts; then records a test failure naming the last reply and returns it.
inline HttpReply httpGetUntil(EventLoop& loop, kj::HttpHeaderTable& table,
                              const std::string& address, const std::string& path,
                              const std::function<bool(const HttpReply&)>& done) {
  HttpReply reply;
  for (int attempt = 0; attempt < 600; ++attempt) {
    reply = httpGet(loop, table, address, path);
    if (done(reply)) return reply;
    loop.run(loop.timer().afterDelay(50 * kj::MILLISECONDS));
  }
  ADD_FAILURE() << path << " on " << address << " last answered " << reply.status << ": "
                << reply.body;
  return reply;
}

}  // namespace regent::testing

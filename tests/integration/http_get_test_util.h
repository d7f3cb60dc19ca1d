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
#include "common/time.h"
#include "tests/fixtures/loop_wait_test_util.h"

namespace regent::testing {

struct HttpReply {
  uint status = 0;
  std::string body;
  std::string location;  // The Location header, "" without one.
};

// One GET of `path` from the server at `address` ("127.0.0.1:8081"), run on `loop`. A refused
// or dropped connection throws the kj exception, and so does a reply not read whole within
// `timeout`. `table` must outlive the call. `extra`: request headers (name, value) to send.
inline HttpReply httpGet(EventLoop& loop, kj::HttpHeaderTable& table, const std::string& address,
                         const std::string& path,
                         const std::vector<std::pair<std::string, std::string>>& extra = {},
                         Duration timeout = Duration(30000)) {
  auto target = loop.run(loop.io().getNetwork().parseAddress(address));
  auto client = kj::newHttpClient(loop.timer(), table, *target);
  kj::HttpHeaders headers(table);
  for (const auto& [name, value] : extra) headers.add(name, value);
  auto response =
      client->request(kj::HttpMethod::GET, kj::StringPtr(path.c_str()), headers).response;
  auto read = response.then([](kj::HttpClient::Response got) {
    HttpReply reply;
    reply.status = got.statusCode;
    KJ_IF_MAYBE (location, got.headers->get(kj::HttpHeaderId::LOCATION)) {
      reply.location = location->cStr();
    }
    auto body = got.body->readAllText();
    return body.attach(kj::mv(got.body)).then([reply = std::move(reply)](kj::String text) mutable {
      reply.body = text.cStr();
      return std::move(reply);
    });
  });
  return runLoopBounded(loop, kj::mv(read), timeout, "the HTTP reply");
}

// GETs until `done` holds for the reply, with 50 ms on the loop's timer between attempts, for at
// most `timeout`; then records a test failure naming the last reply and returns it.
inline HttpReply httpGetUntil(EventLoop& loop, kj::HttpHeaderTable& table,
                              const std::string& address, const std::string& path,
                              const std::function<bool(const HttpReply&)>& done,
                              Duration timeout = Duration(30000)) {
  const kj::TimePoint deadline = loop.timer().now() + timeout.count() * kj::MILLISECONDS;
  HttpReply reply;
  while (true) {
    reply = httpGet(loop, table, address, path, {}, timeout);
    if (done(reply)) return reply;
    if (loop.timer().now() >= deadline) break;
    loop.run(loop.timer().afterDelay(50 * kj::MILLISECONDS));
  }
  ADD_FAILURE() << path << " on " << address << " last answered " << reply.status << ": "
                << reply.body << " (waited " << timeout.count() << " ms)";
  return reply;
}

}  // namespace regent::testing

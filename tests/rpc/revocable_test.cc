// rpc::Revocable: the link from a handed-out capability to its service, cut when the service goes.
#include "rpc/revocable.h"

#include <gtest/gtest.h>
#include <kj/exception.h>

#include <optional>
#include <string>

namespace regent::rpc {
namespace {

// A service that hands out links to itself and cuts them when it goes.
struct Service {
  int calls = 0;
  Revocable<Service> self{*this, "the service of this test is gone"};
};

TEST(Revocable, ALinkReachesItsServiceWhileTheServiceLives) {
  Service service;
  const auto link = service.self.link();
  link.get().calls++;
  EXPECT_EQ(service.calls, 1);
  EXPECT_EQ(link.tryGet(), &service);
  EXPECT_FALSE(link.revoked());
}

TEST(Revocable, ALinkThatOutlivesItsServiceThrowsDisconnectedWithTheServicesMessage) {
  std::optional<Service> service(std::in_place);
  const auto link = service->self.link();
  const auto copy = link;  // Every copy is cut too.
  service.reset();
  EXPECT_TRUE(link.revoked());
  EXPECT_EQ(copy.tryGet(), nullptr);
  try {
    copy.get();
    ADD_FAILURE() << "a cut link reached its service";
  } catch (const kj::Exception& exception) {
    EXPECT_EQ(exception.getType(), kj::Exception::Type::DISCONNECTED);
    EXPECT_EQ(std::string(exception.getDescription().cStr()), "the service of this test is gone");
  }
}

TEST(Revocable, RevokeCutsEveryLinkHandedOutBeforeTheServiceGoes) {
  Service service;
  const auto first = service.self.link();
  service.self.revoke();
  const auto later = service.self.link();  // Handed out after revoke(): cut as well.
  EXPECT_TRUE(service.self.revoked());
  EXPECT_TRUE(first.revoked());
  EXPECT_TRUE(later.revoked());
  EXPECT_THROW(later.get(), kj::Exception);
  service.self.revoke();  // Idempotent.
  EXPECT_EQ(service.calls, 0);
}

}  // namespace
}  // namespace regent::rpc

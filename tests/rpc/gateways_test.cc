// Checks the gateway interfaces' shape: every method the control plane needs is declared, and
// every method follows the fencing and error conventions of docs/wire.md.
#include <capnp/schema.h>
#include <gtest/gtest.h>
#include <kj/debug.h>

#include <set>
#include <string>
#include <vector>

#include "rpc/schema/common.capnp.h"
#include "rpc/schema/gateways.capnp.h"

namespace regent::wire {
namespace {

struct GatewayMethods {
  capnp::InterfaceSchema schema;
  std::vector<std::string> methods;
};

std::vector<GatewayMethods> requiredMethods() {
  return {
      {capnp::Schema::from<MasterBootstrap>(),
       {"leaderInfo", "handOver", "dispatcher", "resourceManager", "jobMaster", "authChallenge",
        "authenticate"}},
      {capnp::Schema::from<DispatcherGateway>(),
       {"submitJob", "cancelJob", "listJobs", "jobStatus", "clusterOverview"}},
      {capnp::Schema::from<ResourceManagerGateway>(),
       {"registerTaskExecutor", "sendSlotReport", "heartbeat", "disconnect", "registerJobMaster",
        "declareRequiredResources"}},
      {capnp::Schema::from<JobMasterGateway>(),
       {"offerSlots", "updateTaskExecutionState", "heartbeat", "disconnect"}},
      {capnp::Schema::from<TaskExecutorGateway>(),
       {"requestSlot", "submitTask", "cancelTask", "freeSlot", "heartbeat", "disconnect"}},
  };
}

std::string nameOf(capnp::InterfaceSchema schema, capnp::InterfaceSchema::Method method) {
  std::string display = schema.getProto().getDisplayName();
  return display.substr(display.find(':') + 1) + "." + method.getProto().getName().cStr();
}

// Methods callable without knowing the epoch: they are how a caller learns it, and how it
// authenticates first.
const std::set<std::string> kUnfencedMethods = {
    "MasterBootstrap.leaderInfo", "MasterBootstrap.authChallenge", "MasterBootstrap.authenticate"};
// Unfenced methods that never fail, so return no failure.
const std::set<std::string> kInfallibleMethods = {"MasterBootstrap.leaderInfo",
                                                   "MasterBootstrap.authChallenge"};

TEST(Gateways, EveryGatewayDeclaresEveryRequiredMethod) {
  for (const auto& gateway : requiredMethods()) {
    for (const auto& method : gateway.methods) {
      EXPECT_TRUE(gateway.schema.findMethodByName(method) != nullptr)
          << gateway.schema.getProto().getDisplayName().cStr() << " lacks " << method;
    }
  }
}

TEST(Gateways, EveryMethodButLeaderInfoCarriesTheEpoch) {
  uint fenced = 0;
  for (const auto& gateway : requiredMethods()) {
    for (auto method : gateway.schema.getMethods()) {
      auto name = nameOf(gateway.schema, method);
      auto epoch = method.getParamType().findFieldByName("epoch");
      if (kUnfencedMethods.count(name)) {
        EXPECT_TRUE(epoch == nullptr) << name << " is unfenced and must not take an epoch";
        continue;
      }
      if (epoch == nullptr) {
        ADD_FAILURE() << name << " takes no epoch";
        continue;
      }
      EXPECT_EQ(KJ_ASSERT_NONNULL(epoch).getType().which(), capnp::schema::Type::UINT64) << name;
      ++fenced;
    }
  }
  EXPECT_GE(fenced, 27u);
}

TEST(Gateways, EveryFallibleMethodReturnsAFailureValue) {
  auto failureId = capnp::Schema::from<Failure>().getProto().getId();
  for (const auto& gateway : requiredMethods()) {
    for (auto method : gateway.schema.getMethods()) {
      auto name = nameOf(gateway.schema, method);
      if (kInfallibleMethods.count(name)) continue;
      auto failure = method.getResultType().findFieldByName("failure");
      if (failure == nullptr) {
        ADD_FAILURE() << name << " returns no failure";
        continue;
      }
      auto field = KJ_ASSERT_NONNULL(failure);
      ASSERT_EQ(field.getType().which(), capnp::schema::Type::STRUCT) << name;
      EXPECT_EQ(field.getType().asStruct().getProto().getId(), failureId) << name;
      // First result field, so every result reads "failure, then the answer".
      EXPECT_EQ(field.getProto().getCodeOrder(), 0u) << name;
    }
  }
}

TEST(Gateways, BootstrapHandsOutTheFencedGateways) {
  auto bootstrap = capnp::Schema::from<MasterBootstrap>();
  auto resultCapability = [&](const char* method, const char* field) {
    auto results = bootstrap.getMethodByName(method).getResultType();
    return results.getFieldByName(field).getType().asInterface().getProto().getId();
  };
  EXPECT_EQ(resultCapability("dispatcher", "dispatcher"),
            capnp::Schema::from<DispatcherGateway>().getProto().getId());
  EXPECT_EQ(resultCapability("resourceManager", "resourceManager"),
            capnp::Schema::from<ResourceManagerGateway>().getProto().getId());
  EXPECT_EQ(resultCapability("jobMaster", "jobMaster"),
            capnp::Schema::from<JobMasterGateway>().getProto().getId());
}

TEST(Gateways, WorkersHandTheirTaskExecutorGatewayToTheMaster) {
  auto teId = capnp::Schema::from<TaskExecutorGateway>().getProto().getId();
  auto register_ = capnp::Schema::from<ResourceManagerGateway>()
                       .getMethodByName("registerTaskExecutor")
                       .getParamType()
                       .getFieldByName("taskExecutor");
  EXPECT_EQ(register_.getType().asInterface().getProto().getId(), teId);
  auto offer = capnp::Schema::from<JobMasterGateway>()
                   .getMethodByName("offerSlots")
                   .getParamType()
                   .getFieldByName("taskExecutor");
  EXPECT_EQ(offer.getType().asInterface().getProto().getId(), teId);
}

}  // namespace
}  // namespace regent::wire

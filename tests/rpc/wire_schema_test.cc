// Generic checks over the whole wire schema via capnp reflection: every struct declared in
// rpc/schema/ is reachable from the compiled roots (so it is built and used), and every type and
// method is documented. Encoding itself is Cap'n Proto's and is not tested here.
#include <capnp/schema.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "rpc/schema/cluster.capnp.h"
#include "rpc/schema/common.capnp.h"
#include "rpc/schema/gateways.capnp.h"
#include "rpc/schema/jobs.capnp.h"
#include "tests/rpc/wire_schema_test_util.h"

namespace regent::wire {
namespace {

using testing::collectStructs;
using testing::ParsedWireSchema;
using testing::shortName;

// Every wire struct compiled into the build, reached from the roots: the bootstrap interface
// (which reaches every gateway and everything they carry) and the payloads kept in ZooKeeper
// and the stores. A struct declared in rpc/schema/ but reachable from none of these fails
// EveryDeclaredStructIsCompiledIntoTheBuild: add it to the roots if it is a stored payload.
std::map<uint64_t, capnp::StructSchema> compiledStructs() {
  std::map<uint64_t, capnp::StructSchema> out;
  std::map<uint64_t, bool> visited;
  capnp::Schema roots[] = {capnp::Schema::from<MasterBootstrap>(), capnp::Schema::from<JobGraph>(),
                           capnp::Schema::from<JobResult>(), capnp::Schema::from<JobProgress>(),
                           capnp::Schema::from<JobProgressPart>(),
                           capnp::Schema::from<LeaderInfo>(), capnp::Schema::from<ContenderInfo>()};
  for (capnp::Schema root : roots) {
    collectStructs(root, out, visited);
  }
  return out;
}

std::set<std::string> namesOf(const std::map<uint64_t, capnp::StructSchema>& structs) {
  std::set<std::string> names;
  for (const auto& [id, schema] : structs) names.insert(shortName(schema));
  return names;
}

// ---- Tests ----------------------------------------------------------------------------------

TEST(WireSchema, EnumeratesEveryStructIncludingNestedAndMethodStructs) {
  auto structs = compiledStructs();
  // 38 declared structs + 2 per gateway method (28 methods); fewer means the walk missed some.
  EXPECT_GE(structs.size(), 94u);
  auto names = namesOf(structs);
  for (const char* name : {"Id128",
                           "SlotId",
                           "ResourceProfile",
                           "LeaderInfo",
                           "ContenderInfo",
                           "LeaderView",
                           "Failure",
                           "FencingError",
                           "InvalidArgument",
                           "EntityRef",
                           "JobGraph",
                           "JobVertex",
                           "Command",
                           "RestartStrategy",
                           "RestartStrategy.FixedDelay",
                           "TaskDeployment",
                           "TaskExecutionState",
                           "JobStatus",
                           "JobResult",
                           "JobProgress",
                           "SubtaskProgress",
                           "JobProgressPart",
                           "SlotStatus",
                           "SlotReport",
                           "SlotOffer",
                           "TaskExecutorRegistration",
                           "TaskExecutorRegistrationSuccess",
                           "ResourceRequirement",
                           "TaskExecutorHeartbeatPayload",
                           "TaskExecutorToJobMasterHeartbeatPayload",
                           "ClusterOverview",
                           "MasterBootstrap.dispatcher$Results",
                           "ResourceManagerGateway.registerTaskExecutor$Params",
                           "TaskExecutorGateway.submitTask$Params",
                           "JobMasterGateway.offerSlots$Params"}) {
    EXPECT_TRUE(names.count(name)) << name << " was not enumerated";
  }
}

TEST(WireSchema, EveryDeclaredStructIsCompiledIntoTheBuild) {
  ParsedWireSchema parsed;
  auto declared = parsed.declaredStructs();
  auto compiled = compiledStructs();
  EXPECT_GE(declared.size(), 94u);
  for (const auto& [id, schema] : declared) {
    auto it = compiled.find(id);
    if (it == compiled.end()) {
      ADD_FAILURE() << shortName(schema)
                    << " is declared but not reachable from the compiled roots";
      continue;
    }
    // Same fields in the same order: the build compiled the schema that is in the tree.
    auto declaredFields = schema.getFields();
    auto compiledFields = it->second.getFields();
    ASSERT_EQ(declaredFields.size(), compiledFields.size()) << shortName(schema);
    for (uint i = 0; i < declaredFields.size(); ++i) {
      EXPECT_EQ(std::string(declaredFields[i].getProto().getName()),
                std::string(compiledFields[i].getProto().getName()))
          << shortName(schema);
    }
  }
  for (const auto& [id, schema] : compiled) {
    EXPECT_TRUE(declared.count(id)) << shortName(schema) << " is compiled but not declared";
  }
}

TEST(WireSchema, EveryTypeAndMethodCarriesADocComment) {
  ParsedWireSchema parsed;
  auto types = parsed.declaredTypes();
  EXPECT_GE(types.size(), 40u);
  for (auto type : types) {
    auto info = type.getSourceInfo();
    EXPECT_NE(info.getDocComment().size(), 0u) << shortName(type) << " has no doc comment";
    if (type.getProto().isInterface()) {
      auto methods = type.asInterface().getMethods();
      auto members = info.getMembers();
      ASSERT_EQ(members.size(), methods.size()) << shortName(type);
      for (uint i = 0; i < methods.size(); ++i) {
        EXPECT_NE(members[i].getDocComment().size(), 0u)
            << shortName(type) << "." << methods[i].getProto().getName().cStr()
            << " has no doc comment";
      }
    }
  }
}

}  // namespace
}  // namespace regent::wire

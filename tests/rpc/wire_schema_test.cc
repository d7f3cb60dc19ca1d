// Generic checks over the whole wire schema via capnp reflection: every struct declared in
// rpc/schema/ is compiled into the build, documented, and round-trips with every field set.
#include <capnp/dynamic.h>
#include <capnp/message.h>
#include <capnp/schema.h>
#include <capnp/serialize-packed.h>
#include <capnp/serialize.h>
#include <gtest/gtest.h>
#include <kj/string.h>

#include <algorithm>
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
                           capnp::Schema::from<JobResult>(), capnp::Schema::from<LeaderInfo>(),
                           capnp::Schema::from<ContenderInfo>()};
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

// ---- Filling a message with non-default values through reflection --------------------------

constexpr int kMaxDepth = 6;

// Fills every field of a struct with a value different from its default. In each union the
// member `variant % memberCount` is chosen, so iterating `variant` over the largest union size
// covers every member of every union. Capabilities and AnyPointers stay null. `wroteNonDefault`
// becomes true when anything was written that differs from a default-initialized struct.
class StructFiller final {
 public:
  explicit StructFiller(uint variant) : variant_(variant) {}

  bool wroteNonDefault() const { return wroteNonDefault_; }

  void fill(capnp::DynamicStruct::Builder builder, int depth) {
    auto schema = builder.getSchema();
    for (auto field : schema.getNonUnionFields()) fillField(builder, field, depth);
    auto members = schema.getUnionFields();
    if (members.size() > 0) {
      auto chosen = members[variant_ % members.size()];
      if (chosen.getProto().getDiscriminantValue() != 0) wroteNonDefault_ = true;
      fillField(builder, chosen, depth);
    }
  }

 private:
  void fillField(capnp::DynamicStruct::Builder builder, capnp::StructSchema::Field field,
                 int depth) {
    if (field.getProto().isGroup()) {
      fill(builder.init(field).as<capnp::DynamicStruct>(), depth);
      return;
    }
    auto type = field.getType();
    switch (type.which()) {
      case capnp::schema::Type::VOID:
        builder.set(field, capnp::VOID);
        return;
      case capnp::schema::Type::TEXT: {
        auto text = nextText();
        builder.set(field, capnp::Text::Reader(text));
        wroteNonDefault_ = true;
        return;
      }
      case capnp::schema::Type::DATA: {
        auto text = nextText();
        builder.set(field, capnp::Data::Reader(text.asBytes()));
        wroteNonDefault_ = true;
        return;
      }
      case capnp::schema::Type::LIST:
        fillList(builder.init(field, 2).as<capnp::DynamicList>(), depth + 1);
        wroteNonDefault_ = true;
        return;
      case capnp::schema::Type::STRUCT:
        if (depth >= kMaxDepth) return;
        fill(builder.init(field).as<capnp::DynamicStruct>(), depth + 1);
        wroteNonDefault_ = true;
        return;
      case capnp::schema::Type::INTERFACE:
      case capnp::schema::Type::ANY_POINTER:
        return;
      default:
        builder.set(field, nextScalar(type));
        wroteNonDefault_ = true;
        return;
    }
  }

  void fillList(capnp::DynamicList::Builder list, int depth) {
    auto element = list.getSchema().getElementType();
    for (uint i = 0; i < list.size(); ++i) {
      switch (element.which()) {
        case capnp::schema::Type::VOID:
          break;
        case capnp::schema::Type::TEXT: {
          auto text = nextText();
          list.set(i, capnp::Text::Reader(text));
          break;
        }
        case capnp::schema::Type::DATA: {
          auto text = nextText();
          list.set(i, capnp::Data::Reader(text.asBytes()));
          break;
        }
        case capnp::schema::Type::LIST:
          fillList(list.init(i, 2).as<capnp::DynamicList>(), depth + 1);
          break;
        case capnp::schema::Type::STRUCT:
          if (depth < kMaxDepth) fill(list[i].as<capnp::DynamicStruct>(), depth + 1);
          break;
        case capnp::schema::Type::INTERFACE:
        case capnp::schema::Type::ANY_POINTER:
          break;
        default:
          list.set(i, nextScalar(element));
          break;
      }
    }
  }

  kj::String nextText() { return kj::str("value-", ++counter_); }

  // A value of `type` that differs from the field's default (defaults are zero: the schema
  // declares no explicit defaults) and from the previous values, to catch swapped fields.
  capnp::DynamicValue::Reader nextScalar(capnp::Type type) {
    auto n = ++counter_;
    switch (type.which()) {
      case capnp::schema::Type::BOOL:
        return true;
      case capnp::schema::Type::INT8:
      case capnp::schema::Type::INT16:
        return -static_cast<int64_t>(n % 100) - 1;
      case capnp::schema::Type::INT32:
        return -static_cast<int64_t>(n) - 100000;
      case capnp::schema::Type::INT64:
        return -(int64_t{1} << 40) - static_cast<int64_t>(n);
      case capnp::schema::Type::UINT8:
      case capnp::schema::Type::UINT16:
        return static_cast<uint64_t>(n % 200) + 1;
      case capnp::schema::Type::UINT32:
        return static_cast<uint64_t>(n) + 3000000000u;
      case capnp::schema::Type::UINT64:
        return (uint64_t{1} << 63) + n;
      case capnp::schema::Type::FLOAT32:
      case capnp::schema::Type::FLOAT64:
        return 0.5 + static_cast<double>(n);
      case capnp::schema::Type::ENUM: {
        auto enumerants = type.asEnum().getEnumerants();
        // Any enumerant but the first (the default), rotating through all of them.
        auto index = enumerants.size() == 1 ? 0 : 1 + n % (enumerants.size() - 1);
        return capnp::DynamicEnum(enumerants[index]);
      }
      default:
        ADD_FAILURE() << "unexpected scalar type " << static_cast<int>(type.which());
        return capnp::VOID;
    }
  }

  uint variant_;
  uint counter_ = 0;
  bool wroteNonDefault_ = false;
};

uint largestUnion(const std::map<uint64_t, capnp::StructSchema>& structs) {
  uint largest = 1;
  for (const auto& [id, schema] : structs) {
    largest = std::max(largest, static_cast<uint>(schema.getUnionFields().size()));
  }
  return largest;
}

enum class Encoding { kUnpacked, kPacked };

// Fills each struct once per union variant, writes it with `encoding`, reads it back and
// compares the textual dumps. Returns the structs that never held a non-default value.
std::set<std::string> expectEveryStructRoundTrips(Encoding encoding) {
  auto structs = compiledStructs();
  auto variants = largestUnion(structs);
  std::set<std::string> alwaysDefault;
  for (const auto& [id, schema] : structs) {
    bool everNonDefault = false;
    for (uint variant = 0; variant < variants; ++variant) {
      SCOPED_TRACE(shortName(schema) + " variant " + std::to_string(variant));
      capnp::MallocMessageBuilder defaults;
      auto defaultDump = kj::str(defaults.initRoot<capnp::DynamicStruct>(schema).asReader());

      capnp::MallocMessageBuilder message;
      auto root = message.initRoot<capnp::DynamicStruct>(schema);
      StructFiller filler(variant);
      filler.fill(root, 0);
      auto written = kj::str(root.asReader());
      if (filler.wroteNonDefault()) {
        everNonDefault = true;
        EXPECT_NE(std::string(written.cStr()), std::string(defaultDump.cStr()));
      }

      std::string read;
      if (encoding == Encoding::kUnpacked) {
        auto words = testing::writeUnpacked(message);
        capnp::FlatArrayMessageReader reader(words);
        read = kj::str(reader.getRoot<capnp::DynamicStruct>(schema)).cStr();
      } else {
        auto bytes = testing::writePacked(message);
        kj::ArrayInputStream in(bytes);
        capnp::PackedMessageReader reader(in);
        read = kj::str(reader.getRoot<capnp::DynamicStruct>(schema)).cStr();
      }
      EXPECT_EQ(read, std::string(written.cStr()));
    }
    if (!everNonDefault) alwaysDefault.insert(shortName(schema));
  }
  return alwaysDefault;
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

TEST(WireSchema, EveryStructRoundTripsUnpacked) {
  auto alwaysDefault = expectEveryStructRoundTrips(Encoding::kUnpacked);
  // Only structs without fields may stay default; anything else means the filler skipped it.
  EXPECT_EQ(alwaysDefault, std::set<std::string>({"MasterBootstrap.leaderInfo$Params"}));
}

TEST(WireSchema, EveryStructRoundTripsPacked) {
  auto alwaysDefault = expectEveryStructRoundTrips(Encoding::kPacked);
  EXPECT_EQ(alwaysDefault, std::set<std::string>({"MasterBootstrap.leaderInfo$Params"}));
}

TEST(WireSchema, RoundTripComparisonDetectsAChangedField) {
  // Guards the comparison the round-trip tests rely on: a different value must dump differently.
  auto schema = capnp::Schema::from<JobVertex>();
  capnp::MallocMessageBuilder a;
  capnp::MallocMessageBuilder b;
  StructFiller(0).fill(a.initRoot<capnp::DynamicStruct>(schema), 0);
  StructFiller(0).fill(b.initRoot<capnp::DynamicStruct>(schema), 0);
  EXPECT_EQ(std::string(kj::str(a.getRoot<capnp::DynamicStruct>(schema).asReader()).cStr()),
            std::string(kj::str(b.getRoot<capnp::DynamicStruct>(schema).asReader()).cStr()));
  b.getRoot<JobVertex>().getCommand().getArgv().set(1, "changed");
  EXPECT_NE(std::string(kj::str(a.getRoot<capnp::DynamicStruct>(schema).asReader()).cStr()),
            std::string(kj::str(b.getRoot<capnp::DynamicStruct>(schema).asReader()).cStr()));
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

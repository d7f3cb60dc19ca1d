// Helpers for the wire schema tests: enumerate the schema's structs (as compiled into the build and
// as declared in rpc/schema/*.capnp).
#pragma once

#include <capnp/schema-parser.h>
#include <capnp/schema.h>
#include <kj/filesystem.h>
#include <kj/io.h>

#include <map>
#include <string>
#include <vector>

namespace regent::wire::testing {

// The schema files under rpc/schema/, relative to the source root.
inline const std::vector<std::string>& wireSchemaFiles() {
  static const std::vector<std::string> files = {"rpc/schema/common.capnp", "rpc/schema/jobs.capnp",
                                                 "rpc/schema/cluster.capnp",
                                                 "rpc/schema/gateways.capnp"};
  return files;
}

// "rpc/schema/jobs.capnp:JobGraph" -> "JobGraph"; "...:MasterBootstrap.handOver$Params" kept as
// "MasterBootstrap.handOver$Params".
inline std::string shortName(capnp::Schema schema) {
  std::string display = schema.getProto().getDisplayName();
  auto colon = display.find(':');
  return colon == std::string::npos ? display : display.substr(colon + 1);
}

inline bool isWireNode(capnp::Schema schema) {
  return kj::StringPtr(schema.getProto().getDisplayName()).startsWith("rpc/schema/");
}

// Adds every wire struct reachable from `schema` (through field types, list element types, and
// interface method params and results) to `out`, keyed by node id.
inline void collectStructs(capnp::Schema schema, std::map<uint64_t, capnp::StructSchema>& out,
                           std::map<uint64_t, bool>& visited);

inline void collectFromType(capnp::Type type, std::map<uint64_t, capnp::StructSchema>& out,
                            std::map<uint64_t, bool>& visited) {
  switch (type.which()) {
    case capnp::schema::Type::STRUCT:
      collectStructs(type.asStruct(), out, visited);
      break;
    case capnp::schema::Type::INTERFACE:
      collectStructs(type.asInterface(), out, visited);
      break;
    case capnp::schema::Type::LIST:
      collectFromType(type.asList().getElementType(), out, visited);
      break;
    default:
      break;
  }
}

inline void collectStructs(capnp::Schema schema, std::map<uint64_t, capnp::StructSchema>& out,
                           std::map<uint64_t, bool>& visited) {
  auto id = schema.getProto().getId();
  if (visited[id]) return;
  visited[id] = true;
  if (!isWireNode(schema)) return;
  auto proto = schema.getProto();
  if (proto.isStruct()) {
    auto structSchema = schema.asStruct();
    out.emplace(id, structSchema);
    for (auto field : structSchema.getFields()) collectFromType(field.getType(), out, visited);
  } else if (proto.isInterface()) {
    auto interfaceSchema = schema.asInterface();
    for (auto method : interfaceSchema.getMethods()) {
      collectStructs(method.getParamType(), out, visited);
      collectStructs(method.getResultType(), out, visited);
    }
    for (auto super : interfaceSchema.getSuperclasses()) collectStructs(super, out, visited);
  }
}

// The schema files parsed from the source tree at test time: unlike compiled code, a parsed file
// node lists everything it declares, and carries doc comments.
class ParsedWireSchema final {
 public:
  ParsedWireSchema()
      : fs_(kj::newDiskFilesystem()),
        sourceRoot_(fs_->getRoot().openSubdir(kj::Path::parse(&REGENT_SOURCE_DIR[1]))),
        systemInclude_(fs_->getRoot().openSubdir(kj::Path::parse("usr/include"))) {
    const kj::ReadableDirectory* importPath[] = {sourceRoot_.get(), systemInclude_.get()};
    for (const auto& file : wireSchemaFiles()) {
      files_.push_back(parser_.parseFromDirectory(*sourceRoot_, kj::Path::parse(file), importPath));
    }
  }

  const std::vector<capnp::ParsedSchema>& files() const { return files_; }
  const capnp::SchemaParser& parser() const { return parser_; }

  // Every struct declared in the files: nested declarations at any depth, groups, and the
  // param and result structs of every interface method.
  std::map<uint64_t, capnp::StructSchema> declaredStructs() const {
    std::map<uint64_t, capnp::StructSchema> out;
    std::map<uint64_t, bool> visited;
    for (const auto& file : files_) collectDeclared(file, out, visited);
    return out;
  }

  // Every struct, enum and interface declared in the files, nested ones included.
  std::vector<capnp::ParsedSchema> declaredTypes() const {
    std::vector<capnp::ParsedSchema> out;
    for (const auto& file : files_) collectTypes(file, out);
    return out;
  }

 private:
  static void collectDeclared(capnp::ParsedSchema node,
                              std::map<uint64_t, capnp::StructSchema>& out,
                              std::map<uint64_t, bool>& visited) {
    collectStructs(node, out, visited);
    for (auto nested : node.getAllNested()) collectDeclared(nested, out, visited);
  }

  static void collectTypes(capnp::ParsedSchema node, std::vector<capnp::ParsedSchema>& out) {
    for (auto nested : node.getAllNested()) {
      auto proto = nested.getProto();
      if (proto.isStruct() || proto.isEnum() || proto.isInterface()) out.push_back(nested);
      collectTypes(nested, out);
    }
  }

  kj::Own<kj::Filesystem> fs_;
  kj::Own<const kj::ReadableDirectory> sourceRoot_;
  kj::Own<const kj::ReadableDirectory> systemInclude_;
  capnp::SchemaParser parser_;
  std::vector<capnp::ParsedSchema> files_;
};

}  // namespace regent::wire::testing

// The one conversion between the typed ids of common/ids.h and their wire form (wire::Id128),
// and the printable names of the schema's enums. common/ cannot see the schema, so this lives
// with it; every layer that reads or writes wire messages uses these instead of its own copy.
#pragma once

#include <capnp/schema.h>

#include <cstdint>
#include <optional>
#include <string>

#include "common/ids.h"
#include "rpc/schema/common.capnp.h"

namespace regent::wire {

// The typed id a wire id carries, e.g. `idFromWire<JobId>(graph.getJobId())`. A null pointer
// field reads as the all-zero id.
template <typename Id>
Id idFromWire(Id128::Reader id) {
  return Id(id.getHi(), id.getLo());
}

// Like idFromWire, but nullopt when the field is absent (`has` false) or all zero: ids are never
// issued as zero, so either means "no id".
template <typename Id>
std::optional<Id> idFromWireIfSet(bool has, Id128::Reader id) {
  if (!has) return std::nullopt;
  Id typed = idFromWire<Id>(id);
  if (typed.isZero()) return std::nullopt;
  return typed;
}

// Writes `id` into a wire id, e.g. `setWireId(graph.initJobId(), id)`.
template <typename Tag>
void setWireId(Id128::Builder out, const regent::Id128<Tag>& id) {
  out.setHi(id.hi());
  out.setLo(id.lo());
}

// The schema's name of an enumerant: "running" for wire::JobState::RUNNING. A value this build
// does not know (written by a newer peer) reads as "unknown(<number>)".
template <typename Enum>
std::string enumName(Enum value) {
  const auto enumerants = capnp::Schema::from<Enum>().getEnumerants();
  const auto index = static_cast<uint16_t>(value);
  if (index >= enumerants.size()) return "unknown(" + std::to_string(index) + ")";
  return enumerants[index].getProto().getName().cStr();
}

// enumName() in capitals, as people read states in tables and logs: "RUNNING".
template <typename Enum>
std::string enumNameUpper(Enum value) {
  std::string name = enumName(value);
  for (char& c : name) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return name;
}

}  // namespace regent::wire

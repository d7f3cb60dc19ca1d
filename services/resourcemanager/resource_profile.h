// What a slot offers and what a job needs, in the units of wire::ResourceProfile: the
// vocabulary the SlotManager matches with and the JobMasters declare their needs in.
#pragma once

#include <cstdint>
#include <string>

namespace regent::resourcemanager {

// What a slot offers or a subtask needs (wire::ResourceProfile).
struct Profile {
  uint32_t cpuMillis = 0;
  uint64_t memoryBytes = 0;

  // Every component of this (offered) profile is at least `required`'s.
  bool fits(const Profile& required) const {
    return cpuMillis >= required.cpuMillis && memoryBytes >= required.memoryBytes;
  }
  auto operator<=>(const Profile&) const = default;
};

// "cpu=1.000 memory=1GiB", for messages.
std::string describe(const Profile& profile);

// `count` slots that each fit `profile` (wire::ResourceRequirement).
struct Requirement {
  Profile profile;
  uint32_t count = 0;
};

}  // namespace regent::resourcemanager

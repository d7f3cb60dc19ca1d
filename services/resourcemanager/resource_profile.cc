// A resource profile shown in messages (resource_profile.h).
#include "services/resourcemanager/resource_profile.h"

#include <cstdio>

namespace regent::resourcemanager {

std::string describe(const Profile& profile) {
  char cpu[32];
  std::snprintf(cpu, sizeof cpu, "%u.%03u", profile.cpuMillis / 1000, profile.cpuMillis % 1000);
  constexpr uint64_t kKiB = 1024, kMiB = kKiB * 1024, kGiB = kMiB * 1024;
  const uint64_t bytes = profile.memoryBytes;
  std::string memory;
  if (bytes != 0 && bytes % kGiB == 0) {
    memory = std::to_string(bytes / kGiB) + "GiB";
  } else if (bytes != 0 && bytes % kMiB == 0) {
    memory = std::to_string(bytes / kMiB) + "MiB";
  } else if (bytes != 0 && bytes % kKiB == 0) {
    memory = std::to_string(bytes / kKiB) + "KiB";
  } else {
    memory = std::to_string(bytes) + "B";
  }
  return std::string("cpu=") + cpu + " memory=" + memory;
}

}  // namespace regent::resourcemanager

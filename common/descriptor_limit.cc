// The open-file limit and the connection caps fitted into it (see descriptor_limit.h).
#include "common/descriptor_limit.h"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace regent {
namespace {

// The kernel's ceiling for RLIMIT_NOFILE (fs.nr_open; 1048576 when it cannot be read).
uint64_t kernelDescriptorCeiling() {
  std::ifstream file("/proc/sys/fs/nr_open");
  uint64_t value = 0;
  if (file >> value && value > 0) return value;
  return 1048576;
}

}  // namespace

DescriptorLimit raiseDescriptorLimit() {
  DescriptorLimit out;
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    out.problem = std::string("getrlimit: ") + std::strerror(errno);
    return out;
  }
  const uint64_t ceiling = kernelDescriptorCeiling();
  auto finite = [ceiling](rlim_t value) {
    return value == RLIM_INFINITY ? ceiling : static_cast<uint64_t>(value);
  };
  out.softBefore = finite(limit.rlim_cur);
  out.hard = finite(limit.rlim_max);
  out.soft = out.softBefore;
  if (out.soft >= out.hard) return out;
  struct rlimit raised = limit;
  raised.rlim_cur = static_cast<rlim_t>(out.hard);
  if (::setrlimit(RLIMIT_NOFILE, &raised) != 0) {
    out.problem = std::string("setrlimit: ") + std::strerror(errno);
    return out;
  }
  out.soft = out.hard;
  return out;
}

uint64_t descriptorReserve(uint64_t limit) { return std::clamp<uint64_t>(limit / 4, 32, 256); }

bool fitConnectionCaps(uint64_t limit, std::vector<ConnectionCap>& caps) {
  const uint64_t reserve = descriptorReserve(limit);
  const uint64_t available = limit > reserve ? limit - reserve : 0;
  uint64_t wanted = 0;
  for (const ConnectionCap& cap : caps) wanted += cap.configured * cap.weight;
  bool lowered = false;
  for (ConnectionCap& cap : caps) {
    cap.fitted = cap.configured;
    if (wanted <= available) continue;
    // configured * available / wanted, in descriptors, then back to connections.
    const long double share = static_cast<long double>(cap.configured) * available / wanted;
    cap.fitted = std::max<uint64_t>(1, static_cast<uint64_t>(share));
    cap.fitted = std::min(cap.fitted, cap.configured);
    lowered = lowered || cap.fitted < cap.configured;
  }
  return lowered;
}

std::string describeDescriptorBudget(const DescriptorLimit& limit,
                                     const std::vector<ConnectionCap>& caps) {
  std::string out = "open-file limit " + std::to_string(limit.soft);
  if (limit.soft != limit.softBefore) {
    out += " (raised from " + std::to_string(limit.softBefore) + ", hard " +
           std::to_string(limit.hard) + ")";
  } else if (!limit.problem.empty()) {
    out +=
        " (not raised to the hard limit " + std::to_string(limit.hard) + ": " + limit.problem + ")";
  } else {
    out += " (the hard limit)";
  }
  const char* separator = "; ";
  for (const ConnectionCap& cap : caps) {
    out += separator + cap.option + " " + std::to_string(cap.configured);
    if (cap.fitted < cap.configured) out += " lowered to " + std::to_string(cap.fitted) + " to fit";
    separator = ", ";
  }
  out +=
      "; " + std::to_string(descriptorReserve(limit.soft)) + " kept for ZooKeeper, files and tasks";
  return out;
}

}  // namespace regent

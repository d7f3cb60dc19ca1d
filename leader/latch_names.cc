// Latch node names: the sequence ZooKeeper appended decides the order.
#include "leader/latch_names.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <utility>

namespace regent::leader {
namespace {

// ZooKeeper appends a 10-digit counter; a name without one sorts after every other.
uint64_t sequenceOf(const std::string& name) {
  size_t dash = name.rfind('-');
  uint64_t sequence = UINT64_MAX;
  if (dash == std::string::npos) return sequence;
  const char* begin = name.data() + dash + 1;
  const char* end = name.data() + name.size();
  auto [ptr, ec] = std::from_chars(begin, end, sequence);
  if (ec != std::errc() || ptr != end) return UINT64_MAX;
  return sequence;
}

}  // namespace

std::string latchNodeName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::vector<std::string> sortedLatchNodes(const std::vector<std::string>& children) {
  std::vector<std::pair<uint64_t, std::string>> keyed;
  for (const std::string& child : children) {
    if (child.rfind("m-", 0) == 0) keyed.emplace_back(sequenceOf(child), child);
  }
  std::sort(keyed.begin(), keyed.end());
  std::vector<std::string> names;
  names.reserve(keyed.size());
  for (auto& entry : keyed) names.push_back(std::move(entry.second));
  return names;
}

}  // namespace regent::leader

// Names of latch nodes ("m-0000000007"): the order the election and the retrieval agree on.
#pragma once

#include <string>
#include <vector>

namespace regent::leader {

// The node name of a created path ("latch/m-0000000007" -> "m-0000000007").
std::string latchNodeName(const std::string& path);

// The latch nodes among `children` (names starting with "m-"), lowest sequence first. Other
// children are left out.
std::vector<std::string> sortedLatchNodes(const std::vector<std::string>& children);

}  // namespace regent::leader

// Naming methods and building the timeout exception of call deadlines (see call_deadline.h).
#include "rpc/call_deadline.h"

#include <kj/string.h>

#include "common/units.h"

namespace regent::rpc {

std::string methodNameOf(capnp::StructSchema params) {
  // The display name is "<file>:<Interface>.<method>$Params" for implicit parameter structs.
  const kj::StringPtr display = params.getProto().getDisplayName();
  std::string name(display.cStr());
  const size_t colon = name.find(':');
  if (colon != std::string::npos) name.erase(0, colon + 1);
  const size_t dollar = name.rfind('$');
  if (dollar != std::string::npos) name.erase(dollar);
  return name;
}

kj::Exception callTimedOut(const std::string& method, Duration timeout) {
  return kj::Exception(
      kj::Exception::Type::OVERLOADED, __FILE__, __LINE__,
      kj::str("call ", method.c_str(), " timed out after ", formatDuration(timeout).c_str()));
}

}  // namespace regent::rpc

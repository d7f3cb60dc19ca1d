#include "common/errno_text.h"

#include <cstring>

namespace regent {

std::string errnoText(int error) {
  return std::string(std::strerror(error)) + " (errno " + std::to_string(error) + ")";
}

}  // namespace regent

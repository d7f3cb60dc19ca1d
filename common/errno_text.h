// An errno value as people read it in an error message: "No such file or directory (errno 2)".
#pragma once

#include <string>

namespace regent {

// strerror(error) followed by the number, so that a message names the error even where the
// text differs between C libraries.
std::string errnoText(int error);

}  // namespace regent

// TaskFailureLogger (see task_errors.h).
#include "common/task_errors.h"

#include <spdlog/spdlog.h>

namespace regent {

void TaskFailureLogger::taskFailed(kj::Exception&& exception) {
  spdlog::log(level_, "{}", describe(exception));
}

std::string TaskFailureLogger::describe(const kj::Exception& exception) const {
  return component_ + " task failed: " + exception.getDescription().cStr();
}

}  // namespace regent

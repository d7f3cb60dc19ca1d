// TaskSetErrorLogger (see task_set_error_logger.h).
#include "common/task_set_error_logger.h"

#include <spdlog/spdlog.h>

namespace regent {

void TaskSetErrorLogger::taskFailed(kj::Exception&& exception) {
  spdlog::log(level_, "{}", describe(exception));
}

std::string TaskSetErrorLogger::describe(const kj::Exception& exception) const {
  return component_ + " task failed: " + exception.getDescription().cStr();
}

}  // namespace regent
